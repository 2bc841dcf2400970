//! The dense tensor-core matmul's parity checks: `matmul_coop`'s bound (the same f16 inputs
//! and f32 sums) on F16 weights and, through the dense route, on weights of every format;
//! every tile, partial tiles, chunks and a bias.

use super::*;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::ops::matmul::Strides;
use crate::ops::matmul::{Case, Tile};
use crate::ops::matmul_coop::{ROUNDED, coop_device};
use crate::ops::split;
use crate::parity::data::{Rng, n_in_block};
use crate::parity::data::{random_f32, random_weight};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::GpuTensor;

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

/// The product added into Y ([`Matmul::dense_ops_into`]): what Y held is one more term of
/// each output's sum, `(4 n_in + 5) u |y|` beside [`CHECK`]'s bound (the f32 add, or the
/// tensor cores' sum started from it).
pub const CHECK_ACCUMULATE: Check = Check {
    name: "matmul_dense_accumulate",
    tolerance: "matmul_dense's + (4n_in+5)*2^-24*|y|",
    case: accumulate_case,
};

/// A random dense tile and an output shape for it: one whole tile (the direct store) or a
/// random size (partial tiles through the scratch), as likely.
fn tile_and_shape(rng: &mut Rng) -> (DenseTile, usize, usize) {
    let tile = rng.pick(&DenseTile::ALL);
    match rng.bool() {
        true => (tile, tile.rows(), tile.tokens()),
        false => (tile, rng.range(1, 300), rng.range(1, 300)),
    }
}

fn accumulate_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_device(gpu)?;
    let (tile, n_out, n_tokens) = tile_and_shape(rng);
    accumulate(
        gpu,
        tile,
        (n_out, 32 * rng.range(1, 4), n_tokens),
        rng.next_u64(),
    )
}

/// `y += x wᵀ` on `tile` for a random F16 weight of `n_out x n_in`, `n_tokens` inputs and a
/// random Y, against the f64 sum.
fn accumulate(
    gpu: &Gpu,
    tile: DenseTile,
    (n_out, n_in, n_tokens): (usize, usize, usize),
    seed: u64,
) -> Result<Compare, GpuError> {
    let (bytes, w) = random_weight(GpuFormat::F16, n_out, n_in, seed);
    let shape = WeightShape {
        format: GpuFormat::F16,
        n_in,
        n_out,
    };
    let wt = GpuWeight::upload(gpu, shape, &bytes)?;
    let x = random_f32(n_tokens * n_in, seed ^ 1);
    let y0 = random_f32(n_tokens * n_out, seed ^ 2);
    let xt = GpuTensor::from_f32(gpu, &[x.len()], &x);
    let yt = GpuTensor::from_f32(gpu, &[y0.len()], &y0);
    let m = Matmul {
        n_tokens,
        strides: Strides::default(),
        tensor_cores: true,
    };
    let ops = m.dense_ops_into(tile, &wt, (&xt).into(), None, (&yt).into(), true)?;
    let y: Vec<f32> = run_read(gpu, ops, &yt, 0, y0.len())?;
    let mut c = Compare::default();
    for t in 0..n_tokens {
        let xr = &x[t * n_in..][..n_in];
        for (r, wr) in w.chunks_exact(n_in).enumerate() {
            let held = f64::from(y0[t * n_out + r]);
            let sum: f64 = wr
                .iter()
                .zip(xr)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum();
            let bound = (ROUNDED.bound)(wr, xr, None) + (4 * n_in + 5) as f64 * U * held.abs();
            c.add(f64::from(y[t * n_out + r]), held + sum, bound, || {
                format!("{tile:?} {n_tokens}x{n_in}x{n_out}: token {t} row {r}")
            });
        }
    }
    Ok(c)
}

