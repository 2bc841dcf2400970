//! `y = W x` with `W` a GGUF weight (any [`GpuFormat`]) kept in its block layout, and
//! `y = W (act(gate) * up)`, the down projection of a gated FFN with the GLU computed as the
//! input is read ([`matvec_glu`]: one dispatch instead of two), and `y = W x'` with x' a
//! vector quantized to two int8 digits per input ([`Input::Q8`], the opt-in "q8 input" mode,
//! see below).
//!
//! WGSL: `matvec/matvec.wgsl` (skeleton), the input (`matvec/x_plain.wgsl`, or
//! `matvec/x_glu.wgsl` + `elementwise/act.wgsl`, or `matvec/x_q8.wgsl`),
//! `matvec/reduce_{plain,subgroup}.wgsl` (entry point), `common/blocks.wgsl`,
//! `formats/<type>.wgsl` (block constants) and `matvec/dot_<type>.wgsl` (the per-format
//! `rows_dot4` or one-row `part_dot`; `matvec/dot8_<type>.wgsl` for the q8 input). A
//! workgroup takes 4 rows; lanes work in groups of `PARTS` on one step of the row (4 or 8
//! lanes per unit of 32 weights; 32 lanes per Q4_K / Q6_K super-block), neighbouring lanes
//! reading neighbouring words of the same block, so a subgroup's loads are contiguous
//! (llama.cpp's Vulkan layout). Weights keep GGUF's layout.
//! The subgroup entry is chosen when the device has `Features::SUBGROUP`. One dispatch per
//! weight chunk. With a vector input the stored row may take a bias ([`matvec_bias`], the
//! [`Epilogue`]: `common/out_bias.wgsl` for `common/out_store.wgsl`), and the rows of a row
//! range may go to several outputs ([`matvec_split`]: `common/out_split.wgsl` for
//! `common/out_one.wgsl`; q|k|v of a stacked weight in one dispatch, [`crate::ops::split`]).
//!
//! **The q8 input.** On the H100 the 4- to 6-bit formats are bound by the instructions per
//! weight (docs/PERF.md): an integer-to-float decode, an FMA and a share of an f32 input load.
//! llama.cpp's answer ("mmvq") is to round x once to int8 per block of 32 and dot packed
//! integers; here each input is two int8 digits of its block's scale
//! ([`crate::ops::quantize`]: the layout, why two, and the kernel that writes it), and
//! `dot4I8Packed` (SPIR-V `OpSDot` where the device has VK_KHR_shader_integer_dot_product, a
//! polyfill elsewhere) multiplies 4 weight codes by 4 inputs' digits and adds them exactly,
//! twice, combined as 254 S1 + S2 in i32. The dot8 files keep their format's lane layout and
//! loads; the sums of q x and of x (for the mins and the `q - 8` / `q - 16` / `q - 32`
//! offsets) are exact integers, and the f32 scales (the weight's, the input block's d / 254)
//! are applied per block after. So the only new error is x's rounding,
//! |x_i - x'_i| <= d / 508 (+ a few roundings) per element (`ops::matvec_q8` states the
//! bounds). Formats: [`q8_supported`].

use crate::device::Gpu;
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::op::{Op, grid_1d};
use crate::ops::epilogue::{Epilogue, bias_bound};
use crate::ops::glu::{self, Activation, glu_ref};
use crate::ops::quantize::q8_words;
use crate::ops::split::{self, Out, SplitParams};
use crate::parity::data::{Rng, n_in_step, random_f32, random_weight};
use crate::parity::{Check, Compare, U, run_read};
use crate::pipeline::Kernel;
use crate::shader::{BLOCKS, BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuBuffer, GpuTensor, GpuWeight, View, WeightRows, WeightShape};

