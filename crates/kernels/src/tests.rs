//! Tests of the dispatch path as a whole: a decode-like step (gather, norm, FFN, residual,
//! LM head over a chunked weight, argmax feeding the next gather) replayed many times.

use crate::ops::{argmax, elementwise, embed, glu, matvec, norm};
use crate::testutil::{self, random_f32, random_weight};
use crate::{Dtype, Gpu, GpuFormat, GpuTensor, GpuWeight, Readback, Step, StepBuilder};
use crate::{View, WeightShape};

const D: usize = 64;
const FFN: usize = 96;
const VOCAB: usize = 200;
const EPS: f32 = 1e-6;

/// Weights of the toy model, as bytes for the GPU and as values for the CPU reference.
struct Toy {
    embd: (Vec<u8>, Vec<f32>),
    norm: Vec<f32>,
    gate_up: (Vec<u8>, Vec<f32>),
    down: (Vec<u8>, Vec<f32>),
    head: (Vec<u8>, Vec<f32>),
}

impl Toy {
    fn new() -> Toy {
        Toy {
            embd: random_weight(GpuFormat::Q8_0, VOCAB, D, 1),
            norm: random_f32(D, 2),
            gate_up: random_weight(GpuFormat::Q4_0, 2 * FFN, D, 3),
            down: random_weight(GpuFormat::Q5_0, D, FFN, 4),
            head: random_weight(GpuFormat::Q8_0, VOCAB, D, 5),
        }
    }

    /// CPU reference of one step: the next token after `id`.
    fn next(&self, id: u32) -> u32 {
        let mut h = embed::embed_ref(&self.embd.1, D, &[id], 2.0);
        let rms = norm::RmsNorm {
            n: D,
            n_rows: 1,
            eps: EPS,
        };
        let x = rms.reference(&h, Some(&self.norm));
        let gu = matvec::matvec_ref(&self.gate_up.1, &x).0;
        let a = glu::glu_ref(glu::Activation::GeluTanh, &gu[..FFN], &gu[FFN..]);
        let f = matvec::matvec_ref(&self.down.1, &a).0;
        elementwise::add_ref(&mut h, &f);
        let x = rms.reference(&h, None);
        argmax::argmax_ref(&matvec::matvec_ref(&self.head.1, &x).0)
    }
}

/// GPU state of the toy model and its step.
struct ToyGpu {
    ids: GpuTensor,
    step: Step,
    readback: Readback,
}

fn upload(
    gpu: &Gpu,
    w: &(Vec<u8>, Vec<f32>),
    format: GpuFormat,
    n_out: usize,
    n_in: usize,
    rows_per_chunk: usize,
) -> GpuWeight {
    GpuWeight::upload_chunked(
        gpu,
        WeightShape {
            format,
            n_in,
            n_out,
        },
        &w.0,
        rows_per_chunk,
    )
    .unwrap()
}

fn build(gpu: &Gpu, toy: &Toy, first: u32) -> ToyGpu {
    let embd = upload(gpu, &toy.embd, GpuFormat::Q8_0, VOCAB, D, 100);
    let gate_up = upload(gpu, &toy.gate_up, GpuFormat::Q4_0, 2 * FFN, D, usize::MAX);
    let down = upload(gpu, &toy.down, GpuFormat::Q5_0, D, FFN, usize::MAX);
    // 3 chunks of 68 rows: the LM head split across bindings.
    let head = upload(gpu, &toy.head, GpuFormat::Q8_0, VOCAB, D, 68);
    assert_eq!(head.chunks.len(), 3);
    let norm_w = GpuTensor::from_f32(gpu, &[D], &toy.norm);
    let ids = GpuTensor::from_u32(gpu, &[1], &[first]);
    let h = GpuTensor::zeros(gpu, &[D], Dtype::F32);
    let x = GpuTensor::zeros(gpu, &[D], Dtype::F32);
    let gu = GpuTensor::zeros(gpu, &[2 * FFN], Dtype::F32);
    let a = GpuTensor::zeros(gpu, &[FFN], Dtype::F32);
    let f = GpuTensor::zeros(gpu, &[D], Dtype::F32);
    let logits = GpuTensor::zeros(gpu, &[VOCAB], Dtype::F32);
    let rms = norm::RmsNorm {
        n: D,
        n_rows: 1,
        eps: EPS,
    };
    let act = glu::Activation::GeluTanh;

    let mut b = StepBuilder::new();
    b.extend(embed::embed_rows(&embd, (&ids).into(), 1, (&h).into(), 2.0).unwrap());
    b.push(rms.op((&h).into(), (&x).into(), Some(&norm_w)).unwrap());
    b.extend(matvec::matvec(&gate_up, (&x).into(), (&gu).into()).unwrap());
    b.push(glu::glu(act, (&gu).into(), View::at(&gu, FFN), (&a).into(), FFN).unwrap());
    b.extend(matvec::matvec(&down, (&a).into(), (&f).into()).unwrap());
    b.push(elementwise::add_inplace((&h).into(), (&f).into(), D).unwrap());
    b.push(rms.op((&h).into(), (&x).into(), None).unwrap());
    b.extend(matvec::matvec(&head, (&x).into(), (&logits).into()).unwrap());
    b.push(argmax::argmax((&logits).into(), VOCAB, (&ids).into()).unwrap());
    ToyGpu {
        ids,
        step: b.build(gpu),
        readback: Readback::new(gpu, 4),
    }
}

