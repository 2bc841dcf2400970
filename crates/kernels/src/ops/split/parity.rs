//! The split products' parity checks (matvec, f32 matmul, tensor-core matmul; the q8 matvec's
//! and split K's draw their cases here too).

use super::*;
use crate::device::Gpu;
use crate::format::GpuFormat;
use crate::ops::matmul::{Inputs, Matmul, Path, Strides, Tile};
use crate::ops::matmul_coop::{ROUNDED, coop_device};
use crate::ops::matmul_dense::{DenseRoute, DenseScratch, DenseTile};
use crate::ops::matvec::{
    Input, check_untouched, input_tensor, matvec_bias_ref, matvec_split_input, q8_formats,
    untouched_tensor, upload_random_weight,
};
use crate::ops::split_k::SplitK;
use crate::parity::data::{Rng, n_in_block, random_f32};
use crate::parity::{Check, Compare, run_read};
use crate::tensor::{Dtype, GpuTensor, WeightShape};

/// Tolerance of [`crate::ops::matvec::matvec_split`]: the matvec's per row, `(n_in + 4) u sum_i |w_i x_i|`, or
/// with a bias `(n_in + 5) u (sum_i |w_i x_i| + |b|)`; every element outside the outputs
/// untouched. Cases: a row range of a weight of several chunks (split points inside and
/// across chunks), 1-3 outputs at gapped offsets of one tensor, with and without a bias.
pub const MATVEC_CHECK: Check = Check {
    name: "matvec_split",
    tolerance: "as matvec / matvec_bias per row; the rest of y untouched",
    case: matvec_case,
};

/// Tolerance of [`Matmul::split_ops`] on the f32 kernel: as [`MATVEC_CHECK`], per output,
/// over blocks of tokens with a token stride per output.
pub const MATMUL_CHECK: Check = Check {
    name: "matmul_split",
    tolerance: "as matmul / matmul_bias per output; the rest of y untouched",
    case: matmul_case,
};

/// Tolerance of [`Matmul::split_ops`] on the tensor cores: `matmul_coop`'s per output (inputs
/// rounded to f16); half the cases aligned so that whole tiles inside one output take the
/// direct store. Needs cooperative matrices (skipped elsewhere).
pub const MATMUL_COOP_CHECK: Check = Check {
    name: "matmul_coop_split",
    tolerance: "as matmul_coop per output; the rest of y untouched",
    case: coop_case,
};

fn matvec_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    compare(gpu, &Case::random(rng, Kind::Matvec), &Inputs::AS_DRAWN)
}

fn matmul_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n_tokens = rng.range(1, 70);
    let case = Case::random(rng, Kind::Matmul { n_tokens });
    compare(gpu, &case, &Inputs::AS_DRAWN)
}

fn coop_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_device(gpu)?;
    compare(gpu, &coop_random(rng), &ROUNDED)
}

/// A tensor-core case: random (partial tiles, unaligned outputs), or aligned: outputs of
/// whole 64-row tiles at 16-byte aligned places, some tokens past the last whole tile.
fn coop_random(rng: &mut Rng) -> Case {
    let n_tokens = rng.range(1, 140);
    if rng.bool() {
        return Case::random(rng, Kind::Coop { n_tokens });
    }
    let rows: Vec<usize> = (0..rng.range(1, MAX_OUTPUTS + 1))
        .map(|_| 64 * rng.range(1, 3))
        .collect();
    let n: usize = rows.iter().sum();
    let format = rng.pick(&GpuFormat::ALL);
    Case {
        format,
        n_out: n + 64,
        n_blocks: rng.range(1, 4),
        first: 64 * rng.range(0, 2),
        rows,
        chunk_rows: 64 * rng.range(1, 6),
        kind: Kind::Coop {
            n_tokens: 64 * rng.range(1, 3) + rng.range(0, 2) * rng.range(1, 20),
        },
        aligned: true,
        bias: rng.bool(),
        seed: rng.next_u64(),
    }
}

/// Which kernel a case runs: the matvec (one token; with x rounded to a q8 vector by the GPU
/// first, or not), or the matmul for a block of tokens on the f32 kernel or the tensor cores
/// (emulated where the device has none: tests only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Matvec,
    MatvecQ8,
    Matmul {
        n_tokens: usize,
    },
    Coop {
        n_tokens: usize,
    },
    /// The tensor cores with the inputs split ([`Matmul::split_k_ops`]).
    CoopSplitK {
        n_tokens: usize,
        k_splits: usize,
    },
    /// The dense route on the 128 x 128 tile ([`Matmul::dense_route_ops`]: the rows copied to
    /// f16, then the dense kernel), its sum in `k_splits` shares (1: one dispatch).
    Dense {
        n_tokens: usize,
        k_splits: usize,
    },
}

