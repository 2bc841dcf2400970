//! Re-encoding one tensor while it streams from the input file to the output: a chunk of
//! rows at a time (read, decode to f32, encode), split over threads by rows, so memory stays
//! at a few chunks whatever the tensor's size.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use rullama_gguf::{
    ByteSource, GgmlType, GgufError, GgufFile, RangedFile, TensorInfo, TensorStream,
};
use rullama_quant::{Format, FormatOps};

use super::QuantizeError;
use crate::commands::CliError;

/// Values decoded at once: 16 MiB of f32, whatever the row length (one row if longer).
const CHUNK_VALUES: usize = 4 << 20;
/// Bytes copied at once for a tensor that keeps its type.
const COPY_BYTES: usize = 8 << 20;

/// Set by the Ctrl-C handler; checked between chunks, so the command stops within one chunk
/// and its temporary file is removed as the error unwinds.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Installs the SIGINT handler that sets [`INTERRUPTED`].
pub fn install_interrupt() -> Result<(), CliError> {
    ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst))
        .map_err(|e| CliError::Usage(format!("installing the Ctrl-C handler: {e}")))
}

fn check_interrupt() -> Result<(), CliError> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        return Err(CliError::Interrupted);
    }
    Ok(())
}

/// Where the data of `info` starts in `file`.
fn data_start(file: &GgufFile<RangedFile>, info: &TensorInfo) -> u64 {
    file.header().data_offset().saturating_add(info.offset)
}

/// Reads `buf.len()` bytes of tensor `info` from `pos` bytes into its data.
fn read(
    file: &GgufFile<RangedFile>,
    info: &TensorInfo,
    pos: u64,
    buf: &mut [u8],
) -> Result<(), CliError> {
    let offset = data_start(file, info) + pos;
    file.source().read_exact_at(offset, buf).map_err(|error| {
        let e = GgufError::TensorRead {
            tensor: info.name.clone(),
            offset,
            n_bytes: buf.len() as u64,
            error,
        };
        match file.path() {
            Some(path) => CliError::Gguf(e.in_file(path)),
            None => CliError::Gguf(e),
        }
    })
}

/// Copies tensor `info`'s bytes unchanged into the stream; `done(n)` reports `n` more values.
pub fn copy<W: Write>(
    file: &GgufFile<RangedFile>,
    info: &TensorInfo,
    out: &mut TensorStream<W>,
    done: &dyn Fn(u64),
) -> Result<(), CliError> {
    let mut buf = vec![0u8; COPY_BYTES.min(info.n_bytes as usize)];
    let mut pos = 0u64;
    while pos < info.n_bytes {
        check_interrupt()?;
        let n = (info.n_bytes - pos).min(buf.len() as u64) as usize;
        read(file, info, pos, &mut buf[..n])?;
        out.write_part(&buf[..n])?;
        pos += n as u64;
        done(n as u64 * info.n_elements / info.n_bytes);
    }
    Ok(())
}

/// Decodes tensor `info` and encodes it as `to` into the stream, `threads` threads at a time;
/// `done(n)` reports `n` more values.
pub fn convert<W: Write>(
    file: &GgufFile<RangedFile>,
    info: &TensorInfo,
    to: GgmlType,
    threads: usize,
    out: &mut TensorStream<W>,
    done: &dyn Fn(u64),
) -> Result<(), CliError> {
    let quant = |e| QuantizeError::Quant {
        tensor: info.name.clone(),
        error: e,
    };
    let from = FormatOps::of(Format::Ggml(info.ggml_type)).map_err(quant)?;
    let into = FormatOps::of(Format::Ggml(to)).map_err(quant)?;
    let row_len = info.row_len() as usize;
    let n_rows = (info.n_elements / info.row_len()) as usize;
    let in_row = rullama_quant::row_bytes(from.format(), row_len).map_err(quant)?;
    let out_row = rullama_quant::row_bytes(into.format(), row_len).map_err(quant)?;
    let chunk_rows = (CHUNK_VALUES / row_len).clamp(1, n_rows);
    let mut input = vec![0u8; chunk_rows * in_row];
    let mut values = vec![0f32; chunk_rows * row_len];
    let mut output = vec![0u8; chunk_rows * out_row];
    let mut row = 0;
    while row < n_rows {
        check_interrupt()?;
        let rows = chunk_rows.min(n_rows - row);
        let input = &mut input[..rows * in_row];
        read(file, info, (row * in_row) as u64, input)?;
        let (values, output) = (&mut values[..rows * row_len], &mut output[..rows * out_row]);
        // Each thread takes whole rows: decode, check, encode.
        let per = rows.div_ceil(threads.max(1));
        let parts = input
            .chunks(per * in_row)
            .zip(values.chunks_mut(per * row_len))
            .zip(output.chunks_mut(per * out_row));
        let results: Vec<Result<(), QuantizeError>> = std::thread::scope(|s| {
            let handles: Vec<_> = parts
                .enumerate()
                .map(|(k, ((i, v), o))| {
                    let first = row + k * per;
                    s.spawn(move || {
                        from.dequantize(i, v).map_err(quant)?;
                        if let Some(bad) = v.iter().position(|x| !x.is_finite()) {
                            return Err(QuantizeError::NonFinite {
                                tensor: info.name.clone(),
                                row: first + bad / row_len,
                                value: v[bad],
                            });
                        }
                        into.quantize_into(v, o).map_err(quant)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        results.into_iter().collect::<Result<Vec<()>, _>>()?;
        out.write_part(output)?;
        row += rows;
        done((rows * row_len) as u64);
    }
    Ok(())
}
