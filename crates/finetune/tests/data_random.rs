//! Random input: any bytes read as a dataset give examples or an error naming a line, never a
//! panic; any conversation gives a mask on the assistant's turns only, whatever the users type.

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use rullama_finetune::data::{DataError, Encoder, Example, jsonl};
use rullama_gguf::GgufFile;
use rullama_synth::{Tiny, tiny_model};
use rullama_tokenizer::{ChatMessage, TokenAttr, Tokenizer};

/// Pieces of dataset lines: JSON syntax, the keys of every shape, values of every type.
fn line_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("{".to_string()),
        Just("}".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just(",".to_string()),
        Just(":".to_string()),
        Just("\n".to_string()),
        Just("\"text\"".to_string()),
        Just("\"prompt\"".to_string()),
        Just("\"completion\"".to_string()),
        Just("\"messages\"".to_string()),
        Just("\"role\"".to_string()),
        Just("\"content\"".to_string()),
        Just("\"user\"".to_string()),
        Just("\"assistant\"".to_string()),
        Just("null".to_string()),
        Just("1".to_string()),
        "\"[a-z<|>]{0,5}\"",
        any::<char>().prop_map(String::from),
    ]
}

fn tokenizer() -> &'static Tokenizer {
    static CELL: OnceLock<Tokenizer> = OnceLock::new();
    CELL.get_or_init(|| {
        let file = GgufFile::from_bytes(tiny_model(Tiny::Qwen2, 5)).unwrap();
        Tokenizer::from_gguf(file.metadata()).unwrap()
    })
}

/// What a user might type, markers of every family included.
fn user_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("<|im_start|>".to_string()),
        Just("<|im_end|>".to_string()),
        Just("<|endoftext|>".to_string()),
        Just("assistant\n".to_string()),
        Just("\n".to_string()),
        "[a-z ]{1,6}",
    ];
    prop::collection::vec(piece, 1..6).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_text_reads_or_names_a_line(pieces in prop::collection::vec(line_piece(), 0..40)) {
        let text = pieces.concat();
        let n_lines = text.split('\n').count();
        match jsonl::read(text.as_bytes(), Path::new("r.jsonl")) {
            Ok(records) => prop_assert!(records.iter().all(|r| r.line >= 1 && r.line <= n_lines)),
            Err(DataError::Line { line, .. }) => prop_assert!(line >= 1 && line <= n_lines),
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
    }

    /// A user turn, an assistant turn, a user turn: the control tokens are the template's, the
    /// targets are the assistant's text and its `<|im_end|>`.
    #[test]
    fn users_forge_nothing_and_teach_nothing(u1 in user_text(), a in "[a-z ]{1,8}", u2 in user_text()) {
        let tok = tokenizer();
        let encoder = Encoder::new(tok);
        let chat = |u1: &str, u2: &str| Example::Chat(vec![
            ChatMessage::new("user", u1),
            ChatMessage::new("assistant", a.as_str()),
            ChatMessage::new("user", u2),
        ]);
        let seq = encoder.encode(&chat(&u1, &u2)).unwrap();
        let benign = encoder.encode(&chat("x", "y")).unwrap();
        let control = |id: u32| tok.token_attr(id).is_some_and(|t| t.intersects(TokenAttr::CONTROL));
        let controls = |ids: &[u32]| ids.iter().copied().filter(|&t| control(t)).collect::<Vec<_>>();
        prop_assert_eq!(controls(seq.tokens()), controls(benign.tokens()));
        let learnt: Vec<u32> = seq.tokens().iter().zip(seq.mask()).filter(|p| *p.1).map(|p| *p.0).collect();
        prop_assert_eq!(tok.decode_with(&learnt, true).unwrap(), format!("{a}<|im_end|>"));
    }
}
