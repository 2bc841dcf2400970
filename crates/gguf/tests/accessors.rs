//! Typed metadata lookups on a parsed file: architecture prefixes, strict and lenient
//! getters, and errors that name the key.

mod common;

use rullama_gguf::{GgufError, GgufFile, Metadata};

fn with_metadata<R>(check: impl FnOnce(&Metadata) -> R) -> R {
    let bytes = common::model_like_bytes();
    let file = GgufFile::from_bytes(bytes).unwrap();
    check(file.metadata())
}

#[test]
fn architecture_prefixed_lookups() {
    with_metadata(|m| {
        assert_eq!(m.architecture().unwrap(), "gemma3");
        assert_eq!(m.arch_key("block_count").unwrap(), "gemma3.block_count");
        assert_eq!(m.arch_u32("block_count").unwrap(), 2);
        assert_eq!(m.arch_f32("rope.freq_base").unwrap(), 1e6);
        assert_eq!(
            m.arch::<f32>("attention.layer_norm_rms_epsilon").unwrap(),
            1e-6
        );
        assert_eq!(
            m.arch::<&[bool]>("attention.sliding_window_pattern")
                .unwrap(),
            [true, false]
        );
        // context_length is stored as u64: the lenient getter takes it, the strict one does not.
        assert_eq!(m.arch_usize("context_length").unwrap(), 2048);
        assert!(m.arch_u32("context_length").is_err());
        assert_eq!(m.arch_opt::<u32>("expert_count").unwrap(), None);
        assert_eq!(m.arch_opt::<u32>("embedding_length").unwrap(), Some(64));
    });
}

#[test]
fn typed_getters() {
    with_metadata(|m| {
        assert_eq!(m.get_str("tokenizer.ggml.model").unwrap(), "llama");
        assert!(m.get_bool("tokenizer.ggml.add_bos_token").unwrap());
        let tokens = m.get_str_array("tokenizer.ggml.tokens").unwrap();
        assert_eq!((tokens.len(), tokens[3].as_str()), (24, "tok3▁é"));
        assert_eq!(m.get_f32_array("tokenizer.ggml.scores").unwrap()[5], -5.0);
        assert_eq!(
            m.get_i32_array("tokenizer.ggml.token_type").unwrap()[..4],
            [0, 1, 2, 0]
        );
        assert_eq!(
            m.get_usize_array("tokenizer.ggml.token_type").unwrap()[..3],
            [0, 1, 2]
        );
        assert_eq!(m.get_array("tokenizer.ggml.scores").unwrap().len(), 24);
        assert_eq!(m.get_usize("gemma3.block_count").unwrap(), 2);
    });
}

#[test]
fn wrong_type_and_missing_key_name_the_key() {
    with_metadata(|m| {
        let err = m.arch_f32("block_count").unwrap_err();
        match &err {
            GgufError::WrongType {
                key,
                expected,
                found,
            } => {
                assert_eq!(
                    (key.as_str(), *expected, found.as_str()),
                    ("gemma3.block_count", "f32", "u32 2")
                );
            }
            e => panic!("{e:?}"),
        }
        assert!(err.to_string().contains("gemma3.block_count"), "{err}");

        let err = m.get_str_array("tokenizer.ggml.scores").unwrap_err();
        assert!(
            err.to_string().contains("tokenizer.ggml.scores")
                && err.to_string().contains("array of 24 f32")
        );

        let err = m.get_u32("nope.key").unwrap_err();
        assert!(
            matches!(&err, GgufError::MissingKey { key } if key == "nope.key"),
            "{err}"
        );
        assert!(err.to_string().contains("nope.key"));

        // An optional key that is present with the wrong type is still an error.
        assert!(m.get_opt::<&str>("gemma3.block_count").is_err());
        assert_eq!(m.get_opt::<&str>("absent").unwrap(), None);
    });
}

#[test]
fn missing_architecture_is_named() {
    let m = Metadata::new();
    let err = m.arch_u32("block_count").unwrap_err();
    assert!(
        matches!(&err, GgufError::MissingKey { key } if key == "general.architecture"),
        "{err}"
    );
}
