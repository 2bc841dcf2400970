//! A long prompt fed in chunks (`Session::set_ubatch`: steps of at most that many tokens,
//! each at its start position over the same cache) gives what one step gives: the same
//! last-row logits and greedy continuation, every row's logits and perplexity, on the tiny
//! synthetic model of every architecture. Bit for bit on the CPU reference (each row's
//! arithmetic does not depend on the block it is in); within `tests/gpu.rs`'s bars for two
//! f32 paths on the GPU executor (a block of 5 or 8 rows may take other attention and
//! product tilings than one of 37). The GPU builds one plan for the chunks that only fill
//! the cache and one for the last chunk, whatever the number of chunks.

mod common;

use std::num::NonZeroUsize;

use common::gpu::{Deviation, LOGIT_REL, TOP10_NATS, skip};
use rullama_gguf::GgufFile;
use rullama_model::gpu::{GpuOptions, KvDtype};
use rullama_model::perplexity::{self, Chunks};
use rullama_model::sampler::{Sampler, SamplerParams};
use rullama_model::{Backend, CpuBackend, Generator, GpuBackend, Model, OutputRows};
use rullama_synth::{Tiny, tiny_model};

/// 37 tokens in chunks of 8: four whole chunks and a remainder of 5, so both step shapes
/// run, and every chunk after the first attends to keys earlier chunks stored (tiny Gemma
/// 3's sliding window of 4 crosses the chunk borders).
const PROMPT_LEN: usize = 37;
const CHUNK: usize = 8;
const GENERATED: usize = 6;
const CTX: usize = 64;

fn prompt() -> Vec<u32> {
    (0..PROMPT_LEN as u32)
        .map(|i| 1 + (i * 53 + 11) % 380)
        .collect()
}

fn chunk() -> NonZeroUsize {
    NonZeroUsize::new(CHUNK).unwrap()
}

fn file(tiny: Tiny) -> GgufFile<Vec<u8>> {
    GgufFile::from_bytes(tiny_model(tiny, 7)).unwrap()
}

/// What a prompt gives one way of feeding it.
#[derive(Debug)]
struct Fed {
    /// The prompt's last-row logits (`Session::forward` with `Last`).
    last: Vec<f32>,
    /// Every row's logits (`All`).
    all: Vec<f32>,
    /// The greedy continuation drawn by a `Generator` (on the GPU: on the device).
    greedy: Vec<u32>,
    /// Perplexity over two chunks of 32 (its steps of every row in chunks too).
    ppl: f64,
}

/// Feeds the prompt with `ubatch` (`None`: the default, one step).
fn feed<B: Backend>(model: &mut Model<B>, ubatch: Option<NonZeroUsize>) -> Fed {
    let ubatch = ubatch.unwrap_or(rullama_model::DEFAULT_UBATCH);
    model.set_ubatch(ubatch);
    let model = &*model;
    let prompt = prompt();
    let mut session = model.session(CTX).unwrap();
    assert_eq!(session.ubatch(), ubatch);
    let last = session.forward(&prompt, 0, OutputRows::Last).unwrap();
    assert_eq!(last.n_rows(), 1);
    assert_eq!(session.len(), PROMPT_LEN);
    let all = session.forward(&prompt, 0, OutputRows::All).unwrap();
    assert_eq!(all.n_rows(), PROMPT_LEN);

    let mut session = model.session(CTX).unwrap();
    let mut sampler = Sampler::new(SamplerParams::greedy());
    let mut g = Generator::start(&mut session, &prompt, 0, GENERATED, &mut sampler).unwrap();
    let mut greedy = Vec::new();
    while let Some(t) = g.next(&mut sampler).unwrap() {
        greedy.push(t);
    }
    g.finish();

    let text: Vec<u32> = (0..64u32).map(|i| 1 + (i * 29 + 5) % 380).collect();
    let chunks = Chunks {
        tokens: &text,
        ctx: 32,
        n_chunks: 2,
        bos: Some(1),
    };
    let ppl = perplexity::score(model, chunks, |_, _| {}).unwrap().ppl();
    Fed {
        last: last.data,
        all: all.data,
        greedy,
        ppl,
    }
}

