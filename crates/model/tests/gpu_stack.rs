//! Stacked projections on the real models (lavapipe in CI): the projections that read one
//! input and share a width (q/k/v, gate/up) are one matvec in a decode step and one matmul in
//! a prefill step, so each layer's matrix dispatches drop by what the file's tensor types
//! allow. Stacked in one format only (gemma-3-270m's Q4_K_M mix: q|k|v where v is Q5_0 like q
//! and k, q|k and v apart where v is Q8_0; gate|up everywhere), the logits equal those of the
//! projections uploaded one by one, bit for bit; with the Q5_0 rows widened to Q8_0 beside a
//! Q8_0 v (`GpuOptions::widen_stacks`, the default), q|k|v is one product in every layer, and
//! with every small Q5_0 matrix widened as well (`widen_below`, the default) the logits stay
//! within `tests/gpu.rs`'s bars of those (the same weight values, their dot products summed
//! in the Q8_0 kernel's order). And one projection of a stacked upload
//! computed alone (a row range of it) gives what the CPU reference gives.
//!
//! No adapter: the tests fail, unless `RULLAMA_NO_GPU_TESTS=1`, which skips them.

mod common;

use common::gpu::{Deviation, LOGIT_REL, Script, TOP10_NATS, device, file, run, skip};

use rullama_gguf::{GgmlType, GgufFile, GgufWriter};
use rullama_kernels::Kernel;
use rullama_kernels::ops::matvec::MatvecKernel;
use rullama_model::backend::{KvCacheSpec, LinearView};
use rullama_model::gpu::{GpuOptions, KvDtype};
use rullama_model::{Backend, CpuBackend, GpuBackend, OutputRows, Sequence};
use rullama_quant::Format;
use rullama_quant::widen::common_format;

/// How many products `names` (consecutive tensors) need stacked: a run goes on while the next
/// tensor has the run's width and a format that holds both exactly (the same one, unless
/// `widen`).
fn runs<F: AsRef<[u8]>>(file: &GgufFile<F>, names: &[String], widen: bool) -> usize {
    let key = |n: &String| {
        let t = file.tensor(n).unwrap_or_else(|| panic!("{n}"));
        (Format::Ggml(t.info.ggml_type), t.info.dims[0])
    };
    let mut runs = 0;
    let mut run: Option<(Format, u64)> = None;
    for (format, width) in names.iter().map(key) {
        let joined = run.and_then(|(f, w)| {
            let common = if widen {
                common_format(f, format)
            } else {
                (f == format).then_some(f)
            };
            common.filter(|_| w == width)
        });
        run = match joined {
            Some(f) => Some((f, width)),
            None => {
                runs += 1;
                Some((format, width))
            }
        };
    }
    runs
}

/// Matrix products of each layer with the projections stacked: q, k, v in as many as they
/// have runs, o, gate and up in as many as theirs, down (7 unstacked).
fn stacked_products<F: AsRef<[u8]>>(file: &GgufFile<F>, n_layer: usize, widen: bool) -> Vec<usize> {
    (0..n_layer)
        .map(|il| {
            let names = |ns: &[&str]| -> Vec<String> {
                ns.iter().map(|n| format!("blk.{il}.{n}.weight")).collect()
            };
            runs(file, &names(&["attn_q", "attn_k", "attn_v"]), widen)
                + 1
                + runs(file, &names(&["ffn_gate", "ffn_up"]), widen)
                + 1
        })
        .collect()
}

/// A prefill of 3 tokens and one decode step after it; 600 positions: decode attention in
/// splits, as `tests/gpu.rs` runs it.
const SCRIPT: Script<'static> = Script {
    ctx: 600,
    prompt: &[2, 1000, 3000],
    prompt_rows: OutputRows::All,
    steps: &[4000],
};

