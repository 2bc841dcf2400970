//! What the GPU executor keeps from the file and across steps: weights (uploaded once, in
//! GGUF block layout, shared by every sequence) and a sequence's KV cache (one K and one V
//! buffer per layer, `n_ctx` positions).
//!
//! Projections that read one input (q, k, v; gate, up) are stacked where their matrices
//! have one width and a format that holds all their weights exactly
//! ([`GpuWeightRef::stack_shape`]: their own, or Q8_0 for Q4_0 and Q5_0 rows beside Q8_0
//! ones, `rullama_quant::widen`): one matrix with their rows in turn, and their biases
//! likewise ([`GpuWeightRef::load_stack`]), so one product computes them all (`fuse.rs`);
//! each projection's handle names the shared matrix and its own rows. Only the stacked copy
//! is uploaded. Small Q4_0 and Q5_0 matrices and stacks go up as Q8_0 too ([`Widen`]).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rullama_gguf::TensorView;
use rullama_kernels::ops::attention_coop::KEY_BLOCK;
use rullama_kernels::ops::kv::{KvCache as LayerCache, KvDtype, KvLayout};
use rullama_kernels::{Gpu, GpuFormat, GpuTensor, GpuWeight, View, WeightRows, WeightShape};
use rullama_quant::widen as widening;
use rullama_quant::{Format, FormatOps};

use super::gpu_err;
use super::ir::KvSlot;
use super::memory::{Counted, LiveBytes};
use crate::backend::{KvCacheSpec, LinearView, LinearWeights};
use crate::context::{MemoryLimit, too_large};
use crate::error::{ModelError, Result};

/// A process-wide serial: identities of weights in a step's signature, of plans and of
/// sequences.
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A weight on the GPU; cloning shares it (tied embeddings). Compared by identity.
#[derive(Debug, Clone)]
pub struct GpuWeightRef {
    pub(crate) id: u64,
    pub(crate) data: Arc<WeightData>,
    /// The rows of `data` this weight is (elements, of a vector): all of them, or one
    /// projection's share of a stacked matrix (or of its stacked bias).
    pub(crate) rows: Range<usize>,
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

/// A 1-D tensor's values in f32.
fn dequantized(view: TensorView<'_>) -> Result<Vec<f32>> {
    let name = &view.info.name;
    let format = Format::Ggml(view.info.ggml_type);
    let err = |source| ModelError::Weight {
        name: name.clone(),
        source,
    };
    let ops = FormatOps::of(format).map_err(err)?;
    let mut v = vec![0.0; view.info.n_elements as usize];
    ops.dequantize(view.data, &mut v).map_err(err)?;
    Ok(v)
}

fn is_vector(view: TensorView<'_>) -> bool {
    view.info.dims.iter().skip(1).all(|&d| d == 1)
}

/// The shape of a 2-D tensor as a GPU weight, or `None` for other tensors.
fn matrix_shape(view: TensorView<'_>) -> Result<Option<WeightShape>> {
    let dims = &view.info.dims;
    if dims.len() != 2 || is_vector(view) {
        return Ok(None);
    }
    let format = Format::Ggml(view.info.ggml_type);
    let name = &view.info.name;
    Ok(Some(WeightShape {
        format: GpuFormat::try_from(format).map_err(gpu_err(format!("tensor `{name}`")))?,
        n_in: dims[0] as usize,
        n_out: dims[1] as usize,
    }))
}

impl GpuWeightRef {
    /// A handle on rows `rows` of `data`.
    fn part(data: &Arc<WeightData>, rows: Range<usize>) -> GpuWeightRef {
        GpuWeightRef {
            id: next_id(),
            data: Arc::clone(data),
            rows,
        }
    }

    /// Uploads a tensor of the file: 1-D ones as f32, matrices as their blocks (in the
    /// format [`Widen::upload_shape`] gives).
    pub(crate) fn load(gpu: &Gpu, view: TensorView<'_>, widen: Widen) -> Result<GpuWeightRef> {
        let name = &view.info.name;
        let (data, n) = if is_vector(view) {
            let v = dequantized(view)?;
            (
                WeightData::Vector(GpuTensor::from_f32(gpu, &[v.len()], &v)),
                v.len(),
            )
        } else if let Some(file_shape) = matrix_shape(view)? {
            let shape = widen.upload_shape(file_shape, view.data.len());
            let data = widened(file_shape, shape, view)?;
            let w = GpuWeight::upload(gpu, shape, &data)
                .map_err(gpu_err(format!("uploading tensor `{name}`")))?;
            (WeightData::Matrix(w), shape.n_out)
        } else {
            return Err(ModelError::Unsupported(format!(
                "tensor `{name}` with dims {:?} on the GPU backend",
                view.info.dims
            )));
        };
        Ok(GpuWeightRef::part(&Arc::new(data), 0..n))
    }

