//! Which tokenizer a file asks for and the flags that steer it, with llama.cpp's defaults.
//!
//! llama.cpp sets defaults per tokenizer type and per BPE pre-tokenizer name, then lets the
//! file override `add_space_prefix`, `add_bos_token` and `add_eos_token`. The defaults
//! matter: smollm2's file says `add_bos_token = false`, gemma's says nothing about adding a
//! space prefix on older files, and the llama-3 family adds BOS without saying so.

use rullama_gguf::Metadata;

use crate::error::{Result, TokenizerError};
use crate::pretokenize::PreTokenizer;

pub const KEY_MODEL: &str = "tokenizer.ggml.model";
pub const KEY_PRE: &str = "tokenizer.ggml.pre";
pub const KEY_ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
pub const KEY_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
pub const KEY_ADD_EOS: &str = "tokenizer.ggml.add_eos_token";

/// The tokenization algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// SentencePiece BPE (`tokenizer.ggml.model = llama`): merges by token score over the
    /// text with spaces spelled U+2581, bytes `<0xXX>` for what no token covers.
    Spm,
    /// Byte-level BPE (`gpt2`): a pre-tokenizer splits words, merges go by rank.
    Bpe,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub kind: TokenizerKind,
    /// BPE only; SPM ignores it.
    pub pre: PreTokenizer,
    /// SPM: prepend a space to text at the start and after each special token.
    pub add_space_prefix: bool,
    pub add_bos: bool,
    pub add_eos: bool,
    /// Decode: llama.cpp's `clean_up_tokenization_spaces` passes (" ," -> "," ...).
    pub clean_spaces: bool,
    /// BPE: a word that is itself a token is emitted whole, without merges (llama-3).
    pub ignore_merges: bool,
}

impl Config {
    pub fn from_metadata(md: &Metadata) -> Result<Config> {
        let model = md.get_str(KEY_MODEL)?;
        let mut config = match model {
            "llama" => Config {
                kind: TokenizerKind::Spm,
                pre: PreTokenizer::Default,
                add_space_prefix: true,
                add_bos: true,
                add_eos: false,
                clean_spaces: false,
                ignore_merges: false,
            },
            "gpt2" => {
                let name = md.get_opt::<&str>(KEY_PRE)?.unwrap_or("");
                let pre = PreTokenizer::from_name(name)
                    .ok_or_else(|| TokenizerError::UnsupportedPreTokenizer(name.to_string()))?;
                Config {
                    kind: TokenizerKind::Bpe,
                    pre: pre.kind,
                    add_space_prefix: false,
                    add_bos: pre.add_bos,
                    add_eos: false,
                    clean_spaces: pre.clean_spaces,
                    ignore_merges: pre.ignore_merges,
                }
            }
            other => return Err(TokenizerError::UnsupportedModel(other.to_string())),
        };
        if let Some(v) = md.get_opt::<bool>(KEY_ADD_SPACE_PREFIX)? {
            config.add_space_prefix = v;
        }
        if let Some(v) = md.get_opt::<bool>(KEY_ADD_BOS)? {
            config.add_bos = v;
        }
        if let Some(v) = md.get_opt::<bool>(KEY_ADD_EOS)? {
            config.add_eos = v;
        }
        Ok(config)
    }
}
