//! Products with a side of at most [`THIN`] (a LoRA rank), in f32: `y[t, j] (+)= sum_k a[t, k]
//! w(j, k)` over a block of tokens, with `w` a weight as stored (`y = a W^T`: LoRA's forward
//! products) or its transpose (`y = a W`: their input gradients). Either the outputs
//! (`n_out <= 16`: `x A^T`, `dy B`) or the summed indices (`n_in <= 16`: `h B^T`, `dh A`) are
//! thin. Such a product reads or writes its wide side once for 32 FLOPs a value: bytes bound
//! it, and 64 x 64 tiles (on the tensor cores or not) are three quarters empty and walk the
//! wide side one 16-deep step at a time. Exact f32 products (no f16 rounding), with or
//! without tensor cores.
//!
//! WGSL: `matmul/thin.wgsl` (entries `thin_out`, `thin_sum`: its header has the layout).

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, thin_ref};

/// The widest thin side (`R` in `matmul/thin.wgsl`).
pub const THIN: usize = 16;
const WORKGROUP: u32 = 256;
/// Tokens a `thin_out` workgroup takes (`TT`).
const OUT_TOKENS: usize = 16;
/// Outputs and tokens a `thin_sum` workgroup takes (`TJ`, `TB`).
const SUM_OUTPUTS: usize = 64;
const SUM_TOKENS: usize = 64;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct ThinParams {
    n_tokens: u32,
    n_in: u32,
    n_out: u32,
    a_offset: u32,
    a_stride: u32,
    w_offset: u32,
    w_row: u32,
    w_col: u32,
    y_offset: u32,
    y_stride: u32,
    accumulate: u32,
    _pad: u32,
}

static SHADER: ShaderFile = shader_file!("matmul/thin.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

/// The thin products' kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatmulThinKernel {
    /// At most [`THIN`] outputs: 16 tokens a workgroup, the sum in chunks of 256.
    Out,
    /// At most [`THIN`] summed indices: 64 outputs x 64 tokens a workgroup.
    Sum,
}

impl KernelFamily for MatmulThinKernel {
    fn variants() -> Vec<MatmulThinKernel> {
        vec![MatmulThinKernel::Out, MatmulThinKernel::Sum]
    }

    fn program(self) -> Program {
        let (name, entry) = match self {
            MatmulThinKernel::Out => ("matmul_thin_out", "thin_out"),
            MatmulThinKernel::Sum => ("matmul_thin_sum", "thin_sum"),
        };
        Program {
            name: name.into(),
            files: vec![&SHADER],
            entry,
            bindings: BINDINGS,
            params_size: size_of::<ThinParams>(),
        }
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

/// How a thin product reads its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinWeight {
    /// `W` as stored, `n_out` rows of `n_in`: `y = a W^T` (the forward product).
    Rows,
    /// Its transpose: `W` is `n_in` rows of `n_out`, `y = a W` (the input gradient).
    Transposed,
}

/// `y[t, j] (+)= sum_k a[t, k] w(j, k)` for `n_tokens` tokens, `j < n_out`, `k < n_in`, one of
/// `n_out` and `n_in` at most [`THIN`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatmulThin {
    /// Tokens (rows of a and y).
    pub n_tokens: usize,
    /// Values summed (a's row length).
    pub n_in: usize,
    /// Outputs (y's row length).
    pub n_out: usize,
    /// How w is stored.
    pub weight: ThinWeight,
    /// a's token stride; `None`: packed (`n_in`).
    pub a_stride: Option<usize>,
    /// y's token stride; `None`: packed (`n_out`).
    pub y_stride: Option<usize>,
    /// Add to what y holds instead of overwriting it.
    pub accumulate: bool,
}

impl MatmulThin {
    /// Whether a product of `n_out` outputs summing `n_in` values is thin (this op takes it).
    pub fn fits(n_out: usize, n_in: usize) -> bool {
        n_out.min(n_in) <= THIN
    }

    /// The op. `y` must be another tensor than `a` and `w`; every index must fit 32 bits.
    pub fn op(self, a: View<'_>, w: View<'_>, y: View<'_>) -> Result<Op, GpuError> {
        const OP: &str = "matmul_thin";
        let invalid = |detail: String| GpuError::InvalidParams { op: OP, detail };
        let (n, n_in, n_out) = (self.n_tokens, self.n_in, self.n_out);
        if !Self::fits(n_out, n_in) || n_in == 0 || n_out == 0 {
            return Err(invalid(format!(
                "{n_out} outputs summing {n_in}: neither side in 1..={THIN}"
            )));
        }
        let (a_stride, y_stride) = (
            self.a_stride.unwrap_or(n_in),
            self.y_stride.unwrap_or(n_out),
        );
        if n > 1 && (a_stride < n_in || y_stride < n_out) {
            return Err(invalid(format!(
                "token strides a {a_stride} / y {y_stride} shorter than rows of {n_in} / {n_out}"
            )));
        }
        let out = y.t.buf.id();
        if out == a.t.buf.id() || out == w.t.buf.id() {
            return Err(invalid(
                "y in the tensor of a or w (read and written by one dispatch)".into(),
            ));
        }
        w.check("matmul_thin w", n_in * n_out)?;
        if n > 0 {
            a.check("matmul_thin a", (n - 1) * a_stride + n_in)?;
            y.check("matmul_thin y", (n - 1) * y_stride + n_out)?;
        }
        let ends = [
            a.offset + n * a_stride,
            y.offset + n * y_stride,
            w.offset + n_in * n_out,
        ];
        if ends.iter().any(|&e| u32::try_from(e).is_err()) {
            return Err(invalid(format!("an index past 2^32 ({ends:?})")));
        }
        let (w_row, w_col) = match self.weight {
            ThinWeight::Rows => (n_in, 1),
            ThinWeight::Transposed => (1, n_out),
        };
        let params = ThinParams {
            n_tokens: n as u32,
            n_in: n_in as u32,
            n_out: n_out as u32,
            a_offset: a.offset as u32,
            a_stride: a_stride as u32,
            w_offset: w.offset as u32,
            w_row: w_row as u32,
            w_col: w_col as u32,
            y_offset: y.offset as u32,
            y_stride: y_stride as u32,
            accumulate: u32::from(self.accumulate),
            _pad: 0,
        };
        let (kernel, grid) = if n_out <= THIN {
            (MatmulThinKernel::Out, [n.div_ceil(OUT_TOKENS) as u32, 1, 1])
        } else {
            let grid = [
                n_out.div_ceil(SUM_OUTPUTS) as u32,
                n.div_ceil(SUM_TOKENS) as u32,
                1,
            ];
            (MatmulThinKernel::Sum, grid)
        };
        let buffers = [&a.t.buf, &w.t.buf, &y.t.buf];
        Ok(Op::new(kernel, WORKGROUP, &params, &buffers, grid))
    }
}