    /// The shape of one stacked upload of `views`: 2-D, one width, and a format that holds
    /// every weight of theirs exactly (one format; or, where `widen.stacks`,
    /// `rullama_quant::widen`'s common format: a Q4_K_M file's q and k in Q5_0 with a v in
    /// Q8_0 go up as Q8_0), their rows in turn; `None` where they have none.
    pub(crate) fn stack_shape(views: &[TensorView<'_>], widen: Widen) -> Option<WeightShape> {
        let mut shapes = views.iter().map(|&v| matrix_shape(v).ok().flatten());
        let mut stack = shapes.next()??;
        for s in shapes {
            let s = s?;
            let format = if widen.stacks {
                let common = widening::common_format(stack.format.format(), s.format.format())?;
                GpuFormat::try_from(common).ok()?
            } else {
                (stack.format == s.format).then_some(s.format)?
            };
            if s.n_in != stack.n_in {
                return None;
            }
            stack = WeightShape {
                format,
                n_in: s.n_in,
                n_out: stack.n_out + s.n_out,
            };
        }
        Some(stack)
    }

    /// Uploads the matrices of `linears` (which [`GpuWeightRef::stack_shape`] accepts) as one
    /// stacked matrix, their rows in turn (in the format [`Widen::upload_shape`] gives the
    /// stack), and their biases as one stacked vector when each has one (else each bias
    /// alone). Each handle names its own rows.
    pub(crate) fn load_stack(
        gpu: &Gpu,
        linears: &[LinearView<'_>],
        widen: Widen,
    ) -> Result<Vec<LinearWeights<GpuWeightRef>>> {
        let first = linears
            .first()
            .ok_or_else(|| ModelError::Backend("an empty stack of projections".into()))?;
        let name = &first.weight.info.name;
        let views: Vec<TensorView<'_>> = linears.iter().map(|l| l.weight).collect();
        let stack = GpuWeightRef::stack_shape(&views, widen).ok_or_else(|| {
            ModelError::Unsupported(format!(
                "stacking `{name}` with the next projections: no one format and width"
            ))
        })?;
        let file_bytes = views.iter().map(|v| v.data.len()).sum();
        let shape = widen.upload_shape(stack, file_bytes);
        let shapes = views
            .iter()
            .map(|&v| matrix_shape(v)?.ok_or_else(|| not_a_matrix(v)))
            .collect::<Result<Vec<_>>>()?;
        let mut bytes = Vec::new();
        for (&v, &s) in views.iter().zip(&shapes) {
            bytes.extend_from_slice(&widened(s, shape, v)?);
        }
        let n_out = shape.n_out;
        let w = GpuWeight::upload(gpu, shape, &bytes).map_err(gpu_err(format!(
            "uploading `{name}` stacked with the next projections"
        )))?;
        let matrix = Arc::new(WeightData::Matrix(w));
        let mut ranges = Vec::new();
        let mut at = 0;
        for s in &shapes {
            ranges.push(at..at + s.n_out);
            at += s.n_out;
        }
        let biases: Option<Vec<TensorView<'_>>> = linears.iter().map(|l| l.bias).collect();
        let biases: Vec<Option<GpuWeightRef>> = match biases {
            Some(views) => {
                let mut all = Vec::with_capacity(n_out);
                for v in views {
                    all.extend(dequantized(v)?);
                }
                if all.len() != n_out {
                    return Err(ModelError::Backend(format!(
                        "the biases of `{name}` and the next projections: {} values for {n_out} rows",
                        all.len()
                    )));
                }
                let t = Arc::new(WeightData::Vector(GpuTensor::from_f32(gpu, &[n_out], &all)));
                ranges
                    .iter()
                    .map(|r| Some(GpuWeightRef::part(&t, r.clone())))
                    .collect()
            }
            None => linears
                .iter()
                .map(|l| {
                    l.bias
                        .map(|b| GpuWeightRef::load(gpu, b, widen))
                        .transpose()
                })
                .collect::<Result<_>>()?,
        };
        Ok(ranges
            .into_iter()
            .zip(biases)
            .map(|(r, b)| (GpuWeightRef::part(&matrix, r), b))
            .collect())
    }

    /// Bytes of its device buffers (shared by every projection of a stack).
    pub(crate) fn bytes(&self) -> u64 {
        match &*self.data {
            WeightData::Matrix(w) => w.bytes(),
            WeightData::Vector(v) => v.bytes(),
        }
    }

    /// Whether `self` and `other` are rows of one stacked upload.
    pub(crate) fn shares(&self, other: &GpuWeightRef) -> bool {
        Arc::ptr_eq(&self.data, &other.data)
    }

    /// Whether this is all of its data (not one projection of a stack).
    pub(crate) fn is_whole(&self) -> bool {
        let n = match &*self.data {
            WeightData::Matrix(w) => w.shape.n_out,
            WeightData::Vector(v) => v.len(),
        };
        self.rows == (0..n)
    }

    /// The whole matrix it is (or is rows of).
    pub(crate) fn matrix(&self) -> Option<&GpuWeight> {
        match &*self.data {
            WeightData::Matrix(w) => Some(w),
            WeightData::Vector(_) => None,
        }
    }

    /// Its rows of its matrix.
    pub(crate) fn matrix_rows(&self) -> Option<WeightRows<'_>> {
        self.matrix().map(|w| w.rows(self.rows.clone()))
    }

    /// Bytes of its rows in its GPU format (a stacked projection's share; a widened one's
    /// in the stack's format).
    pub(crate) fn matrix_bytes(&self) -> Option<u64> {
        self.matrix()
            .map(|w| (w.shape.format.row_bytes(w.shape.n_in) * self.rows.len()) as u64)
    }

    /// The whole vector it is (or is a range of).
    pub(crate) fn vector(&self) -> Option<&GpuTensor> {
        match &*self.data {
            WeightData::Vector(v) => Some(v),
            WeightData::Matrix(_) => None,
        }
    }

    /// Its values: a view of its vector at its first element.
    pub(crate) fn vector_view(&self) -> Option<View<'_>> {
        self.vector().map(|v| View::at(v, self.rows.start))
    }

