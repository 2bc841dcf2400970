//! Parsing everything before the data section: magic, version, counts, metadata, tensor infos.
//!
//! ```text
//! "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//! n_kv x      (string key, u32 value type, value)
//! n_tensors x (string name, u32 n_dims, n_dims x u64 dim, u32 ggml type, u64 offset)
//! zero padding to `general.alignment` (default 32)  <- data section starts here
//! ```
//!
//! Versions 2 and 3 share this little-endian layout (v3 only allowed big-endian files, which
//! we refuse). The header is validated as a whole against the length of the input: each
//! tensor must be aligned and lie inside it, so views handed out later need no checks (a
//! file read in ranges can still shrink later: its reads check again).

use std::collections::HashMap;

use crate::GgmlType;
use crate::decode;
use crate::error::{GgufError, Result};
use crate::metadata::Metadata;
use crate::reader::Reader;
use crate::source::ByteSource;
use crate::tensor::{MAX_DIMS, TensorInfo, shape_size};
use crate::value::Value;

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// Alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The metadata key that sets the alignment of tensor data.
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Fewest bytes one key/value pair takes: key length, value type, a one-byte value.
const MIN_KV_SIZE: u64 = 8 + 4 + 1;
/// Fewest bytes one tensor info takes: name length, n_dims, one dim, type, offset.
const MIN_TENSOR_INFO_SIZE: u64 = 8 + 4 + 8 + 4 + 8;

/// The parsed header of a GGUF file.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufHeader {
    version: u32,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    data_offset: u64,
}

impl GgufHeader {
    /// Parse and validate the header of the GGUF file held in `bytes` (the whole file: tensor
    /// extents are checked against its length).
    pub fn parse(bytes: &[u8]) -> Result<GgufHeader> {
        GgufHeader::read(&bytes)
    }

    /// Parse and validate the header of the GGUF file in `source`, reading only the header
    /// (tensor extents are checked against the source's length).
    pub fn read(source: &dyn ByteSource) -> Result<GgufHeader> {
        let mut r = Reader::new(source);
        let version = preamble(&mut r)?;

        let n_tensors_offset = r.pos();
        let n_tensors = r.u64("tensor count")?;
        let n_kv_offset = r.pos();
        let n_kv = r.u64("metadata count")?;
        r.count(n_tensors, MIN_TENSOR_INFO_SIZE, n_tensors_offset, || {
            "tensor".into()
        })?;
        let n_kv = r.count(n_kv, MIN_KV_SIZE, n_kv_offset, || {
            "metadata key/value".into()
        })?;

        let (metadata, alignment) = read_metadata(&mut r, n_kv)?;

        // Re-checked now that the metadata has used up part of the input.
        let n_tensors = r.count(n_tensors, MIN_TENSOR_INFO_SIZE, n_tensors_offset, || {
            "tensor".into()
        })?;
        let mut tensors = Vec::with_capacity(r.capacity::<TensorInfo>(n_tensors));
        let mut info_offsets = Vec::with_capacity(r.capacity::<u64>(n_tensors));
        let mut tensor_index =
            HashMap::with_capacity(r.capacity::<(String, usize, u64)>(n_tensors));
        for i in 0..n_tensors {
            let offset = r.pos();
            let info = tensor_info(&mut r)?;
            if tensor_index.insert(info.name.clone(), i).is_some() {
                return Err(GgufError::DuplicateTensor {
                    offset,
                    tensor: info.name,
                });
            }
            tensors.push(info);
            info_offsets.push(offset);
        }

        let data_offset = align_up(r.pos(), alignment).ok_or(GgufError::BadAlignment {
            offset: r.pos(),
            found: format!("{alignment}, which overflows the data offset"),
        })?;
        for (info, &offset) in tensors.iter().zip(&info_offsets) {
            check_extent(info, offset, data_offset, alignment, r.file_len())?;
        }

        Ok(GgufHeader {
            version,
            metadata,
            tensors,
            tensor_index,
            alignment,
            data_offset,
        })
    }

    /// GGUF version: 2 or 3.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The key/value metadata, in file order.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The description of the tensor called `name`.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index
            .get(name)
            .and_then(|&i| self.tensors.get(i))
    }

    /// Alignment of tensor data (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Offset in the file where the data section starts: the header's end, aligned.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }
}

