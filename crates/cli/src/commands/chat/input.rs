//! What the user types: one line is one message, and `"""` starts a message of several lines
//! that ends at a line ending with `"""` (as in Ollama). Where stdin and stdout are a
//! terminal a line editor reads them (cursor movement, word deletion, history with the arrow
//! keys: rustyline, the ecosystem's readline); otherwise lines are read as they come (a pipe,
//! a file), the prompt going to stderr so that stdout holds only replies.

use std::io::{self, BufRead, IsTerminal, StdinLock, Write};

use rustyline::error::ReadlineError;
use rustyline::{Config, DefaultEditor};

/// The prompt of a message's first line, and of the lines after it in a `"""` block.
const PROMPT: &str = ">>> ";
const CONTINUED: &str = "... ";
/// Opens and closes a message of several lines.
const QUOTES: &str = "\"\"\"";

/// What reading a message gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Input {
    /// One line: a message or a command.
    Line(String),
    /// The text of a `"""` block (its lines joined with `\n`): always a message.
    Block(String),
    /// Ctrl-D, or the end of the input.
    End,
    /// Ctrl-C at the prompt (the line editor's).
    Interrupted,
}

/// Reads messages from stdin.
pub struct Reader {
    source: Source,
}

enum Source {
    Editor(Box<DefaultEditor>),
    Plain(StdinLock<'static>),
}

/// One physical line.
enum Line {
    Text(String),
    End,
    Interrupted,
}

impl Reader {
    /// The line editor where stdin and stdout are a terminal (and it can be set up), plain
    /// lines otherwise. Create it before installing the SIGINT handler (`interrupt.rs`).
    pub fn new() -> Reader {
        let terminal = io::stdin().is_terminal() && io::stdout().is_terminal();
        let editor = terminal
            .then(|| DefaultEditor::with_config(Config::builder().auto_add_history(false).build()))
            .and_then(Result::ok);
        let source = match editor {
            Some(editor) => Source::Editor(Box::new(editor)),
            None => Source::Plain(io::stdin().lock()),
        };
        Reader { source }
    }

    /// The next message (or command), its lines joined.
    pub fn read(&mut self) -> io::Result<Input> {
        let first = match self.line(PROMPT)? {
            Line::Text(text) => text,
            Line::End => return Ok(Input::End),
            Line::Interrupted => return Ok(Input::Interrupted),
        };
        let Some(rest) = first.trim_start().strip_prefix(QUOTES) else {
            return Ok(Input::Line(first));
        };
        let mut text = String::new();
        let mut line = rest.to_string();
        loop {
            if let Some(last) = line.trim_end().strip_suffix(QUOTES) {
                text.push_str(last);
                return Ok(Input::Block(text));
            }
            text.push_str(&line);
            text.push('\n');
            line = match self.line(CONTINUED)? {
                Line::Text(line) => line,
                Line::End => {
                    eprintln!("\nthe input ended inside a {QUOTES} block; it was not sent");
                    return Ok(Input::End);
                }
                Line::Interrupted => return Ok(Input::Interrupted),
            };
        }
    }

    fn line(&mut self, prompt: &str) -> io::Result<Line> {
        match &mut self.source {
            Source::Editor(editor) => match editor.readline(prompt) {
                Ok(line) => {
                    if !line.trim().is_empty() {
                        editor.add_history_entry(line.as_str()).map_err(io_error)?;
                    }
                    Ok(Line::Text(line))
                }
                Err(ReadlineError::Eof) => Ok(Line::End),
                Err(ReadlineError::Interrupted) => Ok(Line::Interrupted),
                Err(e) => Err(io_error(e)),
            },
            Source::Plain(stdin) => {
                eprint!("{prompt}");
                io::stderr().flush()?;
                let mut bytes = Vec::new();
                if stdin.read_until(b'\n', &mut bytes)? == 0 {
                    return Ok(Line::End);
                }
                let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                // Invalid UTF-8 (a pasted binary, a legacy encoding) becomes U+FFFD, not an
                // error that would end the chat.
                Ok(Line::Text(String::from_utf8_lossy(line).into_owned()))
            }
        }
    }
}

fn io_error(e: ReadlineError) -> io::Error {
    match e {
        ReadlineError::Io(e) => e,
        other => io::Error::other(other.to_string()),
    }
}
