//! The training attention on the tensor cores: the contracts of
//! [`crate::ops::attention_train`] (the forward: o and lse, or with split keys each split's
//! partial results for the same combine) with q, k, v and the softmax weights rounded to f16
//! and the products on 16 x 16 x 16 cooperative matrices with f32 sums
//! (`attention/train_forward_coop.wgsl`), and the backward's two passes
//! ([`crate::ops::attention_backward`]'s contract, with q, k, v, do, P and ds rounded to f16:
//! `attention/train_backward_dq_coop.wgsl` and `attention/train_backward_dkdv_coop.wgsl`, do
//! scaled by 2^8 so that a mean loss's gradients stay among f16's normals; the dk/dv header
//! says why). Picked where the device has [`Caps::coop_f16`], the caller allows the tensor
//! cores and the shape fits ([`TrainAttention::coop_fits`]: dk = dv, one of [`HEAD_DIMS`]);
//! everywhere else the f32 kernels run, which stay the exact path (`--no-tensor-cores`).
//!
//! The forward and dq: a workgroup of 256 (8 subgroups of 32) takes 64 (row, head) pairs of
//! one kv head, holds their q (dq: and do) as A operands in registers (each subgroup 16 pairs'
//! rows over all of the dims) and walks the keys they see in blocks (32 keys, dq 16) staged as
//! f16 in workgroup memory, each staged key feeding 64 pairs. dk/dv: a workgroup of 256 takes
//! 32 key rows, holds their k and v, and walks the pairs that may see them in blocks of 16.
//! Each block's global reads overlap the products before it. The scores, the softmax's masks,
//! soft-cap and scale are the f32 kernel's plain code over the products. The forward walks the
//! keys twice (each pair's max and sum first, then P V with the final ones), since a
//! cooperative matrix cannot be rescaled by row.
//! On a device without cooperative matrices the same body runs over plain-arithmetic coop ops
//! (`common/coop_emul.wgsl`, `attention/coop_io_emul.wgsl`): what the parity check runs
//! on lavapipe.
//!
//! The bound (the parity check's): the f32 kernel's, with each score's dot product over q and
//! k rounded to f16 (`e(x) = 2^-10 |x|`, or `|x| + 2^-24` below 2^-13 where the device may flush
//! f16 subnormals: `ops::matmul_coop`'s rule) and summed on the tensor cores (`(4 dk + 5) u`
//! instead of `(dk + 5) u`), four more rescalings a pair (the partial maxima combined), and
//! for o the weights and v rounded to f16 and their sum on the tensor cores: `sum_j e16(w_j)
//! (max|v| + e_v) + e_v + (4n + 1) u (1 + sum_j e16(w_j)) (max|v| + e_v)`.

use crate::device::Caps;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::ops::attention_backward;
use crate::ops::attention_train::{
    self, PARAMS, SPLIT_SHARE, TrainAttention, TrainAttentionParams,
};
use crate::pipeline::PipelineKey;
use crate::shader::{COOP_EMUL, COOP_OPS, Program, ShaderFile, shader_file};
use crate::tensor::GpuBuffer;

#[cfg(any(test, feature = "parity"))]
pub(crate) mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{DKDV_CHECK, DQ_CHECK, FORWARD_CHECK};

/// The head dimensions (dk = dv) the tensor-core kernels take (`HD`, an override).
pub const HEAD_DIMS: [usize; 3] = [64, 128, 256];

/// Every program's workgroup: eight subgroups of 32 (`WG` in their programs;
/// `Caps::coop_f16` holds only where the subgroup is 32 wide).
const WORKGROUP: u32 = 256;

/// (Row, head) pairs of a forward or dq workgroup (`TP` in their programs).
const PAIR_TILE: usize = 64;

/// Key rows of a dk/dv workgroup (`KT` in attention/train_backward_dkdv_coop.wgsl).
const KEY_TILE: usize = 32;

/// The reads of q, k and v rows every program makes.
static ROWS: ShaderFile = shader_file!("attention/train_coop_rows.wgsl");
/// The programs' coop loads and stores (after [`COOP_OPS`]), and the same in plain arithmetic
/// (after [`COOP_EMUL`]): the bodies run on devices without tensor cores (tests). The prompt
/// attention's program (`ops::attention_coop`) shares them.
pub(crate) static IO: ShaderFile = shader_file!("attention/coop_io.wgsl");
pub(crate) static IO_EMULATED: ShaderFile = shader_file!("attention/coop_io_emul.wgsl");
static FORWARD: ShaderFile = shader_file!("attention/train_forward_coop.wgsl");
/// The 64-row forward tile the training forward shares with the prompt attention.
pub(crate) static FORWARD_TILE: ShaderFile = shader_file!("attention/coop_forward_tile.wgsl");
/// `staged` and `store_block`: the forward tile's and dq's next rows on their way to `tile`.
pub(crate) static STAGE: ShaderFile = shader_file!("attention/coop_stage.wgsl");
/// The backward passes' inputs and do's scale.
static INPUTS: ShaderFile = shader_file!("attention/train_backward_coop_inputs.wgsl");
static DQ: ShaderFile = shader_file!("attention/train_backward_dq_coop.wgsl");
static DKDV: ShaderFile = shader_file!("attention/train_backward_dkdv_coop.wgsl");

/// Which of the training attention's programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoopPass {
    /// o and lse (or a split's partial results): `attention_train_coop`.
    Forward,
    /// The backward's dq (or a split's partial sums): `attention_backward_dq_coop`.
    Dq,
    /// The backward's dk and dv (or a split's partial sums): `attention_backward_dkdv_coop`.
    DkDv,
}

