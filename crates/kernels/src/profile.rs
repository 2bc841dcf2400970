//! Time per dispatch from GPU timestamps: where a step's time goes.
//!
//! A profiled replay writes one timestamp before the first dispatch and one after each
//! (`Features::TIMESTAMP_QUERY_INSIDE_PASSES`), so dispatch `i` took `t[i + 1] - t[i]`,
//! barrier and launch included. Those timestamps cost a few us each, so the profile also
//! replays the step with timestamps only around its pass, whole and once without each
//! kernel's dispatches: what the step takes unprofiled and what removing a kernel (fusing it
//! away) would save, its launches and barriers included. Only for reports
//! (`rullama bench --profile`): the query set and its buffers are made here, never on the
//! step path, and a device without the features gets [`GpuError::MissingFeature`].

use std::time::Duration;

use crate::device::Gpu;
use crate::error::GpuError;
use crate::kernel::Kernel;
use crate::readback::map_and_copy;
use crate::step::Step;
use crate::wait::{Block, block_on};

/// Features a profiled replay needs (ask for them in [`crate::OpenOptions::extra`]).
pub const PROFILE_FEATURES: wgpu::Features =
    wgpu::Features::TIMESTAMP_QUERY.union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES);

/// The GPU time of each dispatch of one replay, in step order, and the step's time without
/// per-dispatch timestamps.
#[derive(Debug, Clone)]
pub struct StepProfile {
    /// Each dispatch's kernel and GPU time, in step order.
    pub dispatches: Vec<(Kernel, Duration)>,
    /// Each dispatch's grid of workgroups, in step order (beside `dispatches`): which shapes
    /// of one kernel take its time.
    pub grids: Vec<[u32; 3]>,
    /// The whole step between two timestamps around its pass (median of [`PASS_REPLAYS`]).
    pub step: Duration,
    /// Per kernel name, the step's time (measured as `step`) with that kernel's dispatches
    /// left out.
    pub without: Vec<(String, Duration)>,
}

/// Replays per pass-timed measurement (the median is kept).
pub const PASS_REPLAYS: u32 = 7;

/// One row of [`StepProfile::by_kernel`].
#[derive(Debug, Clone, PartialEq)]
pub struct KernelTime {
    /// The kernel's name (`matvec_q4_k`, `rms_norm`, ...).
    pub kernel: String,
    /// Its dispatches in the step.
    pub count: usize,
    /// Their GPU time together.
    pub total: Duration,
}

impl StepProfile {
    /// Sum over the dispatches.
    pub fn total(&self) -> Duration {
        self.dispatches.iter().map(|d| d.1).sum()
    }

    /// What leaving out kernel `name`'s dispatches saved from `step` (zero if it saved
    /// nothing or is not in the step).
    pub fn saved_without(&self, name: &str) -> Duration {
        self.without
            .iter()
            .find(|(n, _)| n == name)
            .map_or(Duration::ZERO, |(_, t)| self.step.saturating_sub(*t))
    }

    /// Time per kernel name, largest first.
    pub fn by_kernel(&self) -> Vec<KernelTime> {
        let mut rows: Vec<KernelTime> = Vec::new();
        for (kernel, t) in &self.dispatches {
            let name = kernel.name();
            match rows.iter_mut().find(|r| r.kernel == name) {
                Some(r) => {
                    r.count += 1;
                    r.total += *t;
                }
                None => rows.push(KernelTime {
                    kernel: name,
                    count: 1,
                    total: *t,
                }),
            }
        }
        rows.sort_by_key(|r| std::cmp::Reverse(r.total));
        rows
    }
}

/// Timestamps read back: raw ticks, and ns per tick.
struct Ticks {
    ticks: Vec<u64>,
    period: f64,
}

