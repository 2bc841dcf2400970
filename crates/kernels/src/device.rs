//! Opening a wgpu device: adapter choice, real limits, optional features.
//!
//! Opening is async at heart (wgpu's adapter and device requests are futures, and in a
//! browser they only resolve from the event loop): [`Gpu::open_async`] awaits them, and the
//! blocking [`Gpu::open`] runs it to completion ([`crate::wait::block_on`]: natively they
//! resolve at once).

#[cfg(target_os = "linux")]
mod wayland_noise;

use crate::error::GpuError;
use crate::pipeline::PipelineTable;
use crate::wait::{Block, Wait, block_on};

/// Optional features the kernels may use. Every kernel also has a path without them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// `Features::SHADER_F16` is on: WGSL `enable f16;` works.
    pub shader_f16: bool,
    /// `Features::SUBGROUP` is on: subgroup builtins and operations work.
    pub subgroup: bool,
    /// Smallest subgroup size the adapter reports (0 when unknown).
    pub subgroup_min_size: u32,
    /// Largest subgroup size the adapter reports (0 when unknown).
    pub subgroup_max_size: u32,
    /// `Features::TIMESTAMP_QUERY` is on (asked for wherever the adapter has it: benches, profiles).
    pub timestamps: bool,
    /// Cooperative matrices (tensor cores) of 16x16x16 f16 x f16 -> f32 work in WGSL
    /// (`enable wgpu_cooperative_matrix;`): the tensor-core prompt matmul may run. See
    /// [`coop_f16_usable`] for every condition.
    pub coop_f16: bool,
}

/// Features to ask for beyond SHADER_F16, SUBGROUP and (where usable) the cooperative matrices,
/// and features to leave off (tests of the paths without them; `without:
/// EXPERIMENTAL_COOPERATIVE_MATRIX` turns the tensor cores off).
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Features to ask for besides the ones the kernels use (where the adapter has them).
    pub extra: wgpu::Features,
    /// Features not to ask for even where the adapter has them.
    pub without: wgpu::Features,
}

/// An open device with the limits of its adapter and the pipeline table built on it.
#[derive(Debug)]
pub struct Gpu {
    /// The device: buffers, pipelines and command encoders are made from it.
    pub device: wgpu::Device,
    /// Its queue: writes and submissions go through it.
    pub queue: wgpu::Queue,
    /// The adapter's name, vendor, driver and backend.
    pub info: wgpu::AdapterInfo,
    /// The adapter's own limits, requested in full (not wgpu's conservative defaults).
    pub limits: wgpu::Limits,
    /// The optional features that are on.
    pub caps: Caps,
    /// The tile shapes and types the adapter's cooperative matrices (tensor cores) support,
    /// as it reports them; empty where it has none.
    pub coop_matrix: Vec<wgpu::CooperativeMatrixProperties>,
    pub(crate) pipelines: PipelineTable,
}

impl Gpu {
    /// Whether this is a CPU implementation of the API (lavapipe, llvmpipe, WARP), where the
    /// kernels run but a CPU executor is usually faster.
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }
}

/// Whether the tensor-core matmul can run with these cooperative-matrix configurations on
/// this adapter:
/// - a 16x16x16 configuration with f16 A and B and an f32 accumulator (the kernel's only
///   shape), without mandatory saturating accumulation (naga never emits that operand);
/// - a subgroup of exactly 32 invocations (NVIDIA): the kernel hands each 32 invocations of
///   its workgroup its own quarter of the output tile, so a wider subgroup (AMD's wave64) would
///   put two quarters' different coop operands in one subgroup, which is undefined.
pub fn coop_f16_usable(
    configs: &[wgpu::CooperativeMatrixProperties],
    info: &wgpu::AdapterInfo,
) -> bool {
    use wgpu::CooperativeScalarType as T;
    let shape = configs.iter().any(|c| {
        (c.m_size, c.n_size, c.k_size) == (16, 16, 16)
            && c.ab_type == T::F16
            && c.cr_type == T::F32
            && !c.saturating_accumulation
    });
    shape && info.subgroup_min_size == 32 && info.subgroup_max_size == 32
}

/// Preference order: discrete, integrated, virtual/other, then CPU (lavapipe).
fn rank(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu | wgpu::DeviceType::Other => 2,
        wgpu::DeviceType::Cpu => 3,
    }
}

