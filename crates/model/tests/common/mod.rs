//! Shared by the integration tests: the cached real models (loaded once per test binary)
//! and the exact-f32 oracle in `data/oracle/`.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use rullama_model::cpu::WeightStorage;
use rullama_model::{CpuBackend, Model};

pub mod gpu;
pub mod lora;

pub const MODELS: [&str; 3] = ["gemma3-270m", "smollm2-135m", "qwen2.5-0.5b"];

type Shared = &'static Mutex<Model<CpuBackend>>;

/// The cached test model `name`'s path (panics, saying how to fetch it, when it is not cached).
pub fn cached(name: &str) -> PathBuf {
    rullama_gguf::store::cached_test_model(name)
        .unwrap_or_else(|| panic!("test model {name} is not cached: run `cargo xtask models`"))
}

/// The model `name` with its matrices dequantized at load (not shared: 4 bytes a weight).
pub fn dense_model(name: &str) -> Model<CpuBackend> {
    let backend = CpuBackend::new().with_storage(WeightStorage::Dense);
    Model::open(cached(name), backend).unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

/// The model `name` on the CPU backend (quantized storage), loaded once per test binary.
pub fn model(name: &str) -> Shared {
    static MODELS: OnceLock<Mutex<HashMap<String, Shared>>> = OnceLock::new();
    let mut map = MODELS.get_or_init(Default::default).lock().unwrap();
    map.entry(name.to_string()).or_insert_with(|| {
        let path = cached(name);
        let model = Model::open(&path, CpuBackend::new())
            .unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
        Box::leak(Box::new(Mutex::new(model)))
    })
}

// The oracle's file format is read by one module, shared with `cargo xtask parity --models`
// (a test crate cannot depend on the xtask binary, and the format does not belong in the
// library).
#[path = "../../../../xtask/src/parity/oracle.rs"]
mod oracle;

pub use oracle::{GreedyCase, LogprobCase, Oracle};

/// The repository's `data/oracle/` for `model`.
pub fn oracle(model: &str) -> Oracle {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    Oracle::load(&root, model).unwrap_or_else(|e| panic!("oracle for {model}: {e}"))
}

pub fn logprob_cases(model: &str) -> Vec<LogprobCase> {
    oracle(model).logprobs
}

pub fn greedy_cases(model: &str) -> Vec<GreedyCase> {
    oracle(model).greedy
}

/// Uniform values in [-scale, scale) from a seeded SplitMix64, as f32 bytes: weights of the
/// synthetic files the fused-lowering tests write.
pub fn random_f32_bytes(n: usize, scale: f32, seed: u64) -> Vec<u8> {
    let mut s = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .flat_map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            let u = ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
            (scale * u).to_le_bytes()
        })
        .collect()
}
