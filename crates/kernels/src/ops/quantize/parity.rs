//! The q8 vector's CPU references (quantize and dequantize, by the rule and layout of the
//! module doc), the rounding's bound, and the quantize kernels' parity checks.

use super::*;
use crate::device::Gpu;
use crate::ops::glu::{self, glu_ref};
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::GpuTensor;

/// CPU reference: `x` (a multiple of 32 long) as a q8 vector of `q8_words(x.len())` words,
/// by the rule of the module doc with f32 arithmetic correctly rounded.
pub fn quantize_q8_ref(x: &[f32]) -> Result<Vec<u32>, GpuError> {
    check_n("quantize_q8_ref", x.len())?;
    let mut first = Vec::with_capacity(x.len() / 4);
    let mut second = Vec::with_capacity(x.len() / 4);
    let mut scales = Vec::with_capacity(x.len() / Q8_BLOCK);
    for block in x.chunks_exact(Q8_BLOCK) {
        let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        for word in block.chunks_exact(4) {
            let (mut b1, mut b2) = ([0u8; 4], [0u8; 4]);
            for (j, &v) in word.iter().enumerate() {
                let (q1, q2) = digits(v, d);
                (b1[j], b2[j]) = (q1 as u8, q2 as u8);
            }
            first.push(u32::from_le_bytes(b1));
            second.push(u32::from_le_bytes(b2));
        }
        scales.push(d.to_bits());
    }
    first.extend(second);
    first.extend(scales);
    Ok(first)
}

/// The two digits of `x` in a block of scale `d`, by the rule of the module doc (f32
/// arithmetic, as the GPU's `matvec/quantize_q8.wgsl`).
fn digits(x: f32, d: f32) -> (i8, i8) {
    if d == 0.0 {
        return (0, 0);
    }
    let q1 = (x / d).round_ties_even().clamp(-127.0, 127.0);
    let r = x - q1 * d;
    let q2 = (DIGIT as f32 * r / d)
        .round_ties_even()
        .clamp(-127.0, 127.0);
    (q1 as i8, q2 as i8)
}

/// Input `i`'s digits (q1, q2) in the words of a q8 vector of `n` inputs.
fn digits_at(words: &[u32], n: usize, i: usize) -> (i8, i8) {
    let byte = |plane: usize| words[plane * n / 4 + i / 4].to_le_bytes()[i % 4] as i8;
    (byte(0), byte(1))
}

/// The value digits (q1, q2) of a block of scale `d` stand for, `d (254 q1 + q2) / 254` in
/// f64: the product is exact (24 + 16 bits), the division within 2^-53 relative.
fn digit_value(q1: i8, q2: i8, d: f64) -> f64 {
    d * f64::from(DIGIT * i32::from(q1) + i32::from(q2)) / f64::from(DIGIT)
}

/// The values a q8 vector of `n` inputs stands for, `d_b (q1_i + q2_i / 254)` rounded to
/// f32 (within 2^-24 relative: the f64 value before the rounding errs by 2^-53 at most), read
/// from `words` by the layout of the module doc.
pub fn dequantize_q8_ref(words: &[u32], n: usize) -> Result<Vec<f32>, GpuError> {
    check_n("dequantize_q8_ref", n)?;
    if words.len() < q8_words(n) {
        return Err(GpuError::Shape {
            op: "dequantize_q8_ref",
            detail: format!(
                "{} words for {n} inputs ({} needed)",
                words.len(),
                q8_words(n)
            ),
        });
    }
    let scales = &words[n / 2..];
    Ok((0..n)
        .map(|i| {
            let (q1, q2) = digits_at(words, n, i);
            let d = f64::from(f32::from_bits(scales[i / Q8_BLOCK]));
            digit_value(q1, q2, d) as f32
        })
        .collect())
}

