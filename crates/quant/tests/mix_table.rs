//! The mixes on real models' shapes, against types worked out by hand from llama.cpp's
//! `src/llama-quant.cpp` (`llama_tensor_get_type_impl`, `tensor_type_fallback`), not from
//! the code under test.

use rullama_gguf::GgmlType;
use rullama_quant::mix::{FileType, MixTensor, ModelFacts, tensor_types};

use GgmlType as T;

/// A dense model's tensors in file order: (name, dims, layer).
fn model(
    d: u64,
    ff: u64,
    q_out: u64,
    kv_out: u64,
    vocab: u64,
    layers: usize,
) -> Vec<(String, Vec<u64>)> {
    let mut t = vec![("token_embd.weight".to_string(), vec![d, vocab])];
    for il in 0..layers {
        let mut blk = |name: &str, dims: Vec<u64>| t.push((format!("blk.{il}.{name}"), dims));
        blk("attn_norm.weight", vec![d]);
        blk("attn_q.weight", vec![d, q_out]);
        blk("attn_k.weight", vec![d, kv_out]);
        blk("attn_v.weight", vec![d, kv_out]);
        blk("attn_q.bias", vec![q_out]);
        blk("attn_output.weight", vec![q_out, d]);
        blk("attn_q_norm.weight", vec![256]);
        blk("ffn_norm.weight", vec![d]);
        blk("ffn_gate.weight", vec![d, ff]);
        blk("ffn_up.weight", vec![d, ff]);
        blk("ffn_down.weight", vec![ff, d]);
    }
    t.push(("output_norm.weight".to_string(), vec![d]));
    t
}

fn types_of(
    ftype: FileType,
    facts: &ModelFacts,
    tensors: &[(String, Vec<u64>)],
) -> impl Fn(&str) -> GgmlType {
    let mix: Vec<MixTensor<'_>> = tensors
        .iter()
        .map(|(name, dims)| MixTensor {
            name,
            dims,
            ggml_type: GgmlType::F32,
        })
        .collect();
    let types = tensor_types(ftype, facts, &mix).unwrap();
    let names: Vec<String> = tensors.iter().map(|(n, _)| n.clone()).collect();
    move |name: &str| types[names.iter().position(|n| n == name).unwrap()]
}

/// What one file type gives a model whose rows are all whole k-quant blocks.
struct Expect {
    ftype: FileType,
    /// The tied token embedding (the LM head).
    embd: GgmlType,
    /// attn_q, attn_k, ffn_gate, ffn_up.
    rest: GgmlType,
    attn_output: GgmlType,
    /// attn_v of each layer.
    attn_v: Vec<GgmlType>,
    /// ffn_down of each layer.
    ffn_down: Vec<GgmlType>,
}

