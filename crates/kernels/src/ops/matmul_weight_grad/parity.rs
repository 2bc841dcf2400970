//! The weight gradient's CPU reference, its finite-difference test and its parity check.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::GpuTensor;

/// CPU reference, in f64: `dW += dy^T x` for `y = x W^T`, i.e. `dw[o, i] += sum_t dy[t, o]
/// x[t, i]` over the n tokens, the gradient of a loss L with respect to the weight (`n_out`
/// rows of `n_in`, GGUF's layout) given `dy = dL/dy`, added to what `dw` holds (gradient
/// accumulation). `dy` is row-major `[n, n_out]`, `x` `[n, n_in]`, `dw` `[n_out, n_in]`.
pub fn weight_grad_ref(dy: &[f64], x: &[f64], n: usize, n_in: usize, n_out: usize, dw: &mut [f64]) {
    if n_in == 0 || n_out == 0 {
        return;
    }
    let tokens = dy.chunks_exact(n_out).zip(x.chunks_exact(n_in)).take(n);
    for (dyr, xr) in tokens {
        for (&g, dwr) in dyr.iter().zip(dw.chunks_exact_mut(n_in)) {
            for (d, &v) in dwr.iter_mut().zip(xr) {
                *d += g * v;
            }
        }
    }
}

/// Tolerance, per element: `(n + 2 s + 2) u (sum_t |dy_to x_ti| + |d0|)` over the n tokens in
/// s splits, d0 what dW held when accumulating (else 0). One product sums the n products in
/// token order onto d0: any order of n + 1 f32 terms errs by at most n u sum|terms|, and
/// rounding the products (where FMA is not fused) by u sum|terms|; split, each split sums its
/// own tokens and the split sum adds the s partials onto d0, s more additions. The inputs are
/// f32 values, exact in the f64 reference.
pub const CHECK: Check = Check {
    name: "matmul_weight_grad",
    tolerance: "(n+2*splits+2)*2^-24*(sum_t|dy_to x_ti| + |d0|)",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    // LoRA's shapes are a rank (A's rows, B's inputs) by a model width: draw both kinds.
    let side = |rng: &mut Rng| match rng.bool() {
        true => rng.range(1, 33),
        false => rng.range(1, 150),
    };
    let case = Case {
        n_tokens: rng.range(1, 200),
        n_in: side(rng),
        n_out: side(rng),
        dy_pad: rng.range(0, 3),
        x_pad: rng.range(0, 3),
        dw_offset: rng.range(0, 3),
        accumulate: rng.bool(),
        splits: [1, 1, 2, 3, 4][rng.range(0, 5)],
        seed: rng.next_u64(),
    };
    case.run(gpu)
}

/// One case: the shape, the layouts of dy and x (padding after each token's row), dW's
/// first element and whether dW accumulates.
#[derive(Debug, Clone, Copy)]
struct Case {
    n_tokens: usize,
    n_in: usize,
    n_out: usize,
    dy_pad: usize,
    x_pad: usize,
    dw_offset: usize,
    accumulate: bool,
    /// The tokens split this many ways ([`MatmulWeightGrad::split_ops`]); 1: one product.
    splits: usize,
    seed: u64,
}

