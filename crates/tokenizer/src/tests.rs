//! Tokenizers built from small synthetic vocabularies, to pin down llama.cpp's rules one at a
//! time (the real models are exercised in tests/models).

use rullama_gguf::Metadata;

use crate::{EncodeOptions, Tokenizer, TokenizerError};

const NORMAL: i32 = 1;
const CONTROL: i32 = 3;
const USER: i32 = 4;
const BYTE: i32 = 6;

const PLAIN: EncodeOptions = EncodeOptions {
    add_special: false,
    parse_special: false,
};

/// A vocabulary of `(text, score, token_type)`.
fn metadata(model: &str, tokens: &[(&str, f32, i32)]) -> Metadata {
    let mut md = Metadata::new();
    md.insert("general.architecture", "llama");
    md.insert("tokenizer.ggml.model", model);
    md.insert(
        "tokenizer.ggml.tokens",
        tokens.iter().map(|t| t.0).collect::<Vec<_>>(),
    );
    md.insert(
        "tokenizer.ggml.scores",
        tokens.iter().map(|t| t.1).collect::<Vec<_>>(),
    );
    md.insert(
        "tokenizer.ggml.token_type",
        tokens.iter().map(|t| t.2).collect::<Vec<_>>(),
    );
    md
}

/// SPM vocabulary: `<unk> <s> </s>`, byte tokens for `é` (C3 A9), then `extra`.
fn spm(extra: &[(&str, f32, i32)]) -> Tokenizer {
    spm_with(extra, true)
}

fn spm_with(extra: &[(&str, f32, i32)], add_space_prefix: bool) -> Tokenizer {
    let mut tokens = vec![
        ("<unk>", 0.0, 2),
        ("<s>", 0.0, CONTROL),
        ("</s>", 0.0, CONTROL),
        ("<0xC3>", 0.0, BYTE),
        ("<0xA9>", 0.0, BYTE),
    ];
    tokens.extend_from_slice(extra);
    let mut md = metadata("llama", &tokens);
    md.insert("tokenizer.ggml.add_space_prefix", add_space_prefix);
    Tokenizer::from_gguf(&md).unwrap()
}

fn ids(tok: &Tokenizer, texts: &[&str]) -> Vec<u32> {
    texts.iter().map(|t| tok.token_id(t).unwrap()).collect()
}

#[test]
fn spm_merges_highest_score_first_and_leftmost_on_ties() {
    let letters = [
        ("a", -5.0, NORMAL),
        ("b", -5.0, NORMAL),
        ("c", -5.0, NORMAL),
    ];
    let [a, b, c] = letters;
    let tok = spm_with(
        &[a, b, c, ("ab", -1.0, NORMAL), ("bc", -0.5, NORMAL)],
        false,
    );
    assert_eq!(tok.encode("abc", PLAIN), ids(&tok, &["a", "bc"]));
    let tok = spm_with(
        &[a, b, c, ("ab", -1.0, NORMAL), ("bc", -1.0, NORMAL)],
        false,
    );
    assert_eq!(tok.encode("abc", PLAIN), ids(&tok, &["ab", "c"]));
}

#[test]
fn spm_space_prefix_and_byte_fallback() {
    let tok = spm(&[
        ("▁", -1.0, NORMAL),
        ("h", -9.0, NORMAL),
        ("i", -9.0, NORMAL),
        ("▁h", -2.0, NORMAL),
        ("▁hi", -1.0, NORMAL),
        ("<ctl>", 0.0, CONTROL),
    ]);
    // add_space_prefix defaults to true for SPM: a space before the text and after each
    // special token.
    let hi = tok.token_id("▁hi").unwrap();
    let ctl = tok.token_id("<ctl>").unwrap();
    let parse = EncodeOptions {
        add_special: true,
        parse_special: true,
    };
    assert_eq!(tok.encode("hi<ctl>hi", parse), [1, hi, ctl, hi]);
    // é is not a token: its UTF-8 bytes are.
    assert_eq!(tok.encode("é", PLAIN), [tok.token_id("▁").unwrap(), 3, 4]);
    // Decoding strips the prefix space from the first piece, but llama.cpp lets BOS's empty
    // piece take that strip, so after BOS the space stays.
    assert_eq!(tok.decode(&[hi, ctl, hi]).unwrap(), "hi hi");
    assert_eq!(tok.decode(&[1, hi]).unwrap(), " hi");
    assert_eq!(tok.decode_with(&[hi, ctl, 3, 4], true).unwrap(), "hi<ctl>é");
}

#[test]
fn special_tokens_longest_first_and_user_defined_always() {
    let tok = spm_with(
        &[
            ("a", -1.0, NORMAL),
            ("d", -1.0, NORMAL),
            ("ab", 0.0, USER),
            ("bcd", 0.0, USER),
            ("<x>", 0.0, CONTROL),
            ("<", -1.0, NORMAL),
            (">", -1.0, NORMAL),
            ("x", -1.0, NORMAL),
        ],
        false,
    );
    // "bcd" is longer, so it is cut first although "ab" starts earlier.
    assert_eq!(tok.encode("abcd", PLAIN), ids(&tok, &["a", "bcd"]));
    // A CONTROL token is text unless special tokens are parsed; USER_DEFINED always cuts.
    let x = tok.token_id("<x>").unwrap();
    assert!(!tok.encode("<x>", PLAIN).contains(&x));
    let parse = EncodeOptions {
        add_special: false,
        parse_special: true,
    };
    assert_eq!(tok.encode("<x>", parse), [x]);
}

