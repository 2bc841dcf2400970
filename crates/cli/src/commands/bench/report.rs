//! What `rullama bench` prints: a markdown table like llama-bench's, or JSON for scripts.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use rullama_gguf::GgufFile;
use rullama_model::sampler::SamplerParams;
use rullama_model::{DeviceMemory, StepProfile};

use super::measure::Profiles;
use serde_json::{Value, json};

use crate::units;

/// The model as llama-bench describes it: architecture, main weight type, size, parameters.
#[derive(Debug)]
pub struct ModelInfo {
    pub architecture: String,
    /// The file's quantization as llama.cpp names it (`Q4_K_M`, from `general.file_type`), else
    /// the type holding most bytes of the matrices: the "quant" of the model.
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
        // gemma-3-270m Q4_K_M keeps its 178 MB embedding in Q8_0: by bytes it would read
        // "Q8_0"; the file type is what llama-bench prints.
        let main_type = file
            .metadata()
            .get_u32("general.file_type")
            .ok()
            .and_then(file_type_name)
            .map(str::to_string)
            .or_else(|| {
                types
                    .iter()
                    .max_by_key(|(_, t)| t.matrix_bytes)
                    .map(|(name, _)| name.clone())
            })
            .unwrap_or_else(|| "-".to_string());
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

/// llama.cpp's name of a `general.file_type` (`llama_ftype` in llama.h) for the common
/// values; `None` for the others (the caller falls back to the tensor types).
fn file_type_name(ftype: u32) -> Option<&'static str> {
    Some(match ftype {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        32 => "BF16",
        _ => return None,
    })
}

/// One test: its name (`pp512`, `tg128`, `pp512 @ d4096`), the tokens each repetition
/// processes after `depth` positions of history, the times.
#[derive(Debug)]
pub struct TestResult {
    pub name: String,
    pub kind: &'static str,
    pub n_tokens: usize,
    pub depth: usize,
    /// FLOPs of one repetition (prefill tests).
    pub flops: Option<u64>,
    pub times: Vec<Duration>,
}

/// A rate over the repetitions (tokens or TFLOPs a second).
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    pub median: f64,
    pub mean: f64,
    /// Sample standard deviation (0 with one repetition), as llama-bench reports.
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
}

impl Rates {
    /// `amount` per second of each time.
    fn of(amount: f64, times: &[Duration]) -> Rates {
        let mut r: Vec<f64> = times
            .iter()
            .map(|t| amount / t.as_secs_f64().max(1e-9))
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

    fn json(&self) -> Value {
        json!({"median": self.median, "mean": self.mean, "stddev": self.stddev,
               "min": self.min, "max": self.max})
    }
}

impl TestResult {
    /// Tokens per second.
    pub fn rates(&self) -> Rates {
        Rates::of(self.n_tokens as f64, &self.times)
    }

    /// TFLOP/s of the products (prefill tests).
    pub fn tflops(&self) -> Option<Rates> {
        self.flops.map(|f| Rates::of(f as f64 / 1e12, &self.times))
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
    /// The sampler's temperature as given (0: greedy).
    pub temperature: f64,
    pub repetitions: usize,
    pub load_time: Duration,
    pub tests: Vec<TestResult>,
    pub memory: Option<DeviceMemory>,
    pub profiles: Profiles,
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
                json!({
                    "name": t.name, "kind": t.kind, "n_tokens": t.n_tokens, "n_depth": t.depth,
                    "times_ns": t.times.iter().map(|d| d.as_nanos() as u64).collect::<Vec<_>>(),
                    "tokens_per_second": t.rates().json(),
                    "flops": t.flops,
                    "tflops_per_second": t.tflops().map(|r| r.json()),
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
            "seed": self.seed, "temperature": self.temperature,
            "repetitions": self.repetitions,
            "load_ms": self.load_time.as_secs_f64() * 1e3,
            "tests": tests, "memory": memory,
            "profile": {
                "prefill": self.profiles.prefill.as_ref().map(profile_json),
                "decode": self.profiles.decode.as_ref().map(profile_json),
                "decode_host": self.profiles.decode_host.map(|h| json!({
                    "queue_ns": h.queue.as_nanos() as u64, "wait_ns": h.wait.as_nanos() as u64})),
            },
        })
    }

