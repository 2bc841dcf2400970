//! `Y = X W^T` for a block of tokens (prefill), `W` a GGUF weight in any [`GpuFormat`].
//!
//! WGSL: `matmul/matmul.wgsl` + `common/blocks.wgsl` + `formats/<type>.wgsl` (the format's
//! `decode_half`). A workgroup of 128 computes 64 rows x 64 tokens: per unit of 32 inputs
//! every invocation decodes 16 weights and loads 16 inputs into workgroup memory, then
//! accumulates 8 rows x 4 tokens in registers, so a decoded weight serves 64 tokens and an
//! input 64 rows. One dispatch per weight chunk. Each output may take its row's bias as it
//! is stored ([`matmul_bias`], the [`Epilogue`]), and the rows of a row range may go to
//! several outputs, each with its own token stride ([`matmul_split`], [`crate::ops::split`]).

use crate::device::Gpu;
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::op::Op;
use crate::ops::epilogue::{Epilogue, bias_bound};
use crate::ops::matvec::matvec_bias_ref;
use crate::ops::split::{self, Out, SplitParams};
use crate::parity::data::{Rng, n_in_step, random_f32, random_weight};
use crate::parity::{Check, Compare, U, run_read};
use crate::pipeline::Kernel;
use crate::shader::{BLOCKS, Program, ShaderFile, shader_file};
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
    pub _pad: [u32; 3],
    /// Split outputs (the split epilogue only; zero otherwise).
    pub split: SplitParams,
}

static SHADER: ShaderFile = shader_file!("matmul/matmul.wgsl");

/// Fixed by the kernel: 8 x 16 invocations of 8 rows x 4 tokens each.
pub const WORKGROUP: u32 = 128;
const TILE_ROWS: usize = 64;
const TILE_TOKENS: usize = 64;

pub(crate) fn program(f: GpuFormat, out: Epilogue) -> Program {
    Program {
        name: format!("matmul{}_{}", out.infix(), f.name()),
        files: [&SHADER]
            .into_iter()
            .chain(out.files())
            .chain([&BLOCKS])
            .chain(f.decoder().iter().copied())
            .collect(),
        entry: "main",
        bindings: out.bindings(),
        params_size: size_of::<MatmulParams>(),
    }
}

/// Strides of the token rows of X and Y (elements); `None`: packed (`n_in`, `n_out`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Strides {
    pub x: Option<usize>,
    pub y: Option<usize>,
}

/// `y[y.offset + t * y_stride + r] = sum_i W[r, i] x[x.offset + t * x_stride + i]` for
/// `n_tokens` tokens; one op per weight chunk.
pub fn matmul(
    w: &GpuWeight,
    x: View<'_>,
    y: View<'_>,
    n_tokens: usize,
    strides: Strides,
) -> Result<Vec<Op>, GpuError> {
    ops(w, x, None, y, n_tokens, strides)
}

/// [`matmul`] plus `bias[bias.offset + r]` on every token's row r (a linear layer with a
/// bias, one dispatch per weight chunk; each chunk adds its own rows' bias).
pub fn matmul_bias(
    w: &GpuWeight,
    x: View<'_>,
    bias: View<'_>,
    y: View<'_>,
    n_tokens: usize,
    strides: Strides,
) -> Result<Vec<Op>, GpuError> {
    ops(w, x, Some(bias), y, n_tokens, strides)
}

