//! BPE pre-tokenizers: the regex that splits text into words before merges, per
//! `tokenizer.ggml.pre`, reproducing llama.cpp's `unicode_regex_split` piece for piece.
//!
//! llama.cpp applies a list of regexes in turn, each splitting the pieces the previous one
//! left (a regex's matches and the gaps between them both become pieces). Its GPT-2 and
//! llama-3 patterns run as hand-written matchers (`unicode.cpp`); the others run through
//! `std::regex` over a text where each non-ASCII codepoint is "collapsed" to one byte naming
//! its class. We hand-write all of them over the same classes instead of pulling in a
//! backtracking regex engine (the `regex` crate has no look-ahead, which `\s+(?!\S)` needs):
//!
//! * `gpt2`: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//! * `llama3`: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//!   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! * `qwen2`: the llama-3 pattern with `\p{N}` for `\p{N}{1,3}`; llama.cpp runs it through
//!   `std::regex`, whose leftmost-first backtracking gives the same pieces as the llama-3
//!   matcher with one digit per number (checked by hand branch by branch, and by the oracle).
//! * `smollm`/`starcoder`: `\p{N}`, then the GPT-2 pattern.
//! * `default`: `[\p{P}\$\+<=>\^~\|]+`, the GPT-2 pattern, `\p{N}+`, `[0-9][0-9][0-9]`.
//!
//! Positions count codepoints, as llama.cpp's offsets do.

use std::ops::Range;

use crate::unicode::{self, LETTER, NUMBER, PUNCTUATION, WHITESPACE};

/// The pre-tokenizer families we implement; each covers several `tokenizer.ggml.pre` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    /// `default`: punctuation runs, the GPT-2 pattern, digit runs, then digits in threes.
    Default,
    /// `gpt2` and the files that reuse its regex.
    Gpt2,
    /// `llama3` (`llama-bpe`) and its relatives: numbers in groups of up to three digits.
    Llama3,
    /// `qwen2` and its relatives: one digit per number.
    Qwen2,
    /// `smollm`/`starcoder`: each digit apart, then the GPT-2 pattern.
    StarCoder,
}

/// A pre-tokenizer and the flags llama.cpp sets along with it.
#[derive(Debug, Clone, Copy)]
pub struct PreTokenizerInfo {
    pub kind: PreTokenizer,
    pub add_bos: bool,
    pub clean_spaces: bool,
    pub ignore_merges: bool,
}

impl PreTokenizer {
    /// llama.cpp's name table (`llama_vocab::impl::load`), for the families we implement.
    pub fn from_name(name: &str) -> Option<PreTokenizerInfo> {
        use PreTokenizer::*;
        let info = |kind, clean_spaces| PreTokenizerInfo {
            kind,
            add_bos: false,
            clean_spaces,
            ignore_merges: false,
        };
        Some(match name {
            "" | "default" => info(Default, true),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => PreTokenizerInfo {
                add_bos: true,
                ignore_merges: true,
                ..info(Llama3, true)
            },
            "dbrx" | "smaug-bpe" => info(Llama3, true),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" => info(Qwen2, false),
            "stablelm2" | "megrez" => info(Qwen2, true),
            "smollm" | "command-r" => info(StarCoder, false),
            "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" => info(StarCoder, true),
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "mpt" | "olmo" | "jais"
            | "exaone4" => info(Gpt2, true),
            "trillion" | "granite-docling" => info(Gpt2, false),
            _ => return None,
        })
    }

    fn stages(self) -> &'static [Stage] {
        match self {
            PreTokenizer::Default => &[
                Stage::Runs(is_default_punct),
                Stage::Gpt2,
                Stage::Runs(unicode::is_number),
                Stage::AsciiDigitTriples,
            ],
            PreTokenizer::Gpt2 => &[Stage::Gpt2],
            PreTokenizer::Llama3 => &[Stage::Llama3 { max_digits: 3 }],
            PreTokenizer::Qwen2 => &[Stage::Llama3 { max_digits: 1 }],
            PreTokenizer::StarCoder => &[Stage::Each(unicode::is_number), Stage::Gpt2],
        }
    }

    /// Split `text` into words; the ranges are byte ranges of `text`, in order, covering it.
    pub fn split(self, text: &str) -> Vec<Range<usize>> {
        let cpts: Vec<char> = text.chars().collect();
        let mut pieces = vec![cpts.len()];
        for stage in self.stages() {
            let mut next = Vec::with_capacity(pieces.len());
            let mut start = 0;
            for &len in &pieces {
                stage.split(&cpts, start, start + len, &mut next);
                start += len;
            }
            pieces = next;
        }
        let mut ranges = Vec::with_capacity(pieces.len());
        let mut chars = text.char_indices().map(|(i, _)| i).chain([text.len()]);
        let mut byte_start = chars.next().unwrap_or(0);
        for len in pieces.into_iter().filter(|&len| len > 0) {
            // The lengths sum to the number of chars, so `nth` finds a position.
            let byte_end = chars.nth(len - 1).unwrap_or(text.len());
            ranges.push(byte_start..byte_end);
            byte_start = byte_end;
        }
        ranges
    }
}

