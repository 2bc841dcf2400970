//! `cargo xtask wgsl`: validate every WGSL program with naga and check its bindings.
//!
//! The program table lives in `rullama_kernels::shader` (the same table the crate builds its
//! pipelines from). For each program the files are read from disk under `shaders/`,
//! concatenated as the crate does, parsed and validated with naga (errors reported as
//! `shaders/<file>:<line>:<column>`), and then:
//! - the globals its entry point uses must be exactly the bindings the Rust side binds
//!   (group 0, binding i, uniform / storage read / storage read-write);
//! - the uniform parameter struct must have the size of the Rust `#[repr(C)]` struct;
//! - naga's SPIR-V backend must write it as wgpu's Vulkan backend would (`spirv.rs`).
//!
//! Every `.wgsl` file under `shaders/` must belong to some program, so none goes unchecked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use naga::valid::{Capabilities, SubgroupOperationSet, ValidationFlags, Validator};
use rullama_kernels::shader::{BindingKind, Program, all_programs, bound};

use crate::spirv;

/// Capabilities a device may give the kernels: the crate requests SHADER_F16, SUBGROUP and
/// (for the tensor-core matmul) EXPERIMENTAL_COOPERATIVE_MATRIX; `pack/unpack2x16float` (f16
/// in f32) is there on every Vulkan, Metal and DX12 device. A program that needs one a
/// device lacks is never built there (`Kernel::program_for`, `Matmul::kernel`).
fn capabilities() -> Capabilities {
    Capabilities::default()
        | Capabilities::SHADER_FLOAT16
        | Capabilities::SHADER_FLOAT16_IN_FLOAT32
        | Capabilities::SUBGROUP
        | Capabilities::SUBGROUP_BARRIER
        | Capabilities::COOPERATIVE_MATRIX
}

pub fn run(repo_root: &Path) -> Result<(), String> {
    let shaders = repo_root.join("shaders");
    let mut errors = Vec::new();
    let programs = all_programs();

    let used: BTreeSet<&str> = programs
        .iter()
        .flat_map(|p| p.files.iter().map(|f| f.path))
        .collect();
    let mut on_disk = Vec::new();
    walk(&shaders, &mut on_disk).map_err(|e| format!("reading {}: {e}", shaders.display()))?;
    for path in &on_disk {
        let rel = path
            .strip_prefix(&shaders)
            .unwrap_or(path)
            .to_string_lossy()
            .replace('\\', "/");
        if !used.contains(rel.as_str()) {
            errors.push(format!(
                "shaders/{rel}: not part of any program in rullama_kernels::shader"
            ));
        }
    }

    for program in &programs {
        if let Err(e) = check_program(&shaders, program) {
            errors.push(e);
        }
    }
    println!(
        "wgsl: {} programs from {} files checked (naga validation, bindings, workgroup memory, SPIR-V)",
        programs.len(),
        on_disk.len()
    );
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "wgsl") {
            out.push(path);
        }
    }
    out.sort();
    Ok(())
}

/// Reads the program's files from disk, in order, as the crate concatenates them.
fn source_from_disk(shaders: &Path, program: &Program) -> Result<String, String> {
    let mut s = String::new();
    for f in &program.files {
        let text = std::fs::read_to_string(shaders.join(f.path))
            .map_err(|e| format!("shaders/{}: {e}", f.path))?;
        if text != f.source {
            return Err(format!(
                "shaders/{}: differs from the copy compiled into rullama-kernels (rebuild)",
                f.path
            ));
        }
        s.push_str(&text);
        if !text.ends_with('\n') {
            s.push('\n');
        }
    }
    Ok(s)
}

/// An error and its sources, joined by ": ".
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut next = e.source();
    while let Some(inner) = next {
        s.push_str(&format!(": {inner}"));
        next = inner.source();
    }
    s
}

fn at(program: &Program, loc: naga::SourceLocation) -> String {
    let (file, line) = program.locate(loc.line_number as usize);
    format!("shaders/{file}:{line}:{}", loc.line_position)
}

/// In a program with cooperative matrices, every workgroup variable a multiple of 16 bytes.
/// A coop load or store needs a 16-byte-aligned address and WGSL cannot align a workgroup
/// variable: the driver places them, and on the H100 two `u32`s declared beside the tiles left
/// the f16 tiles 8 bytes off (the loads then read 4 columns early; docs/KERNELS.md, "The
/// tensor-core prompt attention"). With every variable a multiple of 16 bytes, no packing
/// order can misalign one.
fn check_coop_tiles(module: &naga::Module, name: &str) -> Result<(), String> {
    let coop = module
        .types
        .iter()
        .any(|(_, t)| matches!(t.inner, naga::TypeInner::CooperativeMatrix { .. }));
    if !coop {
        return Ok(());
    }
    let mut layouter = naga::proc::Layouter::default();
    layouter
        .update(module.to_ctx())
        .map_err(|e| format!("program {name}: {e}"))?;
    for (_, var) in module.global_variables.iter() {
        let size = layouter[var.ty].size;
        if var.space == naga::AddressSpace::WorkGroup && size % 16 != 0 {
            return Err(format!(
                "program {name}: workgroup variable {} is {size} bytes, not a multiple of 16 \
                 (it may leave a cooperative-matrix tile misaligned)",
                var.name.as_deref().unwrap_or("?")
            ));
        }
    }
    Ok(())
}

