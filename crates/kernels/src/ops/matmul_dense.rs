//! The prompt matmul on the tensor cores over F16 weights copied as they are stored:
//! `matmul/matmul_dense.wgsl`, the contract of [`super::matmul::Matmul`] for a weight in
//! [`GpuFormat::F16`] whose rows are whole units of 32 inputs. With nothing to decode while
//! staging, it takes larger tiles than [`super::matmul_coop`] ([`DenseTile`]): 128 or 256 rows
//! by 128 or 256 tokens, each subgroup up to 64 x 64 outputs. Its inputs are those of
//! `matmul_coop` (f16 values, f32 sums), so its bound and checks are that kernel's.
//!
//! A model's prompt block reaches it through the dense route ([`Matmul::dense_route`]): a
//! block of at least [`DENSE_MIN_TOKENS`] tokens on the tensor cores copies each weight to f16
//! into a scratch ([`crate::ops::f16_copy`]), and the block's X beside it
//! ([`crate::ops::f16_copy_x`]: the tiles then read half the bytes of X, [`DenseInput`]), and
//! multiplies those here. Elsewhere it is picked by
//! naming its tile ([`super::matmul::Tile::Dense`]), as the kernels bench does.

use crate::device::Caps;
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::ops::epilogue::Epilogue;
use crate::ops::f16_copy::{f16_copy, f16_copy_len};
use crate::ops::f16_copy_x::{f16_copy_x, f16_copy_x_len};
use crate::ops::matmul::{Matmul, Path, Strides, Tile, program_with};
use crate::ops::matmul_coop::{IO, IO_EMULATED, STORE_PARTIAL};
use crate::ops::split::Out;
use crate::ops::split_k::SplitK;
use crate::pipeline::PipelineKey;
use crate::shader::{COOP_EMUL, COOP_OPS, Program, ShaderFile, shader_file};
use crate::tensor::{GpuWeight, View, WeightRows, WeightShape};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, CHECK_ACCUMULATE, CHECK_ROUTE, CHECK_SPLIT_K};

