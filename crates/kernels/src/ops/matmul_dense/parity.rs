//! The dense tensor-core matmul's parity checks: `matmul_coop`'s bound (the same f16 inputs
//! and f32 sums) on F16 weights and, through the dense route, on weights of every format;
//! every tile, partial tiles, chunks and a bias.

use super::*;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::ops::matmul::{Case, Tile};
use crate::ops::matmul_coop::{ROUNDED, coop_device};
use crate::parity::data::Rng;
use crate::parity::{Check, Compare};

/// Inputs as drawn (rounded to f16 by the kernel), against `matmul_coop`'s bound.
pub const CHECK: Check = Check {
    name: "matmul_dense",
    tolerance: "f16 inputs (1 ulp each)+(4n_in+1)*2^-24*sum|w'x'|",
    case: parity_case,
};

/// A random shape on a random dense tile: whole tiles with an aligned Y in half the cases (the
/// direct store), partial tiles and unaligned strides in the others (the scratch store).
fn case(rng: &mut Rng) -> Case {
    let tile = rng.pick(&DenseTile::ALL);
    let aligned = rng.bool();
    let (n_out, n_tokens) = if aligned {
        (
            tile.rows() * rng.range(1, 3),
            tile.tokens() * rng.range(1, 2),
        )
    } else {
        (rng.range(1, 300), rng.range(1, 300))
    };
    // F16 as the dense kernel's own weights; any other format through the dense route.
    let format = rng.pick(&GpuFormat::ALL);
    Case {
        format,
        n_out,
        n_in: format.block_weights().max(32) * rng.range(1, 3),
        n_tokens,
        chunk_rows: if aligned {
            tile.rows() * rng.range(1, 3)
        } else {
            rng.range(1, 400)
        },
        // X's rows 16-byte aligned: the kernel reads them as vec4s.
        x_pad: 4 * rng.range(0, 2),
        y_pad: if aligned { 4 * rng.range(0, 2) } else { 3 },
        y_offset: if aligned { 4 * rng.range(0, 2) } else { 1 },
        bias: rng.bool(),
        seed: rng.next_u64(),
        tile: Some(Tile::Dense(tile)),
        k_splits: 1,
    }
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_device(gpu)?;
    case(rng).run(gpu, true, &ROUNDED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn matmul_dense_matches_reference() {
        testutil::parity("matmul_dense", 8, 701);
    }

    /// The kernel's body over emulated coop ops (lavapipe): every tile, once over whole
    /// tiles (the direct store, two units so both stages turn), once over partial ones with a
    /// bias (the scratch store) and once on the dense route (a quantized weight in chunks,
    /// copied to f16 first), on shapes small enough for the emulation.
    #[test]
    fn body_matches_reference() {
        let Some(gpu) =
            testutil::coop_body_device("body_matches_reference", "common/coop_emul.wgsl")
        else {
            return;
        };
        let mut rng = Rng::new(801);
        for tile in DenseTile::ALL {
            let whole = Case {
                format: GpuFormat::F16,
                n_out: tile.rows(),
                n_in: 64,
                n_tokens: tile.tokens(),
                chunk_rows: tile.rows(),
                x_pad: 0,
                y_pad: 0,
                y_offset: 0,
                bias: false,
                seed: rng.next_u64(),
                tile: Some(Tile::Dense(tile)),
                k_splits: 1,
            };
            let partial = Case {
                n_out: 37,
                n_in: 96,
                n_tokens: 45,
                chunk_rows: 20,
                x_pad: 4,
                y_pad: 3,
                y_offset: 1,
                bias: true,
                seed: rng.next_u64(),
                ..whole
            };
            // The dense route: a quantized weight in chunks, copied to f16 first.
            let route = Case {
                format: rng.pick(&[GpuFormat::Q4K, GpuFormat::Q6K, GpuFormat::Q8_0]),
                n_in: 256,
                seed: rng.next_u64(),
                ..partial
            };
            for c in [whole, partial, route] {
                let r = c.run(gpu, true, &ROUNDED).unwrap();
                assert!(r.max_ratio <= 1.0, "{c:?}: {}", r.worst);
            }
        }
    }
}
