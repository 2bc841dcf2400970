//! Shared by the integration tests: the Python reference (from this checkout's script), bit
//! comparison, random blocks, and where the cached models live.
#![allow(dead_code)] // each test binary uses its own part of this module

use std::path::PathBuf;

use rullama_gguf::GgmlType;
use rullama_quant::reference_python::{PythonReference, ReferenceInfo, TensorSample, WhichTensors};

/// The reference running `tests/dequant.py` from this checkout.
pub fn reference() -> PythonReference {
    PythonReference::new().with_script(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/dequant.py"))
}

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    panic!("{what}: {e}\n(the parity tests need the reference: pip install gguf==0.19.0 numpy)")
}

pub fn reference_info() -> ReferenceInfo {
    reference()
        .info()
        .unwrap_or_else(|e| fail("python reference", e))
}

/// Dequantize each job with `gguf.quants.dequantize`; panics (never skips) when the
/// reference is unavailable.
pub fn python_dequantize(jobs: &[(GgmlType, &[u8])]) -> Vec<Vec<f32>> {
    reference()
        .dequantize(jobs)
        .unwrap_or_else(|e| fail("python dequantize", e))
}

/// Quantize each job with `gguf.quants.quantize`.
pub fn python_quantize(jobs: &[(GgmlType, &[f32])]) -> Vec<Vec<u8>> {
    reference()
        .quantize(jobs)
        .unwrap_or_else(|e| fail("python quantize", e))
}

/// The first `rows` rows of one tensor per type of a GGUF file, read and dequantized by Python.
pub fn python_sample_tensors(path: &std::path::Path, rows: usize) -> Vec<TensorSample> {
    reference()
        .sample_tensors(path, rows, WhichTensors::FirstOfEachType)
        .unwrap_or_else(|e| fail("python GGUFReader", e))
}

/// Equal bit patterns, except that any NaN equals any NaN.
pub fn same_bits(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Panic with the first mismatches if `ours` and `theirs` differ in any bit (NaN == NaN).
pub fn assert_bits_eq(label: &str, ours: &[f32], theirs: &[f32]) {
    assert_eq!(ours.len(), theirs.len(), "{label}: lengths differ");
    let bad: Vec<usize> = (0..ours.len())
        .filter(|&i| !same_bits(ours[i], theirs[i]))
        .collect();
    if let Some(&i) = bad.first() {
        let show = |v: f32| format!("{v:e} ({:#010x})", v.to_bits());
        panic!(
            "{label}: {} of {} values differ; first at {i}: ours {} vs reference {}",
            bad.len(),
            ours.len(),
            show(ours[i]),
            show(theirs[i]),
        );
    }
}

/// splitmix64: deterministic test data without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn fill(&mut self, bytes: &mut [u8]) {
        bytes.iter_mut().for_each(|b| *b = self.next_u64() as u8);
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A random finite f16 bit pattern (any sign, normals and subnormals).
    pub fn finite_f16(&mut self) -> [u8; 2] {
        loop {
            let bits = self.next_u64() as u16;
            if bits & 0x7c00 != 0x7c00 {
                return bits.to_le_bytes();
            }
        }
    }
}

/// Offsets of the f16 scale fields in one block of `t` (from ggml-common.h), so that random
/// blocks can be made finite. Types whose blocks are one float are handled by the caller.
pub fn f16_scale_offsets(t: GgmlType) -> &'static [usize] {
    use GgmlType::*;
    match t {
        Q4_0 | Q5_0 | Q8_0 | Iq4Nl | Iq4Xs | Q1_0G128 => &[0],
        Q4_1 | Q5_1 | Q8_1 | Q4K | Q5K => &[0, 2],
        Q2K => &[80, 82],
        Q3K => &[108],
        Q6K => &[208],
        _ => &[],
    }
}

/// Random bytes for `n_blocks` blocks of `t` whose scales (or values) are finite.
pub fn finite_blocks(t: GgmlType, n_blocks: usize, rng: &mut Rng) -> Vec<u8> {
    let size = t.layout().type_size;
    let mut bytes = vec![0u8; n_blocks * size];
    rng.fill(&mut bytes);
    for block in bytes.chunks_exact_mut(size) {
        match t {
            GgmlType::F32 => block[3] &= if block[3] & 0x7f == 0x7f { 0xfe } else { 0xff },
            GgmlType::F16 => block.copy_from_slice(&rng.finite_f16()),
            GgmlType::Bf16 => block[1] &= if block[1] & 0x7f == 0x7f { 0xfe } else { 0xff },
            _ => {
                for &at in f16_scale_offsets(t) {
                    block[at..at + 2].copy_from_slice(&rng.finite_f16());
                }
            }
        }
    }
    bytes
}

/// `$RULLAMA_MODELS`, else `~/.cache/rullama/models`.
pub fn models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("RULLAMA_MODELS") {
        return dir.into();
    }
    let home = std::env::var_os("HOME").expect("set HOME or RULLAMA_MODELS");
    PathBuf::from(home).join(".cache/rullama/models")
}
