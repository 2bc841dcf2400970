//! `rullama bench`: the JSON report's fields on the GPU executor (lavapipe in CI: a small
//! model, few tokens, one repetition), the markdown table on the CPU executor, and flag
//! errors before anything is loaded.

use serde_json::Value;

mod common;
use common::{cached, rullama};

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
    assert_eq!(r["ctx"], 12);
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
    // 12 positions of 3 KV heads of 64 f16s, allocated as whole blocks of 16 positions (the
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
            &["-p", "8", "-n", "4", "--ctx", "10"][..],
            "--ctx 10 is too small",
        ),
        (&["-p", "0", "-n", "0"][..], "nothing to measure"),
        (&["-r", "0"][..], "-r must be at least 1"),
        (
            &["--temp", "-1"][..],
            "--temp -1 is out of range: it takes a finite number >= 0",
        ),
        (&["--temp", "nan"][..], "--temp NaN is out of range"),
        (
            &["-p", "18446744073709551615", "-n", "1"][..],
            "is more tokens than a context holds (4294967295)",
        ),
        (
            &["-p", "100000000000", "-n", "0"][..],
            "= 100000000000 tokens is more than a context holds",
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
