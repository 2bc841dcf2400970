//! Incremental decoding for generation: feed ids one at a time, get text as soon as it is
//! complete UTF-8.
//!
//! A character can span tokens (an emoji as four `<0xXX>` byte tokens, or a byte-level BPE
//! token ending mid-sequence), so bytes that may still be the start of a character are held
//! back until the next token completes them. Bytes that can never become valid UTF-8 come
//! out as U+FFFD at once, as `String::from_utf8_lossy` would. Like llama.cpp's streaming
//! output (one `token_to_piece` per token), no clean-up of spaces is applied.

use crate::decode;
use crate::error::Result;
use crate::tokenizer::Tokenizer;

/// Decodes ids one at a time into text, holding back the bytes of a character not yet
/// complete.
#[derive(Debug)]
pub struct StreamDecoder<'a> {
    tokenizer: &'a Tokenizer,
    /// Render CONTROL tokens as their text.
    special: bool,
    /// Bytes of an unfinished character.
    pending: Vec<u8>,
    /// No piece has been emitted yet (for the leading-space strip of SPM).
    first: bool,
}

impl<'a> StreamDecoder<'a> {
    /// A decoder for `tokenizer`'s ids; `special`: render CONTROL tokens as their text
    /// (else they come out as nothing).
    pub fn new(tokenizer: &'a Tokenizer, special: bool) -> StreamDecoder<'a> {
        StreamDecoder {
            tokenizer,
            special,
            pending: Vec::new(),
            first: true,
        }
    }

    /// Add one token; returns the text that is now complete (possibly empty).
    pub fn push(&mut self, id: u32) -> Result<String> {
        self.tokenizer.check_id(id)?;
        let lstrip = self.first && self.tokenizer.config().add_space_prefix;
        self.first = false;
        decode::append_piece(
            self.tokenizer.vocab(),
            self.tokenizer.kind(),
            id,
            self.special,
            lstrip,
            &mut self.pending,
        );
        Ok(self.take_complete())
    }

    /// The end of the stream: whatever is held back, with U+FFFD for an unfinished character.
    pub fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }

    /// Whether bytes are held back waiting for the rest of a character.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    fn take_complete(&mut self) -> String {
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // `valid` is valid UTF-8 by the error's own account.
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        // Cut short by the end: may complete with the next token.
                        None => {
                            rest = after;
                            break;
                        }
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[n..];
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }
}
