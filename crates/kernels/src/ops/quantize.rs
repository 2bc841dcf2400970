//! The q8 vector: f32 inputs rounded to two int8 digits of a per-block scale, in blocks of
//! 32, the opt-in input of the decode matvec ([`crate::ops::matvec::Input::Q8`]; llama.cpp's
//! q8_1 for its "mmvq" path has one digit and the block sums, which the dot files take with an
//! integer dot instead).
//!
//! **Why two digits.** One int8 digit (q = round(x / d), |x - q d| <= d / 2) moved real models
//! too far: on lavapipe, decode with q8 inputs against f32 inputs put the top-10 log-probs
//! 0.09-0.26 nats apart on SmolLM2-135M and 0.17-0.58 nats on gemma-3-270m (0.58 at a step
//! where only the LM head read q8 inputs), against the default mode's bar of 0.05 nats. The
//! kernels were right; 8 bits against a block's amax is too coarse for activations with
//! outliers. A second digit holds the remainder, so the rounding error is d / 508: about 16
//! bits per input, finer than f16's 11, and the sums stay exact integers.
//!
//! **Layout** (described here once; `shaders/matvec/x_q8.wgsl`, its reader, repeats it): a
//! vector of n inputs, n a multiple of 32, takes [`q8_words`]`(n) = n / 2 + n / 32` u32 words
//! of an ordinary [`crate::GpuTensor`] (any dtype: kernels see words), from a word offset that is a
//! multiple of 4 (16-byte aligned, so the matvec loads 16 inputs of a digit with one vec4
//! load; n / 4 is a multiple of 8, so the second plane is aligned too):
//! - words `0 .. n / 4`: the first digits q1_i, int8, 4 per word, little-endian (input
//!   `4k + j` is byte j of word k; block b is words `8b .. 8b + 8`);
//! - words `n / 4 .. n / 2`: the second digits q2_i, int8, in the same order;
//! - words `n / 2 .. n / 2 + n / 32`: the block scales d_b as f32 bits.
//!
//! Input i stands for `d_b (q1_i + q2_i / 254) = d_b (254 q1_i + q2_i) / 254`. A [`View`] of
//! the vector points at its first quant, its offset counted in words.
//!
//! **Rule**: per block, `d = amax / 127` (amax = max |x_i| over the block),
//! `q1_i = round(x_i / d)` clamped to [-127, 127], `r_i = x_i - q1_i d` and
//! `q2_i = round(254 r_i / d)` clamped to [-127, 127] (round half to even); a block of zeros
//! gets d = 0 and q1 = q2 = 0. |r_i| <= d / 2 (up to the division's rounding), so
//! |254 r_i / d| <= 127 and the clamp of q2 never acts; |x_i - x'_i| <= d / 508 up to a few
//! roundings (`rounding_bound` derives them), and that is the only error the q8 matvec
//! adds: its integer sums are exact.
//!
//! WGSL: `matvec/quantize_q8.wgsl` (8 lanes per block, each one word of each digit; the
//! block's amax through workgroup memory; 64 lanes a workgroup; one dispatch for the vector)
//! with the rule's file `matvec/q8_block.wgsl` (the per-block arithmetic, which
//! `residual_norm`'s q8 output includes too, so both write the same words) and its input file `matvec/quantize_x.wgsl` (a vector) or `matvec/quantize_glu.wgsl` +
//! `elementwise/act.wgsl` (`act(gate) * up` as it is read, the expression of
//! `matvec/x_glu.wgsl`: a GLU'd down projection takes a q8 input in 2 dispatches).

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::ops::glu::{self, Activation};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub(crate) use parity::quantized_on_gpu;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, GLU_CHECK, dequantize_q8_ref, quantize_q8_ref, rounding_bound};

/// Inputs per block of a q8 vector (one f32 scale each).
pub const Q8_BLOCK: usize = 32;

/// The second digit's weight: input i stands for `d (q1 + q2 / DIGIT)`. 254 = 2 * 127 puts
/// the remainder's range, |r| <= d / 2, on q2's [-127, 127].
pub const DIGIT: i32 = 254;

/// Words (4 bytes) of a q8 vector of `n` inputs (`n` a multiple of [`Q8_BLOCK`]): two planes
/// of `n / 4` words of packed int8 digits, then `n / 32` f32 scales (the module doc gives the
/// layout).
pub fn q8_words(n: usize) -> usize {
    n / 2 + n / Q8_BLOCK
}

/// Parameters of one quantize dispatch (WGSL `Params` in `matvec/quantize_q8.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct QuantizeParams {
    /// Inputs (a multiple of 32).
    pub n: u32,
    /// Where x (or the gate) starts.
    pub x_offset: u32,
    /// Where `up` starts (GLU input only; 0 otherwise).
    pub up_offset: u32,
    /// Word index of the first quant; the second digits follow at `q_offset + n / 4`, the
    /// scales at `q_offset + n / 2`.
    pub q_offset: u32,
}

static SHADER: ShaderFile = shader_file!("matvec/quantize_q8.wgsl");
/// The per-block rule (amax, d, the two digits, the stores), shared with every kernel that
/// writes a q8 vector.
pub(crate) static RULE: ShaderFile = shader_file!("matvec/q8_block.wgsl");
static X_PLAIN: ShaderFile = shader_file!("matvec/quantize_x.wgsl");
static X_GLU: ShaderFile = shader_file!("matvec/quantize_glu.wgsl");

