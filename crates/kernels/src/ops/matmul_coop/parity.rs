//! The tensor-core matmul's parity checks and the bounds of the module doc.

use half::f16;

use super::*;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::ops::matmul::{Case, Inputs, Tile, abs_dot};
use crate::parity::data::{Rng, n_in_block};
use crate::parity::{Check, Compare, U};

/// Inputs as drawn (rounded to f16 by the kernel), against the bound in the module doc.
pub const CHECK: Check = Check {
    name: "matmul_coop",
    tolerance: "f16 inputs (1 ulp each)+(4n_in+1)*2^-24*sum|w'x'|",
    case: parity_case,
};

/// F16 weights and f16-valued inputs: only the f32 summation may err.
pub const EXACT_CHECK: Check = Check {
    name: "matmul_coop_exact",
    tolerance: "(4n_in+1)*2^-24*sum|w_i x_i| (+subnormal terms)",
    case: exact_case,
};

/// Relative spacing of normal f16 values: a rounding errs by less than this times |v|.
const F16_ULP: f64 = 1.0 / 1024.0;

/// The smallest normal f16, 2^-14: below it a value may be flushed to zero.
const F16_MIN_NORMAL: f64 = 1.0 / 16384.0;

/// How far `v` (>= 0) may move when rounded to f16 (module doc): less than one ulp of a
/// normal; below twice the smallest normal (so that a decode's few roundings cannot cross the
/// line) anything from flushing to zero to either subnormal neighbour, spaced 2^-24.
pub(crate) fn f16_err(v: f64) -> f64 {
    if v < 2.0 * F16_MIN_NORMAL {
        v + U
    } else {
        F16_ULP * v
    }
}

/// The bias epilogue's share of a bound: the bias is added to the finished f32 sum (one more
/// rounding) and the reference rounds its f64 result to f32: `2u (sum of magnitudes + |b|)`.
fn bias_share(mags: f64, b: Option<f32>) -> f64 {
    b.map_or(0.0, |b| 2.0 * U * (mags + f64::from(b).abs()))
}

/// The bound of one output with inputs rounded to f16 (module doc).
fn rounded_bound(w: &[f32], x: &[f32], b: Option<f32>) -> f64 {
    let (mut terms, mut mags) = (0.0, 0.0);
    for (&w, &x) in w.iter().zip(x) {
        let (w, x) = (f64::from(w).abs(), f64::from(x).abs());
        // 2^-21 = 8u: the f32 decode's own 4u, carried through the f16 rounding.
        let e_w = f16_err(w) + 8.0 * U * w;
        let e_x = f16_err(x);
        terms += w * e_x + x * e_w + e_w * e_x;
        mags += (w + e_w) * (x + e_x);
    }
    terms + (4 * w.len() + 1) as f64 * U * mags + bias_share(mags, b)
}

/// The bound of one output when every input is an f16 value (module doc): the summation's,
/// plus every product with a subnormal factor, which the device may flush to zero.
fn exact_bound(w: &[f32], x: &[f32], b: Option<f32>) -> f64 {
    let flushable: f64 = w
        .iter()
        .zip(x)
        .map(|(&w, &x)| (f64::from(w), f64::from(x)))
        .filter(|(w, x)| w.abs() < F16_MIN_NORMAL || x.abs() < F16_MIN_NORMAL)
        .map(|(w, x)| (w * x).abs())
        .sum();
    let abs = abs_dot(w, x);
    (4 * w.len() + 1) as f64 * U * abs + flushable + bias_share(abs, b)
}

pub(crate) const ROUNDED: Inputs = Inputs {
    x_map: |v| v,
    bound: rounded_bound,
};

pub(crate) const EXACT: Inputs = Inputs {
    x_map: |v| f16::from_f32(v).to_f32(),
    bound: exact_bound,
};

/// The device's cooperative matrices, or the error that makes a check skip.
pub(crate) fn coop_device(gpu: &Gpu) -> Result<(), GpuError> {
    if gpu.caps.coop_f16 {
        Ok(())
    } else {
        Err(GpuError::MissingFeature(
            "cooperative matrices (16x16x16 f16 -> f32, subgroup 32)",
        ))
    }
}

/// Shapes that fill whole 64 x 64 tiles with a 16-byte aligned Y (the kernel's direct store),
/// sometimes with a partial last token tile (both stores in one dispatch).
fn aligned(rng: &mut Rng, format: GpuFormat) -> Case {
    let n_tokens = 64 * rng.range(1, 3);
    Case {
        format,
        n_out: 64 * rng.range(1, 4),
        n_in: rng.range(1, 4) * n_in_block(format),
        n_tokens: if rng.bool() {
            n_tokens
        } else {
            n_tokens + rng.range(1, 20)
        },
        chunk_rows: 64 * rng.range(1, 4),
        x_pad: rng.range(0, 5),
        y_pad: 4 * rng.range(0, 2),
        y_offset: 4 * rng.range(0, 2),
        bias: rng.bool(),
        seed: rng.next_u64(),
        tile: None,
        k_splits: 1,
    }
}

