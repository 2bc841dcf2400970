//! The GPU tape as a trainer's [`Engine`]: a batch's examples as one step (positions
//! restarting at each), gradients gathered on the device, AdamW on the device.

use std::sync::Arc;

use rullama_kernels::ops::adamw::{AdamW as AdamWKernel, AdamWParams, GradNormSq, applies};
use rullama_kernels::ops::cross_entropy::{CrossEntropyParams, MASKED};
use rullama_kernels::ops::dropout::DropoutParams;
use rullama_kernels::{
    Dtype, Gpu, GpuFormat, GpuTensor, GpuWeight, Kernel, OpId, Readback, Step, StepBuilder,
    StepProfile, View, WeightShape,
};
use rullama_model::{Model, Session};

use super::plan::{self, ParamBindings, Plan, Pool};
use super::{GpuTapeBackend, GpuTapeWeight, gpu_err};
use crate::data::SplitMix64;
use crate::engine::{Engine, MaskedTokens, TrainBackend};
use crate::error::{FinetuneError, Fit, Result};
use crate::loss::targets;
use crate::optim::{AdamW, AdamWConfig};
use crate::tape::Matrix;

impl TrainBackend for GpuTapeBackend {
    fn param(id: usize, scale: f64, dropout: f64) -> GpuTapeWeight {
        GpuTapeWeight::Param {
            id,
            scale: scale as f32,
            dropout: dropout as f32,
        }
    }

    fn engine<'m>(
        model: &'m Model<GpuTapeBackend>,
        params: Vec<Matrix>,
        optim: AdamWConfig,
        n_ctx: usize,
    ) -> Result<Box<dyn Engine + 'm>> {
        Ok(Box::new(GpuEngine::new(model, &params, optim, n_ctx)?))
    }
}

/// A step's tokens are a multiple of this (or of the context, if shorter), a filler
/// sequence making up the rest: steps of any lengths run on a few built plans.
const TOKEN_QUANTUM: usize = 64;

/// Built plans kept: a run of one shape uses one or two (training and evaluation); more
/// come from the lengths of padded batches, the oldest dropped.
const MAX_PLANS: usize = 8;

/// The adapter's parameters and AdamW's state on the device.
#[derive(Debug)]
struct Params {
    /// Each parameter's values, f32, row-major (`[n_out, n_in]`).
    values: Vec<GpuTensor>,
    /// The same buffers as F32 matrices, for the products.
    weights: Vec<GpuWeight>,
    /// Where each one starts in `grads`, `m` and `v`.
    offsets: Vec<usize>,
    /// Each one's `[rows, cols]`.
    shapes: Vec<[usize; 2]>,
    grads: GpuTensor,
    m: GpuTensor,
    v: GpuTensor,
    /// `grad_norm_sq`'s sum and partial sums.
    norm_sq: GpuTensor,
    total: usize,
}

impl Params {
    fn new(gpu: &Gpu, init: &[Matrix]) -> Result<Params> {
        let mut offsets = Vec::with_capacity(init.len());
        let mut total = 0;
        for p in init {
            offsets.push(total);
            total += p.data.len();
        }
        let alloc = |n: usize| -> Result<GpuTensor> {
            let t = gpu
                .allocate("the adapter's optimizer state", (n * 4) as u64, || {
                    GpuTensor::zeros(gpu, &[n], Dtype::F32)
                })
                .map_err(gpu_err("allocating the adapter's optimizer state"))?;
            Ok(t)
        };
        let (mut values, mut weights) = (Vec::new(), Vec::new());
        for p in init {
            let t = alloc(p.data.len())?;
            t.write(gpu, 0, &f32s(&p.data));
            // An F32 matrix's GPU layout is its values as they are: the buffer is the matrix.
            let shape = WeightShape {
                format: GpuFormat::F32,
                n_in: p.cols,
                n_out: p.rows,
            };
            weights.push(GpuWeight::in_buffer(shape, t.buf.clone()));
            values.push(t);
        }
        let scratch = GradNormSq { n: total }.scratch_len();
        Ok(Params {
            values,
            weights,
            offsets,
            shapes: init.iter().map(|p| [p.rows, p.cols]).collect(),
            grads: alloc(total)?,
            m: alloc(total)?,
            v: alloc(total)?,
            norm_sq: alloc(scratch)?,
            total,
        })
    }

    fn bytes(&self) -> u64 {
        let own: u64 = self.values.iter().map(GpuTensor::bytes).sum();
        own + self.grads.bytes() + self.m.bytes() + self.v.bytes() + self.norm_sq.bytes()
    }

