//! StreamDecoder: text comes out only as complete UTF-8, however a character is split.

use rullama_tokenizer::{EncodeOptions, StreamDecoder, Tokenizer};

use crate::{GEMMA, MODELS, QWEN, model};

fn stream_all(tok: &Tokenizer, ids: &[u32]) -> Vec<String> {
    let mut stream = StreamDecoder::new(tok, false);
    let mut chunks: Vec<String> = ids.iter().map(|&id| stream.push(id).unwrap()).collect();
    chunks.push(stream.finish());
    chunks
}

fn byte_token(tok: &Tokenizer, b: u8) -> u32 {
    tok.token_id(&format!("<0x{b:02X}>")).unwrap()
}

#[test]
fn gemma_byte_fallback_emoji_comes_out_whole() {
    let tok = model(GEMMA);
    // 🦀 is F0 9F A6 80; as four byte tokens nothing may come out before the last.
    let ids: Vec<u32> = "🦀a".bytes().map(|b| byte_token(tok, b)).collect();
    let chunks = stream_all(tok, &ids);
    assert_eq!(chunks, ["", "", "", "🦀", "a", ""]);

    // A byte that can never start a character comes out as U+FFFD at once, and an
    // unfinished character at the end as U+FFFD from `finish`.
    let ids = [
        byte_token(tok, 0xFF),
        byte_token(tok, b'x'),
        byte_token(tok, 0xE2),
    ];
    assert_eq!(stream_all(tok, &ids), ["\u{FFFD}", "x", "", "\u{FFFD}"]);
}

#[test]
fn byte_level_bpe_pieces_split_inside_characters() {
    let tok = model(QWEN);
    let text = "emoji: 🦀🚀👍🏽 👨\u{200d}👩\u{200d}👧 日本語";
    let ids = tok.encode(text, EncodeOptions::default());
    let chunks = stream_all(tok, &ids);
    assert!(chunks.iter().all(|c| !c.contains('\u{FFFD}')), "{chunks:?}");
    // Some token ends inside a character: its chunk is held back.
    assert!(
        chunks[..ids.len()].iter().any(String::is_empty),
        "{chunks:?}"
    );
    assert_eq!(chunks.concat(), text);
}

#[test]
fn stream_equals_decode_for_every_model() {
    let text = "Hello, wörld! 🦀 日本語\n\tdone";
    for name in MODELS {
        let tok = model(name);
        let ids = tok.encode(text, EncodeOptions::default());
        assert_eq!(
            stream_all(tok, &ids).concat(),
            tok.decode(&ids).unwrap(),
            "{name}"
        );
    }
}
