//! The GPU lowering's fusions on a synthetic Qwen 2 (its real graph at tiny shapes, random
//! weights and biases): the kernels its steps dispatch, and its logits against the CPU
//! reference (the bars of `tests/gpu.rs`). Seconds on lavapipe, where the real models take
//! minutes.
//!
//! No adapter: the tests fail, unless `RULLAMA_NO_GPU_TESTS=1`, which skips them.

mod common;

use common::gpu::skip;

use rullama_gguf::{GgmlType, GgufFile, GgufWriter};
use rullama_kernels::ops::elementwise::ElementwiseKernel;
use rullama_kernels::ops::epilogue::Epilogue;
use rullama_kernels::ops::matmul::MatmulKernel;
use rullama_kernels::ops::matmul_coop::MatmulCoopKernel;
use rullama_kernels::ops::matvec::{Addend, InputKind, MatvecKernel};
use rullama_kernels::{GpuFormat, Kernel};
use rullama_model::gpu::{GpuOptions, KvDtype};
use rullama_model::{CpuBackend, GpuBackend, Model, OutputRows};

const LAYERS: usize = 2;
const D: u64 = 256;
const HEADS: u32 = 4;
const KV_HEADS: u32 = 2;
/// D / HEADS: a head dimension the attention kernel has (64, 128, 256).
const KV_DIM: u64 = 128;
const FFN: u64 = 512;
const VOCAB: u64 = 64;

/// A qwen2 file: `LAYERS` layers of the Llama block with q/k/v biases, untied output.
fn qwen2_file() -> GgufFile<Vec<u8>> {
    qwen2_file_with(FFN)
}

/// [`qwen2_file`] with a feed-forward width of `ffn`.
fn qwen2_file_with(ffn: u64) -> GgufFile<Vec<u8>> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "qwen2");
    for (k, v) in [
        ("block_count", LAYERS as u32),
        ("embedding_length", D as u32),
        ("feed_forward_length", ffn as u32),
        ("attention.head_count", HEADS),
        ("attention.head_count_kv", KV_HEADS),
        ("context_length", 128),
    ] {
        w.set(format!("qwen2.{k}"), v);
    }
    w.set("qwen2.attention.layer_norm_rms_epsilon", 1e-6f32);
    let mut tensors: Vec<(String, Vec<u64>)> = vec![
        ("token_embd.weight".into(), vec![D, VOCAB]),
        ("output_norm.weight".into(), vec![D]),
        ("output.weight".into(), vec![D, VOCAB]),
    ];
    for il in 0..LAYERS {
        for (name, dims) in [
            ("attn_norm.weight", vec![D]),
            ("attn_q.weight", vec![D, D]),
            ("attn_q.bias", vec![D]),
            ("attn_k.weight", vec![D, KV_DIM]),
            ("attn_k.bias", vec![KV_DIM]),
            ("attn_v.weight", vec![D, KV_DIM]),
            ("attn_v.bias", vec![KV_DIM]),
            ("attn_output.weight", vec![D, D]),
            ("ffn_norm.weight", vec![D]),
            ("ffn_gate.weight", vec![D, ffn]),
            ("ffn_up.weight", vec![D, ffn]),
            ("ffn_down.weight", vec![ffn, D]),
        ] {
            tensors.push((format!("blk.{il}.{name}"), dims));
        }
    }
    for (seed, (name, dims)) in tensors.into_iter().enumerate() {
        let n: u64 = dims.iter().product();
        // Matrices at the scale that keeps activations near 1; norm gains near 1; biases
        // of the size of the products they are added to.
        let bytes = match dims.len() {
            2 => common::random_f32_bytes(n as usize, (3.0 / dims[0] as f32).sqrt(), seed as u64),
            _ if name.ends_with("norm.weight") => {
                let g = common::random_f32_bytes(n as usize, 0.5, seed as u64);
                g.chunks(4)
                    .flat_map(|b| (1.0 + f32::from_le_bytes(b.try_into().unwrap())).to_le_bytes())
                    .collect()
            }
            _ => common::random_f32_bytes(n as usize, 1.0, seed as u64),
        };
        w.add_tensor(name, &dims, GgmlType::F32, bytes).unwrap();
    }
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    GgufFile::from_bytes(bytes).unwrap()
}

fn count(kernels: &[Kernel], f: impl Fn(&Kernel) -> bool) -> usize {
    kernels.iter().filter(|k| f(k)).count()
}

