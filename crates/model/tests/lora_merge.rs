//! `lora::merge::merge`: adapters merged into a model's weights, written as a GGUF of the
//! base's formats, on the tiny synthetic models.
//!
//! - An F32 base: the merged model's logits equal the base's with the adapters applied,
//!   within `tests/gpu.rs`'s bars for two f32 paths (the merge rounds `W + Σ s·B·A` once,
//!   the graph rounds `A·x`, `s·B` and `B·(A·x)` apart).
//! - A Q8_0 base: every tensor keeps its type; those no adapter touches and the metadata are
//!   the base's bytes; each updated weight is within Q8_0's rounding of `W + Σ s·B·A` —
//!   half a step `d = amax / 127` of its block, plus what storing `d` as f16 moves the
//!   block's largest multiple (127 · |d - f16(d)|), plus f32 rounding of the sum.
//! - A refused adapter, or an output that cannot be written, leaves neither `OUT` nor a
//!   temporary file behind.

mod common;

use common::gpu::{Deviation, LOGIT_REL, TOP10_NATS};
use common::lora::{Pair, adapter_gguf, all_f32, projections, random_pairs};
use rullama_gguf::{GgmlType, GgufFile};
use rullama_model::lora::merge::merge;
use rullama_model::{CpuBackend, LoraAdapter, Model, ModelError, OutputRows};
use rullama_synth::{Tiny, tiny_model};

const PROMPT: [u32; 5] = [2, 40, 41, 300, 7];

fn logits(model: &Model<CpuBackend>) -> Vec<f32> {
    let mut s = model.session(32).unwrap();
    s.forward(&PROMPT, 0, OutputRows::All).unwrap().data
}

fn deviation(model: &Model<CpuBackend>, got: &[f32], want: &[f32]) -> Deviation {
    let n = model.config().n_vocab;
    let mut d = Deviation::default();
    for (g, w) in got.chunks(n).zip(want.chunks(n)) {
        d.add(g, w);
    }
    d
}

/// Two adapters for `file`: every projection at rank 3 (alpha 6, scale 0.5) and q and down
/// at rank 2 (no alpha, scale 1.5).
fn adapters(file: &GgufFile<Vec<u8>>, arch: &str) -> ([LoraAdapter; 2], [Vec<Pair>; 2]) {
    let all = projections(file, |_| true);
    let some = projections(file, |n| n.contains("attn_q") || n.contains("ffn_down"));
    let p1 = random_pairs(file, &all, 3, 1.0, 0.3, 1);
    let p2 = random_pairs(file, &some, 2, 1.5, 0.3, 2);
    let a1 = adapter_gguf(arch, Some(6.0), &p1, GgmlType::F32, GgmlType::F32);
    let a2 = adapter_gguf(arch, None, &p2, GgmlType::F32, GgmlType::F32);
    (
        [
            LoraAdapter::from_gguf_bytes(a1, "one.gguf").unwrap(),
            LoraAdapter::from_gguf_bytes(a2, "two.gguf").unwrap(),
        ],
        [p1, p2],
    )
}

fn f32_merge_matches_applied_adapters(tiny: Tiny) {
    let base = all_f32(&GgufFile::from_bytes(tiny_model(tiny, 5)).unwrap());
    let ([a1, a2], _) = adapters(&base, tiny.arch_name());
    let loras = [(&a1, 0.5), (&a2, 1.5)];
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged.gguf");
    let summary = merge(&base, &loras, &out).unwrap();
    assert_eq!(summary.merged, projections(&base, |_| true).len());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "a temporary file is left"
    );

    let mut applied = Model::load(&base, CpuBackend::new()).unwrap();
    let plain = logits(&applied);
    applied.apply_loras(&loras).unwrap();
    let want = logits(&applied);
    let merged = Model::open(&out, CpuBackend::new()).unwrap();
    let got = logits(&merged);
    let dev = deviation(&merged, &got, &want);
    let moved = deviation(&merged, &plain, &want);
    eprintln!("{tiny:?}: merged vs applied {dev:?}; base vs applied {moved:?}");
    assert!(
        dev.logit_rel <= LOGIT_REL && dev.top10_nats <= TOP10_NATS,
        "{tiny:?}: {dev:?}"
    );
    assert!(moved.logit_rel > 100.0 * LOGIT_REL, "{tiny:?}: {moved:?}");
}

#[test]
fn gemma3_f32_merge_matches_applied_adapters() {
    f32_merge_matches_applied_adapters(Tiny::Gemma3);
}

#[test]
fn llama_f32_merge_matches_applied_adapters() {
    f32_merge_matches_applied_adapters(Tiny::Llama);
}

#[test]
fn qwen2_f32_merge_matches_applied_adapters() {
    f32_merge_matches_applied_adapters(Tiny::Qwen2);
}

/// `B·A` of a pair, `n_out` rows of `n_in`, in f64.
fn update(p: &Pair) -> Vec<f64> {
    let mut out = vec![0f64; p.n_out * p.n_in];
    for o in 0..p.n_out {
        for k in 0..p.rank {
            let b = f64::from(p.b[o * p.rank + k]);
            for i in 0..p.n_in {
                out[o * p.n_in + i] += b * f64::from(p.a[k * p.n_in + i]);
            }
        }
    }
    out
}

