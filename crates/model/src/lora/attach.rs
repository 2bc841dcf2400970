//! LoRA adapters against a model: the checks, and the device matrices the graph multiplies.
//!
//! The adapters applied together are combined per projection into one pair: their `A`s
//! stacked (rank `r1 + r2 + …` rows), their `B`s side by side, each `B`'s columns multiplied
//! by its adapter's factor ([`LoraAdapter::pair_scale`]). Then `B·(A·x)` is
//! `Σ scale_i · B_i·(A_i·x)`, what llama.cpp's `build_lora_mm` adds one adapter at a time,
//! in two products per projection however many adapters there are. The combined rank is
//! padded with zero rows of `A` (zero columns of `B`) to a multiple of [`RANK_ALIGN`]: a
//! rank-1 `A` would otherwise have the dims of a vector, and the products' rows stay whole
//! vec4s on the GPU. The padding adds exact zeros.
//!
//! The matrices go to the executor as F32 tensors (`Backend::load_weight`), whatever the
//! file's type: every type an adapter comes in is exact in f32, and the scale is folded in.

use std::collections::{HashMap, HashSet};

use rullama_gguf::{ByteSource, GgmlType, GgufFile, TensorInfo, TensorView};

use super::{LoraAdapter, LoraError, LoraPair};
use crate::arch::ArchWeights;
use crate::backend::{Backend, LinearView};
use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use crate::graph::weights::Checker;

/// The combined rank is padded up to a multiple of this.
pub(crate) const RANK_ALIGN: usize = 4;

/// One projection's combined update on the executor: `a` with GGML dims `[n_in, rank]`, `b`
/// with `[rank, n_out]` (the factors folded in).
#[derive(Debug, Clone)]
pub(crate) struct LoraLinear<W> {
    pub a: W,
    pub b: W,
}

/// The combined updates of the adapters applied, by base tensor name; empty without any.
#[derive(Debug, Clone)]
pub(crate) struct LoraWeights<W> {
    by_name: HashMap<String, LoraLinear<W>>,
}

impl<W> Default for LoraWeights<W> {
    fn default() -> Self {
        LoraWeights {
            by_name: HashMap::new(),
        }
    }
}

impl<W> LoraWeights<W> {
    /// Pairs the caller made on the executor (`Model::set_lora_weights`), by base tensor
    /// name.
    pub fn from_pairs(pairs: Vec<(String, W, W)>) -> LoraWeights<W> {
        LoraWeights {
            by_name: pairs
                .into_iter()
                .map(|(name, a, b)| (name, LoraLinear { a, b }))
                .collect(),
        }
    }

    /// The update of projection `name`, if an adapter has one.
    pub fn get(&self, name: &str) -> Option<&LoraLinear<W>> {
        if self.by_name.is_empty() {
            return None;
        }
        self.by_name.get(name)
    }
}

/// What a model offers LoRA: the projections the graph multiplies through `Graph::linear`
/// (base tensor name → `(n_in, n_out)`), those that read one input (q, k, v; gate, up: the
/// groups `Load::linears` loads), and the names of all its tensors (to tell a tensor of
/// another model from one that is not a projection).
#[derive(Debug, Clone, Default)]
pub(crate) struct LoraTargets {
    pub projections: HashMap<String, (usize, usize)>,
    pub groups: Vec<Vec<String>>,
    pub tensors: HashSet<String>,
    /// The model's [`super::base::fingerprint`], which an adapter recording its base must
    /// match.
    pub fingerprint: u64,
}

/// What LoRA adapters may update in the model `file` of config `cfg` (the weights' checking
/// pass, which also refuses a file that lacks a tensor or has a wrong shape).
pub(crate) fn targets<S: ByteSource>(file: &GgufFile<S>, cfg: &ModelConfig) -> Result<LoraTargets> {
    let mut checker = Checker::new(file);
    ArchWeights::load(cfg, &mut checker)?;
    checker.finish(cfg.arch.name())
}

impl LoraTargets {
    /// Checks every adapter of `adapters` ([`LoraTargets::check`]) and its scale (a finite
    /// number), before any is applied or merged.
    pub fn check_all(&self, adapters: &[(&LoraAdapter, f32)], arch: &str) -> Result<()> {
        for (adapter, scale) in adapters {
            if !scale.is_finite() {
                return Err(LoraError::Scale {
                    file: adapter.file().to_string(),
                    scale: *scale,
                }
                .into());
            }
            self.check(adapter, arch)?;
        }
        Ok(())
    }

