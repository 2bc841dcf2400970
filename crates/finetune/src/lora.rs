//! The adapter being trained: which projections it updates, its rank and factor, PEFT's
//! initialisation, and the [`TapeWeight`] handles the model's graph multiplies.
//!
//! Parameter `2i` is pair `i`'s `A` (`rank` rows of `n_in`), `2i + 1` its `B` (`n_out` rows
//! of `rank`), as PEFT's `lora_A.weight` and `lora_B.weight`; the factor `alpha / rank`
//! (`alpha / sqrt(rank)` with rsLoRA) is applied by the product that reads `B`, so the
//! parameters are PEFT's own and an optimizer step moves them as PEFT's would.

use rullama_model::lora::LoraPair;
use serde::{Deserialize, Serialize};

use crate::data::SplitMix64;
use crate::error::{FinetuneError, Result};
use crate::tape::{Matrix, TapeWeight};

/// A projection LoRA can update, by PEFT's `target_modules` name and llama.cpp's tensor name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Target {
    /// `q_proj` / `attn_q`.
    Q,
    /// `k_proj` / `attn_k`.
    K,
    /// `v_proj` / `attn_v`.
    V,
    /// `o_proj` / `attn_output`.
    O,
    /// `gate_proj` / `ffn_gate`.
    Gate,
    /// `up_proj` / `ffn_up`.
    Up,
    /// `down_proj` / `ffn_down`.
    Down,
}

impl Target {
    /// All seven, in the graph's order.
    pub const ALL: [Target; 7] = [
        Target::Q,
        Target::K,
        Target::V,
        Target::O,
        Target::Gate,
        Target::Up,
        Target::Down,
    ];

    /// PEFT's module name.
    pub fn peft_name(self) -> &'static str {
        match self {
            Target::Q => "q_proj",
            Target::K => "k_proj",
            Target::V => "v_proj",
            Target::O => "o_proj",
            Target::Gate => "gate_proj",
            Target::Up => "up_proj",
            Target::Down => "down_proj",
        }
    }

    /// llama.cpp's tensor name within a block (`blk.N.<name>.weight`).
    pub fn tensor_name(self) -> &'static str {
        match self {
            Target::Q => "attn_q",
            Target::K => "attn_k",
            Target::V => "attn_v",
            Target::O => "attn_output",
            Target::Gate => "ffn_gate",
            Target::Up => "ffn_up",
            Target::Down => "ffn_down",
        }
    }

    /// The target a user names: PEFT's module name, llama.cpp's tensor name, or the short
    /// one (`q`, `k`, `v`, `o`, `gate`, `up`, `down`).
    pub fn from_name(name: &str) -> Result<Target> {
        let name = name.trim();
        Target::ALL
            .into_iter()
            .find(|t| {
                let short = t.peft_name().trim_end_matches("_proj");
                [t.peft_name(), t.tensor_name(), short].contains(&name)
            })
            .ok_or_else(|| FinetuneError::UnknownTarget(name.to_string()))
    }

    /// Which target the base tensor `blk.N.<name>.weight` is.
    fn of_tensor(base: &str) -> Option<Target> {
        let stem = base.strip_suffix(".weight")?;
        let name = stem.rsplit('.').next()?;
        Target::ALL.into_iter().find(|t| t.tensor_name() == name)
    }
}

/// The adapter's hyper-parameters (PEFT's `LoraConfig`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoraSpec {
    /// `r`.
    pub rank: usize,
    /// `lora_alpha`.
    pub alpha: f32,
    /// `target_modules`.
    pub targets: Vec<Target>,
    /// `use_rslora`: the factor is `alpha / sqrt(rank)` instead of `alpha / rank`.
    pub rslora: bool,
    /// `lora_dropout`: the probability that a training step zeroes an input of `A`'s product
    /// (the rest scaled by `1 / (1 - p)`), in `[0, 1)`.
    #[serde(default)]
    pub dropout: f32,
}

/// One projection the adapter updates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairShape {
    /// The base tensor (`blk.0.attn_q.weight`).
    pub base: String,
    /// Its inputs.
    pub n_in: usize,
    /// Its outputs.
    pub n_out: usize,
}

/// The adapter being trained: its spec and the projections it updates, in the model's
/// order of tensor names.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainableLora {
    spec: LoraSpec,
    pairs: Vec<PairShape>,
}

