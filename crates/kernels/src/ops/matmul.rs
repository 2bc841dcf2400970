//! `Y = X W^T` for a block of tokens (prefill), `W` a GGUF weight in any [`GpuFormat`].
//!
//! Two kernels with one contract (`matmul/params.wgsl`), picked by [`Matmul::kernel`]:
//! - `matmul/matmul.wgsl` (every device): a workgroup of 128 computes 64 rows x 64 tokens in
//!   f32: per unit of 32 inputs every invocation decodes 16 weights (the format's
//!   `decode_half`) and loads 16 inputs into workgroup memory, then accumulates 8 rows x 4
//!   tokens in registers, so a decoded weight serves 64 tokens and an input 64 rows.
//! - `matmul/matmul_coop.wgsl` (devices with [`Caps::coop_f16`], see [`super::matmul_coop`]):
//!   the same staging, rounded to f16, multiplied on the tensor cores with f32 accumulation;
//!   the same 64 x 64 tile, or 128 x 128 with 256 invocations where the product still makes
//!   enough workgroups ([`Tile`]).
//!
//! One dispatch per weight chunk. Each output may take
//! its row's bias as it is stored (the [`Epilogue`]), and the rows of a row range may go to
//! several outputs, each with its own token stride ([`Matmul::split_ops`],
//! [`crate::ops::split`]).

use crate::device::Caps;
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::kernel::{Kernel, KernelFamily};
use crate::op::Op;
use crate::ops::epilogue::Epilogue;
use crate::ops::f16_copy_x::f16_copy_x_len;
use crate::ops::matmul_coop::MatmulCoopKernel;
use crate::ops::matmul_dense::{self, DenseInput, DenseTile, MatmulDenseKernel};
use crate::ops::matmul_small_m::{MatmulSmallMKernel, SMALL_M_TOKENS, SmallMTile};
use crate::ops::split::{self, Out, SplitParams};
use crate::pipeline::PipelineKey;
use crate::shader::{BLOCKS, Program, SPLIT_PARAMS, ShaderFile, shader_file};
use crate::tensor::{GpuWeight, View, WeightRows, WeightShape};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{BIAS_CHECK, CHECK};
#[cfg(any(test, feature = "parity"))]
pub(crate) use parity::{Case, Inputs, abs_dot};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct MatmulParams {
    pub n_in: u32,
    /// Rows in this chunk.
    pub n_rows: u32,
    pub row_bytes: u32,
    pub n_tokens: u32,
    pub x_offset: u32,
    pub x_stride: u32,
    /// Where this chunk's first row of token 0 lands in `y`.
    pub y_offset: u32,
    pub y_stride: u32,
    /// The bias of this dispatch's first row (bias epilogue only; 0 otherwise).
    pub bias_offset: u32,
    /// Split K ([`Matmul::split_k_ops`]): input units per workgroup z, 0 for all.
    pub k_units: u32,
    /// Split K: how much further into y split z + 1 stores than split z.
    pub k_slice: u32,
    /// The dense kernel only: add the product into Y instead of storing it (1).
    pub accumulate: u32,
    /// Split outputs (the split epilogue only; zero otherwise).
    pub split: SplitParams,
}

static SHADER: ShaderFile = shader_file!("matmul/matmul.wgsl");
/// The f32 products' accumulators in named registers (shared with the gradients' tiles).
pub(crate) static ACC8: ShaderFile = shader_file!("matmul/acc8.wgsl");
/// `Params` and the bindings, shared by both kernels.
pub(crate) static PARAMS: ShaderFile = shader_file!("matmul/params.wgsl");

/// The f32 kernel's: 8 x 16 invocations of 8 rows x 4 tokens each, and the tensor-core
/// kernel's small tile ([`Tile::Small`]).
pub(crate) const WORKGROUP: u32 = 128;