/// `[\p{P}\$\+<=>\^~\|]`: punctuation and a few ASCII symbols.
fn is_default_punct(c: char) -> bool {
    unicode::flags(c) & PUNCTUATION != 0
        || matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '~' | '|')
}

/// One regex of a pre-tokenizer's list.
#[derive(Debug)]
enum Stage {
    Gpt2,
    Llama3 {
        max_digits: usize,
    },
    /// `[class]+`
    Runs(fn(char) -> bool),
    /// `[class]`
    Each(fn(char) -> bool),
    /// `[0-9][0-9][0-9]`
    AsciiDigitTriples,
}

impl Stage {
    /// Split the piece `cpts[ini..end]`, pushing the lengths of the new pieces.
    fn split(&self, cpts: &[char], ini: usize, end: usize, out: &mut Vec<usize>) {
        let piece = Piece { cpts, end };
        match *self {
            Stage::Gpt2 => split_gpt2(piece, ini, out),
            Stage::Llama3 { max_digits } => split_llama3(piece, ini, max_digits, out),
            Stage::Runs(class) => split_matches(piece, ini, out, |p, from| {
                let s = (from..p.end).find(|&i| class(p.cpts[i]))?;
                let e = (s..p.end).find(|&i| !class(p.cpts[i])).unwrap_or(p.end);
                Some((s, e))
            }),
            Stage::Each(class) => split_matches(piece, ini, out, |p, from| {
                let s = (from..p.end).find(|&i| class(p.cpts[i]))?;
                Some((s, s + 1))
            }),
            Stage::AsciiDigitTriples => split_matches(piece, ini, out, |p, from| {
                let s = (from..p.end.saturating_sub(2))
                    .find(|&i| p.cpts[i..i + 3].iter().all(char::is_ascii_digit))?;
                Some((s, s + 3))
            }),
        }
    }
}

/// A piece of text being split: positions at or past `end` read as "out of range".
#[derive(Clone, Copy)]
struct Piece<'a> {
    cpts: &'a [char],
    end: usize,
}

impl Piece<'_> {
    fn cpt(&self, pos: usize) -> Option<char> {
        (pos < self.end).then(|| self.cpts[pos])
    }

    /// The class bits at `pos`; `None` out of range, which llama.cpp's matchers treat as
    /// "no class at all", unlike an in-range character of no interesting class (`Some(0)`).
    fn class(&self, pos: usize) -> Option<u8> {
        self.cpt(pos).map(unicode::flags)
    }

    fn has(&self, pos: usize, bits: u8) -> bool {
        self.class(pos).is_some_and(|f| f & bits != 0)
    }

    /// In range and none of letter, number, whitespace: `[^\s\p{L}\p{N}]`.
    fn is_other(&self, pos: usize) -> bool {
        self.class(pos)
            .is_some_and(|f| f & (LETTER | NUMBER | WHITESPACE) == 0)
    }

    /// Length of a contraction (`'s`, `'re`, ...) at `pos`, if one starts there.
    fn contraction(&self, pos: usize, fold_case: bool) -> Option<usize> {
        let fold = |c: char| if fold_case { c.to_ascii_lowercase() } else { c };
        if self.cpt(pos)? != '\'' {
            return None;
        }
        let a = fold(self.cpt(pos + 1)?);
        if matches!(a, 's' | 't' | 'm' | 'd') {
            return Some(2);
        }
        let b = fold(self.cpt(pos + 2)?);
        matches!((a, b), ('r', 'e') | ('v', 'e') | ('l', 'l')).then_some(3)
    }

    /// Whitespace run at `pos`: its length, and the end of its last `\r`/`\n` if any.
    fn whitespace_run(&self, pos: usize) -> (usize, Option<usize>) {
        let mut n = 0;
        let mut last_newline_end = None;
        while self.has(pos + n, WHITESPACE) {
            if matches!(self.cpts[pos + n], '\r' | '\n') {
                last_newline_end = Some(pos + n + 1);
            }
            n += 1;
        }
        (n, last_newline_end)
    }
}

/// Collects piece lengths; every branch of a matcher ends a piece where it stops.
struct Pieces<'a> {
    out: &'a mut Vec<usize>,
    prev_end: usize,
}

impl Pieces<'_> {
    fn end_at(&mut self, end: usize) -> usize {
        if end > self.prev_end {
            self.out.push(end - self.prev_end);
        }
        self.prev_end = end;
        end
    }
}

