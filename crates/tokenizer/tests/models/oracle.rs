//! Every line of data/oracle/tokenize.jsonl (llama.cpp's `/tokenize`) must give the same ids.

use std::path::PathBuf;

use rullama_tokenizer::EncodeOptions;
use serde::Deserialize;

use crate::{GEMMA, QWEN, SMOLLM, model};

#[derive(Debug, Deserialize)]
struct Case {
    model: String,
    text: String,
    add_special: bool,
    parse_special: bool,
    ids: Vec<u32>,
}

fn cases(name: &str) -> Vec<Case> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/oracle/tokenize.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cases: Vec<Case> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|c: &Case| c.model == name)
        .collect();
    assert!(!cases.is_empty(), "no oracle lines for {name}");
    cases
}

/// Encode every oracle text of `name`; returns the number of lines checked.
fn check_model(name: &str, expected_lines: usize) {
    let tok = model(name);
    let cases = cases(name);
    let mut failures = Vec::new();
    for c in &cases {
        let opts = EncodeOptions {
            add_special: c.add_special,
            parse_special: c.parse_special,
        };
        let got = tok.encode(&c.text, opts);
        if got != c.ids {
            failures.push(format!(
                "{:?} {opts:?}\n  want {:?}\n  got  {:?}",
                c.text, c.ids, got
            ));
        }
    }
    eprintln!(
        "{name}: {}/{} oracle lines match llama.cpp",
        cases.len() - failures.len(),
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "{name}: {} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(cases.len(), expected_lines, "{name}: oracle line count");
}

#[test]
fn gemma_matches_llama_cpp() {
    check_model(GEMMA, 54);
}

#[test]
fn smollm_matches_llama_cpp() {
    check_model(SMOLLM, 54);
}

#[test]
fn qwen_matches_llama_cpp() {
    check_model(QWEN, 54);
}

/// decode(encode(s)) == s for every oracle text, and decoding llama.cpp's own ids gives the
/// text back. None of the three adds a space prefix, so the round trip is exact; control
/// tokens parsed from the text come back only when decoded with `special`.
#[test]
fn oracle_texts_round_trip() {
    for name in [GEMMA, SMOLLM, QWEN] {
        let tok = model(name);
        for c in cases(name) {
            let opts = EncodeOptions {
                add_special: c.add_special,
                parse_special: c.parse_special,
            };
            // A BOS added by `add_special` is not part of the text.
            let skip = usize::from(c.add_special && tok.add_bos());
            let ids = tok.encode(&c.text, opts);
            let special = c.parse_special;
            let decoded = tok.decode_with(&ids[skip..], special).unwrap();
            assert_eq!(decoded, c.text, "{name} {opts:?}");
            let decoded = tok.decode_with(&c.ids[skip..], special).unwrap();
            assert_eq!(decoded, c.text, "{name} oracle ids");
        }
    }
}