impl Kind {
    fn tokens(self) -> usize {
        match self {
            Kind::Matvec | Kind::MatvecQ8 => 1,
            Kind::Matmul { n_tokens }
            | Kind::Coop { n_tokens }
            | Kind::CoopSplitK { n_tokens, .. }
            | Kind::Dense { n_tokens, .. } => n_tokens,
        }
    }
}

/// One split case: rows `first..first + rows.sum()` of a random `n_out`-row weight (chunks
/// of `chunk_rows`) into `rows.len()` outputs of one tensor. `aligned`: the outputs' offsets
/// and token strides are multiples of 4 (else gaps of 1-3 and odd strides).
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub format: GpuFormat,
    pub n_out: usize,
    pub n_blocks: usize,
    pub first: usize,
    pub rows: Vec<usize>,
    pub chunk_rows: usize,
    pub kind: Kind,
    pub aligned: bool,
    pub bias: bool,
    pub seed: u64,
}

impl Case {
    pub(crate) fn random(rng: &mut Rng, kind: Kind) -> Case {
        let format = if kind == Kind::MatvecQ8 {
            rng.pick(&q8_formats())
        } else {
            rng.pick(&GpuFormat::ALL)
        };
        let block = !matches!(kind, Kind::Matvec | Kind::MatvecQ8);
        let n_out = rng.range(2, if block { 150 } else { 60 });
        // Half the cases take the whole weight (the model's stacked q|k|v), half a range.
        let (first, n) = if rng.bool() {
            (0, n_out)
        } else {
            let first = rng.range(0, n_out - 1);
            (first, rng.range(1, n_out - first + 1))
        };
        let k = rng.range(1, MAX_OUTPUTS.min(n) + 1);
        let mut cuts: Vec<usize> = Vec::new();
        while cuts.len() + 1 < k {
            let c = rng.range(1, n);
            if !cuts.contains(&c) {
                cuts.push(c);
            }
        }
        cuts.sort_unstable();
        cuts.push(n);
        let rows = cuts
            .iter()
            .scan(0, |at, &c| {
                let r = c - *at;
                *at = c;
                Some(r)
            })
            .collect();
        Case {
            format,
            n_out,
            n_blocks: rng.range(1, if block { 4 } else { 8 }),
            first,
            rows,
            chunk_rows: rng.range(1, n_out + 4),
            kind,
            aligned: false,
            bias: rng.bool(),
            seed: rng.next_u64(),
        }
    }

    /// A split-K case ([`Kind::CoopSplitK`]): split outputs of the leading rows of a
    /// one-chunk weight, 2 to 4 splits of at least one unit each.
    pub(crate) fn split_k_random(rng: &mut Rng) -> Case {
        let n_tokens = rng.range(2, 140);
        let mut case = Case::random(rng, Kind::Coop { n_tokens });
        let n = case.n();
        case.chunk_rows = case.n_out;
        case.first = 0;
        *case.rows.last_mut().expect("a case has outputs") += case.n_out - n;
        case.n_blocks = (rng.range(64, 400) / n_in_block(case.format)).max(1);
        let units = case.n_in().div_ceil(32);
        let k_splits = rng.range(2, 5).min(units);
        case.kind = Kind::CoopSplitK { n_tokens, k_splits };
        case
    }

    fn n_in(&self) -> usize {
        self.n_blocks * n_in_block(self.format)
    }

    fn n(&self) -> usize {
        self.rows.iter().sum()
    }

    /// Where the outputs go in y: (offset, token stride) each, and y's length. Output j
    /// follows the previous at a gap (in reverse order for odd seeds), its token rows
    /// padded by `j` elements (aligned: gaps of 4, padding of 4 j).
    fn places(&self) -> (Vec<(usize, usize)>, usize) {
        let tokens = self.kind.tokens();
        let k = self.rows.len();
        let mut order: Vec<usize> = (0..k).collect();
        if self.seed % 2 == 1 {
            order.reverse();
        }
        let mut places = vec![(0, 0); k];
        let mut at = 0;
        for &j in &order {
            let (gap, stride) = if self.aligned {
                (4, self.rows[j].next_multiple_of(4) + 4 * j)
            } else {
                (1 + (self.seed as usize >> j) % 3, self.rows[j] + j)
            };
            at += gap;
            places[j] = (at, stride);
            at += (tokens - 1) * stride + self.rows[j];
        }
        (places, at + 2)
    }
}

