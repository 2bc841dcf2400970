//! Kernel speed: matvec per weight format at real model shapes (`matvec/...`; beside it
//! `matvec_q8/...`, the same product from a q8 input, for the formats that take one, and
//! `quantize_q8/<n>`, the dispatch that rounds x to it), the matvec with a GLU input
//! beside the glu + matvec it replaces, the gate|up matvec with the GLU epilogue beside the
//! matvec + glu it replaces, stacked projections (q|k|v, gate|up: one matvec or
//! split matmul beside the separate products), the prompt matmul (`matmul/...`: f32; beside
//! it `matmul_coop/...`, the tensor-core kernel, where the device has cooperative matrices,
//! and `matmul_dense_<tile>/...` on F16 weights; `dense_route/...`: the prefill's f16 copy and
//! dense product, split K or not), products of 8-64 token rows beside one (`small_m/...`: the
//! prompt matmul, and the small-M kernel in a few configurations), the training step's input
//! gradient through a frozen weight on each tile
//! (`matmul_input_grad[_coop_<tile>]/...`, and `matmul_input_grad_dense/...`: the LM head's
//! as split-K dense over its transposed f16 copy), LoRA's thin products (`thin/...`), decode
//! and prompt attention (`attention/...`; prompt blocks over an f16 cache also on the tensor
//! cores, `attention_coop/...`), the training attention forward and backward
//! (`train_attention/...`), the floor of one dependent dispatch
//! (`dispatch/...`), and the tensor cores' own pace through wgpu's cooperative matrices
//! (`coop_peak/...`).
//! Each measurement is one compute pass of `reps` identical dispatches,
//! timed by GPU timestamps at the pass's start and end when the adapter has TIMESTAMP_QUERY
//! (wall time of submit-to-idle otherwise), divided by `reps`. Criterion reports time and
//! throughput (weight or cache bytes read per dispatch, decimal GB/s); each bench also prints
//! a `PERF|` line (median of 15 passes; GB/s, GFLOP/s and TFLOP/s) for docs/PERF.md.
//!
//! `RULLAMA_BENCH_PARITY=N` first runs every kernel parity check for N cases and prints the
//! table (`cargo xtask parity --kernels` does the same), so one binary checks and measures.
//! `RULLAMA_BENCH_FILTER=substr` runs only benches whose name contains it.

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use rullama_kernels::ops::attention::{Attention, DECODE_KEY_GROUPS};
use rullama_kernels::ops::attention_backward::{BackwardSplits, TrainAttentionBackward};
use rullama_kernels::ops::attention_train::{TrainAttention, TrainAttentionForward};
use rullama_kernels::ops::elementwise::add_inplace;
use rullama_kernels::ops::f16_copy::{f16_copy, f16_copy_len, f16_copy_transposed};
use rullama_kernels::ops::glu::{Activation, glu};
use rullama_kernels::ops::head_norm_rope::{HeadNormRope, Heads};
use rullama_kernels::ops::kv::{KvAppend, KvCache, KvDtype, KvLayout};
use rullama_kernels::ops::matmul::{Matmul, Strides, Tile};
use rullama_kernels::ops::matmul_dense::{self, DenseRoute, DenseScratch, DenseTile};
use rullama_kernels::ops::matmul_input_grad::{InputGradTile, MatmulInputGrad};
use rullama_kernels::ops::matmul_small_m::{SmallM, SmallMTile};
use rullama_kernels::ops::matmul_thin::{MatmulThin, THIN, ThinWeight};
use rullama_kernels::ops::matvec::{
    Input, InputKind, MatvecParams, ROWS, lane_layout, lanes, matvec, matvec_glu, matvec_glu_out,
    matvec_input, q8_supported,
};
use rullama_kernels::ops::norm::RmsNorm;
use rullama_kernels::ops::quantize::{q8_words, quantize_q8, quantize_q8_ref};
use rullama_kernels::ops::residual_norm::{NormOut, ResidualNorm};
use rullama_kernels::ops::rope::{Rope, RopeStyle, rope_freqs};
use rullama_kernels::ops::sample::{Sample, Sampling};
use rullama_kernels::ops::split::Out;
use rullama_kernels::ops::split_k::SplitK;
use rullama_kernels::parity::data::{random_f32, random_weight_bytes};
use rullama_kernels::shader::coop_peak_program;
use rullama_kernels::{
    Dtype, Gpu, GpuFormat, GpuTensor, GpuWeight, Op, OpenOptions, Step, StepBuilder, View,
    WeightShape, grid_1d,
};

struct Timer {
    queries: Option<(wgpu::QuerySet, wgpu::Buffer, wgpu::Buffer)>,
    period_ns: f64,
}

impl Timer {
    fn new(gpu: &Gpu) -> Timer {
        let queries = gpu.caps.timestamps.then(|| {
            let set = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: None,
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            });
            let resolve = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let read = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: 16,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            (set, resolve, read)
        });
        Timer {
            queries,
            period_ns: f64::from(gpu.queue.get_timestamp_period()),
        }
    }

    /// GPU time of one pass of `step`.
    fn pass(&self, gpu: &Gpu, step: &mut Step) -> Duration {
        let mut enc = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        step.flush(&gpu.queue);
        {
            let ts = self
                .queries
                .as_ref()
                .map(|(set, _, _)| wgpu::ComputePassTimestampWrites {
                    query_set: set,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                });
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: ts,
            });
            step.encode(&mut pass);
        }
        if let Some((set, resolve, read)) = &self.queries {
            enc.resolve_query_set(set, 0..2, resolve, 0);
            enc.copy_buffer_to_buffer(resolve, 0, read, 0, 16);
        }
        let t0 = Instant::now();
        gpu.queue.submit(Some(enc.finish()));
        let Some((_, _, read)) = &self.queries else {
            gpu.wait().unwrap();
            return t0.elapsed();
        };
        let slice = read.slice(..);
        slice.map_async(wgpu::MapMode::Read, |r| r.unwrap());
        gpu.wait().unwrap();
        let ticks: [u64; 2] = {
            let view = slice.get_mapped_range().unwrap();
            bytemuck::pod_read_unaligned(&view[..16])
        };
        read.unmap();
        Duration::from_nanos((ticks[1].saturating_sub(ticks[0]) as f64 * self.period_ns) as u64)
    }
}

struct Ctx {
    gpu: Gpu,
    timer: Timer,
    filter: Option<String>,
}

/// What one dispatch moves and computes.
#[derive(Clone, Copy)]
struct Work {
    bytes: u64,
    flops: f64,
}

impl Ctx {
    /// Whether the bench `name` runs (`RULLAMA_BENCH_FILTER` is a part of its name, or unset).
    fn wants(&self, name: &str) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|f| name.contains(f.as_str()))
    }

    /// Benchmarks `ops` (one dispatch's worth, possibly several ops) repeated `reps` times
    /// per pass.
    fn bench(&self, c: &mut Criterion, name: &str, ops: Vec<Op>, work: Work, reps: usize) {
        if !self.wants(name) {
            return;
        }
        let mut b = StepBuilder::new();
        for _ in 0..reps {
            b.extend(ops.iter().cloned());
        }
        let mut step = b.build(&self.gpu);
        let _ = self.timer.pass(&self.gpu, &mut step);
        let mut g = c.benchmark_group("kernels");
        g.throughput(Throughput::BytesDecimal(work.bytes));
        g.bench_function(name, |bch| {
            bch.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += self.timer.pass(&self.gpu, &mut step) / reps as u32;
                }
                total
            })
        });
        g.finish();
        let mut ts: Vec<f64> = (0..15)
            .map(|_| self.timer.pass(&self.gpu, &mut step).as_secs_f64() / reps as f64)
            .collect();
        ts.sort_by(f64::total_cmp);
        let t = ts[ts.len() / 2];
        let gbs = work.bytes as f64 / t / 1e9;
        println!(
            "PERF|{name}|{}|{:.2}|{:.1}|{:.1}%|{:.0}|{:.2}",
            work.bytes,
            t * 1e6,
            gbs,
            gbs / 2180.0 * 100.0,
            work.flops / t / 1e9,
            work.flops / t / 1e12
        );
    }
}

fn weight(gpu: &Gpu, f: GpuFormat, n_in: usize, n_out: usize) -> GpuWeight {
    let bytes = random_weight_bytes(f, n_out, n_in, 7);
    let shape = WeightShape {
        format: f,
        n_in,
        n_out,
    };
    GpuWeight::upload(gpu, shape, &bytes).unwrap()
}

fn reps_for(bytes: usize) -> usize {
    (400_000_000 / bytes.max(1)).clamp(8, 400)
}