/// gemma-3-4b: 34 layers, d_model 2560, n_ff 10240, 8 heads and 4 KV heads of 256 (n_gqa 2),
/// tied. Every row (2560, 2048, 10240) is whole 256-blocks, so no fallback.
#[test]
fn gemma3_4b() {
    let n = 34;
    let facts = ModelFacts {
        arch: "gemma3".into(),
        n_layer: n,
        n_head: 8,
        n_head_kv: 4,
        n_expert: 0,
    };
    let tensors = model(2560, 10240, 2048, 1024, 262_208, n);
    // use_more_bits(i, 34): i < 34/8 = 4, i >= 7*34/8 = 29, or (i - 4) % 3 == 2.
    let more = [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 29, 30, 31, 32, 33];
    let by_layer = |f: &dyn Fn(usize) -> GgmlType| (0..n).map(f).collect::<Vec<_>>();
    let more_bits =
        |hi: GgmlType, lo: GgmlType| by_layer(&|i| if more.contains(&i) { hi } else { lo });
    let all = |t: GgmlType| vec![t; n];
    let plain = |ftype, t, embd| Expect {
        ftype,
        embd,
        rest: t,
        attn_output: t,
        attn_v: all(t),
        ffn_down: all(t),
    };
    let cases = [
        plain(FileType::F32, T::F32, T::F32),
        plain(FileType::F16, T::F16, T::F16),
        plain(FileType::Bf16, T::Bf16, T::Bf16),
        // The LM head of every quantized ftype but Q8_0 is Q6_K.
        plain(FileType::Q4_0, T::Q4_0, T::Q6K),
        plain(FileType::Q4_1, T::Q4_1, T::Q6K),
        plain(FileType::Q5_0, T::Q5_0, T::Q6K),
        plain(FileType::Q5_1, T::Q5_1, T::Q6K),
        plain(FileType::Q8_0, T::Q8_0, T::Q8_0),
        // Q2_K: attn_v Q3_K (n_gqa 2 < 4), ffn_down and attn_output Q3_K.
        Expect {
            attn_output: T::Q3K,
            attn_v: all(T::Q3K),
            ffn_down: all(T::Q3K),
            ..plain(FileType::Q2K, T::Q2K, T::Q6K)
        },
        plain(FileType::Q3KS, T::Q3K, T::Q6K),
        // Q3_K_M: attn_v Q5_K for the first two, ffn_down Q5_K below n/16 = 2, else Q4_K.
        Expect {
            attn_output: T::Q4K,
            attn_v: by_layer(&|i| if i < 2 { T::Q5K } else { T::Q4K }),
            ffn_down: by_layer(&|i| if i < 2 { T::Q5K } else { T::Q4K }),
            ..plain(FileType::Q3KM, T::Q3K, T::Q6K)
        },
        Expect {
            attn_output: T::Q5K,
            attn_v: all(T::Q5K),
            ffn_down: all(T::Q5K),
            ..plain(FileType::Q3KL, T::Q3K, T::Q6K)
        },
        // Q4_K_S: attn_v Q5_K for the first four, ffn_down Q5_K below n/8 = 4.
        Expect {
            attn_v: by_layer(&|i| if i < 4 { T::Q5K } else { T::Q4K }),
            ffn_down: by_layer(&|i| if i < 4 { T::Q5K } else { T::Q4K }),
            ..plain(FileType::Q4KS, T::Q4K, T::Q6K)
        },
        Expect {
            attn_v: more_bits(T::Q6K, T::Q4K),
            ffn_down: more_bits(T::Q6K, T::Q4K),
            ..plain(FileType::Q4KM, T::Q4K, T::Q6K)
        },
        plain(FileType::Q5KS, T::Q5K, T::Q6K),
        Expect {
            attn_v: more_bits(T::Q6K, T::Q5K),
            ffn_down: more_bits(T::Q6K, T::Q5K),
            ..plain(FileType::Q5KM, T::Q5K, T::Q6K)
        },
        plain(FileType::Q6K, T::Q6K, T::Q6K),
    ];
    assert_eq!(cases.len(), FileType::ALL.len());
    for e in cases {
        let ty = types_of(e.ftype, &facts, &tensors);
        let f = e.ftype;
        assert_eq!(ty("token_embd.weight"), e.embd, "{f}: token_embd");
        assert_eq!(ty("output_norm.weight"), T::F32, "{f}");
        for il in 0..n {
            let name = |s: &str| format!("blk.{il}.{s}");
            for s in [
                "attn_q.weight",
                "attn_k.weight",
                "ffn_gate.weight",
                "ffn_up.weight",
            ] {
                assert_eq!(ty(&name(s)), e.rest, "{f}: {}", name(s));
            }
            for s in [
                "attn_norm.weight",
                "attn_q.bias",
                "attn_q_norm.weight",
                "ffn_norm.weight",
            ] {
                assert_eq!(ty(&name(s)), T::F32, "{f}: {}", name(s));
            }
            assert_eq!(
                ty(&name("attn_output.weight")),
                e.attn_output,
                "{f}: layer {il}"
            );
            assert_eq!(ty(&name("attn_v.weight")), e.attn_v[il], "{f}: attn_v {il}");
            assert_eq!(
                ty(&name("ffn_down.weight")),
                e.ffn_down[il],
                "{f}: ffn_down {il}"
            );
        }
    }
}