/// The tile of a workgroup. The f32 kernel has one, 64 x 64; the tensor-core kernel derives
/// its tile from its workgroup size (`matmul/matmul_coop.wgsl`): 64 x 64 with 128 invocations
/// or 128 x 128 with 256, which stages half as many weights and inputs per product but makes a
/// quarter as many workgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tile {
    /// 64 x 64, 128 invocations (the f32 kernel's only tile).
    Small,
    /// 128 x 128, 256 invocations.
    Wide,
    /// The dense kernel's tiles (F16 weights only, [`crate::ops::matmul_dense`]), 256
    /// invocations.
    Dense(DenseTile),
    /// The small-M kernel's slabs ([`crate::ops::matmul_small_m`]): its rows x 64 tokens.
    SmallM(SmallMTile),
}

/// The fewest wide workgroups worth the wide tile (about one per SM of an H100, which has
/// 132): below it the GPU would sit partly idle. 128 rather than 256 so that SmolLM2-135M's
/// gate|up (192 wide workgroups) takes the wide tile too (docs/PERF.md, D-wide-tile).
const WIDE_MIN_WORKGROUPS: usize = 128;

impl Tile {
    /// Rows of the tile.
    pub fn side(self) -> usize {
        match self {
            Tile::Small => 64,
            Tile::Wide => 128,
            Tile::Dense(t) => t.rows(),
            Tile::SmallM(t) => t.rows(),
        }
    }

    /// Tokens of the tile.
    pub fn tokens(self) -> usize {
        match self {
            Tile::Dense(t) => t.tokens(),
            Tile::SmallM(_) => SMALL_M_TOKENS,
            _ => self.side(),
        }
    }

    /// Invocations per workgroup.
    pub fn workgroup(self) -> u32 {
        match self {
            Tile::Small => WORKGROUP,
            Tile::Wide => 256,
            Tile::Dense(t) => t.workgroup(),
            Tile::SmallM(t) => t.workgroup(),
        }
    }

    /// The tensor-core kernel's tile for `n_rows` x `n_tokens`: wide where that still makes
    /// `WIDE_MIN_WORKGROUPS` (128) workgroups.
    pub fn for_shape(n_rows: usize, n_tokens: usize) -> Tile {
        let side = Tile::Wide.side();
        if n_rows.div_ceil(side) * n_tokens.div_ceil(side) >= WIDE_MIN_WORKGROUPS {
            Tile::Wide
        } else {
            Tile::Small
        }
    }

    pub(crate) fn grid(self, n_rows: usize, n_tokens: usize) -> [u32; 3] {
        [
            n_rows.div_ceil(self.side()) as u32,
            n_tokens.div_ceil(self.tokens()) as u32,
            1,
        ]
    }
}

/// Which kernel runs a product: the f32 one, or the tensor-core one with its tile picked by
/// shape ([`Tile::for_shape`]) or named (tests); a dense tile names the dense kernel (over
/// X's f32 values), a small-M one the small-M kernel. `DenseHalfX` is the dense kernel over
/// the dense route's f16 copy of X ([`crate::ops::f16_copy_x`], packed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    F32,
    Coop(Option<Tile>),
    DenseHalfX(DenseTile),
}

impl Path {
    pub(crate) fn kernel(self, f: GpuFormat, out: Epilogue) -> Kernel {
        match self {
            Path::F32 => MatmulKernel(f, out).into(),
            Path::Coop(Some(Tile::Dense(t))) => MatmulDenseKernel(out, t, DenseInput::F32).into(),
            Path::DenseHalfX(t) => MatmulDenseKernel(out, t, DenseInput::F16).into(),
            Path::Coop(Some(Tile::SmallM(t))) => MatmulSmallMKernel(f, out, t).into(),
            Path::Coop(_) => MatmulCoopKernel(f, out).into(),
        }
    }

    /// The tile the path names, if it names one.
    pub(crate) fn named_tile(self) -> Option<Tile> {
        match self {
            Path::F32 | Path::Coop(None) => None,
            Path::Coop(tile) => tile,
            Path::DenseHalfX(t) => Some(Tile::Dense(t)),
        }
    }

    /// Whether the path runs the dense kernel (which alone may add into Y).
    fn is_dense(self) -> bool {
        matches!(self, Path::Coop(Some(Tile::Dense(_))) | Path::DenseHalfX(_))
    }