fn bench_matvec(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    let mut shapes: Vec<(&str, usize, usize, Vec<GpuFormat>)> = vec![
        ("640x2048", 640, 2048, GpuFormat::ALL.to_vec()),
        ("2048x640", 2048, 640, GpuFormat::ALL.to_vec()),
        ("896x4864", 896, 4864, GpuFormat::ALL.to_vec()),
        ("4096x4096", 4096, 4096, GpuFormat::ALL.to_vec()),
        ("4096x14336", 4096, 14336, GpuFormat::ALL.to_vec()),
        ("640x262144", 640, 262144, vec![GpuFormat::Q8_0]),
        // gemma3-4b's gate|up and LM head (PERF.md: the 4B's decode is bound by these).
        ("2560x20480", 2560, 20480, vec![GpuFormat::Q4K]),
        ("2560x262144", 2560, 262144, vec![GpuFormat::Q6K]),
        // gemma3-4b's down projection (Q4_K or Q6_K by layer), 40 super-blocks a row, and
        // its q|k|v.
        (
            "10240x2560",
            10240,
            2560,
            vec![GpuFormat::Q4K, GpuFormat::Q6K],
        ),
        ("2560x4096", 2560, 4096, vec![GpuFormat::Q4K]),
        // qwen2.5-0.5b's and SmolLM2's LM heads.
        ("896x151936", 896, 151936, vec![GpuFormat::Q8_0]),
        ("576x49152", 576, 49152, vec![GpuFormat::Q8_0]),
        // The small models' gate|up (qwen2.5-0.5b's, SmolLM2's, gemma-3-270m's): fewer rows
        // than `matvec::QUADS_MIN_ROWS`.
        (
            "896x9728",
            896,
            9728,
            vec![GpuFormat::Q5_0, GpuFormat::Q8_0],
        ),
        ("576x3072", 576, 3072, vec![GpuFormat::Q5_0]),
        ("640x4096", 640, 4096, vec![GpuFormat::Q5_0]),
    ];
    if gpu.info.device_type == wgpu::DeviceType::Cpu {
        shapes.truncate(3);
    }
    for (shape, n_in, n_out, formats) in shapes {
        for f in formats {
            if !n_in.is_multiple_of(f.block_weights()) {
                continue;
            }
            let name = format!("matvec/{}/{shape}", f.name());
            let q8_name = format!("matvec_q8/{}/{shape}", f.name());
            let q8 = q8_supported(f) && ctx.wants(&q8_name);
            if !ctx.wants(&name) && !q8 {
                continue;
            }
            let w = weight(gpu, f, n_in, n_out);
            let xs = random_f32(n_in, 1);
            let x = GpuTensor::from_f32(gpu, &[n_in], &xs);
            let y = GpuTensor::zeros(gpu, &[n_out], Dtype::F32);
            let bytes = f.row_bytes(n_in) * n_out;
            let work = Work {
                bytes: bytes as u64,
                flops: 2.0 * (n_in * n_out) as f64,
            };
            if ctx.wants(&name) {
                let ops = matvec(&w, (&x).into(), (&y).into()).unwrap();
                ctx.bench(c, &name, ops.clone(), work, reps_for(bytes));
                // Lane layouts on the big shapes (what `matvec::lanes` should choose).
                if n_in * n_out >= 576 * 3072 && std::env::var("RULLAMA_BENCH_SWEEP").is_ok() {
                    sweep_lanes(ctx, c, &name, f, (n_in, n_out), &ops, work, reps_for(bytes));
                }
            }
            if q8 {
                // The same x rounded (on the CPU, once): the pass times the matvec alone, and
                // its bytes are the weight's, so the % of 2.18 TB/s compares with matvec/.
                let words = quantize_q8_ref(&xs).unwrap();
                let q = GpuTensor::from_u32(gpu, &[words.len()], &words);
                let ops = matvec_input(&w, Input::Q8((&q).into()), (&y).into()).unwrap();
                ctx.bench(c, &q8_name, ops, work, reps_for(bytes));
            }
        }
    }
}

/// The matvec `ops` (`n_out` rows of `n_in` weights of format `f`) in other lane layouts:
/// `wgW` / `wgWxQ` is W invocations over Q row quads. Every quad size a multiple of PARTS
/// (else lanes would repeat steps), workgroups a multiple of 32 or a power of two, at most 3
/// trips a lane; `lanes` names the default.
#[allow(clippy::too_many_arguments)]
fn sweep_lanes(
    ctx: &Ctx,
    c: &mut Criterion,
    name: &str,
    f: GpuFormat,
    (n_in, n_out): (usize, usize),
    ops: &[Op],
    work: Work,
    reps: usize,
) {
    let (parts, step_units) = lane_layout(f, InputKind::Plain);
    let steps = n_in.div_ceil(32).div_ceil(step_units);
    let chosen = lanes(f, InputKind::Plain, n_in, n_out);
    println!(
        "SWEEP|{name}|default wg{}x{}",
        chosen.workgroup, chosen.quads
    );
    for quads in [1u32, 2, 4, 8, 16] {
        for wg in (32..=256u32).step_by(16) {
            let quad_lanes = (wg / quads) as usize;
            if !wg.is_multiple_of(quads)
                || !quad_lanes.is_multiple_of(parts)
                || quad_lanes < ROWS
                || !(wg.is_multiple_of(32) || wg.is_power_of_two())
                || steps.div_ceil(quad_lanes / parts) > 3
            {
                continue;
            }
            let mut v = ops.to_vec();
            for o in &mut v {
                let n_rows =
                    bytemuck::pod_read_unaligned::<MatvecParams>(&o.params).n_rows as usize;
                o.key.workgroup_size = wg;
                o.key.quads = quads;
                o.grid = grid_1d(n_rows.div_ceil(ROWS * quads as usize));
            }
            ctx.bench(c, &format!("{name}/wg{wg}x{quads}"), v, work, reps);
        }
    }
}

/// The q8 input's rounding of a vector of n (the matvec shapes' n_in), one dispatch; bytes =
/// x read plus the q8 vector written.
fn bench_quantize(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    let mut sizes = vec![640, 2048, 896, 4096, 14336];
    if gpu.info.device_type == wgpu::DeviceType::Cpu {
        sizes.truncate(3);
    }
    for n in sizes {
        let name = format!("quantize_q8/{n}");
        if ctx
            .filter
            .as_ref()
            .is_some_and(|s| !name.contains(s.as_str()))
        {
            continue;
        }
        let x = GpuTensor::from_f32(gpu, &[n], &random_f32(n, 4));
        let q = GpuTensor::zeros(gpu, &[q8_words(n)], Dtype::U32);
        let op = quantize_q8((&x).into(), (&q).into(), n).unwrap();
        let bytes = 4 * (n + q8_words(n));
        let work = Work {
            bytes: bytes as u64,
            flops: 0.0,
        };
        ctx.bench(c, &name, vec![op], work, reps_for(bytes));
    }
}

/// The down projection with the GLU computed as its input is read, beside the two dispatches
/// it replaces (`glu` then `matvec`); gate and up are one fused gate|up tensor.
fn bench_matvec_glu(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    // gemma-3-270m's down projection (GEGLU), gemma3-4b's (GEGLU; Q4_K or Q6_K by layer in
    // llama.cpp's Q4_K_M mix), a 7B-sized one (SwiGLU).
    let mut cases = vec![
        (GpuFormat::Q4K, 2048, 640, Activation::GeluTanh),
        (GpuFormat::Q4K, 10240, 2560, Activation::GeluTanh),
        (GpuFormat::Q6K, 10240, 2560, Activation::GeluTanh),
        (GpuFormat::Q4K, 14336, 4096, Activation::Silu),
    ];
    if gpu.info.device_type == wgpu::DeviceType::Cpu {
        cases.truncate(1);
    }
    for (f, n_in, n_out, act) in cases {
        let name = format!("matvec_glu/{}/{n_in}x{n_out}", f.name());
        if ctx
            .filter
            .as_ref()
            .is_some_and(|s| !format!("{name}/unfused").contains(s.as_str()))
        {
            continue;
        }
        let w = weight(gpu, f, n_in, n_out);
        let gu = GpuTensor::from_f32(gpu, &[2 * n_in], &random_f32(2 * n_in, 1));
        let a = GpuTensor::zeros(gpu, &[n_in], Dtype::F32);
        let y = GpuTensor::zeros(gpu, &[n_out], Dtype::F32);
        let (gate, up) = ((&gu).into(), View::at(&gu, n_in));
        let bytes = f.row_bytes(n_in) * n_out;
        let work = Work {
            bytes: bytes as u64,
            flops: 2.0 * (n_in * n_out) as f64,
        };
        let fused = matvec_glu(&w, act, gate, up, (&y).into()).unwrap();
        ctx.bench(c, &name, fused, work, reps_for(bytes));
        let mut two = vec![glu(act, gate, up, (&a).into(), n_in).unwrap()];
        two.extend(matvec(&w, (&a).into(), (&y).into()).unwrap());
        ctx.bench(c, &format!("{name}/unfused"), two, work, reps_for(bytes));
    }
}

