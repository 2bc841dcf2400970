//! Random test data: a small seedable generator, f32 vectors, random weights in GGUF layout
//! with their values from the quant crate (the oracle's input).

use half::{bf16, f16};

use crate::format::GpuFormat;

/// SplitMix64: small, seedable, good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi` (`hi > lo`).
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo) as u64) as usize
    }

    /// A fair coin.
    pub fn bool(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.range(0, items.len())]
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A normal f16 of magnitude in [2^-10, 1) with a random sign.
    pub fn scale_f16(&mut self) -> f16 {
        let mag = (2f32).powf(-10.0 * ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32));
        let sign = if self.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
        f16::from_f32(sign * mag)
    }
}

/// `n` values uniform in [-1, 1) from `seed`.
pub fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut r = Rng::new(seed);
    (0..n).map(|_| r.unit()).collect()
}

/// The block of `n_in` in tests (rows are whole blocks): the format's, or 11 weights for the
/// float formats (so rows end mid-unit).
pub fn n_in_block(f: GpuFormat) -> usize {
    match f {
        GpuFormat::F32 | GpuFormat::F16 | GpuFormat::Bf16 => 11,
        _ => f.block_weights(),
    }
}

/// Byte offsets of the f16 scale fields in one block (set to sane values; the other bytes
/// are uniformly random, so every quant bit pattern occurs).
fn scale_fields(f: GpuFormat) -> &'static [usize] {
    match f {
        GpuFormat::Q8_0 | GpuFormat::Q4_0 | GpuFormat::Q5_0 => &[0],
        GpuFormat::Q4_1 | GpuFormat::Q5_1 | GpuFormat::Q4K | GpuFormat::Q5K => &[0, 2],
        GpuFormat::Q2K => &[80, 82],
        GpuFormat::Q3K => &[108],
        GpuFormat::Q6K => &[208],
        GpuFormat::F32 | GpuFormat::F16 | GpuFormat::Bf16 => &[],
    }
}

/// A random `n_out x n_in` weight in `f`'s GGUF layout, and its values from the quant crate.
pub fn random_weight(f: GpuFormat, n_out: usize, n_in: usize, seed: u64) -> (Vec<u8>, Vec<f32>) {
    let bytes = random_weight_bytes(f, n_out, n_in, seed);
    let mut values = vec![0f32; n_out * n_in];
    rullama_quant::ops::dequantize(f.format(), &bytes, &mut values)
        .expect("the quant crate decodes every GPU format");
    (bytes, values)
}

/// The bytes of [`random_weight`] alone (benches: no decoded copy).
pub fn random_weight_bytes(f: GpuFormat, n_out: usize, n_in: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng::new(seed);
    let n = n_out * n_in;
    match f {
        GpuFormat::F32 => (0..n).flat_map(|_| r.unit().to_le_bytes()).collect(),
        GpuFormat::F16 => (0..n)
            .flat_map(|_| f16::from_f32(r.unit()).to_le_bytes())
            .collect(),
        GpuFormat::Bf16 => (0..n)
            .flat_map(|_| bf16::from_f32(r.unit()).to_le_bytes())
            .collect(),
        _ => {
            let layout = f.ggml().layout();
            let mut bytes: Vec<u8> = (0..n / layout.block_size * layout.type_size)
                .map(|_| r.next_u64() as u8)
                .collect();
            for block in bytes.chunks_exact_mut(layout.type_size) {
                for &o in scale_fields(f) {
                    block[o..o + 2].copy_from_slice(&r.scale_f16().to_le_bytes());
                }
            }
            bytes
        }
    }
}
