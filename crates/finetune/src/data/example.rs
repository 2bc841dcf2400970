//! One training example as a dataset line states it, checked field by field.
//!
//! The shapes are those of Hugging Face TRL's SFT datasets ("language modeling",
//! "prompt-completion" and "conversational"): `{"text": …}`, `{"prompt": …, "completion": …}`
//! and `{"messages": [{"role": …, "content": …}, …]}`, and TRL's conversational
//! prompt-completion, where `prompt` and `completion` are both lists of messages. Other keys
//! (an `id`, a `source`) are ignored, as a column the trainer does not use; keys of two shapes
//! in one line are an error rather than a guess.

use rullama_tokenizer::ChatMessage;
use serde_json::{Map, Value};

use super::error::LineProblem;

/// The roles a conversation may use. Roles are template text (the template prints them as
/// they are, where control tokens are parsed), so one from a dataset is checked before it
/// reaches the template.
pub const ROLES: [&str; 3] = ["system", "user", "assistant"];

/// A training example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Example {
    /// Plain text: the loss covers all of it.
    Text(String),
    /// A prompt and its completion: the loss covers the completion only.
    Completion {
        /// What the model is given.
        prompt: String,
        /// What it learns to answer.
        completion: String,
    },
    /// A conversation rendered by the model's chat template: the loss covers the assistant
    /// turns only.
    Chat(Vec<ChatMessage>),
    /// A conversation and its continuation (`prompt` and `completion` as lists of messages):
    /// the loss covers the assistant turns of the completion only.
    ChatCompletion {
        /// The conversation so far.
        prompt: Vec<ChatMessage>,
        /// What follows it, learnt.
        completion: Vec<ChatMessage>,
    },
}

impl Example {
    /// The example a dataset line's JSON value states.
    pub fn from_json(value: &Value) -> Result<Example, LineProblem> {
        let object = value.as_object().ok_or_else(|| LineProblem::Type {
            field: "(line)".into(),
            expected: "a JSON object",
            found: kind(value),
        })?;
        let has = |k: &str| object.contains_key(k);
        if has("messages") {
            for other in ["text", "prompt", "completion"] {
                if has(other) {
                    return Err(LineProblem::Ambiguous("messages", other));
                }
            }
            return Ok(Example::Chat(messages(object, "messages")?));
        }
        if has("text") {
            for other in ["prompt", "completion"] {
                if has(other) {
                    return Err(LineProblem::Ambiguous("text", other));
                }
            }
            return Ok(Example::Text(string(object, "text", "text")?));
        }
        if has("prompt") || has("completion") {
            let lists =
                ["prompt", "completion"].map(|k| matches!(object.get(k), Some(Value::Array(_))));
            if lists[0] || lists[1] {
                let (prompt, completion) = if lists[0] && lists[1] {
                    (messages(object, "prompt")?, messages(object, "completion")?)
                } else {
                    // One list and one string (or nothing): a list was meant for both.
                    let other = ["prompt", "completion"][usize::from(lists[0])];
                    return Err(match object.get(other) {
                        None => LineProblem::Missing {
                            field: other,
                            shape: "conversational prompt/completion",
                        },
                        Some(v) => LineProblem::Type {
                            field: other.into(),
                            expected: if lists[0] {
                                "a list of messages, as `prompt` is"
                            } else {
                                "a list of messages, as `completion` is"
                            },
                            found: kind(v),
                        },
                    });
                };
                return Ok(Example::ChatCompletion { prompt, completion });
            }
            let shape = "prompt/completion";
            return Ok(Example::Completion {
                prompt: string(object, "prompt", shape)?,
                completion: string(object, "completion", shape)?,
            });
        }
        let keys: Vec<&str> = object.keys().map(String::as_str).collect();
        Err(LineProblem::UnknownShape {
            keys: if keys.is_empty() {
                "none".into()
            } else {
                keys.join(", ")
            },
        })
    }
}

/// The string at `key`, which the example's `shape` needs.
fn string(
    object: &Map<String, Value>,
    key: &'static str,
    shape: &'static str,
) -> Result<String, LineProblem> {
    match object.get(key) {
        None => Err(LineProblem::Missing { field: key, shape }),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(LineProblem::Type {
            field: key.into(),
            expected: "a string",
            found: kind(other),
        }),
    }
}

/// The messages listed at `key`.
fn messages(object: &Map<String, Value>, key: &str) -> Result<Vec<ChatMessage>, LineProblem> {
    let list = match object.get(key) {
        Some(Value::Array(list)) => list,
        other => {
            return Err(LineProblem::Type {
                field: key.into(),
                expected: "a list of {\"role\", \"content\"} objects",
                found: other.map_or("nothing", kind),
            });
        }
    };
    if list.is_empty() {
        return Err(LineProblem::EmptyConversation(key.to_string()));
    }
    let mut messages = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let field = |name: &str| format!("{key}[{i}].{name}");
        let message = item.as_object().ok_or_else(|| LineProblem::Type {
            field: format!("{key}[{i}]"),
            expected: "an object with `role` and `content`",
            found: kind(item),
        })?;
        let text = |name: &'static str| match message.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            other => Err(LineProblem::Type {
                field: field(name),
                expected: "a string",
                found: other.map_or("nothing", kind),
            }),
        };
        let role = text("role")?;
        let content = text("content")?;
        if !ROLES.contains(&role.as_str()) {
            return Err(LineProblem::UnknownRole {
                field: field("role"),
                role,
            });
        }
        messages.push(ChatMessage::new(role, content));
    }
    Ok(messages)
}

/// The JSON type of `value`, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
