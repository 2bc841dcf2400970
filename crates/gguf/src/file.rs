//! A GGUF file held in memory: its parsed header next to its bytes.
//!
//! [`GgufFile::open`] maps the file, so a 500 MB model costs no copy and no read until its
//! pages are touched; tensor views borrow the map. The same type works over any byte buffer
//! (`GgufFile::from_bytes(&bytes[..])`), which is what tests and in-memory files use.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::error::Result;
use crate::header::GgufHeader;
use crate::metadata::Metadata;
use crate::tensor::{TensorInfo, TensorView};

/// A parsed GGUF file over bytes `B` (a memory map by default).
#[derive(Debug)]
pub struct GgufFile<B = Mmap> {
    path: Option<PathBuf>,
    bytes: B,
    header: GgufHeader,
}

impl GgufFile<Mmap> {
    /// Map and parse the file at `path`. Errors carry the path ([`crate::GgufError::InFile`]).
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile<Mmap>> {
        let path = path.as_ref();
        let map = || -> Result<Mmap> {
            let file = File::open(path)?;
            // SAFETY: the map is read-only. Another process truncating or rewriting the file
            // while it is mapped would change bytes under us (or fault); that is the usual
            // contract of model files, which nobody edits in place while they are loaded.
            Ok(unsafe { Mmap::map(&file)? })
        };
        let bytes = map().map_err(|e| e.in_file(path))?;
        let mut file = GgufFile::from_bytes(bytes).map_err(|e| e.in_file(path))?;
        file.path = Some(path.to_path_buf());
        Ok(file)
    }
}

impl<B: AsRef<[u8]>> GgufFile<B> {
    /// Parse a whole GGUF file held in `bytes`.
    pub fn from_bytes(bytes: B) -> Result<GgufFile<B>> {
        let header = GgufHeader::parse(bytes.as_ref())?;
        Ok(GgufFile {
            path: None,
            bytes,
            header,
        })
    }

    /// The path it was opened from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    pub fn metadata(&self) -> &Metadata {
        self.header.metadata()
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> impl ExactSizeIterator<Item = &TensorInfo> {
        self.header.tensors().iter()
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
        self.bytes.as_ref()
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
