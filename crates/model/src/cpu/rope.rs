//! Rotary position embedding, angles in f64.

use super::tensor::CpuTensor;
use crate::backend::RopeParams;
use crate::config::RopeStyle;

pub(crate) fn rope(x: &CpuTensor, positions: &[u32], p: &RopeParams) -> CpuTensor {
    assert_eq!(positions.len(), x.rows, "rope: one position per row");
    assert!(x.cols.is_multiple_of(p.head_dim) && p.n_rot <= p.head_dim);
    let half = p.n_rot / 2;
    let mut out = x.clone();
    for (t, &pos) in positions.iter().enumerate() {
        let angles: Vec<(f64, f64)> = (0..half)
            .map(|i| {
                let inv_freq = (p.base as f64).powf(-2.0 * i as f64 / p.n_rot as f64);
                (pos as f64 * p.freq_scale as f64 * inv_freq).sin_cos()
            })
            .collect();
        for head in out.row_mut(t).chunks_mut(p.head_dim) {
            for (i, &(sin, cos)) in angles.iter().enumerate() {
                let (a, b) = match p.style {
                    RopeStyle::Normal => (2 * i, 2 * i + 1),
                    RopeStyle::Neox => (i, i + half),
                };
                let (x0, x1) = (head[a] as f64, head[b] as f64);
                head[a] = (x0 * cos - x1 * sin) as f32;
                head[b] = (x0 * sin + x1 * cos) as f32;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(style: RopeStyle, n_rot: usize) -> RopeParams {
        RopeParams {
            head_dim: 4,
            n_rot,
            base: 100.0,
            freq_scale: 1.0,
            style,
        }
    }

    /// Head dim 4, base 100: pair 0 turns by `pos`, pair 1 by `pos / 10`.
    #[test]
    fn pairs_by_hand() {
        let x = CpuTensor::new(1, 4, vec![1.0, 2.0, 3.0, 4.0]);
        let pos = [2u32];
        let (s0, c0) = 2f64.sin_cos();
        let (s1, c1) = 0.2f64.sin_cos();
        let near = |y: &CpuTensor, want: [f64; 4]| {
            for (a, b) in y.data.iter().zip(want) {
                assert!((*a as f64 - b).abs() < 1e-6, "{:?} vs {want:?}", y.data);
            }
        };
        // Normal: (x0, x1) by angle 0, (x2, x3) by angle 1.
        let y = rope(&x, &pos, &params(RopeStyle::Normal, 4));
        near(
            &y,
            [
                1.0 * c0 - 2.0 * s0,
                1.0 * s0 + 2.0 * c0,
                3.0 * c1 - 4.0 * s1,
                3.0 * s1 + 4.0 * c1,
            ],
        );
        // NeoX: (x0, x2) by angle 0, (x1, x3) by angle 1.
        let y = rope(&x, &pos, &params(RopeStyle::Neox, 4));
        near(
            &y,
            [
                1.0 * c0 - 3.0 * s0,
                2.0 * c1 - 4.0 * s1,
                1.0 * s0 + 3.0 * c0,
                2.0 * s1 + 4.0 * c1,
            ],
        );
        // Partial rotation (n_rot 2): only (x0, x1), by angle pos * 100^0 = 2.
        let y = rope(&x, &pos, &params(RopeStyle::Neox, 2));
        near(&y, [1.0 * c0 - 2.0 * s0, 1.0 * s0 + 2.0 * c0, 3.0, 4.0]);
        // Position 0 is the identity.
        assert_eq!(rope(&x, &[0], &params(RopeStyle::Neox, 4)), x);
    }
}