fn matrix_products(kernels: &[Kernel]) -> usize {
    let matrix = |k: &&Kernel| {
        matches!(
            k,
            Kernel::Matvec(
                MatvecKernel::Plain(..) | MatvecKernel::Norm(..) | MatvecKernel::Glu(..)
            ) | Kernel::Matmul(..)
        )
    };
    kernels.iter().filter(matrix).count()
}

fn stacks_as_the_file_allows(name: &str) {
    if skip() {
        return;
    }
    let file = file(name);
    let gpu = device();
    let run_with = |stack_projections, widen_stacks: bool| {
        // The residual ops unfolded (a folded norm feeds its first product as it reads and the
        // later ones from the stored vector, so which product comes first would change the
        // rounding) and without the GLU epilogue (which needs a stacked gate|up:
        // `tests/gpu_glu_epilogue.rs`), so both runs' products read their inputs alike.
        let options = GpuOptions {
            kv_dtype: KvDtype::F32,
            stack_projections,
            widen_stacks,
            // The small matrices widened too where the stacks are (`widen_below`'s default).
            widen_below: if widen_stacks {
                GpuOptions::default().widen_below
            } else {
                0
            },
            fold_norm: false,
            residual_rows: false,
            glu_epilogue: false,
            ..GpuOptions::default()
        };
        run(&gpu, &file, options, &SCRIPT)
    };
    let alone = run_with(false, false);
    let n_layer = alone.n_layer;
    // The LM head: a dispatch per chunk of the output matrix (2 on lavapipe for 150k+
    // vocabularies of Q8_0, whose 128 MiB binding limit splits them).
    let lm_head = matrix_products(&alone.decode) - 7 * n_layer;
    assert!((1..=3).contains(&lm_head), "{lm_head} LM head dispatches");
    for widen in [false, true] {
        let stacked = run_with(true, widen);
        let layers = stacked_products(&file, n_layer, widen);
        let stacked_layers: usize = layers.iter().sum();
        let saving = 7 * n_layer - stacked_layers;
        eprintln!(
            "{name} (widen {widen}): decode {} -> {} dispatches, {} -> {} matrix products ({} a \
             layer -> {:.2} a layer on average, {}..={}), prefill {} -> {}",
            alone.decode.len(),
            stacked.decode.len(),
            matrix_products(&alone.decode),
            matrix_products(&stacked.decode),
            7,
            stacked_layers as f64 / n_layer as f64,
            layers.iter().min().unwrap(),
            layers.iter().max().unwrap(),
            alone.prefill.len(),
            stacked.prefill.len(),
        );
        assert_eq!(matrix_products(&stacked.decode), stacked_layers + lm_head);
        assert_eq!(alone.decode.len() - stacked.decode.len(), saving);
        assert_eq!(
            matrix_products(&alone.prefill) - matrix_products(&stacked.prefill),
            saving
        );
        if widen {
            let mut dev = Deviation::default();
            for (got, want) in stacked.logits.iter().zip(&alone.logits) {
                dev.add(got, want);
            }
            eprintln!("{name}: widened stacks against the projections alone: {dev:?}");
            assert!(
                dev.logit_rel <= LOGIT_REL && dev.top10_nats <= TOP10_NATS,
                "{name}: widened stacks {dev:?}"
            );
        } else {
            assert!(
                stacked.bits() == alone.bits(),
                "{name}: stacked logits differ from the separate products'"
            );
        }
    }
}

/// gemma-3-270m (Q4_K_M): in one format, q|k|v in the 9 layers whose v is Q5_0, q|k and v in
/// the 9 where v is Q8_0, gate|up in all 18: 45 matrix products fewer per decode step;
/// widened, q|k|v in all 18: 54 fewer.
#[test]
fn gemma3_stacks_as_the_file_allows() {
    stacks_as_the_file_allows("gemma3-270m");
}

/// qwen2.5-0.5b: as gemma (v Q8_0 in half the layers), with the q/k/v biases stacked too:
/// 60 fewer in one format, 72 widened.
#[test]
fn qwen2_stacks_as_the_file_allows() {
    stacks_as_the_file_allows("qwen2.5-0.5b");
}

