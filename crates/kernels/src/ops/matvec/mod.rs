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
//! workgroup takes one or more quads of 4 rows side by side ([`lanes`]); a quad's lanes work
//! in groups of `PARTS` on one slice of the row (1 to 8 lanes per unit of 32 weights; 8 or 32
//! per K-format super-block), neighbouring lanes reading neighbouring words of the same
//! block, so a subgroup's loads are contiguous (llama.cpp's Vulkan layout). Weights keep
//! GGUF's layout.
//! The subgroup entry is chosen when the device has `Features::SUBGROUP`. One dispatch per
//! weight chunk. With a vector input the stored row may take a bias ([`matvec_bias`], the
//! [`Epilogue`]: `common/out_bias.wgsl` for `common/out_store.wgsl`), and the rows of a row
//! range may go to several outputs ([`matvec_split`]: `common/out_split.wgsl` for
//! `common/out_one.wgsl`; q|k|v of a stacked weight in one dispatch, [`crate::ops::split`]);
//! both through the store file `matvec/out_rows.wgsl`. Its alternative, the GLU epilogue
//! ([`matvec_glu_out`]: `matvec/out_glu.wgsl`), takes gate|up stacked and stores
//! `act(gate) * up`, a gated FFN's GLU with no dispatch of its own.
//!
//! **The q8 input.** On the H100 the 4- to 6-bit formats are bound by the instructions per
//! weight (docs/PERF.md, section 3: their f32-input and q8-input columns): an integer-to-float
//! decode, an FMA and a share of an f32 input load.
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
//! bounds). Formats: [`q8_supported`]. It is not the default: the products are faster but a
//! decode step is not, its quantize dispatches costing what they save (docs/PERF.md,
//! D-q8-inputs-off).

use std::borrow::Cow;

use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::op::{Op, grid_1d};
use crate::ops::epilogue::Epilogue;
use crate::ops::glu::{self, Activation};
use crate::ops::norm::REDUCE;
use crate::ops::quantize::q8_words;
use crate::ops::split::{self, Out, SplitParams};
use crate::pipeline::PipelineKey;
use crate::shader::{BLOCKS, BindingKind, Program, SPLIT_PARAMS, ShaderFile, shader_file};
use crate::tensor::{GpuBuffer, GpuTensor, GpuWeight, View, WeightRows, WeightShape};

mod glu_out;
mod kernel;
#[cfg(any(test, feature = "parity"))]
mod parity;
mod residual;
pub use glu_out::{glu_out_supported, matvec_glu_out};
pub use kernel::MatvecKernel;
#[cfg(any(test, feature = "parity"))]
pub use parity::{
    BIAS_CHECK, CHECK, GLU_CHECK, GLU_OUT_CHECK, GluOutRef, NORM_CHECK, Q8_GLU_OUT_CHECK,
    RESIDUAL_CHECK, SCALED_CHECK, glu_out_bound, glu_out_ref, matvec_bias_ref, matvec_ref,
};
#[cfg(any(test, feature = "parity"))]
pub(crate) use parity::{
    check_untouched, input_tensor, q8_formats, untouched_tensor, upload_random_weight,
};
pub use residual::{ResidualRows, matvec_residual, residual_partials};

/// Parameters of one matvec dispatch (WGSL `Params` in `matvec/matvec.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MatvecParams {
    /// Weights per row: the input's length.
    pub n_in: u32,
    /// Rows in this chunk.
    pub n_rows: u32,
    /// Bytes of one row in the GPU layout.
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
    /// The residual stream and norms of a [`NormInput`] (zero otherwise).
    pub norm: NormParams,
}

/// The parameters of a [`NormInput`] (offsets in floats). A [`ScaledInput`] takes h_offset
/// and h_out_offset for where its partial sums start and how many there are, and eps; the
/// residual epilogue ([`matvec_residual`]) h_offset for h and x_out_offset for where its
/// partial sums go.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NormParams {
    /// Where h starts (a scaled input: its partial sums).
    pub h_offset: u32,
    /// Where h' goes (a scaled input: how many partial sums there are).
    pub h_out_offset: u32,
    /// Where x goes (the residual epilogue: where its partial sums go).
    pub x_out_offset: u32,
    /// The norms' eps.
    pub eps: f32,
}

