//! Prompt-block attention on the tensor cores: `attention/attention_coop.wgsl`, which the
//! model runs for a prompt block over an f16 cache where the device has
//! [`crate::Caps::coop_f16`] and the tensor cores are allowed. Same contract as
//! [`Attention::ops`] for one split; q and the softmax weights rounded to f16, the products
//! on 16 x 16 x 16 cooperative matrices with f32 sums, and two passes over the keys (the
//! rows' max and sum first, then P V with the final ones: no per-row rescale of the output
//! accumulators, which a cooperative matrix cannot address by row). The parity check
//! [`CHECK`] needs cooperative matrices (it skips elsewhere and says so); the unit tests
//! `body_*` run the same kernel body everywhere, on lavapipe over `attention/coop_emul.wgsl`'s
//! plain-arithmetic ops (staging, masks, both passes and the stores, not the tensor cores
//! themselves nor the layouts of their loads).
//!
//! The bound (per output row, [`reference`]): the plain kernel's
//! ([`crate::ops::attention::CHECK`]) with each score's dot product over q rounded to f16
//! (`e(q) = 2^-10 |q|`, or flushed below 2^-13: `ops::matmul_coop`'s rule) and summed on the
//! tensor cores (`(4 hd + 1) u` instead of `(hd + 5) u`: carried as a further `3 hd u |q|`
//! of q's error), plus the softmax weights rounded to f16 (`sum_j e(p_j)`) and their sum with
//! V on the tensor cores (`(4n + 1) u`), times max |v|.

use crate::device::{Caps, Gpu};
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::ops::attention::{
    self, Arith, Attention, AttentionParams, Case, HEAD_DIMS, Path, Reference, f16_err,
};
use crate::ops::kv::{KvCache, KvDtype, KvLayout};
use crate::ops::matmul_coop::coop_device;
use crate::parity::data::Rng;
use crate::parity::{Check, Compare, U};
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

static BODY: ShaderFile = shader_file!("attention/attention_coop.wgsl");
/// The cooperative-matrix types and ops (opens the program with its `enable` directives).
static OPS: ShaderFile = shader_file!("attention/coop_ops.wgsl");
/// The same ops in plain arithmetic: the body runs on devices without tensor cores (tests).
static EMULATED: ShaderFile = shader_file!("attention/coop_emul.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

/// Four subgroups of 32 (`Caps::coop_f16` holds only where the subgroup is 32 wide).
pub const WORKGROUP: u32 = 128;
/// Query rows per workgroup: one 16-row tile.
const TILE_ROWS: usize = 16;
/// The kernel loads keys 16 at a time from a multiple of 16: the cache's `max_len` must be a
/// multiple of it, so that every block it loads lies inside one kv head.
pub const KEY_BLOCK: usize = 16;

/// The tensor-core attention kernel: `HD` = head_dim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionCoopKernel {
    /// `HD`: the head dimension.
    pub head_dim: u32,
}

impl KernelFamily for AttentionCoopKernel {
    /// Head dim 128 stands for every head dim (an override: one program for all).
    fn variants() -> Vec<AttentionCoopKernel> {
        vec![AttentionCoopKernel { head_dim: 128 }]
    }

    fn program(self) -> Program {
        program(false)
    }

    fn programs(self) -> Vec<Program> {
        vec![program(false), program(true)]
    }

    fn program_for(self, caps: &Caps) -> Program {
        program(!caps.coop_f16)
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        vec![("HD", f64::from(self.head_dim))]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<Check> {
        vec![CHECK, EXACT_CHECK]
    }
}

/// The tensor-core program, or with `emulated` its body over emulated coop ops (needs only
/// SHADER_F16; what a device without cooperative matrices builds for the kernel).
fn program(emulated: bool) -> Program {
    let (name, ops) = if emulated {
        ("attention_coop_emulated", &EMULATED)
    } else {
        ("attention_coop", &OPS)
    };
    Program {
        name: name.to_string(),
        files: vec![ops, &attention::PARAMS, &BODY],
        entry: "main",
        bindings: BINDINGS,
        params_size: size_of::<AttentionParams>(),
    }
}

impl Attention {
    /// Whether [`Attention::coop_ops`] takes this call over a cache of layout `l`: an f16
    /// cache whose length is a multiple of [`KEY_BLOCK`], a head dimension of [`HEAD_DIMS`],
    /// one split (a prompt block's attention) and query heads over whole kv-head groups.
    pub fn coop_fits(&self, l: &KvLayout) -> bool {
        l.dtype == KvDtype::F16
            && HEAD_DIMS.contains(&l.head_dim)
            && l.max_len >= KEY_BLOCK
            && l.max_len.is_multiple_of(KEY_BLOCK)
            && self.n_splits(l) == 1
            && self.n_heads > 0
            && self.n_heads.is_multiple_of(l.n_kv_heads)
    }

