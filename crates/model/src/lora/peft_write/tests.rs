//! The PEFT writer against the reader on the tiny synthetic models: what is written reads
//! back as the same adapter bit for bit (llama's q/k rows un-permuted in the file and
//! permuted again on read), the config holds PEFT's keys, rsLoRA comes back as its factor,
//! and a bad destination is an error that leaves nothing behind.

use std::path::Path;

use rullama_gguf::GgufFile;
use rullama_synth::{Tiny, tiny_model};
use safetensors::{Dtype, SafeTensors};

use super::super::peft::{PeftOptions, write};
use super::super::{LoraAdapter, LoraError, LoraPair};
use crate::config::ModelConfig;

/// A model's config and an adapter for it: q and down at rank 2, the other projections at
/// rank 4, alpha 8, B scaled to move the model well past rounding.
fn model_and_adapter(tiny: Tiny, alpha: f32) -> (ModelConfig, LoraAdapter) {
    let file = GgufFile::from_bytes(tiny_model(tiny, 3)).unwrap();
    let cfg = ModelConfig::from_gguf(&file).unwrap();
    let low = |n: &str| n.contains("attn_q") || n.contains("ffn_down");
    let two = rullama_synth::lora::projections(&file, low);
    let four = rullama_synth::lora::projections(&file, |n| !low(n));
    let random = |targets, rank, seed| {
        rullama_synth::lora::random_pairs(&file, targets, rank, 2.0, 0.3, seed).unwrap()
    };
    let mut pairs: Vec<LoraPair> = random(&two, 2, 1)
        .into_iter()
        .chain(random(&four, 4, 2))
        .map(|p| LoraPair {
            base: p.base,
            n_in: p.n_in,
            n_out: p.n_out,
            rank: p.rank,
            a: p.a,
            b: p.b,
        })
        .collect();
    pairs.sort_by(|x, y| x.base.cmp(&y.base));
    let adapter = LoraAdapter::from_pairs("trained", tiny.arch_name(), alpha, pairs).unwrap();
    (cfg, adapter)
}

fn options() -> PeftOptions {
    PeftOptions {
        base_model_name_or_path: Some("HuggingFaceTB/SmolLM2-135M".into()),
        ..PeftOptions::default()
    }
}

fn config_of(dir: &Path) -> (String, serde_json::Value) {
    let text = std::fs::read_to_string(dir.join("adapter_config.json")).unwrap();
    let value = serde_json::from_str(&text).unwrap();
    (text, value)
}

