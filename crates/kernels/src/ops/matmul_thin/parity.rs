//! The thin products' CPU reference and parity check.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::GpuTensor;

/// CPU reference, in f64: `y[t, j] += sum_k a[t, k] w(j, k)` for packed `a` (`[n, n_in]`) and
/// `y` (`[n, n_out]`), `w(j, k)` = `w[j * n_in + k]` ([`ThinWeight::Rows`]) or `w[k * n_out +
/// j]` ([`ThinWeight::Transposed`]).
pub fn thin_ref(p: &MatmulThin, a: &[f64], w: &[f64], y: &mut [f64]) {
    let (n_in, n_out) = (p.n_in, p.n_out);
    let wt = |j: usize, k: usize| match p.weight {
        ThinWeight::Rows => w[j * n_in + k],
        ThinWeight::Transposed => w[k * n_out + j],
    };
    for t in 0..p.n_tokens {
        for j in 0..n_out {
            y[t * n_out + j] += (0..n_in).map(|k| a[t * n_in + k] * wt(j, k)).sum::<f64>();
        }
    }
}

/// Tolerance, per output: `(n_in + 2) u (sum_k |a_k w_jk| + |y0|)`, y0 what y held when
/// accumulating (else 0): the n_in products summed in any order with what y held, each
/// rounded once (FMA or not); the inputs are f32 values, exact in the f64 reference.
pub const CHECK: Check = Check {
    name: "matmul_thin",
    tolerance: "(n_in+2)*2^-24*(sum_k|a_k w_jk| + |y0|)",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    // A rank (1..=16) on one side, a model-like width (up to a few chunks of 256) on the other.
    let rank = rng.range(1, THIN + 1);
    let wide = match rng.bool() {
        true => rng.range(1, 80),
        false => rng.range(200, 700),
    };
    let (n_out, n_in) = match rng.bool() {
        true => (rank, wide),
        false => (wide, rank),
    };
    let case = Case {
        p: MatmulThin {
            n_tokens: rng.range(1, 150),
            n_in,
            n_out,
            weight: [ThinWeight::Rows, ThinWeight::Transposed][rng.range(0, 2)],
            a_stride: Some(n_in + rng.range(0, 3)),
            y_stride: Some(n_out + rng.range(0, 3)),
            accumulate: rng.bool(),
        },
        seed: rng.next_u64(),
    };
    case.run(gpu)
}

#[derive(Debug, Clone, Copy)]
struct Case {
    p: MatmulThin,
    seed: u64,
}

impl Case {
    /// Runs the case and compares every output; what lies between and around y's rows must
    /// stay as it was.
    fn run(&self, gpu: &Gpu) -> Result<Compare, GpuError> {
        let p = self.p;
        let (n, n_in, n_out) = (p.n_tokens, p.n_in, p.n_out);
        let (astr, ystr) = (p.a_stride.unwrap_or(n_in), p.y_stride.unwrap_or(n_out));
        // a from offset 1, w from 3, y from 2.
        let a = random_f32(1 + n * astr, self.seed);
        let w = random_f32(3 + n_in * n_out, self.seed ^ 1);
        let len = 2 + n * ystr + 1;
        let y0 = random_f32(len, self.seed ^ 2);
        let at = GpuTensor::from_f32(gpu, &[a.len()], &a);
        let wt = GpuTensor::from_f32(gpu, &[w.len()], &w);
        let yt = GpuTensor::from_f32(gpu, &[len], &y0);
        let op = p.op(View::at(&at, 1), View::at(&wt, 3), View::at(&yt, 2))?;
        let got: Vec<f32> = run_read(gpu, vec![op], &yt, 0, len)?;

        let a64: Vec<f64> = (0..n)
            .flat_map(|t| a[1 + t * astr..][..n_in].iter().map(|&v| f64::from(v)))
            .collect();
        let w64: Vec<f64> = w[3..].iter().map(|&v| f64::from(v)).collect();
        let y_at = |t: usize, j: usize| 2 + t * ystr + j;
        let held = |t: usize, j: usize| match p.accumulate {
            true => f64::from(y0[y_at(t, j)]),
            false => 0.0,
        };
        let mut want: Vec<f64> = (0..n * n_out).map(|i| held(i / n_out, i % n_out)).collect();
        thin_ref(&p, &a64, &w64, &mut want);
        let mut abs = vec![0.0; n * n_out];
        let only = MatmulThin {
            accumulate: false,
            ..p
        };
        let a_abs: Vec<f64> = a64.iter().map(|v| v.abs()).collect();
        let w_abs: Vec<f64> = w64.iter().map(|v| v.abs()).collect();
        thin_ref(&only, &a_abs, &w_abs, &mut abs);
        let mut c = Compare::default();
        let mut inside = vec![false; len];
        for t in 0..n {
            for j in 0..n_out {
                let i = t * n_out + j;
                let bound = (n_in + 2) as f64 * U * (abs[i] + held(t, j).abs());
                inside[y_at(t, j)] = true;
                c.add(f64::from(got[y_at(t, j)]), want[i], bound, || {
                    format!("{self:?}: token {t} output {j}")
                });
            }
        }
        for k in (0..len).filter(|&k| !inside[k]) {
            c.exact(f64::from(got[k]), f64::from(y0[k]), || {
                format!("{self:?}: y[{k}] outside the product")
            });
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_thin_matches_reference() {
        crate::testutil::parity("matmul_thin", 12, 77);
    }

    /// LoRA's four products at a width over one chunk of 256 and a sequence over several
    /// blocks of 64: forward `x A^T` (rank outputs) and `h B^T` (rank summed), backward
    /// `dy B` and `dh A` (transposed weights), accumulating.
    #[test]
    fn lora_shapes() {
        let Some(gpu) = crate::testutil::gpu() else {
            return;
        };
        let shapes = [
            (16, 600, ThinWeight::Rows),
            (600, 16, ThinWeight::Rows),
            (16, 600, ThinWeight::Transposed),
            (600, 16, ThinWeight::Transposed),
        ];
        for (n_out, n_in, weight) in shapes {
            let case = Case {
                p: MatmulThin {
                    n_tokens: 140,
                    n_in,
                    n_out,
                    weight,
                    a_stride: None,
                    y_stride: None,
                    accumulate: true,
                },
                seed: (n_out + n_in) as u64,
            };
            let c = case.run(gpu).unwrap();
            assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
        }
    }

    /// Bad input is a typed error: neither side thin, y in a's tensor, w too short.
    #[test]
    fn rejects_bad_input() {
        let Some(gpu) = crate::testutil::gpu() else {
            return;
        };
        let t = GpuTensor::zeros(gpu, &[4096], crate::tensor::Dtype::F32);
        let y = GpuTensor::zeros(gpu, &[4096], crate::tensor::Dtype::F32);
        let op = |n_out, n_in| MatmulThin {
            n_tokens: 4,
            n_in,
            n_out,
            weight: ThinWeight::Rows,
            a_stride: None,
            y_stride: None,
            accumulate: false,
        };
        let (a, w) = (View::at(&t, 0), View::at(&t, 100));
        assert!(op(17, 17).op(a, w, (&y).into()).is_err());
        assert!(op(4, 20).op(a, w, View::at(&t, 200)).is_err());
        assert!(op(4, 20).op(a, View::at(&t, 4050), (&y).into()).is_err());
        assert!(op(4, 20).op(a, w, (&y).into()).is_ok());
    }
}