/// The most workgroup memory a program may use: the 48 KB NVIDIA's Vulkan driver reports (an
/// attention variant of 53.5 KB hung the H100 instead of failing: docs/PERF.md, X-kv-staging;
/// wgpu does not count override-sized arrays against the limit).
const MAX_WORKGROUP_BYTES: u64 = 48 * 1024;

/// Overrides at the largest values the kernels are built with (a workgroup of 256 invocations,
/// head dimension 256), where a program declares them: the arrays they size at their largest.
const LARGEST_OVERRIDES: [(&str, f64); 2] = [("WG", 256.0), ("HD", 256.0)];

/// The program's workgroup variables, with its overrides at [`LARGEST_OVERRIDES`], fit in
/// [`MAX_WORKGROUP_BYTES`].
fn check_workgroup_memory(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    name: &str,
) -> Result<(), String> {
    let mut constants = naga::back::PipelineConstants::default();
    for (_, o) in module.overrides.iter() {
        if let Some(&(key, value)) = LARGEST_OVERRIDES
            .iter()
            .find(|(key, _)| o.name.as_deref() == Some(*key))
        {
            constants.insert(key.to_string(), value);
        }
    }
    let (module, _) =
        naga::back::pipeline_constants::process_overrides(module, info, None, &constants)
            .map_err(|e| format!("program {name}: overrides {constants:?}: {e}"))?;
    let mut layouter = naga::proc::Layouter::default();
    layouter
        .update(module.to_ctx())
        .map_err(|e| format!("program {name}: {e}"))?;
    let bytes: u64 = module
        .global_variables
        .iter()
        .filter(|(_, v)| v.space == naga::AddressSpace::WorkGroup)
        .map(|(_, v)| u64::from(layouter[v.ty].size))
        .sum();
    if bytes > MAX_WORKGROUP_BYTES {
        return Err(format!(
            "program {name}: {bytes} bytes of workgroup memory with {constants:?}, over \
             {MAX_WORKGROUP_BYTES}"
        ));
    }
    Ok(())
}

fn check_program(shaders: &Path, program: &Program) -> Result<(), String> {
    let source = source_from_disk(shaders, program)?;
    let name = &program.name;
    let module = naga::front::wgsl::parse_str(&source).map_err(|e| {
        let place = e
            .location(&source)
            .map_or_else(|| format!("program {name}"), |l| at(program, l));
        format!("{place}: {} (program {name})", e.message())
    })?;
    let info = Validator::new(ValidationFlags::all(), capabilities())
        .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
        .subgroup_operations(SubgroupOperationSet::all())
        .validate(&module)
        .map_err(|e| {
            let place = e.spans().next().map_or_else(
                || format!("program {name}"),
                |(span, _)| at(program, span.location(&source)),
            );
            format!("{place}: {} (program {name})", chain(e.as_inner()))
        })?;
    check_coop_tiles(&module, name)?;
    check_workgroup_memory(&module, &info, name)?;
    let index = module
        .entry_points
        .iter()
        .position(|ep| ep.name == program.entry)
        .ok_or_else(|| format!("program {name}: no entry point {:?}", program.entry))?;
    let ep_info = info.get_entry_point(index);

    let mut found = Vec::new();
    let mut params_size = None;
    for (handle, var) in module.global_variables.iter() {
        let Some(rb) = &var.binding else {
            continue;
        };
        let used = !ep_info[handle].is_empty();
        let kind = match var.space {
            naga::AddressSpace::Uniform => {
                let mut layouter = naga::proc::Layouter::default();
                layouter
                    .update(module.to_ctx())
                    .map_err(|e| format!("program {name}: {e}"))?;
                params_size = Some(layouter[var.ty].size as usize);
                BindingKind::Uniform
            }
            naga::AddressSpace::Storage { access }
                if access.contains(naga::StorageAccess::STORE) =>
            {
                BindingKind::StorageReadWrite
            }
            naga::AddressSpace::Storage { .. } => BindingKind::StorageRead,
            other => {
                return Err(format!(
                    "program {name}: binding of unexpected space {other:?}"
                ));
            }
        };
        found.push(((rb.group, rb.binding, kind), used));
    }
    found.sort_by_key(|&((g, b, _), _)| (g, b));
    let expected: Vec<_> = bound(program.bindings).map(|(i, k)| (0, i, k)).collect();
    // Every binding the entry point uses is bound, and everything bound is declared with that
    // kind. A declared binding may go unused: weight kernels bind the chunk both as vec4s and as
    // words, and a format that reads only words leaves the vec4 view unused.
    let used: Vec<_> = found.iter().filter(|f| f.1).map(|f| f.0).collect();
    let declared: Vec<_> = found.iter().map(|f| f.0).collect();
    let bound_ok = used.iter().all(|b| expected.contains(b));
    let declared_ok = expected.iter().all(|b| declared.contains(b));
    if !bound_ok || !declared_ok {
        return Err(format!(
            "program {name} (entry {}): WGSL declares {declared:?} (uses {used:?}), Rust binds {expected:?}",
            program.entry
        ));
    }
    if params_size != Some(program.params_size) {
        return Err(format!(
            "program {name}: WGSL parameter struct is {params_size:?} bytes, Rust's is {}",
            program.params_size
        ));
    }
    spirv::write(&module, &info, program.entry)
        .map_err(|e| format!("program {name}: SPIR-V: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn shaders_validate() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        super::run(&root).unwrap();
    }
    use std::path::Path;
}