/// The entries of `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The pairs come back equal, in a directory created with its parents; llama's q and k
/// `lora_B` are in the file in the Hugging Face row order (each head's rotate-half halves),
/// the other architectures' and the other modules' as they were.
fn round_trip(tiny: Tiny) {
    let (cfg, adapter) = model_and_adapter(tiny, 8.0);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("runs").join("adapter");
    write(&dir, &adapter, &cfg, &options()).unwrap();
    assert_eq!(
        listing(&dir),
        ["adapter_config.json", "adapter_model.safetensors"]
    );
    assert_eq!(listing(tmp.path()), ["runs"]);
    assert_eq!(listing(&tmp.path().join("runs")), ["adapter"]);

    let back = LoraAdapter::open_peft(&dir, &cfg).unwrap();
    assert_eq!((back.arch(), back.alpha()), (adapter.arch(), 8.0));
    assert_eq!(back.pairs(), adapter.pairs());

    let bytes = std::fs::read(dir.join("adapter_model.safetensors")).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(file.len(), 2 * adapter.pairs().len());
    for p in adapter.pairs() {
        let (il, module, block) = match p.base.split('.').collect::<Vec<_>>()[..] {
            [_, il, "attn_q", _] => (il, "q_proj", "self_attn"),
            [_, il, "attn_k", _] => (il, "k_proj", "self_attn"),
            [_, il, "attn_v", _] => (il, "v_proj", "self_attn"),
            [_, il, "attn_output", _] => (il, "o_proj", "self_attn"),
            [_, il, "ffn_gate", _] => (il, "gate_proj", "mlp"),
            [_, il, "ffn_up", _] => (il, "up_proj", "mlp"),
            [_, il, "ffn_down", _] => (il, "down_proj", "mlp"),
            _ => panic!("unexpected base {}", p.base),
        };
        let name = format!("base_model.model.model.layers.{il}.{block}.{module}");
        let a = file.tensor(&format!("{name}.lora_A.weight")).unwrap();
        let b = file.tensor(&format!("{name}.lora_B.weight")).unwrap();
        assert_eq!((a.dtype(), a.shape()), (Dtype::F32, &[p.rank, p.n_in][..]));
        assert_eq!((b.dtype(), b.shape()), (Dtype::F32, &[p.n_out, p.rank][..]));
        let f32s = |d: &[u8]| -> Vec<f32> {
            d.chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        assert_eq!(f32s(a.data()), p.a);
        let n_head = match module {
            "q_proj" => cfg.n_head,
            "k_proj" => cfg.n_head_kv,
            _ => 0,
        };
        let file_b = f32s(b.data());
        if tiny.arch_name() == "llama" && n_head > 0 {
            // Row `2j + t` of a head in llama.cpp's order is row `t * d/2 + j` in HF's.
            let (d, r) = (p.n_out / n_head, p.rank);
            for h in 0..n_head {
                for j in 0..d / 2 {
                    for t in 0..2 {
                        let ours = (h * d + 2 * j + t) * r;
                        let hf = (h * d + t * (d / 2) + j) * r;
                        assert_eq!(file_b[hf..hf + r], p.b[ours..ours + r], "{}", p.base);
                    }
                }
            }
            assert_ne!(file_b, p.b, "{}: llama's rows were not moved", p.base);
        } else {
            assert_eq!(file_b, p.b, "{}", p.base);
        }
    }
}

#[test]
fn gemma3_pairs_round_trip_through_peft() {
    round_trip(Tiny::Gemma3);
}

#[test]
fn qwen2_pairs_round_trip_through_peft() {
    round_trip(Tiny::Qwen2);
}

#[test]
fn llama_pairs_round_trip_through_peft_unpermuted_in_the_file() {
    round_trip(Tiny::Llama);
}

/// The keys `PeftModel.from_pretrained` reads, with the values asked for, sorted as PEFT
/// writes them; the pairs of the less common rank named in `rank_pattern`.
#[test]
fn the_config_holds_peft_keys() {
    let (cfg, adapter) = model_and_adapter(Tiny::Qwen2, 8.0);
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), &adapter, &cfg, &options()).unwrap();
    let (text, c) = config_of(tmp.path());
    let expected = serde_json::json!({
        "alpha_pattern": {},
        "base_model_name_or_path": "HuggingFaceTB/SmolLM2-135M",
        "bias": "none",
        "fan_in_fan_out": false,
        "inference_mode": true,
        "init_lora_weights": true,
        "lora_alpha": 8,
        "lora_dropout": 0.0,
        "modules_to_save": null,
        "peft_type": "LORA",
        "r": 4,
        "rank_pattern": {},
        "revision": null,
        "target_modules": ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"],
        "task_type": "CAUSAL_LM",
        "use_rslora": false,
    });
    let mut expected = expected;
    let patterns = expected["rank_pattern"].as_object_mut().unwrap();
    for il in 0..cfg.n_layer {
        for m in ["mlp.down_proj", "self_attn.q_proj"] {
            patterns.insert(format!("layers.{il}.{m}"), 2.into());
        }
    }
    assert_eq!(c, expected);
    // Sorted keys, as `json.dumps(sort_keys=True)`: each top-level key after the one before.
    let at = |k: &str| text.find(&format!("\n  \"{k}\":")).unwrap();
    let keys: Vec<&String> = expected.as_object().unwrap().keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert!(sorted.windows(2).all(|w| at(w[0]) < at(w[1])), "{text}");

    let bytes = std::fs::read(tmp.path().join("adapter_model.safetensors")).unwrap();
    let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
    let format = meta
        .metadata()
        .as_ref()
        .and_then(|m| m.get("format").cloned());
    assert_eq!(format.as_deref(), Some("pt"));
}

