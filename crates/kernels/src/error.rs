//! The one error type of the GPU layer.

use rullama_quant::Format;

/// Everything that can go wrong between opening a device and reading a result back.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error(
        "no GPU adapter found{filter} (wgpu saw {seen}). Install a GPU driver with Vulkan, \
         Metal or DX12 support; on headless Linux a CPU fallback is `apt-get install mesa-vulkan-drivers` \
         (lavapipe). Set RULLAMA_ADAPTER to a name substring or index to pick one."
    )]
    NoAdapter { seen: usize, filter: String },
    #[error("requesting a device from adapter {adapter:?} failed: {source}")]
    RequestDevice {
        adapter: String,
        #[source]
        source: wgpu::RequestDeviceError,
    },
    #[error("no GPU kernel for weight format {0}")]
    UnsupportedFormat(Format),
    #[error("shape mismatch in {op}: {detail}")]
    Shape { op: &'static str, detail: String },
    /// Op parameters outside what the kernel implements (the caller should have checked).
    #[error("invalid parameters for {op}: {detail}")]
    InvalidParams { op: &'static str, detail: String },
    #[error("{what} needs {bytes} bytes, over the device limit of {limit}")]
    TooLarge {
        what: &'static str,
        bytes: u64,
        limit: u64,
    },
    /// The device could not allocate a buffer (its memory is full, or the size is over a
    /// limit wgpu checks at creation): a smaller model or context may fit.
    #[error("allocating {what} ({bytes} bytes) on the GPU failed: {detail}")]
    OutOfMemory {
        what: &'static str,
        bytes: u64,
        detail: String,
    },
    /// A device feature the call needs is off on this adapter.
    #[error("this adapter lacks {0}")]
    MissingFeature(&'static str),
    #[error("waiting for the GPU failed: {0}")]
    Poll(#[from] wgpu::PollError),
    #[error("mapping a read-back buffer failed: {0}")]
    Map(#[from] wgpu::BufferAsyncError),
}

impl GpuError {
    /// Whether the device ran out of memory (a smaller allocation may succeed).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, GpuError::OutOfMemory { .. })
    }
}