/// What a matvec multiplies: a vector, a gated linear unit of two vectors computed as the
/// kernel reads it (`act(gate[i]) * up[i]`), or a vector quantized to two int8 digits per
/// input in blocks of 32.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// An f32 vector of the weight's `n_in` inputs.
    Plain(View<'a>),
    /// `act(gate[i]) * up[i]`, computed as the kernel reads it.
    Glu {
        /// The gate's non-linearity.
        act: Activation,
        /// The gate, `n_in` values.
        gate: View<'a>,
        /// The up projection, `n_in` values.
        up: View<'a>,
    },
    /// A q8 vector of the weight's `n_in` inputs ([`crate::ops::quantize`] describes the
    /// layout and writes it): the view's offset, counted in 4-byte words, is where its quants
    /// begin, a multiple of 4 (16-byte aligned); it takes `q8_words(n_in)` words. Only for
    /// the formats [`q8_supported`] names.
    Q8(View<'a>),
    /// A residual add and RMSNorm computed as the kernel reads it ([`NormInput`]): a decode
    /// step's `residual_norm` folded into the product reading it.
    Norm(NormInput<'a>),
    /// The norm after a residual op that its addend's product did ([`matvec_residual`]),
    /// from what that product stored ([`ScaledInput`]).
    Scaled(ScaledInput<'a>),
}

/// `x = z / rms(h')` with `z = h' * w_out` and the partial sums of `h'^2` that a residual
/// epilogue stored ([`matvec_residual`]): `rms(h') = sqrt(sum(partials) / n_in + eps)`.
/// The kernel reads z as a vector and scales its row totals by `1 / rms(h')`
/// (`matvec/x_scaled.wgsl`), so `n_in` is a multiple of 32 and z starts at a multiple of 4
/// floats.
#[derive(Debug, Clone, Copy)]
pub struct ScaledInput<'a> {
    /// `h' * w_out`, `n_in` values.
    pub z: View<'a>,
    /// `count` partial sums from the view's offset.
    pub partials: View<'a>,
    /// How many partial sums there are.
    pub count: usize,
    /// The norm's eps.
    pub eps: f32,
}

/// `h' = h + a'` (stored to `h_out`), then the input `x = rms_norm(h') * w_out` (stored to
/// `x_out`, for other products that read it), as `ops::residual_norm` computes them for one
/// row, with rms(v) = sqrt(mean(v^2) + eps) and a' = a (Llama's block) or, given `w_in`,
/// `rms_norm(a) * w_in` (Gemma's post-norm; one eps for both norms). The kernel multiplies by
/// h' * w_out as it reads them and scales each row total by 1 / rms(h') at the end
/// (`matvec/x_norm.wgsl`; a's own scale is reduced by every workgroup before its loop,
/// `matvec/addend_normed.wgsl`), so `n_in` is a multiple of 32 and every view starts at a
/// multiple of 4 floats; `h_out` and `x_out` are views of one tensor (one binding), which
/// neither `a` nor `h` is.
#[derive(Debug, Clone, Copy)]
pub struct NormInput<'a> {
    /// The addend: the block's attention or FFN output.
    pub a: View<'a>,
    /// a's own norm gain, if a goes through an RMSNorm before the add.
    pub w_in: Option<&'a GpuTensor>,
    /// The residual stream before the add.
    pub h: View<'a>,
    /// The gain of the norm that makes the product's input.
    pub w_out: &'a GpuTensor,
    /// Where h' goes.
    pub h_out: View<'a>,
    /// Where x goes.
    pub x_out: View<'a>,
    /// The norms' eps.
    pub eps: f32,
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
    /// `matvec/x_norm.wgsl` + `norm/reduce.wgsl` (`matvec/sum_subgroup.wgsl` in the subgroup
    /// program) + the [`Addend`]'s file: a at 2, h, w_out
    /// and the h'|x output at 6..8, a normed addend's w_in at 9 ([`norm_bindings`]), `x4`
    /// and the rows' factor `x_scale`.
    Norm(Addend),
    /// `matvec/x_scaled.wgsl` + who adds the partial sums (`matvec/scaled_sum_subgroup.wgsl`:
    /// every subgroup; `matvec/scaled_sum_plain.wgsl` + `norm/reduce.wgsl`: the workgroup):
    /// z at 2, the partial sums at 6 ([`scaled_bindings`]), `x4` and the rows' factor
    /// `x_scale`.
    Scaled,
}

/// What a norm input adds to the residual stream: `a` as it is (Llama's block) or `a`
/// through its own weighted RMSNorm (Gemma's post-norms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Addend {
    /// `matvec/addend_plain.wgsl`.
    Plain,
    /// `matvec/addend_normed.wgsl`: w_in at binding 9.
    Normed,
}

