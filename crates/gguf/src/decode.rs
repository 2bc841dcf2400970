//! Decoding metadata values from the byte stream.
//!
//! Arrays of fixed-size elements are read as one bounds-checked slice and converted in a
//! single pass, which keeps a 262k-entry score array cheap. Nested arrays recurse, so the
//! depth is capped: a file of nothing but array headers could otherwise overflow the stack.

use crate::error::{GgufError, Result};
use crate::reader::Reader;
use crate::value::{Array, Value, ValueType};

/// Deepest array nesting accepted. The format sets no limit and llama.cpp accepts none at
/// all; this bound only exists to keep recursion finite on hostile input.
pub const MAX_ARRAY_DEPTH: usize = 16;

/// A value type tag; an undefined tag is an error naming `key` and the tag's offset.
pub(crate) fn value_type(r: &mut Reader<'_>, key: &str) -> Result<ValueType> {
    let offset = r.pos();
    let type_id = r.u32("value type")?;
    ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
        offset,
        key: key.to_string(),
        type_id,
    })
}

/// One value of type `ty`, belonging to metadata key `key` (used in errors).
pub(crate) fn value(r: &mut Reader<'_>, ty: ValueType, key: &str) -> Result<Value> {
    Ok(match ty {
        ValueType::U8 => Value::U8(r.u8("u8 value")?),
        ValueType::I8 => Value::I8(r.i8("i8 value")?),
        ValueType::U16 => Value::U16(r.u16("u16 value")?),
        ValueType::I16 => Value::I16(r.i16("i16 value")?),
        ValueType::U32 => Value::U32(r.u32("u32 value")?),
        ValueType::I32 => Value::I32(r.i32("i32 value")?),
        ValueType::F32 => Value::F32(r.f32("f32 value")?),
        ValueType::U64 => Value::U64(r.u64("u64 value")?),
        ValueType::I64 => Value::I64(r.i64("i64 value")?),
        ValueType::F64 => Value::F64(r.f64("f64 value")?),
        ValueType::Bool => Value::Bool(bool_byte(r, key)?),
        ValueType::String => Value::String(r.str(|| format!("value of key `{key}`"))?.to_string()),
        ValueType::Array => Value::Array(array(r, key, 1)?),
    })
}

fn bool_byte(r: &mut Reader<'_>, key: &str) -> Result<bool> {
    let offset = r.pos();
    match r.u8("bool value")? {
        0 => Ok(false),
        1 => Ok(true),
        byte => Err(GgufError::InvalidBool {
            offset,
            key: key.to_string(),
            byte,
        }),
    }
}

/// An array (element type, u64 count, elements) at nesting level `depth` (1 = outermost).
fn array(r: &mut Reader<'_>, key: &str, depth: usize) -> Result<Array> {
    if depth > MAX_ARRAY_DEPTH {
        return Err(GgufError::NestingTooDeep {
            offset: r.pos(),
            key: key.to_string(),
            max: MAX_ARRAY_DEPTH,
        });
    }
    let element = value_type(r, key)?;
    let count_offset = r.pos();
    let count = r.u64("array length")?;
    let n = r.count(count, element.min_encoded_size(), count_offset, || {
        format!("array of {element} for key `{key}`")
    })?;
    Ok(match element {
        ValueType::U8 => Array::U8(fixed(r, n, u8::from_le_bytes)?),
        ValueType::I8 => Array::I8(fixed(r, n, i8::from_le_bytes)?),
        ValueType::U16 => Array::U16(fixed(r, n, u16::from_le_bytes)?),
        ValueType::I16 => Array::I16(fixed(r, n, i16::from_le_bytes)?),
        ValueType::U32 => Array::U32(fixed(r, n, u32::from_le_bytes)?),
        ValueType::I32 => Array::I32(fixed(r, n, i32::from_le_bytes)?),
        ValueType::F32 => Array::F32(fixed(r, n, f32::from_le_bytes)?),
        ValueType::U64 => Array::U64(fixed(r, n, u64::from_le_bytes)?),
        ValueType::I64 => Array::I64(fixed(r, n, i64::from_le_bytes)?),
        ValueType::F64 => Array::F64(fixed(r, n, f64::from_le_bytes)?),
        ValueType::Bool => Array::Bool(repeat(r, n, |r| bool_byte(r, key))?),
        ValueType::String => Array::String(repeat(r, n, |r| {
            Ok(r.str(|| format!("string in key `{key}`"))?.to_string())
        })?),
        ValueType::Array => Array::Array(repeat(r, n, |r| array(r, key, depth + 1))?),
    })
}

/// `n` little-endian values of `N` bytes each, read as one slice. The caller has checked
/// that `n * N` bytes remain, so the multiplication cannot overflow.
fn fixed<T, const N: usize>(
    r: &mut Reader<'_>,
    n: usize,
    decode: fn([u8; N]) -> T,
) -> Result<Vec<T>> {
    let bytes = r.take((n as u64) * (N as u64), "array elements")?;
    Ok(bytes
        .chunks_exact(N)
        .map(|chunk| {
            let mut le = [0u8; N];
            le.copy_from_slice(chunk);
            decode(le)
        })
        .collect())
}

fn repeat<'a, T>(
    r: &mut Reader<'a>,
    n: usize,
    mut item: impl FnMut(&mut Reader<'a>) -> Result<T>,
) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(r.capacity::<T>(n));
    for _ in 0..n {
        out.push(item(r)?);
    }
    Ok(out)
}
