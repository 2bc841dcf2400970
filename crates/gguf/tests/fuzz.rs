//! The CI fuzz target: random damage to a model-shaped file must never panic.
//!
//! 256 cases by default; set `PROPTEST_CASES` for a longer run. Each case applies a handful
//! of mutations (byte overwrites, forged u64 counts, insertions, deletions, a truncation) to
//! a few-KB file with a gemma3-style header, then parses it. Whatever parses must also hold
//! together: views have their sizes, and it writes back to a file that parses the same.
//! Every case is parsed from a buffer and through sources read in windows of a few sizes
//! (`common::parse_every_way`), which must agree.

mod common;

use proptest::prelude::*;
use rullama_gguf::{GgufFile, GgufWriter};

#[derive(Debug, Clone)]
enum Mutation {
    Set {
        at: usize,
        byte: u8,
    },
    /// Overwrite 8 bytes with a value a forged count or offset might hold.
    U64 {
        at: usize,
        value: u64,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Remove {
        at: usize,
        len: usize,
    },
    Truncate {
        len: usize,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let interesting = prop_oneof![
        Just(0u64),
        Just(1),
        Just(31),
        Just(1 << 31),
        Just(1 << 62),
        Just(u64::MAX),
        Just(u64::MAX - 31),
        any::<u64>(),
    ];
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        2 => (any::<usize>(), interesting).prop_map(|(at, value)| Mutation::U64 { at, value }),
        1 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        1 => (any::<usize>(), 1..64usize).prop_map(|(at, len)| Mutation::Remove { at, len }),
        1 => any::<usize>().prop_map(|len| Mutation::Truncate { len }),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len().max(1);
    match m {
        Mutation::Set { at, byte } => {
            if let Some(b) = bytes.get_mut(at % n) {
                *b = *byte;
            }
        }
        Mutation::U64 { at, value } => {
            let at = at % n;
            let end = (at + 8).min(bytes.len());
            bytes[at..end].copy_from_slice(&value.to_le_bytes()[..end - at]);
        }
        Mutation::Insert { at, bytes: b } => {
            let at = at % (bytes.len() + 1);
            bytes.splice(at..at, b.iter().copied());
        }
        Mutation::Remove { at, len } => {
            let at = at % n;
            let end = (at + len).min(bytes.len());
            bytes.drain(at.min(end)..end);
        }
        Mutation::Truncate { len } => bytes.truncate(len % n),
    }
}

fn base() -> &'static [u8] {
    static BASE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BASE.get_or_init(common::model_like_bytes)
}

proptest! {
    #[test]
    fn mutated_headers_never_panic(mutations in prop::collection::vec(mutation(), 1..6)) {
        let mut bytes = base().to_vec();
        // Most damage should land in the header, where the parser does its work.
        for m in &mutations {
            apply(&mut bytes, m);
        }
        if common::parse_every_way(&bytes).is_ok() {
            let file = GgufFile::from_bytes(&bytes[..]).unwrap();
            let chunked = common::Chunked { bytes: &bytes, read_ahead: 7 };
            let chunked = GgufFile::from_source(chunked).unwrap();
            for view in file.tensor_views() {
                prop_assert_eq!(view.data.len() as u64, view.info.n_bytes);
                let read = chunked.read_tensor(view.info).unwrap();
                prop_assert_eq!(&read.data[..], view.data);
            }
            let mut out = Vec::new();
            GgufWriter::from_file(&file).write_to(&mut out).unwrap();
            let again = GgufFile::from_bytes(&out[..]).unwrap();
            prop_assert_eq!(again.tensors().len(), file.tensors().len());
            prop_assert_eq!(again.metadata().len(), file.metadata().len());
        }
    }
}