    /// Checks `adapter` against the model: its architecture `arch`, every pair's base a
    /// projection, every shape the projection's.
    pub fn check(&self, adapter: &LoraAdapter, arch: &str) -> Result<(), LoraError> {
        let file = || adapter.file().to_string();
        if adapter.arch() != arch {
            return Err(LoraError::Architecture {
                file: file(),
                adapter: adapter.arch().to_string(),
                model: arch.to_string(),
            });
        }
        if let Some(base) = adapter.base()
            && base != self.fingerprint
        {
            return Err(LoraError::OtherBase {
                file: file(),
                adapter: base,
                model: self.fingerprint,
            });
        }
        for p in adapter.pairs() {
            let Some(&(n_in, n_out)) = self.projections.get(&p.base) else {
                return Err(if self.tensors.contains(&p.base) {
                    LoraError::NotAProjection {
                        file: file(),
                        base: p.base.clone(),
                    }
                } else {
                    LoraError::UnknownTensor {
                        file: file(),
                        base: p.base.clone(),
                    }
                });
            };
            let shape = |half: &str, expected: [usize; 2], found: [usize; 2]| {
                (expected != found).then(|| LoraError::Shape {
                    file: file(),
                    tensor: format!("{}.{half}", p.base),
                    expected: expected.iter().map(|&d| d as u64).collect(),
                    found: found.iter().map(|&d| d as u64).collect(),
                })
            };
            if let Some(e) = shape("lora_a", [n_in, p.rank], [p.n_in, p.rank]) {
                return Err(e);
            }
            if let Some(e) = shape("lora_b", [p.rank, n_out], [p.rank, p.n_out]) {
                return Err(e);
            }
        }
        Ok(())
    }
}

/// One projection's update of every adapter applied, as one pair ([`combine`]).
#[derive(Debug, Clone)]
pub(crate) struct Combined {
    /// The base tensor.
    pub base: String,
    pub n_in: usize,
    pub n_out: usize,
    /// The combined rank, padded.
    pub rank: usize,
    /// `rank` rows of `n_in`.
    pub a: Vec<f32>,
    /// `n_out` rows of `rank`, the factors folded in.
    pub b: Vec<f32>,
}

/// Every adapter's pairs combined per projection, in the order the projections first come.
/// Adapters of scale 0 are left out, as llama.cpp leaves them out of the graph.
pub(crate) fn combined(adapters: &[(&LoraAdapter, f32)]) -> Vec<Combined> {
    let mut by_base: HashMap<&str, Vec<(&LoraPair, f32)>> = HashMap::new();
    let mut order = Vec::new();
    for (adapter, scale) in adapters {
        if *scale == 0.0 {
            continue;
        }
        for p in adapter.pairs() {
            let entry = by_base.entry(p.base.as_str()).or_insert_with(|| {
                order.push(p.base.as_str());
                Vec::new()
            });
            entry.push((p, adapter.pair_scale(p, *scale)));
        }
    }
    order
        .into_iter()
        .map(|base| {
            let pairs = &by_base[base];
            let (a, b, rank) = combine(pairs);
            Combined {
                base: base.to_string(),
                n_in: pairs[0].0.n_in,
                n_out: pairs[0].0.n_out,
                rank,
                a,
                b,
            }
        })
        .collect()
}