/// Split K on the dense kernel ([`Matmul::split_k_ops`] with a dense tile: the LM head's input
/// gradient over its transposed f16 copy sums 262,144 inputs into few output tiles; over a
/// weight of another format, the dense route's split, [`Matmul::dense_route_ops`]): each
/// split's share of the inputs into its scratch slice, then the slices added in split order.
/// The bound is [`CHECK`]'s (`ops/split_k.rs` says why the partials' additions stay inside it).
pub const CHECK_SPLIT_K: Check = Check {
    name: "matmul_dense_split_k",
    tolerance: "matmul_dense's",
    case: split_k_case,
};

fn split_k_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_device(gpu)?;
    let (tile, n_out, n_tokens) = tile_and_shape(rng);
    // F16 as the dense kernel's own weights; any other format through the dense route.
    let format = rng.pick(&GpuFormat::ALL);
    Case {
        format,
        n_out,
        n_in: (32 * rng.range(4, 12)).next_multiple_of(format.block_weights().max(32)),
        n_tokens,
        // Split K takes the weight's one chunk; the route copies any chunks into one.
        chunk_rows: match format {
            GpuFormat::F16 => n_out,
            _ => rng.range(1, 400),
        },
        x_pad: 4 * rng.range(0, 2),
        y_pad: rng.range(0, 3),
        y_offset: rng.range(0, 3),
        bias: rng.bool(),
        seed: rng.next_u64(),
        tile: Some(Tile::Dense(tile)),
        k_splits: rng.range(2, 5),
    }
    .run(gpu, true, &ROUNDED)
}

/// The dense route as the model takes it ([`Matmul::dense_route_ops`] on the 128 x 128
/// tile): rows of a weight of any format in chunks (a whole stacked weight or a range of it)
/// into 1-3 outputs of one tensor, with and without a bias, in one dispatch or split K 2-4
/// ways. The bound is [`CHECK`]'s per output (`ops/split_k.rs` says why the partials'
/// additions stay inside it); the rest of y untouched.
pub const CHECK_ROUTE: Check = Check {
    name: "matmul_dense_route",
    tolerance: "matmul_dense's per output; the rest of y untouched",
    case: route_case,
};

fn route_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_device(gpu)?;
    split::compare(gpu, &route_random(rng), &ROUNDED)
}