fn ops(
    w: &GpuWeight,
    x: View<'_>,
    bias: Option<View<'_>>,
    y: View<'_>,
    n_tokens: usize,
    strides: Strides,
) -> Result<Vec<Op>, GpuError> {
    let s = w.shape;
    let xs = strides.x.unwrap_or(s.n_in);
    let ys = strides.y.unwrap_or(s.n_out);
    let n = n_tokens.max(1);
    x.check("matmul x", (n - 1) * xs + s.n_in)?;
    y.check("matmul y", (n - 1) * ys + s.n_out)?;
    if let Some(b) = bias {
        b.check("matmul bias", s.n_out)?;
    }
    let out = Epilogue {
        bias: bias.is_some(),
        split: false,
    };
    let ops = w.chunks.iter().map(|c| {
        let params = MatmulParams {
            n_in: s.n_in as u32,
            n_rows: c.n_rows as u32,
            row_bytes: s.format.row_bytes(s.n_in) as u32,
            n_tokens: n_tokens as u32,
            x_offset: x.offset as u32,
            x_stride: xs as u32,
            y_offset: (y.offset + c.first_row) as u32,
            y_stride: ys as u32,
            bias_offset: bias.map_or(0, |b| (b.offset + c.first_row) as u32),
            _pad: [0; 3],
            split: SplitParams::default(),
        };
        let grid = [
            c.n_rows.div_ceil(TILE_ROWS) as u32,
            n_tokens.div_ceil(TILE_TOKENS) as u32,
            1,
        ];
        let mut buffers = vec![&c.buf, &x.t.buf, &y.t.buf, &c.buf];
        buffers.extend(bias.map(|b| &b.t.buf));
        Op::new(
            Kernel::Matmul(s.format, out),
            WORKGROUP,
            &params,
            &buffers,
            grid,
        )
    });
    Ok(ops.collect())
}

/// The outputs of a split product for `n_tokens` tokens: rows `w` of a weight (a stacked
/// q|k|v, say) times each token's input (rows `x_stride` apart, `None`: `n_in`), plus
/// `bias[bias.offset + r - w.first]` if any, the next `outs[j].rows` rows into output j at
/// `outs[j].y.offset + t * outs[j].stride` (regions of one tensor, see [`crate::ops::split`]).
/// One op per weight chunk the rows touch; each output computed as [`matmul`] computes it.
pub fn matmul_split(
    w: WeightRows<'_>,
    x: View<'_>,
    bias: Option<View<'_>>,
    outs: &[Out<'_>],
    n_tokens: usize,
    x_stride: Option<usize>,
) -> Result<Vec<Op>, GpuError> {
    let s = w.w.shape;
    let xs = x_stride.unwrap_or(s.n_in);
    x.check("matmul_split x", (n_tokens.max(1) - 1) * xs + s.n_in)?;
    let parts = split::parts("matmul_split", w, bias, outs, n_tokens)?;
    let out = Epilogue {
        bias: bias.is_some(),
        split: true,
    };
    let y = &outs[0].y.t.buf;
    let ops = parts.into_iter().map(|part| {
        let params = MatmulParams {
            n_in: s.n_in as u32,
            n_rows: part.n_rows as u32,
            row_bytes: s.format.row_bytes(s.n_in) as u32,
            n_tokens: n_tokens as u32,
            x_offset: x.offset as u32,
            x_stride: xs as u32,
            y_offset: 0,
            y_stride: 0,
            bias_offset: part.bias_offset,
            _pad: [0; 3],
            split: part.split,
        };
        let grid = [
            part.n_rows.div_ceil(TILE_ROWS) as u32,
            n_tokens.div_ceil(TILE_TOKENS) as u32,
            1,
        ];
        let mut buffers = vec![&part.chunk.buf, &x.t.buf, y, &part.chunk.buf];
        buffers.extend(bias.map(|b| &b.t.buf));
        Op::new(
            Kernel::Matmul(s.format, out),
            WORKGROUP,
            &params,
            &buffers,
            grid,
        )
    });
    Ok(ops.collect())
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
    compare(gpu, Case::random(rng))
}

/// Tolerance of [`matmul_bias`]: as matvec's, the bias one more term of each output's sum,
/// `(n_in + 5) u (sum_i |w_i x_i| + |b|)` ([`bias_bound`]); weights split into chunks.
pub const BIAS_CHECK: Check = Check {
    name: "matmul_bias",
    tolerance: "(n_in+5)*2^-24*(sum|w_i x_i| + |b|)",
    case: bias_parity_case,
};

fn bias_parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    compare(
        gpu,
        Case {
            bias: true,
            ..Case::random(rng)
        },
    )
}

