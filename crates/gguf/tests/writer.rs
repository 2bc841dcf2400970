//! Writer -> reader round trips of synthetic files, and the writer's own checks.

mod common;

use common::{every_value, filler};
use rullama_gguf::{
    GgmlType, GgufError, GgufFile, GgufWriter, ShapeError, TensorInfo, TensorStream, Value,
};

/// A tensor as given to the writer: name, dims, type, data.
type Tensor = (&'static str, Vec<u64>, GgmlType, Vec<u8>);

/// Every value type, nested arrays, six tensors of different types (sizes that need
/// padding), alignment 64 set in the middle of the metadata.
fn everything() -> (GgufWriter<'static>, Vec<Tensor>) {
    let mut w = GgufWriter::new();
    let values = every_value();
    let (first, rest) = values.split_at(5);
    for (k, v) in first {
        w.set(*k, v.clone());
    }
    w.set_alignment(64).unwrap();
    for (k, v) in rest {
        w.set(*k, v.clone());
    }
    let tensors = vec![
        ("f32", vec![3, 2], GgmlType::F32, filler(24, 1)),
        ("f16", vec![5], GgmlType::F16, filler(10, 2)),
        ("q8_0", vec![64, 2, 1], GgmlType::Q8_0, filler(4 * 34, 3)),
        (
            "q4_k",
            vec![256, 1, 1, 2],
            GgmlType::Q4K,
            filler(2 * 144, 4),
        ),
        ("i8", vec![7], GgmlType::I8, filler(7, 5)),
        ("bf16", vec![1, 1], GgmlType::Bf16, filler(2, 6)),
    ];
    for (name, dims, t, data) in &tensors {
        w.add_tensor(*name, dims, *t, data.clone()).unwrap();
    }
    (w, tensors)
}

#[test]
fn every_value_type_and_tensor_survives_write_then_read() {
    let (w, tensors) = everything();
    let mut bytes = Vec::new();
    let n = w.write_to(&mut bytes).unwrap();
    assert_eq!(n as usize, bytes.len());
    assert_eq!(bytes.len() % 64, 0, "the last tensor is padded too");

    let f = GgufFile::from_bytes(&bytes[..]).unwrap();
    let h = f.header();
    assert_eq!((h.version(), h.alignment()), (3, 64));
    assert_eq!(h.data_offset() % 64, 0);
    assert_eq!(f.metadata(), w.metadata(), "same keys, order and types");
    let keys: Vec<&str> = f.metadata().iter().map(|(k, _)| k).collect();
    assert_eq!(keys[5], "general.alignment");
    assert_eq!(
        f.metadata()
            .get("t.f32")
            .map(|v| matches!(v, Value::F32(x) if x.to_bits() == (-0.0f32).to_bits())),
        Some(true)
    );

    assert_eq!(f.tensors().len(), tensors.len());
    for (info, (name, dims, t, data)) in f.tensors().zip(&tensors) {
        assert_eq!(
            (info.name.as_str(), &info.dims, info.ggml_type),
            (*name, dims, *t)
        );
        assert_eq!(info.offset % 64, 0, "{name}");
        let view = f.tensor(name).unwrap();
        assert_eq!(view.data, data.as_slice(), "{name}");
    }
    assert_eq!(f.tensor("q4_k").unwrap().info.n_elements, 512);

    // And the parsed file writes back to the same bytes.
    let mut again = Vec::new();
    GgufWriter::from_file(&f).write_to(&mut again).unwrap();
    assert!(again == bytes);
}

#[test]
fn nan_payloads_and_version_2_are_kept() {
    let mut w = GgufWriter::new();
    w.set_version(2).unwrap();
    w.set("nan", f32::from_bits(0x7fc0_1234))
        .set("nan64", vec![f64::from_bits(0xfff8_0000_0000_0001)]);
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    let f = GgufFile::from_bytes(bytes.as_slice()).unwrap();
    assert_eq!(f.header().version(), 2);
    assert_eq!(f.metadata().get_f32("nan").unwrap().to_bits(), 0x7fc0_1234);
    let Some(Value::Array(a)) = f.metadata().get("nan64") else {
        panic!()
    };
    assert!(matches!(a.get(0), Some(Value::F64(x)) if x.to_bits() == 0xfff8_0000_0000_0001));
    let mut again = Vec::new();
    GgufWriter::from_file(&f).write_to(&mut again).unwrap();
    assert_eq!(again, bytes);
}

#[test]
fn write_to_path_then_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    let (w, _) = everything();
    let n = w.write_to_path(&path).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), n);
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.path(), Some(path.as_path()));
    assert_eq!(f.tensor("i8").unwrap().data, filler(7, 5));

    let err = w
        .write_to_path(dir.path().join("no/such/dir/m.gguf"))
        .unwrap_err();
    assert!(
        matches!(err, GgufError::InFile { .. }) && matches!(err.kind(), GgufError::Io(_)),
        "{err}"
    );
    assert!(err.to_string().contains("no/such/dir"), "{err}");
}

