//! The quant mixes a synthetic file can be written in. Which GGML type each tensor gets is
//! llama-quantize's rule, kept in one place for this crate and `rullama quantize`:
//! `rullama_quant::mix` (the LM head Q6_K in Q4_K_M, attn_v and ffn_down Q6_K in some
//! layers, the fallbacks for rows that are not whole blocks, 1-D tensors F32).

use rullama_quant::mix::FileType;

/// The quant mix of a synthetic file, as llama-quantize would make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// llama-quantize's Q4_K_M: Q4_K with Q6_K where it gives more bits, and fallbacks for
    /// rows that are not whole super-blocks.
    Q4KM,
    /// Every matrix Q8_0.
    Q8_0,
    /// Every matrix F16.
    F16,
    /// Every tensor F32: what a converter writes before quantization (`rullama quantize`'s
    /// tests start from it).
    F32,
}

impl Mix {
    /// Every mix.
    pub const ALL: [Mix; 4] = [Mix::Q4KM, Mix::Q8_0, Mix::F16, Mix::F32];

    /// The name `--quant` takes.
    pub fn cli_name(self) -> &'static str {
        match self {
            Mix::Q4KM => "q4_k_m",
            Mix::Q8_0 => "q8_0",
            Mix::F16 => "f16",
            Mix::F32 => "f32",
        }
    }

    /// The mix called `name` ([`Mix::cli_name`]).
    pub fn from_name(name: &str) -> Option<Mix> {
        Mix::ALL.into_iter().find(|m| m.cli_name() == name)
    }

    /// The llama-quantize file type it is.
    pub fn ftype(self) -> FileType {
        match self {
            Mix::Q4KM => FileType::Q4KM,
            Mix::Q8_0 => FileType::Q8_0,
            Mix::F16 => FileType::F16,
            Mix::F32 => FileType::F32,
        }
    }

    /// `general.file_type`: llama.cpp's `llama_ftype`.
    pub fn file_type(self) -> u32 {
        self.ftype().id()
    }

    /// llama.cpp's name of the file type, as `llama-bench` prints it.
    pub fn name(self) -> &'static str {
        self.ftype().name()
    }
}
