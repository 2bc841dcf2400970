//! The tape computes the same bits however many threads split its products: a run's
//! adapter does not depend on the machine's cores (and a checkpoint resumes anywhere).

use rullama_finetune::lora::{LoraSpec, Target};
use rullama_finetune::step::accumulate;
use rullama_finetune::tape::{Matrix, TapeBackend};
use rullama_finetune::train::attach;
use rullama_gguf::GgufFile;
use rullama_model::Model;
use rullama_synth::{Tiny, tiny_model};

fn loss_and_grads(file: &GgufFile<Vec<u8>>, threads: usize) -> (f64, Vec<Matrix>) {
    let mut model = Model::load(file, TapeBackend::with_threads(threads)).unwrap();
    let spec = LoraSpec {
        rank: 2,
        alpha: 4.0,
        targets: Target::ALL.to_vec(),
        rslora: false,
        dropout: 0.0,
    };
    let lora = attach(&mut model, spec).unwrap();
    let mut params = lora.init(3);
    for (i, b) in params.iter_mut().skip(1).step_by(2).enumerate() {
        b.data
            .iter_mut()
            .enumerate()
            .for_each(|(j, v)| *v = ((i * 31 + j) % 7) as f64 * 0.01);
    }
    let mut grads: Vec<Matrix> = params
        .iter()
        .map(|p| Matrix::zeros(p.rows, p.cols))
        .collect();
    let mut session = model.session(16).unwrap();
    *session.sequence_mut().params_mut() = params;
    // 5 tokens: fewer than 8 threads (the products split the weights), more than 1.
    let tokens = [2u32, 30, 31, 32, 33];
    let loss = accumulate(
        &mut session,
        &tokens,
        &[false, true, true, true, true],
        0.25,
        &mut grads,
    )
    .unwrap();
    (loss, grads)
}

#[test]
fn the_tape_gives_the_same_bits_on_any_number_of_threads() {
    let file = GgufFile::from_bytes(tiny_model(Tiny::Qwen2, 4)).unwrap();
    let (l1, g1) = loss_and_grads(&file, 1);
    for threads in [2, 3, 8] {
        let (l, g) = loss_and_grads(&file, threads);
        assert_eq!(l.to_bits(), l1.to_bits(), "{threads} threads: loss");
        assert_eq!(g, g1, "{threads} threads: gradients");
    }
}
