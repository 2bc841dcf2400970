//! Split K for the tensor-core prompt matmul: a product with few output tiles (the down and o
//! projections of a small model: qwen2.5-0.5b's down makes 210 workgroups for an H100's 132
//! SMs, each walking 152 input units; its q|k|v with their bias 270) runs as `splits`
//! workgroups per tile, split z summing its share of the input units into a scratch slice of
//! its own (`matmul/matmul_coop.wgsl`, `k_units` / `k_slice`, no epilogue), and a second
//! dispatch adds the slices up in split order and stores them as the one-dispatch product
//! would (`matmul/reduce_k.wgsl` with the product's [`Epilogue`]: the bias added to the
//! finished sum, the rows of a stacked weight split over their outputs). [`Matmul::split_k`]
//! says when, in how many splits and with which tile: the wide one ([`Tile::Wide`]) wherever
//! the product has 256 rows, since split K restores the parallelism the wide tile gives up
//! (docs/PERF.md, D-split-k-wide). The rows must start the weight's one
//! chunk (a whole weight, or the leading rows of one), so the product's dispatch rows are the
//! chunk's.
//!
//! Bound: the tensor-core kernel's (`ops/matmul_coop.rs`). Its summation model charges
//! `(c + 1) 2u S` per chunk of c products, at most `4 n u S` for any c; with chunks of at
//! least 4 products (what Fasi et al. measured on NVIDIA's tensor cores) the charge is at
//! most `(5 / 4) 2 n u S = 2.5 n u S`, and the `k_splits - 1 <= 7` additions of the partials
//! (`(k_splits - 1) u S`, with n >= 256 k_splits) stay inside the same `4 n u S`; a bias is
//! one more term, as in the one-dispatch product.

use crate::device::Caps;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::ops::epilogue::Epilogue;
use crate::ops::matmul::{Matmul, MatmulParams, Path, Tile};
use crate::ops::split::{self, Out, SplitParams};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, SPLIT_PARAMS, ShaderFile, shader_file};
use crate::tensor::{View, WeightRows};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::CHECK;

static REDUCE: ShaderFile = shader_file!("matmul/reduce_k.wgsl");

/// The partial sums at 1, y at 2; a bias at 5, where [`Epilogue::files`]' value file binds it.
fn reduce_bindings(out: Epilogue) -> &'static [BindingKind] {
    use BindingKind::{Absent, StorageRead as R, StorageReadWrite as Rw, Uniform};
    match out.bias {
        false => &[Uniform, R, Rw],
        true => &[Uniform, R, Rw, Absent, Absent, R],
    }
}

const REDUCE_WORKGROUP: u32 = 256;

/// Split K is worth it below this many small-tile workgroups (about 8 per SM of an H100; a
/// wide one counts 4), in at most `MAX_SPLITS` splits, each summing at least `MIN_UNITS`
/// units of 32 inputs. 1024 and 8 beat 512 and 4 by 2.8% on qwen2.5-0.5b's prefill, and 2048
/// and 8 was no better (docs/PERF.md, D-split-k).
const TARGET_WORKGROUPS: usize = 1024;
const MAX_SPLITS: usize = 8;
const MIN_UNITS: usize = 8;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct ReduceParams {
    pub n_rows: u32,
    pub n_tokens: u32,
    pub k_splits: u32,
    pub slice: u32,
    pub src_offset: u32,
    /// One output (`common/out_one.wgsl`): token t's row r at `y_offset + t * y_stride + r`.
    pub y_offset: u32,
    pub y_stride: u32,
    /// The bias of row 0 (the bias epilogue only).
    pub bias_offset: u32,
    /// Split outputs (the split epilogue only).
    pub split: SplitParams,
}

/// Split K's reduce kernel, through the product's epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReduceKKernel(pub Epilogue);

impl KernelFamily for ReduceKKernel {
    fn variants() -> Vec<ReduceKKernel> {
        Epilogue::ALL.map(ReduceKKernel).to_vec()
    }

    fn program(self) -> Program {
        let out = self.0;
        Program {
            name: format!("matmul_reduce_k{}", out.infix()),
            files: [&REDUCE, &SPLIT_PARAMS]
                .into_iter()
                .chain(out.files())
                .collect(),
            entry: "main",
            bindings: reduce_bindings(out),
            params_size: size_of::<ReduceParams>(),
        }
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, REDUCE_WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

/// How a product's inputs are split ([`Matmul::split_k`]): into `splits` shares, each run
/// with `tile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitK {
    /// Shares of the input dimension, each summed by its own workgroups.
    pub splits: usize,
    /// The tile each share runs with.
    pub tile: Tile,
}

impl Matmul {
    /// How the tensor-core kernel should split the inputs of rows `w` on a device with `caps`
    /// (`None`: not at all): a prompt block on the tensor cores, rows that start the weight's
    /// one chunk, and a product the shape rule leaves on the small tile ([`Tile::for_shape`])
    /// with fewer than `TARGET_WORKGROUPS` of them. The wide tile where there are 256 rows;
    /// as many splits as reach the target, up to `MAX_SPLITS`, each of at least `MIN_UNITS`
    /// units.
    pub fn split_k(&self, caps: &Caps, w: WeightRows<'_>) -> Option<SplitK> {
        let n_in = w.w.shape.n_in;
        let workgroups = |t: Tile| w.n.div_ceil(t.side()) * self.n_tokens.div_ceil(t.side());
        let units = n_in.div_ceil(32);
        if !self.coop(caps)
            || self.n_tokens < 2
            || w.w.chunks.len() != 1
            || w.first != 0
            || Tile::for_shape(w.n, self.n_tokens) != Tile::Small
            || workgroups(Tile::Small) >= TARGET_WORKGROUPS
        {
            return None;
        }
        let (tile, weight) = match w.n >= 2 * Tile::Wide.side() {
            true => (Tile::Wide, 4),
            false => (Tile::Small, 1),
        };
        let splits = TARGET_WORKGROUPS
            .div_ceil(weight * workgroups(tile))
            .min(MAX_SPLITS)
            .min(units / MIN_UNITS);
        (splits > 1).then_some(SplitK { splits, tile })
    }

