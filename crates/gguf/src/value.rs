//! Metadata values exactly as GGUF stores them.
//!
//! Every value keeps its stored type (a `u32` stays a `u32`, an empty array keeps its element
//! type) because writing a parsed file back must give the same bytes. Arrays are held as one
//! typed `Vec` per element type rather than a `Vec<Value>`: a 262k-token vocabulary is then one
//! `Vec<String>` that accessors hand out as `&[String]` without converting anything.

use std::fmt;

/// The type tag (u32) that precedes every metadata value and every array's elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// Tag 0: an unsigned 8-bit integer.
    U8,
    /// Tag 1: a signed 8-bit integer.
    I8,
    /// Tag 2: an unsigned 16-bit integer.
    U16,
    /// Tag 3: a signed 16-bit integer.
    I16,
    /// Tag 4: an unsigned 32-bit integer.
    U32,
    /// Tag 5: a signed 32-bit integer.
    I32,
    /// Tag 6: a 32-bit float.
    F32,
    /// Tag 7: a bool, stored as one byte 0 or 1.
    Bool,
    /// Tag 8: a UTF-8 string, stored as a u64 length and its bytes.
    String,
    /// Tag 9: an array: an element type, a u64 count, the elements.
    Array,
    /// Tag 10: an unsigned 64-bit integer.
    U64,
    /// Tag 11: a signed 64-bit integer.
    I64,
    /// Tag 12: a 64-bit float.
    F64,
}

impl ValueType {
    /// The type for a stored tag, or `None` for a tag GGUF does not define.
    pub const fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The tag stored in the file.
    pub const fn id(self) -> u32 {
        use ValueType::*;
        match self {
            U8 => 0,
            I8 => 1,
            U16 => 2,
            I16 => 3,
            U32 => 4,
            I32 => 5,
            F32 => 6,
            Bool => 7,
            String => 8,
            Array => 9,
            U64 => 10,
            I64 => 11,
            F64 => 12,
        }
    }

    /// The fewest bytes one value of this type takes in the file. The parser multiplies a
    /// count by this before allocating, so a forged count cannot reserve more memory than the
    /// file could fill.
    pub const fn min_encoded_size(self) -> u64 {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 => 8,
            // A string is at least its u64 length; an array its u32 type and u64 count.
            String => 8,
            Array => 12,
        }
    }

    /// Lower-case name used in messages (`u32`, `string`, `array`...).
    pub const fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A u8.
    U8(u8),
    /// A i8.
    I8(i8),
    /// A u16.
    U16(u16),
    /// A i16.
    I16(i16),
    /// A u32.
    U32(u32),
    /// A i32.
    I32(i32),
    /// A f32.
    F32(f32),
    /// A bool.
    Bool(bool),
    /// A string.
    String(String),
    /// An array of one element type.
    Array(Array),
    /// A u64.
    U64(u64),
    /// A i64.
    I64(i64),
    /// A f64.
    F64(f64),
}

/// A homogeneous array; the variant is the stored element type. Nested arrays are arrays of
/// [`Array`], each inner array with its own element type, as the format allows.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    /// u8 elements.
    U8(Vec<u8>),
    /// i8 elements.
    I8(Vec<i8>),
    /// u16 elements.
    U16(Vec<u16>),
    /// i16 elements.
    I16(Vec<i16>),
    /// u32 elements.
    U32(Vec<u32>),
    /// i32 elements.
    I32(Vec<i32>),
    /// f32 elements.
    F32(Vec<f32>),
    /// Bools.
    Bool(Vec<bool>),
    /// Strings (a vocabulary's tokens, say).
    String(Vec<String>),
    /// Arrays, each with its own element type.
    Array(Vec<Array>),
    /// u64 elements.
    U64(Vec<u64>),
    /// i64 elements.
    I64(Vec<i64>),
    /// f64 elements.
    F64(Vec<f64>),
}

