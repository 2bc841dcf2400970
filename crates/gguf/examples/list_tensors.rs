//! Lists a GGUF file's metadata count and its tensors: name, type, dimensions, bytes.
//!
//! ```sh
//! cargo run -p rullama-gguf --example list_tensors -- model.gguf
//! cargo run -p rullama-gguf --example list_tensors    # a tiny synthetic model, made in memory
//! ```

use rullama_gguf::{ByteSource, GgufFile};
use rullama_synth::{Tiny, tiny_model};

fn main() -> Result<(), rullama_gguf::GgufError> {
    match std::env::args().nth(1) {
        // A memory map: only the header is read, the tensors' bytes stay on disk.
        Some(path) => list(&GgufFile::open(path)?),
        None => list(&GgufFile::from_bytes(tiny_model(Tiny::Gemma3, 1))?),
    }
    Ok(())
}

/// Written over any byte source, so a mapped file and a buffer print alike.
fn list<S: ByteSource>(file: &GgufFile<S>) {
    let metadata = file.metadata();
    let architecture = metadata.architecture().unwrap_or("unknown");
    println!(
        "architecture {architecture}, {} metadata keys",
        metadata.len()
    );
    println!("{} tensors:", file.tensors().len());
    for info in file.tensors() {
        let (name, ggml_type, dims) = (&info.name, info.ggml_type.name(), &info.dims);
        println!(
            "  {name:<32} {ggml_type:<6} {dims:?} {} bytes",
            info.n_bytes
        );
    }
}