    /// `t`'s first `total` values as one matrix per parameter.
    fn split(&self, all: &[f32]) -> Vec<Matrix> {
        self.shapes
            .iter()
            .zip(&self.offsets)
            .map(|(&[r, c], &off)| {
                let data = all[off..off + r * c]
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect();
                Matrix::new(r, c, data)
            })
            .collect()
    }
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

/// The optimizer's step: the gradients' squared norm, then AdamW on each parameter.
#[derive(Debug)]
struct Update {
    step: Step,
    adamw: Vec<OpId>,
    read: Readback,
}

impl Update {
    fn new(gpu: &Gpu, p: &Params, config: &AdamWConfig) -> Result<Update> {
        let err = gpu_err("building the optimizer step");
        let mut ops = StepBuilder::new();
        let norm = GradNormSq { n: p.total }
            .ops((&p.grads).into(), (&p.norm_sq).into())
            .map_err(err)?;
        ops.extend(norm);
        let first = kernel_step(config, config.lr, 1);
        let mut adamw = Vec::new();
        for (t, &off) in p.values.iter().zip(&p.offsets) {
            let op = first
                .op(
                    t.len(),
                    t.into(),
                    View::at(&p.grads, off),
                    View::at(&p.m, off),
                    View::at(&p.v, off),
                    (&p.norm_sq).into(),
                )
                .map_err(gpu_err("building the optimizer step"))?;
            adamw.push(ops.push(op));
        }
        Ok(Update {
            step: ops.build(gpu),
            adamw,
            read: Readback::new(gpu, 4),
        })
    }
}

fn kernel_step(c: &AdamWConfig, lr: f64, step: u64) -> AdamWKernel {
    AdamWKernel {
        lr,
        beta1: c.beta1,
        beta2: c.beta2,
        eps: c.eps,
        weight_decay: c.weight_decay,
        max_norm: c.max_grad_norm,
        step: u32::try_from(step).unwrap_or(u32::MAX),
    }
}

/// The GPU's engine.
#[derive(Debug)]
struct GpuEngine<'m> {
    session: Session<'m, GpuTapeBackend>,
    gpu: Arc<Gpu>,
    params: Params,
    update: Update,
    /// Built steps by (tokens, with backward), the most recently used last.
    plans: Vec<((usize, bool), Plan)>,
    /// The buffers the plans share.
    pool: Pool,
    n_ctx: usize,
    /// Reads the parameters and moments back (checkpoints, the adapter).
    read: Readback,
    config: AdamWConfig,
    /// Optimizer steps applied: a skipped one (its gradient not finite) is taken back.
    steps: u64,
}

