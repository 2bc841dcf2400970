//! What a training run on the tape will hold in memory, known before the model loads: its
//! weights dequantized to f32, and per token of the longest sequence the values the tape
//! records (f64) and the gradients in flight.
//!
//! The count follows the ops of a block with every projection adapted: per layer about
//! `15 d + 7 kv + 7 n_ff + 7 r` values a token (`kv`: the keys' width; an adapted projection
//! keeps its product, `A x`, `B (A x)` and their sum), Gemma 3's four extra norms `4 d` more,
//! and the logits with their gradient, `2 n_vocab`. The backward holds at most as many
//! gradients as there are values, so the tape's part is counted twice.

use rullama_model::{Arch, ModelConfig};

/// Bytes a run needs: the weights, and each token of a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapeMemory {
    /// The model's tensors dequantized to f32.
    pub weights: u64,
    /// Each token of the sequence being trained.
    pub per_token: u64,
}

impl TapeMemory {
    /// The estimate for model `cfg` with `n_weights` values in all its tensors and an adapter
    /// of rank `rank`.
    pub fn of(cfg: &ModelConfig, n_weights: u64, rank: usize) -> TapeMemory {
        let d = cfg.d_model as u64;
        let kv = (cfg.n_head_kv * cfg.head_dim_k) as u64;
        let extra_norms = if cfg.arch == Arch::Gemma3 { 4 * d } else { 0 };
        let layer = 15 * d + 7 * kv + 7 * cfg.n_ff as u64 + 7 * rank as u64 + extra_norms;
        let values = cfg.n_layer as u64 * layer + 2 * cfg.n_vocab as u64;
        TapeMemory {
            weights: 4 * n_weights,
            per_token: 2 * 8 * values,
        }
    }

    /// Bytes for a sequence of `tokens`.
    pub fn total(&self, tokens: usize) -> u64 {
        self.weights
            .saturating_add(self.per_token.saturating_mul(tokens as u64))
    }

    /// The longest sequence that fits in `available` bytes (0: not even the weights).
    pub fn max_tokens(&self, available: u64) -> u64 {
        available.saturating_sub(self.weights) / self.per_token.max(1)
    }
}

/// The memory the system can give a process now (Linux's `MemAvailable`); `None` where it
/// cannot be read.
pub fn available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rullama_gguf::GgufFile;
    use rullama_synth::{Tiny, tiny_model};

    #[test]
    fn smollm2_135m_takes_about_six_megabytes_a_token() {
        // SmolLM2-135M's shapes: 30 layers, d 576, 3 KV heads of 64, n_ff 1536, 49,152 words.
        let file = GgufFile::from_bytes(tiny_model(Tiny::Smollm2, 1)).unwrap();
        let mut cfg = ModelConfig::from_gguf(&file).unwrap();
        (cfg.n_layer, cfg.d_model, cfg.n_head_kv, cfg.head_dim_k) = (30, 576, 3, 64);
        (cfg.n_ff, cfg.n_vocab) = (1536, 49_152);
        let m = TapeMemory::of(&cfg, 134_515_008, 8);
        // Values: 30 (15·576 + 7·192 + 7·1536 + 56) + 2·49,152 = 722,064, f64, twice.
        assert_eq!(m.per_token, 2 * 8 * 722_064);
        assert_eq!(m.weights, 4 * 134_515_008);
        assert_eq!(m.max_tokens(m.total(100)), 100);
        assert_eq!(m.max_tokens(m.weights - 1), 0);
    }
}
