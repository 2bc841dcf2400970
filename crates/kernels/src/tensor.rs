//! GPU tensors: activations ([`GpuTensor`]) and quantized weights split into row chunks
//! ([`GpuWeight`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wgpu::util::DeviceExt;

use crate::device::Gpu;
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::layout;

/// Identity of a buffer, for caching bind groups by the buffers they bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(u64);

impl BufferId {
    fn next() -> BufferId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        BufferId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// A buffer with its identity; cheap to clone.
#[derive(Debug, Clone)]
pub struct GpuBuffer {
    pub(crate) buffer: Arc<wgpu::Buffer>,
    pub(crate) id: BufferId,
}

impl GpuBuffer {
    fn new(buffer: wgpu::Buffer) -> GpuBuffer {
        GpuBuffer {
            buffer: Arc::new(buffer),
            id: BufferId::next(),
        }
    }

    /// The wgpu buffer, for copies and bindings of one's own.
    pub fn raw(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Its identity: what a built step's bindings are keyed by.
    pub fn id(&self) -> BufferId {
        self.id
    }

    /// Bytes allocated on the device (padding included), for memory reports.
    pub fn bytes(&self) -> u64 {
        self.buffer.size()
    }
}

/// Element type of an activation tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// Activations.
    F32,
    /// Token ids and indices.
    U32,
}

const STORAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// Bytes of the buffer for `n` 4-byte elements: padded to 16 so kernels may read it as
/// `array<vec4<f32>>` (a WGSL array's length is the buffer's size over the element size).
fn padded_bytes(n: usize) -> u64 {
    (n.max(1) * 4).next_multiple_of(16) as u64
}

/// A dense activation tensor (row-major, last dimension fastest).
#[derive(Debug, Clone)]
pub struct GpuTensor {
    /// Its buffer (shared by clones).
    pub buf: GpuBuffer,
    /// Its dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Its element type.
    pub dtype: Dtype,
}

impl GpuTensor {
    /// A zero-filled tensor.
    pub fn zeros(gpu: &Gpu, shape: &[usize], dtype: Dtype) -> GpuTensor {
        let n: usize = shape.iter().product();
        let buffer = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: padded_bytes(n),
            usage: STORAGE,
            mapped_at_creation: false,
        });
        GpuTensor {
            buf: GpuBuffer::new(buffer),
            shape: shape.to_vec(),
            dtype,
        }
    }

    fn from_bytes(gpu: &Gpu, shape: &[usize], dtype: Dtype, bytes: &[u8]) -> GpuTensor {
        let n: usize = shape.iter().product();
        assert_eq!(
            bytes.len(),
            n * 4,
            "data length does not match shape {shape:?}"
        );
        let mut padded = bytes.to_vec();
        padded.resize(padded_bytes(n) as usize, 0);
        let buffer = gpu
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: &padded,
                usage: STORAGE,
            });
        GpuTensor {
            buf: GpuBuffer::new(buffer),
            shape: shape.to_vec(),
            dtype,
        }
    }

    /// A tensor holding `data` (as many values as `shape` has elements).
    pub fn from_f32(gpu: &Gpu, shape: &[usize], data: &[f32]) -> GpuTensor {
        Self::from_bytes(gpu, shape, Dtype::F32, bytemuck::cast_slice(data))
    }

    /// A `u32` tensor holding `data` (as many values as `shape` has elements).
    pub fn from_u32(gpu: &Gpu, shape: &[usize], data: &[u32]) -> GpuTensor {
        Self::from_bytes(gpu, shape, Dtype::U32, bytemuck::cast_slice(data))
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Bytes of its buffer (padded to 16), for memory reports.
    pub fn bytes(&self) -> u64 {
        self.buf.bytes()
    }

    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queues a write of `data` at element `offset` (inputs between steps; not a step op).
    pub fn write<T: bytemuck::Pod>(&self, gpu: &Gpu, offset: usize, data: &[T]) {
        gpu.queue.write_buffer(
            &self.buf.buffer,
            (offset * 4) as u64,
            bytemuck::cast_slice(data),
        );
    }
}

