//! The tape's values: f64 matrices, one row per token.

/// `rows` rows of `cols` f64 values, row-major: an activation or a gradient on the tape.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// Rows: one per token (or per output of a weight).
    pub rows: usize,
    /// Values per row.
    pub cols: usize,
    /// `rows * cols` values.
    pub data: Vec<f64>,
}

impl Matrix {
    /// `rows x cols` zeros.
    pub fn zeros(rows: usize, cols: usize) -> Matrix {
        Matrix {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }

    /// A matrix of `data`, which must hold `rows * cols` values.
    pub fn new(rows: usize, cols: usize, data: Vec<f64>) -> Matrix {
        assert_eq!(
            data.len(),
            rows * cols,
            "matrix data does not fill {rows}x{cols}"
        );
        Matrix { rows, cols, data }
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// Row `i`, to write.
    pub fn row_mut(&mut self, i: usize) -> &mut [f64] {
        &mut self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// `self += other`, element-wise (gradients reaching a value along two paths).
    pub fn add_assign(&mut self, other: &Matrix) {
        assert_eq!(
            (self.rows, self.cols),
            (other.rows, other.cols),
            "adding matrices of two shapes"
        );
        self.data
            .iter_mut()
            .zip(&other.data)
            .for_each(|(a, b)| *a += b);
    }
}

/// Runs `f(first_row, rows)` over `out`'s rows split in contiguous parts, one thread each
/// (`cols` values a row): the products' one parallel loop.
pub(crate) fn par_rows(
    out: &mut [f64],
    cols: usize,
    threads: usize,
    f: impl Fn(usize, &mut [f64]) + Sync,
) {
    let rows = out.len() / cols.max(1);
    let per = rows.div_ceil(threads.clamp(1, rows.max(1)));
    if threads <= 1 || per >= rows {
        f(0, out);
        return;
    }
    std::thread::scope(|s| {
        for (i, part) in out.chunks_mut(per * cols).enumerate() {
            let f = &f;
            s.spawn(move || f(i * per, part));
        }
    });
}
