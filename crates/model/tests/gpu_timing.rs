//! Step times of the GPU backend (run by hand: `--ignored --nocapture`).

use std::time::Instant;

use rullama_model::{GpuBackend, Model, OutputRows};

#[test]
#[ignore = "timing report, run by hand"]
fn step_times() {
    let name = std::env::var("RULLAMA_TIMING_MODEL").unwrap_or_else(|_| "smollm2-135m".into());
    let path = rullama_gguf::store::cached_test_model(&name)
        .unwrap_or_else(|| panic!("test model {name} is not cached: run `cargo xtask models`"));
    let t = Instant::now();
    let backend = GpuBackend::open().expect("a GPU adapter");
    eprintln!("open device: {:.2?}", t.elapsed());
    let t = Instant::now();
    let model = Model::open(path, backend).unwrap();
    eprintln!("load {name}: {:.2?}", t.elapsed());
    let mut cache = model.session(64).unwrap();
    let prompt = [1u32, 2, 3, 4, 5, 6];
    for round in 0..2 {
        let t = Instant::now();
        cache.forward(&prompt, 0, OutputRows::Last).unwrap();
        eprintln!(
            "prefill {} (round {round}): {:.2?}",
            prompt.len(),
            t.elapsed()
        );
    }
    for i in 0..6 {
        let t = Instant::now();
        let pos = prompt.len() + i;
        cache.forward(&[7], pos, OutputRows::Last).unwrap();
        eprintln!("decode at {pos}: {:.2?}", t.elapsed());
    }
    eprintln!("{:?}", model.backend().stats());
}
