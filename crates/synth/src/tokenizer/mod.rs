//! Synthetic tokenizers: a few hundred tokens of the kind each family uses, built from
//! nothing, so a tiny model needs no real model's file.
//!
//! - SentencePiece with byte fallback (`tokenizer.ggml.model = llama`): Gemma's layout
//!   (`<pad> <eos> <bos> <unk>`, turn markers, no space prefix) or Llama 2's (`<unk> <s>
//!   </s>`, a space prefix); `spm.rs`.
//! - Byte-level BPE (`gpt2`) with merges: Qwen 2's (`pre = qwen2`, specials last) or
//!   SmolLM2's (`pre = smollm`, specials first); `bpe.rs`.
//!
//! Both learn their pieces from the same built-in text (`train.rs`), so ordinary English
//! tokenizes into pieces, and every byte has a token, so any text round-trips. Gemma's and
//! ChatML's families carry a chat template (`template.rs`).

mod bpe;
mod spm;
mod template;
mod train;

use std::collections::HashSet;

use rullama_gguf::Value;

use crate::vocab::Vocab;

/// How many tokens every synthetic vocabulary has.
pub const N_TOKENS: usize = 512;

/// llama.cpp's token types (`llama_token_type`), as `tokenizer.ggml.token_type` stores them.
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const BYTE: i32 = 6;

/// The tokenizer of a model family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerStyle {
    /// Gemma 3: SPM, `<pad>`=0 `<eos>`=1 `<bos>`=2 `<unk>`=3, `<start_of_turn>` and
    /// `<end_of_turn>`, BOS added, no space prefix; Gemma's chat template.
    Gemma,
    /// Llama 2: SPM, `<unk>`=0 `<s>`=1 `</s>`=2, BOS added, a space prefix; no template.
    Llama,
    /// Qwen 2: byte-level BPE, pre-tokenizer `qwen2`, `<|endoftext|>` `<|im_start|>`
    /// `<|im_end|>` last; no BOS; ChatML.
    Qwen2,
    /// SmolLM2: byte-level BPE, pre-tokenizer `smollm`, `<|endoftext|>`=0 `<|im_start|>`=1
    /// `<|im_end|>`=2; no BOS; ChatML.
    Smollm2,
}

impl TokenizerStyle {
    /// The `tokenizer.*` keys of this tokenizer, [`N_TOKENS`] tokens.
    pub fn vocab(self) -> Vocab {
        let Keys { mut keys, n_tokens } = match self {
            TokenizerStyle::Gemma => spm::keys(&spm::GEMMA),
            TokenizerStyle::Llama => spm::keys(&spm::LLAMA),
            TokenizerStyle::Qwen2 => bpe::keys(&bpe::QWEN2),
            TokenizerStyle::Smollm2 => bpe::keys(&bpe::SMOLLM2),
        };
        let template = match self {
            TokenizerStyle::Gemma => Some(template::GEMMA),
            TokenizerStyle::Qwen2 | TokenizerStyle::Smollm2 => Some(template::CHATML),
            TokenizerStyle::Llama => None,
        };
        if let Some(template) = template {
            keys.push(("tokenizer.chat_template", template.into()));
        }
        Vocab {
            source_arch: None,
            keys: keys.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            n_tokens,
        }
    }
}

/// A tokenizer's metadata and its token count.
struct Keys {
    keys: Vec<(&'static str, Value)>,
    n_tokens: usize,
}

/// One token: its text and its `token_type`.
type Token = (String, i32);

/// Append the result of each merge that is not a token yet, until there are `limit` tokens;
/// returns how many merges were used (each one's result is then a token).
fn fill_with_merges(tokens: &mut Vec<Token>, merges: &[(String, String)], limit: usize) -> usize {
    let mut present: HashSet<String> = tokens.iter().map(|(t, _)| t.clone()).collect();
    let mut used = 0;
    for (left, right) in merges {
        if tokens.len() >= limit {
            break;
        }
        let piece = format!("{left}{right}");
        if present.insert(piece.clone()) {
            tokens.push((piece, NORMAL));
        }
        used += 1;
    }
    used
}

/// The `tokenizer.ggml.tokens` and `.token_type` keys of `tokens`.
fn token_keys(tokens: &[Token]) -> [(&'static str, Value); 2] {
    let texts: Vec<String> = tokens.iter().map(|(t, _)| t.clone()).collect();
    let types: Vec<i32> = tokens.iter().map(|&(_, ty)| ty).collect();
    [
        ("tokenizer.ggml.tokens", texts.into()),
        ("tokenizer.ggml.token_type", types.into()),
    ]
}