    fn kernel_and_tile(
        self,
        f: GpuFormat,
        out: Epilogue,
        n_rows: usize,
        n_tokens: usize,
    ) -> (Kernel, Tile) {
        let tile = match self {
            Path::F32 => Tile::Small,
            _ => self
                .named_tile()
                .unwrap_or_else(|| Tile::for_shape(n_rows, n_tokens)),
        };
        (self.kernel(f, out), tile)
    }
}

/// The program of a matmul kernel: its own files (the first may open with `enable`
/// directives), then the shared parameters, the output epilogue (value and place files), the
/// byte helpers and the format's decoder.
pub(crate) fn program_with(
    name: &str,
    own: &[&'static ShaderFile],
    f: GpuFormat,
    out: Epilogue,
) -> Program {
    Program {
        name: format!("{name}{}_{}", out.infix(), f.name()),
        files: own
            .iter()
            .copied()
            .chain([&PARAMS, &SPLIT_PARAMS])
            .chain(out.files())
            .chain([&BLOCKS])
            .chain(f.decoder().iter().copied())
            .collect(),
        entry: "main",
        bindings: out.bindings(),
        params_size: size_of::<MatmulParams>(),
    }
}

/// The f32 prompt matmul over a weight of one format, with one epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatmulKernel(pub GpuFormat, pub Epilogue);

impl KernelFamily for MatmulKernel {
    fn variants() -> Vec<MatmulKernel> {
        let formats = crate::shader::weight_formats().iter();
        formats
            .flat_map(|&f| Epilogue::ALL.map(|out| MatmulKernel(f, out)))
            .collect()
    }

    fn program(self) -> Program {
        program_with("matmul", &[&SHADER, &ACC8], self.0, self.1)
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, Tile::Small.workgroup())]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK, BIAS_CHECK, crate::ops::split::MATMUL_CHECK]
    }
}

/// Strides of the token rows of X and Y (elements); `None`: packed (`n_in`, `n_out`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Strides {
    /// Elements from one token's input row to the next's.
    pub x: Option<usize>,
    /// Elements from one token's output row to the next's.
    pub y: Option<usize>,
}

/// `y[y.offset + t * y_stride + r] = sum_i W[r, i] x[x.offset + t * x_stride + i]
/// [+ bias[bias.offset + r]]` for `n_tokens` tokens.
#[derive(Debug, Clone, Copy)]
pub struct Matmul {
    /// Tokens (rows of X and Y).
    pub n_tokens: usize,
    /// Their row strides.
    pub strides: Strides,
    /// Run on the tensor cores where the device has them ([`Caps::coop_f16`]): inputs rounded
    /// to f16, f32 accumulation. `false` keeps the f32 kernel everywhere.
    pub tensor_cores: bool,
}

impl Matmul {
    /// The kernel that runs a weight of format `f` on a device with `caps`. The tensor cores
    /// take every shape: the f32 kernel pads to the same 64 x 64 tiles, so no shape is
    /// cheaper there.
    pub fn kernel(&self, caps: &Caps, f: GpuFormat, out: Epilogue) -> Kernel {
        self.path(caps).kernel(f, out)
    }

    /// One op per weight chunk; with `bias`, `bias[bias.offset + r]` is added to every
    /// token's row r (a linear layer with a bias; each chunk adds its own rows' bias).
    pub fn ops(
        self,
        caps: &Caps,
        w: &GpuWeight,
        x: View<'_>,
        bias: Option<View<'_>>,
        y: View<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        self.ops_with(self.path(caps), w, x, bias, y)
    }

    /// As [`Matmul::ops`] on the dense tensor-core kernel with tile `tile`
    /// ([`crate::ops::matmul_dense`]): F16 weights of whole 32-input units only, on a device
    /// with cooperative matrices (elsewhere its body over emulated coop ops: tests).
    pub fn dense_ops(
        self,
        tile: DenseTile,
        w: &GpuWeight,
        x: View<'_>,
        bias: Option<View<'_>>,
        y: View<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        self.dense_ops_into(tile, w, x, bias, y, false)
    }

