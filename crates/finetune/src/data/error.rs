//! What can go wrong turning a dataset file into batches. Every problem with a line names the
//! file and the 1-based line number (and the field, where one is at fault), so the user can
//! open the file at the place; nothing in this module panics on bad input.

use std::path::PathBuf;

use rullama_tokenizer::TokenizerError;

/// The data module's results.
pub type Result<T, E = DataError> = std::result::Result<T, E>;

/// A dataset that cannot be read or used.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The file could not be opened or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The dataset file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },

    /// One line is not an example this module reads.
    #[error("{}:{line}: {problem}", path.display())]
    Line {
        /// The dataset file.
        path: PathBuf,
        /// 1-based line number in the file (blank lines counted).
        line: usize,
        /// What is wrong with it.
        problem: LineProblem,
    },

    /// The file holds no example at all (only blank lines, or nothing).
    #[error("{}: no examples (a JSONL file with one JSON object a line is expected)", path.display())]
    Empty {
        /// The dataset file.
        path: PathBuf,
    },

    /// Every example was dropped: none has a token the loss would count, so training would
    /// divide by zero.
    #[error(
        "{}: no trainable token in {examples} examples ({dropped} had nothing trainable left \
         after cutting to the context, or no assistant turn / completion to learn)",
        path.display()
    )]
    NoTrainable {
        /// The dataset file.
        path: PathBuf,
        /// Examples read.
        examples: usize,
        /// Examples dropped for having no trainable token.
        dropped: usize,
    },

    /// A setting of the data pipeline is out of range (context, batch, eval fraction).
    #[error("{0}")]
    Setting(String),

    /// A saved data position belongs to another dataset or other batch settings.
    #[error(
        "the saved data position was made for another dataset or other batch settings \
         (fingerprint {saved:016x}, this run {current:016x}): resume with the same data, \
         --seed, --batch, --ctx and packing"
    )]
    PositionMismatch {
        /// The fingerprint stored in the position.
        saved: u64,
        /// The fingerprint of this dataset and settings.
        current: u64,
    },
}

/// What is wrong with one line of a dataset.
#[derive(Debug, thiserror::Error)]
pub enum LineProblem {
    /// Not UTF-8 text.
    #[error("not UTF-8 text")]
    NotUtf8,

    /// Not valid JSON.
    #[error("not valid JSON: {0}")]
    Json(String),

    /// A value of the wrong JSON type (`field` is a path such as `messages[1].content`; the
    /// line itself is `(line)`).
    #[error("`{field}` must be {expected}, found {found}")]
    Type {
        /// Where the value is.
        field: String,
        /// What it should be.
        expected: &'static str,
        /// What it is.
        found: &'static str,
    },

    /// A field the example's shape needs is absent.
    #[error("`{field}` is missing: a `{shape}` example needs it")]
    Missing {
        /// The absent field.
        field: &'static str,
        /// The shape the other fields announce.
        shape: &'static str,
    },

    /// None of `text`, `prompt`/`completion` or `messages`.
    #[error(
        "unknown example shape (keys: {keys}); expected {{\"text\"}}, \
         {{\"prompt\", \"completion\"}} or {{\"messages\": [{{\"role\", \"content\"}}, …]}}"
    )]
    UnknownShape {
        /// The keys the object has, comma-separated.
        keys: String,
    },

    /// Fields of two shapes at once, so it is unclear what to learn.
    #[error("`{0}` and `{1}` cannot be in the same example: choose one shape")]
    Ambiguous(&'static str, &'static str),

    /// A list of messages (`messages`, or a conversational `prompt`/`completion`) is empty.
    #[error("`{0}` is an empty list of messages")]
    EmptyConversation(String),

    /// A message's role is not one this module knows (`field` is `messages[i].role` or
    /// `prompt[i].role`, …).
    #[error("`{field}`: unknown role `{role}` (expected `system`, `user` or `assistant`)")]
    UnknownRole {
        /// Where the role is.
        field: String,
        /// The role given.
        role: String,
    },

    /// A `messages` example for a model without a usable chat template.
    #[error("a `messages` example needs the model's chat template: {0}")]
    NoTemplate(String),

    /// The chat template refused the conversation (`raise_exception`, a render error); the
    /// tokenizer's message names the template.
    #[error("{0}")]
    Template(#[from] TokenizerError),
}
