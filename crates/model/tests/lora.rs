//! LoRA adapters on the CPU reference, on the tiny synthetic models of each architecture:
//! a model with adapters gives the logits of the model whose matrices have the updates
//! merged in (F32 copies, the sum rounded once), several adapters at once with their own
//! scales and file types; scale 0 gives the base bit for bit; and every kind of bad
//! adapter is a typed error naming the file and what is wrong.
//!
//! The bar is `tests/gpu.rs`'s for two f32 paths over the same weights (`LOGIT_REL`,
//! `TOP10_NATS`): the merged model rounds `W + s·B·A` once, the adapter path rounds
//! `A·x`, `s·B` and `B·(A·x)` apart, each within f32 rounding of the same exact value.

mod common;

use common::gpu::{Deviation, LOGIT_REL, TOP10_NATS};
use common::lora::{Pair, adapter_gguf, merged, projections, random_pairs, rounded};
use rullama_gguf::{GgmlType, GgufFile};
use rullama_model::{CpuBackend, LoraAdapter, LoraError, Model, ModelError, OutputRows};
use rullama_synth::{Tiny, tiny_model};

const PROMPT: [u32; 6] = [2, 40, 41, 300, 7, 99];

fn logits(model: &Model<CpuBackend>) -> Vec<f32> {
    let mut s = model.session(32).unwrap();
    s.forward(&PROMPT, 0, OutputRows::All).unwrap().data
}

/// Two adapters for `file`: every projection at rank 3 with alpha 6 (F32), and q and down
/// at rank 2 without alpha (A F16, B BF16); their pairs as the files hold them.
fn two_adapters(file: &GgufFile<Vec<u8>>, arch: &str) -> [(Vec<u8>, Vec<Pair>); 2] {
    let all = projections(file, |_| true);
    let some = projections(file, |n| n.contains("attn_q") || n.contains("ffn_down"));
    // The factors each will run with: alpha / rank * scale, and scale alone.
    let p1 = random_pairs(file, &all, 3, 6.0 / 3.0 * 0.5, 0.3, 1);
    let p2 = rounded(
        &random_pairs(file, &some, 2, 1.5, 0.3, 2),
        GgmlType::F16,
        GgmlType::Bf16,
    );
    [
        (
            adapter_gguf(arch, Some(6.0), &p1, GgmlType::F32, GgmlType::F32),
            p1,
        ),
        (
            adapter_gguf(arch, None, &p2, GgmlType::F16, GgmlType::Bf16),
            p2,
        ),
    ]
}

fn adapter_matches_merged_weights(tiny: Tiny) {
    let file = GgufFile::from_bytes(tiny_model(tiny, 5)).unwrap();
    let [(bytes1, p1), (bytes2, p2)] = two_adapters(&file, tiny.arch_name());
    let a1 = LoraAdapter::from_gguf_bytes(bytes1, "one.gguf").unwrap();
    let a2 = LoraAdapter::from_gguf_bytes(bytes2, "two.gguf").unwrap();
    assert_eq!((a1.alpha(), a2.alpha()), (6.0, 0.0));

    let mut model = Model::load(&file, CpuBackend::new()).unwrap();
    let base = logits(&model);
    model.apply_loras(&[(&a1, 0.5), (&a2, 1.5)]).unwrap();
    let with = logits(&model);
    let reference = Model::load(&merged(&file, &[(&p1, 1.0), (&p2, 1.5)]), CpuBackend::new());
    let want = logits(&reference.unwrap());

    let (mut dev, mut moved) = (Deviation::default(), Deviation::default());
    let n_vocab = model.config().n_vocab;
    for ((got, want), base) in with
        .chunks(n_vocab)
        .zip(want.chunks(n_vocab))
        .zip(base.chunks(n_vocab))
    {
        dev.add(got, want);
        moved.add(base, want);
    }
    eprintln!("{tiny:?}: adapter vs merged {dev:?}; base vs merged {moved:?}");
    assert!(dev.logit_rel <= LOGIT_REL, "{tiny:?}: {dev:?}");
    assert!(dev.top10_nats <= TOP10_NATS, "{tiny:?}: {dev:?}");
    // The updates matter: without them the logits are far from the merged model's.
    assert!(moved.logit_rel > 100.0 * LOGIT_REL, "{tiny:?}: {moved:?}");
}

#[test]
fn gemma3_adapter_matches_merged_weights() {
    adapter_matches_merged_weights(Tiny::Gemma3);
}

#[test]
fn llama_adapter_matches_merged_weights() {
    adapter_matches_merged_weights(Tiny::Llama);
}

#[test]
fn qwen2_adapter_matches_merged_weights() {
    adapter_matches_merged_weights(Tiny::Qwen2);
}