/// Picks an adapter: `filter` (from `RULLAMA_ADAPTER`) is an index into `adapters` or a
/// case-insensitive substring of the adapter name; without it, the best-ranked one.
fn choose(adapters: Vec<wgpu::Adapter>, filter: Option<&str>) -> Result<wgpu::Adapter, GpuError> {
    let seen = adapters.len();
    let no_adapter = |filter: &str| GpuError::NoAdapter {
        seen,
        filter: filter.to_string(),
    };
    match filter {
        Some(f) => {
            let wanted = f.to_lowercase();
            let index = f.parse::<usize>().ok();
            adapters
                .into_iter()
                .enumerate()
                .find(|(i, a)| {
                    Some(*i) == index || a.get_info().name.to_lowercase().contains(&wanted)
                })
                .map(|(_, a)| a)
                .ok_or_else(|| no_adapter(&format!(" matching RULLAMA_ADAPTER={f:?}")))
        }
        None => adapters
            .into_iter()
            .min_by_key(|a| rank(a.get_info().device_type))
            .ok_or_else(|| no_adapter("")),
    }
}

/// Adapters of the primary backends (Vulkan, Metal, DX12, WebGPU); OpenGL only if there are none.
async fn enumerate() -> Vec<wgpu::Adapter> {
    // A headless Linux machine's Vulkan stack prints a line that reports nothing wrong while
    // it enumerates: `wayland_noise` says whose, and keeps that one line off stderr. Native
    // enumeration resolves at once, so it is run to completion inside the filter.
    #[cfg(target_os = "linux")]
    return wayland_noise::quiet(|| block_on(enumerate_all()));
    #[cfg(not(target_os = "linux"))]
    enumerate_all().await
}

async fn enumerate_all() -> Vec<wgpu::Adapter> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let primary = instance.enumerate_adapters(wgpu::Backends::PRIMARY).await;
    if !primary.is_empty() {
        return primary;
    }
    instance.enumerate_adapters(wgpu::Backends::SECONDARY).await
}

impl Gpu {
    /// wgpu-hal's counts of live GPU objects by kind (wgpu's `counters` feature), read by the
    /// tests that prove replaying a step creates nothing.
    pub fn object_counts(&self) -> Vec<(&'static str, isize)> {
        let c = self.device.get_internal_counters().hal;
        vec![
            ("buffers", c.buffers.read()),
            ("buffer_memory", c.buffer_memory.read()),
            ("bind_groups", c.bind_groups.read()),
            ("bind_group_layouts", c.bind_group_layouts.read()),
            ("compute_pipelines", c.compute_pipelines.read()),
            ("pipeline_layouts", c.pipeline_layouts.read()),
            ("shader_modules", c.shader_modules.read()),
            ("command_encoders", c.command_encoders.read()),
            ("memory_allocations", c.memory_allocations.read()),
        ]
    }

    /// Every adapter wgpu can see, in enumeration order (the indices `RULLAMA_ADAPTER` uses).
    pub fn list_adapters() -> Vec<wgpu::AdapterInfo> {
        block_on(enumerate()).iter().map(|a| a.get_info()).collect()
    }

    /// Opens the adapter named by `RULLAMA_ADAPTER`, or the best one.
    pub fn open() -> Result<Gpu, GpuError> {
        let filter = std::env::var("RULLAMA_ADAPTER").ok();
        Self::open_with(filter.as_deref())
    }

    /// Opens the adapter that `filter` names (index or name substring), or the best one.
    pub fn open_with(filter: Option<&str>) -> Result<Gpu, GpuError> {
        Self::open_with_options(filter, OpenOptions::default())
    }

    /// As [`Gpu::open_with`], with features added or left off.
    pub fn open_with_options(filter: Option<&str>, options: OpenOptions) -> Result<Gpu, GpuError> {
        block_on(Self::open_async(filter, options))
    }

