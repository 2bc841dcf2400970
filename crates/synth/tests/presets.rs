//! Synthetic models end to end: the tiny presets in every mix, written to files, parsed,
//! checked tensor by tensor, loaded by rullama's CPU reference and run; the real presets'
//! sizes; real tokenizers carried by vocab-only files.

use rullama_gguf::{GgmlType, GgufFile, Metadata};
use rullama_model::{CpuBackend, Model};
use rullama_synth::{Mix, N_TOKENS, Preset, Synth, Vocab, write_vocab_only};

fn synth(preset: Preset, mix: Mix) -> Synth {
    Synth {
        preset,
        mix,
        seed: 1,
        threads: 2,
    }
}

#[test]
fn tiny_models_parse_load_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = Preset::ALL.into_iter().filter(|p| p.is_tiny());
    for preset in tiny {
        let vocab = preset.tokenizer_style().vocab();
        for mix in Mix::ALL {
            let what = format!("{} {}", preset.name(), mix.name());
            let path = dir
                .path()
                .join(format!("{}-{}.gguf", preset.name(), mix.name()));
            let s = synth(preset, mix);
            let summary = s.write(&vocab, &path).unwrap();
            let file = GgufFile::open(&path).unwrap();
            assert_eq!(summary.n_bytes, file.as_bytes().len() as u64, "{what}");

            let (_, expected) = s.tensor_infos(vocab.n_tokens).unwrap();
            let found: Vec<_> = file.tensors().collect();
            assert_eq!(found.len(), expected.len(), "{what}");
            for (f, e) in found.iter().zip(&expected) {
                let got = (&f.name, &f.dims, f.ggml_type);
                assert_eq!(got, (&e.name, &e.dims, e.ggml_type), "{what}");
            }
            let meta = file.metadata();
            assert_eq!(meta.get_u32("general.file_type").unwrap(), mix.file_type());
            for (key, value) in &vocab.keys {
                assert_eq!(meta.get(key), Some(value), "{what}: {key}");
            }
            rullama_tokenizer::Tokenizer::from_gguf(meta).unwrap();

            let model = Model::load(&file, CpuBackend::new()).unwrap();
            assert_eq!(model.config().n_vocab, N_TOKENS, "{what}");
            let mut session = model.session(32).unwrap();
            let logits = session.feed(&[2, 270, 271, 272, 5, 299, 280]).unwrap();
            assert_eq!(logits.len(), N_TOKENS, "{what}");
            assert!(logits.iter().all(|v| v.is_finite()), "{what}: {logits:?}");
            let n = logits.len() as f32;
            let mean = logits.iter().sum::<f32>() / n;
            let sd = (logits.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / n).sqrt();
            assert!((0.05..50.0).contains(&sd), "{what}: logits spread {sd}");
        }
    }
}

#[test]
fn tiny_presets_take_the_k_quants_and_their_fallbacks() {
    let types = |preset: Preset| {
        let (_, infos) = synth(preset, Mix::Q4KM).tensor_infos(N_TOKENS).unwrap();
        move |name: &str| infos.iter().find(|i| i.name == name).unwrap().ggml_type
    };
    let gemma = types(Preset::TinyGemma3);
    assert_eq!(
        gemma("token_embd.weight"),
        GgmlType::Q6K,
        "tied: the LM head's type"
    );
    // Of 6 layers, use_more_bits picks 2 (every third from n/8 = 0) and 5 (the last eighth).
    let v: Vec<GgmlType> = (0..6)
        .map(|il| gemma(&format!("blk.{il}.attn_v.weight")))
        .collect();
    let (q4, q6) = (GgmlType::Q4K, GgmlType::Q6K);
    assert_eq!(v, [q4, q4, q6, q4, q4, q6]);
    assert_eq!(gemma("blk.0.attn_q_norm.weight"), GgmlType::F32);
    let qwen = types(Preset::TinyQwen2);
    assert_eq!(qwen("token_embd.weight"), GgmlType::Q4K, "untied");
    assert_eq!(qwen("output.weight"), GgmlType::Q6K);
    assert_eq!(qwen("blk.0.attn_q.bias"), GgmlType::F32);
    let llama = types(Preset::TinyLlama);
    assert_eq!(
        llama("token_embd.weight"),
        GgmlType::Q8_0,
        "192 is no k-quant row"
    );
    assert_eq!(llama("blk.0.attn_q.weight"), GgmlType::Q5_0);
    assert_eq!(llama("blk.0.attn_v.weight"), GgmlType::Q5_0);
    assert_eq!(
        llama("blk.1.attn_v.weight"),
        GgmlType::Q8_0,
        "Q6_K falls back"
    );
    // Rows of 512: the k-quants. Of 2 layers, use_more_bits picks only the last.
    assert_eq!(llama("blk.0.ffn_down.weight"), GgmlType::Q4K);
    assert_eq!(llama("blk.1.ffn_down.weight"), GgmlType::Q6K);
}

