//! The shapes synthetic models take, one table entry each: the real models `cargo xtask
//! synth` imitates, and tiny ones for tests.
//!
//! Every real figure is from the model's `config.json` on Hugging Face (the text config for
//! Gemma 3 4B), named here by its key there; llama.cpp's converters write them to the GGUF
//! keys `plan.rs` names. The vocabulary size of the written file is the tokenizer's, which
//! may differ from the figure here (Gemma 3 4B pads its 262144 tokens to 262208 rows; the
//! Llama 3 tokenizer is not in our cache, so a llama file takes SmolLM2's 49152).

use crate::tokenizer::TokenizerStyle;

/// `general.architecture` of a synthetic file: which block and which rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Gemma 3: GEGLU, q/k norms, post-norms, sliding window on 5 layers of 6, tied
    /// embeddings.
    Gemma3,
    /// Qwen 2 / 2.5: the Llama block with q/k/v biases.
    Qwen2,
    /// Llama 2 and 3, SmolLM2: SwiGLU, no biases.
    Llama,
}

impl Family {
    /// Its `general.architecture` value.
    pub fn arch_name(self) -> &'static str {
        match self {
            Family::Gemma3 => "gemma3",
            Family::Qwen2 => "qwen2",
            Family::Llama => "llama",
        }
    }
}

/// The hyper-parameters of one model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Which architecture.
    pub family: Family,
    /// `num_hidden_layers`
    pub n_layer: usize,
    /// `hidden_size`
    pub d_model: usize,
    /// `num_attention_heads`
    pub n_head: usize,
    /// `num_key_value_heads`
    pub n_head_kv: usize,
    /// `head_dim` (else `hidden_size / num_attention_heads`)
    pub head_dim: usize,
    /// `intermediate_size`
    pub n_ff: usize,
    /// `vocab_size` (documentation and the size tests; the file takes the tokenizer's)
    pub n_vocab: usize,
    /// `max_position_embeddings`
    pub n_ctx_train: usize,
    /// `rope_theta` (Gemma 3: of the global layers; sliding layers use 10000, a rule
    /// llama.cpp applies, not a key)
    pub rope_base: f32,
    /// `rope_scaling.factor` when `rope_type` is linear
    pub rope_linear: Option<f32>,
    /// `rms_norm_eps`
    pub rms_eps: f32,
    /// `sliding_window` (Gemma 3; every 6th layer is global, a rule in llama.cpp)
    pub sliding_window: Option<usize>,
    /// `tie_word_embeddings`: no `output.weight`, the LM head is `token_embd`
    pub tied: bool,
}

/// The models `--arch` names. The `tiny-*` ones are for tests: a few MB, small enough to
/// run on the CPU reference in milliseconds, shaped to take both the k-quants and their
/// fallback types, each with its family's synthetic tokenizer by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// google/gemma-3-270m's shapes.
    Gemma3_270m,
    /// Qwen/Qwen2.5-0.5B-Instruct's shapes.
    Qwen25_0_5b,
    /// HuggingFaceTB/SmolLM2-135M-Instruct's shapes.
    Smollm2_135m,
    /// google/gemma-3-1b-it's shapes.
    Gemma3_1b,
    /// google/gemma-3-4b-it's text model's shapes.
    Gemma3_4b,
    /// Qwen/Qwen2.5-1.5B-Instruct's shapes.
    Qwen25_1_5b,
    /// Qwen/Qwen2.5-7B-Instruct's shapes.
    Qwen25_7b,
    /// meta-llama/Meta-Llama-3-8B's shapes.
    Llama8b,
    /// Tiny Gemma 3: 6 layers (5 sliding, 1 global), d_model 256.
    TinyGemma3,
    /// Tiny Qwen 2: 3 layers, d_model 256, q/k/v biases.
    TinyQwen2,
    /// Tiny Llama 2: 2 layers, d_model 192 (rows that take the k-quants' fallbacks).
    TinyLlama,
    /// Tiny SmolLM2: 2 layers, d_model 128.
    TinySmollm2,
}

impl Preset {
    /// Every preset, real shapes first.
    pub const ALL: [Preset; 12] = [
        Preset::Gemma3_270m,
        Preset::Qwen25_0_5b,
        Preset::Smollm2_135m,
        Preset::Gemma3_1b,
        Preset::Gemma3_4b,
        Preset::Qwen25_1_5b,
        Preset::Qwen25_7b,
        Preset::Llama8b,
        Preset::TinyGemma3,
        Preset::TinyQwen2,
        Preset::TinyLlama,
        Preset::TinySmollm2,
    ];