/// A tensor-core training attention kernel: the pass and `HD` = dk = dv.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionTrainCoopKernel {
    /// The program.
    pub pass: CoopPass,
    /// `HD`: the head dimension.
    pub head_dim: u32,
}

impl AttentionTrainCoopKernel {
    /// The tensor-core program, or with `emulated` its body over emulated coop ops (needs
    /// only SHADER_F16; what a device without cooperative matrices builds, for tests).
    fn program_with(self, emulated: bool) -> Program {
        let (name, body, bindings) = match self.pass {
            CoopPass::Forward => ("attention_train_coop", &FORWARD, attention_train::BINDINGS),
            CoopPass::Dq => (
                "attention_backward_dq_coop",
                &DQ,
                attention_backward::BINDINGS_DQ,
            ),
            CoopPass::DkDv => (
                "attention_backward_dkdv_coop",
                &DKDV,
                attention_backward::BINDINGS_DKDV,
            ),
        };
        let (name, ops, io) = match emulated {
            true => (format!("{name}_emulated"), &COOP_EMUL, &IO_EMULATED),
            false => (name.to_string(), &COOP_OPS, &IO),
        };
        let mut files = vec![ops, io, &PARAMS, &SPLIT_SHARE, &ROWS];
        match self.pass {
            CoopPass::Forward => files.extend([&STAGE, &FORWARD_TILE]),
            CoopPass::Dq => files.extend([&INPUTS, &STAGE]),
            CoopPass::DkDv => files.push(&INPUTS),
        }
        files.push(body);
        Program {
            name,
            files,
            entry: "main",
            bindings,
            params_size: size_of::<TrainAttentionParams>(),
        }
    }
}

impl KernelFamily for AttentionTrainCoopKernel {
    /// Head dim 128 stands for every head dim (an override: one program for all).
    fn variants() -> Vec<AttentionTrainCoopKernel> {
        [CoopPass::Forward, CoopPass::Dq, CoopPass::DkDv]
            .into_iter()
            .map(|pass| AttentionTrainCoopKernel {
                pass,
                head_dim: 128,
            })
            .collect()
    }

    fn program(self) -> Program {
        self.program_with(false)
    }

    fn emulated_program(self) -> Option<Program> {
        Some(self.program_with(true))
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        vec![("HD", f64::from(self.head_dim))]
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![FORWARD_CHECK, DQ_CHECK, DKDV_CHECK]
    }
}

impl TrainAttention {
    /// Whether the tensor-core kernels take this shape: dk = dv, one of [`HEAD_DIMS`].
    pub fn coop_fits(&self) -> bool {
        self.dk == self.dv && HEAD_DIMS.contains(&self.dk)
    }

    /// Whether the ops of [`TrainAttention::forward_ops_on`] run on the tensor cores: the
    /// caller allows them (`tensor_cores`), the device has cooperative matrices and the shape
    /// fits.
    pub fn uses_tensor_cores(&self, caps: &Caps, tensor_cores: bool) -> bool {
        tensor_cores && caps.coop_f16 && self.coop_fits()
    }

    /// [`TrainAttention::forward_split_ops`] on a device with `caps`: on the tensor cores
    /// where [`TrainAttention::uses_tensor_cores`] says so (the same outputs, the same scratch
    /// and splits), else the f32 kernel.
    pub fn forward_ops_on(
        &self,
        caps: &Caps,
        tensor_cores: bool,
        b: attention_train::TrainAttentionForward<'_>,
        scratch: Option<crate::tensor::View<'_>>,
        splits: usize,
    ) -> Result<Vec<Op>, GpuError> {
        let coop = self.uses_tensor_cores(caps, tensor_cores);
        self.forward_ops_with(coop, b, scratch, splits)
    }

    /// [`GpuError::InvalidParams`] naming `op` for a shape the tensor-core kernels do not take.
    pub(crate) fn check_coop(&self, op: &'static str) -> Result<(), GpuError> {
        if self.coop_fits() {
            return Ok(());
        }
        Err(GpuError::InvalidParams {
            op,
            detail: format!(
                "dk {} dv {}: the tensor-core kernels need dk = dv, one of {HEAD_DIMS:?}",
                self.dk, self.dv
            ),
        })
    }

    /// The tensor-core forward's and dq pass's workgroups without splits: one per (tile of
    /// 64 (row, head) pairs, kv head). What their key splits should bring up to the device's
    /// fill, in place of [`TrainAttention::dq_workgroups`] where they run on the tensor cores.
    pub fn coop_pair_workgroups(&self) -> usize {
        (self.n * (self.n_head / self.n_kv)).div_ceil(PAIR_TILE) * self.n_kv
    }

    /// The tensor-core op of `pass` (the shape checked by [`TrainAttention::check_coop`]):
    /// one workgroup per tile of 64 pairs (forward, dq) or 32 key rows (dk/dv) of each kv
    /// head, per split (grid z).
    pub(crate) fn coop_op(
        &self,
        pass: CoopPass,
        params: &TrainAttentionParams,
        buffers: &[&GpuBuffer],
        splits: usize,
    ) -> Op {
        let pairs = self.n * (self.n_head / self.n_kv);
        let tiles = match pass {
            CoopPass::Forward | CoopPass::Dq => pairs.div_ceil(PAIR_TILE),
            CoopPass::DkDv => self.n.div_ceil(KEY_TILE),
        };
        let mut grid = grid_1d(tiles * self.n_kv);
        grid[2] = splits as u32;
        let kernel = AttentionTrainCoopKernel {
            pass,
            head_dim: self.dk as u32,
        };
        Op::new(kernel, WORKGROUP, params, buffers, grid)
    }
}
