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

use crate::device::{Caps, Gpu};
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::kernel::{Kernel, KernelFamily};
use crate::op::Op;
use crate::ops::epilogue::{Epilogue, bias_bound};
use crate::ops::matmul_coop::MatmulCoopKernel;
use crate::ops::matvec::matvec_bias_ref;
use crate::ops::split::{self, Out, SplitParams};
use crate::ops::split_k::SplitK;
use crate::parity::data::{Rng, n_in_step, random_f32, random_weight};
use crate::parity::{Check, Compare, U, run_read};
use crate::shader::{BLOCKS, Program, SPLIT_PARAMS, ShaderFile, shader_file};
use crate::tensor::{Dtype, GpuTensor, GpuWeight, View, WeightRows, WeightShape};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MatmulParams {
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
    pub _pad: u32,
    /// Split outputs (the split epilogue only; zero otherwise).
    pub split: SplitParams,
}

static SHADER: ShaderFile = shader_file!("matmul/matmul.wgsl");
/// `Params` and the bindings, shared by both kernels.
pub(crate) static PARAMS: ShaderFile = shader_file!("matmul/params.wgsl");

/// The f32 kernel's: 8 x 16 invocations of 8 rows x 4 tokens each, and the tensor-core
/// kernel's small tile ([`Tile::Small`]).
pub const WORKGROUP: u32 = 128;

/// The tile of a workgroup. The f32 kernel has one, 64 x 64; the tensor-core kernel derives
/// its tile from its workgroup size (`matmul/matmul_coop.wgsl`): 64 x 64 with 128 invocations
/// or 128 x 128 with 256, which stages half as many weights and inputs per product but makes a
/// quarter as many workgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tile {
    Small,
    Wide,
}

/// The fewest wide workgroups worth the wide tile (about one per SM of an H100, which has
/// 132): below it the GPU would sit partly idle. H100, 922-token prefill: 128 and 256 gave the
/// same on gemma-3-270m, qwen2.5-0.5b and gemma3-4b (whose widest products pass both), 128
/// +1.4% on SmolLM2 (its gate|up makes 192); docs/PERF.md, eighth session.
const WIDE_MIN_WORKGROUPS: usize = 128;

impl Tile {
    /// Rows (and tokens) of the tile.
    pub fn side(self) -> usize {
        match self {
            Tile::Small => 64,
            Tile::Wide => 128,
        }
    }

    pub fn workgroup(self) -> u32 {
        match self {
            Tile::Small => WORKGROUP,
            Tile::Wide => 256,
        }
    }

    /// The tensor-core kernel's tile for `n_rows` x `n_tokens`: wide where that still makes
    /// [`WIDE_MIN_WORKGROUPS`] workgroups.
    pub fn for_shape(n_rows: usize, n_tokens: usize) -> Tile {
        let side = Tile::Wide.side();
        if n_rows.div_ceil(side) * n_tokens.div_ceil(side) >= WIDE_MIN_WORKGROUPS {
            Tile::Wide
        } else {
            Tile::Small
        }
    }

    fn grid(self, n_rows: usize, n_tokens: usize) -> [u32; 3] {
        let side = self.side();
        [
            n_rows.div_ceil(side) as u32,
            n_tokens.div_ceil(side) as u32,
            1,
        ]
    }
}

/// Which kernel runs a product: the f32 one, or the tensor-core one with its tile picked by
/// shape ([`Tile::for_shape`]) or named (tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    F32,
    Coop(Option<Tile>),
}

impl Path {
    fn kernel(self, f: GpuFormat, out: Epilogue) -> Kernel {
        match self {
            Path::F32 => MatmulKernel(f, out).into(),
            Path::Coop(_) => MatmulCoopKernel(f, out).into(),
        }
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
            Path::Coop(tile) => tile.unwrap_or_else(|| Tile::for_shape(n_rows, n_tokens)),
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
        program_with("matmul", &[&SHADER], self.0, self.1)
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<Check> {
        vec![CHECK, BIAS_CHECK, crate::ops::split::MATMUL_CHECK]
    }
}

/// Strides of the token rows of X and Y (elements); `None`: packed (`n_in`, `n_out`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Strides {
    pub x: Option<usize>,
    pub y: Option<usize>,
}