impl Value {
    /// The type it is stored as.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// The value as an unsigned integer, whatever integer type stores it; `None` for a
    /// negative number or a non-integer. llama.cpp reads counts this leniently.
    pub fn as_u64_lenient(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer, whatever integer type stores it.
    pub fn as_i64_lenient(&self) -> Option<i64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => i64::try_from(v).ok(),
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a float, from `f32` or `f64` storage.
    pub fn as_f64_lenient(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// A short description for messages: type and value, or for an array its length and
    /// element type (`u32 3`, `string "gemma3"`, `array of 5 f32`).
    pub fn describe(&self) -> String {
        let t = self.value_type();
        match self {
            Value::Array(a) => format!("array of {} {}", a.len(), a.element_type()),
            Value::String(s) if s.chars().count() > 40 => {
                format!("{t} \"{}...\"", s.chars().take(40).collect::<String>())
            }
            Value::String(s) => format!("{t} {s:?}"),
            Value::U8(v) => format!("{t} {v}"),
            Value::I8(v) => format!("{t} {v}"),
            Value::U16(v) => format!("{t} {v}"),
            Value::I16(v) => format!("{t} {v}"),
            Value::U32(v) => format!("{t} {v}"),
            Value::I32(v) => format!("{t} {v}"),
            Value::F32(v) => format!("{t} {v}"),
            Value::Bool(v) => format!("{t} {v}"),
            Value::U64(v) => format!("{t} {v}"),
            Value::I64(v) => format!("{t} {v}"),
            Value::F64(v) => format!("{t} {v}"),
        }
    }
}

/// Runs `$body` with `$v` bound to the inner `Vec` of any [`Array`] variant.
macro_rules! each_array {
    ($array:expr, $v:ident => $body:expr) => {
        match $array {
            Array::U8($v) => $body,
            Array::I8($v) => $body,
            Array::U16($v) => $body,
            Array::I16($v) => $body,
            Array::U32($v) => $body,
            Array::I32($v) => $body,
            Array::F32($v) => $body,
            Array::Bool($v) => $body,
            Array::String($v) => $body,
            Array::Array($v) => $body,
            Array::U64($v) => $body,
            Array::I64($v) => $body,
            Array::F64($v) => $body,
        }
    };
}

impl Array {
    /// An empty array of the given element type.
    pub fn empty(element: ValueType) -> Array {
        match element {
            ValueType::U8 => Array::U8(Vec::new()),
            ValueType::I8 => Array::I8(Vec::new()),
            ValueType::U16 => Array::U16(Vec::new()),
            ValueType::I16 => Array::I16(Vec::new()),
            ValueType::U32 => Array::U32(Vec::new()),
            ValueType::I32 => Array::I32(Vec::new()),
            ValueType::F32 => Array::F32(Vec::new()),
            ValueType::Bool => Array::Bool(Vec::new()),
            ValueType::String => Array::String(Vec::new()),
            ValueType::Array => Array::Array(Vec::new()),
            ValueType::U64 => Array::U64(Vec::new()),
            ValueType::I64 => Array::I64(Vec::new()),
            ValueType::F64 => Array::F64(Vec::new()),
        }
    }

    /// The type of its elements.
    pub fn element_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::F32(_) => ValueType::F32,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F64(_) => ValueType::F64,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        each_array!(self, v => v.len())
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as a [`Value`] (a copy), for generic inspection such as printing.
    pub fn get(&self, i: usize) -> Option<Value> {
        Some(match self {
            Array::U8(v) => Value::U8(*v.get(i)?),
            Array::I8(v) => Value::I8(*v.get(i)?),
            Array::U16(v) => Value::U16(*v.get(i)?),
            Array::I16(v) => Value::I16(*v.get(i)?),
            Array::U32(v) => Value::U32(*v.get(i)?),
            Array::I32(v) => Value::I32(*v.get(i)?),
            Array::F32(v) => Value::F32(*v.get(i)?),
            Array::Bool(v) => Value::Bool(*v.get(i)?),
            Array::String(v) => Value::String(v.get(i)?.clone()),
            Array::Array(v) => Value::Array(v.get(i)?.clone()),
            Array::U64(v) => Value::U64(*v.get(i)?),
            Array::I64(v) => Value::I64(*v.get(i)?),
            Array::F64(v) => Value::F64(*v.get(i)?),
        })
    }
}

macro_rules! from_scalar {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::$variant(v)
            }
        }
        impl From<Vec<$t>> for Array {
            fn from(v: Vec<$t>) -> Array {
                Array::$variant(v)
            }
        }
        impl From<Vec<$t>> for Value {
            fn from(v: Vec<$t>) -> Value {
                Value::Array(Array::$variant(v))
            }
        }
    )*};
}

from_scalar!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, String => String, u64 => U64, i64 => I64, f64 => F64,
);

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::String(v.to_string())
    }
}

impl From<Vec<&str>> for Value {
    fn from(v: Vec<&str>) -> Value {
        Value::Array(Array::String(v.into_iter().map(str::to_string).collect()))
    }
}

impl From<Array> for Value {
    fn from(v: Array) -> Value {
        Value::Array(v)
    }
}

impl From<Vec<Array>> for Value {
    fn from(v: Vec<Array>) -> Value {
        Value::Array(Array::Array(v))
    }
}

impl From<Vec<Array>> for Array {
    fn from(v: Vec<Array>) -> Array {
        Array::Array(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_ids_round_trip() {
        for id in 0..13 {
            let t = ValueType::from_id(id).unwrap();
            assert_eq!(t.id(), id);
            assert_eq!(Array::empty(t).element_type(), t);
        }
        assert_eq!(ValueType::from_id(13), None);
        assert_eq!(ValueType::from_id(u32::MAX), None);
    }

    #[test]
    fn lenient_integers_reject_negatives_and_floats() {
        assert_eq!(Value::I32(7).as_u64_lenient(), Some(7));
        assert_eq!(Value::I32(-1).as_u64_lenient(), None);
        assert_eq!(Value::U64(u64::MAX).as_i64_lenient(), None);
        assert_eq!(Value::F32(1.0).as_u64_lenient(), None);
        assert_eq!(Value::F32(0.5).as_f64_lenient(), Some(0.5));
    }

    #[test]
    fn arrays_report_length_and_elements() {
        let a = Array::from(vec!["a".to_string(), "b".to_string()]);
        assert_eq!(a.len(), 2);
        assert_eq!(a.get(1), Some(Value::String("b".into())));
        assert_eq!(a.get(2), None);
        assert_eq!(Value::from(vec![1u32, 2, 3]).describe(), "array of 3 u32");
        assert_eq!(Value::I32(-3).describe(), "i32 -3");
        assert_eq!(Value::from("gemma3").describe(), "string \"gemma3\"");
    }
}
