//! What the weight kernels (matvec, matmul) do with an output row's dot product: store it,
//! or add a bias first (Qwen 2's q/k/v projections), so `linear(W, x) + b` is one dispatch.
//!
//! WGSL: `common/out_store.wgsl` or `common/out_bias.wgsl`, each defining `y_out(row, sum)`;
//! the kernel's skeleton calls it where y is stored. The bias is binding 5 and only its file
//! declares it, so the variant without a bias binds and reads nothing more than before. Its
//! parameter is `bias_offset` in the kernel's params: the bias view's offset plus the weight
//! chunk's first row (a weight split into chunks indexes the bias by global row).
//!
//! The sum is finished in f32 and then the bias added (one more rounding): the value a
//! separate `add_rows` after the product gave, bit for bit (`matvec::tests`). As a bound,
//! the bias is one more term of each row's sum ([`bias_bound`]).

use crate::parity::U;
use crate::shader::{BindingKind, ShaderFile, WEIGHT_KERNEL_BINDINGS, shader_file};

/// A weight kernel's output epilogue (part of its [`crate::Kernel`] key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// `y[r] = sum`.
    Store,
    /// `y[r] = sum + bias[r]`.
    Bias,
}

static OUT_STORE: ShaderFile = shader_file!("common/out_store.wgsl");
static OUT_BIAS: ShaderFile = shader_file!("common/out_bias.wgsl");

/// [`WEIGHT_KERNEL_BINDINGS`] and the bias at 5.
pub const BIAS_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
];

impl Epilogue {
    pub const ALL: [Epilogue; 2] = [Epilogue::Store, Epilogue::Bias];

    /// The file defining `y_out`.
    pub(crate) fn file(self) -> &'static ShaderFile {
        match self {
            Epilogue::Store => &OUT_STORE,
            Epilogue::Bias => &OUT_BIAS,
        }
    }

    /// The bindings of a weight kernel with a vector input (x at 2) and this epilogue.
    pub(crate) fn bindings(self) -> &'static [BindingKind] {
        match self {
            Epilogue::Store => WEIGHT_KERNEL_BINDINGS,
            Epilogue::Bias => BIAS_BINDINGS,
        }
    }

    /// What the program name says of it (`matvec_bias_q8_0`).
    pub(crate) fn infix(self) -> &'static str {
        match self {
            Epilogue::Store => "",
            Epilogue::Bias => "_bias",
        }
    }
}

/// The bound of an output `sum_i w_i x_i + b` summed in f32 in any order, with
/// `abs = sum_i |w_i x_i|`: `(n_in + 5) u (abs + |b|)`. The bias is one more term (n_in + 1
/// additions err by at most (n_in + 1) u sum |terms|), and the matvec's 4 ulp of slack for
/// decoding a weight stay.
pub fn bias_bound(n_in: usize, abs: f64, bias: f64) -> f64 {
    (n_in + 5) as f64 * U * (abs + bias.abs())
}