/// Runs one split case with inputs drawn and bounded as `inputs` says; x's token rows padded
/// by 3 (by 4 on the dense route, which reads X as vec4s).
pub(crate) fn compare(gpu: &Gpu, case: &Case, inputs: &Inputs) -> Result<Compare, GpuError> {
    let n_in = case.n_in();
    let n = case.n();
    let tokens = case.kind.tokens();
    let shape = WeightShape {
        format: case.format,
        n_in,
        n_out: case.n_out,
    };
    let (wt, w) = upload_random_weight(gpu, shape, case.chunk_rows, case.seed)?;
    let xs = match case.kind {
        Kind::Dense { .. } => n_in + 4,
        _ => n_in + 3,
    };
    let mut x: Vec<f32> = random_f32(tokens * xs, case.seed ^ 1)
        .into_iter()
        .map(inputs.x_map)
        .collect();
    let xt = GpuTensor::from_f32(gpu, &[x.len()], &x);
    // The q8 matvec reads x rounded by the GPU (at word 4 of its tensor); the reference
    // multiplies by the values it stands for.
    let q8 = if case.kind == Kind::MatvecQ8 {
        let (qt, values) = input_tensor(gpu, x[..n_in].to_vec(), Some(4))?;
        x[..n_in].copy_from_slice(&values);
        Some(qt)
    } else {
        None
    };
    let (places, len) = case.places();
    let yt = untouched_tensor(gpu, len);
    let outs: Vec<Out> = places
        .iter()
        .zip(&case.rows)
        .map(|(&(offset, stride), &rows)| Out {
            y: View::at(&yt, offset),
            rows,
            stride,
        })
        .collect();
    let b = case.bias.then(|| random_f32(n + 1, case.seed ^ 2));
    let bt = b.as_ref().map(|b| GpuTensor::from_f32(gpu, &[b.len()], b));
    let bv = bt.as_ref().map(|t| View::at(t, 1));
    let rows = wt.rows(case.first..case.first + n);
    let xv = View::at(&xt, 0);
    let mut scratch = None;
    let mut copy = None;
    let block = |tensor_cores| Matmul {
        n_tokens: tokens,
        strides: Strides {
            x: Some(xs),
            y: None,
        },
        tensor_cores,
    };
    let ops = match case.kind {
        Kind::Matvec | Kind::MatvecQ8 => {
            let input = match &q8 {
                Some(qt) => Input::Q8(View::at(qt, 4)),
                None => Input::Plain(xv),
            };
            matvec_split_input(rows, input, bv, &outs)?
        }
        Kind::Matmul { .. } => block(false).split_ops_with(Path::F32, rows, xv, bv, &outs)?,
        Kind::Coop { .. } => {
            // Both of the tensor-core kernel's tiles, by the seed's parity: the cases' shapes
            // are too small for the shape rule to pick the wide one.
            let tile = [Tile::Small, Tile::Wide][(case.seed % 2) as usize];
            block(true).split_ops_with(Path::Coop(Some(tile)), rows, xv, bv, &outs)?
        }
        Kind::CoopSplitK { k_splits, .. } => {
            let k = SplitK {
                splits: k_splits,
                tile: [Tile::Small, Tile::Wide][(case.seed % 2) as usize],
            };
            let m = block(true);
            let len = m.split_k_scratch(rows, k);
            let scratch = scratch.insert(GpuTensor::zeros(gpu, &[len], Dtype::F32));
            m.split_k_ops(rows, xv, bv, &outs, View::at(scratch, 0), k)?
        }
        Kind::Dense { k_splits, .. } => {
            let route = DenseRoute {
                tile: DenseTile::Square,
                splits: k_splits,
            };
            let m = block(true);
            let copy = copy.insert(GpuTensor::zeros(gpu, &[m.dense_copy_len(rows)], Dtype::F32));
            let len = m.dense_partials_len(rows, route).max(1);
            let partials = scratch.insert(GpuTensor::zeros(gpu, &[len], Dtype::F32));
            let scratch = DenseScratch {
                copy: View::at(copy, 0),
                partials: (k_splits > 1).then(|| View::at(partials, 0)),
            };
            m.dense_route_ops(route, rows, xv, bv, &outs, scratch)?
        }
    };
    let y: Vec<f32> = run_read(gpu, ops, &yt, 0, len)?;
    let b = b.as_ref().map(|b| &b[1..]);
    let w_range = &w[case.first * n_in..(case.first + n) * n_in];
    let mut covered = vec![false; len];
    let mut c = Compare::default();
    for t in 0..tokens {
        let xr = &x[t * xs..][..n_in];
        let (want, _) = matvec_bias_ref(w_range, xr, b);
        let mut r = 0;
        for (j, &rows_j) in case.rows.iter().enumerate() {
            let (offset, stride) = places[j];
            for i in 0..rows_j {
                let at = offset + t * stride + i;
                covered[at] = true;
                let wr = &w_range[r * n_in..][..n_in];
                let bound = (inputs.bound)(wr, xr, b.map(|b| b[r]));
                c.add(f64::from(y[at]), f64::from(want[r]), bound, || {
                    format!("{case:?}: token {t} output {j} row {i}")
                });
                r += 1;
            }
        }
    }
    check_untouched(&mut c, &y, &covered, case);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::matvec::{matvec, matvec_bias, matvec_split};
    use crate::parity::data::random_weight;
    use crate::tensor::GpuWeight;
    use crate::testutil;

    #[test]
    fn matvec_split_matches_reference() {
        testutil::parity("matvec_split", 16, 31);
    }

    #[test]
    fn matmul_split_matches_reference() {
        testutil::parity("matmul_split", 12, 131);
    }

    #[test]
    fn matmul_coop_split_matches_reference() {
        testutil::parity("matmul_coop_split", 8, 231);
    }

    /// The tensor-core kernel's body with split outputs: on lavapipe over the emulated coop
    /// ops (the direct tile store where a tile's rows lie in one aligned output, the scratch
    /// store elsewhere), on a device with cooperative matrices the tensor cores.
    #[test]
    fn coop_body_split() {
        let Some(gpu) = testutil::gpu() else { return };
        if !gpu.caps.coop_f16 && !gpu.caps.shader_f16 {
            testutil::note("coop_body_split skipped: no SHADER_F16 for the emulated coop ops");
            return;
        }
        for seed in 0..8 {
            let case = coop_random(&mut Rng::new(900 + seed));
            let c = compare(gpu, &case, &ROUNDED).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
        // Whole tiles in one output each, chunks of 96 rows (tiles past a chunk's end take
        // the scratch store), with and without a bias; then outputs of 96, 32 and 64 rows in
        // one chunk, so the tile of rows 64..128 straddles two outputs (scratch store) and
        // the others do not (direct).
        for (rows, chunk_rows, bias) in [
            (vec![128, 64, 64], 96, false),
            (vec![128, 64, 64], 96, true),
            (vec![96, 32, 64], 256, false),
        ] {
            let case = Case {
                format: GpuFormat::Q8_0,
                n_out: 256,
                n_blocks: 2,
                first: 0,
                rows,
                chunk_rows,
                kind: Kind::Coop { n_tokens: 70 },
                aligned: true,
                bias,
                seed: 42,
            };
            let c = compare(gpu, &case, &ROUNDED).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }

    /// Every format, both kernels, with and without a bias: rows 2..21 of a 23-row weight in
    /// chunks of 6 into outputs of 7, 5 and 7 rows, so every output straddles a chunk
    /// boundary and three chunks hold two outputs each.
    #[test]
    fn split_every_format() {
        let Some(gpu) = testutil::gpu() else { return };
        for (i, format) in GpuFormat::ALL.into_iter().enumerate() {
            for kind in [Kind::Matvec, Kind::Matmul { n_tokens: 37 }] {
                for bias in [false, true] {
                    let case = Case {
                        format,
                        n_out: 23,
                        n_blocks: 2,
                        first: 2,
                        rows: vec![7, 5, 7],
                        chunk_rows: 6,
                        kind,
                        aligned: false,
                        bias,
                        seed: 300 + i as u64,
                    };
                    let c = compare(gpu, &case, &Inputs::AS_DRAWN).unwrap();
                    assert!(c.max_ratio <= 1.0, "{}", c.worst);
                }
            }
        }
    }

    /// q, k and v stacked into one weight (chunks straddling their boundaries) give, through
    /// one split product, what three products over separately uploaded weights give, bit for
    /// bit: decode (matvec) and prefill (matmul), with and without the biases.
    #[test]
    fn split_equals_separate_products() {
        let Some(gpu) = testutil::gpu() else { return };
        let rows = [40usize, 12, 12];
        let n_out: usize = rows.iter().sum();
        for (i, format) in [
            GpuFormat::Q8_0,
            GpuFormat::Q4K,
            GpuFormat::Q5_0,
            GpuFormat::F32,
        ]
        .into_iter()
        .enumerate()
        {
            let n_in = 256;
            let (bytes, _) = random_weight(format, n_out, n_in, 40 + i as u64);
            let shape = |n_out| WeightShape {
                format,
                n_in,
                n_out,
            };
            let stacked = GpuWeight::upload_chunked(gpu, shape(n_out), &bytes, 25).unwrap();
            let row_bytes = format.row_bytes(n_in);
            let mut first = 0;
            let parts: Vec<GpuWeight> = rows
                .iter()
                .map(|&r| {
                    let b = &bytes[first * row_bytes..(first + r) * row_bytes];
                    first += r;
                    GpuWeight::upload(gpu, shape(r), b).unwrap()
                })
                .collect();
            let tokens = 5;
            let x = GpuTensor::from_f32(gpu, &[tokens * n_in], &random_f32(tokens * n_in, 3));
            let bias = GpuTensor::from_f32(gpu, &[n_out], &random_f32(n_out, 4));
            for n_tok in [1, tokens] {
                for with_bias in [false, true] {
                    let len = n_tok * n_out;
                    let y = GpuTensor::zeros(gpu, &[2 * len], Dtype::F32);
                    // Split: outputs packed one after another in [0, len).
                    let mut at = 0;
                    let outs: Vec<Out> = rows
                        .iter()
                        .map(|&r| {
                            let o = Out::new(View::at(&y, at), r);
                            at += n_tok * r;
                            o
                        })
                        .collect();
                    let bv = with_bias.then(|| View::from(&bias));
                    let xv = View::from(&x);
                    let block = Matmul {
                        n_tokens: n_tok,
                        strides: Strides::default(),
                        tensor_cores: false,
                    };
                    let all = stacked.all_rows();
                    let mut ops = if n_tok == 1 {
                        matvec_split(all, xv, bv, &outs).unwrap()
                    } else {
                        block.split_ops_with(Path::F32, all, xv, bv, &outs).unwrap()
                    };
                    // Separate: the same places, from len on.
                    let (mut at, mut brow) = (len, 0);
                    for (w, &r) in parts.iter().zip(&rows) {
                        let yv = View::at(&y, at);
                        let b = View::at(&bias, brow);
                        ops.extend(
                            match (n_tok, with_bias) {
                                (1, false) => matvec(w, xv, yv),
                                (1, true) => matvec_bias(w, xv, b, yv),
                                _ => block.ops_with(Path::F32, w, xv, with_bias.then_some(b), yv),
                            }
                            .unwrap(),
                        );
                        at += n_tok * r;
                        brow += r;
                    }
                    let got: Vec<f32> = run_read(gpu, ops, &y, 0, 2 * len).unwrap();
                    let (split, separate) = got.split_at(len);
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(split),
                        bits(separate),
                        "{format:?} tokens {n_tok} bias {with_bias}"
                    );
                }
            }
        }
    }

    /// Outputs that do not take the range's rows exactly, or lie in two tensors, or are too
    /// many, are errors, not wrong kernels.
    #[test]
    fn split_checks_its_outputs() {
        let Some(gpu) = testutil::gpu() else { return };
        let shape = WeightShape {
            format: GpuFormat::F32,
            n_in: 4,
            n_out: 8,
        };
        let w = GpuWeight::upload(gpu, shape, &[0u8; 4 * 4 * 8]).unwrap();
        let (a, b) = (
            GpuTensor::zeros(gpu, &[32], Dtype::F32),
            GpuTensor::zeros(gpu, &[32], Dtype::F32),
        );
        let x = View::from(&a);
        let out = |t, at, rows| Out::new(View::at(t, at), rows);
        let bad: [Vec<Out>; 4] = [
            vec![out(&a, 8, 3), out(&a, 12, 4)],
            vec![out(&a, 8, 4), out(&b, 12, 4)],
            vec![
                out(&a, 8, 2),
                out(&a, 10, 2),
                out(&a, 12, 2),
                out(&a, 14, 2),
            ],
            vec![out(&a, 30, 8)],
        ];
        for outs in &bad {
            let r = matvec_split(w.all_rows(), x, None, outs);
            assert!(r.is_err(), "{outs:?}");
        }
        assert!(matvec_split(w.rows(6..10), x, None, &[out(&a, 8, 4)]).is_err());
        assert!(matvec_split(w.rows(2..6), x, None, &[out(&a, 8, 4)]).is_ok());
    }
}