    /// The attention of [`Attention::ops`] as one tensor-core op (module doc), for the calls
    /// [`Attention::coop_fits`] accepts ([`GpuError::InvalidParams`] otherwise). On a device
    /// without cooperative matrices the op runs the emulated program (tests only).
    pub fn coop_ops(
        &self,
        q: View<'_>,
        pos: View<'_>,
        cache: &KvCache,
        out: View<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        let l = cache.layout;
        if !self.coop_fits(&l) {
            return Err(GpuError::InvalidParams {
                op: "attention_coop",
                detail: format!(
                    "{self:?} over {l:?}: needs an f16 cache of a multiple of {KEY_BLOCK} \
                     positions, head_dim one of {HEAD_DIMS:?}, one split"
                ),
            });
        }
        let hd = l.head_dim;
        let span = self.n_tokens.saturating_sub(1) * self.q_stride + self.n_heads * hd;
        q.check("attention_coop q", span)?;
        pos.check("attention_coop pos", self.n_tokens)?;
        out.check("attention_coop out", self.n_tokens * self.n_heads * hd)?;
        let group = self.n_heads / l.n_kv_heads;
        let params = AttentionParams {
            n_tokens: self.n_tokens as u32,
            n_heads: self.n_heads as u32,
            group: group as u32,
            max_len: l.max_len as u32,
            q_offset: q.offset as u32,
            q_stride: self.q_stride as u32,
            out_offset: out.offset as u32,
            pos_offset: pos.offset as u32,
            window: self.window as u32,
            split_len: l.max_len as u32,
            n_splits: 1,
            records: 0,
            scale: self.scale,
            softcap: self.softcap,
            n_rot: 0,
            eps: 0.0,
            k_offset: 0,
            v_offset: 0,
            _pad: [0; 2],
        };
        let tiles = (self.n_tokens * group).div_ceil(TILE_ROWS);
        let kernel = AttentionCoopKernel {
            head_dim: hd as u32,
        };
        let buffers = [&q.t.buf, &cache.k.buf, &cache.v.buf, &pos.t.buf, &out.t.buf];
        let grid = [tiles as u32, l.n_kv_heads as u32, 1];
        Ok(vec![Op::new(kernel, WORKGROUP, &params, &buffers, grid)])
    }
}

/// [`Attention::reference`] with the tensor-core kernel's bound (module doc); `f16_q`: every
/// q is an f16 value, so its rounding errs only where the device may flush a subnormal.
pub fn reference(
    attn: &Attention,
    l: &KvLayout,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    pos: &[u32],
    f16_q: bool,
) -> Reference {
    let hd = l.head_dim as f64;
    let q_err: Vec<f64> = q
        .iter()
        .map(|&x| {
            let x = f64::from(x).abs();
            let rounding = match f16_q {
                false => f16_err(x),
                true if x < 2.0 / 16384.0 => x + U,
                true => 0.0,
            };
            rounding + 3.0 * hd * U * x
        })
        .collect();
    let arith = Arith {
        q_err: Some(&q_err),
        p_f16: true,
    };
    attn.reference_with(l, q, arith, k, v, pos)
}

/// Prompt blocks over an f16 cache, against [`reference`].
pub const CHECK: Check = Check {
    name: "attention_coop",
    tolerance: "attention's with q in f16 + (4hd+1)u dots; + sum e16(p_j) + (4n+1)u, times max|v|",
    case: parity_case,
};

/// The same with q drawn as f16 values: the scores then err only by their sums, so the bound
/// is tight enough to catch a weight off by a few f16 ulps.
pub const EXACT_CHECK: Check = Check {
    name: "attention_coop_exact",
    tolerance: "as attention_coop, q exact: (4hd+1)u dots; + sum e16(p_j) + (4n+1)u",
    case: exact_case,
};

/// One random prompt block the kernel takes: GQA groups of 1 to 7 heads, windows, soft-caps.
fn random_case(rng: &mut Rng) -> Case {
    let head_dim = rng.pick(&HEAD_DIMS);
    let n_kv_heads = rng.range(1, 3);
    let n_heads = n_kv_heads * rng.range(1, 8);
    let max_len = KEY_BLOCK * rng.range(1, 25);
    let n_tokens = rng.range(2, 40).min(max_len);
    let layout = KvLayout {
        dtype: KvDtype::F16,
        n_kv_heads,
        head_dim,
        max_len,
    };
    let attn = attention::random_attention(rng, n_tokens, n_heads, head_dim, max_len);
    Case {
        layout,
        attn,
        start: rng.range(0, max_len - n_tokens + 1),
        q_gain: rng.pick(&[1.0, 4.0]),
    }
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_device(gpu)?;
    let case = random_case(rng);
    attention::compare_on(gpu, case, rng.next_u64(), Path::Coop { f16_q: false })
}

fn exact_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    coop_device(gpu)?;
    let case = random_case(rng);
    attention::compare_on(gpu, case, rng.next_u64(), Path::Coop { f16_q: true })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn attention_coop_matches_reference() {
        testutil::parity("attention_coop", 6, 501);
    }

