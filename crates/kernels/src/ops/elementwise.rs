//! Elementwise ops over f32 words: in-place add (the residual; a bias row added to every row)
//! and copy.
//!
//! WGSL: `elementwise/add.wgsl`, `elementwise/copy.wgsl`. 256 invocations per workgroup, one
//! element each.

use crate::device::Gpu;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AddParams {
    pub n: u32,
    pub dst_offset: u32,
    pub src_offset: u32,
    /// `src` is read at `i % src_period` (n for a plain add, the row length for a bias).
    pub src_period: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CopyParams {
    pub n: u32,
    pub dst_offset: u32,
    pub src_offset: u32,
    pub _pad: u32,
}

static ADD: ShaderFile = shader_file!("elementwise/add.wgsl");
static COPY: ShaderFile = shader_file!("elementwise/copy.wgsl");

const ADD_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];
const COPY_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

pub const WORKGROUP: u32 = 256;

/// The elementwise kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElementwiseKernel {
    /// `dst += src` (src repeating with a period: bias rows).
    Add,
    /// `dst = src`.
    Copy,
}

impl KernelFamily for ElementwiseKernel {
    fn variants() -> Vec<ElementwiseKernel> {
        vec![ElementwiseKernel::Add, ElementwiseKernel::Copy]
    }

    fn program(self) -> Program {
        match self {
            ElementwiseKernel::Add => Program {
                name: "add".to_string(),
                files: vec![&ADD],
                entry: "main",
                bindings: ADD_BINDINGS,
                params_size: size_of::<AddParams>(),
            },
            ElementwiseKernel::Copy => Program {
                name: "copy".to_string(),
                files: vec![&COPY],
                entry: "main",
                bindings: COPY_BINDINGS,
                params_size: size_of::<CopyParams>(),
            },
        }
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<Check> {
        vec![ADD_CHECK, COPY_CHECK]
    }
}

fn add_op(dst: View<'_>, src: View<'_>, n: usize, period: usize) -> Result<Op, GpuError> {
    dst.check("add dst", n)?;
    src.check("add src", period.min(n))?;
    let params = AddParams {
        n: n as u32,
        dst_offset: dst.offset as u32,
        src_offset: src.offset as u32,
        src_period: period.max(1) as u32,
    };
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    Ok(Op::new(
        ElementwiseKernel::Add,
        WORKGROUP,
        &params,
        &[&dst.t.buf, &src.t.buf],
        grid,
    ))
}

/// `dst[..n] += src[..n]`; `dst` and `src` must be different tensors.
pub fn add_inplace(dst: View<'_>, src: View<'_>, n: usize) -> Result<Op, GpuError> {
    add_op(dst, src, n, n)
}

/// `dst[r * n + i] += bias[i]` for `n_rows` rows of `n` (Qwen2's q/k/v biases).
pub fn add_rows(dst: View<'_>, bias: View<'_>, n_rows: usize, n: usize) -> Result<Op, GpuError> {
    add_op(dst, bias, n_rows * n, n)
}

/// `dst[..n] = src[..n]` (any 4-byte elements); `dst` and `src` must be different tensors.
pub fn copy(src: View<'_>, dst: View<'_>, n: usize) -> Result<Op, GpuError> {
    src.check("copy src", n)?;
    dst.check("copy dst", n)?;
    let params = CopyParams {
        n: n as u32,
        dst_offset: dst.offset as u32,
        src_offset: src.offset as u32,
        _pad: 0,
    };
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    Ok(Op::new(
        ElementwiseKernel::Copy,
        WORKGROUP,
        &params,
        &[&src.t.buf, &dst.t.buf],
        grid,
    ))
}

/// CPU reference of [`add_inplace`] and [`add_rows`]: `dst[i] += src[i % src.len()]`.
pub fn add_ref(dst: &mut [f32], src: &[f32]) {
    let p = src.len();
    dst.iter_mut()
        .enumerate()
        .for_each(|(i, d)| *d += src[i % p]);
}

/// Tolerance: exact. One f32 addition is correctly rounded on both sides.
pub const ADD_CHECK: Check = Check {
    name: "add / add_rows",
    tolerance: "exact",
    case: add_case,
};

fn add_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = rng.range(1, 700);
    let rows = if rng.bool() { 1 } else { rng.range(1, 6) };
    let off = rng.range(0, 5);
    let a = random_f32(rows * n + off, rng.next_u64());
    let s = random_f32(n + 1, rng.next_u64());
    let at = GpuTensor::from_f32(gpu, &[a.len()], &a);
    let st = GpuTensor::from_f32(gpu, &[n + 1], &s);
    let op = if rows == 1 {
        add_inplace(View::at(&at, off), View::at(&st, 1), n)?
    } else {
        add_rows(View::at(&at, off), View::at(&st, 1), rows, n)?
    };
    let y: Vec<f32> = run_read(gpu, vec![op], &at, 0, a.len())?;
    let mut want = a.clone();
    add_ref(&mut want[off..], &s[1..]);
    let mut c = Compare::default();
    for (i, (g, w)) in y.iter().zip(&want).enumerate() {
        c.exact(f64::from(*g), f64::from(*w), || {
            format!("{rows}x{n} elem {i}")
        });
    }
    Ok(c)
}

/// Tolerance: exact (words are moved, not computed).
pub const COPY_CHECK: Check = Check {
    name: "copy",
    tolerance: "exact",
    case: copy_case,
};

fn copy_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = rng.range(1, 3000);
    let (so, d_o) = (rng.range(0, 5), rng.range(0, 5));
    let s = random_f32(n + so, rng.next_u64());
    let st = GpuTensor::from_f32(gpu, &[n + so], &s);
    let dt = GpuTensor::from_f32(gpu, &[n + d_o], &vec![7.0; n + d_o]);
    let y: Vec<f32> = run_read(
        gpu,
        vec![copy(View::at(&st, so), View::at(&dt, d_o), n)?],
        &dt,
        0,
        n + d_o,
    )?;
    let mut c = Compare::default();
    for i in 0..n + d_o {
        let want = if i < d_o { 7.0 } else { s[so + i - d_o] };
        c.exact(f64::from(y[i]), f64::from(want), || {
            format!("copy {n} elem {i}")
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use crate::testutil;

    #[test]
    fn add_matches_reference() {
        testutil::parity("add / add_rows", 6, 21);
    }

    #[test]
    fn copy_matches_reference() {
        testutil::parity("copy", 3, 22);
    }
}
