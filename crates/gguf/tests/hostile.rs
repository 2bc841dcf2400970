//! Hostile and broken files: each must give a typed error that names the offset, never a
//! panic and never an allocation sized by a forged count.

mod common;

use common::{Raw, model_like_bytes, parse_every_way};
use rullama_gguf::{GgufError, GgufFile, ShapeError};

const HUGE: u64 = 1 << 62;

/// The error of parsing `bytes`, the same from a buffer and from a source read in windows.
fn parse(bytes: &[u8]) -> GgufError {
    match parse_every_way(bytes) {
        Ok(_) => panic!("parsed a file that should be rejected"),
        Err(e) => e,
    }
}

/// The error and its message, which must mention `offset {at}`.
fn parse_at(bytes: &[u8], at: u64) -> GgufError {
    let err = parse(bytes);
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("offset {at}")),
        "message does not name offset {at}: {msg}"
    );
    err
}

/// Start of the data section, and end of the last tensor's data, in the model-like file.
fn extents(bytes: &[u8]) -> (usize, usize) {
    let f = GgufFile::from_bytes(bytes).unwrap();
    let h = f.header();
    let last = f.tensors().map(|t| t.offset + t.n_bytes).max().unwrap();
    (h.data_offset() as usize, (h.data_offset() + last) as usize)
}

#[test]
fn truncation_at_every_byte_is_a_typed_error() {
    let bytes = model_like_bytes();
    let (data_offset, data_end) = extents(&bytes);
    for len in 0..data_end {
        match parse(&bytes[..len]) {
            GgufError::Truncated {
                offset,
                needed,
                file_len,
                ..
            } => {
                assert!(
                    len < data_offset,
                    "cut {len}: header complete, yet Truncated"
                );
                assert_eq!(file_len, len as u64);
                assert!(
                    offset <= file_len && offset + needed > file_len,
                    "cut {len}"
                );
            }
            GgufError::CountTooLarge { offset, .. } => assert!(offset < len as u64, "cut {len}"),
            GgufError::TensorOutOfBounds { file_len, .. } => {
                assert_eq!(file_len, len as u64, "cut {len}")
            }
            other => panic!("cut at {len}: unexpected {other:?}"),
        }
    }
    // The padding after the last tensor is not needed to read it.
    assert!(parse_every_way(&bytes[..data_end]).is_ok());
}

#[test]
fn single_bit_flips_never_panic() {
    let bytes = model_like_bytes();
    let (data_offset, _) = extents(&bytes);
    let mut errors = 0;
    for pos in 0..data_offset + 64 {
        for bit in 0..8 {
            let mut b = bytes.clone();
            b[pos] ^= 1 << bit;
            if let Ok(f) = GgufFile::from_bytes(&b[..]) {
                for v in f.tensor_views() {
                    assert_eq!(v.data.len() as u64, v.info.n_bytes);
                }
            } else {
                errors += 1;
            }
        }
    }
    assert!(
        errors > data_offset,
        "most header flips should be caught ({errors})"
    );
}

#[test]
fn bad_magic_and_versions() {
    let mut b = model_like_bytes();
    b[0] = b'g';
    assert!(matches!(parse_at(&b, 0), GgufError::BadMagic { found } if &found == b"gGUF"));

    for (version, big_endian) in [
        (0u32, false),
        (1, false),
        (4, false),
        (0x0300_0000, true),
        (0x0200_0000, true),
    ] {
        let mut b = model_like_bytes();
        b[4..8].copy_from_slice(&version.to_le_bytes());
        match parse_at(&b, 4) {
            GgufError::BigEndian { .. } => assert!(big_endian, "{version:#x}"),
            GgufError::UnsupportedVersion { version: v } => assert!(!big_endian && v == version),
            e => panic!("{e:?}"),
        }
    }
    assert!(matches!(
        parse(&[]),
        GgufError::Truncated {
            offset: 0,
            needed: 4,
            file_len: 0,
            ..
        }
    ));
}

