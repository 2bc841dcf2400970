//! The SPIR-V step of `cargo xtask wgsl`: every validated program written out by naga's
//! SPIR-V backend the way wgpu's Vulkan backend does when it builds a pipeline (overrides at
//! their defaults, `Restrict` bounds checks, SPIR-V 1.6, every capability offered), so a
//! construct naga validates but cannot lower (the cooperative matrices of the tensor-core
//! matmul, say) fails here and not first on a GPU that has the feature.
//!
//! `spirv-val` is not run: Debian's (2023.1) predates SPV_KHR_cooperative_matrix, and newer
//! ones (2025.5) reject the ArrayStride naga puts on every array, workgroup and function
//! arrays included (VUID-StandaloneSpirv-None-10684, on every kernel, which drivers accept).
//! With those decorations removed by hand, 2025.5 accepts the tensor-core programs for
//! Vulkan 1.3 (checked 2026-11-24).

use naga::back::spv;
use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy};

/// The SPIR-V words of `module`'s entry point `entry`, or naga's error (a panic of its writer,
/// as naga 30 has for some valid modules, is caught and returned as an error too).
pub fn write(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    entry: &str,
) -> Result<Vec<u32>, String> {
    let stage = naga::ShaderStage::Compute;
    let (module, info) = naga::back::pipeline_constants::process_overrides(
        module,
        info,
        Some((stage, entry)),
        &Default::default(),
    )
    .map_err(|e| format!("overrides: {e}"))?;
    let options = spv::Options {
        lang_version: (1, 6),
        bounds_check_policies: BoundsCheckPolicies {
            index: BoundsCheckPolicy::Restrict,
            buffer: BoundsCheckPolicy::Restrict,
            image_load: BoundsCheckPolicy::Restrict,
            binding_array: BoundsCheckPolicy::Unchecked,
        },
        ..spv::Options::default()
    };
    let pipeline = spv::PipelineOptions {
        shader_stage: stage,
        entry_point: entry.to_string(),
    };
    let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        spv::write_vec(&module, &info, &options, Some(&pipeline))
    }));
    match written {
        Ok(r) => r.map_err(|e| format!("{e}")),
        Err(panic) => Err(format!(
            "naga's SPIR-V writer panicked: {}",
            panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)")
        )),
    }
}
