//! A bounds-checked little-endian cursor over a file's bytes, read through its source.
//!
//! This is the only place that reads the header's bytes. Each read checks the length left in
//! the source first and reports a [`GgufError::Truncated`] naming the offset, so the parser
//! above it cannot panic on short input; [`Reader::count`] bounds every count by the bytes
//! left before anything is allocated for it. A source held in memory is read in place; any
//! other is fetched a window at a time ([`ByteSource::read_ahead`] bytes, or more for a
//! longer read), so parsing a file costs a few reads, not one per field.

use std::borrow::Cow;

use crate::error::{GgufError, Result};
use crate::source::ByteSource;

pub(crate) struct Reader<'s> {
    source: &'s dyn ByteSource,
    len: u64,
    pos: u64,
    /// Bytes `window_start..window_start + window.len()` of the source: all of them for a
    /// source in memory.
    window: Cow<'s, [u8]>,
    window_start: u64,
}

macro_rules! read_le {
    ($($name:ident -> $t:ty),* $(,)?) => {$(
        pub(crate) fn $name(&mut self, what: &'static str) -> Result<$t> {
            Ok(<$t>::from_le_bytes(self.array(what)?))
        }
    )*};
}

impl<'s> Reader<'s> {
    pub(crate) fn new(source: &'s dyn ByteSource) -> Self {
        Reader {
            len: source.byte_len(),
            window: Cow::Borrowed(source.in_memory().unwrap_or_default()),
            source,
            pos: 0,
            window_start: 0,
        }
    }

    /// Offset of the next byte to be read.
    pub(crate) fn pos(&self) -> u64 {
        self.pos
    }

    pub(crate) fn remaining(&self) -> u64 {
        self.len - self.pos
    }

    pub(crate) fn file_len(&self) -> u64 {
        self.len
    }

    /// The next `n` bytes, or a `Truncated` error saying `what` was being read.
    pub(crate) fn take(&mut self, n: u64, what: &'static str) -> Result<&[u8]> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                offset: self.pos(),
                needed: n,
                file_len: self.file_len(),
                what,
            });
        }
        let end = self.pos + n; // n <= remaining, so this fits
        if end > self.window_start + self.window.len() as u64 {
            self.fetch(n, what)?;
        }
        // The window holds pos..end: it starts at or before pos and ends at or after end,
        // and both lie within a slice that exists, so the casts fit.
        let start = (self.pos - self.window_start) as usize;
        let slice = self
            .window
            .get(start..start + n as usize)
            .ok_or(GgufError::Truncated {
                offset: self.pos,
                needed: n,
                file_len: self.len,
                what,
            })?;
        self.pos = end;
        Ok(slice)
    }

    /// Move the window to start at `pos` and hold at least `n` bytes (`n <= remaining`).
    fn fetch(&mut self, n: u64, what: &'static str) -> Result<()> {
        let want = n.max(self.source.read_ahead() as u64).min(self.remaining());
        let read = self.source.read_range(self.pos, want);
        self.window = read.map_err(|error| GgufError::Read {
            offset: self.pos,
            needed: want,
            what,
            error,
        })?;
        self.window_start = self.pos;
        Ok(())
    }

    pub(crate) fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64, what)?);
        Ok(out)
    }

    read_le!(
        u8 -> u8, i8 -> i8, u16 -> u16, i16 -> i16, u32 -> u32, i32 -> i32,
        u64 -> u64, i64 -> i64, f32 -> f32, f64 -> f64,
    );

    /// A GGUF string: a u64 byte length, then that many bytes of UTF-8. `what` names the
    /// string in errors (`key`, `value of key x`, ...) and is only built on failure.
    pub(crate) fn str(&mut self, what: impl FnOnce() -> String) -> Result<&str> {
        let len = self.u64("string length")?;
        let start = self.pos();
        let bytes = self.take(len, "string bytes")?;
        std::str::from_utf8(bytes).map_err(|e| GgufError::InvalidUtf8 {
            offset: start + e.valid_up_to() as u64,
            what: what(),
        })
    }

    /// Check that `count` items of at least `min_size` bytes each can still fit in the input,
    /// and return the count as a `usize` safe to pass to `Vec::with_capacity`. `count_offset`
    /// is where the count itself was read.
    pub(crate) fn count(
        &self,
        count: u64,
        min_size: u64,
        count_offset: u64,
        what: impl FnOnce() -> String,
    ) -> Result<usize> {
        let min_bytes = u128::from(count) * u128::from(min_size);
        let remaining = self.remaining();
        if min_bytes > u128::from(remaining) {
            return Err(GgufError::CountTooLarge {
                offset: count_offset,
                what: what(),
                count,
                min_bytes,
                remaining,
            });
        }
        // count * min_size <= remaining <= usize::MAX, and min_size >= 1 for every caller.
        usize::try_from(count).map_err(|_| GgufError::CountTooLarge {
            offset: count_offset,
            what: "count".into(),
            count,
            min_bytes,
            remaining,
        })
    }
}

impl Reader<'_> {
    /// How many `T`s to reserve room for when `n` are announced: at most as many as would
    /// take the bytes still unread, so a forged count reserves no more memory than the input
    /// is long (a truthful one is never cut short, since real files carry their data too).
    pub(crate) fn capacity<T>(&self, n: usize) -> usize {
        let remaining = usize::try_from(self.remaining()).unwrap_or(usize::MAX);
        n.min(remaining / std::mem::size_of::<T>().max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_reads_name_offset_and_need() {
        let mut r = Reader::new(&[1, 0, 0, 0, 9]);
        assert_eq!(r.u32("x").unwrap(), 1);
        let err = r.u32("field").unwrap_err();
        assert!(
            matches!(
                err,
                GgufError::Truncated {
                    offset: 4,
                    needed: 4,
                    file_len: 5,
                    what: "field"
                }
            ),
            "{err}"
        );
        // The failed read consumed nothing.
        assert_eq!(r.u8("y").unwrap(), 9);
    }

    #[test]
    fn huge_string_length_is_truncation_not_allocation() {
        let mut bytes = (1u64 << 62).to_le_bytes().to_vec();
        bytes.extend_from_slice(b"abc");
        let err = Reader::new(&bytes).str(|| "s".into()).unwrap_err();
        assert!(matches!(err, GgufError::Truncated { offset: 8, needed, .. } if needed == 1 << 62));
    }

    #[test]
    fn counts_are_bounded_by_remaining_bytes() {
        let r = Reader::new(&[0; 16]);
        assert_eq!(r.count(4, 4, 0, || "x".into()).unwrap(), 4);
        assert!(matches!(
            r.count(5, 4, 0, || "x".into()),
            Err(GgufError::CountTooLarge {
                count: 5,
                remaining: 16,
                ..
            })
        ));
        assert!(r.count(u64::MAX, 8, 0, || "x".into()).is_err());
    }
}