    /// As [`Gpu::open_with_options`], awaiting the adapter and the device.
    pub async fn open_async(filter: Option<&str>, options: OpenOptions) -> Result<Gpu, GpuError> {
        let adapter = choose(enumerate().await, filter)?;
        let info = adapter.get_info();
        // Timestamps cost nothing until a profiled replay writes them (`Step::profile`).
        let wanted = (wgpu::Features::SHADER_F16
            | wgpu::Features::SUBGROUP
            | crate::profile::PROFILE_FEATURES
            | options.extra)
            - options.without;
        let mut features = adapter.features() & wanted;
        let limits = adapter.limits();
        let coop_matrix = adapter.cooperative_matrix_properties();
        let coop = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        let coop_f16 = !options.without.contains(coop)
            && adapter.features().contains(coop)
            && features.contains(wgpu::Features::SHADER_F16)
            && coop_f16_usable(&coop_matrix, &info);
        features.set(coop, coop_f16);
        let experimental_features = if coop_f16 {
            // SAFETY: wgpu asks us to acknowledge that its experimental features may hold
            // bugs with undefined behaviour. We use one, cooperative matrices, in two kernels
            // (`matmul/matmul_coop.wgsl`, `attention/attention_coop.wgsl`), and only in the
            // way wgpu documents and naga validates: a configuration the adapter reports
            // (checked by `coop_f16_usable`), every coop op in uniform control flow (naga's
            // uniformity analysis checks it), loads and stores inside their arrays with
            // 16-byte-aligned pointers and strides (the kernels' layouts, and every workgroup
            // variable a multiple of 16 bytes: `cargo xtask wgsl` checks it). A device opened
            // without it (`OpenOptions::without`) never sees a coop shader.
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
        let desc = wgpu::DeviceDescriptor {
            label: Some("rullama"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features,
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) =
            adapter
                .request_device(&desc)
                .await
                .map_err(|source| GpuError::RequestDevice {
                    adapter: info.name.clone(),
                    source,
                })?;
        let caps = Caps {
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            subgroup: features.contains(wgpu::Features::SUBGROUP),
            subgroup_min_size: info.subgroup_min_size,
            subgroup_max_size: info.subgroup_max_size,
            timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            coop_f16,
        };
        Ok(Gpu {
            device,
            queue,
            info,
            limits,
            caps,
            coop_matrix,
            pipelines: PipelineTable::default(),
        })
    }

    /// The largest byte range one storage binding may cover on this device.
    pub fn max_binding_bytes(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    /// Runs `make` (buffer creation) with wgpu's out-of-memory and validation errors
    /// captured: a failed allocation is [`GpuError::OutOfMemory`] naming `what` and `bytes`
    /// instead of wgpu's uncaptured-error panic. For the big, load-time allocations (weights,
    /// the KV cache), where a full device is a user's situation and not a bug.
    pub fn allocate<T>(
        &self,
        what: &'static str,
        bytes: u64,
        make: impl FnOnce() -> T,
    ) -> Result<T, GpuError> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let invalid = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let made = make();
        // Scopes pop in reverse order. Native wgpu resolves the futures at once; a browser
        // build will need an async twin of this call, awaiting them.
        let errors = [block_on(invalid.pop()), block_on(oom.pop())];
        match errors.into_iter().flatten().next() {
            None => Ok(made),
            Some(e) => Err(GpuError::OutOfMemory {
                what,
                bytes,
                detail: e.to_string(),
            }),
        }
    }

    /// Waits until all submitted work is done, blocking.
    pub fn wait(&self) -> Result<(), GpuError> {
        block_on(Block.wait(self, None, async {}))
    }
}

#[cfg(test)]
mod tests {
    use super::coop_f16_usable;
    use wgpu::{CooperativeMatrixProperties as Props, CooperativeScalarType as T};

    fn config(m: u32, ab: T, cr: T, saturating: bool) -> Props {
        Props {
            m_size: m,
            n_size: 16,
            k_size: 16,
            ab_type: ab,
            cr_type: cr,
            saturating_accumulation: saturating,
        }
    }

    fn adapter(subgroup: (u32, u32)) -> wgpu::AdapterInfo {
        let mut info = wgpu::AdapterInfo::new(wgpu::DeviceType::DiscreteGpu, wgpu::Backend::Vulkan);
        (info.subgroup_min_size, info.subgroup_max_size) = subgroup;
        info
    }

    /// The tensor-core matmul needs 16x16x16 f16 -> f32 and a subgroup of exactly 32.
    #[test]
    fn coop_needs_the_kernels_shape_and_subgroup() {
        let nvidia = [
            config(16, T::F16, T::F16, false),
            config(16, T::F16, T::F32, false),
        ];
        assert!(coop_f16_usable(&nvidia, &adapter((32, 32))));
        // AMD RDNA: the subgroup may be 64 wide.
        assert!(!coop_f16_usable(&nvidia, &adapter((32, 64))));
        // Nothing reported (lavapipe), or only other shapes and types.
        assert!(!coop_f16_usable(&[], &adapter((32, 32))));
        let other = [
            config(8, T::F16, T::F32, false),
            config(16, T::F16, T::F16, false),
            config(16, T::F32, T::F32, false),
            config(16, T::F16, T::F32, true),
        ];
        assert!(!coop_f16_usable(&other, &adapter((32, 32))));
    }
}
