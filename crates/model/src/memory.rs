//! What an executor holds on its device, by role ([`DeviceMemory`], reported through
//! [`crate::Backend::device_memory`] for `rullama bench` and `rullama inspect --gpu`).

/// Bytes of the device buffers an executor holds now. Counted from the sizes of the buffers
/// it creates (padding included); what the graphics API and the driver allocate besides
/// (pipelines, bind groups, shader code) is not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Weights uploaded at load: matrices in their GPU layout (GGUF blocks, or split by field,
    /// in row chunks), 1-D tensors as f32.
    pub weights: u64,
    /// The KV caches of the sequences alive now (every layer's K and V for `n_ctx`
    /// positions).
    pub kv_cache: u64,
    /// The built plans kept for replay (activation buffers, read-back staging, sampling
    /// scratch), the RoPE frequency tables, and what live sequences hold to run them (their
    /// plan bindings' uniform arenas and token-id and position buffers, token slots, id
    /// staging).
    pub scratch: u64,
}

impl DeviceMemory {
    /// All three together.
    pub fn total(&self) -> u64 {
        self.weights + self.kv_cache + self.scratch
    }
}
