//! The tape as a trainer's [`Engine`]: each example its own tape step, gradients gathered in
//! f64 on the host, AdamW in f64 (`adamw_ref`).

use rullama_model::{Model, Session};

use super::{Matrix, TapeBackend, TapeWeight};
use crate::engine::{Engine, MaskedTokens, TrainBackend};
use crate::error::Result;
use crate::optim::{AdamW, AdamWConfig};
use crate::step;

impl TrainBackend for TapeBackend {
    fn param(id: usize, scale: f64, dropout: f64) -> TapeWeight {
        TapeWeight::Param { id, scale, dropout }
    }

    fn engine<'m>(
        model: &'m Model<TapeBackend>,
        params: Vec<Matrix>,
        optim: AdamWConfig,
        n_ctx: usize,
    ) -> Result<Box<dyn Engine + 'm>> {
        let mut session = model.session(n_ctx)?;
        let grads = zeros_like(&params);
        let opt = AdamW::new(optim, &params);
        *session.sequence_mut().params_mut() = params;
        Ok(Box::new(TapeEngine {
            session,
            grads,
            opt,
        }))
    }
}

/// The CPU tape's engine.
#[derive(Debug)]
struct TapeEngine<'m> {
    session: Session<'m, TapeBackend>,
    grads: Vec<Matrix>,
    opt: AdamW,
}

fn zeros_like(params: &[Matrix]) -> Vec<Matrix> {
    params
        .iter()
        .map(|p| Matrix::zeros(p.rows, p.cols))
        .collect()
}

impl Engine for TapeEngine<'_> {
    fn accumulate(
        &mut self,
        examples: &[MaskedTokens<'_>],
        weight: f32,
        dropout_seeds: &[u64],
    ) -> Result<f64> {
        let mut loss = 0.0;
        for (e, &seed) in examples.iter().zip(dropout_seeds) {
            self.session.sequence_mut().set_dropout_seed(Some(seed));
            loss += step::accumulate(&mut self.session, e.tokens, e.mask, weight, &mut self.grads)?;
        }
        Ok(loss)
    }

    fn loss(&mut self, examples: &[MaskedTokens<'_>], weight: f32) -> Result<f64> {
        self.session.sequence_mut().set_dropout_seed(None);
        let mut loss = 0.0;
        for e in examples {
            loss += step::loss(&mut self.session, e.tokens, e.mask, weight)?;
        }
        Ok(loss)
    }

    fn update(&mut self, lr: f64) -> Result<f64> {
        let params = self.session.sequence_mut().params_mut();
        let norm = self.opt.step(params, &self.grads, lr);
        self.grads = zeros_like(params);
        Ok(norm)
    }

    fn gradients(&self) -> Result<Vec<Matrix>> {
        Ok(self.grads.clone())
    }

    fn params(&self) -> Result<Vec<Matrix>> {
        Ok(self.session.sequence().params().to_vec())
    }

    fn optimizer(&self) -> Result<AdamW> {
        Ok(self.opt.clone())
    }

    fn steps(&self) -> u64 {
        self.opt.steps
    }

    fn restore(&mut self, params: Vec<Matrix>, opt: AdamW) -> Result<()> {
        *self.session.sequence_mut().params_mut() = params;
        self.opt = opt;
        Ok(())
    }
}
