//! The one error type of the GPU layer.

use rullama_quant::Format;

/// Everything that can go wrong between opening a device and reading a result back.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// No adapter, or none that `RULLAMA_ADAPTER` matches.
    #[error(
        "no GPU adapter found{filter} (wgpu saw {seen}). Install a GPU driver with Vulkan, \
         Metal or DX12 support; on headless Linux a CPU fallback is `apt-get install mesa-vulkan-drivers` \
         (lavapipe). Set RULLAMA_ADAPTER to a name substring or index to pick one."
    )]
    NoAdapter {
        /// Adapters wgpu enumerated.
        seen: usize,
        /// ` matching RULLAMA_ADAPTER="…"` when the variable is set, else empty.
        filter: String,
    },
    /// The adapter refused to open a device with the limits and features asked for.
    #[error("requesting a device from adapter {adapter:?} failed: {source}")]
    RequestDevice {
        /// The adapter's name.
        adapter: String,
        /// wgpu's error.
        #[source]
        source: wgpu::RequestDeviceError,
    },
    /// A weight format no kernel reads.
    #[error("no GPU kernel for weight format {0}")]
    UnsupportedFormat(Format),
    /// Tensors or views whose sizes do not fit the op.
    #[error("shape mismatch in {op}: {detail}")]
    Shape {
        /// The op.
        op: &'static str,
        /// What does not fit.
        detail: String,
    },
    /// Op parameters outside what the kernel implements (the caller should have checked).
    #[error("invalid parameters for {op}: {detail}")]
    InvalidParams {
        /// The op.
        op: &'static str,
        /// What is out of range.
        detail: String,
    },
    /// A buffer or binding larger than the device allows.
    #[error("{what} needs {bytes} bytes, over the device limit of {limit}")]
    TooLarge {
        /// What was to be made.
        what: &'static str,
        /// Its size.
        bytes: u64,
        /// The device's limit.
        limit: u64,
    },
    /// The device could not allocate a buffer (its memory is full, or the size is over a
    /// limit wgpu checks at creation): a smaller model or context may fit.
    #[error("allocating {what} ({bytes} bytes) on the GPU failed: {detail}")]
    OutOfMemory {
        /// What was being allocated.
        what: &'static str,
        /// Its size.
        bytes: u64,
        /// What the device said.
        detail: String,
    },
    /// A device feature the call needs is off on this adapter.
    #[error("this adapter lacks {0}")]
    MissingFeature(&'static str),
    /// Waiting for a submission failed (the device was lost, or a wait timed out).
    #[error("waiting for the GPU failed: {0}")]
    Poll(#[from] wgpu::PollError),
    /// Mapping a staging buffer for reading failed.
    #[error("mapping a read-back buffer failed: {0}")]
    Map(#[from] wgpu::BufferAsyncError),
}

impl GpuError {
    /// Whether the device ran out of memory (a smaller allocation may succeed).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, GpuError::OutOfMemory { .. })
    }
}
