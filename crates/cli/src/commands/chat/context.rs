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

#[cfg(test)]
mod tests {
    use rullama_synth::{Tiny, tiny_model};

    use super::*;

    /// The tiny SmolLM2's tokenizer and ChatML template.
    fn chatml() -> (Tokenizer, ChatTemplate) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        std::fs::write(&path, tiny_model(Tiny::Smollm2, 1)).unwrap();
        let tokenizer = Tokenizer::open(&path).unwrap();
        let template = ChatTemplate::for_model(&tokenizer).unwrap();
        (tokenizer, template)
    }

    fn fits(fit: Fit) -> (Vec<u32>, usize) {
        match fit {
            Fit::Fits { ids, dropped, .. } => (ids, dropped),
            Fit::TooLong { tokens } => panic!("{tokens} tokens: too long"),
        }
    }

    /// Six turns in a context that holds about two: the oldest go, the system prompt and the
    /// newest stay, and what is left takes at most half the context.
    #[test]
    fn a_full_context_drops_the_oldest_turns_never_the_system_prompt() {
        let (tokenizer, template) = chatml();
        let mut conversation = Conversation::new(Some("SYSTEM PROMPT".into()));
        for i in 0..6 {
            conversation.push(
                format!("question {i} {}", "x ".repeat(20)),
                format!("reply {i}"),
            );
        }
        let message = "the last question";
        let everything = Limits::new(100_000, 8);
        let (all, dropped) = fits(
            conversation
                .fit(message, &template, &tokenizer, everything)
                .unwrap(),
        );
        assert_eq!(dropped, 0);

        let limits = Limits {
            n_ctx: all.len() * 2 / 3,
            reply_room: 8,
        };
        let (ids, dropped) = fits(
            conversation
                .fit(message, &template, &tokenizer, limits)
                .unwrap(),
        );
        assert!((1..6).contains(&dropped), "{dropped} turns dropped");
        assert!(ids.len() <= limits.n_ctx / 2, "{} tokens", ids.len());
        let text = tokenizer.decode(&ids).unwrap();
        assert!(text.contains("SYSTEM PROMPT"), "{text}");
        assert!(
            text.contains("reply 5") && text.ends_with("assistant\n"),
            "{text}"
        );
        assert!(!text.contains("question 0"), "{text}");
        // The turns kept are the newest ones: the oldest kept is the first after those dropped.
        let kept = format!("question {dropped} ");
        assert!(text.contains(&kept), "{kept:?} in {text}");
    }

    /// A message that does not fit even alone with the system prompt is too long, whatever
    /// the turns before it.
    #[test]
    fn a_message_that_cannot_fit_is_too_long() {
        let (tokenizer, template) = chatml();
        let mut conversation = Conversation::new(Some("SYSTEM PROMPT".into()));
        conversation.push("hello".into(), "hi".into());
        let limits = Limits::new(256, 8);
        let long = "word ".repeat(300);
        let fit = conversation
            .fit(&long, &template, &tokenizer, limits)
            .unwrap();
        assert!(
            matches!(fit, Fit::TooLong { tokens } if tokens > 256 - 8),
            "{fit:?}"
        );
        // The same conversation takes a short message without dropping anything.
        let (_, dropped) = fits(
            conversation
                .fit("ok", &template, &tokenizer, limits)
                .unwrap(),
        );
        assert_eq!(dropped, 0);
    }
}