/// The gate|up matvec that stores the GLU (its GLU epilogue) beside the two dispatches it
/// replaces (the gate|up matvec, then `glu`), gate|up stacked in one weight.
fn bench_glu_out(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    // gemma-3-270m's gate|up (GEGLU, Q5_0 in the file), gemma3-4b's (GEGLU, Q4_K), a
    // 7B-sized one (SwiGLU).
    let mut cases = vec![
        (GpuFormat::Q5_0, 640, 2048, Activation::GeluTanh),
        (GpuFormat::Q4K, 2560, 10240, Activation::GeluTanh),
        (GpuFormat::Q4K, 4096, 14336, Activation::Silu),
    ];
    if gpu.info.device_type == wgpu::DeviceType::Cpu {
        cases.truncate(1);
    }
    for (f, n_in, n_ff, act) in cases {
        let name = format!("glu_out/{}/{n_in}x{n_ff}+{n_ff}", f.name());
        if ctx
            .filter
            .as_ref()
            .is_some_and(|s| !format!("{name}/unfused").contains(s.as_str()))
        {
            continue;
        }
        let w = weight(gpu, f, n_in, 2 * n_ff);
        let x = GpuTensor::from_f32(gpu, &[n_in], &random_f32(n_in, 1));
        let gu = GpuTensor::zeros(gpu, &[2 * n_ff], Dtype::F32);
        let y = GpuTensor::zeros(gpu, &[n_ff], Dtype::F32);
        let bytes = f.row_bytes(n_in) * 2 * n_ff;
        let work = Work {
            bytes: bytes as u64,
            flops: 2.0 * (n_in * 2 * n_ff) as f64,
        };
        let input = Input::Plain((&x).into());
        let fused = matvec_glu_out(w.all_rows(), act, input, (&y).into()).unwrap();
        ctx.bench(c, &name, fused, work, reps_for(bytes));
        let mut two = matvec(&w, (&x).into(), (&gu).into()).unwrap();
        let (gate, up) = ((&gu).into(), View::at(&gu, n_ff));
        two.push(glu(act, gate, up, (&y).into(), n_ff).unwrap());
        ctx.bench(c, &format!("{name}/unfused"), two, work, reps_for(bytes));
    }
}

/// Projections of one input stacked into one weight: one matvec (decode; the outputs are
/// contiguous) or one split matmul (a prompt block) beside the separate products
/// (`/separate`). gemma-3-270m's q|k|v and gate|up (Q5_0 in the file).
fn bench_stacked(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    let cpu = gpu.info.device_type == wgpu::DeviceType::Cpu;
    let n_tokens = if cpu { 64 } else { 512 };
    let f = GpuFormat::Q5_0;
    let n_in = 640;
    for (what, parts) in [("qkv", vec![1024, 256, 256]), ("gate_up", vec![2048, 2048])] {
        let n_out: usize = parts.iter().sum();
        let shape = format!(
            "{}/{n_in}x{}",
            f.name(),
            parts
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("+")
        );
        let w = weight(gpu, f, n_in, n_out);
        let separate: Vec<GpuWeight> = parts.iter().map(|&n| weight(gpu, f, n_in, n)).collect();
        let x = GpuTensor::from_f32(gpu, &[n_tokens * n_in], &random_f32(n_tokens * n_in, 3));
        let y = GpuTensor::zeros(gpu, &[n_tokens * n_out], Dtype::F32);
        let bytes = f.row_bytes(n_in) * n_out;
        for tokens in [1, n_tokens] {
            let work = Work {
                bytes: bytes as u64,
                flops: 2.0 * (tokens * n_in * n_out) as f64,
            };
            // A block on the tensor cores where the device has them.
            let (kind, reps) = match tokens {
                1 => ("matvec", reps_for(bytes)),
                _ if gpu.caps.coop_f16 => ("matmul_coop", 4),
                _ => ("matmul", 4),
            };
            let block = Matmul {
                n_tokens: tokens,
                strides: Strides::default(),
                tensor_cores: true,
            };
            let name = format!("stacked/{what}/{kind}/{tokens}/{shape}");
            let mut at = 0;
            let places: Vec<usize> = parts
                .iter()
                .map(|&n| {
                    let a = at;
                    at += tokens * n;
                    a
                })
                .collect();
            let stacked = if tokens == 1 {
                matvec(&w, (&x).into(), (&y).into()).unwrap()
            } else {
                let outs: Vec<Out> = parts
                    .iter()
                    .zip(&places)
                    .map(|(&n, &a)| Out::new(View::at(&y, a), n))
                    .collect();
                block
                    .split_ops(&gpu.caps, w.all_rows(), (&x).into(), None, &outs)
                    .unwrap()
            };
            ctx.bench(c, &name, stacked, work, reps);
            let mut ops = Vec::new();
            for (w, &a) in separate.iter().zip(&places) {
                let yv = View::at(&y, a);
                ops.extend(if tokens == 1 {
                    matvec(w, (&x).into(), yv).unwrap()
                } else {
                    block.ops(&gpu.caps, w, (&x).into(), None, yv).unwrap()
                });
            }
            ctx.bench(c, &format!("{name}/separate"), ops, work, reps);
        }
    }
}

fn bench_matmul(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    let cpu = gpu.info.device_type == wgpu::DeviceType::Cpu;
    // (format, n_in, n_out, tokens): gemma-3-270m's FFN (down in Q4_K: 2048 inputs are whole
    // super-blocks, 640 are not, so up/gate are Q5_0), qwen2.5-0.5b's FFN, a 7B-sized square,
    // at 512 tokens; gemma3-4b's gate|up (2560 x 20480) and down (10240 x 2560) at a 1024-
    // and an 8192-token prompt, in its Q4_K and as F16 (the dense kernel's format).
    let mut cases = vec![
        (GpuFormat::Q4K, 2048, 640, 512),
        (GpuFormat::Q5_0, 640, 2048, 512),
        (GpuFormat::Q8_0, 896, 4864, 512),
        (GpuFormat::Q4K, 4096, 4096, 512),
        (GpuFormat::F16, 4096, 4096, 512),
    ];
    for n_tokens in [1024, 8192] {
        for (n_in, n_out) in [(2560, 20480), (10240, 2560)] {
            cases.push((GpuFormat::Q4K, n_in, n_out, n_tokens));
            cases.push((GpuFormat::Q6K, n_in, n_out, n_tokens));
            cases.push((GpuFormat::F16, n_in, n_out, n_tokens));
        }
    }
    // A training step's frozen products (gemma-3-270m, batch 8 x 512 tokens), gemma3-4b's
    // down and o over a 4,096-token chunk of a long prompt, and qwen2.5-7b's prompt products
    // (922 tokens), on the f16 copies the dense route multiplies.
    for (n_in, n_out, n_tokens) in [
        (640, 2048, 4096),
        (10240, 2560, 4096),
        (2048, 2560, 4096),
        (2048, 640, 4096),
        (640, 1536, 4096),
        (3584, 37888, 922),
        (18944, 3584, 922),
        (3584, 4608, 922),
    ] {
        cases.push((GpuFormat::F16, n_in, n_out, n_tokens));
    }
    if cpu {
        cases.truncate(1);
    }
    for (f, n_in, n_out, full_tokens) in cases {
        let n_tokens = if cpu { 64 } else { full_tokens };
        let shape = format!("{}/{n_tokens}x{n_in}x{n_out}", f.name());
        // The f32 kernel (at 512 tokens), the tensor cores where the device has them, and the
        // dense tensor-core kernel's tiles where it takes the weight.
        let mut kernels: Vec<(String, Kernel)> = Vec::new();
        if full_tokens == 512 {
            kernels.push((format!("matmul/{shape}"), Kernel::F32));
        }
        if gpu.caps.coop_f16 {
            kernels.push((format!("matmul_coop/{shape}"), Kernel::Coop));
            if matmul_dense::supports(f, n_in) {
                for t in DenseTile::ALL {
                    let name = format!("matmul_dense_{}/{shape}", t.name());
                    kernels.push((name, Kernel::Dense(t)));
                }
            }
        }
        kernels.retain(|(name, _)| ctx.wants(name));
        if kernels.is_empty() {
            continue;
        }
        let w = weight(gpu, f, n_in, n_out);
        let x = GpuTensor::from_f32(gpu, &[n_tokens * n_in], &random_f32(n_tokens * n_in, 2));
        let y = GpuTensor::zeros(gpu, &[n_tokens * n_out], Dtype::F32);
        let work = Work {
            bytes: (f.row_bytes(n_in) * n_out) as u64,
            flops: 2.0 * (n_tokens * n_in * n_out) as f64,
        };
        let reps = if n_tokens > 2048 { 1 } else { 4 };
        for (name, kernel) in kernels {
            let m = Matmul {
                n_tokens,
                strides: Strides::default(),
                tensor_cores: kernel != Kernel::F32,
            };
            let ops = match kernel {
                Kernel::Dense(t) => m.dense_ops(t, &w, (&x).into(), None, (&y).into()),
                _ => m.ops(&gpu.caps, &w, (&x).into(), None, (&y).into()),
            }
            .unwrap();
            ctx.bench(c, &name, ops, work, reps);
        }
    }
}

