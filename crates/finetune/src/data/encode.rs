//! An [`Example`] into a [`Sequence`]: the model's own tokenizer and chat template, and a loss
//! mask over what the model should learn to write.
//!
//! The conventions are Hugging Face TRL's `SFTTrainer` (`trl/trainer/sft_trainer.py`):
//!
//! * `text`: BOS where the tokenizer adds one, the text, EOS; every token is a target. TRL
//!   appends the EOS to language-modeling and completion examples (its `add_eos`) so that the
//!   model learns to stop.
//! * `prompt`/`completion`: BOS, the tokens of `prompt + completion` (one string, as TRL
//!   tokenizes it), EOS; the targets are the completion's tokens and the EOS (TRL's
//!   `completion_only_loss`, on by default for such data). The prompt's tokens are the longest
//!   common prefix of the tokens of `prompt` alone and of `prompt + completion`, so a word that
//!   runs across the boundary (`"fo"` + `"ur"` tokenized as `four`) counts with the completion instead of
//!   shifting the mask (TRL instead warns of the mismatch and keeps the prompt's count).
//! * `messages`: the conversation rendered by the model's chat template and tokenized with
//!   control tokens only in the template's own text (`ChatTemplate::render_segments`,
//!   `Tokenizer::encode_chat`: a user who types `<|im_end|>` writes text, not a turn end). The
//!   targets are the assistant turns (TRL's `assistant_only_loss`). TRL reads them from
//!   `{% generation %}` markers that few templates have; here each assistant message `i` is
//!   found by rendering the conversation up to it: `messages[..i]` with the generation prompt
//!   (`<start_of_turn>model\n`, `<|im_start|>assistant\n`) and `messages[..=i]` without, and
//!   the turn's tokens are where each stops agreeing with the whole conversation's tokens
//!   (longest common prefixes again, so a template that renders earlier turns differently
//!   once later ones exist still gets a mask). A turn's span ends at its last end-of-generation
//!   token (`<end_of_turn>`, `<|im_end|>`): that token is learnt, as it is how the model stops,
//!   and what the template writes after it (a newline) is not, as generation never reaches it.
//! * conversational `prompt`/`completion` (lists of messages): the conversation `prompt +
//!   completion`, the assistant turns of the completion learnt (TRL masks the prompt's
//!   rendering with the generation prompt, the same boundary).
//!
//! A conversation that opens with the assistant (which some templates cannot render as an
//! empty prefix) learns its first turn from after BOS and the generation prompt.
//!
//! Text in examples never becomes control tokens; only the template's markers do.

use rullama_tokenizer::{ChatMessage, ChatTemplate, EncodeOptions, Tokenizer};

use super::error::LineProblem;
use super::example::Example;
use super::sequence::Sequence;

/// Plain text in, tokens out: no BOS/EOS (added here by rule), no control tokens.
const PLAIN: EncodeOptions = EncodeOptions {
    add_special: false,
    parse_special: false,
};

/// Tokenizes examples for one model.
#[derive(Debug)]
pub struct Encoder<'t> {
    tokenizer: &'t Tokenizer,
    /// The chat template, or why there is none (reported on the first `messages` example,
    /// so that a model without a template still trains on text).
    template: Result<ChatTemplate, String>,
}

impl<'t> Encoder<'t> {
    /// An encoder with `tokenizer` and the model's chat template (its own, or the built-in
    /// one of its family).
    pub fn new(tokenizer: &'t Tokenizer) -> Encoder<'t> {
        let template = ChatTemplate::for_model(tokenizer).map_err(|e| e.to_string());
        Encoder {
            tokenizer,
            template,
        }
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        self.tokenizer
    }

    /// Tokens and loss mask of `example` (module docs), not cut to any context.
    pub fn encode(&self, example: &Example) -> Result<Sequence, LineProblem> {
        let (tokens, mask) = match example {
            Example::Text(text) => {
                let mut tokens = self.bos();
                tokens.extend(self.tokenizer.encode(text, PLAIN));
                tokens.extend(self.tokenizer.eos());
                let mask = vec![true; tokens.len()];
                (tokens, mask)
            }
            Example::Completion { prompt, completion } => {
                let prompt_ids = self.tokenizer.encode(prompt, PLAIN);
                let full = self
                    .tokenizer
                    .encode(&format!("{prompt}{completion}"), PLAIN);
                let start = common_prefix(&prompt_ids, &full);
                let mut tokens = self.bos();
                let start = start + tokens.len();
                tokens.extend(full);
                tokens.extend(self.tokenizer.eos());
                let mask = (0..tokens.len()).map(|j| j >= start).collect();
                (tokens, mask)
            }
            Example::Chat(messages) => self.chat(messages, 0)?,
            Example::ChatCompletion { prompt, completion } => {
                let messages: Vec<ChatMessage> = prompt.iter().chain(completion).cloned().collect();
                self.chat(&messages, prompt.len())?
            }
        };
        Ok(Sequence::new(tokens, mask).expect("one mask flag per token"))
    }

    /// BOS if the model's tokenizer adds one.
    fn bos(&self) -> Vec<u32> {
        match self.tokenizer.bos() {
            Some(bos) if self.tokenizer.add_bos() => vec![bos],
            _ => Vec::new(),
        }
    }

    /// A conversation's tokens, the assistant turns from message `first` on learnt.
    fn chat(
        &self,
        messages: &[ChatMessage],
        first: usize,
    ) -> Result<(Vec<u32>, Vec<bool>), LineProblem> {
        let template = self
            .template
            .as_ref()
            .map_err(|e| LineProblem::NoTemplate(e.clone()))?;
        let ids = |messages: &[ChatMessage], generation_prompt: bool| {
            let prompt = template.render_segments(messages, generation_prompt)?;
            Ok::<_, LineProblem>(self.tokenizer.encode_chat(&prompt))
        };
        let tokens = ids(messages, false)?;
        let mut mask = vec![false; tokens.len()];
        for (i, message) in messages.iter().enumerate().skip(first) {
            if message.role != "assistant" {
                continue;
            }
            let before = match ids(&messages[..i], true) {
                Ok(before) => before,
                // Many templates cannot render an empty conversation (Gemma's reads
                // `messages[0]`): what precedes a first turn is BOS and the generation
                // prompt, which a one-message conversation shows.
                Err(_) if i == 0 => {
                    let probe = [ChatMessage::new("user", "x")];
                    let (without, with) = (ids(&probe, false)?, ids(&probe, true)?);
                    let mut before = self.bos();
                    before.extend(with.get(without.len()..).unwrap_or_default());
                    before
                }
                Err(e) => return Err(e),
            };
            let start = common_prefix(&before, &tokens);
            let mut end = common_prefix(&ids(&messages[..=i], false)?, &tokens).max(start);
            if let Some(last) = tokens[start..end]
                .iter()
                .rposition(|&t| self.tokenizer.is_eog(t))
            {
                end = start + last + 1;
            }
            mask[start..end].fill(true);
        }
        Ok((tokens, mask))
    }
}

/// Length of the longest common prefix of `a` and `b`.
fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
