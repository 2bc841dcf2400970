//! Loading weights into typed structs, written once per architecture over [`Load`].
//!
//! An architecture's `load` is generic over the weight type `W`. It runs twice: first with a
//! [`Checker`] (`W = ()`), which notes every missing tensor and wrong shape without stopping,
//! so the error lists them all at once; then with a [`BackendLoader`], which reads each
//! tensor (borrowed from a file in memory, else read into a reused buffer) and hands it to
//! the backend.

use std::collections::HashMap;

use rullama_gguf::{ByteSource, GgufFile, TensorView};

use crate::backend::{Backend, LinearView};
use crate::error::{MISSING_LISTED, ModelError, Result};
use crate::lora::attach::LoraTargets;
use crate::lora::base::fingerprint;

/// A source of weights by name, with the shape each must have (GGML order).
pub(crate) trait Load {
    type W: Clone;
    /// A tensor the model cannot run without.
    fn required(&mut self, name: &str, dims: &[usize]) -> Result<Self::W>;
    /// A tensor that may be absent (a bias, an untied output).
    fn optional(&mut self, name: &str, dims: &[usize]) -> Result<Option<Self::W>>;
    /// Notes that matrix `name` (`[n_in, n_out]`) is a projection the graph multiplies
    /// through `Graph::linear`, where a LoRA adapter may update it. The default notes
    /// nothing; the [`Checker`] keeps the list.
    fn projection(&mut self, name: &str, n_in: usize, n_out: usize) {
        let _ = (name, n_in, n_out);
    }
    /// Linears that the graph multiplies with one input (q, k, v; gate, up), in its order:
    /// the backend may stack them ([`Backend::load_linears`]). The default loads each alone.
    fn linears(&mut self, specs: &[LinearSpec<'_>]) -> Result<Vec<Linear<Self::W>>>
    where
        Self: Sized,
    {
        specs
            .iter()
            .map(|s| Linear::load(self, s.prefix, s.n_in, s.n_out, s.bias))
            .collect()
    }
}

/// What [`Linear::load`] takes, for [`Load::linears`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinearSpec<'a> {
    pub prefix: &'a str,
    pub n_in: usize,
    pub n_out: usize,
    pub bias: Bias,
}

/// `blk.{il}.{name}`.
pub(crate) fn blk(il: usize, name: &str) -> String {
    format!("blk.{il}.{name}")
}

/// Whether a [`Linear`] has a bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bias {
    None,
    Optional,
    Required,
}

/// A matrix with GGML dims `[n_in, n_out]` and an optional bias of `n_out` values, and the
/// name of its matrix, by which `Graph::linear` finds a LoRA adapter's update of it (models
/// only ever call `Graph::linear`).
#[derive(Debug, Clone)]
pub(crate) struct Linear<W> {
    pub weight: W,
    pub bias: Option<W>,
    /// `{prefix}.weight`; `None` for a matrix loaded as another tensor (a tied LM head),
    /// which no LoRA updates.
    pub name: Option<String>,
}

impl<W: Clone> Linear<W> {
    /// `{prefix}.weight` and, per `bias`, `{prefix}.bias`.
    pub fn load<L: Load<W = W>>(
        l: &mut L,
        prefix: &str,
        n_in: usize,
        n_out: usize,
        bias: Bias,
    ) -> Result<Self> {
        let name = format!("{prefix}.weight");
        let weight = l.required(&name, &[n_in, n_out])?;
        l.projection(&name, n_in, n_out);
        let bias_name = format!("{prefix}.bias");
        let bias = match bias {
            Bias::None => None,
            Bias::Optional => l.optional(&bias_name, &[n_out])?,
            Bias::Required => Some(l.required(&bias_name, &[n_out])?),
        };
        Ok(Linear {
            weight,
            bias,
            name: Some(name),
        })
    }

    /// A linear without bias around an already loaded matrix (tied embeddings).
    pub fn from_weight(weight: W) -> Self {
        Linear {
            weight,
            bias: None,
            name: None,
        }
    }
}

/// Q, K, V and output projections of one layer.
#[derive(Debug, Clone)]
pub(crate) struct AttnWeights<W> {
    pub q: Linear<W>,
    pub k: Linear<W>,
    pub v: Linear<W>,
    pub o: Linear<W>,
}

/// The shapes of an attention block, and which of its projections carry biases.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttnShape {
    pub d_model: usize,
    pub q_out: usize,
    pub k_out: usize,
    pub v_out: usize,
    pub qkv_bias: Bias,
    pub o_bias: Bias,
}

