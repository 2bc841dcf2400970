//! Properties of every format implemented here: quantize -> dequantize stays within a derived
//! error bound, any bytes decode and dot without panicking, and the fused dot product equals
//! the dot product of the dequantized weights up to f32 rounding.
//!
//! Notation for the bounds, per block: `A = max |x|`, `R = max x - min x`. Storing a scale
//! `s` as f16 moves it by at most `delta(s) = max(|s| 2^-11, 2^-25)` (half an ulp, relative
//! for normals, absolute 2^-25 in the subnormal range). The codes are computed from the
//! unrounded scale; dequantization uses the rounded one, so an error bound is "rounding of the
//! codes" plus "largest code times delta". A few f32 ulps of slack cover the arithmetic.

mod support;

use proptest::prelude::*;
use rullama_gguf::GgmlType;
use rullama_quant::{Format, block_layout, dequantize_to_vec, dot, quantize};

const MINE: [Format; 13] = [
    Format::Ggml(GgmlType::F32),
    Format::Ggml(GgmlType::F16),
    Format::Ggml(GgmlType::Bf16),
    Format::Ggml(GgmlType::Q4_0),
    Format::Ggml(GgmlType::Q4_1),
    Format::Ggml(GgmlType::Q5_0),
    Format::Ggml(GgmlType::Q5_1),
    Format::Ggml(GgmlType::Q8_0),
    Format::Ggml(GgmlType::Q8_1),
    Format::Ggml(GgmlType::Iq4Nl),
    Format::Ggml(GgmlType::Iq4Xs),
    Format::Ggml(GgmlType::Q1_0G128),
    Format::Nf4,
];

/// Half an f16 ulp at `s`, the most that storing `s` as f16 moves it.
fn delta(s: f32) -> f32 {
    (s.abs() * 2f32.powi(-11)).max(2f32.powi(-25))
}

fn amax(x: &[f32]) -> f32 {
    x.iter().fold(0.0, |a, v| a.max(v.abs()))
}

/// `sqrt(sum x^2 (x - w)^2 / sum x^2)`: the error the IQ4 quantizers minimise (they weight
/// each value by `x^2`), or 0 for an all-zero block.
fn weighted_rms(x: &[f32], w: &[f32]) -> f32 {
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (&x, &w) in x.iter().zip(w) {
        let (x, w) = (f64::from(x), f64::from(w));
        num += x * x * (x - w) * (x - w);
        den += x * x;
    }
    if den > 0.0 {
        (num / den).sqrt() as f32
    } else {
        0.0
    }
}