    /// The name `--arch` takes.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Gemma3_270m => "gemma3-270m",
            Preset::Qwen25_0_5b => "qwen2.5-0.5b",
            Preset::Smollm2_135m => "smollm2-135m",
            Preset::Gemma3_1b => "gemma3-1b",
            Preset::Gemma3_4b => "gemma3-4b",
            Preset::Qwen25_1_5b => "qwen2.5-1.5b",
            Preset::Qwen25_7b => "qwen2.5-7b",
            Preset::Llama8b => "llama-8b",
            Preset::TinyGemma3 => "tiny-gemma3",
            Preset::TinyQwen2 => "tiny-qwen2",
            Preset::TinyLlama => "tiny-llama",
            Preset::TinySmollm2 => "tiny-smollm2",
        }
    }

    /// The preset called `name` ([`Preset::name`]).
    pub fn from_name(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name() == name)
    }

    /// One line for `--help`.
    pub fn about(self) -> &'static str {
        match self {
            Preset::TinyGemma3 => {
                "6 layers (5 sliding, 1 global), d_model 256, q/k norms, tied; SPM tokenizer, Gemma chat template"
            }
            Preset::TinyQwen2 => {
                "3 layers, d_model 256, q/k/v biases, untied; byte-level BPE (qwen2), ChatML"
            }
            Preset::TinyLlama => {
                "2 layers, d_model 192 (k-quant fallbacks), tied; SPM tokenizer (Llama 2 style), no template"
            }
            Preset::TinySmollm2 => {
                "llama, 2 layers, d_model 128, tied; byte-level BPE (smollm), ChatML"
            }
            Preset::Gemma3_270m => "google/gemma-3-270m's shapes",
            Preset::Qwen25_0_5b => "Qwen/Qwen2.5-0.5B-Instruct's shapes",
            Preset::Smollm2_135m => "HuggingFaceTB/SmolLM2-135M-Instruct's shapes",
            Preset::Gemma3_1b => "google/gemma-3-1b-it's shapes",
            Preset::Gemma3_4b => "google/gemma-3-4b-it's shapes (its text model)",
            Preset::Qwen25_1_5b => "Qwen/Qwen2.5-1.5B-Instruct's shapes",
            Preset::Qwen25_7b => "Qwen/Qwen2.5-7B-Instruct's shapes",
            Preset::Llama8b => "meta-llama/Meta-Llama-3-8B's shapes",
        }
    }

    /// Whether this is one of the tiny test presets.
    pub fn is_tiny(self) -> bool {
        matches!(
            self,
            Preset::TinyGemma3 | Preset::TinyQwen2 | Preset::TinyLlama | Preset::TinySmollm2
        )
    }

    /// The synthetic tokenizer of the family this preset belongs to: what a file gets when
    /// no real tokenizer is given.
    pub fn tokenizer_style(self) -> TokenizerStyle {
        match self.shape().family {
            Family::Gemma3 => TokenizerStyle::Gemma,
            Family::Qwen2 => TokenizerStyle::Qwen2,
            Family::Llama => match self {
                Preset::Smollm2_135m | Preset::TinySmollm2 => TokenizerStyle::Smollm2,
                _ => TokenizerStyle::Llama,
            },
        }
    }

    /// Its hyper-parameters.
    pub fn shape(self) -> Shape {
        match self {
            // google/gemma-3-270m config.json: the real file's shapes, for profiles on a
            // machine the real file has not reached.
            Preset::Gemma3_270m => Shape {
                family: Family::Gemma3,
                n_layer: 18,
                d_model: 640,
                n_head: 4,
                n_head_kv: 1,
                head_dim: 256,
                n_ff: 2048,
                n_vocab: 262_144,
                n_ctx_train: 32_768,
                rope_base: 1_000_000.0,
                rope_linear: None,
                rms_eps: 1e-6,
                sliding_window: Some(512),
                tied: true,
            },
            // Qwen/Qwen2.5-0.5B-Instruct config.json.
            Preset::Qwen25_0_5b => Shape {
                family: Family::Qwen2,
                n_layer: 24,
                d_model: 896,
                n_head: 14,
                n_head_kv: 2,
                head_dim: 64,
                n_ff: 4864,
                n_vocab: 151_936,
                n_ctx_train: 32_768,
                rope_base: 1_000_000.0,
                rope_linear: None,
                rms_eps: 1e-6,
                sliding_window: None,
                tied: true,
            },
            // HuggingFaceTB/SmolLM2-135M-Instruct config.json (the same figures as the cached
            // real file's GGUF keys). Rows of 576 are not whole k-quant blocks, so a Q4_K_M
            // twin takes llama.cpp's fallback types (the real file is Q4_1 throughout).
            Preset::Smollm2_135m => Shape {
                family: Family::Llama,
                n_layer: 30,
                d_model: 576,
                n_head: 9,
                n_head_kv: 3,
                head_dim: 64,
                n_ff: 1536,
                n_vocab: 49_152,
                n_ctx_train: 8192,
                rope_base: 100_000.0,
                rope_linear: None,
                rms_eps: 1e-5,
                sliding_window: None,
                tied: true,
            },
            // google/gemma-3-1b-it config.json.
            Preset::Gemma3_1b => Shape {
                family: Family::Gemma3,
                n_layer: 26,
                d_model: 1152,
                n_head: 4,
                n_head_kv: 1,
                head_dim: 256,
                n_ff: 6912,
                n_vocab: 262_144,
                n_ctx_train: 32_768,
                rope_base: 1_000_000.0,
                rope_linear: None,
                rms_eps: 1e-6,
                sliding_window: Some(512),
                tied: true,
            },
            // google/gemma-3-4b-it config.json, `text_config`.
            Preset::Gemma3_4b => Shape {
                family: Family::Gemma3,
                n_layer: 34,
                d_model: 2560,
                n_head: 8,
                n_head_kv: 4,
                head_dim: 256,
                n_ff: 10_240,
                n_vocab: 262_208,
                n_ctx_train: 131_072,
                rope_base: 1_000_000.0,
                rope_linear: Some(8.0),
                rms_eps: 1e-6,
                sliding_window: Some(1024),
                tied: true,
            },
            // Qwen/Qwen2.5-1.5B-Instruct config.json.
            Preset::Qwen25_1_5b => Shape {
                family: Family::Qwen2,
                n_layer: 28,
                d_model: 1536,
                n_head: 12,
                n_head_kv: 2,
                head_dim: 128,
                n_ff: 8960,
                n_vocab: 151_936,
                n_ctx_train: 32_768,
                rope_base: 1_000_000.0,
                rope_linear: None,
                rms_eps: 1e-6,
                sliding_window: None,
                tied: true,
            },
            // Qwen/Qwen2.5-7B-Instruct config.json.
            Preset::Qwen25_7b => Shape {
                family: Family::Qwen2,
                n_layer: 28,
                d_model: 3584,
                n_head: 28,
                n_head_kv: 4,
                head_dim: 128,
                n_ff: 18_944,
                n_vocab: 152_064,
                n_ctx_train: 32_768,
                rope_base: 1_000_000.0,
                rope_linear: None,
                rms_eps: 1e-6,
                sliding_window: None,
                tied: false,
            },
            // meta-llama/Meta-Llama-3-8B config.json (Llama 3, not 3.1: 3.1's RoPE factors,
            // `rope_freqs.weight`, are not implemented in rullama).
            Preset::Llama8b => Shape {
                family: Family::Llama,
                n_layer: 32,
                d_model: 4096,
                n_head: 32,
                n_head_kv: 8,
                head_dim: 128,
                n_ff: 14_336,
                n_vocab: 128_256,
                n_ctx_train: 8192,
                rope_base: 500_000.0,
                rope_linear: None,
                rms_eps: 1e-5,
                sliding_window: None,
                tied: false,
            },
            // Six layers: five sliding, one global; rows of 256 take the k-quants.
            Preset::TinyGemma3 => Shape {
                family: Family::Gemma3,
                n_layer: 6,
                d_model: 256,
                n_head: 4,
                n_head_kv: 2,
                head_dim: 64,
                n_ff: 512,
                n_vocab: 384,
                n_ctx_train: 256,
                rope_base: 1_000_000.0,
                rope_linear: Some(8.0),
                rms_eps: 1e-6,
                sliding_window: Some(4),
                tied: true,
            },
            // Untied, with biases; rows of 256 take the k-quants.
            Preset::TinyQwen2 => Shape {
                family: Family::Qwen2,
                n_layer: 3,
                d_model: 256,
                n_head: 4,
                n_head_kv: 2,
                head_dim: 64,
                n_ff: 768,
                n_vocab: 384,
                n_ctx_train: 256,
                rope_base: 1_000_000.0,
                rope_linear: None,
                rms_eps: 1e-6,
                sliding_window: None,
                tied: false,
            },
            // Rows of 192 are not whole k-quant blocks: the Q5_0 / Q8_0 fallbacks.
            Preset::TinyLlama => Shape {
                family: Family::Llama,
                n_layer: 2,
                d_model: 192,
                n_head: 3,
                n_head_kv: 1,
                head_dim: 64,
                n_ff: 512,
                n_vocab: 384,
                n_ctx_train: 256,
                rope_base: 100_000.0,
                rope_linear: None,
                rms_eps: 1e-5,
                sliding_window: None,
                tied: true,
            },
            // SmolLM2's block at its smallest: heads of 64 (the smallest the GPU attention
            // takes, as the real file's), rows of 128 (Q5_0 / Q8_0 in Q4_K_M, as 576 is in
            // the real file).
            Preset::TinySmollm2 => Shape {
                family: Family::Llama,
                n_layer: 2,
                d_model: 128,
                n_head: 2,
                n_head_kv: 1,
                head_dim: 64,
                n_ff: 384,
                n_vocab: 384,
                n_ctx_train: 256,
                rope_base: 100_000.0,
                rope_linear: None,
                rms_eps: 1e-5,
                sliding_window: None,
                tied: true,
            },
        }
    }
}
