//! What the GPU backend keeps from the file and across steps: weights (uploaded once, in
//! GGUF block layout) and the KV cache (one K and one V buffer per layer, `n_ctx` positions).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rullama_gguf::TensorView;
use rullama_kernels::ops::kv::{KvCache as LayerCache, KvDtype, KvLayout};
use rullama_kernels::{Gpu, GpuFormat, GpuTensor, GpuWeight, WeightShape};
use rullama_quant::{Format, FormatOps};

use super::gpu_err;
use super::memory::LiveBytes;
use crate::backend::KvCacheSpec;
use crate::error::{ModelError, Result};

/// A process-wide serial: identities of weights and caches in a step's signature.
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A weight on the GPU; cloning shares it (tied embeddings). Compared by identity.
#[derive(Debug, Clone)]
pub struct GpuWeightRef {
    pub(crate) id: u64,
    pub(crate) data: Arc<WeightData>,
}

#[derive(Debug)]
pub(crate) enum WeightData {
    /// A matrix in its file format, split into row chunks that each fit one binding.
    Matrix(GpuWeight),
    /// A 1-D tensor (norm gain, bias), dequantized to f32 at load.
    Vector(GpuTensor),
}

impl PartialEq for GpuWeightRef {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl GpuWeightRef {
    /// Uploads a tensor of the file: 1-D ones as f32, matrices as their blocks.
    pub(crate) fn load(gpu: &Gpu, view: TensorView<'_>) -> Result<GpuWeightRef> {
        let name = &view.info.name;
        let format = Format::Ggml(view.info.ggml_type);
        let dims = &view.info.dims;
        let data = if dims.iter().skip(1).all(|&d| d == 1) {
            let ops = FormatOps::of(format).map_err(|source| ModelError::Weight {
                name: name.clone(),
                source,
            })?;
            let mut v = vec![0.0; view.info.n_elements as usize];
            ops.dequantize(view.data, &mut v)
                .map_err(|source| ModelError::Weight {
                    name: name.clone(),
                    source,
                })?;
            WeightData::Vector(GpuTensor::from_f32(gpu, &[v.len()], &v))
        } else if dims.len() == 2 {
            let shape = WeightShape {
                format: GpuFormat::try_from(format).map_err(gpu_err(format!("tensor `{name}`")))?,
                n_in: dims[0] as usize,
                n_out: dims[1] as usize,
            };
            let w = GpuWeight::upload(gpu, shape, view.data)
                .map_err(gpu_err(format!("uploading tensor `{name}`")))?;
            WeightData::Matrix(w)
        } else {
            return Err(ModelError::Unsupported(format!(
                "tensor `{name}` with dims {dims:?} on the GPU backend"
            )));
        };
        Ok(GpuWeightRef {
            id: next_id(),
            data: Arc::new(data),
        })
    }

    /// Bytes of its device buffers.
    pub(crate) fn bytes(&self) -> u64 {
        match &*self.data {
            WeightData::Matrix(w) => w.bytes(),
            WeightData::Vector(v) => v.bytes(),
        }
    }

    pub(crate) fn matrix(&self) -> Option<&GpuWeight> {
        match &*self.data {
            WeightData::Matrix(w) => Some(w),
            WeightData::Vector(_) => None,
        }
    }

    pub(crate) fn vector(&self) -> Option<&GpuTensor> {
        match &*self.data {
            WeightData::Vector(v) => Some(v),
            WeightData::Matrix(_) => None,
        }
    }
}

/// Every layer's K and V on the GPU, `n_ctx` positions each.
#[derive(Debug)]
pub struct GpuKvCache {
    pub(crate) id: u64,
    pub(crate) layers: Vec<LayerCache>,
    /// Its bytes, counted in `live` while it exists.
    bytes: u64,
    live: LiveBytes,
}

impl Drop for GpuKvCache {
    fn drop(&mut self) {
        self.live.sub(self.bytes);
    }
}

impl GpuKvCache {
    pub(crate) fn new(
        gpu: &Gpu,
        spec: &KvCacheSpec,
        dtype: KvDtype,
        live: &LiveBytes,
    ) -> Result<GpuKvCache> {
        let layers: Vec<LayerCache> = spec
            .layers
            .iter()
            .map(|l| {
                if l.head_dim_k != l.head_dim_v {
                    return Err(ModelError::Unsupported(format!(
                        "GPU KV cache with key dim {} != value dim {}",
                        l.head_dim_k, l.head_dim_v
                    )));
                }
                let layout = KvLayout {
                    dtype,
                    n_kv_heads: l.n_head_kv,
                    head_dim: l.head_dim_k,
                    max_len: spec.n_ctx,
                };
                LayerCache::new(gpu, layout).map_err(gpu_err("allocating the KV cache"))
            })
            .collect::<Result<_>>()?;
        let bytes = layers.iter().map(|l| l.k.bytes() + l.v.bytes()).sum();
        live.add(bytes);
        Ok(GpuKvCache {
            id: next_id(),
            layers,
            bytes,
            live: live.clone(),
        })
    }

    /// Layer `layer`'s cache, tagged with this cache's identity (for step signatures).
    pub(crate) fn layer(&self, layer: usize) -> Option<LayerKv> {
        self.layers.get(layer).map(|kv| LayerKv {
            cache: self.id,
            layer,
            kv: kv.clone(),
        })
    }
}

/// One layer of one cache, compared by (cache, layer).
#[derive(Debug, Clone)]
pub(crate) struct LayerKv {
    pub cache: u64,
    pub layer: usize,
    pub kv: LayerCache,
}

impl PartialEq for LayerKv {
    fn eq(&self, other: &Self) -> bool {
        (self.cache, self.layer) == (other.cache, other.layer)
    }
}