/// The kernels of a prefill of 3 tokens and of the last of 2 decode steps after it, and the
/// logits at every position of `PROMPT`.
struct Run {
    prefill: Vec<Kernel>,
    decode: Vec<Kernel>,
    logits: Vec<f32>,
}

const PROMPT: [u32; 5] = [1, 5, 9, 13, 17];

fn run_gpu(file: &GgufFile<Vec<u8>>, stack_projections: bool) -> Run {
    run_with(
        file,
        GpuOptions {
            kv_dtype: KvDtype::F32,
            stack_projections,
            ..GpuOptions::default()
        },
    )
}

fn run_with(file: &GgufFile<Vec<u8>>, options: GpuOptions) -> Run {
    let stack_projections = options.stack_projections;
    let backend = GpuBackend::open()
        .expect("a GPU adapter (lavapipe will do)")
        .with_options(options);
    let gpu = Model::load(file, backend).unwrap();
    let mut cache = gpu.session(16).unwrap();
    let mut logits = cache
        .forward(&PROMPT[..3], 0, OutputRows::All)
        .unwrap()
        .data;
    let prefill = gpu.backend().last_step_kernels();
    let mut decode = Vec::new();
    for (t, &id) in PROMPT.iter().enumerate().skip(3) {
        let l = cache.forward(&[id], t, OutputRows::Last).unwrap();
        logits.extend_from_slice(&l.data);
        decode = gpu.backend().last_step_kernels();
    }
    eprintln!(
        "stack {stack_projections}: prefill: {prefill:?}\ndecode ({} dispatches): {decode:?}",
        decode.len()
    );
    Run {
        prefill,
        decode,
        logits,
    }
}

/// The logits within `tests/gpu.rs`'s bar of the CPU reference at every position.
fn assert_matches_cpu(file: &GgufFile<Vec<u8>>, logits: &[f32]) {
    let want = {
        let cpu = Model::load(file, CpuBackend::new()).unwrap();
        let mut cache = cpu.session(16).unwrap();
        cache.forward(&PROMPT, 0, OutputRows::All).unwrap()
    };
    let n_vocab = VOCAB as usize;
    for (t, g) in logits.chunks(n_vocab).enumerate() {
        let c = want.row(t);
        let scale = c.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = g.iter().zip(c).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            diff <= 1e-4 * scale,
            "position {t}: max |Δlogit| {diff:e} against max |logit| {scale:e}"
        );
    }
}

/// q, k and v add their biases as the matvec (decode) or matmul (prefill) stores them: no
/// `add` dispatch is left (the residual adds are fused with their norms, the bias adds into
/// the projections), and RoPE still runs fused on the biased q and k. Projections uploaded
/// one by one (`stack_projections: false`), so each has its own biased product.
/// The logits stay within `tests/gpu.rs`'s bar of the CPU reference at every position.
#[test]
fn qwen2_biases_are_projection_epilogues() {
    if skip() {
        return;
    }
    let file = qwen2_file();
    let Run {
        prefill,
        decode,
        logits,
    } = run_gpu(&file, false);
    let biased = |k: &Kernel| {
        matches!(
            k,
            Kernel::Matvec(
                MatvecKernel::Plain(_, Epilogue::BIAS) | MatvecKernel::Norm(_, Epilogue::BIAS, _)
            ) | Kernel::Matmul(MatmulKernel(_, Epilogue::BIAS))
                | Kernel::MatmulCoop(MatmulCoopKernel(_, Epilogue::BIAS))
        )
    };
    assert_eq!(count(&prefill, biased), 3 * LAYERS, "{prefill:?}");
    assert_eq!(count(&decode, biased), 3 * LAYERS, "{decode:?}");
    assert_eq!(
        count(&decode, |k| *k
            == Kernel::Elementwise(ElementwiseKernel::Add)),
        0,
        "{decode:?}"
    );
    // In decode the RoPE of q and k is done by the attention itself
    // (`GpuOptions::fold_rope_attention`), in prefill by the rope op.
    let rope = |k: &Kernel| matches!(k, Kernel::HeadNormRope(_));
    let rope_attention = |k: &Kernel| matches!(k, Kernel::AttentionRope(_));
    assert_eq!(count(&decode, rope), 0, "{decode:?}");
    assert_eq!(count(&decode, rope_attention), LAYERS, "{decode:?}");
    assert_eq!(count(&prefill, rope), LAYERS, "{prefill:?}");
    // K and V go into the cache inside the rope op (`GpuOptions::fold_kv_append`), or in
    // decode inside the attention that does the RoPE.
    let append = |k: &Kernel| matches!(k, Kernel::KvAppend(_));
    assert_eq!(count(&prefill, append), 0, "{prefill:?}");
    assert_eq!(count(&decode, append), 0, "{decode:?}");
    assert_matches_cpu(&file, &logits);
}

