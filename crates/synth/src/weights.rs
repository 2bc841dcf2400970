//! Random tensor data with the magnitudes of a real model, fast enough for billions of
//! weights.
//!
//! A quantized tensor is not quantized value by value: one block is quantized by our
//! reference quantizer (`rullama_quant::quantize`) from values spread evenly over the
//! target range, which fixes the block's header (f16 factors, sub-block scales and mins);
//! every block of the tensor then takes that header and random code bytes. The codes are
//! uniform over the format's levels, so the weights are uniform over about the same range
//! as the template, with the standard deviation asked for and mean near 0. Float tensors get
//! uniform values converted by the same quantizer entry point. Work is split into chunks of
//! fixed size, each with its own seed, so the bytes depend on the seed and not on the number
//! of threads.

use std::mem::{offset_of, size_of};
use std::ops::Range;

use rullama_gguf::GgmlType;
use rullama_quant::Format;
use rullama_quant::kquants::{BlockQ4K, BlockQ6K};
use rullama_quant::q5_0::BlockQ5_0;
use rullama_quant::q8_0::BlockQ8_0;

/// Values uniform over `center ± sigma * sqrt(3)`: mean `center`, standard deviation `sigma`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dist {
    /// The mean.
    pub center: f32,
    /// The standard deviation.
    pub sigma: f32,
}

impl Dist {
    fn half_width(self) -> f32 {
        self.sigma * 3f32.sqrt()
    }
}

/// Bytes per chunk of work (a whole number of blocks is taken near this size).
const CHUNK_BYTES: usize = 4 << 20;
/// Period of the template ramp: the smallest sub-block of any format we write (Q6_K's 16),
/// so every sub-block sees the whole range and gets the same scale.
const RAMP: usize = 16;

/// The byte range of a block that holds its codes (the rest is the header the template
/// fixes), for each quantized type synthetic models use.
fn code_bytes(t: GgmlType) -> Option<Range<usize>> {
    Some(match t {
        GgmlType::Q8_0 => offset_of!(BlockQ8_0, qs)..size_of::<BlockQ8_0>(),
        GgmlType::Q5_0 => offset_of!(BlockQ5_0, qh)..size_of::<BlockQ5_0>(),
        GgmlType::Q4K => offset_of!(BlockQ4K, qs)..size_of::<BlockQ4K>(),
        GgmlType::Q6K => offset_of!(BlockQ6K, ql)..offset_of!(BlockQ6K, scales),
        _ => return None,
    })
}

/// Whether [`fill`] can write tensors of type `t`.
pub fn supported(t: GgmlType) -> bool {
    matches!(t, GgmlType::F32 | GgmlType::F16) || code_bytes(t).is_some()
}

/// SplitMix64: a tiny, fast generator; good enough for weights, and seeds streams well.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    fn fill_bytes(&mut self, out: &mut [u8]) {
        let mut words = out.chunks_exact_mut(8);
        for w in &mut words {
            w.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = words.into_remainder();
        let last = self.next_u64().to_le_bytes();
        rest.copy_from_slice(&last[..rest.len()]);
    }
}

/// The seed of one chunk of one tensor.
fn chunk_seed(seed: u64, tensor: u64, chunk: u64) -> u64 {
    let mut s = SplitMix64::new(seed ^ tensor.wrapping_mul(0xA24B_AED4_963E_E407));
    s.next_u64() ^ chunk.wrapping_mul(0x9FB2_1C65_1E98_DF25)
}

/// Fill `out` (a whole tensor of type `t`, or any whole number of its blocks) with random
/// data from `dist`, on `threads` threads. `tensor` (its index in the file) and `seed` pick
/// the stream.
pub fn fill(t: GgmlType, dist: Dist, seed: u64, tensor: u64, threads: usize, out: &mut [u8]) {
    assert!(supported(t), "synthetic data for {t} is not implemented");
    let layout = t.layout();
    let chunk = (CHUNK_BYTES / layout.type_size).max(1) * layout.type_size;
    let template = code_bytes(t).map(|codes| (template(t, dist), codes));
    let mut jobs: Vec<(usize, &mut [u8])> = out.chunks_mut(chunk).enumerate().collect();
    let per_thread = jobs.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        for group in jobs.chunks_mut(per_thread) {
            let template = template.as_ref();
            s.spawn(move || {
                for (i, bytes) in group.iter_mut() {
                    let mut rng = SplitMix64::new(chunk_seed(seed, tensor, *i as u64));
                    match template {
                        Some((block, codes)) => fill_blocks(block, codes.clone(), &mut rng, bytes),
                        None => fill_floats(t, dist, &mut rng, bytes),
                    }
                }
            });
        }
    });
}

