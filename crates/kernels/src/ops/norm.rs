//! RMS norm over rows, with an optional gain vector shared by all rows.
//!
//! WGSL: `norm/rms_norm.wgsl` (entry `main`, or `main_weighted` with the weight bound).
//! One workgroup of 64 per row. A whole vector is one row; per-head norms over
//! `[n_heads, head_dim]` are `n_heads` rows of `head_dim`.

use crate::error::GpuError;
use crate::op::{Op, grid_1d};
use crate::pipeline::Kernel;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

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

pub const WORKGROUP: u32 = 64;

pub(crate) fn program(weighted: bool) -> Program {
    Program {
        name: if weighted {
            "rms_norm_weighted"
        } else {
            "rms_norm"
        }
        .to_string(),
        files: vec![&SHADER],
        entry: if weighted { "main_weighted" } else { "main" },
        bindings: if weighted {
            BINDINGS_WEIGHTED
        } else {
            BINDINGS
        },
        params_size: size_of::<RmsNormParams>(),
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
    /// `y = x / rms(x) [* weight]` row by row. `x` and `y` must be different tensors.
    pub fn op(self, x: View<'_>, y: View<'_>, weight: Option<&GpuTensor>) -> Result<Op, GpuError> {
        x.check("rms_norm x", self.n * self.n_rows)?;
        y.check("rms_norm y", self.n * self.n_rows)?;
        let params = RmsNormParams {
            n: self.n as u32,
            n_rows: self.n_rows as u32,
            x_offset: x.offset as u32,
            y_offset: y.offset as u32,
            eps: self.eps,
            _pad: [0; 3],
        };
        let grid = grid_1d(self.n_rows);
        Ok(match weight {
            Some(w) => {
                View::from(w).check("rms_norm weight", self.n)?;
                let kernel = Kernel::RmsNorm { weighted: true };
                Op::new(
                    kernel,
                    WORKGROUP,
                    &params,
                    &[&x.t.buf, &y.t.buf, &w.buf],
                    grid,
                )
            }
            None => {
                let kernel = Kernel::RmsNorm { weighted: false };
                Op::new(kernel, WORKGROUP, &params, &[&x.t.buf, &y.t.buf], grid)
            }
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{gpu, random_f32};
    use crate::{Dtype, Readback, StepBuilder};
    use proptest::prelude::*;

    /// Tolerance: |gpu - ref| <= (n/2 + 8) * 2^-24 * |ref| + 1e-30. The sum of squares of n
    /// terms errs by at most n*u relative (all terms positive), which the square root halves;
    /// 1/sqrt, the division by n, the eps add and the two products add a few u more (WGSL
    /// allows 2.5 ulp for division and sqrt). The reference is f64.
    fn check(n: usize, n_rows: usize, weighted: bool, seed: u64) {
        let Some(gpu) = gpu() else { return };
        let norm = RmsNorm {
            n,
            n_rows,
            eps: 1e-6,
        };
        let x = random_f32(n * n_rows, seed);
        let w = random_f32(n, seed ^ 5);
        let xt = GpuTensor::from_f32(gpu, &[n_rows, n], &x);
        let wt = GpuTensor::from_f32(gpu, &[n], &w);
        let yt = GpuTensor::zeros(gpu, &[n_rows * n + 1], Dtype::F32);
        let mut b = StepBuilder::new();
        b.push(
            norm.op((&xt).into(), View::at(&yt, 1), weighted.then_some(&wt))
                .unwrap(),
        );
        let mut step = b.build(gpu);
        let mut y = vec![0f32; n * n_rows];
        Readback::new(gpu, (y.len() * 4) as u64)
            .run_and_read(gpu, &mut step, &yt, 1, &mut y)
            .unwrap();
        let want = norm.reference(&x, weighted.then_some(&w[..]));
        let ulps = (n / 2 + 8) as f32;
        for (i, (g, r)) in y.iter().zip(&want).enumerate() {
            let tol = ulps * f32::EPSILON / 2.0 * r.abs() + 1e-30;
            assert!((g - r).abs() <= tol, "elem {i}: gpu {g} ref {r} tol {tol}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]
        #[test]
        fn rms_norm_matches_reference(
            n in 1usize..700, n_rows in 1usize..5, weighted in any::<bool>(), seed in any::<u64>()
        ) {
            check(n, n_rows, weighted, seed);
        }
    }

    /// Gemma's shapes: the 640-wide vector and per-head q norms over [4, 256].
    #[test]
    fn gemma_shapes() {
        check(640, 1, true, 1);
        check(256, 4, true, 2);
        check(256, 1, false, 3);
    }
}
