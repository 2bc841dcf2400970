//! Inputs that break naive tokenizers: huge single words, long whitespace runs, many
//! multi-byte characters, special-token text where special tokens are not parsed, and
//! control characters. Each must finish quickly, not panic, and round-trip.

use std::time::{Duration, Instant};

use rullama_tokenizer::EncodeOptions;

use crate::{GEMMA, MODELS, QWEN, SMOLLM, model};

const PLAIN: EncodeOptions = EncodeOptions {
    add_special: false,
    parse_special: false,
};

/// Generous for an unoptimised build on a shared 2-core machine; a quadratic algorithm on a
/// megabyte would take minutes.
const BOUND: Duration = Duration::from_secs(10);

fn encode_within_bound(name: &str, what: &str, text: &str) -> Vec<u32> {
    let tok = model(name);
    let t = Instant::now();
    let ids = tok.encode(text, PLAIN);
    let took = t.elapsed();
    eprintln!(
        "{name}: {what} ({} bytes) -> {} ids in {took:?}",
        text.len(),
        ids.len()
    );
    assert!(took < BOUND, "{name}: {what} took {took:?}");
    assert_eq!(tok.decode(&ids).unwrap(), text, "{name}: {what} round trip");
    ids
}

#[test]
fn megabyte_of_one_letter() {
    let text = "a".repeat(1 << 20);
    for name in MODELS {
        let ids = encode_within_bound(name, "1 MiB of 'a'", &text);
        assert!(ids.len() <= text.len() / 4, "{name}: merges happened");
    }
}

#[test]
fn megabyte_of_spaces() {
    let text = " ".repeat(1 << 20);
    for name in MODELS {
        encode_within_bound(name, "1 MiB of spaces", &text);
    }
}

#[test]
fn hundred_thousand_emoji() {
    let text = "🦀🚀👍🏽".repeat(100_000 / 4);
    for name in MODELS {
        encode_within_bound(name, "100k emoji", &text);
    }
}

#[test]
fn special_token_text_is_plain_text_without_parse_special() {
    for (name, marker) in [
        (GEMMA, "<start_of_turn>"),
        (SMOLLM, "<|im_start|>"),
        (QWEN, "<|im_end|>"),
    ] {
        let tok = model(name);
        let id = tok.token_id(marker).unwrap();
        let text = format!("x{marker}y").repeat(20_000);
        let ids = encode_within_bound(name, "control-token text", &text);
        assert!(!ids.contains(&id), "{name}: {marker} must not be matched");
        let parsed = tok.encode(
            &text,
            EncodeOptions {
                add_special: false,
                parse_special: true,
            },
        );
        assert_eq!(
            parsed.iter().filter(|&&i| i == id).count(),
            20_000,
            "{name}: parsed"
        );
    }
}

#[test]
fn replacement_and_control_characters() {
    let text =
        "a\u{FFFD}b\u{0}c\u{1}\u{7F}\u{1B}[0m\u{85}\u{2028}\u{FEFF}\u{200B}\r\u{0B}\u{0C}e\u{301}";
    for name in MODELS {
        let ids = encode_within_bound(name, "U+FFFD and control characters", text);
        assert!(!ids.is_empty());
        let lone = encode_within_bound(name, "a lone NUL", "\u{0}");
        assert!(!lone.is_empty(), "{name}: NUL must produce a token");
    }
}

#[test]
fn empty_text() {
    for name in MODELS {
        let tok = model(name);
        assert!(tok.encode("", PLAIN).is_empty());
        let with_bos = tok.encode(
            "",
            EncodeOptions {
                add_special: true,
                parse_special: false,
            },
        );
        assert_eq!(
            with_bos,
            tok.bos()
                .filter(|_| tok.add_bos())
                .into_iter()
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn out_of_range_ids_are_errors() {
    for name in MODELS {
        let tok = model(name);
        let bad = tok.n_vocab() as u32;
        assert!(tok.decode(&[bad]).is_err());
        assert!(tok.token_to_piece(u32::MAX, true).is_err());
    }
}
