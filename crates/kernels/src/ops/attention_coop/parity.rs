//! The tensor-core attention's CPU reference (attention's, with the bound of the module doc)
//! and parity checks.

use super::*;
use crate::device::Gpu;
use crate::ops::attention::{Arith, Case, HEAD_DIMS, Path, Reference};
use crate::ops::matmul_coop::{coop_device, f16_err};
use crate::parity::data::Rng;
use crate::parity::{Check, Compare, U};

/// [`Attention::reference`] with the tensor-core kernel's bound (module doc) for its keys split
/// `splits` ways; `f16_q`: every q is an f16 value, so its rounding errs only where the device
/// may flush a subnormal.
#[allow(clippy::too_many_arguments)]
pub fn reference(
    attn: &Attention,
    l: &KvLayout,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    pos: &[u32],
    f16_q: bool,
    splits: usize,
) -> Reference {
    let hd = l.head_dim as f64;
    let q_err: Vec<f64> = q
        .iter()
        .map(|&x| {
            let x = f64::from(x).abs();
            let rounding = match f16_q {
                false => f16_err(x),
                true if x < 2.0 / 16384.0 => x + U,
                true => 0.0,
            };
            rounding + 3.0 * hd * U * x
        })
        .collect();
    // A row's 4 partial maxima and sums (one per invocation of its row) combined, and with
    // split keys each split's sum and output rescaled once more by the combine. (A split's
    // weights exp(s - m_s) are rounded at least as large as the unsplit exp(s - m) / l, so
    // their f16 rounding stays within the unsplit bound's.)
    let splits = if splits > 1 { 2 * splits } else { 0 };
    let arith = Arith {
        q_err: Some(&q_err),
        p_f16: true,
        combines: 4 + splits,
    };
    attn.reference_with(l, q, arith, k, v, pos)
}

/// Prompt blocks over an f16 cache, against [`reference()`].
pub const CHECK: Check = Check {
    name: "attention_coop",
    tolerance: "attention's with q in f16 + (4hd+1)u dots, 4 partials; + sum e16(p_j) + (4n+1)u, times max|v|",
    case: parity_case,
};

/// The same with q drawn as f16 values: the scores then err only by their sums, so the bound
/// is tight enough to catch a weight off by a few f16 ulps.
pub const EXACT_CHECK: Check = Check {
    name: "attention_coop_exact",
    tolerance: "as attention_coop, q exact: (4hd+1)u dots, 4 partials; + sum e16(p_j) + (4n+1)u",
    case: exact_case,
};

/// One random prompt block the kernel takes: GQA groups of 1 to 8 heads, windows, soft-caps,
/// blocks of up to 79 tokens (at one head a group, up to two 64-row tiles; rarely a multiple
/// of 64 rows) after a random history.
fn random_case(rng: &mut Rng) -> Case {
    let head_dim = rng.pick(&HEAD_DIMS);
    let n_kv_heads = rng.range(1, 3);
    let n_heads = n_kv_heads * rng.range(1, 9);
    let max_len = KEY_BLOCK * rng.range(1, 25);
    let n_tokens = rng.range(2, 80).min(max_len);
    let layout = KvLayout {
        dtype: KvDtype::F16,
        n_kv_heads,
        head_dim,
        max_len,
    };
    let attn = attention::random_attention(rng, n_tokens, n_heads, head_dim, max_len);
    Case {
        layout,
        attn,
        start: rng.range(0, max_len - n_tokens + 1),
        q_gain: rng.pick(&[1.0, 4.0]),
    }
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_case(gpu, rng, false)
}

fn exact_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_case(gpu, rng, true)
}

/// A random case on the tensor cores, its keys split as [`random_splits`] draws; `f16_q`: q
/// drawn as f16 values.
fn coop_case(gpu: &Gpu, rng: &mut Rng, f16_q: bool) -> Result<Compare, GpuError> {
    coop_device(gpu)?;
    let case = random_case(rng);
    let splits = random_splits(rng);
    attention::compare_on(gpu, case, rng.next_u64(), Path::Coop { f16_q, splits })
}