impl TrainableLora {
    /// The adapter `spec` describes over the model's projections (`Model::lora_projections`):
    /// a rank of 0, no target, or a target the model lacks is an error.
    pub fn new(projections: &[(String, usize, usize)], spec: LoraSpec) -> Result<TrainableLora> {
        if spec.rank == 0 {
            return Err(FinetuneError::Rank(spec.rank));
        }
        if !(spec.alpha.is_finite() && spec.alpha > 0.0) {
            return Err(FinetuneError::Alpha(spec.alpha));
        }
        if !(0.0..1.0).contains(&spec.dropout) {
            return Err(FinetuneError::Dropout(spec.dropout));
        }
        if spec.targets.is_empty() {
            return Err(FinetuneError::NoTargets);
        }
        let pairs: Vec<PairShape> = projections
            .iter()
            .filter(|(base, ..)| Target::of_tensor(base).is_some_and(|t| spec.targets.contains(&t)))
            .map(|(base, n_in, n_out)| PairShape {
                base: base.clone(),
                n_in: *n_in,
                n_out: *n_out,
            })
            .collect();
        for t in &spec.targets {
            if !pairs.iter().any(|p| Target::of_tensor(&p.base) == Some(*t)) {
                return Err(FinetuneError::TargetNotInModel(t.peft_name().to_string()));
            }
        }
        Ok(TrainableLora { spec, pairs })
    }

    /// Its hyper-parameters.
    pub fn spec(&self) -> &LoraSpec {
        &self.spec
    }

    /// The projections it updates.
    pub fn pairs(&self) -> &[PairShape] {
        &self.pairs
    }

    /// The adapted base tensors' names, in parameter order.
    pub fn bases(&self) -> Vec<&str> {
        self.pairs.iter().map(|p| p.base.as_str()).collect()
    }

    /// The factor of `B·A`: `alpha / rank`, or `alpha / sqrt(rank)` with rsLoRA.
    pub fn scale(&self) -> f64 {
        let r = self.spec.rank as f64;
        f64::from(self.spec.alpha) / if self.spec.rslora { r.sqrt() } else { r }
    }

    /// PEFT's initial values: each `A` from Kaiming-uniform (`a = sqrt(5)`, so uniform in
    /// `±1/sqrt(n_in)`), each `B` zero, so the adapted model starts as the base. The same
    /// seed gives the same values.
    pub fn init(&self, seed: u64) -> Vec<Matrix> {
        let mut rng = SplitMix64::new(seed);
        let r = self.spec.rank;
        let mut params = Vec::with_capacity(2 * self.pairs.len());
        for p in &self.pairs {
            let bound = 1.0 / (p.n_in as f64).sqrt();
            let a = (0..r * p.n_in)
                .map(|_| bound * (2.0 * unit(&mut rng) - 1.0))
                .collect();
            params.push(Matrix::new(r, p.n_in, a));
            params.push(Matrix::zeros(p.n_out, r));
        }
        params
    }

    /// The handles the graph multiplies, for `Model::set_lora_weights`: by base name, `A`
    /// (parameter `2i`) and `B` (`2i + 1`, times [`TrainableLora::scale`]), each made by
    /// `param(id, scale, dropout)` (an executor's parameter handle).
    pub fn weights_with<W>(&self, param: impl Fn(usize, f64, f64) -> W) -> Vec<(String, W, W)> {
        let scale = self.scale();
        let dropout = f64::from(self.spec.dropout);
        self.pairs
            .iter()
            .enumerate()
            .map(|(i, p)| {
                // PEFT drops out the adapter's input, which is A's.
                let a = param(2 * i, 1.0, dropout);
                let b = param(2 * i + 1, scale, 0.0);
                (p.base.clone(), a, b)
            })
            .collect()
    }

    /// [`TrainableLora::weights_with`] for the CPU tape.
    pub fn weights(&self) -> Vec<(String, TapeWeight, TapeWeight)> {
        self.weights_with(|id, scale, dropout| TapeWeight::Param { id, scale, dropout })
    }

    /// The trained values as adapter pairs (f32), for the adapter files.
    pub fn to_pairs(&self, params: &[Matrix]) -> Vec<LoraPair> {
        self.pairs
            .iter()
            .enumerate()
            .map(|(i, p)| LoraPair {
                base: p.base.clone(),
                n_in: p.n_in,
                n_out: p.n_out,
                rank: self.spec.rank,
                a: params[2 * i].data.iter().map(|&v| v as f32).collect(),
                b: params[2 * i + 1].data.iter().map(|&v| v as f32).collect(),
            })
            .collect()
    }
}

/// A uniform draw in `[0, 1)` with 53 bits.
fn unit(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}