    /// Rows (of a matrix) or values (of a vector) it has.
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }
}

/// Which matrices go up in a wider format than the file's, every weight kept exactly
/// (`rullama_quant::widen`: Q4_0 and Q5_0 blocks as Q8_0 ones of the same scale and values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Widen {
    /// Stacks of projections of different formats (`GpuOptions::widen_stacks`).
    pub stacks: bool,
    /// Q4_0 and Q5_0 matrices (or stacks) of at most this many file bytes
    /// (`GpuOptions::widen_below`).
    pub below: usize,
}

impl Widen {
    /// The shape a matrix (or stack) of `shape`, `file_bytes` bytes in the file, goes up in:
    /// Q8_0 where it widens there and is small enough, else `shape`.
    pub(crate) fn upload_shape(self, shape: WeightShape, file_bytes: usize) -> WeightShape {
        let q8_0 = GpuFormat::Q8_0;
        if file_bytes <= self.below && widening::widens_into(shape.format.format(), q8_0.format()) {
            WeightShape {
                format: q8_0,
                ..shape
            }
        } else {
            shape
        }
    }
}

/// `view`'s blocks (a matrix of `file` shape) in `upload`'s format: borrowed where it is the
/// file's.
fn widened<'a>(
    file: WeightShape,
    upload: WeightShape,
    view: TensorView<'a>,
) -> Result<Cow<'a, [u8]>> {
    if file.format == upload.format {
        return Ok(Cow::Borrowed(view.data));
    }
    widening::widen(file.format.format(), upload.format.format(), view.data)
        .map(Cow::Owned)
        .map_err(|source| ModelError::Weight {
            name: view.info.name.clone(),
            source,
        })
}

fn not_a_matrix(view: TensorView<'_>) -> ModelError {
    ModelError::Unsupported(format!(
        "stacking `{}` with dims {:?}: not a matrix",
        view.info.name, view.info.dims
    ))
}

/// Every layer's K and V on the GPU, `n_ctx` positions each: one sequence's cache.
#[derive(Debug)]
pub struct GpuKvCache {
    pub(crate) layers: Vec<LayerCache>,
    /// Its bytes, counted while it exists.
    _bytes: Counted,
}