/// A Q8_0 A (rows of whole blocks) with an F16 B, as `convert_lora_to_gguf.py --outtype
/// q8_0` writes rows too short for a block.
#[test]
fn q8_0_adapter_matches_merged_weights() {
    let file = GgufFile::from_bytes(tiny_model(Tiny::Qwen2, 6)).unwrap();
    let targets = projections(&file, |n| n.contains("attn_v") || n.contains("ffn_up"));
    let pairs = rounded(
        &random_pairs(&file, &targets, 4, 2.0, 0.3, 3),
        GgmlType::Q8_0,
        GgmlType::F16,
    );
    let bytes = adapter_gguf("qwen2", Some(8.0), &pairs, GgmlType::Q8_0, GgmlType::F16);
    let adapter = LoraAdapter::from_gguf_bytes(bytes, "q8.gguf").unwrap();
    let mut model = Model::load(&file, CpuBackend::new()).unwrap();
    model.apply_loras(&[(&adapter, 1.0)]).unwrap();
    let reference = Model::load(&merged(&file, &[(&pairs, 2.0)]), CpuBackend::new()).unwrap();
    let mut dev = Deviation::default();
    let n_vocab = model.config().n_vocab;
    for (got, want) in logits(&model)
        .chunks(n_vocab)
        .zip(logits(&reference).chunks(n_vocab))
    {
        dev.add(got, want);
    }
    assert!(
        dev.logit_rel <= LOGIT_REL && dev.top10_nats <= TOP10_NATS,
        "{dev:?}"
    );
}

/// Scale 0 leaves the adapter out of the graph (as llama.cpp does): the base's logits bit
/// for bit; an empty list removes what was applied.
#[test]
fn scale_zero_and_no_adapter_give_the_base_bit_for_bit() {
    for tiny in [Tiny::Gemma3, Tiny::Llama, Tiny::Qwen2] {
        let file = GgufFile::from_bytes(tiny_model(tiny, 5)).unwrap();
        let [(bytes, _), _] = two_adapters(&file, tiny.arch_name());
        let adapter = LoraAdapter::from_gguf_bytes(bytes, "one.gguf").unwrap();
        let mut model = Model::load(&file, CpuBackend::new()).unwrap();
        let bits =
            |m: &Model<CpuBackend>| -> Vec<u32> { logits(m).iter().map(|v| v.to_bits()).collect() };
        let base = bits(&model);
        model.apply_loras(&[(&adapter, 0.0)]).unwrap();
        assert_eq!(bits(&model), base, "{tiny:?}: scale 0");
        model.apply_loras(&[(&adapter, 1.0)]).unwrap();
        assert_ne!(bits(&model), base, "{tiny:?}: scale 1");
        model.apply_loras(&[]).unwrap();
        assert_eq!(bits(&model), base, "{tiny:?}: none");
        assert!(model.loras().is_empty());
    }
}

/// The file and what the model says when it is applied.
fn refused(bytes: Vec<u8>) -> LoraError {
    let file = GgufFile::from_bytes(tiny_model(Tiny::Llama, 5)).unwrap();
    let mut model = Model::load(&file, CpuBackend::new()).unwrap();
    let adapter = match LoraAdapter::from_gguf_bytes(bytes, "bad.gguf") {
        Ok(a) => a,
        Err(e) => return e,
    };
    match model.apply_loras(&[(&adapter, 1.0)]) {
        Err(ModelError::Lora(e)) => {
            assert!(model.loras().is_empty(), "a refused adapter was applied");
            e
        }
        other => panic!("expected a LoRA error, got {other:?}"),
    }
}

/// One pair for `base` of `n_in` x `n_out` at rank 2.
fn pair(base: &str, n_in: usize, n_out: usize) -> Pair {
    Pair {
        base: base.into(),
        n_in,
        n_out,
        rank: 2,
        a: vec![0.5; 2 * n_in],
        b: vec![0.25; 2 * n_out],
    }
}

fn llama_adapter(pairs: &[Pair]) -> Vec<u8> {
    adapter_gguf("llama", Some(4.0), pairs, GgmlType::F32, GgmlType::F32)
}

