//! `y = W x` with `W` a GGUF weight (any [`GpuFormat`]) kept in its block layout, and
//! `y = W (act(gate) * up)`, the down projection of a gated FFN with the GLU computed as the
//! input is read ([`matvec_glu`]: one dispatch instead of two).
//!
//! WGSL: `matvec/matvec.wgsl` (skeleton), the input (`matvec/x_plain.wgsl`, or
//! `matvec/x_glu.wgsl` + `elementwise/act.wgsl`), `matvec/reduce_{plain,subgroup}.wgsl`
//! (entry point), `common/blocks.wgsl`, `formats/<type>.wgsl` (block constants) and
//! `matvec/dot_<type>.wgsl` (the per-format `part_dot`). A workgroup of 128 takes 4 rows; lanes work in groups of
//! `PARTS` on one step of the row (4 or 8 lanes per unit of 32 weights; 32 lanes per Q4_K /
//! Q6_K super-block), neighbouring lanes reading neighbouring words of the same block, so a
//! subgroup's loads are contiguous (llama.cpp's Vulkan layout). Weights keep GGUF's layout.
//! The subgroup entry is chosen when the device has `Features::SUBGROUP`. One dispatch per
//! weight chunk. With a vector input the stored row may take a bias ([`matvec_bias`], the
//! [`Epilogue`]: `common/out_bias.wgsl` for `common/out_store.wgsl`), and the rows of a row
//! range may go to several outputs ([`matvec_split`]: `common/out_split.wgsl` for
//! `common/out_one.wgsl`; q|k|v of a stacked weight in one dispatch, [`crate::ops::split`]).

use crate::device::Gpu;
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::op::{Op, grid_1d};
use crate::ops::epilogue::{Epilogue, bias_bound};
use crate::ops::glu::{self, Activation, glu_ref};
use crate::ops::split::{self, Out, SplitParams};
use crate::parity::data::{Rng, n_in_step, random_f32, random_weight};
use crate::parity::{Check, Compare, U, run_read};
use crate::pipeline::Kernel;
use crate::shader::{BLOCKS, BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, GpuWeight, View, WeightRows, WeightShape};

/// Parameters of one matvec dispatch (WGSL `Params` in `matvec/matvec.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MatvecParams {
    pub n_in: u32,
    /// Rows in this chunk.
    pub n_rows: u32,
    pub row_bytes: u32,
    /// Where the input starts (the gate, for a GLU input).
    pub x_offset: u32,
    /// Where this chunk's first row lands in `y`.
    pub y_offset: u32,
    /// Where `up` starts (GLU input only; 0 otherwise).
    pub up_offset: u32,
    /// The bias of this dispatch's first row (bias epilogue only; 0 otherwise).
    pub bias_offset: u32,
    pub _pad: u32,
    /// Split outputs (the split epilogue only; zero otherwise).
    pub split: SplitParams,
}

/// What a matvec multiplies: a vector, or a gated linear unit of two vectors computed as the
/// kernel reads it (`act(gate[i]) * up[i]`).
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    Plain(View<'a>),
    Glu {
        act: Activation,
        gate: View<'a>,
        up: View<'a>,
    },
}

/// The input file of a matvec program (the `x_begin` / `x1` / `x4` it reads through).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputKind {
    /// `matvec/x_plain.wgsl`: x at binding 2.
    Plain,
    /// `matvec/x_glu.wgsl`: gate at binding 2, up at binding 5, act from the `ACT` override.
    Glu,
}

/// The bindings of a matvec with a GLU input: [`WEIGHT_KERNEL_BINDINGS`] (input = gate) and
/// `up` at 5.
pub const GLU_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
];

