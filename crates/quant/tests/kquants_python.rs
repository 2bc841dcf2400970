//! K-quant dequantization against llama.cpp's Python reference (`gguf.quants`, bit-exact with
//! GGML's `dequantize_row_q*_K`): random blocks go through both and every f32 must have the
//! same bit pattern (any NaN matches any NaN: the NaN payloads differ between numpy and Rust's
//! f16 conversion, and GGML promises nothing about them). Q8_K, which gguf cannot decode, is
//! checked against its definition `d * qs[i]`.

use std::path::Path;
use std::process::Command;

use bytemuck::Zeroable;
use rullama_quant::BlockFormat;
use rullama_quant::kquants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K};
use rullama_quant::kquants::{Q2K, Q3K, Q4K, Q5K, Q6K, Q8K};

/// A small deterministic generator (SplitMix64), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// Any finite f16 (normal, subnormal or zero, either sign), as stored bytes.
    fn finite_f16(&mut self) -> [u8; 2] {
        loop {
            let h = self.next() as u16;
            if (h >> 10) & 0x1f != 0x1f {
                return h.to_le_bytes();
            }
        }
    }

    /// Roughly normal values times a scale between 2^-8 and 2^8.
    fn weights(&mut self, n: usize) -> Vec<f32> {
        let scale = 2f32.powi((self.next() % 17) as i32 - 8);
        (0..n)
            .map(|_| {
                let u: f32 = (0..4)
                    .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32)
                    .sum();
                (u - 2.0) * scale
            })
            .collect()
    }
}

const BLOCKS_PER_KIND: usize = 256;

/// Blocks of three kinds: random bytes with finite f16 factors (`fix` sets them), random bytes
/// throughout (infinite and NaN factors included), and blocks quantized from random weights.
fn blocks<F: BlockFormat>(rng: &mut Rng, fix: impl Fn(&mut [u8], &mut Rng)) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..BLOCKS_PER_KIND {
        let mut b = rng.bytes(F::BLOCK_BYTES);
        fix(&mut b, rng);
        out.extend_from_slice(&b);
    }
    out.extend(rng.bytes(F::BLOCK_BYTES * BLOCKS_PER_KIND));
    for _ in 0..BLOCKS_PER_KIND {
        let mut b = vec![0u8; F::BLOCK_BYTES];
        F::quantize_block(&rng.weights(F::BLOCK_SIZE), &mut b);
        out.extend_from_slice(&b);
    }
    out
}

/// Sets the named f16 fields of a block to finite values.
fn finite<B: bytemuck::Pod>(
    fields: impl Fn(&mut B) -> Vec<&mut [u8; 2]>,
) -> impl Fn(&mut [u8], &mut Rng) {
    move |bytes, rng| {
        let b: &mut B = bytemuck::from_bytes_mut(bytes);
        for f in fields(b) {
            *f = rng.finite_f16();
        }
    }
}

fn dequantize<F: BlockFormat>(raw: &[u8]) -> Vec<f32> {
    let mut out = vec![0.0; raw.len() / F::BLOCK_BYTES * F::BLOCK_SIZE];
    for (b, o) in raw
        .chunks_exact(F::BLOCK_BYTES)
        .zip(out.chunks_exact_mut(F::BLOCK_SIZE))
    {
        F::dequantize_block(b, o);
    }
    out
}

