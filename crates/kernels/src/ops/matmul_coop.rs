//! The prompt matmul on the tensor cores: `matmul/matmul_coop.wgsl`, the kernel
//! [`super::matmul::Matmul`] picks on a device with [`crate::Caps::coop_f16`]. Same contract,
//! tiles and staging as the f32 kernel; the staged weights and inputs are rounded to f16 and
//! multiplied by 16 x 16 x 16 cooperative matrices with f32 accumulators. This file holds its
//! programs, its `parity` submodule the checks. The parity checks (`CHECK`, `EXACT_CHECK`)
//! need cooperative matrices (an NVIDIA GPU; lavapipe has none, so there they skip and say
//! so). The unit tests `body_*` run the same kernel body everywhere: on a device without
//! cooperative matrices over the plain-arithmetic ops of `common/coop_emul.wgsl` and
//! `matmul/coop_io_emul.wgsl`, which checks the staging, the tile addressing, the quarters and
//! both stores on lavapipe, though not the tensor cores themselves nor the layouts of their
//! loads (the emulation encodes our reading of them).
//!
//! The bound, per output `y = sum_i w_i x_i` (n = n_in terms, u = 2^-24):
//! - Rounding to f16: WGSL leaves the direction to the implementation, so a normal v becomes
//!   one of its two f16 neighbours, off by less than one f16 ulp, `e(v) = 2^-10 |v|`; and
//!   Vulkan lets a device flush f16 subnormals, so below the smallest normal (2^-14; the test
//!   uses 2^-13, see below) v may become 0 or either subnormal neighbour (spaced 2^-24):
//!   `e(v) = |v| + 2^-24`. A weight is first decoded in f32, which may differ from the quant
//!   crate's by a few roundings (matvec's `4u |w|`; the doubled threshold keeps that from
//!   crossing it), so `e_w = e(|w|) + 2^-21 |w|` and `e_x = e(|x|)`.
//! - Each product then errs by `|w| e_x + |x| e_w + e_w e_x`; the f16 x f16 product itself is
//!   exact in f32 (22 significant bits).
//! - Summation on the tensor cores: neither Vulkan nor NVIDIA specify it; measurements of
//!   NVIDIA's tensor cores (Fasi et al., 2021) show exact products and an f32 sum of a chunk of
//!   products plus the accumulator, each aligned to the largest exponent with truncation.
//!   Modelled so, a chunk of c products loses less than one f32 ulp of its largest magnitude
//!   per shifted term and once more at normalisation: `(c + 1) 2^-23 S` with S the sum of the
//!   magnitudes, so n terms lose at most `(n / c)(c + 1) 2u S <= 4 n u S` for any c >= 1.
//!   With the f32 rounding of the reference (u S): `(4n + 1) u sum_i (|w_i| + e_w)(|x_i| + e_x)`.
//!
//! The check `EXACT_CHECK` removes the rounding: F16 weights and inputs that are f16 values,
//! so every conversion is exact and only the summation remains, `(4n + 1) u sum |w_i x_i|`,
//! plus `|w_i x_i|` for a product with a subnormal factor (which may be flushed): any staging
//! or indexing error (a wrong row, token, half or padding) is orders of magnitude beyond it.

use crate::format::GpuFormat;
use crate::kernel::KernelFamily;
use crate::ops::epilogue::Epilogue;
use crate::ops::matmul::{Tile, program_with};
use crate::pipeline::PipelineKey;
use crate::shader::{COOP_EMUL, COOP_OPS, Program, ShaderFile, shader_file};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, EXACT_CHECK};
#[cfg(any(test, feature = "parity"))]
pub(crate) use parity::{EXACT, ROUNDED, coop_device, f16_err};

static BODY: ShaderFile = shader_file!("matmul/matmul_coop.wgsl");
/// The weight staging and the partial-tile store, shared with [`crate::ops::matmul_small_m`].
pub(crate) static STAGE: ShaderFile = shader_file!("matmul/coop_stage.wgsl");
/// `store_partial`: the tensor-core products' store of a tile not whole inside one output.
pub(crate) static STORE_PARTIAL: ShaderFile = shader_file!("matmul/store_partial.wgsl");
/// The body's coop loads and stores (after [`COOP_OPS`]).
pub(crate) static IO: ShaderFile = shader_file!("matmul/coop_io.wgsl");
/// The same in plain arithmetic (after [`COOP_EMUL`]): the body runs on devices without
/// tensor cores (tests).
pub(crate) static IO_EMULATED: ShaderFile = shader_file!("matmul/coop_io_emul.wgsl");

/// The tensor-core prompt matmul over a weight of one format, with one epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatmulCoopKernel(pub GpuFormat, pub Epilogue);

impl MatmulCoopKernel {
    /// The tensor-core program, or with `emulated` its body over emulated coop ops (needs
    /// only SHADER_F16; what a device without cooperative matrices builds).
    fn program_with(self, emulated: bool) -> Program {
        let MatmulCoopKernel(f, out) = self;
        if emulated {
            program_with(
                "matmul_coop_emulated",
                &[&COOP_EMUL, &IO_EMULATED, &STAGE, &STORE_PARTIAL, &BODY],
                f,
                out,
            )
        } else {
            program_with(
                "matmul_coop",
                &[&COOP_OPS, &IO, &STAGE, &STORE_PARTIAL, &BODY],
                f,
                out,
            )
        }
    }
}

impl KernelFamily for MatmulCoopKernel {
    fn variants() -> Vec<MatmulCoopKernel> {
        let formats = crate::shader::weight_formats().iter();
        formats
            .flat_map(|&f| Epilogue::ALL.map(|out| MatmulCoopKernel(f, out)))
            .collect()
    }

    fn program(self) -> Program {
        self.program_with(false)
    }

    fn emulated_program(self) -> Option<Program> {
        Some(self.program_with(true))
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        [Tile::Small, Tile::Wide]
            .map(|t| PipelineKey::new(self, t.workgroup()))
            .to_vec()
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK, EXACT_CHECK, crate::ops::split::MATMUL_COOP_CHECK]
    }
}