impl Addend {
    /// Both addends.
    pub const ALL: [Addend; 2] = [Addend::Plain, Addend::Normed];

    /// Its addend file, and the prefix of its programs' names.
    fn file_and_prefix(self) -> (&'static ShaderFile, &'static str) {
        match self {
            Addend::Plain => (&ADDEND_PLAIN, "matvec_norm"),
            Addend::Normed => (&ADDEND_NORMED, "matvec_norm_normed"),
        }
    }
}

/// The bindings of a matvec with a [`NormInput`]: the epilogue's (the bias at 5, or nothing
/// there), then h, w_out and the tensor of h_out and x_out at 6 to 8, and a normed addend's
/// w_in at 9.
pub fn norm_bindings(out: Epilogue, addend: Addend) -> &'static [BindingKind] {
    use BindingKind::{Absent, StorageRead as R, StorageReadWrite as Rw, Uniform};
    match (out.bias, addend) {
        (true, Addend::Plain) => &[Uniform, R, R, Rw, R, R, R, R, Rw],
        (false, Addend::Plain) => &[Uniform, R, R, Rw, R, Absent, R, R, Rw],
        (true, Addend::Normed) => &[Uniform, R, R, Rw, R, R, R, R, Rw, R],
        (false, Addend::Normed) => &[Uniform, R, R, Rw, R, Absent, R, R, Rw, R],
    }
}

/// The bindings of a matvec with a [`ScaledInput`]: the epilogue's (the bias at 5, or
/// nothing there), then the partial sums at 6.
pub fn scaled_bindings(out: Epilogue) -> &'static [BindingKind] {
    use BindingKind::{Absent, StorageRead as R, StorageReadWrite as Rw, Uniform};
    if out.bias {
        &[Uniform, R, R, Rw, R, R, R]
    } else {
        &[Uniform, R, R, Rw, R, Absent, R]
    }
}

/// The bindings of a matvec with the residual epilogue ([`matvec_residual`]): the plain
/// store's without a bias, then h, w_out and the partial sums at 6 to 8.
const RESIDUAL_BINDINGS: &[BindingKind] = {
    use BindingKind::{Absent, StorageRead as R, StorageReadWrite as Rw, Uniform};
    &[Uniform, R, R, Rw, R, Absent, Rw, R, Rw]
};

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
static X_NORM: ShaderFile = shader_file!("matvec/x_norm.wgsl");
static X_SCALED: ShaderFile = shader_file!("matvec/x_scaled.wgsl");
// Who adds the scaled input's partial sums: each subgroup itself, or the workgroup.
static SCALED_SUM_SUBGROUP: ShaderFile = shader_file!("matvec/scaled_sum_subgroup.wgsl");
static SCALED_SUM_PLAIN: ShaderFile = shader_file!("matvec/scaled_sum_plain.wgsl");
static ADDEND_PLAIN: ShaderFile = shader_file!("matvec/addend_plain.wgsl");
static ADDEND_NORMED: ShaderFile = shader_file!("matvec/addend_normed.wgsl");
static REDUCE_PLAIN: ShaderFile = shader_file!("matvec/reduce_plain.wgsl");
static REDUCE_SUBGROUP: ShaderFile = shader_file!("matvec/reduce_subgroup.wgsl");
/// The norm input's workgroup sums through subgroups (with `REDUCE_SUBGROUP`'s entry point).
static SUM_SUBGROUP: ShaderFile = shader_file!("matvec/sum_subgroup.wgsl");
// The store files (`store_rows`): each row through the epilogue's `y_out` and `y_index`, or
// the GLU epilogue.
static OUT_ROWS: ShaderFile = shader_file!("matvec/out_rows.wgsl");
static OUT_GLU: ShaderFile = shader_file!("matvec/out_glu.wgsl");
static OUT_RESIDUAL: ShaderFile = shader_file!("matvec/out_residual.wgsl");
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
const DOT8_NIBBLES: ShaderFile = shader_file!("matvec/dot8_nibbles.wgsl");
const DOT8_Q4_0: ShaderFile = shader_file!("matvec/dot8_q4_0.wgsl");
const DOT8_Q4_1: ShaderFile = shader_file!("matvec/dot8_q4_1.wgsl");
const DOT8_Q5_0: ShaderFile = shader_file!("matvec/dot8_q5_0.wgsl");
const DOT8_Q5_1: ShaderFile = shader_file!("matvec/dot8_q5_1.wgsl");
const DOT8_Q4K: ShaderFile = shader_file!("matvec/dot8_q4_k.wgsl");
const DOT8_Q5K: ShaderFile = shader_file!("matvec/dot8_q5_k.wgsl");
const DOT8_Q6K: ShaderFile = shader_file!("matvec/dot8_q6_k.wgsl");