/// Magic and version; returns the version.
fn preamble(r: &mut Reader<'_>) -> Result<u32> {
    let magic: [u8; 4] = r.array("magic")?;
    if magic != MAGIC {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = r.u32("version")?;
    // A big-endian file's small version number reads, little-endian, as a multiple of 2^16;
    // llama.cpp uses the same test.
    if version != 0 && version & 0xffff == 0 {
        return Err(GgufError::BigEndian { version });
    }
    if !(2..=3).contains(&version) {
        return Err(GgufError::UnsupportedVersion { version });
    }
    Ok(version)
}

/// The key/value pairs, and the alignment they set.
fn read_metadata(r: &mut Reader<'_>, n_kv: usize) -> Result<(Metadata, u64)> {
    let mut metadata = Metadata::with_capacity(r.capacity::<(String, Value, String, usize)>(n_kv));
    let mut alignment = DEFAULT_ALIGNMENT;
    for _ in 0..n_kv {
        let key_offset = r.pos();
        let key = r.str(|| "metadata key".into())?.to_string();
        let ty = decode::value_type(r, &key)?;
        let value_offset = r.pos();
        let value = decode::value(r, ty, &key)?;
        if key == ALIGNMENT_KEY {
            alignment = match value {
                Value::U32(a) if a.is_power_of_two() => u64::from(a),
                ref v => {
                    return Err(GgufError::BadAlignment {
                        offset: value_offset,
                        found: v.describe(),
                    });
                }
            };
        }
        if !metadata.push_new(key.clone(), value) {
            return Err(GgufError::DuplicateKey {
                offset: key_offset,
                key,
            });
        }
    }
    Ok((metadata, alignment))
}

fn tensor_info(r: &mut Reader<'_>) -> Result<TensorInfo> {
    let name = r.str(|| "tensor name".into())?.to_string();
    let shape_error = |offset, name: &str, error| GgufError::TensorShape {
        offset,
        tensor: name.to_string(),
        error,
    };

    let n_dims_offset = r.pos();
    let n_dims = r.u32("tensor dimension count")?;
    if n_dims == 0 || n_dims as usize > MAX_DIMS {
        let error = crate::ShapeError::DimCount {
            n_dims: n_dims.into(),
        };
        return Err(shape_error(n_dims_offset, &name, error));
    }
    let dims_offset = r.pos();
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        dims.push(r.u64("tensor dimension")?);
    }

    let type_offset = r.pos();
    let type_id = r.u32("tensor type")?;
    let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
        offset: type_offset,
        tensor: name.clone(),
        type_id,
    })?;
    let offset = r.u64("tensor offset")?;

    let (n_elements, n_bytes) =
        shape_size(&dims, ggml_type).map_err(|e| shape_error(dims_offset, &name, e))?;
    Ok(TensorInfo {
        name,
        dims,
        ggml_type,
        offset,
        n_elements,
        n_bytes,
    })
}

/// The tensor described at `info_offset` must start aligned and end inside the file.
fn check_extent(
    info: &TensorInfo,
    info_offset: u64,
    data_offset: u64,
    alignment: u64,
    file_len: u64,
) -> Result<()> {
    if !info.offset.is_multiple_of(alignment) {
        return Err(GgufError::MisalignedTensor {
            offset: info_offset,
            tensor: info.name.clone(),
            data_offset: info.offset,
            alignment,
        });
    }
    let start = data_offset.checked_add(info.offset);
    let end = start.and_then(|s| s.checked_add(info.n_bytes));
    match (start, end) {
        (Some(_), Some(end)) if end <= file_len => Ok(()),
        _ => Err(GgufError::TensorOutOfBounds {
            offset: info_offset,
            tensor: info.name.clone(),
            start: start.unwrap_or(u64::MAX),
            n_bytes: info.n_bytes,
            file_len,
        }),
    }
}

/// `pos` rounded up to a multiple of `alignment` (a power of two), or `None` on overflow.
pub(crate) fn align_up(pos: u64, alignment: u64) -> Option<u64> {
    Some(pos.checked_add(alignment - 1)? & !(alignment - 1))
}
