//! Writing a GGUF file tensor by tensor: the header (metadata and every tensor's info) first,
//! then each tensor's data in the declared order, so a file larger than memory (a synthetic
//! multi-gigabyte model) never has to be held whole. [`GgufWriter::write_to`] goes through
//! the same path, so both write the same bytes.
//!
//! [`GgufWriter::write_to`]: crate::GgufWriter::write_to

use std::collections::HashSet;
use std::io::Write;

use crate::encode;
use crate::error::{GgufError, Result};
use crate::header::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC, align_up};
use crate::metadata::Metadata;
use crate::tensor::TensorInfo;
use crate::value::Value;

/// A file whose header is written and whose tensors' data follow one at a time.
#[derive(Debug)]
pub struct TensorStream<W: Write> {
    w: W,
    infos: Vec<TensorInfo>,
    alignment: u64,
    next: usize,
    /// Bytes of the next tensor's data written so far ([`TensorStream::write_part`]).
    part: u64,
    written: u64,
}

impl<W: Write> TensorStream<W> {
    /// Write the header of a GGUF v3 file holding `metadata` and the tensors `infos` (their
    /// offsets are ignored and recomputed), and return the stream their data goes into.
    pub fn new(w: W, metadata: &Metadata, infos: Vec<TensorInfo>) -> Result<TensorStream<W>> {
        TensorStream::with_version(w, 3, metadata, infos)
    }

    pub(crate) fn with_version(
        mut w: W,
        version: u32,
        metadata: &Metadata,
        infos: Vec<TensorInfo>,
    ) -> Result<TensorStream<W>> {
        let alignment = alignment(metadata)?;
        let infos = with_offsets(infos, alignment)?;
        let mut header = Vec::new();
        header.extend_from_slice(&MAGIC);
        encode::u32(&mut header, version)?;
        encode::u64(&mut header, infos.len() as u64)?;
        encode::u64(&mut header, metadata.len() as u64)?;
        for (key, value) in metadata.iter() {
            encode::key_value(&mut header, key, value)?;
        }
        for info in &infos {
            encode::tensor_info(&mut header, info)?;
        }
        w.write_all(&header)?;
        let mut written = header.len() as u64;
        written += pad(&mut w, written, alignment)?;
        Ok(TensorStream {
            w,
            infos,
            alignment,
            next: 0,
            part: 0,
            written,
        })
    }

    /// The info of the tensor whose data comes next, or `None` once all are written.
    pub fn next_tensor(&self) -> Option<&TensorInfo> {
        self.infos.get(self.next)
    }

    /// Write the data of the next tensor: exactly the bytes its shape and type need.
    pub fn write_tensor(&mut self, data: &[u8]) -> Result<()> {
        let info = self.current()?;
        if self.part != 0 || info.n_bytes != data.len() as u64 {
            return Err(GgufError::TensorDataSize {
                tensor: info.name.clone(),
                expected: info.n_bytes,
                got: self.part + data.len() as u64,
            });
        }
        self.write_part(data)
    }

    /// Write the next bytes of the next tensor's data, for a tensor produced a few rows at a
    /// time (a quantizer that never holds a whole tensor). Once its bytes are complete the
    /// padding follows and the tensor after it is next; more bytes than it has left are an
    /// error, and so is [`TensorStream::finish`] before its last byte.
    pub fn write_part(&mut self, data: &[u8]) -> Result<()> {
        // Every tensor has at least one byte (GGML has no zero dimension), so nothing to
        // write never completes one, even after the last.
        if data.is_empty() {
            return Ok(());
        }
        let info = self.current()?;
        let (n_bytes, part) = (info.n_bytes, self.part + data.len() as u64);
        if part > n_bytes {
            return Err(GgufError::TensorDataSize {
                tensor: info.name.clone(),
                expected: n_bytes,
                got: part,
            });
        }
        self.w.write_all(data)?;
        self.written += data.len() as u64;
        self.part = part;
        if part == n_bytes {
            self.written += pad(&mut self.w, self.written, self.alignment)?;
            self.next += 1;
            self.part = 0;
        }
        Ok(())
    }

    /// The info of the tensor whose data comes next, or the error of writing one more tensor
    /// than declared.
    fn current(&self) -> Result<&TensorInfo> {
        self.infos
            .get(self.next)
            .ok_or(GgufError::StreamTensorCount {
                declared: self.infos.len(),
                written: self.next + 1,
            })
    }

    /// Check every declared tensor was written and flush; returns the bytes written.
    pub fn finish(mut self) -> Result<u64> {
        if self.next != self.infos.len() {
            return Err(GgufError::StreamTensorCount {
                declared: self.infos.len(),
                written: self.next,
            });
        }
        self.w.flush()?;
        Ok(self.written)
    }
}

/// `general.alignment` if set (a nonzero power of two), else the default.
pub(crate) fn alignment(metadata: &Metadata) -> Result<u64> {
    match metadata.get(ALIGNMENT_KEY) {
        None => Ok(DEFAULT_ALIGNMENT),
        Some(Value::U32(a)) if a.is_power_of_two() => Ok(u64::from(*a)),
        Some(v) => Err(GgufError::wrong_type(
            ALIGNMENT_KEY,
            "a nonzero power of two u32",
            v,
        )),
    }
}

/// The infos with the offsets their data will have: each tensor starts aligned, in order.
/// Names must be unique.
pub(crate) fn with_offsets(infos: Vec<TensorInfo>, alignment: u64) -> Result<Vec<TensorInfo>> {
    let mut names = HashSet::with_capacity(infos.len());
    let mut next = 0u64;
    let mut out = Vec::with_capacity(infos.len());
    for info in infos {
        if !names.insert(info.name.clone()) {
            return Err(GgufError::TensorAddedTwice { tensor: info.name });
        }
        let end = next
            .checked_add(info.n_bytes)
            .and_then(|end| align_up(end, alignment))
            .ok_or_else(|| GgufError::InvalidTensor {
                tensor: info.name.clone(),
                error: crate::ShapeError::Overflow {
                    dims: info.dims.clone(),
                },
            })?;
        out.push(TensorInfo {
            offset: next,
            ..info
        });
        next = end;
    }
    Ok(out)
}

/// Zero bytes from `pos` up to the next multiple of `alignment`; returns how many.
fn pad<W: Write>(w: &mut W, pos: u64, alignment: u64) -> Result<u64> {
    const ZEROS: [u8; 256] = [0; 256];
    let mut n = align_up(pos, alignment).map_or(0, |end| end - pos);
    let total = n;
    while n > 0 {
        let chunk = n.min(ZEROS.len() as u64);
        w.write_all(&ZEROS[..chunk as usize])?;
        n -= chunk;
    }
    Ok(total)
}
