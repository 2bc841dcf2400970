//! Where a GGUF file's bytes come from: [`ByteSource`].
//!
//! Three kinds exist, and the parser reads through all of them the same way:
//! - a buffer: any `AsRef<[u8]>` (`Vec<u8>`, `&[u8]`, `Arc<[u8]>`, ...), which is what a
//!   browser hands over (it has no files and no memory maps);
//! - a memory map (`memmap2::Mmap`, itself an `AsRef<[u8]>`): no copy and no read until a
//!   page is touched, but a file truncated while mapped faults (SIGBUS) when a page past its
//!   new end is touched, which no check can prevent;
//! - a file read in ranges ([`crate::RangedFile`], not on wasm32): positioned reads, so a
//!   file that shrinks while it is read gives an error naming the offset instead.
//!
//! Sources that hold every byte in memory say so ([`ByteSource::in_memory`]), and reads from
//! them borrow; the others copy each range into a buffer of its own.

use std::borrow::Cow;
use std::io;

/// Bytes that can be read at any offset: a buffer, a memory map, a file.
pub trait ByteSource {
    /// How many bytes the source holds (a file: its length when it was opened). Every
    /// extent in the header is checked against this before any read.
    fn byte_len(&self) -> u64;

    /// Every byte, where the source keeps them in memory (a buffer, a map): reads then
    /// borrow from it. `None` for sources that must copy (a file read in ranges).
    fn in_memory(&self) -> Option<&[u8]>;

    /// Fill `buf` with the bytes at `offset..offset + buf.len()`. Bytes that are not there
    /// (past the end, or gone since the source was opened) are an `UnexpectedEof` error.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// How many bytes a sequential reader (the header parser) fetches at once when the
    /// source is not in memory: one read per this many bytes of header.
    fn read_ahead(&self) -> usize {
        256 << 10
    }

    /// The bytes at `offset..offset + len`: borrowed where the source is in memory, else
    /// read into a buffer of their own.
    fn read_range(&self, offset: u64, len: u64) -> io::Result<Cow<'_, [u8]>> {
        let past_end = || past_end(offset, len, self.byte_len());
        let end = offset.checked_add(len).ok_or_else(past_end)?;
        if end > self.byte_len() {
            return Err(past_end());
        }
        if let Some(all) = self.in_memory() {
            // `end <= len()`, the slice's length, so both fit in usize.
            return all
                .get(offset as usize..end as usize)
                .map(Cow::Borrowed)
                .ok_or_else(past_end);
        }
        let mut buf = vec![0; usize::try_from(len).map_err(|_| past_end())?];
        self.read_exact_at(offset, &mut buf)?;
        Ok(Cow::Owned(buf))
    }
}

/// A buffer or a memory map: the bytes are all in memory.
impl<T: AsRef<[u8]> + ?Sized> ByteSource for T {
    fn byte_len(&self) -> u64 {
        self.as_ref().len() as u64
    }

    fn in_memory(&self) -> Option<&[u8]> {
        Some(self.as_ref())
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let bytes = self.as_ref();
        let range = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(buf.len())?));
        match range.and_then(|r| bytes.get(r)) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(past_end(offset, buf.len() as u64, self.byte_len())),
        }
    }
}

/// The error of a read of `len` bytes at `offset` from a source of `total` bytes.
pub(crate) fn past_end(offset: u64, len: u64, total: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("bytes {offset}..{offset}+{len} lie past the end ({total} bytes)"),
    )
}
