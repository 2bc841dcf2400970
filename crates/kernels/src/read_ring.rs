//! Reads that overlap the next steps: a few small staging buffers used in turn.
//!
//! A submit + read-back of a few bytes costs ~0.6 ms on the H100 (DESIGN.md), longer than a
//! small model's whole decode step. [`ReadRing::submit`] records one or more steps in one
//! pass, appends the copy of each one's result into the next staging slots, submits, and
//! starts mapping those slots without waiting; [`ReadRing::read`] waits for that submission
//! later, after the caller has queued the next steps (through a [`Wait`]: blocking there,
//! yielding in [`ReadRing::read_async`]). A slot still mapping when its turn comes again (a
//! result nobody read) is waited for and released first, blocking: callers that read every
//! ticket they take never reach it. The staging buffers are made once.

use crate::device::Gpu;
use crate::error::GpuError;
use crate::step::Step;
use crate::tensor::GpuTensor;
use crate::wait::{Block, Mapping, Wait, Yield, block_on, mapping};

/// A submitted read: which slot, which use of it, and the submission that fills it.
#[derive(Debug)]
pub struct Ticket {
    slot: usize,
    generation: u64,
    index: wgpu::SubmissionIndex,
}

#[derive(Debug)]
struct Slot {
    staging: wgpu::Buffer,
    /// The mapping under way (or done and not yet read), and the use it belongs to.
    mapping: Option<(u64, Mapping)>,
}

/// `n` staging buffers of `bytes` each, used round robin.
#[derive(Debug)]
pub struct ReadRing {
    slots: Vec<Slot>,
    bytes: u64,
    next: usize,
    generation: u64,
}

impl ReadRing {
    /// `n` (at least one) staging buffers of `bytes` each (rounded up to whole words).
    pub fn new(gpu: &Gpu, n: usize, bytes: u64) -> ReadRing {
        let bytes = bytes.next_multiple_of(4).max(4);
        let slots = (0..n.max(1))
            .map(|_| Slot {
                staging: gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("read ring"),
                    size: bytes,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                }),
                mapping: None,
            })
            .collect();
        ReadRing {
            slots,
            bytes,
            next: 0,
            generation: 0,
        }
    }

    /// Bytes of the staging buffers, for memory reports.
    pub fn total_bytes(&self) -> u64 {
        self.bytes * self.slots.len() as u64
    }

    /// Records `steps` in order as one compute pass, then the copy of each one's read (the
    /// first bytes of its tensor) into its own slot, submits them together
    /// ([`Gpu::submit_steps`]: their parameters flushed) and starts mapping the slots. Does
    /// not wait for the GPU.
    pub fn submit(
        &mut self,
        gpu: &Gpu,
        steps: &[(&Step, &GpuTensor)],
    ) -> Result<Vec<Ticket>, GpuError> {
        let mut slots = Vec::with_capacity(steps.len());
        for _ in steps {
            let slot = self.next;
            self.next = (self.next + 1) % self.slots.len();
            self.release(gpu, slot)?;
            slots.push(slot);
        }
        let recorded: Vec<&Step> = steps.iter().map(|(step, _)| *step).collect();
        let index = gpu.submit_steps(&recorded, |encoder| {
            for ((_, src), &slot) in steps.iter().zip(&slots) {
                let staging = &self.slots[slot].staging;
                encoder.copy_buffer_to_buffer(src.buf.raw(), 0, staging, 0, self.bytes);
            }
        });
        let mut tickets = Vec::with_capacity(steps.len());
        for slot in slots {
            self.generation += 1;
            let m = mapping(self.slots[slot].staging.slice(..));
            self.slots[slot].mapping = Some((self.generation, m));
            tickets.push(Ticket {
                slot,
                generation: self.generation,
                index: index.clone(),
            });
        }
        Ok(tickets)
    }

    /// Waits for the ticket's submission, blocking, and copies its bytes into `out`.
    pub fn read<T: bytemuck::Pod>(
        &mut self,
        gpu: &Gpu,
        ticket: Ticket,
        out: &mut [T],
    ) -> Result<(), GpuError> {
        block_on(self.read_with(&Block, gpu, ticket, out))
    }

    /// As [`ReadRing::read`], yielding to the caller's executor while the device works.
    pub async fn read_async<T: bytemuck::Pod>(
        &mut self,
        gpu: &Gpu,
        ticket: Ticket,
        out: &mut [T],
    ) -> Result<(), GpuError> {
        self.read_with(&Yield, gpu, ticket, out).await
    }

    /// Waits for the ticket's submission as `wait` does and copies its bytes into `out`.
    pub async fn read_with<W: Wait, T: bytemuck::Pod>(
        &mut self,
        wait: &W,
        gpu: &Gpu,
        ticket: Ticket,
        out: &mut [T],
    ) -> Result<(), GpuError> {
        let slot = &mut self.slots[ticket.slot];
        let Some((_, mapped)) = slot.mapping.take_if(|(g, _)| *g == ticket.generation) else {
            return Err(GpuError::InvalidParams {
                op: "read ring",
                detail: "a ticket read twice, or after its slot was reused".into(),
            });
        };
        wait.wait(gpu, Some(ticket.index), mapped).await??;
        {
            let view = slot
                .staging
                .slice(..)
                .get_mapped_range()
                .expect("the slot was just mapped");
            let out = bytemuck::cast_slice_mut::<T, u8>(out);
            let n = out.len().min(view.len());
            out[..n].copy_from_slice(&view[..n]);
        }
        slot.staging.unmap();
        Ok(())
    }

    /// Ends a mapping nobody read, so the slot can take a copy again.
    fn release(&mut self, gpu: &Gpu, slot: usize) -> Result<(), GpuError> {
        let s = &mut self.slots[slot];
        if let Some((_, mapped)) = s.mapping.take()
            && block_on(Block.wait(gpu, None, mapped))?.is_ok()
        {
            s.staging.unmap();
        }
        Ok(())
    }
}
