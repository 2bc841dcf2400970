//! Load errors on synthetic files: every missing tensor at once, wrong shapes, unknown
//! architectures, missing keys, a file cut while it loads.

use rullama_gguf::{GgmlType, GgufError, GgufFile, GgufWriter};
use rullama_model::{CpuBackend, Model, ModelError};

const D: u64 = 32;
const VOCAB: u64 = 16;

fn llama_writer(arch: &str, skip: &[&str], bad_shape: Option<&str>) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", arch);
    for (k, v) in [
        ("block_count", 2u32),
        ("embedding_length", D as u32),
        ("feed_forward_length", 64),
        ("attention.head_count", 4),
        ("attention.head_count_kv", 2),
        ("context_length", 128),
    ] {
        w.set(format!("{arch}.{k}"), v);
    }
    w.set(format!("{arch}.attention.layer_norm_rms_epsilon"), 1e-5f32);
    let mut tensors: Vec<(String, Vec<u64>)> = vec![
        ("token_embd.weight".into(), vec![D, VOCAB]),
        ("output_norm.weight".into(), vec![D]),
    ];
    for il in 0..2 {
        for (name, dims) in [
            ("attn_norm.weight", vec![D]),
            ("attn_q.weight", vec![D, D]),
            ("attn_k.weight", vec![D, D / 2]),
            ("attn_v.weight", vec![D, D / 2]),
            ("attn_output.weight", vec![D, D]),
            ("ffn_norm.weight", vec![D]),
            ("ffn_gate.weight", vec![D, 64]),
            ("ffn_up.weight", vec![D, 64]),
            ("ffn_down.weight", vec![64, D]),
        ] {
            tensors.push((format!("blk.{il}.{name}"), dims));
        }
    }
    for (name, mut dims) in tensors {
        if skip.contains(&name.as_str()) {
            continue;
        }
        if bad_shape == Some(name.as_str()) {
            dims[0] *= 2;
        }
        let n: u64 = dims.iter().product();
        w.add_tensor(name, &dims, GgmlType::F32, vec![0u8; n as usize * 4])
            .unwrap();
    }
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    bytes
}

fn load(bytes: Vec<u8>) -> Result<Model<CpuBackend>, ModelError> {
    let file = GgufFile::from_bytes(bytes).unwrap();
    Model::load(&file, CpuBackend::new())
}

#[test]
fn complete_synthetic_file_runs() {
    let m = load(llama_writer("llama", &[], None)).unwrap();
    let mut s = m.session(4).unwrap();
    let logits = s.feed(&[1, 2, 3]).unwrap();
    assert_eq!(logits.len(), VOCAB as usize);
    assert!(
        logits.iter().all(|v| *v == 0.0),
        "zero weights give zero logits"
    );
}

#[test]
fn all_missing_tensors_are_listed() {
    let skip = [
        "blk.0.attn_q.weight",
        "blk.1.ffn_up.weight",
        "output_norm.weight",
    ];
    match load(llama_writer("llama", &skip, None)) {
        Err(ModelError::MissingTensors { names, count }) => {
            assert_eq!(count, 3);
            let mut names = names;
            names.sort();
            let mut want: Vec<String> = skip.iter().map(|s| s.to_string()).collect();
            want.sort();
            assert_eq!(names, want);
        }
        other => panic!("expected MissingTensors, got {other:?}"),
    }
    // Qwen 2 requires q/k/v biases: 6 of them on 2 layers.
    match load(llama_writer("qwen2", &[], None)) {
        Err(ModelError::MissingTensors { names, count }) => {
            assert_eq!((names.len(), count), (6, 6), "{names:?}");
            assert!(names.contains(&"blk.1.attn_v.bias".to_string()));
        }
        other => panic!("expected MissingTensors, got {other:?}"),
    }
}

/// `llama_writer`'s file with the metadata `key` set to `value`.
fn with_key(key: &str, value: u32) -> Vec<u8> {
    let file = GgufFile::from_bytes(llama_writer("llama", &[], None)).unwrap();
    let mut w = GgufWriter::from_file(&file);
    w.metadata_mut().insert(key, value);
    let mut out = Vec::new();
    w.write_to(&mut out).unwrap();
    out
}

