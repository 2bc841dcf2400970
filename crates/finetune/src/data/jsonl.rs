//! Reading a JSONL dataset: one JSON object a line, each an [`Example`].
//!
//! Blank lines (empty or only whitespace) are skipped wherever they are, and still counted in
//! line numbers: an editor's trailing newline or an empty line between examples holds no
//! example, and reporting it as one would only make the user delete it. Anything else that is
//! not an example is an error naming the file and line ([`DataError::Line`]); the first one
//! stops the read, as a dataset with a broken line is usually broken in more ways than one and
//! training on the rest would hide it. Windows line ends and a UTF-8 byte-order mark at the
//! start are accepted.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::error::{DataError, LineProblem, Result};
use super::example::Example;

/// An example and the line it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// 1-based line number in the file.
    pub line: usize,
    /// What the line says.
    pub example: Example,
}

/// Read every example of the JSONL file at `path`.
pub fn read_file(path: &Path) -> Result<Vec<Record>> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    read(BufReader::new(file), path)
}

/// Read every example of JSONL text from `reader`; `path` names it in errors.
pub fn read(mut reader: impl BufRead, path: &Path) -> Result<Vec<Record>> {
    let mut records = Vec::new();
    let mut bytes = Vec::new();
    let mut line = 0;
    loop {
        bytes.clear();
        let n = reader
            .read_until(b'\n', &mut bytes)
            .map_err(|source| DataError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        if n == 0 {
            break;
        }
        line += 1;
        let error = |problem| DataError::Line {
            path: path.to_path_buf(),
            line,
            problem,
        };
        let text = std::str::from_utf8(&bytes).map_err(|_| error(LineProblem::NotUtf8))?;
        let text = if line == 1 {
            text.trim_start_matches('\u{feff}')
        } else {
            text
        };
        if text.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| error(LineProblem::Json(json_message(&e))))?;
        let example = Example::from_json(&value).map_err(error)?;
        records.push(Record { line, example });
    }
    Ok(records)
}

/// serde_json's message without its "at line 1 column N" (the line is ours to name); the
/// column is kept.
fn json_message(e: &serde_json::Error) -> String {
    let message = e.to_string();
    match message.rfind(" at line ") {
        Some(at) => format!("{} (column {})", &message[..at], e.column()),
        None => message,
    }
}
