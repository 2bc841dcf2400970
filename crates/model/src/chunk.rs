//! Long prompts in steps of at most a chunk of tokens: llama.cpp's physical batch (`-ub`).
//!
//! A step's activations grow with its tokens: the widest (a stacked gate|up, or with every
//! row's logits the LM head's output) takes `tokens × width` f32s in one buffer, which on
//! the GPU must fit one storage binding and otherwise takes memory for nothing, since a
//! prompt's tokens need not go through the graph at once. [`crate::Session`] therefore runs
//! a block longer than its chunk as consecutive steps of at most [`chunk_len`] tokens, each
//! at its own start position over the same KV cache (the attention of a later chunk reads
//! the keys the earlier ones stored, as decode reads the prompt's). Every row's arithmetic
//! is that of one step, so the logits are the same: bit for bit on the CPU reference, to the
//! kernels' rounding on the GPU, where a shorter block may take other tiles.

use std::num::NonZeroUsize;
use std::ops::Range;

use crate::config::ModelConfig;
use crate::graph::OutputRows;

/// Tokens a step of a long prompt takes at most, unless a model or session sets another
/// ([`crate::Model::set_ubatch`], [`crate::Session::set_ubatch`]; a front end's `--ubatch`).
///
/// Why 4096: a chunk's products then fill the GPU's tensor cores and take the dense route
/// (`rullama_kernels::ops::matmul_dense`), and the attention of later chunks rereads fewer
/// cached keys. gemma3-4b's 8,192-token prefill on an H200 (docs/PERF.md, D-ubatch) ran at
/// 9,070 / 10,574 / 11,837 / 12,618 t/s with chunks of 1024 / 2048 / 4096 / 8192 tokens,
/// and its 32,768-token one at 7,852 / 8,649 / 9,159 with 2048 / 4096 / 8192. 4096 keeps
/// within 6% of 8192 at half its activations: the widest, a 4B–8B model's gate|up (20,480
/// to 37,888 f32s a token), stays at 335–620 MB a chunk, inside a 4 GiB binding.
/// llama.cpp's default is 512.
pub const DEFAULT_UBATCH: NonZeroUsize = NonZeroUsize::new(4096).expect("non-zero");

/// The f32s per token of a step's widest activation: the residual stream (with room for a
/// norm's output beside it), the stacked q|k|v and gate|up products (each one buffer on the
/// GPU), the attention's output, and the logits when every row's are asked for (`Last`
/// computes one row of them, whatever the chunk).
pub(crate) fn widest_row(cfg: &ModelConfig, output: OutputRows) -> usize {
    let qkv = cfg.n_head * cfg.head_dim_k + cfg.n_head_kv * (cfg.head_dim_k + cfg.head_dim_v);
    let widths = [
        2 * cfg.d_model,
        qkv,
        2 * cfg.n_ff,
        cfg.n_head * cfg.head_dim_v,
    ];
    let logits = match output {
        OutputRows::All => cfg.n_vocab,
        OutputRows::Last => 0,
    };
    widths.into_iter().fold(logits, usize::max)
}

/// Tokens per step: `ubatch`, lowered where needed so that `tokens × widest_row` f32s fit
/// `max_bytes` (the executor's largest activation, a storage binding on the GPU; `None`: no
/// such bound). At least 1: a model whose one row does not fit is the executor's error to
/// report, naming the activation.
pub(crate) fn chunk_len(ubatch: NonZeroUsize, widest_row: usize, max_bytes: Option<u64>) -> usize {
    let row_bytes = (widest_row as u64).saturating_mul(4).max(1);
    let fit = max_bytes.map_or(usize::MAX, |limit| {
        usize::try_from(limit / row_bytes).unwrap_or(usize::MAX)
    });
    ubatch.get().min(fit).max(1)
}

/// The steps of a block of `n` tokens in chunks of `len`: consecutive ranges of the block,
/// each of `len` tokens but the last (the remainder), so a long prompt runs at most two
/// step shapes (two plans on the GPU).
pub(crate) fn chunks(n: usize, len: usize) -> impl Iterator<Item = Range<usize>> {
    let len = len.max(1);
    (0..n.div_ceil(len)).map(move |i| i * len..((i + 1) * len).min(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn nz(n: usize) -> NonZeroUsize {
        NonZeroUsize::new(n).unwrap()
    }

    proptest! {
        /// Whatever the ubatch, the widths and the limit: a chunk's widest activation fits
        /// the binding wherever one row does, a chunk is never longer than the ubatch nor
        /// empty, and the chunks cover the block in order with only the last one short.
        #[test]
        fn chunks_fit_the_binding(
            ubatch in 1usize..100_000,
            widest in 1usize..2_000_000,
            limit in 1u64..(8u64 << 30),
            n in 1usize..100_000,
        ) {
            let len = chunk_len(nz(ubatch), widest, Some(limit));
            prop_assert!(len >= 1 && len <= ubatch);
            if widest as u64 * 4 <= limit {
                prop_assert!(len as u64 * widest as u64 * 4 <= limit);
            }
            let steps: Vec<_> = chunks(n, len).collect();
            prop_assert_eq!(steps[0].start, 0);
            prop_assert_eq!(steps.last().unwrap().end, n);
            for (i, s) in steps.iter().enumerate() {
                prop_assert!(!s.is_empty() && s.len() <= len);
                if i + 1 < steps.len() {
                    prop_assert_eq!(s.len(), len);
                    prop_assert_eq!(s.end, steps[i + 1].start);
                }
            }
        }
    }

    /// The ubatch where the binding allows it; the binding's share where it does not (a
    /// 262,144-token vocabulary's logits are 1 MiB a row: 128 rows in WebGPU's minimum
    /// binding of 128 MiB); no bound on the host.
    #[test]
    fn the_binding_lowers_the_ubatch() {
        assert_eq!(chunk_len(nz(2048), 20_480, Some(4 << 30)), 2048);
        assert_eq!(chunk_len(nz(2048), 262_144, Some(128 << 20)), 128);
        assert_eq!(chunk_len(nz(2048), 262_144, None), 2048);
        assert_eq!(chunk_len(nz(2048), 1 << 30, Some(1 << 20)), 1);
        let v: Vec<_> = chunks(37, 8).collect();
        assert_eq!(v, [0..8, 8..16, 16..24, 24..32, 32..37]);
        assert_eq!(chunks(8, 8).collect::<Vec<_>>(), vec![0..8]);
    }
}
