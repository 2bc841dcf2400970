//! Which GGML type each tensor gets, as `llama-quantize` would choose it.
//!
//! The rule for Q4_K_M is llama.cpp's `llama_tensor_get_type_impl` (`src/llama-quant.cpp`)
//! for `LLAMA_FTYPE_MOSTLY_Q4_K_M` without an importance matrix, for a dense model (no
//! experts, not Falcon, not 70B):
//! - 1-D tensors (norms, biases) stay F32: only 2-D `*.weight` tensors are quantized;
//! - `output.weight`, and `token_embd.weight` when the model ties it to the output: Q6_K,
//!   or Q8_0 when its row length is not a multiple of 256;
//! - `attn_v` and `ffn_down` of layer `i` of `n`: Q6_K when `use_more_bits(i, n)` (the
//!   first and last eighth of the layers, and every third layer between), else Q4_K;
//! - everything else (an untied `token_embd` included): Q4_K;
//! - then `tensor_type_fallback`: a row length that is not a multiple of 256 turns Q4_K
//!   into Q5_0 and Q6_K into Q8_0 (F16 if not even a multiple of 32).
//!
//! Q8_0 and F16 are the plain types for every 2-D tensor (their ftype's default, which the
//! rules above leave alone), norms and biases F32.

use rullama_gguf::GgmlType;

use crate::plan::{Role, TensorPlan};

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
}

/// llama.cpp's `use_more_bits` for layer `i` of `n`.
fn use_more_bits(i: usize, n: usize) -> bool {
    // C's `%` truncates, as Rust's does: a negative difference never gives 2.
    i < n / 8 || i >= 7 * n / 8 || (i as isize - (n / 8) as isize) % 3 == 2
}

impl Mix {
    /// Every mix.
    pub const ALL: [Mix; 3] = [Mix::Q4KM, Mix::Q8_0, Mix::F16];

    /// The name `--quant` takes.
    pub fn cli_name(self) -> &'static str {
        match self {
            Mix::Q4KM => "q4_k_m",
            Mix::Q8_0 => "q8_0",
            Mix::F16 => "f16",
        }
    }

    /// The mix called `name` ([`Mix::cli_name`]).
    pub fn from_name(name: &str) -> Option<Mix> {
        Mix::ALL.into_iter().find(|m| m.cli_name() == name)
    }

    /// `general.file_type`: llama.cpp's `llama_ftype`.
    pub fn file_type(self) -> u32 {
        match self {
            Mix::F16 => 1,
            Mix::Q8_0 => 7,
            Mix::Q4KM => 15,
        }
    }

    /// llama.cpp's name of the file type, as `llama-bench` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Mix::F16 => "F16",
            Mix::Q8_0 => "Q8_0",
            Mix::Q4KM => "Q4_K_M",
        }
    }

    /// The type of tensor `t` in a model of `n_layer` layers whose LM head is
    /// `token_embd` when `tied`.
    pub fn type_of(self, t: &TensorPlan, n_layer: usize, tied: bool) -> GgmlType {
        if t.dims.len() < 2 {
            return GgmlType::F32;
        }
        match self {
            Mix::F16 => GgmlType::F16,
            Mix::Q8_0 => GgmlType::Q8_0,
            Mix::Q4KM => fallback(q4_k_m(t, n_layer, tied), t.dims[0]),
        }
    }
}

fn q4_k_m(t: &TensorPlan, n_layer: usize, tied: bool) -> GgmlType {
    let lm_head = t.role == Role::Output || (t.role == Role::TokenEmbd && tied);
    let more_bits =
        matches!(t.role, Role::AttnV | Role::FfnDown) && use_more_bits(t.layer, n_layer);
    if lm_head && !t.dims[0].is_multiple_of(256) {
        GgmlType::Q8_0
    } else if lm_head || more_bits {
        GgmlType::Q6K
    } else {
        GgmlType::Q4K
    }
}

/// `tensor_type_fallback`: the type a row of `n_in` values can hold.
fn fallback(t: GgmlType, n_in: u64) -> GgmlType {
    if n_in.is_multiple_of(t.layout().block_size as u64) {
        return t;
    }
    let to = match t {
        GgmlType::Q4K => GgmlType::Q5_0,
        GgmlType::Q6K => GgmlType::Q8_0,
        other => other,
    };
    if n_in.is_multiple_of(to.layout().block_size as u64) {
        to
    } else {
        GgmlType::F16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gemma-3-270m's Q4_K_M file (18 layers) has Q6_K ffn_down in exactly these layers.
    #[test]
    fn use_more_bits_matches_the_270m_file() {
        let layers: Vec<usize> = (0..18).filter(|&i| use_more_bits(i, 18)).collect();
        assert_eq!(layers, [0, 1, 4, 7, 10, 13, 15, 16, 17]);
    }

    #[test]
    fn fallbacks() {
        assert_eq!(fallback(GgmlType::Q4K, 640), GgmlType::Q5_0);
        assert_eq!(fallback(GgmlType::Q6K, 640), GgmlType::Q8_0);
        assert_eq!(fallback(GgmlType::Q4K, 2560), GgmlType::Q4K);
        assert_eq!(fallback(GgmlType::Q8_0, 48), GgmlType::F16);
    }
}
