//! A byte-level BPE vocabulary, as `tokenizer.ggml.model = gpt2` files hold it: the 256
//! byte tokens spelled with GPT-2's printable stand-ins, learned pieces, their merges in
//! rank order (`"left right"`), and the ChatML specials.

use rullama_gguf::Value;

use super::train::{learn_merges, words};
use super::{CONTROL, Keys, N_TOKENS, NORMAL, Token, fill_with_merges, token_keys};

/// Which BPE family: its pre-tokenizer, whether the specials come first (SmolLM2) or last
/// (Qwen 2), and which special is BOS.
pub(super) struct BpeLayout {
    pre: &'static str,
    specials_first: bool,
    bos: &'static str,
}

/// The specials both families have, in this order.
const SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
const EOS: &str = "<|im_end|>";

pub(super) const QWEN2: BpeLayout = BpeLayout {
    pre: "qwen2",
    specials_first: false,
    bos: "<|endoftext|>",
};

pub(super) const SMOLLM2: BpeLayout = BpeLayout {
    pre: "smollm",
    specials_first: true,
    bos: "<|im_start|>",
};

/// GPT-2's stand-in for byte `b`: the byte itself where it is a printable Latin-1
/// character (`!`..`~`, `¡`..`¬`, `®`..`ÿ`), else U+0100 plus its rank among the 68 others
/// (so a space is `Ġ`, U+0120).
fn byte_char(b: u8) -> char {
    let printable = |x: u8| matches!(x, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable(b) {
        return char::from(b);
    }
    let rank = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(0x100 + rank).unwrap_or(char::REPLACEMENT_CHARACTER)
}

pub(super) fn keys(layout: &BpeLayout) -> Keys {
    let specials = SPECIALS.map(|s| (s.to_string(), CONTROL));
    let mut tokens: Vec<Token> = Vec::with_capacity(N_TOKENS);
    if layout.specials_first {
        tokens.extend(specials.iter().cloned());
    }
    tokens.extend((0..=255u8).map(|b| (byte_char(b).to_string(), NORMAL)));

    // Each word spelled byte by byte, with the space before it (as the pre-tokenizers keep
    // it) on all but the first.
    let spelled: Vec<Vec<String>> = words()
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let space = if i == 0 { "" } else { " " };
            format!("{space}{w}")
                .bytes()
                .map(|b| byte_char(b).to_string())
                .collect()
        })
        .collect();
    let limit = N_TOKENS
        - if layout.specials_first {
            0
        } else {
            SPECIALS.len()
        };
    let merges = learn_merges(&spelled, N_TOKENS);
    let used = fill_with_merges(&mut tokens, &merges, limit);
    // Only the merges whose result made it into the vocabulary.
    let merges: Vec<String> = merges[..used]
        .iter()
        .map(|(l, r)| format!("{l} {r}"))
        .collect();
    if !layout.specials_first {
        tokens.extend(specials.iter().cloned());
    }

    let id = |text: &str| tokens.iter().position(|(t, _)| t == text).unwrap_or(0) as u32;
    let (bos, eos) = (id(layout.bos), id(EOS));
    let n_tokens = tokens.len();
    let mut keys: Vec<(&'static str, Value)> = vec![
        ("tokenizer.ggml.model", "gpt2".into()),
        ("tokenizer.ggml.pre", layout.pre.into()),
    ];
    keys.extend(token_keys(&tokens));
    keys.extend([
        ("tokenizer.ggml.merges", merges.into()),
        ("tokenizer.ggml.bos_token_id", bos.into()),
        ("tokenizer.ggml.eos_token_id", eos.into()),
        (
            "tokenizer.ggml.padding_token_id",
            id("<|endoftext|>").into(),
        ),
        ("tokenizer.ggml.add_bos_token", false.into()),
    ]);
    Keys { keys, n_tokens }
}

#[cfg(test)]
mod tests {
    use super::byte_char;

    #[test]
    fn byte_chars_are_gpt2s() {
        assert_eq!(byte_char(b' '), 'Ġ');
        assert_eq!(byte_char(b'\n'), 'Ċ');
        assert_eq!(byte_char(b'a'), 'a');
        assert_eq!(byte_char(0xAD), '\u{143}');
        let mut all: Vec<char> = (0..=255u8).map(byte_char).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 256);
    }
}
