//! Loads a model and streams a completion of a prompt to stdout.
//!
//! ```sh
//! cargo run --release -p rullama-model --example generate -- model.gguf "The capital of France is"
//! cargo run --release -p rullama-model --example generate -- --gpu model.gguf "Once upon a time"
//! cargo run -p rullama-model --example generate    # a tiny synthetic model (random weights: noise)
//! ```
//!
//! The CPU reference executor runs everywhere; `--gpu` runs the GPU executor on the adapter
//! `RULLAMA_ADAPTER` names, or the best one.

use std::error::Error;
use std::io::Write;

use rullama_gguf::{ByteSource, GgufFile};
use rullama_model::sampler::{Sampler, SamplerParams};
use rullama_model::{Backend, CpuBackend, Generator, GpuBackend, Model};
use rullama_synth::{Tiny, tiny_model};
use rullama_tokenizer::{EncodeOptions, StreamDecoder, Tokenizer};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let gpu = args.iter().any(|a| a == "--gpu");
    let mut positional = args.iter().filter(|a| *a != "--gpu").map(String::as_str);
    let path = positional.next();
    let prompt = positional.next().unwrap_or("The capital of France is");
    match path {
        // Read in ranges: a file cut while it loads is an error naming the tensor.
        Some(path) => load_and_generate(&GgufFile::open_ranged(path)?, prompt, gpu),
        None => load_and_generate(
            &GgufFile::from_bytes(tiny_model(Tiny::Gemma3, 7))?,
            prompt,
            gpu,
        ),
    }
}

/// The tokenizer and the weights come from the same file, whatever holds its bytes.
fn load_and_generate<S: ByteSource>(
    file: &GgufFile<S>,
    prompt: &str,
    gpu: bool,
) -> Result<(), Box<dyn Error>> {
    let tokenizer = Tokenizer::from_gguf(file.metadata())?;
    if gpu {
        generate(&Model::load(file, GpuBackend::open()?)?, &tokenizer, prompt)
    } else {
        generate(&Model::load(file, CpuBackend::new())?, &tokenizer, prompt)
    }
}

/// The work itself, the same on every executor.
fn generate<B: Backend>(
    model: &Model<B>,
    tokenizer: &Tokenizer,
    prompt: &str,
) -> Result<(), Box<dyn Error>> {
    let options = EncodeOptions {
        add_special: true,
        parse_special: false,
    };
    let prompt_ids = tokenizer.encode(prompt, options);
    let mut session = model.session(512)?;
    let mut sampler = Sampler::new(SamplerParams {
        seed: 42,
        ..SamplerParams::default()
    });
    let mut tokens = Generator::start(&mut session, &prompt_ids, 0, 64, &mut sampler)?;
    // Text comes out only once it is whole UTF-8 (a character may span several tokens).
    let mut text = StreamDecoder::new(tokenizer, false);
    let mut out = std::io::stdout().lock();
    write!(out, "{prompt}")?;
    while let Some(id) = tokens.next(&mut sampler)? {
        if tokenizer.is_eog(id) {
            break;
        }
        write!(out, "{}", text.push(id)?)?;
        out.flush()?;
    }
    tokens.finish();
    writeln!(out, "{}", text.finish())?;
    Ok(())
}
