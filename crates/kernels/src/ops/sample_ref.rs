//! CPU reference of the sampling op: the CPU sampler's chain (`crates/model/src/sampler/`)
//! for the configurations the op implements, with the same arithmetic (f32 logits and
//! probabilities, f64 sums), written plainly here so this crate needs no model crate (the
//! model crate tests that its `Sampler` and this agree).
//!
//! Besides the id it returns the ids a correct f32 GPU may pick instead. The GPU computes
//! probabilities in f32 (no f64 in WGSL) with the platform's `exp` and division, so its
//! cumulative probabilities differ from these by a bounded amount. Two decisions compare a
//! cumulative probability with a threshold: the top-p cut (`cum >= top_p`) and the draw
//! (`cum > u * total`). When the reference's value is within the bound of the threshold, the
//! GPU may decide the other way; `near` lists the ids every such outcome gives. Everything
//! else is exact on the GPU: the selection (integer keys), min-p (the same f32 sum
//! `max + ln(min_p)` and comparison), greedy.
//!
//! The bound, per list of n kept candidates with shifted exponentials e_i = exp(x_i),
//! x_i = l_i - l_0 <= 0: Vulkan's exp errs by (3 + 2|x|) ulp and Rust's f32 exp by about one,
//! together at most 4 * 2^-23 absolute for x <= 0 (e^-x (4 + 2x) <= 4); a temperature-divided
//! logit errs by 2.5 ulp (WGSL division; 3 against the reference's rounding) and the
//! subtraction by half an ulp, d_i in all, moving e_i by a factor e^(+-d_i); sums of n f32
//! terms err by n * 2^-24 relative. So a cumulative probability errs by at most
//! 2 * sum_i (4 * 2^-23 + e_i * d_i) / sum_i e_i + 4n * 2^-24 (each error counted in the
//! numerator and again in the normalisation; both sums, on both sides).

const ULP: f64 = 1.0 / 8_388_608.0; // 2^-23
const U: f64 = ULP / 2.0; // 2^-24

/// The reference's choice and the ids near-threshold decisions allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drawn {
    /// None: no finite logit (the op writes `NO_TOKEN`).
    pub id: Option<u32>,
    /// Other ids the GPU may return, each from a decision within the bound of its threshold.
    pub near: Vec<u32>,
}

fn sanitize(l: f32) -> f32 {
    if l.is_nan() { f32::NEG_INFINITY } else { l }
}

/// exp(l - m), exactly 1 at l == m (the CPU sampler's `shifted_exp`).
fn shifted_exp(l: f32, m: f32) -> f32 {
    if l == m { 1.0 } else { (l - m).exp() }
}

/// The best `k` of `x` as (id, logit), best first: larger logit, ties to the lower id, NaN as
/// -inf, -0 as +0.
pub fn top_k_ref(x: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut c: Vec<(u32, f32)> = (0u32..).zip(x.iter().map(|&l| sanitize(l))).collect();
    let desc =
        |a: &(u32, f32), b: &(u32, f32)| (b.1 + 0.0).total_cmp(&(a.1 + 0.0)).then(a.0.cmp(&b.0));
    let k = k.min(c.len());
    if k == 0 {
        return Vec::new();
    }
    if k < c.len() {
        c.select_nth_unstable_by(k - 1, desc);
    }
    c.truncate(k);
    c.sort_unstable_by(desc);
    c
}

/// The CPU sampler's softmax of a best-first list: shifted exponentials (f32), their f64 sum,
/// probabilities `e * (1 / sum) as f32`. Also returns the exponentials.
fn softmax(l: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let e: Vec<f32> = l.iter().map(|&v| shifted_exp(v, l[0])).collect();
    let sum: f64 = e.iter().map(|&v| f64::from(v)).sum();
    let inv = (1.0 / sum) as f32;
    (e.iter().map(|&v| v * inv).collect(), e)
}

/// The error bound of a cumulative probability over `e` (see the module doc); `d[i]` bounds
/// the error of exponent i.
fn bound(e: &[f32], d: &[f64]) -> f64 {
    let sum: f64 = e.iter().map(|&v| f64::from(v)).sum();
    let err: f64 = e
        .iter()
        .zip(d)
        .map(|(&v, &d)| 4.0 * ULP + f64::from(v) * d)
        .sum();
    2.0 * err / sum + 4.0 * e.len() as f64 * U
}

