//! The rope kernel's CPU reference and parity check.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};

impl RopeStyle {
    /// The dims of rotated pair `i` when `half = n_rot / 2`.
    pub(crate) fn pair(self, i: usize, half: usize) -> (usize, usize) {
        match self {
            RopeStyle::Normal => (2 * i, 2 * i + 1),
            RopeStyle::Neox => (i, i + half),
        }
    }
}

impl Rope {
    /// CPU reference (angles and rotation in f64 from the same f32 frequencies).
    pub fn reference(self, x: &mut [f32], pos: &[u32], freqs: &[f32]) {
        let mut wide: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        self.reference_f64(&mut wide, pos, freqs);
        x.iter_mut().zip(wide).for_each(|(v, w)| *v = w as f32);
    }

    /// The same over f64 values, unrounded: what the backward's finite differences perturb.
    pub fn reference_f64(self, x: &mut [f64], pos: &[u32], freqs: &[f32]) {
        self.rotate_f64(x, pos, freqs, 1.0);
    }

    /// Turns every pair by `sign * pos * freq` (sign -1: the backward, the transpose).
    pub(crate) fn rotate_f64(self, x: &mut [f64], pos: &[u32], freqs: &[f32], sign: f64) {
        let half = self.n_rot / 2;
        for (r, row) in x.chunks_exact_mut(self.head_dim).enumerate() {
            let p = f64::from(pos[r / self.n_heads]);
            for (i, &f) in freqs.iter().enumerate().take(half) {
                let (s, c) = (p * f64::from(f)).sin_cos();
                let s = sign * s;
                let (j0, j1) = self.style.pair(i, half);
                let (x0, x1) = (row[j0], row[j1]);
                row[j0] = x0 * c - x1 * s;
                row[j1] = x0 * s + x1 * c;
            }
        }
    }
}

/// Tolerance: |gpu - ref| <= (|x0| + |x1|) * (2^-11 + |angle| * 2^-23). Vulkan bounds
/// sin/cos only to 2^-11 absolute (within [-pi, pi]; drivers range-reduce), and the f32
/// angle pos * freq is off by up to |angle| * 2^-24, which the rotation carries.
/// Dimensions past n_rot must pass through exactly.
pub const CHECK: Check = Check {
    name: "rope",
    tolerance: "(|x0|+|x1|)*(2^-11+|angle|*2^-23)",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let style = rng.pick(&[RopeStyle::Normal, RopeStyle::Neox]);
    let n_rot = 2 * rng.range(1, 40);
    let n_heads = rng.range(1, 4);
    let n_tokens = rng.range(1, 4);
    let rope = Rope {
        style,
        head_dim: n_rot + rng.range(0, 9),
        n_rot,
        n_heads,
        n_tokens,
    };
    let n = n_tokens * n_heads * rope.head_dim;
    let x = random_f32(n, rng.next_u64());
    let pos: Vec<u32> = (0..n_tokens).map(|_| rng.range(0, 5000) as u32).collect();
    let freqs = rope_freqs(n_rot, 10000.0, 1.0, None);
    let xt = GpuTensor::from_f32(gpu, &[n], &x);
    let pt = GpuTensor::from_u32(gpu, &[n_tokens], &pos);
    let ft = GpuTensor::from_f32(gpu, &[freqs.len()], &freqs);
    let y: Vec<f32> = run_read(
        gpu,
        vec![rope.op((&xt).into(), (&pt).into(), &ft)?],
        &xt,
        0,
        n,
    )?;
    let mut want = x.clone();
    rope.reference(&mut want, &pos, &freqs);
    let mut c = Compare::default();
    for (r, (gr, wr)) in y
        .chunks(rope.head_dim)
        .zip(want.chunks(rope.head_dim))
        .enumerate()
    {
        let xr = &x[r * rope.head_dim..][..rope.head_dim];
        let p = f64::from(pos[r / n_heads]);
        for (i, &f) in freqs.iter().enumerate() {
            let (j0, j1) = style.pair(i, n_rot / 2);
            let angle = p * f64::from(f);
            let tol =
                f64::from(xr[j0].abs() + xr[j1].abs()) * (2f64.powi(-11) + angle * 2f64.powi(-23));
            for j in [j0, j1] {
                c.add(f64::from(gr[j]), f64::from(wr[j]), tol, || {
                    format!("{style:?} row {r} dim {j}")
                });
            }
        }
        for j in n_rot..rope.head_dim {
            c.exact(f64::from(gr[j]), f64::from(xr[j]), || {
                format!("row {r} dim {j} (unrotated)")
            });
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use crate::testutil;

    #[test]
    fn rope_matches_reference() {
        testutil::parity("rope", 6, 71);
    }
}