/// Shape and format of a weight matrix as GGUF stores it: `n_out` rows of `n_in` weights
/// (GGUF `ne0 = n_in`, `ne1 = n_out`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightShape {
    /// How its blocks are encoded.
    pub format: GpuFormat,
    /// Weights per row: the input size.
    pub n_in: usize,
    /// Rows: the output size.
    pub n_out: usize,
}

/// Rows `[first_row, first_row + n_rows)` of a weight, in one buffer.
#[derive(Debug, Clone)]
pub struct WeightChunk {
    /// The rows' blocks, in the GPU layout.
    pub buf: GpuBuffer,
    /// The weight's row its first row is.
    pub first_row: usize,
    /// Rows it holds.
    pub n_rows: usize,
}

/// A weight matrix in its GPU layout (GGUF's blocks, or split by field: [`crate::layout`]), split by whole rows into buffers that each fit one
/// storage binding (lavapipe: 128 MiB; gemma-3-270m's 178 MB embedding needs two chunks).
/// Kernels that read a weight issue one dispatch per chunk.
#[derive(Debug, Clone)]
pub struct GpuWeight {
    /// Its format and dimensions.
    pub shape: WeightShape,
    /// Its buffers, in row order.
    pub chunks: Vec<WeightChunk>,
}

impl GpuWeight {
    /// A weight of `shape` held whole in `buf` from its start, in its GPU layout: one chunk of
    /// every row (an f16 copy made into a scratch, an f32 matrix whose layout is its values).
    pub fn in_buffer(shape: WeightShape, buf: GpuBuffer) -> GpuWeight {
        GpuWeight {
            shape,
            chunks: vec![WeightChunk {
                buf,
                first_row: 0,
                n_rows: shape.n_out,
            }],
        }
    }

    /// Bytes of its chunks on the device (the GPU layout's padding included).
    pub fn bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.buf.bytes()).sum()
    }

    /// Uploads `bytes` (the tensor's data as stored in GGUF) in its GPU layout, split into as
    /// few chunks as the device's binding limit allows.
    pub fn upload(gpu: &Gpu, shape: WeightShape, bytes: &[u8]) -> Result<GpuWeight, GpuError> {
        let rows = Self::rows_per_chunk(shape, gpu.max_binding_bytes())?;
        Self::upload_chunked(gpu, shape, bytes, rows)
    }

    /// The most rows of `shape` whose GPU bytes fit in `limit` bytes.
    pub fn rows_per_chunk(shape: WeightShape, limit: u64) -> Result<usize, GpuError> {
        let row_bytes = shape.format.row_bytes(shape.n_in).max(1);
        let overhead = layout::planar_overhead(shape.format) + 16;
        let rows = (limit.saturating_sub(overhead as u64) as usize) / row_bytes;
        if rows == 0 {
            return Err(GpuError::TooLarge {
                what: "one weight row",
                bytes: row_bytes as u64,
                limit,
            });
        }
        Ok(rows.min(shape.n_out.max(1)))
    }

    /// As [`GpuWeight::upload`], with chunks of `rows_per_chunk` rows (tests force splits).
    pub fn upload_chunked(
        gpu: &Gpu,
        shape: WeightShape,
        bytes: &[u8],
        rows_per_chunk: usize,
    ) -> Result<GpuWeight, GpuError> {
        let bs = shape.format.block_weights();
        if !shape.n_in.is_multiple_of(bs) {
            return Err(GpuError::Shape {
                op: "upload weight",
                detail: format!(
                    "n_in {} is not a multiple of the block size {bs}",
                    shape.n_in
                ),
            });
        }
        let row_bytes = shape.format.row_bytes(shape.n_in);
        if bytes.len() != row_bytes * shape.n_out {
            return Err(GpuError::Shape {
                op: "upload weight",
                detail: format!(
                    "{} bytes for {} rows of {row_bytes} bytes",
                    bytes.len(),
                    shape.n_out
                ),
            });
        }
        let rows_per_chunk = rows_per_chunk.max(1);
        let mut chunks = Vec::new();
        for first_row in (0..shape.n_out).step_by(rows_per_chunk) {
            let n_rows = rows_per_chunk.min(shape.n_out - first_row);
            let data = &bytes[first_row * row_bytes..(first_row + n_rows) * row_bytes];
            let mut contents = layout::gpu_bytes(shape.format, data);
            if !contents.len().is_multiple_of(4) {
                // write_buffer takes whole words.
                let len = contents.len().next_multiple_of(4);
                contents.to_mut().resize(len, 0);
            }
            // Created empty and then written: a buffer created mapped (`create_buffer_init`)
            // that failed to allocate panics when mapped, before its error can be caught.
            let buffer = gpu.allocate("a weight", contents.len() as u64, || {
                gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: contents.len() as u64,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })?;
            gpu.queue.write_buffer(&buffer, 0, &contents);
            chunks.push(WeightChunk {
                buf: GpuBuffer::new(buffer),
                first_row,
                n_rows,
            });
        }
        Ok(GpuWeight { shape, chunks })
    }
}

