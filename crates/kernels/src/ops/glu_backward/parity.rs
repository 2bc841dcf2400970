//! The glu backward's CPU reference, its finite-difference test and its parity check.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};
use crate::tensor::{Dtype, GpuTensor};

impl Activation {
    /// The derivative of [`Activation::apply`], in f64: the analytic derivative of the formula
    /// the forward evaluates (GELU's tanh form, not the erf GELU).
    pub fn derivative(self, x: f64) -> f64 {
        match self {
            Activation::GeluTanh => {
                let c = (2.0 / std::f64::consts::PI).sqrt();
                let a = 0.044715;
                let t = (c * (x + a * x * x * x)).tanh();
                0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * a * x * x)
            }
            Activation::Silu => {
                let s = 1.0 / (1.0 + (-x).exp());
                s * (1.0 + x * (1.0 - s))
            }
        }
    }
}

/// CPU reference, in f64: `(dgate, dup)` with `dgate = dy * up * act'(gate)` and
/// `dup = dy * act(gate)`.
pub fn glu_backward_ref(
    act: Activation,
    gate: &[f64],
    up: &[f64],
    dy: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let dgate = (0..gate.len())
        .map(|i| dy[i] * up[i] * act.derivative(gate[i]))
        .collect();
    let dup = (0..gate.len())
        .map(|i| dy[i] * act.apply(gate[i]))
        .collect();
    (dgate, dup)
}

/// Tolerance: dup `2^-16 (|g| + 1) |dy|` (the forward glu's bound on `act(g)`, times |dy|,
/// whose product adds one rounding); dgate `2^-16 (1 + |g| + |g|^3/4) |dy up|`. The
/// derivative's error: GELU's `act'` is `0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2)`, so an
/// error e in t (the forward's bound allows |e| up to 2^-16 for its `0.5 x (1 + t)`) moves it
/// by at most `e (0.5 + |x| c (1 + 3 a |x|^2))` <= `e (0.5 + 0.8 |x| + 0.11 |x|^3)`; SiLU's
/// `s (1 + x (1 - s))` errs by at most `(1 + 2|x|)` times the sigmoid's error, itself exp's
/// `(3 + 2|x|)` ulp plus the add and division's rounding, below that bound for |x| <= 8 (the
/// gates drawn). The products `dy * up * act'` add two roundings (2u relative).
pub const CHECK: Check = Check {
    name: "glu_backward",
    tolerance: "dgate 2^-16*(1+|g|+|g|^3/4)*|dy*up|, dup 2^-16*(|g|+1)*|dy|",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let act = rng.pick(&[Activation::Silu, Activation::GeluTanh]);
    compare(gpu, act, rng.range(1, 3000), rng.next_u64())
}

fn compare(gpu: &Gpu, act: Activation, n: usize, seed: u64) -> Result<Compare, GpuError> {
    // Gate|up fused in one tensor and dgate|dup in another, as the fused product's output
    // and its gradient are; gates span [-8, 8] as the forward's check.
    let mut gu = random_f32(2 * n, seed);
    gu[..n].iter_mut().for_each(|g| *g *= 8.0);
    let dy = random_f32(n, seed ^ 0x9e37);
    let gut = GpuTensor::from_f32(gpu, &[2 * n], &gu);
    let dyt = GpuTensor::from_f32(gpu, &[n + 3], &[&[7.0, 7.0, 7.0], &dy[..]].concat());
    let dgu = GpuTensor::zeros(gpu, &[2 * n], Dtype::F32);
    let views = GluBackward {
        gate: (&gut).into(),
        up: View::at(&gut, n),
        dy: View::at(&dyt, 3),
        dgate: (&dgu).into(),
        dup: View::at(&dgu, n),
    };
    let op = glu_backward(act, views, n)?;
    let got: Vec<f32> = run_read(gpu, vec![op], &dgu, 0, 2 * n)?;
    let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
    let (g, u, d) = (wide(&gu[..n]), wide(&gu[n..]), wide(&dy));
    let (dgate, dup) = glu_backward_ref(act, &g, &u, &d);
    let mut c = Compare::default();
    for i in 0..n {
        let bound = (1.0 + g[i].abs() + g[i].abs().powi(3) / 4.0) * (d[i] * u[i]).abs() / 65536.0;
        c.add(f64::from(got[i]), dgate[i], bound, || {
            format!("{act:?} dgate {i}: gate {}", g[i])
        });
        let bound = (1.0 + g[i].abs()) * d[i].abs() / 65536.0;
        c.add(f64::from(got[n + i]), dup[i], bound, || {
            format!("{act:?} dup {i}: gate {}", g[i])
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn glu_backward_matches_reference() {
        testutil::parity("glu_backward", 4, 43);
    }

    /// The reference is the gradient of the forward's reference: central differences of
    /// `L = sum_i dy_i act(g_i) up_i` (f64, step 1e-5) against `dgate`, `dup`. The differences
    /// err by h^2/6 |L'''| (about 1e-10 here) plus rounding eps |L| / h (about 1e-10): the
    /// bound 1e-8 (1 + |ref|) leaves a factor of 10 and would catch any wrong term.
    #[test]
    fn reference_is_the_forward_gradient() {
        for act in [Activation::GeluTanh, Activation::Silu] {
            let n = 24;
            let wide = |v: Vec<f32>, s: f64| v.into_iter().map(|x| f64::from(x) * s).collect();
            let gate: Vec<f64> = wide(random_f32(n, 1), 6.0);
            let up: Vec<f64> = wide(random_f32(n, 2), 1.0);
            let dy: Vec<f64> = wide(random_f32(n, 3), 1.0);
            let loss = |g: &[f64], u: &[f64]| -> f64 {
                (0..n).map(|i| dy[i] * act.apply(g[i]) * u[i]).sum()
            };
            let (dgate, dup) = glu_backward_ref(act, &gate, &up, &dy);
            let h = 1e-5;
            for i in 0..n {
                let (mut gp, mut gm) = (gate.clone(), gate.clone());
                gp[i] += h;
                gm[i] -= h;
                let fd = (loss(&gp, &up) - loss(&gm, &up)) / (2.0 * h);
                assert!(
                    (fd - dgate[i]).abs() <= 1e-8 * (1.0 + dgate[i].abs()),
                    "{act:?} dgate {i}: fd {fd} ref {}",
                    dgate[i]
                );
                let (mut up_p, mut up_m) = (up.clone(), up.clone());
                up_p[i] += h;
                up_m[i] -= h;
                let fd = (loss(&gate, &up_p) - loss(&gate, &up_m)) / (2.0 * h);
                assert!(
                    (fd - dup[i]).abs() <= 1e-8 * (1.0 + dup[i].abs()),
                    "{act:?} dup {i}: fd {fd} ref {}",
                    dup[i]
                );
            }
        }
    }

    #[test]
    fn both_activations() {
        let Some(gpu) = testutil::gpu() else { return };
        for (act, n) in [(Activation::GeluTanh, 2048), (Activation::Silu, 1536)] {
            let c = compare(gpu, act, n, n as u64).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