#[test]
fn empty_file_with_no_tensors() {
    let mut bytes = Vec::new();
    GgufWriter::new().write_to(&mut bytes).unwrap();
    assert_eq!(bytes.len(), 32, "24-byte header padded to 32");
    let f = GgufFile::from_bytes(bytes).unwrap();
    assert!(f.metadata().is_empty() && f.tensors().len() == 0);
}

#[test]
fn editing_a_parsed_file() {
    let (w, _) = everything();
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    let f = GgufFile::from_bytes(&bytes[..]).unwrap();
    let mut edit = GgufWriter::from_file(&f);
    edit.set("t.u8", 1u8).set("added", "x");
    edit.metadata_mut().remove("a.nested");
    edit.set_alignment(32).unwrap();
    edit.add_tensor("extra", &[4], GgmlType::I32, vec![0u8; 16])
        .unwrap();
    let mut out = Vec::new();
    edit.write_to(&mut out).unwrap();
    let g = GgufFile::from_bytes(out).unwrap();
    assert_eq!(g.header().alignment(), 32);
    assert_eq!(g.metadata().get_as::<u8>("t.u8").unwrap(), 1);
    assert!(g.metadata().get("a.nested").is_none());
    assert_eq!(g.metadata().iter().last().map(|(k, _)| k), Some("added"));
    assert_eq!(
        g.tensor("q8_0").unwrap().data,
        f.tensor("q8_0").unwrap().data
    );
    assert_eq!(g.tensors().last().unwrap().name, "extra");
}

#[test]
fn writer_rejects_bad_tensors_and_settings() {
    let mut w = GgufWriter::new();
    w.add_tensor("a", &[4], GgmlType::F32, vec![0u8; 16])
        .unwrap();
    let err = w
        .add_tensor("a", &[4], GgmlType::F32, vec![0u8; 16])
        .unwrap_err();
    assert!(
        matches!(err, GgufError::TensorAddedTwice { ref tensor } if tensor == "a"),
        "{err}"
    );
    let err = w
        .add_tensor("b", &[4], GgmlType::F32, vec![0u8; 15])
        .unwrap_err();
    assert!(
        matches!(
            err,
            GgufError::TensorDataSize {
                expected: 16,
                got: 15,
                ..
            }
        ),
        "{err}"
    );
    let err = w
        .add_tensor("c", &[100], GgmlType::Q4K, vec![])
        .unwrap_err();
    assert!(
        matches!(
            err,
            GgufError::InvalidTensor {
                error: ShapeError::NotWholeBlocks {
                    block_size: 256,
                    ..
                },
                ..
            }
        ),
        "{err}"
    );
    let err = w
        .add_tensor("d", &[1, 1, 1, 1, 1], GgmlType::F32, vec![0u8; 4])
        .unwrap_err();
    assert!(
        matches!(
            err,
            GgufError::InvalidTensor {
                error: ShapeError::DimCount { n_dims: 5 },
                ..
            }
        ),
        "{err}"
    );
    assert!(w.set_alignment(48).is_err());
    assert!(w.set_alignment(0).is_err());
    assert!(w.set_version(1).is_err());
    // A hand-set alignment of the wrong type is refused at write time, naming the key.
    w.set("general.alignment", 64u64);
    let err = w.write_to(Vec::new()).unwrap_err();
    assert!(err.to_string().contains("general.alignment"), "{err}");
}

