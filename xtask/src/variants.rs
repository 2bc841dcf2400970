//! The variants' step of `cargo xtask wgsl`: every program under the override constants each
//! kernel variant builds it with, as the device builds it.
//!
//! A program's WGSL defaults are not what runs: the host sets override constants per variant
//! (a matmul tile's `TM`, `TN`, `BK`, `STAGES`; an attention's `HD`) and per pipeline key
//! (`WG`, the matvec's `QUADS` and `PARTS`), and those size workgroup arrays. So for every
//! distinct (program, constants) of [`Kernel::all`]'s pipeline keys, the constants come from
//! [`PipelineKey::constants`] (what `Gpu::pipeline` hands wgpu), naga processes the overrides
//! for the program's entry point as wgpu's Vulkan backend does (which revalidates the module
//! and refuses a constant the program does not declare), and the workgroup variables the
//! entry point reaches must fit in [`MAX_WORKGROUP_BYTES`].

use std::fmt;

use naga::back::pipeline_constants::{PipelineConstantError, process_overrides};
use rullama_kernels::{Kernel, PipelineKey};

/// The most workgroup memory a program may use: the 48 KB NVIDIA's Vulkan driver reports (an
/// attention variant of 53.5 KB hung the H100 instead of failing: docs/PERF.md, X-kv-staging;
/// wgpu does not count override-sized arrays against the limit).
pub const MAX_WORKGROUP_BYTES: u64 = 48 * 1024;

/// One build of a program: the override constants it is built with, and the first kernel
/// variant built so (for errors).
#[derive(Debug, Clone)]
pub struct Variant {
    /// The kernel; `None` for the bench's program, built outside the kernel table.
    pub kernel: Option<Kernel>,
    /// As handed to wgpu, in order (a later value of a name replaces an earlier one).
    pub constants: Vec<(&'static str, f64)>,
}

impl Variant {
    /// The build of `key`'s pipeline.
    pub fn of(key: PipelineKey) -> Variant {
        Variant {
            kernel: Some(key.kernel),
            constants: key.constants(),
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kernel {
            Some(k) => write!(f, "kernel {k:?}")?,
            None if self.constants.is_empty() => write!(f, "its defaults")?,
            None => write!(f, "no kernel")?,
        }
        for (i, (name, value)) in self.constants.iter().enumerate() {
            let sep = if i == 0 { " with " } else { ", " };
            write!(f, "{sep}{name} = {value}")?;
        }
        Ok(())
    }
}

/// Why a program fails under a variant's constants.
#[derive(Debug)]
pub enum Error {
    /// naga refused the constants or the module they make (a validation error keeps its span).
    Overrides(Box<PipelineConstantError>),
    /// The workgroup variables take this many bytes, over [`MAX_WORKGROUP_BYTES`].
    WorkgroupMemory(u64),
    /// naga could not lay out a type.
    Layout(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Overrides(e) => write!(f, "{}", crate::wgsl::chain(e)),
            Error::WorkgroupMemory(bytes) => write!(
                f,
                "{bytes} bytes of workgroup memory, over {MAX_WORKGROUP_BYTES}"
            ),
            Error::Layout(e) => write!(f, "{e}"),
        }
    }
}

/// The distinct builds among `variants`, in order: two with the same constants build the same
/// pipeline, so only the first is checked.
pub fn distinct(variants: impl IntoIterator<Item = Variant>) -> Vec<Variant> {
    let mut out: Vec<Variant> = Vec::new();
    for v in variants {
        if !out.iter().any(|o| o.constants == v.constants) {
            out.push(v);
        }
    }
    out
}

/// `module` (valid, as parsed) with `variant`'s constants for entry point `entry`: naga's
/// processing succeeds and the entry point's workgroup variables fit.
pub fn check(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    entry: &str,
    variant: &Variant,
) -> Result<(), Error> {
    let constants: naga::back::PipelineConstants = variant
        .constants
        .iter()
        .map(|&(name, value)| (name.to_string(), value))
        .collect();
    let (module, _) = process_overrides(
        module,
        info,
        Some((naga::ShaderStage::Compute, entry)),
        &constants,
    )
    .map_err(|e| Error::Overrides(Box::new(e)))?;
    let mut layouter = naga::proc::Layouter::default();
    layouter
        .update(module.to_ctx())
        .map_err(|e| Error::Layout(e.to_string()))?;
    // Processing kept only what the entry point reaches, as the driver sees it.
    let bytes: u64 = module
        .global_variables
        .iter()
        .filter(|(_, v)| v.space == naga::AddressSpace::WorkGroup)
        .map(|(_, v)| u64::from(layouter[v.ty].size))
        .sum();
    if bytes > MAX_WORKGROUP_BYTES {
        return Err(Error::WorkgroupMemory(bytes));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use naga::valid::{Capabilities, ValidationFlags, Validator};

    use super::*;

    /// A program whose workgroup array the override `ROWS` sizes: 4 KB a row, 8 rows (32 KB)
    /// by default.
    const SOURCE: &str = "
override WG: u32 = 64u;
override ROWS: u32 = 8u;
var<workgroup> tile: array<vec4<f32>, ROWS * 256u>;
@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) i: u32) {
    tile[i] = vec4<f32>(f32(i));
}
";