/// One block of type `t` quantized from a ramp over the range of `dist`, repeated every
/// [`RAMP`] values, so each sub-block spans the whole range.
fn template(t: GgmlType, dist: Dist) -> Vec<u8> {
    let n = t.layout().block_size;
    let a = dist.half_width();
    let ramp: Vec<f32> = (0..n)
        .map(|i| dist.center - a + 2.0 * a * (i % RAMP) as f32 / (RAMP - 1) as f32)
        .collect();
    rullama_quant::quantize(Format::Ggml(t), &ramp).expect("every type with code bytes quantizes")
}

fn fill_blocks(block: &[u8], codes: Range<usize>, rng: &mut SplitMix64, out: &mut [u8]) {
    for b in out.chunks_exact_mut(block.len()) {
        b.copy_from_slice(block);
        rng.fill_bytes(&mut b[codes.clone()]);
    }
}

fn fill_floats(t: GgmlType, dist: Dist, rng: &mut SplitMix64, out: &mut [u8]) {
    let a = dist.half_width();
    let n = out.len() / t.layout().type_size;
    let values: Vec<f32> = (0..n)
        .map(|_| dist.center + a * (2.0 * rng.next_f32() - 1.0))
        .collect();
    let bytes = rullama_quant::quantize(Format::Ggml(t), &values).expect("f32 and f16 convert");
    out.copy_from_slice(&bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mean and standard deviation of the dequantized values.
    fn stats(t: GgmlType, bytes: &[u8]) -> (f64, f64) {
        let v = rullama_quant::dequantize_to_vec(Format::Ggml(t), bytes).unwrap();
        assert!(v.iter().all(|x| x.is_finite()), "{t}: non-finite value");
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
        let var = v
            .iter()
            .map(|&x| (f64::from(x) - mean).powi(2))
            .sum::<f64>()
            / n;
        (mean, var.sqrt())
    }

    #[test]
    fn every_type_has_the_asked_mean_and_spread() {
        // sigma = 1/sqrt(n_in) for n_in from 256 to 18944 (Qwen 2.5 7B's FFN).
        for sigma in [1.0 / 16.0, 1.0 / 137.6] {
            for t in [
                GgmlType::Q4K,
                GgmlType::Q6K,
                GgmlType::Q8_0,
                GgmlType::Q5_0,
                GgmlType::F16,
                GgmlType::F32,
            ] {
                let dist = Dist { center: 0.0, sigma };
                let n = 64 * 256;
                let mut bytes = vec![0u8; t.bytes_for(n).unwrap() as usize];
                fill(t, dist, 7, 3, 2, &mut bytes);
                let (mean, sd) = stats(t, &bytes);
                let sigma = f64::from(sigma);
                assert!(
                    mean.abs() < 0.1 * sigma,
                    "{t}: mean {mean} for sigma {sigma}"
                );
                assert!(
                    (sd / sigma - 1.0).abs() < 0.1,
                    "{t}: sd {sd}, sigma {sigma}"
                );
            }
        }
    }

    #[test]
    fn norm_gains_sit_near_their_center() {
        let dist = Dist {
            center: 1.0,
            sigma: 0.05,
        };
        let mut bytes = vec![0u8; 4 * 1024];
        fill(GgmlType::F32, dist, 1, 0, 1, &mut bytes);
        let (mean, sd) = stats(GgmlType::F32, &bytes);
        assert!((mean - 1.0).abs() < 0.01 && (sd - 0.05).abs() < 0.01);
    }

    #[test]
    fn bytes_depend_on_the_seed_not_the_thread_count() {
        let t = GgmlType::Q4K;
        let dist = Dist {
            center: 0.0,
            sigma: 0.02,
        };
        let n = (CHUNK_BYTES / 144 * 3 + 5) as u64 * 256;
        let size = t.bytes_for(n).unwrap() as usize;
        let (mut one, mut four, mut other) = (vec![0; size], vec![0; size], vec![0; size]);
        fill(t, dist, 1, 2, 1, &mut one);
        fill(t, dist, 1, 2, 4, &mut four);
        fill(t, dist, 2, 2, 4, &mut other);
        assert!(one == four);
        assert!(one != other);
    }
}
