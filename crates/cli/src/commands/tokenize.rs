//! `rullama tokenize MODEL TEXT`: the ids and pieces llama.cpp would produce for a text.

use std::io::{Read, Write};

use rullama_gguf::store;
use rullama_tokenizer::{EncodeOptions, Tokenizer};
use serde_json::json;

use super::CliError;

#[derive(clap::Args)]
pub struct Args {
    /// A GGUF path, an Ollama name (`gemma3:270m`) or a cached test model (`gemma3-270m`).
    model: String,
    /// The text to tokenize; read from standard input when left out.
    text: Option<String>,
    /// Treat special-token text such as `<start_of_turn>` as that token, as llama-server's
    /// `/tokenize` does with `parse_special`. Without it such text is tokenized as plain text.
    #[arg(long)]
    parse_special: bool,
    /// Do not add BOS/EOS, even where the model's metadata asks for them.
    #[arg(long)]
    no_special: bool,
    /// Print `{"ids": [...], "pieces": [...]}` (a piece that is not valid UTF-8 on its own is
    /// an array of its bytes, as llama-server prints it).
    #[arg(long)]
    json: bool,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let resolved = store::resolve(&args.model)?;
    let tokenizer = Tokenizer::open(&resolved.path)?;
    let text = match &args.text {
        Some(text) => text.clone(),
        None => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text)?;
            text
        }
    };
    let options = EncodeOptions {
        add_special: !args.no_special,
        parse_special: args.parse_special,
    };
    let ids = tokenizer.encode(&text, options);
    let pieces = ids
        .iter()
        .map(|&id| tokenizer.token_to_piece(id, true))
        .collect::<Result<Vec<_>, _>>()?;

    let mut out = std::io::stdout().lock();
    if args.json {
        let pieces: Vec<_> = pieces
            .into_iter()
            .map(|p| match String::from_utf8(p) {
                Ok(s) => json!(s),
                Err(e) => json!(e.into_bytes()),
            })
            .collect();
        serde_json::to_writer(&mut out, &json!({ "ids": ids, "pieces": pieces }))?;
        writeln!(out)?;
    } else {
        for (id, piece) in ids.iter().zip(&pieces) {
            writeln!(out, "{id:>8} {:?}", String::from_utf8_lossy(piece))?;
        }
    }
    Ok(())
}
