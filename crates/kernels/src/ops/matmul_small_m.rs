//! Products of a few token rows on the tensor cores: `matmul/small_m.wgsl`, the contract of
//! [`Matmul`] (params, bindings, Y layout, epilogues) for up to [`SMALL_M_TOKENS`] tokens a
//! workgroup, as a server's batched decode makes them (M = 2..64 rows against a weight read
//! once). The prompt kernel ([`crate::ops::matmul_coop`]) pads M to a 64- or 128-token tile
//! and walks the inputs one row tile at a time, so M = 8 costs what M = 64 does and its few
//! workgroups wait on every unit's loads. Here a workgroup takes a slab of weight rows
//! ([`SmallMTile::rows`]) and every token, over a share of the inputs: split K over the
//! grid's z ([`Matmul::split_k_ops`], its reduce adding the shares up) so that the grid fills
//! the GPU several times over ([`SmallM::split`]). Each weight block is decoded once (the
//! format's `decode_half`, as `matmul_coop` stages it), the M inputs are staged padded to a
//! multiple of 16 with zeros, both as f16, and multiplied by 16 x 16 x 16 cooperative
//! matrices; the next stage's loads are issued before this stage's products.
//!
//! The inputs are rounded to f16 and summed in f32 as in `matmul_coop`, so its bound
//! (`ops/matmul_coop.rs`) and, split, split K's (`ops/split_k.rs`: at most `MAX_SPLITS` = 16
//! additions of the partials, each share at least one unit of 32 products, well inside the
//! `4 n u S` of the summation model) apply unchanged. The parity check `matmul_small_m` needs
//! cooperative matrices; the unit tests run the body over the emulated coop ops on lavapipe.
//!
//! Not yet taken by the model: [`Matmul::small_m`] says how a product would run, and
//! [`Matmul::small_m_ops`] builds it.

use crate::device::Caps;
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::ops::epilogue::Epilogue;
use crate::ops::matmul::{Matmul, Path, Tile, program_with};
use crate::ops::matmul_coop::{IO, IO_EMULATED, STAGE, STORE_PARTIAL};
use crate::ops::split::Out;
use crate::ops::split_k::SplitK;
use crate::pipeline::PipelineKey;
use crate::shader::{COOP_EMUL, COOP_OPS, Program, ShaderFile, shader_file};
use crate::tensor::{View, WeightRows};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::CHECK;

static BODY: ShaderFile = shader_file!("matmul/small_m.wgsl");

/// Tokens a workgroup takes (`TN`); a product of more runs one workgroup row per 64 tokens.
pub const SMALL_M_TOKENS: usize = 64;

/// Most splits of the inputs (split K's reduce adds this many partials an output).
const MAX_SPLITS: usize = 16;

/// A workgroup's slab: rows (16 a subgroup, 2 invocations a row) and units of 32 inputs
/// staged per barrier. Workgroup memory: the weight tile `rows x (32 units + 8)` f16, the
/// input tile `64 x (32 units + 8)` f16, 1 KB of scratch a subgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SmallMTile {
    /// 64 rows, 128 invocations, 2 units a barrier (22.5 KB).
    R64U2,
    /// 128 rows, 256 invocations, 1 unit a barrier (23 KB).
    R128U1,
    /// 128 rows, 256 invocations, 2 units a barrier (35 KB: half the input reads a row).
    R128U2,
}

impl SmallMTile {
    /// Every tile.
    pub const ALL: [SmallMTile; 3] = [SmallMTile::R64U2, SmallMTile::R128U1, SmallMTile::R128U2];

    /// Weight rows of a workgroup.
    pub fn rows(self) -> usize {
        match self {
            SmallMTile::R64U2 => 64,
            SmallMTile::R128U1 | SmallMTile::R128U2 => 128,
        }
    }

    /// Units of 32 inputs staged per barrier.
    pub fn units(self) -> usize {
        match self {
            SmallMTile::R128U1 => 1,
            SmallMTile::R64U2 | SmallMTile::R128U2 => 2,
        }
    }

    /// Invocations of a workgroup: two a row.
    pub fn workgroup(self) -> u32 {
        2 * self.rows() as u32
    }

    /// `r<rows>_u<units>`, for programs and benches.
    pub fn name(self) -> String {
        format!("r{}_u{}", self.rows(), self.units())
    }
}

/// How a product of a few rows runs: the tile, and the split rule's target of workgroups
/// (rows tiles x splits; an H200 has 132 SMs, each holding several of these workgroups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmallM {
    /// The workgroup's slab.
    pub tile: SmallMTile,
    /// Split K until the grid has this many workgroups (at most `MAX_SPLITS` (16) splits, each
    /// of at least two stages of units).
    pub target_workgroups: usize,
}

