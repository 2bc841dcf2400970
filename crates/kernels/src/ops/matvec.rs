//! `y = W x` with `W` a GGUF weight (any [`GpuFormat`]) kept in its block layout.
//!
//! WGSL: `matvec/matvec.wgsl` (skeleton), `matvec/x_plain.wgsl` (the input, read through
//! `x4`), `matvec/reduce_{plain,subgroup}.wgsl` (entry point),
//! `common/blocks.wgsl`, `formats/<type>.wgsl` (block constants) and `matvec/dot_<type>.wgsl`
//! (the per-format `part_dot`). A workgroup of 128 takes 4 rows; lanes work in groups of
//! `PARTS` on one step of the row (4 or 8 lanes per unit of 32 weights; 32 lanes per Q4_K /
//! Q6_K super-block), neighbouring lanes reading neighbouring words of the same block, so a
//! subgroup's loads are contiguous (llama.cpp's Vulkan layout). Weights keep GGUF's layout.
//! The subgroup entry is chosen when the device has `Features::SUBGROUP`. One dispatch per
//! weight chunk.

use crate::device::Gpu;
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::op::{Op, grid_1d};
use crate::parity::data::{Rng, n_in_step, random_f32, random_weight};
use crate::parity::{Check, Compare, U, run_read};
use crate::pipeline::Kernel;
use crate::shader::{BLOCKS, Program, ShaderFile, WEIGHT_KERNEL_BINDINGS, shader_file};
use crate::tensor::{GpuTensor, GpuWeight, View, WeightShape};

/// Parameters of one matvec dispatch (WGSL `Params` in `matvec/matvec.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MatvecParams {
    pub n_in: u32,
    /// Rows in this chunk.
    pub n_rows: u32,
    pub row_bytes: u32,
    pub x_offset: u32,
    /// Where this chunk's first row lands in `y`.
    pub y_offset: u32,
    pub _pad: [u32; 3],
}

static SKELETON: ShaderFile = shader_file!("matvec/matvec.wgsl");
static X_PLAIN: ShaderFile = shader_file!("matvec/x_plain.wgsl");
static REDUCE_PLAIN: ShaderFile = shader_file!("matvec/reduce_plain.wgsl");
static REDUCE_SUBGROUP: ShaderFile = shader_file!("matvec/reduce_subgroup.wgsl");
// `const`, not `static`: `dot_files` returns promoted `&'static` slices of them.
const ROWS_EACH: ShaderFile = shader_file!("matvec/rows_each.wgsl");
const DOT_F32: ShaderFile = shader_file!("matvec/dot_f32.wgsl");
const DOT_F16: ShaderFile = shader_file!("matvec/dot_f16.wgsl");
const DOT_Q8_0: ShaderFile = shader_file!("matvec/dot_q8_0.wgsl");
const DOT_Q4_0: ShaderFile = shader_file!("matvec/dot_q4_0.wgsl");
const DOT_Q4_1: ShaderFile = shader_file!("matvec/dot_q4_1.wgsl");
const DOT_BF16: ShaderFile = shader_file!("matvec/dot_bf16.wgsl");
const DOT_Q5_0: ShaderFile = shader_file!("matvec/dot_q5_0.wgsl");
const DOT_Q5_1: ShaderFile = shader_file!("matvec/dot_q5_1.wgsl");
const DOT_Q2K: ShaderFile = shader_file!("matvec/dot_q2_k.wgsl");
const DOT_Q3K: ShaderFile = shader_file!("matvec/dot_q3_k.wgsl");
const DOT_Q4K: ShaderFile = shader_file!("matvec/dot_q4_k.wgsl");
const DOT_Q5K: ShaderFile = shader_file!("matvec/dot_q5_k.wgsl");
const DOT_Q6K: ShaderFile = shader_file!("matvec/dot_q6_k.wgsl");

/// The format's `rows_dot4` (one part of a step of 4 rows, dotted with x): its own, or
/// `rows_each.wgsl` over its one-row `part_dot`.
fn dot_files(f: GpuFormat) -> &'static [&'static ShaderFile] {
    match f {
        GpuFormat::F32 => &[&ROWS_EACH, &DOT_F32],
        GpuFormat::F16 => &[&ROWS_EACH, &DOT_F16],
        GpuFormat::Q8_0 => &[&DOT_Q8_0],
        GpuFormat::Q4_0 => &[&DOT_Q4_0],
        GpuFormat::Q4_1 => &[&DOT_Q4_1],
        GpuFormat::Bf16 => &[&ROWS_EACH, &DOT_BF16],
        GpuFormat::Q5_0 => &[&DOT_Q5_0],
        GpuFormat::Q5_1 => &[&ROWS_EACH, &DOT_Q5_1],
        GpuFormat::Q2K => &[&ROWS_EACH, &DOT_Q2K],
        GpuFormat::Q3K => &[&ROWS_EACH, &DOT_Q3K],
        GpuFormat::Q4K => &[&DOT_Q4K],
        GpuFormat::Q5K => &[&ROWS_EACH, &DOT_Q5K],
        GpuFormat::Q6K => &[&DOT_Q6K],
    }
}

