//! The CPU reference backend: every op executed at once, in f32 storage with f64
//! accumulation (dot products, norms, softmax), so it sits as close to exact arithmetic as
//! the f32 activations allow. It is the oracle the GPU backend is checked against.
//!
//! By default weights stay quantized, as the file has them (one copy of the bytes, load is a
//! memcpy); `matmul` dequantizes each weight row once per call (bit-exact, via
//! `rullama_quant`) into a scratch row and dots it with every token's input. A prefill block
//! thus decodes each row once; a decode step pays the decode cost per token.
//! [`WeightStorage::Dense`] dequantizes everything at load instead: ~3x faster decode for 4
//! bytes per weight (2 GB for qwen2.5-0.5b). The results are identical.

mod attention;
mod elementwise;
pub mod host_memory;
mod matmul;
mod norm;
mod rope;
mod tensor;

use std::ops::Range;

use rullama_gguf::TensorView;

use crate::backend::{
    AttentionInputs, AttentionParams, Backend, KvCacheSpec, RmsNormParams, RopeParams, Sequence,
};
use crate::config::Activation;
use crate::error::Result;

use attention::CpuKvCache;
pub use tensor::{CpuTensor, CpuWeight, WeightStorage};

/// The f32 reference executor.
#[derive(Debug, Clone)]
pub struct CpuBackend {
    threads: usize,
    storage: WeightStorage,
}

/// The workers a host executor uses unless told: `RULLAMA_THREADS`, else one per available
/// core.
pub fn default_threads() -> usize {
    std::env::var("RULLAMA_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

impl Default for CpuBackend {
    fn default() -> Self {
        CpuBackend::new()
    }
}

impl CpuBackend {
    /// One worker per available core (`RULLAMA_THREADS` overrides: [`default_threads`]).
    pub fn new() -> CpuBackend {
        CpuBackend::with_threads(default_threads())
    }

    /// `threads` workers (at least one) for the matrix products.
    pub fn with_threads(threads: usize) -> CpuBackend {
        CpuBackend {
            threads: threads.max(1),
            storage: WeightStorage::default(),
        }
    }

    /// How matrices loaded from now on are kept.
    pub fn with_storage(mut self, storage: WeightStorage) -> CpuBackend {
        self.storage = storage;
        self
    }
}

impl Backend for CpuBackend {
    type Weight = CpuWeight;
    type Sequence = CpuSequence;

    fn load_weight(&mut self, view: TensorView<'_>) -> Result<CpuWeight> {
        CpuWeight::from_view(view, self.storage)
    }

    fn new_sequence(&self, spec: &KvCacheSpec) -> Result<CpuSequence> {
        Ok(CpuSequence {
            threads: self.threads,
            cache: CpuKvCache::new(spec)?,
        })
    }
}

/// A sequence on the CPU reference: its KV cache; every op runs when called.
#[derive(Debug, Clone)]
pub struct CpuSequence {
    threads: usize,
    cache: CpuKvCache,
}

impl Sequence for CpuSequence {
    type Weight = CpuWeight;
    type Tensor = CpuTensor;
    type Ids = Vec<u32>;

    fn ids(&mut self, ids: &[u32]) -> Vec<u32> {
        ids.to_vec()
    }

    fn embed(&mut self, table: &CpuWeight, ids: &Vec<u32>) -> CpuTensor {
        matmul::embed(table, ids)
    }

    fn matmul(&mut self, w: &CpuWeight, x: &CpuTensor) -> CpuTensor {
        matmul::matmul(w, x, self.threads)
    }

    fn add_bias(&mut self, x: &CpuTensor, bias: &CpuWeight) -> CpuTensor {
        elementwise::add_bias(x, bias)
    }

    fn rms_norm(&mut self, x: &CpuTensor, p: &RmsNormParams<'_, CpuWeight>) -> CpuTensor {
        norm::rms_norm(x, p)
    }

    fn rope(&mut self, x: &CpuTensor, positions: &Vec<u32>, p: &RopeParams) -> CpuTensor {
        rope::rope(x, positions, p)
    }

    fn attention(
        &mut self,
        x: AttentionInputs<'_, CpuTensor, Vec<u32>>,
        p: &AttentionParams,
    ) -> CpuTensor {
        attention::attention(&mut self.cache, x, p)
    }

    fn glu(&mut self, gate: &CpuTensor, up: &CpuTensor, act: Activation) -> CpuTensor {
        elementwise::glu(gate, up, act)
    }

    fn add(&mut self, a: &CpuTensor, b: &CpuTensor) -> CpuTensor {
        elementwise::add(a, b)
    }

    fn scale(&mut self, x: &CpuTensor, s: f32) -> CpuTensor {
        elementwise::map(x, |v| v * s as f64)
    }

    fn softcap(&mut self, x: &CpuTensor, cap: f32) -> CpuTensor {
        let cap = cap as f64;
        elementwise::map(x, |v| cap * (v / cap).tanh())
    }

    fn rows(&mut self, x: &CpuTensor, range: Range<usize>) -> CpuTensor {
        x.rows_range(range)
    }

    fn read(&mut self, x: &CpuTensor) -> Result<Vec<f32>> {
        Ok(x.data.clone())
    }

    /// Every op has run already: nothing is left to do.
    fn run(&mut self, _x: &CpuTensor) -> Result<()> {
        Ok(())
    }
}
