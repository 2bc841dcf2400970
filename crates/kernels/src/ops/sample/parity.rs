//! The sampling kernels' parity check against [`sample_ref`] (the reference itself is part
//! of the library: the model's sampler is checked against it).

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};
use crate::tensor::Dtype;

/// Tolerance: the GPU id equals the reference's, unless a decision that depends on rounding
/// (the top-p cut, where the draw's target falls) is within the reference's error bound of
/// its threshold; then the GPU id must be one the reference picks with that decision taken
/// either way (see `sample_ref.rs`). Selection, min-p and greedy are exact.
pub const CHECK: Check = Check {
    name: "sample",
    tolerance: "id exact; near a top-p/draw boundary: an id of the other side",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    Ok(compare_case(gpu, rng)?.0)
}

/// Random logits with ties, -0, infinities and NaN now and then.
fn random_logits(n: usize, rng: &mut Rng) -> Vec<f32> {
    let scale = [0.5f32, 4.0, 20.0][rng.range(0, 3)];
    let levels = rng.bool();
    let mut x: Vec<f32> = random_f32(n, rng.next_u64())
        .into_iter()
        .map(|v| if levels { (v * 8.0).round() } else { v * scale })
        .collect();
    let specials = [f32::NAN, f32::NEG_INFINITY, f32::INFINITY, -0.0];
    let n_special = match rng.range(0, 4) {
        0 => rng.range(0, n.min(8) + 1),
        1 => n, // possibly every logit special: all -inf/NaN gives no token
        _ => 0,
    };
    for _ in 0..n_special {
        let i = rng.range(0, n);
        // +inf rarely: it takes all the mass.
        let pick = rng.range(0, 9);
        x[i] = specials[[0, 0, 0, 1, 1, 1, 3, 3, 2][pick]];
    }
    x
}

fn random_sampling(rng: &mut Rng) -> Sampling {
    let unit = |rng: &mut Rng| (rng.unit() + 1.0) / 2.0;
    Sampling {
        top_k: rng.range(1, K_MAX + 1),
        top_p: match rng.range(0, 4) {
            0 => 1.0,
            1 => unit(rng),
            _ => 0.5 + unit(rng) / 2.0,
        },
        min_p: match rng.range(0, 3) {
            0 => 0.0,
            _ => unit(rng) * 0.3,
        },
        min_keep: rng.range(0, 4),
        temperature: match rng.range(0, 6) {
            0 => 0.0,
            1 => 1.0,
            _ => 0.1 + 1.9 * unit(rng),
        },
    }
}