/// Parameters of one matvec dispatch (WGSL `Params` in `matvec/matvec.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MatvecParams {
    pub n_in: u32,
    /// Rows in this chunk.
    pub n_rows: u32,
    pub row_bytes: u32,
    /// Where the input starts (the gate, for a GLU input; for a q8 input the byte index of
    /// its first quant, 4 times the view's word offset: the second digits are `n_in` bytes
    /// further).
    pub x_offset: u32,
    /// Where this chunk's first row lands in `y`.
    pub y_offset: u32,
    /// Where `up` starts (GLU input only; 0 otherwise).
    pub up_offset: u32,
    /// The bias of this dispatch's first row (bias epilogue only; 0 otherwise).
    pub bias_offset: u32,
    /// The word index of a q8 input's scales (q8 input only; 0 otherwise).
    pub x_scales: u32,
    /// Split outputs (the split epilogue only; zero otherwise).
    pub split: SplitParams,
}

/// What a matvec multiplies: a vector, a gated linear unit of two vectors computed as the
/// kernel reads it (`act(gate[i]) * up[i]`), or a vector quantized to two int8 digits per
/// input in blocks of 32.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    Plain(View<'a>),
    Glu {
        act: Activation,
        gate: View<'a>,
        up: View<'a>,
    },
    /// A q8 vector of the weight's `n_in` inputs ([`crate::ops::quantize`] describes the
    /// layout and writes it): the view's offset, counted in 4-byte words, is where its quants
    /// begin, a multiple of 4 (16-byte aligned); it takes `q8_words(n_in)` words. Only for
    /// the formats [`q8_supported`] names.
    Q8(View<'a>),
}

/// The input file of a matvec program (what the dot files read inputs through).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputKind {
    /// `matvec/x_plain.wgsl`: x at binding 2 (`x4`).
    Plain,
    /// `matvec/x_glu.wgsl`: gate at binding 2, up at binding 5, act from the `ACT` override
    /// (`x4`).
    Glu,
    /// `matvec/x_q8.wgsl`: a q8 vector at binding 2 (`xq16`, `xq16_lo`, `xq4`, `xq4_lo`,
    /// `dot8`, `xd`), read by the format's `matvec/dot8_<type>.wgsl`.
    Q8,
}

/// The bindings of a matvec with a GLU input: [`WEIGHT_KERNEL_BINDINGS`] (input = gate) and
/// `up` at 5.
///
/// [`WEIGHT_KERNEL_BINDINGS`]: crate::shader::WEIGHT_KERNEL_BINDINGS
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
static X_Q8: ShaderFile = shader_file!("matvec/x_q8.wgsl");
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
// The int8-input dot files (q8 input): the same lane layouts, integer dot products.
const DOT8_Q8_0: ShaderFile = shader_file!("matvec/dot8_q8_0.wgsl");
const DOT8_Q4_0: ShaderFile = shader_file!("matvec/dot8_q4_0.wgsl");
const DOT8_Q4_1: ShaderFile = shader_file!("matvec/dot8_q4_1.wgsl");
const DOT8_Q5_0: ShaderFile = shader_file!("matvec/dot8_q5_0.wgsl");
const DOT8_Q5_1: ShaderFile = shader_file!("matvec/dot8_q5_1.wgsl");
const DOT8_Q4K: ShaderFile = shader_file!("matvec/dot8_q4_k.wgsl");
const DOT8_Q5K: ShaderFile = shader_file!("matvec/dot8_q5_k.wgsl");
const DOT8_Q6K: ShaderFile = shader_file!("matvec/dot8_q6_k.wgsl");

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

/// The format's `rows_dot4` over a q8 input, if it has one: the formats whose codes are
/// valid int8 operands and that the models quantize their big matrices to. Q2_K and Q3_K
/// (2-3 bit codes with 4-bit scales per 16) and the float formats have none.
fn dot8_files(f: GpuFormat) -> Option<&'static [&'static ShaderFile]> {
    match f {
        GpuFormat::Q8_0 => Some(&[&DOT8_Q8_0]),
        GpuFormat::Q4_0 => Some(&[&DOT8_Q4_0]),
        GpuFormat::Q4_1 => Some(&[&DOT8_Q4_1]),
        GpuFormat::Q5_0 => Some(&[&DOT8_Q5_0]),
        GpuFormat::Q5_1 => Some(&[&ROWS_EACH, &DOT8_Q5_1]),
        GpuFormat::Q4K => Some(&[&DOT8_Q4K]),
        GpuFormat::Q5K => Some(&[&ROWS_EACH, &DOT8_Q5K]),
        GpuFormat::Q6K => Some(&[&DOT8_Q6K]),
        GpuFormat::F32 | GpuFormat::F16 | GpuFormat::Bf16 | GpuFormat::Q2K | GpuFormat::Q3K => None,
    }
}