/// An adapter of some layers' q names those modules by path in `target_modules` (PEFT
/// would otherwise put a LoRA layer without tensors on every layer's q), a module of every
/// layer by name; it reads back equal. A layer the model lacks is refused.
#[test]
fn a_partial_adapter_targets_its_modules_by_path() {
    let (cfg, adapter) = model_and_adapter(Tiny::Qwen2, 8.0);
    assert!(cfg.n_layer > 1);
    let some: Vec<LoraPair> = adapter
        .pairs()
        .iter()
        .filter(|p| p.base == "blk.0.attn_q.weight" || p.base.contains("ffn_down"))
        .cloned()
        .collect();
    let some = LoraAdapter::from_pairs("some", "qwen2", 8.0, some).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), &some, &cfg, &options()).unwrap();
    let (_, c) = config_of(tmp.path());
    assert_eq!(
        c["target_modules"],
        serde_json::json!(["down_proj", "layers.0.self_attn.q_proj"])
    );
    let back = LoraAdapter::open_peft(tmp.path(), &cfg).unwrap();
    assert_eq!(back.pairs(), some.pairs());

    let mut pairs = some.pairs().to_vec();
    pairs[0].base = format!("blk.{}.attn_q.weight", cfg.n_layer);
    let beyond = LoraAdapter::from_pairs("beyond", "qwen2", 8.0, pairs).unwrap();
    let err = write(&tmp.path().join("b"), &beyond, &cfg, &options()).unwrap_err();
    assert!(matches!(&err, LoraError::UnknownTensor { .. }), "{err}");
    assert!(!tmp.path().join("b").exists());
}

/// With `use_rslora` the config says so with the user's alpha, and the reader applies
/// PEFT's `alpha / sqrt(r)` through `B` (rank 4: `sqrt(r) = 2`, so exactly twice `B`).
#[test]
fn rslora_comes_back_as_its_factor() {
    let (cfg, adapter) = model_and_adapter(Tiny::Gemma3, 8.0);
    let four: Vec<LoraPair> = adapter
        .pairs()
        .iter()
        .filter(|p| p.rank == 4)
        .cloned()
        .collect();
    let adapter = LoraAdapter::from_pairs("trained", "gemma3", 8.0, four).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let options = PeftOptions {
        use_rslora: true,
        ..options()
    };
    write(tmp.path(), &adapter, &cfg, &options).unwrap();
    let (_, c) = config_of(tmp.path());
    assert_eq!(
        (&c["use_rslora"], &c["lora_alpha"]),
        (&true.into(), &8.into())
    );

    let back = LoraAdapter::open_peft(tmp.path(), &cfg).unwrap();
    assert_eq!(back.alpha(), 8.0);
    for (ours, read) in adapter.pairs().iter().zip(back.pairs()) {
        assert_eq!(read.a, ours.a);
        let twice: Vec<f32> = ours.b.iter().map(|v| 2.0 * v).collect();
        assert_eq!(read.b, twice, "{}", ours.base);
        // The graph's factor times the read B is PEFT's factor times the written B.
        assert_eq!(back.pair_scale(read, 1.0), 2.0);
    }
}