/// `y[y.offset + t * y_stride + r] = sum_i W[r, i] x[x.offset + t * x_stride + i]
/// [+ bias[bias.offset + r]]` for `n_tokens` tokens.
#[derive(Debug, Clone, Copy)]
pub struct Matmul {
    pub n_tokens: usize,
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
        let xs = self.x_stride("matmul_split x", s, x)?;
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
                ..self.params(s, part.n_rows, x.offset, xs)
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
        let s = w.shape;
        let xs = self.x_stride("matmul x", s, x)?;
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
                ..self.params(s, c.n_rows, x.offset, xs)
            };
            let grid = tile.grid(c.n_rows, self.n_tokens);
            let mut buffers = vec![&c.buf, &x.t.buf, &y.t.buf, &c.buf];
            buffers.extend(bias.map(|b| &b.t.buf));
            Op::new(kernel, tile.workgroup(), &params, &buffers, grid)
        });
        Ok(ops.collect())
    }
}

/// Tolerance: as matvec, per output: (n_in + 4) * 2^-24 * sum_i |w_i x_i| (the GPU sums the
/// n_in products of each output in unit order with FMA or not; any order of n f32 additions
/// errs by at most n * u * sum |terms|; decoding adds a few roundings). Reference: f64.
pub const CHECK: Check = Check {
    name: "matmul",
    tolerance: "(n_in+4)*2^-24*sum|w_i x_i|",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    Case::random(rng).run(gpu, false, &Inputs::AS_DRAWN)
}

/// Tolerance of the bias epilogue: as matvec's, the bias one more term of each output's sum,
/// `(n_in + 5) u (sum_i |w_i x_i| + |b|)` ([`bias_bound`]); weights split into chunks.
pub const BIAS_CHECK: Check = Check {
    name: "matmul_bias",
    tolerance: "(n_in+5)*2^-24*(sum|w_i x_i| + |b|)",
    case: bias_parity_case,
};

fn bias_parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let case = Case {
        bias: true,
        ..Case::random(rng)
    };
    case.run(gpu, false, &Inputs::AS_DRAWN)
}

/// The f32 kernel's bound for one output from its weight row, input row and bias.
fn f32_bound(w: &[f32], x: &[f32], b: Option<f32>) -> f64 {
    let abs = abs_dot(w, x);
    match b {
        Some(b) => bias_bound(w.len(), abs, f64::from(b)),
        None => (w.len() + 4) as f64 * U * abs,
    }
}

/// `sum_i |w_i x_i|` in f64.
pub(crate) fn abs_dot(w: &[f32], x: &[f32]) -> f64 {
    w.iter()
        .zip(x)
        .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
        .sum()
}

/// How a case's inputs are drawn and what each output may err by.
pub(crate) struct Inputs {
    /// Applied to every drawn input (identity, or rounding to f16 for exact-input tests).
    pub x_map: fn(f32) -> f32,
    /// The bound of one output, from its weight row, input row and bias (reference values).
    pub bound: fn(&[f32], &[f32], Option<f32>) -> f64,
}

impl Inputs {
    pub(crate) const AS_DRAWN: Inputs = Inputs {
        x_map: |v| v,
        bound: f32_bound,
    };
}

/// One matmul case: the weight (format, shape, chunking, seed of its bytes), the layout of X
/// and Y (padding after each row; Y's first element) and whether a bias is added.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Case {
    pub format: GpuFormat,
    pub n_out: usize,
    pub n_in: usize,
    pub n_tokens: usize,
    pub chunk_rows: usize,
    pub x_pad: usize,
    pub y_pad: usize,
    pub y_offset: usize,
    pub bias: bool,
    pub seed: u64,
    /// The tensor-core kernel's tile, or `None`: picked by shape as for a model.
    pub tile: Option<Tile>,
    /// Split K ([`Matmul::split_k_ops`], the tensor-core kernel with `tile` or the small
    /// one): 1 for none.
    pub k_splits: usize,
}

impl Case {
    /// Random shapes over partial tiles and chunks, strided unaligned X and Y.
    pub(crate) fn random(rng: &mut Rng) -> Case {
        let format = rng.pick(&GpuFormat::ALL);
        let n_out = rng.range(1, 150);
        let n_blocks = rng.range(1, 4);
        let n_tokens = rng.range(1, 70);
        let chunk_rows = rng.range(1, 200);
        Case {
            format,
            n_out,
            n_in: n_blocks * n_in_step(format),
            n_tokens,
            chunk_rows,
            x_pad: 3,
            y_pad: 2,
            y_offset: 1,
            bias: false,
            seed: rng.next_u64(),
            tile: None,
            k_splits: 1,
        }
    }

    /// 131 rows (2 chunks of 100 and 31) x 2 steps of the format x 37 tokens, strided X and Y.
    #[cfg(test)]
    pub(crate) fn odd_shape(format: GpuFormat, seed: u64) -> Case {
        Case {
            format,
            n_out: 131,
            n_in: 2 * n_in_step(format),
            n_tokens: 37,
            chunk_rows: 100,
            x_pad: 3,
            y_pad: 2,
            y_offset: 1,
            bias: false,
            seed,
            tile: None,
            k_splits: 1,
        }
    }

