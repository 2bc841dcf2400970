//! Writing GGUF files: from scratch (LoRA adapters, synthetic models, quantized output) or
//! back from a parsed file.
//!
//! The layout is llama.cpp's (`gguf_write_to_file`) and gguf-py's: header, zero padding to
//! the alignment, then each tensor in order, each followed by zero padding to the alignment,
//! the last one included. Tensor offsets are therefore computed here, never taken from the
//! caller. A file that llama.cpp or gguf-py wrote parses and writes back to the same bytes,
//! which the real-model tests check.

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use crate::GgmlType;
use crate::error::{GgufError, Result};
use crate::file::GgufFile;
use crate::header::ALIGNMENT_KEY;
use crate::metadata::Metadata;
use crate::stream::{self, TensorStream};
use crate::tensor::TensorInfo;
use crate::value::Value;

/// A GGUF file under construction. Tensor data is borrowed where it can be (`Cow`), so
/// writing a mapped file back copies nothing into memory.
#[derive(Debug, Clone)]
pub struct GgufWriter<'a> {
    version: u32,
    metadata: Metadata,
    tensors: Vec<(TensorInfo, Cow<'a, [u8]>)>,
    names: HashSet<String>,
}

impl Default for GgufWriter<'_> {
    fn default() -> Self {
        GgufWriter::new()
    }
}

impl<'a> GgufWriter<'a> {
    /// An empty GGUF v3 file.
    pub fn new() -> GgufWriter<'a> {
        GgufWriter {
            version: 3,
            metadata: Metadata::new(),
            tensors: Vec::new(),
            names: HashSet::new(),
        }
    }

    /// Everything in `file`, ready to be written back unchanged or edited first. Tensor data
    /// stays borrowed from the file.
    pub fn from_file<B: AsRef<[u8]>>(file: &'a GgufFile<B>) -> GgufWriter<'a> {
        let tensors: Vec<_> = file
            .tensor_views()
            .map(|t| (t.info.clone(), Cow::Borrowed(t.data)))
            .collect();
        let names = tensors.iter().map(|(info, _)| info.name.clone()).collect();
        GgufWriter {
            version: file.header().version(),
            metadata: file.metadata().clone(),
            tensors,
            names,
        }
    }

    /// Write version 2 or 3 (the two differ only in what they allow big-endian files to do).
    pub fn set_version(&mut self, version: u32) -> Result<&mut Self> {
        if !(2..=3).contains(&version) {
            return Err(GgufError::UnsupportedVersion { version });
        }
        self.version = version;
        Ok(self)
    }

    /// The metadata to be written.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The metadata to be written, to edit (remove a key, say).
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// Set a metadata key (replacing it in place if present).
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<Value>) -> &mut Self {
        self.metadata.insert(key, value);
        self
    }

    /// Set `general.alignment`, which must be a nonzero power of two.
    pub fn set_alignment(&mut self, alignment: u32) -> Result<&mut Self> {
        if !alignment.is_power_of_two() {
            return Err(GgufError::WrongType {
                key: ALIGNMENT_KEY.into(),
                expected: "a nonzero power of two",
                found: alignment.to_string(),
            });
        }
        Ok(self.set(ALIGNMENT_KEY, alignment))
    }

    /// Append a tensor. `dims` are in GGML order (`dims[0]` is the row length) and `data` must
    /// hold exactly the bytes that shape and type need.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ggml_type: GgmlType,
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<&mut Self> {
        let name = name.into();
        let data = data.into();
        if self.names.contains(&name) {
            return Err(GgufError::TensorAddedTwice { tensor: name });
        }
        let info = TensorInfo::new(name.as_str(), dims, ggml_type, 0).map_err(|error| {
            GgufError::InvalidTensor {
                tensor: name.clone(),
                error,
            }
        })?;
        if info.n_bytes != data.len() as u64 {
            return Err(GgufError::TensorDataSize {
                tensor: info.name,
                expected: info.n_bytes,
                got: data.len() as u64,
            });
        }
        self.names.insert(info.name.clone());
        self.tensors.push((info, data));
        Ok(self)
    }

    /// The alignment the file will use, from `general.alignment` if set.
    pub fn alignment(&self) -> Result<u64> {
        stream::alignment(&self.metadata)
    }

    /// The tensor infos as they will be written, with their data offsets.
    pub fn tensor_infos(&self) -> Result<Vec<TensorInfo>> {
        let infos = self.tensors.iter().map(|(info, _)| info.clone()).collect();
        stream::with_offsets(infos, self.alignment()?)
    }

    /// Write the file to `w`; returns the number of bytes written.
    pub fn write_to<W: Write>(&self, w: W) -> Result<u64> {
        let infos = self.tensors.iter().map(|(info, _)| info.clone()).collect();
        let mut stream = TensorStream::with_version(w, self.version, &self.metadata, infos)?;
        for (_, data) in &self.tensors {
            stream.write_tensor(data)?;
        }
        stream.finish()
    }

    /// Write the file to `path`, whole or not at all ([`crate::write_whole`]). Errors carry
    /// the path.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn write_to_path(&self, path: impl AsRef<Path>) -> Result<u64> {
        let path = path.as_ref();
        let mut result = Ok(0);
        let written = crate::write_whole(path, |w| {
            result = self.write_to(w);
            // A GGUF error stops the write as an I/O error; the GGUF error is what is
            // returned.
            result
                .as_ref()
                .map(|&n| n)
                .map_err(|e| std::io::Error::other(e.to_string()))
        });
        match (result, written) {
            (Err(e), _) => Err(e.in_file(path)),
            (Ok(_), Err(e)) => Err(GgufError::from(e).in_file(path)),
            (Ok(n), Ok(_)) => Ok(n),
        }
    }
}
