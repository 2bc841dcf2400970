//! `rullama quantize` on tiny synthetic models: every file type, the rule's types, the
//! reference quantizers' bytes, a model that loads and generates, and hostile inputs.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use rullama_gguf::{GgmlType, GgufFile, GgufWriter};
use rullama_model::{CpuBackend, Model};
use rullama_quant::mix::{FileType, MixTensor, ModelFacts, llama_order, tensor_types};
use rullama_quant::{Format, dequantize_row, quantize, row_bytes};
use rullama_synth::{Mix, N_TOKENS, Tiny, tiny_model_with};
use serde_json::Value;

/// `rullama quantize IN OUT TYPE EXTRA...`: (success, stdout, stderr).
fn run(input: &Path, output: &Path, ty: &str, extra: &[&str]) -> (bool, String, String) {
    let mut args = vec![
        "quantize",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
        ty,
    ];
    args.extend_from_slice(extra);
    common::rullama(&args)
}

/// The tiny model `tiny` written in `mix` into `dir`.
fn tiny_file(dir: &Path, tiny: Tiny, mix: Mix) -> std::path::PathBuf {
    let path = dir.join(format!("{tiny:?}-{}.gguf", mix.cli_name()));
    std::fs::write(&path, tiny_model_with(tiny, mix, 7)).unwrap();
    path
}

/// The types the rule gives `file`'s tensors in `ftype`.
fn rule_types(file: &GgufFile<impl AsRef<[u8]>>, ftype: FileType) -> Vec<GgmlType> {
    let facts = ModelFacts::from_metadata(file.metadata()).unwrap();
    let mix: Vec<MixTensor<'_>> = file
        .tensors()
        .map(|i| MixTensor {
            name: &i.name,
            dims: &i.dims,
            ggml_type: i.ggml_type,
        })
        .collect();
    tensor_types(ftype, &facts, &mix).unwrap()
}

/// Only `keep` (and nothing half-written) is left in `dir` besides the inputs.
fn assert_no_partial(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.ends_with(".partial"), "left behind: {name}");
    }
}

/// Every file type from an F32 tiny Qwen 2 (rows of 256: the k-quants; untied) and Llama
/// (rows of 192: their fallbacks; tied): each tensor has the rule's type, and its first and
/// last rows exactly the bytes the reference quantizer gives their values (all rows would
/// double the test's time: the k-quant searches are slow); the metadata is the input's with
/// the file type set; the model loads and generates on the CPU reference.
#[test]
fn every_file_type_from_f32() {
    let dir = tempfile::tempdir().unwrap();
    for tiny in [Tiny::Qwen2, Tiny::Llama] {
        let input = tiny_file(dir.path(), tiny, Mix::F32);
        let src = GgufFile::open(&input).unwrap();
        for ftype in FileType::ALL {
            let what = format!("{tiny:?} {ftype}");
            let out = dir.path().join(format!("{tiny:?}-{ftype}.gguf"));
            let (ok, stdout, stderr) = run(&input, &out, ftype.name(), &["--json", "-t", "2"]);
            assert!(ok, "{what}: {stderr}");
            let report: Value = serde_json::from_str(&stdout).unwrap();
            assert_eq!(report["type"], ftype.name(), "{what}");
            let file = GgufFile::open(&out).unwrap();
            assert_eq!(
                report["output_bytes"],
                file.as_bytes().len() as u64,
                "{what}"
            );

            let meta = file.metadata();
            assert_eq!(
                meta.get_u32("general.file_type").unwrap(),
                ftype.id(),
                "{what}"
            );
            assert_eq!(meta.get_u32("general.quantization_version").unwrap(), 2);
            for (key, value) in src.metadata().iter() {
                if key != "general.file_type" {
                    assert_eq!(meta.get(key), Some(value), "{what}: {key}");
                }
            }
            assert_eq!(
                meta.len(),
                src.metadata().len(),
                "{what}: no key added or lost"
            );

            let expected = rule_types(&src, ftype);
            // llama-quantize's order: outside the blocks first, then by layer and name.
            let names: Vec<&str> = src.tensors().map(|i| i.name.as_str()).collect();
            let order: Vec<&str> = llama_order(&names).into_iter().map(|i| names[i]).collect();
            let written: Vec<&str> = file.tensors().map(|i| i.name.as_str()).collect();
            assert_eq!(written, order, "{what}");
            for (a, t) in src.tensor_views().zip(expected) {
                let name = &a.info.name;
                let b = file.tensor(name).unwrap();
                assert_eq!(b.info.dims, a.info.dims, "{what}: {name}");
                assert_eq!(b.info.ggml_type, t, "{what}: {name}");
                let (rows, n) = (a.info.n_rows() as usize, a.info.row_len() as usize);
                let (from, to) = (Format::Ggml(a.info.ggml_type), Format::Ggml(t));
                for row in [0, rows - 1] {
                    let values = dequantize_row(from, a.data, n, row).unwrap();
                    let reference = quantize(to, &values).unwrap();
                    let bytes = row_bytes(to, n).unwrap();
                    let ours = &b.data[row * bytes..(row + 1) * bytes];
                    assert!(ours == reference.as_slice(), "{what}: {name} row {row}");
                }
            }

            let model = Model::load(&file, CpuBackend::new()).unwrap();
            let mut session = model.session(16).unwrap();
            let mut logits = session.feed(&[2, 270, 271, 272]).unwrap();
            for _ in 0..3 {
                assert_eq!(logits.len(), N_TOKENS, "{what}");
                assert!(logits.iter().all(|v| v.is_finite()), "{what}");
                let next = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b]));
                logits = session.feed(&[next.unwrap() as u32]).unwrap();
            }
        }
        assert_no_partial(dir.path());
    }
}

