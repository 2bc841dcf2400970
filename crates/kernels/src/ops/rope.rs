//! Rotary position embedding (NeoX and normal pairing), in place, positions read from a GPU
//! buffer.
//!
//! WGSL: `rope/rope.wgsl`, pairing chosen by the `NEOX` override (part of the pipeline key).
//! One invocation per rotated pair, 64 per workgroup. The frequencies are a small f32 tensor
//! made once by [`rope_freqs`] (in f64), so base, linear scaling and per-dimension factors
//! (Gemma 4's global layers) need no kernel variants.

use crate::device::Gpu;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

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

    /// The dims of rotated pair `i` when `half = n_rot / 2`.
    pub(crate) fn pair(self, i: usize, half: usize) -> (usize, usize) {
        match self {
            RopeStyle::Normal => (2 * i, 2 * i + 1),
            RopeStyle::Neox => (i, i + half),
        }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RopeParams {
    pub head_dim: u32,
    pub n_rot: u32,
    pub n_heads: u32,
    pub n_tokens: u32,
    pub x_offset: u32,
    pub pos_offset: u32,
    pub _pad: [u32; 2],
}

static SHADER: ShaderFile = shader_file!("rope/rope.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
];

pub const WORKGROUP: u32 = 64;

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

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<Check> {
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
    pub style: RopeStyle,
    pub head_dim: usize,
    pub n_rot: usize,
    pub n_heads: usize,
    pub n_tokens: usize,
}

impl Rope {
    /// Rotates `x` in place; token t is at position `pos[pos.offset + t]`.
    pub fn op(self, x: View<'_>, pos: View<'_>, freqs: &GpuTensor) -> Result<Op, GpuError> {
        if !self.n_rot.is_multiple_of(2) || self.n_rot > self.head_dim {
            return Err(GpuError::Shape {
                op: "rope",
                detail: format!("n_rot {} with head_dim {}", self.n_rot, self.head_dim),
            });
        }
        x.check("rope x", self.n_tokens * self.n_heads * self.head_dim)?;
        pos.check("rope pos", self.n_tokens)?;
        View::from(freqs).check("rope freqs", self.n_rot / 2)?;
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
        let grid = grid_1d(pairs.div_ceil(WORKGROUP as usize));
        let buffers = [&x.t.buf, &pos.t.buf, &freqs.buf];
        Ok(Op::new(
            RopeKernel(self.style),
            WORKGROUP,
            &params,
            &buffers,
            grid,
        ))
    }

    /// CPU reference (angles and rotation in f64 from the same f32 frequencies).
    pub fn reference(self, x: &mut [f32], pos: &[u32], freqs: &[f32]) {
        let half = self.n_rot / 2;
        for (r, row) in x.chunks_exact_mut(self.head_dim).enumerate() {
            let p = f64::from(pos[r / self.n_heads]);
            for (i, &f) in freqs.iter().enumerate().take(half) {
                let (s, c) = (p * f64::from(f)).sin_cos();
                let (j0, j1) = self.style.pair(i, half);
                let (x0, x1) = (f64::from(row[j0]), f64::from(row[j1]));
                row[j0] = (x0 * c - x1 * s) as f32;
                row[j1] = (x0 * s + x1 * c) as f32;
            }
        }
    }
}

/// Tolerance: |gpu - ref| <= (|x0| + |x1|) * (2^-11 + |angle| * 2^-23). Vulkan bounds
/// sin/cos only to 2^-11 absolute (within [-pi, pi]; drivers range-reduce), and the f32
/// angle pos * freq is off by up to |angle| * 2^-24, which the rotation carries.
/// Dimensions past n_rot must pass through exactly.
pub const CHECK: Check = Check {
    name: "rope",
    tolerance: "(|x0|+|x1|)*(2^-11+|angle|*2^-23)",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let style = if rng.bool() {
        RopeStyle::Neox
    } else {
        RopeStyle::Normal
    };
    let n_rot = 2 * rng.range(1, 40);
    let n_heads = rng.range(1, 4);
    let n_tokens = rng.range(1, 4);
    let rope = Rope {
        style,
        head_dim: n_rot + rng.range(0, 9),
        n_rot,
        n_heads,
        n_tokens,
    };
    let n = n_tokens * n_heads * rope.head_dim;
    let x = random_f32(n, rng.next_u64());
    let pos: Vec<u32> = (0..n_tokens).map(|_| rng.range(0, 5000) as u32).collect();
    let freqs = rope_freqs(n_rot, 10000.0, 1.0, None);
    let xt = GpuTensor::from_f32(gpu, &[n], &x);
    let pt = GpuTensor::from_u32(gpu, &[n_tokens], &pos);
    let ft = GpuTensor::from_f32(gpu, &[freqs.len()], &freqs);
    let y: Vec<f32> = run_read(
        gpu,
        vec![rope.op((&xt).into(), (&pt).into(), &ft)?],
        &xt,
        0,
        n,
    )?;
    let mut want = x.clone();
    rope.reference(&mut want, &pos, &freqs);
    let mut c = Compare::default();
    for (r, (gr, wr)) in y
        .chunks(rope.head_dim)
        .zip(want.chunks(rope.head_dim))
        .enumerate()
    {
        let xr = &x[r * rope.head_dim..][..rope.head_dim];
        let p = f64::from(pos[r / n_heads]);
        for (i, &f) in freqs.iter().enumerate() {
            let (j0, j1) = style.pair(i, n_rot / 2);
            let angle = p * f64::from(f);
            let tol =
                f64::from(xr[j0].abs() + xr[j1].abs()) * (2f64.powi(-11) + angle * 2f64.powi(-23));
            for j in [j0, j1] {
                c.add(f64::from(gr[j]), f64::from(wr[j]), tol, || {
                    format!("{style:?} row {r} dim {j}")
                });
            }
        }
        for j in n_rot..rope.head_dim {
            c.exact(f64::from(gr[j]), f64::from(xr[j]), || {
                format!("row {r} dim {j} (unrotated)")
            });
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use crate::testutil;

    #[test]
    fn rope_matches_reference() {
        testutil::parity("rope", 6, 71);
    }
}
