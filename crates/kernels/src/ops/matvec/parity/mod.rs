//! The matvec's CPU reference and parity checks: f32, bias and GLU inputs here, the norm
//! input, the residual epilogue with the scaled input, the GLU epilogue and the q8 input in
//! the submodules; and the tests.

use crate::device::Gpu;
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::ops::epilogue::bias_bound;
use crate::ops::glu::{self, Activation, glu_ref};
use crate::parity::data::{Rng, n_in_block, random_f32, random_weight};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::{GpuTensor, GpuWeight, View, WeightShape};

use super::{Input, QUADS_MIN_ROWS, matvec_bias_input, matvec_glu, matvec_input, whole_block_rows};

mod glu_out;
mod norm;
mod q8;
mod residual;
pub use glu_out::{GLU_OUT_CHECK, GluOutRef, Q8_GLU_OUT_CHECK, glu_out_bound, glu_out_ref};
pub use norm::CHECK as NORM_CHECK;
pub(crate) use q8::formats as q8_formats;
pub use residual::{RESIDUAL_CHECK, SCALED_CHECK};

/// The checks of the matvec family: every input and epilogue, the q8 input's and the split
/// product's.
pub(crate) fn checks() -> Vec<Check> {
    vec![
        CHECK,
        GLU_CHECK,
        NORM_CHECK,
        BIAS_CHECK,
        GLU_OUT_CHECK,
        Q8_GLU_OUT_CHECK,
        RESIDUAL_CHECK,
        SCALED_CHECK,
        q8::CHECK,
        q8::BIAS_CHECK,
        q8::SPLIT_CHECK,
        q8::END_TO_END_CHECK,
        crate::ops::split::MATVEC_CHECK,
    ]
}

/// CPU reference: `y = W x` in f64 over the dequantized rows (`w` is `n_out * n_in`, row-major).
/// Also returns `sum_i |w_i x_i|` per row, the scale of the rounding error bound.
pub fn matvec_ref(w: &[f32], x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    matvec_bias_ref(w, x, None)
}

/// CPU reference of [`crate::ops::matvec::matvec_bias`]: `y = W x + bias` in f64 (the bias added before the one
/// rounding to f32); `sum_i |w_i x_i|` per row as [`matvec_ref`].
pub fn matvec_bias_ref(w: &[f32], x: &[f32], bias: Option<&[f32]>) -> (Vec<f32>, Vec<f32>) {
    w.chunks_exact(x.len())
        .enumerate()
        .map(|(r, row)| {
            let b = bias.map_or(0.0, |b| f64::from(b[r]));
            let dot: f64 = b + row
                .iter()
                .zip(x)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum::<f64>();
            let abs: f64 = row
                .iter()
                .zip(x)
                .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
                .sum();
            (dot as f32, abs as f32)
        })
        .unzip()
}

/// Tolerance: |gpu - ref| <= (n_in + 4) * 2^-24 * sum_i |w_i x_i|. The GPU sums n_in f32
/// products in another order (strided partial sums, then a tree), possibly with FMA; any
/// order of n f32 additions errs by at most n * u * sum |terms| (u = 2^-24), and decoding a
/// weight (d * sc * q - m) adds a few roundings more. The reference is f64.
pub const CHECK: Check = Check {
    name: "matvec",
    tolerance: "(n_in+4)*2^-24*sum|w_i x_i|",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    compare(gpu, Case::random(rng))
}

/// Tolerance of [`crate::ops::matvec::matvec_bias`]: the bias is one more term of the sum,
/// `(n_in + 5) u (sum_i |w_i x_i| + |b|)` ([`bias_bound`]). Cases split the weight into
/// chunks, so each chunk must add the bias of its own rows.
pub const BIAS_CHECK: Check = Check {
    name: "matvec_bias",
    tolerance: "(n_in+5)*2^-24*(sum|w_i x_i| + |b|)",
    case: bias_parity_case,
};

fn bias_parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    compare(
        gpu,
        Case {
            bias: true,
            ..Case::random(rng)
        },
    )
}

/// One matvec parity case: a random weight of `n_out` rows of `n_blocks` blocks, split into
/// chunks of `chunk_rows` rows (one op per chunk).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Case {
    pub format: GpuFormat,
    pub n_out: usize,
    pub n_blocks: usize,
    pub chunk_rows: usize,
    pub seed: u64,
    /// With a bias epilogue ([`matvec_bias`]).
    pub bias: bool,
}

