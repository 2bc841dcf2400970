//! The f32 prompt matmul's parity checks, and the cases the tensor-core matmul's, split
//! products' and split K's checks draw too.

use super::*;
use crate::device::Gpu;
use crate::ops::epilogue::bias_bound;
use crate::ops::matmul_dense::{DenseRoute, DenseScratch};
use crate::ops::matvec::matvec_bias_ref;
use crate::ops::split_k::SplitK;
use crate::parity::data::{Rng, n_in_block, random_f32, random_weight};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::{Dtype, GpuTensor};

/// Tolerance: as matvec, per output: (n_in + 4) * 2^-24 * sum_i |w_i x_i| (the GPU sums the
/// n_in products of each output in unit order with FMA or not; any order of n f32 additions
/// errs by at most n * u * sum |terms|; decoding adds a few roundings). Reference: f64.
pub const CHECK: Check = Check {
    name: "matmul",
    tolerance: "(n_in+4)*2^-24*sum|w_i x_i|",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    Case::random(rng).run(gpu, false, &Inputs::AS_DRAWN)
}

/// Tolerance of the bias epilogue: as matvec's, the bias one more term of each output's sum,
/// `(n_in + 5) u (sum_i |w_i x_i| + |b|)` ([`bias_bound`]); weights split into chunks.
pub const BIAS_CHECK: Check = Check {
    name: "matmul_bias",
    tolerance: "(n_in+5)*2^-24*(sum|w_i x_i| + |b|)",
    case: bias_parity_case,
};

fn bias_parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let case = Case {
        bias: true,
        ..Case::random(rng)
    };
    case.run(gpu, false, &Inputs::AS_DRAWN)
}

/// The f32 kernel's bound for one output from its weight row, input row and bias.
fn f32_bound(w: &[f32], x: &[f32], b: Option<f32>) -> f64 {
    let abs = abs_dot(w, x);
    match b {
        Some(b) => bias_bound(w.len(), abs, f64::from(b)),
        None => (w.len() + 4) as f64 * U * abs,
    }
}

/// `sum_i |w_i x_i|` in f64.
pub(crate) fn abs_dot(w: &[f32], x: &[f32]) -> f64 {
    w.iter()
        .zip(x)
        .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
        .sum()
}

/// How a case's inputs are drawn and what each output may err by.
pub(crate) struct Inputs {
    /// Applied to every drawn input (identity, or rounding to f16 for exact-input tests).
    pub x_map: fn(f32) -> f32,
    /// The bound of one output, from its weight row, input row and bias (reference values).
    pub bound: fn(&[f32], &[f32], Option<f32>) -> f64,
}

impl Inputs {
    pub(crate) const AS_DRAWN: Inputs = Inputs {
        x_map: |v| v,
        bound: f32_bound,
    };
}

/// One matmul case: the weight (format, shape, chunking, seed of its bytes), the layout of X
/// and Y (padding after each row; Y's first element) and whether a bias is added.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Case {
    pub format: GpuFormat,
    pub n_out: usize,
    pub n_in: usize,
    pub n_tokens: usize,
    pub chunk_rows: usize,
    pub x_pad: usize,
    pub y_pad: usize,
    pub y_offset: usize,
    pub bias: bool,
    pub seed: u64,
    /// The tensor-core kernel's tile, or `None`: picked by shape as for a model.
    pub tile: Option<Tile>,
    /// Split K ([`Matmul::split_k_ops`], the tensor-core kernel with `tile` or the small
    /// one; a dense tile over a weight other than F16 through the dense route's split,
    /// [`Matmul::dense_route_ops`]): 1 for none.
    pub k_splits: usize,
}

impl Case {
    /// Random shapes over partial tiles and chunks, strided unaligned X and Y.
    pub(crate) fn random(rng: &mut Rng) -> Case {
        let format = rng.pick(&GpuFormat::ALL);
        let n_out = rng.range(1, 150);
        let n_blocks = rng.range(1, 4);
        let n_tokens = rng.range(1, 70);
        let chunk_rows = rng.range(1, 200);
        Case {
            format,
            n_out,
            n_in: n_blocks * n_in_block(format),
            n_tokens,
            chunk_rows,
            x_pad: 3,
            y_pad: 2,
            y_offset: 1,
            bias: false,
            seed: rng.next_u64(),
            tile: None,
            k_splits: 1,
        }
    }

    /// 131 rows (2 chunks of 100 and 31) x 2 blocks of the format x 37 tokens, strided X and Y.
    #[cfg(test)]
    pub(crate) fn odd_shape(format: GpuFormat, seed: u64) -> Case {
        Case {
            format,
            n_out: 131,
            n_in: 2 * n_in_block(format),
            n_tokens: 37,
            chunk_rows: 100,
            x_pad: 3,
            y_pad: 2,
            y_offset: 1,
            bias: false,
            seed,
            tile: None,
            k_splits: 1,
        }
    }

