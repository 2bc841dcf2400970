//! The tensor-core training attention's bounds and parity checks: the f32 kernels' references
//! and checks (`ops::attention_train`'s, `ops::attention_backward`'s) with the f16 terms of the
//! module doc, on shapes the kernels take. The checks run the emulated body where the device
//! has no cooperative matrices (lavapipe), so they cover the body's staging, masks, passes and
//! stores everywhere, and the tensor cores' loads and products where they exist.

use super::*;
use crate::device::Gpu;
use crate::ops::attention_backward::BackwardSplits;
use crate::ops::attention_train::{Inputs, dot};
use crate::ops::matmul_coop::f16_err;
use crate::ops::unary::{self, UnaryOp};
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U};

/// Bound on the tensor-core score `s = cap(scale q' . k')` of (i, h, j) against the exact
/// one, q' and k' the f16 roundings of the f32 inputs (as f64): `|scale| (sum (|q| e_k + |k|
/// e_q + e_q e_k) + (4 dk + 5) u sum (|q| + e_q)(|k| + e_k))` (the roundings, then the tensor
/// cores' sums over the dims, in one chain or (the backward) over each half of the dims and
/// their f32 sum, the scale's product), plus the
/// soft-cap's tanh; the cap's slope is at most 1.
pub(crate) fn coop_score_bound(
    p: &TrainAttention,
    q: &[f64],
    k: &[f64],
    i: usize,
    h: usize,
    j: usize,
) -> f64 {
    let (mut first, mut mags) = (0.0, 0.0);
    for (&a, &b) in p.q_row(q, i, h).iter().zip(p.k_row(k, j, h)) {
        let (a, b) = (a.abs(), b.abs());
        let (ea, eb) = (f16_err(a), f16_err(b));
        first += a * eb + b * ea + ea * eb;
        mags += (a + ea) * (b + eb);
    }
    let scale = f64::from(p.scale).abs();
    let mut bound = scale * (first + (4 * p.dk + 5) as f64 * U * mags);
    if p.softcap > 0.0 {
        let raw = f64::from(p.scale) * dot(p.q_row(q, i, h), p.k_row(k, j, h));
        bound += unary::bound(UnaryOp::SoftCap, raw, f64::from(p.softcap), 0.0);
    }
    bound
}

/// One weight's f16 rounding, the weight `w` computed within a factor `e^(+-2D)`: one f16
/// ulp of the largest it may be, and where it may be below 2^-13 (a subnormal the device may
/// flush), all of it.
fn weight_err(w: f64, big_d: f64) -> f64 {
    let grow = (2.0 * big_d).exp();
    let mut e = w * grow / 1024.0;
    if w / grow < 2.0 / 16384.0 {
        e += w * grow + U;
    }
    e
}

/// What the tensor-core forward adds to an output's bound, over a pair's weights `w` (exact
/// softmax weights) with score error `big_d`, `vmax` the largest |v| it reads and `e_v` the
/// largest f16 rounding of a v: the weights rounded to f16, v rounded, and their sum on the
/// tensor cores, `sum e16(w) (vmax + e_v) + e_v + (4n + 1) u (1 + sum e16(w)) (vmax + e_v)`.
/// Split keys round exp(s - m_s) instead, which the combine scales by at most 1/l_s <= 1: the
/// same relative error, and a flushed one was below 2^-13 normalised too.
pub(crate) fn coop_weights_bound(w: &[f64], big_d: f64, vmax: f64, e_v: f64) -> f64 {
    let ew: f64 = w.iter().map(|&x| weight_err(x, big_d)).sum();
    let n = w.len() as f64;
    ew * (vmax + e_v) + e_v * (1.0 + 1e-3) + (4.0 * n + 1.0) * U * (1.0 + ew) * (vmax + e_v)
}

/// The forward on the tensor cores against `attention_train_ref`.
pub const FORWARD_CHECK: Check = Check {
    name: "attention_train_coop",
    tolerance: "attention_train's with q, k in f16 ((4dk+5)u dots) and 4 more rescales; o + sum e16(w_j)(max|v|+e_v) + e_v + (4n+1)u(...)",
    case: forward_case,
};

/// Needs SHADER_F16 (the emulated ops' f16 tiles); cooperative matrices where they exist.
fn f16_device(gpu: &Gpu) -> Result<(), GpuError> {
    match gpu.caps.shader_f16 {
        true => Ok(()),
        false => Err(GpuError::MissingFeature(
            "SHADER_F16 (the tensor-core bodies' f16 tiles)",
        )),
    }
}