#[test]
fn huge_counts_are_errors_not_allocations() {
    // Tensor count.
    let r = Raw::header(HUGE, 0);
    assert!(matches!(
        parse_at(&r.bytes, 8),
        GgufError::CountTooLarge { count: HUGE, .. }
    ));
    // Key/value count.
    let r = Raw::header(0, HUGE);
    assert!(matches!(
        parse_at(&r.bytes, 16),
        GgufError::CountTooLarge { count: HUGE, .. }
    ));
    // u64::MAX counts too (the product must not wrap).
    let r = Raw::header(u64::MAX, u64::MAX);
    assert!(matches!(parse(&r.bytes), GgufError::CountTooLarge { .. }));

    // Array length, for fixed-size, string and nested elements.
    for element_type in [0u32, 6, 8, 9, 12] {
        let mut r = Raw::header(0, 1);
        r.str(b"arr").u32(9).u32(element_type);
        let at = r.pos();
        r.u64(HUGE).put(&[0; 64]);
        assert!(matches!(
            parse_at(&r.bytes, at),
            GgufError::CountTooLarge { count: HUGE, .. }
        ));
    }

    // String lengths: key, string value, array element, tensor name.
    let mut r = Raw::header(0, 1);
    r.u64(HUGE).put(&[b'k'; 16]);
    assert!(matches!(
        parse_at(&r.bytes, 32),
        GgufError::Truncated { needed: HUGE, .. }
    ));

    let mut r = Raw::header(0, 1);
    r.str(b"k").u32(8);
    let at = r.pos() + 8;
    r.u64(HUGE).put(b"value");
    assert!(matches!(
        parse_at(&r.bytes, at),
        GgufError::Truncated { needed: HUGE, .. }
    ));

    let mut r = Raw::header(0, 1);
    r.str(b"k").u32(9).u32(8).u64(2).str(b"ok");
    let at = r.pos() + 8;
    r.u64(HUGE).put(b"x");
    assert!(matches!(
        parse_at(&r.bytes, at),
        GgufError::Truncated { needed: HUGE, .. }
    ));

    let mut r = Raw::header(1, 0);
    r.u64(HUGE).put(&[0; 64]);
    assert!(matches!(
        parse_at(&r.bytes, 32),
        GgufError::Truncated { needed: HUGE, .. }
    ));

    // A dimension count of 2^31 is refused before any dimension is read.
    let mut r = Raw::header(1, 0);
    r.str(b"t");
    let at = r.pos();
    r.u32(1 << 31).put(&[0; 64]);
    assert!(matches!(
        parse_at(&r.bytes, at),
        GgufError::TensorShape {
            error: ShapeError::DimCount {
                n_dims: 0x8000_0000
            },
            ..
        }
    ));
}

/// A file with one F32 tensor of 8 elements (32 bytes) at data offset `offset`.
fn one_tensor(offset: u64, data: usize) -> (Vec<u8>, u64) {
    let mut r = Raw::header(1, 0);
    let at = r.pos();
    r.tensor(b"w", &[8], 0, offset).data(32, data);
    (r.bytes, at)
}

#[test]
fn tensor_extents_are_checked() {
    let (ok, _) = one_tensor(0, 32);
    let f = GgufFile::from_bytes(&ok[..]).unwrap();
    assert_eq!(f.tensor("w").unwrap().data.len(), 32);

    let (b, at) = one_tensor(32, 32);
    match parse_at(&b, at) {
        GgufError::TensorOutOfBounds {
            tensor,
            n_bytes: 32,
            file_len,
            ..
        } => {
            assert_eq!((tensor.as_str(), file_len), ("w", b.len() as u64));
        }
        e => panic!("{e:?}"),
    }
    // The sum data_offset + offset overflows u64.
    let (b, at) = one_tensor(u64::MAX - 31, 32);
    assert!(matches!(
        parse_at(&b, at),
        GgufError::TensorOutOfBounds { .. }
    ));
    // One byte short.
    let (b, at) = one_tensor(0, 31);
    assert!(matches!(
        parse_at(&b, at),
        GgufError::TensorOutOfBounds { .. }
    ));

    let (b, at) = one_tensor(8, 64);
    assert!(matches!(
        parse_at(&b, at),
        GgufError::MisalignedTensor { data_offset: 8, alignment: 32, ref tensor, .. } if tensor == "w"
    ));
}

