//! The GLU epilogue's CPU reference, its bound and its parity checks (vector and q8 inputs).

use super::super::*;
use super::{
    check_untouched, input_tensor, input_view, random_input, untouched_tensor, upload_random_weight,
};
use crate::device::Gpu;
use crate::parity::data::{Rng, n_in_block};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::{GpuTensor, GpuWeight, WeightShape};

/// The reference of one output of [`matvec_glu_out`], in f64: the two row sums, their sums
/// of `|w_i x_i|` (the scale of the matvec's bound) and `act(gate) * up`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GluOutRef {
    /// The gate row's sum.
    pub gate: f64,
    /// The up row's sum.
    pub up: f64,
    /// The gate row's sum of `|w_i x_i|`.
    pub gate_abs: f64,
    /// The up row's sum of `|w_i x_i|`.
    pub up_abs: f64,
    /// `act(gate) * up`.
    pub value: f64,
}

/// CPU reference of [`matvec_glu_out`] over the dequantized weights: gate's rows `w_gate` and
/// up's rows `w_up` (each `n_ff * n_in`, row-major), `x` of `n_in`.
pub fn glu_out_ref(act: Activation, w_gate: &[f32], w_up: &[f32], x: &[f32]) -> Vec<GluOutRef> {
    let dot = |row: &[f32]| -> (f64, f64) {
        row.iter().zip(x).fold((0.0, 0.0), |(s, a), (&w, &x)| {
            let t = f64::from(w) * f64::from(x);
            (s + t, a + t.abs())
        })
    };
    w_gate
        .chunks_exact(x.len())
        .zip(w_up.chunks_exact(x.len()))
        .map(|(g, u)| {
            let ((gate, gate_abs), (up, up_abs)) = (dot(g), dot(u));
            GluOutRef {
                gate,
                up,
                gate_abs,
                up_abs,
                value: act.apply(gate) * up,
            }
        })
        .collect()
}

/// A bound on `|act'(x)|` for both activations: GELU (tanh form) peaks at 1.1289 near
/// x = 1.5, SiLU at 1.0999 near x = 2.4 (`tests::activation_slope`).
pub const ACT_SLOPE: f64 = 1.13;

/// The bound of one output (see [`GLU_OUT_CHECK`]).
pub fn glu_out_bound(n_in: usize, act: Activation, r: &GluOutRef) -> f64 {
    let n = (n_in + 4) as f64 * U;
    let (eg, eu) = (n * r.gate_abs, n * r.up_abs);
    let up = r.up.abs() + eu;
    ACT_SLOPE * eg * up
        + act.apply(r.gate).abs() * eu
        + (1.0 / 65536.0 + U) * (r.gate.abs() + eg + 1.0) * up
}

/// Tolerance of [`matvec_glu_out`] with a vector input, against the f64
/// `act(g) * u` of the exact row sums g, u: the GPU's sums g', u' are within the matvec's
/// bound, e_g = (n_in + 4) u sum_i |w_gate,i x_i| (e_u alike), act moves by at most
/// `ACT_SLOPE` e_g, and the glu kernel's expression on (g', u') errs by glu's
/// `2^-16 (|g'| + 1) |u'|` plus the f32 rounding of the product (u |act(g') u'| with
/// |act(x)| <= |x|): `1.13 e_g (|u| + e_u) + |act(g)| e_u + (2^-16 + u)(|g| + e_g + 1)(|u| + e_u)`.
/// Cases: every format, gate|up of 1..24 rows each (odd and even) at any row of a weight of
/// two chunks, both activations; every element of y outside the outputs untouched.
pub const GLU_OUT_CHECK: Check = Check {
    name: "matvec_glu_out",
    tolerance: "1.13 e_g (|u|+e_u) + |act(g)| e_u + (2^-16+2^-24)(|g|+e_g+1)(|u|+e_u), e = (n_in+4)*2^-24*sum|w_i x_i|",
    case: parity_case,
};

/// Tolerance of [`matvec_glu_out`] with a q8 input: [`GLU_OUT_CHECK`]'s over x', the values
/// the GPU's q8 vector stands for (read back), as `matvec_q8`'s checks do. Cases: the q8
/// formats.
pub const Q8_GLU_OUT_CHECK: Check = Check {
    name: "matvec_q8_glu_out",
    tolerance: "as matvec_glu_out over x' = d*(q1+q2/254) read back from the GPU",
    case: q8_parity_case,
};