impl<W: Clone> AttnWeights<W> {
    /// q, k and v read the same input: loaded together (a backend may stack them).
    pub fn load<L: Load<W = W>>(l: &mut L, il: usize, s: AttnShape) -> Result<Self> {
        let names = [blk(il, "attn_q"), blk(il, "attn_k"), blk(il, "attn_v")];
        let specs: Vec<LinearSpec<'_>> = names
            .iter()
            .zip([s.q_out, s.k_out, s.v_out])
            .map(|(prefix, n_out)| LinearSpec {
                prefix,
                n_in: s.d_model,
                n_out,
                bias: s.qkv_bias,
            })
            .collect();
        let [q, k, v]: [Linear<W>; 3] = l
            .linears(&specs)?
            .try_into()
            .map_err(|_| ModelError::Backend("q/k/v: not three linears".into()))?;
        Ok(AttnWeights {
            q,
            k,
            v,
            o: Linear::load(l, &blk(il, "attn_output"), s.q_out, s.d_model, s.o_bias)?,
        })
    }
}

/// A gated FFN: `down(act(gate(x)) * up(x))`.
#[derive(Debug, Clone)]
pub(crate) struct FfnWeights<W> {
    pub gate: Linear<W>,
    pub up: Linear<W>,
    pub down: Linear<W>,
}

impl<W: Clone> FfnWeights<W> {
    pub fn load<L: Load<W = W>>(
        l: &mut L,
        il: usize,
        (d_model, n_ff): (usize, usize),
        bias: Bias,
    ) -> Result<Self> {
        // gate and up read the same input: loaded together (a backend may stack them).
        let names = [blk(il, "ffn_gate"), blk(il, "ffn_up")];
        let specs = names.each_ref().map(|prefix| LinearSpec {
            prefix,
            n_in: d_model,
            n_out: n_ff,
            bias,
        });
        let [gate, up]: [Linear<W>; 2] = l
            .linears(&specs)?
            .try_into()
            .map_err(|_| ModelError::Backend("gate/up: not two linears".into()))?;
        Ok(FfnWeights {
            gate,
            up,
            down: Linear::load(l, &blk(il, "ffn_down"), n_ff, d_model, bias)?,
        })
    }
}

/// Shape of a tensor as the file has it, or `None` when absent.
fn file_dims<S: ByteSource>(file: &GgufFile<S>, name: &str) -> Option<Vec<u64>> {
    file.tensor_info(name).map(|t| t.dims.clone())
}

fn shape_matches(found: &[u64], dims: &[usize]) -> bool {
    // GGML pads trailing dims with 1; a file may write `[n, 1]` for a vector.
    let trimmed = |d: &[u64]| -> Vec<u64> {
        let mut v = d.to_vec();
        while v.len() > 1 && v.last() == Some(&1) {
            v.pop();
        }
        v
    };
    let expected: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
    trimmed(found) == trimmed(&expected)
}

/// The first pass: notes every problem, loads nothing.
#[derive(Debug)]
pub(crate) struct Checker<'f, S> {
    file: &'f GgufFile<S>,
    /// The first [`MISSING_LISTED`] missing tensors, and how many are missing in all.
    missing: Vec<String>,
    n_missing: usize,
    mismatch: Option<ModelError>,
    /// The projections noted ([`Load::projection`]): name → `(n_in, n_out)`.
    projections: HashMap<String, (usize, usize)>,
    /// The matrices of each [`Load::linears`] call (projections of one input), in order.
    groups: Vec<Vec<String>>,
}

impl<'f, S: ByteSource> Checker<'f, S> {
    pub fn new(file: &'f GgufFile<S>) -> Self {
        Checker {
            file,
            missing: Vec::new(),
            n_missing: 0,
            mismatch: None,
            projections: HashMap::new(),
            groups: Vec::new(),
        }
    }

    /// Missing tensors first (the first few and the count), then the first shape mismatch;
    /// else what LoRA adapters may update: the projections, and every tensor's name.
    pub fn finish(self, arch: &str) -> Result<LoraTargets> {
        if self.n_missing > 0 {
            return Err(ModelError::missing(self.missing, self.n_missing));
        }
        if let Some(e) = self.mismatch {
            return Err(e);
        }
        Ok(LoraTargets {
            projections: self.projections,
            groups: self.groups,
            tensors: self.file.tensors().map(|t| t.name.clone()).collect(),
            fingerprint: fingerprint(self.file.metadata(), arch),
        })
    }

    fn check(&mut self, name: &str, dims: &[usize], found: &[u64]) {
        if self.mismatch.is_none() && !shape_matches(found, dims) {
            self.mismatch = Some(ModelError::ShapeMismatch {
                name: name.to_string(),
                expected: dims.iter().map(|&d| d as u64).collect(),
                found: found.to_vec(),
            });
        }
    }
}

