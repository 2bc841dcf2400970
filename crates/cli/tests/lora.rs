//! LoRA adapters from the command line, with tiny synthetic models and random adapters
//! written beside them: `--lora FILE[:SCALE]` on run, perplexity and bench (the adapter
//! changes the greedy text and the perplexity, scale 0 gives the base's, an adapter of
//! another architecture is an error naming its file), `--lora DIR` of a PEFT directory, an
//! Ollama model's adapter layers, and `rullama merge`.

use rullama_gguf::{GgmlType, GgufFile};
use rullama_synth::{Mix, Tiny, lora, tiny_model, tiny_model_with};

mod common;
use common::{rullama, tiny_bytes};

/// A LoRA GGUF for architecture `arch` updating every projection of `model` at rank 4
/// (alpha 4: a factor of 1), each update as large as its matrix in RMS
/// (`rullama_synth::lora`).
fn adapter(model: &GgufFile<Vec<u8>>, arch: &str) -> tempfile::TempPath {
    let targets = lora::projections(model, |_| true);
    let pairs = lora::random_pairs(model, &targets, 4, 1.0, 1.0, 12345).unwrap();
    let bytes = lora::adapter_gguf(arch, Some(4.0), &pairs, GgmlType::F32, GgmlType::F32).unwrap();
    tiny_bytes(&bytes)
}

/// `rullama run MODEL "the quick brown fox"`, 8 greedy tokens on the CPU, then `extra`.
fn greedy_args<'a>(model: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        model,
        "the quick brown fox",
        "--backend",
        "cpu",
        "--temp",
        "0",
        "-n",
        "8",
    ];
    args.extend_from_slice(extra);
    args
}

/// The text of [`greedy_args`]' run, which must succeed.
fn greedy(model: &str, extra: &[&str]) -> String {
    let (ok, stdout, stderr) = rullama(&greedy_args(model, extra));
    assert!(ok, "{stderr}");
    stdout
}