/// One GLU-epilogue case: gate|up (`n_ff` rows each) from row `first` of a random weight of
/// `n_out` rows in chunks of `chunk_rows` (the range inside one chunk).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Case {
    pub format: GpuFormat,
    pub act: Activation,
    pub n_ff: usize,
    pub n_blocks: usize,
    pub first: usize,
    pub n_out: usize,
    pub chunk_rows: usize,
    /// The input as a q8 vector (at word 4 of its tensor).
    pub q8: bool,
    pub seed: u64,
}

impl Case {
    fn random(rng: &mut Rng, format: GpuFormat, q8: bool) -> Case {
        // One case in six has rows enough for several quads a workgroup (`lanes`), short ones.
        let many = rng.range(0, 6) == 0;
        let n_ff = rng.range(1, 25) + if many { QUADS_MIN_ROWS / 2 } else { 0 };
        let max_blocks = (if many { 96 } else { 40 * 32 }) / n_in_block(format);
        // The chunk holding the range: its rows and where the range starts in it.
        let spare = rng.range(0, 5);
        let chunk_rows = 2 * n_ff + spare;
        let chunk = rng.range(0, 2);
        let first = chunk * chunk_rows + rng.range(0, spare + 1);
        Case {
            format,
            act: rng.pick(&[Activation::GeluTanh, Activation::Silu]),
            n_ff,
            n_blocks: rng.range(1, max_blocks.max(2)),
            first,
            n_out: (chunk + 1) * chunk_rows + rng.range(0, 5),
            chunk_rows,
            q8,
            seed: rng.next_u64(),
        }
    }

    fn n_in(&self) -> usize {
        self.n_blocks * n_in_block(self.format)
    }

    /// The word of its tensor the q8 input starts at.
    fn q8_at(&self) -> Option<usize> {
        self.q8.then_some(4)
    }

    fn weight(&self, gpu: &Gpu) -> Result<(GpuWeight, Vec<f32>), GpuError> {
        let shape = WeightShape {
            format: self.format,
            n_in: self.n_in(),
            n_out: self.n_out,
        };
        upload_random_weight(gpu, shape, self.chunk_rows, self.seed)
    }

    /// The input's tensor and the values the reference multiplies by.
    fn input(&self, gpu: &Gpu) -> Result<(GpuTensor, Vec<f32>), GpuError> {
        let x = random_input(self.n_in(), self.seed ^ 1, self.q8);
        input_tensor(gpu, x, self.q8_at())
    }
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let format = rng.pick(&GpuFormat::ALL);
    compare(gpu, &Case::random(rng, format, false))
}

fn q8_parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let format = rng.pick(&super::q8::formats());
    compare(gpu, &Case::random(rng, format, true))
}