/// Every adapter's pairs combined per projection ([`combined`]) and handed to `backend`. The
/// `A`s of projections that read one input (a group of `groups`) go together through
/// [`Backend::load_linears`], which may stack them as it stacks q, k and v: one product then
/// computes every `A·x` of the group (the GPU's stacked product, `gpu/fuse.rs`).
pub(crate) fn build<B: Backend>(
    backend: &mut B,
    adapters: &[(&LoraAdapter, f32)],
    groups: &[Vec<String>],
) -> Result<LoraWeights<B::Weight>> {
    let mut updates: HashMap<String, Combined> = combined(adapters)
        .into_iter()
        .map(|c| (c.base.clone(), c))
        .collect();
    let mut by_name = HashMap::with_capacity(updates.len());
    // The groups first (in the graph's order, as the stacked product wants its rows), then
    // the projections of no group.
    let mut order: Vec<Vec<Combined>> = groups
        .iter()
        .map(|g| g.iter().filter_map(|name| updates.remove(name)).collect())
        .collect();
    order.extend(updates.into_values().map(|c| vec![c]));
    for group in order.into_iter().filter(|g| !g.is_empty()) {
        let infos = group
            .iter()
            .map(|c| f32_info(&format!("{}.lora_a", c.base), [c.n_in, c.rank]))
            .collect::<Result<Vec<_>>>()?;
        let bytes: Vec<Vec<u8>> = group.iter().map(|c| f32_bytes(&c.a)).collect();
        let views: Vec<LinearView<'_>> = infos
            .iter()
            .zip(&bytes)
            .map(|(info, data)| LinearView {
                weight: TensorView { info, data },
                bias: None,
            })
            .collect();
        let a_weights = backend.load_linears(&views)?;
        for (c, (a, _)) in group.iter().zip(a_weights) {
            let b = upload(
                backend,
                &format!("{}.lora_b", c.base),
                [c.rank, c.n_out],
                &c.b,
            )?;
            by_name.insert(c.base.clone(), LoraLinear { a, b });
        }
    }
    Ok(LoraWeights { by_name })
}

/// The pairs of one projection (same `n_in`, `n_out`) with their factors as one pair:
/// `A` (`rank` rows of `n_in`), `B` (`n_out` rows of `rank`, the factors folded in), and the
/// padded combined rank.
fn combine(pairs: &[(&LoraPair, f32)]) -> (Vec<f32>, Vec<f32>, usize) {
    let (n_in, n_out) = (pairs[0].0.n_in, pairs[0].0.n_out);
    let total: usize = pairs.iter().map(|(p, _)| p.rank).sum();
    let rank = total.next_multiple_of(RANK_ALIGN);
    let mut a = vec![0f32; rank * n_in];
    let mut b = vec![0f32; n_out * rank];
    let mut at = 0;
    for (p, scale) in pairs {
        a[at * n_in..(at + p.rank) * n_in].copy_from_slice(&p.a);
        for (row, src) in b.chunks_exact_mut(rank).zip(p.b.chunks_exact(p.rank)) {
            for (d, s) in row[at..at + p.rank].iter_mut().zip(src) {
                *d = s * scale;
            }
        }
        at += p.rank;
    }
    (a, b, rank)
}

/// An F32 tensor `name` of GGML dims `dims`.
fn f32_info(name: &str, dims: [usize; 2]) -> Result<TensorInfo> {
    let dims = dims.map(|d| d as u64);
    TensorInfo::new(name, &dims, GgmlType::F32, 0)
        .map_err(|e| ModelError::Backend(format!("LoRA tensor `{name}`: {e}")))
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `values` as an F32 tensor `name` of GGML dims `dims`, loaded by `backend`.
fn upload<B: Backend>(
    backend: &mut B,
    name: &str,
    dims: [usize; 2],
    values: &[f32],
) -> Result<B::Weight> {
    let info = f32_info(name, dims)?;
    let data = f32_bytes(values);
    backend.load_weight(TensorView {
        info: &info,
        data: &data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(rank: usize, seed: f32) -> LoraPair {
        let (n_in, n_out) = (3, 2);
        LoraPair {
            base: "w".into(),
            n_in,
            n_out,
            rank,
            a: (0..rank * n_in).map(|i| seed + i as f32).collect(),
            b: (0..n_out * rank).map(|i| seed - i as f32).collect(),
        }
    }

    /// `B·A` of the combined pair is the sum of each pair's `scale · B_i·A_i`, and the
    /// padding is zeros.
    #[test]
    fn combined_pair_sums_the_scaled_updates() {
        let (p, q) = (pair(1, 0.5), pair(2, -1.0));
        let (a, b, rank) = combine(&[(&p, 2.0), (&q, 0.25)]);
        assert_eq!(rank, 4);
        let ba = |a: &[f32], b: &[f32], r: usize, o: usize, i: usize| -> f32 {
            (0..r).map(|k| b[o * r + k] * a[k * 3 + i]).sum()
        };
        for o in 0..2 {
            for i in 0..3 {
                let want = 2.0 * ba(&p.a, &p.b, 1, o, i) + 0.25 * ba(&q.a, &q.b, 2, o, i);
                assert_eq!(ba(&a, &b, rank, o, i), want);
            }
        }
        assert!(a[3 * 3..].iter().all(|&v| v == 0.0));
        assert!(b.chunks(4).all(|row| row[3] == 0.0));
    }
}