/// qwen2.5-0.5b: 24 layers, d_model 896 (3.5 blocks of 256: the fallbacks), n_ff 4864 (19
/// blocks), 14 heads and 2 KV heads of 64 (n_gqa 7), tied.
#[test]
fn qwen25_0_5b_takes_the_fallbacks() {
    let n = 24;
    let facts = ModelFacts {
        arch: "qwen2".into(),
        n_layer: n,
        n_head: 14,
        n_head_kv: 2,
        n_expert: 0,
    };
    let tensors = model(896, 4864, 896, 128, 151_936, n);
    // use_more_bits(i, 24): i < 3, i >= 21, or (i - 3) % 3 == 2.
    let more = [0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23];
    let ty = types_of(FileType::Q4KM, &facts, &tensors);
    // The LM head: 896 is no whole 256-block of Q4_K, so Q8_0 (no fallback needed).
    assert_eq!(ty("token_embd.weight"), T::Q8_0);
    for il in 0..n {
        let name = |s: &str| format!("blk.{il}.{s}");
        // Q4_K falls back to Q5_0, Q6_K to Q8_0, on rows of 896.
        assert_eq!(ty(&name("attn_q.weight")), T::Q5_0);
        assert_eq!(ty(&name("attn_output.weight")), T::Q5_0);
        let v = if more.contains(&il) { T::Q8_0 } else { T::Q5_0 };
        assert_eq!(ty(&name("attn_v.weight")), v, "attn_v {il}");
        // Rows of 4864 take the k-quants.
        let down = if more.contains(&il) { T::Q6K } else { T::Q4K };
        assert_eq!(ty(&name("ffn_down.weight")), down, "ffn_down {il}");
    }
    // Q4_0: the LM head's Q6_K (896 is whole 32-blocks) falls back to Q8_0.
    assert_eq!(
        types_of(FileType::Q4_0, &facts, &tensors)("token_embd.weight"),
        T::Q8_0
    );
    // Q2_K: attn_v Q4_K as n_gqa >= 4, then Q5_0 for its rows; Q2_K itself falls to Q4_0.
    let q2 = types_of(FileType::Q2K, &facts, &tensors);
    assert_eq!(q2("blk.0.attn_v.weight"), T::Q5_0);
    assert_eq!(q2("blk.0.attn_q.weight"), T::Q4_0);
    assert_eq!(q2("blk.0.ffn_down.weight"), T::Q3K);
    // Q5_K_S: Q5_K falls back to Q5_1.
    let q5 = types_of(FileType::Q5KS, &facts, &tensors);
    assert_eq!(q5("blk.0.ffn_up.weight"), T::Q5_1);
}

/// An untied model keeps its token embedding in the plain type; tensors already quantized
/// and never quantized keep theirs; a Q8_0 file refuses rows that are not whole 32-blocks.
#[test]
fn untied_kept_types_and_refusals() {
    let facts = ModelFacts {
        arch: "llama".into(),
        n_layer: 1,
        n_head: 4,
        n_head_kv: 4,
        n_expert: 0,
    };
    let mix = [
        MixTensor {
            name: "token_embd.weight",
            dims: &[256, 100],
            ggml_type: T::F16,
        },
        MixTensor {
            name: "output.weight",
            dims: &[256, 100],
            ggml_type: T::F16,
        },
        MixTensor {
            name: "blk.0.attn_norm.weight",
            dims: &[256],
            ggml_type: T::Q8_0,
        },
    ];
    let types = tensor_types(FileType::Q4KM, &facts, &mix).unwrap();
    assert_eq!(types, [T::Q4K, T::Q6K, T::Q8_0]);
    let odd = [MixTensor {
        name: "blk.0.ffn_up.weight",
        dims: &[48, 64],
        ggml_type: T::F32,
    }];
    let err = tensor_types(FileType::Q8_0, &facts, &odd).unwrap_err();
    assert!(err.to_string().contains("blk.0.ffn_up.weight"), "{err}");
    // The K-quants' fallback ends in F16 where 32 does not divide the row either.
    assert_eq!(
        tensor_types(FileType::Q4KM, &facts, &odd).unwrap(),
        [T::F16]
    );
}

/// The cached real files that llama-quantize wrote (`cargo xtask models`): the types the mix
/// gives their shapes are the types they hold. (The cached qwen2.5-coder Q4_K_M is left out:
/// the llama.cpp that made it counted layers in file order, `blk.10` before `blk.2`, so its
/// `use_more_bits` layers differ from the current llama.cpp's, which counts by layer number.)
#[test]
fn real_files_hold_the_types_of_their_mix() {
    let dir = rullama_gguf::store::models_cache_dir().unwrap();
    for model in [
        "gemma-3-270m-q4_k_m.gguf",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
    ] {
        let path = dir.join(model);
        assert!(
            path.exists(),
            "{} is missing: run `cargo xtask models`",
            path.display()
        );
        let file = rullama_gguf::GgufFile::open(&path).unwrap();
        let meta = file.metadata();
        let id = meta.get_u32("general.file_type").unwrap();
        let ftype = FileType::parse(&id.to_string()).unwrap();
        let facts = ModelFacts::from_metadata(meta).unwrap();
        let infos: Vec<_> = file.tensors().collect();
        let mix: Vec<MixTensor<'_>> = infos
            .iter()
            .map(|i| MixTensor {
                name: &i.name,
                dims: &i.dims,
                // As converted: what a never-quantized tensor keeps is F32 in these files.
                ggml_type: GgmlType::F32,
            })
            .collect();
        let types = tensor_types(ftype, &facts, &mix).unwrap();
        for (info, t) in infos.iter().zip(types) {
            assert_eq!(info.ggml_type, t, "{model} ({ftype}): {}", info.name);
        }
    }
}