/// Products of a few token rows, as a server's batched decode makes them: gemma3-4b's gate|up
/// and down at M = 1 (the matvec decode runs) and M = 8, 16, 32, 64 (the prompt matmul, split
/// over K where the plan would split it, `small_m/<format>/<shape>/m<M>`; and on a device with
/// cooperative matrices the small-M kernel in each of `SMALL_M_CONFIGS`,
/// `.../m<M>/<tile>_w<target workgroups>`, split K's reduce included). The weights are read
/// once at every M, so the target is M rows in about the time of one (beside `.../m1`).
fn bench_small_m(ctx: &Ctx, c: &mut Criterion) {
    // The small-M kernel's configurations around the defaults (`SmallM::for_format`: 128-row
    // slabs of 1 or 2 units a barrier, split to 4 workgroups an SM of an H200's 132): both, and
    // 1 unit at half and twice the workgroups.
    const SMALL_M_CONFIGS: [SmallM; 4] = [
        SmallM {
            tile: SmallMTile::R128U1,
            target_workgroups: 528,
        },
        SmallM {
            tile: SmallMTile::R128U2,
            target_workgroups: 528,
        },
        SmallM {
            tile: SmallMTile::R128U1,
            target_workgroups: 264,
        },
        SmallM {
            tile: SmallMTile::R128U1,
            target_workgroups: 1056,
        },
    ];
    let gpu = &ctx.gpu;
    if gpu.info.device_type == wgpu::DeviceType::Cpu {
        return;
    }
    let shapes = [
        (GpuFormat::Q4K, 2560, 20480),
        (GpuFormat::Q4K, 10240, 2560),
        (GpuFormat::Q6K, 10240, 2560),
    ];
    for (f, n_in, n_out) in shapes {
        let prefix = format!("small_m/{}/{n_in}x{n_out}", f.name());
        if ctx
            .filter
            .as_ref()
            .is_some_and(|s| !prefix.contains(s.as_str()) && !s.contains(prefix.as_str()))
        {
            continue;
        }
        let w = weight(gpu, f, n_in, n_out);
        let bytes = f.row_bytes(n_in) * n_out;
        for m in [1, 8, 16, 32, 64] {
            let x = GpuTensor::from_f32(gpu, &[m * n_in], &random_f32(m * n_in, 3));
            let y = GpuTensor::zeros(gpu, &[m * n_out], Dtype::F32);
            let work = Work {
                bytes: bytes as u64,
                flops: 2.0 * (m * n_in * n_out) as f64,
            };
            let name = format!("{prefix}/m{m}");
            if m == 1 {
                let ops = matvec(&w, (&x).into(), (&y).into()).unwrap();
                ctx.bench(c, &name, ops, work, reps_for(bytes));
                continue;
            }
            let mm = Matmul {
                n_tokens: m,
                strides: Strides::default(),
                tensor_cores: gpu.caps.coop_f16,
            };
            let ops = match mm.split_k(&gpu.caps, w.all_rows()) {
                Some(k) => {
                    let len = mm.split_k_scratch(w.all_rows(), k);
                    let scratch = GpuTensor::zeros(gpu, &[len], Dtype::F32);
                    let outs = [Out::new((&y).into(), n_out)];
                    mm.split_k_ops(w.all_rows(), (&x).into(), None, &outs, (&scratch).into(), k)
                        .unwrap()
                }
                None => mm
                    .ops(&gpu.caps, &w, (&x).into(), None, (&y).into())
                    .unwrap(),
            };
            ctx.bench(c, &name, ops, work, reps_for(bytes));
            for cfg in SMALL_M_CONFIGS {
                let name = format!("{name}/{}", cfg.name());
                let Some(k) = mm.small_m(&gpu.caps, w.all_rows(), cfg) else {
                    continue;
                };
                let len = mm.split_k_scratch(w.all_rows(), k);
                let scratch = GpuTensor::zeros(gpu, &[len.max(1)], Dtype::F32);
                let outs = [Out::new((&y).into(), n_out)];
                let ops = mm
                    .small_m_ops(k, w.all_rows(), (&x).into(), None, &outs, (&scratch).into())
                    .unwrap();
                ctx.bench(c, &name, ops, work, reps_for(bytes));
            }
        }
    }
}

/// The training step's input gradient through a frozen weight (`dX = dY W`), on each tile of
/// the tensor-core kernel at the splits the finetune plan gives it (`input_grad_tiling`) and
/// at neighbouring ones, beside the f32 kernel: gemma-3-270m's LM head over one 256-token
/// chunk of logits (the largest kernel of a batch-8 step), and its FFN's gate|up and down at
/// a 512-token block (a batch-1 step's). Names: `matmul_input_grad[_coop_<tile>]/<format>/
/// <tokens>x<n_in>x<n_out>/s<splits>`. Work: the weight's bytes and dY's f32.
fn bench_input_grad(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    let cpu = gpu.info.device_type == wgpu::DeviceType::Cpu;
    use InputGradTile::{Large, Small, Wide};
    // (format, n_in, n_out, tokens, the f32 kernel's splits, (tile, splits) on the tensor
    // cores); the plan's choices first.
    let mut cases = vec![
        (
            GpuFormat::Q8_0,
            640,
            262_144,
            256,
            16,
            vec![
                (Small, 16),
                (Large, 26),
                (Large, 16),
                (Large, 32),
                (Wide, 13),
                (Wide, 26),
            ],
        ),
        (
            GpuFormat::Q5_0,
            640,
            4096,
            512,
            12,
            vec![(Small, 12), (Large, 13), (Large, 8)],
        ),
        (
            GpuFormat::Q4K,
            2048,
            640,
            512,
            4,
            vec![(Small, 4), (Large, 4), (Large, 8)],
        ),
    ];
    if cpu {
        // One small product on the f32 kernel (lavapipe has no tensor cores).
        cases = vec![(GpuFormat::Q8_0, 640, 1024, 64, 4, Vec::new())];
    }
    for (f, n_in, n_out, n_tokens, f32_splits, tiles) in cases {
        let shape = format!("{}/{n_tokens}x{n_in}x{n_out}", f.name());
        let mut kernels = vec![(format!("matmul_input_grad/{shape}"), None, f32_splits)];
        if gpu.caps.coop_f16 {
            kernels.extend(tiles.into_iter().map(|(t, splits)| {
                let name = format!("matmul_input_grad_coop_{}/{shape}", t.name());
                (name, Some(t), splits)
            }));
        }
        kernels.retain(|(name, _, _)| ctx.wants(name));
        if kernels.is_empty() {
            continue;
        }
        let w = weight(gpu, f, n_in, n_out);
        let dy = GpuTensor::from_f32(gpu, &[n_tokens * n_out], &random_f32(n_tokens * n_out, 4));
        let dx = GpuTensor::zeros(gpu, &[n_tokens * n_in], Dtype::F32);
        let most = kernels.iter().map(|k| k.2).max().unwrap_or(1);
        let scratch_len = w.chunks.len() * most * n_tokens * n_in;
        let scratch = GpuTensor::zeros(gpu, &[scratch_len], Dtype::F32);
        let work = Work {
            bytes: (f.row_bytes(n_in) * n_out + 4 * n_tokens * n_out) as u64,
            flops: 2.0 * (n_tokens * n_in * n_out) as f64,
        };
        for (name, tile, splits) in kernels {
            let grad = MatmulInputGrad {
                n_tokens,
                strides: Strides::default(),
                accumulate: false,
                tensor_cores: tile.is_some(),
                tile: tile.unwrap_or(Small),
            };
            let rows = w.all_rows();
            let ops = grad
                .split_ops(
                    &gpu.caps,
                    rows,
                    (&dy).into(),
                    (&scratch).into(),
                    splits,
                    (&dx).into(),
                )
                .unwrap();
            let reps = if n_out > 100_000 { 1 } else { 4 };
            ctx.bench(c, &format!("{name}/s{splits}"), ops, work, reps);
        }
    }
}

/// `y = x Wᵀ` on the dense kernel's 128 x 128 tile split K `k` ways (`Matmul::split_k_ops`)
/// through a scratch of its own (the ops keep it): W F16 in one chunk, y packed.
fn dense_split_k(
    gpu: &Gpu,
    m: Matmul,
    w: &GpuWeight,
    x: &GpuTensor,
    y: &GpuTensor,
    k: usize,
) -> Vec<Op> {
    let split = SplitK {
        splits: k,
        tile: Tile::Dense(DenseTile::Square),
    };
    let scratch = GpuTensor::zeros(gpu, &[m.split_k_scratch(w.all_rows(), split)], Dtype::F32);
    let out = Out::new(y.into(), w.shape.n_out);
    m.split_k_ops(
        w.all_rows(),
        x.into(),
        None,
        &[out],
        (&scratch).into(),
        split,
    )
    .unwrap()
}

