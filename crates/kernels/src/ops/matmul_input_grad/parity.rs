//! The input gradient's CPU reference, its finite-difference test and its parity check.

use super::*;
use crate::device::Gpu;
use crate::ops::matmul_coop::f16_err;
use crate::parity::data::{Rng, n_in_block, random_f32, random_weight};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::{Dtype, GpuTensor, GpuWeight, WeightShape};

/// CPU reference, in f64: `dx = dy W` for `y = x W^T`, i.e. `dx[t, i] = sum_r dy[t, r] W[r,
/// i]`, the gradient of a loss L with respect to the product's input x given `dy = dL/dy`.
/// `w` is the weight dequantized, `n_out` rows of `n_in` (GGUF's layout); `dy` is row-major
/// `[n, n_out]` (its length a multiple of `n_out`); the result is `[n, n_in]`.
pub fn matmul_input_grad_ref(w: &[f64], n_in: usize, n_out: usize, dy: &[f64]) -> Vec<f64> {
    if n_in == 0 || n_out == 0 {
        return Vec::new();
    }
    let n = dy.len() / n_out;
    let mut dx = vec![0.0; n * n_in];
    for (dyr, dxr) in dy.chunks_exact(n_out).zip(dx.chunks_exact_mut(n_in)) {
        for (&g, wr) in dyr.iter().zip(w.chunks_exact(n_in)) {
            for (d, &v) in dxr.iter_mut().zip(wr) {
                *d += g * v;
            }
        }
    }
    dx
}

/// The forward `y = x W^T` in f64 (`x` row-major `[n, n_in]`, `w` `n_out` rows of `n_in`):
/// what the backward references are the gradients of.
#[cfg(test)]
pub(crate) fn matmul_forward_f64(w: &[f64], n_in: usize, n_out: usize, x: &[f64]) -> Vec<f64> {
    x.chunks_exact(n_in)
        .flat_map(|xr| {
            w.chunks_exact(n_in)
                .take(n_out)
                .map(move |wr| wr.iter().zip(xr).map(|(a, b)| a * b).sum::<f64>())
        })
        .collect()
}

/// Tolerance, per element: `(n + 4) u (sum_r |dy_r w_ri| + |d0|)` over the n rows summed, d0
/// what dx held when accumulating (else 0). The GPU sums the n products and d0 in some order
/// (row order within a chunk, then chunk by chunk onto dx), with FMA or not: any order of n + 1
/// f32 terms errs by at most n u sum|terms|, and rounding the products by u sum|terms|;
/// decoding a weight adds a few roundings, as in the forward's bound (matmul's `CHECK`).
/// Reference: f64 over the quant crate's decode of the same bytes.
pub const CHECK: Check = Check {
    name: "matmul_input_grad",
    tolerance: "(n_out+4)*2^-24*(sum_r|dy_r w_ri| + |d0|)",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let format = rng.pick(&GpuFormat::ALL);
    Case::random(format, InputGradTile::Small, rng).run(gpu)
}

/// Tolerance of the tensor-core kernel, per element (module doc): the f16 roundings of each
/// weight and dy value (`e(v)`: one f16 ulp, or `|v| + 2^-24` below twice the smallest
/// normal; a weight's f32 decode adds 8u |w|), `4n u` of the tensor cores' sum of the
/// rounded products and one f32 addition onto dX a dispatch (k of them). Each case on a
/// random tile ([`InputGradTile`]); on a device without cooperative matrices the kernel's
/// body runs over the emulated coop ops (needs SHADER_F16), so the check covers its staging,
/// masks and stores everywhere and the tensor cores' loads and products where they exist.
pub const COOP_CHECK: Check = Check {
    name: "matmul_input_grad_coop",
    tolerance: "f16 inputs (1 ulp each)+(4n+k)*2^-24*(sum|w'dy'|+|d0|)",
    case: coop_parity_case,
};

fn coop_parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    if !gpu.caps.shader_f16 {
        return Err(GpuError::MissingFeature(
            "SHADER_F16 (the tensor-core body's f16 tiles)",
        ));
    }
    let format = rng.pick(&GpuFormat::ALL);
    let tile = rng.pick(&InputGradTile::ALL);
    let case = Case {
        tensor_cores: true,
        ..Case::random(format, tile, rng)
    };
    case.run(gpu)
}