/// A random block the tensor-core kernels take: [`Inputs::random`]'s sequences, windows,
/// caps and GQA with dk = dv one of [`HEAD_DIMS`] (blocks shorter at 256: the emulated body
/// is slow on lavapipe).
pub(crate) fn random_inputs(rng: &mut Rng) -> Inputs {
    let mut c = Inputs::random(rng);
    let hd = rng.pick(&HEAD_DIMS);
    let n = c.p.n.min(if hd == 256 { 40 } else { 70 });
    let p = TrainAttention {
        n,
        dk: hd,
        dv: hd,
        scale: if rng.bool() {
            0.5
        } else {
            1.0 / (hd as f32).sqrt()
        },
        ..c.p
    };
    let gain = rng.pick(&[1.0, 4.0]);
    c.q = random_f32(n * p.n_head * hd, rng.next_u64())
        .into_iter()
        .map(|x| x * gain)
        .collect();
    c.k = random_f32(n * p.n_kv * hd, rng.next_u64());
    c.v = random_f32(n * p.n_kv * hd, rng.next_u64());
    c.start.truncate(n);
    c.p = p;
    c
}

fn forward_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    f16_device(gpu)?;
    let c = random_inputs(rng);
    let splits = rng.pick(&[1, 1, 2, 3, 16]);
    crate::ops::attention_train::compare_with(gpu, &c, splits, true)
}

/// The backward on the tensor cores (both passes) against `attention_backward_ref`, the
/// dk/dv pass's splits varied.
pub const DKDV_CHECK: Check = Check {
    name: "attention_backward_dkdv_coop",
    tolerance: "attention_backward's with the tensor-core score's D, dp over f16 do (x2^8) and v ((4dv+5)u dots), P and ds (x2^8) rounded to f16, q, k and do f16 in the sums ((4m+2..3)u)",
    case: dkdv_case,
};

/// The backward on the tensor cores (both passes) against `attention_backward_ref`, the dq
/// pass's splits varied: dq = scale sum f16(2^8 ds) f16(k) / 2^8 with [`DKDV_CHECK`]'s bound
/// on ds (the same score, dp and D), k's rounding and the sums on the tensor cores
/// ((4m+3)u).
pub const DQ_CHECK: Check = Check {
    name: "attention_backward_dq_coop",
    tolerance: "attention_backward's with the tensor-core score's D, dp over f16 do (x2^8) and v ((4dv+5)u dots), ds (x2^8) and k rounded to f16, sums (4m+3)u",
    case: dq_case,
};

fn dq_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    f16_device(gpu)?;
    let c = random_inputs(rng);
    let gain = rng.pick(&[1.0 / 1024.0, 1.0 / 1048576.0]);
    let d_o = small_grad(c.p.n * c.p.n_head * c.p.dv, gain, rng.next_u64());
    let splits = BackwardSplits {
        dq: rng.pick(&[1, 2, 3, 16]),
        dkdv: 1,
    };
    crate::ops::attention_backward::parity::compare(gpu, &c, &d_o, splits, true)
}

/// An output gradient as a mean loss gives it: `random_f32` (in (-1, 1)) times `gain`.
pub(crate) fn small_grad(len: usize, gain: f32, seed: u64) -> Vec<f32> {
    random_f32(len, seed)
        .into_iter()
        .map(|x| x * gain)
        .collect()
}