impl Case {
    pub(crate) fn random(rng: &mut Rng) -> Case {
        let format = rng.pick(&GpuFormat::ALL);
        Case::random_of(rng, format)
    }

    /// A random case over weights of format `format`.
    pub(crate) fn random_of(rng: &mut Rng, format: GpuFormat) -> Case {
        // One case in six has rows enough for several quads a workgroup (`lanes`): a first
        // chunk of at least QUADS_MIN_ROWS rows, short ones (the reference's cost).
        if rng.range(0, 6) == 0 {
            let n_out = QUADS_MIN_ROWS + rng.range(1, 40);
            return Case {
                format,
                n_out,
                n_blocks: rng.range(1, (96 / n_in_block(format)).max(2)),
                chunk_rows: n_out - rng.range(0, 20),
                seed: rng.next_u64(),
                bias: false,
            };
        }
        Case {
            format,
            n_out: rng.range(1, 40),
            // Up to 40 units of 32 weights: rows shorter and longer than one trip of the
            // workgroup.
            n_blocks: rng.range(1, (40 * 32 / n_in_block(format)).max(2)),
            chunk_rows: rng.range(1, 50),
            seed: rng.next_u64(),
            bias: false,
        }
    }

    pub(crate) fn n_in(&self) -> usize {
        self.n_blocks * n_in_block(self.format)
    }

    /// The weight on the GPU and its values (row-major, from the quant crate).
    pub(crate) fn weight(&self, gpu: &Gpu) -> Result<(GpuWeight, Vec<f32>), GpuError> {
        let shape = WeightShape {
            format: self.format,
            n_in: self.n_in(),
            n_out: self.n_out,
        };
        upload_random_weight(gpu, shape, self.chunk_rows, self.seed)
    }

    pub(crate) fn name(&self) -> String {
        let bias = if self.bias { " + bias" } else { "" };
        format!("{:?} {}x{}{bias}", self.format, self.n_out, self.n_in())
    }
}

/// How a parity case feeds x to the matvec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CaseInput {
    /// The f32 vector.
    Plain,
    /// Its q8 rounding by the GPU, at word `at` of its tensor ([`random_input`],
    /// [`input_tensor`]).
    Q8 { at: usize },
}

impl CaseInput {
    /// The word of its tensor a q8 input starts at.
    fn q8_at(self) -> Option<usize> {
        match self {
            CaseInput::Plain => None,
            CaseInput::Q8 { at } => Some(at),
        }
    }
}

/// A random weight of `shape` on the GPU, in chunks of `chunk_rows` rows, and its values
/// (row-major, from the quant crate).
pub(crate) fn upload_random_weight(
    gpu: &Gpu,
    shape: WeightShape,
    chunk_rows: usize,
    seed: u64,
) -> Result<(GpuWeight, Vec<f32>), GpuError> {
    let (bytes, w) = random_weight(shape.format, shape.n_out, shape.n_in, seed);
    Ok((
        GpuWeight::upload_chunked(gpu, shape, &bytes, chunk_rows)?,
        w,
    ))
}

/// A case's input vector of `n`, uniform in [-1, 1); for a q8 input (`q8`) its blocks of 32
/// scaled by 2^-3 .. 2^3 in turn, so that a scale applied to the wrong block shows.
pub(crate) fn random_input(n: usize, seed: u64, q8: bool) -> Vec<f32> {
    let x = random_f32(n, seed);
    if !q8 {
        return x;
    }
    x.iter()
        .enumerate()
        .map(|(i, v)| v * 2f32.powi((i / 32 % 7) as i32 - 3))
        .collect()
}

/// The tensor a case feeds `x` from, and the values the reference multiplies by: x itself,
/// or (`q8_at`) its q8 rounding by the GPU at that word of its tensor and the values the
/// rounded vector stands for.
pub(crate) fn input_tensor(
    gpu: &Gpu,
    x: Vec<f32>,
    q8_at: Option<usize>,
) -> Result<(GpuTensor, Vec<f32>), GpuError> {
    match q8_at {
        None => Ok((GpuTensor::from_f32(gpu, &[x.len()], &x), x)),
        Some(at) => crate::ops::quantize::quantized_on_gpu(gpu, &x, at),
    }
}