/// One case: the weight (format, shape, chunking, seed), the rows taken, the layouts of dy
/// and dx (padding after each token's row, dx's first element) and whether dx accumulates.
#[derive(Debug, Clone, Copy)]
struct Case {
    format: GpuFormat,
    n_out: usize,
    n_in: usize,
    n_tokens: usize,
    chunk_rows: usize,
    first: usize,
    rows: usize,
    dy_pad: usize,
    dx_pad: usize,
    dx_offset: usize,
    accumulate: bool,
    /// The rows split this many ways a chunk ([`MatmulInputGrad::split_ops`]); 1: one
    /// product a chunk.
    splits: usize,
    seed: u64,
    /// The tensor-core kernel (emulated on a device without cooperative matrices).
    tensor_cores: bool,
    /// Its tile (the f32 kernel's is always [`InputGradTile::Small`]).
    tile: InputGradTile,
}

impl Case {
    /// Random shapes over partial tiles of `tile` and chunks: all rows or a range of them,
    /// strided unaligned dy and dx. Tokens up to a tile and a few more; inputs up to three
    /// blocks of the format, or for a 128-input tile up to 1.5 tiles (three blocks of 32
    /// would never reach its second).
    fn random(format: GpuFormat, tile: InputGradTile, rng: &mut Rng) -> Case {
        let block = n_in_block(format);
        let blocks = match tile {
            InputGradTile::Small => 3,
            _ => (3 * tile.inputs() / 2 / block).max(3),
        };
        let n_out = rng.range(1, 150);
        let (first, rows) = if rng.bool() {
            (0, n_out)
        } else {
            let first = rng.range(0, n_out);
            (first, rng.range(1, n_out - first + 1))
        };
        Case {
            format,
            n_out,
            n_in: rng.range(1, blocks + 1) * block,
            n_tokens: rng.range(1, tile.tokens() + 7),
            chunk_rows: rng.range(1, 200),
            first,
            rows,
            dy_pad: rng.range(0, 3),
            dx_pad: rng.range(0, 3),
            dx_offset: rng.range(0, 3),
            accumulate: rng.bool(),
            splits: [1, 1, 2, 3][rng.range(0, 4)],
            seed: rng.next_u64(),
            tensor_cores: false,
            tile,
        }
    }

    /// Runs the case and compares every element of dx with the f64 reference; what lies
    /// around and between dx's rows must stay as it was.
    fn run(&self, gpu: &Gpu) -> Result<Compare, GpuError> {
        let Case {
            format,
            n_out,
            n_in,
            n_tokens,
            first,
            rows,
            ..
        } = *self;
        let (bytes, w) = random_weight(format, n_out, n_in, self.seed);
        let shape = WeightShape {
            format,
            n_in,
            n_out,
        };
        let wt = GpuWeight::upload_chunked(gpu, shape, &bytes, self.chunk_rows)?;
        let (dys, dxs) = (rows + self.dy_pad, n_in + self.dx_pad);
        // dy read from offset 1.
        let dy = random_f32(1 + n_tokens * dys, self.seed ^ 1);
        let len = self.dx_offset + n_tokens * dxs + 2;
        let d0 = random_f32(len, self.seed ^ 2);
        let dyt = GpuTensor::from_f32(gpu, &[dy.len()], &dy);
        let dxt = GpuTensor::from_f32(gpu, &[len], &d0);
        let op = MatmulInputGrad {
            n_tokens,
            strides: Strides {
                x: Some(dxs),
                y: Some(dys),
            },
            accumulate: self.accumulate,
            tensor_cores: self.tensor_cores,
            tile: self.tile,
        };
        // Dispatches: the chunks the rows touch; split, each adds its splits' slices.
        let k = (first + rows).div_ceil(self.chunk_rows) - first / self.chunk_rows;
        let scratch = GpuTensor::zeros(gpu, &[1 + k * self.splits * n_tokens * n_in], Dtype::F32);
        let ops = op.split_ops_with(
            self.tensor_cores,
            wt.rows(first..first + rows),
            View::at(&dyt, 1),
            View::at(&scratch, 1),
            self.splits,
            View::at(&dxt, self.dx_offset),
        )?;
        let got: Vec<f32> = run_read(gpu, ops, &dxt, 0, len)?;

        let w64: Vec<f64> = w[first * n_in..(first + rows) * n_in]
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        let dy64: Vec<f64> = (0..n_tokens)
            .flat_map(|t| dy[1 + t * dys..][..rows].iter().map(|&v| f64::from(v)))
            .collect();
        let want = matmul_input_grad_ref(&w64, n_in, rows, &dy64);
        // Additions onto dX: one a dispatch, or one a slice when split.
        let k = if self.splits > 1 { k * self.splits } else { k };
        let mut c = Compare::default();
        let mut written = vec![false; len];
        for t in 0..n_tokens {
            for i in 0..n_in {
                let at = self.dx_offset + t * dxs + i;
                written[at] = true;
                let old = if self.accumulate {
                    f64::from(d0[at])
                } else {
                    0.0
                };
                let pairs = (0..rows).map(|r| (w64[r * n_in + i].abs(), dy64[t * rows + r].abs()));
                let bound = match self.tensor_cores {
                    false => {
                        let abs: f64 = pairs.map(|(w, g)| w * g).sum();
                        (rows + 4) as f64 * U * (abs + old.abs())
                    }
                    true => coop_bound(pairs, rows, k, old.abs()),
                };
                c.add(f64::from(got[at]), old + want[t * n_in + i], bound, || {
                    format!("{self:?}: token {t} input {i}")
                });
            }
        }
        for (at, _) in written.iter().enumerate().filter(|(_, w)| !**w) {
            c.exact(f64::from(got[at]), f64::from(d0[at]), || {
                format!("{self:?}: dx[{at}] outside the gradient")
            });
        }
        Ok(c)
    }
}