/// Q4_K_M of every tiny F32 model has the types of the synthetic crate's own Q4_K_M file;
/// the thread count changes no byte; the text summary names sizes and bits per weight.
#[test]
fn q4_k_m_matches_synths_file_and_threads_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for tiny in Tiny::ALL {
        let input = tiny_file(dir.path(), tiny, Mix::F32);
        let synth = GgufFile::from_bytes(tiny_model_with(tiny, Mix::Q4KM, 7)).unwrap();
        let one = dir.path().join(format!("{tiny:?}-1.gguf"));
        let three = dir.path().join(format!("{tiny:?}-3.gguf"));
        let (ok, stdout, stderr) = run(&input, &one, "Q4_K_M", &["-t", "1"]);
        assert!(ok, "{stderr}");
        for needle in ["Q4_K_M", "bits per weight: 32.00 ->", "tensors:"] {
            assert!(stdout.contains(needle), "{needle} not in {stdout}");
        }
        assert!(
            run(&input, &three, "q4_k", &["-t", "3"]).0,
            "Q4_K is Q4_K_M"
        );
        let file = GgufFile::open(&one).unwrap();
        let ours: BTreeMap<&str, GgmlType> = file
            .tensors()
            .map(|i| (i.name.as_str(), i.ggml_type))
            .collect();
        let theirs: BTreeMap<&str, GgmlType> = synth
            .tensors()
            .map(|i| (i.name.as_str(), i.ggml_type))
            .collect();
        assert_eq!(ours, theirs, "{tiny:?}");
        assert!(std::fs::read(&one).unwrap() == std::fs::read(&three).unwrap());
    }
}

/// A quantized input: refused unless --allow-requantize; then its tensors are decoded and
/// encoded again, and tensors already in the target type are copied as they are.
#[test]
fn requantizing_needs_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let input = tiny_file(dir.path(), Tiny::Qwen2, Mix::Q8_0);
    let out = dir.path().join("out.gguf");
    let (ok, _, stderr) = run(&input, &out, "Q4_K_M", &[]);
    assert!(!ok);
    for needle in [
        "output.weight",
        "Q8_0",
        "--allow-requantize",
        input.to_str().unwrap(),
    ] {
        assert!(stderr.contains(needle), "{needle} not in {stderr}");
    }
    assert!(!out.exists());
    assert!(run(&input, &out, "Q4_K_M", &["--allow-requantize"]).0);
    // Q8_0 to Q8_0: every tensor keeps its type and its bytes, no flag needed.
    let same = dir.path().join("same.gguf");
    let (ok, stdout, stderr) = run(&input, &same, "Q8_0", &["--json"]);
    assert!(ok, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["converted"], 0);
    let (a, b) = (
        GgufFile::open(&input).unwrap(),
        GgufFile::open(&same).unwrap(),
    );
    for x in a.tensor_views() {
        let y = b.tensor(&x.info.name).unwrap();
        assert!(x.data == y.data, "{}", x.info.name);
    }
    assert_no_partial(dir.path());
}

