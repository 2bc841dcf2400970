//! The CPU reference against the exact-f32 oracle (`data/oracle/`, transformers in f32 on
//! the weights dequantized from the same GGUF files).
//!
//! In CI: the first 2 log-prob prompts and 8 greedy tokens of the first greedy prompt per
//! model. `--ignored`: every prompt, and every greedy prompt for all 32 tokens, on models
//! dequantized at load (faster, 4 bytes a weight, one model at a time).

mod common;

use common::{MODELS, dense_model, greedy_cases, logprob_cases, model};
use rullama_model::logits::log_softmax;
use rullama_model::{CpuBackend, Model};

/// Next-token log-probs may differ from the oracle's by this much (nats).
const LOGPROB_TOL: f64 = 0.01;

/// The largest |Δ log-prob| over the oracle's top 10, for the first `n` prompts.
fn logprobs(m: &mut Model<CpuBackend>, name: &str, n: usize) -> f64 {
    let cases = logprob_cases(name);
    let n = n.min(cases.len());
    let mut worst = 0f64;
    for case in &cases[..n] {
        let mut s = m.session(case.prompt_ids.len()).unwrap();
        let lp = log_softmax(&s.feed(&case.prompt_ids).unwrap());
        for &(id, want) in &case.top10 {
            let d = (lp[id as usize] - want).abs();
            worst = worst.max(d);
            assert!(
                d < LOGPROB_TOL,
                "{name} {:?}: token {id}: {} vs oracle {want}",
                case.prompt,
                lp[id as usize]
            );
        }
    }
    eprintln!("{name}: max |Δ logprob| over {n} prompts = {worst:.2e}");
    worst
}

/// Greedy continuation of the first `n_prompts` prompts for up to `n_tokens` tokens, compared
/// up to the oracle's `tie_at`.
fn greedy(m: &mut Model<CpuBackend>, name: &str, n_prompts: usize, n_tokens: usize) {
    for case in greedy_cases(name).iter().take(n_prompts) {
        let n = n_tokens.min(case.tie_at).min(case.ids.len());
        let mut s = m.session(case.prompt_ids.len() + n).unwrap();
        let got = s.greedy(&case.prompt_ids, n).unwrap();
        assert_eq!(got, case.ids[..n], "{name} {:?}", case.prompt);
        eprintln!("{name} {:?}: {n} greedy tokens match", case.prompt);
    }
}

#[test]
fn gemma3_logprobs() {
    logprobs(&mut model("gemma3-270m").lock().unwrap(), "gemma3-270m", 2);
}

#[test]
fn smollm2_logprobs() {
    logprobs(
        &mut model("smollm2-135m").lock().unwrap(),
        "smollm2-135m",
        2,
    );
}

#[test]
fn qwen2_logprobs() {
    logprobs(
        &mut model("qwen2.5-0.5b").lock().unwrap(),
        "qwen2.5-0.5b",
        2,
    );
}

#[test]
fn gemma3_greedy_8() {
    greedy(
        &mut model("gemma3-270m").lock().unwrap(),
        "gemma3-270m",
        1,
        8,
    );
}

#[test]
fn smollm2_greedy_8() {
    greedy(
        &mut model("smollm2-135m").lock().unwrap(),
        "smollm2-135m",
        1,
        8,
    );
}

#[test]
fn qwen2_greedy_8() {
    greedy(
        &mut model("qwen2.5-0.5b").lock().unwrap(),
        "qwen2.5-0.5b",
        1,
        8,
    );
}

#[test]
#[ignore = "every oracle prompt of every model"]
fn all_logprobs() {
    for name in MODELS {
        logprobs(&mut dense_model(name), name, usize::MAX);
    }
}

#[test]
#[ignore = "every greedy prompt of every model for 32 tokens: minutes on 2 cores"]
fn all_greedy_32() {
    for name in MODELS {
        greedy(&mut dense_model(name), name, usize::MAX, 32);
    }
}
