//! `rullama inspect` on the real test models, by cache name, by path and through an Ollama store.

use serde_json::Value;
use std::path::Path;

mod common;
use common::cached;

/// `rullama ARGS`, with `OLLAMA_MODELS` set to `ollama_models` if given.
fn rullama(args: &[&str], ollama_models: Option<&Path>) -> (bool, String, String) {
    let mut cmd = common::command(args);
    if let Some(dir) = ollama_models {
        cmd.env("OLLAMA_MODELS", dir);
    }
    common::output(cmd)
}

fn inspect_json(model: &str, ollama_models: Option<&Path>) -> Value {
    let (ok, stdout, stderr) = rullama(&["inspect", "--json", model], ollama_models);
    assert!(ok, "inspect {model} failed: {stderr}");
    serde_json::from_str(&stdout).expect("valid JSON")
}

#[test]
fn reports_architecture_layers_and_tensor_counts() {
    // (model, architecture, block_count, tensors): gemma and smollm figures from the issue,
    // qwen from the `gguf` Python package's reader (len(GGUFReader(path).tensors)).
    for (name, arch, layers, tensors) in [
        ("gemma3-270m", "gemma3", 18, 236),
        ("smollm2-135m", "llama", 30, 272),
        ("qwen2.5-0.5b", "qwen2", 24, 291),
    ] {
        cached(name);
        let r = inspect_json(name, None);
        assert_eq!(r["architecture"], arch, "{name}");
        assert_eq!(r["hyper_parameters"]["block_count"], layers, "{name}");
        assert_eq!(
            r["tensors"].as_array().map(Vec::len),
            Some(tensors),
            "{name}"
        );
        let per_type: u64 = r["types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["tensors"].as_u64().unwrap())
            .sum();
        assert_eq!(
            per_type, tensors as u64,
            "{name}: type totals cover every tensor"
        );
    }
}

#[test]
fn text_report_names_the_essentials() {
    let path = cached("gemma3-270m");
    let (ok, stdout, stderr) = rullama(&["inspect", path.to_str().unwrap()], None);
    assert!(ok, "{stderr}");
    for needle in [
        "architecture  gemma3",
        "236 tensors",
        "block_count                              18",
        "attention.layer_norm_rms_epsilon         1e-6",
        "model llama, pre-tokenizer default, 262144 tokens",
        "chat template: none in the file",
        "token_embd.weight",
        "Q8_0",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
}

#[test]
fn resolves_an_ollama_name_through_a_store() {
    let model = cached("smollm2-135m");
    let root = tempfile::tempdir().unwrap();
    let digest = "5a".repeat(32);
    let manifest_dir = root
        .path()
        .join("manifests/registry.ollama.ai/library/smollm2");
    std::fs::create_dir_all(&manifest_dir).unwrap();
    std::fs::create_dir_all(root.path().join("blobs")).unwrap();
    std::fs::write(
        manifest_dir.join("135m"),
        format!(
            r#"{{"schemaVersion":2,"layers":[
                {{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:{}","size":1}},
                {{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:{digest}","size":1}}]}}"#,
            "00".repeat(32)
        ),
    )
    .unwrap();
    // Ollama's blobs are plain files; a symbolic link saves copying 98 MB.
    std::os::unix::fs::symlink(&model, root.path().join(format!("blobs/sha256-{digest}"))).unwrap();

    let r = inspect_json("smollm2:135m", Some(root.path()));
    assert_eq!(r["architecture"], "llama");
    assert_eq!(
        r["source"],
        "Ollama registry.ollama.ai/library/smollm2:135m"
    );
    assert_eq!(
        inspect_json("library/smollm2:135m", Some(root.path()))["architecture"],
        "llama"
    );

    let (ok, _, stderr) = rullama(&["inspect", "smollm2:360m"], Some(root.path()));
    assert!(!ok);
    assert!(
        stderr.contains("manifests/registry.ollama.ai/library/smollm2/360m"),
        "{stderr}"
    );
}

#[test]
fn bad_files_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let truncated = dir.path().join("truncated.gguf");
    let bytes = std::fs::read(cached("smollm2-135m")).unwrap();
    std::fs::write(&truncated, &bytes[..1000]).unwrap();
    let (ok, _, stderr) = rullama(&["inspect", truncated.to_str().unwrap()], None);
    assert!(!ok);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("truncated.gguf"),
        "{stderr}"
    );
    assert!(stderr.contains("offset"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `--gpu` on lavapipe in CI: the device memory by role, in JSON and as text.
#[test]
fn gpu_memory_by_role() {
    cached("smollm2-135m");
    let args = [
        "inspect",
        "smollm2-135m",
        "--gpu",
        "--ctx",
        "64",
        "--no-tensors",
    ];
    let (ok, stdout, stderr) = rullama(&[&args[..], &["--json"]].concat(), None);
    assert!(ok, "{stderr}");
    let r: Value = serde_json::from_str(&stdout).expect("valid JSON");
    let m = &r["gpu_memory"];
    assert_eq!(m["ctx"], 64);
    // The file's tensor bytes plus the GPU layout's padding (a few dozen bytes a tensor).
    let size = r["tensor_bytes"].as_u64().unwrap();
    let n_tensors = r["tensors"].as_array().unwrap().len() as u64;
    let weights = m["weights_bytes"].as_u64().unwrap();
    assert!(weights >= size && weights - size <= 64 * n_tensors, "{m}");
    // 30 layers of K and V for 64 positions of 3 KV heads of 64 f16s (the default cache).
    assert_eq!(m["kv_cache_bytes"], 30 * 2 * 64 * 3 * 64 * 2);
    let scratch = m["scratch_bytes"].as_u64().unwrap();
    assert!(scratch > 0);
    let kv = m["kv_cache_bytes"].as_u64().unwrap();
    assert_eq!(m["total_bytes"].as_u64().unwrap(), weights + kv + scratch);

    let (ok, text, stderr) = rullama(&args, None);
    assert!(ok, "{stderr}");
    assert!(text.contains("\ndevice memory (gpu: "), "{text}");
    assert!(text.contains("KV cache (64 positions)"), "{text}");
    assert!(text.contains(&format!("({weights})")), "{text}");

    let (ok, json, _) = rullama(&["inspect", "smollm2-135m", "--json", "--no-tensors"], None);
    assert!(ok && !json.contains("gpu_memory"), "only with --gpu");
}