/// An adapter without alpha (factor 1) is written with `lora_alpha = r` and the other rank
/// in `alpha_pattern`, so PEFT's factor is 1 for every module; rsLoRA needs an alpha.
#[test]
fn an_adapter_without_alpha_keeps_factor_one() {
    let (cfg, adapter) = model_and_adapter(Tiny::Qwen2, 0.0);
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), &adapter, &cfg, &options()).unwrap();
    let (_, c) = config_of(tmp.path());
    assert_eq!(c["lora_alpha"], 4);
    assert_eq!(c["alpha_pattern"]["layers.0.self_attn.q_proj"], 2);
    let back = LoraAdapter::open_peft(tmp.path(), &cfg).unwrap();
    for (ours, read) in adapter.pairs().iter().zip(back.pairs()) {
        // Rank 4 reads back as written; rank 2 gets PEFT's factor (1) over the graph's
        // (alpha 4 / rank 2) in B, exactly a half.
        let k = if ours.rank == 4 { 1.0 } else { 0.5 };
        let b: Vec<f32> = ours.b.iter().map(|v| k * v).collect();
        assert_eq!((&read.a, &read.b), (&ours.a, &b), "{}", ours.base);
        // So the graph's factor times the read B is 1 times the written B.
        assert_eq!(
            back.pair_scale(read, 1.0) * k,
            adapter.pair_scale(ours, 1.0)
        );
    }
    let err = write(
        &tmp.path().join("rs"),
        &adapter,
        &cfg,
        &PeftOptions {
            use_rslora: true,
            ..options()
        },
    )
    .unwrap_err();
    assert!(matches!(err, LoraError::Invalid { .. }), "{err}");
    assert!(!tmp.path().join("rs").exists());
}

/// Writing over an existing adapter replaces both files and keeps what else is there, with
/// no temporary file left.
#[test]
fn an_existing_directory_gets_both_files_replaced() {
    let (cfg, first) = model_and_adapter(Tiny::Llama, 8.0);
    let (_, second) = model_and_adapter(Tiny::Llama, 16.0);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("README.md"), "notes").unwrap();
    write(tmp.path(), &first, &cfg, &options()).unwrap();
    write(tmp.path(), &second, &cfg, &options()).unwrap();
    assert_eq!(
        listing(tmp.path()),
        [
            "README.md",
            "adapter_config.json",
            "adapter_model.safetensors"
        ]
    );
    let back = LoraAdapter::open_peft(tmp.path(), &cfg).unwrap();
    assert_eq!(back.alpha(), 16.0);
    assert_eq!(back.pairs(), second.pairs());
}

/// A destination that is a file, under a file, an adapter of another architecture or of a
/// tensor PEFT has no name for: each a typed error, and nothing written anywhere.
#[test]
fn a_bad_destination_is_an_error_and_leaves_nothing() {
    let (cfg, adapter) = model_and_adapter(Tiny::Gemma3, 8.0);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("adapter");
    std::fs::write(&file, "not a directory").unwrap();

    let err = write(&file, &adapter, &cfg, &options()).unwrap_err();
    assert!(matches!(&err, LoraError::NotADirectory { path } if path.ends_with("adapter")));
    let err = write(&file.join("sub"), &adapter, &cfg, &options()).unwrap_err();
    assert!(matches!(&err, LoraError::Write { .. }), "{err}");

    let qwen = LoraAdapter::from_pairs("q", "qwen2", 8.0, adapter.pairs().to_vec()).unwrap();
    let err = write(&tmp.path().join("a"), &qwen, &cfg, &options()).unwrap_err();
    assert!(matches!(&err, LoraError::Architecture { .. }), "{err}");

    let mut pairs = adapter.pairs().to_vec();
    pairs[0].base = "output.weight".into();
    let head = LoraAdapter::from_pairs("h", "gemma3", 8.0, pairs).unwrap();
    let err = write(&tmp.path().join("b"), &head, &cfg, &options()).unwrap_err();
    assert!(
        matches!(&err, LoraError::UnsupportedTensor { tensor, .. } if tensor == "output.weight"),
        "{err}"
    );

    assert_eq!(listing(tmp.path()), ["adapter"]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a directory");
}
