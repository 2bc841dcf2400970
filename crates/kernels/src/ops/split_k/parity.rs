//! Split K's parity check.

use super::*;
use crate::device::Gpu;
use crate::ops::matmul::Case;
use crate::ops::matmul_coop::{ROUNDED, coop_device};
use crate::parity::data::{Rng, n_in_block};
use crate::parity::{Check, Compare};

/// The tensor-core kernel's bound (module doc), over random shapes in 2 to 4 splits: one
/// output of a whole weight, or the split outputs of a stacked one, with or without a bias.
pub const CHECK: Check = Check {
    name: "matmul_coop_split_k",
    tolerance: "as matmul_coop (with a bias, one more term) per output; the rest of y untouched",
    case: parity_case,
};

/// A random product of one output in 2 to 4 splits (never more than its input units) with
/// either tile: partial tiles, several units a split (some splits of unequal length),
/// strided X and Y, a bias or none.
fn random_case(rng: &mut Rng) -> Case {
    let mut c = Case::random(rng);
    let block = n_in_block(c.format);
    c.n_in = (rng.range(64, 400) / block).max(1) * block;
    c.chunk_rows = c.n_out;
    c.k_splits = rng.range(2, 5).min(c.n_in.div_ceil(32));
    c.tile = Some(rng.pick(&[Tile::Small, Tile::Wide]));
    c.bias = rng.bool();
    c
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_device(gpu)?;
    match rng.bool() {
        true => random_case(rng).run(gpu, true, &ROUNDED),
        false => split::compare(gpu, &split::Case::split_k_random(rng), &ROUNDED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::GpuFormat;
    use crate::testutil;

    const EMULATION: &str = "common/coop_emul.wgsl, matmul/coop_io_emul.wgsl";

    #[test]
    fn split_k_parity() {
        testutil::parity("matmul_coop_split_k", 6, 701);
    }

    /// The split products through the kernel's body: the tensor cores where the device has
    /// them, else (lavapipe) the emulated coop ops.
    #[test]
    fn split_k_matches_reference() {
        let Some(gpu) = testutil::coop_body_device("split_k_matches_reference", EMULATION) else {
            return;
        };
        let mut rng = Rng::new(91);
        for _ in 0..8 {
            let case = random_case(&mut rng);
            let c = case.run(gpu, true, &ROUNDED).unwrap();
            assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
            let case = split::Case::split_k_random(&mut rng);
            let c = split::compare(gpu, &case, &ROUNDED).unwrap();
            assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
        }
    }

    /// A splitting bug would hide behind one split: each of 3 unequal splits holds a
    /// different third of the inputs, so a lost or doubled split is far outside the bound.
    #[test]
    fn every_split_counts() {
        let Some(gpu) = testutil::coop_body_device("every_split_counts", EMULATION) else {
            return;
        };
        let case = Case {
            k_splits: 3,
            ..Case::odd_shape(GpuFormat::Q8_0, 17)
        };
        for tile in [Tile::Small, Tile::Wide] {
            let case = Case {
                n_in: 8 * 32,
                chunk_rows: case.n_out,
                tile: Some(tile),
                ..case
            };
            let c = case.run(gpu, true, &ROUNDED).unwrap();
            assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
        }
    }

    /// When the model's products split: prompt blocks of few tiles on the tensor cores.
    #[test]
    fn split_rule() {
        let caps = testutil::nvidia_caps;
        let m = |n_tokens| Matmul {
            n_tokens,
            strides: Default::default(),
            tensor_cores: true,
        };
        let Some(gpu) = testutil::gpu() else { return };
        let shape = |n_in, n_out| crate::tensor::WeightShape {
            format: GpuFormat::Q8_0,
            n_in,
            n_out,
        };
        let w = |n_in, n_out| {
            let s: crate::tensor::WeightShape = shape(n_in, n_out);
            let bytes = vec![0u8; s.format.row_bytes(n_in) * n_out];
            crate::tensor::GpuWeight::upload_chunked(gpu, s, &bytes, n_out).unwrap()
        };
        let split = |splits, tile| Some(SplitK { splits, tile });
        // qwen2.5-0.5b's down projection at 922 tokens: 14 x 15 small tiles; 7 x 8 wide ones
        // (224 small-tile equivalents) -> 5 splits.
        let down = w(4864, 896);
        let down = down.all_rows();
        assert_eq!(m(922).split_k(&caps(true), down), split(5, Tile::Wide));
        assert_eq!(m(922).split_k(&caps(false), down), None);
        assert_eq!(m(1).split_k(&caps(true), down), None);
        // Its gate|up takes the wide tile whole instead.
        assert_eq!(m(922).split_k(&caps(true), w(896, 9728).all_rows()), None);
        // Its q|k|v (896 + 128 + 128 rows): 9 x 8 wide tiles (288 small-tile equivalents),
        // 4 splits for the target but 28 units hold only 3 of 8; rows not from the chunk's
        // first: none.
        let qkv = w(896, 1152);
        assert_eq!(
            m(922).split_k(&caps(true), qkv.all_rows()),
            split(3, Tile::Wide)
        );
        assert_eq!(
            m(922).split_k(&caps(true), qkv.rows(0..896)),
            split(3, Tile::Wide)
        );
        assert_eq!(m(922).split_k(&caps(true), qkv.rows(896..1152)), None);
        // Fewer than 256 rows: the small tile; at most n_in / 256 splits.
        assert_eq!(
            m(64).split_k(&caps(true), w(512, 64).all_rows()),
            split(2, Tile::Small)
        );
        assert_eq!(m(64).split_k(&caps(true), w(256, 64).all_rows()), None);
    }
}