/// One random case; also says whether the GPU id was accepted only through the margin.
pub(crate) fn compare_case(gpu: &Gpu, rng: &mut Rng) -> Result<(Compare, bool), GpuError> {
    // Mostly small rows of any length; one case in 8 a vocabulary-sized row up to ~300k.
    let n = if rng.range(0, 8) == 0 {
        rng.range(100_000, 300_000)
    } else {
        rng.range(1, 5000)
    };
    let x = random_logits(n, rng);
    let s = random_sampling(rng);
    // 24 bits: exactly the numbers the CPU sampler's stream gives (see sample_ref).
    let u = (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
    let op = Sample { n };
    let xt = GpuTensor::from_f32(gpu, &[n], &x);
    let scratch = GpuTensor::zeros(gpu, &[op.scratch_len()], Dtype::U32);
    let out = GpuTensor::from_u32(gpu, &[2], &[7, 7]);
    let ops = op.ops((&xt).into(), &scratch, View::at(&out, 1), &s, u)?;
    let got: Vec<u32> = run_read(gpu, ops, &out, 0, 2)?;
    let want = sample_ref(&x, &s, u);
    let mut c = Compare::default();
    c.exact(f64::from(got[0]), 7.0, || "untouched neighbour".into());
    let id = want.id.unwrap_or(NO_TOKEN);
    let near = got[1] != id && want.near.contains(&got[1]);
    let accepted = if near { got[1] } else { id };
    c.exact(f64::from(got[1]), f64::from(accepted), || {
        format!(
            "n {n} {s:?} u {u}: reference {id}, near-boundary ids {:?}",
            want.near
        )
    });
    Ok((c, near))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn sample_matches_reference() {
        if let Some(gpu) = testutil::gpu()
            && !sorts_in_subgroups(&gpu.caps)
        {
            testutil::note("sample: no subgroups of one size here; sort_subgroup.wgsl not run");
        }
        testutil::parity("sample", 24, 81);
    }

    /// The sort through workgroup memory only, on a device opened without SUBGROUP.
    #[test]
    fn barrier_sort() {
        let Some(gpu) = testutil::device_without(wgpu::Features::SUBGROUP) else {
            return;
        };
        assert!(!sorts_in_subgroups(&gpu.caps));
        let r = CHECK.run(&gpu, 12, 83);
        assert!(r.passed(), "{r}");
    }

    /// The margin is a rare escape, not the rule: most cases match the reference's id
    /// exactly (a rule that accepted anything would fail here).
    #[test]
    fn margin_cases_are_rare() {
        let Some(gpu) = testutil::gpu() else { return };
        let mut near = 0;
        for i in 0..24 {
            let (c, n) = compare_case(gpu, &mut Rng::new(500 + i)).unwrap();
            assert!(c.max_ratio <= 1.0, "case {i}: {}", c.worst);
            near += usize::from(n);
        }
        eprintln!("sample: {near} of 24 cases accepted through the margin");
        assert!(near <= 2, "{near} of 24 cases needed the margin");
    }

    /// `cargo test -p rullama-kernels many_sample_cases -- --ignored --nocapture`: more cases,
    /// with how many needed the margin.
    #[test]
    #[ignore = "300 cases, ~30 s on lavapipe"]
    fn many_sample_cases() {
        let Some(gpu) = testutil::gpu() else { return };
        let (mut near, mut failed) = (0, Vec::new());
        for i in 0..300 {
            let (c, n) = compare_case(gpu, &mut Rng::new(10_000 + i)).unwrap();
            if c.max_ratio > 1.0 {
                failed.push(c.worst);
            }
            near += usize::from(n);
        }
        eprintln!("sample: 300 cases, {near} accepted through the margin");
        assert!(failed.is_empty(), "{failed:?}");
    }

    /// Greedy is the argmax kernel's answer, on a row with many ties.
    #[test]
    fn greedy_is_argmax() {
        let Some(gpu) = testutil::gpu() else { return };
        let n = 3001;
        let x: Vec<f32> = random_f32(n, 5).iter().map(|v| (v * 4.0).round()).collect();
        let op = Sample { n };
        let xt = GpuTensor::from_f32(gpu, &[n], &x);
        let scratch = GpuTensor::zeros(gpu, &[op.scratch_len()], Dtype::U32);
        let out = GpuTensor::zeros(gpu, &[1], Dtype::U32);
        let ops = op
            .ops(
                (&xt).into(),
                &scratch,
                (&out).into(),
                &Sampling::greedy(),
                0.5,
            )
            .unwrap();
        let got: Vec<u32> = run_read(gpu, ops, &out, 0, 1).unwrap();
        assert_eq!(got[0], crate::ops::argmax::argmax_ref(&x));
    }

    #[test]
    fn bad_parameters_are_errors() {
        let mut p = SampleParams::zeroed();
        let s = Sampling::greedy();
        assert!(p.set(&s, 1.0).is_err());
        assert!(p.set(&Sampling { top_k: 0, ..s }, 0.5).is_err());
        assert!(
            p.set(
                &Sampling {
                    top_k: K_MAX + 1,
                    ..s
                },
                0.5
            )
            .is_err()
        );
        assert!(
            p.set(
                &Sampling {
                    temperature: f32::NAN,
                    ..s
                },
                0.5
            )
            .is_err()
        );
        assert!(p.set(&s, 0.5).is_ok());
    }

    #[test]
    fn levels_shrink_to_one_list() {
        for n in [1, 1024, 1025, 8192, 8193, 262_144, 300_001] {
            let op = Sample { n };
            let levels = op.levels(0);
            assert_eq!(levels.last().unwrap().blocks, 1, "n {n}");
            assert_eq!(levels[0].n_in, n);
            if n == 262_144 {
                let blocks: Vec<usize> = levels.iter().map(|l| l.blocks).collect();
                assert_eq!(blocks, [256, 16, 1]);
            }
            let (a, b) = op.regions();
            for l in &levels {
                let region = if l.dst == 0 { a } else { b };
                assert!(l.blocks * K_MAX <= region, "n {n}: level {l:?} overflows");
            }
        }
    }

    use bytemuck::Zeroable;
}