/// The tensor-core kernel's bound of one element from its (|w|, |dy|) pairs, n rows, k
/// dispatches and |d0| (module doc).
fn coop_bound(pairs: impl Iterator<Item = (f64, f64)>, n: usize, k: usize, d0: f64) -> f64 {
    let (mut terms, mut mags) = (0.0, 0.0);
    for (w, g) in pairs {
        // 2^-21 = 8u: the f32 decode's own 4u, carried through the f16 rounding.
        let e_w = f16_err(w) + 8.0 * U * w;
        let e_g = f16_err(g);
        terms += w * e_g + g * e_w + e_w * e_g;
        mags += (w + e_w) * (g + e_g);
    }
    terms + (4 * n + k) as f64 * U * (mags + d0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Dtype;
    use crate::testutil;

    #[test]
    fn matmul_input_grad_matches_reference() {
        testutil::parity("matmul_input_grad", 8, 301);
    }

    /// On the tensor cores (skips, saying so, on a device without them).
    #[test]
    fn matmul_input_grad_coop_matches_reference() {
        testutil::parity("matmul_input_grad_coop", 8, 331);
    }

    /// Every format on a random shape whose rows span several chunks (of 17 rows), once
    /// overwriting dx, once accumulating into it, and once accumulating with the rows split
    /// three ways.
    #[test]
    fn matmul_input_grad_every_format() {
        let Some(gpu) = testutil::gpu() else { return };
        let mut rng = Rng::new(311);
        for f in GpuFormat::ALL {
            for (accumulate, splits) in [(false, 1), (true, 1), (true, 3)] {
                let case = Case {
                    chunk_rows: 17,
                    accumulate,
                    splits,
                    ..Case::random(f, InputGradTile::Small, &mut rng)
                };
                let c = case.run(gpu).unwrap();
                assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
            }
        }
    }

    /// The tensor-core kernel's body on every format (over emulated coop ops where the
    /// device has no cooperative matrices), rows over several chunks, both store modes (the
    /// accumulating one with the rows split two ways), the tiles in turn.
    #[test]
    fn coop_body_every_format() {
        let test = "matmul_input_grad coop_body_every_format";
        let Some(gpu) = testutil::coop_body_device(test, "matmul/coop_io_emul.wgsl") else {
            return;
        };
        let mut rng = Rng::new(321);
        let mut tiles = InputGradTile::ALL.into_iter().cycle();
        for f in GpuFormat::ALL {
            for (accumulate, splits) in [(false, 1), (true, 2)] {
                let tile = tiles.next().unwrap();
                let case = Case {
                    chunk_rows: 37,
                    accumulate,
                    splits,
                    tensor_cores: true,
                    ..Case::random(f, tile, &mut rng)
                };
                let c = case.run(gpu).unwrap();
                assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
            }
        }
    }

    /// The tensor-core kernel's body over several 64-row steps a dispatch (the random cases
    /// above stay within one: chunks of 37 rows), which its pipelined staging carries from
    /// one step to the next: 130..200 rows in chunks of 150 (a first chunk of three steps,
    /// the last partial), whole and split two ways (two steps a split), on every tile, over
    /// formats of each block size.
    #[test]
    fn coop_body_several_steps() {
        let test = "matmul_input_grad coop_body_several_steps";
        let Some(gpu) = testutil::coop_body_device(test, "matmul/coop_io_emul.wgsl") else {
            return;
        };
        let mut rng = Rng::new(341);
        let formats = [GpuFormat::F16, GpuFormat::Q8_0, GpuFormat::Q4K];
        let cases = InputGradTile::ALL
            .into_iter()
            .flat_map(|t| formats.map(|f| (t, f)));
        for (tile, f) in cases {
            for (accumulate, splits) in [(false, 1), (true, 2)] {
                let n_out = rng.range(130, 200);
                let case = Case {
                    n_out,
                    first: 0,
                    rows: n_out,
                    chunk_rows: 150,
                    accumulate,
                    splits,
                    tensor_cores: true,
                    ..Case::random(f, tile, &mut rng)
                };
                let c = case.run(gpu).unwrap();
                assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
            }
        }
    }

    /// The reference is the gradient of the forward: central differences of `L = sum(r *
    /// (x W^T))` (f64, step 1e-5) with respect to each x[t, i] against `dx = r W`. L is
    /// linear in x, so the differences err only by rounding, about eps |L| / h ~ 1e-10 here;
    /// the bound 1e-8 (1 + |ref|) catches a transposed or missing term (each of order 0.1).
    #[test]
    fn matmul_input_grad_reference_is_the_forward_gradient() {
        let (n, n_in, n_out) = (3, 5, 4);
        let wide = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<f64>>();
        let w = wide(random_f32(n_out * n_in, 21));
        let x = wide(random_f32(n * n_in, 22));
        let r = wide(random_f32(n * n_out, 23));
        let loss = |x: &[f64]| -> f64 {
            let y = matmul_forward_f64(&w, n_in, n_out, x);
            y.iter().zip(&r).map(|(a, b)| a * b).sum()
        };
        let dx = matmul_input_grad_ref(&w, n_in, n_out, &r);
        assert_eq!(dx.len(), n * n_in);
        let h = 1e-5;
        for i in 0..x.len() {
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[i] += h;
            xm[i] -= h;
            let fd = (loss(&xp) - loss(&xm)) / (2.0 * h);
            assert!(
                (fd - dx[i]).abs() <= 1e-8 * (1.0 + dx[i].abs()),
                "dx {i}: fd {fd} ref {}",
                dx[i]
            );
        }
    }

    /// Bad input is a typed error: dx in dy's tensor, dy too short, a row range past the
    /// weight.
    #[test]
    fn matmul_input_grad_rejects_bad_input() {
        let Some(gpu) = testutil::gpu() else { return };
        let (bytes, _) = random_weight(GpuFormat::Q8_0, 4, 32, 1);
        let shape = WeightShape {
            format: GpuFormat::Q8_0,
            n_in: 32,
            n_out: 4,
        };
        let w = GpuWeight::upload(gpu, shape, &bytes).unwrap();
        let t = GpuTensor::zeros(gpu, &[256], Dtype::F32);
        let dx = GpuTensor::zeros(gpu, &[64], Dtype::F32);
        let op = MatmulInputGrad {
            n_tokens: 2,
            strides: Strides::default(),
            accumulate: false,
            tensor_cores: false,
            tile: InputGradTile::Small,
        };
        assert!(
            op.ops(&gpu.caps, w.all_rows(), View::at(&t, 0), View::at(&t, 100))
                .is_err()
        );
        assert!(
            op.ops(&gpu.caps, w.all_rows(), View::at(&t, 250), (&dx).into())
                .is_err()
        );
        assert!(
            op.ops(&gpu.caps, w.rows(2..5), (&t).into(), (&dx).into())
                .is_err()
        );
        assert!(
            op.ops(&gpu.caps, w.all_rows(), (&t).into(), (&dx).into())
                .is_ok()
        );
    }
}