    #[test]
    fn attention_coop_exact_query() {
        testutil::parity("attention_coop_exact", 6, 601);
    }

    fn body_device(test: &str) -> Option<&'static Gpu> {
        testutil::coop_body_device(test, "attention/coop_emul.wgsl")
    }

    /// Random prompt blocks through the kernel's body, q rounded by the kernel and q drawn
    /// as f16 values (the tight bound).
    #[test]
    fn body_matches_reference() {
        let Some(gpu) = body_device("body_matches_reference") else {
            return;
        };
        let mut rng = Rng::new(77);
        for i in 0..8 {
            let case = random_case(&mut rng);
            let path = Path::Coop { f16_q: i % 2 == 1 };
            let c = attention::compare_on(gpu, case, 900 + i, path).unwrap();
            assert!(c.max_ratio <= 1.0, "{case:?} {path:?}: {}", c.worst);
        }
    }

    /// The models' prompt shapes: gemma-3-270m's (4 heads over 1 kv head of 256, sliding
    /// window 512) crossing the window, qwen2.5-0.5b's (14 heads over 2 of 64: rows of a tile
    /// span tokens) and head_dim 128 with a soft-cap, each from a block start at 0 and later.
    #[test]
    fn body_model_shapes() {
        let Some(gpu) = body_device("body_model_shapes") else {
            return;
        };
        let layout = |n_kv_heads, head_dim, max_len| KvLayout {
            dtype: KvDtype::F16,
            n_kv_heads,
            head_dim,
            max_len,
        };
        let attn = |n_tokens, n_heads, hd: usize, window, softcap, max_len| Attention {
            n_tokens,
            n_heads,
            q_stride: n_heads * hd,
            scale: 1.0 / (hd as f32).sqrt(),
            softcap,
            window,
            split_len: max_len,
        };
        let cases = [
            Case {
                layout: layout(1, 256, 704),
                attn: attn(40, 4, 256, 512, 0.0, 704),
                start: 560,
                q_gain: 4.0,
            },
            Case {
                layout: layout(2, 64, 96),
                attn: attn(37, 14, 64, 0, 0.0, 96),
                start: 0,
                q_gain: 4.0,
            },
            Case {
                layout: layout(2, 128, 64),
                attn: attn(21, 4, 128, 0, 30.0, 64),
                start: 40,
                q_gain: 1.0,
            },
        ];
        for (i, case) in cases.into_iter().enumerate() {
            for f16_q in [false, true] {
                let path = Path::Coop { f16_q };
                let c = attention::compare_on(gpu, case, i as u64, path).unwrap();
                assert!(c.max_ratio <= 1.0, "{case:?} {path:?}: {}", c.worst);
            }
        }
    }

    /// Calls the kernel cannot take are errors, not wrong results.
    #[test]
    fn refuses_what_it_cannot_take() {
        let a = Attention {
            n_tokens: 8,
            n_heads: 4,
            q_stride: 4 * 64,
            scale: 0.125,
            softcap: 0.0,
            window: 0,
            split_len: 64,
        };
        let l = KvLayout {
            dtype: KvDtype::F16,
            n_kv_heads: 2,
            head_dim: 64,
            max_len: 64,
        };
        assert!(a.coop_fits(&l));
        let f32_cache = KvLayout {
            dtype: KvDtype::F32,
            ..l
        };
        let odd_len = KvLayout { max_len: 72, ..l };
        let split = Attention { split_len: 16, ..a };
        let odd_heads = Attention { n_heads: 3, ..a };
        assert!(!a.coop_fits(&f32_cache));
        assert!(!Attention { split_len: 72, ..a }.coop_fits(&odd_len));
        assert!(!split.coop_fits(&l));
        assert!(!odd_heads.coop_fits(&l));
    }

    /// A device without cooperative matrices builds only the emulation (tests ask for it).
    #[test]
    fn program_choice() {
        let caps = testutil::nvidia_caps;
        let k = crate::Kernel::from(AttentionCoopKernel { head_dim: 256 });
        assert_eq!(k.program_for(&caps(false)).name, "attention_coop_emulated");
        assert_eq!(k.program_for(&caps(true)).name, "attention_coop");
    }
}