/// The format's `rows_dot4` (one part of a slice of 4 rows, dotted with x): its own, or
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

/// How many times the dot files of `f` read each input of a slice (`X_READS` in
/// `matvec/x_norm.wgsl`): once for the 4 rows together, or once per row through
/// `rows_each.wgsl`.
pub(crate) fn input_reads(f: GpuFormat) -> u32 {
    if dot_files(f).iter().any(|d| d.path == ROWS_EACH.path) {
        ROWS as u32
    } else {
        1
    }
}

/// The format's `rows_dot4` over a q8 input, if it has one: the formats whose codes are
/// valid int8 operands and that the models quantize their big matrices to. Q2_K and Q3_K
/// (2-3 bit codes with 4-bit scales per 16) and the float formats have none.
fn dot8_files(f: GpuFormat) -> Option<&'static [&'static ShaderFile]> {
    match f {
        GpuFormat::Q8_0 => Some(&[&DOT8_Q8_0]),
        GpuFormat::Q4_0 => Some(&[&DOT8_NIBBLES, &DOT8_Q4_0]),
        GpuFormat::Q4_1 => Some(&[&DOT8_NIBBLES, &DOT8_Q4_1]),
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
        InputKind::Plain | InputKind::Glu | InputKind::Norm(_) | InputKind::Scaled => dot_files(f),
        InputKind::Q8 => dot8_files(f).unwrap_or_else(|| {
            panic!("no q8-input matvec for {f:?} (ops check q8_supported first)")
        }),
    }
}

/// The most invocations per workgroup of one quad (the layout before quads: the H100 sweep put
/// 128 ahead of 32, 64 and 256 for rows long enough to give every lane a slice).
pub const MAX_WORKGROUP: u32 = 128;
/// The most invocations of a workgroup of several quads.
pub const MAX_QUADS_WORKGROUP: u32 = 256;
/// The most row quads per workgroup.
pub const MAX_QUADS: u32 = 16;
/// Rows per quad (`R` in the WGSL).
pub const ROWS: usize = 4;
/// Dispatches of at least this many rows take several quads a workgroup where that leaves no
/// lane idle: 4,096 quads, about twice the workgroups an H100 holds at once. Fewer rows keep
/// one quad a workgroup, spread over every SM (gemma-3-270m's products of 1,536 to 4,096
/// rows at n_in 640 ran 10-25% slower as 8 quads in 160 lanes on a third of the SMs).
pub const QUADS_MIN_ROWS: usize = 16_384;
/// The subgroup the lane layouts are cut for: NVIDIA's warp (and AMD's wave32). Any other
/// size works; the entry points only assume workgroups fill whole subgroups where they can.
const WARP: usize = 32;

/// How a matvec workgroup lays out its lanes: `workgroup` invocations over `quads` row quads
/// side by side (`WG` and `QUADS` in `matvec/matvec.wgsl`), `workgroup / quads` lanes a quad,
/// and where the dot file lets its lanes a slice change (`override PARTS`), how many it takes
/// (0: the file's own count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lanes {
    /// Invocations per workgroup (`WG`).
    pub workgroup: u32,
    /// Row quads side by side (`QUADS`).
    pub quads: u32,
    /// Lanes a slice (`PARTS`); 0: the dot file's own count.
    pub parts: u32,
}