/// Params, the q8 output, x.
const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];

/// Params, the q8 output, gate, up.
const GLU_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
];

/// Invocations per workgroup: 8 blocks of 8 lanes.
pub const WORKGROUP: u32 = 64;
/// Lanes per block: one per output word of each digit.
const LANES_PER_BLOCK: usize = Q8_BLOCK / 4;

/// The quantize kernel: a vector input, or a GLU input computed as it is read (the `ACT`
/// override).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuantizeKernel {
    /// A vector rounded to the q8 layout.
    Q8,
    /// `act(gate) * up` computed as it is read, rounded to the q8 layout.
    Q8Glu(Activation),
}

impl KernelFamily for QuantizeKernel {
    fn variants() -> Vec<QuantizeKernel> {
        vec![
            QuantizeKernel::Q8,
            QuantizeKernel::Q8Glu(Activation::GeluTanh),
            QuantizeKernel::Q8Glu(Activation::Silu),
        ]
    }

    fn program(self) -> Program {
        let glu = matches!(self, QuantizeKernel::Q8Glu(_));
        let (name, files, bindings) = if glu {
            (
                "quantize_q8_glu",
                vec![&SHADER, &RULE, &X_GLU, &glu::ACT],
                GLU_BINDINGS,
            )
        } else {
            ("quantize_q8", vec![&SHADER, &RULE, &X_PLAIN], BINDINGS)
        };
        Program {
            name: name.to_string(),
            files,
            entry: "main",
            bindings,
            params_size: size_of::<QuantizeParams>(),
        }
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        match self {
            QuantizeKernel::Q8 => Vec::new(),
            QuantizeKernel::Q8Glu(act) => vec![("ACT", act.code())],
        }
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK, GLU_CHECK]
    }
}

/// Checks that `n` inputs make whole blocks, for op `op`.
fn check_n(op: &'static str, n: usize) -> Result<(), GpuError> {
    if n == 0 || !n.is_multiple_of(Q8_BLOCK) {
        return Err(GpuError::InvalidParams {
            op,
            detail: format!("{n} inputs: a q8 vector takes a positive multiple of {Q8_BLOCK}"),
        });
    }
    Ok(())
}

/// Checks that `q` can hold a q8 vector of `n` inputs (16-byte aligned, `q8_words(n)` words),
/// for op `op`.
pub(crate) fn check_q8(op: &'static str, q: View<'_>, n: usize) -> Result<(), GpuError> {
    check_n(op, n)?;
    if !q.offset.is_multiple_of(4) {
        return Err(GpuError::InvalidParams {
            op,
            detail: format!("quants at word {}: not 16-byte aligned", q.offset),
        });
    }
    q.check(op, q8_words(n))
}

/// `q = q8(x[x.offset..][..n])`: the first `n` inputs of `x` (`n` a multiple of 32) into the
/// q8 vector at `q` (its offset a multiple of 4 words; `q8_words(n)` words; another tensor
/// than x's). One dispatch.
pub fn quantize_q8(x: View<'_>, q: View<'_>, n: usize) -> Result<Op, GpuError> {
    x.check("quantize_q8 x", n)?;
    op(QuantizeKernel::Q8, x, None, q, n)
}

/// `q = q8(act(gate) * up)` over the first `n` inputs (`n` a multiple of 32), the GLU
/// computed as it is read with the expression of [`crate::ops::glu::glu`] and
/// [`crate::ops::matvec::matvec_glu`]: a gated FFN's down projection then takes
/// `Input::Q8(q)`, 2 dispatches in all. `gate` and `up` may be views of one tensor (the fused
/// gate|up output); `q` must be another. One dispatch.
pub fn quantize_q8_glu(
    act: Activation,
    gate: View<'_>,
    up: View<'_>,
    q: View<'_>,
    n: usize,
) -> Result<Op, GpuError> {
    gate.check("quantize_q8_glu gate", n)?;
    up.check("quantize_q8_glu up", n)?;
    op(QuantizeKernel::Q8Glu(act), gate, Some(up), q, n)
}

/// The dispatch of `kernel` over `n` inputs from `x` (and `up`) into the q8 vector at `q`.
fn op(
    kernel: QuantizeKernel,
    x: View<'_>,
    up: Option<View<'_>>,
    q: View<'_>,
    n: usize,
) -> Result<Op, GpuError> {
    check_q8("quantize_q8 q", q, n)?;
    // One dispatch may not read and write one buffer (wgpu refuses the bind group).
    if [Some(x), up]
        .into_iter()
        .flatten()
        .any(|v| v.t.buf.id() == q.t.buf.id())
    {
        return Err(GpuError::InvalidParams {
            op: "quantize_q8",
            detail: "q must be another tensor than the input's".into(),
        });
    }
    let params = QuantizeParams {
        n: n as u32,
        x_offset: x.offset as u32,
        up_offset: up.map_or(0, |u| u.offset as u32),
        q_offset: q.offset as u32,
    };
    let mut buffers = vec![&q.t.buf, &x.t.buf];
    buffers.extend(up.map(|u| &u.t.buf));
    let lanes = n / Q8_BLOCK * LANES_PER_BLOCK;
    Ok(Op::new(
        kernel,
        WORKGROUP,
        &params,
        &buffers,
        grid_1d(lanes.div_ceil(WORKGROUP as usize)),
    ))
}
