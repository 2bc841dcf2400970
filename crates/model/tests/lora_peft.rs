//! PEFT LoRA directories (`adapter_config.json` + `adapter_model.safetensors`, written here
//! with the safetensors crate and serde_json) on the tiny synthetic models: each gives the
//! logits of the GGUF adapter `convert_lora_to_gguf.py` would make of it (GGUF names, and
//! for llama the q/k rows of `lora_B` interleaved per head as `LlamaModel.permute` does to
//! the base), bit for bit; rsLoRA's factor; and bad directories as typed errors.

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::lora::{Pair, adapter_gguf, projections, random_pairs};
use rullama_gguf::{GgmlType, GgufFile};
use rullama_model::{CpuBackend, LoraAdapter, LoraError, Model, OutputRows};
use rullama_synth::{Tiny, tiny_model};
use safetensors::{Dtype, tensor::TensorView};

const PROMPT: [u32; 5] = [2, 40, 41, 300, 7];

fn logit_bits(model: &Model<CpuBackend>) -> Vec<u32> {
    let mut s = model.session(32).unwrap();
    let l = s.forward(&PROMPT, 0, OutputRows::All).unwrap().data;
    l.iter().map(|v| v.to_bits()).collect()
}

/// `blk.N.attn_q.weight` → PEFT's module path.
fn peft_module(base: &str) -> String {
    let mut parts = base.split('.');
    let (_, il, name) = (parts.next(), parts.next().unwrap(), parts.next().unwrap());
    let module = match name {
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        other => panic!("{other}"),
    };
    format!("base_model.model.model.layers.{il}.{module}")
}

/// Writes `pairs` (PEFT's layout is the pairs' own: `lora_A` `[r, in]`, `lora_B` `[out, r]`)
/// as a PEFT directory in `dtype` with `config` as `adapter_config.json`.
fn write_peft(dir: &Path, pairs: &[Pair], dtype: Dtype, config: serde_json::Value) {
    let encode = |v: &[f32]| -> Vec<u8> {
        let ty = match dtype {
            Dtype::F32 => GgmlType::F32,
            Dtype::BF16 => GgmlType::Bf16,
            _ => GgmlType::F16,
        };
        rullama_quant::quantize(rullama_quant::Format::Ggml(ty), v).unwrap()
    };
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = pairs
        .iter()
        .flat_map(|p| {
            let m = peft_module(&p.base);
            [
                (
                    format!("{m}.lora_A.weight"),
                    vec![p.rank, p.n_in],
                    encode(&p.a),
                ),
                (
                    format!("{m}.lora_B.weight"),
                    vec![p.n_out, p.rank],
                    encode(&p.b),
                ),
            ]
        })
        .collect();
    let views = data.iter().map(|(n, shape, bytes)| {
        (
            n.clone(),
            TensorView::new(dtype, shape.clone(), bytes).unwrap(),
        )
    });
    let bytes = safetensors::serialize(views, None).unwrap();
    std::fs::write(dir.join("adapter_model.safetensors"), bytes).unwrap();
    std::fs::write(dir.join("adapter_config.json"), config.to_string()).unwrap();
}

fn config(r: usize, alpha: f32, rslora: bool) -> serde_json::Value {
    serde_json::json!({
        "peft_type": "LORA",
        "base_model_name_or_path": "synthetic",
        "r": r,
        "lora_alpha": alpha,
        "use_rslora": rslora,
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": false,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        "rank_pattern": {},
        "alpha_pattern": {},
        "task_type": "CAUSAL_LM",
    })
}

/// What `LlamaModel.permute` does to each head's rows, said another way: the rotate-half
/// halves `[x0 .. x(d/2-1) | y0 .. y(d/2-1)]` become the pairs `x0 y0 x1 y1 …`.
fn interleave_heads(b: &[f32], n_head: usize, rank: usize) -> Vec<f32> {
    let rows: Vec<&[f32]> = b.chunks(rank).collect();
    let head = rows.len() / n_head;
    let mut out = Vec::with_capacity(b.len());
    for h in rows.chunks(head) {
        let (x, y) = h.split_at(head / 2);
        for (xr, yr) in x.iter().zip(y) {
            out.extend_from_slice(xr);
            out.extend_from_slice(yr);
        }
    }
    out
}

/// The pairs as the GGUF converter writes them for `tiny`: llama's q and k `lora_B` rows
/// interleaved per head.
fn converted(tiny: Tiny, model: &Model<CpuBackend>, pairs: &[Pair]) -> Vec<Pair> {
    let cfg = model.config();
    pairs
        .iter()
        .map(|p| {
            let heads = if p.base.contains("attn_q") {
                cfg.n_head
            } else if p.base.contains("attn_k") {
                cfg.n_head_kv
            } else {
                0
            };
            let mut p = p.clone();
            if tiny == Tiny::Llama && heads > 0 {
                p.b = interleave_heads(&p.b, heads, p.rank);
            }
            p
        })
        .collect()
}