/// With the projections stacked (the default; every matrix of the file is F32, so q|k|v and
/// gate|up each stack): one biased product for q, k and v and one product for gate and up
/// per layer, split over their outputs in prefill, one output in decode (their places are
/// contiguous), where gate|up stores the GLU (the matvec's GLU epilogue) and the down
/// projection is a plain matvec; RoPE still fused on the biased q and k; the logits equal
/// those of the unstacked projections (whose down projection reads the GLU as its input)
/// bit for bit.
#[test]
fn qwen2_projections_are_stacked() {
    if skip() {
        return;
    }
    let file = qwen2_file();
    let stacked = run_gpu(&file, true);
    let (prefill, decode) = (&stacked.prefill, &stacked.decode);
    // The f32 kernel, or the tensor cores where the device has them.
    let split = |bias| {
        move |k: &Kernel| {
            let want = Epilogue { bias, split: true };
            matches!(k, Kernel::Matmul(MatmulKernel(_, e)) | Kernel::MatmulCoop(MatmulCoopKernel(_, e)) if *e == want)
        }
    };
    assert_eq!(count(prefill, split(true)), LAYERS, "{prefill:?}");
    assert_eq!(count(prefill, split(false)), LAYERS, "{prefill:?}");
    let matmuls = |k: &Kernel| matches!(k, Kernel::Matmul(_) | Kernel::MatmulCoop(_));
    // q|k|v, o, gate|up, down per layer, and the LM head.
    assert_eq!(count(prefill, matmuls), 4 * LAYERS + 1, "{prefill:?}");
    // A product over one output, with its input as it is, computed from the residual op
    // before it (`GpuOptions::fold_norm`) or from what that op's addend's product stored
    // (`GpuOptions::residual_rows`).
    let one = |e| {
        move |k: &Kernel| {
            let f = GpuFormat::F32;
            [
                MatvecKernel::Plain(f, e),
                MatvecKernel::Norm(f, e, Addend::Plain),
                MatvecKernel::Scaled(f, e),
            ]
            .into_iter()
            .any(|m| *k == Kernel::Matvec(m))
        }
    };
    assert_eq!(count(decode, one(Epilogue::BIAS)), LAYERS, "{decode:?}");
    // The LM head; o and down are the residual ops' products.
    assert_eq!(count(decode, one(Epilogue::STORE)), 1, "{decode:?}");
    let rows = |k: &Kernel| *k == Kernel::Matvec(MatvecKernel::Residual(GpuFormat::F32));
    assert_eq!(count(decode, rows), 2 * LAYERS, "{decode:?}");
    let glu_out =
        |k: &Kernel| matches!(k, Kernel::Matvec(MatvecKernel::GluOut(GpuFormat::F32, ..)));
    assert_eq!(count(decode, glu_out), LAYERS, "{decode:?}");
    let glu = |k: &Kernel| matches!(k, Kernel::Matvec(MatvecKernel::Glu(..)) | Kernel::Glu(_));
    assert_eq!(count(decode, glu), 0, "{decode:?}");
    // Every residual op is done row by row by the o or down projection, and the products
    // that read its norm take its z and partial sums: gate|up (with the GLU epilogue), the
    // next layer's q|k|v, the LM head (small enough here).
    let scaled = |k: &Kernel| {
        matches!(
            k,
            Kernel::Matvec(
                MatvecKernel::Scaled(..) | MatvecKernel::GluOut(_, InputKind::Scaled, _)
            )
        )
    };
    assert_eq!(count(decode, scaled), 2 * LAYERS, "{decode:?}");
    let residual = |k: &Kernel| matches!(k, Kernel::ResidualNorm(_));
    assert_eq!(count(decode, residual), 0, "{decode:?}");
    // RoPE still fused on the biased q and k: inside the decode attention.
    let rope = |k: &Kernel| matches!(k, Kernel::AttentionRope(_));
    assert_eq!(count(decode, rope), LAYERS, "{decode:?}");
    assert_eq!(
        count(decode, |k| *k
            == Kernel::Elementwise(ElementwiseKernel::Add)),
        0
    );

    assert_matches_cpu(&file, &stacked.logits);

    // Against the projections one by one, with the residual ops as their own dispatches (a
    // folded norm feeds its first product as it reads and the others from the stored
    // vector, which round differently: `qwen2_residual_norms_fold_into_products`).
    let separate = |stack_projections| GpuOptions {
        kv_dtype: KvDtype::F32,
        stack_projections,
        fold_norm: false,
        residual_rows: false,
        ..GpuOptions::default()
    };
    let stacked = run_with(&file, separate(true));
    let alone = run_with(&file, separate(false));
    // 2 products fewer per layer for q|k|v and 1 for gate|up.
    assert_eq!(alone.decode.len() - stacked.decode.len(), 3 * LAYERS);
    assert_eq!(alone.prefill.len() - stacked.prefill.len(), 3 * LAYERS);
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert!(bits(&stacked.logits) == bits(&alone.logits));
}

