//! A step: a list of ops built once into dispatches, then encoded any number of times into
//! one compute pass.
//!
//! Building does all the allocation: pipelines (from the device's table), one uniform buffer
//! (the arena) holding every op's parameters at offsets aligned to
//! `min_uniform_buffer_offset_alignment`, and one bind group per distinct (layout, buffers),
//! bound with a dynamic offset into the arena. Replaying a step creates no GPU object except
//! the command encoder wgpu needs per submission; only parameters that change (positions)
//! are rewritten, with one `write_buffer` of the dirty range.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::ops::Range;
use std::sync::Arc;

use crate::device::Gpu;
use crate::kernel::Kernel;
use crate::op::Op;
use crate::pipeline::Pipeline;
use crate::shader::bound;
use crate::tensor::{BufferId, GpuBuffer};

/// Index of an op in its step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpId(pub usize);

/// Collects the ops of a step, in execution order.
#[derive(Debug, Default)]
pub struct StepBuilder {
    ops: Vec<Op>,
}

impl StepBuilder {
    /// No ops yet.
    pub fn new() -> StepBuilder {
        StepBuilder::default()
    }

    /// Appends `op`; its id names it in the built step ([`Step::params`]).
    pub fn push(&mut self, op: Op) -> OpId {
        self.ops.push(op);
        OpId(self.ops.len() - 1)
    }

    /// Appends several ops (a matvec over a chunked weight is one op per chunk).
    pub fn extend(&mut self, ops: impl IntoIterator<Item = Op>) -> Vec<OpId> {
        ops.into_iter().map(|op| self.push(op)).collect()
    }

    /// Builds the step on `gpu`: its pipelines, one uniform arena holding every op's
    /// parameters, and its bind groups, all made now so that replaying makes nothing.
    pub fn build(&self, gpu: &Gpu) -> Step {
        Step::build(gpu, &self.ops)
    }

    /// The kernel of each op, in order.
    pub fn kernels(&self) -> Vec<Kernel> {
        self.ops.iter().map(|op| op.key.kernel).collect()
    }

    /// The same ops with buffers replaced (`(from, to)`: every binding of `from` binds `to`
    /// instead): another copy of a step that reads and writes its own per-step buffers, so
    /// that several copies can run in one submission.
    pub fn replacing(&self, pairs: &[(BufferId, &GpuBuffer)]) -> StepBuilder {
        let ops = self
            .ops
            .iter()
            .map(|op| {
                let mut op = op.clone();
                for b in &mut op.buffers {
                    if let Some((_, to)) = pairs.iter().find(|(from, _)| *from == b.id) {
                        *b = (*to).clone();
                    }
                }
                op
            })
            .collect();
        StepBuilder { ops }
    }
}

#[derive(Debug)]
struct Dispatch {
    kernel: Kernel,
    pipeline: Arc<Pipeline>,
    bind_group: Arc<wgpu::BindGroup>,
    uniform_offset: u32,
    grid: [u32; 3],
}

/// Byte range of one op's parameters in the arena.
#[derive(Debug, Clone, Copy)]
struct Slot {
    offset: usize,
    len: usize,
}

/// A built step: dispatches plus the uniform arena they read their parameters from.
#[derive(Debug)]
pub struct Step {
    arena: wgpu::Buffer,
    mirror: Vec<u8>,
    dirty: Option<(usize, usize)>,
    slots: Vec<Slot>,
    dispatches: Vec<Dispatch>,
    bind_groups: usize,
}

type BindKey = (usize, usize, Vec<BufferId>);

