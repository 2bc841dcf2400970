//! The tokenizer: text -> ids -> text, built from a GGUF file's metadata alone.
//!
//! Encoding follows llama.cpp's `llama_vocab::impl::tokenize`: cut the text at special tokens
//! (`partition.rs`), run each plain-text piece through SPM (`spm.rs`) or through the BPE
//! pre-tokenizer and merges (`pretokenize.rs`, `bpe.rs`), and add BOS/EOS if asked.

use std::ops::Range;
use std::path::Path;

use rullama_gguf::{GgufFile, Metadata};

use crate::bpe::{self, Merges};
use crate::byte_level;
use crate::chat::{ChatPrompt, Segment};
use crate::config::{Config, TokenizerKind};
use crate::decode;
use crate::error::{Result, TokenizerError};
use crate::partition::{Fragment, SpecialMatcher, Specials};
use crate::special::SpecialTokens;
use crate::spm;
use crate::vocab::{TokenAttr, Vocab};

pub const KEY_CHAT_TEMPLATE: &str = "tokenizer.chat_template";

/// What `encode` adds and recognises.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Add BOS/EOS where the model asks for them (`add_bos_token`, `add_eos_token`).
    pub add_special: bool,
    /// Recognise CONTROL tokens (`<start_of_turn>`, `<|im_start|>`) written in the text.
    /// USER_DEFINED tokens are recognised either way.
    pub parse_special: bool,
}

#[derive(Debug, Clone)]
enum Model {
    Spm {
        /// The token for each byte, for characters no token covers.
        byte_tokens: Box<[Option<u32>; 256]>,
    },
    Bpe {
        merges: Merges,
    },
}

/// A model's tokenizer: text to ids and back, and its special tokens. Built from the
/// file's `tokenizer.*` keys alone; cloning copies the vocabulary.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    vocab: Vocab,
    config: Config,
    special: SpecialTokens,
    matcher: SpecialMatcher,
    model: Model,
    architecture: String,
    chat_template: Option<String>,
}

impl Tokenizer {
    /// Open a GGUF file and build its tokenizer.
    pub fn open(path: impl AsRef<Path>) -> Result<Tokenizer> {
        let file = GgufFile::open(path)?;
        Tokenizer::from_gguf(file.metadata())
    }

    /// Build the tokenizer the metadata `md` describes.
    pub fn from_gguf(md: &Metadata) -> Result<Tokenizer> {
        let config = Config::from_metadata(md)?;
        let mut vocab = Vocab::from_metadata(md)?;
        let special = SpecialTokens::from_metadata(md, config.kind, &mut vocab)?;
        if config.add_bos && special.bos.is_none() {
            return Err(TokenizerError::InvalidVocab(
                "add_bos_token is true but there is no BOS token".into(),
            ));
        }
        if config.add_eos && special.eos.is_none() {
            return Err(TokenizerError::InvalidVocab(
                "add_eos_token is true but there is no EOS token".into(),
            ));
        }
        let matcher = SpecialMatcher::new(&vocab)?;
        let model = match config.kind {
            TokenizerKind::Spm => Model::Spm {
                byte_tokens: Box::new(spm_byte_tokens(&vocab, special.unk)),
            },
            TokenizerKind::Bpe => Model::Bpe {
                merges: Merges::from_metadata(md, &vocab)?,
            },
        };
        Ok(Tokenizer {
            vocab,
            config,
            special,
            matcher,
            model,
            architecture: md
                .get_opt::<&str>("general.architecture")?
                .unwrap_or("")
                .into(),
            chat_template: md.get_opt::<&str>(KEY_CHAT_TEMPLATE)?.map(str::to_string),
        })
    }

    /// Tokenize `text`. Never fails: every string has a tokenization.
    pub fn encode(&self, text: &str, opts: EncodeOptions) -> Vec<u32> {
        let specials = if opts.parse_special {
            Specials::Everywhere
        } else {
            Specials::Nowhere
        };
        self.encode_with(text, opts.add_special, specials)
    }