/// The sampled id of `x` under `s` with the uniform number `u`, and the near-threshold ids.
pub fn sample_ref(x: &[f32], s: &super::sample::Sampling, u: f32) -> Drawn {
    let c = top_k_ref(x, s.top_k.max(1));
    if c.is_empty() || c[0].1 == f32::NEG_INFINITY {
        return Drawn {
            id: None,
            near: Vec::new(),
        };
    }
    if s.temperature <= 0.0 {
        return Drawn {
            id: Some(c[0].0),
            near: Vec::new(),
        };
    }
    let l: Vec<f32> = c.iter().map(|x| x.1).collect();
    let (keep, cuts) = top_p_cuts(&l, s.top_p, s.min_keep);
    let n = min_p_cut(&l[..keep], s.min_p, s.min_keep);
    let (id, _) = draw(&c[..n], s.temperature, u);
    let mut near = Vec::new();
    for cut in cuts {
        let n = min_p_cut(&l[..cut], s.min_p, s.min_keep);
        near.extend(draw(&c[..n], s.temperature, u).1);
    }
    near.sort_unstable();
    near.dedup();
    near.retain(|&i| i != id);
    Drawn { id: Some(id), near }
}

/// Error bounds of the exponents `l_i - l_0` on the GPU: the subtraction's rounding, plus,
/// for logits divided by the temperature, 3 ulp of the quotient (WGSL's 2.5 ulp division
/// against the reference's correctly rounded one).
fn exponent_errors(l: &[f32], divided: bool) -> Vec<f64> {
    l.iter()
        .map(|&v| {
            let x = f64::from(v - l[0]).abs();
            let div = if divided {
                3.0 * ULP * (f64::from(v).abs() + f64::from(l[0]).abs())
            } else {
                0.0
            };
            if x.is_finite() { U * x + div } else { 0.0 }
        })
        .collect()
}

/// The CPU sampler's top-p cut (the smallest best-first prefix whose f32 cumulative
/// probability reaches `top_p`, at least `min_keep`), and every cut a GPU within the bound may
/// make (the reference's included).
fn top_p_cuts(l: &[f32], top_p: f32, min_keep: usize) -> (usize, Vec<usize>) {
    let n = l.len();
    if top_p >= 1.0 {
        return (n, vec![n]);
    }
    let (p, e) = softmax(l);
    let margin = bound(&e, &exponent_errors(l, false));
    let (mut keep, mut lo, mut hi) = (None, None, None);
    let mut cum = 0.0f32;
    for (i, &pi) in p.iter().enumerate() {
        cum += pi;
        if i + 1 < min_keep {
            continue;
        }
        let c = f64::from(cum);
        let t = f64::from(top_p);
        if keep.is_none() && cum >= top_p {
            keep = Some(i + 1);
        }
        if lo.is_none() && c >= t - margin {
            lo = Some(i + 1);
        }
        if hi.is_none() && c >= t + margin {
            hi = Some(i + 1);
            break;
        }
    }
    let keep = keep.unwrap_or(n);
    let (lo, hi) = (lo.unwrap_or(n), hi.unwrap_or(n));
    (keep, (lo.min(keep)..=hi.max(keep)).collect())
}

/// The CPU sampler's min-p on a best-first list: keep up to the first logit below
/// `max + ln(min_p)` (f32), at least `min_keep` and at least one.
fn min_p_cut(l: &[f32], min_p: f32, min_keep: usize) -> usize {
    if min_p <= 0.0 {
        return l.len();
    }
    let threshold = l[0] + min_p.ln();
    (1..l.len())
        .find(|&i| l[i] < threshold && i >= min_keep)
        .unwrap_or(l.len())
}