impl Step {
    fn build(gpu: &Gpu, ops: &[Op]) -> Step {
        let align = gpu.limits.min_uniform_buffer_offset_alignment.max(4) as usize;
        let mut slots = Vec::with_capacity(ops.len());
        let mut size = 0usize;
        for op in ops {
            assert!(
                op.params.len().is_multiple_of(16) && !op.params.is_empty(),
                "parameter structs are padded to a multiple of 16 bytes"
            );
            slots.push(Slot {
                offset: size,
                len: op.params.len(),
            });
            size = (size + op.params.len()).next_multiple_of(align);
        }
        let arena = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("step uniforms"),
            size: size.max(align) as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut mirror = vec![0u8; size];
        let mut cache: HashMap<BindKey, Arc<wgpu::BindGroup>> = HashMap::new();
        let mut dispatches = Vec::with_capacity(ops.len());
        for (op, slot) in ops.iter().zip(&slots) {
            mirror[slot.offset..slot.offset + slot.len].copy_from_slice(&op.params);
            let pipeline = gpu.pipeline(op.key);
            let n_bind = bound(pipeline.layout.kinds).count();
            assert_eq!(
                op.buffers.len() + 1,
                n_bind,
                "{:?} binds {} buffers besides its parameters",
                op.key.kernel,
                n_bind - 1
            );
            let key = (
                Arc::as_ptr(&pipeline.layout) as usize,
                slot.len,
                op.buffers.iter().map(|b| b.id).collect(),
            );
            let bind_group = cache
                .entry(key)
                .or_insert_with(|| Arc::new(create_bind_group(gpu, &pipeline, &arena, op)))
                .clone();
            dispatches.push(Dispatch {
                kernel: op.key.kernel,
                pipeline,
                bind_group,
                uniform_offset: slot.offset as u32,
                grid: op.grid,
            });
        }
        let bind_groups = cache.len();
        let mut step = Step {
            arena,
            mirror,
            dirty: Some((0, size)),
            slots,
            dispatches,
            bind_groups,
        };
        step.flush(&gpu.queue);
        step
    }

    /// Number of dispatches.
    pub fn len(&self) -> usize {
        self.dispatches.len()
    }

    /// Whether it has no dispatch.
    pub fn is_empty(&self) -> bool {
        self.dispatches.is_empty()
    }

    /// Bytes of the uniform arena, for memory reports.
    pub fn arena_bytes(&self) -> u64 {
        self.arena.size()
    }

    /// Number of distinct bind groups the step created.
    pub fn bind_group_count(&self) -> usize {
        self.bind_groups
    }

    /// The current parameters of op `id`.
    pub fn params<P: bytemuck::Pod>(&self, id: OpId) -> P {
        let s = self.slots[id.0];
        bytemuck::pod_read_unaligned(&self.mirror[s.offset..s.offset + s.len])
    }

    /// Replaces the parameters of op `id` (same struct type); uploaded by the next submit.
    pub fn set_params<P: bytemuck::Pod>(&mut self, id: OpId, params: &P) {
        let s = self.slots[id.0];
        let bytes = bytemuck::bytes_of(params);
        assert_eq!(bytes.len(), s.len, "parameter struct of another size");
        self.mirror[s.offset..s.offset + s.len].copy_from_slice(bytes);
        let (lo, hi) = self.dirty.unwrap_or((s.offset, s.offset + s.len));
        self.dirty = Some((lo.min(s.offset), hi.max(s.offset + s.len)));
    }

    /// Uploads parameters changed since the last flush (one `write_buffer`).
    pub fn flush(&mut self, queue: &wgpu::Queue) {
        if let Some((lo, hi)) = self.dirty.take() {
            let lo = lo & !3;
            let hi = hi.next_multiple_of(4).min(self.mirror.len());
            if hi > lo {
                queue.write_buffer(&self.arena, lo as u64, &self.mirror[lo..hi]);
            }
        }
    }

