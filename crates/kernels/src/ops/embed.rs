//! Embedding gather: rows of a (quantized) table picked by token ids that live on the GPU, so
//! the id sampled by one step feeds the next without a round trip.
//!
//! WGSL: `embed/embed_rows.wgsl` + `common/blocks.wgsl` + `formats/<type>.wgsl`. One workgroup
//! of 64 per token; one dispatch per table chunk (a chunk skips ids outside its rows).

use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::pipeline::PipelineKey;
use crate::shader::{BLOCKS, Program, ShaderFile, WEIGHT_KERNEL_BINDINGS, shader_file};
use crate::tensor::{GpuWeight, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, embed_ref};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct EmbedParams {
    pub n_in: u32,
    pub first_row: u32,
    pub n_rows: u32,
    pub row_bytes: u32,
    pub id_offset: u32,
    pub n_tokens: u32,
    pub out_offset: u32,
    /// Multiplies every value (Gemma scales embeddings by sqrt(d_model)).
    pub scale: f32,
}

static SHADER: ShaderFile = shader_file!("embed/embed_rows.wgsl");

pub(crate) const WORKGROUP: u32 = 64;

/// The embedding gather over a table of one format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EmbedKernel(pub GpuFormat);

impl KernelFamily for EmbedKernel {
    fn variants() -> Vec<EmbedKernel> {
        crate::shader::weight_formats()
            .iter()
            .map(|&f| EmbedKernel(f))
            .collect()
    }

    fn program(self) -> Program {
        let f = self.0;
        Program {
            name: format!("embed_rows_{}", f.name()),
            files: [&SHADER, &BLOCKS]
                .into_iter()
                .chain(f.decoder().iter().copied())
                .collect(),
            entry: "main",
            bindings: WEIGHT_KERNEL_BINDINGS,
            params_size: size_of::<EmbedParams>(),
        }
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

/// `out[t * n_in + i] = scale * table[ids[t], i]` for `n_tokens` ids; one op per table chunk.
pub fn embed_rows(
    table: &GpuWeight,
    ids: View<'_>,
    n_tokens: usize,
    out: View<'_>,
    scale: f32,
) -> Result<Vec<Op>, GpuError> {
    let s = table.shape;
    ids.check("embed ids", n_tokens)?;
    out.check("embed out", n_tokens * s.n_in)?;
    let ops = table.chunks.iter().map(|c| {
        let params = EmbedParams {
            n_in: s.n_in as u32,
            first_row: c.first_row as u32,
            n_rows: c.n_rows as u32,
            row_bytes: s.format.row_bytes(s.n_in) as u32,
            id_offset: ids.offset as u32,
            n_tokens: n_tokens as u32,
            out_offset: out.offset as u32,
            scale,
        };
        let buffers = [&c.buf, &ids.t.buf, &out.t.buf, &c.buf];
        Op::new(
            EmbedKernel(s.format),
            WORKGROUP,
            &params,
            &buffers,
            grid_1d(n_tokens),
        )
    });
    Ok(ops.collect())
}
