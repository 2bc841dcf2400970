//! Waiting for the device, as a seam of its own.
//!
//! The host waits on the device in a few places: opening it (the adapter and device
//! requests), a load-time allocation's error scopes, and every read-back (a buffer mapped
//! once the submission that fills it has run). wgpu hands each over as a future (or a
//! callback, which [`mapping`] turns into one); what makes such a future progress differs by
//! host, and is the one thing a [`Wait`] decides:
//!
//! - [`Block`] parks the thread in the device until the work is done (`poll(Wait)`), after
//!   which the future is ready at once. Native tools and tests; it cannot run in a browser,
//!   where the thread must never block.
//! - [`Yield`] hands control back to the caller's executor between non-blocking checks. On
//!   the web the browser's event loop fires the callbacks and wakes the task; natively
//!   nothing polls the device by itself, so each check polls it once (`poll(Poll)`) and the
//!   task asks to be polled again: an async server's thread stays free for other tasks.
//!
//! The library's blocking calls ([`crate::ReadRing::read`], [`crate::Readback::finish`],
//! [`crate::Gpu::open`]) are [`block_on`] over the same async code with [`Block`]; their
//! `_async` twins take a `Yield`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::device::Gpu;
use crate::error::GpuError;

/// How the host waits for the device.
pub trait Wait: std::fmt::Debug {
    /// `done`, a future the device completes (a buffer mapping, an error scope), resolved:
    /// `index` is the submission it depends on (`None`: whatever was submitted last).
    fn wait<F: Future>(
        &self,
        gpu: &Gpu,
        index: Option<wgpu::SubmissionIndex>,
        done: F,
    ) -> impl Future<Output = Result<F::Output, GpuError>>;
}

/// Blocks the thread until the device has done the work (native only).
#[derive(Debug, Clone, Copy, Default)]
pub struct Block;

impl Wait for Block {
    fn wait<F: Future>(
        &self,
        gpu: &Gpu,
        index: Option<wgpu::SubmissionIndex>,
        done: F,
    ) -> impl Future<Output = Result<F::Output, GpuError>> {
        let polled = gpu.device.poll(wgpu::PollType::Wait {
            submission_index: index,
            timeout: None,
        });
        async move {
            polled?;
            Ok(done.await)
        }
    }
}

/// Returns to the caller's executor until the device has done the work.
#[derive(Debug, Clone, Copy, Default)]
pub struct Yield;

impl Wait for Yield {
    fn wait<F: Future>(
        &self,
        gpu: &Gpu,
        _index: Option<wgpu::SubmissionIndex>,
        done: F,
    ) -> impl Future<Output = Result<F::Output, GpuError>> {
        Polled {
            device: &gpu.device,
            done: Box::pin(done),
        }
    }
}

/// [`Yield`]'s future: one device poll per check.
struct Polled<'a, F> {
    device: &'a wgpu::Device,
    done: Pin<Box<F>>,
}

impl<F: Future> Future for Polled<'_, F> {
    type Output = Result<F::Output, GpuError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // On the web this does nothing: the browser runs the callbacks, which wake us.
        if let Err(e) = self.device.poll(wgpu::PollType::Poll) {
            return Poll::Ready(Err(e.into()));
        }
        match self.done.as_mut().poll(cx) {
            Poll::Ready(v) => Poll::Ready(Ok(v)),
            Poll::Pending => {
                // Natively nothing else polls the device, so no callback would wake us:
                // ask to be checked again after the executor's other tasks.
                if !cfg!(target_arch = "wasm32") {
                    cx.waker().wake_by_ref();
                }
                Poll::Pending
            }
        }
    }
}

/// Runs a future to completion on this thread: the blocking calls' way into the async code.
/// With [`Block`] the future is ready at its first poll.
pub fn block_on<F: Future>(f: F) -> F::Output {
    pollster::block_on(f)
}

type MapResult = Result<(), wgpu::BufferAsyncError>;

#[derive(Debug, Default)]
struct Slot {
    result: Option<MapResult>,
    waker: Option<Waker>,
}

/// A buffer mapping under way: resolves once wgpu's callback has fired.
#[derive(Debug)]
pub struct Mapping(Arc<Mutex<Slot>>);

/// Starts mapping `slice` for reading; the mapping completes after the submissions that
/// write the buffer have run.
pub fn mapping(slice: wgpu::BufferSlice<'_>) -> Mapping {
    let slot = Arc::new(Mutex::new(Slot::default()));
    let callback = Arc::clone(&slot);
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let mut s = callback.lock().unwrap_or_else(|e| e.into_inner());
        s.result = Some(r);
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    });
    Mapping(slot)
}

impl Mapping {
    /// The callback's result, if it has fired (without waiting).
    pub fn try_result(&self) -> Option<MapResult> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .result
            .clone()
    }
}

impl Future for Mapping {
    type Output = MapResult;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<MapResult> {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match s.result.clone() {
            Some(r) => Poll::Ready(r),
            None => {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::elementwise::add_inplace;
    use crate::{GpuTensor, ReadRing, Readback, StepBuilder, testutil};

    /// A read that yields to the executor gives what a blocking read gives, through the read
    /// ring (a later submission read first) and a plain read-back.
    #[test]
    fn yielding_reads_give_what_blocking_reads_give() {
        let Some(gpu) = testutil::gpu() else { return };
        let a = GpuTensor::from_f32(gpu, &[4], &[0.0; 4]);
        let one = GpuTensor::from_f32(gpu, &[4], &[1.0; 4]);
        let mut b = StepBuilder::new();
        b.push(add_inplace((&a).into(), (&one).into(), 4).unwrap());
        let step = b.build(gpu);
        let mut ring = ReadRing::new(gpu, 3, 16);
        let first = ring.submit(gpu, &[(&step, &a)]).unwrap().remove(0);
        let second = ring.submit(gpu, &[(&step, &a)]).unwrap().remove(0);
        let mut got = [0f32; 4];
        block_on(ring.read_async(gpu, second, &mut got)).unwrap();
        assert_eq!(got, [2.0; 4]);
        ring.read(gpu, first, &mut got).unwrap();
        assert_eq!(got, [1.0; 4]);

        let rb = Readback::new(gpu, 16);
        let mut encoder = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        rb.copy(&mut encoder, &a, 1, 3);
        let index = gpu.queue.submit(Some(encoder.finish()));
        let mut tail = [0f32; 3];
        block_on(rb.finish_async(gpu, index, &mut tail)).unwrap();
        assert_eq!(tail, [2.0; 3]);
    }

    /// The async open gives a working device where the blocking one does.
    #[test]
    fn async_open_opens() {
        if testutil::gpu().is_none() {
            return;
        }
        let filter = std::env::var("RULLAMA_ADAPTER").ok();
        let gpu = block_on(Gpu::open_async(filter.as_deref(), Default::default())).unwrap();
        gpu.wait().unwrap();
    }
}