/// Three stacked projections with biases; the graph computes only k (rows in the middle of
/// the stack, alone), then v and k again (two parts, not starting at the stack's first row),
/// for one token and for a block: each as the CPU reference computes it.
#[test]
fn one_projection_of_a_stack_alone() {
    if skip() {
        return;
    }
    const D: u64 = 64;
    let outs = [96u64, 32, 48];
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    let names = ["q", "k", "v"];
    for (i, (n, o)) in names.iter().zip(outs).enumerate() {
        let bytes = common::random_f32_bytes((D * o) as usize, 1.0, i as u64);
        w.add_tensor(format!("{n}.weight"), &[D, o], GgmlType::F32, bytes)
            .unwrap();
        let bias = common::random_f32_bytes(o as usize, 1.0, 10 + i as u64);
        w.add_tensor(format!("{n}.bias"), &[o], GgmlType::F32, bias)
            .unwrap();
    }
    let table = common::random_f32_bytes((D * 8) as usize, 1.0, 20);
    w.add_tensor("table", &[D, 8], GgmlType::F32, table)
        .unwrap();
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    let file = GgufFile::from_bytes(bytes).unwrap();
    let views: Vec<LinearView<'_>> = names
        .iter()
        .map(|n| LinearView {
            weight: file.tensor(&format!("{n}.weight")).unwrap(),
            bias: file.tensor(&format!("{n}.bias")),
        })
        .collect();

    /// k alone, then v and k, for `tokens`: the three results, concatenated.
    fn compute<B: Backend>(
        backend: &mut B,
        file: &GgufFile<Vec<u8>>,
        views: &[LinearView<'_>],
        tokens: &[u32],
    ) -> Vec<f32> {
        let lin = backend.load_linears(views).unwrap();
        let table = backend.load_weight(file.tensor("table").unwrap()).unwrap();
        let spec = KvCacheSpec {
            n_ctx: 1,
            layers: Vec::new(),
        };
        let b = &mut backend.new_sequence(&spec).unwrap();
        let linear = |b: &mut B::Sequence, x: &<B::Sequence as Sequence>::Tensor, i: usize| {
            let (w, bias) = &lin[i];
            let y = b.matmul(w, x);
            b.add_bias(&y, bias.as_ref().unwrap())
        };
        let mut out = Vec::new();
        let ids = b.ids(tokens);
        let x = b.embed(&table, &ids);
        let k = linear(b, &x, 1);
        out.extend(b.read(&k).unwrap());
        let ids = b.ids(tokens);
        let x = b.embed(&table, &ids);
        // v, then k: not consecutive rows in this order, so each is computed alone.
        let v = linear(b, &x, 2);
        let _k = linear(b, &x, 1);
        out.extend(b.read(&v).unwrap());
        let ids = b.ids(tokens);
        let x = b.embed(&table, &ids);
        // k, then v: consecutive rows, one product (rows 96..176 of the stack, 2 outputs).
        let k = linear(b, &x, 1);
        let _v = linear(b, &x, 2);
        out.extend(b.read(&k).unwrap());
        out
    }

    for tokens in [&[3u32][..], &[1, 7, 2, 5]] {
        let want = compute(&mut CpuBackend::new(), &file, &views, tokens);
        let mut gpu = GpuBackend::open().expect("a GPU adapter (lavapipe will do)");
        let got = compute(&mut gpu, &file, &views, tokens);
        let kernels = gpu.last_step_kernels();
        assert_eq!(want.len(), got.len());
        for (i, (g, c)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - c).abs() <= 1e-5 * (1.0 + c.abs()),
                "{tokens:?} element {i}: gpu {g} cpu {c}"
            );
        }
        eprintln!("{tokens:?}: last step {kernels:?}");
    }
}