/// Whether a matvec over weights of format `f` takes a q8 input ([`Input::Q8`]): Q8_0, Q4_0,
/// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K.
pub fn q8_supported(f: GpuFormat) -> bool {
    dot8_files(f).is_some()
}

/// The dot files of a program with input `input`.
fn dots(f: GpuFormat, input: InputKind) -> &'static [&'static ShaderFile] {
    match input {
        InputKind::Plain | InputKind::Glu => dot_files(f),
        InputKind::Q8 => dot8_files(f).unwrap_or_else(|| {
            panic!("no q8-input matvec for {f:?} (ops check q8_supported first)")
        }),
    }
}

/// The most invocations per workgroup. The H100 sweep (docs/PERF.md) put 128 ahead of 32, 64
/// and 256 for rows long enough to give every lane a step.
pub const MAX_WORKGROUP: u32 = 128;
/// Rows per workgroup (`R` in the WGSL).
pub const ROWS: usize = 4;

/// Invocations per workgroup for rows of `n_in` weights read with input `input`: one lane per
/// (step, part) of a row, rounded up to a power of two, between 32 (a subgroup) and
/// [`MAX_WORKGROUP`]. Shorter rows would otherwise leave lanes idle (Q6_K at n_in 4096 has
/// 16 steps of 4 parts). Only speed depends on it: the kernel loops over whatever steps its
/// lanes do not cover.
pub fn workgroup_size(f: GpuFormat, input: InputKind, n_in: usize) -> u32 {
    let (parts, step_units) = lane_layout(f, input);
    let lane_steps = n_in.div_ceil(32).div_ceil(step_units) * parts;
    (lane_steps.next_power_of_two() as u32).clamp(32, MAX_WORKGROUP)
}

/// (`PARTS`, `STEP_UNITS`) of the dot file the program with input `input` uses, read from its
/// WGSL (the one source).
fn lane_layout(f: GpuFormat, input: InputKind) -> (usize, usize) {
    // The text the program is built from (a replaced dot file may change its lane layout).
    let source = dots(f, input).last().expect("a dot file").text();
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
/// reduction or without. Only the input, dot and output files differ between variants: one
/// skeleton. A GLU input has no bias or split epilogue (its `up` takes binding 5, the
/// bias's; no model stacks down projections).
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
        InputKind::Q8 => (&[&X_Q8], "matvec_q8", out.bindings()),
    };
    Program {
        name: format!("{prefix}{}_{}{suffix}", out.infix(), f.name()),
        files: [&SKELETON]
            .into_iter()
            .chain(x_files.iter().copied())
            .chain(out.files())
            .chain([reduce, &BLOCKS])
            .chain(f.decoder().iter().copied())
            .chain(dots(f, input).iter().copied())
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
    matvec_bias_input(w, Input::Plain(x), bias, y)
}

/// [`matvec_bias`] with the input as a value: a vector or a q8 vector (a GLU input has no
/// bias: [`GpuError::InvalidParams`]).
pub fn matvec_bias_input(
    w: &GpuWeight,
    input: Input<'_>,
    bias: View<'_>,
    y: View<'_>,
) -> Result<Vec<Op>, GpuError> {
    ops(w, input, Some(bias), y)
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
    matvec_split_input(w, Input::Plain(x), bias, outs)
}