/// The LM head's input gradient `dx = dy W` (gemma-3-270m: 262,144 rows of 640, 256 tokens a
/// chunk) as the dense kernel's product over `W^T` copied to f16 (`f16_copy_transposed`, once
/// a step: `f16_copy_t/...`), split K (`Matmul::split_k_ops`): beside
/// `matmul_input_grad_coop_*`, which decodes the Q8_0 rows as stored.
fn bench_head_grad_dense(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    let (n_in, n_out, n_tokens) = (640, 262_144, 256);
    let base = format!("Q8_0/{n_tokens}x{n_in}x{n_out}");
    let splits = [13, 26, 40];
    let wanted = splits
        .iter()
        .any(|k| ctx.wants(&format!("matmul_input_grad_dense/{base}/s{k}")))
        || ctx.wants(&format!("f16_copy_t/{base}"));
    if !gpu.caps.coop_f16 || !wanted {
        return;
    }
    let w = weight(gpu, GpuFormat::Q8_0, n_in, n_out);
    let copy_len = f16_copy_len(w.all_rows());
    let copy = GpuTensor::zeros(gpu, &[copy_len], Dtype::F32);
    let copy_ops = f16_copy_transposed(&w, (&copy).into()).unwrap();
    let copy_work = Work {
        bytes: (GpuFormat::Q8_0.row_bytes(n_in) * n_out + 4 * copy_len) as u64,
        flops: 0.0,
    };
    ctx.bench(
        c,
        &format!("f16_copy_t/{base}"),
        copy_ops.clone(),
        copy_work,
        1,
    );
    // The copy once, outside the timed passes.
    let mut b = StepBuilder::new();
    b.extend(copy_ops);
    let mut step = b.build(gpu);
    let _ = ctx.timer.pass(gpu, &mut step);
    let shape = WeightShape {
        format: GpuFormat::F16,
        n_in: n_out,
        n_out: n_in,
    };
    let wt = GpuWeight::in_buffer(shape, copy.buf.clone());
    let dy = GpuTensor::from_f32(gpu, &[n_tokens * n_out], &random_f32(n_tokens * n_out, 4));
    let dx = GpuTensor::zeros(gpu, &[n_tokens * n_in], Dtype::F32);
    let m = Matmul {
        n_tokens,
        strides: Strides::default(),
        tensor_cores: true,
    };
    let work = Work {
        bytes: (2 * n_in * n_out + 4 * n_tokens * n_out) as u64,
        flops: 2.0 * (n_tokens * n_in * n_out) as f64,
    };
    for k in splits {
        let name = format!("matmul_input_grad_dense/{base}/s{k}");
        let ops = dense_split_k(gpu, m, &wt, &dy, &dx, k);
        ctx.bench(c, &name, ops, work, 2);
    }
}

/// The dense route's f16 copies of a weight (`f16_copy`, once a prompt chunk for each product
/// on the dense kernel) at qwen2.5-7b's shapes: bytes read as stored plus the f16 written.
fn bench_f16_copy(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    let cpu = gpu.info.device_type == wgpu::DeviceType::Cpu;
    // (format, n_in, rows): gate|up and down of qwen2.5-7b.
    let mut cases = vec![
        (GpuFormat::Q4K, 3584, 37_888),
        (GpuFormat::Q4K, 18_944, 3584),
        (GpuFormat::Q6K, 18_944, 3584),
        (GpuFormat::Q8_0, 3584, 4608),
    ];
    if cpu {
        cases = vec![(GpuFormat::Q4K, 256, 64)];
    }
    for (f, n_in, rows) in cases {
        let name = format!("f16_copy/{}/{n_in}x{rows}", f.name());
        if !ctx.wants(&name) {
            continue;
        }
        let w = weight(gpu, f, n_in, rows);
        let len = f16_copy_len(w.all_rows());
        let out = GpuTensor::zeros(gpu, &[len], Dtype::F32);
        let ops = f16_copy(w.all_rows(), (&out).into()).unwrap();
        let work = Work {
            bytes: (f.row_bytes(n_in) * rows + 4 * len) as u64,
            flops: 0.0,
        };
        ctx.bench(c, &name, ops, work, 4);
    }
}

/// The dense kernel split K (`Matmul::split_k_ops` with a dense tile) on the prefill's
/// products of few output tiles: qwen2.5-7b's q|k|v, o and down at 922 tokens (288 and 224
/// workgroups of 128 x 128 unsplit). Names `matmul_dense_split_k/<tokens>x<n_in>x<rows>/s<k>`.
fn bench_dense_split_k(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    if !gpu.caps.coop_f16 {
        return;
    }
    let n_tokens = 922;
    for (n_in, n_out) in [(3584, 4608), (3584, 3584), (18_944, 3584)] {
        let base = format!("matmul_dense_split_k/{n_tokens}x{n_in}x{n_out}");
        let splits = [1, 2, 3, 4];
        if !splits.iter().any(|k| ctx.wants(&format!("{base}/s{k}"))) {
            continue;
        }
        let w = weight(gpu, GpuFormat::F16, n_in, n_out);
        let x = GpuTensor::from_f32(gpu, &[n_tokens * n_in], &random_f32(n_tokens * n_in, 3));
        let y = GpuTensor::zeros(gpu, &[n_tokens * n_out], Dtype::F32);
        let m = Matmul {
            n_tokens,
            strides: Strides::default(),
            tensor_cores: true,
        };
        let work = Work {
            bytes: (2 * n_in * n_out) as u64,
            flops: 2.0 * (n_tokens * n_in * n_out) as f64,
        };
        for k in splits {
            let ops = match k {
                1 => m
                    .dense_ops(DenseTile::Square, &w, (&x).into(), None, (&y).into())
                    .unwrap(),
                _ => dense_split_k(gpu, m, &w, &x, &y, k),
            };
            ctx.bench(c, &format!("{base}/s{k}"), ops, work, 4);
        }
    }
}

/// The dense route as the prefill runs it (`Matmul::dense_route_ops`: the weight's f16 copy,
/// then the dense kernel, split K where asked) on qwen2.5-7b's products of few output tiles at
/// 922 tokens: q|k|v (3,584 + 512 + 512 rows into three outputs, with their bias, as the
/// plan's stacked product), o and down, each in 1 to 4 splits; the route's own choice
/// (`Matmul::dense_route`, `matmul_dense::dense_splits`) printed beside. Names
/// `dense_route/qwen2.5-7b-<product>/922/split<k>`; work: the weight's bytes as stored and the
/// product's flops.
fn bench_dense_route(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    if !gpu.caps.coop_f16 {
        return;
    }
    let n_tokens = 922;
    // (product, format, n_in, the outputs' rows, a bias)
    let cases: [(&str, GpuFormat, usize, &[usize], bool); 3] = [
        ("qkv", GpuFormat::Q8_0, 3584, &[3584, 512, 512], true),
        ("o", GpuFormat::Q4K, 3584, &[3584], false),
        ("down", GpuFormat::Q4K, 18_944, &[3584], false),
    ];
    let m = Matmul {
        n_tokens,
        strides: Strides::default(),
        tensor_cores: true,
    };
    let splits = 1..=4;
    for (product, f, n_in, rows, bias) in cases {
        let base = format!("dense_route/qwen2.5-7b-{product}/{n_tokens}");
        if !splits
            .clone()
            .any(|k| ctx.wants(&format!("{base}/split{k}")))
        {
            continue;
        }
        let n_out: usize = rows.iter().sum();
        let w = weight(gpu, f, n_in, n_out);
        let all = w.all_rows();
        let Some(chosen) = m.dense_route(&gpu.caps, all, gpu.max_binding_bytes()) else {
            println!("{base}: not on the dense route");
            continue;
        };
        println!(
            "{base}: the route's own choice: {} splits on {}",
            chosen.splits,
            chosen.tile.name()
        );
        let x = GpuTensor::from_f32(gpu, &[n_tokens * n_in], &random_f32(n_tokens * n_in, 3));
        let y = GpuTensor::zeros(gpu, &[n_tokens * n_out], Dtype::F32);
        let b = bias.then(|| GpuTensor::from_f32(gpu, &[n_out], &random_f32(n_out, 4)));
        // The outputs one after another, each its own token rows, as the plan's stacked values.
        let mut at = 0;
        let outs: Vec<Out> = rows
            .iter()
            .map(|&r| {
                let o = Out::new(View::at(&y, at), r);
                at += n_tokens * r;
                o
            })
            .collect();
        let copy = GpuTensor::zeros(gpu, &[m.dense_copy_len(all)], Dtype::F32);
        let most = DenseRoute {
            splits: *splits.end(),
            ..chosen
        };
        let partials = GpuTensor::zeros(gpu, &[m.dense_partials_len(all, most)], Dtype::F32);
        let work = Work {
            bytes: (f.row_bytes(n_in) * n_out) as u64,
            flops: 2.0 * (n_tokens * n_in * n_out) as f64,
        };
        for k in splits.clone() {
            let route = DenseRoute {
                splits: k,
                ..chosen
            };
            let scratch = DenseScratch {
                copy: (&copy).into(),
                partials: (k > 1).then(|| (&partials).into()),
            };
            let bias = b.as_ref().map(View::from);
            let ops = m
                .dense_route_ops(route, all, (&x).into(), bias, &outs, scratch)
                .unwrap();
            ctx.bench(c, &format!("{base}/split{k}"), ops, work, 4);
        }
    }
}

