//! Bit-exact parity with the reference implementation, the `gguf` Python package
//! (`pip install gguf==0.19.0 numpy`). A missing reference fails these tests; nothing is skipped
//! silently.

mod support;

use rullama_gguf::GgmlType;
use rullama_quant::{Format, dequantize_to_vec, is_supported, quantize, row_bytes};
use support::{Rng, assert_bits_eq, finite_blocks};

/// The types we implement and the reference dequantizes: every one must be compared.
const MUST_COVER: [GgmlType; 15] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Bf16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Iq4Nl,
    GgmlType::Iq4Xs,
    GgmlType::Q2K,
    GgmlType::Q3K,
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
];

/// Every type both sides support, so new formats join the comparison as soon as they exist.
fn common_types(reference: &[GgmlType]) -> Vec<GgmlType> {
    let common: Vec<GgmlType> = reference
        .iter()
        .copied()
        .filter(|&t| is_supported(Format::Ggml(t)))
        .collect();
    for t in MUST_COVER {
        assert!(
            common.contains(&t),
            "{t} is not compared (reference has {reference:?})"
        );
    }
    let skipped: Vec<&GgmlType> = reference.iter().filter(|t| !common.contains(t)).collect();
    eprintln!("compared: {common:?}\nreference only (not implemented here): {skipped:?}");
    common
}

/// Random blocks of every common type, dequantized by both sides and compared bit for bit:
/// blocks with finite scales (the meaningful case: any code under any finite f16 scale,
/// subnormals and 65504 included), blocks of raw random bytes (NaN and inf scales; NaN
/// matches NaN, everything else must have the same bits) and blocks our quantizer wrote.
#[test]
fn dequantize_matches_python_bit_for_bit() {
    let info = support::reference_info();
    eprintln!("reference: {}", info.versions);
    let mut rng = Rng(0x5eed_0001);
    let mut jobs: Vec<(GgmlType, &str, Vec<u8>)> = Vec::new();
    for t in common_types(&info.dequantize) {
        let n_blocks = (8192 / t.layout().block_size).max(256);
        jobs.push((t, "finite", finite_blocks(t, n_blocks, &mut rng)));
        let mut raw = vec![0u8; n_blocks / 4 * t.layout().type_size];
        rng.fill(&mut raw);
        jobs.push((t, "random bytes", raw));
        // Blocks our quantizer wrote: the codes and scales real files hold.
        let weights: Vec<f32> = (0..n_blocks / 4 * t.layout().block_size)
            .map(|_| rng.unit() * 4.0)
            .collect();
        jobs.push((
            t,
            "quantized",
            rullama_quant::quantize(Format::Ggml(t), &weights).unwrap(),
        ));
    }
    let inputs: Vec<(GgmlType, &[u8])> = jobs.iter().map(|(t, _, b)| (*t, b.as_slice())).collect();
    let theirs = support::python_dequantize(&inputs);
    for ((t, kind, bytes), theirs) in jobs.iter().zip(&theirs) {
        let ours = dequantize_to_vec(Format::Ggml(*t), bytes).unwrap();
        assert_bits_eq(&format!("{t} ({kind} blocks)"), &ours, theirs);
    }
}

/// Inputs for the quantizers: blocks at scales from 2^-12 to 2^12, all-zero blocks, constant
/// blocks, and blocks whose largest magnitude appears with both signs (the first one wins).
fn quantizer_inputs(block_size: usize, rng: &mut Rng) -> Vec<f32> {
    let mut x = Vec::new();
    for b in 0..96 {
        let scale = 2f32.powi(b % 25 - 12);
        let start = x.len();
        x.extend((0..block_size).map(|_| rng.unit() * scale));
        let block = &mut x[start..];
        match b % 8 {
            0 => block.fill(0.0),
            1 => block.fill(scale * 0.3),
            2 if block_size > 8 => (block[3], block[7]) = (-scale, scale),
            3 if block_size > 8 => (block[5], block[2]) = (scale, -scale),
            _ => {}
        }
    }
    x
}

/// Our quantizers against `gguf.quants.quantize`, which follows llama.cpp's
/// `quantize_row_*_ref`, byte for byte.
#[test]
fn quantize_matches_python_byte_for_byte() {
    let info = support::reference_info();
    let mut rng = Rng(0x5eed_0002);
    let types: Vec<GgmlType> = info
        .quantize
        .iter()
        .copied()
        .filter(|&t| is_supported(Format::Ggml(t)))
        .collect();
    for t in [
        GgmlType::F16,
        GgmlType::Bf16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
    ] {
        assert!(types.contains(&t), "{t}: quantizer not compared");
    }
    assert!(types.contains(&GgmlType::Q5_1) && types.contains(&GgmlType::Q8_0));
    let inputs: Vec<Vec<f32>> = types
        .iter()
        .map(|t| quantizer_inputs(t.layout().block_size.max(32), &mut rng))
        .collect();
    let jobs: Vec<(GgmlType, &[f32])> = types
        .iter()
        .zip(&inputs)
        .map(|(&t, x)| (t, x.as_slice()))
        .collect();
    let theirs = support::python_quantize(&jobs);
    for ((t, x), theirs) in jobs.iter().zip(&theirs) {
        let ours = quantize(Format::Ggml(*t), x).unwrap();
        assert_eq!(ours.len(), theirs.len(), "{t}: sizes differ");
        let size = t.layout().type_size;
        let blocks = ours.chunks(size).zip(theirs.chunks(size)).enumerate();
        if let Some((i, (a, b))) = blocks.clone().find(|(_, (a, b))| a != b) {
            let n = blocks.filter(|(_, (a, b))| a != b).count();
            panic!("{t}: {n} blocks differ; first is block {i}:\n ours {a:02x?}\n theirs {b:02x?}");
        }
    }
}

/// The first rows of one tensor of each type in the cached real models, read and dequantized
/// by Python (`gguf.GGUFReader`, so independent of our parser), against ours.
#[test]
fn real_tensors_match_python() {
    const MODELS: [&str; 3] = [
        "gemma-3-270m-q4_k_m.gguf",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "qwen2.5-coder-0.5b-instruct.gguf",
    ];
    let dir = support::models_dir();
    let mut compared = 0;
    for model in MODELS {
        let path = dir.join(model);
        assert!(
            path.exists(),
            "{} is missing: run `cargo xtask models`",
            path.display()
        );
        for sample in support::python_sample_tensors(&path, 8) {
            let label = format!("{model}: {} ({})", sample.name, sample.type_id);
            let t = sample
                .ggml_type
                .unwrap_or_else(|| panic!("{label}: unknown type id"));
            let format = Format::Ggml(t);
            assert!(
                is_supported(format),
                "{label}: {t} is in a real model but not supported"
            );
            let theirs = sample
                .values
                .unwrap_or_else(|| panic!("{label}: no reference values"));
            let row = row_bytes(format, sample.row_len).unwrap();
            assert_eq!(sample.raw.len() % row, 0, "{label}: not whole rows");
            let ours = dequantize_to_vec(format, &sample.raw).unwrap();
            assert_bits_eq(&label, &ours, &theirs);
            eprintln!(
                "{label}: {} rows of {} bit-exact",
                sample.raw.len() / row,
                sample.row_len
            );
            compared += 1;
        }
    }
    assert!(compared >= 13, "only {compared} tensors compared");
}
