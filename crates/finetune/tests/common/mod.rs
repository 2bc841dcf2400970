//! What the trainer-level tests share: a toy dataset of nine short sequences and the batches
//! they are drawn in.

use std::path::Path;

use rullama_finetune::data::{BatchConfig, Dataset, Layout, Sequence};

/// Nine sequences of 5 to 8 tokens, every token trained on, with a 16-token context.
pub fn toy_data() -> Dataset {
    let seqs = (0..9u32)
        .map(|s| {
            let tokens: Vec<u32> = (0..5 + s % 4).map(|i| 20 + (3 * s + i) % 30).collect();
            let n = tokens.len();
            Sequence::new(tokens, vec![true; n]).unwrap()
        })
        .collect();
    Dataset::from_sequences(Path::new("toy.jsonl"), seqs, 16).unwrap()
}

/// Batches of two packed 16-token rows, shuffled with seed 4.
pub fn toy_batch_config() -> BatchConfig {
    BatchConfig {
        batch: 2,
        ctx: 16,
        layout: Layout::Packed,
        pad: 0,
        shuffle: true,
        seed: 4,
    }
}
