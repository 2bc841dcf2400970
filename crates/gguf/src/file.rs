//! A GGUF file: its parsed header next to the source of its bytes.
//!
//! The source is any [`ByteSource`]. [`GgufFile::open`] maps the file, so a 500 MB model
//! costs no copy and no read until its pages are touched, and tensor views borrow the map;
//! [`GgufFile::open_ranged`] reads the header and then each tensor on demand, so a file that
//! shrinks while it is read is an error naming the tensor, not a fault; `from_bytes` takes a
//! buffer (tests, in-memory files, a browser's download). [`GgufFile::read_tensor`] works
//! over every source, borrowing where it can; `tensor` and `as_bytes` are for sources held
//! in memory.

#[cfg(not(target_arch = "wasm32"))]
use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{GgufError, Result};
use crate::header::GgufHeader;
use crate::metadata::Metadata;
use crate::source::{ByteSource, past_end};
use crate::tensor::{TensorData, TensorInfo, TensorView};

/// What a bare `GgufFile` holds: a memory map, or on wasm32 (no files, no maps) a buffer.
#[cfg(not(target_arch = "wasm32"))]
pub type DefaultSource = memmap2::Mmap;
/// What a bare `GgufFile` holds: a memory map, or on wasm32 (no files, no maps) a buffer.
#[cfg(target_arch = "wasm32")]
pub type DefaultSource = Vec<u8>;

/// A parsed GGUF file over the byte source `S` (a memory map by default).
#[derive(Debug)]
pub struct GgufFile<S = DefaultSource> {
    path: Option<PathBuf>,
    source: S,
    header: GgufHeader,
}

#[cfg(not(target_arch = "wasm32"))]
impl GgufFile<memmap2::Mmap> {
    /// Map and parse the file at `path`. Errors carry the path ([`GgufError::InFile`]).
    ///
    /// A mapped file that another process truncates faults this one (SIGBUS) when a page
    /// past the new end is touched; a loader that must survive that reads through
    /// [`GgufFile::open_ranged`] instead.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile<memmap2::Mmap>> {
        let path = path.as_ref();
        let map = || -> Result<memmap2::Mmap> {
            let file = File::open(path)?;
            // SAFETY: the map is read-only. Another process truncating or rewriting the file
            // while it is mapped would change bytes under us (or fault); that is the usual
            // contract of model files, which nobody edits in place while they are loaded,
            // and the reason `open_ranged` exists.
            Ok(unsafe { memmap2::Mmap::map(&file)? })
        };
        let source = map().map_err(|e| e.in_file(path))?;
        GgufFile::from_source(source)
            .map(|f| f.with_path(path))
            .map_err(|e| e.in_file(path))
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl GgufFile<crate::RangedFile> {
    /// Open the file at `path`, reading its header now and each tensor when asked
    /// ([`GgufFile::read_tensor`]). Errors carry the path ([`GgufError::InFile`]).
    pub fn open_ranged(path: impl AsRef<Path>) -> Result<GgufFile<crate::RangedFile>> {
        let path = path.as_ref();
        let source = crate::RangedFile::open(path).map_err(|e| GgufError::from(e).in_file(path))?;
        GgufFile::from_source(source)
            .map(|f| f.with_path(path))
            .map_err(|e| e.in_file(path))
    }
}

impl<B: AsRef<[u8]>> GgufFile<B> {
    /// Parse a whole GGUF file held in `bytes`.
    pub fn from_bytes(bytes: B) -> Result<GgufFile<B>> {
        GgufFile::from_source(bytes)
    }

    /// The tensor called `name`, with its bytes.
    pub fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        self.view(self.header.tensor_info(name)?)
    }

    /// Every tensor with its bytes, in file order.
    pub fn tensor_views(&self) -> impl Iterator<Item = TensorView<'_>> {
        self.header
            .tensors()
            .iter()
            .filter_map(|info| self.view(info))
    }

    /// The whole file.
    pub fn as_bytes(&self) -> &[u8] {
        self.source.as_ref()
    }

    fn view<'a>(&'a self, info: &'a TensorInfo) -> Option<TensorView<'a>> {
        // Parsing checked that the extent lies inside the bytes; `get` keeps that a non-panic.
        let start = usize::try_from(self.header.data_offset().checked_add(info.offset)?).ok()?;
        let end = start.checked_add(usize::try_from(info.n_bytes).ok()?)?;
        Some(TensorView {
            info,
            data: self.as_bytes().get(start..end)?,
        })
    }
}