impl Ticks {
    /// The time from timestamp `i` to timestamp `j` (ticks subtracted as integers: absolute
    /// ticks can be too large for an f64 to hold to the tick).
    fn between(&self, i: usize, j: usize) -> Duration {
        let ns = self.ticks[j].saturating_sub(self.ticks[i]) as f64 * self.period;
        Duration::from_nanos(ns as u64)
    }
}

/// Records `record` (given a query set of `n` timestamps) into one submission, then resolves
/// and reads the timestamps back.
fn timed(
    gpu: &Gpu,
    n: u32,
    record: impl FnOnce(&mut wgpu::CommandEncoder, &wgpu::QuerySet),
) -> Result<Ticks, GpuError> {
    let queries = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
        label: Some("profile"),
        ty: wgpu::QueryType::Timestamp,
        count: n,
    });
    let bytes = u64::from(n) * 8;
    let resolved = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("profile resolve"),
        size: bytes,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("profile read"),
        size: bytes,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    record(&mut encoder, &queries);
    encoder.resolve_query_set(&queries, 0..n, &resolved, 0);
    encoder.copy_buffer_to_buffer(&resolved, 0, &staging, 0, bytes);
    let index = gpu.queue.submit(Some(encoder.finish()));
    let mut ticks = vec![0u64; n as usize];
    block_on(map_and_copy(&Block, gpu, &staging, index, &mut ticks))?;
    let period = f64::from(gpu.queue.get_timestamp_period());
    Ok(Ticks { ticks, period })
}

impl Step {
    /// Submits the step once with a timestamp around every dispatch and waits for the times;
    /// then times it around its pass, whole and without each kernel.
    pub fn profile(&mut self, gpu: &Gpu) -> Result<StepProfile, GpuError> {
        let mut profile = self.profile_dispatches(gpu)?;
        let mut names: Vec<String> = self.kernels().map(|k| k.name()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let t = self.pass_time(gpu, |k| k.name() != name)?;
            profile.without.push((name, t));
        }
        Ok(profile)
    }

    /// As [`Step::profile`] without the replays that leave each kernel out (`without` is
    /// empty): for a long step (a training step of seconds) whose per-kernel times are the
    /// report, and which should not run dozens of times more.
    pub fn profile_dispatches(&mut self, gpu: &Gpu) -> Result<StepProfile, GpuError> {
        if !gpu.device.features().contains(PROFILE_FEATURES) {
            return Err(GpuError::MissingFeature(
                "timestamp queries inside passes (profiling)",
            ));
        }
        self.flush(&gpu.queue);
        let ticks = timed(gpu, self.len() as u32 + 1, |encoder, queries| {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("profiled step"),
                timestamp_writes: None,
            });
            self.encode_timed(&mut pass, queries);
        })?;
        let dispatches = self
            .kernels()
            .enumerate()
            .map(|(i, k)| (k, ticks.between(i, i + 1)))
            .collect();
        let step = self.pass_time(gpu, |_| true)?;
        Ok(StepProfile {
            dispatches,
            grids: self.grids().collect(),
            step,
            without: Vec::new(),
        })
    }

    /// The median over [`PASS_REPLAYS`] replays of the dispatches `keep` accepts, each replay
    /// one pass with a timestamp at its start and end, all in one submission.
    fn pass_time(&self, gpu: &Gpu, keep: impl Fn(Kernel) -> bool) -> Result<Duration, GpuError> {
        let ticks = timed(gpu, 2 * PASS_REPLAYS, |encoder, queries| {
            for r in 0..PASS_REPLAYS {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("pass-timed step"),
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set: queries,
                        beginning_of_pass_write_index: Some(2 * r),
                        end_of_pass_write_index: Some(2 * r + 1),
                    }),
                });
                self.encode_only(&mut pass, &keep);
            }
        })?;
        let mut each: Vec<Duration> = (0..PASS_REPLAYS as usize)
            .map(|r| ticks.between(2 * r, 2 * r + 1))
            .collect();
        each.sort_unstable();
        Ok(each[each.len() / 2])
    }
}
