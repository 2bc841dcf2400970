//! The residual epilogue's and the scaled input's parity checks.

use super::super::*;
use super::Case;
use super::norm::{add_perturbed_rows, whole_units};
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::readback::Readback;
use crate::tensor::{Dtype, GpuTensor};

/// Tolerance of [`matvec_residual`], each output against a reference on the GPU's own
/// earlier ones: h' against `h + a` with a the f64 product, the matvec's bound plus the
/// add's rounding, `(n_in + 4) u sum_i |w_i x_i| + u |h'|`; z equal to the f32 product of
/// the GPU's h' and the gain (one rounding on both sides); each partial sum against the f64
/// sum of its workgroup's rows of h'^2, `(k + 1) u` of it for k rows. Cases: every format,
/// rows from 1 to many quads a workgroup.
pub const RESIDUAL_CHECK: Check = Check {
    name: "matvec_residual",
    tolerance: "h': (n_in+4)u sum|w_i x_i| + u|h'|; z: exact (f32 h' w_out); partial sums: (k+1)u sum of k rows' h'^2",
    case: residual_case,
};

fn residual_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let mut case = Case::random(rng);
    case.chunk_rows = case.n_out;
    compare_residual(gpu, case)
}

/// Runs one residual epilogue: h at float 1 of its tensor, z at 4 of another and the partial
/// sums right after z.
pub(crate) fn compare_residual(gpu: &Gpu, case: Case) -> Result<Compare, GpuError> {
    let n = case.n_out;
    let (wt, w) = case.weight(gpu)?;
    let x = random_f32(case.n_in(), case.seed ^ 1);
    let h = random_f32(n, case.seed ^ 2);
    let gain = random_f32(n, case.seed ^ 3);
    let count = residual_partials(&wt);
    let xt = GpuTensor::from_f32(gpu, &[x.len()], &x);
    let ht = GpuTensor::from_f32(gpu, &[n + 1], &[&[9.0], &h[..]].concat());
    let gt = GpuTensor::from_f32(gpu, &[n], &gain);
    let zt = GpuTensor::zeros(gpu, &[4 + n + count], Dtype::F32);
    let r = ResidualRows {
        h: View::at(&ht, 1),
        w_out: &gt,
        z: View::at(&zt, 4),
        partials: View::at(&zt, 4 + n),
    };
    let op = matvec_residual(&wt, View::from(&xt), r)?;
    let zp: Vec<f32> = run_read(gpu, vec![op], &zt, 4, n + count)?;
    let (z, partials) = zp.split_at(n);
    let mut h_gpu = vec![0f32; n];
    Readback::new(gpu, (n * 4) as u64).read(gpu, &ht, 1, &mut h_gpu)?;

    let mut c = Compare::default();
    let name = case.name();
    let (a, abs) = matvec_ref(&w, &x);
    for r in 0..n {
        let want = f64::from(h[r]) + f64::from(a[r]);
        let got = f64::from(h_gpu[r]);
        let bound = (case.n_in() + 4) as f64 * U * f64::from(abs[r]) + U * got.abs() + 1e-30;
        c.add(got, want, bound, || format!("{name} h' {r}"));
        c.exact(f64::from(z[r]), f64::from(h_gpu[r] * gain[r]), || {
            format!("{name} z {r}")
        });
    }
    // A workgroup's rows: its quads' side by side.
    let s = wt.shape;
    let per_group = ROWS * lanes(s.format, InputKind::Plain, s.n_in, n).quads as usize;
    for (g, rows) in h_gpu.chunks(per_group).enumerate() {
        let want: f64 = rows.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        let bound = (rows.len() + 1) as f64 * U * want + 1e-30;
        c.add(f64::from(partials[g]), want, bound, || {
            format!("{name} partial {g}")
        });
    }
    Ok(c)
}

/// Tolerance of the scaled input: against `s W z + b` in f64 with s = 1 / rms from the f64
/// sum of the partial sums, as the norm input is checked (`matvec_norm`): the kernel's
/// effective input is `z_i s'` with s' within `(count/2 + 8) u` of s relative (the sum of
/// `count` positive terms errs by `count u`, halved by the square root; division, sqrt and
/// eps a few u), so `e_i = (count/2 + 8) u |z_i s|` and the bound is
/// `(n_in + 5) u (sum_i |w_i z_i s| + |b|) + (1 + (n_in + 4) u) sum_i |w_i| e_i`. Cases:
/// every format, with and without a bias, 1 to 1000 partial sums (past 8 a lane: the loop).
pub const SCALED_CHECK: Check = Check {
    name: "matvec_scaled",
    tolerance: "(n_in+5)u(sum|w_i x_i|+|b|) + (1+(n_in+4)u) sum|w_i| e_i, x = z s, e_i = (count/2+8)u|x_i|",
    case: scaled_case,
};

