//! Chat templates: turn a conversation into the prompt text a model was trained on.
//!
//! A file's `tokenizer.chat_template` is a Jinja template written for Hugging Face
//! `transformers`, rendered here with minijinja configured the way `transformers` configures
//! Jinja2: `trim_blocks` and `lstrip_blocks` on, loop controls (`break`/`continue`), Python
//! string and dict methods (`.strip()`, `.startswith()`, `.items()`, via minijinja-contrib's
//! pycompat), and the globals `raise_exception` and `strftime_now` and filter `tojson`
//! (Python's `json.dumps` spacing, not HTML-escaped). Variables: `messages` (each with `role`
//! and `content`), `add_generation_prompt`, `bos_token`, `eos_token`.
//!
//! A file without a template gets a built-in one for its family, written as Jinja too and
//! rendering what llama.cpp's `llm_chat_apply_template` writes for that family: Gemma for
//! gemma architectures, ChatML for any vocabulary with `<|im_start|>`. The rendered text
//! carries no BOS: `encode` with `add_special` adds it where the model wants it.
//!
//! [`ChatTemplate::render_segments`] renders the same text cut into the template's own pieces
//! and the messages' contents, and [`Tokenizer::encode_chat`] tokenizes it with control
//! tokens recognised only in the template's pieces: a message that spells `<|im_end|>` or
//! `<start_of_turn>` cannot close its turn or open another (`segments.rs` says how the
//! pieces are found, and what happens with a template that rewrites contents).

mod segments;
mod strftime;
mod tojson;

pub use segments::{ChatPrompt, Segment};

use minijinja::value::Value;
use minijinja::{Environment, Error, ErrorKind};

use crate::error::{Result, TokenizerError};
use crate::tokenizer::{KEY_CHAT_TEMPLATE, Tokenizer};

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` (or whatever the template knows).
    pub role: String,
    /// What was said.
    pub content: String,
}

impl ChatMessage {
    /// A turn of `role` saying `content`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// `<start_of_turn>{role}\n{content}<end_of_turn>\n`, the assistant's role called `model`, a
/// system prompt folded into the next user turn (llama.cpp's `LLM_CHAT_TEMPLATE_GEMMA`).
const GEMMA: &str = r#"{%- set ns = namespace(system='') -%}
{%- for message in messages -%}
{%- if message.role == 'system' -%}
{%- set ns.system = ns.system + (message.content | trim) -%}
{%- else -%}
{%- set role = 'model' if message.role == 'assistant' else message.role -%}
{{- '<start_of_turn>' + role + '\n' -}}
{%- if ns.system and role != 'model' -%}
{{- ns.system + '\n\n' -}}
{%- set ns.system = '' -%}
{%- endif -%}
{{- (message.content | trim) + '<end_of_turn>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}"#;

/// `<|im_start|>{role}\n{content}<|im_end|>\n` (llama.cpp's `LLM_CHAT_TEMPLATE_CHATML`).
const CHATML: &str = r#"{%- for message in messages -%}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"#;

/// A compiled chat template and the token texts it may refer to.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    /// `tokenizer.chat_template` or `built-in <family>`, for error messages.
    source_name: String,
    bos_token: String,
    eos_token: String,
}

const NAME: &str = "chat";

impl ChatTemplate {
    /// The model's own template, or the built-in one for its family.
    pub fn for_model(tokenizer: &Tokenizer) -> Result<ChatTemplate> {
        let token = |id: Option<u32>| {
            id.and_then(|id| tokenizer.token_text(id))
                .unwrap_or_default()
                .to_string()
        };
        let (bos, eos) = (token(tokenizer.bos()), token(tokenizer.eos()));
        if let Some(source) = tokenizer.chat_template_source() {
            return ChatTemplate::new(source.to_string(), KEY_CHAT_TEMPLATE.into(), bos, eos);
        }
        let arch = tokenizer.architecture();
        let builtin = if arch.starts_with("gemma") {
            ("gemma", GEMMA)
        } else if tokenizer.token_id("<|im_start|>").is_some() {
            ("chatml", CHATML)
        } else {
            return Err(TokenizerError::NoChatTemplate(arch.to_string()));
        };
        let name = format!("built-in {}", builtin.0);
        ChatTemplate::new(builtin.1.to_string(), name, bos, eos)
    }

    /// Compile `source`; `source_name` says where it came from in errors.
    pub fn new(
        source: String,
        source_name: String,
        bos_token: String,
        eos_token: String,
    ) -> Result<ChatTemplate> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime::strftime_now);
        env.add_filter("tojson", tojson::tojson);
        env.add_template_owned(NAME, source)
            .map_err(|e| template_error(&source_name, &e))?;
        Ok(ChatTemplate {
            env,
            source_name,
            bos_token,
            eos_token,
        })
    }

    /// Where the template came from: `tokenizer.chat_template` or `built-in <family>`.
    pub fn source_name(&self) -> &str {
        &self.source_name
    }

    /// Render a conversation; with `add_generation_prompt` the text ends where the
    /// assistant's reply begins.
    ///
    /// This is the text only: tokenizing it with `parse_special` would turn control-token
    /// text inside a message into control tokens. A prompt for a model is
    /// [`ChatTemplate::render_segments`] then [`Tokenizer::encode_chat`].
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        self.render_with(messages, add_generation_prompt, |_, m| {
            m.content.as_str().into()
        })
    }

    /// Render a conversation as [`ChatTemplate::render`] does, cut into the template's text
    /// and the messages' contents ([`Segment`]), for [`Tokenizer::encode_chat`]. The text is
    /// the same as `render`'s ([`ChatPrompt::is_exact`]) unless the template changes a
    /// content other than by trimming whitespace at its ends; the contents are then inserted
    /// as given. Roles are template text: a caller that takes roles from untrusted input
    /// must check them.
    pub fn render_segments(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<ChatPrompt> {
        let rendered = self.render(messages, add_generation_prompt)?;
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| template_error(&self.source_name, &e))?;
        let others = [
            template.source(),
            self.bos_token.as_str(),
            self.eos_token.as_str(),
        ];
        let roles = messages.iter().map(|m| m.role.as_str());
        let placeholders = segments::Placeholders::new(others.into_iter().chain(roles));
        let pattern = self.render_with(messages, add_generation_prompt, |i, m| {
            placeholders.content(i, m).into()
        })?;
        Ok(placeholders.segment(messages, &rendered, &pattern))
    }

    /// Render with each message's content given by `content` (of its index and message).
    fn render_with(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        content: impl Fn(usize, &ChatMessage) -> Value,
    ) -> Result<String> {
        let messages: Vec<Value> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                Value::from_iter([
                    ("role", Value::from(m.role.as_str())),
                    ("content", content(i, m)),
                ])
            })
            .collect();
        let ctx = minijinja::context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
        };
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| template_error(&self.source_name, &e))?;
        template
            .render(ctx)
            .map_err(|e| template_error(&self.source_name, &e))
    }
}

/// `raise_exception(message)`: templates call it to reject a conversation they cannot render.
fn raise_exception(message: String) -> std::result::Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

fn template_error(source_name: &str, e: &Error) -> TokenizerError {
    let mut message = e.kind().to_string();
    if let Some(detail) = e.detail() {
        message = format!("{message}: {detail}");
    }
    TokenizerError::Template {
        source_name: source_name.to_string(),
        line: e.line(),
        message,
    }
}
