//! CPU activations and weights.

use std::ops::Range;
use std::sync::Arc;

use rullama_gguf::TensorView;
use rullama_quant::{Format, FormatOps};

use crate::error::{ModelError, Result};

/// An f32 activation: `rows` rows of `cols` values, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuTensor {
    /// Rows: one per token.
    pub rows: usize,
    /// Values per row.
    pub cols: usize,
    /// `rows * cols` values.
    pub data: Vec<f32>,
}

impl CpuTensor {
    pub(crate) fn new(rows: usize, cols: usize, data: Vec<f32>) -> CpuTensor {
        assert_eq!(
            data.len(),
            rows * cols,
            "CpuTensor data does not fill {rows}x{cols}"
        );
        CpuTensor { rows, cols, data }
    }

    pub(crate) fn zeros(rows: usize, cols: usize) -> CpuTensor {
        CpuTensor::new(rows, cols, vec![0.0; rows * cols])
    }

    pub(crate) fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    pub(crate) fn row_mut(&mut self, i: usize) -> &mut [f32] {
        &mut self.data[i * self.cols..(i + 1) * self.cols]
    }

    pub(crate) fn rows_range(&self, range: Range<usize>) -> CpuTensor {
        let data = self.data[range.start * self.cols..range.end * self.cols].to_vec();
        CpuTensor::new(range.len(), self.cols, data)
    }
}

/// A weight as the CPU backend keeps it; cloning shares it.
#[derive(Debug, Clone)]
pub struct CpuWeight(pub(crate) Arc<WeightData>);

#[derive(Debug)]
pub(crate) enum WeightData {
    /// A 1-D tensor (norm gain, bias), dequantized.
    Vector(Vec<f32>),
    /// A matrix kept in its file format.
    Matrix(QMatrix),
}

/// How the CPU backend keeps a matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightStorage {
    /// As the file has it; each row is dequantized when a matmul reads it. Memory = file
    /// size, load is a copy.
    #[default]
    Quantized,
    /// Dequantized once at load (bit-exact) into f32: ~3x faster decode, 4 bytes a weight.
    Dense,
}

/// `n_out` rows of `n_in` weights.
#[derive(Debug)]
pub(crate) struct QMatrix {
    pub n_in: usize,
    pub n_out: usize,
    pub rows: Rows,
}

#[derive(Debug)]
pub(crate) enum Rows {
    Quantized {
        ops: FormatOps,
        row_bytes: usize,
        bytes: Vec<u8>,
    },
    Dense(Vec<f32>),
}

impl QMatrix {
    /// Row `r` as f32: decoded into `scratch` (`n_in` values), or borrowed when dense.
    pub fn row<'a>(&'a self, r: usize, scratch: &'a mut [f32]) -> &'a [f32] {
        match &self.rows {
            Rows::Quantized {
                ops,
                row_bytes,
                bytes,
            } => {
                let bytes = &bytes[r * row_bytes..(r + 1) * row_bytes];
                ops.dequantize(bytes, scratch)
                    .expect("row sizes were checked at load");
                scratch
            }
            Rows::Dense(values) => &values[r * self.n_in..(r + 1) * self.n_in],
        }
    }
}

impl CpuWeight {
    /// Keep a tensor of the file: 1-D ones as f32, matrices (2-D) per `storage`.
    pub fn from_view(view: TensorView<'_>, storage: WeightStorage) -> Result<CpuWeight> {
        let name = &view.info.name;
        let err = |source| ModelError::Weight {
            name: name.clone(),
            source,
        };
        let format = Format::Ggml(view.info.ggml_type);
        let ops = FormatOps::of(format).map_err(err)?;
        let dims = &view.info.dims;
        let data = if dims.iter().skip(1).all(|&d| d == 1) {
            let mut v = vec![0.0; view.info.n_elements as usize];
            ops.dequantize(view.data, &mut v).map_err(err)?;
            WeightData::Vector(v)
        } else if dims.len() == 2 {
            let n_in = dims[0] as usize;
            let n_out = dims[1] as usize;
            let row_bytes = rullama_quant::row_bytes(format, n_in).map_err(err)?;
            if row_bytes * n_out != view.data.len() {
                return Err(ModelError::Backend(format!(
                    "tensor `{name}`: {} bytes for {n_out} rows of {row_bytes}",
                    view.data.len()
                )));
            }
            let rows = match storage {
                WeightStorage::Quantized => Rows::Quantized {
                    ops,
                    row_bytes,
                    bytes: view.data.to_vec(),
                },
                WeightStorage::Dense => {
                    let mut values = vec![0.0; n_in * n_out];
                    ops.dequantize(view.data, &mut values).map_err(err)?;
                    Rows::Dense(values)
                }
            };
            WeightData::Matrix(QMatrix { n_in, n_out, rows })
        } else {
            return Err(ModelError::Unsupported(format!(
                "tensor `{name}` with dims {dims:?} on the CPU backend"
            )));
        };
        Ok(CpuWeight(Arc::new(data)))
    }

    /// An f32 matrix of `n_out` rows of `n_in` (for tests).
    pub fn from_f32_rows(n_in: usize, n_out: usize, values: &[f32]) -> CpuWeight {
        assert_eq!(values.len(), n_in * n_out);
        let rows = Rows::Dense(values.to_vec());
        CpuWeight(Arc::new(WeightData::Matrix(QMatrix { n_in, n_out, rows })))
    }

    /// A 1-D f32 weight (for tests).
    pub fn from_f32_vector(values: Vec<f32>) -> CpuWeight {
        CpuWeight(Arc::new(WeightData::Vector(values)))
    }

    pub(crate) fn vector(&self) -> &[f32] {
        match &*self.0 {
            WeightData::Vector(v) => v,
            WeightData::Matrix(_) => panic!("a matrix weight used where a vector is expected"),
        }
    }

    pub(crate) fn matrix(&self) -> &QMatrix {
        match &*self.0 {
            WeightData::Matrix(m) => m,
            WeightData::Vector(_) => panic!("a vector weight used where a matrix is expected"),
        }
    }
}