#[test]
fn invalid_utf8_is_located() {
    let bad = b"ab\xffcd";
    // In a key.
    let mut r = Raw::header(0, 1);
    r.str(bad).u32(4).u32(0);
    assert!(matches!(
        parse_at(&r.bytes, 24 + 8 + 2),
        GgufError::InvalidUtf8 { .. }
    ));
    // In a string value.
    let mut r = Raw::header(0, 1);
    r.str(b"key").u32(8);
    let at = r.pos() + 8 + 2;
    r.str(bad);
    let err = parse_at(&r.bytes, at);
    assert!(
        matches!(err, GgufError::InvalidUtf8 { ref what, .. } if what.contains("`key`")),
        "{err}"
    );
    // In an array of strings.
    let mut r = Raw::header(0, 1);
    r.str(b"tokens").u32(9).u32(8).u64(2).str(b"fine");
    let at = r.pos() + 8 + 2;
    r.str(bad);
    assert!(matches!(
        parse_at(&r.bytes, at),
        GgufError::InvalidUtf8 { .. }
    ));
    // In a tensor name.
    let mut r = Raw::header(1, 0);
    r.tensor(bad, &[8], 0, 0).data(32, 32);
    assert!(
        matches!(parse_at(&r.bytes, 24 + 8 + 2), GgufError::InvalidUtf8 { ref what, .. } if what == "tensor name")
    );
}

#[test]
fn unknown_types_are_named() {
    let mut r = Raw::header(0, 1);
    r.str(b"key");
    let at = r.pos();
    r.u32(13).u32(0);
    assert!(
        matches!(parse_at(&r.bytes, at), GgufError::UnknownValueType { type_id: 13, ref key, .. } if key == "key")
    );

    let mut r = Raw::header(0, 1);
    r.str(b"arr").u32(9);
    let at = r.pos();
    r.u32(0xdead_beef).u64(1).u32(0);
    assert!(matches!(
        parse_at(&r.bytes, at),
        GgufError::UnknownValueType {
            type_id: 0xdead_beef,
            ..
        }
    ));

    for type_id in [4u32, 31, 42, u32::MAX] {
        let mut r = Raw::header(1, 0);
        r.str(b"blk.0.w").u32(1).u64(8);
        let at = r.pos();
        r.u32(type_id).u64(0).data(32, 64);
        let err = parse_at(&r.bytes, at);
        assert!(
            matches!(err, GgufError::UnknownTensorType { type_id: t, ref tensor, .. } if t == type_id && tensor == "blk.0.w")
        );
        assert!(err.to_string().contains("blk.0.w"));
    }
}

#[test]
fn duplicates_are_refused() {
    let mut r = Raw::header(0, 2);
    r.kv_u32("a.b", 1);
    let at = r.pos();
    r.kv_u32("a.b", 2);
    assert!(
        matches!(parse_at(&r.bytes, at), GgufError::DuplicateKey { ref key, .. } if key == "a.b")
    );

    let mut r = Raw::header(2, 0);
    r.tensor(b"w", &[8], 0, 0);
    let at = r.pos();
    r.tensor(b"w", &[8], 0, 32).data(32, 64);
    assert!(
        matches!(parse_at(&r.bytes, at), GgufError::DuplicateTensor { ref tensor, .. } if tensor == "w")
    );
}

#[test]
fn alignment_must_be_a_power_of_two_u32() {
    for (ty, value) in [(4u32, 0u64), (4, 3), (4, 48), (10, 32), (5, 32)] {
        let mut r = Raw::header(0, 1);
        r.str(b"general.alignment").u32(ty);
        let at = r.pos();
        if ty == 10 {
            r.u64(value)
        } else {
            r.u32(value as u32)
        };
        assert!(
            matches!(parse_at(&r.bytes, at), GgufError::BadAlignment { .. }),
            "type {ty} value {value}"
        );
    }
    let mut r = Raw::header(1, 1);
    r.kv_u32("general.alignment", 64)
        .tensor(b"w", &[8], 0, 0)
        .data(64, 32);
    let f = GgufFile::from_bytes(&r.bytes[..]).unwrap();
    assert_eq!(
        (f.header().alignment(), f.header().data_offset() % 64),
        (64, 0)
    );
}