impl SmallM {
    /// The configuration a product over weights in format `f` would take: 128-row slabs,
    /// split until 4 workgroups an SM of an H200, 1 unit a barrier, or 2 for Q6_K. The fastest
    /// of the configurations timed (`small_m/...`, H200, docs/PERF.md "Products of a few
    /// token rows"): on Q4_K 2 units a barrier 6-19% slower, half the workgroups 7-24%
    /// slower, twice as many no faster, 64-row slabs slower still; on Q6_K, whose raw half
    /// holds more registers than its decoded one, 2 units a barrier 9-17% faster at M = 8-64.
    pub fn for_format(f: GpuFormat) -> SmallM {
        let tile = match f {
            GpuFormat::Q6K => SmallMTile::R128U2,
            _ => SmallMTile::R128U1,
        };
        SmallM {
            tile,
            target_workgroups: 528,
        }
    }

    /// `<tile>_w<target>`, for benches.
    pub fn name(&self) -> String {
        format!("{}_w{}", self.tile.name(), self.target_workgroups)
    }

    /// The splits of rows `w` of a product of `n_tokens` tokens: as many as reach
    /// `target_workgroups` with the row slabs, at most `MAX_SPLITS` (16), each of at least two
    /// stages (`2 units` units of 32 inputs); 1 where split K cannot run (rows that do not
    /// start the weight's one chunk).
    pub fn split(&self, w: WeightRows<'_>, n_tokens: usize) -> SplitK {
        let t = self.tile;
        let slabs = w.n.div_ceil(t.rows()) * n_tokens.div_ceil(SMALL_M_TOKENS);
        let units = w.w.shape.n_in.div_ceil(32);
        let splittable = w.w.chunks.len() == 1 && w.first == 0;
        let splits = match splittable {
            true => self
                .target_workgroups
                .div_ceil(slabs.max(1))
                .min(MAX_SPLITS)
                .min(units / (2 * t.units())),
            false => 1,
        };
        SplitK {
            splits: splits.max(1),
            tile: Tile::SmallM(t),
        }
    }
}

/// The small-M tensor-core product over a weight of one format, with one epilogue and one
/// tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatmulSmallMKernel(pub GpuFormat, pub Epilogue, pub SmallMTile);

impl MatmulSmallMKernel {
    /// The tensor-core program, or with `emulated` its body over emulated coop ops (a device
    /// without cooperative matrices: tests).
    fn program_with(self, emulated: bool) -> Program {
        let MatmulSmallMKernel(f, out, tile) = self;
        let mut p = match emulated {
            true => program_with(
                "matmul_small_m_emulated",
                &[&COOP_EMUL, &IO_EMULATED, &STAGE, &STORE_PARTIAL, &BODY],
                f,
                out,
            ),
            false => program_with(
                "matmul_small_m",
                &[&COOP_OPS, &IO, &STAGE, &STORE_PARTIAL, &BODY],
                f,
                out,
            ),
        };
        p.name = format!("{}_{}", p.name, tile.name());
        p
    }
}

impl KernelFamily for MatmulSmallMKernel {
    fn variants() -> Vec<MatmulSmallMKernel> {
        let formats = crate::shader::weight_formats().iter();
        formats
            .flat_map(|&f| {
                SmallMTile::ALL
                    .into_iter()
                    .flat_map(move |t| Epilogue::ALL.map(|out| MatmulSmallMKernel(f, out, t)))
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
        vec![("UNITS", self.2.units() as f64)]
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, self.2.workgroup())]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

impl Matmul {
    /// How rows `w` would run on the small-M kernel with configuration `cfg` on a device with
    /// `caps` (`None`: not there): on the tensor cores, 2 to [`SMALL_M_TOKENS`] tokens. The
    /// [`SplitK`] for [`Matmul::small_m_ops`] (and its scratch, [`Matmul::split_k_scratch`]).
    pub fn small_m(&self, caps: &Caps, w: WeightRows<'_>, cfg: SmallM) -> Option<SplitK> {
        let few = (2..=SMALL_M_TOKENS).contains(&self.n_tokens);
        (self.coop(caps) && few).then(|| cfg.split(w, self.n_tokens))
    }

    /// The product [`Matmul::split_ops`] computes (rows `w` into `outs`, plus `bias`) on the
    /// small-M kernel (its emulation on a device without cooperative matrices: tests), split
    /// as `k` says (a [`SplitK`] of a [`Tile::SmallM`], from [`Matmul::small_m`] or named):
    /// one dispatch a weight chunk in one split, else split K's two through `scratch`
    /// ([`Matmul::split_k_scratch`] values, another buffer than x and y; unused in one split).
    pub fn small_m_ops(
        self,
        k: SplitK,
        w: WeightRows<'_>,
        x: View<'_>,
        bias: Option<View<'_>>,
        outs: &[Out<'_>],
        scratch: View<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        if !matches!(k.tile, Tile::SmallM(_)) {
            return Err(GpuError::InvalidParams {
                op: "matmul small M",
                detail: format!("tile {:?}; the small-M kernel takes Tile::SmallM", k.tile),
            });
        }
        match k.splits {
            1 => self.split_ops_with(Path::Coop(Some(k.tile)), w, x, bias, outs),
            _ => self.split_k_ops(w, x, bias, outs, scratch, k),
        }
    }
}