/// Bad input is an error naming what is wrong, and leaves no output behind.
#[test]
fn hostile_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let good = tiny_file(dir.path(), Tiny::Smollm2, Mix::F32);
    let out = dir.path().join("out.gguf");
    let fails = |input: &Path, ty: &str, needles: &[&str]| {
        let (ok, _, stderr) = run(input, &out, ty, &[]);
        assert!(!ok, "{ty}: succeeded");
        for needle in needles {
            assert!(stderr.contains(needle), "{needle} not in {stderr}");
        }
        assert!(!out.exists(), "{stderr}: output written");
        assert_no_partial(dir.path());
    };
    fails(
        &good,
        "Q4_K_XL",
        &["unknown type `Q4_K_XL`", "Q4_K_M", "Q8_0", "BF16"],
    );
    fails(&good, "IQ2_XXS", &["unknown type"]);

    let not_gguf = dir.path().join("not.gguf");
    std::fs::write(&not_gguf, b"this is not a model at all, just some text").unwrap();
    fails(&not_gguf, "Q8_0", &["not.gguf"]);
    fails(&dir.path().join("missing.gguf"), "Q8_0", &["missing.gguf"]);

    // A file cut short inside its tensor data: the header parses, a tensor read fails.
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() - 1000]).unwrap();
    fails(&cut, "Q8_0", &["cut.gguf"]);

    // A tensor of a type rullama cannot decode, in a file that is otherwise a model.
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    w.set("llama.block_count", 1u32);
    let n = GgmlType::Iq2Xxs.layout().type_size * 2;
    w.add_tensor(
        "blk.0.attn_q.weight",
        &[256, 2],
        GgmlType::Iq2Xxs,
        vec![0u8; n],
    )
    .unwrap();
    let iq = dir.path().join("iq.gguf");
    w.write_to_path(&iq).unwrap();
    fails(
        &iq,
        "Q4_K_M",
        &["blk.0.attn_q.weight", "IQ2_XXS", "iq.gguf"],
    );

    // A NaN in the weights: refused, naming the tensor and row.
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    w.set("llama.block_count", 1u32);
    let mut values = vec![0.5f32; 64];
    values[40] = f32::NAN;
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    w.add_tensor("blk.0.ffn_up.weight", &[32, 2], GgmlType::F32, data)
        .unwrap();
    let nan = dir.path().join("nan.gguf");
    w.write_to_path(&nan).unwrap();
    fails(&nan, "Q8_0", &["blk.0.ffn_up.weight", "row 1", "NaN"]);

    // The output must not be the input.
    let (ok, _, stderr) = run(&good, &good, "Q8_0", &[]);
    assert!(!ok && stderr.contains("replace the input"), "{stderr}");
    assert_eq!(std::fs::read(&good).unwrap(), bytes);
}

/// F16 and BF16 inputs (what converters write): decoded without --allow-requantize, and an
/// F16 matrix re-encoded as BF16 holds the same values where BF16 keeps them exactly.
#[test]
fn half_precision_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let f16 = tiny_file(dir.path(), Tiny::Smollm2, Mix::F16);
    let bf16 = dir.path().join("bf16.gguf");
    let (ok, _, stderr) = run(&f16, &bf16, "bf16", &[]);
    assert!(ok, "{stderr}");
    let q4 = dir.path().join("q4.gguf");
    let (ok, _, stderr) = run(&bf16, &q4, "Q4_0", &[]);
    assert!(ok, "{stderr}");
    let (a, b) = (
        GgufFile::open(&f16).unwrap(),
        GgufFile::open(&bf16).unwrap(),
    );
    let q4 = GgufFile::open(&q4).unwrap();
    let view = |f: &GgufFile, name: &str| f.tensor(name).unwrap().info.ggml_type;
    let name = "blk.0.ffn_up.weight";
    assert_eq!(view(&a, name), GgmlType::F16);
    assert_eq!(view(&b, name), GgmlType::Bf16);
    assert_eq!(view(&q4, name), GgmlType::Q4_0);
    // BF16 rounds the f16 mantissa (10 bits) to 7 bits: the values agree to 2^-8 relative.
    let (x, y) = (a.tensor(name).unwrap(), b.tensor(name).unwrap());
    let xs = rullama_quant::dequantize_to_vec(Format::Ggml(GgmlType::F16), x.data).unwrap();
    let ys = rullama_quant::dequantize_to_vec(Format::Ggml(GgmlType::Bf16), y.data).unwrap();
    for (x, y) in xs.iter().zip(&ys) {
        assert!((x - y).abs() <= x.abs() / 256.0, "{x} -> {y}");
    }
}