/// The most invocations per workgroup. The H100 sweep (docs/PERF.md) put 128 ahead of 32, 64
/// and 256 for rows long enough to give every lane a step.
pub const MAX_WORKGROUP: u32 = 128;
/// Rows per workgroup (`R` in the WGSL).
pub const ROWS: usize = 4;

/// Invocations per workgroup for rows of `n_in` weights: one lane per (step, part) of a row,
/// rounded up to a power of two, between 32 (a subgroup) and [`MAX_WORKGROUP`]. Shorter rows
/// would otherwise leave lanes idle (Q6_K at n_in 4096 has 16 steps of 4 parts). Only speed
/// depends on it: the kernel loops over whatever steps its lanes do not cover.
pub fn workgroup_size(f: GpuFormat, n_in: usize) -> u32 {
    let (parts, step_units) = lane_layout(f);
    let lane_steps = n_in.div_ceil(32).div_ceil(step_units) * parts;
    (lane_steps.next_power_of_two() as u32).clamp(32, MAX_WORKGROUP)
}

/// (`PARTS`, `STEP_UNITS`) of the format's dot file, read from its WGSL (the one source).
fn lane_layout(f: GpuFormat) -> (usize, usize) {
    let source = dot_files(f).last().expect("a dot file").source;
    let constant = |name: &str| -> usize {
        let line = source
            .lines()
            .find(|l| l.starts_with(&format!("const {name}: u32 = ")))
            .unwrap_or_else(|| panic!("{name} in the dot file of {f:?}"));
        let value = line.rsplit("= ").next().unwrap_or("");
        value
            .trim_end_matches(';')
            .trim_end_matches('u')
            .parse()
            .expect("a u32 literal")
    };
    (constant("PARTS"), constant("STEP_UNITS"))
}

pub(crate) fn program(f: GpuFormat, subgroup: bool) -> Program {
    let (reduce, suffix) = if subgroup {
        (&REDUCE_SUBGROUP, "_sg")
    } else {
        (&REDUCE_PLAIN, "")
    };
    Program {
        name: format!("matvec_{}{suffix}", f.name()),
        files: [&SKELETON, &X_PLAIN, reduce, &BLOCKS]
            .into_iter()
            .chain(f.decoder().iter().copied())
            .chain(dot_files(f).iter().copied())
            .collect(),
        entry: "main",
        bindings: WEIGHT_KERNEL_BINDINGS,
        params_size: size_of::<MatvecParams>(),
    }
}

/// `y[y.offset..][..n_out] = W x[x.offset..][..n_in]`: one op per weight chunk.
pub fn matvec(w: &GpuWeight, x: View<'_>, y: View<'_>) -> Result<Vec<Op>, GpuError> {
    let s = w.shape;
    x.check("matvec x", s.n_in)?;
    y.check("matvec y", s.n_out)?;
    let ops = w.chunks.iter().map(|c| {
        let params = MatvecParams {
            n_in: s.n_in as u32,
            n_rows: c.n_rows as u32,
            row_bytes: s.format.row_bytes(s.n_in) as u32,
            x_offset: x.offset as u32,
            y_offset: (y.offset + c.first_row) as u32,
            _pad: [0; 3],
        };
        let buffers = [&c.buf, &x.t.buf, &y.t.buf, &c.buf];
        Op::new(
            Kernel::Matvec(s.format),
            workgroup_size(s.format, s.n_in),
            &params,
            &buffers,
            grid_1d(c.n_rows.div_ceil(ROWS)),
        )
    });
    Ok(ops.collect())
}

/// CPU reference: `y = W x` in f64 over the dequantized rows (`w` is `n_out * n_in`, row-major).
/// Also returns `sum_i |w_i x_i|` per row, the scale of the rounding error bound.
pub fn matvec_ref(w: &[f32], x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    w.chunks_exact(x.len())
        .map(|row| {
            let dot: f64 = row
                .iter()
                .zip(x)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum();
            let abs: f64 = row
                .iter()
                .zip(x)
                .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
                .sum();
            (dot as f32, abs as f32)
        })
        .unzip()
}

