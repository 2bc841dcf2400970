//! Reading a llama.cpp LoRA GGUF (what `convert_lora_to_gguf.py` writes and
//! `llama_adapter_lora_init` reads): `general.type = adapter`, `adapter.type = lora`,
//! `general.architecture` the base's, `adapter.lora.alpha` (f32; absent or 0: the scale is
//! the user's alone), and for each updated base tensor `<base>.lora_a` with GGML dims
//! `[n_in, rank]` and `<base>.lora_b` with `[rank, n_out]`, in any type `rullama_quant`
//! decodes (the converter writes F32, F16, BF16 or Q8_0). Tensors named `*_norm.weight`
//! are skipped, as llama.cpp skips them; any other name is an error.

use std::collections::BTreeMap;

use rullama_gguf::{ByteSource, GgmlType, GgufFile, GgufWriter, TensorInfo, Value};
use rullama_quant::Format;

use super::base::FINGERPRINT_KEY;
use super::{LoraAdapter, LoraError, LoraPair};

/// The value of string key `key` for an error: quoted, or `absent`.
fn shown(file: &GgufFile<impl ByteSource>, key: &str) -> String {
    match file.metadata().get(key) {
        Some(Value::String(s)) => format!("`{s}`"),
        Some(other) => format!("{other:?}"),
        None => "absent".into(),
    }
}

/// Whether string key `key` is `want`.
fn is(file: &GgufFile<impl ByteSource>, key: &str, want: &str) -> bool {
    matches!(file.metadata().get(key), Some(Value::String(s)) if s == want)
}

/// GGML dims padded to 2 with trailing 1s; `None` past 2 dims of more than 1.
fn dims2(info: &TensorInfo) -> Option<[u64; 2]> {
    let mut d = info.dims.clone();
    while d.len() > 2 && d.last() == Some(&1) {
        d.pop();
    }
    match d[..] {
        [n] => Some([n, 1]),
        [a, b] => Some([a, b]),
        _ => None,
    }
}

pub(super) fn read<S: ByteSource>(
    gguf: &GgufFile<S>,
    file: &str,
) -> Result<LoraAdapter, LoraError> {
    let file_s = || file.to_string();
    if !is(gguf, "general.type", "adapter") {
        return Err(LoraError::NotAnAdapter {
            file: file_s(),
            found: shown(gguf, "general.type"),
        });
    }
    if !is(gguf, "adapter.type", "lora") {
        return Err(LoraError::NotLora {
            file: file_s(),
            found: shown(gguf, "adapter.type"),
        });
    }
    let meta = gguf.metadata();
    let gguf_err = |source| LoraError::Gguf {
        file: file_s(),
        source,
    };
    let arch = meta.architecture().map_err(gguf_err)?.to_string();
    let alpha = meta
        .get_opt::<f32>("adapter.lora.alpha")
        .map_err(gguf_err)?
        .unwrap_or(0.0);

    // The halves of each pair, by base name (sorted: the pairs come out in a fixed order).
    let mut halves: BTreeMap<&str, [Option<&TensorInfo>; 2]> = BTreeMap::new();
    for info in gguf.tensors() {
        let name = info.name.as_str();
        if let Some(base) = name.strip_suffix(".lora_a") {
            halves.entry(base).or_default()[0] = Some(info);
        } else if let Some(base) = name.strip_suffix(".lora_b") {
            halves.entry(base).or_default()[1] = Some(info);
        } else if name.ends_with("_norm.weight") {
            continue;
        } else {
            return Err(LoraError::UnexpectedTensor {
                file: file_s(),
                tensor: name.to_string(),
            });
        }
    }
    let mut pairs = Vec::with_capacity(halves.len());
    for (base, [a, b]) in halves {
        let (a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (a, _) => {
                let (present, missing) = if a.is_some() {
                    ("lora_a", "lora_b")
                } else {
                    ("lora_b", "lora_a")
                };
                return Err(LoraError::MissingHalf {
                    file: file_s(),
                    base: base.to_string(),
                    present,
                    missing,
                });
            }
        };
        let shape_err = |t: &TensorInfo, expected: Vec<u64>| LoraError::Shape {
            file: file_s(),
            tensor: t.name.clone(),
            expected,
            found: t.dims.clone(),
        };
        let two_d = |t: &TensorInfo| {
            dims2(t).ok_or_else(|| LoraError::Invalid {
                file: file_s(),
                what: format!(
                    "tensor `{}` has dims {:?}: a LoRA half is 2-D",
                    t.name, t.dims
                ),
            })
        };
        let [n_in, rank] = two_d(a)?;
        let [rank_b, n_out] = two_d(b)?;
        // llama.cpp's "lora_a tensor is not transposed" check.
        if rank_b != rank {
            return Err(shape_err(b, vec![rank, n_out]));
        }
        pairs.push(LoraPair {
            base: base.to_string(),
            n_in: n_in as usize,
            n_out: n_out as usize,
            rank: rank as usize,
            a: values(gguf, a, file)?,
            b: values(gguf, b, file)?,
        });
    }
    let adapter = LoraAdapter::from_pairs(file, &arch, alpha, pairs)?;
    Ok(
        match meta.get_opt::<u64>(FINGERPRINT_KEY).map_err(gguf_err)? {
            Some(fp) => adapter.with_base(fp),
            None => adapter,
        },
    )
}

/// A tensor's values in f32.
fn values<S: ByteSource>(
    gguf: &GgufFile<S>,
    info: &TensorInfo,
    file: &str,
) -> Result<Vec<f32>, LoraError> {
    let data = gguf.read_tensor(info).map_err(|source| LoraError::Gguf {
        file: file.to_string(),
        source,
    })?;
    let mut out = vec![0f32; info.n_elements as usize];
    rullama_quant::dequantize(Format::Ggml(info.ggml_type), &data.data, &mut out).map_err(
        |source| LoraError::Weight {
            file: file.to_string(),
            tensor: info.name.clone(),
            source,
        },
    )?;
    Ok(out)
}

impl LoraAdapter {
    /// The adapter as llama.cpp's LoRA GGUF (what [`LoraAdapter::open`] and llama.cpp's
    /// `--lora` read): the keys above, `adapter.lora.alpha` when it has one, each pair's
    /// `A` and `B` in F32 (exact). The caller may add keys before writing it.
    pub fn to_gguf(&self) -> Result<GgufWriter<'static>, LoraError> {
        let err = |source| LoraError::Gguf {
            file: self.file.clone(),
            source,
        };
        let mut w = GgufWriter::new();
        w.set("general.architecture", self.arch.as_str());
        w.set("general.type", "adapter");
        w.set("adapter.type", "lora");
        if self.alpha != 0.0 {
            w.set("adapter.lora.alpha", self.alpha);
        }
        if let Some(fp) = self.base {
            w.set(FINGERPRINT_KEY, fp);
        }
        for p in &self.pairs {
            let (n_in, n_out, r) = (p.n_in as u64, p.n_out as u64, p.rank as u64);
            let a =
                p.a.iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<u8>>();
            let b =
                p.b.iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<u8>>();
            w.add_tensor(format!("{}.lora_a", p.base), &[n_in, r], GgmlType::F32, a)
                .map_err(err)?;
            w.add_tensor(format!("{}.lora_b", p.base), &[r, n_out], GgmlType::F32, b)
                .map_err(err)?;
        }
        Ok(w)
    }
}
