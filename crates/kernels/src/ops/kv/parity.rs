//! kv_append's CPU reference (and the host caches every cache kernel's reference fills)
//! and parity check.

use super::*;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};

impl KvAppend {
    /// CPU reference: token t's K row `k[t * src_stride..][..n_kv_heads * head_dim]` (and V's,
    /// from `v`; both start at their view's offset) into position `pos[t]` of `cache`;
    /// positions past `max_len` are dropped, as on the GPU. Generic so that a check can move
    /// each value's bound to where the value goes.
    pub fn reference<T: Copy>(self, k: &[T], v: &[T], pos: &[u32], cache: &mut HostKv<T>) {
        let l = cache.layout;
        let hd = l.head_dim;
        for (t, &p) in pos.iter().enumerate().take(self.n_tokens) {
            if p as usize >= l.max_len {
                continue;
            }
            for h in 0..l.n_kv_heads {
                let src = t * self.src_stride + h * hd;
                let dst = l.index(h, p as usize, 0);
                cache.k[dst..dst + hd].copy_from_slice(&k[src..src + hd]);
                cache.v[dst..dst + hd].copy_from_slice(&v[src..src + hd]);
            }
        }
    }
}

/// One layer's caches on the host (the references' output): values (f32; f64 for bounds) at
/// [`KvLayout::index`]; an f16 cache's rounding is the checks' bound ([`store_bound`]).
#[derive(Debug, Clone, PartialEq)]
pub struct HostKv<T = f32> {
    /// The cache's shape.
    pub layout: KvLayout,
    /// The keys.
    pub k: Vec<T>,
    /// The values.
    pub v: Vec<T>,
}

impl<T: Copy + Default> HostKv<T> {
    /// Zero-filled, as [`KvCache::new`] makes them.
    pub fn zeros(layout: KvLayout) -> HostKv<T> {
        let n = layout.n_kv_heads * layout.max_len * layout.head_dim;
        HostKv {
            layout,
            k: vec![T::default(); n],
            v: vec![T::default(); n],
        }
    }
}

/// Bound on |stored - x| for one value.
pub fn store_bound(dtype: KvDtype, x: f32) -> f64 {
    match dtype {
        KvDtype::F32 => 0.0,
        KvDtype::F16 => f64::from(x.abs()) * 2f64.powi(-10) + 2f64.powi(-24),
    }
}

/// Tolerance: f32 exact (values are moved). f16: one f16 ulp, |x| 2^-10 + 2^-24: WGSL's
/// `pack2x16float` must give one of the two f16 neighbours of x (not necessarily the nearest),
/// and 2^-24 is the spacing of f16 subnormals. Positions not written must stay untouched.
pub const CHECK: Check = Check {
    name: "kv_append",
    tolerance: "f32 exact; f16 |x|*2^-10+2^-24",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let dtype = rng.pick(&[KvDtype::F32, KvDtype::F16]);
    let layout = KvLayout {
        dtype,
        n_kv_heads: rng.range(1, 4),
        head_dim: rng.pick(&[2, 16, 64, 128, 256]),
        max_len: rng.range(4, 40),
    };
    let n_tokens = rng.range(1, 4);
    let row = layout.n_kv_heads * layout.head_dim;
    // A fused row [q | k | v] of width stride, as the qkv matvec writes it.
    let q_len = rng.range(0, 3) * 8;
    let stride = q_len + 2 * row;
    let src = random_f32(n_tokens * stride + 1, rng.next_u64());
    let mut pos: Vec<u32> = Vec::new();
    while pos.len() < n_tokens {
        let p = rng.range(0, layout.max_len) as u32;
        if !pos.contains(&p) {
            pos.push(p);
        }
    }
    let cache = KvCache::new(gpu, layout)?;
    let st = GpuTensor::from_f32(gpu, &[src.len()], &src);
    let pt = GpuTensor::from_u32(gpu, &[n_tokens + 1], &[&[0], &pos[..]].concat());
    let append = KvAppend {
        n_tokens,
        src_stride: stride,
    };
    let op = append.op(
        View::at(&st, 1 + q_len),
        View::at(&st, 1 + q_len + row),
        View::at(&pt, 1),
        &cache,
    )?;
    let words = layout.words();
    let kw: Vec<u32> = run_read(gpu, vec![op], &cache.k, 0, words)?;
    let vw: Vec<u32> = run_read(gpu, Vec::new(), &cache.v, 0, words)?;
    let mut want: HostKv = HostKv::zeros(layout);
    let k_src = &src[1 + q_len..];
    append.reference(k_src, &k_src[row..], &pos, &mut want);
    let mut c = Compare::default();
    for (which, words, want) in [("k", &kw, &want.k), ("v", &vw, &want.v)] {
        for (i, (&g, &w)) in layout.decode(words).iter().zip(want).enumerate() {
            c.add(f64::from(g), f64::from(w), store_bound(dtype, w), || {
                let (hd, n) = (layout.head_dim, layout.max_len);
                let (h, p, d) = (i / hd / n, i / hd % n, i % hd);
                format!("{dtype:?} {which} head {h} pos {p} dim {d}")
            });
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use crate::testutil;

    #[test]
    fn kv_append_matches_reference() {
        testutil::parity("kv_append", 6, 81);
    }
}