/// Runs one case, y written from offset 3 of a tensor 5 longer than the outputs.
pub(crate) fn compare(gpu: &Gpu, case: &Case) -> Result<Compare, GpuError> {
    let n_in = case.n_in();
    let (wt, w) = case.weight(gpu)?;
    let (xt, x) = case.input(gpu)?;
    let len = case.n_ff + 5;
    let yt = untouched_tensor(gpu, len);
    let rows = wt.rows(case.first..case.first + 2 * case.n_ff);
    let input = input_view(&xt, case.q8_at());
    let ops = matvec_glu_out(rows, case.act, input, View::at(&yt, 3))?;
    let y: Vec<f32> = run_read(gpu, ops, &yt, 0, len)?;
    let gate = &w[case.first * n_in..][..case.n_ff * n_in];
    let up = &w[(case.first + case.n_ff) * n_in..][..case.n_ff * n_in];
    let want = glu_out_ref(case.act, gate, up, &x);
    let mut c = Compare::default();
    for (i, r) in want.iter().enumerate() {
        let bound = glu_out_bound(n_in, case.act, r);
        c.add(f64::from(y[3 + i]), r.value, bound, || {
            format!("{case:?}: output {i} (gate {}, up {})", r.gate, r.up)
        });
    }
    let covered: Vec<bool> = (0..len).map(|i| (3..3 + case.n_ff).contains(&i)).collect();
    check_untouched(&mut c, &y, &covered, case);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::glu::glu;
    use crate::ops::matvec::matvec_split_input;
    use crate::ops::split::Out;
    use crate::parity::data::random_f32;
    use crate::tensor::Dtype;
    use crate::testutil;

    #[test]
    fn matvec_glu_out_matches_reference() {
        testutil::parity("matvec_glu_out", 12, 61);
    }

    #[test]
    fn matvec_q8_glu_out_matches_reference() {
        testutil::parity("matvec_q8_glu_out", 8, 71);
    }

    /// `cargo test -p rullama-kernels many_glu_out_cases -- --ignored --nocapture`: both
    /// checks with `RULLAMA_PARITY_CASES` cases each (default 60), one line per check.
    #[test]
    #[ignore = "60 cases per check, a minute on lavapipe"]
    fn many_glu_out_cases() {
        let Some(gpu) = testutil::gpu() else { return };
        let cases = std::env::var("RULLAMA_PARITY_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(60);
        for check in [GLU_OUT_CHECK, Q8_GLU_OUT_CHECK] {
            let r = check.run(gpu, cases, 1);
            eprintln!("{r}");
            assert!(r.passed(), "{r}");
        }
    }

    /// [`ACT_SLOPE`] bounds both activations' slopes (finite differences over [-40, 40]).
    #[test]
    fn activation_slope() {
        for act in [Activation::GeluTanh, Activation::Silu] {
            let h = 1e-4;
            let steepest = (-400_000..400_000)
                .map(|i| {
                    let x = f64::from(i) * h;
                    ((act.apply(x + h) - act.apply(x)) / h).abs()
                })
                .fold(0.0, f64::max);
            assert!(steepest < ACT_SLOPE, "{act:?}: {steepest}");
            assert!(steepest > 1.09, "{act:?}: {steepest}");
        }
    }

    fn case(format: GpuFormat, n_ff: usize, q8: bool, seed: u64) -> Case {
        Case {
            format,
            act: [Activation::GeluTanh, Activation::Silu][seed as usize % 2],
            n_ff,
            n_blocks: 2,
            // The range from row 3 of the second chunk.
            first: 2 * n_ff + 7 + 3,
            n_out: 2 * (2 * n_ff + 7) + 1,
            chunk_rows: 2 * n_ff + 7,
            q8,
            seed,
        }
    }

    /// Every format, odd and even n_ff (q8 inputs for the formats that have them).
    #[test]
    fn glu_out_every_format() {
        let Some(gpu) = testutil::gpu() else { return };
        for (i, format) in GpuFormat::ALL.into_iter().enumerate() {
            for n_ff in [1, 6, 9] {
                let mut inputs = vec![false];
                if q8_supported(format) {
                    inputs.push(true);
                }
                for q8 in inputs {
                    let c = compare(gpu, &case(format, n_ff, q8, 500 + i as u64)).unwrap();
                    assert!(c.max_ratio <= 1.0, "{}", c.worst);
                }
            }
        }
    }

    /// The bits the epilogue stores over `rows` (gate|up of `case.n_ff` each) with `input`,
    /// and those of the split product over the same rows and input followed by glu.
    fn epilogue_and_glu_after(
        gpu: &Gpu,
        rows: WeightRows<'_>,
        case: &Case,
        input: Input<'_>,
    ) -> (Vec<u32>, Vec<u32>) {
        let n_ff = case.n_ff;
        // y: the epilogue's n_ff outputs, then the glu kernel's; gu: the product.
        let y = GpuTensor::zeros(gpu, &[2 * n_ff], Dtype::F32);
        let gu = GpuTensor::zeros(gpu, &[2 * n_ff], Dtype::F32);
        let mut ops = matvec_glu_out(rows, case.act, input, (&y).into()).unwrap();
        let out = [Out::new((&gu).into(), 2 * n_ff)];
        ops.extend(matvec_split_input(rows, input, None, &out).unwrap());
        let (gate, up) = ((&gu).into(), View::at(&gu, n_ff));
        ops.push(glu(case.act, gate, up, View::at(&y, n_ff), n_ff).unwrap());
        let got: Vec<f32> = run_read(gpu, ops, &y, 0, 2 * n_ff).unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        (bits(&got[..n_ff]), bits(&got[n_ff..]))
    }

    /// The GLU epilogue stores what the product over gate|up followed by the glu kernel
    /// stores, bit for bit: the same row sums, the same expression.
    #[test]
    fn equals_product_then_glu() {
        let Some(gpu) = testutil::gpu() else { return };
        for (i, format) in [
            GpuFormat::F32,
            GpuFormat::Q8_0,
            GpuFormat::Q4_0,
            GpuFormat::Q4K,
            GpuFormat::Q5_0,
            GpuFormat::Q6K,
            GpuFormat::Q5K,
        ]
        .into_iter()
        .enumerate()
        {
            for (n_ff, q8) in [(8, false), (13, false), (13, true), (2, true)] {
                if q8 && !q8_supported(format) {
                    continue;
                }
                let case = case(format, n_ff, q8, 800 + i as u64);
                let (wt, _) = case.weight(gpu).unwrap();
                let (xt, _) = case.input(gpu).unwrap();
                let rows = wt.rows(case.first..case.first + 2 * n_ff);
                let input = input_view(&xt, case.q8_at());
                let (fused, apart) = epilogue_and_glu_after(gpu, rows, &case, input);
                assert_eq!(fused, apart, "{format:?} n_ff {n_ff} q8 {q8}");
            }
        }
    }

    /// With a norm input (`Input::Norm`: a residual op folded in, as the lowering composes
    /// them; its addend as it is, Llama's, or normed, Gemma's) the epilogue stores what the
    /// product over gate|up with the same input followed by the glu kernel stores, bit for
    /// bit: every workgroup of both derives the same norms and scales the same row sums by
    /// them.
    #[test]
    fn norm_input_equals_product_then_glu() {
        use crate::ops::matvec::NormInput;
        let Some(gpu) = testutil::gpu() else { return };
        for (i, format) in [
            GpuFormat::Q8_0,
            GpuFormat::Q4K,
            GpuFormat::Q5_0,
            GpuFormat::Q6K,
        ]
        .into_iter()
        .enumerate()
        {
            for (n_ff, normed) in [(8, false), (13, false), (8, true), (13, true)] {
                let case = case(format, n_ff, false, 900 + i as u64);
                let (wt, _) = case.weight(gpu).unwrap();
                let n_in = case.n_in();
                let a = GpuTensor::from_f32(gpu, &[n_in], &random_f32(n_in, case.seed ^ 7));
                let h = GpuTensor::from_f32(gpu, &[n_in], &random_f32(n_in, case.seed ^ 8));
                let g = GpuTensor::from_f32(gpu, &[n_in], &random_f32(n_in, case.seed ^ 9));
                let g_in = GpuTensor::from_f32(gpu, &[n_in], &random_f32(n_in, case.seed ^ 6));
                let hx = GpuTensor::zeros(gpu, &[2 * n_in], Dtype::F32);
                let input = Input::Norm(NormInput {
                    a: (&a).into(),
                    w_in: normed.then_some(&g_in),
                    h: (&h).into(),
                    w_out: &g,
                    h_out: (&hx).into(),
                    x_out: View::at(&hx, n_in),
                    eps: 1e-6,
                });
                let rows = wt.rows(case.first..case.first + 2 * n_ff);
                let (fused, apart) = epilogue_and_glu_after(gpu, rows, &case, input);
                assert_eq!(fused, apart, "{format:?} n_ff {n_ff} normed {normed}");
            }
        }
    }

    /// Rows that are not gate and up of equal counts, that straddle two chunks, or a GLU
    /// input: errors, not wrong kernels.
    #[test]
    fn refuses_what_it_cannot_do() {
        let Some(gpu) = testutil::gpu() else { return };
        let shape = WeightShape {
            format: GpuFormat::F32,
            n_in: 4,
            n_out: 12,
        };
        let w = GpuWeight::upload_chunked(gpu, shape, &[0u8; 4 * 4 * 12], 8).unwrap();
        let t = GpuTensor::zeros(gpu, &[16], Dtype::F32);
        let y = GpuTensor::zeros(gpu, &[16], Dtype::F32);
        let x = Input::Plain((&t).into());
        let act = Activation::Silu;
        assert!(glu_out_supported(w.rows(0..8)));
        assert!(glu_out_supported(w.rows(8..12)));
        assert!(matvec_glu_out(w.rows(2..8), act, x, (&y).into()).is_ok());
        for bad in [0..7, 6..10, 0..12] {
            assert!(!glu_out_supported(w.rows(bad.clone())), "{bad:?}");
            let r = matvec_glu_out(w.rows(bad.clone()), act, x, (&y).into());
            assert!(r.is_err(), "{bad:?}");
        }
        let glu_in = Input::Glu {
            act,
            gate: (&t).into(),
            up: (&t).into(),
        };
        let r = matvec_glu_out(w.rows(0..8), act, glu_in, (&y).into());
        assert!(matches!(r, Err(GpuError::InvalidParams { .. })), "{r:?}");
        // y too short for n_ff outputs.
        let r = matvec_glu_out(w.rows(0..8), act, x, View::at(&y, 13));
        assert!(r.is_err());
    }
}