static BODY: ShaderFile = shader_file!("matmul/matmul_dense.wgsl");

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

    /// Inputs a workgroup stages per barrier: 64 for the one-stage 128 x 128 tile (its
    /// staging registers and workgroup memory, 45 KB, hold them; fewer barriers and a longer
    /// prefetch: docs/PERF.md, D-dense-bk64), 32 for the others (the 256-wide tiles would need
    /// 55 KB, over the 48 KB a workgroup may have).
    pub fn inputs_per_barrier(self) -> usize {
        match self {
            DenseTile::Square => 64,
            _ => 32,
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

/// How the dense kernel reads X: its f32 values, or the f16 copy of them the dense route
/// makes ([`crate::ops::f16_copy_x`]), 8 inputs a 16-byte load instead of 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenseInput {
    /// X's values as the model holds them, rounded to f16 as they are staged.
    F32,
    /// X's f16 copy, packed.
    F16,
}

impl DenseInput {
    /// Inputs a 16-byte load (the kernel's `X_PER_LOAD`).
    fn per_load(self) -> usize {
        match self {
            DenseInput::F32 => 4,
            DenseInput::F16 => 8,
        }
    }
}

/// The dense tensor-core prompt matmul with one epilogue, one tile and one form of X.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatmulDenseKernel(pub Epilogue, pub DenseTile, pub DenseInput);

impl MatmulDenseKernel {
    fn program_with(self, emulated: bool) -> Program {
        let MatmulDenseKernel(out, tile, _) = self;
        let mut p = if emulated {
            program_with(
                "matmul_dense_emulated",
                &[&COOP_EMUL, &IO_EMULATED, &STORE_PARTIAL, &BODY],
                GpuFormat::F16,
                out,
            )
        } else {
            program_with(
                "matmul_dense",
                &[&COOP_OPS, &IO, &STORE_PARTIAL, &BODY],
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
        let tiles = DenseTile::ALL.into_iter();
        tiles
            .flat_map(|t| Epilogue::ALL.map(|out| (out, t)))
            .flat_map(|(out, t)| {
                [DenseInput::F32, DenseInput::F16].map(|x| MatmulDenseKernel(out, t, x))
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
        let t = self.1;
        vec![
            ("TM", t.rows() as f64),
            ("TN", t.tokens() as f64),
            ("FR", t.row_blocks() as f64),
            ("FT", 4.0),
            ("STAGES", t.stages() as f64),
            ("BK", t.inputs_per_barrier() as f64),
            ("X_PER_LOAD", self.2.per_load() as f64),
        ]
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, self.1.workgroup())]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK, CHECK_ACCUMULATE, CHECK_SPLIT_K, CHECK_ROUTE]
    }
}

/// The fewest tokens of a prompt block that take the dense route ([`Matmul::dense_route`]):
/// the f16 copy of a weight costs about one pass over its f16 bytes, which the larger tiles
/// repay once a block has a few token tiles (docs/PERF.md, D-dense-route).
pub const DENSE_MIN_TOKENS: usize = 512;

/// The fewest weights (rows x inputs) of a product on the dense route: its f16 copy costs a
/// pass over the weight and a dispatch, which the small models' products do not repay
/// (gemma-3-270m's gate|up, 2.6 M weights, and SmolLM2's ran 5-6% slower at 922 tokens;
/// qwen2.5-0.5b's, 8.7 M, 7% faster: D-dense-route).
const DENSE_MIN_WEIGHTS: usize = 1 << 22;

/// The fewest workgroups of a product on the dense route, about one per SM of an H100 (132):
/// below it the large tiles leave SMs idle, and `matmul_coop`'s smaller ones do better (the
/// small models' products at 922 tokens, D-dense-route).
const DENSE_MIN_WORKGROUPS: usize = 128;

/// The fewest workgroups of a product on the 256-row tile: below about four waves of an
/// H100's 132 SMs the 128 x 128 tile, with 64 inputs a barrier, ran as fast or faster
/// (gemma-3-270m's training products at 4,096 tokens, 256 workgroups: 72 against 86 TFLOP/s;
/// qwen2.5-7b's q|k|v at 922 tokens, 144: 62 against 78; D-dense-bk64).
const ROWS_MIN_WORKGROUPS: usize = 512;

/// 128 x 128 workgroups an H100 or H200 runs at once, one an SM: the wave of
/// [`dense_splits`]' model.
const WAVE: usize = 132;

/// The dense kernel's flops per byte of memory traffic on an H200: ~112 TFLOP/s on a full
/// grid (qwen2.5-7b's gate|up at 922 tokens) against the ~2.3 TB/s that `f16_copy` streams
/// (read and write, docs/PERF.md's qwen2.5-7b row): what a split's partial sums cost in
/// products.
const FLOPS_PER_BYTE: usize = 48;

/// The most splits [`dense_splits`] weighs, and the fewest 32-input units a split sums.
const MAX_SPLITS: usize = 4;
const MIN_SPLIT_UNITS: usize = 8;

impl DenseTile {
    fn workgroups(self, n_rows: usize, n_tokens: usize) -> usize {
        n_rows.div_ceil(self.rows()) * n_tokens.div_ceil(self.tokens())
    }

    /// The tile of the dense route for `n_rows` x `n_tokens`: 256 rows where that still makes
    /// `ROWS_MIN_WORKGROUPS` (512), else 128 x 128 where that makes `DENSE_MIN_WORKGROUPS`
    /// (128), else none.
    pub fn for_shape(n_rows: usize, n_tokens: usize) -> Option<DenseTile> {
        [
            (DenseTile::Rows, ROWS_MIN_WORKGROUPS),
            (DenseTile::Square, DENSE_MIN_WORKGROUPS),
        ]
        .into_iter()
        .find(|&(t, least)| t.workgroups(n_rows, n_tokens) >= least)
        .map(|(t, _)| t)
    }
}

/// In how many shares the dense route splits the sum of a product of `n_rows` x `n_tokens`
/// over `n_in` inputs on `tile` (1: not at all). A product of few 128 x 128 tiles leaves the
/// GPU's last wave of workgroups part empty: qwen2.5-7b's q|k|v at 922 tokens makes 288
/// workgroups, two full waves of `WAVE` (132) and one of 24. Split `s` ways, each
/// workgroup sums `1 / s` of the inputs, so the product takes `ceil(tiles s / WAVE) / s` of
/// the time a wave takes over all of them; the partial sums add `8 s` bytes an output (each
/// split stores its f32 sums, the reduction reads them), `4 s tiles FLOPS_PER_BYTE / (WAVE
/// n_in)` of that time. The splits (up to `MAX_SPLITS`, each over at least
/// `MIN_SPLIT_UNITS` units of 32) that make the sum of both least: on qwen2.5-7b at 922
/// tokens, q|k|v (288 tiles, 3,584 inputs) 3 splits, estimated at 0.89 of the unsplit time;
/// down (224 tiles, 18,944 inputs) 4 at 0.91; o (224 tiles, 3,584 inputs) none, its two
/// waves 85% full and no split estimated faster. Measured as the route runs them (copy,
/// product, reduction; kernels bench `dense_route/...`, H200, docs/PERF.md D-dense-split-route):
/// q|k|v 427 us unsplit, 368 / 361 / 366 in 2 / 3 / 4 splits; down 1,393 unsplit, 1,259 in 4
/// (2 and 3 no faster); o 283 unsplit, 300-303 split. Only the 128 x 128 tile, the one the
/// model's wave is of: the route takes the 256-row tile from 512 workgroups, where waves fill.
pub fn dense_splits(tile: DenseTile, n_rows: usize, n_tokens: usize, n_in: usize) -> usize {
    if tile != DenseTile::Square {
        return 1;
    }
    let tiles = tile.workgroups(n_rows, n_tokens);
    let waves = |s: usize| (tiles * s).div_ceil(WAVE) as f64 / s as f64;
    let partials = |s: usize| (4 * s * tiles * FLOPS_PER_BYTE) as f64 / (WAVE * n_in) as f64;
    let cost = |s: usize| match s {
        1 => waves(1),
        _ => waves(s) + partials(s),
    };
    let most = MAX_SPLITS.min(n_in.div_ceil(32) / MIN_SPLIT_UNITS).max(1);
    (2..=most).fold(1, |best, s| if cost(s) < cost(best) { s } else { best })
}

/// How the dense route runs a product ([`Matmul::dense_route`]): the dense kernel's tile,
/// and in how many shares its sum is split (1: one dispatch; more: [`Matmul::split_k_ops`]
/// over the f16 copy, its partial sums in a scratch of their own, [`DenseScratch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DenseRoute {
    /// The dense kernel's tile.
    pub tile: DenseTile,
    /// Shares of the sum, each summed by its own workgroups ([`dense_splits`] for the
    /// route's own choice; any count of at most the input units, to compare).
    pub splits: usize,
}

impl DenseRoute {
    /// The product in one dispatch on `tile`.
    pub fn whole(tile: DenseTile) -> DenseRoute {
        DenseRoute { tile, splits: 1 }
    }

    fn split_k(self) -> Option<SplitK> {
        (self.splits > 1).then_some(SplitK {
            splits: self.splits,
            tile: Tile::Dense(self.tile),
        })
    }
}

/// The dense route's scratches, two buffers other than x and y: the f16 copies of the
/// weight's rows and of X ([`Matmul::dense_copy_len`] words from its offset 0: the dense
/// kernel reads its weight from 0, X's copy after it), and for a split route the partial sums
/// ([`Matmul::dense_partials_len`] values; the copies' buffer cannot hold them, since one
/// dispatch would read and write it).
#[derive(Debug, Clone, Copy)]
pub struct DenseScratch<'a> {
    /// The f16 copies.
    pub copy: View<'a>,
    /// The partial sums (a split route only).
    pub partials: Option<View<'a>>,
}

