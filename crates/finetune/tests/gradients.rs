//! The tape's LoRA gradients equal central finite differences of its loss, in f64, on a
//! tiny random model of each architecture, every projection adapted.

use rullama_finetune::lora::{LoraSpec, Target, TrainableLora};
use rullama_finetune::step::{accumulate, loss};
use rullama_finetune::tape::{Matrix, TapeBackend};
use rullama_gguf::GgufFile;
use rullama_model::{Model, Session};
use rullama_synth::{Tiny, tiny_model};

/// A small step: the loss is smooth, so the central difference errs by `O(h²)` (~1e-10
/// relative here) plus f64 rounding of the loss over `h` (~1e-16 / 1e-5).
const H: f64 = 1e-5;
/// What the two may differ by, relative to the larger of the two...
const TOL: f64 = 1e-6;
/// ...plus this, absolute: the loss (~5) is a sum of thousands of f64 terms, rounded to
/// ~1e-14, and the difference divides that by `2h`, so the finite difference itself is no
/// better than ~1e-9 on any entry.
const FLOOR: f64 = 1e-9;

fn check(tiny: Tiny) {
    check_with(tiny, 0.0);
}

/// `dropout`: the masks of one training step (a fixed seed) stay fixed while the finite
/// differences move a parameter, so the loss is as smooth as without them.
fn check_with(tiny: Tiny, dropout: f32) {
    let file = GgufFile::from_bytes(tiny_model(tiny, 11)).unwrap();
    let mut model = Model::load(&file, TapeBackend::new()).unwrap();
    let spec = LoraSpec {
        rank: 2,
        alpha: 4.0,
        targets: Target::ALL.to_vec(),
        rslora: false,
        dropout,
    };
    let lora = TrainableLora::new(&model.lora_projections(), spec).unwrap();
    model.set_lora_weights("trained", lora.weights()).unwrap();
    // B starts at zero in training, which would leave A's gradient zero: a random B
    // checks both factors.
    let mut params = lora.init(5);
    let mut salt = 0.37f64;
    for b in params.iter_mut().skip(1).step_by(2) {
        for v in &mut b.data {
            salt = (salt * 997.0 + 0.123).fract();
            *v = 0.2 * (salt - 0.5);
        }
    }
    let mut session = model.session(32).unwrap();
    *session.sequence_mut().params_mut() = params.clone();
    if dropout > 0.0 {
        let plain = loss(
            &mut session,
            &[2, 40, 41, 7],
            &[false, true, true, true],
            1.0,
        )
        .unwrap();
        session.sequence_mut().set_dropout_seed(Some(99));
        let dropped = loss(
            &mut session,
            &[2, 40, 41, 7],
            &[false, true, true, true],
            1.0,
        )
        .unwrap();
        assert_ne!(plain, dropped, "the dropout changed nothing");
    }
    let tokens = [2u32, 40, 41, 7, 42, 9, 43, 5];
    let mask = [false, true, true, false, true, true, true, true];
    let weight = 1.0f32 / 6.0;
    let mut grads: Vec<Matrix> = params
        .iter()
        .map(|p| Matrix::zeros(p.rows, p.cols))
        .collect();
    accumulate(&mut session, &tokens, &mask, weight, &mut grads).unwrap();

    let eval = |session: &mut Session<'_, TapeBackend>, id: usize, at: usize, value: f64| {
        session.sequence_mut().params_mut()[id].data[at] = value;
        loss(session, &tokens, &mask, weight).unwrap()
    };
    let mut checked = 0;
    for (id, p) in params.iter().enumerate() {
        // One entry of every matrix, spread over the rows and columns.
        {
            let at = (id * 7919 + 13) % p.data.len();
            let x = p.data[at];
            let up = eval(&mut session, id, at, x + H);
            let down = eval(&mut session, id, at, x - H);
            eval(&mut session, id, at, x);
            let fd = (up - down) / (2.0 * H);
            let g = grads[id].data[at];
            assert!(
                (fd - g).abs() <= TOL * fd.abs().max(g.abs()) + FLOOR,
                "{tiny:?}: parameter {id} ({}), entry {at}: tape {g:e}, finite difference {fd:e}",
                lora.pairs()[id / 2].base
            );
            checked += 1;
        }
    }
    assert_eq!(checked, params.len());
    assert!(
        grads.iter().all(|g| g.data.iter().any(|&v| v != 0.0)),
        "every parameter gets a gradient"
    );
}

#[test]
fn gemma3_lora_gradients_match_finite_differences() {
    check(Tiny::Gemma3);
}

#[test]
fn llama_lora_gradients_match_finite_differences() {
    check(Tiny::Llama);
}

#[test]
fn qwen2_lora_gradients_match_finite_differences() {
    check(Tiny::Qwen2);
}

#[test]
fn llama_lora_gradients_with_dropout_match_finite_differences() {
    check_with(Tiny::Llama, 0.3);
}
