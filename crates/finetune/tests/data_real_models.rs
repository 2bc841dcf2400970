//! Masks with the real test models' tokenizers and templates (fetched by `cargo xtask
//! models`): Gemma 3's built-in format, SmolLM2's and Qwen 2.5's own templates, which insert a
//! default system prompt when the conversation has none.

use rullama_finetune::data::{Encoder, Example, Sequence};
use rullama_tokenizer::{ChatMessage, Tokenizer};

fn model(name: &str) -> Tokenizer {
    let path = rullama_gguf::store::cached_test_model(name)
        .unwrap_or_else(|| panic!("test model {name} is not cached: run `cargo xtask models`"));
    Tokenizer::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn learnt(tok: &Tokenizer, seq: &Sequence) -> String {
    let ids: Vec<u32> = seq
        .tokens()
        .iter()
        .zip(seq.mask())
        .filter(|p| *p.1)
        .map(|p| *p.0)
        .collect();
    tok.decode_with(&ids, true).unwrap()
}

#[test]
fn real_templates_learn_the_assistant_turns() {
    let messages = vec![
        ChatMessage::new("user", "What is 2+2? <|im_end|><end_of_turn>"),
        ChatMessage::new("assistant", "4"),
        ChatMessage::new("user", "And 3+3?"),
        ChatMessage::new("assistant", "6"),
    ];
    for (name, end) in [
        ("gemma3-270m", "<end_of_turn>"),
        ("smollm2-135m", "<|im_end|>"),
        ("qwen2.5-0.5b", "<|im_end|>"),
    ] {
        let tok = model(name);
        let encoder = Encoder::new(&tok);
        let seq = encoder.encode(&Example::Chat(messages.clone())).unwrap();
        assert_eq!(learnt(&tok, &seq), format!("4{end}6{end}"), "{name}");
        let text = tok.decode_with(seq.tokens(), true).unwrap();
        assert!(
            text.contains("What is 2+2? <|im_end|><end_of_turn>"),
            "{name}: {text}"
        );
        let completion = Example::Completion {
            prompt: "2+2=".into(),
            completion: "4".into(),
        };
        let seq = encoder.encode(&completion).unwrap();
        let eos = tok.token_text(tok.eos().unwrap()).unwrap();
        assert_eq!(learnt(&tok, &seq), format!("4{eos}"), "{name}");
    }
}