#[test]
fn q8_0_merge_keeps_the_formats_within_requantization() {
    let tiny = Tiny::Qwen2;
    let base = GgufFile::from_bytes(tiny_model(tiny, 5)).unwrap();
    let ([a1, a2], [p1, p2]) = adapters(&base, tiny.arch_name());
    let (f1, f2) = (0.5 * 6.0 / 3.0, 1.5f64);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged.gguf");
    merge(&base, &[(&a1, 0.5), (&a2, 1.5)], &out).unwrap();
    let merged = GgufFile::open(&out).unwrap();
    assert_eq!(merged.metadata(), base.metadata());
    assert_eq!(merged.tensors().count(), base.tensors().count());
    let mut checked = 0;
    for t in base.tensor_views() {
        let m = merged.tensor(&t.info.name).unwrap();
        assert_eq!(
            (&m.info.dims, m.info.ggml_type),
            (&t.info.dims, t.info.ggml_type)
        );
        let pairs: Vec<(&Pair, f64)> = p1
            .iter()
            .map(|p| (p, f1))
            .chain(p2.iter().map(|p| (p, f2)))
            .filter(|(p, _)| p.base == t.info.name)
            .collect();
        if pairs.is_empty() {
            assert_eq!(m.data, t.data, "{} changed", t.info.name);
            continue;
        }
        assert_eq!(t.info.ggml_type, GgmlType::Q8_0);
        let format = rullama_quant::Format::Ggml(GgmlType::Q8_0);
        let w = rullama_quant::dequantize_to_vec(format, t.data).unwrap();
        let got = rullama_quant::dequantize_to_vec(format, m.data).unwrap();
        let mut want: Vec<f64> = w.iter().map(|&v| f64::from(v)).collect();
        for (p, f) in pairs {
            for (x, u) in want.iter_mut().zip(update(p)) {
                *x += f * u;
            }
        }
        for (block, (g, x)) in got.chunks(32).zip(want.chunks(32)).enumerate() {
            let amax = x.iter().fold(0f64, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let d16 = f64::from(
                rullama_quant::dequantize_to_vec(
                    rullama_quant::Format::Ggml(GgmlType::F16),
                    &rullama_quant::quantize(
                        rullama_quant::Format::Ggml(GgmlType::F16),
                        &[d as f32],
                    )
                    .unwrap(),
                )
                .unwrap()[0],
            );
            let bound = 0.5 * d + 127.0 * (d - d16).abs() + 1e-6 * amax;
            for (gv, xv) in g.iter().zip(x) {
                assert!(
                    (f64::from(*gv) - xv).abs() <= bound,
                    "{} block {block}: {gv} vs {xv} (bound {bound})",
                    t.info.name
                );
            }
        }
        checked += 1;
    }
    assert_eq!(checked, projections(&base, |_| true).len());
}

#[test]
fn refused_merges_leave_nothing_behind() {
    let base = GgufFile::from_bytes(tiny_model(Tiny::Llama, 5)).unwrap();
    let targets = projections(&base, |n| n.contains("attn_q"));
    let pairs = random_pairs(&base, &targets, 2, 1.0, 0.3, 1);
    let other = adapter_gguf("qwen2", None, &pairs, GgmlType::F32, GgmlType::F32);
    let other = LoraAdapter::from_gguf_bytes(other, "other.gguf").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.gguf");
    let err = merge(&base, &[(&other, 1.0)], &out).unwrap_err();
    assert!(matches!(err, ModelError::Lora(_)), "{err}");
    let ok = adapter_gguf("llama", None, &pairs, GgmlType::F32, GgmlType::F32);
    let ok = LoraAdapter::from_gguf_bytes(ok, "ok.gguf").unwrap();
    let nowhere = dir.path().join("no/such/dir/m.gguf");
    let err = merge(&base, &[(&ok, 1.0)], &nowhere).unwrap_err();
    assert!(err.to_string().contains("no/such/dir/m.gguf:"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A Q4_K_M base (k-quants, and llama-quantize's fallbacks where rows are not whole
/// super-blocks): every tensor keeps its type, and the merged model runs.
#[test]
fn q4_k_m_merge_keeps_every_type() {
    let base = GgufFile::from_bytes(rullama_synth::tiny_model_with(
        Tiny::Gemma3,
        rullama_synth::Mix::Q4KM,
        5,
    ))
    .unwrap();
    let ([a1, _], _) = adapters(&base, "gemma3");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged.gguf");
    merge(&base, &[(&a1, 1.0)], &out).unwrap();
    let merged = GgufFile::open(&out).unwrap();
    let types =
        |f: &mut dyn Iterator<Item = &rullama_gguf::TensorInfo>| -> Vec<(String, GgmlType)> {
            f.map(|t| (t.name.clone(), t.ggml_type)).collect()
        };
    let base_types = types(&mut base.tensors());
    assert_eq!(types(&mut merged.tensors()), base_types);
    assert!(base_types.iter().any(|(_, t)| *t == GgmlType::Q4K));
    let model = Model::open(&out, CpuBackend::new()).unwrap();
    assert!(logits(&model).iter().all(|v| v.is_finite()));
}
