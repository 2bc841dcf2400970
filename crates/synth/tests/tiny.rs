//! The tiny models, built in memory: deterministic per seed, a few MB, their tokenizers
//! round-trip text and carry their family's chat template, and each runs on the CPU
//! reference with finite logits through a few greedy steps.

use rullama_gguf::{GgufFile, Metadata};
use rullama_model::{CpuBackend, Model};
use rullama_synth::{N_TOKENS, Tiny, tiny_model};
use rullama_tokenizer::{ChatMessage, ChatTemplate, EncodeOptions, Tokenizer, TokenizerError};

const PLAIN: EncodeOptions = EncodeOptions {
    add_special: false,
    parse_special: false,
};
const SPECIAL: EncodeOptions = EncodeOptions {
    add_special: true,
    parse_special: true,
};

fn file(tiny: Tiny) -> GgufFile<Vec<u8>> {
    GgufFile::from_bytes(tiny_model(tiny, 1)).unwrap()
}

#[test]
fn the_same_seed_gives_the_same_bytes() {
    for tiny in Tiny::ALL {
        let bytes = tiny_model(tiny, 3);
        assert!(bytes == tiny_model(tiny, 3), "{tiny:?}");
        assert!(bytes != tiny_model(tiny, 4), "{tiny:?}");
        let mb = bytes.len() as f64 / 1e6;
        eprintln!("{tiny:?}: {mb:.2} MB");
        assert!(mb < 5.0, "{tiny:?}: {mb:.2} MB");
    }
}

#[test]
fn tokenizers_round_trip_text() {
    let texts = [
        "The cat sleeps on the chair by the window.",
        "Unseen words: zebra, quixotic, rhythm!",
        "Digits 0123456789 and 3.14159, 2024-11-27.",
        "  two spaces,\ttabs\nand new lines\n\n",
        "ünïcödé, 漢字, emoji 🦀🎉, and a lone é",
        "<|im_start|> and <start_of_turn> as plain text",
    ];
    for tiny in Tiny::ALL {
        let file = file(tiny);
        let tok = Tokenizer::from_gguf(file.metadata()).unwrap();
        assert_eq!(tok.n_vocab(), N_TOKENS, "{tiny:?}");
        for text in texts {
            let ids = tok.encode(text, PLAIN);
            assert_eq!(tok.decode(&ids).unwrap(), text, "{tiny:?}: {ids:?}");
            let add_special = EncodeOptions {
                add_special: true,
                parse_special: false,
            };
            let bos: Vec<u32> = tok.bos().filter(|_| tok.add_bos()).into_iter().collect();
            assert_eq!(
                tok.encode(text, add_special),
                [bos, ids].concat(),
                "{tiny:?}"
            );
        }
        // Learned pieces: ordinary English takes fewer tokens than it has bytes.
        let english = "the house is quiet in the morning and the light moves";
        let n = tok.encode(english, PLAIN).len();
        eprintln!("{tiny:?}: {n} tokens for {} bytes", english.len());
        assert!(n * 2 < english.len(), "{tiny:?}: {n} tokens");
    }
}

/// The family's chat template renders what the tokenizer crate's built-in format of that
/// family (llama.cpp's) renders, and its turn markers are single special tokens.
#[test]
fn chat_templates_follow_the_family_format() {
    let conversation = [
        ChatMessage::new("system", "Be brief."),
        ChatMessage::new("user", "Hello there"),
        ChatMessage::new("assistant", "Hi."),
        ChatMessage::new("user", "What is a token?"),
    ];
    for tiny in Tiny::ALL {
        let file = file(tiny);
        let tok = Tokenizer::from_gguf(file.metadata()).unwrap();
        let mut meta: Metadata = file.metadata().clone();
        meta.remove("tokenizer.chat_template");
        let builtin = ChatTemplate::for_model(&Tokenizer::from_gguf(&meta).unwrap());
        // Gemma folds the system prompt into the first user turn; ChatML gives it a turn.
        let (marker, turns, template) = match tiny {
            Tiny::Gemma3 => ("<start_of_turn>", 3, ChatTemplate::for_model(&tok).unwrap()),
            Tiny::Qwen2 | Tiny::Smollm2 => {
                ("<|im_start|>", 4, ChatTemplate::for_model(&tok).unwrap())
            }
            Tiny::Llama => {
                assert!(matches!(
                    ChatTemplate::for_model(&tok),
                    Err(TokenizerError::NoChatTemplate(_))
                ));
                continue;
            }
        };
        assert_eq!(template.source_name(), "tokenizer.chat_template");
        let prompt = template.render(&conversation, true).unwrap();
        assert_eq!(
            prompt,
            builtin.unwrap().render(&conversation, true).unwrap(),
            "{tiny:?}"
        );
        let ids = tok.encode(&prompt, SPECIAL);
        let marker = tok.token_id(marker).unwrap();
        let found = ids.iter().filter(|&&id| id == marker).count();
        assert_eq!(
            found,
            turns + 1,
            "{tiny:?}: the turns and the reply's: {ids:?}"
        );
    }
}

/// Greedy continuation of `prompt` for `n` tokens, checking every step's logits.
fn greedy(model: &Model<CpuBackend>, prompt: &[u32], n: usize) -> Vec<u32> {
    let mut session = model.session(64).unwrap();
    let mut logits = session.feed(prompt).unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        assert_eq!(logits.len(), N_TOKENS);
        assert!(logits.iter().all(|v| v.is_finite()), "{logits:?}");
        let (id, _) = logits
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap();
        out.push(id as u32);
        logits = session.feed(&[id as u32]).unwrap();
    }
    out
}

#[test]
fn tiny_models_generate_on_the_cpu_reference() {
    for tiny in Tiny::ALL {
        let file = file(tiny);
        let tok = Tokenizer::from_gguf(file.metadata()).unwrap();
        let model = Model::load(&file, CpuBackend::new()).unwrap();
        assert_eq!(model.config().arch.name(), tiny.arch_name());
        assert_eq!(model.config().n_vocab, N_TOKENS);
        // Longer than gemma's sliding window of 4, so its sliding layers drop keys.
        let prompt = tok.encode("The cat sleeps on the chair by the window", SPECIAL);
        assert!(prompt.len() > 8, "{tiny:?}: {prompt:?}");
        let first = greedy(&model, &prompt, 6);
        tok.decode(&first).unwrap();
        // A second session over the same model starts from an empty cache.
        assert_eq!(greedy(&model, &prompt, 6), first, "{tiny:?}");
    }
}
