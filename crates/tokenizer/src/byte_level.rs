//! GPT-2's byte-to-character map: byte-level BPE vocabularies spell every byte as a printable
//! character, so a token is a string even when it holds part of a UTF-8 sequence.
//!
//! The printable bytes `!`..`~`, `¡`..`¬` and `®`..`ÿ` map to themselves; the other 68 bytes
//! map, in byte order, to U+0100, U+0101, ... (space becomes `Ġ`, newline `Ċ`).

use std::sync::OnceLock;

struct Maps {
    to_char: [char; 256],
    /// Indexed by codepoint; only codepoints below 0x144 are ever the image of a byte.
    to_byte: [Option<u8>; 0x144],
}

fn maps() -> &'static Maps {
    static MAPS: OnceLock<Maps> = OnceLock::new();
    MAPS.get_or_init(|| {
        let printable =
            |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
        let mut to_char = ['\0'; 256];
        let mut to_byte = [None; 0x144];
        let mut next = 0x100u32;
        for b in 0..=255u8 {
            let cp = if printable(b) {
                u32::from(b)
            } else {
                next += 1;
                next - 1
            };
            // Every value is below 0x144, a valid scalar.
            let c = char::from_u32(cp).unwrap_or('\0');
            to_char[b as usize] = c;
            to_byte[cp as usize] = Some(b);
        }
        Maps { to_char, to_byte }
    })
}

/// The character that stands for `byte`.
pub fn byte_to_char(byte: u8) -> char {
    maps().to_char[byte as usize]
}

/// The byte `c` stands for, if it is one of the 256 images.
pub fn char_to_byte(c: char) -> Option<u8> {
    maps().to_byte.get(c as usize).copied().flatten()
}

/// `text`'s UTF-8 bytes, each spelled as its character.
pub fn encode(text: &str, out: &mut String) {
    out.clear();
    out.extend(text.bytes().map(byte_to_char));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_images_and_round_trip() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(byte_to_char(0xAD), '\u{143}'); // the 68th and last non-printable byte
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
        }
        assert_eq!(char_to_byte('日'), None);
    }
}
