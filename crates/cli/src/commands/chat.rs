//! `rullama chat MODEL`: an interactive conversation. Each turn renders the whole
//! conversation with the chat template and feeds only what the KV cache does not hold yet.

use std::io::{BufRead, Write};

use rullama_model::{Backend, Model};
use rullama_tokenizer::{ChatMessage, ChatTemplate, Tokenizer};

use super::CliError;
use super::generation::{self, GenerationArgs, ModelTask, Turn};
use super::run::encode_rendered;

#[derive(clap::Args)]
pub struct Args {
    /// A GGUF path, an Ollama name (`gemma3:270m`) or a cached test model (`gemma3-270m`).
    model: String,
    /// A system prompt for the whole conversation.
    #[arg(long)]
    system: Option<String>,
    #[command(flatten)]
    generation: GenerationArgs,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let mut loaded = generation::load(&args.model, &args.generation)?;
    if args.generation.verbose {
        eprintln!(
            "executor: {}, loaded in {:.2?}",
            loaded.executor, loaded.load_time
        );
    }
    loaded.run(Conversation { args })
}

/// The read-generate loop, on whichever executor was loaded.
struct Conversation<'a> {
    args: &'a Args,
}

impl ModelTask for Conversation<'_> {
    type Output = ();

    fn run<B: Backend>(self, model: &Model<B>, tokenizer: &Tokenizer) -> Result<(), CliError> {
        let args = self.args;
        let template = ChatTemplate::for_model(tokenizer)?;
        let mut sampler = args.generation.sampler();
        let mut session = generation::open_session(model, args.generation.ctx)?;
        let mut messages: Vec<ChatMessage> = args
            .system
            .iter()
            .map(|s| ChatMessage::new("system", s.clone()))
            .collect();
        // The tokens the KV cache holds, to find how much of each new rendering is already fed.
        let mut fed: Vec<u32> = Vec::new();

        eprintln!("Type a message; /bye or Ctrl-D ends the chat.");
        let mut lines = std::io::stdin().lock().lines();
        loop {
            eprint!(">>> ");
            let Some(line) = lines.next().transpose()? else {
                break;
            };
            let line = line.trim();
            if line == "/bye" {
                break;
            }
            if line.is_empty() {
                continue;
            }
            messages.push(ChatMessage::new("user", line));
            let ids = encode_rendered(tokenizer, &template.render(&messages, true)?);
            let common = fed.iter().zip(&ids).take_while(|(a, b)| a == b).count();
            let turn = Turn {
                prompt: &ids[common..],
                start_pos: common,
                n_predict: args.generation.n_predict,
            };
            let mut out = std::io::stdout().lock();
            let (reply, stats) =
                generation::generate(&mut session, tokenizer, turn, &mut sampler, &mut out)?;
            writeln!(out)?;
            if args.generation.verbose {
                stats.print(None);
            }
            fed = ids;
            fed.extend(&reply);
            messages.push(ChatMessage::new("assistant", tokenizer.decode(&reply)?));
        }
        Ok(())
    }
}