/// The lanes of a dispatch of `n_rows` rows of `n_in` weights read with input `input`. A row
/// quad has `slices` slices of `PARTS` lanes (a lane takes one per trip of its loop).
///
/// By default one quad a workgroup, one lane per (slice, part), rounded up to a power of two
/// between 32 and [`MAX_WORKGROUP`] (two quads of 32 side by side where that is 32, but for a
/// norm input): shorter rows would leave lanes idle, and lanes take further slices of longer
/// rows in further trips. Where the slices' lanes are not a multiple of 32, whole warps carry
/// idle lanes (a warp holds its registers whether its lanes work or not): gemma3-4b's n_in
/// 2560 in Q4_K is 10 slices of 8 lanes, 80 busy in 128. Dispatches of at least
/// [`QUADS_MIN_ROWS`] rows then take several quads side by side with no idle lane: each
/// quad's lanes take 2 slices each (slices / 2 groups), else 1, else 3, whichever fits first,
/// and the fewest quads that fill whole warps and give at least 96 lanes: gemma3-4b's LM head
/// (2560x262144 Q6_K) is 4 quads of 40 lanes, gemma-3-270m's (640x262144 Q8_0) 8 quads of 20,
/// SmolLM2's (576x49152 Q8_0) 8 quads of 12 (3 trips). Two trips a lane come first because
/// one (2 quads of 80, 4 of 40) was 4-28% slower (docs/PERF.md, D-row-quads, measured with
/// `RULLAMA_BENCH_SWEEP=1`).
///
/// A dot file whose `PARTS` is an override (Q4_K's, Q6_K's, Q8_0's) takes twice its lanes a
/// slice in a one-quad dispatch whose slices then still give every lane one slice at most (a
/// product of few, short rows, bound by each lane's chain of loads rather than by its
/// bytes). Only there: doubled in every product, they made gemma3-4b's step slower, its
/// 20,480-row gate|up most (docs/PERF.md, D-short-lanes).
pub fn lanes(f: GpuFormat, input: InputKind, n_in: usize, n_rows: usize) -> Lanes {
    let (parts, slice_units) = lane_layout(f, input);
    let slices = n_in.div_ceil(32).div_ceil(slice_units).max(1);
    let split = n_rows < QUADS_MIN_ROWS
        && parts_override(f, input)
        && slices * 2 * parts <= MAX_WORKGROUP as usize;
    let parts = if split { 2 * parts } else { parts };
    let pow2 = ((slices * parts).next_power_of_two() as u32).clamp(WARP as u32, MAX_WORKGROUP);
    // A quad of one warp goes two to a workgroup, but for a norm input: the H100 holds at
    // most 32 workgroups an SM, so one-warp workgroups fill at most half its 64 warps, while
    // the norm-input products ran 5-12% slower as two quads (docs/PERF.md, D-two-quads-a-warp).
    let pair = pow2 == WARP as u32 && !matches!(input, InputKind::Norm(_));
    let one_quad = Lanes {
        workgroup: if pair { 2 * pow2 } else { pow2 },
        quads: if pair { 2 } else { 1 },
        parts: if split { parts as u32 } else { 0 },
    };
    if n_rows < QUADS_MIN_ROWS {
        return one_quad;
    }
    let side_by_side = |trips: usize| {
        if !slices.is_multiple_of(trips) {
            return None;
        }
        let quad_lanes = slices / trips * parts;
        let whole_warps = WARP / gcd(quad_lanes, WARP);
        let quads = whole_warps * 96usize.div_ceil(whole_warps * quad_lanes);
        let workgroup = quads * quad_lanes;
        // Lanes 0..R of a quad store its rows.
        let fits = quad_lanes >= ROWS
            && workgroup <= MAX_QUADS_WORKGROUP as usize
            && quads <= MAX_QUADS as usize;
        fits.then_some(Lanes {
            workgroup: workgroup as u32,
            quads: quads as u32,
            parts: 0,
        })
    };
    side_by_side(2)
        .or_else(|| side_by_side(1))
        .or_else(|| side_by_side(3))
        .unwrap_or(one_quad)
}

