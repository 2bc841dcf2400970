//! Encoding metadata values and tensor infos: the exact inverse of `decode` and `header`.

use std::io::{self, Write};

use crate::tensor::TensorInfo;
use crate::value::{Array, Value};

pub(crate) fn u32<W: Write>(w: &mut W, v: u32) -> io::Result<()> {
    w.write_all(&v.to_le_bytes())
}

pub(crate) fn u64<W: Write>(w: &mut W, v: u64) -> io::Result<()> {
    w.write_all(&v.to_le_bytes())
}

pub(crate) fn str<W: Write>(w: &mut W, s: &str) -> io::Result<()> {
    u64(w, s.len() as u64)?;
    w.write_all(s.as_bytes())
}

/// A key/value pair: key, value type, value.
pub(crate) fn key_value<W: Write>(w: &mut W, key: &str, value: &Value) -> io::Result<()> {
    str(w, key)?;
    u32(w, value.value_type().id())?;
    self::value(w, value)
}

/// A value without its type tag.
pub(crate) fn value<W: Write>(w: &mut W, value: &Value) -> io::Result<()> {
    match value {
        Value::U8(v) => w.write_all(&v.to_le_bytes()),
        Value::I8(v) => w.write_all(&v.to_le_bytes()),
        Value::U16(v) => w.write_all(&v.to_le_bytes()),
        Value::I16(v) => w.write_all(&v.to_le_bytes()),
        Value::U32(v) => w.write_all(&v.to_le_bytes()),
        Value::I32(v) => w.write_all(&v.to_le_bytes()),
        Value::F32(v) => w.write_all(&v.to_le_bytes()),
        Value::U64(v) => w.write_all(&v.to_le_bytes()),
        Value::I64(v) => w.write_all(&v.to_le_bytes()),
        Value::F64(v) => w.write_all(&v.to_le_bytes()),
        Value::Bool(v) => w.write_all(&[u8::from(*v)]),
        Value::String(s) => str(w, s),
        Value::Array(a) => array(w, a),
    }
}

/// An array: element type, u64 length, elements.
fn array<W: Write>(w: &mut W, a: &Array) -> io::Result<()> {
    u32(w, a.element_type().id())?;
    u64(w, a.len() as u64)?;
    match a {
        Array::U8(v) => w.write_all(v),
        Array::I8(v) => each(w, v, |x| x.to_le_bytes()),
        Array::U16(v) => each(w, v, |x| x.to_le_bytes()),
        Array::I16(v) => each(w, v, |x| x.to_le_bytes()),
        Array::U32(v) => each(w, v, |x| x.to_le_bytes()),
        Array::I32(v) => each(w, v, |x| x.to_le_bytes()),
        Array::F32(v) => each(w, v, |x| x.to_le_bytes()),
        Array::U64(v) => each(w, v, |x| x.to_le_bytes()),
        Array::I64(v) => each(w, v, |x| x.to_le_bytes()),
        Array::F64(v) => each(w, v, |x| x.to_le_bytes()),
        Array::Bool(v) => each(w, v, |x| [u8::from(*x)]),
        Array::String(v) => v.iter().try_for_each(|s| str(w, s)),
        Array::Array(v) => v.iter().try_for_each(|a| array(w, a)),
    }
}

fn each<W: Write, T, const N: usize>(
    w: &mut W,
    items: &[T],
    le: impl Fn(&T) -> [u8; N],
) -> io::Result<()> {
    items.iter().try_for_each(|x| w.write_all(&le(x)))
}

/// A tensor info: name, n_dims, dims, type id, offset.
pub(crate) fn tensor_info<W: Write>(w: &mut W, info: &TensorInfo) -> io::Result<()> {
    str(w, &info.name)?;
    u32(w, info.dims.len() as u32)?;
    info.dims.iter().try_for_each(|&d| u64(w, d))?;
    u32(w, info.ggml_type.id())?;
    u64(w, info.offset)
}
