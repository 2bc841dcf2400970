//! `rullama finetune` on a tiny synthetic model: it trains (the loss falls), writes an
//! adapter that `rullama run --lora` loads, a log line a step, a loss curve and a checkpoint
//! that `--resume` continues to the same adapter bytes; bad input is an error that names
//! what is wrong and writes nothing.

use std::path::Path;

use rullama_synth::Tiny;

mod common;
use common::{rullama, tiny};

/// Prompt/completion examples: "count: a b" → the next two numbers.
fn write_data(path: &Path, n: usize) {
    let words = [
        "one", "two", "three", "four", "five", "six", "seven", "eight",
    ];
    let lines: Vec<String> = (0..n)
        .map(|i| {
            let a = i % 6;
            serde_json::json!({
                "prompt": format!("count {} {}", words[a], words[a + 1]),
                "completion": format!(" {}", words[a + 2]),
            })
            .to_string()
        })
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// A tiny model and 12 examples in a temporary folder.
struct Run {
    model: tempfile::TempPath,
    data: std::path::PathBuf,
    dir: tempfile::TempDir,
}

impl Run {
    fn new() -> Run {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("train.jsonl");
        write_data(&data, 12);
        Run {
            model: tiny(Tiny::Smollm2),
            data,
            dir,
        }
    }

    fn model(&self) -> &str {
        self.model.to_str().unwrap()
    }

    fn data(&self) -> &str {
        self.data.to_str().unwrap()
    }
}

/// `rullama finetune` with small settings; a flag in `extra` replaces the default one.
fn finetune<'a>(
    model: &'a str,
    data: &'a str,
    out: &'a str,
    extra: &[&'a str],
) -> (bool, String, String) {
    let mut args = vec!["finetune", model, "--data", data, "--out", out];
    let defaults = [
        ("--rank", "4"),
        ("--alpha", "8"),
        ("--lr", "1e-2"),
        ("--ctx", "32"),
        ("--batch", "2"),
        ("--seed", "3"),
    ];
    for (flag, value) in defaults {
        if !extra.contains(&flag) {
            args.extend([flag, value]);
        }
    }
    args.extend_from_slice(extra);
    rullama(&args)
}

#[test]
fn finetune_trains_and_writes_an_adapter_run_loads() {
    let run = Run::new();
    let (m, d, dir) = (run.model(), run.data(), &run.dir);
    let straight = dir.path().join("straight.gguf");
    let peft = dir.path().join("peft");
    let p = peft.to_str().unwrap();
    let (ok, stdout, stderr) = finetune(
        m,
        d,
        straight.to_str().unwrap(),
        &["--steps", "8", "--json", "--peft", p],
    );
    assert!(ok, "{stderr}");
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["steps"], 8);
    let (first, last) = (
        summary["first_loss"].as_f64().unwrap(),
        summary["loss"].as_f64().unwrap(),
    );
    assert!(last < first, "the loss did not fall: {first} -> {last}");
    let log = std::fs::read_to_string(dir.path().join("straight.gguf.log.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 8);
    for line in log.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["loss"].as_f64().unwrap().is_finite() && v["tokens"].as_u64().unwrap() > 0);
    }
    assert!(dir.path().join("straight.gguf.loss.png").is_file());

    // The adapter loads where adapters load.
    let s = straight.to_str().unwrap();
    let (ok, _, stderr) = rullama(&[
        "run",
        m,
        "count one two",
        "--backend",
        "cpu",
        "--temp",
        "0",
        "-n",
        "2",
        "--lora",
        s,
    ]);
    assert!(ok, "{stderr}");
    // The PEFT directory is the same adapter: the same text.
    let greedy = |lora: &str| {
        let (ok, stdout, stderr) = rullama(&[
            "run",
            m,
            "count one two",
            "--backend",
            "cpu",
            "--temp",
            "0",
            "-n",
            "4",
            "--lora",
            lora,
        ]);
        assert!(ok, "{stderr}");
        stdout
    };
    assert_eq!(greedy(p), greedy(s));

    // Checkpoints along the way change nothing.
    let saving = dir.path().join("saving.gguf");
    let (ok, _, stderr) = finetune(
        m,
        d,
        saving.to_str().unwrap(),
        &["--steps", "8", "--save-every", "3"],
    );
    assert!(ok, "{stderr}");
    assert_eq!(
        std::fs::read(&saving).unwrap(),
        std::fs::read(&straight).unwrap(),
        "--save-every changed the training"
    );
}