/// LoRA's thin products at gemma-3-270m's batch-8 training shapes (4,096 tokens, rank 16):
/// `thin_out` (x A^T, dy B) and `thin_sum` (h B^T added into y, dh A), whose bytes bound them.
fn bench_thin(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    let cpu = gpu.info.device_type == wgpu::DeviceType::Cpu;
    let n_tokens = if cpu { 64 } else { 4096 };
    // (name, n_in, n_out, weight, accumulate)
    let cases = [
        ("out/x_at/640", 640, THIN, ThinWeight::Rows, false),
        ("out/x_at/2048", 2048, THIN, ThinWeight::Rows, false),
        ("out/dy_b/1024", 1024, THIN, ThinWeight::Transposed, false),
        ("out/dy_b/2048", 2048, THIN, ThinWeight::Transposed, false),
        ("sum/h_bt/640", THIN, 640, ThinWeight::Rows, true),
        ("sum/h_bt/2048", THIN, 2048, ThinWeight::Rows, true),
        ("sum/dh_a/640", THIN, 640, ThinWeight::Transposed, true),
    ];
    for (label, n_in, n_out, weight, accumulate) in cases {
        let name = format!("thin/{label}/{n_tokens}");
        if !ctx.wants(&name) {
            continue;
        }
        let a = GpuTensor::from_f32(gpu, &[n_tokens * n_in], &random_f32(n_tokens * n_in, 5));
        let w = GpuTensor::from_f32(gpu, &[n_in * n_out], &random_f32(n_in * n_out, 6));
        let y = GpuTensor::zeros(gpu, &[n_tokens * n_out], Dtype::F32);
        let thin = MatmulThin {
            n_tokens,
            n_in,
            n_out,
            weight,
            a_stride: None,
            y_stride: None,
            accumulate,
        };
        let op = thin.op((&a).into(), (&w).into(), (&y).into()).unwrap();
        let y_bytes = 4 * n_tokens * n_out * if accumulate { 2 } else { 1 };
        let work = Work {
            bytes: (4 * (n_tokens * n_in + n_in * n_out) + y_bytes) as u64,
            flops: 2.0 * (n_tokens * n_in * n_out) as f64,
        };
        ctx.bench(c, &name, vec![op], work, 20);
    }
}

/// Which prompt matmul a bench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    F32,
    Coop,
    Dense(DenseTile),
}

fn bench_attention(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    let cpu = gpu.info.device_type == wgpu::DeviceType::Cpu;
    // (name, n_heads, n_kv_heads, head_dim, history, n_tokens, split_len, plain): prompt
    // blocks over an f16 cache also on the tensor cores (`attention_coop/...`) where the device
    // has them; `plain` false runs only that (an 8,192-token block on the f32 kernel takes
    // long and is not what a model runs there).
    let mut cases = vec![
        ("gemma3-decode", 4, 1, 256, 4096, 1, 256, true),
        ("gemma3-decode", 4, 1, 256, 32768, 1, 512, true),
        ("qwen2.5-decode", 14, 2, 64, 4096, 1, 256, true),
        ("qwen2.5-decode-nosplit", 14, 2, 64, 4096, 1, 4096, true),
        // `rullama bench`'s decode (a 1,050-position cache) at the model's split length, 64
        // positions (one key tile for each of 4 key groups), and at 16 and 128; at 16 also
        // with one key group (one tile a split: the layout before D-key-groups, docs/PERF.md).
        ("gemma3-270m-decode-split16", 4, 1, 256, 1050, 1, 16, true),
        ("gemma3-270m-decode-split64", 4, 1, 256, 1050, 1, 64, true),
        ("gemma3-270m-decode-split128", 4, 1, 256, 1050, 1, 128, true),
        ("gemma3-4b-decode-split16", 8, 4, 256, 1050, 1, 16, true),
        ("gemma3-4b-decode-split64", 8, 4, 256, 1050, 1, 64, true),
        ("qwen2.5-0.5b-decode-split16", 14, 2, 64, 1050, 1, 16, true),
        ("qwen2.5-0.5b-decode-split64", 14, 2, 64, 1050, 1, 64, true),
        ("gemma3-prompt", 4, 1, 256, 512, 512, 512, true),
        ("gemma3-prompt", 4, 1, 256, 1024, 1024, 1024, true),
        // A 922-token prompt of gemma-3-270m's (one kv head) and gemma3-4b's (four) global
        // layers: few row tiles, so their keys split (`attention_coop/...` beside `.../s1`).
        ("gemma3-270m-prompt922", 4, 1, 256, 928, 922, 928, false),
        ("gemma3-4b-prompt922", 8, 4, 256, 928, 922, 928, false),
        ("qwen2.5-prompt", 14, 2, 64, 1024, 1024, 1024, true),
        // The long prefills that bound qwen2.5-7b's and gemma3-4b's (global layers') prompt:
        // 8,192 tokens in one block, and the second of two blocks of the default ubatch
        // (4,096 tokens after 4,096).
        ("qwen2.5-7b-prompt", 28, 4, 128, 8192, 8192, 8192, false),
        (
            "qwen2.5-7b-prompt-2nd4096",
            28,
            4,
            128,
            8192,
            4096,
            8192,
            false,
        ),
        ("gemma3-4b-prompt", 8, 4, 256, 8192, 8192, 8192, false),
        (
            "gemma3-4b-prompt-2nd4096",
            8,
            4,
            256,
            8192,
            4096,
            8192,
            false,
        ),
    ];
    if cpu {
        cases = vec![
            ("gemma3-decode", 4, 1, 256, 512, 1, 128, true),
            ("gemma3-prompt", 4, 1, 256, 128, 128, 128, true),
        ];
    }
    for (label, n_heads, n_kv, hd, len, n_tokens, split, plain) in cases {
        for dtype in [KvDtype::F16, KvDtype::F32] {
            let name = format!("attention/{label}/{dtype:?}/{len}");
            let coop_name = format!("attention_coop/{label}/{len}");
            let coop = n_tokens > 1 && dtype == KvDtype::F16 && gpu.caps.coop_f16;
            let wanted = |name: &str| {
                ctx.filter
                    .as_ref()
                    .is_none_or(|s| name.contains(s.as_str()))
            };
            if !(plain && wanted(&name) || coop && wanted(&coop_name)) {
                continue;
            }
            let layout = KvLayout {
                dtype,
                n_kv_heads: n_kv,
                head_dim: hd,
                max_len: len,
            };
            let cache = KvCache::new(gpu, layout).unwrap();
            let row = n_kv * hd;
            let kv = GpuTensor::from_f32(gpu, &[2 * len * row], &random_f32(2 * len * row, 3));
            let pos: Vec<u32> = (0..len as u32).collect();
            let pt = GpuTensor::from_u32(gpu, &[len], &pos);
            let mut fill = StepBuilder::new();
            fill.push(
                KvAppend {
                    n_tokens: len,
                    src_stride: 2 * row,
                }
                .op((&kv).into(), View::at(&kv, row), (&pt).into(), &cache)
                .unwrap(),
            );
            gpu.submit(&mut fill.build(gpu));
            let attn = Attention {
                n_tokens,
                n_heads,
                q_stride: n_heads * hd,
                scale: 1.0 / (hd as f32).sqrt(),
                softcap: 0.0,
                window: 0,
                split_len: split,
            };
            let q = GpuTensor::from_f32(
                gpu,
                &[n_tokens * n_heads * hd],
                &random_f32(n_tokens * n_heads * hd, 4),
            );
            let out = GpuTensor::zeros(gpu, &[n_tokens * n_heads * hd], Dtype::F32);
            let splits = GpuTensor::zeros(gpu, &[attn.splits_len(&layout).max(1)], Dtype::U32);
            let elem = if dtype == KvDtype::F16 { 2 } else { 4 };
            // Token i of the block (at len - n_tokens + i) sees len - n_tokens + i + 1 keys.
            let keys_seen = (len - n_tokens) as f64 + (n_tokens + 1) as f64 / 2.0;
            let work = Work {
                bytes: (2 * n_kv * len * hd * elem) as u64,
                flops: 4.0 * (n_tokens * n_heads * hd) as f64 * keys_seen,
            };
            // The key groups `ops` picks, and the other count beside them: decode's for
            // prompt blocks, one for decode at 16 positions a split.
            let auto = attn.key_groups(&layout);
            let mut groups = vec![(auto, name.clone())];
            if n_tokens > 1 && auto != DECODE_KEY_GROUPS {
                groups.push((DECODE_KEY_GROUPS, format!("{name}/kg{DECODE_KEY_GROUPS}")));
            }
            if n_tokens == 1 && split == 16 {
                groups.push((1, format!("{name}/kg1")));
            }
            groups.retain(|_| plain);
            for (key_groups, name) in groups {
                let ops = attn
                    .ops_with(
                        key_groups,
                        (&q).into(),
                        View::at(&pt, len - n_tokens),
                        &cache,
                        (&out).into(),
                        Some(&splits),
                    )
                    .unwrap();
                ctx.bench(c, &name, ops, work, if n_tokens > 1 { 4 } else { 50 });
            }
            if coop && attn.coop_fits(&layout) {
                // The key splits the model takes, and unsplit beside them where it splits.
                let auto = attn.coop_key_splits(&layout);
                let mut runs = vec![(auto, coop_name.clone())];
                if auto > 1 {
                    runs.push((1, format!("{coop_name}/s1")));
                }
                let scratch_len = attn.coop_scratch_len(&layout, auto);
                let scratch = GpuTensor::zeros(gpu, &[scratch_len.max(1)], Dtype::F32);
                for (splits, name) in runs {
                    let pos = View::at(&pt, len - n_tokens);
                    let ops = attn
                        .coop_ops(
                            (&q).into(),
                            pos,
                            &cache,
                            (&out).into(),
                            Some((&scratch).into()),
                            splits,
                        )
                        .unwrap();
                    ctx.bench(c, &name, ops, work, 4);
                }
            }
        }
    }
}

