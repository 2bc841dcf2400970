//! Tiny models for behavioural tests: every architecture the model crate runs, a few MB
//! each, with a synthetic tokenizer of the family's kind, built in memory from a seed; no
//! network, no files.

use crate::mix::Mix;
use crate::shapes::Preset;
use crate::write::Synth;

/// A tiny model's architecture and tokenizer kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tiny {
    /// `gemma3`: sliding and global layers, q/k norms, post-norms, tied; SPM, Gemma's
    /// template.
    Gemma3,
    /// `qwen2`: q/k/v biases, untied; byte-level BPE, ChatML.
    Qwen2,
    /// `llama` as Llama 2: SPM with a space prefix, no template.
    Llama,
    /// `llama` as SmolLM2: byte-level BPE, ChatML.
    Smollm2,
}

impl Tiny {
    /// Every tiny model.
    pub const ALL: [Tiny; 4] = [Tiny::Gemma3, Tiny::Qwen2, Tiny::Llama, Tiny::Smollm2];

    /// The preset it is written from (its shapes and its tokenizer).
    pub fn preset(self) -> Preset {
        match self {
            Tiny::Gemma3 => Preset::TinyGemma3,
            Tiny::Qwen2 => Preset::TinyQwen2,
            Tiny::Llama => Preset::TinyLlama,
            Tiny::Smollm2 => Preset::TinySmollm2,
        }
    }

    /// `general.architecture` of its file.
    pub fn arch_name(self) -> &'static str {
        self.preset().shape().family.arch_name()
    }
}

/// The GGUF bytes of tiny model `tiny` with Q8_0 weights drawn from `seed` (the same seed
/// gives the same bytes).
pub fn tiny_model(tiny: Tiny, seed: u64) -> Vec<u8> {
    tiny_model_with(tiny, Mix::Q8_0, seed)
}

/// [`tiny_model`] in the quant mix `mix` (Q4_K_M takes the k-quants where rows allow and
/// llama.cpp's fallbacks elsewhere).
pub fn tiny_model_with(tiny: Tiny, mix: Mix, seed: u64) -> Vec<u8> {
    let preset = tiny.preset();
    let synth = Synth {
        preset,
        mix,
        seed,
        threads: 1,
    };
    let mut out = Vec::new();
    synth
        .write_to(&preset.tokenizer_style().vocab(), &mut out)
        .expect("the tiny presets hold valid GGML shapes, and a Vec takes every write");
    out
}
