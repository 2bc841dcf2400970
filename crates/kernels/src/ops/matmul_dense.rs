//! The prompt matmul on the tensor cores over F16 weights copied as they are stored:
//! `matmul/matmul_dense.wgsl`, the contract of [`super::matmul::Matmul`] for a weight in
//! [`GpuFormat::F16`] whose rows are whole units of 32 inputs. With nothing to decode while
//! staging, it takes larger tiles than [`super::matmul_coop`] ([`DenseTile`]): 128 or 256 rows
//! by 128 or 256 tokens, each subgroup up to 64 x 64 outputs. Its inputs are those of
//! `matmul_coop` (f16 values, f32 sums), so its bound and checks are that kernel's.
//!
//! Picked by naming its tile ([`super::matmul::Tile::Dense`]): the kernels bench measures it
//! beside the decoding kernel.

use crate::device::Caps;
use crate::format::GpuFormat;
use crate::kernel::KernelFamily;
use crate::ops::epilogue::Epilogue;
use crate::ops::matmul::program_with;
use crate::shader::{COOP_EMUL, COOP_OPS, Program, ShaderFile, shader_file};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::CHECK;

static BODY: ShaderFile = shader_file!("matmul/matmul_dense.wgsl");
static IO: ShaderFile = shader_file!("matmul/coop_io.wgsl");
static IO_EMULATED: ShaderFile = shader_file!("matmul/coop_io_emul.wgsl");

/// A dense kernel's tile: rows x tokens of a workgroup, its invocations, each subgroup's
/// share, and how many tiles workgroup memory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenseTile {
    /// 128 x 128, 256 invocations; a subgroup 32 rows x 64 tokens (8 accumulators).
    Square,
    /// 256 rows x 128 tokens, 256 invocations; a subgroup 64 x 64 (16 accumulators).
    Rows,
    /// 128 rows x 256 tokens, 256 invocations; a subgroup 64 x 64 (16 accumulators).
    Tokens,
    /// 128 x 128, 128 invocations; a subgroup 64 x 64; two stages (one barrier a unit).
    SquareStaged,
    /// 128 x 128, 256 invocations; a subgroup 32 x 64; two stages.
    SquareStaged8,
}

impl DenseTile {
    /// Every tile.
    pub const ALL: [DenseTile; 5] = [
        DenseTile::Square,
        DenseTile::Rows,
        DenseTile::Tokens,
        DenseTile::SquareStaged,
        DenseTile::SquareStaged8,
    ];

    /// Rows of a workgroup's tile.
    pub fn rows(self) -> usize {
        match self {
            DenseTile::Rows => 256,
            _ => 128,
        }
    }

    /// Tokens of a workgroup's tile.
    pub fn tokens(self) -> usize {
        match self {
            DenseTile::Tokens => 256,
            _ => 128,
        }
    }

    /// Invocations of a workgroup (subgroups of 32).
    pub fn workgroup(self) -> u32 {
        match self {
            DenseTile::SquareStaged => 128,
            _ => 256,
        }
    }

    /// 16-row accumulator blocks of one subgroup (its 16-token ones are always 4).
    fn row_blocks(self) -> usize {
        match self {
            DenseTile::Square | DenseTile::SquareStaged8 => 2,
            _ => 4,
        }
    }

    fn stages(self) -> usize {
        match self {
            DenseTile::SquareStaged | DenseTile::SquareStaged8 => 2,
            _ => 1,
        }
    }

    /// A name for programs and benches: rows x tokens, invocations, stages.
    pub fn name(self) -> String {
        format!(
            "{}x{}_wg{}_s{}",
            self.rows(),
            self.tokens(),
            self.workgroup(),
            self.stages()
        )
    }
}

/// Whether the dense kernel takes a weight of `format` with `n_in` inputs a row.
pub fn supports(format: GpuFormat, n_in: usize) -> bool {
    format == GpuFormat::F16 && n_in.is_multiple_of(32)
}

/// The dense tensor-core prompt matmul with one epilogue and one tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatmulDenseKernel(pub Epilogue, pub DenseTile);

impl MatmulDenseKernel {
    fn program_with(self, emulated: bool) -> Program {
        let MatmulDenseKernel(out, tile) = self;
        let mut p = if emulated {
            program_with(
                "matmul_dense_emulated",
                &[&COOP_EMUL, &IO_EMULATED, &BODY],
                GpuFormat::F16,
                out,
            )
        } else {
            program_with(
                "matmul_dense",
                &[&COOP_OPS, &IO, &BODY],
                GpuFormat::F16,
                out,
            )
        };
        p.name = format!("{}_{}", p.name, tile.name());
        p
    }
}

impl KernelFamily for MatmulDenseKernel {
    fn variants() -> Vec<MatmulDenseKernel> {
        DenseTile::ALL
            .into_iter()
            .flat_map(|t| Epilogue::ALL.map(|out| MatmulDenseKernel(out, t)))
            .collect()
    }

    fn program(self) -> Program {
        self.program_with(false)
    }

    fn programs(self) -> Vec<Program> {
        vec![self.program_with(false), self.program_with(true)]
    }

    fn program_for(self, caps: &Caps) -> Program {
        self.program_with(!caps.coop_f16)
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        let t = self.1;
        vec![
            ("TM", t.rows() as f64),
            ("TN", t.tokens() as f64),
            ("FR", t.row_blocks() as f64),
            ("FT", 4.0),
            ("STAGES", t.stages() as f64),
        ]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}
