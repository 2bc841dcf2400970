//! The dropout kernel's parity check: the CPU twin of its hash gives the same mask, so the
//! result is exact.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};
use crate::tensor::GpuTensor;

/// Tolerance: exact (one f32 product by the same factor on both sides).
pub const CHECK: Check = Check {
    name: "dropout",
    tolerance: "exact",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = rng.range(1, 3000);
    let off = rng.range(0, 4);
    let p = [0.0f32, 0.05, 0.1, 0.5, 0.9][rng.range(0, 5)];
    let seed = rng.next_u64();
    let x = random_f32(n + off, rng.next_u64());
    let t = GpuTensor::from_f32(gpu, &[x.len()], &x);
    // Half the cases out of place, into another tensor with the same offset and its other
    // elements as x's (so one comparison serves both).
    let got: Vec<f32> = match rng.bool() {
        false => run_read(
            gpu,
            vec![dropout(View::at(&t, off), n, p, seed)?],
            &t,
            0,
            x.len(),
        )?,
        true => {
            let y = GpuTensor::from_f32(gpu, &[x.len()], &x);
            let op = dropout_out(View::at(&t, off), View::at(&y, off), n, p, seed)?;
            run_read(gpu, vec![op], &y, 0, x.len())?
        }
    };
    let scale = 1.0 / (1.0 - p);
    let mut c = Compare::default();
    for (i, (g, &v)) in got.iter().zip(&x).enumerate() {
        let want = match i.checked_sub(off) {
            Some(e) => v * keep_factor(seed, e as u32, p, scale),
            None => v,
        };
        c.exact(f64::from(*g), f64::from(want), || format!("p {p} elem {i}"));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn dropout_matches_reference() {
        testutil::parity("dropout", 12, 601);
    }

    /// The mask drops about p of the elements, and another seed draws another mask.
    #[test]
    fn the_mask_drops_about_p_and_depends_on_the_seed() {
        let n = 100_000u32;
        let dropped = |seed: u64| {
            (0..n)
                .filter(|&i| keep_factor(seed, i, 0.1, 1.0 / 0.9) == 0.0)
                .collect::<Vec<_>>()
        };
        let a = dropped(7);
        let frac = a.len() as f64 / f64::from(n);
        assert!((frac - 0.1).abs() < 0.005, "dropped {frac}");
        assert_ne!(a, dropped(8));
    }
}