/// The CPU sampler's temperature and draw over best-first candidates: the id, and every id a
/// GPU within the bound may draw (the reference's included).
fn draw(c: &[(u32, f32)], temperature: f32, u: f32) -> (u32, Vec<u32>) {
    if c.len() == 1 {
        return (c[0].0, vec![c[0].0]);
    }
    let divided = temperature != 1.0;
    let l: Vec<f32> = c
        .iter()
        .map(|x| {
            let v = if divided { x.1 / temperature } else { x.1 };
            sanitize(v)
        })
        .collect();
    let (p, e) = softmax(&l);
    let d = exponent_errors(&l, divided);
    let margin = bound(&e, &d);
    let total: f64 = p.iter().map(|&v| f64::from(v)).sum();
    let target = f64::from(u) * total;
    let last = p.iter().rposition(|&v| v > 0.0).unwrap_or(0);
    let (mut id, mut lo, mut hi) = (None, None, None);
    let mut cum = 0.0f64;
    for (i, &pi) in p.iter().enumerate() {
        cum += f64::from(pi);
        if id.is_none() && cum > target {
            id = Some(i);
        }
        if lo.is_none() && cum + margin > target {
            lo = Some(i);
        }
        if hi.is_none() && cum - margin > target {
            hi = Some(i);
            break;
        }
    }
    let id = id.unwrap_or(last);
    let (lo, hi) = (lo.unwrap_or(last), hi.unwrap_or(last));
    let ids = (lo.min(id)..=hi.max(id).min(c.len() - 1))
        .map(|i| c[i].0)
        .collect();
    (c[id].0, ids)
}

#[cfg(test)]
mod tests {
    use super::super::sample::Sampling;
    use super::*;

    fn s(top_k: usize, top_p: f32, min_p: f32, temperature: f32) -> Sampling {
        Sampling {
            top_k,
            top_p,
            min_p,
            min_keep: 0,
            temperature,
        }
    }

    #[test]
    fn order_and_ties() {
        let ids: Vec<u32> = top_k_ref(&[1.0, 3.0, -0.0, 3.0, 0.0, f32::NAN], 6)
            .iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(ids, [1, 3, 0, 2, 4, 5]);
    }

    #[test]
    fn greedy_and_no_finite_logit() {
        let g = s(1, 1.0, 0.0, 0.0);
        assert_eq!(sample_ref(&[0.0, 2.0, 2.0], &g, 0.3).id, Some(1));
        assert_eq!(sample_ref(&[f32::NAN, f32::NEG_INFINITY], &g, 0.3).id, None);
    }

    /// Probabilities 0.4, 0.3, 0.2, 0.1: u picks by the cumulative sums.
    #[test]
    fn draws_by_the_cumulative_distribution() {
        let x: Vec<f32> = [0.1f32, 0.4, 0.2, 0.3].iter().map(|p| p.ln()).collect();
        let all = s(4, 1.0, 0.0, 1.0);
        assert_eq!(sample_ref(&x, &all, 0.0).id, Some(1));
        assert_eq!(sample_ref(&x, &all, 0.5).id, Some(3));
        assert_eq!(sample_ref(&x, &all, 0.8).id, Some(2));
        assert_eq!(sample_ref(&x, &all, 0.95).id, Some(0));
        // top-p 0.6 keeps {1, 3}: renormalised 4/7, 3/7.
        assert_eq!(sample_ref(&x, &s(4, 0.6, 0.0, 1.0), 0.6).id, Some(3));
        // min-p 0.6 keeps p >= 0.24: {1, 3}.
        assert_eq!(sample_ref(&x, &s(4, 1.0, 0.6, 1.0), 0.99).id, Some(3));
        // top-k 1.
        assert_eq!(sample_ref(&x, &s(1, 1.0, 0.0, 1.0), 0.99).id, Some(1));
    }

    /// u on a boundary of the cumulative distribution: the neighbour is allowed, nothing else.
    #[test]
    fn near_lists_only_the_other_side() {
        let x = [0.0f32, 0.0, 0.0, 0.0];
        let d = sample_ref(&x, &s(4, 1.0, 0.0, 1.0), 0.5);
        assert_eq!(d.id, Some(2));
        assert_eq!(d.near, [1]);
        let d = sample_ref(&x, &s(4, 1.0, 0.0, 1.0), 0.375);
        assert_eq!((d.id, d.near.len()), (Some(1), 0));
    }
}
