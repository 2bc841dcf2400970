//! The elementwise kernels' CPU reference and parity checks.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};
use crate::tensor::GpuTensor;

/// CPU reference of [`add_inplace`] and [`add_rows`]: `dst[i] += src[i % src.len()]`.
pub fn add_ref(dst: &mut [f32], src: &[f32]) {
    let p = src.len();
    dst.iter_mut()
        .enumerate()
        .for_each(|(i, d)| *d += src[i % p]);
}

/// Tolerance: exact. One f32 addition is correctly rounded on both sides.
pub const ADD_CHECK: Check = Check {
    name: "add / add_rows",
    tolerance: "exact",
    case: add_case,
};

fn add_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = rng.range(1, 700);
    let rows = if rng.bool() { 1 } else { rng.range(1, 6) };
    let off = rng.range(0, 5);
    let a = random_f32(rows * n + off, rng.next_u64());
    let s = random_f32(n + 1, rng.next_u64());
    let at = GpuTensor::from_f32(gpu, &[a.len()], &a);
    let st = GpuTensor::from_f32(gpu, &[n + 1], &s);
    let op = if rows == 1 {
        add_inplace(View::at(&at, off), View::at(&st, 1), n)?
    } else {
        add_rows(View::at(&at, off), View::at(&st, 1), rows, n)?
    };
    let y: Vec<f32> = run_read(gpu, vec![op], &at, 0, a.len())?;
    let mut want = a.clone();
    add_ref(&mut want[off..], &s[1..]);
    let mut c = Compare::default();
    for (i, (g, w)) in y.iter().zip(&want).enumerate() {
        c.exact(f64::from(*g), f64::from(*w), || {
            format!("{rows}x{n} elem {i}")
        });
    }
    Ok(c)
}

/// Tolerance: exact. One f32 addition is correctly rounded on both sides.
pub const ADD_OUT_CHECK: Check = Check {
    name: "add_out",
    tolerance: "exact",
    case: add_out_case,
};

fn add_out_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = rng.range(1, 3000);
    let (ao, bo, oo) = (rng.range(0, 5), rng.range(0, 5), rng.range(0, 5));
    let a = random_f32(n + ao, rng.next_u64());
    let b = random_f32(n + bo, rng.next_u64());
    let at = GpuTensor::from_f32(gpu, &[a.len()], &a);
    let bt = GpuTensor::from_f32(gpu, &[b.len()], &b);
    let ot = GpuTensor::from_f32(gpu, &[n + oo], &vec![7.0; n + oo]);
    let op = add(View::at(&at, ao), View::at(&bt, bo), View::at(&ot, oo), n)?;
    let y: Vec<f32> = run_read(gpu, vec![op], &ot, 0, n + oo)?;
    let mut c = Compare::default();
    for (i, g) in y.iter().enumerate() {
        let want = match i.checked_sub(oo) {
            Some(e) => a[ao + e] + b[bo + e],
            None => 7.0,
        };
        c.exact(f64::from(*g), f64::from(want), || {
            format!("add {n} elem {i}")
        });
    }
    Ok(c)
}

/// Tolerance: exact (words are moved, not computed).
pub const COPY_CHECK: Check = Check {
    name: "copy",
    tolerance: "exact",
    case: copy_case,
};

fn copy_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = rng.range(1, 3000);
    let (so, d_o) = (rng.range(0, 5), rng.range(0, 5));
    let s = random_f32(n + so, rng.next_u64());
    let st = GpuTensor::from_f32(gpu, &[n + so], &s);
    let dt = GpuTensor::from_f32(gpu, &[n + d_o], &vec![7.0; n + d_o]);
    let y: Vec<f32> = run_read(
        gpu,
        vec![copy(View::at(&st, so), View::at(&dt, d_o), n)?],
        &dt,
        0,
        n + d_o,
    )?;
    let mut c = Compare::default();
    for i in 0..n + d_o {
        let want = if i < d_o { 7.0 } else { s[so + i - d_o] };
        c.exact(f64::from(y[i]), f64::from(want), || {
            format!("copy {n} elem {i}")
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use crate::testutil;

    #[test]
    fn add_matches_reference() {
        testutil::parity("add / add_rows", 6, 21);
    }

    #[test]
    fn add_out_matches_reference() {
        testutil::parity("add_out", 6, 23);
    }

    #[test]
    fn copy_matches_reference() {
        testutil::parity("copy", 3, 22);
    }
}