#[test]
fn lora_changes_the_text_and_scale_zero_does_not() {
    let bytes = tiny_model(Tiny::Smollm2, 7);
    let file = GgufFile::from_bytes(bytes.clone()).unwrap();
    let model = tiny_bytes(&bytes);
    let m = model.to_str().unwrap();
    let lora = adapter(&file, "llama");
    let l = lora.to_str().unwrap();
    let greedy = |extra: &[&str]| greedy(m, extra);
    let base = greedy(&[]);
    assert_eq!(greedy(&["--lora", &format!("{l}:0")]), base);
    let adapted = greedy(&["--lora", l]);
    assert_ne!(adapted, base, "the adapter did not change the text");
    // Two halves of the scale make the whole.
    let halves = greedy(&["--lora", &format!("{l}:0.5"), "--lora", &format!("{l}:0.5")]);
    assert_eq!(halves, adapted);

    let (ok, stdout, stderr) = rullama(&[
        "bench",
        m,
        "-p",
        "4",
        "-n",
        "2",
        "-r",
        "1",
        "--backend",
        "cpu",
        "--lora",
        l,
        "--json",
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("\"tests\""), "{stdout}");

    // perplexity: the adapter changes the score, scale 0 does not.
    let text = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/oracle/GPL-3.txt");
    let ppl = |extra: &[&str]| {
        let mut args = vec![
            "perplexity",
            m,
            "--file",
            text,
            "--ctx",
            "32",
            "--chunks",
            "1",
            "--backend",
            "cpu",
            "--json",
        ];
        args.extend_from_slice(extra);
        let (ok, stdout, stderr) = rullama(&args);
        assert!(ok, "{stderr}");
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap()["ppl"]
            .as_f64()
            .unwrap()
    };
    let plain = ppl(&[]);
    assert_eq!(ppl(&["--lora", &format!("{l}:0")]), plain);
    assert_ne!(ppl(&["--lora", l]), plain);
}

#[test]
fn an_adapter_of_another_model_is_refused() {
    let bytes = tiny_model(Tiny::Smollm2, 7);
    let file = GgufFile::from_bytes(bytes.clone()).unwrap();
    let model = tiny_bytes(&bytes);
    let lora = adapter(&file, "qwen2");
    let l = lora.to_str().unwrap();
    let (ok, _, stderr) = rullama(&["run", model.to_str().unwrap(), "hi", "--lora", l, "-n", "1"]);
    assert!(!ok);
    assert!(stderr.contains(l) && stderr.contains("qwen2"), "{stderr}");
    let (ok, _, stderr) = rullama(&["run", model.to_str().unwrap(), "hi", "--lora", "x.gguf:nan"]);
    assert!(!ok && stderr.contains("--lora"), "{stderr}");
}

/// An Ollama model with an adapter layer (a Modelfile's `ADAPTER`), in a fake
/// `$OLLAMA_MODELS`: run by name it gives the text of the model file run with `--lora` on
/// the adapter blob; `--lora` adds to it.
#[test]
fn ollama_adapter_layers_come_with_the_model() {
    let bytes = tiny_model(Tiny::Smollm2, 7);
    let file = GgufFile::from_bytes(bytes.clone()).unwrap();
    let root = tempfile::tempdir().unwrap();
    let blobs = root.path().join("blobs");
    let manifests = root
        .path()
        .join("manifests/registry.ollama.ai/library/tiny");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(&manifests).unwrap();
    let (model_hex, adapter_hex) = ("ab".repeat(32), "cd".repeat(32));
    std::fs::write(blobs.join(format!("sha256-{model_hex}")), &bytes).unwrap();
    let lora = adapter(&file, "llama");
    std::fs::copy(&lora, blobs.join(format!("sha256-{adapter_hex}"))).unwrap();
    let layer = |t: &str, hex: &str| {
        format!(r#"{{"mediaType":"application/vnd.ollama.image.{t}","digest":"sha256:{hex}"}}"#)
    };
    std::fs::write(
        manifests.join("latest"),
        format!(
            r#"{{"schemaVersion":2,"layers":[{},{}]}}"#,
            layer("model", &model_hex),
            layer("adapter", &adapter_hex)
        ),
    )
    .unwrap();

    let greedy = |model: &str, extra: &[&str]| {
        let mut cmd = common::command(&greedy_args(model, extra));
        cmd.env("OLLAMA_MODELS", root.path());
        let (ok, stdout, stderr) = common::output(cmd);
        assert!(ok, "{stderr}");
        stdout
    };
    let model = tiny_bytes(&bytes);
    let (m, l) = (model.to_str().unwrap(), lora.to_str().unwrap());
    let by_name = greedy("tiny", &[]);
    assert_eq!(by_name, greedy(m, &["--lora", l]));
    assert_ne!(by_name, greedy(m, &[]));
    // The layer at scale 1 and --lora at scale 1: the adapter twice.
    assert_eq!(
        greedy("tiny", &["--lora", l]),
        greedy(m, &["--lora", &format!("{l}:2")])
    );
}

/// `rullama merge`: the merged file of an F32 base runs without `--lora` to the text the
/// base gives with it; no temporary file is left; a merge with nothing to merge, or onto the
/// model itself, is refused.
#[test]
fn merge_writes_a_model_that_runs_as_base_plus_adapter() {
    // An F32 base: its merge is exact to rounding (a Q8_0 merge requantizes).
    let bytes = tiny_model_with(Tiny::Smollm2, Mix::F32, 7);
    let base = GgufFile::from_bytes(bytes.clone()).unwrap();
    let model = tiny_bytes(&bytes);
    let lora = adapter(&base, "llama");
    let (m, l) = (model.to_str().unwrap(), lora.to_str().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged.gguf");
    let o = out.to_str().unwrap();
    let (ok, _, stderr) = rullama(&["merge", m, "--lora", &format!("{l}:0.5"), "--out", o]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("merged 1 adapter(s)"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "a temporary file is left"
    );

    assert_eq!(greedy(o, &[]), greedy(m, &["--lora", &format!("{l}:0.5")]));

    let (ok, _, stderr) = rullama(&["merge", m, "--out", o]);
    assert!(!ok && stderr.contains("nothing to merge"), "{stderr}");
    let (ok, _, stderr) = rullama(&["merge", m, "--lora", l, "--out", m]);
    assert!(!ok && stderr.contains("the model itself"), "{stderr}");
}

/// `--lora DIR` reads a PEFT directory: the text of the GGUF adapter holding the same pairs
/// (qwen2: no q/k permutation, so the pairs are the same bytes), at the same alpha.
#[test]
fn a_peft_directory_runs_as_its_gguf() {
    let bytes = tiny_model(Tiny::Qwen2, 7);
    let file = GgufFile::from_bytes(bytes.clone()).unwrap();
    let model = tiny_bytes(&bytes);
    let lora = adapter(&file, "qwen2");
    let gguf = GgufFile::open(&lora).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut tensors = Vec::new();
    for t in gguf.tensor_views() {
        let (base, half) = t.info.name.rsplit_once(".weight.").unwrap();
        let mut parts = base.split('.');
        let (_, il, proj) = (parts.next(), parts.next().unwrap(), parts.next().unwrap());
        let module = match proj {
            "attn_q" => "self_attn.q_proj",
            "attn_k" => "self_attn.k_proj",
            "attn_v" => "self_attn.v_proj",
            "attn_output" => "self_attn.o_proj",
            "ffn_gate" => "mlp.gate_proj",
            "ffn_up" => "mlp.up_proj",
            _ => "mlp.down_proj",
        };
        let half = if half == "lora_a" { "lora_A" } else { "lora_B" };
        let name = format!("base_model.model.model.layers.{il}.{module}.{half}.weight");
        // GGML dims [n_in, r] are the row-major [r, n_in] PEFT holds.
        let shape = vec![t.info.dims[1] as usize, t.info.dims[0] as usize];
        tensors.push((name, shape, t.data.to_vec()));
    }
    let views = tensors.iter().map(|(n, shape, data)| {
        let view =
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data);
        (n.clone(), view.unwrap())
    });
    let st = safetensors::serialize(views, None).unwrap();
    std::fs::write(dir.path().join("adapter_model.safetensors"), st).unwrap();
    let config = r#"{"peft_type": "LORA", "r": 4, "lora_alpha": 4.0, "bias": "none",
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}"#;
    std::fs::write(dir.path().join("adapter_config.json"), config).unwrap();

    let m = model.to_str().unwrap();
    assert_eq!(
        greedy(m, &["--lora", dir.path().to_str().unwrap()]),
        greedy(m, &["--lora", lora.to_str().unwrap()])
    );
}