/// The residual ops done row by row by the products that make their addends, their norms
/// read as z and partial sums (`GpuOptions::residual_rows`, the default), or without that
/// folded into the products that read their norms (`GpuOptions::fold_norm`), against the
/// separate `residual_norm` dispatches: two dispatches fewer a layer in decode either way,
/// none in prefill (the folds are for one token), and logits within the CPU bar each way
/// (the sums of squares go in other orders, so not bit for bit).
#[test]
fn qwen2_residual_norms_fold_into_products() {
    if skip() {
        return;
    }
    let file = qwen2_file();
    let options = GpuOptions {
        kv_dtype: KvDtype::F32,
        ..GpuOptions::default()
    };
    let rows = run_with(&file, options);
    let folded = run_with(
        &file,
        GpuOptions {
            residual_rows: false,
            ..options
        },
    );
    let separate = run_with(
        &file,
        GpuOptions {
            fold_norm: false,
            residual_rows: false,
            ..options
        },
    );
    let residual = |k: &Kernel| matches!(k, Kernel::ResidualNorm(_));
    let epilogue = |k: &Kernel| matches!(k, Kernel::Matvec(MatvecKernel::Residual(_)));
    assert_eq!(count(&separate.decode, residual), 2 * LAYERS);
    assert_eq!(
        count(&rows.decode, epilogue),
        2 * LAYERS,
        "{:?}",
        rows.decode
    );
    assert_eq!(count(&folded.decode, epilogue), 0, "{:?}", folded.decode);
    for run in [&rows, &folded] {
        assert_eq!(count(&run.decode, residual), 0, "{:?}", run.decode);
        assert_eq!(separate.decode.len() - run.decode.len(), 2 * LAYERS);
        assert_eq!(separate.prefill, run.prefill);
        assert_matches_cpu(&file, &run.logits);
    }
    assert_matches_cpu(&file, &separate.logits);
}

/// A feed-forward width whose F32 down projection (ffn x D) is over the 4 MB up to which the
/// down projection reads the GLU as its input (`matvec_glu`): without the GLU epilogue the
/// GLU is a dispatch of its own.
const WIDE_FFN: u64 = 4352;

/// The gate|up matvec stores the GLU (its GLU epilogue) in decode: a down projection over
/// 4 MB no longer needs a `glu` dispatch, one dispatch fewer a layer; the logits equal those
/// of the separate `glu` bit for bit (the same row sums, the same expression); a prompt
/// block is lowered as before.
#[test]
fn qwen2_glu_epilogue_saves_the_glu_dispatch() {
    if skip() {
        return;
    }
    const { assert!(WIDE_FFN * D * 4 > 4 << 20) };
    let file = qwen2_file_with(WIDE_FFN);
    let run_with = |glu_epilogue| {
        let options = GpuOptions {
            kv_dtype: KvDtype::F32,
            glu_epilogue,
            ..GpuOptions::default()
        };
        run_with(&file, options)
    };
    let (on, off) = (run_with(true), run_with(false));
    let glu_out =
        |k: &Kernel| matches!(k, Kernel::Matvec(MatvecKernel::GluOut(GpuFormat::F32, ..)));
    let glu = |k: &Kernel| matches!(k, Kernel::Glu(_));
    assert_eq!(count(&on.decode, glu_out), LAYERS, "{:?}", on.decode);
    assert_eq!(count(&on.decode, glu), 0, "{:?}", on.decode);
    assert_eq!(count(&off.decode, glu), LAYERS, "{:?}", off.decode);
    assert_eq!(off.decode.len() - on.decode.len(), LAYERS);
    eprintln!(
        "ffn {WIDE_FFN}: decode {} -> {} dispatches with the GLU epilogue",
        off.decode.len(),
        on.decode.len()
    );
    assert_eq!(on.prefill, off.prefill);
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert!(bits(&on.logits) == bits(&off.logits));
    assert_matches_cpu(&file, &on.logits);
}
