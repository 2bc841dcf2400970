//! What `rullama bench` prints: a markdown table like llama-bench's, or JSON for scripts.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use rullama_gguf::GgufFile;
use rullama_model::DeviceMemory;
use serde_json::{Value, json};

use crate::units;

/// The model as llama-bench describes it: architecture, main weight type, size, parameters.
#[derive(Debug)]
pub struct ModelInfo {
    pub architecture: String,
    /// The type holding most bytes of the matrices (`Q4_K`): the "quant" of the model.
    pub main_type: String,
    pub parameters: u64,
    /// Bytes of the tensor data in the file (llama-bench's "size").
    pub tensor_bytes: u64,
    /// The quant mix: per GGML type, its tensors, parameters and bytes.
    pub types: BTreeMap<String, TypeTotal>,
}

#[derive(Debug, Default)]
pub struct TypeTotal {
    pub tensors: usize,
    pub parameters: u64,
    pub bytes: u64,
    /// Bytes in tensors of two or more dimensions (what decides the main type).
    matrix_bytes: u64,
}

impl ModelInfo {
    pub fn of<F: AsRef<[u8]>>(file: &GgufFile<F>) -> ModelInfo {
        let mut types: BTreeMap<String, TypeTotal> = BTreeMap::new();
        for info in file.tensors() {
            let t = types.entry(info.ggml_type.to_string()).or_default();
            t.tensors += 1;
            t.parameters += info.n_elements;
            t.bytes += info.n_bytes;
            if info.dims.iter().filter(|&&d| d > 1).count() >= 2 {
                t.matrix_bytes += info.n_bytes;
            }
        }
        let main_type = types
            .iter()
            .max_by_key(|(_, t)| t.matrix_bytes)
            .map_or_else(|| "-".to_string(), |(name, _)| name.clone());
        ModelInfo {
            architecture: file
                .metadata()
                .architecture()
                .unwrap_or("unknown")
                .to_string(),
            main_type,
            parameters: types.values().map(|t| t.parameters).sum(),
            tensor_bytes: types.values().map(|t| t.bytes).sum(),
            types,
        }
    }
}

/// One test: its name (`pp512`, `tg128`), the tokens each repetition processes, the times.
#[derive(Debug)]
pub struct TestResult {
    pub name: String,
    pub kind: &'static str,
    pub n_tokens: usize,
    pub times: Vec<Duration>,
}

/// Tokens per second over the repetitions.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    pub median: f64,
    pub mean: f64,
    /// Sample standard deviation (0 with one repetition), as llama-bench reports.
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
}

impl TestResult {
    pub fn rates(&self) -> Rates {
        let mut r: Vec<f64> = self
            .times
            .iter()
            .map(|t| self.n_tokens as f64 / t.as_secs_f64().max(1e-9))
            .collect();
        r.sort_by(f64::total_cmp);
        let n = r.len().max(1) as f64;
        let mid = r.len() / 2;
        let median = match r.len() {
            0 => 0.0,
            len if len % 2 == 1 => r[mid],
            _ => (r[mid - 1] + r[mid]) / 2.0,
        };
        let mean = r.iter().sum::<f64>() / n;
        let var = r.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        Rates {
            median,
            mean,
            stddev: var.sqrt(),
            min: r.first().copied().unwrap_or(0.0),
            max: r.last().copied().unwrap_or(0.0),
        }
    }
}

/// Everything measured, with what it was measured on.
#[derive(Debug)]
pub struct Report {
    pub model_name: String,
    pub model: ModelInfo,
    /// `gpu` or `cpu`: the executor that ran.
    pub backend: &'static str,
    /// The adapter's name, or the CPU executor.
    pub executor: String,
    pub ctx: usize,
    pub seed: u32,
    pub repetitions: usize,
    pub load_time: Duration,
    pub tests: Vec<TestResult>,
    pub memory: Option<DeviceMemory>,
}

impl Report {
    pub fn json(&self) -> Value {
        let m = &self.model;
        let types: Vec<Value> = m
            .types
            .iter()
            .map(|(name, t)| {
                json!({"type": name, "tensors": t.tensors, "parameters": t.parameters,
                       "bytes": t.bytes})
            })
            .collect();
        let tests: Vec<Value> = self
            .tests
            .iter()
            .map(|t| {
                let r = t.rates();
                json!({
                    "name": t.name, "kind": t.kind, "n_tokens": t.n_tokens,
                    "times_ns": t.times.iter().map(|d| d.as_nanos() as u64).collect::<Vec<_>>(),
                    "tokens_per_second": {"median": r.median, "mean": r.mean,
                        "stddev": r.stddev, "min": r.min, "max": r.max},
                })
            })
            .collect();
        let memory = self.memory.map(|mem| {
            json!({"weights_bytes": mem.weights, "kv_cache_bytes": mem.kv_cache,
                   "scratch_bytes": mem.scratch, "total_bytes": mem.total()})
        });
        json!({
            "model": {"name": self.model_name, "architecture": m.architecture,
                      "type": m.main_type, "parameters": m.parameters,
                      "size_bytes": m.tensor_bytes, "types": types},
            "backend": self.backend, "executor": self.executor, "ctx": self.ctx,
            "seed": self.seed, "repetitions": self.repetitions,
            "load_ms": self.load_time.as_secs_f64() * 1e3,
            "tests": tests, "memory": memory,
        })
    }

    /// llama-bench's table (t/s: the median over the repetitions, with min and max), then
    /// the device memory the executor holds.
    pub fn markdown(&self, out: &mut impl Write) -> std::io::Result<()> {
        let m = &self.model;
        let model = format!("{} {}", m.architecture, m.main_type);
        // The CPU executor's name says it is the CPU; an adapter's name may not.
        let backend = match self.backend {
            "gpu" => format!("gpu: {}", self.executor),
            _ => self.executor.clone(),
        };
        writeln!(
            out,
            "| model | size | params | backend | test | t/s (median of {}) | min | max |",
            self.repetitions
        )?;
        writeln!(
            out,
            "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"
        )?;
        for t in &self.tests {
            let r = t.rates();
            writeln!(
                out,
                "| {model} | {} | {} | {backend} | {} | {:.2} | {:.2} | {:.2} |",
                units::bytes(m.tensor_bytes),
                units::count(m.parameters),
                t.name,
                r.median,
                r.min,
                r.max
            )?;
        }
        writeln!(out)?;
        match self.memory {
            Some(mem) => {
                let kv = format!("KV cache ({} positions)", self.ctx);
                writeln!(out, "| device memory | bytes |")?;
                writeln!(out, "| --- | ---: |")?;
                for (what, n) in [
                    ("weights", mem.weights),
                    (kv.as_str(), mem.kv_cache),
                    ("scratch (built steps)", mem.scratch),
                    ("total", mem.total()),
                ] {
                    writeln!(out, "| {what} | {} ({n}) |", units::bytes(n))?;
                }
            }
            None => writeln!(
                out,
                "device memory: none (the CPU executor runs on the host)"
            )?,
        }
        Ok(())
    }
}
