//! Tests against the real test models (fetched by `cargo xtask models`). One test binary, so
//! each model's tokenizer is built once and shared.

mod chat;
mod hostile;
mod oracle;
mod stream;

use std::sync::OnceLock;

use rullama_tokenizer::Tokenizer;

pub const GEMMA: &str = "gemma3-270m";
pub const SMOLLM: &str = "smollm2-135m";
pub const QWEN: &str = "qwen2.5-0.5b";
pub const MODELS: [&str; 3] = [GEMMA, SMOLLM, QWEN];

/// The tokenizer of a cached test model, built on first use.
pub fn model(name: &str) -> &'static Tokenizer {
    static CELLS: [OnceLock<Tokenizer>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let i = MODELS
        .iter()
        .position(|&m| m == name)
        .unwrap_or_else(|| panic!("unknown test model {name}"));
    CELLS[i].get_or_init(|| {
        let path = rullama_gguf::store::cached_test_model(name)
            .unwrap_or_else(|| panic!("test model {name} is not cached: run `cargo xtask models`"));
        Tokenizer::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    })
}

/// Building gemma's 262,144-token tokenizer (vocabulary, special-token automaton) is quick.
#[test]
fn gemma_vocabulary_loads_quickly() {
    let path = rullama_gguf::store::cached_test_model(GEMMA)
        .unwrap_or_else(|| panic!("test model {GEMMA} is not cached: run `cargo xtask models`"));
    let file = rullama_gguf::GgufFile::open(&path).unwrap();
    let t = std::time::Instant::now();
    let tok = Tokenizer::from_gguf(file.metadata()).unwrap();
    let took = t.elapsed();
    eprintln!(
        "{GEMMA}: tokenizer of {} tokens built in {took:?}",
        tok.n_vocab()
    );
    assert_eq!(tok.n_vocab(), 262_144);
    // Well under a second in a release build; this bound allows an unoptimised one.
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
}

/// BOS/EOS/EOT and the end-of-generation set, as llama.cpp's load log prints them.
#[test]
fn special_ids_as_llama_cpp_reports_them() {
    let gemma = model(GEMMA);
    assert_eq!(
        (gemma.bos(), gemma.eos(), gemma.eot()),
        (Some(2), Some(1), Some(106))
    );
    // gemma-3's vocabulary also has `</s>` (212, USER_DEFINED), which llama.cpp's list of EOG
    // texts includes (for PaddleOCR) and only drops for gemma-4 vocabularies.
    assert_eq!(gemma.eog_ids().collect::<Vec<_>>(), [1, 106, 212]);
    assert!(gemma.add_bos() && !gemma.add_eos());

    let smollm = model(SMOLLM);
    assert_eq!((smollm.bos(), smollm.eos()), (Some(1), Some(2)));
    // <|endoftext|>, <|im_end|>, and <reponame> (found as the FIM repo token).
    assert_eq!(smollm.eog_ids().collect::<Vec<_>>(), [0, 2, 4]);
    assert!(!smollm.add_bos());

    let qwen = model(QWEN);
    assert_eq!((qwen.bos(), qwen.eos()), (Some(151643), Some(151645)));
    // 128247 is a NORMAL `</s>` that llama.cpp's EOG list catches (and logs "control-looking
    // token ... its type will be overridden"); then <|endoftext|>, <|im_end|>, and the FIM
    // pad / repo / file-separator tokens.
    let eog: Vec<u32> = qwen.eog_ids().collect();
    assert_eq!(eog, [128247, 151643, 151645, 151662, 151663, 151664]);
    assert!(qwen.is_eog(151645) && !qwen.is_eog(151644));
    assert_eq!(qwen.n_vocab(), 151_936);
}