/// The bound on one dequantized input x' = d (q1 + q2 / 254) of a block with amax >= 2^-90:
/// |x - x'| <= d / 508 + u |x| + 5u d (u = 2^-24). With r = x - q1 d (exact, whatever q1 is)
/// and t = 254 r / d, x - x' = (d / 254) (t - q2), and q2 = round(t~) for the GPU's t~, so
/// |x - x'| <= (d / 254) (1/2 + |t~ - t|):
/// - q1 = round(x / d) on a division within 2.5 ulp (WGSL leaves division's accuracy to the
///   platform; Vulkan allows 2.5 ulp, and an ulp of v is at most 2u |v|): |r| <= d / 2 +
///   5u |x|. Where the clamp to +-127 acts, d was rounded below amax / 127 (by at most
///   2.5 ulp) and |r| <= 5u amax. So |x| <= 127 (1 + 5u) d and |254 r / d| <= 127 + O(u).
/// - The GPU's r~ = x - q1 d: the product rounds (u |q1 d| <= u (|x| + |r|)), then the
///   difference (u |r| + O(u^2); an FMA rounds once, better), so
///   |r~ - r| <= u |x| + 2u |r| + O(u^2).
/// - t~ = 254 r~ / d: a multiply and a division, u + 5u relative, on |t~| <= 127.02.
///
/// So |t~ - t| <= (254 / d) (u |x| + 2u |r|) + 6u 127.02 <= 254u |x| / d + 1016.2u, and
/// |x - x'| <= d / 508 + u |x| + 4.01u d. The clamp of q2 never acts (|t~| < 127.5). A GPU may
/// flush a subnormal x, r or t to zero, an error below 2^-126 in x'; with amax >= 2^-90,
/// d >= 2^-97 and that is below u d / 32, which the 5u d covers with the O(u^2) terms. Below
/// amax = 2^-90 the bound is not claimed (where amax < 2^-119, d itself may flush to 0 and
/// every input with it: |x| < 2^-119), and the checks' data never reaches it. One digit (q1 d
/// alone) was bounded by d / 2 + 5u |x|: 254 times this, to the division's slack.
pub fn rounding_bound(x: f64, d: f64) -> f64 {
    d / 508.0 + U * x.abs() + 5.0 * U * d
}

/// One ulp of the f32 value nearest `v` (a normal f32 magnitude): 2^(e - 23), 2^e <= |v| < 2^(e+1).
fn ulp32(v: f64) -> f64 {
    let e = ((v.abs().to_bits() >> 52) & 0x7ff) as i32 - 1023;
    2f64.powi(e.max(-126) - 23)
}

/// Tolerance: every dequantized input x' = d (q1 + q2 / 254) within [`rounding_bound`] of x
/// (d/508 + u|x| + 5u d); every |q1|, |q2| <= 127; every block's d within 2.5 ulp of
/// amax / 127 (Vulkan's division accuracy; the max is exact); a block of zeros exactly d = 0,
/// q1 = q2 = 0; every word outside the vector untouched. Cases: 1-79 blocks of magnitudes
/// 2^-20 .. 2^20, some all zero, some of one magnitude (every x / d = +-127: the clamp), some
/// with an outlier 100x the rest, x at offsets 0-4, the vector at word 0, 4 or 8.
pub const CHECK: Check = Check {
    name: "quantize_q8",
    tolerance: "|x-x'| <= d/508+2^-24*|x|+5*2^-24*d; |q1|,|q2| <= 127; d within 2.5 ulp of amax/127",
    case: parity_case,
};

/// Tolerance of [`quantize_q8_glu`] against a = glu_ref(gate, up): |a_i - x'_i| <= e_i +
/// d / 508 + u (|a_i| + e_i) + 5u d, e_i = glu's bound 2^-16 (|g_i| + 1) |up_i|
/// ([`glu::tolerance`]): the GPU quantizes its own a'_i, within e_i of a_i, and [`CHECK`]'s
/// bound holds for a'_i. Each d within e_max / 127 + 2.5 ulp((amax + e_max) / 127) of
/// amax(a) / 127, e_max the block's largest e_i (the max moves by at most that). Blocks
/// whose up is all zero: exactly d = 0, q1 = q2 = 0.
pub const GLU_CHECK: Check = Check {
    name: "quantize_q8_glu",
    tolerance: "|a-x'| <= e+d/508+2^-24*(|a|+e)+5*2^-24*d, e = glu's; d within e_max/127 + 2.5 ulp",
    case: glu_parity_case,
};

/// Sentinel of the q tensor's words outside the vector.
const UNTOUCHED: u32 = 0xdead_beef;

