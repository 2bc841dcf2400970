//! LoRA adapters from the command line, with tiny synthetic models and random adapters
//! written beside them: `--lora FILE[:SCALE]` on run, perplexity and bench (the adapter
//! changes the greedy text and the perplexity, scale 0 gives the base's, an adapter of
//! another architecture is an error naming its file), `--lora DIR` of a PEFT directory, an
//! Ollama model's adapter layers, and `rullama merge`.

use rullama_gguf::{GgmlType, GgufFile, GgufWriter};
use rullama_synth::{Tiny, tiny_model};

mod common;
use common::{rullama, tiny_bytes};

/// A LoRA GGUF for architecture `arch` updating every projection of `model` at rank 4,
/// its values uniform in [-0.5, 0.5) (an update as large as the weights).
fn adapter(model: &GgufFile<Vec<u8>>, arch: &str) -> tempfile::TempPath {
    let mut w = GgufWriter::new();
    w.set("general.architecture", arch);
    w.set("general.type", "adapter");
    w.set("adapter.type", "lora");
    w.set("adapter.lora.alpha", 4.0f32);
    let mut state = 12345u64;
    let mut values = |n: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5).to_le_bytes()
            })
            .collect()
    };
    let rank = 4u64;
    for t in model.tensors() {
        let projection = [
            "attn_q",
            "attn_k",
            "attn_v",
            "attn_output",
            "ffn_gate",
            "ffn_up",
            "ffn_down",
        ]
        .iter()
        .any(|p| t.name.ends_with(&format!("{p}.weight")));
        if !projection {
            continue;
        }
        let (n_in, n_out) = (t.dims[0], t.dims[1]);
        let a = values((rank * n_in) as usize);
        let b = values((rank * n_out) as usize);
        w.add_tensor(
            format!("{}.lora_a", t.name),
            &[n_in, rank],
            GgmlType::F32,
            a,
        )
        .unwrap();
        w.add_tensor(
            format!("{}.lora_b", t.name),
            &[rank, n_out],
            GgmlType::F32,
            b,
        )
        .unwrap();
    }
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    tiny_bytes(&bytes)
}

#[test]
fn lora_changes_the_text_and_scale_zero_does_not() {
    let bytes = tiny_model(Tiny::Smollm2, 7);
    let file = GgufFile::from_bytes(bytes.clone()).unwrap();
    let model = tiny_bytes(&bytes);
    let m = model.to_str().unwrap();
    let lora = adapter(&file, "llama");
    let l = lora.to_str().unwrap();
    let greedy = |extra: &[&str]| {
        let mut args = vec![
            "run",
            m,
            "the quick brown fox",
            "--backend",
            "cpu",
            "--temp",
            "0",
            "-n",
            "8",
        ];
        args.extend_from_slice(extra);
        let (ok, stdout, stderr) = rullama(&args);
        assert!(ok, "{stderr}");
        stdout
    };
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
        let mut cmd = common::command(&args);
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
/// base gives with it; no `.partial` is left; a merge with nothing to merge, or onto the
/// model itself, is refused.
#[test]
fn merge_writes_a_model_that_runs_as_base_plus_adapter() {
    let q8 = GgufFile::from_bytes(tiny_model(Tiny::Smollm2, 7)).unwrap();
    // An F32 copy of the base: its merge is exact to rounding (a Q8_0 merge requantizes).
    let mut w = GgufWriter::new();
    *w.metadata_mut() = q8.metadata().clone();
    for t in q8.tensor_views() {
        let format = rullama_quant::Format::Ggml(t.info.ggml_type);
        let values = rullama_quant::dequantize_to_vec(format, t.data).unwrap();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        w.add_tensor(t.info.name.clone(), &t.info.dims, GgmlType::F32, bytes)
            .unwrap();
    }
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
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
        "a .partial is left"
    );

    let greedy = |model: &str, extra: &[&str]| {
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
        let (ok, stdout, stderr) = rullama(&args);
        assert!(ok, "{stderr}");
        stdout
    };
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

    let greedy = |extra: &str| {
        let args = [
            "run",
            model.to_str().unwrap(),
            "the quick brown fox",
            "--backend",
            "cpu",
            "--temp",
            "0",
            "-n",
            "8",
            "--lora",
            extra,
        ];
        let (ok, stdout, stderr) = rullama(&args);
        assert!(ok, "{stderr}");
        stdout
    };
    assert_eq!(
        greedy(dir.path().to_str().unwrap()),
        greedy(lora.to_str().unwrap())
    );
}