impl<S: ByteSource> GgufFile<S> {
    /// Parse the header of the GGUF file in `source`.
    pub fn from_source(source: S) -> Result<GgufFile<S>> {
        let header = GgufHeader::read(&source)?;
        Ok(GgufFile {
            path: None,
            source,
            header,
        })
    }

    /// Name the file `path` in the errors of later reads.
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> GgufFile<S> {
        self.path = Some(path.into());
        self
    }

    /// The path it was opened from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The parsed header: version, metadata, tensor infos, where the data starts.
    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    /// The key/value metadata, in file order.
    pub fn metadata(&self) -> &Metadata {
        self.header.metadata()
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> impl ExactSizeIterator<Item = &TensorInfo> {
        self.header.tensors().iter()
    }

    /// The description of the tensor called `name`.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.header.tensor_info(name)
    }

    /// The source of the bytes.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The bytes of the tensor `info` (one of this file's): borrowed from a source in
    /// memory, else read now. A read that fails (a file that shrank since its header was
    /// read) is [`GgufError::TensorRead`] naming the tensor and offset, with the path.
    pub fn read_tensor<'a>(&'a self, info: &'a TensorInfo) -> Result<TensorData<'a>> {
        let offset = self.data_start(info);
        match self.source.read_range(offset, info.n_bytes) {
            Ok(data) => Ok(TensorData { info, data }),
            Err(error) => Err(self.tensor_error(info, offset, error)),
        }
    }

    /// The bytes of the tensor `info` as a view: borrowed from a source in memory, else read
    /// into `scratch` (grown as needed, never shrunk, not zeroed again), so a loader that
    /// reads tensors one after another allocates once. Errors as [`GgufFile::read_tensor`].
    pub fn read_tensor_with<'a>(
        &'a self,
        info: &'a TensorInfo,
        scratch: &'a mut Vec<u8>,
    ) -> Result<TensorView<'a>> {
        let offset = self.data_start(info);
        let range = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(info.n_bytes).ok())
            .and_then(|(start, n)| Some(start..start.checked_add(n)?));
        let past_end = || past_end(offset, info.n_bytes, self.source.byte_len());
        let Some(range) = range else {
            return Err(self.tensor_error(info, offset, past_end()));
        };
        let data = match self.source.in_memory() {
            Some(all) => all.get(range),
            None => {
                let n = range.len();
                if scratch.len() < n {
                    // A fresh zeroed allocation, not `resize`: the allocator hands out
                    // zeroed pages untouched, and the read is their first write.
                    *scratch = vec![0; n];
                }
                let buf = &mut scratch[..n];
                if let Err(error) = self.source.read_exact_at(offset, buf) {
                    return Err(self.tensor_error(info, offset, error));
                }
                Some(&*buf)
            }
        };
        match data {
            Some(data) => Ok(TensorView { info, data }),
            None => Err(self.tensor_error(info, offset, past_end())),
        }
    }

    /// Where the data of tensor `info` starts in the file (parsing checked that it fits).
    fn data_start(&self, info: &TensorInfo) -> u64 {
        self.header.data_offset().saturating_add(info.offset)
    }

    /// A failed read of tensor `info` at `offset`, naming the file where it has a path.
    fn tensor_error(&self, info: &TensorInfo, offset: u64, error: std::io::Error) -> GgufError {
        let e = GgufError::TensorRead {
            tensor: info.name.clone(),
            offset,
            n_bytes: info.n_bytes,
            error,
        };
        match &self.path {
            Some(path) => e.in_file(path),
            None => e,
        }
    }

    /// The tensor called `name` with its bytes ([`GgufFile::read_tensor`]), `None` when the
    /// file has no such tensor.
    pub fn load_tensor(&self, name: &str) -> Result<Option<TensorData<'_>>> {
        self.tensor_info(name)
            .map(|info| self.read_tensor(info))
            .transpose()
    }
}