/// The training attention at gemma-3-270m's fine-tuning shape (8 sequences of 512 tokens
/// packed in one block, 4 query heads over 1 kv head of 256): the forward with 1, 2 and 4
/// splits of each pair tile's keys (the plan picks among them by the tile count) and the
/// backward's two passes with dk/dv's 8 splits (the plan's at this shape) and dq's 1 (the
/// plan's for the 64-pair tensor-core tiles) or 2 (its pick for 32-pair tiles), on the tensor
/// cores where the device has them (`tc` in the name), else in f32. FLOP/s count the useful
/// products, 2 a score for the forward (S, P V) and 5 for the backward (S, dP, dQ, dK, dV;
/// both passes recompute S and dP).
fn bench_train_attention(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    let cpu = gpu.info.device_type == wgpu::DeviceType::Cpu;
    let (label, seqs, len) = match cpu {
        true => ("gemma3-270m-b2x64", 2, 64),
        false => ("gemma3-270m-b8", 8, 512),
    };
    let (n_head, n_kv, hd) = (4, 1, 256);
    let n = seqs * len;
    let attn = TrainAttention {
        n,
        n_head,
        n_kv,
        dk: hd,
        dv: hd,
        scale: 1.0 / (hd as f32).sqrt(),
        window: 512,
        softcap: 0.0,
    };
    let kind = match attn.uses_tensor_cores(&gpu.caps, true) {
        true => "tc",
        false => "f32",
    };
    let base = format!("train_attention/{label}/{kind}");
    if !["forward", "backward"]
        .iter()
        .any(|pass| ctx.wants(&format!("{base}/{pass}")))
    {
        return;
    }
    let tensor = |len: usize, seed: u64| GpuTensor::from_f32(gpu, &[len], &random_f32(len, seed));
    let (q_len, kv_len) = (n * n_head * hd, n * n_kv * hd);
    let (q, k, v, d_o) = (
        tensor(q_len, 11),
        tensor(kv_len, 12),
        tensor(kv_len, 13),
        tensor(q_len, 14),
    );
    let starts: Vec<u32> = (0..n as u32).map(|i| i / len as u32 * len as u32).collect();
    let start = GpuTensor::from_u32(gpu, &[n], &starts);
    let o = GpuTensor::zeros(gpu, &[q_len], Dtype::F32);
    let lse = GpuTensor::zeros(gpu, &[n * n_head], Dtype::F32);
    let (dq, dk, dv) = (
        GpuTensor::zeros(gpu, &[q_len], Dtype::F32),
        GpuTensor::zeros(gpu, &[kv_len], Dtype::F32),
        GpuTensor::zeros(gpu, &[kv_len], Dtype::F32),
    );
    // Keys a pair sees, over every pair: each sequence's causal triangle.
    let seen = (seqs * n_head * len * (len + 1) / 2) as f64;
    let bytes = (4 * (2 * q_len + 2 * kv_len)) as u64;
    let forward = TrainAttentionForward {
        q: (&q).into(),
        k: (&k).into(),
        v: (&v).into(),
        start: (&start).into(),
        o: (&o).into(),
        lse: (&lse).into(),
    };
    for splits in [1, 2, 4] {
        let scratch = GpuTensor::zeros(gpu, &[attn.forward_scratch_len(splits).max(1)], Dtype::F32);
        let ops = attn
            .forward_ops_on(&gpu.caps, true, forward, Some((&scratch).into()), splits)
            .unwrap();
        let work = Work {
            bytes,
            flops: 2.0 * 2.0 * hd as f64 * seen,
        };
        ctx.bench(c, &format!("{base}/forward/s{splits}"), ops, work, 4);
    }
    let backward = TrainAttentionBackward {
        q: (&q).into(),
        k: (&k).into(),
        v: (&v).into(),
        o: (&o).into(),
        lse: (&lse).into(),
        d_o: (&d_o).into(),
        start: (&start).into(),
        dq: (&dq).into(),
        dk: (&dk).into(),
        dv: (&dv).into(),
    };
    // The backward reads the forward's o and lse.
    let mut fill = StepBuilder::new();
    fill.extend(
        attn.forward_ops_on(&gpu.caps, true, forward, None, 1)
            .unwrap(),
    );
    gpu.submit(&mut fill.build(gpu));
    for dq_splits in [1, 2] {
        let splits = BackwardSplits {
            dq: dq_splits,
            dkdv: 8,
        };
        let scratch = GpuTensor::zeros(gpu, &[attn.backward_scratch_len(splits)], Dtype::F32);
        let ops = attn
            .backward_ops_on(&gpu.caps, true, backward, Some((&scratch).into()), splits)
            .unwrap();
        let work = Work {
            bytes: 2 * bytes,
            flops: 5.0 * 2.0 * hd as f64 * seen,
        };
        let name = format!("{base}/backward/dq{dq_splits}-dkdv8");
        ctx.bench(c, &name, ops, work, 4);
    }
}

fn parity(gpu: &Gpu) {
    let Some(cases) = std::env::var("RULLAMA_BENCH_PARITY")
        .ok()
        .and_then(|v| v.parse().ok())
    else {
        return;
    };
    println!(
        "parity on {} ({:?}), {cases} cases per check",
        gpu.info.name, gpu.info.backend
    );
    for check in rullama_kernels::parity::checks() {
        let r = check.run(gpu, cases, 1);
        println!(
            "PARITY|{}|{}|{:.3e}|{:.4}|{}|{}",
            r.name,
            r.cases,
            r.errors.max_abs,
            r.errors.max_ratio,
            r.tolerance,
            match (r.passed(), r.skipped) {
                (_, Some(_)) => "skip",
                (true, None) => "pass",
                (false, None) => "FAIL",
            }
        );
        if !r.passed() || r.skipped.is_some() {
            println!("  {r}");
        }
    }
}

/// The floor of a dependent dispatch (`dispatch/add/1x640`): an in-place add of 640 floats
/// (one workgroup), each dispatch reading what the one before wrote, as a decode step's
/// chain does. A step of N dispatches costs at least N times this beyond its memory traffic.
fn bench_dispatch_floor(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    let n = 640;
    let h = GpuTensor::from_f32(gpu, &[n], &random_f32(n, 1));
    let a = GpuTensor::from_f32(gpu, &[n], &random_f32(n, 2));
    let work = Work {
        bytes: (3 * 4 * n) as u64,
        flops: n as f64,
    };
    let op = add_inplace((&h).into(), (&a).into(), n).unwrap();
    ctx.bench(c, "dispatch/add/1x640", vec![op], work, 400);
}