impl<'m> GpuEngine<'m> {
    fn new(
        model: &'m Model<GpuTapeBackend>,
        init: &[Matrix],
        config: AdamWConfig,
        n_ctx: usize,
    ) -> Result<GpuEngine<'m>> {
        let gpu = Arc::clone(model.backend().gpu());
        let mut session = model.session(n_ctx)?;
        session.sequence_mut().param_shapes = init.iter().map(|p| [p.rows, p.cols]).collect();
        let params = Params::new(&gpu, init)?;
        let update = Update::new(&gpu, &params, &config)?;
        let read = Readback::new(&gpu, (params.total.max(1) * 4) as u64);
        Ok(GpuEngine {
            session,
            gpu,
            params,
            update,
            plans: Vec::new(),
            pool: Pool::with_limit(model.backend().step_bytes_limit()),
            n_ctx,
            read,
            config,
            steps: 0,
        })
    }

    /// Records `examples` as one step and runs its plan (built on first use of its shape);
    /// `weight ×` the summed loss. The step's tokens are rounded up to a multiple of
    /// [`TOKEN_QUANTUM`] with a filler sequence that predicts nothing, so examples of every
    /// length share a few plans.
    fn run(
        &mut self,
        examples: &[MaskedTokens<'_>],
        weight: f32,
        dropout_seed: Option<u64>,
    ) -> Result<f64> {
        let train = dropout_seed.is_some();
        let n_real: usize = examples.iter().map(|e| e.tokens.len()).sum();
        let quantum = TOKEN_QUANTUM.min(self.n_ctx);
        let filler_len = n_real.next_multiple_of(quantum) - n_real;
        let (filler, no_mask) = (vec![0u32; filler_len], vec![false; filler_len]);
        let mut all = examples.to_vec();
        if filler_len > 0 {
            all.push(MaskedTokens {
                tokens: &filler,
                mask: &no_mask,
            });
        }
        let tokens: Vec<u32> = all.iter().flat_map(|e| e.tokens).copied().collect();
        let lens: Vec<usize> = all.iter().map(|e| e.tokens.len()).collect();
        self.session.sequence_mut().clear();
        let logits = self.session.record_packed(&tokens, &lens)?;
        let n = tokens.len();
        let gpu = Arc::clone(&self.gpu);
        let tape = self.session.sequence();
        let key = (n, train);
        match self.plans.iter().position(|(k, _)| *k == key) {
            Some(i) => {
                let entry = self.plans.remove(i);
                self.plans.push(entry);
            }
            None => {
                if self.plans.len() == MAX_PLANS {
                    self.plans.remove(0);
                }
                let bindings = ParamBindings {
                    weights: &self.params.weights,
                    grads: &self.params.grads,
                    offsets: &self.params.offsets,
                };
                let plan = match plan::build(tape, logits.0, &bindings, &mut self.pool, train) {
                    Ok(plan) => plan,
                    Err(FinetuneError::StepTooLarge { tokens, what, .. }) => {
                        let fits = self.largest_fit(n, train).map(|tokens| Fit {
                            tokens,
                            ctx: self.n_ctx,
                        });
                        return Err(FinetuneError::StepTooLarge { tokens, what, fits });
                    }
                    Err(e) => return Err(e),
                };
                self.plans.push((key, plan));
            }
        }
        let plan = &mut self.plans.last_mut().expect("pushed above").1;
        for (t, ids) in plan.ids.iter().zip(&tape.ids) {
            t.write(&gpu, 0, ids);
        }
        for (positions, t) in &plan.starts {
            let start: Vec<u32> = tape.ids[*positions]
                .iter()
                .enumerate()
                .map(|(i, &p)| i as u32 - p)
                .collect();
            t.write(&gpu, 0, &start);
        }
        let ids: Vec<u32> = all
            .iter()
            .flat_map(|e| targets(e.tokens, e.mask))
            .map(|t| t.unwrap_or(MASKED))
            .collect();
        plan.targets.write(&gpu, 0, &ids);
        for &(op, node) in &plan.dropout_ops {
            let mut p: DropoutParams = plan.step.params(op);
            let seed =
                dropout_seed.unwrap_or(0) ^ (node as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
            p.set_seed(SplitMix64::new(seed).next_u64());
            plan.step.set_params(op, &p);
        }
        for &op in &plan.loss_ops {
            let mut p: CrossEntropyParams = plan.step.params(op);
            p.set_weight(weight);
            plan.step.set_params(op, &p);
        }
        let mut loss = vec![0f32; n];
        plan.readback
            .run_and_read(&gpu, &mut plan.step, &plan.loss, 0, &mut loss)
            .map_err(gpu_err("running a training step"))?;
        let sum: f64 = loss.iter().map(|&l| f64::from(l)).sum();
        Ok(f64::from(weight) * sum)
    }

    /// After a step of `failed` tokens did not fit: the most tokens (a multiple of the
    /// quantum) whose step builds, by bisection, each try on emptied plans and pool (what the
    /// error tells the user to lower to); the plans and pool are left empty.
    fn largest_fit(&mut self, failed: usize, train: bool) -> Option<usize> {
        let quantum = TOKEN_QUANTUM.min(self.n_ctx);
        // In quanta: `fits` built (0: none yet), `fails` did not.
        let (mut fits, mut fails) = (0, failed / quantum);
        while fails - fits > 1 {
            let mid = (fits + fails) / 2;
            match self.builds(mid * quantum, train) {
                true => fits = mid,
                false => fails = mid,
            }
        }
        self.plans.clear();
        self.pool = Pool::with_limit(self.pool.limit());
        (fits > 0).then_some(fits * quantum)
    }

    /// Whether a step of `n` tokens (sequences of the context, the last shorter) builds on
    /// an empty pool.
    fn builds(&mut self, n: usize, train: bool) -> bool {
        self.plans.clear();
        self.pool = Pool::with_limit(self.pool.limit());
        let tokens = vec![0u32; n];
        let mut lens = vec![self.n_ctx; n / self.n_ctx];
        if !n.is_multiple_of(self.n_ctx) {
            lens.push(n % self.n_ctx);
        }
        self.session.sequence_mut().clear();
        let Ok(logits) = self.session.record_packed(&tokens, &lens) else {
            return false;
        };
        let bindings = ParamBindings {
            weights: &self.params.weights,
            grads: &self.params.grads,
            offsets: &self.params.offsets,
        };
        let tape = self.session.sequence();
        plan::build(tape, logits.0, &bindings, &mut self.pool, train).is_ok()
    }

    fn read_all(&self, t: &GpuTensor) -> Result<Vec<f32>> {
        let mut out = vec![0f32; self.params.total];
        self.read
            .read(&self.gpu, t, 0, &mut out)
            .map_err(gpu_err("reading the adapter back"))?;
        Ok(out)
    }
}

impl Engine for GpuEngine<'_> {
    /// The examples are one step, so the first example's seed draws every mask of it (each
    /// product's its own, from the seed and the product's place in the graph).
    fn accumulate(
        &mut self,
        examples: &[MaskedTokens<'_>],
        weight: f32,
        dropout_seeds: &[u64],
    ) -> Result<f64> {
        let seed = dropout_seeds.first().copied().unwrap_or(0);
        self.run(examples, weight, Some(seed))
    }

    fn loss(&mut self, examples: &[MaskedTokens<'_>], weight: f32) -> Result<f64> {
        self.run(examples, weight, None)
    }

    fn update(&mut self, lr: f64) -> Result<f64> {
        self.steps += 1;
        let k = kernel_step(&self.config, lr, self.steps);
        let u = &mut self.update;
        for &op in &u.adamw {
            let mut p: AdamWParams = u.step.params(op);
            p.set(&k).map_err(gpu_err("setting AdamW's step"))?;
            u.step.set_params(op, &p);
        }
        let p = &self.params;
        let index = self.gpu.submit_with(&mut u.step, |enc| {
            u.read.copy(enc, &p.norm_sq, 0, 1);
            enc.clear_buffer(p.grads.buf.raw(), 0, None);
        });
        let mut norm_sq = [0f32; 1];
        u.read
            .finish(&self.gpu, index, &mut norm_sq)
            .map_err(gpu_err("running the optimizer step"))?;
        let norm_sq = f64::from(norm_sq[0]);
        if !applies(norm_sq) {
            // The update kernel read this same norm and wrote nothing: the step did not
            // happen, so the next one keeps its bias corrections' t.
            self.steps -= 1;
        }
        Ok(norm_sq.sqrt())
    }

    fn gradients(&self) -> Result<Vec<Matrix>> {
        Ok(self.params.split(&self.read_all(&self.params.grads)?))
    }

    fn params(&self) -> Result<Vec<Matrix>> {
        self.params
            .values
            .iter()
            .zip(&self.params.shapes)
            .map(|(t, &[r, c])| {
                let mut out = vec![0f32; r * c];
                self.read
                    .read(&self.gpu, t, 0, &mut out)
                    .map_err(gpu_err("reading the adapter back"))?;
                Ok(Matrix::new(
                    r,
                    c,
                    out.iter().map(|&v| f64::from(v)).collect(),
                ))
            })
            .collect()
    }

    fn optimizer(&self) -> Result<AdamW> {
        Ok(AdamW {
            config: self.config,
            m: self.params.split(&self.read_all(&self.params.m)?),
            v: self.params.split(&self.read_all(&self.params.v)?),
            steps: self.steps,
        })
    }

    fn steps(&self) -> u64 {
        self.steps
    }

    fn restore(&mut self, params: Vec<Matrix>, opt: AdamW) -> Result<()> {
        let p = &self.params;
        for (t, m) in p.values.iter().zip(&params) {
            t.write(&self.gpu, 0, &f32s(&m.data));
        }
        for ((off, m), v) in p.offsets.iter().zip(&opt.m).zip(&opt.v) {
            p.m.write(&self.gpu, *off, &f32s(&m.data));
            p.v.write(&self.gpu, *off, &f32s(&v.data));
        }
        self.steps = opt.steps;
        self.config = opt.config;
        Ok(())
    }

    fn profile(&mut self) -> Result<Option<StepProfile>> {
        let Some((_, plan)) = self.plans.last_mut() else {
            return Ok(None);
        };
        let profile = plan.step.profile_dispatches(&self.gpu);
        Ok(Some(profile.map_err(gpu_err("profiling a training step"))?))
    }

    fn step_kernels(&self) -> Vec<Kernel> {
        self.plans
            .last()
            .map_or_else(Vec::new, |(_, plan)| plan.step.kernels().collect())
    }

    fn device_bytes(&self) -> Option<u64> {
        let weights = self.session.model().backend().weight_bytes();
        Some(weights + self.params.bytes() + self.pool.bytes())
    }
}