impl Matmul {
    /// Words of the dense route's copies for rows `w` ([`DenseScratch::copy`]): the weight's
    /// f16 copy, then, from the next 16-byte boundary, X's.
    pub fn dense_copy_len(&self, w: WeightRows<'_>) -> usize {
        dense_x_start(w) + f16_copy_x_len(self.n_tokens, w.w.shape.n_in)
    }

    /// How rows `w` of a prompt block take the dense route, if they do: copied to f16 into a
    /// scratch ([`crate::ops::f16_copy`]) with the block's X ([`crate::ops::f16_copy_x`]),
    /// then multiplied on the dense kernel with the tile
    /// [`DenseTile::for_shape`] gives, split as [`dense_splits`] says. For a block on the
    /// tensor cores of at least [`DENSE_MIN_TOKENS`] tokens, rows of whole 32-input units,
    /// at least `DENSE_MIN_WEIGHTS` (4 M) weights, rows enough to fill the GPU, and a copy
    /// that fits one binding of `max_binding_bytes` (the partial sums too, else unsplit).
    pub fn dense_route(
        &self,
        caps: &Caps,
        w: WeightRows<'_>,
        max_binding_bytes: u64,
    ) -> Option<DenseRoute> {
        let s = w.w.shape;
        let fits = |words: usize| (words as u64) * 4 <= max_binding_bytes;
        let big = w.n * s.n_in >= DENSE_MIN_WEIGHTS;
        // What the dense kernel takes of the copy: F16 rows of whole 32-input units.
        let takes_copy = supports(GpuFormat::F16, s.n_in);
        let long = self.n_tokens >= DENSE_MIN_TOKENS;
        if !(self.coop(caps) && long && takes_copy && big && fits(self.dense_copy_len(w))) {
            return None;
        }
        let tile = DenseTile::for_shape(w.n, self.n_tokens)?;
        let route = DenseRoute {
            tile,
            splits: dense_splits(tile, w.n, self.n_tokens, s.n_in),
        };
        match fits(self.dense_partials_len(w, route)) {
            true => Some(route),
            false => Some(DenseRoute::whole(tile)),
        }
    }