    /// As [`Matmul::dense_ops`], adding the product into Y where `accumulate` (`y += x wᵀ`,
    /// each output's sum added once to what Y held: the same value as the product stored
    /// elsewhere and added).
    pub fn dense_ops_into(
        self,
        tile: DenseTile,
        w: &GpuWeight,
        x: View<'_>,
        bias: Option<View<'_>>,
        y: View<'_>,
        accumulate: bool,
    ) -> Result<Vec<Op>, GpuError> {
        if !matmul_dense::supports(w.shape.format, w.shape.n_in) {
            return Err(GpuError::InvalidParams {
                op: "matmul_dense",
                detail: format!(
                    "F16 weights of whole 32-input units only, not {} with {} inputs",
                    w.shape.format.name(),
                    w.shape.n_in
                ),
            });
        }
        let path = Path::Coop(Some(Tile::Dense(tile)));
        self.ops_into(path, w, x, bias, y, accumulate)
    }

    /// The parameters of a dispatch over `n_rows` rows of a weight shaped `s`, X at
    /// `x_offset` with token stride `xs`; everything about Y, the bias, split outputs and
    /// split K zero (one output at y's start, no bias, all inputs), for the caller to set.
    pub(crate) fn params(
        &self,
        s: WeightShape,
        n_rows: usize,
        x_offset: usize,
        xs: usize,
    ) -> MatmulParams {
        MatmulParams {
            n_in: s.n_in as u32,
            n_rows: n_rows as u32,
            row_bytes: s.format.row_bytes(s.n_in) as u32,
            n_tokens: self.n_tokens as u32,
            x_offset: x_offset as u32,
            x_stride: xs as u32,
            ..bytemuck::Zeroable::zeroed()
        }
    }

    /// X's token stride for a weight shaped `s`, after checking that `x` holds every token's
    /// row (op `what`).
    pub(crate) fn x_stride(
        &self,
        what: &'static str,
        s: WeightShape,
        x: View<'_>,
    ) -> Result<usize, GpuError> {
        let xs = self.strides.x.unwrap_or(s.n_in);
        x.check(what, (self.n_tokens.max(1) - 1) * xs + s.n_in)?;
        Ok(xs)
    }

    /// Where the kernel on `path` reads X, after checking that `x` holds every token's row
    /// (op `what`): its first element and token stride in the kernel's units. f32 elements,
    /// both multiples of 4 for the dense kernel (it reads X as vec4s); for the f16 copy
    /// ([`Path::DenseHalfX`], packed: no stride of its own; `x` counts its words, from a
    /// 16-byte boundary) halves.
    pub(crate) fn x_place(
        &self,
        path: Path,
        what: &'static str,
        s: WeightShape,
        x: View<'_>,
    ) -> Result<(usize, usize), GpuError> {
        let invalid = |detail: String| GpuError::InvalidParams { op: what, detail };
        if let Path::DenseHalfX(_) = path {
            if self.strides.x.is_some() || !x.offset.is_multiple_of(4) {
                return Err(invalid(format!(
                    "X's f16 copy from word {}, strides {:?}: the copy is packed and starts on \
                     a 16-byte boundary",
                    x.offset, self.strides.x
                )));
            }
            x.check(what, f16_copy_x_len(self.n_tokens.max(1), s.n_in))?;
            return Ok((2 * x.offset, s.n_in));
        }
        let xs = self.x_stride(what, s, x)?;
        if path.is_dense() && !(x.offset.is_multiple_of(4) && xs.is_multiple_of(4)) {
            return Err(invalid(format!(
                "X from element {}, tokens {xs} apart: the dense kernel reads X as vec4s, both \
                 must be multiples of 4",
                x.offset
            )));
        }
        Ok((x.offset, xs))
    }

    /// Whether the tensor-core kernel runs on a device with `caps` (any format and shape).
    pub(crate) fn coop(&self, caps: &Caps) -> bool {
        self.tensor_cores && caps.coop_f16
    }

    fn path(&self, caps: &Caps) -> Path {
        match self.coop(caps) {
            true => Path::Coop(None),
            false => Path::F32,
        }
    }

