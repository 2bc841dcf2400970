//! The embedding gather's CPU reference and parity check.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, n_in_block, random_weight};
use crate::parity::{Check, Compare, run_read};
use crate::tensor::{Dtype, GpuTensor, WeightShape};

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
    let n_in = rng.range(1, 4) * n_in_block(f);
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
            let n_in = 2 * n_in_block(f);
            let c = compare(gpu, f, 11, n_in, 4, [0, 5, 10], 300 + i as u64).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