/// The sizes of the real models' files, against what llama.cpp's Q4_K_M of them weighs.
#[test]
fn real_presets_have_their_models_size() {
    // (preset, parameters in billions, Q4_K_M GB): parameters of the text model.
    let cases = [
        // gemma-3-270m: the tensor bytes of our cached Q4_K_M file (the file adds 6.5 MB of
        // tokenizer, 2.6% of it).
        (Preset::Gemma3_270m, 0.268, 0.2466),
        (Preset::Qwen25_0_5b, 0.494, 0.398),
        (Preset::Gemma3_1b, 1.00, 0.806),
        (Preset::Gemma3_4b, 3.88, 2.49),
        (Preset::Qwen25_1_5b, 1.54, 0.986),
        (Preset::Qwen25_7b, 7.62, 4.68),
        (Preset::Llama8b, 8.03, 4.92),
    ];
    for (preset, params, gb) in cases {
        let s = synth(preset, Mix::Q4KM);
        let (plan, infos) = s.tensor_infos(preset.shape().n_vocab).unwrap();
        let n_params = plan.n_params() as f64 / 1e9;
        let n_bytes = infos.iter().map(|i| i.n_bytes).sum::<u64>() as f64 / 1e9;
        let name = preset.name();
        eprintln!("{name}: {n_params:.3} B parameters, {n_bytes:.3} GB");
        assert!(
            (n_params / params - 1.0).abs() < 0.01,
            "{name}: {n_params} B"
        );
        assert!((n_bytes / gb - 1.0).abs() < 0.03, "{name}: {n_bytes} GB");
    }
}

/// SmolLM2-135M has no Q4_K_M file to weigh here (the cached real file is Q4_1): its
/// parameter count is the real file's (134.52 M, `rullama inspect`).
#[test]
fn smollm2_preset_has_the_real_files_parameters() {
    let s = synth(Preset::Smollm2_135m, Mix::Q4KM);
    let (plan, _) = s
        .tensor_infos(Preset::Smollm2_135m.shape().n_vocab)
        .unwrap();
    let n_params = plan.n_params() as f64 / 1e6;
    assert!((n_params / 134.52 - 1.0).abs() < 0.001, "{n_params} M");
}

/// The vocab-only file of each cached real model tokenizes as the model does, and a model
/// synthesized from it takes its vocabulary. Skipped (with a note) for models not fetched.
#[test]
fn vocab_only_files_carry_the_real_tokenizers() {
    let dir = tempfile::tempdir().unwrap();
    let text = "Hello, synthetic world! <start_of_turn>user 1234 ünïcödé";
    let cases = [
        ("gemma3-270m", Preset::TinyGemma3),
        ("qwen2.5-0.5b", Preset::TinyQwen2),
        ("smollm2-135m", Preset::TinyLlama),
    ];
    for (model, preset) in cases {
        let Some(path) = rullama_gguf::store::cached_test_model(model) else {
            eprintln!("skipped {model}: not in the cache (cargo xtask models)");
            continue;
        };
        let vocab_path = dir.path().join(format!("{model}-vocab.gguf"));
        let n = write_vocab_only(&path, &vocab_path).unwrap();
        assert!(n < 16_000_000, "{model}: {n} bytes");
        let vocab_file = GgufFile::open(&vocab_path).unwrap();
        assert_eq!(vocab_file.tensors().len(), 0);

        let real = GgufFile::open(&path).unwrap();
        let opts = rullama_tokenizer::EncodeOptions {
            add_special: true,
            parse_special: true,
        };
        let encode = |meta: &Metadata| {
            let tok = rullama_tokenizer::Tokenizer::from_gguf(meta).unwrap();
            tok.encode(text, opts)
        };
        assert_eq!(
            encode(vocab_file.metadata()),
            encode(real.metadata()),
            "{model}"
        );

        let vocab = Vocab::open(&vocab_path).unwrap();
        let out = dir.path().join(format!("{model}-synth.gguf"));
        synth(preset, Mix::Q8_0).write(&vocab, &out).unwrap();
        let synth_file = GgufFile::open(&out).unwrap();
        let embd = synth_file.tensor("token_embd.weight").unwrap();
        assert_eq!(embd.info.dims[1] as usize, vocab.n_tokens, "{model}");
        assert_eq!(
            encode(synth_file.metadata()),
            encode(real.metadata()),
            "{model}"
        );
    }
}
