//! `rullama chat MODEL`: an interactive conversation. Each message renders the whole
//! conversation with the chat template (the typed text never becomes a control token) and
//! feeds only what the KV cache does not hold yet.
//!
//! The chat goes on through what would otherwise end it: a message too long for the context
//! is refused, a full context drops the oldest turns (`context.rs`), Ctrl-C stops a reply
//! (`interrupt.rs`); a closed stdout (`| head`) ends it quietly. Lines starting with `/` are
//! commands (`command.rs`); `"""` starts a message of several lines (`input.rs`).

mod command;
mod context;
mod input;
mod interrupt;

use std::io::Write;

use rullama_model::sampler::Sampler;
use rullama_model::{Backend, Model};
use rullama_tokenizer::{ChatTemplate, Tokenizer};

use super::CliError;
use super::generation::{self, GenerationArgs, ModelTask, Turn};
use command::{Command, Settings};
use context::{Conversation, Fit, Limits};
use input::{Input, Reader};

pub use interrupt::EXIT_STATUS as INTERRUPTED_STATUS;

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
    loaded.run(Chat { args })
}

/// The read-generate loop, on whichever executor was loaded.
struct Chat<'a> {
    args: &'a Args,
}

impl ModelTask for Chat<'_> {
    type Output = ();

    fn run<B: Backend>(self, model: &Model<B>, tokenizer: &Tokenizer) -> Result<(), CliError> {
        let args = self.args;
        let verbose = args.generation.verbose;
        let template = ChatTemplate::for_model(tokenizer)?;
        let mut settings = Settings {
            sampler: *args.generation.sampler().params(),
            n_predict: args.generation.n_predict,
        };
        let mut sampler = Sampler::new(settings.sampler);
        let mut session = generation::open_session(model, args.generation.ctx)?;
        let n_ctx = session.n_ctx();
        let mut conversation = Conversation::new(args.system.clone());
        // The tokens the KV cache holds, to find how much of each new prompt is already fed.
        let mut cached: Vec<u32> = Vec::new();
        let mut said_inexact = false;

        let mut reader = Reader::new();
        interrupt::install()?;
        eprintln!("Type a message; /? for help, /bye or Ctrl-D to end.");
        loop {
            let message = match reader.read()? {
                Input::End => return Ok(()),
                Input::Interrupted => return Err(CliError::Interrupted),
                Input::Block(text) => text,
                Input::Line(line) => match command::parse(&line) {
                    None => line,
                    Some(Err(why)) => {
                        eprintln!("{why}");
                        continue;
                    }
                    Some(Ok(Command::Bye)) => return Ok(()),
                    Some(Ok(Command::Help)) => {
                        eprintln!("{}", command::HELP);
                        continue;
                    }
                    Some(Ok(Command::Show)) => {
                        eprintln!("{}", settings.show());
                        continue;
                    }
                    Some(Ok(Command::Clear)) => {
                        conversation.clear();
                        eprintln!("Cleared the conversation.");
                        continue;
                    }
                    Some(Ok(Command::Set(setting))) => {
                        match settings.apply(setting, n_ctx) {
                            Ok(()) => sampler = Sampler::new(settings.sampler),
                            Err(why) => eprintln!("{why}"),
                        }
                        continue;
                    }
                },
            };
            let message = message.trim();
            if message.is_empty() {
                continue;
            }
            let limits = Limits::new(n_ctx, settings.n_predict);
            let ids = match conversation.fit(message, &template, tokenizer, limits)? {
                Fit::TooLong { tokens } => {
                    eprintln!(
                        "This message was not sent: even without the earlier turns it takes \
                         {tokens} tokens, and {} are kept for the reply, more than the context \
                         of {n_ctx} tokens (--ctx sets it).",
                        limits.reply_room
                    );
                    continue;
                }
                Fit::Fits {
                    ids,
                    dropped,
                    exact,
                } => {
                    if dropped > 0 {
                        conversation.drop_oldest(dropped);
                        eprintln!(
                            "note: the conversation outgrew the context of {n_ctx} tokens; \
                             the oldest {dropped} turn(s) were dropped (--ctx sets the context)"
                        );
                    }
                    if verbose && !exact && !said_inexact {
                        said_inexact = true;
                        eprintln!(
                            "note: the chat template changes message text in a way that cannot \
                             be followed; messages go into the prompt as typed"
                        );
                    }
                    ids
                }
            };
            // Rewind to what the cache holds in common with the new prompt (after dropped
            // turns: the system prompt), and feed at least one token for the reply's logits.
            let common = cached
                .iter()
                .zip(&ids)
                .take_while(|(a, b)| a == b)
                .count()
                .min(session.len())
                .min(ids.len().saturating_sub(1));
            let turn = Turn {
                prompt: &ids[common..],
                start_pos: common,
                n_predict: settings.n_predict,
            };
            let mut out = std::io::stdout().lock();
            let reply = interrupt::Reply::start();
            let stop = || reply.stop_asked();
            let result = generation::generate_until(
                &mut session,
                tokenizer,
                turn,
                &mut sampler,
                &mut out,
                &stop,
            );
            let stopped = reply.stop_asked();
            drop(reply);
            let (generated, stats) = result?;
            writeln!(out)?;
            if stopped {
                eprintln!("(reply stopped)");
            }
            if verbose {
                stats.print(None);
            }
            cached = ids;
            cached.extend(&generated);
            // The last token returned is not fed until the next step, which did not run.
            cached.truncate(session.len());
            conversation.push(message.to_string(), tokenizer.decode(&generated)?);
        }
    }
}
