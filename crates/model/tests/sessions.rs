//! Several sessions over one loaded model: each sequence owns its KV cache and its queue of
//! draws, the model (weights, and on the GPU the built plans) is shared. Interleaved token by
//! token, each session generates exactly what it generates alone. On the tiny synthetic
//! model of every architecture (`rullama_synth::tiny_model`), so the test needs no real
//! model's weights.

mod common;

use common::gpu::skip;
use rullama_gguf::GgufFile;
use rullama_model::gpu::{GpuOptions, KvDtype};
use rullama_model::sampler::{Sampler, SamplerParams};
use rullama_model::{Backend, CpuBackend, Generator, GpuBackend, Model};
use rullama_synth::{Tiny, tiny_model};

/// Two prompts of different lengths, so the two caches hold different histories (ids inside
/// every tiny vocabulary).
const PROMPTS: [&[u32]; 2] = [&[1, 50, 61, 72, 83, 94], &[1, 120, 7, 200]];
const N: usize = 6;

fn samplers() -> [Sampler; 2] {
    [
        Sampler::new(SamplerParams::greedy()),
        Sampler::new(SamplerParams {
            seed: 23,
            ..SamplerParams::default()
        }),
    ]
}

/// `N` tokens after prompt `i` with sampler `i`, in a session of its own.
fn alone<B: Backend>(model: &Model<B>, i: usize) -> Vec<u32> {
    let mut sampler = samplers().into_iter().nth(i).unwrap();
    let mut session = model.session(32).unwrap();
    let mut tokens = Generator::start(&mut session, PROMPTS[i], 0, N, &mut sampler).unwrap();
    let mut out = Vec::new();
    while let Some(t) = tokens.next(&mut sampler).unwrap() {
        out.push(t);
    }
    out
}

/// Both prompts' generations, one token of each in turn, over one model.
fn interleaved<B: Backend>(model: &Model<B>) -> [Vec<u32>; 2] {
    let [mut s0, mut s1] = samplers();
    let mut a = model.session(32).unwrap();
    let mut b = model.session(32).unwrap();
    let mut ga = Generator::start(&mut a, PROMPTS[0], 0, N, &mut s0).unwrap();
    let mut gb = Generator::start(&mut b, PROMPTS[1], 0, N, &mut s1).unwrap();
    let mut out = [Vec::new(), Vec::new()];
    for _ in 0..N {
        out[0].extend(ga.next(&mut s0).unwrap());
        out[1].extend(gb.next(&mut s1).unwrap());
    }
    assert_eq!(ga.next(&mut s0).unwrap(), None);
    assert_eq!(gb.next(&mut s1).unwrap(), None);
    out
}

fn file(tiny: Tiny) -> GgufFile<Vec<u8>> {
    GgufFile::from_bytes(tiny_model(tiny, 7)).unwrap()
}

/// On the GPU executor: the sessions share the plans (one build per step signature, whatever
/// the sequence) and each binds them to its own buffers; every step of each is queued behind
/// the other's (four steps a submission, the default), and the text is what each gives alone.
#[test]
fn gpu_sessions_interleaved_give_their_own_text() {
    if skip() {
        return;
    }
    let gpu = common::gpu::device();
    for tiny in Tiny::ALL {
        let backend = GpuBackend::shared(gpu.clone()).with_options(GpuOptions {
            kv_dtype: KvDtype::F32,
            ..GpuOptions::default()
        });
        let model = Model::load(&file(tiny), backend).unwrap();
        let want = [alone(&model, 0), alone(&model, 1)];
        let before = model.backend().stats();
        let got = interleaved(&model);
        let after = model.backend().stats();
        assert_eq!(got, want, "{tiny:?}");
        // The prompts' and the decode steps' plans were built by the runs alone: the two
        // sequences of the interleaved run only bound them.
        assert_eq!(
            after.plans_built, before.plans_built,
            "{tiny:?}: a plan was rebuilt"
        );
        assert!(
            after.bindings_built >= before.bindings_built + 2,
            "{tiny:?}"
        );
    }
}

/// On the CPU reference, where every op runs at once: the same property.
#[test]
fn cpu_sessions_interleaved_give_their_own_text() {
    for tiny in Tiny::ALL {
        let model = Model::load(&file(tiny), CpuBackend::new()).unwrap();
        let want = [alone(&model, 0), alone(&model, 1)];
        assert_eq!(interleaved(&model), want, "{tiny:?}");
    }
}
