//! `rullama bench`: the JSON report's fields on the GPU executor (lavapipe in CI: a small
//! model, few tokens, one repetition), the markdown table on the CPU executor, lists of sizes
//! and depths on a tiny synthetic model, and flag errors before anything is loaded.

use rullama_gguf::GgufFile;
use rullama_model::ModelConfig;
use rullama_synth::Tiny;
use serde_json::Value;

mod common;
use common::{cached, rullama, tiny};

#[test]
fn json_report_on_the_gpu_executor() {
    cached("smollm2-135m");
    let (ok, stdout, stderr) = rullama(&[
        "bench",
        "smollm2-135m",
        "-p",
        "8",
        "-n",
        "4",
        "-r",
        "1",
        "--json",
        "--backend",
        "gpu",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("bench: warm-up"),
        "progress on stderr: {stderr}"
    );
    let r: Value = serde_json::from_str(&stdout).expect("stdout is one JSON object");
    assert_eq!(r["backend"], "gpu");
    // The largest test's positions: pp8 (each test starts from the same empty cache).
    assert_eq!(r["ctx"], 8);
    assert_eq!(r["temperature"], 0.8);
    assert_eq!(r["model"]["architecture"], "llama");
    assert_eq!(r["model"]["type"], "Q4_1");
    let params = r["model"]["parameters"].as_u64().unwrap();
    assert!((130_000_000..140_000_000).contains(&params), "{params}");

    let tests = r["tests"].as_array().unwrap();
    let names: Vec<&str> = tests.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["pp8", "tg4"]);
    for t in tests {
        assert_eq!(t["times_ns"].as_array().unwrap().len(), 1);
        let tps = &t["tokens_per_second"];
        let median = tps["median"].as_f64().unwrap();
        assert!(median > 0.0 && median.is_finite(), "{t}");
        assert!(tps["min"].as_f64().unwrap() <= median && median <= tps["max"].as_f64().unwrap());
    }

    // The weights on the device are the file's tensor bytes plus the GPU layout's padding
    // (at most a few dozen bytes per tensor chunk); the cache is 30 layers of K and V for
    // 8 positions of 3 KV heads of 64 f16s, allocated as whole blocks of 16 positions (the
    // tensor-core prompt attention loads keys 16 at a time).
    let mem = &r["memory"];
    let size = r["model"]["size_bytes"].as_u64().unwrap();
    let n_tensors: u64 = r["model"]["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tensors"].as_u64().unwrap())
        .sum();
    let weights = mem["weights_bytes"].as_u64().unwrap();
    assert!(
        weights >= size && weights - size <= 64 * n_tensors,
        "weights {weights} for {size} bytes of {n_tensors} tensors"
    );
    assert_eq!(mem["kv_cache_bytes"], 30 * 2 * 16 * 3 * 64 * 2);
    let scratch = mem["scratch_bytes"].as_u64().unwrap();
    assert!(scratch > 0);
    assert_eq!(
        mem["total_bytes"].as_u64().unwrap(),
        weights + mem["kv_cache_bytes"].as_u64().unwrap() + scratch
    );
}

#[test]
fn markdown_table_on_the_cpu_executor() {
    cached("smollm2-135m");
    let (ok, stdout, stderr) = rullama(&[
        "bench",
        "smollm2-135m",
        "-p",
        "4",
        "-n",
        "2",
        "-r",
        "2",
        "--backend",
        "cpu",
        "--temp",
        "0",
    ]);
    assert!(ok, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("| model | size | params | backend | test | t/s"));
    assert!(lines[0].ends_with("| TFLOP/s |"), "{stdout}");
    assert!(lines[2].contains("| llama Q4_1 |") && lines[2].contains("| pp4 |"));
    assert!(
        lines[3].contains("| tg2 |") && lines[3].contains("cpu"),
        "{stdout}"
    );
    assert!(stdout.contains("sampling: greedy"), "{stdout}");
    assert!(stdout.contains("device memory: none"), "{stdout}");
}

