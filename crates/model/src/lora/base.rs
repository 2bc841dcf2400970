//! Which base an adapter was trained on: a fingerprint of the base's metadata, recorded in
//! the adapters `rullama finetune` writes (key [`FINGERPRINT_KEY`]) and checked when one is
//! applied or merged, so that an adapter trained on one model is refused by another of the
//! same architecture and shapes.
//!
//! The fingerprint covers what defines the model a block computes and the tokens it reads:
//! every `{arch}.*` key (shapes, RoPE, norms, windows, context) and the tokenizer's
//! `tokenizer.ggml.*` keys (its model, vocabulary, merges and special ids). It leaves out the
//! `general.*` keys (names, licence, file type): the same model quantized another way, or
//! renamed, is the same base. Two models of the same hyper-parameters and vocabulary whose
//! weights differ (a base and its instruct tune) share a fingerprint; only the weights tell
//! them apart, which no check before running can afford to read. llama.cpp's adapters carry
//! no fingerprint; an adapter without one is checked by architecture and shapes alone.

use rullama_gguf::Metadata;

/// The key under which an adapter records its base's fingerprint (a `u64`).
pub const FINGERPRINT_KEY: &str = "adapter.base.fingerprint";

/// The fingerprint of a model's metadata `meta` for architecture `arch`: FNV-1a over each
/// covered key and its value, in key order.
pub fn fingerprint(meta: &Metadata, arch: &str) -> u64 {
    let prefix = format!("{arch}.");
    let mut keys: Vec<(&str, String)> = meta
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix) || k.starts_with("tokenizer.ggml."))
        .map(|(k, v)| (k, format!("{v:?}")))
        .collect();
    keys.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (k, v) in keys {
        for b in k.bytes().chain([0]).chain(v.bytes()).chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lora::{LoraAdapter, LoraError, LoraPair};
    use crate::{CpuBackend, Model, ModelError};
    use rullama_gguf::{GgufFile, GgufWriter};
    use rullama_synth::{Mix, Tiny, tiny_model, tiny_model_with};

    fn fp(bytes: Vec<u8>) -> u64 {
        let file = GgufFile::from_bytes(bytes).unwrap();
        fingerprint(file.metadata(), file.metadata().architecture().unwrap())
    }

    #[test]
    fn the_same_model_in_another_format_is_the_same_base() {
        let q8 = fp(tiny_model_with(Tiny::Smollm2, Mix::Q8_0, 1));
        assert_eq!(q8, fp(tiny_model_with(Tiny::Smollm2, Mix::F32, 2)));
        assert_ne!(
            q8,
            fp(tiny_model(Tiny::Llama, 1)),
            "two llama models of other shapes"
        );
    }

    #[test]
    fn an_adapter_of_another_base_is_refused() {
        let bytes = tiny_model(Tiny::Smollm2, 1);
        let file = GgufFile::from_bytes(bytes.clone()).unwrap();
        // The same shapes and tensors, another RoPE base: another model.
        let mut w = GgufWriter::from_file(&file);
        w.set("llama.rope.freq_base", 5000.0f32);
        let mut other = Vec::new();
        w.write_to(&mut other).unwrap();
        let pairs = vec![LoraPair {
            base: "blk.0.attn_q.weight".into(),
            n_in: 128,
            n_out: 128,
            rank: 1,
            a: vec![0.01; 128],
            b: vec![0.01; 128],
        }];
        let adapter = LoraAdapter::from_pairs("a.gguf", "llama", 1.0, pairs)
            .unwrap()
            .with_base(fp(bytes.clone()));
        // Written and read back, it keeps its base.
        let mut out = Vec::new();
        adapter.to_gguf().unwrap().write_to(&mut out).unwrap();
        let adapter = LoraAdapter::from_gguf_bytes(out, "a.gguf").unwrap();
        assert_eq!(adapter.base(), Some(fp(bytes)));

        let mut own = Model::load(&file, CpuBackend::new()).unwrap();
        own.apply_loras(&[(&adapter, 1.0)]).unwrap();
        let other = GgufFile::from_bytes(other).unwrap();
        let mut model = Model::load(&other, CpuBackend::new()).unwrap();
        let err = model.apply_loras(&[(&adapter, 1.0)]).unwrap_err();
        assert!(
            matches!(err, ModelError::Lora(LoraError::OtherBase { .. })),
            "{err}"
        );
    }
}
