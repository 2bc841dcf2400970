//! Shared by the integration tests: where the real models are, a small synthetic model that
//! exercises every value type, and a raw little-endian byte builder for hand-made hostile files.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;

use rullama_gguf::{Array, ByteSource, GgmlType, GgufHeader, GgufWriter, Value};

pub const REAL_MODELS: [&str; 3] = [
    "gemma-3-270m-q4_k_m.gguf",
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen2.5-coder-0.5b-instruct.gguf",
];

/// A cached real model; fails the test (does not skip it) when the file is missing.
pub fn real_model(file: &str) -> PathBuf {
    let dir = match std::env::var_os("RULLAMA_MODELS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is not set"))
            .join(".cache/rullama/models"),
    };
    let path = dir.join(file);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo xtask models` to fetch the test models",
        path.display()
    );
    path
}

/// Deterministic filler bytes for tensor data.
pub fn filler(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A model-shaped file: gemma3-style keys, a small vocabulary, five tensors of different
/// types. Small (a few KB) so hostile-input tests can try every byte.
pub fn model_like() -> GgufWriter<'static> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "gemma3")
        .set("general.name", "tiny gemma — test")
        .set("gemma3.block_count", 2u32)
        .set("gemma3.embedding_length", 64u32)
        .set("gemma3.context_length", 2048u64)
        .set("gemma3.attention.layer_norm_rms_epsilon", 1e-6f32)
        .set("gemma3.rope.freq_base", 1e6f32)
        .set("gemma3.attention.sliding_window_pattern", vec![true, false])
        .set("tokenizer.ggml.model", "llama")
        .set(
            "tokenizer.ggml.tokens",
            (0..24)
                .map(|i| format!("tok{i}▁é"))
                .collect::<Vec<String>>(),
        )
        .set(
            "tokenizer.ggml.scores",
            (0..24).map(|i| -(i as f32)).collect::<Vec<f32>>(),
        )
        .set(
            "tokenizer.ggml.token_type",
            (0..24).map(|i| i % 3).collect::<Vec<i32>>(),
        )
        .set("tokenizer.ggml.add_bos_token", true)
        .set(
            "tokenizer.chat_template",
            "{% for m in messages %}{{ m.content }}{% endfor %}",
        );
    w.add_tensor(
        "token_embd.weight",
        &[64, 4],
        GgmlType::Q8_0,
        filler(4 * 2 * 34, 1),
    )
    .unwrap();
    w.add_tensor(
        "blk.0.attn_norm.weight",
        &[64],
        GgmlType::F32,
        filler(256, 2),
    )
    .unwrap();
    w.add_tensor(
        "blk.0.ffn_up.weight",
        &[256, 2],
        GgmlType::Q4K,
        filler(2 * 144, 3),
    )
    .unwrap();
    w.add_tensor(
        "blk.0.ffn_down.weight",
        &[256],
        GgmlType::Q6K,
        filler(210, 4),
    )
    .unwrap();
    w.add_tensor("blk.0.bias", &[3], GgmlType::F16, filler(6, 5))
        .unwrap();
    w
}

pub fn model_like_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    model_like().write_to(&mut out).unwrap();
    out
}

/// One key of every scalar type, every array element type, empty and nested arrays.
pub fn every_value() -> Vec<(&'static str, Value)> {
    vec![
        ("t.u8", Value::U8(200)),
        ("t.i8", Value::I8(-100)),
        ("t.u16", Value::U16(60_000)),
        ("t.i16", Value::I16(-30_000)),
        ("t.u32", Value::U32(4_000_000_000)),
        ("t.i32", Value::I32(-2_000_000_000)),
        ("t.f32", Value::F32(-0.0)),
        ("t.f32_sub", Value::F32(f32::from_bits(1))),
        ("t.bool", Value::Bool(true)),
        ("t.string", Value::from("ascii, ünïcödé, 漢字, 🦀")),
        ("t.empty_string", Value::from("")),
        ("t.u64", Value::U64(u64::MAX)),
        ("t.i64", Value::I64(i64::MIN)),
        ("t.f64", Value::F64(f64::INFINITY)),
        ("a.u8", vec![0u8, 1, 255].into()),
        ("a.i8", vec![-128i8, 0, 127].into()),
        ("a.u16", vec![1u16, 65535].into()),
        ("a.i16", vec![-1i16, 1].into()),
        ("a.u32", vec![7u32; 5].into()),
        ("a.i32", vec![-7i32, 7].into()),
        ("a.f32", vec![1.5f32, -2.25, f32::MAX].into()),
        ("a.bool", vec![true, false, true].into()),
        ("a.string", vec!["a", "", "ß"].into()),
        ("a.u64", vec![u64::MAX, 0].into()),
        ("a.i64", vec![i64::MIN, i64::MAX].into()),
        ("a.f64", vec![f64::MIN_POSITIVE, 1e300].into()),
        (
            "a.empty_f32",
            Array::empty(rullama_gguf::ValueType::F32).into(),
        ),
        (
            "a.empty_string",
            Array::empty(rullama_gguf::ValueType::String).into(),
        ),
        (
            "a.empty_nested",
            Array::empty(rullama_gguf::ValueType::Array).into(),
        ),
        (
            "a.nested",
            vec![
                Array::from(vec![1u32, 2]),
                Array::from(vec!["x".to_string()]),
                Array::from(vec![Array::from(vec![true]), Array::from(vec![-1i64])]),
                Array::empty(rullama_gguf::ValueType::U8),
            ]
            .into(),
        ),
    ]
}

/// Little-endian bytes built field by field, remembering where each field went.
#[derive(Debug, Default, Clone)]
pub struct Raw {
    pub bytes: Vec<u8>,
}

impl Raw {
    /// Magic, version 3 and the two counts.
    pub fn header(n_tensors: u64, n_kv: u64) -> Raw {
        let mut r = Raw::default();
        r.put(b"GGUF").u32(3).u64(n_tensors).u64(n_kv);
        r
    }

    pub fn pos(&self) -> u64 {
        self.bytes.len() as u64
    }

    pub fn put(&mut self, b: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(b);
        self
    }

    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.put(&[v])
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.put(&v.to_le_bytes())
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.put(&v.to_le_bytes())
    }

    /// A GGUF string of raw bytes (not necessarily UTF-8).
    pub fn str(&mut self, s: &[u8]) -> &mut Self {
        self.u64(s.len() as u64).put(s)
    }

    pub fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.str(key.as_bytes()).u32(4).u32(v)
    }

    /// A tensor info: name, dims, type id, offset.
    pub fn tensor(&mut self, name: &[u8], dims: &[u64], type_id: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(type_id).u64(offset)
    }

    /// Zero bytes up to a multiple of `alignment`, then `n` data bytes.
    pub fn data(&mut self, alignment: usize, n: usize) -> &mut Self {
        while !self.bytes.len().is_multiple_of(alignment) {
            self.bytes.push(0);
        }
        self.bytes.extend(filler(n, 9));
        self
    }
}

/// A source that is not in memory (as a file read in ranges is not), over a buffer: the
/// parser fetches `read_ahead` bytes at a time through it, so a small `read_ahead` moves
/// the parser's window at almost every field.
#[derive(Debug)]
pub struct Chunked<'a> {
    pub bytes: &'a [u8],
    pub read_ahead: usize,
}

impl ByteSource for Chunked<'_> {
    fn byte_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn in_memory(&self) -> Option<&[u8]> {
        None
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.bytes.read_exact_at(offset, buf)
    }

    fn read_ahead(&self) -> usize {
        self.read_ahead
    }
}

/// A header as text, to compare two: its `==` fails on a NaN value that both hold, and its
/// Debug shows a hash map (in no fixed order).
fn described(h: &GgufHeader) -> String {
    let metadata: Vec<_> = h.metadata().iter().collect();
    let fixed = (h.version(), h.alignment(), h.data_offset());
    format!("{fixed:?} {metadata:?} {:?}", h.tensors())
}

/// Parse `bytes` in memory and through [`Chunked`] sources of a few window sizes; every
/// source must reach the same header or the same error.
pub fn parse_every_way(bytes: &[u8]) -> Result<GgufHeader, rullama_gguf::GgufError> {
    let in_memory = GgufHeader::parse(bytes);
    for read_ahead in [1, 7, 4096] {
        let chunked = GgufHeader::read(&Chunked { bytes, read_ahead });
        let same = match (&chunked, &in_memory) {
            (Ok(a), Ok(b)) => described(a) == described(b),
            (Err(a), Err(b)) => format!("{a:?}") == format!("{b:?}"),
            _ => false,
        };
        assert!(
            same,
            "read_ahead {read_ahead}: {:?} in windows, {:?} in memory",
            chunked.as_ref().err(),
            in_memory.as_ref().err()
        );
    }
    in_memory
}