/// Random inputs of `n_blocks` blocks: per block a magnitude 2^-20 .. 2^20; one block in 8
/// all zero, one in 8 of one magnitude with random signs (x / d = +-127 everywhere), one in 8
/// with one input 100x the rest (most inputs then lie within a few d of zero, where the
/// second digit carries them).
fn random_blocks(rng: &mut Rng, n_blocks: usize) -> Vec<f32> {
    let mut x = random_f32(n_blocks * Q8_BLOCK, rng.next_u64());
    for block in x.chunks_exact_mut(Q8_BLOCK) {
        let m = 2f32.powi(rng.range(0, 41) as i32 - 20);
        match rng.range(0, 8) {
            0 => block.fill(0.0),
            1 => block.iter_mut().for_each(|v| *v = m.copysign(*v)),
            2 => {
                block.iter_mut().for_each(|v| *v *= m);
                let k = rng.range(0, Q8_BLOCK);
                block[k] = (100.0 * m).copysign(block[k]);
            }
            _ => block.iter_mut().for_each(|v| *v *= m),
        }
    }
    x
}

/// The q tensor of a case: the vector at word `at`, 3 words after it, all the sentinel.
fn q_tensor(gpu: &Gpu, at: usize, n: usize) -> GpuTensor {
    let len = at + q8_words(n) + 3;
    GpuTensor::from_u32(gpu, &[len], &vec![UNTOUCHED; len])
}

/// Runs `op` and reads the whole q tensor back: (the vector's words, `Compare` of the words
/// outside it against the sentinel).
fn run_q(
    gpu: &Gpu,
    op: Op,
    qt: &GpuTensor,
    at: usize,
    n: usize,
) -> Result<(Vec<u32>, Compare), GpuError> {
    let all: Vec<u32> = run_read(gpu, vec![op], qt, 0, qt.len())?;
    let mut c = Compare::default();
    let inside = at..at + q8_words(n);
    for (i, &w) in all.iter().enumerate().filter(|(i, _)| !inside.contains(i)) {
        c.exact(f64::from(w), f64::from(UNTOUCHED), || {
            format!("word {i} outside the vector")
        });
    }
    Ok((all[inside].to_vec(), c))
}

/// Compares a GPU q8 vector of `want.len()` inputs with the values it stands for: per
/// element `|want - x'| <= bound(want, d) + slack_i`, x' = d (q1 + q2 / 254); per block d
/// against `amax(want) / 127` within `d_bound(block, amax)`; |q1|, |q2| <= 127; a zero block
/// exactly zero (its bound is 0).
fn compare_q8(
    c: &mut Compare,
    words: &[u32],
    want: &[f32],
    slack: &dyn Fn(usize) -> f64,
    d_bound: &dyn Fn(usize, f64) -> f64,
) {
    let n = want.len();
    let scales = &words[n / 2..];
    for (b, block) in want.chunks_exact(Q8_BLOCK).enumerate() {
        let d = f64::from(f32::from_bits(scales[b]));
        let amax = block.iter().fold(0f64, |m, v| m.max(f64::from(v.abs())));
        if amax == 0.0 {
            c.exact(d, 0.0, || format!("block {b} of zeros: d"));
        } else {
            c.add(d, amax / 127.0, d_bound(b, amax), || {
                format!("block {b}: d")
            });
        }
        for (j, &x) in block.iter().enumerate() {
            let i = b * Q8_BLOCK + j;
            let (q1, q2) = digits_at(words, n, i);
            for q in [q1, q2] {
                c.exact(f64::from(q.unsigned_abs().max(127)), 127.0, || {
                    format!("input {i}: digits {q1}, {q2}")
                });
            }
            let x = f64::from(x);
            let bound = rounding_bound(x, d) + slack(i);
            c.add(digit_value(q1, q2, d), x, bound, || {
                format!("input {i} of block {b}: digits {q1}, {q2}, d {d:e}")
            });
        }
    }
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = Q8_BLOCK * rng.range(1, 80);
    let x_at = rng.range(0, 5);
    let q_at = 4 * rng.range(0, 3);
    let x = random_blocks(rng, n / Q8_BLOCK);
    let padded = [vec![0.5; x_at], x.clone()].concat();
    let xt = GpuTensor::from_f32(gpu, &[padded.len()], &padded);
    let qt = q_tensor(gpu, q_at, n);
    let op = quantize_q8(View::at(&xt, x_at), View::at(&qt, q_at), n)?;
    let (words, mut c) = run_q(gpu, op, &qt, q_at, n)?;
    let d_bound = |_, amax: f64| 2.5 * ulp32(amax / 127.0);
    compare_q8(&mut c, &words, &x, &|_| 0.0, &d_bound);
    Ok(c)
}