/// On the CPU reference: chunked and whole are equal bit for bit.
#[test]
fn cpu_chunked_prompt_equals_one_step() {
    for tiny in Tiny::ALL {
        let mut model = Model::load(&file(tiny), CpuBackend::new()).unwrap();
        let whole = feed(&mut model, None);
        let chunked = feed(&mut model, Some(chunk()));
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&chunked.last), bits(&whole.last), "{tiny:?}: last row");
        assert_eq!(bits(&chunked.all), bits(&whole.all), "{tiny:?}: every row");
        assert_eq!(chunked.greedy, whole.greedy, "{tiny:?}: greedy");
        assert_eq!(chunked.ppl.to_bits(), whole.ppl.to_bits(), "{tiny:?}: ppl");
    }
}

/// On the GPU executor (f32 cache: the exact-arithmetic mode): within the bars of two f32
/// paths; the chunked prompt builds two plans (the cache-filling chunk, the last one), and
/// another session feeding it builds none.
#[test]
fn gpu_chunked_prompt_equals_one_step() {
    if skip() {
        return;
    }
    let gpu = common::gpu::device();
    for tiny in Tiny::ALL {
        let options = GpuOptions {
            kv_dtype: KvDtype::F32,
            ..GpuOptions::default()
        };
        let backend = GpuBackend::shared(gpu.clone()).with_options(options);
        let mut model = Model::load(&file(tiny), backend).unwrap();
        let whole = feed(&mut model, None);
        let chunked = feed(&mut model, Some(chunk()));

        let mut last = Deviation::default();
        last.add(&chunked.last, &whole.last);
        let mut all = Deviation::default();
        let n_vocab = model.config().n_vocab;
        for (c, w) in chunked.all.chunks(n_vocab).zip(whole.all.chunks(n_vocab)) {
            all.add(c, w);
        }
        for (what, d) in [("last row", &last), ("every row", &all)] {
            assert!(
                d.logit_rel <= LOGIT_REL && d.top10_nats <= TOP10_NATS,
                "{tiny:?}: {what}: {d:?}"
            );
        }
        assert_eq!(chunked.greedy, whole.greedy, "{tiny:?}: greedy");
        // Every scored log-prob within TOP10_NATS moves the mean NLL, so ln(ppl), by at
        // most that much.
        let d_ln_ppl = (chunked.ppl.ln() - whole.ppl.ln()).abs();
        assert!(
            d_ln_ppl <= TOP10_NATS,
            "{tiny:?}: ppl {chunked:?} vs {whole:?}"
        );
        eprintln!("{tiny:?}: last row {last:?}, every row {all:?}, |Δ ln ppl| {d_ln_ppl:.2e}");

        // The plans: two for a prompt of 37 in chunks of 8 (`feed` built them already, so
        // another session binds them and builds none).
        let model = &model;
        let before = model.backend().stats();
        let mut session = model.session(CTX).unwrap();
        session.forward(&prompt(), 0, OutputRows::Last).unwrap();
        let after = model.backend().stats();
        assert_eq!(after.plans_built, before.plans_built, "{tiny:?}");
        assert_eq!(
            after.steps - before.steps,
            PROMPT_LEN.div_ceil(CHUNK) as u64
        );
        let fresh = GpuBackend::shared(gpu.clone()).with_options(options);
        let mut fresh = Model::load(&file(tiny), fresh).unwrap();
        fresh.set_ubatch(chunk());
        let mut session = fresh.session(CTX).unwrap();
        session.forward(&prompt(), 0, OutputRows::Last).unwrap();
        assert_eq!(fresh.backend().stats().plans_built, 2, "{tiny:?}");
    }
}
