//! Counting the GPU executor's device bytes ([`crate::DeviceMemory`]) as buffers come and go.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of buffers whose owners the backend never sees go (a sequence's KV cache, its plan
/// bindings): each owner adds its bytes when made and takes them back when dropped, through
/// a shared counter.
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

/// Bytes counted in a [`LiveBytes`] for as long as this guard lives.
#[derive(Debug)]
pub(crate) struct Counted {
    bytes: u64,
    live: LiveBytes,
}

impl Counted {
    pub fn new(live: &LiveBytes, bytes: u64) -> Counted {
        live.add(bytes);
        Counted {
            bytes,
            live: live.clone(),
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.live.sub(self.bytes);
    }
}
