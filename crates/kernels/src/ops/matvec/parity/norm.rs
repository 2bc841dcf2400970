//! Parity of the matvec with a norm input ([`Input::Norm`]): the residual add and the normed
//! vector it stores and the product of that vector, against `ops::residual_norm`'s reference
//! (the add, with or without the addend's own norm), `ops::norm`'s and the matvec's.

use crate::device::Gpu;
use crate::error::GpuError;
use crate::ops::norm::RmsNorm;
use crate::ops::residual_norm::ResidualNorm;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::readback::Readback;
use crate::tensor::{Dtype, GpuTensor, View};

use super::super::{Input, NormInput, ops};
use super::{Case, matvec_bias_ref, perturbed_input_bound};

/// Tolerance. h' = h + a exactly (one f32 add, as the reference rounds it); with the addend
/// normed, h' = h + a' as `residual_norm::CHECK` bounds it, `(n/2 + 8) u |a'| + 2 u |h'|`
/// (every workgroup reduces rms(a) itself, in another order than the reference). The stored x as
/// `residual_norm::CHECK` bounds y: `(n/2 + 8) u |x|` against the f64 norm of the GPU's h'.
/// The product against `W x + b` with that x: the kernel sums `w_i fl(h'_i g_i)` and scales
/// the total by its own 1 / rms(h'), so its effective input is within e_i = (n/2 + 8) u |x_i|
/// of x_i (rms_norm's bound covers the scale's error and the two products' roundings); as
/// for the GLU input, `(n_in + 5) u (sum_i |w_i x_i| + |b|) + (1 + (n_in + 4) u)
/// sum_i |w_i| e_i`.
pub const CHECK: Check = Check {
    name: "matvec_norm",
    tolerance: "h': exact (normed addend: (n/2+8)u|a'|+2u|h'|); x: (n/2+8)u|x|; y: (n_in+5)u(sum|w_i x_i|+|b|) + (1+(n_in+4)u) sum|w_i| e_i, e_i = (n/2+8)u|x_i|",
    case: parity_case,
};

/// Where a norm case's vectors live, and whether its addend is normed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NormPlace {
    /// a goes through its own weighted RMSNorm before the add (Gemma's post-norm).
    pub normed: bool,
    /// Offsets (multiples of 4) of a and h in their tensors, and of h_out in the tensor it
    /// shares with x_out (which follows it).
    pub a_at: usize,
    pub h_at: usize,
    pub out_at: usize,
}

/// `case` with its rows grown to whole units of 32 (what the norm and scaled inputs take).
pub(crate) fn whole_units(mut case: Case) -> Case {
    while !case.n_in().is_multiple_of(32) {
        case.n_blocks += 1;
    }
    case
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let mut case = whole_units(Case::random(rng));
    case.bias = rng.bool();
    let place = NormPlace {
        normed: rng.bool(),
        a_at: 4 * rng.range(0, 3),
        h_at: 4 * rng.range(0, 3),
        out_at: 4 * rng.range(0, 3),
    };
    compare_norm(gpu, case, place)
}

/// Runs one matvec with a norm input; `y` written from offset 3 of its tensor.
pub(crate) fn compare_norm(gpu: &Gpu, case: Case, place: NormPlace) -> Result<Compare, GpuError> {
    let n = case.n_in();
    let (wt, w) = case.weight(gpu)?;
    // a at another scale than h, as a block's output against the residual stream.
    let a: Vec<f32> = random_f32(n, case.seed ^ 1)
        .iter()
        .map(|v| 3.0 * v)
        .collect();
    let h = random_f32(n, case.seed ^ 2);
    let gain = random_f32(n, case.seed ^ 3);
    let gain_in = random_f32(n, case.seed ^ 4);
    let padded = |at: usize, v: &[f32]| [vec![0.5; at], v.to_vec()].concat();
    let at = GpuTensor::from_f32(gpu, &[n + place.a_at], &padded(place.a_at, &a));
    let ht = GpuTensor::from_f32(gpu, &[n + place.h_at], &padded(place.h_at, &h));
    let ot = GpuTensor::zeros(gpu, &[2 * n + place.out_at], Dtype::F32);
    let gt = GpuTensor::from_f32(gpu, &[n], &gain);
    let git = GpuTensor::from_f32(gpu, &[n], &gain_in);
    let yt = GpuTensor::zeros(gpu, &[case.n_out + 3], Dtype::F32);
    let b = case.bias.then(|| random_f32(case.n_out, case.seed ^ 5));
    let bt = b.as_ref().map(|b| GpuTensor::from_f32(gpu, &[b.len()], b));
    let eps = 1e-6;
    let input = Input::Norm(NormInput {
        a: View::at(&at, place.a_at),
        w_in: place.normed.then_some(&git),
        h: View::at(&ht, place.h_at),
        w_out: &gt,
        h_out: View::at(&ot, place.out_at),
        x_out: View::at(&ot, place.out_at + n),
        eps,
    });
    let built = ops(&wt, input, bt.as_ref().map(View::from), View::at(&yt, 3))?;
    let y: Vec<f32> = run_read(gpu, built, &yt, 3, case.n_out)?;
    let mut hx = vec![0f32; 2 * n];
    Readback::new(gpu, (hx.len() * 4) as u64).read(gpu, &ot, place.out_at, &mut hx)?;
    let (h_gpu, x_gpu) = hx.split_at(n);

    let mut c = Compare::default();
    let name = || format!("{} {place:?}", case.name());
    let residual = ResidualNorm { n, n_rows: 1, eps };
    let w_in = place.normed.then_some(&gain_in[..]);
    let mut h_ref = h.clone();
    residual.reference(&a, w_in, &mut h_ref, None);
    let addend = residual.pre(&a, w_in);
    let ulps = (n / 2 + 8) as f64;
    for (i, (&g, &r)) in h_gpu.iter().zip(&h_ref).enumerate() {
        let what = || format!("{} h' {i}", name());
        if place.normed {
            let bound = ulps * U * addend[i].abs() + 2.0 * U * f64::from(r).abs() + 1e-30;
            c.add(f64::from(g), f64::from(r), bound, what);
        } else {
            c.exact(f64::from(g), f64::from(r), what);
        }
    }
    let norm = RmsNorm { n, n_rows: 1, eps };
    let x = norm.reference(h_gpu, Some(&gain));
    for (i, (&g, &r)) in x_gpu.iter().zip(&x).enumerate() {
        let bound = ulps * U * f64::from(r.abs()) + 1e-30;
        c.add(f64::from(g), f64::from(r), bound, || {
            format!("{} x {i}", name())
        });
    }
    let e: Vec<f64> = x.iter().map(|&x| ulps * U * f64::from(x).abs()).collect();
    add_perturbed_rows(&mut c, &w, &x, &e, b.as_deref(), &y, name);
    Ok(c)
}

