//! The conversation, and keeping it within the context.
//!
//! Each message is rendered with the whole conversation before it, and the prompt must leave
//! room for the reply: `-n` tokens, at most a quarter of the context. When it does not fit,
//! the oldest turns (a user message and its reply) are left out until the prompt takes at
//! most half the context (so that the turns after it append to the cache for a while instead
//! of re-feeding the conversation every time; Ollama drops half its context likewise) or no
//! older turn is left. The system prompt always stays. A message that does not fit even
//! alone with the system prompt is refused, and the conversation is as it was.

use rullama_tokenizer::{ChatMessage, ChatTemplate, Tokenizer};

use super::CliError;

/// A system prompt and the turns after it.
#[derive(Debug, Default)]
pub struct Conversation {
    system: Option<String>,
    /// User messages and replies, alternating, a user message first.
    turns: Vec<ChatMessage>,
}

/// How a new message fits the context.
#[derive(Debug, PartialEq, Eq)]
pub enum Fit {
    /// The prompt's tokens, with the `dropped` oldest turns left out; `exact` as
    /// [`ChatPrompt::is_exact`](rullama_tokenizer::ChatPrompt::is_exact).
    Fits {
        ids: Vec<u32>,
        dropped: usize,
        exact: bool,
    },
    /// Even alone with the system prompt, the prompt takes `tokens` tokens: more than the
    /// context leaves beside the reply's room.
    TooLong { tokens: usize },
}

/// The context's size and the room kept for a reply.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub n_ctx: usize,
    pub reply_room: usize,
}

impl Limits {
    /// `n_predict` tokens of room for the reply, at most a quarter of the context.
    pub fn new(n_ctx: usize, n_predict: usize) -> Limits {
        Limits {
            n_ctx,
            reply_room: n_predict.min(n_ctx / 4),
        }
    }
}

impl Conversation {
    pub fn new(system: Option<String>) -> Conversation {
        Conversation {
            system,
            turns: Vec::new(),
        }
    }

    /// Forgets every turn; the system prompt stays.
    pub fn clear(&mut self) {
        self.turns.clear();
    }

    /// Number of turns (a user message and its reply).
    pub fn n_turns(&self) -> usize {
        self.turns.len() / 2
    }

    /// Leaves out the `n` oldest turns.
    pub fn drop_oldest(&mut self, n: usize) {
        self.turns.drain(..(2 * n).min(self.turns.len()));
    }

    /// Appends a turn.
    pub fn push(&mut self, message: String, reply: String) {
        self.turns.push(ChatMessage::new("user", message));
        self.turns.push(ChatMessage::new("assistant", reply));
    }

    /// The messages with `message` as the next user turn, the `skip` oldest turns left out.
    fn messages(&self, skip: usize, message: &str) -> Vec<ChatMessage> {
        let system = self.system.iter().map(|s| ChatMessage::new("system", s));
        let turns = self.turns[2 * skip..].iter().cloned();
        system
            .chain(turns)
            .chain([ChatMessage::new("user", message)])
            .collect()
    }

    /// How the conversation with `message` next fits `limits` (module docs).
    pub fn fit(
        &self,
        message: &str,
        template: &ChatTemplate,
        tokenizer: &Tokenizer,
        limits: Limits,
    ) -> Result<Fit, CliError> {
        let tokens = |skip: usize| -> Result<(Vec<u32>, bool), CliError> {
            let prompt = template.render_segments(&self.messages(skip, message), true)?;
            Ok((tokenizer.encode_chat(&prompt), prompt.is_exact()))
        };
        let room = limits.n_ctx - limits.reply_room;
        let (mut ids, mut exact) = tokens(0)?;
        let mut dropped = 0;
        if ids.len() > room {
            while ids.len() > limits.n_ctx / 2 && dropped < self.n_turns() {
                dropped += 1;
                (ids, exact) = tokens(dropped)?;
            }
            if ids.len() > room {
                return Ok(Fit::TooLong { tokens: ids.len() });
            }
        }
        Ok(Fit::Fits {
            ids,
            dropped,
            exact,
        })
    }
}