/// Tolerance: |gpu - ref| <= (n_in + 4) * 2^-24 * sum_i |w_i x_i|. The GPU sums n_in f32
/// products in another order (strided partial sums, then a tree), possibly with FMA; any
/// order of n f32 additions errs by at most n * u * sum |terms| (u = 2^-24), and decoding a
/// weight (d * sc * q - m) adds a few roundings more. The reference is f64.
pub const CHECK: Check = Check {
    name: "matvec",
    tolerance: "(n_in+4)*2^-24*sum|w_i x_i|",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let format = rng.pick(&GpuFormat::ALL);
    let n_out = rng.range(1, 40);
    // Up to 40 units of 32 weights: rows shorter and longer than one trip of the workgroup.
    let n_blocks = rng.range(1, (40 * 32 / n_in_step(format)).max(2));
    let chunk_rows = rng.range(1, 50);
    compare(gpu, format, n_out, n_blocks, chunk_rows, rng.next_u64())
}

/// Runs one matvec of `n_out` rows of `n_blocks` blocks (weight split every `chunk_rows`).
pub(crate) fn compare(
    gpu: &Gpu,
    format: GpuFormat,
    n_out: usize,
    n_blocks: usize,
    chunk_rows: usize,
    seed: u64,
) -> Result<Compare, GpuError> {
    let n_in = n_blocks * n_in_step(format);
    let (bytes, w) = random_weight(format, n_out, n_in, seed);
    let x = random_f32(n_in, seed ^ 1);
    let shape = WeightShape {
        format,
        n_in,
        n_out,
    };
    let wt = GpuWeight::upload_chunked(gpu, shape, &bytes, chunk_rows)?;
    let xt = GpuTensor::from_f32(gpu, &[n_in], &x);
    let yt = GpuTensor::zeros(gpu, &[n_out + 3], crate::Dtype::F32);
    let ops = matvec(&wt, (&xt).into(), View::at(&yt, 3))?;
    let y: Vec<f32> = run_read(gpu, ops, &yt, 3, n_out)?;
    let (want, abs) = matvec_ref(&w, &x);
    let mut c = Compare::default();
    for r in 0..n_out {
        let bound = (n_in + 4) as f64 * U * f64::from(abs[r]);
        c.add(f64::from(y[r]), f64::from(want[r]), bound, || {
            format!("{format:?} {n_out}x{n_in} row {r}")
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn matvec_matches_reference() {
        testutil::parity("matvec", 8, 1);
    }

    /// Every format once, with rows split over several chunks.
    #[test]
    fn every_format() {
        let Some(gpu) = testutil::gpu() else { return };
        for (i, f) in GpuFormat::ALL.into_iter().enumerate() {
            let c = compare(gpu, f, 13, 3, 5, 7 + i as u64).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }

    /// The entry point without subgroup operations, on a device opened without SUBGROUP.
    #[test]
    fn plain_reduction() {
        if testutil::gpu().is_none() {
            return;
        }
        let options = crate::OpenOptions {
            without: wgpu::Features::SUBGROUP,
            ..Default::default()
        };
        let filter = std::env::var("RULLAMA_ADAPTER").ok();
        let gpu = crate::Gpu::open_with_options(filter.as_deref(), options).unwrap();
        assert!(!gpu.caps.subgroup);
        let r = CHECK.run(&gpu, 6, 5);
        assert!(r.passed(), "{r}");
    }

    /// Every dot file states its lane layout in the form `workgroup_size` reads.
    #[test]
    fn lane_layouts_parse() {
        for f in GpuFormat::ALL {
            let (parts, step_units) = lane_layout(f);
            assert!(parts.is_power_of_two() && parts <= 32, "{f:?}");
            assert!(step_units == 1 || step_units == 8, "{f:?}");
        }
        assert_eq!(workgroup_size(GpuFormat::Q6K, 4096), 64);
        assert_eq!(workgroup_size(GpuFormat::Q8_0, 4096), 128);
        assert_eq!(workgroup_size(GpuFormat::Q4_0, 640), 32);
        assert!(
            SKELETON
                .source
                .contains(&format!("const R: u32 = {ROWS}u;"))
        );
    }

    /// F32/F16/BF16 rows whose length is not a multiple of 32 (the last unit is partial).
    #[test]
    fn float_partial_units() {
        let Some(gpu) = testutil::gpu() else { return };
        for f in [GpuFormat::F32, GpuFormat::F16, GpuFormat::Bf16] {
            let c = compare(gpu, f, 5, 37, 100, 3).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