    /// llama-bench's table (t/s: the median over the repetitions, with min and max; a
    /// prefill's TFLOP/s, the median), then the device memory the executor holds.
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
            "| model | size | params | backend | test | t/s (median of {}) | min | max | TFLOP/s |",
            self.repetitions
        )?;
        writeln!(
            out,
            "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
        )?;
        for t in &self.tests {
            let r = t.rates();
            let tflops = t
                .tflops()
                .map_or_else(|| "-".to_string(), |f| significant(f.median));
            writeln!(
                out,
                "| {model} | {} | {} | {backend} | {} | {:.2} | {:.2} | {:.2} | {tflops} |",
                units::bytes(m.tensor_bytes),
                units::count(m.parameters),
                t.name,
                r.median,
                r.min,
                r.max
            )?;
        }
        writeln!(out)?;
        if self.temperature > 0.0 {
            // The chain `measure` samples with: the default one at the given temperature.
            let chain = SamplerParams::default();
            writeln!(
                out,
                "sampling: top-k {}, top-p {}, min-p {}, temperature {}\n",
                chain.top_k, chain.top_p, chain.min_p, self.temperature
            )?;
        } else {
            writeln!(out, "sampling: greedy (temperature 0)\n")?;
        }
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
        for (what, p) in [
            ("prefill", &self.profiles.prefill),
            ("decode", &self.profiles.decode),
        ] {
            if let Some(p) = p {
                writeln!(out)?;
                profile_markdown(what, p, out)?;
            }
        }
        let last_decode = self.tests.iter().rfind(|t| t.kind == "decode");
        if let (Some(h), Some(t)) = (self.profiles.decode_host, last_decode) {
            let per = |d: Duration| d.as_secs_f64() * 1e6 / t.n_tokens.max(1) as f64;
            writeln!(
                out,
                "\ndecode host time per token (last repetition): {:.1} us recording, encoding and submitting, {:.1} us waiting for ids",
                per(h.queue),
                per(h.wait)
            )?;
        }
        Ok(())
    }
}

/// `v` with two decimals, or three significant digits where that needs more (a tiny model's
/// TFLOP/s on the CPU is a few millionths).
fn significant(v: f64) -> String {
    let decimals = if v > 0.0 && v.is_finite() {
        (2 - v.log10().floor() as i32).clamp(2, 12) as usize
    } else {
        2
    };
    format!("{v:.decimals$}")
}

/// The profiled step: time per kernel, largest first, and the whole step. Timestamps
/// between dispatches add their own cost (a few us each on the H100): the shares say where
/// the time goes, the sum is more than a step takes unprofiled. The step timed around its
/// pass only, and again without each kernel, says what a kernel costs with its launches and
/// barriers: what fusing it away would save at most.
fn profile_markdown(what: &str, p: &StepProfile, out: &mut impl Write) -> std::io::Result<()> {
    let total = p.total();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    writeln!(
        out,
        "profile of one {what} step: {} dispatches, {:.1} us of GPU time with a timestamp after each, {:.1} us with timestamps around the pass only",
        p.dispatches.len(),
        us(total),
        us(p.step)
    )?;
    writeln!(
        out,
        "| kernel | dispatches | us | us each | share | step without it saves (us) |"
    )?;
    writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: |")?;
    for k in p.by_kernel() {
        writeln!(
            out,
            "| {} | {} | {:.1} | {:.2} | {:.1}% | {:.1} |",
            k.kernel,
            k.count,
            us(k.total),
            us(k.total) / k.count as f64,
            100.0 * k.total.as_secs_f64() / total.as_secs_f64().max(1e-12),
            us(p.saved_without(&k.kernel))
        )?;
    }
    Ok(())
}

fn profile_json(p: &StepProfile) -> Value {
    let kernels: Vec<Value> = p
        .by_kernel()
        .iter()
        .map(|k| {
            json!({"kernel": k.kernel, "dispatches": k.count, "ns": k.total.as_nanos() as u64,
                   "saved_without_ns": p.saved_without(&k.kernel).as_nanos() as u64})
        })
        .collect();
    json!({"dispatches": p.dispatches.len(), "total_ns": p.total().as_nanos() as u64,
           "step_ns": p.step.as_nanos() as u64, "kernels": kernels})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str) -> ModelInfo {
        let path = rullama_gguf::store::cached_test_model(name)
            .unwrap_or_else(|| panic!("test model {name} is not cached: run `cargo xtask models`"));
        ModelInfo::of(&GgufFile::open(path).unwrap())
    }

    /// The file type names the quant, as llama-bench prints it: gemma-3-270m Q4_K_M keeps
    /// most of its bytes in a Q8_0 embedding, so the tensor bytes alone would say Q8_0.
    #[test]
    fn type_is_the_file_type() {
        let gemma = info("gemma3-270m");
        assert_eq!(gemma.main_type, "Q4_K_M");
        let by_bytes = gemma
            .types
            .iter()
            .max_by_key(|(_, t)| t.matrix_bytes)
            .unwrap();
        assert_eq!(by_bytes.0, "Q8_0");
        assert_eq!(info("smollm2-135m").main_type, "Q4_1");
        assert_eq!(file_type_name(99), None);
    }

    #[test]
    fn small_rates_keep_three_significant_digits() {
        assert_eq!(significant(45.678), "45.68");
        assert_eq!(significant(1.0), "1.00");
        assert_eq!(significant(0.012_345), "0.0123");
        assert_eq!(significant(0.000_123_45), "0.000123");
        assert_eq!(significant(0.0), "0.00");
    }
}