impl GpuKvCache {
    pub(crate) fn new(
        gpu: &Gpu,
        spec: &KvCacheSpec,
        dtype: KvDtype,
        live: &LiveBytes,
    ) -> Result<GpuKvCache> {
        let max_len = kv_len_that_fits(gpu.max_binding_bytes(), spec, dtype)?;
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
                // Room for whole blocks of keys (the tensor-core prompt attention loads 16 at
                // a time); the positions past n_ctx are never written nor attended to.
                let layout = KvLayout {
                    dtype,
                    n_kv_heads: l.n_head_kv,
                    head_dim: l.head_dim_k,
                    max_len,
                };
                LayerCache::new(gpu, layout).map_err(gpu_err("allocating the KV cache"))
            })
            .collect::<Result<_>>()?;
        let bytes = layers.iter().map(|l| l.k.bytes() + l.v.bytes()).sum();
        Ok(GpuKvCache {
            layers,
            _bytes: Counted::new(live, bytes),
        })
    }

    /// Layer `layer`'s slot as a step's key names it.
    pub(crate) fn slot(&self, layer: usize) -> Option<KvSlot> {
        self.layers.get(layer).map(|kv| KvSlot {
            layer,
            layout: kv.layout,
        })
    }
}

/// The positions every layer's K and V buffers hold for `spec` (its context rounded up to
/// whole blocks of keys: the tensor-core prompt attention loads 16 at a time; the positions
/// past `n_ctx` are never written nor attended to), if one layer's K (or V) fits a buffer
/// binding of `limit` bytes; else [`ModelError::ContextTooLarge`] with the positions that
/// would fit. Checked arithmetic throughout: a huge context must not wrap to a small cache.
fn kv_len_that_fits(limit: u64, spec: &KvCacheSpec, dtype: KvDtype) -> Result<usize> {
    let elem: u64 = match dtype {
        KvDtype::F32 => 4,
        KvDtype::F16 => 2,
    };
    // The widest layer's K or V: bytes one position takes in one buffer.
    let per_position = spec.layers.iter().try_fold(0u64, |widest, l| {
        let width = l.n_head_kv.checked_mul(l.head_dim_k.max(l.head_dim_v))?;
        Some(widest.max(u64::try_from(width).ok()?.checked_mul(elem)?))
    });
    let max_len = spec.n_ctx.checked_next_multiple_of(KEY_BLOCK);
    let buffer = per_position
        .zip(max_len.and_then(|n| u64::try_from(n).ok()))
        .and_then(|(p, n)| p.checked_mul(n));
    match (max_len, buffer) {
        (Some(max_len), Some(bytes)) if bytes <= limit => Ok(max_len),
        _ => Err(too_large(
            spec,
            spec.bytes(elem),
            MemoryLimit::DeviceBinding(limit),
            per_position.map(|p| (p, limit, KEY_BLOCK)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::KvLayerSpec;

    /// A context whose rounding up would wrap (`usize::MAX`), or whose layer buffer passes
    /// the binding, is an error saying what fits; one that fits rounds up to whole blocks.
    #[test]
    fn kv_cache_length_is_checked_against_the_binding() {
        let spec = |n_ctx| KvCacheSpec {
            n_ctx,
            layers: vec![
                KvLayerSpec {
                    n_head_kv: 1,
                    head_dim_k: 256,
                    head_dim_v: 256,
                };
                18
            ],
        };
        // lavapipe's binding: 128 MiB; a layer's K at f16 takes 512 bytes a position.
        let limit = 128 << 20;
        assert_eq!(
            kv_len_that_fits(limit, &spec(100), KvDtype::F16).unwrap(),
            112
        );
        assert_eq!(
            kv_len_that_fits(limit, &spec(262_144), KvDtype::F16).unwrap(),
            262_144
        );
        for n_ctx in [262_145, 1 << 60, usize::MAX] {
            match kv_len_that_fits(limit, &spec(n_ctx), KvDtype::F16) {
                Err(ModelError::ContextTooLarge { n_ctx: n, fits, .. }) => {
                    assert_eq!((n, fits), (n_ctx, Some(262_144)));
                }
                other => panic!("--ctx {n_ctx}: {other:?}"),
            }
        }
    }

    #[test]
    fn small_q4_0_and_q5_0_matrices_go_up_as_q8_0() {
        let widen = Widen {
            stacks: true,
            below: 1000,
        };
        let shape = |format| WeightShape {
            format,
            n_in: 64,
            n_out: 8,
        };
        for f in [GpuFormat::Q4_0, GpuFormat::Q5_0] {
            assert_eq!(widen.upload_shape(shape(f), 1000), shape(GpuFormat::Q8_0));
            assert_eq!(widen.upload_shape(shape(f), 1001), shape(f));
        }
        for f in [
            GpuFormat::Q4_1,
            GpuFormat::Q4K,
            GpuFormat::Q8_0,
            GpuFormat::F16,
        ] {
            assert_eq!(widen.upload_shape(shape(f), 10), shape(f));
        }
    }
}