static SKELETON: ShaderFile = shader_file!("matvec/matvec.wgsl");
static X_PLAIN: ShaderFile = shader_file!("matvec/x_plain.wgsl");
static X_GLU: ShaderFile = shader_file!("matvec/x_glu.wgsl");
static REDUCE_PLAIN: ShaderFile = shader_file!("matvec/reduce_plain.wgsl");
static REDUCE_SUBGROUP: ShaderFile = shader_file!("matvec/reduce_subgroup.wgsl");
// `const`, not `static`: `dot_files` returns promoted `&'static` slices of them.
const ROWS_EACH: ShaderFile = shader_file!("matvec/rows_each.wgsl");
const DOT_F32: ShaderFile = shader_file!("matvec/dot_f32.wgsl");
const DOT_F16: ShaderFile = shader_file!("matvec/dot_f16.wgsl");
const DOT_Q8_0: ShaderFile = shader_file!("matvec/dot_q8_0.wgsl");
const DOT_Q4_0: ShaderFile = shader_file!("matvec/dot_q4_0.wgsl");
const DOT_Q4_1: ShaderFile = shader_file!("matvec/dot_q4_1.wgsl");
const DOT_BF16: ShaderFile = shader_file!("matvec/dot_bf16.wgsl");
const DOT_Q5_0: ShaderFile = shader_file!("matvec/dot_q5_0.wgsl");
const DOT_Q5_1: ShaderFile = shader_file!("matvec/dot_q5_1.wgsl");
const DOT_Q2K: ShaderFile = shader_file!("matvec/dot_q2_k.wgsl");
const DOT_Q3K: ShaderFile = shader_file!("matvec/dot_q3_k.wgsl");
const DOT_Q4K: ShaderFile = shader_file!("matvec/dot_q4_k.wgsl");
const DOT_Q5K: ShaderFile = shader_file!("matvec/dot_q5_k.wgsl");
const DOT_Q6K: ShaderFile = shader_file!("matvec/dot_q6_k.wgsl");

/// The format's `rows_dot4` (one part of a step of 4 rows, dotted with x): its own, or
/// `rows_each.wgsl` over its one-row `part_dot`.
fn dot_files(f: GpuFormat) -> &'static [&'static ShaderFile] {
    match f {
        GpuFormat::F32 => &[&ROWS_EACH, &DOT_F32],
        GpuFormat::F16 => &[&ROWS_EACH, &DOT_F16],
        GpuFormat::Q8_0 => &[&DOT_Q8_0],
        GpuFormat::Q4_0 => &[&DOT_Q4_0],
        GpuFormat::Q4_1 => &[&DOT_Q4_1],
        GpuFormat::Bf16 => &[&ROWS_EACH, &DOT_BF16],
        GpuFormat::Q5_0 => &[&DOT_Q5_0],
        GpuFormat::Q5_1 => &[&ROWS_EACH, &DOT_Q5_1],
        GpuFormat::Q2K => &[&ROWS_EACH, &DOT_Q2K],
        GpuFormat::Q3K => &[&ROWS_EACH, &DOT_Q3K],
        GpuFormat::Q4K => &[&DOT_Q4K],
        GpuFormat::Q5K => &[&ROWS_EACH, &DOT_Q5K],
        GpuFormat::Q6K => &[&DOT_Q6K],
    }
}

/// The most invocations per workgroup. The H100 sweep (docs/PERF.md) put 128 ahead of 32, 64
/// and 256 for rows long enough to give every lane a step.
pub const MAX_WORKGROUP: u32 = 128;
/// Rows per workgroup (`R` in the WGSL).
pub const ROWS: usize = 4;

/// Invocations per workgroup for rows of `n_in` weights: one lane per (step, part) of a row,
/// rounded up to a power of two, between 32 (a subgroup) and [`MAX_WORKGROUP`]. Shorter rows
/// would otherwise leave lanes idle (Q6_K at n_in 4096 has 16 steps of 4 parts). Only speed
/// depends on it: the kernel loops over whatever steps its lanes do not cover.
pub fn workgroup_size(f: GpuFormat, n_in: usize) -> u32 {
    let (parts, step_units) = lane_layout(f);
    let lane_steps = n_in.div_ceil(32).div_ceil(step_units) * parts;
    (lane_steps.next_power_of_two() as u32).clamp(32, MAX_WORKGROUP)
}