    /// Tokenize a text made of pieces a chat template wrote and pieces it was given
    /// ([`ChatTemplate::render_segments`](crate::ChatTemplate::render_segments)): CONTROL
    /// tokens (`<|im_end|>`, `<start_of_turn>`) are recognised only inside
    /// [`Segment::Template`] pieces, so a message's content never becomes one, whatever it
    /// contains; USER_DEFINED tokens are recognised everywhere, as in [`Tokenizer::encode`]
    /// without `parse_special`. The segments are tokenized as one text (a word may run across
    /// a boundary), so where no content holds a control token's text the ids are those of
    /// `encode` of the whole text with `parse_special`. `add_special` adds BOS/EOS as
    /// [`EncodeOptions::add_special`] does.
    pub fn encode_segments(&self, segments: &[Segment], add_special: bool) -> Vec<u32> {
        let mut text = String::new();
        // The byte ranges of template text; consecutive template pieces join into one range,
        // so a marker split across two of them is still found.
        let mut template: Vec<Range<usize>> = Vec::new();
        for segment in segments {
            let start = text.len();
            text.push_str(segment.text());
            if let Segment::Template(_) = segment {
                match template.last_mut() {
                    Some(last) if last.end == start => last.end = text.len(),
                    _ => template.push(start..text.len()),
                }
            }
        }
        self.encode_with(&text, add_special, Specials::Within(&template))
    }

    /// Tokenize a rendered chat prompt ([`ChatTemplate::render_segments`](
    /// crate::ChatTemplate::render_segments)) for the model: [`Tokenizer::encode_segments`]
    /// with BOS/EOS added as the model asks, except that a BOS the template wrote itself is
    /// not doubled (llama.cpp warns about the double BOS this would otherwise give).
    pub fn encode_chat(&self, prompt: &ChatPrompt) -> Vec<u32> {
        let mut ids = self.encode_segments(prompt.segments(), true);
        if let Some(bos) = self.bos()
            && ids.len() >= 2
            && ids[0] == bos
            && ids[1] == bos
        {
            ids.remove(0);
        }
        ids
    }