/// The matvec input of a tensor from [`input_tensor`].
pub(crate) fn input_view(xt: &GpuTensor, q8_at: Option<usize>) -> Input<'_> {
    match q8_at {
        None => Input::Plain(xt.into()),
        Some(at) => Input::Q8(View::at(xt, at)),
    }
}

/// Value of y's elements that no output of a case covers: they must stay as they were.
pub(crate) const UNTOUCHED: f32 = -7.25;

/// A y of `len` elements, every one [`UNTOUCHED`].
pub(crate) fn untouched_tensor(gpu: &Gpu, len: usize) -> GpuTensor {
    GpuTensor::from_f32(gpu, &[len], &vec![UNTOUCHED; len])
}

/// Checks that every element of `y` that `covered` does not mark is still [`UNTOUCHED`]
/// (`case` names them).
pub(crate) fn check_untouched(
    c: &mut Compare,
    y: &[f32],
    covered: &[bool],
    case: &dyn std::fmt::Debug,
) {
    for (i, _) in covered.iter().enumerate().filter(|(_, c)| !**c) {
        c.exact(f64::from(y[i]), f64::from(UNTOUCHED), || {
            format!("{case:?}: element {i} outside the outputs")
        });
    }
}

/// Runs one matvec case, `y` written from offset 3 of its tensor (the bias, if any, read from
/// offset 2 of its own).
pub(crate) fn compare(gpu: &Gpu, case: Case) -> Result<Compare, GpuError> {
    compare_input(gpu, case, CaseInput::Plain)
}

/// [`compare`] with x fed as `mode` says.
pub(crate) fn compare_input(gpu: &Gpu, case: Case, mode: CaseInput) -> Result<Compare, GpuError> {
    let n_in = case.n_in();
    let (wt, w) = case.weight(gpu)?;
    let q8_at = mode.q8_at();
    let x = random_input(n_in, case.seed ^ 1, q8_at.is_some());
    let (xt, x) = input_tensor(gpu, x, q8_at)?;
    let input = input_view(&xt, q8_at);
    let yt = GpuTensor::zeros(gpu, &[case.n_out + 3], crate::Dtype::F32);
    let b = case.bias.then(|| random_f32(case.n_out + 2, case.seed ^ 2));
    let bt = b.as_ref().map(|b| GpuTensor::from_f32(gpu, &[b.len()], b));
    let ops = match &bt {
        Some(bt) => matvec_bias_input(&wt, input, View::at(bt, 2), View::at(&yt, 3))?,
        None => matvec_input(&wt, input, View::at(&yt, 3))?,
    };
    let y: Vec<f32> = run_read(gpu, ops, &yt, 3, case.n_out)?;
    let b = b.as_ref().map(|b| &b[2..]);
    let (want, abs) = matvec_bias_ref(&w, &x, b);
    let mut c = Compare::default();
    for r in 0..case.n_out {
        let bound = match b {
            Some(b) => bias_bound(n_in, f64::from(abs[r]), f64::from(b[r])),
            None => (n_in + 4) as f64 * U * f64::from(abs[r]),
        };
        c.add(f64::from(y[r]), f64::from(want[r]), bound, || {
            format!("{} {mode:?} row {r}", case.name())
        });
    }
    Ok(c)
}

/// Tolerance of [`matvec_glu`] against `matvec_ref(W, glu_ref(gate, up))`:
/// |gpu - ref| <= (n_in + 4) u sum_i |w_i a_i| + (1 + (n_in + 4) u) sum_i |w_i| e_i, with
/// a = glu_ref(gate, up) and e_i = 2^-16 (|g_i| + 1) |up_i| the glu kernel's bound
/// ([`glu::tolerance`]). The GPU's input a'_i = act(g_i) * up_i is within e_i of a_i (the
/// same WGSL expression as the glu kernel, `elementwise/act.wgsl`); the exact sum over a'
/// then differs from the one over a by at most sum |w_i| e_i, and the GPU's f32 sum of
/// w_i a'_i errs by the matvec's bound over |w_i a'_i| <= |w_i| (|a_i| + e_i).
pub const GLU_CHECK: Check = Check {
    name: "matvec_glu",
    tolerance: "(n_in+4)*2^-24*sum|w_i a_i| + (1+(n_in+4)*2^-24)*sum|w_i| e_i, e_i = glu's",
    case: glu_parity_case,
};

