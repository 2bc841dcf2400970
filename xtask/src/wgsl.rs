//! `cargo xtask wgsl`: validate every WGSL program with naga and check its bindings.
//!
//! The program table lives in `rullama_kernels::shader` (the same table the crate builds its
//! pipelines from). For each program the files are read from disk under `shaders/`,
//! concatenated as the crate does, parsed and validated with naga (errors reported as
//! `shaders/<file>:<line>:<column>`), and then:
//! - the globals its entry point uses must be exactly the bindings the Rust side binds
//!   (group 0, binding i, uniform / storage read / storage read-write);
//! - the uniform parameter struct must have the size of the Rust `#[repr(C)]` struct;
//! - naga's SPIR-V backend must write it as wgpu's Vulkan backend would (`spirv.rs`);
//! - under the override constants of every kernel variant that builds it, it must still
//!   validate and its workgroup memory fit in 48 KB (`variants.rs`).
//!
//! A program many variants share (the same name: the same files) is parsed once. Every `.wgsl`
//! file under `shaders/` must belong to some program, so none goes unchecked.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use naga::back::pipeline_constants::PipelineConstantError;
use naga::valid::{Capabilities, SubgroupOperationSet, ValidationFlags, Validator};
use rullama_kernels::Kernel;
use rullama_kernels::shader::{BindingKind, Program, bound, coop_peak_program};

use crate::spirv;
use crate::variants::{self, Variant};

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
    let programs = builds()?;

    let used: BTreeSet<&str> = programs
        .iter()
        .flat_map(|(p, _)| p.files.iter().map(|f| f.path))
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

    for (program, variants) in &programs {
        if let Err(e) = check_program(&shaders, program, variants) {
            errors.push(e);
        }
    }
    println!(
        "wgsl: {} programs from {} files checked (naga validation, bindings, SPIR-V), and under \
         {} sets of their variants' override constants (validation, workgroup memory)",
        programs.len(),
        on_disk.len(),
        programs.iter().map(|(_, v)| v.len()).sum::<usize>()
    );
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// Every program the crate can build, once each, with the distinct builds of it: the kernel
/// table's programs under each of their variants' pipeline keys, and the bench's
/// ([`coop_peak_program`]) under its defaults.
fn builds() -> Result<Vec<(Program, Vec<Variant>)>, String> {
    let mut builds: Vec<(Program, Vec<Variant>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for kernel in Kernel::all() {
        let variants: Vec<Variant> = kernel
            .pipeline_keys()
            .into_iter()
            .map(Variant::of)
            .collect();
        for program in kernel.programs() {
            let i = *index.entry(program.name.clone()).or_insert_with(|| {
                builds.push((program.clone(), Vec::new()));
                builds.len() - 1
            });
            let first = &builds[i].0;
            let paths = |p: &Program| p.files.iter().map(|f| f.path).collect::<Vec<_>>();
            if paths(first) != paths(&program) || first.entry != program.entry {
                return Err(format!(
                    "two programs named {} differ ({:?} and {:?}): a program's name must \
                     name its files",
                    program.name,
                    paths(first),
                    paths(&program)
                ));
            }
            builds[i].1.extend(variants.iter().cloned());
        }
    }
    let bench = Variant {
        kernel: None,
        constants: Vec::new(),
    };
    builds.push((coop_peak_program(), vec![bench]));
    Ok(builds
        .into_iter()
        .map(|(p, v)| (p, variants::distinct(v)))
        .collect())
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
pub fn chain(e: &dyn std::error::Error) -> String {
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

fn check_program(shaders: &Path, program: &Program, variants: &[Variant]) -> Result<(), String> {
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
    check_variants(program, &source, &module, &info, variants)
}

/// The program under each of `variants`' constants ([`variants::check`]), every failure named
/// with its variant (and, for a validation error, its place in the source).
fn check_variants(
    program: &Program,
    source: &str,
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    variants: &[Variant],
) -> Result<(), String> {
    let errors: Vec<String> = variants
        .iter()
        .filter_map(|v| {
            let e = variants::check(module, info, program.entry, v).err()?;
            let place = match &e {
                variants::Error::Overrides(o) => match &**o {
                    PipelineConstantError::ValidationError(e) => e
                        .spans()
                        .next()
                        .map(|(span, _)| format!("{}: ", at(program, span.location(source)))),
                    _ => None,
                },
                _ => None,
            };
            let name = &program.name;
            Some(format!(
                "{}program {name}, {v}: {e}",
                place.unwrap_or_default()
            ))
        })
        .collect();
    match errors.is_empty() {
        true => Ok(()),
        false => Err(errors.join("\n")),
    }
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