    /// Runs the case on the f32 kernel, or with `coop` on the tensor-core kernel (emulated
    /// where the device has no cooperative matrices; its tile `self.tile`), and compares every output with the f64
    /// reference; Y's padding and what precedes it must stay untouched.
    pub(crate) fn run(&self, gpu: &Gpu, coop: bool, inputs: &Inputs) -> Result<Compare, GpuError> {
        let Case {
            format,
            n_out,
            n_in,
            n_tokens,
            ..
        } = *self;
        let (bytes, w) = random_weight(format, n_out, n_in, self.seed);
        let (xs, ys) = (n_in + self.x_pad, n_out + self.y_pad);
        let x: Vec<f32> = random_f32(n_tokens * xs, self.seed ^ 1)
            .into_iter()
            .map(inputs.x_map)
            .collect();
        let shape = WeightShape {
            format,
            n_in,
            n_out,
        };
        let wt = GpuWeight::upload_chunked(gpu, shape, &bytes, self.chunk_rows)?;
        let xt = GpuTensor::from_f32(gpu, &[x.len()], &x);
        let y_len = self.y_offset + n_tokens * ys;
        let yt = GpuTensor::zeros(gpu, &[y_len], Dtype::F32);
        // The bias read from offset 1.
        let b = self.bias.then(|| random_f32(n_out + 1, self.seed ^ 2));
        let bt = b.as_ref().map(|b| GpuTensor::from_f32(gpu, &[b.len()], b));
        let m = Matmul {
            n_tokens,
            strides: Strides {
                x: Some(xs),
                y: Some(ys),
            },
            tensor_cores: coop,
        };
        let (xv, yv) = (View::at(&xt, 0), View::at(&yt, self.y_offset));
        let bv = bt.as_ref().map(|t| View::at(t, 1));
        let path = match coop {
            true => Path::Coop(self.tile),
            false => Path::F32,
        };
        let k = SplitK {
            splits: self.k_splits,
            tile: self.tile.unwrap_or(Tile::Small),
        };
        let scratch = GpuTensor::zeros(gpu, &[m.split_k_scratch(wt.all_rows(), k)], Dtype::F32);
        let out = Out {
            y: yv,
            rows: n_out,
            stride: ys,
        };
        let sv = View::at(&scratch, 0);
        // A dense tile over a weight that is not F16 is the dense route: its f16 copy, then
        // dense (split as `k_splits` says).
        let copied = match self.tile {
            Some(Tile::Dense(_)) if format != GpuFormat::F16 => m.dense_copy_len(wt.all_rows()),
            _ => 0,
        };
        let wide = GpuTensor::zeros(gpu, &[copied.max(1)], Dtype::F32);
        let ops = match (self.k_splits, self.tile) {
            (splits, Some(Tile::Dense(tile))) if copied > 0 => {
                let scratch = DenseScratch {
                    copy: View::at(&wide, 0),
                    partials: (splits > 1).then_some(sv),
                };
                let route = DenseRoute { tile, splits };
                m.dense_route_ops(route, wt.all_rows(), xv, bv, &[out], scratch)?
            }
            (1, _) => m.ops_with(path, &wt, xv, bv, yv)?,
            _ => m.split_k_ops(wt.all_rows(), xv, bv, &[out], sv, k)?,
        };
        let y: Vec<f32> = run_read(gpu, ops, &yt, 0, y_len)?;
        let mut c = Compare::default();
        for (i, &v) in y[..self.y_offset].iter().enumerate() {
            c.exact(f64::from(v), 0.0, || format!("y[{i}] before the output"));
        }
        let y = &y[self.y_offset..];
        let b = b.as_ref().map(|b| &b[1..]);
        let at = |t, r| format!("{self:?}: token {t} row {r}");
        for t in 0..n_tokens {
            let xr = &x[t * xs..][..n_in];
            let (want, _) = matvec_bias_ref(&w, xr, b);
            for (r, wr) in w.chunks_exact(n_in).enumerate() {
                let bound = (inputs.bound)(wr, xr, b.map(|b| b[r]));
                c.add(f64::from(y[t * ys + r]), f64::from(want[r]), bound, || {
                    at(t, r)
                });
            }
            if t + 1 < n_tokens {
                for (i, &v) in y[t * ys + n_out..][..self.y_pad].iter().enumerate() {
                    c.exact(f64::from(v), 0.0, || format!("pad {i} after token {t}"));
                }
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn matmul_matches_reference() {
        testutil::parity("matmul", 8, 101);
    }

    #[test]
    fn matmul_bias_matches_reference() {
        testutil::parity("matmul_bias", 8, 121);
    }

    /// Every format on an odd shape spanning several row and token tiles and 2 chunks,
    /// without and with a bias.
    #[test]
    fn every_format_odd_shape() {
        let Some(gpu) = testutil::gpu() else { return };
        for (i, f) in GpuFormat::ALL.into_iter().enumerate() {
            for bias in [false, true] {
                let case = Case {
                    bias,
                    ..Case::odd_shape(f, 200 + i as u64)
                };
                let c = case.run(gpu, false, &Inputs::AS_DRAWN).unwrap();
                assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
            }
        }
    }
}