/// Where a GLU case's gate and up live: one tensor (gate, then up, as the fused gate|up
/// matvec writes them) or two; offsets of 0..4 make some unaligned (the kernel's scalar path).
#[derive(Debug, Clone, Copy)]
pub(crate) struct GluPlace {
    pub act: Activation,
    pub fused: bool,
    pub gate_at: usize,
    /// Offset of up in its tensor (fused: past the end of the gate).
    pub up_gap: usize,
}

fn glu_parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let case = Case::random(rng);
    let act = rng.pick(&[Activation::GeluTanh, Activation::Silu]);
    let fused = rng.bool();
    // Block formats refuse unaligned inputs (`check_vec4_start`): only F32/F16/BF16 rows
    // take the scalar path.
    let aligned = whole_block_rows(case.format) || rng.bool();
    let mut offset = || {
        if aligned {
            4 * rng.range(0, 2)
        } else {
            rng.range(0, 4)
        }
    };
    let place = GluPlace {
        act,
        fused,
        gate_at: offset(),
        up_gap: offset(),
    };
    compare_glu(gpu, case, place)
}

/// Runs one matvec with a GLU input.
pub(crate) fn compare_glu(gpu: &Gpu, case: Case, place: GluPlace) -> Result<Compare, GpuError> {
    let n_in = case.n_in();
    let (wt, w) = case.weight(gpu)?;
    // Gates span [-8, 8] (both activations' curved parts and tails), up [-1, 1].
    let gate: Vec<f32> = random_f32(n_in, case.seed ^ 1)
        .iter()
        .map(|g| 8.0 * g)
        .collect();
    let up = random_f32(n_in, case.seed ^ 2);
    let padded = |at: usize, v: &[f32]| [vec![0.5; at], v.to_vec()].concat();
    let (gt, ut);
    let (gv, uv) = if place.fused {
        let gu = [padded(place.gate_at, &gate), padded(place.up_gap, &up)].concat();
        gt = GpuTensor::from_f32(gpu, &[gu.len()], &gu);
        let up_at = place.gate_at + n_in + place.up_gap;
        (View::at(&gt, place.gate_at), View::at(&gt, up_at))
    } else {
        let g = padded(place.gate_at, &gate);
        let u = padded(place.up_gap, &up);
        gt = GpuTensor::from_f32(gpu, &[g.len()], &g);
        ut = GpuTensor::from_f32(gpu, &[u.len()], &u);
        (View::at(&gt, place.gate_at), View::at(&ut, place.up_gap))
    };
    let yt = GpuTensor::zeros(gpu, &[case.n_out + 3], crate::Dtype::F32);
    let ops = matvec_glu(&wt, place.act, gv, uv, View::at(&yt, 3))?;
    let y: Vec<f32> = run_read(gpu, ops, &yt, 3, case.n_out)?;
    let a = glu_ref(place.act, &gate, &up);
    let e: Vec<f64> = gate
        .iter()
        .zip(&up)
        .map(|(&g, &u)| glu::tolerance(g, u))
        .collect();
    let (want, abs) = matvec_ref(&w, &a);
    let mut c = Compare::default();
    for (r, row) in w.chunks_exact(n_in).enumerate() {
        let bound = perturbed_input_bound(row, &e, f64::from(abs[r]));
        c.add(f64::from(y[r]), f64::from(want[r]), bound, || {
            format!("{} {place:?} row {r}", case.name())
        });
    }
    Ok(c)
}