impl<S: ByteSource> Load for Checker<'_, S> {
    type W = ();

    fn required(&mut self, name: &str, dims: &[usize]) -> Result<()> {
        match file_dims(self.file, name) {
            Some(found) => self.check(name, dims, &found),
            None => {
                self.n_missing += 1;
                if self.missing.len() < MISSING_LISTED {
                    self.missing.push(name.to_string());
                }
            }
        }
        Ok(())
    }

    fn optional(&mut self, name: &str, dims: &[usize]) -> Result<Option<()>> {
        Ok(file_dims(self.file, name).map(|found| self.check(name, dims, &found)))
    }

    fn projection(&mut self, name: &str, n_in: usize, n_out: usize) {
        self.projections.insert(name.to_string(), (n_in, n_out));
    }

    /// Notes the group, then checks each linear alone.
    fn linears(&mut self, specs: &[LinearSpec<'_>]) -> Result<Vec<Linear<()>>> {
        let names = specs.iter().map(|s| format!("{}.weight", s.prefix));
        self.groups.push(names.collect());
        specs
            .iter()
            .map(|s| Linear::load(self, s.prefix, s.n_in, s.n_out, s.bias))
            .collect()
    }
}

/// The second pass: every tensor goes to the backend once. A file in memory (a map, a
/// buffer) lends its bytes; any other is read into buffers kept for the whole load, so the
/// load allocates for its largest tensors once instead of once a tensor (which measured
/// slower than the map: every fresh buffer is page-faulted in before the backend copies it).
#[derive(Debug)]
pub(crate) struct BackendLoader<'a, S, B> {
    file: &'a GgufFile<S>,
    backend: &'a mut B,
    /// One buffer for a lone tensor, and one per matrix and per bias of the widest
    /// [`Load::linears`] call.
    scratch: Vec<u8>,
    weights: Vec<Vec<u8>>,
    biases: Vec<Vec<u8>>,
}

impl<'a, S, B> BackendLoader<'a, S, B> {
    pub fn new(file: &'a GgufFile<S>, backend: &'a mut B) -> Self {
        BackendLoader {
            file,
            backend,
            scratch: Vec::new(),
            weights: Vec::new(),
            biases: Vec::new(),
        }
    }
}

/// The tensor `name` with its bytes (borrowed from `file`, or read into `scratch`); absent
/// is `Ok(None)`, a failed read an error naming the file and tensor.
fn read<'f, S: ByteSource>(
    file: &'f GgufFile<S>,
    name: &str,
    scratch: &'f mut Vec<u8>,
) -> Result<Option<TensorView<'f>>> {
    match file.tensor_info(name) {
        Some(info) => Ok(Some(file.read_tensor_with(info, scratch)?)),
        None => Ok(None),
    }
}

fn read_required<'f, S: ByteSource>(
    file: &'f GgufFile<S>,
    name: String,
    scratch: &'f mut Vec<u8>,
) -> Result<TensorView<'f>> {
    read(file, &name, scratch)?.ok_or_else(|| ModelError::missing_one(name))
}

impl<S: ByteSource, B: Backend> Load for BackendLoader<'_, S, B> {
    type W = B::Weight;

    fn required(&mut self, name: &str, dims: &[usize]) -> Result<B::Weight> {
        match self.optional(name, dims)? {
            Some(w) => Ok(w),
            None => Err(ModelError::missing_one(name)),
        }
    }

    fn optional(&mut self, name: &str, _dims: &[usize]) -> Result<Option<B::Weight>> {
        match read(self.file, name, &mut self.scratch)? {
            Some(view) => self.backend.load_weight(view).map(Some),
            None => Ok(None),
        }
    }

    /// The tensors of every linear of `specs`, read first and handed to the backend at once.
    fn linears(&mut self, specs: &[LinearSpec<'_>]) -> Result<Vec<Linear<B::Weight>>> {
        let file = self.file;
        for bufs in [&mut self.weights, &mut self.biases] {
            if bufs.len() < specs.len() {
                bufs.resize_with(specs.len(), Vec::new);
            }
        }
        let views = specs
            .iter()
            .zip(self.weights.iter_mut().zip(self.biases.iter_mut()))
            .map(|(s, (weight_buf, bias_buf))| {
                let weight = read_required(file, format!("{}.weight", s.prefix), weight_buf)?;
                let name = format!("{}.bias", s.prefix);
                let bias = match s.bias {
                    Bias::None => None,
                    Bias::Optional => read(file, &name, bias_buf)?,
                    Bias::Required => Some(read_required(file, name, bias_buf)?),
                };
                Ok(LinearView { weight, bias })
            })
            .collect::<Result<Vec<_>>>()?;
        let loaded = self.backend.load_linears(&views)?;
        Ok(loaded
            .into_iter()
            .zip(specs)
            .map(|((weight, bias), s)| Linear {
                weight,
                bias,
                name: Some(format!("{}.weight", s.prefix)),
            })
            .collect())
    }
}
