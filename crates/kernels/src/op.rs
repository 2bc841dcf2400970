//! An op as a value: kernel key, parameter bytes, buffers and grid. Op wrappers (in `ops/`)
//! only build these; [`crate::Step`] turns a list of them into dispatches once.

use crate::kernel::Kernel;
use crate::pipeline::PipelineKey;
use crate::tensor::GpuBuffer;

/// The most workgroups one grid dimension may have on every WebGPU device.
pub const MAX_GROUPS_PER_DIM: u32 = 65535;

/// One dispatch, described by value.
#[derive(Debug, Clone)]
pub struct Op {
    /// The pipeline it runs.
    pub key: PipelineKey,
    /// The parameter struct's bytes (a `bytemuck::Pod` with WGSL layout), bound at binding 0.
    pub params: Vec<u8>,
    /// Buffers for bindings 1.., in the order of the kernel's binding table.
    pub buffers: Vec<GpuBuffer>,
    /// Workgroups in x, y, z.
    pub grid: [u32; 3],
}

impl Op {
    /// An op of `kernel` with `workgroup_size` invocations a workgroup, parameters
    /// `params`, `buffers` at bindings 1.. and `grid` workgroups (the key's other overrides
    /// unset).
    pub fn new<P: bytemuck::Pod>(
        kernel: impl Into<Kernel>,
        workgroup_size: u32,
        params: &P,
        buffers: &[&GpuBuffer],
        grid: [u32; 3],
    ) -> Op {
        Op {
            key: PipelineKey::new(kernel, workgroup_size),
            params: bytemuck::bytes_of(params).to_vec(),
            buffers: buffers.iter().map(|&b| b.clone()).collect(),
            grid,
        }
    }
}

/// A grid of `n` workgroups laid out as x * y with x <= 65535; kernels compute their linear
/// workgroup index as `wid.y * nwg.x + wid.x` and return when it is `>= n`.
pub fn grid_1d(n: usize) -> [u32; 3] {
    let n = n.max(1) as u64;
    let max = u64::from(MAX_GROUPS_PER_DIM);
    if n <= max {
        [n as u32, 1, 1]
    } else {
        let y = n.div_ceil(max);
        [n.div_ceil(y) as u32, y as u32, 1]
    }
}