/// The bound of one row of a matvec whose input the kernel computes within `e[i]` of the
/// reference's x (a GLU, a norm): `(n_in + 4) u abs + (1 + (n_in + 4) u) sum_i |w_i| e_i`,
/// `abs` = sum_i |w_i x_i|. The exact sum over the kernel's inputs is within
/// sum |w_i| e_i of the reference's, and its f32 sum errs by the matvec's bound over
/// |w_i x'_i| <= |w_i| (|x_i| + e_i).
pub(crate) fn perturbed_input_bound(row: &[f32], e: &[f64], abs: f64) -> f64 {
    let n = (row.len() + 4) as f64 * U;
    let we: f64 = row
        .iter()
        .zip(e)
        .map(|(&w, e)| f64::from(w).abs() * e)
        .sum();
    n * abs + (1.0 + n) * we
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::matvec::{
        Addend, InputKind, QUADS_MIN_ROWS, ROWS, SKELETON, lane_layout, lanes, matvec, matvec_bias,
        ops, parts_override, q8_supported,
    };
    use crate::ops::split;
    use crate::testutil;

    #[test]
    fn matvec_matches_reference() {
        testutil::parity("matvec", 8, 1);
    }

    /// Every format once, with rows split over several chunks, without and with a bias.
    #[test]
    fn every_format() {
        let Some(gpu) = testutil::gpu() else { return };
        for (i, f) in GpuFormat::ALL.into_iter().enumerate() {
            for bias in [false, true] {
                let case = Case {
                    format: f,
                    n_out: 13,
                    n_blocks: 3,
                    chunk_rows: 5,
                    seed: 7 + i as u64,
                    bias,
                };
                let c = compare(gpu, case).unwrap();
                assert!(c.max_ratio <= 1.0, "{}", c.worst);
            }
        }
    }

    #[test]
    fn matvec_bias_matches_reference() {
        testutil::parity("matvec_bias", 8, 21);
    }

    /// The bias epilogue gives what the separate add after the product gave, bit for bit
    /// (the sum is finished, then the bias added), over a weight of 3 chunks.
    #[test]
    fn bias_equals_separate_add() {
        let Some(gpu) = testutil::gpu() else { return };
        let case = Case {
            format: GpuFormat::Q8_0,
            n_out: 37,
            n_blocks: 5,
            chunk_rows: 16,
            seed: 9,
            bias: true,
        };
        let (wt, _) = case.weight(gpu).unwrap();
        let n_in = case.n_in();
        let xt = GpuTensor::from_f32(gpu, &[n_in], &random_f32(n_in, 1));
        let bt = GpuTensor::from_f32(gpu, &[case.n_out], &random_f32(case.n_out, 2));
        let yt = GpuTensor::zeros(gpu, &[2 * case.n_out], crate::Dtype::F32);
        let (fused, plain) = (View::at(&yt, 0), View::at(&yt, case.n_out));
        let mut ops = matvec_bias(&wt, (&xt).into(), (&bt).into(), fused).unwrap();
        ops.extend(matvec(&wt, (&xt).into(), plain).unwrap());
        ops.push(crate::ops::elementwise::add_rows(plain, (&bt).into(), 1, case.n_out).unwrap());
        let y: Vec<f32> = run_read(gpu, ops, &yt, 0, 2 * case.n_out).unwrap();
        let (a, b) = y.split_at(case.n_out);
        assert_eq!(a, b);
    }

    /// A GLU input has no bias binding: asking for both is an error, not a wrong kernel.
    #[test]
    fn glu_input_takes_no_bias() {
        let Some(gpu) = testutil::gpu() else { return };
        let case = Case {
            format: GpuFormat::F32,
            n_out: 4,
            n_blocks: 1,
            chunk_rows: 4,
            seed: 1,
            bias: true,
        };
        let (wt, _) = case.weight(gpu).unwrap();
        let t = GpuTensor::zeros(gpu, &[64], crate::Dtype::F32);
        let input = Input::Glu {
            act: Activation::Silu,
            gate: (&t).into(),
            up: (&t).into(),
        };
        let r = ops(&wt, input, Some((&t).into()), View::at(&t, 32));
        assert!(matches!(r, Err(GpuError::InvalidParams { .. })), "{r:?}");
    }

    /// Block formats read their input as unchecked vec4s, so an input that does not start at
    /// a multiple of 4 floats is refused (plain and GLU); F32 rows check every read and take it.
    #[test]
    fn block_formats_refuse_unaligned_inputs() {
        let Some(gpu) = testutil::gpu() else { return };
        let y = GpuTensor::zeros(gpu, &[4], crate::Dtype::F32);
        for (format, refused) in [(GpuFormat::Q4K, true), (GpuFormat::F32, false)] {
            let case = Case {
                format,
                n_out: 4,
                n_blocks: 1,
                chunk_rows: 4,
                seed: 1,
                bias: false,
            };
            let (wt, _) = case.weight(gpu).unwrap();
            let n_in = wt.shape.n_in;
            let t = GpuTensor::zeros(gpu, &[n_in + 4], crate::Dtype::F32);
            let plain = ops(&wt, Input::Plain(View::at(&t, 2)), None, (&y).into());
            assert_eq!(plain.is_err(), refused, "{format:?} plain: {plain:?}");
            let glu = Input::Glu {
                act: Activation::Silu,
                gate: View::at(&t, 0),
                up: View::at(&t, 1),
            };
            let glu = ops(&wt, glu, None, (&y).into());
            assert_eq!(glu.is_err(), refused, "{format:?} GLU: {glu:?}");
        }
    }

    /// The entry point without subgroup operations, on a device opened without SUBGROUP (its
    /// trees over quads of 10 to 80 lanes too).
    #[test]
    fn plain_reduction() {
        let Some(gpu) = testutil::device_without(wgpu::Features::SUBGROUP) else {
            return;
        };
        assert!(!gpu.caps.subgroup);
        for check in [
            CHECK,
            GLU_CHECK,
            BIAS_CHECK,
            super::super::NORM_CHECK,
            super::super::GLU_OUT_CHECK,
            super::super::Q8_GLU_OUT_CHECK,
            split::MATVEC_CHECK,
            super::q8::CHECK,
            super::q8::SPLIT_CHECK,
        ] {
            let r = check.run(&gpu, 6, 5);
            assert!(r.passed(), "{r}");
        }
        quads_cases(&gpu);
    }

    #[test]
    fn matvec_glu_matches_reference() {
        testutil::parity("matvec_glu", 8, 11);
    }

    /// Every format with a GLU input, both activations, aligned and unaligned views of one
    /// tensor and of two.
    #[test]
    fn glu_every_format() {
        let Some(gpu) = testutil::gpu() else { return };
        for (i, f) in GpuFormat::ALL.into_iter().enumerate() {
            let case = Case {
                format: f,
                n_out: 9,
                n_blocks: 2,
                chunk_rows: 4,
                seed: 70 + i as u64,
                bias: false,
            };
            let act = [Activation::GeluTanh, Activation::Silu][i % 2];
            // Unaligned views only for the formats that take them (`check_vec4_start`).
            let (gate_at, up_gap) = if whole_block_rows(f) {
                [(0, 0), (4, 4), (4, 0), (0, 4)][i % 4]
            } else {
                [(0, 0), (1, 2), (4, 3), (3, 4)][i % 4]
            };
            for fused in [false, true] {
                let place = GluPlace {
                    act,
                    fused,
                    gate_at,
                    up_gap,
                };
                let c = compare_glu(gpu, case, place).unwrap();
                assert!(c.max_ratio <= 1.0, "{}", c.worst);
            }
        }
    }

    /// Every dot file states its lane layout in the form `lanes` reads, and each
    /// dot8 file keeps its format's (the q8 input changes the arithmetic, not the lanes).
    #[test]
    fn lane_layouts_parse() {
        for f in GpuFormat::ALL {
            let (parts, slice_units) = lane_layout(f, InputKind::Plain);
            assert!(parts.is_power_of_two() && parts <= 32, "{f:?}");
            assert!(slice_units == 1 || slice_units == 8, "{f:?}");
            if q8_supported(f) {
                assert_eq!(lane_layout(f, InputKind::Q8), (parts, slice_units), "{f:?}");
            }
        }
        let at = |f, n_in, n_rows| {
            let l = lanes(f, InputKind::Plain, n_in, n_rows);
            (l.workgroup, l.quads)
        };
        // One quad a workgroup: a power of two of lanes, at most 128; two quads of one warp.
        assert_eq!(at(GpuFormat::Q6K, 2560, 2048), (128, 1));
        // Split (below): 8 Q6_K super-blocks of 16 lanes, 28 Q8_0 blocks of 4.
        assert_eq!(at(GpuFormat::Q6K, 2048, 2560), (128, 1));
        assert_eq!(at(GpuFormat::Q5_0, 896, 9728), (64, 2));
        let norm = lanes(GpuFormat::Q5_0, InputKind::Norm(Addend::Plain), 896, 4608);
        assert_eq!((norm.workgroup, norm.quads), (32, 1));
        assert_eq!(at(GpuFormat::Q8_0, 896, 9728), (128, 1));
        assert_eq!(at(GpuFormat::Q4K, 4096, 14336), (128, 1));
        // Q4_K's lanes a super-block (an override) doubled where a lane still takes one step:
        // n_in 1024 and 2048 (4 and 8 super-blocks of 16 lanes), not 2560 (10 would need 160).
        let parts = |n_in, n_rows| lanes(GpuFormat::Q4K, InputKind::Plain, n_in, n_rows).parts;
        assert_eq!(
            (at(GpuFormat::Q4K, 1024, 640), parts(1024, 640)),
            ((64, 1), 16)
        );
        assert_eq!(
            (at(GpuFormat::Q4K, 2048, 640), parts(2048, 640)),
            ((128, 1), 16)
        );
        assert_eq!(parts(2560, 4096), 0);
        assert_eq!(parts(1024, QUADS_MIN_ROWS), 0);
        assert!(!parts_override(GpuFormat::Q4K, InputKind::Q8));
        assert!(!parts_override(GpuFormat::Q5_0, InputKind::Plain));
        // Q8_0 at n_in 640: 20 blocks of 4 lanes instead of 2; not its 262,144-row LM head.
        let q8 = |n_rows| lanes(GpuFormat::Q8_0, InputKind::Plain, 640, n_rows);
        assert_eq!((q8(1536).workgroup, q8(1536).parts), (128, 4));
        assert_eq!(q8(262_144).parts, 0);
        assert_eq!(at(GpuFormat::Q4K, 2560, 4096), (128, 1));
        assert_eq!(at(GpuFormat::Q4K, 10240, 2560), (128, 1));
        // Many rows: quads of slices / 2 groups side by side, filling whole warps, >= 96 lanes.
        // 10 slices of 8 lanes: 4 quads of 40.
        assert_eq!(at(GpuFormat::Q4K, 2560, 20480), (160, 4));
        assert_eq!(at(GpuFormat::Q6K, 2560, 262144), (160, 4));
        // 20 slices of 2 lanes (Q8_0), of 1 (Q5_0): 8 quads of 20, 16 of 10.
        assert_eq!(at(GpuFormat::Q8_0, 640, 262144), (160, 8));
        assert_eq!(at(GpuFormat::Q5_0, 640, 262144), (160, 16));
        // 16 slices of 8: 2 quads of 64.
        assert_eq!(at(GpuFormat::Q4K, 4096, 28672), (128, 2));
        // 18 slices of 2 lanes: quads of 18 or 36 fill warps only in 288 lanes; of 12 (3
        // trips), 8 quads in 96.
        assert_eq!(at(GpuFormat::Q8_0, 576, 49152), (96, 8));
        // 28 slices of 2 lanes (qwen2.5-0.5b's LM head): 8 quads of 28.
        assert_eq!(at(GpuFormat::Q8_0, 896, 151936), (224, 8));
        // 19 slices of 8 lanes (qwen's n_in 4864 in Q6_K): neither 2 nor 3 divides them, and
        // quads of 152 lanes fill warps only 4 at a time: one quad.
        assert_eq!(at(GpuFormat::Q6K, 4864, 16384), (128, 1));
        assert!(
            SKELETON
                .source
                .contains(&format!("const R: u32 = {ROWS}u;"))
        );
    }

    /// The models' rows that take several quads a workgroup (gemma3-4b's 2560 in Q4_K and
    /// Q6_K, gemma-3-270m's 640 in Q5_0 and Q8_0) in a dispatch of enough rows, 13 more than
    /// a multiple of 16: the last workgroup's later quads lie past the rows and store nothing.
    #[test]
    fn quads_side_by_side() {
        let Some(gpu) = testutil::gpu() else { return };
        quads_cases(gpu);
    }

    fn quads_cases(gpu: &Gpu) {
        let n_out = QUADS_MIN_ROWS + 13;
        for (format, n_blocks) in [
            (GpuFormat::Q4K, 10),
            (GpuFormat::Q6K, 10),
            (GpuFormat::Q5_0, 20),
            (GpuFormat::Q8_0, 20),
        ] {
            let n_in = n_blocks * format.block_weights();
            let l = lanes(format, InputKind::Plain, n_in, n_out);
            assert!(l.quads > 1, "{format:?}");
            let case = Case {
                format,
                n_out,
                n_blocks,
                chunk_rows: 1000,
                seed: 7,
                bias: true,
            };
            let c = compare(gpu, case).unwrap();
            assert!(c.max_ratio <= 1.0, "{format:?}: {}", c.worst);
        }
    }

    /// F32/F16/BF16 rows whose length is not a multiple of 32 (the last unit is partial).
    #[test]
    fn float_partial_units() {
        let Some(gpu) = testutil::gpu() else { return };
        for f in [GpuFormat::F32, GpuFormat::F16, GpuFormat::Bf16] {
            let case = Case {
                format: f,
                n_out: 5,
                n_blocks: 37,
                chunk_rows: 100,
                seed: 3,
                bias: false,
            };
            let c = compare(gpu, case).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
