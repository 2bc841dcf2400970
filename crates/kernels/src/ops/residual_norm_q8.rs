//! `residual_norm` with y's q8 copy written as well: the decode matvecs that read y with
//! [`crate::ops::matvec::Input::Q8`] then need no `quantize_q8` dispatch of their own. Most
//! inputs of a decode step's products are such a y (the next block's norm), and decode of the
//! small models is bound by its number of dispatches.
//!
//! WGSL: the plain kernel's files (`norm/residual_norm.wgsl`, `norm/reduce.wgsl`) with the
//! hook `norm/q8_out.wgsl` in place of `norm/q8_none.wgsl`, and the q8 vector's per-block
//! rule `matvec/q8_block.wgsl`, which `quantize_q8` includes too. y is computed by the plain
//! kernel's code and rounded by quantize_q8's, so y equals `residual_norm`'s and the copy
//! equals `quantize_q8` of that y, bit for bit (the check below compares both exactly).
//!
//! One row (decode); n a multiple of 32 (whole blocks). In the kernel each invocation holds
//! y's elements `k * 256 + tid`, so a block of 32 is 32 neighbouring invocations of one slot:
//! the tile goes through workgroup memory 4 slots at a time and each invocation then packs 4
//! consecutive inputs into one word of each digit, the block's amax through workgroup memory
//! as in quantize_q8 (no subgroup size assumed).

use crate::error::GpuError;
use crate::op::Op;
use crate::ops::quantize::check_q8;
use crate::ops::residual_norm::{NormOut, ResidualNorm};
use crate::shader::{BindingKind, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::CHECK;

/// The hook that stores y's q8 copy after each tile of y.
pub(crate) static HOOK: ShaderFile = shader_file!("norm/q8_out.wgsl");

/// The plain kernel's `main_out` bindings (params, a, h, w_in, y, w_out), then q.
pub(crate) const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

impl ResidualNorm {
    /// [`ResidualNorm::op`] with the norm after the add, and y's q8 copy written to `q` as
    /// well (the layout of [`crate::ops::quantize`]: `q8_words(n)` words from a word offset
    /// that is a multiple of 4, in another tensor than a, h and y). One row; `n` a multiple
    /// of 32. One dispatch.
    pub fn op_q8(
        self,
        a: View<'_>,
        w_in: Option<&GpuTensor>,
        h: View<'_>,
        out: NormOut<'_>,
        q: View<'_>,
    ) -> Result<Op, GpuError> {
        if self.n_rows != 1 {
            return Err(GpuError::InvalidParams {
                op: "residual_norm q8",
                detail: format!("{} rows: the q8 output is for one (decode)", self.n_rows),
            });
        }
        check_q8("residual_norm q", q, self.n)?;
        self.build(a, w_in, h, Some(out), Some(q))
    }
}