#[test]
fn tensor_stream_writes_what_the_writer_writes() {
    let (w, tensors) = everything();
    let mut expected = Vec::new();
    w.write_to(&mut expected).unwrap();

    let infos = tensors
        .iter()
        .map(|(name, dims, t, _)| TensorInfo::new(*name, dims, *t, 0).unwrap())
        .collect();
    let mut bytes = Vec::new();
    let mut stream = TensorStream::new(&mut bytes, w.metadata(), infos).unwrap();
    for (name, _, _, data) in &tensors {
        assert_eq!(stream.next_tensor().unwrap().name, *name);
        stream.write_tensor(data).unwrap();
    }
    assert!(stream.next_tensor().is_none());
    let n = stream.finish().unwrap();
    assert_eq!(n as usize, bytes.len());
    assert_eq!(bytes, expected);
}

#[test]
fn tensor_stream_checks_sizes_and_counts() {
    let meta = rullama_gguf::Metadata::new();
    let info = |name: &str| TensorInfo::new(name, &[4], GgmlType::F32, 0).unwrap();

    let mut stream = TensorStream::new(Vec::new(), &meta, vec![info("a")]).unwrap();
    let err = stream.write_tensor(&[0; 15]).unwrap_err();
    assert!(matches!(
        err,
        GgufError::TensorDataSize {
            expected: 16,
            got: 15,
            ..
        }
    ));
    stream.write_tensor(&[0; 16]).unwrap();
    let err = stream.write_tensor(&[0; 16]).unwrap_err();
    assert!(matches!(
        err,
        GgufError::StreamTensorCount {
            declared: 1,
            written: 2
        }
    ));

    let stream = TensorStream::new(Vec::new(), &meta, vec![info("a"), info("b")]).unwrap();
    let err = stream.finish().unwrap_err();
    assert!(matches!(
        err,
        GgufError::StreamTensorCount {
            declared: 2,
            written: 0
        }
    ));

    let err = TensorStream::new(Vec::new(), &meta, vec![info("a"), info("a")]).unwrap_err();
    assert!(matches!(err, GgufError::TensorAddedTwice { .. }));
}

/// Tensors written a few bytes at a time (in pieces of 1, 7, 64 bytes and the rest) make the
/// same file as whole ones; a piece past a tensor's end and a whole tensor after a piece are
/// errors, and so is finishing inside a tensor.
#[test]
fn tensor_stream_writes_tensors_in_parts() {
    let (w, tensors) = everything();
    let mut expected = Vec::new();
    w.write_to(&mut expected).unwrap();
    let infos: Vec<TensorInfo> = tensors
        .iter()
        .map(|(name, dims, t, _)| TensorInfo::new(*name, dims, *t, 0).unwrap())
        .collect();
    let mut bytes = Vec::new();
    let mut stream = TensorStream::new(&mut bytes, w.metadata(), infos).unwrap();
    for (_, _, _, data) in &tensors {
        let mut rest = data.as_slice();
        for n in [1, 7, 64] {
            let (piece, tail) = rest.split_at(n.min(rest.len()));
            stream.write_part(piece).unwrap();
            rest = tail;
        }
        stream.write_part(rest).unwrap();
    }
    stream.finish().unwrap();
    assert_eq!(bytes, expected);

    let meta = rullama_gguf::Metadata::new();
    let info = |name: &str| TensorInfo::new(name, &[4], GgmlType::F32, 0).unwrap();
    let mut stream = TensorStream::new(Vec::new(), &meta, vec![info("a"), info("b")]).unwrap();
    stream.write_part(&[0; 10]).unwrap();
    let err = stream.write_part(&[0; 7]).unwrap_err();
    assert!(
        matches!(
            err,
            GgufError::TensorDataSize {
                expected: 16,
                got: 17,
                ..
            }
        ),
        "{err}"
    );
    let err = stream.write_tensor(&[0; 16]).unwrap_err();
    assert!(
        matches!(
            err,
            GgufError::TensorDataSize {
                expected: 16,
                got: 26,
                ..
            }
        ),
        "{err}"
    );
    stream.write_part(&[0; 6]).unwrap();
    assert_eq!(stream.next_tensor().unwrap().name, "b");
    stream.write_part(&[0; 8]).unwrap();
    let err = stream.finish().unwrap_err();
    assert!(
        matches!(
            err,
            GgufError::StreamTensorCount {
                declared: 2,
                written: 1
            }
        ),
        "{err}"
    );
}
