//! The CLI's side of input validation. The ranges live in `rullama_model::validate` (one
//! check for every front end); here each value is named as the flag that sets it, and the
//! checks that only warn (a context past the training context, more threads than cores)
//! speak on stderr.

use rullama_model::ModelConfig;
use rullama_model::validate::Param;

/// The flag that sets `param` (`run`, `chat`, `bench` and `perplexity` spell them alike).
pub fn flag(param: Param) -> &'static str {
    match param {
        Param::Temperature => "--temp",
        Param::TopK => "--top-k",
        Param::TopP => "--top-p",
        Param::MinP => "--min-p",
        Param::TypicalP => "--typical-p",
        Param::TopNSigma => "--top-n-sigma",
        Param::RepeatPenalty => "--repeat-penalty",
        Param::FrequencyPenalty => "--frequency-penalty",
        Param::PresencePenalty => "--presence-penalty",
        Param::XtcProbability => "--xtc-probability",
        Param::XtcThreshold => "--xtc-threshold",
        Param::Context => "--ctx",
    }
}

/// Warns when a context of `ctx` positions is longer than the model was trained with: it
/// runs (as llama.cpp's does), but positions past the training context are ones the model
/// never saw, and its text there degrades.
pub fn warn_beyond_training(config: &ModelConfig, ctx: usize) {
    if ctx > config.n_ctx_train {
        eprintln!(
            "warning: --ctx {ctx} is longer than the {} positions the model was trained with; \
             text past them may degrade",
            config.n_ctx_train
        );
    }
}

/// Warns when `--threads` asks for more threads than the machine has cores: they only take
/// turns on the cores, and each matrix product then waits for the slowest (measured 36x
/// slower at 1000 threads).
pub fn warn_threads(threads: usize) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads > cores {
        eprintln!(
            "warning: --threads {threads} is more than the {cores} cores here; \
             threads beyond them only take turns (slower, not faster)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value the model crate can reject has a flag spelled as clap spells it.
    #[test]
    fn every_param_has_a_flag() {
        for param in Param::ALL {
            let f = flag(param);
            assert!(f.starts_with("--") && !f.contains('_'), "{param:?}: {f}");
        }
    }
}
