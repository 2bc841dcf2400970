//! The pipeline table: a typed key -> one compute pipeline, built once per device.
//!
//! Pipelines are created when a step is built (load time), never while a step is encoded:
//! a built [`crate::Step`] holds its pipelines by `Arc` and does no lookups at all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::device::Gpu;
use crate::kernel::Kernel;
use crate::shader::BindingKind;

/// What identifies one pipeline: the kernel and the WGSL overrides it is built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    /// The kernel: its program and entry point.
    pub kernel: Kernel,
    /// The `WG` override: invocations per workgroup, at most 256 (a power of two but for the
    /// matvec kernels, whose [`crate::ops::matvec::Lanes`] may take any multiple of their quads).
    pub workgroup_size: u32,
    /// The matvec's `QUADS` override: row quads side by side in a workgroup (1 for every
    /// other kernel, which has no such override).
    pub quads: u32,
    /// The matvec dot file's `PARTS` override, lanes a slice of the row
    /// ([`crate::ops::matvec::Lanes::parts`]); 0: not set (every kernel whose file has no such
    /// override).
    pub parts: u32,
}

impl PipelineKey {
    /// The key of `kernel` with `workgroup_size` invocations a workgroup and the matvec's
    /// overrides unset (`quads` 1, `parts` 0).
    pub fn new(kernel: impl Into<Kernel>, workgroup_size: u32) -> PipelineKey {
        PipelineKey {
            kernel: kernel.into(),
            workgroup_size,
            quads: 1,
            parts: 0,
        }
    }

    /// The WGSL override constants the pipeline is built with: the kernel's own
    /// ([`crate::KernelFamily::constants`]), then the key's `WG`, `QUADS` (where not 1) and
    /// `PARTS` (where set). `cargo xtask wgsl` checks every kernel's programs under the
    /// constants of each of its [`crate::KernelFamily::pipeline_keys`] through this same
    /// function, so what it checks is what the device builds.
    pub fn constants(&self) -> Vec<(&'static str, f64)> {
        let mut constants = self.kernel.constants();
        constants.push(("WG", f64::from(self.workgroup_size)));
        if self.quads != 1 {
            constants.push(("QUADS", f64::from(self.quads)));
        }
        if self.parts != 0 {
            constants.push(("PARTS", f64::from(self.parts)));
        }
        constants
    }
}

/// A bind group layout (shared by every kernel with the same binding kinds) and its pipeline layout.
#[derive(Debug)]
pub(crate) struct Layout {
    pub kinds: &'static [BindingKind],
    pub bind_group: wgpu::BindGroupLayout,
    pub pipeline: wgpu::PipelineLayout,
}

/// One built pipeline.
#[derive(Debug)]
pub(crate) struct Pipeline {
    pub compute: wgpu::ComputePipeline,
    pub layout: Arc<Layout>,
}

#[derive(Debug, Default)]
struct Tables {
    layouts: HashMap<&'static [BindingKind], Arc<Layout>>,
    pipelines: HashMap<PipelineKey, Arc<Pipeline>>,
}

/// Pipelines and layouts of one device, created on first request and kept.
#[derive(Debug, Default)]
pub(crate) struct PipelineTable {
    tables: Mutex<Tables>,
}

fn layout_entry(binding: u32, kind: BindingKind) -> wgpu::BindGroupLayoutEntry {
    let ty = match kind {
        BindingKind::Uniform => wgpu::BufferBindingType::Uniform,
        BindingKind::StorageRead => wgpu::BufferBindingType::Storage { read_only: true },
        BindingKind::StorageReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
        BindingKind::Absent => unreachable!("create_layout leaves absent bindings out"),
    };
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset: kind == BindingKind::Uniform,
            min_binding_size: None,
        },
        count: None,
    }
}

fn create_layout(device: &wgpu::Device, kinds: &'static [BindingKind]) -> Layout {
    let entries: Vec<_> = crate::shader::bound(kinds)
        .map(|(i, k)| layout_entry(i, k))
        .collect();
    let bind_group = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: None,
        entries: &entries,
    });
    let pipeline = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: None,
        bind_group_layouts: &[Some(&bind_group)],
        immediate_size: 0,
    });
    Layout {
        kinds,
        bind_group,
        pipeline,
    }
}

impl Gpu {
    /// The pipeline for `key`, built on first request (load time) and cached for the device.
    pub(crate) fn pipeline(&self, key: PipelineKey) -> Arc<Pipeline> {
        let mut t = self
            .pipelines
            .tables
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(p) = t.pipelines.get(&key) {
            return p.clone();
        }
        let matvec = key.kernel.is_matvec();
        assert!(
            key.workgroup_size <= 256
                && (key.workgroup_size.is_power_of_two() || matvec)
                && (key.quads == 1 || matvec)
                && key.workgroup_size.is_multiple_of(key.quads)
                && key.workgroup_size / key.quads >= 4,
            "workgroup size {} with {} quads: kernels reduce in 256-slot arrays, trees over a \
             power of two but for the matvec's, whose quads' first 4 lanes store the rows",
            key.workgroup_size,
            key.quads
        );
        // The matvec's lanes follow the shape (`ops::matvec::lanes`): it lists a few of them.
        debug_assert!(
            matvec || key.kernel.pipeline_keys().contains(&key),
            "{key:?} is not among its kernel's pipeline_keys, which `cargo xtask wgsl` checks"
        );
        let program = key.kernel.program_for(&self.caps);
        let layout = t
            .layouts
            .entry(program.bindings)
            .or_insert_with(|| Arc::new(create_layout(&self.device, program.bindings)))
            .clone();
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(&program.name),
                source: wgpu::ShaderSource::Wgsl(program.source().into()),
            });
        let constants = key.constants();
        let compute = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&program.name),
                layout: Some(&layout.pipeline),
                module: &module,
                entry_point: Some(program.entry),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            });
        let p = Arc::new(Pipeline { compute, layout });
        t.pipelines.insert(key, p.clone());
        p
    }
}

// Its one test needs a debug build's check.
#[cfg(all(test, debug_assertions))]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use super::*;
    use crate::ops::argmax::{ArgmaxKernel, WORKGROUP};

    /// A debug build refuses a key its kernel does not list (`cargo xtask wgsl` checked no
    /// such build) and builds one it lists. On a device of its own: the refusal panics with
    /// the table's lock held.
    #[test]
    fn unlisted_key_is_refused() {
        let Some(gpu) = crate::testutil::device_without(wgpu::Features::empty()) else {
            return;
        };
        let listed = PipelineKey::new(ArgmaxKernel, WORKGROUP);
        assert!(Kernel::from(ArgmaxKernel).pipeline_keys().contains(&listed));
        gpu.pipeline(listed);
        let unlisted = PipelineKey::new(ArgmaxKernel, WORKGROUP / 2);
        let built = catch_unwind(AssertUnwindSafe(|| gpu.pipeline(unlisted)));
        assert!(built.is_err(), "{unlisted:?} was built");
    }
}