    /// Runs the case on the f32 kernel, or with `coop` on the tensor-core kernel (emulated
    /// where the device has no cooperative matrices; its tile `self.tile`), and compares every output with the f64
    /// reference; Y's padding and what precedes it must stay untouched.
    pub(crate) fn run(&self, gpu: &Gpu, coop: bool, inputs: &Inputs) -> Result<Compare, GpuError> {
        let Case {
            format,
            n_out,
            n_in,
            n_tokens,
            ..
        } = *self;
        let (bytes, w) = random_weight(format, n_out, n_in, self.seed);
        let (xs, ys) = (n_in + self.x_pad, n_out + self.y_pad);
        let x: Vec<f32> = random_f32(n_tokens * xs, self.seed ^ 1)
            .into_iter()
            .map(inputs.x_map)
            .collect();
        let shape = WeightShape {
            format,
            n_in,
            n_out,
        };
        let wt = GpuWeight::upload_chunked(gpu, shape, &bytes, self.chunk_rows)?;
        let xt = GpuTensor::from_f32(gpu, &[x.len()], &x);
        let y_len = self.y_offset + n_tokens * ys;
        let yt = GpuTensor::zeros(gpu, &[y_len], Dtype::F32);
        // The bias read from offset 1.
        let b = self.bias.then(|| random_f32(n_out + 1, self.seed ^ 2));
        let bt = b.as_ref().map(|b| GpuTensor::from_f32(gpu, &[b.len()], b));
        let m = Matmul {
            n_tokens,
            strides: Strides {
                x: Some(xs),
                y: Some(ys),
            },
            tensor_cores: coop,
        };
        let (xv, yv) = (View::at(&xt, 0), View::at(&yt, self.y_offset));
        let bv = bt.as_ref().map(|t| View::at(t, 1));
        let path = match coop {
            true => Path::Coop(self.tile),
            false => Path::F32,
        };
        let k = SplitK {
            splits: self.k_splits,
            tile: self.tile.unwrap_or(Tile::Small),
        };
        let scratch = GpuTensor::zeros(gpu, &[m.split_k_scratch(wt.all_rows(), k)], Dtype::F32);
        let out = Out {
            y: yv,
            rows: n_out,
            stride: ys,
        };
        let sv = View::at(&scratch, 0);
        let ops = match self.k_splits {
            1 => m.ops_with(path, &wt, xv, bv, yv)?,
            _ => m.split_k_ops(wt.all_rows(), xv, bv, &[out], sv, k)?,
        };
        let y: Vec<f32> = run_read(gpu, ops, &yt, 0, y_len)?;
        let mut c = Compare::default();
        for (i, &v) in y[..self.y_offset].iter().enumerate() {
            c.exact(f64::from(v), 0.0, || format!("y[{i}] before the output"));
        }
        let y = &y[self.y_offset..];
        let b = b.as_ref().map(|b| &b[1..]);
        let at = |t, r| format!("{self:?}: token {t} row {r}");
        for t in 0..n_tokens {
            let xr = &x[t * xs..][..n_in];
            let (want, _) = matvec_bias_ref(&w, xr, b);
            for (r, wr) in w.chunks_exact(n_in).enumerate() {
                let bound = (inputs.bound)(wr, xr, b.map(|b| b[r]));
                c.add(f64::from(y[t * ys + r]), f64::from(want[r]), bound, || {
                    at(t, r)
                });
            }
            if t + 1 < n_tokens {
                for (i, &v) in y[t * ys + n_out..][..self.y_pad].iter().enumerate() {
                    c.exact(f64::from(v), 0.0, || format!("pad {i} after token {t}"));
                }
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn matmul_matches_reference() {
        testutil::parity("matmul", 8, 101);
    }

    #[test]
    fn matmul_bias_matches_reference() {
        testutil::parity("matmul_bias", 8, 121);
    }

    /// Every format on an odd shape spanning several row and token tiles and 2 chunks,
    /// without and with a bias.
    #[test]
    fn every_format_odd_shape() {
        let Some(gpu) = testutil::gpu() else { return };
        for (i, f) in GpuFormat::ALL.into_iter().enumerate() {
            for bias in [false, true] {
                let case = Case {
                    bias,
                    ..Case::odd_shape(f, 200 + i as u64)
                };
                let c = case.run(gpu, false, &Inputs::AS_DRAWN).unwrap();
                assert!(c.max_ratio <= 1.0, "{case:?}: {}", c.worst);
            }
        }
    }
}
