//! Embedding gather: rows of a (quantized) table picked by token ids that live on the GPU, so
//! the id sampled by one step feeds the next without a round trip.
//!
//! WGSL: `embed/embed_rows.wgsl` + `common/blocks.wgsl` + `formats/<type>.wgsl`. One workgroup
//! of 64 per token; one dispatch per table chunk (a chunk skips ids outside its rows).

use crate::device::Gpu;
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::parity::data::{Rng, n_in_step, random_weight};
use crate::parity::{Check, Compare, run_read};
use crate::shader::{BLOCKS, Program, ShaderFile, WEIGHT_KERNEL_BINDINGS, shader_file};
use crate::tensor::{Dtype, GpuTensor, GpuWeight, View, WeightShape};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct EmbedParams {
    pub n_in: u32,
    pub first_row: u32,
    pub n_rows: u32,
    pub row_bytes: u32,
    pub id_offset: u32,
    pub n_tokens: u32,
    pub out_offset: u32,
    /// Multiplies every value (Gemma scales embeddings by sqrt(d_model)).
    pub scale: f32,
}

static SHADER: ShaderFile = shader_file!("embed/embed_rows.wgsl");

pub const WORKGROUP: u32 = 64;

/// The embedding gather over a table of one format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EmbedKernel(pub GpuFormat);

impl KernelFamily for EmbedKernel {
    fn variants() -> Vec<EmbedKernel> {
        crate::shader::weight_formats()
            .iter()
            .map(|&f| EmbedKernel(f))
            .collect()
    }

    fn program(self) -> Program {
        let f = self.0;
        Program {
            name: format!("embed_rows_{}", f.name()),
            files: [&SHADER, &BLOCKS]
                .into_iter()
                .chain(f.decoder().iter().copied())
                .collect(),
            entry: "main",
            bindings: WEIGHT_KERNEL_BINDINGS,
            params_size: size_of::<EmbedParams>(),
        }
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<Check> {
        vec![CHECK]
    }
}

/// `out[t * n_in + i] = scale * table[ids[t], i]` for `n_tokens` ids; one op per table chunk.
pub fn embed_rows(
    table: &GpuWeight,
    ids: View<'_>,
    n_tokens: usize,
    out: View<'_>,
    scale: f32,
) -> Result<Vec<Op>, GpuError> {
    let s = table.shape;
    ids.check("embed ids", n_tokens)?;
    out.check("embed out", n_tokens * s.n_in)?;
    let ops = table.chunks.iter().map(|c| {
        let params = EmbedParams {
            n_in: s.n_in as u32,
            first_row: c.first_row as u32,
            n_rows: c.n_rows as u32,
            row_bytes: s.format.row_bytes(s.n_in) as u32,
            id_offset: ids.offset as u32,
            n_tokens: n_tokens as u32,
            out_offset: out.offset as u32,
            scale,
        };
        let buffers = [&c.buf, &ids.t.buf, &out.t.buf, &c.buf];
        Op::new(
            EmbedKernel(s.format),
            WORKGROUP,
            &params,
            &buffers,
            grid_1d(n_tokens),
        )
    });
    Ok(ops.collect())
}

/// CPU reference over the dequantized table (`n_rows * n_in`, row-major).
pub fn embed_ref(table: &[f32], n_in: usize, ids: &[u32], scale: f32) -> Vec<f32> {
    ids.iter()
        .flat_map(|&id| {
            table[id as usize * n_in..][..n_in]
                .iter()
                .map(move |&v| v * scale)
        })
        .collect()
}

/// Tolerance: 2 * 2^-23 * |ref|. Both sides decode a weight with the same f32 operations
/// (d * q, d * sc * q - dmin * m) and multiply once by the scale; only an FMA contraction on
/// the GPU can differ (K-quants), which a 2-ulp bound covers.
pub const CHECK: Check = Check {
    name: "embed_rows",
    tolerance: "2*2^-23*|ref|",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let f = rng.pick(&GpuFormat::ALL);
    let n_rows = rng.range(1, 30);
    let n_in = rng.range(1, 4) * n_in_step(f);
    let chunk_rows = rng.range(1, 30);
    let seed = rng.next_u64();
    let ids = [(); 3].map(|_| rng.range(0, n_rows) as u32);
    compare(gpu, f, n_rows, n_in, chunk_rows, ids, seed)
}

/// Gathers the 3 rows `ids` of a random `n_rows x n_in` table in `f` (split every `chunk_rows`).
fn compare(
    gpu: &Gpu,
    f: GpuFormat,
    n_rows: usize,
    n_in: usize,
    chunk_rows: usize,
    ids: [u32; 3],
    seed: u64,
) -> Result<Compare, GpuError> {
    let (bytes, table) = random_weight(f, n_rows, n_in, seed);
    let shape = WeightShape {
        format: f,
        n_in,
        n_out: n_rows,
    };
    let wt = GpuWeight::upload_chunked(gpu, shape, &bytes, chunk_rows)?;
    let idt = GpuTensor::from_u32(gpu, &[4], &[0, ids[0], ids[1], ids[2]]);
    let out = GpuTensor::zeros(gpu, &[3 * n_in], Dtype::F32);
    let ops = embed_rows(&wt, View::at(&idt, 1), 3, (&out).into(), 1.5)?;
    let y: Vec<f32> = run_read(gpu, ops, &out, 0, 3 * n_in)?;
    let want = embed_ref(&table, n_in, &ids, 1.5);
    let mut c = Compare::default();
    for (i, (g, r)) in y.iter().zip(&want).enumerate() {
        let tol = 2.0 * f64::from(f32::EPSILON * r.abs());
        c.add(f64::from(*g), f64::from(*r), tol, || {
            format!("{f:?} elem {i}")
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn embed_matches_reference() {
        testutil::parity("embed_rows", 6, 61);
    }

    /// Every format once: first, middle and last row of a table split over 3 chunks.
    #[test]
    fn every_format() {
        let Some(gpu) = testutil::gpu() else { return };
        for (i, f) in GpuFormat::ALL.into_iter().enumerate() {
            let n_in = 2 * n_in_step(f);
            let c = compare(gpu, f, 11, n_in, 4, [0, 5, 10], 300 + i as u64).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
