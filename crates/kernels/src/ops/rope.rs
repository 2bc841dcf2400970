//! Rotary position embedding (NeoX and normal pairing), in place, positions read from a GPU
//! buffer.
//!
//! WGSL: `rope/rope.wgsl`, pairing chosen by the `NEOX` override (part of the pipeline key).
//! One invocation per rotated pair, 64 per workgroup. The frequencies are a small f32 tensor
//! made once by [`rope_freqs`] (in f64), so base, linear scaling and per-dimension factors
//! (Gemma 4's global layers) need no kernel variants.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::CHECK;

/// How rotary position embedding pairs the dimensions of a head it rotates. Both styles turn
/// pair `i` (of `n_rot / 2`) by the angle `pos * freq_i` ([`rope_freqs`]); they differ only
/// in which two dimensions form the pair. The architecture decides, not the GGUF file (llama.cpp
/// maps each architecture to one in `llama_model_rope_type`), and a model rotated in the other
/// style than it was trained with still runs but answers nonsense.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RopeStyle {
    /// Pair `i` is dims `(2i, 2i + 1)`, neighbours: llama.cpp's normal mode
    /// (`LLAMA_ROPE_TYPE_NORM`; Llama, SmolLM2).
    Normal,
    /// Pair `i` is dims `(i, i + n_rot / 2)`, the first half against the second: GPT-NeoX's
    /// layout (`LLAMA_ROPE_TYPE_NEOX`; Gemma, Qwen).
    Neox,
}

impl RopeStyle {
    /// The value of the WGSL `NEOX` override (0 normal, 1 NeoX).
    pub(crate) fn code(self) -> f64 {
        match self {
            RopeStyle::Normal => 0.0,
            RopeStyle::Neox => 1.0,
        }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct RopeParams {
    pub head_dim: u32,
    pub n_rot: u32,
    pub n_heads: u32,
    pub n_tokens: u32,
    pub x_offset: u32,
    pub pos_offset: u32,
    pub _pad: [u32; 2],
}

/// The rotation, forward and backward (`BACKWARD` override).
pub(crate) static SHADER: ShaderFile = shader_file!("rope/rope.wgsl");

pub(crate) const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
];

pub(crate) const WORKGROUP: u32 = 64;

/// The rope kernel: its pairing (the `NEOX` override).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RopeKernel(pub RopeStyle);

impl KernelFamily for RopeKernel {
    fn variants() -> Vec<RopeKernel> {
        vec![RopeKernel(RopeStyle::Normal), RopeKernel(RopeStyle::Neox)]
    }

    fn program(self) -> Program {
        Program {
            name: "rope".to_string(),
            files: vec![&SHADER],
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<RopeParams>(),
        }
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        vec![("NEOX", self.0.code())]
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

/// `freq_i = scale / factor_i * base^(-2i / n_rot)` for `i < n_rot / 2` (llama.cpp's
/// `theta_scale^i * freq_scale / freq_factor`), computed in f64.
pub fn rope_freqs(n_rot: usize, base: f64, scale: f64, factors: Option<&[f32]>) -> Vec<f32> {
    (0..n_rot / 2)
        .map(|i| {
            let f = factors.map_or(1.0, |f| f64::from(f[i]));
            (scale / f * base.powf(-2.0 * i as f64 / n_rot as f64)) as f32
        })
        .collect()
}

/// Shape of a RoPE: `n_tokens * n_heads` rows of `head_dim`, the first `n_rot` dims rotated.
#[derive(Debug, Clone, Copy)]
pub struct Rope {
    /// Which dims of a head pair up.
    pub style: RopeStyle,
    /// Elements per head.
    pub head_dim: usize,
    /// Dims rotated (even, at most `head_dim`).
    pub n_rot: usize,
    /// Heads per token.
    pub n_heads: usize,
    /// Tokens.
    pub n_tokens: usize,
}

impl Rope {
    /// Rotates `x` in place; token t is at position `pos[pos.offset + t]`.
    pub fn op(self, x: View<'_>, pos: View<'_>, freqs: &GpuTensor) -> Result<Op, GpuError> {
        let (params, grid) = self.params(false, x, pos, freqs)?;
        let buffers = [&x.t.buf, &pos.t.buf, &freqs.buf];
        Ok(Op::new(
            RopeKernel(self.style),
            WORKGROUP,
            &params,
            &buffers,
            grid,
        ))
    }

    /// The parameters and grid of a rotation of `x` (forward or `backward`), its shapes checked.
    pub(crate) fn params(
        self,
        backward: bool,
        x: View<'_>,
        pos: View<'_>,
        freqs: &GpuTensor,
    ) -> Result<(RopeParams, [u32; 3]), GpuError> {
        let [op, x_name, pos_name, freqs_name] = if backward {
            [
                "rope_backward",
                "rope_backward dy",
                "rope_backward pos",
                "rope_backward freqs",
            ]
        } else {
            ["rope", "rope x", "rope pos", "rope freqs"]
        };
        if !self.n_rot.is_multiple_of(2) || self.n_rot > self.head_dim {
            return Err(GpuError::Shape {
                op,
                detail: format!("n_rot {} with head_dim {}", self.n_rot, self.head_dim),
            });
        }
        x.check(x_name, self.n_tokens * self.n_heads * self.head_dim)?;
        pos.check(pos_name, self.n_tokens)?;
        View::from(freqs).check(freqs_name, self.n_rot / 2)?;
        let params = RopeParams {
            head_dim: self.head_dim as u32,
            n_rot: self.n_rot as u32,
            n_heads: self.n_heads as u32,
            n_tokens: self.n_tokens as u32,
            x_offset: x.offset as u32,
            pos_offset: pos.offset as u32,
            _pad: [0; 2],
        };
        let pairs = self.n_tokens * self.n_heads * self.n_rot / 2;
        Ok((params, grid_1d(pairs.div_ceil(WORKGROUP as usize))))
    }
}