    /// Length of the scratch [`Matmul::split_k_ops`] needs for rows `w` split as `k` says.
    pub fn split_k_scratch(&self, w: WeightRows<'_>, k: SplitK) -> usize {
        k.splits * self.n_tokens * w.n
    }

    /// The product [`Matmul::split_ops`] computes (rows `w` into `outs`, plus `bias`; one
    /// output of a whole weight stores as [`Matmul::ops`] does), on the tensor-core kernel
    /// (its emulation on a device without cooperative matrices: tests) with its inputs split
    /// as `k` says, through `scratch` ([`Matmul::split_k_scratch`] values, another buffer
    /// than x and y): two dispatches. The rows must start the weight's one chunk. A dense
    /// tile ([`Tile::Dense`]) runs the dense kernel, over F16 rows only.
    pub fn split_k_ops(
        self,
        w: WeightRows<'_>,
        x: View<'_>,
        bias: Option<View<'_>>,
        outs: &[Out<'_>],
        scratch: View<'_>,
        k: SplitK,
    ) -> Result<Vec<Op>, GpuError> {
        let path = Path::Coop(Some(k.tile));
        self.split_k_ops_with(path, k.splits, w, x, bias, outs, scratch)
    }

    /// As [`Matmul::split_k_ops`] on the kernel `path` names (the tile's, or the dense
    /// kernel over X's f16 copy), in `k_splits` shares.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn split_k_ops_with(
        self,
        path: Path,
        k_splits: usize,
        w: WeightRows<'_>,
        x: View<'_>,
        bias: Option<View<'_>>,
        outs: &[Out<'_>],
        scratch: View<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        const OP: &str = "matmul split K";
        let s = w.w.shape;
        let invalid = |detail: String| GpuError::InvalidParams { op: OP, detail };
        let parts = split::parts(OP, w, bias, outs, self.n_tokens)?;
        let [part] = &parts[..] else {
            return Err(invalid(format!(
                "{} weight chunks; split K takes one",
                w.w.chunks.len()
            )));
        };
        if part.split.row_base != 0 {
            return Err(invalid(format!(
                "rows from {}; split K takes rows from the chunk's first",
                part.split.row_base
            )));
        }
        let slice = self.n_tokens * w.n;
        scratch.check("split-K scratch", k_splits * slice)?;
        let Some(tile) = path.named_tile() else {
            return Err(invalid("split K on a kernel without a named tile".into()));
        };
        let (x_at, xs) = self.x_place(path, "matmul x", s, x)?;
        let units = s.n_in.div_ceil(32);
        if k_splits == 0 || k_splits > units {
            return Err(invalid(format!("{k_splits} splits of {units} input units")));
        }
        let params = MatmulParams {
            y_offset: scratch.offset as u32,
            y_stride: w.n as u32,
            k_units: units.div_ceil(k_splits) as u32,
            k_slice: slice as u32,
            ..self.params(s, w.n, x_at, xs)
        };
        if matches!(tile, Tile::Dense(_)) && !crate::ops::matmul_dense::supports(s.format, s.n_in) {
            return Err(invalid(format!(
                "a dense tile over {} rows of {} inputs: the dense kernel takes F16 rows of whole \
                 32-input units",
                s.format.name(),
                s.n_in
            )));
        }
        let [rows, tokens, _] = tile.grid(w.n, self.n_tokens);
        let grid = [rows, tokens, k_splits as u32];
        let chunk = &part.chunk.buf;
        let buffers = [chunk, &x.t.buf, &scratch.t.buf, chunk];
        let kernel = path.kernel(s.format, Epilogue::STORE);
        let product = Op::new(kernel, tile.workgroup(), &params, &buffers, grid);
        let out = Epilogue {
            bias: bias.is_some(),
            split: !(w.is_whole() && outs.len() == 1),
        };
        let reduce = ReduceParams {
            n_rows: w.n as u32,
            n_tokens: self.n_tokens as u32,
            k_splits: k_splits as u32,
            slice: slice as u32,
            src_offset: scratch.offset as u32,
            y_offset: outs[0].y.offset as u32,
            y_stride: outs[0].stride as u32,
            bias_offset: part.bias_offset,
            split: part.split,
        };
        let mut buffers = vec![&scratch.t.buf, &outs[0].y.t.buf];
        buffers.extend(bias.map(|b| &b.t.buf));
        let grid = grid_1d(slice.div_ceil(REDUCE_WORKGROUP as usize));
        let reduce = Op::new(
            ReduceKKernel(out),
            REDUCE_WORKGROUP,
            &reduce,
            &buffers,
            grid,
        );
        Ok(vec![product, reduce])
    }
}