/// The fused norms against the dispatches they replace, at gemma-3-270m's shapes: the
/// post-attention block (`h += norm(a) * w_post; y = norm(h) * w_ffn`: rms_norm, add, rms_norm)
/// for decode (1 row, 640 and 2560 wide) and a 512-token prompt block, and q/k norm + RoPE (4 q heads, 1 kv head,
/// head_dim 256: two in-place norms and two ropes) for one token.
fn bench_norms(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    // gemma-3-270m's width, and gemma3-4b's (one row: the decode step).
    for (d, rows) in [(640, 1), (640, 512), (2560, 1)] {
        let w = GpuTensor::from_f32(gpu, &[d], &random_f32(d, 3));
        let len = d * rows;
        let a = GpuTensor::from_f32(gpu, &[len], &random_f32(len, 1));
        let h = GpuTensor::from_f32(gpu, &[len], &random_f32(len, 2));
        let t = GpuTensor::zeros(gpu, &[len], Dtype::F32);
        let y = GpuTensor::zeros(gpu, &[len], Dtype::F32);
        let work = Work {
            bytes: (4 * 4 * len) as u64,
            flops: (8 * len) as f64,
        };
        let fused = ResidualNorm {
            n: d,
            n_rows: rows,
            eps: 1e-6,
        };
        let out = NormOut {
            y: (&y).into(),
            weight: &w,
        };
        let op = fused.op((&a).into(), Some(&w), (&h).into(), Some(out));
        ctx.bench(
            c,
            &format!("norm/residual_norm/fused/{rows}x{d}"),
            vec![op.unwrap()],
            work,
            200,
        );
        let norm = RmsNorm {
            n: d,
            n_rows: rows,
            eps: 1e-6,
        };
        let ops = vec![
            norm.op((&a).into(), (&t).into(), Some(&w)).unwrap(),
            add_inplace((&h).into(), (&t).into(), len).unwrap(),
            norm.op((&h).into(), (&y).into(), Some(&w)).unwrap(),
        ];
        ctx.bench(
            c,
            &format!("norm/residual_norm/separate/{rows}x{d}"),
            ops,
            work,
            200,
        );
        // With q8 inputs the decode norm also writes y's q8 copy (one row only), replacing a
        // quantize_q8 dispatch: the fused op beside the plain one plus that dispatch.
        if rows == 1 {
            let q = GpuTensor::zeros(gpu, &[q8_words(d)], Dtype::F32);
            let out = || NormOut {
                y: (&y).into(),
                weight: &w,
            };
            let op = fused.op_q8((&a).into(), Some(&w), (&h).into(), out(), (&q).into());
            ctx.bench(
                c,
                &format!("norm/residual_norm_q8/fused/1x{d}"),
                vec![op.unwrap()],
                work,
                200,
            );
            let ops = vec![
                fused
                    .op((&a).into(), Some(&w), (&h).into(), Some(out()))
                    .unwrap(),
                quantize_q8((&y).into(), (&q).into(), d).unwrap(),
            ];
            ctx.bench(
                c,
                &format!("norm/residual_norm_q8/separate/1x{d}"),
                ops,
                work,
                200,
            );
        }
    }
    let (hd, nq, nk) = (256, 4, 1);
    let q = GpuTensor::from_f32(gpu, &[nq * hd], &random_f32(nq * hd, 4));
    let k = GpuTensor::from_f32(gpu, &[nk * hd], &random_f32(nk * hd, 5));
    let wh = GpuTensor::from_f32(gpu, &[hd], &random_f32(hd, 6));
    let pos = GpuTensor::from_u32(gpu, &[1], &[77]);
    let freqs = rope_freqs(hd, 1e6, 1.0, None);
    let ft = GpuTensor::from_f32(gpu, &[freqs.len()], &freqs);
    let work = Work {
        bytes: (2 * 4 * (nq + nk) * hd) as u64,
        flops: (10 * (nq + nk) * hd) as f64,
    };
    let op = HeadNormRope {
        style: RopeStyle::Neox,
        head_dim: hd,
        n_rot: hd,
        n_tokens: 1,
        eps: 1e-6,
    };
    let heads = |x, n_heads: usize| Heads {
        x: View::from(x),
        n_heads,
        stride: n_heads * hd,
        weight: Some(&wh),
    };
    let fused = op.op(heads(&q, nq), Some(heads(&k, nk)), (&pos).into(), &ft);
    ctx.bench(
        c,
        "norm/head_norm_rope/fused/4+1x256",
        vec![fused.unwrap()],
        work,
        200,
    );
    let mut ops = Vec::new();
    for (x, n_heads) in [(&q, nq), (&k, nk)] {
        let norm = RmsNorm {
            n: hd,
            n_rows: n_heads,
            eps: 1e-6,
        };
        let rope = Rope {
            style: RopeStyle::Neox,
            head_dim: hd,
            n_rot: hd,
            n_heads,
            n_tokens: 1,
        };
        ops.push(norm.op_inplace(x.into(), Some(&wh)).unwrap());
        ops.push(rope.op(x.into(), (&pos).into(), &ft).unwrap());
    }
    ctx.bench(c, "norm/head_norm_rope/separate/4+1x256", ops, work, 200);
}

/// Sampling one token from a vocabulary row (selection levels and the draw), greedy and with
/// llama.cpp's defaults (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8).
fn bench_sample(ctx: &Ctx, c: &mut Criterion) {
    let gpu = &ctx.gpu;
    let cpu = gpu.info.device_type == wgpu::DeviceType::Cpu;
    let vocabs: &[(&str, usize)] = if cpu {
        &[("smollm2", 49152)]
    } else {
        &[("gemma3", 262144), ("qwen2.5", 151936), ("smollm2", 49152)]
    };
    let defaults = Sampling {
        top_k: 40,
        top_p: 0.95,
        min_p: 0.05,
        min_keep: 0,
        temperature: 0.8,
    };
    for &(label, n) in vocabs {
        for (mode, s) in [("greedy", Sampling::greedy()), ("default", defaults)] {
            let name = format!("sample/{label}/{mode}/{n}");
            if ctx
                .filter
                .as_ref()
                .is_some_and(|f| !name.contains(f.as_str()))
            {
                continue;
            }
            let op = Sample { n };
            let logits = GpuTensor::from_f32(gpu, &[n], &random_f32(n, 9));
            let scratch = GpuTensor::zeros(gpu, &[op.scratch_len()], Dtype::U32);
            let token = GpuTensor::zeros(gpu, &[1], Dtype::U32);
            let ops = op
                .ops((&logits).into(), &scratch, (&token).into(), &s, 0.5)
                .unwrap();
            let work = Work {
                bytes: (4 * n) as u64,
                flops: n as f64,
            };
            ctx.bench(c, &name, ops, work, 50);
        }
    }
}

/// The tensor cores' own pace through wgpu's cooperative matrices
/// (`shaders/bench/coop_peak.wgsl`): operands loaded once (`coop_peak/regs`), reloaded from
/// workgroup memory every pass (`coop_peak/shared`), and so with a barrier every two passes
/// (`coop_peak/barrier`). The ceiling the matmuls are measured against; wall time of one
/// dispatch, median of 7.
fn bench_coop_peak(ctx: &Ctx) {
    let gpu = &ctx.gpu;
    if !gpu.caps.coop_f16 {
        return;
    }
    let device = &gpu.device;
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("coop_peak"),
        source: wgpu::ShaderSource::Wgsl(coop_peak_program().source().into()),
    });
    let n_wg: u32 = 132 * 8;
    let iters: u32 = 2048;
    // Each subgroup stores its 8 accumulators of 256 values.
    let out_stride: u32 = 8 * 256;
    let y = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: u64::from(n_wg) * 8 * u64::from(out_stride) * 4,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let params = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    gpu.queue
        .write_buffer(&params, 0, bytemuck::cast_slice(&[out_stride, 0, 0, 0]));
    for (mode, name) in [(0.0, "regs"), (1.0, "shared"), (2.0, "barrier")] {
        let name = format!("coop_peak/{name}");
        if ctx
            .filter
            .as_ref()
            .is_some_and(|f| !name.contains(f.as_str()))
        {
            continue;
        }
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("coop_peak"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[("ITERS", f64::from(iters)), ("MODE", mode)],
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: params.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: y.as_entire_binding(),
                },
            ],
        });
        let mut times = Vec::new();
        for _ in 0..7 {
            let mut enc = device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bind, &[]);
                pass.dispatch_workgroups(n_wg, 1, 1);
            }
            let start = Instant::now();
            gpu.queue.submit([enc.finish()]);
            device
                .poll(wgpu::PollType::Wait {
                    submission_index: None,
                    timeout: None,
                })
                .unwrap();
            times.push(start.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let t = times[times.len() / 2];
        let flops = f64::from(n_wg) * 8.0 * f64::from(iters) * 8.0 * 2.0 * 4096.0;
        println!(
            "PERF|{name}|0|{:.2}|0|0|{:.0}|{:.2}",
            t * 1e6,
            flops / t / 1e9,
            flops / t / 1e12
        );
    }
}

fn main() {
    let options = OpenOptions {
        extra: wgpu::Features::TIMESTAMP_QUERY,
        ..Default::default()
    };
    let filter = std::env::var("RULLAMA_ADAPTER").ok();
    let gpu = Gpu::open_with_options(filter.as_deref(), options).expect("a GPU adapter");
    println!(
        "adapter: {} ({:?}, {:?}), subgroup {} ({}..{}), timestamps {}, tensor-core matmul {}",
        gpu.info.name,
        gpu.info.backend,
        gpu.info.device_type,
        gpu.caps.subgroup,
        gpu.caps.subgroup_min_size,
        gpu.caps.subgroup_max_size,
        gpu.caps.timestamps,
        gpu.caps.coop_f16
    );
    for m in &gpu.coop_matrix {
        println!(
            "cooperative matrix: {}x{}x{} {:?} -> {:?}",
            m.m_size, m.n_size, m.k_size, m.ab_type, m.cr_type
        );
    }
    parity(&gpu);
    let ctx = Ctx {
        timer: Timer::new(&gpu),
        gpu,
        filter: std::env::var("RULLAMA_BENCH_FILTER").ok(),
    };
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(800))
        .without_plots()
        .configure_from_args();
    println!("PERF|name|bytes|time_us|GB/s|% of 2.18 TB/s|GFLOP/s|TFLOP/s");
    bench_matvec(&ctx, &mut c);
    bench_quantize(&ctx, &mut c);
    bench_matvec_glu(&ctx, &mut c);
    bench_glu_out(&ctx, &mut c);
    bench_stacked(&ctx, &mut c);
    bench_coop_peak(&ctx);
    bench_matmul(&ctx, &mut c);
    bench_small_m(&ctx, &mut c);
    bench_input_grad(&ctx, &mut c);
    bench_thin(&ctx, &mut c);
    bench_f16_copy(&ctx, &mut c);
    bench_dense_split_k(&ctx, &mut c);
    bench_dense_route(&ctx, &mut c);
    bench_head_grad_dense(&ctx, &mut c);
    bench_attention(&ctx, &mut c);
    bench_train_attention(&ctx, &mut c);
    bench_sample(&ctx, &mut c);
    bench_norms(&ctx, &mut c);
    bench_dispatch_floor(&ctx, &mut c);
    c.final_summary();
}
