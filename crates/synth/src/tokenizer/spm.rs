//! A SentencePiece vocabulary with byte fallback, as `tokenizer.ggml.model = llama` files
//! hold it: special tokens, the 256 `<0xXX>` byte tokens, every character of the corpus,
//! then learned pieces. Words are spelled with U+2581 for the space before them; a piece's
//! score falls with its merge rank, so llama.cpp's merge (the highest-scoring adjacent pair
//! first) joins them in the order they were learned.

use rullama_gguf::Value;

use super::train::{learn_merges, words};
use super::{BYTE, CONTROL, Keys, N_TOKENS, NORMAL, Token, UNKNOWN, fill_with_merges, token_keys};

/// SentencePiece's word boundary, which stands for a space.
const SPACE: char = '\u{2581}';

/// Which SPM family: its special tokens (in id order, with their types), which of them are
/// BOS, EOS, UNK and PAD, and whether text gets a space in front.
pub(super) struct SpmLayout {
    specials: &'static [(&'static str, i32)],
    bos: u32,
    eos: u32,
    unk: u32,
    pad: Option<u32>,
    add_space_prefix: bool,
}

/// Gemma 3's ids for its specials; its turn markers are control tokens.
pub(super) const GEMMA: SpmLayout = SpmLayout {
    specials: &[
        ("<pad>", CONTROL),
        ("<eos>", CONTROL),
        ("<bos>", CONTROL),
        ("<unk>", UNKNOWN),
        ("<start_of_turn>", CONTROL),
        ("<end_of_turn>", CONTROL),
    ],
    bos: 2,
    eos: 1,
    unk: 3,
    pad: Some(0),
    add_space_prefix: false,
};

/// Llama 2's.
pub(super) const LLAMA: SpmLayout = SpmLayout {
    specials: &[("<unk>", UNKNOWN), ("<s>", CONTROL), ("</s>", CONTROL)],
    bos: 1,
    eos: 2,
    unk: 0,
    pad: None,
    add_space_prefix: true,
};

pub(super) fn keys(layout: &SpmLayout) -> Keys {
    let mut tokens: Vec<Token> = layout
        .specials
        .iter()
        .map(|&(text, ty)| (text.to_string(), ty))
        .collect();
    tokens.extend((0..=255u8).map(|b| (format!("<0x{b:02X}>"), BYTE)));

    let spelled: Vec<Vec<String>> = words()
        .iter()
        .map(|w| {
            std::iter::once(SPACE)
                .chain(w.chars())
                .map(String::from)
                .collect()
        })
        .collect();
    let mut chars: Vec<String> = spelled.iter().flatten().cloned().collect();
    chars.sort();
    chars.dedup();
    tokens.extend(chars.into_iter().map(|c| (c, NORMAL)));
    let n_fixed = tokens.len();
    fill_with_merges(&mut tokens, &learn_merges(&spelled, N_TOKENS), N_TOKENS);

    // Specials, bytes and characters score 0 (they are never made by a merge); the pieces
    // -1, -2, ... in the order they were learned.
    let scores: Vec<f32> = (0..tokens.len())
        .map(|i| match i.checked_sub(n_fixed) {
            Some(rank) => -((rank + 1) as f32),
            None => 0.0,
        })
        .collect();
    let n_tokens = tokens.len();
    let mut keys: Vec<(&'static str, Value)> = vec![
        ("tokenizer.ggml.model", "llama".into()),
        ("tokenizer.ggml.pre", "default".into()),
    ];
    keys.extend(token_keys(&tokens));
    keys.push(("tokenizer.ggml.scores", scores.into()));
    keys.extend([
        ("tokenizer.ggml.bos_token_id", layout.bos.into()),
        ("tokenizer.ggml.eos_token_id", layout.eos.into()),
        ("tokenizer.ggml.unknown_token_id", layout.unk.into()),
    ]);
    if let Some(pad) = layout.pad {
        keys.push(("tokenizer.ggml.padding_token_id", pad.into()));
    }
    keys.extend([
        ("tokenizer.ggml.add_bos_token", true.into()),
        ("tokenizer.ggml.add_eos_token", false.into()),
        (
            "tokenizer.ggml.add_space_prefix",
            layout.add_space_prefix.into(),
        ),
    ]);
    Keys { keys, n_tokens }
}
