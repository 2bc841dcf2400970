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
//! Vulkan 1.3.

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

#[cfg(test)]
mod tests {
    /// attention/attention.wgsl's merge relies on naga lowering `storageBarrier()` to a
    /// control barrier with *device* memory scope and acquire-release semantics (WGSL only
    /// promises workgroup scope): its workgroups publish records to the last one through it.
    /// This pins that lowering, so a naga that narrows it fails here, not as a wrong merge
    /// on some GPU.
    #[test]
    fn storage_barrier_has_device_scope() {
        let src = "@group(0) @binding(0) var<storage, read_write> a: array<atomic<u32>>;
            @compute @workgroup_size(64) fn main() { atomicStore(&a[0], 1u); storageBarrier(); }";
        let module = naga::front::wgsl::parse_str(src).unwrap();
        let info = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::default(),
        )
        .validate(&module)
        .unwrap();
        let words = super::write(&module, &info, "main").unwrap();
        // (result id -> value) of every OpConstant, then the scopes of every OpControlBarrier.
        let (mut constants, mut barriers) = (std::collections::HashMap::new(), Vec::new());
        let mut i = 5;
        while i < words.len() {
            let (count, opcode) = ((words[i] >> 16) as usize, words[i] & 0xffff);
            match opcode {
                43 if count == 4 => {
                    constants.insert(words[i + 2], words[i + 3]);
                }
                224 => barriers.push((words[i + 1], words[i + 2], words[i + 3])),
                _ => {}
            }
            i += count.max(1);
        }
        let (workgroup, device) = (2, 1);
        let acquire_release_uniform = 0x8 | 0x40;
        assert_eq!(barriers.len(), 1, "{barriers:?}");
        let (exec, memory, semantics) = barriers[0];
        assert_eq!(constants[&exec], workgroup);
        assert_eq!(constants[&memory], device);
        assert_eq!(
            constants[&semantics] & acquire_release_uniform,
            acquire_release_uniform
        );
    }
}