/// One matmul parity case: `n_tokens` tokens through a random weight of `n_out` rows of
/// `n_blocks` blocks, split into chunks of `chunk_rows` rows.
#[derive(Debug, Clone, Copy)]
struct Case {
    format: GpuFormat,
    n_out: usize,
    n_blocks: usize,
    n_tokens: usize,
    chunk_rows: usize,
    seed: u64,
    bias: bool,
}

impl Case {
    fn random(rng: &mut Rng) -> Case {
        Case {
            format: rng.pick(&GpuFormat::ALL),
            n_out: rng.range(1, 150),
            n_blocks: rng.range(1, 4),
            n_tokens: rng.range(1, 70),
            chunk_rows: rng.range(1, 200),
            seed: rng.next_u64(),
            bias: false,
        }
    }
}

fn compare(gpu: &Gpu, case: Case) -> Result<Compare, GpuError> {
    let Case {
        format,
        n_out,
        n_tokens,
        seed,
        ..
    } = case;
    let n_in = case.n_blocks * n_in_step(format);
    let (bytes, w) = random_weight(format, n_out, n_in, seed);
    // X rows padded by 3, Y rows by 2: strided views; the bias read from offset 1.
    let (xs, ys) = (n_in + 3, n_out + 2);
    let x = random_f32(n_tokens * xs, seed ^ 1);
    let shape = WeightShape {
        format,
        n_in,
        n_out,
    };
    let wt = GpuWeight::upload_chunked(gpu, shape, &bytes, case.chunk_rows)?;
    let xt = GpuTensor::from_f32(gpu, &[x.len()], &x);
    let yt = GpuTensor::zeros(gpu, &[n_tokens * ys + 1], Dtype::F32);
    let b = case.bias.then(|| random_f32(n_out + 1, seed ^ 2));
    let bt = b.as_ref().map(|b| GpuTensor::from_f32(gpu, &[b.len()], b));
    let strides = Strides {
        x: Some(xs),
        y: Some(ys),
    };
    let (xv, yv) = (View::at(&xt, 0), View::at(&yt, 1));
    let ops = match &bt {
        Some(bt) => matmul_bias(&wt, xv, View::at(bt, 1), yv, n_tokens, strides)?,
        None => matmul(&wt, xv, yv, n_tokens, strides)?,
    };
    let y: Vec<f32> = run_read(gpu, ops, &yt, 1, n_tokens * ys)?;
    let b = b.as_ref().map(|b| &b[1..]);
    let mut c = Compare::default();
    for t in 0..n_tokens {
        let (want, abs) = matvec_bias_ref(&w, &x[t * xs..][..n_in], b);
        for r in 0..n_out {
            let abs = f64::from(abs[r]);
            let bound = match b {
                Some(b) => bias_bound(n_in, abs, f64::from(b[r])),
                None => (n_in + 4) as f64 * U * abs,
            };
            c.add(f64::from(y[t * ys + r]), f64::from(want[r]), bound, || {
                format!("{case:?}: token {t} row {r}")
            });
        }
        if t + 1 < n_tokens {
            // The padding between Y rows stays untouched.
            c.exact(f64::from(y[t * ys + n_out]), 0.0, || {
                format!("pad after token {t}")
            });
        }
    }
    Ok(c)
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
                    format: f,
                    n_out: 131,
                    n_blocks: 2,
                    n_tokens: 37,
                    chunk_rows: 100,
                    seed: 200 + i as u64,
                    bias,
                };
                let c = compare(gpu, case).unwrap();
                assert!(c.max_ratio <= 1.0, "{}", c.worst);
            }
        }
    }
}