#[test]
fn hostile_adapters_are_typed_errors() {
    let file = GgufFile::from_bytes(tiny_model(Tiny::Llama, 5)).unwrap();
    let q = file
        .tensor_info("blk.0.attn_q.weight")
        .unwrap()
        .dims
        .clone();
    let (d, q_out) = (q[0] as usize, q[1] as usize);
    let show = |e: &LoraError| {
        let text = e.to_string();
        assert!(text.contains("bad.gguf"), "no file named: {text}");
        text
    };

    // A shape that is not the base tensor's.
    let e = refused(llama_adapter(&[pair("blk.0.attn_q.weight", d + 32, q_out)]));
    assert!(
        matches!(&e, LoraError::Shape { tensor, .. } if tensor == "blk.0.attn_q.weight.lora_a")
    );
    let e = refused(llama_adapter(&[pair("blk.0.attn_q.weight", d, q_out + 1)]));
    assert!(
        matches!(&e, LoraError::Shape { tensor, .. } if tensor == "blk.0.attn_q.weight.lora_b")
    );
    show(&e);

    // A base tensor the model does not have, and one that is not a projection.
    let e = refused(llama_adapter(&[pair("blk.9.attn_q.weight", d, q_out)]));
    assert!(matches!(&e, LoraError::UnknownTensor { base, .. } if base == "blk.9.attn_q.weight"));
    assert!(show(&e).contains("blk.9.attn_q.weight"));
    let e = refused(llama_adapter(&[pair("token_embd.weight", d, 512)]));
    assert!(matches!(&e, LoraError::NotAProjection { base, .. } if base == "token_embd.weight"));

    // Another architecture.
    let ok = [pair("blk.0.attn_q.weight", d, q_out)];
    let e = refused(adapter_gguf(
        "qwen2",
        None,
        &ok,
        GgmlType::F32,
        GgmlType::F32,
    ));
    assert!(matches!(&e, LoraError::Architecture { adapter, model, .. }
        if adapter == "qwen2" && model == "llama"));
    show(&e);

    // Not an adapter: a model; an adapter of another type.
    let e = refused(tiny_model(Tiny::Llama, 1));
    assert!(matches!(&e, LoraError::NotAnAdapter { found, .. } if found == "absent"));
    show(&e);
    let mut w = rullama_gguf::GgufWriter::new();
    w.set("general.architecture", "llama");
    w.set("general.type", "adapter");
    w.set("adapter.type", "control_vector");
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    let e = refused(bytes);
    assert!(matches!(&e, LoraError::NotLora { found, .. } if found == "`control_vector`"));

    // Truncated: every cut is an error naming the file, never a panic.
    let whole = llama_adapter(&ok);
    for cut in [8, 100, whole.len() / 2, whole.len() - 1] {
        let e = refused(whole[..cut].to_vec());
        assert!(matches!(&e, LoraError::Gguf { .. }), "cut at {cut}: {e:?}");
        show(&e);
    }

    // Half a pair; a tensor of no pair.
    let mut w = rullama_gguf::GgufWriter::new();
    w.set("general.architecture", "llama");
    w.set("general.type", "adapter");
    w.set("adapter.type", "lora");
    let a = vec![0u8; 4 * 2 * d];
    w.add_tensor(
        "blk.0.attn_q.weight.lora_a",
        &[d as u64, 2],
        GgmlType::F32,
        a.clone(),
    )
    .unwrap();
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    let e = refused(bytes);
    assert!(
        matches!(
            &e,
            LoraError::MissingHalf {
                missing: "lora_b",
                ..
            }
        ),
        "{e:?}"
    );
    w.add_tensor(
        "blk.0.attn_q.weight.lora_c",
        &[d as u64, 2],
        GgmlType::F32,
        a,
    )
    .unwrap();
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    let e = refused(bytes);
    assert!(matches!(&e, LoraError::UnexpectedTensor { tensor, .. }
        if tensor == "blk.0.attn_q.weight.lora_c"));

    // A's rank not B's.
    let mut bad = pair("blk.0.attn_q.weight", d, q_out);
    bad.rank = 3;
    bad.a = vec![0.5; 3 * d];
    let mut w = rullama_gguf::GgufWriter::new();
    w.set("general.architecture", "llama");
    w.set("general.type", "adapter");
    w.set("adapter.type", "lora");
    let f = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    w.add_tensor(
        "blk.0.attn_q.weight.lora_a",
        &[d as u64, 3],
        GgmlType::F32,
        f(&bad.a),
    )
    .unwrap();
    let b = f(&vec![0.25; 2 * q_out]);
    w.add_tensor(
        "blk.0.attn_q.weight.lora_b",
        &[2, q_out as u64],
        GgmlType::F32,
        b,
    )
    .unwrap();
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    let e = refused(bytes);
    assert!(
        matches!(&e, LoraError::Shape { tensor, .. } if tensor == "blk.0.attn_q.weight.lora_b"),
        "{e:?}"
    );

    // A missing file.
    let e = LoraAdapter::open("/nonexistent/bad.gguf").unwrap_err();
    assert!(matches!(&e, LoraError::Io { .. }));
    show(&e);
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(48))]

    /// A valid adapter cut anywhere, or with any byte changed, is read and applied or
    /// refused with an error: never a panic.
    #[test]
    fn damaged_adapters_never_panic(cut in 0.0f64..1.0, at in 0.0f64..1.0, byte: u8) {
        let file = GgufFile::from_bytes(tiny_model(Tiny::Llama, 5)).unwrap();
        let targets = projections(&file, |n| n.contains("attn_q") || n.contains("ffn_up"));
        let pairs = random_pairs(&file, &targets, 2, 1.0, 0.3, 1);
        let whole = adapter_gguf("llama", Some(2.0), &pairs, GgmlType::F16, GgmlType::F32);
        let mut flipped = whole.clone();
        let i = ((at * whole.len() as f64) as usize).min(whole.len() - 1);
        flipped[i] = byte;
        let cut = whole[..(cut * whole.len() as f64) as usize].to_vec();
        let mut model = Model::load(&file, CpuBackend::new()).unwrap();
        for bytes in [cut, flipped] {
            if let Ok(adapter) = LoraAdapter::from_gguf_bytes(bytes, "damaged.gguf") {
                let _ = model.apply_loras(&[(&adapter, 1.0)]);
            }
        }
    }
}