/// (`PARTS`, `STEP_UNITS`) of the format's dot file, read from its WGSL (the one source).
fn lane_layout(f: GpuFormat) -> (usize, usize) {
    // The text the program is built from (a replaced dot file may change its lane layout).
    let source = dot_files(f).last().expect("a dot file").text();
    let constant = |name: &str| -> usize {
        let line = source
            .lines()
            .find(|l| l.starts_with(&format!("const {name}: u32 = ")))
            .unwrap_or_else(|| panic!("{name} in the dot file of {f:?}"));
        let value = line.rsplit("= ").next().unwrap_or("");
        value
            .trim_end_matches(';')
            .trim_end_matches('u')
            .parse()
            .expect("a u32 literal")
    };
    (constant("PARTS"), constant("STEP_UNITS"))
}

/// The matvec program for format `f`, input `input`, output `out`, with the subgroup
/// reduction or without. Only the input and output files differ between variants: one
/// skeleton, one dot file per format. A GLU input has no bias or split epilogue (its `up`
/// takes binding 5, the bias's; no model stacks down projections).
pub(crate) fn program(f: GpuFormat, input: InputKind, out: Epilogue, subgroup: bool) -> Program {
    let (reduce, suffix) = if subgroup {
        (&REDUCE_SUBGROUP, "_sg")
    } else {
        (&REDUCE_PLAIN, "")
    };
    let (x_files, prefix, bindings): (&[&'static ShaderFile], _, _) = match input {
        InputKind::Plain => (&[&X_PLAIN], "matvec", out.bindings()),
        InputKind::Glu => {
            assert_eq!(
                out,
                Epilogue::STORE,
                "a GLU-input matvec stores one output, with no bias"
            );
            (&[&X_GLU, &glu::ACT], "matvec_glu", GLU_BINDINGS)
        }
    };
    Program {
        name: format!("{prefix}{}_{}{suffix}", out.infix(), f.name()),
        files: [&SKELETON]
            .into_iter()
            .chain(x_files.iter().copied())
            .chain(out.files())
            .chain([reduce, &BLOCKS])
            .chain(f.decoder().iter().copied())
            .chain(dot_files(f).iter().copied())
            .collect(),
        entry: "main",
        bindings,
        params_size: size_of::<MatvecParams>(),
    }
}

/// `y[y.offset..][..n_out] = W x[x.offset..][..n_in]`: one op per weight chunk.
pub fn matvec(w: &GpuWeight, x: View<'_>, y: View<'_>) -> Result<Vec<Op>, GpuError> {
    matvec_input(w, Input::Plain(x), y)
}

/// `y[y.offset + r] = (W x)[r] + bias[bias.offset + r]` for r < n_out (a linear layer with a
/// bias, one dispatch per weight chunk; each chunk adds its own rows' bias).
pub fn matvec_bias(
    w: &GpuWeight,
    x: View<'_>,
    bias: View<'_>,
    y: View<'_>,
) -> Result<Vec<Op>, GpuError> {
    ops(w, Input::Plain(x), Some(bias), y)
}

/// `y[y.offset..][..n_out] = W a` with `a[i] = act(gate[i]) * up[i]` for i < n_in, computed
/// as the kernel reads it (a gated FFN's GLU and down projection in one dispatch per weight
/// chunk). `gate` and `up` may be views of one tensor (the fused gate|up output); `y` must be
/// another tensor.
pub fn matvec_glu(
    w: &GpuWeight,
    act: Activation,
    gate: View<'_>,
    up: View<'_>,
    y: View<'_>,
) -> Result<Vec<Op>, GpuError> {
    matvec_input(w, Input::Glu { act, gate, up }, y)
}

/// The outputs of a split product: rows `w` of a weight (a stacked q|k|v, say) times `x`,
/// plus `bias[bias.offset + r - w.first]` if any, the next `outs[j].rows` rows into output j
/// (regions of one tensor, see [`crate::ops::split`]). One op per weight chunk the rows
/// touch; each row computed as [`matvec`] computes it.
pub fn matvec_split(
    w: WeightRows<'_>,
    x: View<'_>,
    bias: Option<View<'_>>,
    outs: &[Out<'_>],
) -> Result<Vec<Op>, GpuError> {
    let s = w.w.shape;
    x.check("matvec_split x", s.n_in)?;
    let parts = split::parts("matvec_split", w, bias, outs, 1)?;
    let out = Epilogue {
        bias: bias.is_some(),
        split: true,
    };
    let y = &outs[0].y.t.buf;
    let ops = parts.into_iter().map(|part| {
        let params = MatvecParams {
            n_in: s.n_in as u32,
            n_rows: part.n_rows as u32,
            row_bytes: s.format.row_bytes(s.n_in) as u32,
            x_offset: x.offset as u32,
            y_offset: 0,
            up_offset: 0,
            bias_offset: part.bias_offset,
            _pad: 0,
            split: part.split,
        };
        let mut buffers = vec![&part.chunk.buf, &x.t.buf, y, &part.chunk.buf];
        buffers.extend(bias.map(|b| &b.t.buf));
        Op::new(
            Kernel::Matvec(s.format, out),
            workgroup_size(s.format, s.n_in),
            &params,
            &buffers,
            grid_1d(part.n_rows.div_ceil(ROWS)),
        )
    });
    Ok(ops.collect())
}

/// `y = W input`: one op per weight chunk.
pub fn matvec_input(w: &GpuWeight, input: Input<'_>, y: View<'_>) -> Result<Vec<Op>, GpuError> {
    ops(w, input, None, y)
}

/// `y = W input [+ bias]`: one op per weight chunk.
fn ops(
    w: &GpuWeight,
    input: Input<'_>,
    bias: Option<View<'_>>,
    y: View<'_>,
) -> Result<Vec<Op>, GpuError> {
    let s = w.shape;
    y.check("matvec y", s.n_out)?;
    if let Some(b) = bias {
        b.check("matvec bias", s.n_out)?;
    }
    let out = Epilogue {
        bias: bias.is_some(),
        split: false,
    };
    let (kernel, x, up) = match input {
        Input::Plain(x) => {
            x.check("matvec x", s.n_in)?;
            (Kernel::Matvec(s.format, out), x, None)
        }
        Input::Glu { .. } if bias.is_some() => {
            return Err(GpuError::InvalidParams {
                op: "matvec_glu",
                detail: "a GLU input takes no bias (binding 5 is its up)".into(),
            });
        }
        Input::Glu { act, gate, up } => {
            gate.check("matvec_glu gate", s.n_in)?;
            up.check("matvec_glu up", s.n_in)?;
            (Kernel::MatvecGlu(s.format, act), gate, Some(up))
        }
    };
    let ops = w.chunks.iter().map(|c| {
        let params = MatvecParams {
            n_in: s.n_in as u32,
            n_rows: c.n_rows as u32,
            row_bytes: s.format.row_bytes(s.n_in) as u32,
            x_offset: x.offset as u32,
            y_offset: (y.offset + c.first_row) as u32,
            up_offset: up.map_or(0, |u| u.offset as u32),
            bias_offset: bias.map_or(0, |b| (b.offset + c.first_row) as u32),
            _pad: 0,
            split: SplitParams::default(),
        };
        let mut buffers = vec![&c.buf, &x.t.buf, &y.t.buf, &c.buf];
        // Binding 5: up (GLU input) or the bias, never both.
        buffers.extend(up.or(bias).map(|v| &v.t.buf));
        Op::new(
            kernel,
            workgroup_size(s.format, s.n_in),
            &params,
            &buffers,
            grid_1d(c.n_rows.div_ceil(ROWS)),
        )
    });
    Ok(ops.collect())
}

/// CPU reference: `y = W x` in f64 over the dequantized rows (`w` is `n_out * n_in`, row-major).
/// Also returns `sum_i |w_i x_i|` per row, the scale of the rounding error bound.
pub fn matvec_ref(w: &[f32], x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    matvec_bias_ref(w, x, None)
}

/// CPU reference of [`matvec_bias`]: `y = W x + bias` in f64 (the bias added before the one
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

/// Tolerance of [`matvec_bias`]: the bias is one more term of the sum,
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
    fn random(rng: &mut Rng) -> Case {
        let format = rng.pick(&GpuFormat::ALL);
        Case {
            format,
            n_out: rng.range(1, 40),
            // Up to 40 units of 32 weights: rows shorter and longer than one trip of the
            // workgroup.
            n_blocks: rng.range(1, (40 * 32 / n_in_step(format)).max(2)),
            chunk_rows: rng.range(1, 50),
            seed: rng.next_u64(),
            bias: false,
        }
    }

    fn n_in(&self) -> usize {
        self.n_blocks * n_in_step(self.format)
    }

    /// The weight on the GPU and its values (row-major, from the quant crate).
    fn weight(&self, gpu: &Gpu) -> Result<(GpuWeight, Vec<f32>), GpuError> {
        let (bytes, w) = random_weight(self.format, self.n_out, self.n_in(), self.seed);
        let shape = WeightShape {
            format: self.format,
            n_in: self.n_in(),
            n_out: self.n_out,
        };
        Ok((
            GpuWeight::upload_chunked(gpu, shape, &bytes, self.chunk_rows)?,
            w,
        ))
    }

    fn name(&self) -> String {
        let bias = if self.bias { " + bias" } else { "" };
        format!("{:?} {}x{}{bias}", self.format, self.n_out, self.n_in())
    }
}

/// Runs one matvec case, `y` written from offset 3 of its tensor (the bias, if any, read from
/// offset 2 of its own).
pub(crate) fn compare(gpu: &Gpu, case: Case) -> Result<Compare, GpuError> {
    let n_in = case.n_in();
    let (wt, w) = case.weight(gpu)?;
    let x = random_f32(n_in, case.seed ^ 1);
    let xt = GpuTensor::from_f32(gpu, &[n_in], &x);
    let yt = GpuTensor::zeros(gpu, &[case.n_out + 3], crate::Dtype::F32);
    let b = case.bias.then(|| random_f32(case.n_out + 2, case.seed ^ 2));
    let bt = b.as_ref().map(|b| GpuTensor::from_f32(gpu, &[b.len()], b));
    let ops = match &bt {
        Some(bt) => matvec_bias(&wt, (&xt).into(), View::at(bt, 2), View::at(&yt, 3))?,
        None => matvec(&wt, (&xt).into(), View::at(&yt, 3))?,
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
            format!("{} row {r}", case.name())
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
    let aligned = rng.bool();
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
    let n = (n_in + 4) as f64 * U;
    let mut c = Compare::default();
    for (r, row) in w.chunks_exact(n_in).enumerate() {
        let we: f64 = row
            .iter()
            .zip(&e)
            .map(|(&w, e)| f64::from(w).abs() * e)
            .sum();
        let bound = n * f64::from(abs[r]) + (1.0 + n) * we;
        c.add(f64::from(y[r]), f64::from(want[r]), bound, || {
            format!("{} {place:?} row {r}", case.name())
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
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

    /// The entry point without subgroup operations, on a device opened without SUBGROUP.
    #[test]
    fn plain_reduction() {
        if testutil::gpu().is_none() {
            return;
        }
        let options = crate::OpenOptions {
            without: wgpu::Features::SUBGROUP,
            ..Default::default()
        };
        let filter = std::env::var("RULLAMA_ADAPTER").ok();
        let gpu = crate::Gpu::open_with_options(filter.as_deref(), options).unwrap();
        assert!(!gpu.caps.subgroup);
        for check in [CHECK, GLU_CHECK, BIAS_CHECK, split::MATVEC_CHECK] {
            let r = check.run(&gpu, 6, 5);
            assert!(r.passed(), "{r}");
        }
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
            let (gate_at, up_gap) = [(0, 0), (1, 2), (4, 3), (3, 4)][i % 4];
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

    /// Every dot file states its lane layout in the form `workgroup_size` reads.
    #[test]
    fn lane_layouts_parse() {
        for f in GpuFormat::ALL {
            let (parts, step_units) = lane_layout(f);
            assert!(parts.is_power_of_two() && parts <= 32, "{f:?}");
            assert!(step_units == 1 || step_units == 8, "{f:?}");
        }
        assert_eq!(workgroup_size(GpuFormat::Q6K, 4096), 64);
        assert_eq!(workgroup_size(GpuFormat::Q8_0, 4096), 128);
        assert_eq!(workgroup_size(GpuFormat::Q4_0, 640), 32);
        assert!(
            SKELETON
                .source
                .contains(&format!("const R: u32 = {ROWS}u;"))
        );
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