#[test]
fn flags_that_cannot_work_are_errors() {
    // Checked before the model is opened: the model need not exist.
    for (args, says) in [
        (
            &["-p", "8", "-n", "4", "--ctx", "6"][..],
            "--ctx 6 is too small: the tests need 8 positions (pp8)",
        ),
        (
            &["-p", "16", "-n", "4", "-d", "8", "--ctx", "20"][..],
            "--ctx 20 is too small: the tests need 24 positions (pp16 @ d8)",
        ),
        (
            &["-p", "1", "-n", "0", "-d", "4294967295"][..],
            "pp1 @ d4294967295 needs -d 4294967295 + 1 tokens: more than a context holds (4294967295)",
        ),
        (&["-p", "8,x"][..], "invalid value 'x'"),
        (&["-p", "0", "-n", "0"][..], "nothing to measure"),
        (&["-r", "0"][..], "-r must be at least 1"),
        (
            &["--temp", "-1"][..],
            "--temp -1 is out of range: it takes a finite number >= 0",
        ),
        (&["--temp", "nan"][..], "--temp NaN is out of range"),
        (
            &["-p", "18446744073709551615", "-d", "1"][..],
            "needs -d 1 + 18446744073709551615 tokens: more than a context holds (4294967295)",
        ),
        (
            &["-p", "100000000000", "-n", "0"][..],
            "pp100000000000 needs 100000000000 tokens: more than a context holds",
        ),
        (
            &["-p", "0,0", "-n", "0", "-d", "0,8"][..],
            "nothing to measure",
        ),
    ] {
        let mut all = vec!["bench", "no-such-model"];
        all.extend_from_slice(args);
        let (ok, stdout, stderr) = rullama(&all);
        assert!(!ok && stdout.is_empty());
        assert!(
            stderr.starts_with("error: ") && stderr.contains(says),
            "{args:?}: {stderr}"
        );
    }
}

/// The rows of the markdown table (after its two header lines, up to the blank line).
fn rows(stdout: &str) -> Vec<Vec<&str>> {
    stdout
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect()
}

#[test]
fn lists_of_sizes_are_a_row_each_with_the_prefills_tflops() {
    let model = tiny(Tiny::Gemma3);
    let path = model.to_str().unwrap();
    let (ok, stdout, stderr) = rullama(&[
        "bench",
        path,
        "-p",
        "16,32",
        "-n",
        "4",
        "-r",
        "1",
        "--backend",
        "cpu",
        "--temp",
        "0",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("bench: pp32 1/1"),
        "progress on stderr: {stderr}"
    );
    let rows = rows(&stdout);
    let names: Vec<&str> = rows.iter().map(|r| r[4]).collect();
    assert_eq!(names, ["pp16", "pp32", "tg4"], "{stdout}");
    for row in &rows[..2] {
        let tflops: f64 = row[8].parse().unwrap_or_else(|_| panic!("{stdout}"));
        assert!(tflops > 0.0 && tflops.is_finite(), "{stdout}");
    }
    assert_eq!(rows[2][8], "-", "a decode row has no TFLOP/s: {stdout}");
}

#[test]
fn depths_run_every_test_after_that_much_history() {
    let model = tiny(Tiny::Gemma3);
    let path = model.to_str().unwrap();
    let (ok, stdout, stderr) = rullama(&[
        "bench",
        path,
        "-p",
        "16",
        "-n",
        "4",
        "-d",
        "0,8",
        "-r",
        "2",
        "--backend",
        "cpu",
        "--json",
    ]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("bench: depth 8"), "{stderr}");
    let r: Value = serde_json::from_str(&stdout).expect("stdout is one JSON object");
    // The deepest test: 8 positions of history and 16 prompt tokens.
    assert_eq!(r["ctx"], 24);
    let tests = r["tests"].as_array().unwrap();
    let names: Vec<&str> = tests.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["pp16", "tg4", "pp16 @ d8", "tg4 @ d8"]);
    let depths: Vec<u64> = tests
        .iter()
        .map(|t| t["n_depth"].as_u64().unwrap())
        .collect();
    assert_eq!(depths, [0, 0, 8, 8]);

    // A prefill's FLOPs are the model's count for its positions; its TFLOP/s are those over
    // each repetition's time.
    let config = ModelConfig::from_gguf(&GgufFile::open(&*model).unwrap()).unwrap();
    for (t, depth) in [(&tests[0], 0), (&tests[2], 8)] {
        assert_eq!(t["kind"], "prefill");
        assert_eq!(
            t["flops"].as_u64(),
            Some(config.prefill_flops(depth, 16)),
            "{t}"
        );
        let fastest = t["times_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|ns| ns.as_u64().unwrap())
            .min()
            .unwrap();
        let max = t["tflops_per_second"]["max"].as_f64().unwrap();
        let expected = config.prefill_flops(depth, 16) as f64 / 1e12 / (fastest as f64 * 1e-9);
        assert!((max - expected).abs() <= 1e-9 * expected, "{t}");
        assert!(
            t["tflops_per_second"]["median"].as_f64().unwrap() > 0.0,
            "{t}"
        );
    }
    // Attention over 8 more keys a token costs more at depth 8.
    assert!(tests[2]["flops"].as_u64() > tests[0]["flops"].as_u64());
    for t in [&tests[1], &tests[3]] {
        assert_eq!(t["kind"], "decode");
        assert!(
            t["flops"].is_null() && t["tflops_per_second"].is_null(),
            "{t}"
        );
        assert!(
            t["tokens_per_second"]["median"].as_f64().unwrap() > 0.0,
            "{t}"
        );
    }
}
