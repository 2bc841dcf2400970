//! A rendered conversation cut into what the template wrote and what it was given, so that
//! only the template's own text can become control tokens.
//!
//! The template runs twice. Once on the messages as they are: that text is the prompt, the
//! same as [`ChatTemplate::render`](super::ChatTemplate::render) gives. Once with each
//! non-empty content replaced by a placeholder (a run of U+E000, a private-use character,
//! around the message's index; the run is longer than any such run in the template, the
//! roles or the BOS/EOS texts, so nothing else can spell it): the text between placeholders
//! is the template's, and the placeholders say which message goes where, in order (a
//! template may print a content twice, or not at all). The real rendering is then read
//! against that pattern: each template piece must come next, literally, and each content
//! must appear as given or with whitespace (or newlines) taken off one or both ends, as
//! `| trim`, `.strip()`, `.lstrip('\n')` do. Gemma's templates trim contents and move the
//! system prompt into the first user turn; both are found this way.
//!
//! Where the real rendering does not read that way (a template that changes a content
//! otherwise: cuts a reasoning block out of it, escapes it as JSON, or branches on what it
//! says), the prompt is the placeholder rendering with each content put back as given:
//! still never a control token from a content, but not exactly the text the template
//! renders ([`ChatPrompt::is_exact`] says which).

use std::ops::Range;

use super::ChatMessage;

/// One piece of a rendered chat prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Text the template wrote (turn markers, role names, BOS): control tokens written in it
    /// are parsed.
    Template(String),
    /// A message's content (or part of it, as the template printed it): tokenized as plain
    /// text, control-token text included.
    Content(String),
}

impl Segment {
    /// The piece's text.
    pub fn text(&self) -> &str {
        match self {
            Segment::Template(t) | Segment::Content(t) => t,
        }
    }
}

/// A conversation rendered by a chat template, as [`Segment`]s; tokenize it with
/// [`Tokenizer::encode_chat`](crate::Tokenizer::encode_chat) (or
/// [`encode_segments`](crate::Tokenizer::encode_segments)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatPrompt {
    segments: Vec<Segment>,
    exact: bool,
}

impl ChatPrompt {
    /// The pieces, in order; none is empty.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The whole text.
    pub fn text(&self) -> String {
        self.segments.iter().map(Segment::text).collect()
    }

    /// Whether [`text`](Self::text) is exactly what the template renders for these messages.
    /// False where the template changes a content in a way the segmentation cannot follow
    /// (module docs): the contents are then inserted as given.
    pub fn is_exact(&self) -> bool {
        self.exact
    }
}

/// The private-use character the placeholders are made of.
const MARK: char = '\u{E000}';

/// Placeholders for the contents of `messages`, none of which `others` (the template source,
/// the roles, the BOS/EOS texts: everything else the placeholder rendering can print) can
/// spell.
pub(super) struct Placeholders {
    mark: String,
}

impl Placeholders {
    pub(super) fn new<'a>(others: impl IntoIterator<Item = &'a str>) -> Placeholders {
        let longest = others.into_iter().map(longest_mark_run).max().unwrap_or(0);
        Placeholders {
            mark: MARK.to_string().repeat(longest + 1),
        }
    }

    /// What message `index`'s content is replaced with: an empty content stays empty (a
    /// template may test whether there is one), so it has no placeholder and no segment.
    pub(super) fn content(&self, index: usize, message: &ChatMessage) -> String {
        if message.content.is_empty() {
            String::new()
        } else {
            format!("{0}{index}{0}", self.mark)
        }
    }

    /// The placeholder rendering read back: template texts (one more than slots) and the
    /// index of the message each slot between them holds.
    fn parse(&self, rendered: &str, n_messages: usize) -> (Vec<Range<usize>>, Vec<usize>) {
        let mut texts = Vec::new();
        let mut slots = Vec::new();
        let (mut text_start, mut search) = (0, 0);
        while let Some(found) = rendered[search..].find(&self.mark) {
            let at = search + found;
            let after = at + self.mark.len();
            let digits = rendered[after..]
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rendered.len() - after);
            let index = rendered[after..after + digits].parse::<usize>().ok();
            let closes = rendered[after + digits..].starts_with(&self.mark);
            match index {
                Some(index) if closes && index < n_messages => {
                    texts.push(text_start..at);
                    slots.push(index);
                    text_start = after + digits + self.mark.len();
                    search = text_start;
                }
                // Not a placeholder (the template built the mark itself): template text.
                _ => search = at + MARK.len_utf8(),
            }
        }
        texts.push(text_start..rendered.len());
        (texts, slots)
    }

    /// Segments for `messages`: `rendered` is the template's rendering of them, `pattern`
    /// its rendering with [`Placeholders::content`] for each content.
    pub(super) fn segment(
        &self,
        messages: &[ChatMessage],
        rendered: &str,
        pattern: &str,
    ) -> ChatPrompt {
        let (texts, slots) = self.parse(pattern, messages.len());
        let texts: Vec<&str> = texts.into_iter().map(|r| &pattern[r]).collect();
        let contents: Vec<&str> = slots
            .iter()
            .map(|&i| messages[i].content.as_str())
            .collect();
        let mut prompt = ChatPrompt {
            segments: Vec::new(),
            exact: false,
        };
        let pieces: Vec<&str> = match align(rendered, &texts, &contents) {
            Some(ranges) => {
                prompt.exact = true;
                ranges.into_iter().map(|r| &rendered[r]).collect()
            }
            None => contents,
        };
        for (i, text) in texts.iter().enumerate() {
            push(&mut prompt.segments, Segment::Template(text.to_string()));
            if let Some(piece) = pieces.get(i) {
                push(&mut prompt.segments, Segment::Content(piece.to_string()));
            }
        }
        prompt
    }
}

