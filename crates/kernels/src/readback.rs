//! Reading results back: one staging buffer created at setup and reused; only the bytes asked
//! for are copied and mapped (a decode step reads back 4 bytes: the sampled token id). The
//! wait for the device goes through [`crate::wait`]: blocking here, yielding in the `_async`
//! calls.

use crate::device::Gpu;
use crate::error::GpuError;
use crate::step::Step;
use crate::tensor::GpuTensor;
use crate::wait::{Block, Wait, Yield, block_on, mapping};

/// A reusable `MAP_READ` staging buffer.
#[derive(Debug)]
pub struct Readback {
    staging: wgpu::Buffer,
    capacity: u64,
}

impl Readback {
    /// A staging buffer for reads of up to `capacity_bytes`.
    pub fn new(gpu: &Gpu, capacity_bytes: u64) -> Readback {
        let capacity = capacity_bytes.next_multiple_of(4).max(4);
        let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: capacity,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Readback { staging, capacity }
    }

    /// Bytes of the staging buffer, for memory reports.
    pub fn bytes(&self) -> u64 {
        self.capacity
    }

    /// Appends to `encoder` a copy of elements `[offset, offset + n)` of `src` into the staging buffer.
    pub fn copy(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        src: &GpuTensor,
        offset: usize,
        n: usize,
    ) {
        let bytes = (n * 4) as u64;
        assert!(
            bytes <= self.capacity,
            "read of {bytes} bytes exceeds the staging buffer"
        );
        assert!(offset + n <= src.len(), "read past the end of the tensor");
        encoder.copy_buffer_to_buffer(src.buf.raw(), (offset * 4) as u64, &self.staging, 0, bytes);
    }

    /// Waits for submission `index`, blocking, and maps the first `out.len()` elements of
    /// the staging buffer into `out`.
    pub fn finish<T: bytemuck::Pod>(
        &self,
        gpu: &Gpu,
        index: wgpu::SubmissionIndex,
        out: &mut [T],
    ) -> Result<(), GpuError> {
        block_on(map_and_copy(&Block, gpu, &self.staging, index, out))
    }

    /// As [`Readback::finish`], yielding to the caller's executor while the device works.
    pub async fn finish_async<T: bytemuck::Pod>(
        &self,
        gpu: &Gpu,
        index: wgpu::SubmissionIndex,
        out: &mut [T],
    ) -> Result<(), GpuError> {
        map_and_copy(&Yield, gpu, &self.staging, index, out).await
    }

    /// Submits `step`, then reads elements `[offset, offset + out.len())` of `src` into `out`.
    pub fn run_and_read<T: bytemuck::Pod>(
        &self,
        gpu: &Gpu,
        step: &mut Step,
        src: &GpuTensor,
        offset: usize,
        out: &mut [T],
    ) -> Result<(), GpuError> {
        let n = out.len();
        let index = gpu.submit_with(step, |enc| self.copy(enc, src, offset, n));
        self.finish(gpu, index, out)
    }

    /// Reads elements `[offset, offset + out.len())` of `src` (after all submitted work).
    pub fn read<T: bytemuck::Pod>(
        &self,
        gpu: &Gpu,
        src: &GpuTensor,
        offset: usize,
        out: &mut [T],
    ) -> Result<(), GpuError> {
        let mut encoder = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        self.copy(&mut encoder, src, offset, out.len());
        let index = gpu.queue.submit(Some(encoder.finish()));
        self.finish(gpu, index, out)
    }
}

/// Waits for submission `index` as `wait` does, maps the first `size_of_val(out)` bytes of
/// the `MAP_READ` buffer `staging`, copies them into `out` and unmaps.
pub(crate) async fn map_and_copy<W: Wait, T: bytemuck::Pod>(
    wait: &W,
    gpu: &Gpu,
    staging: &wgpu::Buffer,
    index: wgpu::SubmissionIndex,
    out: &mut [T],
) -> Result<(), GpuError> {
    let bytes = std::mem::size_of_val(out) as u64;
    let slice = staging.slice(0..bytes);
    let mapped = mapping(slice);
    wait.wait(gpu, Some(index), mapped).await??;
    {
        let view = slice
            .get_mapped_range()
            .expect("range was just mapped and is not mapped elsewhere");
        bytemuck::cast_slice_mut::<T, u8>(out).copy_from_slice(&view);
    }
    staging.unmap();
    Ok(())
}