#[test]
fn finetune_resume_continues_the_run() {
    let run = Run::new();
    let (m, d, dir) = (run.model(), run.data(), &run.dir);
    let straight = dir.path().join("straight.gguf");
    let (ok, _, stderr) = finetune(
        m,
        d,
        straight.to_str().unwrap(),
        &["--steps", "6", "--dropout", "0.1"],
    );
    assert!(ok, "{stderr}");
    // 3 steps of a 6-step run (the schedule spans 6), then the rest.
    let resumed = dir.path().join("resumed.gguf");
    let r = resumed.to_str().unwrap();
    let (ok, _, stderr) = finetune(
        m,
        d,
        r,
        &["--steps", "6", "--stop-after", "3", "--dropout", "0.1"],
    );
    assert!(ok, "{stderr}");
    assert_ne!(
        std::fs::read(&resumed).unwrap(),
        std::fs::read(&straight).unwrap()
    );
    let (ok, stdout, stderr) = finetune(m, d, r, &["--steps", "6", "--resume", "--dropout", "0.1"]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("resumed from") && stderr.contains("at step 3"),
        "{stderr}"
    );
    assert!(stdout.contains("trained 3 steps"), "{stdout}");
    assert_eq!(
        std::fs::read(&resumed).unwrap(),
        std::fs::read(&straight).unwrap(),
        "the resumed adapter differs"
    );
    let log = std::fs::read_to_string(dir.path().join("resumed.gguf.log.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 6, "the log goes on where it stopped");
}

#[test]
fn finetune_refuses_bad_input_and_writes_nothing() {
    let model = tiny(Tiny::Smollm2);
    let m = model.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.jsonl");
    write_data(&good, 4);
    let g = good.to_str().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"text\": \"fine\"}\n{\"text\": 3}\n").unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "\n").unwrap();
    let out = dir.path().join("out.gguf");
    let o = out.to_str().unwrap();
    let cases: [(&str, &[&str], &str); 6] = [
        (bad.to_str().unwrap(), &[], "bad.jsonl:2"),
        (empty.to_str().unwrap(), &[], "empty.jsonl"),
        (g, &["--rank", "0"], "rank"),
        (g, &["--targets", "q,bogus"], "unknown LoRA target `bogus`"),
        (g, &["--ctx", "100000000"], "--ctx 100000000"),
        (g, &["--resume"], "checkpoint"),
    ];
    for (data, extra, expect) in cases {
        let (ok, _, stderr) = finetune(m, data, o, extra);
        assert!(!ok, "{data} {extra:?} succeeded");
        assert!(
            stderr.contains(expect),
            "{data} {extra:?}: `{stderr}` does not say `{expect}`"
        );
        assert!(!out.exists(), "{data} {extra:?} wrote {o}");
    }
}

/// A loss curve that cannot be written (here a directory stands where the PNG goes) is a
/// warning: the run still succeeds and writes its adapter.
#[test]
fn finetune_warns_when_the_loss_curve_cannot_be_written() {
    let model = tiny(Tiny::Smollm2);
    let m = model.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("train.jsonl");
    write_data(&data, 4);
    let out = dir.path().join("out.gguf");
    std::fs::create_dir(dir.path().join("out.gguf.loss.png")).unwrap();
    let (ok, _, stderr) = finetune(
        m,
        data.to_str().unwrap(),
        out.to_str().unwrap(),
        &["--steps", "1"],
    );
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("warning: the loss curve was not written"),
        "{stderr}"
    );
    assert!(out.is_file());
}

#[test]
fn finetune_on_the_gpu_with_dropout_learns_and_resumes_bit_for_bit() {
    if std::env::var_os("RULLAMA_NO_GPU_TESTS").is_some() {
        eprintln!("RULLAMA_NO_GPU_TESTS is set: the GPU finetune test skipped");
        return;
    }
    let run = Run::new();
    let (m, d, dir) = (run.model(), run.data(), &run.dir);
    let straight = dir.path().join("gpu.gguf");
    let gpu = ["--backend", "gpu", "--steps", "6", "--dropout", "0.1"];
    let (ok, stdout, stderr) = finetune(
        m,
        d,
        straight.to_str().unwrap(),
        &[&gpu[..], &["--json"]].concat(),
    );
    assert!(ok, "{stderr}");
    assert!(stderr.contains("training on"), "{stderr}");
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let (first, last) = (
        summary["first_loss"].as_f64().unwrap(),
        summary["loss"].as_f64().unwrap(),
    );
    assert!(
        last < first,
        "the loss did not fall on the GPU: {first} -> {last}"
    );
    // Three steps, stop, resume: the same adapter bytes.
    let resumed = dir.path().join("resumed.gguf");
    let r = resumed.to_str().unwrap();
    let (ok, _, stderr) = finetune(m, d, r, &[&gpu[..], &["--stop-after", "3"]].concat());
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = finetune(m, d, r, &[&gpu[..], &["--resume"]].concat());
    assert!(ok, "{stderr}");
    assert_eq!(
        std::fs::read(&resumed).unwrap(),
        std::fs::read(&straight).unwrap(),
        "a resumed GPU run differs from a straight one"
    );
}

#[test]
fn finetune_bench_measures_without_data_or_outputs() {
    let model = tiny(Tiny::Smollm2);
    let m = model.to_str().unwrap();
    let (ok, stdout, stderr) = rullama(&[
        "finetune",
        m,
        "--bench",
        "--backend",
        "cpu",
        "--rank",
        "2",
        "--batch",
        "2",
        "--ctx",
        "16",
        "--steps",
        "2",
        "--json",
    ]);
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["steps"], 2);
    assert!(v["tokens_per_second"].as_f64().unwrap() > 0.0);
    assert!(v["loss_last"].as_f64().unwrap().is_finite());
}
