//! The tests `rullama bench` runs, as llama-bench lists them: every depth (`-d`) in the order
//! given, and at each depth every prompt size (`-p`) as a prefill test, then every
//! generation size (`-n`) as a decode test; a size of 0 is left out.

use rullama_model::validate::MAX_CTX;

use crate::commands::CliError;

/// Prefill (`ppN`) or decode (`tgN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Prefill,
    Decode,
}

impl Kind {
    /// The name the JSON report gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Prefill => "prefill",
            Kind::Decode => "decode",
        }
    }
}

/// One test: `n_tokens` prompt tokens in one block, or that many decode steps, after `depth`
/// positions already in the KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Test {
    pub kind: Kind,
    pub n_tokens: usize,
    pub depth: usize,
}

impl Test {
    /// llama-bench's name: `pp512`, `tg128`, with ` @ d4096` at a depth.
    pub fn name(&self) -> String {
        let prefix = match self.kind {
            Kind::Prefill => "pp",
            Kind::Decode => "tg",
        };
        match self.depth {
            0 => format!("{prefix}{}", self.n_tokens),
            d => format!("{prefix}{} @ d{d}", self.n_tokens),
        }
    }

    /// The KV cache positions it fills: its depth and its tokens; `None` past `usize`.
    pub fn positions(&self) -> Option<usize> {
        self.depth.checked_add(self.n_tokens)
    }
}

/// The tests of the lists, in llama-bench's order.
pub fn tests(prompts: &[usize], gens: &[usize], depths: &[usize]) -> Vec<Test> {
    let mut tests = Vec::new();
    for &depth in depths {
        for (kind, sizes) in [(Kind::Prefill, prompts), (Kind::Decode, gens)] {
            tests.extend(sizes.iter().filter(|&&n| n > 0).map(|&n_tokens| Test {
                kind,
                n_tokens,
                depth,
            }));
        }
    }
    tests
}

/// The KV cache positions the tests need: the most any of them fills; an error naming the
/// test whose depth and tokens no context holds.
pub fn positions_needed(tests: &[Test]) -> Result<usize, CliError> {
    let mut needed = 0;
    for t in tests {
        let positions = t.positions().filter(|&p| p <= MAX_CTX).ok_or_else(|| {
            let what = match t.depth {
                0 => format!("{} tokens", t.n_tokens),
                d => format!("-d {d} + {} tokens", t.n_tokens),
            };
            CliError::Usage(format!(
                "{} needs {what}: more than a context holds ({MAX_CTX})",
                t.name()
            ))
        })?;
        needed = needed.max(positions);
    }
    Ok(needed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_depth_runs_the_prompts_then_the_generations() {
        let names: Vec<String> = tests(&[16, 0, 32], &[4], &[0, 8])
            .iter()
            .map(Test::name)
            .collect();
        assert_eq!(
            names,
            ["pp16", "pp32", "tg4", "pp16 @ d8", "pp32 @ d8", "tg4 @ d8"]
        );
        assert!(tests(&[0], &[0], &[0, 8]).is_empty());
    }

    #[test]
    fn the_deepest_test_sets_the_positions() {
        let t = tests(&[16, 32], &[64], &[0, 8]);
        assert_eq!(positions_needed(&t).unwrap(), 72);
        let over = tests(&[usize::MAX], &[], &[1]);
        let err = positions_needed(&over).unwrap_err().to_string();
        let says = format!("-d 1 + {} tokens: more than a context holds", usize::MAX);
        assert!(err.contains(&says), "{err}");
        let past = tests(&[MAX_CTX], &[], &[1]);
        assert!(positions_needed(&past).is_err());
        assert_eq!(
            positions_needed(&tests(&[MAX_CTX], &[], &[0])).unwrap(),
            MAX_CTX
        );
    }
}
