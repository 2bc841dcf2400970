//! Ids back to bytes: llama.cpp's `token_to_piece` and `detokenize`.
//!
//! A piece is bytes, not text: a byte token (`<0x9F>`) or a byte-level BPE token can hold
//! part of a UTF-8 sequence. Per token type:
//! * CONTROL and UNKNOWN: their text when `special` is asked for, else nothing;
//! * USER_DEFINED: their text as it is;
//! * NORMAL: SPM turns U+2581 back into spaces; BPE maps each character back to its byte;
//! * BYTE: the byte;
//! * anything else (UNUSED, UNDEFINED): nothing.

use crate::byte_level;
use crate::config::{Config, TokenizerKind};
use crate::vocab::{TokenAttr, Vocab};

const SPACE_MARK: char = '\u{2581}';

/// Append the piece of `id` (which must be in the vocabulary) to `out`. With `lstrip`, one
/// leading space is dropped.
pub fn append_piece(
    vocab: &Vocab,
    kind: TokenizerKind,
    id: u32,
    special: bool,
    lstrip: bool,
    out: &mut Vec<u8>,
) {
    let attr = vocab.attr(id);
    let text = vocab.text(id);
    let start = out.len();
    if attr.intersects(TokenAttr::UNKNOWN | TokenAttr::CONTROL) {
        if special {
            out.extend_from_slice(text.as_bytes());
        }
    } else if attr.intersects(TokenAttr::USER_DEFINED) {
        out.extend_from_slice(text.as_bytes());
    } else if attr.intersects(TokenAttr::NORMAL) {
        match kind {
            TokenizerKind::Spm => {
                for c in text.chars() {
                    let c = if c == SPACE_MARK { ' ' } else { c };
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
            }
            TokenizerKind::Bpe => {
                for c in text.chars() {
                    match byte_level::char_to_byte(c) {
                        Some(b) => out.push(b),
                        // Not a byte image: llama.cpp writes `[UNK_BYTE_0x..]`; we keep the char.
                        None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                    }
                }
            }
        }
    } else if attr.intersects(TokenAttr::BYTE) {
        out.extend(parse_byte_token(text));
    }
    if lstrip && out.get(start) == Some(&b' ') {
        out.remove(start);
    }
}

/// `<0xAB>` -> 0xAB.
pub fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// Concatenate the pieces of `ids` (all in the vocabulary) as llama.cpp's `detokenize` with
/// `remove_special = false`: the first piece loses a leading space when the tokenizer adds a
/// space prefix (unless the first id is BOS, whose empty piece takes the strip), then the
/// `clean_spaces` passes run.
pub fn detokenize(vocab: &Vocab, config: &Config, ids: &[u32], special: bool, out: &mut Vec<u8>) {
    let start = out.len();
    for (i, &id) in ids.iter().enumerate() {
        let lstrip = i == 0 && config.add_space_prefix;
        append_piece(vocab, config.kind, id, special, lstrip, out);
    }
    if config.clean_spaces {
        let cleaned = clean_spaces(&out[start..]);
        out.truncate(start);
        out.extend_from_slice(&cleaned);
    }
}

/// llama.cpp's three clean-up passes: drop the space before `? ! . ,`; turn ` ' ` into `'`;
/// drop the space before `'s`, `'m`, `'re`, `'ve`. Ported index for index, since each pass
/// compacts in place and later reads see earlier writes (the second pass blanks the space it
/// drops, so ` ' ' ` loses only the first pair of spaces).
fn clean_spaces(text: &[u8]) -> Vec<u8> {
    let mut t = text.to_vec();
    // Pass 1.
    let n = t.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        t[total] = x;
        total += 1;
    }
    // Pass 2.
    let n = total;
    total = usize::from(n > 0);
    let mut i = 1;
    while i < n {
        let x = t[i];
        if x == b'\'' && i + 1 < n && t[i - 1] == b' ' && t[i + 1] == b' ' {
            total -= 1;
            i += 1;
            t[i] = 0;
        }
        t[total] = x;
        total += 1;
        i += 1;
    }
    // Pass 3.
    let n = total;
    total = usize::from(n > 0);
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = t[i + 1];
            let drop = match x1 {
                b's' | b'm' => true,
                b't' | b'd' => false,
                _ => i + 2 < n && matches!((x1, t[i + 2]), (b'r', b'e') | (b'v', b'e')),
            };
            if drop {
                total -= 1;
            }
        }
        t[total] = x;
        total += 1;
    }
    t.truncate(total);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_tokens_parse() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(0x0A));
        assert_eq!(parse_byte_token("<0xff>"), Some(0xFF));
        assert_eq!(parse_byte_token("<0x1>"), None);
        assert_eq!(parse_byte_token("0x41"), None);
    }

    #[test]
    fn clean_spaces_passes() {
        let clean = |s: &str| String::from_utf8(clean_spaces(s.as_bytes())).unwrap();
        assert_eq!(clean("Hello , world ! ok ."), "Hello, world! ok.");
        assert_eq!(clean("a ' b"), "a'b");
        assert_eq!(clean("it 's they 're I 'll"), "it's they're I 'll");
        assert_eq!(clean("x ' ' y"), "x'' y");
        assert_eq!(clean(""), "");
    }
}