fn glu_parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = Q8_BLOCK * rng.range(1, 80);
    let act = rng.pick(&[Activation::GeluTanh, Activation::Silu]);
    let q_at = 4 * rng.range(0, 3);
    // Gates span [-8, 8] (both activations' curved parts and tails), up [-1, 1]; one block in
    // 8 has up = 0 (a block of zeros).
    let gate: Vec<f32> = random_f32(n, rng.next_u64())
        .iter()
        .map(|g| 8.0 * g)
        .collect();
    let mut up = random_f32(n, rng.next_u64());
    for block in up.chunks_exact_mut(Q8_BLOCK) {
        if rng.range(0, 8) == 0 {
            block.fill(0.0);
        }
    }
    // Gate and up in one tensor (the fused gate|up output) at odd offsets, or two.
    let (gate_at, up_gap) = (rng.range(0, 5), rng.range(0, 5));
    let pad = |at: usize, v: &[f32]| [vec![0.5; at], v.to_vec()].concat();
    let qt = q_tensor(gpu, q_at, n);
    let op = if rng.bool() {
        let gu = [pad(gate_at, &gate), pad(up_gap, &up)].concat();
        let t = GpuTensor::from_f32(gpu, &[gu.len()], &gu);
        let (g, u) = (View::at(&t, gate_at), View::at(&t, gate_at + n + up_gap));
        quantize_q8_glu(act, g, u, View::at(&qt, q_at), n)?
    } else {
        let (g, u) = (pad(gate_at, &gate), pad(up_gap, &up));
        let gt = GpuTensor::from_f32(gpu, &[g.len()], &g);
        let ut = GpuTensor::from_f32(gpu, &[u.len()], &u);
        let (g, u) = (View::at(&gt, gate_at), View::at(&ut, up_gap));
        quantize_q8_glu(act, g, u, View::at(&qt, q_at), n)?
    };
    let (words, mut c) = run_q(gpu, op, &qt, q_at, n)?;
    let a = glu_ref(act, &gate, &up);
    let e: Vec<f64> = gate
        .iter()
        .zip(&up)
        .map(|(&g, &u)| glu::tolerance(g, u))
        .collect();
    // Element slack: e_i, and the bound's u |x| on the e_i a'_i may exceed a_i by.
    let slack = |i: usize| e[i] * (1.0 + U);
    // d: the block's largest e_i bounds how far the GPU's amax moves from the reference's.
    let d_bound = |b: usize, amax: f64| {
        let e_max = e[b * Q8_BLOCK..][..Q8_BLOCK]
            .iter()
            .fold(0f64, |m, &v| m.max(v));
        e_max / 127.0 + 2.5 * ulp32((amax + e_max) / 127.0)
    };
    compare_q8(&mut c, &words, &a, &slack, &d_bound);
    Ok(c)
}

