//! The small-M product's parity check: `matmul_coop`'s reference and bounds (the same f16
//! inputs and f32 sums) over random few-row products, through the matmul's own case runner.

use super::*;
use crate::device::Gpu;
use crate::ops::matmul::{Case, Inputs};
use crate::ops::matmul_coop::{EXACT, ROUNDED, coop_device};
use crate::parity::data::{Rng, n_in_block};
use crate::parity::{Check, Compare};

/// Random formats, shapes, tiles and 2 to 64 tokens, split or not; half of the cases F16
/// weights with f16-valued inputs (no rounding: any misplaced row, token or input shows).
pub const CHECK: Check = Check {
    name: "matmul_small_m",
    tolerance: "as matmul_coop (f16 inputs, f32 sums; matmul_coop_exact's for f16 values), \
                split K's partials added in split order; the rest of y untouched",
    case: parity_case,
};

/// A random product of `n_tokens` tokens on a tile of `tiles`: inputs as drawn or (half the
/// cases) F16 weights and f16-valued inputs; partial slabs, strided unaligned X and Y or
/// whole aligned slabs (the direct store); a bias in half; one split (weights in chunks) or
/// 2 to 4 (one chunk).
fn random_case(rng: &mut Rng, tiles: &[SmallMTile], n_tokens: usize) -> (Case, &'static Inputs) {
    let mut c = Case::random(rng);
    let exact = rng.bool();
    if exact {
        c.format = GpuFormat::F16;
    }
    let block = n_in_block(c.format);
    c.n_in = (rng.range(40, 600) / block).max(1) * block;
    c.n_tokens = n_tokens;
    let tile = rng.pick(tiles);
    c.tile = Some(Tile::SmallM(tile));
    c.bias = rng.bool();
    if rng.bool() {
        c.n_out = tile.rows() * rng.range(1, 3);
        c.x_pad = 0;
        c.y_pad = 4 * rng.range(0, 2);
        c.y_offset = 4 * rng.range(0, 2);
    }
    if rng.bool() {
        c.chunk_rows = c.n_out;
        c.k_splits = rng.range(2, 5).min(c.n_in.div_ceil(32));
    }
    (c, if exact { &EXACT } else { &ROUNDED })
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_device(gpu)?;
    let n_tokens = rng.range(2, SMALL_M_TOKENS + 1);
    let (case, inputs) = random_case(rng, &SmallMTile::ALL, n_tokens);
    case.run(gpu, true, inputs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::matmul::Strides;
    use crate::parity::data::random_weight_bytes;
    use crate::tensor::{GpuWeight, WeightShape};
    use crate::testutil;

    /// The tiles whose workgroup memory fits lavapipe's 32 KB (one of each workgroup size);
    /// on a device with cooperative matrices every tile.
    fn body_tiles(gpu: &Gpu) -> &'static [SmallMTile] {
        match gpu.caps.coop_f16 {
            true => &SmallMTile::ALL,
            false => &[SmallMTile::R64U2, SmallMTile::R128U1],
        }
    }

    fn body_device(test: &str) -> Option<&'static Gpu> {
        testutil::coop_body_device(test, "common/coop_emul.wgsl, matmul/coop_io_emul.wgsl")
    }

    #[test]
    fn small_m_matches_reference() {
        testutil::parity("matmul_small_m", 8, 801);
    }

    /// Random cases at M in {2, 5, 16, 33, 64} (one token block partial, whole, or several),
    /// split and unsplit, through the kernel's body.
    #[test]
    fn body_matches_reference() {
        let Some(gpu) = body_device("small_m body_matches_reference") else {
            return;
        };
        let mut rng = Rng::new(810);
        for n_tokens in [2, 5, 16, 33, 64] {
            for _ in 0..2 {
                let (case, inputs) = random_case(&mut rng, body_tiles(gpu), n_tokens);
                let c = case.run(gpu, true, inputs).unwrap();
                assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
            }
        }
    }

    /// Several formats (two super-blocks of the K-quants, the planar Q8_0 / Q5_0, rows ending
    /// mid-unit in F16; about 600 inputs) on each lavapipe tile, unsplit in two chunks and split in 3, at M = 5
    /// and M = 33.
    #[test]
    fn body_formats_split_and_unsplit() {
        let Some(gpu) = body_device("small_m body_formats_split_and_unsplit") else {
            return;
        };
        let formats = [
            GpuFormat::Q4K,
            GpuFormat::Q6K,
            GpuFormat::Q8_0,
            GpuFormat::Q5_0,
            GpuFormat::F16,
        ];
        for (i, f) in formats.into_iter().enumerate() {
            for &tile in body_tiles(gpu) {
                for (n_tokens, k_splits) in [(5, 1), (33, 3)] {
                    let case = Case {
                        n_in: (600 / n_in_block(f)).max(2) * n_in_block(f),
                        n_tokens,
                        chunk_rows: if k_splits == 1 { 100 } else { 131 },
                        tile: Some(Tile::SmallM(tile)),
                        k_splits,
                        ..Case::odd_shape(f, 820 + i as u64)
                    };
                    let c = case.run(gpu, true, &ROUNDED).unwrap();
                    assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
                }
            }
        }
    }

    /// The split rule on the bench's shapes (gemma3-4b's gate|up and down): splits until the
    /// target, at most 16, each of at least two stages; none where the rows are not a whole
    /// one-chunk weight; the kernel only on the tensor cores, for 2 to 64 tokens.
    #[test]
    fn split_rule() {
        let Some(gpu) = testutil::gpu() else { return };
        let shape = |n_in, n_out| WeightShape {
            format: GpuFormat::Q4K,
            n_in,
            n_out,
        };
        let upload = |s: WeightShape, chunk| {
            let bytes = random_weight_bytes(s.format, s.n_out, s.n_in, 1);
            GpuWeight::upload_chunked(gpu, s, &bytes, chunk).unwrap()
        };
        let up = upload(shape(2560, 1024), 1024);
        let down = upload(shape(10240, 256), 256);
        let chunked = upload(shape(2560, 1024), 512);
        let short = upload(shape(1280, 1024), 1024);
        let m = |n_tokens| Matmul {
            n_tokens,
            strides: Strides::default(),
            tensor_cores: true,
        };
        let cfg = |tile, target_workgroups| SmallM {
            tile,
            target_workgroups,
        };
        let splits = |w: WeightRows<'_>, c: SmallM| c.split(w, 8).splits;
        // 16 slabs of 64 rows: 1056 / 16 = 66, capped by 80 units / 4 = 20 (two stages of 2).
        assert_eq!(splits(up.all_rows(), cfg(SmallMTile::R64U2, 1056)), 16);
        // 8 slabs of 128 rows: 1056 / 8 = 132, capped by 40 units / 4 = 10.
        assert_eq!(splits(short.all_rows(), cfg(SmallMTile::R128U2, 1056)), 10);
        assert_eq!(splits(up.all_rows(), cfg(SmallMTile::R128U2, 64)), 8);
        assert_eq!(splits(down.all_rows(), cfg(SmallMTile::R64U2, 8)), 2);
        assert_eq!(splits(chunked.all_rows(), cfg(SmallMTile::R64U2, 1056)), 1);
        let caps = testutil::nvidia_caps;
        let default = SmallM::for_format(up.shape.format);
        let tile = Tile::SmallM(default.tile);
        let small_m = |n, coop| m(n).small_m(&caps(coop), up.all_rows(), default);
        assert_eq!(small_m(8, true).map(|k| k.tile), Some(tile));
        assert_eq!(small_m(64, true).map(|k| k.tile), Some(tile));
        assert_eq!(small_m(1, true), None);
        assert_eq!(small_m(65, true), None);
        assert_eq!(small_m(8, false), None);
    }
}
