//! Causal (optionally windowed, GQA) attention over the KV cache; softmax in f64.

use super::host_memory;
use super::matmul::dot;
use super::tensor::CpuTensor;
use crate::backend::{AttentionInputs, AttentionParams, KvCacheSpec, KvLayerSpec};
use crate::context::{MemoryLimit, too_large};
use crate::error::Result;

/// Keys and values of each layer, `n_ctx` rows each, indexed by position.
#[derive(Debug, Clone)]
pub struct CpuKvCache {
    n_ctx: usize,
    layers: Vec<LayerCache>,
}

#[derive(Debug, Clone)]
struct LayerCache {
    spec: KvLayerSpec,
    k: Vec<f32>,
    v: Vec<f32>,
}

impl CpuKvCache {
    /// A zeroed cache of `spec`'s shape, if it fits: its size (checked arithmetic) against
    /// the memory the host has available, then each buffer reserved fallibly, so a context
    /// too large is [`ModelError::ContextTooLarge`] (saying how many positions would fit)
    /// and never an allocation that aborts.
    pub(crate) fn new(spec: &KvCacheSpec) -> Result<CpuKvCache> {
        const F32: u64 = 4;
        let bytes = spec.bytes(F32);
        let per_position = spec.bytes_per_position(F32);
        if let Some(available) = host_memory::available()
            && bytes.is_none_or(|b| b > available)
        {
            let fit = per_position.map(|p| (p, available, 1));
            return Err(too_large(
                spec,
                bytes,
                MemoryLimit::HostAvailable(available),
                fit,
            ));
        }
        let refused = || too_large(spec, bytes, MemoryLimit::HostAllocation, None);
        let zeros = |width: usize| -> Result<Vec<f32>> {
            let len = spec.n_ctx.checked_mul(width).ok_or_else(refused)?;
            let mut v = Vec::new();
            v.try_reserve_exact(len).map_err(|_| refused())?;
            v.resize(len, 0.0);
            Ok(v)
        };
        let layers = spec
            .layers
            .iter()
            .map(|&l| {
                Ok(LayerCache {
                    spec: l,
                    k: zeros(l.n_head_kv.checked_mul(l.head_dim_k).ok_or_else(refused)?)?,
                    v: zeros(l.n_head_kv.checked_mul(l.head_dim_v).ok_or_else(refused)?)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(CpuKvCache {
            n_ctx: spec.n_ctx,
            layers,
        })
    }
}

pub(crate) fn attention(
    cache: &mut CpuKvCache,
    x: AttentionInputs<'_, CpuTensor, Vec<u32>>,
    p: &AttentionParams,
) -> CpuTensor {
    let n_ctx = cache.n_ctx;
    let lc = &mut cache.layers[p.layer];
    let (kw, vw) = (p.n_head_kv * p.head_dim_k, p.n_head_kv * p.head_dim_v);
    assert_eq!(
        lc.spec.n_head_kv, p.n_head_kv,
        "attention: cache vs op heads"
    );
    assert_eq!((x.k.cols, x.v.cols), (kw, vw), "attention: k/v widths");
    assert_eq!(x.q.cols, p.n_head * p.head_dim_k, "attention: q width");
    assert!(p.n_head.is_multiple_of(p.n_head_kv));
    for (t, &pos) in x.positions.iter().enumerate() {
        let pos = pos as usize;
        assert!(pos < n_ctx, "attention: position {pos} past the cache");
        lc.k[pos * kw..(pos + 1) * kw].copy_from_slice(x.k.row(t));
        lc.v[pos * vw..(pos + 1) * vw].copy_from_slice(x.v.row(t));
    }
    let group = p.n_head / p.n_head_kv;
    let mut out = CpuTensor::zeros(x.q.rows, p.n_head * p.head_dim_v);
    for (t, &pos) in x.positions.iter().enumerate() {
        let pos = pos as usize;
        let first = p.window.map_or(0, |w| (pos + 1).saturating_sub(w));
        let q_row = x.q.row(t);
        for h in 0..p.n_head {
            let kvh = h / group;
            let q = &q_row[h * p.head_dim_k..(h + 1) * p.head_dim_k];
            let scores: Vec<f64> = (first..=pos)
                .map(|j| {
                    let k = &lc.k[j * kw + kvh * p.head_dim_k..][..p.head_dim_k];
                    let s = dot(q, k) * p.scale as f64;
                    p.softcap.map_or(s, |c| c as f64 * (s / c as f64).tanh())
                })
                .collect();
            let max = scores.iter().fold(f64::NEG_INFINITY, |m, &s| m.max(s));
            let weights: Vec<f64> = scores.iter().map(|&s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            let mut acc = vec![0f64; p.head_dim_v];
            for (j, w) in (first..=pos).zip(&weights) {
                let v = &lc.v[j * vw + kvh * p.head_dim_v..][..p.head_dim_v];
                for (a, &vv) in acc.iter_mut().zip(v) {
                    *a += w * vv as f64;
                }
            }
            let o = &mut out.row_mut(t)[h * p.head_dim_v..(h + 1) * p.head_dim_v];
            for (o, a) in o.iter_mut().zip(acc) {
                *o = (a / total) as f32;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pseudo(n: usize, seed: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32 + seed) * 0.731).sin()).collect()
    }

    /// The textbook formula, on whole K/V matrices indexed by position.
    fn naive(
        q: &CpuTensor,
        k: &CpuTensor,
        v: &CpuTensor,
        pos: &[u32],
        p: &AttentionParams,
    ) -> Vec<f32> {
        let (dk, dv) = (p.head_dim_k, p.head_dim_v);
        let mut out = vec![];
        for (t, &pt) in pos.iter().enumerate() {
            for h in 0..p.n_head {
                let kvh = h * p.n_head_kv / p.n_head;
                let visible: Vec<usize> = (0..=pt as usize)
                    .filter(|&j| p.window.is_none_or(|w| pt as usize - j < w))
                    .collect();
                let s: Vec<f64> = visible
                    .iter()
                    .map(|&j| {
                        let qk: f64 = (0..dk)
                            .map(|d| q.row(t)[h * dk + d] as f64 * k.row(j)[kvh * dk + d] as f64)
                            .sum();
                        qk * p.scale as f64
                    })
                    .collect();
                let z: f64 = s.iter().map(|x| x.exp()).sum();
                for d in 0..dv {
                    let o: f64 = visible
                        .iter()
                        .zip(&s)
                        .map(|(&j, &sj)| sj.exp() / z * v.row(j)[kvh * dv + d] as f64)
                        .sum();
                    out.push(o as f32);
                }
            }
        }
        out
    }

    /// 2 KV heads shared by 4 query heads, window 3, 6 positions: a prefill of 4 then two
    /// decode steps give the same rows as the naive formula over all 6.
    #[test]
    fn gqa_window_prefill_then_decode() {
        let p = AttentionParams {
            layer: 1,
            n_head: 4,
            n_head_kv: 2,
            head_dim_k: 4,
            head_dim_v: 3,
            scale: 0.5,
            window: Some(3),
            softcap: None,
        };
        let n = 6;
        let q = CpuTensor::new(n, 16, pseudo(n * 16, 1.0));
        let k = CpuTensor::new(n, 8, pseudo(n * 8, 2.0));
        let v = CpuTensor::new(n, 6, pseudo(n * 6, 3.0));
        let pos: Vec<u32> = (0..n as u32).collect();
        let want = naive(&q, &k, &v, &pos, &p);
        for window in [Some(3), None] {
            let p = AttentionParams { window, ..p };
            let want = if window.is_some() {
                want.clone()
            } else {
                naive(&q, &k, &v, &pos, &p)
            };
            let layer = KvLayerSpec {
                n_head_kv: 2,
                head_dim_k: 4,
                head_dim_v: 3,
            };
            let spec = KvCacheSpec {
                n_ctx: 8,
                layers: vec![layer; 2],
            };
            let mut cache = CpuKvCache::new(&spec).unwrap();
            let mut got = vec![];
            for range in [0..4, 4..5, 5..6] {
                let inputs = AttentionInputs {
                    q: &q.rows_range(range.clone()),
                    k: &k.rows_range(range.clone()),
                    v: &v.rows_range(range.clone()),
                    positions: &pos[range].to_vec(),
                };
                got.extend(attention(&mut cache, inputs, &p).data);
            }
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() < 1e-6, "window {window:?}: {a} vs {b}");
            }
        }
    }
}