fn same_bits(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn assert_same(name: &str, ours: &[f32], reference: &[f32], block_size: usize) {
    assert_eq!(ours.len(), reference.len(), "{name}: output length");
    let bad: Vec<usize> = (0..ours.len())
        .filter(|&i| !same_bits(ours[i], reference[i]))
        .collect();
    if let Some(&i) = bad.first() {
        panic!(
            "{name}: {} of {} weights differ; first at weight {} of block {}: ours {:e} ({:#010x}), reference {:e} ({:#010x})",
            bad.len(),
            ours.len(),
            i % block_size,
            i / block_size,
            ours[i],
            ours[i].to_bits(),
            reference[i],
            reference[i].to_bits()
        );
    }
}

const INSTALL_HINT: &str = "pip install gguf==0.19.0 numpy";

/// Runs the Python script on each `(type name, raw blocks)` and returns its f32 outputs.
fn python_dequantize(dir: &Path, jobs: &[(&str, &[u8])]) -> Vec<Vec<f32>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kquants_dequant.py");
    let mut cmd = Command::new("python3");
    cmd.arg(&script);
    for (name, raw) in jobs {
        let src = dir.join(format!("{name}.bin"));
        std::fs::write(&src, raw).unwrap();
        cmd.arg(name).arg(&src).arg(dir.join(format!("{name}.f32")));
    }
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("cannot run python3 ({e}): install Python 3, then {INSTALL_HINT}")
    });
    assert!(
        out.status.success(),
        "the gguf reference failed (is it installed? {INSTALL_HINT}):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    jobs.iter()
        .map(|(name, _)| {
            let bytes = std::fs::read(dir.join(format!("{name}.f32"))).unwrap();
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        })
        .collect()
}

#[test]
fn dequantize_matches_gguf_python_bit_for_bit() {
    let mut rng = Rng(0x5eed_4b71);
    let q2 = blocks::<Q2K>(
        &mut rng,
        finite(|b: &mut BlockQ2K| vec![&mut b.d, &mut b.dmin]),
    );
    let q3 = blocks::<Q3K>(&mut rng, finite(|b: &mut BlockQ3K| vec![&mut b.d]));
    let q4 = blocks::<Q4K>(
        &mut rng,
        finite(|b: &mut BlockQ4K| vec![&mut b.d, &mut b.dmin]),
    );
    let q5 = blocks::<Q5K>(
        &mut rng,
        finite(|b: &mut BlockQ5K| vec![&mut b.d, &mut b.dmin]),
    );
    let q6 = blocks::<Q6K>(&mut rng, finite(|b: &mut BlockQ6K| vec![&mut b.d]));
    let jobs: [(&str, &[u8]); 5] = [
        ("Q2_K", &q2),
        ("Q3_K", &q3),
        ("Q4_K", &q4),
        ("Q5_K", &q5),
        ("Q6_K", &q6),
    ];

    let dir = tempfile::tempdir().unwrap();
    let reference = python_dequantize(dir.path(), &jobs);
    let ours = [
        dequantize::<Q2K>(&q2),
        dequantize::<Q3K>(&q3),
        dequantize::<Q4K>(&q4),
        dequantize::<Q5K>(&q5),
        dequantize::<Q6K>(&q6),
    ];
    for (((name, _), ours), reference) in jobs.iter().zip(&ours).zip(&reference) {
        assert_same(name, ours, reference, 256);
    }
}

/// Q8_K has no decoder in gguf; its definition is one f32 scale times each signed byte.
#[test]
fn q8_k_dequantize_is_d_times_level() {
    let mut rng = Rng(0x0008_4b00);
    let raw = blocks::<Q8K>(&mut rng, |_, _| {});
    let ours = dequantize::<Q8K>(&raw);
    for (b, w) in raw
        .chunks_exact(Q8K::BLOCK_BYTES)
        .zip(ours.chunks_exact(256))
    {
        let d = f32::from_le_bytes(b[..4].try_into().unwrap());
        for (i, &w) in w.iter().enumerate() {
            let want = d * (b[4 + i] as i8) as f32;
            assert!(
                same_bits(w, want),
                "weight {i}: {w:e} != {d:e} * {}",
                b[4 + i] as i8
            );
        }
    }
    // The quantizer fills bsums with the sums of each 16 levels, as GGML's kernels expect.
    let mut b = BlockQ8K::zeroed();
    Q8K::quantize_block(&rng.weights(256), bytemuck::bytes_of_mut(&mut b));
    for (s, sum) in b.bsums.iter().enumerate() {
        let want: i16 = b.qs[16 * s..16 * s + 16].iter().map(|&q| q as i16).sum();
        assert_eq!(i16::from_le_bytes(*sum), want, "bsums[{s}]");
    }
}
