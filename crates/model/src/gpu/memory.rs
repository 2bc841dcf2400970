//! What the GPU backend has allocated on the device, by role ([`DeviceMemory`], reported
//! through [`crate::Backend::device_memory`] for `rullama bench`). Counted from the sizes of
//! the buffers it creates (padding included); what wgpu and the driver allocate besides
//! (pipelines, bind groups, shader code) is not counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of the device buffers a backend holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Weights uploaded at load: matrices in their GPU layout (GGUF blocks, or split by field,
    /// in row chunks), 1-D tensors as f32.
    pub weights: u64,
    /// The KV caches alive now (every layer's K and V for `n_ctx` positions).
    pub kv_cache: u64,
    /// The built steps kept for replay (activation buffers, token-id and position buffers,
    /// uniform arenas, read-back staging, sampling scratch) and the RoPE frequency tables.
    pub scratch: u64,
}

impl DeviceMemory {
    pub fn total(&self) -> u64 {
        self.weights + self.kv_cache + self.scratch
    }
}

/// Bytes of the live KV caches, shared by the backend and the caches it made: a cache adds
/// its bytes when made and takes them back when dropped. Caches are dropped by their owners
/// (a session, a test), which the backend never sees, so each cache does its own counting.
#[derive(Debug, Clone, Default)]
pub(crate) struct LiveBytes(Arc<AtomicU64>);

impl LiveBytes {
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn sub(&self, n: u64) {
        self.0.fetch_sub(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