impl ToyGpu {
    fn step(&mut self, gpu: &Gpu) -> u32 {
        let mut id = [0u32];
        self.readback
            .run_and_read(gpu, &mut self.step, &self.ids, 0, &mut id)
            .unwrap();
        id[0]
    }
}

/// Greedy decode on the GPU (the id never leaves the GPU between steps except for the
/// 4-byte read) matches the CPU reference token for token.
#[test]
fn toy_decode_matches_reference() {
    let Some(gpu) = testutil::gpu() else { return };
    let toy = Toy::new();
    let mut g = build(gpu, &toy, 17);
    // 2 gather chunks + norm + gate_up + glu + down + add + norm + 3 head chunks + argmax.
    assert_eq!(g.step.len(), 12);
    let mut want = 17;
    for _ in 0..6 {
        want = toy.next(want);
        assert_eq!(g.step(gpu), want);
    }
}

/// Replaying a built step creates no GPU object: after the first step, wgpu-hal's object
/// counts stay where they are. Uses its own device so other tests do not move the counts.
#[test]
fn replay_creates_nothing() {
    if testutil::gpu().is_none() {
        return;
    }
    let gpu = Gpu::open().unwrap();
    let toy = Toy::new();
    let mut g = build(&gpu, &toy, 3);
    g.step(&gpu);
    gpu.wait().unwrap();
    let before = gpu.object_counts();
    assert!(before[0].1 > 0, "wgpu's `counters` feature is off");
    for _ in 0..8 {
        g.step(&gpu);
    }
    gpu.wait().unwrap();
    let after = gpu.object_counts();
    for ((name, b), (_, a)) in before.into_iter().zip(after) {
        assert!(
            a <= b,
            "{name} grew from {b} to {a} while replaying a built step"
        );
    }
}

/// Parameters changed between replays (position-like scalars) are uploaded by the next submit.
#[test]
fn set_params_takes_effect() {
    let Some(gpu) = testutil::gpu() else { return };
    let a = GpuTensor::from_f32(gpu, &[4], &[0.0; 4]);
    let one = GpuTensor::from_f32(gpu, &[4], &[1.0; 4]);
    let mut b = StepBuilder::new();
    let id = b.push(elementwise::add_inplace((&a).into(), (&one).into(), 1).unwrap());
    b.push(elementwise::add_inplace(View::at(&a, 3), (&one).into(), 1).unwrap());
    let mut step = b.build(gpu);
    // Same layout, same buffers: the two ops share one bind group (their offsets differ).
    assert_eq!(step.bind_group_count(), 1);
    let rb = Readback::new(gpu, 16);
    let mut out = [0f32; 4];
    for i in 0..4 {
        let mut p: elementwise::AddParams = step.params(id);
        p.dst_offset = i;
        step.set_params(id, &p);
        rb.run_and_read(gpu, &mut step, &a, 0, &mut out).unwrap();
    }
    // Op 1 adds to element 3 on each of the 4 submits; op 0 moves over elements 0..4.
    assert_eq!(out, [1.0, 1.0, 1.0, 5.0]);
}

/// An allocation the device refuses is an `OutOfMemory` error naming what was allocated,
/// not wgpu's uncaptured-error panic; the device stays usable after it.
#[test]
fn refused_allocation_is_an_error() {
    let Some(gpu) = testutil::gpu() else { return };
    // Over the device's buffer size limit: refused by wgpu at creation, on any device.
    let size = gpu.device.limits().max_buffer_size.saturating_add(4);
    let made = gpu.allocate("a test buffer", size, || {
        gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        })
    });
    match made {
        Err(e @ crate::GpuError::OutOfMemory { what, bytes, .. }) => {
            assert_eq!((what, bytes), ("a test buffer", size));
            assert!(e.is_out_of_memory());
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    // A small allocation afterwards succeeds, and the weight upload path goes through it.
    let ok = gpu.allocate("a small buffer", 16, || {
        GpuTensor::zeros(gpu, &[4], Dtype::F32)
    });
    assert!(ok.is_ok());
    let shape = WeightShape {
        format: GpuFormat::F32,
        n_in: 4,
        n_out: 2,
    };
    let bytes: Vec<u8> = [1.0f32; 8].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert!(GpuWeight::upload(gpu, shape, &bytes).is_ok());
}