/// Half the cases random (partial tiles, unaligned Y: the scratch store), half aligned (the
/// direct store, unless a bias sends them through the scratch too); a bias in half of each.
fn case(rng: &mut Rng, format: Option<GpuFormat>) -> Case {
    let mut c = shape(rng, format);
    // Both tiles: test shapes are too small for the shape rule to pick the wide one.
    c.tile = Some(rng.pick(&[Tile::Small, Tile::Wide]));
    c
}

fn shape(rng: &mut Rng, format: Option<GpuFormat>) -> Case {
    if rng.bool() {
        let mut c = Case::random(rng);
        c.bias = rng.bool();
        if let Some(f) = format {
            let n_blocks = c.n_in / n_in_block(c.format);
            c.format = f;
            c.n_in = n_blocks * n_in_block(f);
        }
        c
    } else {
        let f = format.unwrap_or_else(|| rng.pick(&GpuFormat::ALL));
        aligned(rng, f)
    }
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_device(gpu)?;
    case(rng, None).run(gpu, true, &ROUNDED)
}

fn exact_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_device(gpu)?;
    case(rng, Some(GpuFormat::F16)).run(gpu, true, &EXACT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kernel;
    use crate::ops::matmul::{Matmul, MatmulKernel, Strides};
    use crate::testutil;

    #[test]
    fn matmul_coop_matches_reference() {
        testutil::parity("matmul_coop", 8, 301);
    }

    #[test]
    fn matmul_coop_exact_inputs() {
        testutil::parity("matmul_coop_exact", 8, 401);
    }

    fn body_device(test: &str) -> Option<&'static Gpu> {
        testutil::coop_body_device(test, "common/coop_emul.wgsl, matmul/coop_io_emul.wgsl")
    }

    /// Random and aligned shapes, rounded inputs and exact ones, through the kernel's body.
    #[test]
    fn body_matches_reference() {
        let Some(gpu) = body_device("body_matches_reference") else {
            return;
        };
        for seed in 0..6 {
            let mut rng = Rng::new(600 + seed);
            let (c, exact) = (case(&mut rng, None), case(&mut rng, Some(GpuFormat::F16)));
            for (case, inputs) in [(c, &ROUNDED), (exact, &EXACT)] {
                let r = case.run(gpu, true, inputs).unwrap();
                assert!(r.max_ratio <= 1.0, "{case:?}: {}", r.worst);
            }
        }
    }

    /// Every format, on the odd shape (partial tiles, scratch store) and an aligned one
    /// (direct store).
    #[test]
    fn body_every_format() {
        let Some(gpu) = body_device("body_every_format") else {
            return;
        };
        let mut rng = Rng::new(7);
        for (i, f) in GpuFormat::ALL.into_iter().enumerate() {
            let odd = Case::odd_shape(f, 500 + i as u64);
            let biased = Case { bias: true, ..odd };
            for case in [odd, biased, aligned(&mut rng, f)] {
                let c = case.run(gpu, true, &ROUNDED).unwrap();
                assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
            }
        }
    }

    /// The tensor cores run only where the device has them and the caller allows them.
    #[test]
    fn kernel_choice() {
        let caps = testutil::nvidia_caps;
        let m = |tensor_cores| Matmul {
            n_tokens: 512,
            strides: Strides::default(),
            tensor_cores,
        };
        let (f, out) = (GpuFormat::Q4K, Epilogue::STORE);
        let coop = Kernel::from(MatmulCoopKernel(f, out));
        let f32 = Kernel::from(MatmulKernel(f, out));
        assert_eq!(m(true).kernel(&caps(true), f, out), coop);
        assert_eq!(m(false).kernel(&caps(true), f, out), f32);
        assert_eq!(m(true).kernel(&caps(false), f, out), f32);
        // A device without cooperative matrices builds only the emulation (tests ask for it).
        let emulated = coop.program_for(&caps(false)).name;
        assert_eq!(emulated, "matmul_coop_emulated_Q4_K");
        assert_eq!(coop.program_for(&caps(true)).name, "matmul_coop_Q4_K");
    }

    /// `OpenOptions::without` turns the tensor cores off (meaningful on a device that has
    /// them; lavapipe never does).
    #[test]
    fn turned_off_at_open() {
        let without = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        let Some(gpu) = testutil::device_without(without) else {
            return;
        };
        assert!(!gpu.caps.coop_f16);
        assert!(!gpu.device.features().contains(without));
    }
}