/// A random case of [`CHECK_ROUTE`].
fn route_random(rng: &mut Rng) -> split::Case {
    let n_tokens = rng.range(2, 300);
    let mut case = split::Case::random(rng, split::Kind::Coop { n_tokens });
    // Inputs in whole units of 32 (the dense kernel's rows): the fewest blocks that make
    // them, 1-3 times over.
    let block = n_in_block(case.format);
    let least = (1..=32)
        .find(|k| (k * block).is_multiple_of(32))
        .unwrap_or(32);
    case.n_blocks = least * rng.range(1, 4);
    let units = case.n_blocks * block / 32;
    let k_splits = rng.range(1, 5).min(units);
    case.kind = split::Kind::Dense { n_tokens, k_splits };
    case
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn matmul_dense_matches_reference() {
        testutil::parity("matmul_dense", 8, 701);
    }

    /// The dense route split K gives, within [`CHECK`]'s bound of the f64 sum, what it gives
    /// in one dispatch: a stacked weight as the plan runs q|k|v (rows from the 10th of a Q4_K
    /// weight in chunks of 50, into three outputs of one tensor at gapped offsets, with and
    /// without a bias), in one dispatch and split 2 and 3 ways (shares of 4 and 3 units of the
    /// 8, so a share ends inside the kernel's 64-input stage); the rest of y untouched. Over
    /// the emulated coop ops on lavapipe.
    #[test]
    fn route_split_matches_unsplit() {
        let Some(gpu) =
            testutil::coop_body_device("route_split_matches_unsplit", "common/coop_emul.wgsl")
        else {
            return;
        };
        for k_splits in [1, 2, 3] {
            for bias in [false, true] {
                let case = split::Case {
                    format: GpuFormat::Q4K,
                    n_out: 150,
                    n_blocks: 1,
                    first: 10,
                    rows: vec![64, 32, 40],
                    chunk_rows: 50,
                    kind: split::Kind::Dense {
                        n_tokens: 45,
                        k_splits,
                    },
                    aligned: false,
                    bias,
                    seed: 61,
                };
                let c = split::compare(gpu, &case, &ROUNDED).unwrap();
                assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
            }
        }
    }

    /// [`CHECK_ROUTE`]'s random cases over the emulated coop ops (lavapipe; the check itself
    /// runs on devices with cooperative matrices).
    #[test]
    fn route_body_random() {
        let Some(gpu) = testutil::coop_body_device("route_body_random", "common/coop_emul.wgsl")
        else {
            return;
        };
        let mut rng = Rng::new(811);
        for _ in 0..6 {
            let case = route_random(&mut rng);
            let c = split::compare(gpu, &case, &ROUNDED).unwrap();
            assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
        }
    }

    /// The rule on qwen2.5-7b's prefill at 922 tokens: q|k|v 3 splits, down 4, o and gate|up
    /// none; a block below the route's tokens takes no route; q|k|v in a 4,096-token chunk
    /// takes the 256-row tile, unsplit.
    #[test]
    fn route_split_rule() {
        let caps = testutil::nvidia_caps(true);
        let m = |n_tokens| Matmul {
            n_tokens,
            strides: Strides::default(),
            tensor_cores: true,
        };
        let Some(gpu) = testutil::gpu() else { return };
        let w = |n_in, n_out| {
            let s = WeightShape {
                format: GpuFormat::Q8_0,
                n_in,
                n_out,
            };
            let bytes = vec![0u8; s.format.row_bytes(n_in) * n_out];
            GpuWeight::upload(gpu, s, &bytes).unwrap()
        };
        let route = |n_tokens, w: &GpuWeight| m(n_tokens).dense_route(&caps, w.all_rows(), 1 << 31);
        let square = |splits| {
            Some(DenseRoute {
                tile: DenseTile::Square,
                splits,
            })
        };
        let (qkv, o, down) = (w(3584, 4608), w(3584, 3584), w(18_944, 3584));
        assert_eq!(route(922, &qkv), square(3));
        assert_eq!(route(922, &o), square(1));
        assert_eq!(route(922, &down), square(4));
        let gate_up = w(3584, 37_888);
        assert_eq!(
            route(922, &gate_up),
            Some(DenseRoute::whole(DenseTile::Rows))
        );
        assert_eq!(route(511, &qkv), None);
        assert_eq!(route(4096, &qkv), Some(DenseRoute::whole(DenseTile::Rows)));
        // Partial sums past one binding: unsplit.
        let fits_copy = (m(922).dense_copy_len(qkv.all_rows()) * 4) as u64;
        let r = m(922).dense_route(&caps, qkv.all_rows(), fits_copy);
        assert_eq!(r, square(1));
    }

    /// The kernel's body over emulated coop ops (lavapipe): every tile, once over whole
    /// tiles (the direct store, two units so both stages turn), once over partial ones with a
    /// bias (the scratch store) and on the dense route (a quantized weight in chunks, copied
    /// to f16 first) in one dispatch and split K, on shapes small enough for the emulation.
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
            // The route split K 3 ways (shares of 3, 3 and 2 units).
            let route_split = Case {
                k_splits: 3,
                seed: rng.next_u64(),
                ..route
            };
            for c in [whole, partial, route, route_split] {
                let r = c.run(gpu, true, &ROUNDED).unwrap();
                assert!(r.max_ratio <= 1.0, "{c:?}: {}", r.worst);
            }
            // Added into Y: a whole tile (its sums start from Y) and a partial one.
            for shape in [(tile.rows(), 64, tile.tokens()), (37, 96, 45)] {
                let r = accumulate(gpu, tile, shape, rng.next_u64()).unwrap();
                assert!(r.max_ratio <= 1.0, "{tile:?} {shape:?}: {}", r.worst);
            }
        }
    }
}