fn bpe(pre: &str, tokens: &[&str], merges: &[&str]) -> Tokenizer {
    let typed: Vec<(&str, f32, i32)> = tokens.iter().map(|&t| (t, 0.0, NORMAL)).collect();
    let mut md = metadata("gpt2", &typed);
    md.insert("tokenizer.ggml.pre", pre);
    md.insert("tokenizer.ggml.merges", merges.to_vec());
    Tokenizer::from_gguf(&md).unwrap()
}

#[test]
fn bpe_merges_lowest_rank_first() {
    let tokens = ["a", "b", "c", "ab", "bc", "Ġ", "Ġa"];
    let tok = bpe("gpt-2", &tokens, &["b c", "a b", "Ġ a"]);
    assert_eq!(tok.encode("abc", PLAIN), ids(&tok, &["a", "bc"]));
    let tok = bpe("gpt-2", &tokens, &["a b", "b c", "Ġ a"]);
    assert_eq!(tok.encode("abc a", PLAIN), ids(&tok, &["ab", "c", "Ġa"]));
    assert_eq!(tok.decode(&tok.encode("abc a", PLAIN)).unwrap(), "abc a");
    // A byte with no token is dropped, as in llama.cpp.
    assert_eq!(tok.encode("a?", PLAIN), ids(&tok, &["a"]));
}

#[test]
fn eog_detection_by_text_marks_control() {
    let tok = bpe("qwen2", &["a", "<|im_end|>", "<|endoftext|>"], &[]);
    let (im_end, eot) = (
        tok.token_id("<|im_end|>").unwrap(),
        tok.token_id("<|endoftext|>").unwrap(),
    );
    assert!(tok.is_eog(im_end) && tok.is_eog(eot) && !tok.is_eog(0));
    assert_eq!(tok.eot(), Some(im_end));
    // Now CONTROL: plain text without parse_special.
    assert!(!tok.encode("<|im_end|>", PLAIN).contains(&im_end));
}

#[test]
fn bad_metadata_is_a_typed_error() {
    let md = metadata("t5", &[("a", 0.0, NORMAL)]);
    assert!(
        matches!(Tokenizer::from_gguf(&md), Err(TokenizerError::UnsupportedModel(m)) if m == "t5")
    );
    let mut md = metadata("gpt2", &[("a", 0.0, NORMAL)]);
    md.insert("tokenizer.ggml.merges", vec!["a a"]);
    md.insert("tokenizer.ggml.pre", "no-such-pre");
    assert!(matches!(
        Tokenizer::from_gguf(&md),
        Err(TokenizerError::UnsupportedPreTokenizer(_))
    ));
    let md = metadata("llama", &[("a", 0.0, NORMAL), ("a", 0.0, NORMAL)]);
    assert!(matches!(
        Tokenizer::from_gguf(&md),
        Err(TokenizerError::InvalidVocab(_))
    ));
    // SPM adds BOS by default, but id 1 does not exist in a one-token vocabulary.
    let md = metadata("llama", &[("a", 0.0, NORMAL)]);
    assert!(matches!(
        Tokenizer::from_gguf(&md),
        Err(TokenizerError::InvalidVocab(_))
    ));
    let mut md = metadata("llama", &[("a", 0.0, NORMAL), ("b", 0.0, NORMAL)]);
    md.insert("tokenizer.ggml.scores", vec![0.0f32]);
    assert!(matches!(
        Tokenizer::from_gguf(&md),
        Err(TokenizerError::InvalidVocab(_))
    ));
    let mut md = Metadata::new();
    md.insert("tokenizer.ggml.model", "llama");
    assert!(matches!(
        Tokenizer::from_gguf(&md),
        Err(TokenizerError::Metadata(_))
    ));
}

/// A BOS or EOS id outside the vocabulary is an error naming the key, not llama.cpp's quiet
/// fallback to the default id (another token); other ids keep llama.cpp's leniency.
#[test]
fn out_of_range_bos_or_eos_is_an_error_at_load() {
    let tokens = [
        ("<unk>", 0.0, 2),
        ("<s>", 0.0, CONTROL),
        ("</s>", 0.0, CONTROL),
        ("a", 0.0, NORMAL),
    ];
    for (key, id) in [
        ("tokenizer.ggml.bos_token_id", 4u32),
        ("tokenizer.ggml.eos_token_id", 70_000),
    ] {
        let mut md = metadata("llama", &tokens);
        md.insert(key, id);
        match Tokenizer::from_gguf(&md) {
            Err(TokenizerError::InvalidVocab(m)) => {
                assert_eq!(
                    m,
                    format!("{key} is {id}, outside the vocabulary of 4 tokens")
                );
            }
            other => panic!("{key} = {id}: {other:?}"),
        }
    }
    let mut md = metadata("llama", &tokens);
    md.insert("tokenizer.ggml.bos_token_id", u64::MAX);
    assert!(Tokenizer::from_gguf(&md).is_err());
    let mut md = metadata("llama", &tokens);
    md.insert("tokenizer.ggml.padding_token_id", 9u32);
    let tok = Tokenizer::from_gguf(&md).unwrap();
    assert_eq!(tok.bos(), Some(1));
}