impl Case {
    /// Runs the case and compares every element of dW with the f64 reference; what lies
    /// around dW must stay as it was.
    fn run(&self, gpu: &Gpu) -> Result<Compare, GpuError> {
        let Case {
            n_tokens,
            n_in,
            n_out,
            ..
        } = *self;
        let (dys, xs) = (n_out + self.dy_pad, n_in + self.x_pad);
        // dy read from offset 2, x from offset 1.
        let dy = random_f32(2 + n_tokens * dys, self.seed);
        let x = random_f32(1 + n_tokens * xs, self.seed ^ 1);
        let len = self.dw_offset + n_out * n_in + 2;
        let d0 = random_f32(len, self.seed ^ 2);
        let dyt = GpuTensor::from_f32(gpu, &[dy.len()], &dy);
        let xt = GpuTensor::from_f32(gpu, &[x.len()], &x);
        let dwt = GpuTensor::from_f32(gpu, &[len], &d0);
        let op = MatmulWeightGrad {
            n_tokens,
            n_in,
            n_out,
            strides: Strides {
                x: Some(xs),
                y: Some(dys),
            },
            accumulate: self.accumulate,
        };
        let scratch = GpuTensor::zeros(
            gpu,
            &[1 + self.splits * n_out * n_in],
            crate::tensor::Dtype::F32,
        );
        let ops = op.split_ops(
            View::at(&dyt, 2),
            View::at(&xt, 1),
            View::at(&scratch, 1),
            self.splits,
            View::at(&dwt, self.dw_offset),
        )?;
        let got: Vec<f32> = run_read(gpu, ops, &dwt, 0, len)?;

        let packed = |v: &[f32], at: usize, stride: usize, n: usize| -> Vec<f64> {
            (0..n_tokens)
                .flat_map(|t| v[at + t * stride..][..n].iter().map(|&a| f64::from(a)))
                .collect()
        };
        let (dy64, x64) = (packed(&dy, 2, dys, n_out), packed(&x, 1, xs, n_in));
        let dw_at = |o: usize, i: usize| self.dw_offset + o * n_in + i;
        let mut want: Vec<f64> = (0..n_out * n_in)
            .map(|k| match self.accumulate {
                true => f64::from(d0[self.dw_offset + k]),
                false => 0.0,
            })
            .collect();
        weight_grad_ref(&dy64, &x64, n_tokens, n_in, n_out, &mut want);
        let mut c = Compare::default();
        for o in 0..n_out {
            for i in 0..n_in {
                let old = if self.accumulate {
                    f64::from(d0[dw_at(o, i)])
                } else {
                    0.0
                };
                let abs: f64 = (0..n_tokens)
                    .map(|t| (dy64[t * n_out + o] * x64[t * n_in + i]).abs())
                    .sum();
                // A split sums its tokens (n_z + 1 terms) and the split sum adds the
                // slices onto d0: at most n + 2 splits terms' roundings in all.
                let bound = (n_tokens + 2 * self.splits + 2) as f64 * U * (abs + old.abs());
                c.add(
                    f64::from(got[dw_at(o, i)]),
                    want[o * n_in + i],
                    bound,
                    || format!("{self:?}: row {o} input {i}"),
                );
            }
        }
        let outside = (0..self.dw_offset).chain(self.dw_offset + n_out * n_in..len);
        for at in outside {
            c.exact(f64::from(got[at]), f64::from(d0[at]), || {
                format!("{self:?}: dw[{at}] outside the gradient")
            });
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::matmul_input_grad::matmul_forward_f64;
    use crate::tensor::Dtype;
    use crate::testutil;

    #[test]
    fn matmul_weight_grad_matches_reference() {
        testutil::parity("matmul_weight_grad", 10, 401);
    }

    /// A sequence longer than a tile of tokens (several steps of 32) on LoRA-like shapes:
    /// A's gradient (rank 16 x 96 inputs) and B's (96 x rank 16), accumulating; in one
    /// product and split four ways over the tokens.
    #[test]
    fn matmul_weight_grad_lora_shapes() {
        let Some(gpu) = testutil::gpu() else { return };
        for (n_out, n_in, splits) in [(16, 96, 1), (96, 16, 1), (16, 96, 4), (96, 16, 4)] {
            let case = Case {
                n_tokens: 150,
                n_in,
                n_out,
                dy_pad: 0,
                x_pad: 1,
                dw_offset: 1,
                accumulate: true,
                splits,
                seed: (n_out * n_in) as u64,
            };
            let c = case.run(gpu).unwrap();
            assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
        }
    }

    /// The reference is the gradient of the forward: central differences of `L = sum(r *
    /// (x W^T))` (f64, step 1e-5) with respect to each W[o, i] against `dW = r^T x`, and the
    /// reference adds to what dw held. L is linear in W, so the differences err only by
    /// rounding (about 1e-10 here); the bound 1e-8 (1 + |ref|) catches a transposed or
    /// missing term.
    #[test]
    fn matmul_weight_grad_reference_is_the_forward_gradient() {
        let (n, n_in, n_out) = (3, 5, 4);
        let wide = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<f64>>();
        let w = wide(random_f32(n_out * n_in, 31));
        let x = wide(random_f32(n * n_in, 32));
        let r = wide(random_f32(n * n_out, 33));
        let loss = |w: &[f64]| -> f64 {
            let y = matmul_forward_f64(w, n_in, n_out, &x);
            y.iter().zip(&r).map(|(a, b)| a * b).sum()
        };
        let start = wide(random_f32(n_out * n_in, 34));
        let mut dw = start.clone();
        weight_grad_ref(&r, &x, n, n_in, n_out, &mut dw);
        let h = 1e-5;
        for k in 0..w.len() {
            let (mut wp, mut wm) = (w.clone(), w.clone());
            wp[k] += h;
            wm[k] -= h;
            let fd = (loss(&wp) - loss(&wm)) / (2.0 * h);
            let g = dw[k] - start[k];
            assert!(
                (fd - g).abs() <= 1e-8 * (1.0 + g.abs()),
                "dw {k}: fd {fd} ref {g}"
            );
        }
    }

    /// A LoRA pair's A and B gradients (adjacent in one buffer) from their partials side by
    /// side in one scratch and one split sum over both: the bits two `split_ops` give.
    #[test]
    fn a_pair_of_partials_in_one_split_sum_gives_the_same_bits() {
        let Some(gpu) = testutil::gpu() else { return };
        let (n, r, n_in, n_out, splits) = (150, 4, 40, 24, 4);
        let x = GpuTensor::from_f32(gpu, &[n * n_in], &random_f32(n * n_in, 41));
        let ax = GpuTensor::from_f32(gpu, &[n * r], &random_f32(n * r, 42));
        let d_ax = GpuTensor::from_f32(gpu, &[n * r], &random_f32(n * r, 43));
        let dy = GpuTensor::from_f32(gpu, &[n * n_out], &random_f32(n * n_out, 44));
        let grad = |n_out, n_in| MatmulWeightGrad {
            n_tokens: n,
            n_in,
            n_out,
            strides: Strides::default(),
            accumulate: true,
        };
        let (a, b) = (grad(r, n_in), grad(n_out, r));
        let (len_a, len_b) = (r * n_in, n_out * r);
        let start = random_f32(1 + len_a + len_b, 45);
        let scratch = GpuTensor::zeros(gpu, &[1 + splits * (len_a + len_b)], Dtype::F32);

        let two = GpuTensor::from_f32(gpu, &[start.len()], &start);
        let mut ops = b
            .split_ops(
                (&dy).into(),
                (&ax).into(),
                View::at(&scratch, 1),
                splits,
                View::at(&two, 1 + len_a),
            )
            .unwrap();
        let a_ops = a.split_ops(
            (&d_ax).into(),
            (&x).into(),
            View::at(&scratch, 1),
            splits,
            View::at(&two, 1),
        );
        ops.extend(a_ops.unwrap());
        let want: Vec<f32> = run_read(gpu, ops, &two, 0, start.len()).unwrap();

        let one = GpuTensor::from_f32(gpu, &[start.len()], &start);
        let stride = len_a + len_b;
        let (mut ops, slices) = b
            .partial_ops(
                (&dy).into(),
                (&ax).into(),
                View::at(&scratch, 1 + len_a),
                splits,
                stride,
            )
            .unwrap();
        let (a_ops, a_slices) = a
            .partial_ops(
                (&d_ax).into(),
                (&x).into(),
                View::at(&scratch, 1),
                splits,
                stride,
            )
            .unwrap();
        assert_eq!((slices, a_slices), (splits, splits));
        ops.extend(a_ops);
        let sum = SplitSum {
            n_rows: 1,
            n_cols: stride,
            slices,
            out_stride: stride,
            accumulate: true,
        };
        ops.push(sum.op(View::at(&scratch, 1), View::at(&one, 1)).unwrap());
        let got: Vec<f32> = run_read(gpu, ops, &one, 0, start.len()).unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
        assert_ne!(bits(&got), bits(&start), "the gradients were added");
    }

    /// Bad input is a typed error: dW in x's tensor, x too short, dW too short.
    #[test]
    fn matmul_weight_grad_rejects_bad_input() {
        let Some(gpu) = testutil::gpu() else { return };
        let t = GpuTensor::zeros(gpu, &[64], Dtype::F32);
        let dw = GpuTensor::zeros(gpu, &[12], Dtype::F32);
        let op = MatmulWeightGrad {
            n_tokens: 4,
            n_in: 4,
            n_out: 3,
            strides: Strides::default(),
            accumulate: true,
        };
        let (a, b) = (View::at(&t, 0), View::at(&t, 20));
        assert!(op.ops(a, b, View::at(&t, 40)).is_err());
        assert!(op.ops(a, View::at(&t, 60), (&dw).into()).is_err());
        assert!(op.ops(a, b, View::at(&dw, 1)).is_err());
        assert!(op.ops(a, b, (&dw).into()).is_ok());
    }
}