    /// The outputs of a split product: rows `w` of a weight (a stacked q|k|v, say) times each
    /// token's input (rows `strides.x` apart), plus `bias[bias.offset + r - w.first]` if any,
    /// the next `outs[j].rows` rows into output j at `outs[j].y.offset + t * outs[j].stride`
    /// (regions of one tensor, see [`crate::ops::split`]; `strides.y` is not used). One op per
    /// weight chunk the rows touch; each output computed as [`Matmul::ops`] computes it.
    pub fn split_ops(
        self,
        caps: &Caps,
        w: WeightRows<'_>,
        x: View<'_>,
        bias: Option<View<'_>>,
        outs: &[Out<'_>],
    ) -> Result<Vec<Op>, GpuError> {
        self.split_ops_with(self.path(caps), w, x, bias, outs)
    }

    /// As [`Matmul::split_ops`] with the kernel named (see [`Matmul::ops_with`]).
    pub(crate) fn split_ops_with(
        self,
        path: Path,
        w: WeightRows<'_>,
        x: View<'_>,
        bias: Option<View<'_>>,
        outs: &[Out<'_>],
    ) -> Result<Vec<Op>, GpuError> {
        let s = w.w.shape;
        let (x_at, xs) = self.x_place(path, "matmul_split x", s, x)?;
        let parts = split::parts("matmul_split", w, bias, outs, self.n_tokens)?;
        let out = Epilogue {
            bias: bias.is_some(),
            split: true,
        };
        let y = &outs[0].y.t.buf;
        let ops = parts.into_iter().map(|part| {
            let (kernel, tile) = path.kernel_and_tile(s.format, out, part.n_rows, self.n_tokens);
            let params = MatmulParams {
                bias_offset: part.bias_offset,
                split: part.split,
                ..self.params(s, part.n_rows, x_at, xs)
            };
            let grid = tile.grid(part.n_rows, self.n_tokens);
            let mut buffers = vec![&part.chunk.buf, &x.t.buf, y, &part.chunk.buf];
            buffers.extend(bias.map(|b| &b.t.buf));
            Op::new(kernel, tile.workgroup(), &params, &buffers, grid)
        });
        Ok(ops.collect())
    }

    /// As [`Matmul::ops`] with the kernel named: [`Path::Coop`] runs `Kernel::MatmulCoop` on
    /// any device (on one without cooperative matrices, its emulated program: tests only).
    pub(crate) fn ops_with(
        self,
        path: Path,
        w: &GpuWeight,
        x: View<'_>,
        bias: Option<View<'_>>,
        y: View<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        self.ops_into(path, w, x, bias, y, false)
    }

    /// As [`Matmul::ops_with`], adding the product into Y where `accumulate` (the dense
    /// kernel only).
    fn ops_into(
        self,
        path: Path,
        w: &GpuWeight,
        x: View<'_>,
        bias: Option<View<'_>>,
        y: View<'_>,
        accumulate: bool,
    ) -> Result<Vec<Op>, GpuError> {
        if accumulate && !path.is_dense() {
            return Err(GpuError::InvalidParams {
                op: "matmul",
                detail: "only the dense kernel adds its product into Y".into(),
            });
        }
        let s = w.shape;
        let (x_at, xs) = self.x_place(path, "matmul x", s, x)?;
        let ys = self.strides.y.unwrap_or(s.n_out);
        y.check("matmul y", (self.n_tokens.max(1) - 1) * ys + s.n_out)?;
        if let Some(b) = bias {
            b.check("matmul bias", s.n_out)?;
        }
        let out = Epilogue {
            bias: bias.is_some(),
            split: false,
        };
        let ops = w.chunks.iter().map(|c| {
            let (kernel, tile) = path.kernel_and_tile(s.format, out, c.n_rows, self.n_tokens);
            let params = MatmulParams {
                y_offset: (y.offset + c.first_row) as u32,
                y_stride: ys as u32,
                bias_offset: bias.map_or(0, |b| (b.offset + c.first_row) as u32),
                accumulate: u32::from(accumulate),
                ..self.params(s, c.n_rows, x_at, xs)
            };
            let grid = tile.grid(c.n_rows, self.n_tokens);
            let mut buffers = vec![&c.buf, &x.t.buf, &y.t.buf, &c.buf];
            buffers.extend(bias.map(|b| &b.t.buf));
            Op::new(kernel, tile.workgroup(), &params, &buffers, grid)
        });
        Ok(ops.collect())
    }
}
