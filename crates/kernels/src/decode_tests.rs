//! The format files' two decoders agree bit for bit: `decode_half` (16 weights, what the tiled
//! and tensor-core matmuls and the f16 copy stage; `decode_raw(load_half_raw(..))`, the loads
//! the tensor-core matmuls issue a stage early and the arithmetic they do after their barrier)
//! against `decode_unit` (32 weights, what the embedding gather reads), on random weights of
//! every format. They are written apart (vector loads and quads against scalar loads and loops)
//! but form each weight with the same f32 operations in the same order, so any difference is a
//! decoding bug, not rounding.

use crate::device::Gpu;
use crate::format::GpuFormat;
use crate::parity::U;
use crate::readback::Readback;
use crate::shader::BLOCKS;
use crate::tensor::{Dtype, GpuTensor, GpuWeight, WeightShape};
use crate::testutil::{self, random_weight};

/// Invocation i takes half i % 2 of unit i / 2 of the weight (units counted over the rows)
/// and writes its 16 weights' bits from `decode_half` at out[32 i ..], those from
/// `decode_unit` at out[32 i + 16 ..].
const KERNEL: &str = r"
struct Params {
    n_rows: u32,
    row_bytes: u32,
    units: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<storage, read> w_words: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= 2u * p.units * p.n_rows {
        return;
    }
    let h = i % 2u;
    let row = i / (2u * p.units);
    let u = (i / 2u) % p.units;
    let blk = row * p.row_bytes + (u / BLOCK_UNITS) * BLOCK_BYTES;
    let q = decode_half(blk, u % BLOCK_UNITS, h);
    decode_unit(blk, u % BLOCK_UNITS);
    for (var j = 0u; j < 4u; j++) {
        for (var e = 0u; e < 4u; e++) {
            out[32u * i + 4u * j + e] = bitcast<u32>(q[j][e]);
            out[32u * i + 16u + 4u * j + e] = bitcast<u32>(unit_w[16u * h + 4u * j + e]);
        }
    }
}
";

/// Runs [`KERNEL`] over a random `n_out x n_in` weight in `f`: for each half unit, the weights
/// inside the row from (`decode_half`, `decode_unit`), and the quant crate's values.
fn decode_both(gpu: &Gpu, f: GpuFormat, n_out: usize, n_in: usize, seed: u64) -> Vec<[f32; 3]> {
    let (bytes, values) = random_weight(f, n_out, n_in, seed);
    let shape = WeightShape {
        format: f,
        n_in,
        n_out,
    };
    let weight = GpuWeight::upload_chunked(gpu, shape, &bytes, n_out).unwrap();
    let units = n_in.div_ceil(32);
    let halves = 2 * units * n_out;
    let out = GpuTensor::zeros(gpu, &[32 * halves], Dtype::F32);
    let params: [u32; 4] = [n_out as u32, f.row_bytes(n_in) as u32, units as u32, 0];
    let uniform = wgpu::util::DeviceExt::create_buffer_init(
        &gpu.device,
        &wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::bytes_of(&params),
            usage: wgpu::BufferUsages::UNIFORM,
        },
    );
    let mut source = String::from(KERNEL);
    for file in std::iter::once(&BLOCKS).chain(f.decoder().iter().copied()) {
        source.push_str(&file.text());
        source.push('\n');
    }
    let module = gpu
        .device
        .create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("decode_tests"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
    let storage = |binding, read_only| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    let uniform_entry = wgpu::BindGroupLayoutEntry {
        binding: 0,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    let layout = gpu
        .device
        .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: None,
            entries: &[
                uniform_entry,
                storage(1, true),
                storage(2, false),
                storage(3, true),
            ],
        });
    let pipeline_layout = gpu
        .device
        .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: None,
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
    let pipeline = gpu
        .device
        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("decode_tests"),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
    let w = weight.chunks[0].buf.raw();
    let bind = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &layout,
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: uniform.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: w.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: out.buf.raw().as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 3,
                resource: w.as_entire_binding(),
            },
        ],
    });
    let mut encoder = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(halves.div_ceil(64) as u32, 1, 1);
    }
    gpu.queue.submit(Some(encoder.finish()));
    let mut bits = vec![0u32; 32 * halves];
    Readback::new(gpu, (4 * bits.len()) as u64)
        .read(gpu, &out, 0, &mut bits)
        .unwrap();
    let mut got = Vec::new();
    for row in 0..n_out {
        for k in 0..n_in {
            let i = 2 * (row * units + k / 32) + (k % 32) / 16;
            let e = k % 16;
            got.push([
                f32::from_bits(bits[32 * i + e]),
                f32::from_bits(bits[32 * i + 16 + e]),
                values[row * n_in + k],
            ]);
        }
    }
    got
}

#[test]
fn decode_half_matches_decode_unit_bit_for_bit() {
    let Some(gpu) = testutil::gpu() else { return };
    for (seed, f) in (90..).zip(GpuFormat::ALL) {
        // Whole blocks, and for the formats of one weight a block a partial last unit whose
        // rows start off word boundaries (F16, BF16: 2-byte offsets).
        let n_in = match f.block_weights() {
            1 => 2 * 32 + 17,
            b => 2 * b,
        };
        for (k, [half, unit, value]) in decode_both(gpu, f, 5, n_in, seed).iter().enumerate() {
            let at = format!("{f:?} 5x{n_in} weight {k}");
            assert_eq!(
                half.to_bits(),
                unit.to_bits(),
                "{at}: decode_half {half} decode_unit {unit}"
            );
            // Both read the weight the quant crate decodes (so the agreement is not vacuous),
            // within the f16 copy's bound on the decoding's roundings.
            let tol = 8.0 * U * f64::from(*value).abs();
            assert!(
                (f64::from(*half) - f64::from(*value)).abs() <= tol,
                "{at}: decoded {half}, the quant crate {value}"
            );
        }
    }
}
