//! `rullama run MODEL [PROMPT]`: generate a continuation (or, with `--chat`, a reply) and
//! stream it to stdout. Only the generated text goes to stdout; statistics go to stderr.

use std::io::{Read, Write};

use rullama_tokenizer::{ChatMessage, ChatTemplate, EncodeOptions};

use super::CliError;
use rullama_model::{Backend, Model};
use rullama_tokenizer::Tokenizer;

use super::generation::{self, GenerationArgs, ModelTask, Stats, Turn};

#[derive(clap::Args)]
pub struct Args {
    /// A GGUF path, an Ollama name (`gemma3:270m`) or a cached test model (`gemma3-270m`).
    model: String,
    /// The prompt; read from standard input when left out.
    prompt: Option<String>,
    /// Wrap the prompt as a user turn with the model's chat template and generate the reply.
    #[arg(long)]
    chat: bool,
    #[command(flatten)]
    generation: GenerationArgs,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    // Before stdin is read or anything loads.
    args.generation.validate()?;
    let text = match &args.prompt {
        Some(p) => p.clone(),
        None => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text)?;
            text
        }
    };
    let mut loaded = generation::load(&args.model, &args.generation)?;
    let tokenizer = &loaded.tokenizer;
    let prompt = if args.chat {
        // The template's markers are control tokens; the typed text never is.
        let template = ChatTemplate::for_model(tokenizer)?;
        let rendered = template.render_segments(&[ChatMessage::new("user", text)], true)?;
        tokenizer.encode_chat(&rendered)
    } else {
        tokenizer.encode(
            &text,
            EncodeOptions {
                add_special: true,
                parse_special: false,
            },
        )
    };
    if prompt.is_empty() {
        return Err(CliError::Usage(
            "the prompt is empty: give a prompt argument or text on stdin".into(),
        ));
    }
    let stats = loaded.run(Generate {
        prompt,
        args: &args.generation,
    })?;
    if args.generation.verbose {
        stats.print(Some((&loaded.executor, loaded.load_time)));
    }
    Ok(())
}

/// One generation from a fresh cache, on whichever executor was loaded.
struct Generate<'a> {
    prompt: Vec<u32>,
    args: &'a GenerationArgs,
}

impl ModelTask for Generate<'_> {
    type Output = Stats;

    fn run<B: Backend>(self, model: &Model<B>, tokenizer: &Tokenizer) -> Result<Stats, CliError> {
        let mut sampler = self.args.sampler();
        let mut session = generation::open_session(model, self.args.ctx)?;
        let mut out = std::io::stdout().lock();
        let turn = Turn {
            prompt: &self.prompt,
            start_pos: 0,
            n_predict: self.args.n_predict,
        };
        let (_, stats) =
            generation::generate(&mut session, tokenizer, turn, &mut sampler, &mut out)?;
        writeln!(out)?;
        stats.note_context_full(session.n_ctx());
        Ok(stats)
    }
}