fn dkdv_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    f16_device(gpu)?;
    let c = random_inputs(rng);
    // A loss averaged over 2^10 tokens, and over 2^20 (do itself below f16's normals).
    let gain = rng.pick(&[1.0 / 1024.0, 1.0 / 1048576.0]);
    let d_o = small_grad(c.p.n * c.p.n_head * c.p.dv, gain, rng.next_u64());
    let splits = BackwardSplits {
        dq: rng.pick(&[1, 1, 2, 3, 16]),
        dkdv: rng.pick(&[1, 1, 2, 3, 16]),
    };
    crate::ops::attention_backward::parity::compare(gpu, &c, &d_o, splits, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn forward_matches_reference() {
        testutil::parity("attention_train_coop", 6, 171);
    }

    #[test]
    fn dkdv_matches_reference() {
        testutil::parity("attention_backward_dkdv_coop", 6, 173);
    }

    #[test]
    fn dq_matches_reference() {
        testutil::parity("attention_backward_dq_coop", 6, 179);
    }

    /// The models' shapes: gemma-3-270m's (4 heads over 1 kv head of 256, a window, two
    /// sequences packed, split keys), qwen2.5-0.5b's (14 heads over 2 of 64: a tile's pairs
    /// span rows) and 128 with a soft-cap and GQA of 3.
    #[test]
    fn forward_model_shapes() {
        let Some(gpu) = testutil::coop_body_device(
            "forward_model_shapes",
            "common/coop_emul.wgsl, attention/coop_io_emul.wgsl",
        ) else {
            return;
        };
        let shapes = [
            (40, 4, 1, 256, 24, 0.0, 2),
            (37, 14, 2, 64, 0, 0.0, 1),
            (45, 6, 2, 128, 0, 30.0, 3),
        ];
        for (case, &(n, n_head, n_kv, hd, window, softcap, splits)) in shapes.iter().enumerate() {
            let mut rng = Rng::new(40 + case as u64);
            let p = TrainAttention {
                n,
                n_head,
                n_kv,
                dk: hd,
                dv: hd,
                scale: 1.0 / (hd as f32).sqrt(),
                window,
                softcap,
            };
            let inputs = Inputs {
                p,
                q: random_f32(n * n_head * hd, rng.next_u64()),
                k: random_f32(n * n_kv * hd, rng.next_u64()),
                v: random_f32(n * n_kv * hd, rng.next_u64()),
                start: (0..n as u32).map(|i| if i < 17 { 0 } else { 17 }).collect(),
            };
            let c = crate::ops::attention_train::compare_with(gpu, &inputs, splits, true).unwrap();
            assert!(c.n > 0 && c.max_ratio <= 1.0, "{p:?}: {}", c.worst);
        }
    }

    /// The backward's passes on the models' shapes: gemma-3-270m's (4 heads over 1 kv head of
    /// 256, a window, two sequences, split keys and pairs) and 64 under GQA of 7 with a cap,
    /// the output gradient of a loss averaged over 2^12 tokens.
    #[test]
    fn backward_model_shapes() {
        let Some(gpu) = testutil::coop_body_device(
            "backward_model_shapes",
            "common/coop_emul.wgsl, attention/coop_io_emul.wgsl",
        ) else {
            return;
        };
        let shapes = [(40, 4, 1, 256, 24, 0.0, 3), (37, 14, 2, 64, 0, 30.0, 1)];
        for (case, &(n, n_head, n_kv, hd, window, softcap, split)) in shapes.iter().enumerate() {
            let mut rng = Rng::new(50 + case as u64);
            let p = TrainAttention {
                n,
                n_head,
                n_kv,
                dk: hd,
                dv: hd,
                scale: 1.0 / (hd as f32).sqrt(),
                window,
                softcap,
            };
            let inputs = Inputs {
                p,
                q: random_f32(n * n_head * hd, rng.next_u64()),
                k: random_f32(n * n_kv * hd, rng.next_u64()),
                v: random_f32(n * n_kv * hd, rng.next_u64()),
                start: (0..n as u32).map(|i| if i < 17 { 0 } else { 17 }).collect(),
            };
            let d_o = small_grad(n * n_head * hd, 1.0 / 4096.0, rng.next_u64());
            let splits = BackwardSplits {
                dq: split,
                dkdv: split,
            };
            let c =
                crate::ops::attention_backward::parity::compare(gpu, &inputs, &d_o, splits, true)
                    .unwrap();
            assert!(c.n > 0 && c.max_ratio <= 1.0, "{p:?}: {}", c.worst);
        }
    }

    /// Shapes the tensor-core kernels do not take fall back to the f32 kernels; asked for
    /// directly, they are typed errors.
    #[test]
    fn fits_and_refuses() {
        let p = TrainAttention {
            n: 8,
            n_head: 4,
            n_kv: 2,
            dk: 64,
            dv: 64,
            scale: 0.125,
            window: 0,
            softcap: 0.0,
        };
        let caps = testutil::nvidia_caps;
        assert!(p.coop_fits() && p.uses_tensor_cores(&caps(true), true));
        assert!(!p.uses_tensor_cores(&caps(true), false));
        assert!(!p.uses_tensor_cores(&caps(false), true));
        for bad in [
            TrainAttention {
                dk: 32,
                dv: 32,
                ..p
            },
            TrainAttention { dv: 128, ..p },
            TrainAttention {
                dk: 512,
                dv: 512,
                ..p
            },
        ] {
            assert!(!bad.coop_fits() && !bad.uses_tensor_cores(&caps(true), true));
            assert!(matches!(
                bad.check_coop("attention_train"),
                Err(GpuError::InvalidParams {
                    op: "attention_train",
                    ..
                })
            ));
        }
    }

    /// A device without cooperative matrices builds only the emulation (tests ask for it).
    #[test]
    fn program_choice() {
        let caps = testutil::nvidia_caps;
        let k = crate::Kernel::from(AttentionTrainCoopKernel {
            pass: CoopPass::Forward,
            head_dim: 256,
        });
        assert_eq!(
            k.program_for(&caps(false)).name,
            "attention_train_coop_emulated"
        );
        assert_eq!(k.program_for(&caps(true)).name, "attention_train_coop");
        let k = crate::Kernel::from(AttentionTrainCoopKernel {
            pass: CoopPass::DkDv,
            head_dim: 64,
        });
        assert_eq!(
            k.program_for(&caps(false)).name,
            "attention_backward_dkdv_coop_emulated"
        );
        assert_eq!(
            k.program_for(&caps(true)).name,
            "attention_backward_dkdv_coop"
        );
        let k = crate::Kernel::from(AttentionTrainCoopKernel {
            pass: CoopPass::Dq,
            head_dim: 128,
        });
        assert_eq!(
            k.program_for(&caps(false)).name,
            "attention_backward_dq_coop_emulated"
        );
        assert_eq!(
            k.program_for(&caps(true)).name,
            "attention_backward_dq_coop"
        );
    }
}
