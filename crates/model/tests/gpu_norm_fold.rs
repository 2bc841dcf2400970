//! Gemma's residual ops folded into the products that read their norms
//! (`GpuOptions::fold_norm`) on the real gemma-3-270m (lavapipe in CI). Its blocks norm the
//! attention and FFN outputs before the add (post-norms), so a folded product reduces that
//! operand's scale before its loop (`matvec/addend_normed.wgsl`) and the next norm as it
//! reads. In decode every `residual_norm` but the last (the output norm, read by the LM head,
//! too big to fold into) is gone, two dispatches fewer a layer less one; the prefill is
//! lowered as before; the logits stay within `tests/gpu.rs`'s tight bars of the separate
//! ops' (the sums of squares go in another order, so not bit for bit). Prints the dispatch
//! counts either way.
//!
//! No adapter: the tests fail, unless `RULLAMA_NO_GPU_TESTS=1`, which skips them.

mod common;

use common::gpu::{Deviation, LOGIT_REL, Script, TOP10_NATS, count, device, file, run, skip};
use rullama_kernels::Kernel;
use rullama_kernels::ops::matvec::{Addend, InputKind, MatvecKernel};
use rullama_model::OutputRows;
use rullama_model::gpu::{GpuOptions, KvDtype};

/// A prefill of 3 tokens, then 3 decode steps; 600 positions: decode attention in splits.
const SCRIPT: Script<'static> = Script {
    ctx: 600,
    prompt: &[2, 1000, 3000],
    prompt_rows: OutputRows::Last,
    steps: &[4000, 17, 900],
};

#[test]
fn gemma3_post_norm_residuals_fold_into_products() {
    if skip() {
        return;
    }
    let name = "gemma3-270m";
    let file = file(name);
    let gpu = device();
    let run_with = |fold_norm| {
        let options = GpuOptions {
            kv_dtype: KvDtype::F32,
            fold_norm,
            ..GpuOptions::default()
        };
        run(&gpu, &file, options, &SCRIPT)
    };
    let (folded, apart) = (run_with(true), run_with(false));
    let n_layer = folded.n_layer;
    let residual = |k: &Kernel| matches!(k, Kernel::ResidualNorm(_));
    let normed_input = |k: &Kernel| {
        matches!(
            k,
            Kernel::Matvec(
                MatvecKernel::Norm(_, _, Addend::Normed)
                    | MatvecKernel::GluOut(_, InputKind::Norm(Addend::Normed), _)
            )
        )
    };
    assert_eq!(
        count(&apart.decode, residual),
        2 * n_layer,
        "{:?}",
        apart.decode
    );
    assert_eq!(count(&folded.decode, residual), 1, "{:?}", folded.decode);
    assert_eq!(count(&folded.decode, normed_input), 2 * n_layer - 1);
    assert_eq!(apart.decode.len() - folded.decode.len(), 2 * n_layer - 1);
    assert_eq!(folded.prefill, apart.prefill);
    eprintln!(
        "{name} ({n_layer} layers): decode {} -> {} dispatches with the residual ops folded",
        apart.decode.len(),
        folded.decode.len()
    );

    let mut dev = Deviation::default();
    for (a, b) in apart.logits.iter().zip(&folded.logits) {
        dev.add(b, a);
    }
    eprintln!("{name}: folded against apart: {dev:?}");
    assert!(dev.logit_rel <= LOGIT_REL, "{dev:?}");
    assert!(dev.top10_nats <= TOP10_NATS, "{dev:?}");
}
