//! Shared by the integration tests: the cached real models (loaded once per test binary)
//! and the exact-f32 oracle in `data/oracle/`.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use rullama_model::cpu::WeightStorage;
use rullama_model::{CpuBackend, Model};
use serde::Deserialize;

pub const MODELS: [&str; 3] = ["gemma3-270m", "smollm2-135m", "qwen2.5-0.5b"];

type Shared = &'static Mutex<Model<CpuBackend>>;

fn cached(name: &str) -> PathBuf {
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

fn oracle_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/oracle")
        .join(file)
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(file: &str) -> Vec<T> {
    let text = std::fs::read_to_string(oracle_path(file)).expect("data/oracle is in the repo");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("oracle line parses"))
        .collect()
}

#[derive(Debug, Deserialize)]
pub struct LogprobCase {
    pub model: String,
    pub prompt: String,
    pub prompt_ids: Vec<u32>,
    pub top10: Vec<(u32, f64)>,
}

#[derive(Debug, Deserialize)]
pub struct GreedyCase {
    pub model: String,
    pub prompt: String,
    pub prompt_ids: Vec<u32>,
    pub ids: Vec<u32>,
    pub tie_at: usize,
}

pub fn logprob_cases(model: &str) -> Vec<LogprobCase> {
    let all: Vec<LogprobCase> = read_jsonl("logprobs.jsonl");
    all.into_iter().filter(|c| c.model == model).collect()
}

pub fn greedy_cases(model: &str) -> Vec<GreedyCase> {
    let all: Vec<GreedyCase> = read_jsonl("greedy.jsonl");
    all.into_iter().filter(|c| c.model == model).collect()
}