fn scaled_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let mut case = whole_units(Case::random(rng));
    case.bias = rng.bool();
    let count = match rng.range(0, 3) {
        0 => rng.range(1, 20),
        1 => rng.range(20, 300),
        _ => rng.range(300, 1000),
    };
    compare_scaled(gpu, case, count)
}

/// Runs one product with a scaled input: z at float 4 of its tensor, the partial sums at
/// float 3 of another, y at 3 of a third.
pub(crate) fn compare_scaled(gpu: &Gpu, case: Case, count: usize) -> Result<Compare, GpuError> {
    let n = case.n_in();
    let (wt, w) = case.weight(gpu)?;
    let z = random_f32(n, case.seed ^ 1);
    // Sums of squares: positive, of the size n rows of unit values give.
    let partials: Vec<f32> = random_f32(count, case.seed ^ 2)
        .iter()
        .map(|v| (v.abs() + 0.1) * n as f32 / count as f32)
        .collect();
    let zt = GpuTensor::from_f32(gpu, &[n + 4], &[&[1.5; 4], &z[..]].concat());
    let pt = GpuTensor::from_f32(gpu, &[count + 3], &[&[2.5; 3], &partials[..]].concat());
    let yt = GpuTensor::zeros(gpu, &[case.n_out + 3], Dtype::F32);
    let b = case.bias.then(|| random_f32(case.n_out, case.seed ^ 5));
    let bt = b.as_ref().map(|b| GpuTensor::from_f32(gpu, &[b.len()], b));
    let eps = 1e-6;
    let input = Input::Scaled(ScaledInput {
        z: View::at(&zt, 4),
        partials: View::at(&pt, 3),
        count,
        eps,
    });
    let built = ops(&wt, input, bt.as_ref().map(View::from), View::at(&yt, 3))?;
    let y: Vec<f32> = run_read(gpu, built, &yt, 3, case.n_out)?;

    let total: f64 = partials.iter().map(|&v| f64::from(v)).sum();
    let s = 1.0 / (total / n as f64 + f64::from(eps)).sqrt();
    // x rounded to f32: one more u |x_i| in the effective input, inside e_i's 8.
    let x: Vec<f32> = z.iter().map(|&v| (f64::from(v) * s) as f32).collect();
    let ulps = (count / 2 + 8) as f64;
    let e: Vec<f64> = x.iter().map(|&v| ulps * U * f64::from(v).abs()).collect();
    let mut c = Compare::default();
    let name = || format!("{} count {count}", case.name());
    add_perturbed_rows(&mut c, &w, &x, &e, b.as_deref(), &y, name);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::GpuFormat;
    use crate::ops::glu::Activation;
    use crate::ops::matvec::{QUADS_MIN_ROWS, matvec_glu_out};
    use crate::ops::norm::RmsNorm;
    use crate::testutil;

    #[test]
    fn matvec_residual_matches_reference() {
        testutil::parity("matvec_residual", 8, 41);
    }

    #[test]
    fn matvec_scaled_matches_reference() {
        testutil::parity("matvec_scaled", 8, 43);
    }

    fn case(format: GpuFormat, n_out: usize, n_blocks: usize, seed: u64) -> Case {
        Case {
            format,
            n_out,
            n_blocks,
            chunk_rows: n_out,
            seed,
            bias: false,
        }
    }

    /// Every format both ways; qwen2.5-0.5b's o projection (896 x 896 Q5_0) and a dispatch of
    /// several quads a workgroup.
    #[test]
    fn every_format_and_model_shapes() {
        let Some(gpu) = testutil::gpu() else { return };
        for (i, f) in GpuFormat::ALL.into_iter().enumerate() {
            let c = compare_residual(gpu, case(f, 37, 3, 70 + i as u64)).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
            let mut scaled = whole_units(case(f, 9, 3, 90 + i as u64));
            scaled.bias = i % 2 == 0;
            let c = compare_scaled(gpu, scaled, 224 + i).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
        for c in [
            case(GpuFormat::Q5_0, 896, 28, 1),
            case(GpuFormat::Q8_0, QUADS_MIN_ROWS + 3, 2, 2),
        ] {
            let c = compare_residual(gpu, c).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }

    /// The residual epilogue's outputs read by a product through the scaled input equal
    /// that product over the norm computed from them (the GLU epilogue over gate|up, as
    /// qwen's FFN reads its norm): z and the partial sums are what the input needs.
    #[test]
    fn residual_then_scaled_glu() {
        let Some(gpu) = testutil::gpu() else { return };
        let o = case(GpuFormat::Q8_0, 64, 2, 5);
        let (ow, _) = o.weight(gpu).unwrap();
        let count = residual_partials(&ow);
        let x = GpuTensor::from_f32(gpu, &[64], &random_f32(64, 6));
        let h0 = random_f32(64, 7);
        let h = GpuTensor::from_f32(gpu, &[64], &h0);
        let gain = GpuTensor::from_f32(gpu, &[64], &random_f32(64, 8));
        let zp = GpuTensor::zeros(gpu, &[64 + count], Dtype::F32);
        let r = ResidualRows {
            h: View::from(&h),
            w_out: &gain,
            z: View::from(&zp),
            partials: View::at(&zp, 64),
        };
        let mut ops = vec![matvec_residual(&ow, View::from(&x), r).unwrap()];
        // gate|up: 6 rows each over the 64 inputs.
        let (gw, _) = case(GpuFormat::Q8_0, 12, 2, 9).weight(gpu).unwrap();
        let y = GpuTensor::zeros(gpu, &[6], Dtype::F32);
        let input = Input::Scaled(ScaledInput {
            z: View::from(&zp),
            partials: View::at(&zp, 64),
            count,
            eps: 1e-6,
        });
        ops.extend(
            matvec_glu_out(gw.rows(0..12), Activation::Silu, input, View::from(&y)).unwrap(),
        );
        let got: Vec<f32> = run_read(gpu, ops, &y, 0, 6).unwrap();
        // The same product over x = rms_norm(h') * gain, h' read back.
        let mut hp = vec![0f32; 64];
        Readback::new(gpu, 256).read(gpu, &h, 0, &mut hp).unwrap();
        let mut g = vec![0f32; 64];
        Readback::new(gpu, 256).read(gpu, &gain, 0, &mut g).unwrap();
        let xn = RmsNorm {
            n: 64,
            n_rows: 1,
            eps: 1e-6,
        }
        .reference(&hp, Some(&g));
        let xt = GpuTensor::from_f32(gpu, &[64], &xn);
        let y2 = GpuTensor::zeros(gpu, &[6], Dtype::F32);
        let plain = matvec_glu_out(
            gw.rows(0..12),
            Activation::Silu,
            Input::Plain(View::from(&xt)),
            View::from(&y2),
        )
        .unwrap();
        let want: Vec<f32> = run_read(gpu, plain, &y2, 0, 6).unwrap();
        for (a, b) in got.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1e-3),
                "{got:?} {want:?}"
            );
        }
        assert_ne!(hp, h0, "h updated in place");
    }

    /// A weight of two chunks, aliased buffers, partial sums too few and a scaled input
    /// whose rows end inside a unit of 32 are refused.
    #[test]
    fn refuses_what_it_cannot_do() {
        let Some(gpu) = testutil::gpu() else { return };
        let two = Case {
            chunk_rows: 4,
            ..case(GpuFormat::Q8_0, 8, 2, 3)
        };
        let (two_chunks, _) = two.weight(gpu).unwrap();
        let (one_chunk, _) = case(GpuFormat::Q8_0, 8, 2, 3).weight(gpu).unwrap();
        let count = residual_partials(&one_chunk);
        let x = GpuTensor::zeros(gpu, &[64], Dtype::F32);
        let h = GpuTensor::zeros(gpu, &[8], Dtype::F32);
        let g = GpuTensor::zeros(gpu, &[8], Dtype::F32);
        let zp = GpuTensor::zeros(gpu, &[8 + count], Dtype::F32);
        let r = |h, partials| ResidualRows {
            h,
            w_out: &g,
            z: View::from(&zp),
            partials,
        };
        let x = View::from(&x);
        let ok = r(View::from(&h), View::at(&zp, 8));
        assert!(matvec_residual(&one_chunk, x, ok).is_ok());
        assert!(matvec_residual(&two_chunks, x, ok).is_err());
        let aliased = r(View::from(&zp), View::at(&zp, 8));
        assert!(matvec_residual(&one_chunk, x, aliased).is_err());
        let short = r(View::from(&h), View::at(&zp, 9));
        assert!(matvec_residual(&one_chunk, x, short).is_err());
        let (f32w, _) = case(GpuFormat::F32, 4, 3, 1).weight(gpu).unwrap();
        let input = Input::Scaled(ScaledInput {
            z: View::from(&zp),
            partials: View::at(&zp, 8),
            count,
            eps: 1e-6,
        });
        assert!(ops(&f32w, input, None, View::from(&g)).is_err());
    }
}
