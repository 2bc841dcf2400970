//! `rullama_model::perplexity` on SmolLM2 (the smallest model, CPU executor): two short
//! chunks scored in one batched pass each agree with the same figure computed by hand from
//! token-by-token decoding. The full 40-chunk comparison with the oracle's `ppl_f32` is the
//! long run, `cargo xtask parity --models`.

mod common;

use common::{greedy_cases, model};
use rullama_model::ModelError;
use rullama_model::logits::log_softmax;
use rullama_model::perplexity::{self, Chunks};

const CTX: usize = 16;

/// Real text for two chunks: the oracle's greedy prompts and continuations, end to end.
fn tokens() -> Vec<u32> {
    let mut tokens: Vec<u32> = greedy_cases("smollm2-135m")
        .into_iter()
        .flat_map(|c| c.prompt_ids.into_iter().chain(c.ids))
        .collect();
    tokens.truncate(2 * CTX);
    assert_eq!(tokens.len(), 2 * CTX, "the oracle holds enough tokens");
    tokens
}

#[test]
fn two_chunks_match_token_by_token_decoding() {
    let tokens = tokens();
    // SmolLM2 adds no BOS; a replacement token (0, `<|endoftext|>`) still exercises the
    // first-token swap, which the hand computation below applies the same way.
    let bos = 0;
    let m = model("smollm2-135m").lock().unwrap();
    let mut seen = Vec::new();
    let chunks = Chunks {
        tokens: &tokens,
        ctx: CTX,
        n_chunks: 2,
        bos: Some(bos),
    };
    let total = perplexity::score(&m, chunks, |i, _| seen.push(i)).unwrap();
    assert_eq!(seen, [0, 1]);

    // By hand: each chunk from an empty cache, one token at a time (the decode path, not the
    // batched one), scoring positions CTX/2 ..= CTX-2 against the next token.
    let mut nll = Vec::new();
    for chunk in tokens.chunks_exact(CTX) {
        let mut session = m.session(CTX).unwrap();
        for pos in 0..CTX - 1 {
            let input = if pos == 0 { bos } else { chunk[pos] };
            let logits = session.feed(&[input]).unwrap();
            if pos >= CTX / 2 {
                nll.push(-log_softmax(&logits)[chunk[pos + 1] as usize]);
            }
        }
    }
    assert_eq!(total.count(), nll.len());
    let want = (nll.iter().sum::<f64>() / nll.len() as f64).exp();
    let rel = (total.ppl() - want).abs() / want;
    // Prefill and decode differ only in summation order inside f32 kernels.
    assert!(rel < 1e-5, "ppl {} vs token by token {want}", total.ppl());
    assert!(total.stderr() > 0.0 && total.stderr() < total.ppl());
}

#[test]
fn impossible_chunks_are_typed_errors() {
    let tokens = tokens();
    let m = model("smollm2-135m").lock().unwrap();
    for (ctx, n_chunks) in [(3, 1), (CTX, 3), (CTX, 0)] {
        let chunks = Chunks {
            tokens: &tokens,
            ctx,
            n_chunks,
            bos: None,
        };
        let err = perplexity::score(&m, chunks, |_, _| {}).unwrap_err();
        assert!(matches!(err, ModelError::Perplexity(_)), "{err}");
    }
}