    fn check_with(constants: Vec<(&'static str, f64)>) -> Result<(), Error> {
        let module = naga::front::wgsl::parse_str(SOURCE).unwrap();
        let info = Validator::new(ValidationFlags::all(), Capabilities::default())
            .validate(&module)
            .unwrap();
        let variant = Variant {
            kernel: None,
            constants,
        };
        check(&module, &info, "main", &variant)
    }

    /// The constants a variant sets, not the defaults, decide its workgroup memory: 12 rows
    /// are exactly 48 KB, 13 are over.
    #[test]
    fn workgroup_memory_is_the_variants() {
        assert!(check_with(vec![("WG", 256.0)]).is_ok());
        assert!(check_with(vec![("WG", 256.0), ("ROWS", 12.0)]).is_ok());
        let over = check_with(vec![("WG", 256.0), ("ROWS", 13.0)]);
        assert!(
            matches!(over, Err(Error::WorkgroupMemory(53_248))),
            "{over:?}"
        );
    }

    /// A constant the program does not declare fails, as it fails pipeline creation.
    #[test]
    fn undeclared_constant_fails() {
        let e = check_with(vec![("WG", 256.0), ("QUADS", 2.0)]);
        let Err(Error::Overrides(o)) = &e else {
            panic!("{e:?}");
        };
        assert!(
            matches!(&**o, PipelineConstantError::NotFound(n) if n == "QUADS"),
            "{o:?}"
        );
    }

    /// The dedupe keeps the first variant of each set of constants.
    #[test]
    fn distinct_keeps_first_of_each() {
        let v = |c: f64| Variant {
            kernel: None,
            constants: vec![("WG", c)],
        };
        let d = distinct([v(64.0), v(128.0), v(64.0)]);
        let wgs: Vec<f64> = d.iter().map(|v| v.constants[0].1).collect();
        assert_eq!(wgs, [64.0, 128.0]);
    }

    /// An error names the kernel variant and the constants it was checked with.
    #[test]
    fn variant_names_kernel_and_constants() {
        let kernel = Kernel::all()[0];
        let v = Variant::of(PipelineKey::new(kernel, 64));
        let text = v.to_string();
        assert!(
            text.starts_with(&format!("kernel {kernel:?} with ")),
            "{text}"
        );
        assert!(text.ends_with("WG = 64"), "{text}");
        let bench = Variant {
            kernel: None,
            constants: Vec::new(),
        };
        assert_eq!(bench.to_string(), "its defaults");
    }
}