    /// The kernel of each dispatch, in order.
    pub fn kernels(&self) -> impl Iterator<Item = Kernel> + '_ {
        self.dispatches.iter().map(|d| d.kernel)
    }

    /// The grid of workgroups of each dispatch, in order.
    pub fn grids(&self) -> impl Iterator<Item = [u32; 3]> + '_ {
        self.dispatches.iter().map(|d| d.grid)
    }

    /// Records every dispatch into `pass`.
    pub fn encode(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.encode_range(pass, 0..self.dispatches.len());
    }

    /// Records dispatches `range` into `pass`.
    fn encode_range(&self, pass: &mut wgpu::ComputePass<'_>, range: Range<usize>) {
        let mut current: Option<&Arc<Pipeline>> = None;
        for d in &self.dispatches[range] {
            if !current.is_some_and(|p| Arc::ptr_eq(p, &d.pipeline)) {
                pass.set_pipeline(&d.pipeline.compute);
                current = Some(&d.pipeline);
            }
            pass.set_bind_group(0, Some(&*d.bind_group), &[d.uniform_offset]);
            pass.dispatch_workgroups(d.grid[0], d.grid[1], d.grid[2]);
        }
    }

    /// Records every dispatch, with timestamp `i + 1` after dispatch `i` (and 0 before them).
    pub(crate) fn encode_timed(&self, pass: &mut wgpu::ComputePass<'_>, queries: &wgpu::QuerySet) {
        pass.write_timestamp(queries, 0);
        self.encode_with(
            pass,
            |_| true,
            |pass, i| pass.write_timestamp(queries, i as u32 + 1),
        );
    }

    /// Records the dispatches whose kernel `keep` accepts (for profiles only: the others'
    /// outputs are left as they were, so the results are meaningless, the timing is not).
    pub(crate) fn encode_only(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        keep: impl Fn(Kernel) -> bool,
    ) {
        self.encode_with(pass, |d| keep(d.kernel), |_, _| {});
    }

    fn encode_with(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        keep: impl Fn(&Dispatch) -> bool,
        mut after: impl FnMut(&mut wgpu::ComputePass<'_>, usize),
    ) {
        let mut current: Option<&Arc<Pipeline>> = None;
        for (i, d) in self.dispatches.iter().enumerate() {
            if !keep(d) {
                continue;
            }
            if !current.is_some_and(|p| Arc::ptr_eq(p, &d.pipeline)) {
                pass.set_pipeline(&d.pipeline.compute);
                current = Some(&d.pipeline);
            }
            pass.set_bind_group(0, Some(&*d.bind_group), &[d.uniform_offset]);
            pass.dispatch_workgroups(d.grid[0], d.grid[1], d.grid[2]);
            after(pass, i);
        }
    }
}

fn create_bind_group(
    gpu: &Gpu,
    pipeline: &Pipeline,
    arena: &wgpu::Buffer,
    op: &Op,
) -> wgpu::BindGroup {
    let mut entries = vec![wgpu::BindGroupEntry {
        binding: 0,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: arena,
            offset: 0,
            size: NonZeroU64::new(op.params.len() as u64),
        }),
    }];
    let numbers = bound(pipeline.layout.kinds).map(|(i, _)| i).skip(1);
    for (i, b) in numbers.zip(&op.buffers) {
        entries.push(wgpu::BindGroupEntry {
            binding: i,
            resource: b.buffer.as_entire_binding(),
        });
    }
    gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.layout.bind_group,
        entries: &entries,
    })
}

/// Steps of more dispatches than this together are recorded and submitted in pieces, so the
/// GPU runs one piece while the host records the next: a training step's ~2,500 dispatches
/// take the host ~10 ms to record (about 4 us each), time the GPU otherwise waits. Decode's
/// submissions (four steps of at most ~160 dispatches) stay whole.
const PIECES_FROM: usize = 1024;
/// The first piece, small so that the GPU starts soon.
const FIRST_PIECE: usize = 128;
/// The later pieces: each submission costs the GPU ~20 us (docs/PERF.md, section 2).
const PIECE: usize = 512;

/// The pieces a submission of steps of `lens` dispatches is recorded in: (step, its
/// dispatches) in order, the last piece ending the last step. One piece up to
/// [`PIECES_FROM`] dispatches in all.
fn pieces(lens: &[usize]) -> Vec<Vec<(usize, Range<usize>)>> {
    let total: usize = lens.iter().sum();
    let mut pieces = vec![Vec::new()];
    let mut room = if total > PIECES_FROM {
        FIRST_PIECE
    } else {
        total
    };
    for (i, &n) in lens.iter().enumerate() {
        let mut at = 0;
        while at < n {
            if room == 0 {
                pieces.push(Vec::new());
                room = PIECE;
            }
            let take = room.min(n - at);
            pieces
                .last_mut()
                .expect("one piece at least")
                .push((i, at..at + take));
            at += take;
            room -= take;
        }
    }
    pieces
}

