//! What the weight kernels (matvec, matmul) do with an output row's dot product, and where
//! they put it: store it, or add a bias first (Qwen 2's q/k/v projections), so
//! `linear(W, x) + b` is one dispatch; into one output, or split over several (the rows of a
//! stacked weight, q|k|v or gate|up, each into its own place: [`crate::ops::split`]).
//!
//! WGSL: the value file `common/out_store.wgsl` or `common/out_bias.wgsl`, each defining
//! `y_out(row, sum)`, and the place file `common/out_one.wgsl` or `common/out_split.wgsl`,
//! each defining `w_row(r)` (the chunk row that dispatch row `r` reads) and
//! `y_index(r, t, one)` (where row `r` of token `t` lands; `one` is the kernel's own index
//! for one output). The kernel's skeleton calls them where it addresses a weight row and
//! where y is stored. The one-output file returns `r` and `one`, so that variant does the
//! arithmetic it did before the split existed. The bias is binding 5 and only its file
//! declares it, so the variant without a bias binds and reads nothing more. Its parameter is
//! `bias_offset` in the kernel's params: the bias view's offset plus the weight chunk's
//! first row (a weight split into chunks indexes the bias by global row).
//!
//! The sum is finished in f32 and then the bias added (one more rounding): the value a
//! separate `add_rows` after the product gave, bit for bit (`matvec::tests`). As a bound,
//! the bias is one more term of each row's sum (`bias_bound`, with the `parity` feature).

use crate::shader::{BindingKind, ShaderFile, WEIGHT_KERNEL_BINDINGS, shader_file};

/// A weight kernel's output epilogue (part of its [`crate::Kernel`] key): what is stored
/// (the sum, or the sum plus a bias) and where (one output, or rows split over several).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Epilogue {
    /// `y[r] = sum + bias[r]` (else `y[r] = sum`).
    pub bias: bool,
    /// Rows split over up to [`crate::ops::split::MAX_OUTPUTS`] outputs, from a row range of
    /// the weight ([`crate::ops::split`]); else every row of the chunk into one output.
    pub split: bool,
}

static OUT_STORE: ShaderFile = shader_file!("common/out_store.wgsl");
static OUT_BIAS: ShaderFile = shader_file!("common/out_bias.wgsl");
static OUT_ONE: ShaderFile = shader_file!("common/out_one.wgsl");
static OUT_SPLIT: ShaderFile = shader_file!("common/out_split.wgsl");

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
    /// `y[r] = sum`, one output.
    pub const STORE: Epilogue = Epilogue {
        bias: false,
        split: false,
    };
    /// `y[r] = sum + bias[r]`, one output.
    pub const BIAS: Epilogue = Epilogue {
        bias: true,
        split: false,
    };

    /// Every epilogue: with and without a bias, one output or split.
    pub const ALL: [Epilogue; 4] = [
        Epilogue::STORE,
        Epilogue::BIAS,
        Epilogue {
            bias: false,
            split: true,
        },
        Epilogue {
            bias: true,
            split: true,
        },
    ];

    /// The files defining `y_out` (the value) and `w_row` / `y_index` (the place).
    pub(crate) fn files(self) -> [&'static ShaderFile; 2] {
        let value = if self.bias { &OUT_BIAS } else { &OUT_STORE };
        let place = if self.split { &OUT_SPLIT } else { &OUT_ONE };
        [value, place]
    }

    /// The bindings of a weight kernel with a vector input (x at 2) and this epilogue (the
    /// split outputs share y's binding: they are places in one tensor).
    pub(crate) fn bindings(self) -> &'static [BindingKind] {
        if self.bias {
            BIAS_BINDINGS
        } else {
            WEIGHT_KERNEL_BINDINGS
        }
    }

    /// What the program name says of it (`matvec_bias_q8_0`, `matmul_bias_split_q4_k`).
    pub(crate) fn infix(self) -> &'static str {
        match (self.bias, self.split) {
            (false, false) => "",
            (true, false) => "_bias",
            (false, true) => "_split",
            (true, true) => "_bias_split",
        }
    }
}

/// The bound of an output `sum_i w_i x_i + b` summed in f32 in any order, with
/// `abs = sum_i |w_i x_i|`: `(n_in + 5) u (abs + |b|)`. The bias is one more term (n_in + 1
/// additions err by at most (n_in + 1) u sum |terms|), and the matvec's 4 ulp of slack for
/// decoding a weight stay.
#[cfg(any(test, feature = "parity"))]
pub fn bias_bound(n_in: usize, abs: f64, bias: f64) -> f64 {
    (n_in + 5) as f64 * crate::parity::U * (abs + bias.abs())
}
