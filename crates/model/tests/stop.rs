//! Why a generation stops (`Generator::stop_reason`), and that a token drawn on the host is
//! fed only when the next one is asked for: a caller that stops after a token (an end of
//! generation) runs no step in vain, and the time of each step falls in the call that
//! returns its token. On the tiny synthetic model, CPU executor (milliseconds).

use rullama_gguf::GgufFile;
use rullama_model::sampler::{Sampler, SamplerParams};
use rullama_model::{CpuBackend, Generator, Model, StopReason};
use rullama_synth::{Tiny, tiny_model};

const PROMPT: &[u32] = &[1, 50, 61, 72];

fn model() -> Model<CpuBackend> {
    let file = GgufFile::from_bytes(tiny_model(Tiny::Smollm2, 7)).unwrap();
    Model::load(&file, CpuBackend::with_threads(1)).unwrap()
}

/// Tokens until `next` says none, and why.
fn run(model: &Model<CpuBackend>, n_ctx: usize, n_predict: usize) -> (usize, StopReason) {
    let mut sampler = Sampler::new(SamplerParams::greedy());
    let mut session = model.session(n_ctx).unwrap();
    let mut tokens = Generator::start(&mut session, PROMPT, 0, n_predict, &mut sampler).unwrap();
    let mut n = 0;
    assert_eq!(tokens.stop_reason(), None);
    while tokens.next(&mut sampler).unwrap().is_some() {
        n += 1;
    }
    (n, tokens.stop_reason().expect("stopped"))
}

#[test]
fn says_length_or_context() {
    let model = model();
    assert_eq!(run(&model, 64, 5), (5, StopReason::Length));
    // Room for the prompt and two fed tokens: the third is drawn from the last position.
    assert_eq!(run(&model, PROMPT.len() + 2, 10), (3, StopReason::Context));
    // A prompt that fills the context still gives the token it predicts.
    assert_eq!(run(&model, PROMPT.len(), 10), (1, StopReason::Context));
    // Both at once: as many as asked for is the reason given.
    assert_eq!(run(&model, PROMPT.len() + 2, 3), (3, StopReason::Length));
    assert_eq!(StopReason::EndOfGeneration.as_str(), "stop");
    assert_eq!(StopReason::Length.as_str(), "length");
    assert_eq!(StopReason::Context.as_str(), "context");
}

/// After a token is returned, the cache holds only what fed it; the next step runs when the
/// next token is asked for, and `finish` keeps the prompt and the tokens fed.
#[test]
fn a_host_drawn_token_is_fed_when_the_next_is_asked_for() {
    let model = model();
    let mut sampler = Sampler::new(SamplerParams::greedy());
    let mut session = model.session(64).unwrap();
    let mut tokens = Generator::start(&mut session, PROMPT, 0, 8, &mut sampler).unwrap();
    let first = tokens.next(&mut sampler).unwrap().unwrap();
    tokens.finish();
    assert_eq!(session.len(), PROMPT.len(), "no step fed the first token");

    // The same tokens as one step at a time with the logits.
    let mut reference = model.session(64).unwrap();
    let want = reference.greedy(PROMPT, 3).unwrap();
    assert_eq!(first, want[0]);
    let mut tokens = Generator::start(&mut session, PROMPT, 0, 3, &mut sampler).unwrap();
    let mut got = Vec::new();
    while let Some(t) = tokens.next(&mut sampler).unwrap() {
        got.push(t);
    }
    tokens.finish();
    assert_eq!(got, want);
    assert_eq!(session.len(), PROMPT.len() + 2);
}
