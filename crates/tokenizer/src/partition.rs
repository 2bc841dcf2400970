//! Splitting text at special tokens before tokenization (llama.cpp's `tokenizer_st_partition`).
//!
//! The rule, exactly: the special tokens (CONTROL, USER_DEFINED and UNKNOWN ones) are tried
//! longest text first; each one, in turn, cuts every remaining piece of plain text at its
//! leftmost non-overlapping occurrences. So a longer token wins over a shorter one wherever
//! they overlap, even when the shorter one starts earlier. Without `parse_special`, CONTROL
//! and UNKNOWN tokens are skipped (their text is tokenized as plain text) but USER_DEFINED
//! ones still cut, as in Hugging Face tokenizers. With [`Specials::Within`], CONTROL and
//! UNKNOWN tokens cut only where their whole occurrence lies inside one of the given byte
//! ranges (a chat template's own text, not the messages it wraps); the rule is otherwise the
//! same, so where no occurrence falls outside the ranges the result is that of parsing
//! specials everywhere.
//!
//! llama.cpp scans the whole text once per special token, which is 6,000 scans for gemma's
//! vocabulary. We first find which special tokens occur at all, with one Aho-Corasick pass,
//! and scan only for those, and only over the span where they occur. The result is the same.

use std::ops::Range;

use aho_corasick::{AhoCorasick, MatchKind};
use memchr::memmem;

use crate::error::{Result, TokenizerError};
use crate::vocab::{TokenAttr, Vocab};

/// A piece of the input: plain text (a byte range) or one special token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fragment {
    Text(Range<usize>),
    Token(u32),
}

/// Where CONTROL and UNKNOWN tokens are recognised in the text (USER_DEFINED ones always are).
#[derive(Debug, Clone, Copy)]
pub enum Specials<'a> {
    /// Anywhere (`parse_special`).
    Everywhere,
    /// Nowhere: their text is tokenized as plain text.
    Nowhere,
    /// Only occurrences that lie wholly inside one of these byte ranges (sorted, disjoint).
    Within(&'a [Range<usize>]),
}

#[derive(Debug, Clone)]
pub struct SpecialMatcher {
    /// Special tokens in llama.cpp's order: longest text first (ties by id).
    ids: Vec<u32>,
    /// All of `ids`, for `parse_special`.
    all: Option<AhoCorasick>,
    /// Positions in `ids` of the USER_DEFINED tokens, and their automaton.
    user_defined: Vec<usize>,
    user: Option<AhoCorasick>,
    /// Per position in `ids`: a CONTROL or UNKNOWN token, which [`Specials`] restricts.
    restricted: Vec<bool>,
}

/// Where a pattern occurs: first and last start offsets.
#[derive(Debug, Clone, Copy)]
struct Span {
    first: usize,
    last: usize,
}

impl SpecialMatcher {
    pub fn new(vocab: &Vocab) -> Result<SpecialMatcher> {
        let special = TokenAttr::CONTROL | TokenAttr::USER_DEFINED | TokenAttr::UNKNOWN;
        let mut ids: Vec<u32> = (0..vocab.len() as u32)
            .filter(|&id| vocab.attr(id).intersects(special))
            .collect();
        ids.sort_by_key(|&id| std::cmp::Reverse(vocab.text(id).len()));
        let user_defined: Vec<usize> = (0..ids.len())
            .filter(|&i| {
                !vocab
                    .attr(ids[i])
                    .intersects(TokenAttr::CONTROL | TokenAttr::UNKNOWN)
            })
            .collect();
        let build = |patterns: Vec<&str>| -> Result<Option<AhoCorasick>> {
            if patterns.is_empty() {
                return Ok(None);
            }
            AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .build(patterns)
                .map(Some)
                .map_err(|e| TokenizerError::InvalidVocab(format!("special tokens: {e}")))
        };
        let all = build(ids.iter().map(|&id| vocab.text(id)).collect())?;
        let user = build(user_defined.iter().map(|&i| vocab.text(ids[i])).collect())?;
        let mut restricted = vec![true; ids.len()];
        for &i in &user_defined {
            restricted[i] = false;
        }
        Ok(SpecialMatcher {
            ids,
            all,
            user_defined,
            user,
            restricted,
        })
    }

    /// Cut `text` at special tokens; plain-text fragments are never empty.
    pub fn partition(&self, text: &str, vocab: &Vocab, specials: Specials<'_>) -> Vec<Fragment> {
        let mut fragments = Vec::new();
        if text.is_empty() {
            return fragments;
        }
        fragments.push(Fragment::Text(0..text.len()));
        let (automaton, index): (_, &dyn Fn(usize) -> usize) = match specials {
            Specials::Everywhere | Specials::Within(_) => (&self.all, &|p| p),
            Specials::Nowhere => (&self.user, &|p| self.user_defined[p]),
        };
        let Some(automaton) = automaton else {
            return fragments;
        };
        // Which tokens occur, and where. Overlapping matches: a token hidden inside a longer
        // one's match still counts, since the longer one may lose to an even longer one.
        let mut spans: Vec<Option<Span>> = vec![None; self.ids.len()];
        for m in automaton.find_overlapping_iter(text) {
            let slot = &mut spans[index(m.pattern().as_usize())];
            match slot {
                Some(span) => span.last = m.start(),
                None => {
                    *slot = Some(Span {
                        first: m.start(),
                        last: m.start(),
                    })
                }
            }
        }
        for (i, span) in spans.iter().enumerate() {
            if let Some(span) = span {
                let id = self.ids[i];
                let allowed = match specials {
                    Specials::Within(ranges) if self.restricted[i] => Some(ranges),
                    _ => None,
                };
                fragments = cut(&fragments, text, vocab.text(id), id, *span, allowed);
            }
        }
        fragments
    }
}

/// Whether `at..end` lies wholly inside one of `ranges` (sorted, disjoint).
fn inside(ranges: &[Range<usize>], at: usize, end: usize) -> bool {
    let first_reaching = ranges.partition_point(|r| r.end < end);
    ranges
        .get(first_reaching)
        .is_some_and(|r| r.start <= at && end <= r.end)
}

/// Cut the text fragments that overlap `span` at each leftmost non-overlapping `needle`;
/// with `allowed`, only at occurrences inside those ranges (an occurrence outside them is
/// plain text, and the search goes on from its next byte).
fn cut(
    fragments: &[Fragment],
    text: &str,
    needle: &str,
    id: u32,
    span: Span,
    allowed: Option<&[Range<usize>]>,
) -> Vec<Fragment> {
    let finder = memmem::Finder::new(needle.as_bytes());
    let span_end = span.last + needle.len();
    let mut out = Vec::with_capacity(fragments.len() + 2);
    for fragment in fragments {
        let range = match fragment {
            Fragment::Text(r) if r.start < span_end && span.first < r.end => r.clone(),
            other => {
                out.push(other.clone());
                continue;
            }
        };
        let mut start = range.start;
        let mut search = range.start;
        while let Some(at) = finder.find(&text.as_bytes()[search..range.end]) {
            let at = search + at;
            if allowed.is_some_and(|ranges| !inside(ranges, at, at + needle.len())) {
                search = at + 1;
                continue;
            }
            if at > start {
                out.push(Fragment::Text(start..at));
            }
            out.push(Fragment::Token(id));
            start = at + needle.len();
            search = start;
        }
        if start < range.end {
            out.push(Fragment::Text(start..range.end));
        }
    }
    out
}
