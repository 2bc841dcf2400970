//! The exact-f32 oracle in `data/oracle/` (see its README.md): greedy continuations,
//! next-token top-10 log-probabilities and the perplexity of `GPL-3.txt`, per model.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;

#[derive(Debug, Deserialize)]
pub struct GreedyCase {
    pub model: String,
    pub prompt: String,
    pub prompt_ids: Vec<u32>,
    pub ids: Vec<u32>,
    /// The first generated position where the top two log-probs are within 0.05 nats:
    /// tokens are compared before it only.
    pub tie_at: usize,
}

#[derive(Debug, Deserialize)]
pub struct LogprobCase {
    pub model: String,
    pub prompt: String,
    pub prompt_ids: Vec<u32>,
    pub top10: Vec<(u32, f64)>,
}

#[derive(Debug, Deserialize)]
pub struct PerplexityCase {
    pub model: String,
    pub text_file: String,
    pub ctx: usize,
    pub chunks: usize,
    pub ppl_f32: f64,
}

/// One model's cases from the three oracle files.
#[derive(Debug)]
pub struct Oracle {
    pub dir: PathBuf,
    pub greedy: Vec<GreedyCase>,
    pub logprobs: Vec<LogprobCase>,
    pub perplexity: PerplexityCase,
}

impl Oracle {
    pub fn load(root: &Path, model: &str) -> Result<Oracle, String> {
        let dir = root.join("data/oracle");
        let greedy: Vec<GreedyCase> = read_jsonl(&dir.join("greedy.jsonl"))?;
        let logprobs: Vec<LogprobCase> = read_jsonl(&dir.join("logprobs.jsonl"))?;
        let perplexity: Vec<PerplexityCase> = read_jsonl(&dir.join("perplexity.jsonl"))?;
        let perplexity = perplexity
            .into_iter()
            .find(|c| c.model == model)
            .ok_or_else(|| format!("data/oracle/perplexity.jsonl has no line for {model}"))?;
        Ok(Oracle {
            dir,
            greedy: greedy.into_iter().filter(|c| c.model == model).collect(),
            logprobs: logprobs.into_iter().filter(|c| c.model == model).collect(),
            perplexity,
        })
    }
}

fn read_jsonl<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}