/// Quantizes `x` on the GPU into a new q8 vector at word `at` of its tensor and reads back
/// the values it stands for: (the tensor, `dequantize_q8_ref` of the GPU's words). The q8
/// matvec's checks multiply by exactly what the matvec reads.
pub(crate) fn quantized_on_gpu(
    gpu: &Gpu,
    x: &[f32],
    at: usize,
) -> Result<(GpuTensor, Vec<f32>), GpuError> {
    let n = x.len();
    let xt = GpuTensor::from_f32(gpu, &[n], x);
    let qt = q_tensor(gpu, at, n);
    let op = quantize_q8((&xt).into(), View::at(&qt, at), n)?;
    let words: Vec<u32> = run_read(gpu, vec![op], &qt, at, q8_words(n))?;
    let values = dequantize_q8_ref(&words, n)?;
    Ok((qt, values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn quantize_matches_reference() {
        testutil::parity("quantize_q8", 8, 51);
    }

    #[test]
    fn quantize_glu_matches_reference() {
        testutil::parity("quantize_q8_glu", 8, 61);
    }

    /// The layout on a hand-made vector: block 0 = 0, 1, .., 31 (amax 31: d = 31/127,
    /// q1_i = round(127 i / 31), q2_i = round(254 (127 i / 31 - q1_i)): 254 k / 31 is never
    /// within 1/62 of a half, so f32's roundings cannot move it), block 1 of zeros; bytes
    /// little-endian, the second digits after the first, the scales after both.
    #[test]
    fn reference_layout() {
        let mut x: Vec<f32> = (0..32).map(|i| i as f32).collect();
        x.extend([0.0; 32]);
        let words = quantize_q8_ref(&x).unwrap();
        assert_eq!(words.len(), q8_words(64));
        assert_eq!(q8_words(64), 34);
        let q1 = |i: usize| (127.0 * i as f64 / 31.0).round();
        let q2 = |i: usize| (254.0 * (127.0 * i as f64 / 31.0 - q1(i))).round();
        let byte = |w: usize, i: usize| words[w + i / 4].to_le_bytes()[i % 4] as i8;
        for i in 0..32 {
            assert_eq!(f64::from(byte(0, i)), q1(i), "first digit of {i}");
            assert_eq!(f64::from(byte(16, i)), q2(i), "second digit of {i}");
        }
        assert_eq!((byte(0, 31), byte(16, 31)), (127, 0));
        assert_eq!((byte(0, 1), byte(16, 1)), (4, 25));
        assert!(words[8..16].iter().all(|&w| w == 0));
        assert!(words[24..32].iter().all(|&w| w == 0));
        assert_eq!(f32::from_bits(words[32]), 31.0 / 127.0);
        assert_eq!(words[33], 0);
        let back = dequantize_q8_ref(&words, 64).unwrap();
        let d = 31.0 / 127.0;
        for (i, (&v, &x)) in back.iter().zip(&x).enumerate() {
            let bound = rounding_bound(f64::from(x), d) + U * f64::from(x);
            assert!(f64::from((v - x).abs()) <= bound, "{i}: {v} for {x}");
        }
    }

    /// The CPU reference keeps its own rule, over the check's random blocks: with correctly
    /// rounded f32 operations every input is within d / 508 + 2u |x| + 3u d. As in
    /// [`rounding_bound`] with the division's 5u replaced by u: |r| <= d / 2 + u |x|,
    /// |r~ - r| <= u |x| + 2u |r|, t~ within 2u relative of 254 r~ / d (|t~| <= 127.01), so
    /// |x - x'| <= d / 508 + u |x| + 2.01u d; the f32 rounding of x' adds u |x'| <= u |x| +
    /// u d / 508.
    #[test]
    fn reference_rule() {
        let mut rng = Rng::new(5);
        let x = random_blocks(&mut rng, 200);
        let back = dequantize_q8_ref(&quantize_q8_ref(&x).unwrap(), x.len()).unwrap();
        for (block, got) in x.chunks_exact(Q8_BLOCK).zip(back.chunks_exact(Q8_BLOCK)) {
            let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = f64::from(amax / 127.0);
            for (&x, &v) in block.iter().zip(got) {
                let bound = d / 508.0 + 2.0 * U * f64::from(x.abs()) + 3.0 * U * d;
                assert!((f64::from(v) - f64::from(x)).abs() <= bound, "{x} -> {v}");
            }
        }
    }

    /// Bad lengths, a misaligned or short q, q in the input's tensor: errors, not wrong
    /// kernels.
    #[test]
    fn checks_its_arguments() {
        let Some(gpu) = testutil::gpu() else { return };
        let x = GpuTensor::zeros(gpu, &[64], crate::Dtype::F32);
        let q = GpuTensor::zeros(gpu, &[q8_words(64) + 4], crate::Dtype::U32);
        let (xv, qv) = (View::from(&x), View::from(&q));
        // Input and output in one tensor.
        let both = GpuTensor::zeros(gpu, &[64], crate::Dtype::F32);
        assert!(quantize_q8(xv, qv, 64).is_ok());
        assert!(quantize_q8(xv, View::at(&q, 4), 64).is_ok());
        for (x, q, n) in [
            (xv, qv, 48),
            (xv, qv, 0),
            (xv, View::at(&q, 2), 64),
            (xv, View::at(&q, 8), 64),
            (View::at(&x, 1), qv, 64),
            (View::from(&both), View::at(&both, 4), 32),
        ] {
            assert!(
                quantize_q8(x, q, n).is_err(),
                "{n} at {} / {}",
                x.offset,
                q.offset
            );
        }
        assert!(quantize_q8_ref(&[1.0; 40]).is_err());
        assert!(dequantize_q8_ref(&[0; 33], 64).is_err());
    }
}