/// Largest `|x_i - w_i|` allowed for one block of format `f`, when the bound is per value.
fn max_error(f: Format, x: &[f32]) -> Option<f32> {
    use GgmlType::*;
    let a = amax(x);
    let (min, max) = x
        .iter()
        .fold((f32::MAX, f32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let slack = a * 2f32.powi(-20);
    Some(match f {
        // Exact.
        Format::Ggml(F32) => 0.0,
        // Round to nearest: half an ulp, relative 2^-11 (f16) or 2^-8 (bf16).
        Format::Ggml(F16) => delta(a),
        Format::Ggml(Bf16) => a * 2f32.powi(-8),
        // d = A/127, q = round(x/d): error d/2 from rounding, |q| <= 127.
        Format::Ggml(Q8_0 | Q8_1) => {
            let d = a / 127.0;
            0.501 * d + 127.0 * delta(d) + slack
        }
        // d = max/-8: most values round (error d/2), but -max lands on code 16 and is clamped
        // to 15, an error of a whole d; |q - 8| <= 8.
        Format::Ggml(Q4_0) => {
            let d = a / 8.0;
            1.001 * d + 8.0 * delta(d) + slack
        }
        // The same with 5 bits: d = max/-16, clamp at 31, |q - 16| <= 16.
        Format::Ggml(Q5_0) => {
            let d = a / 16.0;
            1.001 * d + 16.0 * delta(d) + slack
        }
        // d = R/15, m = min: rounding d/2, no clamping, q <= 15, plus m's own f16 rounding.
        Format::Ggml(Q4_1) => {
            let d = (max - min) / 15.0;
            0.501 * d + 15.0 * delta(d) + delta(min) + slack
        }
        Format::Ggml(Q5_1) => {
            let d = (max - min) / 31.0;
            0.501 * d + 31.0 * delta(d) + delta(min) + slack
        }
        // w = +-d with d = mean|x| and the sign of x: |x - w| = ||x| - d| <= max(A - d, d).
        Format::Ggml(Q1_0G128) => {
            let d = x.iter().map(|v| v.abs()).sum::<f32>() / 128.0;
            (a - d).max(d) + delta(d) + slack
        }
        // x/A in [-1, 1] goes to the nearest codebook entry; the widest gap is between -1 and
        // -0.6961928, so the error is at most 0.1519036 A.
        Format::Nf4 => 0.1519037 * a + slack,
        _ => return None,
    })
}

/// Check the IQ4 bounds, which hold for the `x^2`-weighted RMS error of each 32-value block.
///
/// IQ4_NL: the start scale `d0 = -max/127` maps x/d0 into [-127, 127]; every value there is
/// within 14 of a grid value (widest half-gap 12, 113..127 at the top), so the start scale has
/// weighted RMS <= 14 |d0|. The least-squares refit of d for those codes can only lower the
/// weighted error. It moves d by at most 0.624 |d0| (Cauchy-Schwarz with the max value's code
/// -127 and sum x^4 <= 32 A^4), so f16 rounding adds <= 127 * delta(1.624 d0).
///
/// IQ4_XS: each sub-block b is fitted as above (the search only keeps better fits): weighted
/// RMS <= 14 A_b / 127 with scale d_b, |d_b| <= sqrt(32)/113 A_b (the max value's code has
/// magnitude >= 113). Scales are then stored as D l, D = -M/32 (M: largest |d_b|),
/// l in [-32, 31], so |D l - d_b| <= |D| and codes up to 127 add 127 |D|; re-choosing codes
/// for D l can only lower each error; f16 rounding of D adds 32 * 127 * delta(D).
fn check_iq4(f: Format, x: &[f32], w: &[f32], block: &[u8]) -> Result<(), String> {
    let sub_blocks = x.chunks(32).zip(w.chunks(32)).enumerate();
    match f {
        Format::Ggml(GgmlType::Iq4Nl) => {
            let d0 = amax(x) / 127.0;
            let bound = 14.001 * d0 + 127.0 * delta(1.624 * d0);
            let err = weighted_rms(x, w);
            (err <= bound)
                .then_some(())
                .ok_or(format!("weighted rms {err} > {bound}"))
        }
        Format::Ggml(GgmlType::Iq4Xs) => {
            let big_d = half::f16::from_le_bytes([block[0], block[1]])
                .to_f32()
                .abs();
            let a = amax(x);
            let d_bound =
                (32f32.sqrt() / 113.0 * a / 32.0) * (1.0 + 2f32.powi(-10)) + 2f32.powi(-25);
            if big_d > d_bound {
                return Err(format!("super-block scale {big_d} > {d_bound}"));
            }
            let big_d = big_d * (1.0 + 2f32.powi(-10)) + 2f32.powi(-25);
            for (ib, (x, w)) in sub_blocks {
                let bound = 14.001 * amax(x) / 127.0 + 127.0 * big_d + 32.0 * 127.0 * delta(big_d);
                let err = weighted_rms(x, w);
                if err > bound {
                    return Err(format!("sub-block {ib}: weighted rms {err} > {bound}"));
                }
            }
            Ok(())
        }
        _ => unreachable!(),
    }
}

/// Blocks of values `u * 2^e`: `u` uniform in [-1, 1], one exponent per case, from 2^-6 to
/// 2^10 so every f16 scale stays finite.
fn values(block_size: usize) -> impl Strategy<Value = Vec<f32>> {
    (1usize..4, -6i32..=10).prop_flat_map(move |(blocks, e)| {
        let scale = 2f32.powi(e);
        prop::collection::vec(-1.0f32..=1.0, blocks * block_size)
            .prop_map(move |u| u.into_iter().map(|u| u * scale).collect())
    })
}

fn format_and_values() -> impl Strategy<Value = (Format, Vec<f32>)> {
    prop::sample::select(MINE.to_vec())
        .prop_flat_map(|f| (Just(f), values(block_layout(f).block_size.max(32))))
}

/// Random bytes for 1 to 3 (groups of) blocks. With `finite`, the scale fields are made finite
/// (random f16 bit patterns; a moderate f32 for NF4), and the float types hold values below
/// 100 in magnitude (so that the f32 sums in the dot test cannot overflow).
fn blocks(f: Format, finite: bool) -> impl Strategy<Value = Vec<u8>> {
    let layout = block_layout(f);
    let n = layout.block_size.max(64) / layout.block_size;
    (1usize..4, any::<u64>()).prop_map(move |(count, seed)| {
        let mut rng = support::Rng(seed);
        let mut bytes = vec![0u8; n * count * layout.type_size];
        rng.fill(&mut bytes);
        if !finite {
            return bytes;
        }
        match f {
            Format::Ggml(GgmlType::F32 | GgmlType::F16 | GgmlType::Bf16) => {
                let x: Vec<f32> = (0..n * count).map(|_| rng.unit() * 100.0).collect();
                quantize(f, &x).unwrap()
            }
            Format::Ggml(t) => support::finite_blocks(t, n * count, &mut rng),
            Format::Nf4 => {
                for block in bytes.chunks_exact_mut(layout.type_size) {
                    block[..4].copy_from_slice(&(rng.unit() * 100.0).to_le_bytes());
                }
                bytes
            }
        }
    })
}

fn format_and_blocks(finite: bool) -> impl Strategy<Value = (Format, Vec<u8>)> {
    prop::sample::select(MINE.to_vec()).prop_flat_map(move |f| (Just(f), blocks(f, finite)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn quantize_dequantize_error_is_bounded((f, x) in format_and_values()) {
        let q = quantize(f, &x).unwrap();
        let w = dequantize_to_vec(f, &q).unwrap();
        let layout = block_layout(f);
        let (n, bytes) = (layout.block_size.max(32), layout.type_size * layout.block_size.max(32) / layout.block_size);
        for (i, ((x, w), block)) in x.chunks(n).zip(w.chunks(n)).zip(q.chunks(bytes)).enumerate() {
            match max_error(f, x) {
                Some(bound) => {
                    for (j, (&x, &w)) in x.iter().zip(w).enumerate() {
                        prop_assert!((x - w).abs() <= bound, "{f} block {i} value {j}: {x} -> {w}, bound {bound}");
                    }
                }
                None => {
                    let checked = check_iq4(f, x, w, block);
                    prop_assert!(checked.is_ok(), "{f} block {i}: {}", checked.unwrap_err());
                }
            }
        }
    }

    #[test]
    fn any_bytes_decode_and_dot_without_panicking((f, bytes) in format_and_blocks(false), xs in any::<f32>()) {
        let w = dequantize_to_vec(f, &bytes).unwrap();
        let x = vec![xs; w.len()];
        dot(f, &bytes, &x).unwrap();
        let ones = vec![1.0; w.len()];
        dot(f, &bytes, &ones).unwrap();
    }

    /// Summing n products in f32 is off by at most ~n u sum|w_i x_i| (u = 2^-24); the fused
    /// dot products factor the scale out of each block, which adds a rounding or two per term.
    /// We allow (n + 2) * f32::EPSILON * sum|w_i x_i|, EPSILON = 2u: twice the worst case.
    #[test]
    fn fused_dot_matches_dot_of_dequantized_weights((f, bytes) in format_and_blocks(true), seed in any::<u64>()) {
        let w = dequantize_to_vec(f, &bytes).unwrap();
        let mut rng = support::Rng(seed);
        let x: Vec<f32> = (0..w.len()).map(|_| rng.unit() * 10.0).collect();
        let ours = dot(f, &bytes, &x).unwrap();
        let exact: f64 = w.iter().zip(&x).map(|(&w, &x)| f64::from(w) * f64::from(x)).sum();
        let magnitude: f64 = w.iter().zip(&x).map(|(&w, &x)| (f64::from(w) * f64::from(x)).abs()).sum();
        let tol = (w.len() + 2) as f64 * f64::from(f32::EPSILON) * magnitude + 1e-30;
        prop_assert!((f64::from(ours) - exact).abs() <= tol, "{f}: {ours} vs {exact} (tolerance {tol})");
    }
}