    fn encode_with(&self, text: &str, add_special: bool, specials: Specials<'_>) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.config.add_bos {
            out.extend(self.special.bos);
        }
        let fragments = self.matcher.partition(text, &self.vocab, specials);
        match &self.model {
            Model::Spm { byte_tokens } => {
                // The space prefix goes before text at the start and after each special token.
                let mut prev_special = true;
                let mut buf = String::new();
                for fragment in fragments {
                    match fragment {
                        Fragment::Text(r) => {
                            buf.clear();
                            if self.config.add_space_prefix && prev_special {
                                buf.push('\u{2581}');
                            }
                            for c in text[r].chars() {
                                buf.push(if c == ' ' { '\u{2581}' } else { c });
                            }
                            spm::tokenize(&self.vocab, byte_tokens, &buf, &mut out);
                            prev_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                    }
                }
            }
            Model::Bpe { merges } => {
                let mut word = String::new();
                for fragment in fragments {
                    match fragment {
                        Fragment::Text(r) => {
                            let piece = &text[r];
                            for w in self.config.pre.split(piece) {
                                byte_level::encode(&piece[w], &mut word);
                                let ignore = self.config.ignore_merges;
                                bpe::tokenize_word(&self.vocab, merges, ignore, &word, &mut out);
                            }
                        }
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
        }
        if add_special && self.config.add_eos {
            out.extend(self.special.eos);
        }
        out
    }

    /// The bytes of one token; `special` renders CONTROL tokens as their text.
    pub fn token_to_piece(&self, id: u32, special: bool) -> Result<Vec<u8>> {
        self.check_id(id)?;
        let mut out = Vec::new();
        decode::append_piece(&self.vocab, self.config.kind, id, special, false, &mut out);
        Ok(out)
    }

    /// Decode ids to text, control tokens dropped (llama.cpp's `common_detokenize(.., false)`);
    /// invalid UTF-8 becomes U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.decode_with(ids, false)
    }

    /// Decode ids to text; `special` renders CONTROL tokens as their text.
    pub fn decode_with(&self, ids: &[u32], special: bool) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.decode_bytes(ids, special)?).into_owned())
    }

    /// Decode ids to raw bytes.
    pub fn decode_bytes(&self, ids: &[u32], special: bool) -> Result<Vec<u8>> {
        ids.iter().try_for_each(|&id| self.check_id(id))?;
        let mut out = Vec::new();
        decode::detokenize(&self.vocab, &self.config, ids, special, &mut out);
        Ok(out)
    }

    /// [`TokenizerError::TokenOutOfRange`] unless `id` is in the vocabulary.
    pub fn check_id(&self, id: u32) -> Result<()> {
        if self.vocab.contains(id) {
            Ok(())
        } else {
            Err(TokenizerError::TokenOutOfRange {
                id,
                n_vocab: self.vocab.len(),
            })
        }
    }

    /// Tokens in the vocabulary.
    pub fn n_vocab(&self) -> usize {
        self.vocab.len()
    }

    /// SPM or BPE.
    pub fn kind(&self) -> TokenizerKind {
        self.config.kind
    }

    /// Beginning of sequence, if the model has one.
    pub fn bos(&self) -> Option<u32> {
        self.special.bos
    }

    /// End of sequence, if the model has one.
    pub fn eos(&self) -> Option<u32> {
        self.special.eos
    }

    /// End of turn: `<end_of_turn>`, `<|im_end|>`, `<|eot_id|>`, ... if the model has one.
    pub fn eot(&self) -> Option<u32> {
        self.special.eot
    }

    /// The unknown token, if the model has one.
    pub fn unk(&self) -> Option<u32> {
        self.special.unk
    }

    /// The padding token, if the model has one.
    pub fn pad(&self) -> Option<u32> {
        self.special.pad
    }

    /// All special ids (BOS, EOS, EOT, FIM, ...).
    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    /// Whether generating `id` ends generation (llama.cpp's `llama_vocab_is_eog`).
    pub fn is_eog(&self, id: u32) -> bool {
        self.special.eog.contains(&id)
    }

    /// Every token that ends generation ([`Tokenizer::is_eog`]), in id order.
    pub fn eog_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.special.eog.iter().copied()
    }

    /// Whether `encode` with `add_special` adds BOS / EOS.
    pub fn add_bos(&self) -> bool {
        self.config.add_bos
    }

    /// Whether `encode` with `add_special` appends EOS.
    pub fn add_eos(&self) -> bool {
        self.config.add_eos
    }

    /// A token's text as stored in the vocabulary.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.contains(id).then(|| self.vocab.text(id))
    }

    /// A token's attributes (normal, control, byte, ...), `None` outside the vocabulary.
    pub fn token_attr(&self, id: u32) -> Option<TokenAttr> {
        self.vocab.contains(id).then(|| self.vocab.attr(id))
    }

    /// The id of the token spelled exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.id(text)
    }

    /// `general.architecture`, empty if absent.
    pub fn architecture(&self) -> &str {
        &self.architecture
    }

    /// `tokenizer.chat_template`, if the file has one.
    pub fn chat_template_source(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    pub(crate) fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }
}

/// llama.cpp's `byte_to_token` for SPM: `<0xXX>`, else the byte as a one-character token.
/// Where neither exists llama.cpp throws; we use UNK, or drop the byte if there is none.
fn spm_byte_tokens(vocab: &Vocab, unk: Option<u32>) -> [Option<u32>; 256] {
    let mut table = [None; 256];
    for (b, slot) in table.iter_mut().enumerate() {
        let hex = vocab.id(&format!("<0x{b:02X}>"));
        let plain = u8::try_from(b)
            .ok()
            .filter(u8::is_ascii)
            .and_then(|b| vocab.id(char::from(b).encode_utf8(&mut [0; 4])));
        *slot = hex.or(plain).or(unk);
    }
    table
}