/// Rows `first..first + n` of a weight: all of them ([`GpuWeight::all_rows`]), or one
/// projection's range of a stacked weight (q, k and v uploaded as one matrix).
#[derive(Debug, Clone, Copy)]
pub struct WeightRows<'a> {
    /// The weight.
    pub w: &'a GpuWeight,
    /// The first row.
    pub first: usize,
    /// Rows.
    pub n: usize,
}

impl GpuWeight {
    /// Rows `range` of this weight.
    pub fn rows(&self, range: std::ops::Range<usize>) -> WeightRows<'_> {
        WeightRows {
            w: self,
            first: range.start,
            n: range.len(),
        }
    }

    /// Every row of this weight.
    pub fn all_rows(&self) -> WeightRows<'_> {
        self.rows(0..self.shape.n_out)
    }
}

impl WeightRows<'_> {
    /// Whether these are all the weight's rows.
    pub fn is_whole(&self) -> bool {
        self.first == 0 && self.n == self.w.shape.n_out
    }

    /// Checks that the rows exist, for op `op`.
    pub fn check(&self, op: &'static str) -> Result<(), GpuError> {
        if self.n == 0 || self.first + self.n > self.w.shape.n_out {
            return Err(GpuError::Shape {
                op,
                detail: format!(
                    "rows {}..{} of a weight of {}",
                    self.first,
                    self.first + self.n,
                    self.w.shape.n_out
                ),
            });
        }
        Ok(())
    }
}

/// A tensor and an element offset into it: where an op reads or writes.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// The tensor.
    pub t: &'a GpuTensor,
    /// The first element, counted in elements.
    pub offset: usize,
}

impl<'a> View<'a> {
    /// The view of `t` from element `offset` (`(&t).into()` is offset 0).
    pub fn at(t: &'a GpuTensor, offset: usize) -> View<'a> {
        View { t, offset }
    }

    /// Elements available from the offset to the end of the tensor.
    pub fn available(&self) -> usize {
        self.t.len().saturating_sub(self.offset)
    }

    /// Checks that `n` elements fit, for op `op`.
    pub fn check(&self, op: &'static str, n: usize) -> Result<(), GpuError> {
        if n > self.available() {
            return Err(GpuError::Shape {
                op,
                detail: format!(
                    "{n} elements from offset {} of a tensor of {}",
                    self.offset,
                    self.t.len()
                ),
            });
        }
        Ok(())
    }
}

impl<'a> From<&'a GpuTensor> for View<'a> {
    fn from(t: &'a GpuTensor) -> View<'a> {
        View { t, offset: 0 }
    }
}