impl Lanes {
    /// The pipeline key of `kernel` laid out so.
    pub(crate) fn key(self, kernel: MatvecKernel) -> PipelineKey {
        PipelineKey {
            quads: self.quads,
            parts: self.parts,
            ..PipelineKey::new(kernel, self.workgroup)
        }
    }
}

/// A few of the layouts [`lanes`] gives a matvec over `f` with input `input`, from each of
/// its branches: rows of one slice (one warp: two quads to it, or twice the file's `PARTS`)
/// and of 4,096 inputs, few (one quad of up to [`MAX_WORKGROUP`]) and [`QUADS_MIN_ROWS`]
/// (quads side by side). The matvec's [`crate::KernelFamily::pipeline_keys`]: its layouts
/// follow the shape, 10 to 27 of them for each (format, input), and checking every one would
/// double `cargo xtask wgsl`'s time; its workgroup arrays have fixed sizes, so no layout
/// changes its workgroup memory.
pub(crate) fn checked_lanes(f: GpuFormat, input: InputKind) -> Vec<Lanes> {
    let (_, slice_units) = lane_layout(f, input);
    let mut all: Vec<Lanes> = Vec::new();
    for n_in in [32 * slice_units, 4096] {
        for n_rows in [1, QUADS_MIN_ROWS] {
            let l = lanes(f, input, n_in, n_rows);
            if !all.contains(&l) {
                all.push(l);
            }
        }
    }
    all
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// (`PARTS`, `SLICE_UNITS`) of the dot file the program with input `input` uses, read from its
/// WGSL (the one source).
pub fn lane_layout(f: GpuFormat, input: InputKind) -> (usize, usize) {
    let source = dot_source(f, input);
    let constant = |name: &str| -> usize {
        let line = source
            .lines()
            .find(|l| {
                l.starts_with(&format!("const {name}: u32 = "))
                    || l.starts_with(&format!("override {name}: u32 = "))
            })
            .unwrap_or_else(|| panic!("{name} in the dot file of {f:?}"));
        let value = line.rsplit("= ").next().unwrap_or("");
        value
            .trim_end_matches(';')
            .trim_end_matches('u')
            .parse()
            .expect("a u32 literal")
    };
    (constant("PARTS"), constant("SLICE_UNITS"))
}

/// Whether the dot file of the program with input `input` declares `PARTS` as an override
/// (its default is what [`lane_layout`] reads), so a dispatch may set it ([`Lanes::parts`]).
pub fn parts_override(f: GpuFormat, input: InputKind) -> bool {
    dot_source(f, input)
        .lines()
        .any(|l| l.starts_with("override PARTS: u32 = "))
}

/// The text of the dot file the program with input `input` is built from (a replaced dot
/// file may change its lane layout).
fn dot_source(f: GpuFormat, input: InputKind) -> Cow<'static, str> {
    dots(f, input).last().expect("a dot file").text()
}

/// What a matvec program does with its row totals (its store file, `store_rows`): store each
/// row through an [`Epilogue`] (`matvec/out_rows.wgsl` with the epilogue's value and place
/// files), the GLU epilogue (`matvec/out_glu.wgsl` + `elementwise/act.wgsl`: gate and up
/// rows in pairs, `act(gate) * up` stored; [`matvec_glu_out`]), or the residual epilogue
/// (`matvec/out_residual.wgsl`: the rows added to h, z and the partial sums stored;
/// [`matvec_residual`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Rows(Epilogue),
    Glu,
    Residual,
}

impl Store {
    fn files(self) -> Vec<&'static ShaderFile> {
        match self {
            Store::Rows(out) => out.files().into_iter().chain([&OUT_ROWS]).collect(),
            Store::Glu => vec![&OUT_GLU, &glu::ACT],
            Store::Residual => vec![&OUT_RESIDUAL],
        }
    }

    /// The bindings with a vector or q8 input (the GLU epilogue binds what the plain store
    /// without a bias binds).
    fn bindings(self) -> &'static [BindingKind] {
        match self {
            Store::Residual => RESIDUAL_BINDINGS,
            _ => self.epilogue().bindings(),
        }
    }

    /// The epilogue whose bindings the store has before its own (the GLU and residual
    /// epilogues: the plain store's).
    fn epilogue(self) -> Epilogue {
        match self {
            Store::Rows(out) => out,
            Store::Glu | Store::Residual => Epilogue::STORE,
        }
    }

    fn infix(self) -> &'static str {
        match self {
            Store::Rows(out) => out.infix(),
            Store::Glu => "_glu_out",
            Store::Residual => "_residual",
        }
    }
}

