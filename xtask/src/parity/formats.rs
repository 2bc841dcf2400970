//! Every tensor of every real model: rullama-quant's dequantization against the `gguf` Python
//! package's, compared by sha256 of the f32 bytes (bit-exact or not at all).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use rullama_gguf::{GgufFile, store};
use rullama_quant::Format;
use serde::Deserialize;
use sha2::{Digest, Sha256};

#[derive(Deserialize)]
struct PythonTensor {
    name: String,
    #[serde(rename = "type")]
    ggml_type: String,
    #[serde(default)]
    sha256: String,
    #[serde(default)]
    unsupported: bool,
}

#[derive(Default)]
struct Tally {
    tensors: usize,
    elements: u64,
    matched: usize,
    skipped: usize,
}

/// Returns the number of mismatched tensors.
pub fn run(root: &Path) -> Result<usize, String> {
    let script = root.join("xtask/python/dequant_hashes.py");
    let mut failures = 0;
    println!(
        "{:<14} {:<8} {:>8} {:>14} {:>8}  result",
        "model", "type", "tensors", "elements", "exact"
    );
    for model in store::KNOWN_MODELS {
        let path = store::cached_test_model(model.name)
            .ok_or_else(|| format!("{} is not cached: run `cargo xtask models`", model.name))?;
        let file = GgufFile::open(&path).map_err(|e| e.to_string())?;
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(&path)
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("running python3 {}: {e}", script.display()))?;
        let stdout = child.stdout.take().ok_or("python3 gave no stdout")?;
        let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.map_err(|e| format!("reading python output: {e}"))?;
            let reference: PythonTensor = serde_json::from_str(&line)
                .map_err(|e| format!("bad line from {}: {e}: {line}", script.display()))?;
            let tally = tallies.entry(reference.ggml_type.clone()).or_default();
            tally.tensors += 1;
            if reference.unsupported {
                tally.skipped += 1;
                continue;
            }
            let view = file.tensor(&reference.name).ok_or_else(|| {
                format!(
                    "{}: python lists {} which we do not",
                    model.name, reference.name
                )
            })?;
            tally.elements += view.info.n_elements;
            let values =
                rullama_quant::dequantize_to_vec(Format::Ggml(view.info.ggml_type), view.data)
                    .map_err(|e| format!("{} {}: {e}", model.name, reference.name))?;
            let mut hasher = Sha256::new();
            for v in &values {
                hasher.update(v.to_le_bytes());
            }
            let ours: String = hasher
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            if ours == reference.sha256 {
                tally.matched += 1;
            } else {
                eprintln!(
                    "MISMATCH {} {} ({})",
                    model.name, reference.name, reference.ggml_type
                );
            }
        }
        let status = child.wait().map_err(|e| format!("python3: {e}"))?;
        if !status.success() {
            return Err(format!(
                "{} failed on {} ({status}): is `gguf` installed?",
                script.display(),
                model.name
            ));
        }
        if tallies.values().map(|t| t.tensors).sum::<usize>() != file.tensors().len() {
            return Err(format!(
                "{}: python and rullama disagree on the tensor count",
                model.name
            ));
        }
        for (ty, t) in &tallies {
            let bad = t.tensors - t.matched - t.skipped;
            failures += bad;
            let result = match (bad, t.skipped) {
                (0, 0) => "pass".to_string(),
                (0, s) => format!("pass ({s} not supported by python)"),
                (b, _) => format!("FAIL ({b} differ)"),
            };
            println!(
                "{:<14} {ty:<8} {:>8} {:>14} {:>8}  {result}",
                model.name, t.tensors, t.elements, t.matched
            );
        }
    }
    Ok(failures)
}