#[test]
fn bool_bytes_other_than_0_and_1_are_refused() {
    let mut r = Raw::header(0, 1);
    r.str(b"flags").u32(9).u32(7).u64(3).u8(1).u8(0);
    let at = r.pos();
    r.u8(2);
    assert!(matches!(
        parse_at(&r.bytes, at),
        GgufError::InvalidBool { byte: 2, .. }
    ));
}

#[test]
fn nested_arrays_are_bounded() {
    // 17 levels of array-of-array.
    let mut r = Raw::header(0, 1);
    r.str(b"deep").u32(9);
    for _ in 0..rullama_gguf::MAX_ARRAY_DEPTH {
        r.u32(9).u64(1);
    }
    let at = r.pos();
    r.u32(0).u64(0);
    assert!(matches!(
        parse_at(&r.bytes, at),
        GgufError::NestingTooDeep { .. }
    ));

    // A megabyte of nothing but array headers does not overflow the stack.
    let mut r = Raw::header(0, 1);
    r.str(b"deeper").u32(9);
    for _ in 0..100_000 {
        r.u32(9).u64(1);
    }
    assert!(matches!(parse(&r.bytes), GgufError::NestingTooDeep { .. }));
}

/// The shape error of a file holding one tensor `w` of `dims` and type `type_id`.
fn shape_error(dims: &[u64], type_id: u32) -> ShapeError {
    let mut r = Raw::header(1, 0);
    r.tensor(b"w", dims, type_id, 0).data(32, 64);
    match parse(&r.bytes) {
        GgufError::TensorShape {
            offset,
            tensor,
            error,
        } => {
            assert_eq!(tensor, "w");
            assert!(offset > 24 && offset < r.pos(), "{dims:?}: offset {offset}");
            error
        }
        e => panic!("{dims:?}: {e:?}"),
    }
}

#[test]
fn bad_shapes_are_refused() {
    assert_eq!(shape_error(&[], 0), ShapeError::DimCount { n_dims: 0 });
    assert_eq!(
        shape_error(&[1, 1, 1, 1, 1], 0),
        ShapeError::DimCount { n_dims: 5 }
    );
    assert_eq!(
        shape_error(&[8, 0], 0),
        ShapeError::ZeroDim { dims: vec![8, 0] }
    );
    assert_eq!(
        shape_error(&[1 << 40, 1 << 40], 0),
        ShapeError::Overflow {
            dims: vec![1 << 40, 1 << 40]
        }
    );
    assert!(matches!(
        shape_error(&[100, 2], 12),
        ShapeError::NotWholeBlocks {
            dim0: 100,
            block_size: 256,
            ..
        }
    ));
}

/// Both ways of opening a file by path: mapped and read in ranges.
fn open_both(path: &std::path::Path) -> [GgufError; 2] {
    let mapped = GgufFile::open(path).unwrap_err();
    let ranged = GgufFile::open_ranged(path).unwrap_err();
    [mapped, ranged]
}

#[test]
fn errors_from_open_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.gguf");
    let mut b = model_like_bytes();
    b.truncate(100);
    std::fs::write(&path, &b).unwrap();
    for err in open_both(&path) {
        assert!(matches!(&err, GgufError::InFile { path: p, .. } if p == &path));
        assert!(matches!(
            err.kind(),
            GgufError::Truncated { file_len: 100, .. } | GgufError::CountTooLarge { .. }
        ));
        let msg = err.to_string();
        assert!(
            msg.contains("broken.gguf") && msg.contains("offset"),
            "{msg}"
        );
    }

    let empty = dir.path().join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    for err in open_both(&empty) {
        assert!(
            matches!(
                err.kind(),
                GgufError::Truncated { offset: 0, .. } | GgufError::Io(_)
            ),
            "{err}"
        );
    }

    for err in open_both(&dir.path().join("absent.gguf")) {
        assert!(
            matches!(err.kind(), GgufError::Io(_)) && err.to_string().contains("absent.gguf"),
            "{err}"
        );
    }
}