/// Key splits for a random case: mostly unsplit, as the models' long blocks run, else up to
/// the kernel's most.
fn random_splits(rng: &mut Rng) -> usize {
    rng.pick(&[1, 1, 2, 3, 8])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn attention_coop_matches_reference() {
        testutil::parity("attention_coop", 6, 501);
    }

    #[test]
    fn attention_coop_exact_query() {
        testutil::parity("attention_coop_exact", 6, 601);
    }

    fn body_device(test: &str) -> Option<&'static Gpu> {
        testutil::coop_body_device(test, "common/coop_emul.wgsl, attention/coop_io_emul.wgsl")
    }

    /// Random prompt blocks through the kernel's body, q rounded by the kernel and q drawn
    /// as f16 values (the tight bound).
    #[test]
    fn body_matches_reference() {
        let Some(gpu) = body_device("body_matches_reference") else {
            return;
        };
        let mut rng = Rng::new(77);
        for i in 0..8 {
            let case = random_case(&mut rng);
            let path = Path::Coop {
                f16_q: i % 2 == 1,
                splits: [1, 2, 3, 8][i as usize % 4],
            };
            let c = attention::compare_on(gpu, case, 900 + i, path).unwrap();
            assert!(c.max_ratio <= 1.0, "{case:?} {path:?}: {}", c.worst);
        }
    }

    /// The models' prompt shapes: gemma-3-270m's (4 heads over 1 kv head of 256, sliding
    /// window 512) crossing the window, qwen2.5-0.5b's (14 heads over 2 of 64: rows of a tile
    /// span tokens), head_dim 128 with a soft-cap, and qwen2.5-7b's (28 heads over 4 of 128:
    /// groups of 7, 161 rows a kv head in three tiles) after a history, each from a block
    /// start at 0 and later.
    #[test]
    fn body_model_shapes() {
        let Some(gpu) = body_device("body_model_shapes") else {
            return;
        };
        let layout = |n_kv_heads, head_dim, max_len| KvLayout {
            dtype: KvDtype::F16,
            n_kv_heads,
            head_dim,
            max_len,
        };
        let attn = |n_tokens, n_heads, hd: usize, window, softcap, max_len| Attention {
            n_tokens,
            n_heads,
            q_stride: n_heads * hd,
            scale: 1.0 / (hd as f32).sqrt(),
            softcap,
            window,
            split_len: max_len,
        };
        let cases = [
            Case {
                layout: layout(1, 256, 704),
                attn: attn(40, 4, 256, 512, 0.0, 704),
                start: 560,
                q_gain: 4.0,
            },
            Case {
                layout: layout(2, 64, 96),
                attn: attn(37, 14, 64, 0, 0.0, 96),
                start: 0,
                q_gain: 4.0,
            },
            Case {
                layout: layout(2, 128, 64),
                attn: attn(21, 4, 128, 0, 30.0, 64),
                start: 40,
                q_gain: 1.0,
            },
            Case {
                layout: layout(4, 128, 144),
                attn: attn(23, 28, 128, 0, 0.0, 144),
                start: 97,
                q_gain: 4.0,
            },
        ];
        for (i, case) in cases.into_iter().enumerate() {
            for (f16_q, splits) in [(false, 1), (true, 1), (true, 3)] {
                let path = Path::Coop { f16_q, splits };
                let c = attention::compare_on(gpu, case, i as u64, path).unwrap();
                assert!(c.max_ratio <= 1.0, "{case:?} {path:?}: {}", c.worst);
            }
        }
    }

    /// Softmaxes so sharp that a later block's scores pass the first block's max by more than
    /// the one pass's headroom (q scaled 100 times: scores spread over ~30 at head_dim 64):
    /// the tiles start over against their rows' maxima, some after several blocks, and the
    /// result is the same.
    #[test]
    fn body_starts_over_past_the_headroom() {
        let Some(gpu) = body_device("body_starts_over_past_the_headroom") else {
            return;
        };
        let case = |n_kv_heads, head_dim, n_heads, window| Case {
            layout: KvLayout {
                dtype: KvDtype::F16,
                n_kv_heads,
                head_dim,
                max_len: 320,
            },
            attn: Attention {
                n_tokens: 40,
                n_heads,
                q_stride: n_heads * head_dim,
                scale: 1.0 / (head_dim as f32).sqrt(),
                softcap: 0.0,
                window,
                split_len: 320,
            },
            start: 250,
            q_gain: 100.0,
        };
        for (i, case) in [case(1, 64, 2, 0), case(2, 256, 4, 100)]
            .into_iter()
            .enumerate()
        {
            for (f16_q, splits) in [(false, 1), (true, 1), (true, 3)] {
                let path = Path::Coop { f16_q, splits };
                let c = attention::compare_on(gpu, case, 40 + i as u64, path).unwrap();
                assert!(c.max_ratio <= 1.0, "{case:?} {path:?}: {}", c.worst);
            }
        }
    }

    /// Calls the kernel cannot take are errors, not wrong results.
    #[test]
    fn refuses_what_it_cannot_take() {
        let a = Attention {
            n_tokens: 8,
            n_heads: 4,
            q_stride: 4 * 64,
            scale: 0.125,
            softcap: 0.0,
            window: 0,
            split_len: 64,
        };
        let l = KvLayout {
            dtype: KvDtype::F16,
            n_kv_heads: 2,
            head_dim: 64,
            max_len: 64,
        };
        assert!(a.coop_fits(&l));
        let f32_cache = KvLayout {
            dtype: KvDtype::F32,
            ..l
        };
        let odd_len = KvLayout { max_len: 72, ..l };
        let split = Attention { split_len: 16, ..a };
        let odd_heads = Attention { n_heads: 3, ..a };
        assert!(!a.coop_fits(&f32_cache));
        assert!(!Attention { split_len: 72, ..a }.coop_fits(&odd_len));
        assert!(!split.coop_fits(&l));
        assert!(!odd_heads.coop_fits(&l));
    }

    /// A device without cooperative matrices builds only the emulation (tests ask for it).
    #[test]
    fn program_choice() {
        let caps = testutil::nvidia_caps;
        let k = crate::Kernel::from(AttentionCoopKernel { head_dim: 256 });
        assert_eq!(k.program_for(&caps(false)).name, "attention_coop_emulated");
        assert_eq!(k.program_for(&caps(true)).name, "attention_coop");
    }
}