impl Gpu {
    /// Records `steps` in order, each piece of them (one, unless they pass 1,024 dispatches)
    /// as one compute pass of its own command encoder submitted as soon as it is recorded,
    /// lets `after` append copies to the last, and returns the last submission. The steps'
    /// parameters must be flushed ([`Step::flush`]): several steps of one submission cannot
    /// share a parameter arena, so a step appears at most once.
    pub fn submit_steps(
        &self,
        steps: &[&Step],
        after: impl FnOnce(&mut wgpu::CommandEncoder),
    ) -> wgpu::SubmissionIndex {
        let total: usize = steps.iter().map(|s| s.dispatches.len()).sum();
        // Decode's submissions take the first branch: nothing allocated per token.
        let mut encoder = if total <= PIECES_FROM {
            let whole = steps.iter().enumerate();
            self.record_pass(steps, whole.map(|(i, s)| (i, 0..s.dispatches.len())))
        } else {
            let lens: Vec<usize> = steps.iter().map(|s| s.dispatches.len()).collect();
            let mut pieces = pieces(&lens);
            let last = pieces.pop().expect("one piece at least");
            for piece in pieces {
                self.queue
                    .submit(Some(self.record_pass(steps, piece).finish()));
            }
            self.record_pass(steps, last)
        };
        after(&mut encoder);
        self.queue.submit(Some(encoder.finish()))
    }

    /// One compute pass of a new command encoder holding dispatches `piece` ((step, range of
    /// its dispatches), in order) of `steps`.
    fn record_pass(
        &self,
        steps: &[&Step],
        piece: impl IntoIterator<Item = (usize, Range<usize>)>,
    ) -> wgpu::CommandEncoder {
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("steps"),
                timestamp_writes: None,
            });
            for (i, range) in piece {
                steps[i].encode_range(&mut pass, range);
            }
        }
        encoder
    }

    /// Flushes `step`'s parameters, records it as one pass, lets `after` append copies, and
    /// submits.
    pub fn submit_with(
        &self,
        step: &mut Step,
        after: impl FnOnce(&mut wgpu::CommandEncoder),
    ) -> wgpu::SubmissionIndex {
        step.flush(&self.queue);
        self.submit_steps(&[step], after)
    }

    /// Records and submits `step`.
    pub fn submit(&self, step: &mut Step) -> wgpu::SubmissionIndex {
        self.submit_with(step, |_| {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every dispatch lands in exactly one piece, in order; decode-sized submissions stay
    /// whole; a long step starts with a small piece.
    #[test]
    fn pieces_cover_every_dispatch_in_order() {
        for lens in [
            vec![],
            vec![97; 4],
            vec![PIECES_FROM],
            vec![2467],
            vec![600, 700, 5],
            vec![0, 1500, 0],
        ] {
            let total: usize = lens.iter().sum();
            let pieces = pieces(&lens);
            let flat: Vec<(usize, usize)> = pieces
                .iter()
                .flatten()
                .flat_map(|(i, r)| r.clone().map(move |d| (*i, d)))
                .collect();
            let want: Vec<(usize, usize)> = lens
                .iter()
                .enumerate()
                .flat_map(|(i, &n)| (0..n).map(move |d| (i, d)))
                .collect();
            assert_eq!(flat, want, "{lens:?}");
            let sizes: Vec<usize> = pieces
                .iter()
                .map(|p| p.iter().map(|(_, r)| r.len()).sum())
                .collect();
            if total <= PIECES_FROM {
                assert_eq!(sizes.len(), 1, "{lens:?}");
            } else {
                assert_eq!(sizes[0], FIRST_PIECE, "{lens:?}");
                assert!(
                    sizes[1..].iter().all(|&s| s <= PIECE),
                    "{lens:?}: {sizes:?}"
                );
            }
        }
    }
}