/// [`matvec_split`] with the input as a value: a vector or a q8 vector (a GLU input has no
/// split epilogue: [`GpuError::InvalidParams`]).
pub fn matvec_split_input(
    w: WeightRows<'_>,
    input: Input<'_>,
    bias: Option<View<'_>>,
    outs: &[Out<'_>],
) -> Result<Vec<Op>, GpuError> {
    let s = w.w.shape;
    let out = Epilogue {
        bias: bias.is_some(),
        split: true,
    };
    let input = input.bind(s, out)?;
    let parts = split::parts("matvec_split", w, bias, outs, 1)?;
    let to = Outputs {
        y: &outs[0].y.t.buf,
        bias: bias.map(|b| &b.t.buf),
    };
    let ops = parts.into_iter().map(|part| {
        let place = Place {
            n_rows: part.n_rows,
            y_offset: 0,
            bias_offset: part.bias_offset,
            split: part.split,
        };
        input.op(s, &part.chunk.buf, &to, place)
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
    let input = input.bind(s, out)?;
    let to = Outputs {
        y: &y.t.buf,
        bias: bias.map(|b| &b.t.buf),
    };
    let ops = w.chunks.iter().map(|c| {
        let place = Place {
            n_rows: c.n_rows,
            y_offset: (y.offset + c.first_row) as u32,
            bias_offset: bias.map_or(0, |b| (b.offset + c.first_row) as u32),
            split: SplitParams::default(),
        };
        input.op(s, &c.buf, &to, place)
    });
    Ok(ops.collect())
}

/// An input checked against a weight and an epilogue: the kernel it selects, the buffers it
/// binds (2, and a GLU's up at 5) and its parameter fields.
struct Bound<'a> {
    kernel: Kernel,
    kind: InputKind,
    x: &'a GpuBuffer,
    up: Option<&'a GpuBuffer>,
    x_offset: u32,
    up_offset: u32,
    x_scales: u32,
}

/// Where a dispatch's outputs go: y, and the bias it adds (binding 5).
struct Outputs<'a> {
    y: &'a GpuBuffer,
    bias: Option<&'a GpuBuffer>,
}

/// One dispatch's rows: how many, where they land (one output) or the split (several), and
/// the bias of the first.
struct Place {
    n_rows: usize,
    y_offset: u32,
    bias_offset: u32,
    split: SplitParams,
}

fn invalid(op: &'static str, detail: String) -> GpuError {
    GpuError::InvalidParams { op, detail }
}

impl<'a> Input<'a> {
    /// Checks this input against a weight of shape `s` and the epilogue `out`, and binds it.
    fn bind(self, s: WeightShape, out: Epilogue) -> Result<Bound<'a>, GpuError> {
        let f = s.format;
        let bound = |kernel, kind, x: View<'a>| Bound {
            kernel,
            kind,
            x: &x.t.buf,
            up: None,
            x_offset: x.offset as u32,
            up_offset: 0,
            x_scales: 0,
        };
        match self {
            Input::Plain(x) => {
                x.check("matvec x", s.n_in)?;
                Ok(bound(Kernel::Matvec(f, out), InputKind::Plain, x))
            }
            Input::Glu { .. } if out != Epilogue::STORE => Err(invalid(
                "matvec_glu",
                "a GLU input takes no bias or split outputs (binding 5 is its up)".into(),
            )),
            Input::Glu { act, gate, up } => {
                gate.check("matvec_glu gate", s.n_in)?;
                up.check("matvec_glu up", s.n_in)?;
                Ok(Bound {
                    up: Some(&up.t.buf),
                    up_offset: up.offset as u32,
                    ..bound(Kernel::MatvecGlu(f, act), InputKind::Glu, gate)
                })
            }
            Input::Q8(q) => {
                if !q8_supported(f) {
                    return Err(invalid(
                        "matvec q8",
                        format!("no q8-input matvec for {f:?} weights (see q8_supported)"),
                    ));
                }
                if !s.n_in.is_multiple_of(32) {
                    return Err(invalid(
                        "matvec q8",
                        format!("n_in {} is not a multiple of 32", s.n_in),
                    ));
                }
                if !q.offset.is_multiple_of(4) {
                    return Err(invalid(
                        "matvec q8",
                        format!("quants at word {}: not 16-byte aligned", q.offset),
                    ));
                }
                q.check("matvec q8 x", q8_words(s.n_in))?;
                Ok(Bound {
                    x_offset: (4 * q.offset) as u32,
                    x_scales: (q.offset + s.n_in / 2) as u32,
                    ..bound(Kernel::MatvecQ8(f, out), InputKind::Q8, q)
                })
            }
        }
    }
}

