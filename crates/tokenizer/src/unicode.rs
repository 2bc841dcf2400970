//! Per-codepoint Unicode classes the pre-tokenizers ask about: letter, number, whitespace, ...
//!
//! llama.cpp generates its table (`unicode-data.cpp`) from Python's `regex` module: `\p{L}`,
//! `\p{N}`, `\p{P}`, `\p{S}`, `\p{M}` and `\s` (the Unicode `White_Space` property). We take
//! the same classes from `regex-syntax`, the parser behind the `regex` crate, so the tables
//! are the ecosystem's and there is no hand-copied Unicode data to go stale. The two can
//! differ only on codepoints assigned between the Unicode versions each was built from.
//!
//! The table is one byte per codepoint (1.1 MB), built on first use: lookups are an index,
//! which matters when a pre-tokenizer walks a megabyte of text.

use std::sync::OnceLock;

use regex_syntax::hir::{Class, HirKind};

pub const LETTER: u8 = 1 << 0;
pub const NUMBER: u8 = 1 << 1;
pub const WHITESPACE: u8 = 1 << 2;
pub const PUNCTUATION: u8 = 1 << 3;
pub const SYMBOL: u8 = 1 << 4;
pub const MARK: u8 = 1 << 5;

const N_CODEPOINTS: usize = 0x11_0000;

/// The class bits of `c`.
#[inline]
pub fn flags(c: char) -> u8 {
    table()[c as usize]
}

#[inline]
pub fn is_number(c: char) -> bool {
    flags(c) & NUMBER != 0
}

fn table() -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    TABLE.get_or_init(build_table)
}

fn build_table() -> Vec<u8> {
    let mut table = vec![0u8; N_CODEPOINTS];
    let classes = [
        (r"\p{L}", LETTER),
        (r"\p{N}", NUMBER),
        (r"\s", WHITESPACE),
        (r"\p{P}", PUNCTUATION),
        (r"\p{S}", SYMBOL),
        (r"\p{M}", MARK),
    ];
    for (pattern, bit) in classes {
        for (start, end) in class_ranges(pattern) {
            for slot in &mut table[start as usize..=end as usize] {
                *slot |= bit;
            }
        }
    }
    table
}

/// The codepoint ranges of a one-class pattern, as `regex-syntax` knows them.
fn class_ranges(pattern: &str) -> Vec<(u32, u32)> {
    // The patterns are constants above; a failure here is a bug in this file, not bad input.
    let hir = regex_syntax::parse(pattern).expect("constant Unicode class pattern parses");
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => class
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
        other => unreachable!("{pattern} is not a Unicode class: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_letter(c: char) -> bool {
        flags(c) & LETTER != 0
    }

    fn is_whitespace(c: char) -> bool {
        flags(c) & WHITESPACE != 0
    }

    #[test]
    fn classes_of_familiar_characters() {
        assert!(is_letter('a') && is_letter('é') && is_letter('日') && is_letter('ß'));
        assert!(is_number('7') && is_number('²') && is_number('٣'));
        for c in [
            ' ', '\t', '\n', '\r', '\u{0B}', '\u{0C}', '\u{85}', '\u{A0}', '\u{3000}',
        ] {
            assert!(is_whitespace(c), "{c:?}");
        }
        // Python's str.isspace() says yes to these; `regex`'s \s (and llama.cpp) says no.
        assert!(!is_whitespace('\u{1C}'));
        assert!(flags('!') & PUNCTUATION != 0 && flags('$') & SYMBOL != 0);
        assert!(flags('\u{301}') & MARK != 0);
        assert_eq!(flags('\u{0}'), 0);
        assert_eq!(flags('🦀') & (LETTER | NUMBER | WHITESPACE), 0);
    }
}