/// The matvec program for format `f`, input `input` and store `store`, with the subgroup
/// reduction or without.
fn assemble(f: GpuFormat, input: InputKind, store: Store, subgroup: bool) -> Program {
    let (reduce, suffix) = if subgroup {
        (&REDUCE_SUBGROUP, "_sg")
    } else {
        (&REDUCE_PLAIN, "")
    };
    let (x_files, prefix, bindings): (Vec<&'static ShaderFile>, _, _) = match input {
        InputKind::Plain => (vec![&X_PLAIN], "matvec", store.bindings()),
        InputKind::Glu => {
            assert_eq!(
                store,
                Store::Rows(Epilogue::STORE),
                "a GLU-input matvec stores one output, with no bias"
            );
            (vec![&X_GLU, &glu::ACT], "matvec_glu", GLU_BINDINGS)
        }
        InputKind::Q8 => (vec![&X_Q8], "matvec_q8", store.bindings()),
        InputKind::Norm(addend) => {
            let (file, prefix) = addend.file_and_prefix();
            let sum = if subgroup { &SUM_SUBGROUP } else { &REDUCE };
            (
                vec![&X_NORM, file, sum],
                prefix,
                norm_bindings(store.epilogue(), addend),
            )
        }
        InputKind::Scaled => {
            let sums: &[&'static ShaderFile] = if subgroup {
                &[&SCALED_SUM_SUBGROUP]
            } else {
                &[&SCALED_SUM_PLAIN, &REDUCE]
            };
            (
                [&X_SCALED]
                    .into_iter()
                    .chain(sums.iter().copied())
                    .collect(),
                "matvec_scaled",
                scaled_bindings(store.epilogue()),
            )
        }
    };
    Program {
        name: format!("{prefix}{}_{}{suffix}", store.infix(), f.name()),
        files: [&SKELETON, &SPLIT_PARAMS]
            .into_iter()
            .chain(x_files)
            .chain(store.files())
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
    kernel: MatvecKernel,
    kind: InputKind,
    x: &'a GpuBuffer,
    up: Option<&'a GpuBuffer>,
    x_offset: u32,
    up_offset: u32,
    x_scales: u32,
    /// Bindings 6.. (a norm input's h, w_out, h_out and w_in).
    more: Vec<&'a GpuBuffer>,
    norm: NormParams,
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

/// Whether rows of `f` are whole blocks of 32 or more weights: then no input read passes the
/// row's end, and the matvec reads its input as unchecked vec4s (WGSL override
/// `PARTIAL_UNITS` false in matvec/x_plain.wgsl and x_glu.wgsl). F32/F16/BF16 rows may have
/// any length and check every read.
pub(crate) fn whole_block_rows(f: GpuFormat) -> bool {
    f.block_weights() > 1
}

/// Inputs read as whole units of 32 (the q8, norm and scaled inputs) need rows of them.
fn check_whole_units(what: &'static str, n_in: usize) -> Result<(), GpuError> {
    if !n_in.is_multiple_of(32) {
        return Err(invalid(
            what,
            format!("n_in {n_in} is not a multiple of 32"),
        ));
    }
    Ok(())
}

/// A vector read as vec4s (the norm and scaled inputs) starts at a multiple of 4 floats.
fn check_vec4_offset(what: &'static str, name: &str, offset: usize) -> Result<(), GpuError> {
    if !offset.is_multiple_of(4) {
        return Err(invalid(
            what,
            format!("{name} at float {offset}: not a multiple of 4"),
        ));
    }
    Ok(())
}

/// Unchecked vec4 reads (`whole_block_rows`) need the input to start at a multiple of 4
/// floats.
fn check_vec4_start(what: &'static str, f: GpuFormat, offset: usize) -> Result<(), GpuError> {
    if whole_block_rows(f) && !offset.is_multiple_of(4) {
        return Err(invalid(
            what,
            format!("{f:?} input at float {offset}: not a multiple of 4 (vec4 reads)"),
        ));
    }
    Ok(())
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
            more: Vec::new(),
            norm: NormParams::default(),
        };
        match self {
            Input::Plain(x) => {
                x.check("matvec x", s.n_in)?;
                check_vec4_start("matvec x", f, x.offset)?;
                Ok(bound(MatvecKernel::Plain(f, out), InputKind::Plain, x))
            }
            Input::Glu { .. } if out != Epilogue::STORE => Err(invalid(
                "matvec_glu",
                "a GLU input takes no bias or split outputs (binding 5 is its up)".into(),
            )),
            Input::Glu { act, gate, up } => {
                gate.check("matvec_glu gate", s.n_in)?;
                up.check("matvec_glu up", s.n_in)?;
                check_vec4_start("matvec_glu gate", f, gate.offset)?;
                check_vec4_start("matvec_glu up", f, up.offset)?;
                Ok(Bound {
                    up: Some(&up.t.buf),
                    up_offset: up.offset as u32,
                    ..bound(MatvecKernel::Glu(f, act), InputKind::Glu, gate)
                })
            }
            Input::Q8(q) => {
                if !q8_supported(f) {
                    return Err(invalid(
                        "matvec q8",
                        format!("no q8-input matvec for {f:?} weights (see q8_supported)"),
                    ));
                }
                check_whole_units("matvec q8", s.n_in)?;
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
                    ..bound(MatvecKernel::Q8(f, out), InputKind::Q8, q)
                })
            }
            Input::Norm(n) => {
                let what = "matvec norm input";
                check_whole_units(what, s.n_in)?;
                if n.h_out.t.buf.id != n.x_out.t.buf.id {
                    return Err(invalid(what, "h_out and x_out in two tensors".into()));
                }
                for (name, v) in [
                    ("a", n.a),
                    ("h", n.h),
                    ("h_out", n.h_out),
                    ("x_out", n.x_out),
                ] {
                    v.check(what, s.n_in)?;
                    check_vec4_offset(what, name, v.offset)?;
                }
                View::from(n.w_out).check(what, s.n_in)?;
                if let Some(w_in) = n.w_in {
                    View::from(w_in).check(what, s.n_in)?;
                }
                let addend = match n.w_in {
                    Some(_) => Addend::Normed,
                    None => Addend::Plain,
                };
                let mut more = vec![&n.h.t.buf, &n.w_out.buf, &n.h_out.t.buf];
                more.extend(n.w_in.map(|w| &w.buf));
                Ok(Bound {
                    more,
                    norm: NormParams {
                        h_offset: n.h.offset as u32,
                        h_out_offset: n.h_out.offset as u32,
                        x_out_offset: n.x_out.offset as u32,
                        eps: n.eps,
                    },
                    ..bound(
                        MatvecKernel::Norm(f, out, addend),
                        InputKind::Norm(addend),
                        n.a,
                    )
                })
            }
            Input::Scaled(sc) => {
                let what = "matvec scaled input";
                check_whole_units(what, s.n_in)?;
                check_vec4_offset(what, "z", sc.z.offset)?;
                if sc.count == 0 {
                    return Err(invalid(what, "no partial sums".into()));
                }
                sc.z.check(what, s.n_in)?;
                sc.partials.check(what, sc.count)?;
                Ok(Bound {
                    more: vec![&sc.partials.t.buf],
                    norm: NormParams {
                        h_offset: sc.partials.offset as u32,
                        h_out_offset: sc.count as u32,
                        x_out_offset: 0,
                        eps: sc.eps,
                    },
                    ..bound(MatvecKernel::Scaled(f, out), InputKind::Scaled, sc.z)
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
            norm: self.norm,
        };
        let mut buffers = vec![chunk, self.x, to.y, chunk];
        // Binding 5: the bias, or a GLU's up (never both: `bind` refuses it).
        buffers.extend(to.bias.or(self.up));
        buffers.extend(self.more.iter().copied());
        let lanes = lanes(s.format, self.kind, s.n_in, place.n_rows);
        let quad_rows = ROWS * lanes.quads as usize;
        let mut op = Op::new(
            self.kernel,
            lanes.workgroup,
            &params,
            &buffers,
            grid_1d(place.n_rows.div_ceil(quad_rows)),
        );
        op.key = lanes.key(self.kernel);
        op
    }
}
