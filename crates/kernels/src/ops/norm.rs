//! RMS norm over rows, with an optional gain vector shared by all rows.
//!
//! WGSL: `norm/rms_norm.wgsl` (entry `main`, or `main_weighted` with the weight bound) +
//! `norm/io_separate.wgsl` (x read, y written) or `norm/io_inplace.wgsl` (one read-write
//! buffer: per-head q/k norms in place) + `norm/reduce.wgsl` (the workgroup sum). One
//! workgroup of 256 per row. A whole vector is one row; per-head norms over
//! `[n_heads, head_dim]` are `n_heads` rows of `head_dim`.

use crate::device::Gpu;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{Dtype, GpuTensor, View};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RmsNormParams {
    pub n: u32,
    pub n_rows: u32,
    pub x_offset: u32,
    pub y_offset: u32,
    pub eps: f32,
    pub _pad: [u32; 3],
}

static SHADER: ShaderFile = shader_file!("norm/rms_norm.wgsl");
static IO_SEPARATE: ShaderFile = shader_file!("norm/io_separate.wgsl");
static IO_INPLACE: ShaderFile = shader_file!("norm/io_inplace.wgsl");
/// `workgroup_sum`, the tree reduction every norm kernel shares.
pub(crate) static REDUCE: ShaderFile = shader_file!("norm/reduce.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];
const BINDINGS_WEIGHTED: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];
const BINDINGS_INPLACE: &[BindingKind] = &[BindingKind::Uniform, BindingKind::StorageReadWrite];
const BINDINGS_INPLACE_WEIGHTED: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];

pub const WORKGROUP: u32 = 256;

/// The RMS norm kernel: with or without a gain vector, out of place or in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RmsNormKernel {
    /// Rows multiplied by a gain vector (entry `main_weighted`).
    pub weighted: bool,
    /// One read-write buffer (`norm/io_inplace.wgsl`) instead of x read and y written.
    pub in_place: bool,
}

impl KernelFamily for RmsNormKernel {
    fn variants() -> Vec<RmsNormKernel> {
        let mut all = Vec::new();
        for weighted in [false, true] {
            for in_place in [false, true] {
                all.push(RmsNormKernel { weighted, in_place });
            }
        }
        all
    }

    fn program(self) -> Program {
        let RmsNormKernel { weighted, in_place } = self;
        let name = match (weighted, in_place) {
            (false, false) => "rms_norm",
            (true, false) => "rms_norm_weighted",
            (false, true) => "rms_norm_inplace",
            (true, true) => "rms_norm_inplace_weighted",
        };
        Program {
            name: name.to_string(),
            files: vec![
                &SHADER,
                &REDUCE,
                if in_place { &IO_INPLACE } else { &IO_SEPARATE },
            ],
            entry: if weighted { "main_weighted" } else { "main" },
            bindings: match (weighted, in_place) {
                (false, false) => BINDINGS,
                (true, false) => BINDINGS_WEIGHTED,
                (false, true) => BINDINGS_INPLACE,
                (true, true) => BINDINGS_INPLACE_WEIGHTED,
            },
            params_size: size_of::<RmsNormParams>(),
        }
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<Check> {
        vec![CHECK]
    }
}

/// Shape of an RMS norm: `n_rows` rows of `n`.
#[derive(Debug, Clone, Copy)]
pub struct RmsNorm {
    pub n: usize,
    pub n_rows: usize,
    pub eps: f32,
}

impl RmsNorm {
    /// `y = x / rms(x) [* weight]` row by row. `x` and `y` must be different tensors
    /// (wgpu forbids one buffer as read and read-write in a dispatch; use [`RmsNorm::op_inplace`]).
    pub fn op(self, x: View<'_>, y: View<'_>, weight: Option<&GpuTensor>) -> Result<Op, GpuError> {
        self.build(x, Some(y), weight)
    }

    /// `x = x / rms(x) [* weight]` row by row, in place (per-head q/k norms).
    pub fn op_inplace(self, x: View<'_>, weight: Option<&GpuTensor>) -> Result<Op, GpuError> {
        self.build(x, None, weight)
    }

