//! head_norm_rope_kv's parity check: head_norm_rope's machinery
//! ([`crate::ops::head_norm_rope`]'s `Case`) with a cache.

use crate::device::Gpu;
use crate::error::GpuError;
use crate::ops::head_norm_rope::Case;
use crate::ops::kv::{KvDtype, KvLayout};
use crate::parity::data::Rng;
use crate::parity::{Check, Compare};

/// Tolerance: q and k as `head_norm_rope` (the same code); the K cache that bound, grown by
/// the f16 rounding of the value it bounds (1 + 2^-10), plus kv_append's (f32 exact; f16 one
/// ulp); the V cache kv_append's; positions not written and everything outside the heads
/// untouched.
pub const CHECK: Check = Check {
    name: "head_norm_rope_kv",
    tolerance: "q,k as head_norm_rope; K that*(1+2^-10) + kv_append's; V kv_append's",
    case: parity_case,
};

/// A random case: `n_kv_heads` k heads (the cache's) for more q heads (grouped-query
/// attention), a cache of either type a little longer than the tokens.
fn random_case(rng: &mut Rng) -> Case {
    let op = Case::random_op(rng);
    let dtype = rng.pick(&[KvDtype::F32, KvDtype::F16]);
    let n_kv_heads = rng.range(1, 4);
    Case {
        op,
        q_heads: n_kv_heads * rng.range(2, 5),
        k_heads: n_kv_heads,
        norm: rng.bool(),
        fused: rng.bool(),
        pad: rng.range(0, 3),
        cache: Some(KvLayout {
            dtype,
            n_kv_heads,
            head_dim: op.head_dim,
            max_len: rng.range(op.n_tokens + 1, 40),
        }),
    }
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let case = random_case(rng);
    let inp = case.inputs(rng.next_u64());
    Ok(case.compare(&inp, &case.run(gpu, &inp, true)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::rope::RopeStyle;
    use crate::testutil;

    #[test]
    fn head_norm_rope_kv_matches_reference() {
        testutil::parity("head_norm_rope_kv", 12, 97);
    }

    #[test]
    fn cache_equals_head_norm_rope_then_kv_append() {
        let Some(gpu) = testutil::gpu() else { return };
        let shapes = [
            (RopeStyle::Neox, 256, 256, 4, 1, true),
            (RopeStyle::Neox, 64, 64, 14, 2, false),
            (RopeStyle::Normal, 64, 64, 9, 3, false),
            (RopeStyle::Normal, 128, 32, 4, 2, true),
        ];
        for shape in shapes {
            let (_, head_dim, _, _, n_kv_heads, _) = shape;
            for dtype in [KvDtype::F16, KvDtype::F32] {
                for (n_tokens, fused) in [(1, true), (1, false), (5, true), (5, false)] {
                    let cache = KvLayout {
                        dtype,
                        n_kv_heads,
                        head_dim,
                        max_len: 24,
                    };
                    let case = Case {
                        pad: 1,
                        cache: Some(cache),
                        ..Case::of_shape(shape, n_tokens, fused)
                    };
                    let inp = case.inputs(0x5eed ^ (head_dim * n_tokens) as u64);
                    let one = case.run(gpu, &inp, true).unwrap();
                    let two = case.run(gpu, &inp, false).unwrap();
                    assert!(one == two, "{case:?}: the fused op differs");
                    // And both are right.
                    let c = case.compare(&inp, &one);
                    assert!(c.max_ratio <= 1.0, "{}", c.worst);
                }
            }
        }
    }
}