/// Adds to `c` each row of `y`, a product `W x' + b` whose effective input x' is within
/// `e_i` of `x`, against the f64 `W x + b`: `(n_in + 5) u (sum_i |w_i x_i| + |b|) + (1 +
/// (n_in + 4) u) sum_i |w_i| e_i` (the bias is one more term of the sum,
/// `epilogue::bias_bound`). `name` names the case.
pub(crate) fn add_perturbed_rows(
    c: &mut Compare,
    w: &[f32],
    x: &[f32],
    e: &[f64],
    b: Option<&[f32]>,
    y: &[f32],
    name: impl Fn() -> String,
) {
    let n = x.len();
    let (want, abs) = matvec_bias_ref(w, x, b);
    for (r, row) in w.chunks_exact(n).enumerate() {
        let bias = b.map_or(0.0, |b| f64::from(b[r]).abs());
        let bound = perturbed_input_bound(row, e, f64::from(abs[r]))
            + (n + 5) as f64 * U * bias
            + U * f64::from(abs[r])
            + 1e-30;
        c.add(f64::from(y[r]), f64::from(want[r]), bound, || {
            format!("{} row {r}", name())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::GpuFormat;
    use crate::testutil;

    #[test]
    fn matvec_norm_matches_reference() {
        testutil::parity("matvec_norm", 8, 31);
    }

    /// Every format, with and without a bias, with the addend as it is or normed, rows over
    /// several chunks; Q8_0 over a long row (4096: many slices per lane).
    #[test]
    fn norm_every_format() {
        let Some(gpu) = testutil::gpu() else { return };
        for (i, f) in GpuFormat::ALL.into_iter().enumerate() {
            let case = whole_units(Case {
                format: f,
                n_out: 11,
                n_blocks: if f == GpuFormat::Q8_0 { 128 } else { 3 },
                chunk_rows: 4,
                seed: 90 + i as u64,
                bias: i % 2 == 0,
            });
            let place = NormPlace {
                normed: i % 4 >= 2,
                a_at: 4 * (i % 2),
                h_at: 4 * (i % 3),
                out_at: 8,
            };
            let c = compare_norm(gpu, case, place).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }

    /// Rows that end inside a unit of 32, inputs at offsets that are not multiples of 4, and
    /// h_out and x_out in two tensors are refused.
    #[test]
    fn refuses_what_it_cannot_read() {
        let Some(gpu) = testutil::gpu() else { return };
        let t = GpuTensor::zeros(gpu, &[256], Dtype::F32);
        let g = GpuTensor::zeros(gpu, &[256], Dtype::F32);
        let o = GpuTensor::zeros(gpu, &[256], Dtype::F32);
        let o2 = GpuTensor::zeros(gpu, &[256], Dtype::F32);
        for (format, n_blocks, a_at, two, ok) in [
            (GpuFormat::Q8_0, 2, 0, false, true),
            (GpuFormat::Q8_0, 2, 2, false, false),
            (GpuFormat::Q8_0, 2, 0, true, false),
            (GpuFormat::F32, 3, 0, false, false),
        ] {
            let case = Case {
                format,
                n_out: 4,
                n_blocks,
                chunk_rows: 4,
                seed: 1,
                bias: false,
            };
            let (wt, _) = case.weight(gpu).unwrap();
            let n = case.n_in();
            let input = Input::Norm(NormInput {
                a: View::at(&t, a_at),
                w_in: None,
                h: View::at(&t, 128),
                w_out: &g,
                h_out: View::at(&o, 0),
                x_out: View::at(if two { &o2 } else { &o }, 128),
                eps: 1e-6,
            });
            let r = ops(&wt, input, None, View::at(&g, 0));
            assert_eq!(r.is_ok(), ok, "{format:?} n_in {n} a at {a_at}: {r:?}");
        }
    }
}
