//! The three cached real models: parsed facts, and read -> write giving the same bytes.

mod common;

use std::io::{self, Write};

use common::{REAL_MODELS, real_model};
use rullama_gguf::{GgmlType, GgufError, GgufFile, GgufHeader, GgufWriter};

/// An `io::Write` that checks every byte against `expected` instead of storing it, so
/// comparing a 500 MB file costs no second copy.
struct CompareWriter<'a> {
    expected: &'a [u8],
    pos: usize,
}

impl Write for CompareWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let want = self
            .expected
            .get(self.pos..self.pos + buf.len())
            .unwrap_or_else(|| {
                panic!(
                    "writer produced more than the original's {} bytes (at {})",
                    self.expected.len(),
                    self.pos
                )
            });
        if let Some(i) = want.iter().zip(buf).position(|(a, b)| a != b) {
            panic!(
                "first differing byte at offset {}: original {:#04x}, written {:#04x}",
                self.pos + i,
                want[i],
                buf[i]
            );
        }
        self.pos += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn assert_round_trip(file: &str) {
    let gguf = GgufFile::open(real_model(file)).unwrap();
    let original = gguf.as_bytes();
    let mut cmp = CompareWriter {
        expected: original,
        pos: 0,
    };
    let written = GgufWriter::from_file(&gguf).write_to(&mut cmp).unwrap();
    assert_eq!(written as usize, original.len(), "{file}: length differs");
    assert_eq!(cmp.pos, original.len());
}

#[test]
fn gemma3_writes_back_byte_identical() {
    assert_round_trip(REAL_MODELS[0]);
}

#[test]
fn smollm2_writes_back_byte_identical() {
    assert_round_trip(REAL_MODELS[1]);
}

#[test]
fn qwen2_writes_back_byte_identical() {
    assert_round_trip(REAL_MODELS[2]);
}

/// Read in ranges, gemma3's file (the largest tokenizer: its header takes many windows)
/// gives the map's header and every tensor's bytes.
#[test]
fn ranged_reads_give_the_maps_bytes() {
    let path = real_model(REAL_MODELS[0]);
    let mapped = GgufFile::open(&path).unwrap();
    let ranged = GgufFile::open_ranged(&path).unwrap();
    assert_eq!(ranged.header(), mapped.header());
    for view in mapped.tensor_views() {
        let read = ranged.read_tensor(view.info).unwrap();
        assert!(read.data[..] == *view.data, "{}", view.info.name);
    }
}

#[test]
fn gemma3_metadata_and_tensors() {
    let f = GgufFile::open(real_model(REAL_MODELS[0])).unwrap();
    let m = f.metadata();
    assert_eq!(f.header().version(), 3);
    assert_eq!(m.architecture().unwrap(), "gemma3");
    assert_eq!(m.arch_u32("block_count").unwrap(), 18);
    assert_eq!(m.arch_usize("embedding_length").unwrap(), 640);
    assert_eq!(m.arch_u32("attention.head_count_kv").unwrap(), 1);
    assert_eq!(m.arch_u32("attention.sliding_window").unwrap(), 512);
    assert_eq!(m.arch_f32("rope.freq_base").unwrap(), 1e6);
    assert_eq!(
        m.get_str_array("tokenizer.ggml.tokens").unwrap().len(),
        262_144
    );
    assert_eq!(
        m.get_f32_array("tokenizer.ggml.scores").unwrap().len(),
        262_144
    );
    assert_eq!(
        m.get_i32_array("tokenizer.ggml.token_type").unwrap().len(),
        262_144
    );
    assert!(m.get("tokenizer.chat_template").is_none());

    let embd = f.tensor("token_embd.weight").unwrap();
    assert_eq!(embd.info.dims, [640, 262_144]);
    assert_eq!(embd.info.ggml_type, GgmlType::Q8_0);
    assert_eq!(embd.data.len() as u64, 262_144 * 640 / 32 * 34);
    let types: std::collections::BTreeSet<GgmlType> = f.tensors().map(|t| t.ggml_type).collect();
    assert_eq!(
        types,
        [
            GgmlType::F32,
            GgmlType::Q5_0,
            GgmlType::Q8_0,
            GgmlType::Q4K,
            GgmlType::Q6K
        ]
        .into()
    );
    // Tensors are packed in file order and every view has exactly n_bytes.
    assert_eq!(f.tensors().len(), f.tensor_views().count());
    for v in f.tensor_views() {
        assert_eq!(v.data.len() as u64, v.info.n_bytes, "{}", v.info.name);
    }
}

#[test]
fn smollm2_and_qwen2_metadata() {
    let f = GgufFile::open(real_model(REAL_MODELS[1])).unwrap();
    let m = f.metadata();
    assert_eq!(m.architecture().unwrap(), "llama");
    assert_eq!(m.arch_u32("block_count").unwrap(), 30);
    assert_eq!(m.arch_u32("embedding_length").unwrap(), 576);
    assert_eq!(m.get_str("tokenizer.ggml.pre").unwrap(), "smollm");
    assert_eq!(
        m.get_str_array("tokenizer.ggml.merges").unwrap().len(),
        48_900
    );
    assert!(
        m.get_str("tokenizer.chat_template")
            .unwrap()
            .contains("im_start")
    );
    assert_eq!(
        f.tensor("blk.0.attn_q.weight").unwrap().info.ggml_type,
        GgmlType::Q4_1
    );

    let f = GgufFile::open(real_model(REAL_MODELS[2])).unwrap();
    let m = f.metadata();
    assert_eq!(m.architecture().unwrap(), "qwen2");
    assert_eq!(m.arch_u32("block_count").unwrap(), 24);
    assert_eq!(
        m.get_str_array("tokenizer.ggml.tokens").unwrap().len(),
        151_936
    );
    let bias = f.tensor("blk.0.attn_q.bias").unwrap();
    assert_eq!(
        (bias.info.ggml_type, bias.info.dims.as_slice()),
        (GgmlType::F32, &[896u64][..])
    );
    assert!(
        f.tensor("output.weight").is_some(),
        "qwen2.5-coder-0.5b has an untied output"
    );
}

/// The first 16 KB of a real header, cut at every byte: each prefix is a typed error that
/// names an offset inside the prefix, never a panic. (The 262k-string vocabulary makes most
/// cuts fail on the array's count before its first string.)
#[test]
fn real_header_prefixes_are_typed_errors() {
    let f = GgufFile::open(real_model(REAL_MODELS[0])).unwrap();
    let bytes = &f.as_bytes()[..16 << 10];
    for len in 0..bytes.len() {
        match GgufHeader::parse(&bytes[..len]) {
            Err(GgufError::Truncated {
                offset,
                needed,
                file_len,
                ..
            }) => {
                assert_eq!(file_len, len as u64);
                assert!(
                    offset <= file_len && offset + needed > file_len,
                    "cut {len}"
                );
            }
            Err(GgufError::CountTooLarge {
                offset, remaining, ..
            }) => {
                assert!(offset + 8 + remaining <= len as u64, "cut {len}");
            }
            other => panic!("cut at {len}: {other:?}"),
        }
    }
}
