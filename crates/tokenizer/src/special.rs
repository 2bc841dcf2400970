//! Special token ids (BOS, EOS, EOT, FIM, ...) and the end-of-generation set, as llama.cpp
//! derives them: defaults per tokenizer type, then the file's `tokenizer.ggml.*_token_id`
//! keys, then detection by token text for what the file leaves out.
//!
//! Detection by text also changes attributes, and so tokenization: a token llama.cpp
//! recognises as EOT/EOG/FIM gains the CONTROL bit (so it is no longer matched in text when
//! special tokens are not parsed), and control tokens whose text contains "unused" gain
//! UNUSED. Where llama.cpp picks "the first" of several candidates it walks a hash map, so its
//! choice is arbitrary; we take the lowest id. Only the single-id accessors can differ: every
//! candidate ends up in the EOG set either way.

use std::collections::BTreeSet;

use rullama_gguf::Metadata;

use crate::config::TokenizerKind;
use crate::error::{Result, TokenizerError};
use crate::vocab::{TokenAttr, Vocab};

/// A model's special token ids, each `None` where it has no such token.
#[derive(Debug, Clone, Default)]
pub struct SpecialTokens {
    /// Beginning of sequence.
    pub bos: Option<u32>,
    /// End of sequence.
    pub eos: Option<u32>,
    /// End of turn (`<end_of_turn>`, `<|im_end|>`, `<|eot_id|>`).
    pub eot: Option<u32>,
    /// End of message (`<|eom_id|>`: Llama 3's tool calls).
    pub eom: Option<u32>,
    /// Unknown: what SPM emits for text no token or byte token covers.
    pub unk: Option<u32>,
    /// Separator.
    pub sep: Option<u32>,
    /// Padding.
    pub pad: Option<u32>,
    /// Mask.
    pub mask: Option<u32>,
    /// Fill-in-the-middle: the prefix comes next.
    pub fim_pre: Option<u32>,
    /// Fill-in-the-middle: the suffix comes next.
    pub fim_suf: Option<u32>,
    /// Fill-in-the-middle: the middle, to be generated, comes next.
    pub fim_mid: Option<u32>,
    /// Fill-in-the-middle: padding.
    pub fim_pad: Option<u32>,
    /// Fill-in-the-middle: a repository name follows.
    pub fim_rep: Option<u32>,
    /// Fill-in-the-middle: separates files.
    pub fim_sep: Option<u32>,
    /// Tokens that end generation.
    pub eog: BTreeSet<u32>,
}

const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];
/// gpt-oss channel markers: llama.cpp forces them USER_DEFINED so they always render.
const FORCED_USER_DEFINED: &[&str] = &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

impl SpecialTokens {
    /// Read the ids and detect the rest; adjusts `vocab`'s attributes as llama.cpp does.
    pub fn from_metadata(
        md: &Metadata,
        kind: TokenizerKind,
        vocab: &mut Vocab,
    ) -> Result<SpecialTokens> {
        let mut s = match kind {
            TokenizerKind::Spm => SpecialTokens {
                bos: Some(1),
                eos: Some(2),
                unk: Some(0),
                ..SpecialTokens::default()
            },
            TokenizerKind::Bpe => SpecialTokens {
                bos: Some(11),
                eos: Some(11),
                ..SpecialTokens::default()
            },
        };
        s.read_ids(md, vocab)?;
        s.detect_by_text(vocab);
        s.build_eog(vocab);
        Ok(s)
    }

    fn read_ids(&mut self, md: &Metadata, vocab: &Vocab) -> Result<()> {
        let s = self;
        for (suffix, slot) in [
            ("bos_token_id", &mut s.bos),
            ("eos_token_id", &mut s.eos),
            ("eot_token_id", &mut s.eot),
            ("eom_token_id", &mut s.eom),
            ("unknown_token_id", &mut s.unk),
            // sic: llama.cpp's key is spelled this way.
            ("seperator_token_id", &mut s.sep),
            ("padding_token_id", &mut s.pad),
            ("mask_token_id", &mut s.mask),
            ("fim_pre_token_id", &mut s.fim_pre),
            ("fim_suf_token_id", &mut s.fim_suf),
            ("fim_mid_token_id", &mut s.fim_mid),
            ("fim_pad_token_id", &mut s.fim_pad),
            ("fim_rep_token_id", &mut s.fim_rep),
            ("fim_sep_token_id", &mut s.fim_sep),
        ] {
            read_id(md, vocab, suffix, slot)?;
        }
        // Deprecated names of the FIM keys, read after the new ones as llama.cpp does.
        read_id(md, vocab, "prefix_token_id", &mut s.fim_pre)?;
        read_id(md, vocab, "suffix_token_id", &mut s.fim_suf)?;
        read_id(md, vocab, "middle_token_id", &mut s.fim_mid)
    }

