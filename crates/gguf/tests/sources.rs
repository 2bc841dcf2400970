//! The byte sources: a buffer, a memory map, a file read in ranges, and a source read in
//! small windows all give the same header and the same tensor bytes; a file that shrinks
//! while it is read in ranges is a typed error naming the file, the tensor and the offset.

mod common;

use std::borrow::Cow;
use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::path::PathBuf;

use common::{Chunked, model_like_bytes};
use rullama_gguf::{ByteSource, GgufError, GgufFile, RangedFile};

/// `bytes` written to the file `name` in `dir`.
fn written(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn every_source_reads_the_same_tensors() {
    let (bytes, dir) = (model_like_bytes(), tempfile::tempdir().unwrap());
    let path = written(&dir, "model.gguf", &bytes);

    let buffer = GgufFile::from_bytes(bytes.clone()).unwrap();
    let mapped = GgufFile::open(&path).unwrap();
    let ranged = GgufFile::open_ranged(&path).unwrap();
    let chunked = GgufFile::from_source(Chunked {
        bytes: &bytes,
        read_ahead: 3,
    })
    .unwrap();
    assert_eq!(ranged.path(), Some(path.as_path()));
    assert_eq!(ranged.source().byte_len(), bytes.len() as u64);
    for header in [mapped.header(), ranged.header(), chunked.header()] {
        assert_eq!(header, buffer.header());
    }
    assert_eq!(buffer.tensors().len(), 5);
    for view in buffer.tensor_views() {
        let name = &view.info.name;
        let borrowed = [
            buffer.read_tensor(view.info).unwrap(),
            mapped.load_tensor(name).unwrap().unwrap(),
        ];
        let owned = [
            ranged.load_tensor(name).unwrap().unwrap(),
            chunked.load_tensor(name).unwrap().unwrap(),
        ];
        for read in &borrowed {
            assert!(matches!(read.data, Cow::Borrowed(_)), "{name}");
        }
        for read in &owned {
            assert!(matches!(read.data, Cow::Owned(_)), "{name}");
        }
        for read in borrowed.iter().chain(&owned) {
            assert_eq!(read.view().data, view.data, "{name}");
            assert_eq!(read.info, view.info, "{name}");
        }
    }
    // Through a reused buffer: borrowed from memory (the buffer untouched), else read into it.
    let mut scratch = Vec::new();
    for view in buffer.tensor_views() {
        let from_map = mapped.read_tensor_with(view.info, &mut scratch).unwrap();
        assert_eq!(from_map.data, view.data);
        assert!(scratch.is_empty());
    }
    for view in buffer.tensor_views() {
        let read = ranged.read_tensor_with(view.info, &mut scratch).unwrap();
        assert_eq!(read.data, view.data, "{}", view.info.name);
    }
    let largest = buffer.tensors().map(|t| t.n_bytes).max().unwrap();
    assert_eq!(
        scratch.len() as u64,
        largest,
        "grown to the largest, never shrunk"
    );
    assert!(ranged.load_tensor("absent").unwrap().is_none());
}

#[test]
fn a_file_cut_after_its_header_is_read_names_the_tensor() {
    let (bytes, dir) = (model_like_bytes(), tempfile::tempdir().unwrap());
    let path = written(&dir, "cut.gguf", &bytes);
    let file = GgufFile::open_ranged(&path).unwrap();

    // Cut the file in the middle of its third tensor, as a download being replaced or a
    // disk filling up would, after the header was read.
    let data_offset = file.header().data_offset();
    let infos: Vec<_> = file.tensors().cloned().collect();
    let cut = data_offset + infos[2].offset + infos[2].n_bytes / 2;
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();

    let mut scratch = Vec::new();
    for info in &infos {
        let start = data_offset + info.offset;
        let result = file.read_tensor(info);
        let with_scratch = file.read_tensor_with(info, &mut scratch);
        if start + info.n_bytes <= cut {
            assert_eq!(result.unwrap().data.len() as u64, info.n_bytes);
            assert_eq!(with_scratch.unwrap().data.len() as u64, info.n_bytes);
            continue;
        }
        assert_eq!(
            format!("{:?}", with_scratch.unwrap_err()),
            format!("{:?}", result.as_ref().unwrap_err())
        );
        let err = result.unwrap_err();
        let GgufError::InFile { path: p, error } = &err else {
            panic!("{}: not named by its file: {err:?}", info.name);
        };
        assert_eq!(p, &path);
        match error.as_ref() {
            GgufError::TensorRead {
                tensor,
                offset,
                n_bytes,
                error,
            } => {
                assert_eq!(tensor, &info.name);
                assert_eq!((*offset, *n_bytes), (start, info.n_bytes));
                assert_eq!(error.kind(), ErrorKind::UnexpectedEof);
            }
            other => panic!("{}: {other:?}", info.name),
        }
        let msg = err.to_string();
        for part in ["cut.gguf", info.name.as_str(), &format!("offset {start}")] {
            assert!(msg.contains(part), "{msg} lacks {part}");
        }
        assert!(msg.contains(&format!("{cut} now")), "{msg}");
    }
}

#[test]
fn a_file_cut_before_its_header_is_read_is_a_read_error() {
    let (bytes, dir) = (model_like_bytes(), tempfile::tempdir().unwrap());
    let path = written(&dir, "cut.gguf", &bytes);
    let source = RangedFile::open(&path).unwrap();
    std::fs::write(&path, &bytes[..40]).unwrap();
    match GgufFile::from_source(source).unwrap_err() {
        GgufError::Read { offset, error, .. } => {
            assert_eq!(offset, 0, "the first window starts at the magic");
            assert_eq!(error.kind(), ErrorKind::UnexpectedEof);
        }
        other => panic!("{other:?}"),
    }
}
