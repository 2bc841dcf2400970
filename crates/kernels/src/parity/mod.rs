//! Kernel parity checks as data: each [`Check`] draws random shapes and inputs, runs its
//! kernel on a GPU and compares with the kernel's CPU reference (f64) against a stated bound.
//! Each op module declares its checks beside the op (its kernel family's
//! [`crate::KernelFamily::checks`]); this module holds what they share (the comparison,
//! random data) and the registry, [`checks`]. All of it is compiled only with the `parity`
//! feature and in the crate's own tests. The unit tests run each check for a few cases on
//! lavapipe; `cargo xtask parity --kernels` and the kernels bench (`RULLAMA_BENCH_PARITY`)
//! run every check for more cases on any adapter.

pub mod data;

use std::fmt;

use crate::device::Gpu;
use crate::error::GpuError;
use crate::op::Op;
use crate::readback::Readback;
use crate::step::StepBuilder;
use crate::tensor::GpuTensor;
use data::Rng;

/// Errors of one comparison, or of many (the worst of each kind is kept).
#[derive(Debug, Clone, Default)]
pub struct Compare {
    /// Elements compared.
    pub n: usize,
    /// Largest |gpu - ref|.
    pub max_abs: f64,
    /// Largest |gpu - ref| / bound (the check passes while this is <= 1).
    pub max_ratio: f64,
    /// Where the largest ratio occurred, with its values.
    pub worst: String,
}

impl Compare {
    /// Records one element: `got` from the GPU, `want` from the reference, `bound` the
    /// tolerance for it; `at` names it (called only when it becomes the worst).
    pub fn add(&mut self, got: f64, want: f64, bound: f64, at: impl FnOnce() -> String) {
        self.n += 1;
        let err = (got - want).abs();
        let ratio = if err == 0.0 {
            0.0
        } else if err.is_nan() || bound <= 0.0 {
            f64::INFINITY
        } else {
            err / bound
        };
        if err > self.max_abs || err.is_nan() {
            self.max_abs = if err.is_nan() { f64::INFINITY } else { err };
        }
        if ratio > self.max_ratio || (self.worst.is_empty() && ratio.is_infinite()) {
            self.max_ratio = ratio;
            self.worst = format!("{}: gpu {got:e} ref {want:e} bound {bound:e}", at());
        }
    }

    /// Exact comparison (bound 0: any difference fails).
    pub fn exact(&mut self, got: f64, want: f64, at: impl FnOnce() -> String) {
        self.add(got, want, 0.0, at);
    }

    fn merge(&mut self, other: Compare, case: usize) {
        self.n += other.n;
        self.max_abs = self.max_abs.max(other.max_abs);
        if other.max_ratio > self.max_ratio || (self.worst.is_empty() && !other.worst.is_empty()) {
            self.max_ratio = other.max_ratio;
            self.worst = format!("case {case}: {}", other.worst);
        }
    }
}

/// One random case of a check: draws its shape from `rng`, runs, compares. A case that needs
/// a device feature the adapter lacks returns [`GpuError::MissingFeature`]: the check is then
/// skipped on that adapter (and says so), not failed.
pub type CaseFn = fn(&Gpu, &mut Rng) -> Result<Compare, GpuError>;

/// A kernel's parity check.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    /// The kernel (or fused path) it checks.
    pub name: &'static str,
    /// The bound, in words (with its reason in the kernel's file and docs/KERNELS.md).
    pub tolerance: &'static str,
    /// One random case.
    pub case: CaseFn,
}

/// The outcome of running a check for some cases.
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// The check's name.
    pub name: &'static str,
    /// Its bound, in words.
    pub tolerance: &'static str,
    /// Cases run.
    pub cases: usize,
    /// Cases whose worst ratio exceeded 1 (or that failed to run).
    pub failures: usize,
    /// The worst errors over every case.
    pub errors: Compare,
    /// The first error raised by the GPU layer, if any.
    pub error: Option<String>,
    /// Why the check did not run on this adapter (a feature it lacks), if it did not.
    pub skipped: Option<&'static str>,
}

impl CheckResult {
    /// No case failed (true for a skipped check: see [`CheckResult::skipped`]).
    pub fn passed(&self) -> bool {
        self.failures == 0
    }
}

impl fmt::Display for CheckResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(what) = self.skipped {
            return write!(f, "{}: skipped, this adapter lacks {what}", self.name);
        }
        write!(
            f,
            "{}: {}/{} cases failed, max abs {:.3e}, max err/bound {:.3} (tolerance {}); worst {}",
            self.name,
            self.failures,
            self.cases,
            self.errors.max_abs,
            self.errors.max_ratio,
            self.tolerance,
            self.errors.worst
        )?;
        if let Some(e) = &self.error {
            write!(f, "; error: {e}")?;
        }
        Ok(())
    }
}

impl Check {
    /// Runs `cases` random cases; case `i` draws from `Rng::new(seed + i)`, so a failing case
    /// is replayed by its index.
    pub fn run(&self, gpu: &Gpu, cases: usize, seed: u64) -> CheckResult {
        let mut errors = Compare::default();
        let mut failures = 0;
        let mut error = None;
        let mut skipped = None;
        let mut ran = cases;
        for i in 0..cases {
            let mut rng = Rng::new(seed.wrapping_add(i as u64));
            match (self.case)(gpu, &mut rng) {
                Ok(c) => {
                    if c.max_ratio > 1.0 {
                        failures += 1;
                    }
                    errors.merge(c, i);
                }
                Err(GpuError::MissingFeature(what)) => {
                    skipped = Some(what);
                    ran = i;
                    break;
                }
                Err(e) => {
                    failures += 1;
                    error.get_or_insert_with(|| format!("case {i}: {e}"));
                }
            }
        }
        CheckResult {
            name: self.name,
            tolerance: self.tolerance,
            cases: ran,
            failures,
            errors,
            error,
            skipped,
        }
    }
}

/// Every kernel's parity checks: each family's ([`crate::KernelFamily::checks`]), family by
/// family.
#[cfg(any(test, feature = "parity"))]
pub fn checks() -> Vec<Check> {
    crate::Kernel::checks_by_family()
        .into_iter()
        .flat_map(|(_, checks)| checks)
        .collect()
}

/// Builds `ops` into a step, runs it once and reads `n` elements of `t` from `offset`.
pub(crate) fn run_read<T: bytemuck::Pod + Default>(
    gpu: &Gpu,
    ops: Vec<Op>,
    t: &GpuTensor,
    offset: usize,
    n: usize,
) -> Result<Vec<T>, GpuError> {
    let mut b = StepBuilder::new();
    b.extend(ops);
    let mut step = b.build(gpu);
    let mut out = vec![T::default(); n];
    Readback::new(gpu, (n * 4) as u64).run_and_read(gpu, &mut step, t, offset, &mut out)?;
    Ok(out)
}

/// `u = 2^-24`, the unit roundoff of f32.
pub const U: f64 = 1.0 / 16_777_216.0;
