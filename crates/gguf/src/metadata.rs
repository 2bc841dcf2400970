//! The key/value metadata of a GGUF file: ordered as in the file, looked up by hash.
//!
//! Order and exact types are kept so that a parsed file writes back byte for byte. Lookups go
//! through one generic accessor, [`Metadata::get_as`], driven by [`FromValue`]; the named
//! getters (`get_u32`, `get_str_array`, ...) are one-line instances of it, and every failure
//! is a [`GgufError`] naming the key.

use std::collections::HashMap;

use crate::error::{GgufError, Result};
use crate::value::{Array, Value};

/// Ordered metadata with O(1) lookup by key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    entries: Vec<(String, Value)>,
    index: HashMap<String, usize>,
}

/// A Rust type a metadata value can be read as.
///
/// Implementations for GGUF's own types are strict (a `u32` key must hold a `u32`, as
/// llama.cpp's `get_key` demands). `usize` and `Vec<usize>` are lenient: any integer type with
/// a non-negative value that fits, which is how llama.cpp reads counts and per-layer arrays.
pub trait FromValue<'a>: Sized {
    /// What the value should have been, for [`GgufError::WrongType`].
    const EXPECTED: &'static str;
    /// The value as `Self`, or `None` when it holds another type (or, for the lenient
    /// types, a value that does not fit).
    fn from_value(value: &'a Value) -> Option<Self>;
}

macro_rules! from_value {
    ($($t:ty, $expected:literal, $pat:pat => $out:expr;)*) => {$(
        impl<'a> FromValue<'a> for $t {
            const EXPECTED: &'static str = $expected;
            fn from_value(value: &'a Value) -> Option<Self> {
                match value {
                    $pat => Some($out),
                    _ => None,
                }
            }
        }
    )*};
}

from_value! {
    u8, "u8", Value::U8(v) => *v;
    i8, "i8", Value::I8(v) => *v;
    u16, "u16", Value::U16(v) => *v;
    i16, "i16", Value::I16(v) => *v;
    u32, "u32", Value::U32(v) => *v;
    i32, "i32", Value::I32(v) => *v;
    u64, "u64", Value::U64(v) => *v;
    i64, "i64", Value::I64(v) => *v;
    f32, "f32", Value::F32(v) => *v;
    f64, "f64", Value::F64(v) => *v;
    bool, "bool", Value::Bool(v) => *v;
    &'a str, "string", Value::String(v) => v.as_str();
    &'a Array, "array", Value::Array(v) => v;
    &'a [String], "array of string", Value::Array(Array::String(v)) => v.as_slice();
    &'a [f32], "array of f32", Value::Array(Array::F32(v)) => v.as_slice();
    &'a [i32], "array of i32", Value::Array(Array::I32(v)) => v.as_slice();
    &'a [u32], "array of u32", Value::Array(Array::U32(v)) => v.as_slice();
    &'a [bool], "array of bool", Value::Array(Array::Bool(v)) => v.as_slice();
}

impl<'a> FromValue<'a> for &'a Value {
    const EXPECTED: &'static str = "any value";
    fn from_value(value: &'a Value) -> Option<Self> {
        Some(value)
    }
}

impl FromValue<'_> for usize {
    const EXPECTED: &'static str = "a non-negative integer that fits usize";
    fn from_value(value: &Value) -> Option<Self> {
        value.as_u64_lenient().and_then(|v| usize::try_from(v).ok())
    }
}

impl FromValue<'_> for Vec<usize> {
    const EXPECTED: &'static str = "an array of non-negative integers that fit usize";
    fn from_value(value: &Value) -> Option<Self> {
        let Value::Array(array) = value else {
            return None;
        };
        (0..array.len())
            .map(|i| array.get(i).as_ref().and_then(usize::from_value))
            .collect()
    }
}

impl Metadata {
    /// No entries.
    pub fn new() -> Metadata {
        Metadata::default()
    }

    pub(crate) fn with_capacity(n: usize) -> Metadata {
        Metadata {
            entries: Vec::with_capacity(n),
            index: HashMap::with_capacity(n),
        }
    }

    /// Append a key that must not be present yet; `false` (and no change) if it is.
    pub(crate) fn push_new(&mut self, key: String, value: Value) -> bool {
        if self.index.contains_key(&key) {
            return false;
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        true
    }

    /// Set `key`: replace its value in place (keeping its position) or append it.
    /// Returns the previous value.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) -> Option<Value> {
        let key = key.into();
        let value = value.into();
        match self.index.get(&key) {
            Some(&i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            None => {
                self.push_new(key, value);
                None
            }
        }
    }

    /// Remove `key`, keeping the order of the rest.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.index.remove(key)?;
        let (_, value) = self.entries.remove(i);
        for slot in self.index.values_mut() {
            if *slot > i {
                *slot -= 1;
            }
        }
        Some(value)
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in file order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// The value of `key`, of whatever type it is stored as.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index
            .get(key)
            .and_then(|&i| self.entries.get(i))
            .map(|(_, v)| v)
    }

    /// The value of `key` as `T`: [`GgufError::MissingKey`] if absent,
    /// [`GgufError::WrongType`] if it holds something else.
    pub fn get_as<'a, T: FromValue<'a>>(&'a self, key: &str) -> Result<T> {
        let value = self.get(key).ok_or_else(|| GgufError::MissingKey {
            key: key.to_string(),
        })?;
        T::from_value(value).ok_or_else(|| GgufError::wrong_type(key, T::EXPECTED, value))
    }