fn split_gpt2(p: Piece, ini: usize, out: &mut Vec<usize>) {
    let mut pieces = Pieces { out, prev_end: ini };
    let mut pos = ini;
    while pos < p.end {
        if let Some(n) = p.contraction(pos, false) {
            pos = pieces.end_at(pos + n);
            continue;
        }
        // ` ?X+` for X in letters, numbers, others: the optional space leads only when X follows.
        let lead = usize::from(p.cpts[pos] == ' ');
        let first = pos + lead;
        let run: Option<fn(&Piece, usize) -> bool> = if p.has(first, LETTER) {
            Some(|p, i| p.has(i, LETTER))
        } else if p.has(first, NUMBER) {
            Some(|p, i| p.has(i, NUMBER))
        } else if p.is_other(first) {
            Some(|p, i| p.is_other(i))
        } else {
            None
        };
        if let Some(in_run) = run {
            pos = first;
            while in_run(&p, pos) {
                pos += 1;
            }
            pieces.end_at(pos);
            continue;
        }
        pos = end_whitespace(p, pos, p.whitespace_run(pos).0, &mut pieces);
    }
}

fn split_llama3(p: Piece, ini: usize, max_digits: usize, out: &mut Vec<usize>) {
    let mut pieces = Pieces { out, prev_end: ini };
    let mut pos = ini;
    while pos < p.end {
        let c = p.cpts[pos];
        if let Some(n) = p.contraction(pos, true) {
            pos = pieces.end_at(pos + n);
            continue;
        }
        // `[^\r\n\p{L}\p{N}]?\p{L}+`
        if !(c == '\r' || c == '\n' || p.has(pos, NUMBER))
            && (p.has(pos, LETTER) || p.has(pos + 1, LETTER))
        {
            pos += 1;
            while p.has(pos, LETTER) {
                pos += 1;
            }
            pieces.end_at(pos);
            continue;
        }
        // `\p{N}{1,max_digits}`, repeated over a run of numbers.
        if p.has(pos, NUMBER) {
            let mut ini = pos;
            while p.has(pos, NUMBER) {
                pos += 1;
                if pos - ini >= max_digits {
                    pieces.end_at(pos);
                    ini = pos;
                }
            }
            pieces.end_at(pos);
            continue;
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`. As in llama.cpp, a space at the very end of the piece
        // also takes this branch and becomes a piece of its own, which is what `\s+` would give.
        let lead = usize::from(c == ' ');
        if p.is_other(pos + lead) || (lead == 1 && p.class(pos + 1).is_none()) {
            pos += lead;
            while p.is_other(pos) {
                pos += 1;
            }
            while matches!(p.cpt(pos), Some('\r' | '\n')) {
                pos += 1;
            }
            pieces.end_at(pos);
            continue;
        }
        let (n, last_newline_end) = p.whitespace_run(pos);
        // `\s*[\r\n]+`
        if let Some(e) = last_newline_end {
            pos = pieces.end_at(e);
            continue;
        }
        pos = end_whitespace(p, pos, n, &mut pieces);
    }
}

/// `\s+(?!\S)|\s+` for a run of `n` whitespace at `pos`, or one character of anything else.
fn end_whitespace(p: Piece, pos: usize, n: usize, pieces: &mut Pieces) -> usize {
    if n > 1 && p.cpt(pos + n).is_some() {
        // Followed by a non-space: leave the last space to lead the next word.
        pieces.end_at(pos + n - 1)
    } else if n > 0 {
        pieces.end_at(pos + n)
    } else {
        pieces.end_at(pos + 1)
    }
}

/// Regex-style splitting: each match is a piece, and so is each gap between matches.
fn split_matches(
    p: Piece,
    ini: usize,
    out: &mut Vec<usize>,
    find: impl Fn(&Piece, usize) -> Option<(usize, usize)>,
) {
    let mut start = ini;
    while let Some((s, e)) = find(&p, start) {
        if s > start {
            out.push(s - start);
        }
        out.push(e - s);
        start = e;
    }
    if start < p.end {
        out.push(p.end - start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: PreTokenizer, text: &str) -> Vec<&str> {
        pre.split(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn gpt2_pattern() {
        let w = words(PreTokenizer::Gpt2, "Hello  world's 123 !!\n\n x");
        assert_eq!(
            w,
            ["Hello", " ", " world", "'s", " 123", " !!", "\n\n", " x"]
        );
    }

    #[test]
    fn llama3_pattern_groups_three_digits_and_newlines() {
        let w = words(PreTokenizer::Llama3, "I'M 12345\tx  \n\n y.\n");
        assert_eq!(
            w,
            ["I", "'M", " ", "123", "45", "\tx", "  \n\n", " y", ".\n"]
        );
    }

    #[test]
    fn qwen2_pattern_single_digits() {
        let w = words(PreTokenizer::Qwen2, "ab 123 ");
        assert_eq!(w, ["ab", " ", "1", "2", "3", " "]);
    }

    #[test]
    fn default_pattern_chain() {
        let w = words(PreTokenizer::Default, "a+=b 12345");
        assert_eq!(w, ["a", "+=", "b", " ", "123", "45"]);
    }

    #[test]
    fn empty_text_gives_no_words() {
        assert!(PreTokenizer::Qwen2.split("").is_empty());
    }
}