/// A corrupt block count: more layers than the file has tensors is refused before anything
/// is sized by it (2^32 - 1 would have allocated per-layer tables of ~100 GB); a count the
/// tensors allow lists the first few missing tensors and the number, in one short line.
#[test]
fn a_corrupt_block_count_is_a_short_error() {
    for n in [1_000_000, u32::MAX] {
        let err = load(with_key("llama.block_count", n)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "invalid model config: block_count {n} is more than the file's 20 tensors \
                 (each layer has its own)"
            )
        );
    }
    // Layers 2..15: 9 tensors each.
    match load(with_key("llama.block_count", 15)) {
        Err(e @ ModelError::MissingTensors { .. }) => {
            let text = e.to_string();
            let ModelError::MissingTensors { names, count } = e else {
                unreachable!()
            };
            assert_eq!(count, 13 * 9);
            assert_eq!(names.len(), rullama_model::MISSING_LISTED);
            assert!(names[0].starts_with("blk.2."), "{names:?}");
            let listed = names.join(", ");
            assert_eq!(
                text,
                format!("missing tensors (117): {listed} and 109 more")
            );
        }
        other => panic!("expected MissingTensors, got {other:?}"),
    }
}

/// `context_length` 0 is a corrupt file, not a default context of one position.
#[test]
fn a_zero_context_length_is_an_error() {
    let err = load(with_key("llama.context_length", 0)).unwrap_err();
    assert_eq!(err.to_string(), "invalid model config: context_length is 0");
}

#[test]
fn shape_mismatch_names_the_tensor() {
    let err = load(llama_writer("llama", &[], Some("blk.1.ffn_down.weight"))).unwrap_err();
    match err {
        ModelError::ShapeMismatch {
            name,
            expected,
            found,
        } => {
            assert_eq!(name, "blk.1.ffn_down.weight");
            assert_eq!(expected, [64, D]);
            assert_eq!(found, [128, D]);
        }
        other => panic!("expected ShapeMismatch, got {other:?}"),
    }
}

#[test]
fn unknown_architecture_and_missing_key() {
    let err = load(llama_writer("mamba", &[], None)).unwrap_err();
    assert!(matches!(err, ModelError::UnknownArchitecture(a) if a == "mamba"));

    let bytes = llama_writer("llama", &[], None);
    let file = GgufFile::from_bytes(bytes).unwrap();
    let mut w = GgufWriter::from_file(&file);
    w.metadata_mut().remove("llama.feed_forward_length");
    let mut out = Vec::new();
    w.write_to(&mut out).unwrap();
    match load(out) {
        Err(ModelError::MissingKey { key }) => assert_eq!(key, "llama.feed_forward_length"),
        other => panic!("expected MissingKey, got {other:?}"),
    }
}

/// A file cut after its header was read (as `Model::open` reads it: in ranges) fails the load
/// with an error naming the file and the first tensor past the cut, not a SIGBUS.
#[test]
fn a_file_cut_while_loading_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.gguf");
    std::fs::write(&path, llama_writer("llama", &[], None)).unwrap();
    let file = GgufFile::open_ranged(&path).unwrap();
    let last = file.tensors().max_by_key(|t| t.offset).unwrap();
    let cut = file.header().data_offset() + last.offset + 1;
    let last = last.name.clone();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();

    let err = Model::load(&file, CpuBackend::new()).unwrap_err();
    let ModelError::Gguf(GgufError::InFile { path: p, error }) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(p, &path);
    assert!(
        matches!(error.as_ref(), GgufError::TensorRead { tensor, .. } if *tensor == last),
        "{error:?}"
    );
    assert!(err.to_string().contains("cut.gguf"), "{err}");

    // Opened afresh, the cut file is refused before anything loads.
    match Model::open(&path, CpuBackend::new()).unwrap_err() {
        ModelError::Gguf(e) => assert!(
            matches!(e.kind(), GgufError::TensorOutOfBounds { tensor, .. } if *tensor == last),
            "{e:?}"
        ),
        other => panic!("{other:?}"),
    }
}