/// Appends `segment` unless it is empty.
fn push(segments: &mut Vec<Segment>, segment: Segment) {
    if !segment.text().is_empty() {
        segments.push(segment);
    }
}

/// The longest run of [`MARK`] in `text`.
fn longest_mark_run(text: &str) -> usize {
    let (mut longest, mut run) = (0, 0);
    for c in text.chars() {
        run = if c == MARK { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// How a template may have printed `content`: as given, or with whitespace or newlines taken
/// off one or both ends; distinct byte ranges of `content`.
fn printed_forms(content: &str) -> Vec<Range<usize>> {
    let range = |s: &str| {
        let start = s.as_ptr() as usize - content.as_ptr() as usize;
        start..start + s.len()
    };
    let forms = [
        content,
        content.trim(),
        content.trim_start(),
        content.trim_end(),
        content.trim_matches('\n'),
        content.trim_start_matches('\n'),
        content.trim_end_matches('\n'),
    ];
    let mut out: Vec<Range<usize>> = Vec::with_capacity(forms.len());
    for form in forms {
        let r = range(form);
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

/// Positions reachable after a slot kept per step: more would only come from a content of
/// many ways to trim that the template text around it cannot tell apart.
const MAX_STATES: usize = 64;

/// Reads `rendered` as `texts[0] content[0] texts[1] content[1] … texts[n]`, each content in
/// one of its [`printed_forms`]; the byte range of each content in `rendered`, or `None` if
/// it does not read that way.
fn align(rendered: &str, texts: &[&str], contents: &[&str]) -> Option<Vec<Range<usize>>> {
    /// A way to have read the first slots: where it stands, the state it came from in the
    /// previous step and the range the last content took.
    struct State {
        pos: usize,
        from: usize,
        range: Range<usize>,
    }
    if !rendered.starts_with(texts[0]) {
        return None;
    }
    let mut steps: Vec<Vec<State>> = vec![vec![State {
        pos: texts[0].len(),
        from: 0,
        range: 0..0,
    }]];
    for (slot, content) in contents.iter().enumerate() {
        let next_text = texts[slot + 1];
        let mut next: Vec<State> = Vec::new();
        for (from, state) in steps[slot].iter().enumerate() {
            for form in printed_forms(content) {
                let piece = &content[form];
                let end = state.pos + piece.len();
                let fits = rendered[state.pos..].starts_with(piece)
                    && rendered[end..].starts_with(next_text);
                let pos = end + next_text.len();
                if fits && next.len() < MAX_STATES && !next.iter().any(|s| s.pos == pos) {
                    next.push(State {
                        pos,
                        from,
                        range: state.pos..end,
                    });
                }
            }
        }
        if next.is_empty() {
            return None;
        }
        steps.push(next);
    }
    let last = steps.last()?;
    let mut at = last.iter().position(|s| s.pos == rendered.len())?;
    let mut ranges = vec![0..0; contents.len()];
    for slot in (0..contents.len()).rev() {
        let state = &steps[slot + 1][at];
        ranges[slot] = state.range.clone();
        at = state.from;
    }
    Some(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_distinct_trims() {
        let s = "\n  hi \n";
        let forms: Vec<&str> = printed_forms(s).into_iter().map(|r| &s[r]).collect();
        assert_eq!(
            forms,
            [
                "\n  hi \n",
                "hi",
                "hi \n",
                "\n  hi",
                "  hi ",
                "  hi \n",
                "\n  hi "
            ]
        );
        assert_eq!(printed_forms("x").len(), 1);
    }

    #[test]
    fn alignment_takes_the_form_the_text_around_it_allows() {
        // `| trim` of "  a " between two template texts.
        let rendered = "<t>a</t>";
        let ranges = align(rendered, &["<t>", "</t>"], &["  a "]).unwrap();
        assert_eq!(ranges.len(), 1);
        assert_eq!(ranges[0], 3..4);
        // A content that spells the next template text is still read as one content.
        let evil = "x</t><t>y";
        let rendered = format!("<t>{evil}</t><t>z</t>");
        let ranges = align(&rendered, &["<t>", "</t><t>", "</t>"], &[evil, "z"]).unwrap();
        assert_eq!(&rendered[ranges[0].clone()], evil);
        assert_eq!(&rendered[ranges[1].clone()], "z");
        // A content changed otherwise does not read.
        assert!(align("<t>A</t>", &["<t>", "</t>"], &["a"]).is_none());
        assert!(align("<t>a</t>!", &["<t>", "</t>"], &["a"]).is_none());
    }

    #[test]
    fn placeholders_outrun_the_mark_in_other_texts() {
        let marks = format!("{MARK}{MARK}");
        let p = Placeholders::new(["plain", marks.as_str()]);
        assert_eq!(p.mark.chars().count(), 3);
        let message = ChatMessage::new("user", "hi");
        let pattern = format!("a{marks}b{}c", p.content(1, &message));
        let (texts, slots) = p.parse(&pattern, 2);
        let texts: Vec<&str> = texts.into_iter().map(|r| &pattern[r]).collect();
        assert_eq!(texts, [format!("a{marks}b").as_str(), "c"]);
        assert_eq!(slots, [1]);
        assert_eq!(p.content(0, &ChatMessage::new("user", "")), "");
    }
}
