//! The arithmetic a step asks of the executor, counted the way throughput is reported
//! (TFLOP/s): the matrix products' multiply-adds, two FLOPs each, and nothing else. Norms,
//! RoPE, the softmax and the activation are a few FLOPs an element against thousands a
//! weight row, and the token embedding is a gather, not a product: none of them is counted.

use crate::config::ModelConfig;

impl ModelConfig {
    /// FLOPs of the products one token at `position` runs: 2 per weight of every projection
    /// of every layer (q, k, v, o, and the gated FFN's gate, up and down: every architecture
    /// here has one), the LM head's 2 x `d_model` x `n_vocab` when `logits` (a prompt block
    /// computes logits for its last row only), and attention's `q·k` and weighted sum of `v`
    /// over the keys the token sees: 2 x `n_head` x (`head_dim_k` + `head_dim_v`) a key, for
    /// `position + 1` keys (causal), or the layer's sliding window where that is fewer.
    /// Saturates at `u64::MAX` rather than wrapping for a shape no model has.
    pub fn flops_per_token(&self, position: usize, logits: bool) -> u64 {
        let n = |v: usize| v as u64;
        let (d, q, kv) = (n(self.d_model), n(self.n_head), n(self.n_head_kv));
        let (hk, hv) = (n(self.head_dim_k), n(self.head_dim_v));
        let projections = [
            d.saturating_mul(q.saturating_mul(hk)),
            d.saturating_mul(kv.saturating_mul(hk)),
            d.saturating_mul(kv.saturating_mul(hv)),
            q.saturating_mul(hv).saturating_mul(d),
            d.saturating_mul(n(self.n_ff)).saturating_mul(3),
        ];
        let per_layer = projections
            .iter()
            .fold(0u64, |sum, &w| sum.saturating_add(w));
        let per_key = q.saturating_mul(hk.saturating_add(hv)).saturating_mul(2);
        let keys = self.layers.iter().fold(0u64, |sum, layer| {
            let seen = match layer.window {
                Some(w) => w.min(position.saturating_add(1)),
                None => position.saturating_add(1),
            };
            sum.saturating_add(n(seen))
        });
        let head = if logits {
            d.saturating_mul(n(self.n_vocab))
        } else {
            0
        };
        per_layer
            .saturating_mul(n(self.n_layer))
            .saturating_add(head)
            .saturating_mul(2)
            .saturating_add(per_key.saturating_mul(keys))
    }

    /// FLOPs of a prompt block of `n_tokens` at positions `start..start + n_tokens` with
    /// logits for its last row only, as a prefill computes them: the sum of
    /// [`ModelConfig::flops_per_token`] over its positions.
    pub fn prefill_flops(&self, start: usize, n_tokens: usize) -> u64 {
        (0..n_tokens).fold(0u64, |sum, i| {
            let logits = i + 1 == n_tokens;
            sum.saturating_add(self.flops_per_token(start.saturating_add(i), logits))
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Activation, LayerConfig, ModelConfig, RopeFreqs, RopeStyle};

    /// Two layers, the first with a window of 2 keys; 2 query heads over 1 KV head of 4
    /// dims; `d_model` 8, `n_ff` 16, 10 tokens.
    fn tiny() -> ModelConfig {
        let rope = RopeFreqs {
            base: 10_000.0,
            freq_scale: 1.0,
        };
        ModelConfig {
            arch: crate::Arch::Llama,
            n_layer: 2,
            d_model: 8,
            n_head: 2,
            n_head_kv: 1,
            head_dim_k: 4,
            head_dim_v: 4,
            n_ff: 16,
            n_vocab: 10,
            n_ctx_train: 64,
            rms_eps: 1e-6,
            n_rot: 4,
            rope_style: RopeStyle::Normal,
            attn_scale: 0.5,
            attn_softcap: None,
            embed_scale: None,
            final_softcap: None,
            activation: Activation::Silu,
            layers: vec![
                LayerConfig {
                    window: Some(2),
                    rope,
                },
                LayerConfig { window: None, rope },
            ],
        }
    }

    /// By hand: a layer's weights are q 8x8 = 64, k 8x4 = 32, v 32, o 64, gate, up and down
    /// 8x16 = 128 each: 576, over two layers 1,152, so 2,304 FLOPs; the LM head 8x10 = 80
    /// weights, 160 FLOPs; a key costs 2 x 2 heads x (4 + 4) = 32 FLOPs.
    #[test]
    fn counted_by_hand_on_a_tiny_config() {
        let c = tiny();
        // Position 0 sees one key in each layer.
        assert_eq!(c.flops_per_token(0, false), 2_304 + 32 * (1 + 1));
        // Position 5: the window's 2 keys and all 6; with the LM head.
        assert_eq!(c.flops_per_token(5, true), 2_304 + 160 + 32 * (2 + 6));
        // Positions 4, 5, 6 in one block, logits for position 6 only: keys 2+2+2 in the
        // windowed layer, 5+6+7 in the other.
        assert_eq!(c.prefill_flops(4, 3), 3 * 2_304 + 160 + 32 * (6 + 18));
        assert_eq!(c.prefill_flops(4, 0), 0);
    }

    #[test]
    fn a_shape_no_model_has_saturates() {
        let mut c = tiny();
        c.d_model = usize::MAX;
        assert_eq!(c.flops_per_token(0, true), u64::MAX);
    }
}
