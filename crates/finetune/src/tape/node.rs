//! One recorded op of the tape: what it computed from, and what its backward needs besides
//! its inputs' values (which the tape keeps: every value is a capture buffer).

use rullama_kernels::Activation;
use rullama_kernels::ops::attention_train::TrainAttention;
use rullama_kernels::ops::norm::RmsNorm;
use rullama_kernels::ops::rope::Rope;

use super::weight::TapeWeight;

/// A value on the tape: node `i`'s output.
pub type ValueId = usize;

/// One op. Its output is the value with the node's index.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// Rows of the (frozen) embedding table: no gradient flows past it.
    Embed,
    /// `x · Wᵀ`, `W` frozen or a parameter.
    /// `mask`: the dropout's factor of each input (0 or `1 / (1 - p)`), when it applied.
    Matmul {
        w: TapeWeight,
        x: ValueId,
        mask: Option<Vec<f64>>,
    },
    /// `x + bias` (a frozen bias).
    AddBias { x: ValueId },
    /// RMS norm of every `norm.n` values, with an optional frozen gain.
    RmsNorm {
        x: ValueId,
        norm: RmsNorm,
        gain: Option<TapeWeight>,
    },
    /// Rotary embedding at the step's positions, with the kernel's f32 frequencies.
    Rope {
        x: ValueId,
        rope: Rope,
        positions: Vec<u32>,
        freqs: Vec<f32>,
    },
    /// Causal attention within the step (no KV cache); `start[i]`: the first row of row
    /// `i`'s sequence.
    Attention {
        q: ValueId,
        k: ValueId,
        v: ValueId,
        attn: TrainAttention,
        start: Vec<u32>,
    },
    /// `act(gate) * up`.
    Glu {
        gate: ValueId,
        up: ValueId,
        act: Activation,
    },
    /// `a + b`.
    Add { a: ValueId, b: ValueId },
    /// `x * s`.
    Scale { x: ValueId, s: f64 },
    /// `cap * tanh(x / cap)`.
    Softcap { x: ValueId, cap: f64 },
    /// Rows `start..start + len` of `x`.
    Rows { x: ValueId, start: usize },
}
