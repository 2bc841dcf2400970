//! The buffers a plan's values live in, shared by an engine's plans.

use rullama_kernels::{Dtype, Gpu, GpuTensor};

use crate::error::{FinetuneError, Result};
use crate::gpu::gpu_err;

/// The buffers of an engine's plans: free ones by size, a request taking the smallest that
/// holds it. The plans share them (they never run at once, and every run writes a buffer
/// before it reads it), so a new shape adds only what its step needs beyond the largest
/// before it.
///
/// The split products' scratches (taken and given back around one op) have buffers of their
/// own: were they in the activations' list, the next activation would take the large scratch
/// just given back (the only free buffer while the forward keeps its captures), and the next
/// layer's scratch would be made anew, once a layer.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    all: Vec<GpuTensor>,
    free: Vec<GpuTensor>,
    scratch_all: Vec<GpuTensor>,
    scratch_free: Vec<GpuTensor>,
    bytes: u64,
    /// The most bytes the buffers may take (`GpuTapeBackend::with_step_bytes_limit`).
    limit: Option<u64>,
    /// The tokens of the step being built (for the error of one that does not fit).
    pub(super) tokens: usize,
}

impl Pool {
    /// A pool whose buffers take at most `limit` bytes (none: what the device gives).
    pub(crate) fn with_limit(limit: Option<u64>) -> Pool {
        Pool {
            limit,
            ..Pool::default()
        }
    }

    /// The limit the pool was made with.
    pub(crate) fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Bytes of every buffer made.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Every buffer free again: a plan was built, and the next one may use them all.
    pub(super) fn reset(&mut self) {
        self.free = self.all.clone();
        self.scratch_free = self.scratch_all.clone();
    }

    /// A buffer of at least `n` f32 for a value of the step.
    pub(super) fn take(&mut self, gpu: &Gpu, n: usize) -> Result<GpuTensor> {
        if let Some(t) = best_fit(&mut self.free, n) {
            return Ok(t);
        }
        let t = self.allocate(gpu, n)?;
        self.all.push(t.clone());
        Ok(t)
    }

    /// A buffer of at least `n` f32 for one op's split partial sums, given back right after
    /// the op with [`Pool::give_scratch`].
    pub(super) fn take_scratch(&mut self, gpu: &Gpu, n: usize) -> Result<GpuTensor> {
        if let Some(t) = best_fit(&mut self.scratch_free, n) {
            return Ok(t);
        }
        let t = self.allocate(gpu, n)?;
        self.scratch_all.push(t.clone());
        Ok(t)
    }

    pub(super) fn give_scratch(&mut self, t: GpuTensor) {
        self.scratch_free.push(t);
    }

    fn allocate(&mut self, gpu: &Gpu, n: usize) -> Result<GpuTensor> {
        let bytes = (n.max(1) * 4) as u64;
        let binding = gpu.max_binding_bytes();
        if bytes > binding {
            return Err(FinetuneError::StepTooLarge {
                tokens: self.tokens,
                what: format!(
                    "an activation of {bytes} bytes, over the {binding} one binding holds"
                ),
                fits: None,
            });
        }
        if let Some(limit) = self.limit
            && self.bytes + bytes > limit
        {
            return Err(FinetuneError::StepTooLarge {
                tokens: self.tokens,
                what: format!(
                    "{} bytes of activations, over the limit of {limit}",
                    self.bytes + bytes
                ),
                fits: None,
            });
        }
        let t = gpu
            .allocate("a training step's activation", bytes, || {
                GpuTensor::zeros(gpu, &[n.max(1)], Dtype::F32)
            })
            .map_err(|e| match e.is_out_of_memory() {
                true => FinetuneError::StepTooLarge {
                    tokens: self.tokens,
                    what: format!("{} more bytes of activations: {e}", self.bytes + bytes),
                    fits: None,
                },
                false => gpu_err("allocating a training step")(e).into(),
            })?;
        self.bytes += t.bytes();
        Ok(t)
    }

    pub(super) fn give(&mut self, t: GpuTensor) {
        self.free.push(t);
    }
}

/// The smallest buffer of `free` that holds `n` f32, taken out of it.
fn best_fit(free: &mut Vec<GpuTensor>, n: usize) -> Option<GpuTensor> {
    let i = free
        .iter()
        .enumerate()
        .filter(|(_, t)| t.len() >= n)
        .min_by_key(|(_, t)| t.len())
        .map(|(i, _)| i)?;
    Some(free.swap_remove(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer past what one binding holds is the step's error (naming its tokens), not a
    /// validation panic when the step binds it.
    #[test]
    fn an_activation_past_the_binding_limit_is_a_typed_error() {
        if std::env::var_os("RULLAMA_NO_GPU_TESTS").is_some() {
            return;
        }
        let gpu = Gpu::open().expect("a GPU adapter (lavapipe will do)");
        let mut pool = Pool {
            tokens: 123_456,
            ..Pool::default()
        };
        let too_many = (gpu.max_binding_bytes() / 4 + 1) as usize;
        match pool.take(&gpu, too_many) {
            Err(FinetuneError::StepTooLarge { tokens, what, .. }) => {
                assert_eq!(tokens, 123_456);
                assert!(what.contains("one binding holds"), "{what}");
            }
            other => panic!("expected StepTooLarge, got {other:?}"),
        }
        assert_eq!(pool.bytes(), 0, "nothing was allocated");
        assert!(pool.take(&gpu, 16).is_ok());
    }
}
