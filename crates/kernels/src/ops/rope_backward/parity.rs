//! The rope backward's CPU reference, its finite-difference test and its parity check.

use super::*;
use crate::device::Gpu;
use crate::ops::rope::rope_freqs;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};

impl Rope {
    /// CPU reference, in f64: `dy` turned pair by pair by `-pos * freq`, in place.
    pub fn backward_reference(self, dy: &mut [f64], pos: &[u32], freqs: &[f32]) {
        self.rotate_f64(dy, pos, freqs, -1.0);
    }
}

/// Tolerance: the forward's, `(|d0| + |d1|) (2^-11 + |angle| 2^-23)` with d0, d1 the pair of
/// dy: the same sin and cos (Vulkan: 2^-11 absolute) and the same f32 angle (off by
/// |angle| 2^-24), the sine only negated (exact). Dims past n_rot pass through exactly.
pub const CHECK: Check = Check {
    name: "rope_backward",
    tolerance: "(|d0|+|d1|)*(2^-11+|angle|*2^-23)",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let style = rng.pick(&[RopeStyle::Normal, RopeStyle::Neox]);
    let n_rot = 2 * rng.range(1, 40);
    let rope = Rope {
        style,
        head_dim: n_rot + rng.range(0, 9),
        n_rot,
        n_heads: rng.range(1, 4),
        n_tokens: rng.range(1, 4),
    };
    let pos: Vec<u32> = (0..rope.n_tokens)
        .map(|_| rng.range(0, 5000) as u32)
        .collect();
    compare(gpu, rope, &pos, rng.next_u64())
}

fn compare(gpu: &Gpu, rope: Rope, pos: &[u32], seed: u64) -> Result<Compare, GpuError> {
    let n = rope.n_tokens * rope.n_heads * rope.head_dim;
    let dy = random_f32(n + 1, seed);
    let freqs = rope_freqs(rope.n_rot, 10000.0, 1.0, None);
    let dyt = GpuTensor::from_f32(gpu, &[n + 1], &dy);
    let pt = GpuTensor::from_u32(gpu, &[rope.n_tokens], pos);
    let ft = GpuTensor::from_f32(gpu, &[freqs.len()], &freqs);
    let op = rope.backward_op(View::at(&dyt, 1), (&pt).into(), &ft)?;
    let got: Vec<f32> = run_read(gpu, vec![op], &dyt, 0, n + 1)?;
    let dy_in: Vec<f64> = dy[1..].iter().map(|&v| f64::from(v)).collect();
    let mut want = dy_in.clone();
    rope.backward_reference(&mut want, pos, &freqs);
    let mut c = Compare::default();
    c.exact(f64::from(got[0]), f64::from(dy[0]), || {
        "the element before the view".to_string()
    });
    let (hd, style) = (rope.head_dim, rope.style);
    for r in 0..rope.n_tokens * rope.n_heads {
        let (g, w, d) = (
            &got[1 + r * hd..][..hd],
            &want[r * hd..][..hd],
            &dy_in[r * hd..][..hd],
        );
        let p = f64::from(pos[r / rope.n_heads]);
        for (i, &f) in freqs.iter().enumerate() {
            let (j0, j1) = style.pair(i, rope.n_rot / 2);
            let angle = p * f64::from(f);
            let tol = (d[j0].abs() + d[j1].abs()) * (2f64.powi(-11) + angle * 2f64.powi(-23));
            for j in [j0, j1] {
                c.add(f64::from(g[j]), w[j], tol, || {
                    format!("{style:?} row {r} dim {j}")
                });
            }
        }
        for j in rope.n_rot..hd {
            c.exact(f64::from(g[j]), d[j], || {
                format!("row {r} dim {j} (unrotated)")
            });
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn rope_backward_matches_reference() {
        testutil::parity("rope_backward", 6, 73);
    }

    /// The reference is the gradient of the forward's reference: central differences of
    /// `L = sum dy * rope(x)` (f64, step 1e-5) against the backward of dy, both pairings, two
    /// tokens of two heads with unrotated dims (head_dim 10, n_rot 6). L is linear in x, so the
    /// differences err only by rounding, eps |L| / h, about 1e-10: bound 1e-8 (1 + |ref|).
    #[test]
    fn reference_is_the_forward_gradient() {
        for style in [RopeStyle::Normal, RopeStyle::Neox] {
            let rope = Rope {
                style,
                head_dim: 10,
                n_rot: 6,
                n_heads: 2,
                n_tokens: 2,
            };
            let pos = [3, 17];
            let freqs = rope_freqs(rope.n_rot, 10000.0, 1.0, None);
            let wide = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<f64>>();
            let x = wide(random_f32(40, 11));
            let dy = wide(random_f32(40, 12));
            let loss = |x: &[f64]| -> f64 {
                let mut y = x.to_vec();
                rope.reference_f64(&mut y, &pos, &freqs);
                y.iter().zip(&dy).map(|(a, b)| a * b).sum()
            };
            let mut dx = dy.clone();
            rope.backward_reference(&mut dx, &pos, &freqs);
            let h = 1e-5;
            for i in 0..x.len() {
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[i] += h;
                xm[i] -= h;
                let fd = (loss(&xp) - loss(&xm)) / (2.0 * h);
                assert!(
                    (fd - dx[i]).abs() <= 1e-8 * (1.0 + dx[i].abs()),
                    "{style:?} dx {i}: fd {fd} ref {}",
                    dx[i]
                );
            }
        }
    }

    /// Gemma's and Llama's head shapes, positions up to 32k.
    #[test]
    fn model_shapes() {
        let Some(gpu) = testutil::gpu() else { return };
        for (style, hd, pos) in [(RopeStyle::Neox, 256, 32_000), (RopeStyle::Normal, 64, 9)] {
            let rope = Rope {
                style,
                head_dim: hd,
                n_rot: hd,
                n_heads: 2,
                n_tokens: 1,
            };
            let c = compare(gpu, rope, &[pos], hd as u64).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