fn peft_matches_converted_gguf(tiny: Tiny) {
    let file = GgufFile::from_bytes(tiny_model(tiny, 5)).unwrap();
    let targets = projections(&file, |_| true);
    let pairs = random_pairs(&file, &targets, 4, 8.0 / 4.0, 0.3, 9);
    let dir = tempfile::tempdir().unwrap();
    write_peft(dir.path(), &pairs, Dtype::F32, config(4, 8.0, false));

    let mut model = Model::load(&file, CpuBackend::new()).unwrap();
    let base = logit_bits(&model);
    let peft = LoraAdapter::open_for(dir.path(), model.config()).unwrap();
    assert_eq!((peft.arch(), peft.alpha()), (tiny.arch_name(), 8.0));
    model.apply_loras(&[(&peft, 1.0)]).unwrap();
    let with_peft = logit_bits(&model);
    assert_ne!(with_peft, base);

    let gguf = adapter_gguf(
        tiny.arch_name(),
        Some(8.0),
        &converted(tiny, &model, &pairs),
        GgmlType::F32,
        GgmlType::F32,
    );
    let gguf = LoraAdapter::from_gguf_bytes(gguf, "converted.gguf").unwrap();
    model.apply_loras(&[(&gguf, 1.0)]).unwrap();
    assert_eq!(
        logit_bits(&model),
        with_peft,
        "{tiny:?}: PEFT vs converted GGUF"
    );

    if tiny == Tiny::Llama {
        // Without the permutation the logits differ: the test sees it.
        let plain = adapter_gguf("llama", Some(8.0), &pairs, GgmlType::F32, GgmlType::F32);
        let plain = LoraAdapter::from_gguf_bytes(plain, "plain.gguf").unwrap();
        model.apply_loras(&[(&plain, 1.0)]).unwrap();
        assert_ne!(
            logit_bits(&model),
            with_peft,
            "the q/k permutation changed nothing"
        );
    }
}

#[test]
fn gemma3_peft_matches_converted_gguf() {
    peft_matches_converted_gguf(Tiny::Gemma3);
}

#[test]
fn llama_peft_matches_converted_gguf() {
    peft_matches_converted_gguf(Tiny::Llama);
}

#[test]
fn qwen2_peft_matches_converted_gguf() {
    peft_matches_converted_gguf(Tiny::Qwen2);
}

/// rsLoRA's factor `alpha / sqrt(r)`: r 4, alpha 8 is a factor 4, what a GGUF of alpha 16
/// gives (16 / 4); BF16 tensors.
#[test]
fn rslora_factor_and_bf16_tensors() {
    let file = GgufFile::from_bytes(tiny_model(Tiny::Qwen2, 5)).unwrap();
    let targets = projections(&file, |n| n.contains("attn_v") || n.contains("ffn_up"));
    let pairs = common::lora::rounded(
        &random_pairs(&file, &targets, 4, 4.0, 0.3, 4),
        GgmlType::Bf16,
        GgmlType::Bf16,
    );
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(4, 8.0, true);
    cfg["target_modules"] = serde_json::json!(["v_proj", "up_proj"]);
    write_peft(dir.path(), &pairs, Dtype::BF16, cfg);
    let mut model = Model::load(&file, CpuBackend::new()).unwrap();
    let peft = LoraAdapter::open_peft(dir.path(), model.config()).unwrap();
    model.apply_loras(&[(&peft, 1.0)]).unwrap();
    let with_peft = logit_bits(&model);
    let gguf = adapter_gguf("qwen2", Some(16.0), &pairs, GgmlType::F32, GgmlType::F32);
    let gguf = LoraAdapter::from_gguf_bytes(gguf, "rs.gguf").unwrap();
    model.apply_loras(&[(&gguf, 1.0)]).unwrap();
    assert_eq!(logit_bits(&model), with_peft);
}

#[test]
fn bad_peft_directories_are_typed_errors() {
    let file = GgufFile::from_bytes(tiny_model(Tiny::Llama, 5)).unwrap();
    let model = Model::load(&file, CpuBackend::new()).unwrap();
    let targets = projections(&file, |n| n.contains("attn_q"));
    let pairs = random_pairs(&file, &targets, 2, 1.0, 0.3, 1);
    let open = |dir: &Path| LoraAdapter::open_peft(dir, model.config()).unwrap_err();

    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    assert!(matches!(&e, LoraError::Io { file, .. } if file.ends_with("adapter_config.json")));

    // DoRA; a rank that is not the config's r.
    let mut dora = config(2, 4.0, false);
    dora["use_dora"] = true.into();
    write_peft(dir.path(), &pairs, Dtype::F32, dora);
    assert!(matches!(open(dir.path()), LoraError::Invalid { what, .. } if what.contains("DoRA")));
    write_peft(dir.path(), &pairs, Dtype::F32, config(8, 4.0, false));
    let e = open(dir.path());
    assert!(
        matches!(&e, LoraError::Shape { tensor, .. } if tensor.ends_with("q_proj.lora_A.weight")),
        "{e:?}"
    );

    // A tensor of no projection (the embedding), and a safetensors file cut short.
    write_peft(dir.path(), &pairs, Dtype::F32, config(2, 4.0, false));
    let path = dir.path().join("adapter_model.safetensors");
    let whole = std::fs::read(&path).unwrap();
    std::fs::write(&path, &whole[..whole.len() / 2]).unwrap();
    assert!(
        matches!(open(dir.path()), LoraError::Invalid { what, .. } if what.contains("safetensors"))
    );
    let embed = vec![0u8; 4 * 2 * 8];
    let mut views = HashMap::new();
    views.insert(
        "base_model.model.model.embed_tokens.lora_embedding_A".to_string(),
        TensorView::new(Dtype::F32, vec![2, 8], &embed).unwrap(),
    );
    std::fs::write(&path, safetensors::serialize(views, None).unwrap()).unwrap();
    let e = open(dir.path());
    assert!(
        matches!(&e, LoraError::UnsupportedTensor { tensor, .. } if tensor.contains("embed_tokens")),
        "{e:?}"
    );
    assert!(e.to_string().contains("adapter_model.safetensors"));
}