    /// Values of the partial sums' scratch rows `w` need on `route` (0 unsplit).
    pub fn dense_partials_len(&self, w: WeightRows<'_>, route: DenseRoute) -> usize {
        route.split_k().map_or(0, |k| self.split_k_scratch(w, k))
    }

    /// The product [`Matmul::split_ops`] computes (one output of a whole weight as
    /// [`Matmul::ops`] stores it), on the dense route `route`: rows `w` and X copied to f16
    /// into `scratch.copy`, then the dense kernel over the copies, in one dispatch or split K
    /// through `scratch.partials` (a product and the reduction that adds the splits up and
    /// stores through the product's epilogue: the bias, the outputs of a stacked weight). One
    /// op per weight chunk the rows touch, then the product's.
    pub fn dense_route_ops(
        self,
        route: DenseRoute,
        w: WeightRows<'_>,
        x: View<'_>,
        bias: Option<View<'_>>,
        outs: &[Out<'_>],
        scratch: DenseScratch<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        let invalid = |detail: String| GpuError::InvalidParams {
            op: "matmul dense route",
            detail,
        };
        if scratch.copy.offset != 0 {
            return Err(invalid(format!(
                "a copy from element {}; the dense kernel reads its weight from 0",
                scratch.copy.offset
            )));
        }
        let s = w.w.shape;
        let mut ops = f16_copy(w, scratch.copy)?;
        let xs = self.x_stride("matmul dense route x", s, x)?;
        let x_copy = View::at(scratch.copy.t, dense_x_start(w));
        ops.push(f16_copy_x(x, self.n_tokens, s.n_in, xs, x_copy)?);
        let shape = WeightShape {
            format: GpuFormat::F16,
            n_in: s.n_in,
            n_out: w.n,
        };
        let copy = GpuWeight::in_buffer(shape, scratch.copy.t.buf.clone());
        // The copy of X is packed: no stride but its rows'.
        let packed = Matmul {
            strides: Strides {
                x: None,
                ..self.strides
            },
            ..self
        };
        let path = Path::DenseHalfX(route.tile);
        ops.extend(match (route.splits, scratch.partials) {
            (1, _) => match outs {
                [one] if w.is_whole() => packed.ops_with(path, &copy, x_copy, bias, one.y)?,
                _ => packed.split_ops_with(path, copy.all_rows(), x_copy, bias, outs)?,
            },
            (k, Some(partials)) => {
                packed.split_k_ops_with(path, k, copy.all_rows(), x_copy, bias, outs, partials)?
            }
            (k, None) => {
                return Err(invalid(format!(
                    "{k} splits without a scratch for their partial sums"
                )));
            }
        });
        Ok(ops)
    }
}

/// Where X's f16 copy starts in the dense route's scratch: after the weight's copy, at the
/// next 16-byte boundary.
fn dense_x_start(w: WeightRows<'_>) -> usize {
    f16_copy_len(w).next_multiple_of(4)
}