    /// Like [`Metadata::get_as`], but an absent key is `Ok(None)`. A present key of the wrong
    /// type is still an error: an optional key is no excuse for a malformed one.
    pub fn get_opt<'a, T: FromValue<'a>>(&'a self, key: &str) -> Result<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.get_as(key).map(Some),
        }
    }

    /// The value of `key`, which must be a `u32` ([`Metadata::get_as`]).
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        self.get_as(key)
    }

    /// The value of `key`, which must be a `u64` ([`Metadata::get_as`]).
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        self.get_as(key)
    }

    /// The value of `key`, which must be an `i32` ([`Metadata::get_as`]).
    pub fn get_i32(&self, key: &str) -> Result<i32> {
        self.get_as(key)
    }

    /// The value of `key`, which must be an `f32` ([`Metadata::get_as`]).
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        self.get_as(key)
    }

    /// The value of `key`, which must be a bool ([`Metadata::get_as`]).
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        self.get_as(key)
    }

    /// The value of `key`, which must be a string ([`Metadata::get_as`]).
    pub fn get_str(&self, key: &str) -> Result<&str> {
        self.get_as(key)
    }

    /// Any integer type, non-negative and fitting `usize`.
    pub fn get_usize(&self, key: &str) -> Result<usize> {
        self.get_as(key)
    }

    /// The value of `key`, which must be an array of any element type ([`Metadata::get_as`]).
    pub fn get_array(&self, key: &str) -> Result<&Array> {
        self.get_as(key)
    }

    /// The value of `key`, which must be an array of strings ([`Metadata::get_as`]).
    pub fn get_str_array(&self, key: &str) -> Result<&[String]> {
        self.get_as(key)
    }

    /// The value of `key`, which must be an array of `f32` ([`Metadata::get_as`]).
    pub fn get_f32_array(&self, key: &str) -> Result<&[f32]> {
        self.get_as(key)
    }

    /// The value of `key`, which must be an array of `i32` ([`Metadata::get_as`]).
    pub fn get_i32_array(&self, key: &str) -> Result<&[i32]> {
        self.get_as(key)
    }

    /// The value of `key`, which must be an array of `u32` ([`Metadata::get_as`]).
    pub fn get_u32_array(&self, key: &str) -> Result<&[u32]> {
        self.get_as(key)
    }

    /// The value of `key`, which must be an array of bools ([`Metadata::get_as`]).
    pub fn get_bool_array(&self, key: &str) -> Result<&[bool]> {
        self.get_as(key)
    }

    /// An array of any integer type, each element non-negative and fitting `usize`.
    pub fn get_usize_array(&self, key: &str) -> Result<Vec<usize>> {
        self.get_as(key)
    }

    /// `general.architecture`, the prefix of every model-specific key.
    pub fn architecture(&self) -> Result<&str> {
        self.get_str("general.architecture")
    }

    /// `"{architecture}.{suffix}"`, e.g. `gemma3.block_count` for `"block_count"`.
    pub fn arch_key(&self, suffix: &str) -> Result<String> {
        Ok(format!("{}.{suffix}", self.architecture()?))
    }

    /// The architecture-prefixed key `suffix` as `T`.
    pub fn arch<'a, T: FromValue<'a>>(&'a self, suffix: &str) -> Result<T> {
        self.get_as(&self.arch_key(suffix)?)
    }

    /// The architecture-prefixed key `suffix` as `T`, or `None` when absent.
    pub fn arch_opt<'a, T: FromValue<'a>>(&'a self, suffix: &str) -> Result<Option<T>> {
        self.get_opt(&self.arch_key(suffix)?)
    }

    /// The architecture-prefixed key `suffix`, which must be a `u32`.
    pub fn arch_u32(&self, suffix: &str) -> Result<u32> {
        self.arch(suffix)
    }

    /// The architecture-prefixed key `suffix`, which must be an `f32`.
    pub fn arch_f32(&self, suffix: &str) -> Result<f32> {
        self.arch(suffix)
    }

    /// The architecture-prefixed key `suffix`, which must be any integer type, non-negative and fitting `usize`.
    pub fn arch_usize(&self, suffix: &str) -> Result<usize> {
        self.arch(suffix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_keeps_position_and_remove_keeps_order() {
        let mut m = Metadata::new();
        m.insert("a", 1u32);
        m.insert("b", "x");
        m.insert("c", 2.5f32);
        assert_eq!(m.insert("a", 7u8), Some(Value::U32(1)));
        let keys: Vec<&str> = m.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        assert_eq!(m.remove("b"), Some(Value::from("x")));
        assert_eq!(m.get_f32("c").unwrap(), 2.5);
        assert_eq!(m.get_as::<u8>("a").unwrap(), 7);
        assert!(!m.push_new("a".into(), Value::Bool(true)));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn lenient_usize_accepts_any_non_negative_integer() {
        let mut m = Metadata::new();
        m.insert("u8", 3u8);
        m.insert("i64", 4i64);
        m.insert("neg", -1i32);
        m.insert("arr", vec![1i32, 2, 3]);
        m.insert("neg_arr", vec![1i32, -2]);
        assert_eq!(m.get_usize("u8").unwrap(), 3);
        assert_eq!(m.get_usize("i64").unwrap(), 4);
        assert!(matches!(
            m.get_usize("neg"),
            Err(GgufError::WrongType { .. })
        ));
        assert_eq!(m.get_usize_array("arr").unwrap(), [1, 2, 3]);
        assert!(m.get_usize_array("neg_arr").is_err());
        // Strict getters stay strict.
        assert!(m.get_u32("u8").is_err());
    }
}
