//! `y = W x` with `W` a GGUF weight (any [`GpuFormat`]) kept in its block layout.
//!
//! WGSL: `matvec/matvec.wgsl` (skeleton) + `common/blocks.wgsl` + `formats/<type>.wgsl`.
//! One workgroup of 64 per output row; one dispatch per weight chunk.

use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::op::{Op, grid_1d};
use crate::pipeline::Kernel;
use crate::shader::{BLOCKS, BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuWeight, View};

/// Parameters of one matvec dispatch (WGSL `Params` in `matvec/matvec.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MatvecParams {
    pub n_in: u32,
    /// Rows in this chunk.
    pub n_rows: u32,
    pub row_bytes: u32,
    pub x_offset: u32,
    /// Where this chunk's first row lands in `y`.
    pub y_offset: u32,
    pub _pad: [u32; 3],
}

static SKELETON: ShaderFile = shader_file!("matvec/matvec.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

pub const WORKGROUP: u32 = 64;

pub(crate) fn program(f: GpuFormat) -> Program {
    Program {
        name: format!("matvec_{}", f.name()),
        files: vec![&SKELETON, &BLOCKS, f.decoder()],
        entry: "main",
        bindings: BINDINGS,
        params_size: size_of::<MatvecParams>(),
    }
}

/// `y[y.offset..][..n_out] = W x[x.offset..][..n_in]`: one op per weight chunk.
pub fn matvec(w: &GpuWeight, x: View<'_>, y: View<'_>) -> Result<Vec<Op>, GpuError> {
    let s = w.shape;
    x.check("matvec x", s.n_in)?;
    y.check("matvec y", s.n_out)?;
    let ops = w.chunks.iter().map(|c| {
        let params = MatvecParams {
            n_in: s.n_in as u32,
            n_rows: c.n_rows as u32,
            row_bytes: s.format.row_bytes(s.n_in) as u32,
            x_offset: x.offset as u32,
            y_offset: (y.offset + c.first_row) as u32,
            _pad: [0; 3],
        };
        let buffers = [&c.buf, &x.t.buf, &y.t.buf];
        Op::new(
            Kernel::Matvec(s.format),
            WORKGROUP,
            &params,
            &buffers,
            grid_1d(c.n_rows),
        )
    });
    Ok(ops.collect())
}

/// CPU reference: `y = W x` in f64 over the dequantized rows (`w` is `n_out * n_in`, row-major).
/// Also returns `sum_i |w_i x_i|` per row, the scale of the rounding error bound.
pub fn matvec_ref(w: &[f32], x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    w.chunks_exact(x.len())
        .map(|row| {
            let dot: f64 = row
                .iter()
                .zip(x)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum();
            let abs: f64 = row
                .iter()
                .zip(x)
                .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
                .sum();
            (dot as f32, abs as f32)
        })
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{self, random_weight};
    use crate::{GpuTensor, GpuWeight, Readback, StepBuilder, WeightShape};
    use proptest::prelude::*;

    /// Tolerance: |gpu - ref| <= (n_in + 4) * 2^-24 * sum_i |w_i x_i|. The GPU sums n_in f32
    /// products in another order (per-invocation strided sums, then a tree), possibly with
    /// FMA; any order of n f32 additions errs by at most n * u * sum |terms| (u = 2^-24), and
    /// decoding a weight (d * sc * q - m) adds a few roundings more. The reference is f64.
    fn check(format: GpuFormat, n_out: usize, n_blocks: usize, chunk_rows: usize, seed: u64) {
        let Some(gpu) = testutil::gpu() else { return };
        let n_in = n_blocks * testutil::n_in_step(format);
        let (bytes, w) = random_weight(format, n_out, n_in, seed);
        let x = testutil::random_f32(n_in, seed ^ 1);
        let shape = WeightShape {
            format,
            n_in,
            n_out,
        };
        let row_bytes = format.row_bytes(n_in) as u64;
        let wt = GpuWeight::upload_chunked(gpu, shape, &bytes, row_bytes * chunk_rows as u64 + 4)
            .unwrap();
        let xt = GpuTensor::from_f32(gpu, &[n_in], &x);
        let yt = GpuTensor::zeros(gpu, &[n_out + 3], crate::Dtype::F32);
        let mut b = StepBuilder::new();
        b.extend(matvec(&wt, (&xt).into(), View::at(&yt, 3)).unwrap());
        let mut step = b.build(gpu);
        let mut y = vec![0f32; n_out];
        Readback::new(gpu, (n_out * 4) as u64)
            .run_and_read(gpu, &mut step, &yt, 3, &mut y)
            .unwrap();
        let (want, abs) = matvec_ref(&w, &x);
        for r in 0..n_out {
            let tol = (n_in + 4) as f32 * f32::EPSILON / 2.0 * abs[r];
            assert!(
                (y[r] - want[r]).abs() <= tol,
                "{format:?} row {r}: gpu {} ref {} tol {tol}",
                y[r],
                want[r]
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]
        #[test]
        fn matvec_matches_reference(
            fi in 0..GpuFormat::ALL.len(),
            n_out in 1usize..40,
            n_blocks in 1usize..5,
            chunk_rows in 1usize..50,
            seed in any::<u64>(),
        ) {
            check(GpuFormat::ALL[fi], n_out, n_blocks, chunk_rows, seed);
        }
    }

    /// Every format once, with rows split over several chunks.
    #[test]
    fn every_format() {
        for (i, f) in GpuFormat::ALL.into_iter().enumerate() {
            check(f, 13, 3, 5, 7 + i as u64);
        }
    }

    /// F32/F16 rows whose length is not a multiple of 32 (the last unit is partial).
    #[test]
    fn float_partial_units() {
        for f in [GpuFormat::F32, GpuFormat::F16] {
            check(f, 5, 37, 100, 3);
        }
    }
}
