//! The `tojson` filter as `transformers` defines it for chat templates:
//! `json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
//! sort_keys=sort_keys)`. So `{"a": 1, "b": [1, 2]}` with Python's default spacing, non-ASCII
//! kept, nothing HTML-escaped. (Jinja2's and minijinja's own `tojson` are compact and
//! HTML-safe, which changes the prompt text of templates that print tool schemas.)

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Error, ErrorKind};

struct Style {
    indent: Option<usize>,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
}

pub fn tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    // Accepted and ignored: it is always false in transformers' filter.
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
    let (item_sep, key_sep) = match separators.as_deref() {
        Some([item, key]) => (item.clone(), key.clone()),
        Some(_) => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson: separators must be a pair of strings",
            ));
        }
        // Python: ", " without indent, "," with it (the newline follows).
        None if indent.is_some() => (",".into(), ": ".into()),
        None => (", ".into(), ": ".into()),
    };
    let style = Style {
        indent,
        item_sep,
        key_sep,
        sort_keys: sort_keys.unwrap_or(false),
    };
    let mut out = String::new();
    write_value(&value, &style, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

fn write_value(value: &Value, style: &Style, depth: usize, out: &mut String) -> Result<(), Error> {
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => out.push_str(&value.to_string()),
        ValueKind::String => write_string(value.as_str().unwrap_or_default(), out),
        ValueKind::Map => {
            let mut keys: Vec<Value> = value.try_iter()?.collect();
            if style.sort_keys {
                keys.sort_by_key(key_string);
            }
            let items = keys
                .into_iter()
                .map(|k| Ok((key_string(&k), value.get_item(&k)?)))
                .collect::<Result<Vec<_>, Error>>()?;
            write_container(('{', '}'), items.len(), style, depth, out, |i, out| {
                write_string(&items[i].0, out);
                out.push_str(&style.key_sep);
                write_value(&items[i].1, style, depth + 1, out)
            })?;
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            write_container(('[', ']'), items.len(), style, depth, out, |i, out| {
                write_value(&items[i], style, depth + 1, out)
            })?;
        }
        other => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: cannot serialize a value of kind {other}"),
            ));
        }
    }
    Ok(())
}

fn key_string(key: &Value) -> String {
    key.as_str().map_or_else(|| key.to_string(), str::to_string)
}

fn write_container(
    (open, close): (char, char),
    len: usize,
    style: &Style,
    depth: usize,
    out: &mut String,
    mut item: impl FnMut(usize, &mut String) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    if len == 0 {
        out.push(close);
        return Ok(());
    }
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = style.indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * level));
        }
    };
    for i in 0..len {
        if i > 0 {
            out.push_str(&style.item_sep);
        }
        newline(out, depth + 1);
        item(i, out)?;
    }
    newline(out, depth);
    out.push(close);
    Ok(())
}

/// A JSON string as Python writes it with `ensure_ascii=False`.
fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}