    fn detect_by_text(&mut self, vocab: &mut Vocab) {
        let n = vocab.len() as u32;
        for id in 0..n {
            let slots: [(&mut Option<u32>, &[&str]); 8] = [
                (&mut self.eot, EOT_TEXTS),
                (&mut self.eom, EOM_TEXTS),
                (&mut self.fim_pre, FIM_PRE_TEXTS),
                (&mut self.fim_suf, FIM_SUF_TEXTS),
                (&mut self.fim_mid, FIM_MID_TEXTS),
                (&mut self.fim_pad, FIM_PAD_TEXTS),
                (&mut self.fim_rep, FIM_REP_TEXTS),
                (&mut self.fim_sep, FIM_SEP_TEXTS),
            ];
            for (slot, texts) in slots {
                if slot.is_none() && texts.contains(&vocab.text(id)) {
                    *slot = Some(id);
                    vocab.attr_mut(id).insert(TokenAttr::CONTROL);
                }
            }
        }
        for id in 0..n {
            let attr = vocab.attr(id);
            if attr.intersects(TokenAttr::CONTROL) && vocab.text(id).contains("unused") {
                vocab.attr_mut(id).insert(TokenAttr::UNUSED);
            }
        }
    }

    fn build_eog(&mut self, vocab: &mut Vocab) {
        self.eog.extend(
            [self.fim_pad, self.fim_rep, self.fim_sep]
                .into_iter()
                .flatten(),
        );
        for id in 0..vocab.len() as u32 {
            let text = vocab.text(id);
            let (eog, forced) = (
                EOG_TEXTS.contains(&text),
                FORCED_USER_DEFINED.contains(&text),
            );
            if eog {
                self.eog.insert(id);
                vocab.attr_mut(id).insert(TokenAttr::CONTROL);
            }
            if forced {
                *vocab.attr_mut(id) = TokenAttr::USER_DEFINED;
            }
        }
        self.eog
            .extend([self.eos, self.eot, self.eom].into_iter().flatten());

        let has = |text: &str| eog_id(&self.eog, vocab, text);
        // o200k_harmony and solar-open: `<|end|>` ends a message, not the generation.
        let call = has("<|call|>").or(has("<|calls|>")).is_some();
        let end = has("<|end|>")
            .filter(|_| call && (has("<|return|>").is_some() || has("<|flush|>").is_some()));
        // gemma4 and paddleocr: `</s>` is not an end of generation there.
        let slash_s = has("</s>").filter(|_| has("<|tool_response>").is_some());
        if let Some(end) = end {
            self.eog.remove(&end);
            *vocab.attr_mut(end) = TokenAttr::USER_DEFINED;
        }
        if let Some(s) = slash_s {
            self.eog.remove(&s);
            *vocab.attr_mut(s) = TokenAttr::NORMAL;
        }
    }
}

/// The id in `eog` whose text is `text`.
fn eog_id(eog: &BTreeSet<u32>, vocab: &Vocab, text: &str) -> Option<u32> {
    eog.iter().copied().find(|&id| vocab.text(id) == text)
}

/// Ids whose value changes what is encoded (BOS) or where generation stops (EOS, EOT, EOM):
/// outside the vocabulary in the file, they are an error at load rather than llama.cpp's
/// quiet fallback to the default id, which would be another token.
const STRICT_IDS: &[&str] = &[
    "bos_token_id",
    "eos_token_id",
    "eot_token_id",
    "eom_token_id",
];

/// Set `slot` from `tokenizer.ggml.<suffix>` if present and in range; a default outside the
/// vocabulary is disabled. An out-of-range id in the file is an error for [`STRICT_IDS`]
/// and keeps the default for the others (as llama.cpp).
fn read_id(md: &Metadata, vocab: &Vocab, suffix: &str, slot: &mut Option<u32>) -> Result<()> {
    if slot.is_some_and(|id| !vocab.contains(id)) {
        *slot = None;
    }
    let key = format!("tokenizer.ggml.{suffix}");
    let Some(id) = md.get_opt::<usize>(&key)? else {
        return Ok(());
    };
    match u32::try_from(id).ok().filter(|&id| vocab.contains(id)) {
        Some(id) => *slot = Some(id),
        None if STRICT_IDS.contains(&suffix) => {
            return Err(TokenizerError::InvalidVocab(format!(
                "{key} is {id}, outside the vocabulary of {} tokens",
                vocab.len()
            )));
        }
        None => {}
    }
    Ok(())
}
