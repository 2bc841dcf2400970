//! Chat templates in the two formats the synthetic families use, written as Hugging Face
//! templates are (Jinja, rendered by the tokenizer crate's minijinja setup). Neither writes
//! BOS: encoding with `add_special` adds it where the model wants it.

/// Gemma's turns: `<start_of_turn>{user|model}\n{text}<end_of_turn>\n`, a system prompt
/// folded into the first user turn (as Gemma 3's own template does), then
/// `<start_of_turn>model\n` to prompt a reply.
pub(super) const GEMMA: &str = r#"{%- if messages[0]['role'] == 'system' -%}
{%- set first_user_prefix = messages[0]['content'] | trim + '\n\n' -%}
{%- set loop_messages = messages[1:] -%}
{%- else -%}
{%- set first_user_prefix = '' -%}
{%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
{{- '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') -}}
{{- message['content'] | trim + '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}"#;

/// ChatML (Qwen 2, SmolLM2): `<|im_start|>{role}\n{text}<|im_end|>\n`, then
/// `<|im_start|>assistant\n` to prompt a reply.
pub(super) const CHATML: &str = r#"{%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"#;