impl Bound<'_> {
    /// The dispatch of `place`'s rows of the weight chunk `chunk` (a weight of shape `s`).
    fn op(&self, s: WeightShape, chunk: &GpuBuffer, to: &Outputs<'_>, place: Place) -> Op {
        let params = MatvecParams {
            n_in: s.n_in as u32,
            n_rows: place.n_rows as u32,
            row_bytes: s.format.row_bytes(s.n_in) as u32,
            x_offset: self.x_offset,
            y_offset: place.y_offset,
            up_offset: self.up_offset,
            bias_offset: place.bias_offset,
            x_scales: self.x_scales,
            split: place.split,
        };
        let mut buffers = vec![chunk, self.x, to.y, chunk];
        // Binding 5: the bias, or a GLU's up (never both: `bind` refuses it).
        buffers.extend(to.bias.or(self.up));
        Op::new(
            self.kernel,
            workgroup_size(s.format, self.kind, s.n_in),
            &params,
            &buffers,
            grid_1d(place.n_rows.div_ceil(ROWS)),
        )
    }
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
        Case::random_of(rng, format)
    }

    /// A random case over weights of format `format`.
    pub(crate) fn random_of(rng: &mut Rng, format: GpuFormat) -> Case {
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

    pub(crate) fn n_in(&self) -> usize {
        self.n_blocks * n_in_step(self.format)
    }

    /// The weight on the GPU and its values (row-major, from the quant crate).
    pub(crate) fn weight(&self, gpu: &Gpu) -> Result<(GpuWeight, Vec<f32>), GpuError> {
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
    /// Its q8 rounding by the GPU, at word `at` of its tensor; blocks of magnitudes 2^-3 ..
    /// 2^3 in turn (a scale applied to the wrong block shows). The reference multiplies by
    /// the values the rounded vector stands for (`ops::matvec_q8`).
    Q8 { at: usize },
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
    let x = random_f32(n_in, case.seed ^ 1);
    // The input tensor, the word its vector starts at, and the values the reference takes.
    let (xt, at, x) = match mode {
        CaseInput::Plain => (GpuTensor::from_f32(gpu, &[n_in], &x), 0, x),
        CaseInput::Q8 { at } => {
            let x: Vec<f32> = x
                .iter()
                .enumerate()
                .map(|(i, v)| v * 2f32.powi((i / 32 % 7) as i32 - 3))
                .collect();
            let (qt, values) = crate::ops::quantize::quantized_on_gpu(gpu, &x, at)?;
            (qt, at, values)
        }
    };
    let input = match mode {
        CaseInput::Plain => Input::Plain((&xt).into()),
        CaseInput::Q8 { .. } => Input::Q8(View::at(&xt, at)),
    };
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
        use crate::ops::matvec_q8;
        for check in [
            CHECK,
            GLU_CHECK,
            BIAS_CHECK,
            split::MATVEC_CHECK,
            matvec_q8::CHECK,
            matvec_q8::SPLIT_CHECK,
        ] {
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

    /// Every dot file states its lane layout in the form `workgroup_size` reads, and each
    /// dot8 file keeps its format's (the q8 input changes the arithmetic, not the lanes).
    #[test]
    fn lane_layouts_parse() {
        for f in GpuFormat::ALL {
            let (parts, step_units) = lane_layout(f, InputKind::Plain);
            assert!(parts.is_power_of_two() && parts <= 32, "{f:?}");
            assert!(step_units == 1 || step_units == 8, "{f:?}");
            if q8_supported(f) {
                assert_eq!(lane_layout(f, InputKind::Q8), (parts, step_units), "{f:?}");
            }
        }
        assert_eq!(workgroup_size(GpuFormat::Q6K, InputKind::Plain, 4096), 64);
        assert_eq!(workgroup_size(GpuFormat::Q8_0, InputKind::Plain, 4096), 128);
        assert_eq!(workgroup_size(GpuFormat::Q4_0, InputKind::Plain, 640), 32);
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