    fn build(
        self,
        x: View<'_>,
        y: Option<View<'_>>,
        weight: Option<&GpuTensor>,
    ) -> Result<Op, GpuError> {
        x.check("rms_norm x", self.n * self.n_rows)?;
        if let Some(y) = y {
            y.check("rms_norm y", self.n * self.n_rows)?;
        }
        let in_place = y.is_none();
        let y = y.unwrap_or(x);
        let params = RmsNormParams {
            n: self.n as u32,
            n_rows: self.n_rows as u32,
            x_offset: x.offset as u32,
            y_offset: y.offset as u32,
            eps: self.eps,
            _pad: [0; 3],
        };
        let grid = grid_1d(self.n_rows);
        if let Some(w) = weight {
            View::from(w).check("rms_norm weight", self.n)?;
        }
        let kernel = RmsNormKernel {
            weighted: weight.is_some(),
            in_place,
        };
        let mut buffers = vec![&x.t.buf];
        if !in_place {
            buffers.push(&y.t.buf);
        }
        buffers.extend(weight.map(|w| &w.buf));
        Ok(Op::new(kernel, WORKGROUP, &params, &buffers, grid))
    }

    /// CPU reference, in f64.
    pub fn reference(self, x: &[f32], weight: Option<&[f32]>) -> Vec<f32> {
        let mut y = Vec::with_capacity(x.len());
        for row in x.chunks_exact(self.n).take(self.n_rows) {
            let ss: f64 = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
            let r = 1.0 / (ss / self.n as f64 + f64::from(self.eps)).sqrt();
            for (i, &v) in row.iter().enumerate() {
                let g = weight.map_or(1.0, |w| f64::from(w[i]));
                y.push((f64::from(v) * r * g) as f32);
            }
        }
        y
    }
}

/// Tolerance: |gpu - ref| <= (n/2 + 8) * 2^-24 * |ref|. The sum of squares of n terms errs
/// by at most n*u relative (all terms positive), which the square root halves; 1/sqrt, the
/// division by n, the eps add and the two products add a few u more (WGSL allows 2.5 ulp
/// for division and sqrt). The reference is f64.
pub const CHECK: Check = Check {
    name: "rms_norm",
    tolerance: "(n/2+8)*2^-24*|ref|",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = if rng.bool() {
        rng.pick(&[64, 128, 256, 640])
    } else {
        rng.range(1, 700)
    };
    compare(
        gpu,
        n,
        rng.range(1, 5),
        rng.bool(),
        rng.bool(),
        rng.next_u64(),
    )
}

fn compare(
    gpu: &Gpu,
    n: usize,
    n_rows: usize,
    weighted: bool,
    in_place: bool,
    seed: u64,
) -> Result<Compare, GpuError> {
    let norm = RmsNorm {
        n,
        n_rows,
        eps: 1e-6,
    };
    let x = random_f32(n * n_rows, seed);
    let w = random_f32(n, seed ^ 5);
    let xt = GpuTensor::from_f32(gpu, &[n_rows * n + 2], &[&[9.0, 9.0], &x[..]].concat());
    let wt = GpuTensor::from_f32(gpu, &[n], &w);
    let yt = GpuTensor::zeros(gpu, &[n_rows * n + 1], Dtype::F32);
    let weight = weighted.then_some(&wt);
    let (op, out, off) = if in_place {
        (norm.op_inplace(View::at(&xt, 2), weight)?, &xt, 2)
    } else {
        (norm.op(View::at(&xt, 2), View::at(&yt, 1), weight)?, &yt, 1)
    };
    let y: Vec<f32> = run_read(gpu, vec![op], out, off, n * n_rows)?;
    let want = norm.reference(&x, weighted.then_some(&w[..]));
    let ulps = (n / 2 + 8) as f64;
    let mut c = Compare::default();
    for (i, (g, r)) in y.iter().zip(&want).enumerate() {
        let bound = ulps * U * f64::from(r.abs()) + 1e-30;
        c.add(f64::from(*g), f64::from(*r), bound, || {
            format!("n {n} rows {n_rows} weighted {weighted} in_place {in_place} elem {i}")
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn rms_norm_matches_reference() {
        testutil::parity("rms_norm", 6, 11);
    }

    /// Gemma's shapes: the 640-wide vector and per-head q norms over [4, 256], in place too.
    #[test]
    fn gemma_shapes() {
        let Some(gpu) = testutil::gpu() else { return };
        for (n, rows, weighted, in_place) in [
            (640, 1, true, false),
            (256, 4, true, false),
            (256, 1, false, false),
            (256, 4, true, true),
            (256, 1, false, true),
        ] {
            let c = compare(gpu, n, rows, weighted, in_place, n as u64).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
