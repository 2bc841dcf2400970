//! Prefill and decode through the same graph, the cache, and input errors (on SmolLM2, the
//! smallest model), plus each architecture's config from its real file.

mod common;

use common::{dense_model, model};
use rullama_model::{Activation, Arch, ModelError, OutputRows, RopeStyle};

const PROMPT: [u32; 5] = [504, 3575, 282, 4649, 314];

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// One block of 5 tokens, or 2 + 1 + 1 + 1 with the cache carrying the rest: same logits,
/// and `OutputRows::All` gives every position's.
#[test]
fn prefill_equals_token_by_token() {
    let m = model("smollm2-135m").lock().unwrap();
    let mut block = m.session(8).unwrap();
    let all = block.forward(&PROMPT, 0, OutputRows::All).unwrap();
    assert_eq!(all.n_rows(), PROMPT.len());

    let mut step = m.session(8).unwrap();
    let first = step.forward(&PROMPT[..2], 0, OutputRows::Last).unwrap();
    assert!(max_abs_diff(first.last(), all.row(1)) < 1e-4);
    for i in 2..PROMPT.len() {
        let l = step.forward(&PROMPT[i..=i], i, OutputRows::Last).unwrap();
        let d = max_abs_diff(l.last(), all.row(i));
        assert!(d < 1e-4, "position {i}: max |Δ logit| {d}");
    }
    assert_eq!(step.len(), PROMPT.len());

    // Rewinding: run position 4 again with another token, then the original one.
    step.forward(&[42], 4, OutputRows::Last).unwrap();
    let again = step.forward(&PROMPT[4..], 4, OutputRows::Last).unwrap();
    assert!(max_abs_diff(again.last(), all.row(4)) < 1e-4);
}

/// Dequantizing at load gives the same logits, bit for bit.
#[test]
fn dense_storage_is_identical() {
    let dense = dense_model("smollm2-135m");
    let want = model("smollm2-135m")
        .lock()
        .unwrap()
        .session(8)
        .unwrap()
        .feed(&PROMPT)
        .unwrap();
    let got = dense.session(8).unwrap().feed(&PROMPT).unwrap();
    assert_eq!(got, want);
}

#[test]
fn input_errors_are_typed() {
    let m = model("smollm2-135m").lock().unwrap();
    let n_vocab = m.config().n_vocab;
    let mut s = m.session(4).unwrap();
    assert!(matches!(s.feed(&[]), Err(ModelError::EmptyInput)));
    assert!(matches!(
        s.feed(&[1, n_vocab as u32]),
        Err(ModelError::TokenOutOfRange { index: 1, .. })
    ));
    assert!(matches!(
        s.feed(&[1; 5]),
        Err(ModelError::ContextOverflow {
            start_pos: 0,
            n_tokens: 5,
            n_ctx: 4
        })
    ));
    assert!(matches!(
        s.forward(&[1], 2, OutputRows::Last),
        Err(ModelError::PositionGap {
            start_pos: 2,
            cached: 0
        })
    ));
    // Errors leave the session usable.
    s.feed(&[1, 2, 3, 4]).unwrap();
    assert!(matches!(
        s.feed(&[5]),
        Err(ModelError::ContextOverflow { start_pos: 4, .. })
    ));
}

#[test]
fn configs_follow_llama_cpp() {
    let g = model("gemma3-270m").lock().unwrap().config().clone();
    assert_eq!(g.arch, Arch::Gemma3);
    assert_eq!(
        (g.n_layer, g.d_model, g.n_head, g.n_head_kv),
        (18, 640, 4, 1)
    );
    assert_eq!((g.head_dim_k, g.n_ff, g.n_vocab), (256, 2048, 262_144));
    assert_eq!(g.rope_style, RopeStyle::Neox);
    assert_eq!(g.activation, Activation::GeluTanh);
    assert_eq!(g.attn_scale, 1.0 / 16.0);
    assert_eq!(g.embed_scale, Some(640f32.sqrt()));
    for (il, l) in g.layers.iter().enumerate() {
        let global = il % 6 == 5;
        assert_eq!(l.window, (!global).then_some(512), "layer {il}");
        assert_eq!(l.rope.base, if global { 1e6 } else { 1e4 }, "layer {il}");
    }

    let s = model("smollm2-135m").lock().unwrap().config().clone();
    assert_eq!(
        (s.arch, s.rope_style, s.activation),
        (Arch::Llama, RopeStyle::Normal, Activation::Silu)
    );
    assert_eq!(
        (s.n_head, s.n_head_kv, s.head_dim_k, s.n_vocab),
        (9, 3, 64, 49_152)
    );
    assert!(
        s.layers
            .iter()
            .all(|l| l.window.is_none() && l.rope.base == 1e5)
    );

    let q = model("qwen2.5-0.5b").lock().unwrap().config().clone();
    assert_eq!((q.arch, q.rope_style), (Arch::Qwen2, RopeStyle::Neox));
    assert_eq!(
        (q.n_head, q.n_head_kv, q.head_dim_k, q.n_vocab),
        (14, 2, 64, 151_936)
    );
    assert_eq!(q.attn_scale, 0.125);
}
