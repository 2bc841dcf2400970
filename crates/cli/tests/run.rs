//! `rullama run` end to end on the CPU reference executor: the streamed greedy text is the
//! exact-f32 oracle's, and bad prompts are errors, not panics.

use serde_json::Value;

mod common;
use common::{cached, command, output, rullama, tiny};
use rullama_synth::Tiny;

fn oracle_case(model: &str, prompt: &str) -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/oracle/greedy.jsonl"
    );
    let oracle = std::fs::read_to_string(path).unwrap();
    oracle
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|c| c["model"] == model && c["prompt"] == prompt)
        .expect("oracle case")
}

#[test]
fn greedy_text_is_the_oracles() {
    cached("gemma3-270m");
    let case = oracle_case("gemma3-270m", "The capital of France is");
    // 8 tokens, before this prompt's first near tie (tie_at 11): the text is determined.
    assert!(case["tie_at"].as_u64().unwrap() >= 8);
    let (ok, stdout, stderr) = rullama(&[
        "run",
        "gemma3-270m",
        "The capital of France is",
        "-n",
        "8",
        "--temp",
        "0",
        "--backend",
        "cpu",
    ]);
    assert!(ok, "{stderr}");
    let generated = stdout.strip_suffix('\n').unwrap_or(&stdout);
    let expected = case["text"].as_str().unwrap();
    assert!(
        generated.len() > 10 && expected.starts_with(generated),
        "generated {generated:?}, oracle {expected:?}"
    );
    assert!(
        stderr.is_empty(),
        "nothing but the text without --verbose: {stderr}"
    );
}

/// The same through the GPU executor (lavapipe in CI: slow, so few tokens of a small model).
#[test]
fn greedy_text_on_the_gpu_executor() {
    cached("smollm2-135m");
    let case = oracle_case("smollm2-135m", "The capital of France is");
    assert!(case["tie_at"].as_u64().unwrap() >= 3);
    let (ok, stdout, stderr) = rullama(&[
        "run",
        "smollm2-135m",
        "The capital of France is",
        "-n",
        "3",
        "--temp",
        "0",
        "--backend",
        "gpu",
        "--verbose",
    ]);
    assert!(ok, "{stderr}");
    let generated = stdout.strip_suffix('\n').unwrap_or(&stdout);
    let expected = case["text"].as_str().unwrap();
    assert!(
        generated.len() >= 5 && expected.starts_with(generated),
        "generated {generated:?}, oracle {expected:?}"
    );
    assert!(
        stderr.contains("eval rate:") && !stderr.contains("cpu (reference executor)"),
        "{stderr}"
    );
}

/// Where no Wayland display can exist (no `XDG_RUNTIME_DIR`: containers, CI), finding the
/// adapters prints nothing: the probe of Mesa's device-select Vulkan layer is kept quiet
/// (rullama-kernels, `device/wayland_noise.rs`). `--backend auto` enumerates on any machine.
#[test]
fn a_headless_run_keeps_stderr_quiet() {
    cached("smollm2-135m");
    let mut cmd = command(&[
        "run",
        "smollm2-135m",
        "The capital of France is",
        "-n",
        "2",
        "--temp",
        "0",
        "--backend",
        "auto",
    ]);
    for name in ["XDG_RUNTIME_DIR", "WAYLAND_DISPLAY", "WAYLAND_SOCKET"] {
        cmd.env_remove(name);
    }
    let (ok, stdout, stderr) = output(cmd);
    assert!(ok, "{stderr}");
    assert!(!stdout.is_empty());
    assert!(
        stderr.is_empty(),
        "nothing but the text without --verbose: {stderr}"
    );
}

#[test]
fn bad_prompts_are_errors() {
    cached("smollm2-135m");
    let (ok, _, stderr) = rullama(&["run", "smollm2-135m", "", "-n", "1", "--backend", "cpu"]);
    assert!(!ok);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("empty"),
        "{stderr}"
    );

    let long = "word ".repeat(100);
    let (ok, _, stderr) = rullama(&[
        "run",
        "smollm2-135m",
        &long,
        "--ctx",
        "16",
        "-n",
        "1",
        "--backend",
        "cpu",
    ]);
    assert!(!ok);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("context"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn perplexity_scores_the_second_half_of_each_chunk() {
    cached("smollm2-135m");
    let text = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/oracle/GPL-3.txt");
    let (ok, stdout, stderr) = rullama(&[
        "perplexity",
        "smollm2-135m",
        "--file",
        text,
        "--ctx",
        "32",
        "--chunks",
        "2",
        "--json",
    ]);
    assert!(ok, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    // Positions 16..=30 of each 32-token chunk predict tokens 17..=31: 15 per chunk.
    assert_eq!(report["tokens_scored"], 30);
    assert_eq!(report["chunks"], 2);
    let ppl = report["ppl"].as_f64().unwrap();
    // A 135M model on English legal text: far better than uniform over 49,152 tokens, and no
    // better than certainty. (The logits it is made of are checked against the exact-f32
    // oracle in rullama-model's tests.)
    assert!(ppl > 1.0 && ppl < 1000.0, "ppl {ppl}");
    assert!(report["stderr"].as_f64().unwrap() > 0.0);
}

/// `--ubatch` reaches the model: a prompt fed 3 tokens a step continues as the whole prompt
/// in one step does (the CPU executor is exact either way), and 0 is refused by clap.
#[test]
fn ubatch_feeds_the_prompt_in_chunks_with_the_same_text() {
    let model = tiny(Tiny::Smollm2);
    let m = model.to_str().unwrap();
    let prompt = "the quick brown fox jumps over the lazy dog";
    let greedy = |extra: &[&str]| {
        let mut args = vec![
            "run",
            m,
            prompt,
            "--backend",
            "cpu",
            "--temp",
            "0",
            "-n",
            "6",
        ];
        args.extend_from_slice(extra);
        let (ok, stdout, stderr) = rullama(&args);
        assert!(ok, "{stderr}");
        stdout
    };
    let (ok, ids, stderr) = rullama(&["tokenize", m, prompt, "--json"]);
    assert!(ok, "{stderr}");
    let n = serde_json::from_str::<Value>(&ids).unwrap()["ids"]
        .as_array()
        .unwrap()
        .len();
    assert!(
        n > 6,
        "the prompt must span several chunks of 3: {n} tokens"
    );
    let whole = greedy(&[]);
    assert!(!whole.is_empty());
    assert_eq!(greedy(&["--ubatch", "3"]), whole);
    let (ok, _, stderr) = rullama(&["run", m, prompt, "--ubatch", "0"]);
    assert!(!ok && stderr.contains("--ubatch"), "{stderr}");
}
