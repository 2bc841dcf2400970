//! The pipeline table: a typed key -> one compute pipeline, built once per device.
//!
//! Pipelines are created when a step is built (load time), never while a step is encoded:
//! a built [`crate::Step`] holds its pipelines by `Arc` and does no lookups at all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::device::{Caps, Gpu};
use crate::format::GpuFormat;
use crate::ops::epilogue::Epilogue;
use crate::ops::glu::Activation;
use crate::ops::kv::KvDtype;
use crate::ops::matvec::{Addend, InputKind};
use crate::ops::residual_norm::ResidualOut;
use crate::ops::rope::RopeStyle;
use crate::ops::unary::UnaryOp;
use crate::ops::{
    argmax, attention, attention_coop, attention_rope, elementwise, embed, glu, head_norm_rope, kv,
    matmul, matmul_coop, matvec, norm, quantize, residual_norm, rope, sample, split_k, unary,
};
use crate::shader::{BindingKind, Program};

/// Which kernel: the WGSL program and its variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// `y = W x [+ bias]` with `W` in the given format, into one output or split over several.
    Matvec(GpuFormat, Epilogue),
    /// `y = W (act(gate) * up)`: the matvec with a GLU computed as its input is read.
    MatvecGlu(GpuFormat, Activation),
    /// `y = W x' [+ bias]` with x' a q8 vector (two int8 digits per input, blocks of 32 with
    /// f32 scales), integer dot products; only for `matvec::q8_supported` formats.
    MatvecQ8(GpuFormat, Epilogue),
    /// `y = W x [+ bias]` with x = rms_norm(h + a') computed by every workgroup (and h's
    /// update stored), a' = a or rms_norm(a) (the [`Addend`]): a decode step's residual_norm
    /// folded into its product.
    MatvecNorm(GpuFormat, Epilogue, Addend),
    /// `y = act(W_gate x) * (W_up x)` (the GLU epilogue: gate|up stacked, the GLU stored)
    /// with x a vector (`InputKind::Plain`) or a q8 vector (`InputKind::Q8`).
    MatvecGluOut(GpuFormat, InputKind, Activation),
    /// `y = W x [+ bias]` with x = z / rms(h') from what a residual epilogue stored (z and
    /// the partial sums of h'^2; `matvec::ScaledInput`).
    MatvecScaled(GpuFormat, Epilogue),
    /// `a = W x` with the residual epilogue: h += a row by row, z = h * w_out and the partial
    /// sums of h^2 stored (`matvec::matvec_residual`).
    MatvecResidual(GpuFormat),
    /// A vector rounded to the q8 layout (the matvec's q8 input).
    QuantizeQ8,
    /// `act(gate) * up` computed as it is read, rounded to the q8 layout.
    QuantizeQ8Glu(Activation),
    /// Gather rows of an embedding table (token ids read from a GPU buffer).
    EmbedRows(GpuFormat),
    /// `Y = X W^T [+ bias]` for a block of tokens, with `W` in the given format (f32 FMAs),
    /// into one output or split over several.
    Matmul(GpuFormat, Epilogue),
    /// The same on the tensor cores (cooperative matrices: f16 tiles, f32 accumulation);
    /// only on a device with `Caps::coop_f16` (`Matmul::kernel` picks it).
    MatmulCoop(GpuFormat, Epilogue),
    /// Split K's second dispatch: the partial products added up and stored through the
    /// product's epilogue (`ops::split_k`).
    MatmulReduceK(Epilogue),
    /// RMS norm over rows, with or without a gain vector, out of place or in place.
    RmsNorm { weighted: bool, in_place: bool },
    /// `dst += src` (src repeating with a period: bias rows).
    AddInPlace,
    /// `dst = src`.
    Copy,
    /// In-place scale or soft-cap.
    Unary(UnaryOp),
    /// Write K and V rows into a cache.
    KvAppend(KvDtype),
    /// Attention over a cache (decode or causal prompt block), `HD` = head_dim, `KEY_GROUPS`
    /// = key_groups (1 for prompt blocks, `attention::DECODE_KEY_GROUPS` for few rows).
    Attention {
        kv: KvDtype,
        head_dim: u32,
        key_groups: u32,
    },
    /// The decode attention (one token) with head_norm_rope_kv folded in: q and k normed
    /// (`norm`) and rotated (`style`) before the key loop, k's finished heads and v's stored
    /// into the cache by the split that holds the position.
    AttentionRope {
        kv: KvDtype,
        head_dim: u32,
        style: RopeStyle,
        norm: bool,
        /// Every rotation pair within a lane (`attention_rope::in_lanes`): the hook in
        /// registers.
        lanes: bool,
        key_groups: u32,
    },
    /// Attention of a prompt block over an f16 cache on the tensor cores (one split), `HD` =
    /// head_dim; its emulated program on a device without cooperative matrices (tests).
    AttentionCoop { head_dim: u32 },
    /// `out = act(gate) * up`.
    Glu(Activation),
    /// Index of the largest element.
    Argmax,
    /// Sampling, selection level: the best `K_MAX` of each block of candidates.
    SampleTopK,
    /// Sampling, the last selection level (one block), which then draws: top-k, top-p,
    /// min-p, temperature, inverse CDF over its best `K_MAX`.
    SampleTopKDraw,
    /// Rotary position embedding, in place.
    Rope(RopeStyle),
    /// `h += [rms_norm(a) * w_in]`, then optionally `y = rms_norm(h) * w_out` (and y's q8
    /// copy), per row.
    /// `groups`: the kernel's tile in groups of `4 * 256` elements (1 to 4; see
    /// [`residual_norm::groups`]).
    ResidualNorm {
        pre_norm: bool,
        out: ResidualOut,
        groups: u8,
    },
    /// Optional per-head weighted RMS norm, then RoPE, in place, over q and optionally k;
    /// with `kv`, k's finished heads and the v heads also stored into a cache of that type.
    HeadNormRope {
        style: RopeStyle,
        norm: bool,
        kv: Option<KvDtype>,
    },
}

impl Kernel {
    /// Whether the kernel is a decode matvec (`matvec/matvec.wgsl`: the `QUADS` override,
    /// any workgroup size).
    pub fn is_matvec(self) -> bool {
        matches!(
            self,
            Kernel::Matvec(..)
                | Kernel::MatvecGlu(..)
                | Kernel::MatvecQ8(..)
                | Kernel::MatvecNorm(..)
                | Kernel::MatvecGluOut(..)
                | Kernel::MatvecScaled(..)
                | Kernel::MatvecResidual(_)
        )
    }

    /// Every kernel variant the crate can build (the WGSL check walks this list).
    pub fn all() -> Vec<Kernel> {
        let mut all = Vec::new();
        for &f in crate::shader::weight_formats() {
            for out in Epilogue::ALL {
                all.push(Kernel::Matvec(f, out));
                all.push(Kernel::Matmul(f, out));
                all.push(Kernel::MatmulCoop(f, out));
            }
            all.push(Kernel::MatvecGlu(f, Activation::GeluTanh));
            all.push(Kernel::MatvecGlu(f, Activation::Silu));
            if matvec::q8_supported(f) {
                all.extend(Epilogue::ALL.map(|out| Kernel::MatvecQ8(f, out)));
            }
            for addend in Addend::ALL {
                all.extend(Epilogue::ALL.map(|out| Kernel::MatvecNorm(f, out, addend)));
            }
            all.extend(Epilogue::ALL.map(|out| Kernel::MatvecScaled(f, out)));
            all.push(Kernel::MatvecResidual(f));
            for act in [Activation::GeluTanh, Activation::Silu] {
                all.push(Kernel::MatvecGluOut(f, InputKind::Plain, act));
                for addend in Addend::ALL {
                    all.push(Kernel::MatvecGluOut(f, InputKind::Norm(addend), act));
                }
                all.push(Kernel::MatvecGluOut(f, InputKind::Scaled, act));
                if matvec::q8_supported(f) {
                    all.push(Kernel::MatvecGluOut(f, InputKind::Q8, act));
                }
            }
            all.push(Kernel::EmbedRows(f));
        }
        all.extend(Epilogue::ALL.map(Kernel::MatmulReduceK));
        for weighted in [false, true] {
            for in_place in [false, true] {
                all.push(Kernel::RmsNorm { weighted, in_place });
            }
        }
        for pre_norm in [false, true] {
            for out in ResidualOut::ALL {
                for groups in 1..=residual_norm::MAX_GROUPS {
                    all.push(Kernel::ResidualNorm {
                        pre_norm,
                        out,
                        groups,
                    });
                }
            }
        }
        for style in [RopeStyle::Normal, RopeStyle::Neox] {
            for norm in [false, true] {
                for kv in [None, Some(KvDtype::F32), Some(KvDtype::F16)] {
                    all.push(Kernel::HeadNormRope { style, norm, kv });
                }
            }
        }
        for kv in [KvDtype::F32, KvDtype::F16] {
            all.push(Kernel::KvAppend(kv));
            for key_groups in [1, attention::DECODE_KEY_GROUPS] {
                all.push(Kernel::Attention {
                    kv,
                    head_dim: 128,
                    key_groups,
                });
                for style in [RopeStyle::Normal, RopeStyle::Neox] {
                    for norm in [false, true] {
                        for lanes in [false, true] {
                            all.push(Kernel::AttentionRope {
                                kv,
                                head_dim: 128,
                                style,
                                norm,
                                lanes,
                                key_groups,
                            });
                        }
                    }
                }
            }
        }
        all.extend([
            Kernel::AttentionCoop { head_dim: 128 },
            Kernel::AddInPlace,
            Kernel::Copy,
            Kernel::Unary(UnaryOp::Scale),
            Kernel::Unary(UnaryOp::SoftCap),
            Kernel::Glu(Activation::GeluTanh),
            Kernel::Glu(Activation::Silu),
            Kernel::QuantizeQ8,
            Kernel::QuantizeQ8Glu(Activation::GeluTanh),
            Kernel::QuantizeQ8Glu(Activation::Silu),
            Kernel::Argmax,
            Kernel::SampleTopK,
            Kernel::SampleTopKDraw,
            Kernel::Rope(RopeStyle::Normal),
            Kernel::Rope(RopeStyle::Neox),
        ]);
        all
    }

    /// The files, entry point and bindings of this kernel on a device with `caps` (kernels
    /// with a subgroup variant pick it when the device has `Features::SUBGROUP`; the
    /// tensor-core matmul builds its emulated ops where the device has no cooperative
    /// matrices, which only tests ask for).
    pub fn program_for(self, caps: &Caps) -> Program {
        match self {
            Kernel::Matvec(f, out) => matvec::program(f, InputKind::Plain, out, caps.subgroup),
            Kernel::MatvecGlu(f, _) => {
                matvec::program(f, InputKind::Glu, Epilogue::STORE, caps.subgroup)
            }
            Kernel::MatvecQ8(f, out) => matvec::program(f, InputKind::Q8, out, caps.subgroup),
            Kernel::MatvecNorm(f, out, addend) => {
                matvec::program(f, InputKind::Norm(addend), out, caps.subgroup)
            }
            Kernel::MatvecGluOut(f, input, _) => matvec::glu_out_program(f, input, caps.subgroup),
            Kernel::MatvecScaled(f, out) => {
                matvec::program(f, InputKind::Scaled, out, caps.subgroup)
            }
            Kernel::MatvecResidual(f) => matvec::residual_program(f, caps.subgroup),
            // `Matmul::kernel` picks MatmulCoop only with coop_f16; tests build it elsewhere
            // to run its body over emulated coop ops.
            Kernel::MatmulCoop(f, out) => matmul_coop::program(f, out, !caps.coop_f16),
            Kernel::AttentionCoop { .. } => attention_coop::program(!caps.coop_f16),
            Kernel::SampleTopK => sample::topk_program(sample::sorts_in_subgroups(caps), false),
            Kernel::SampleTopKDraw => sample::topk_program(sample::sorts_in_subgroups(caps), true),
            Kernel::Attention { kv, head_dim, .. } => {
                attention::program(kv, attention::in_subgroups(caps, head_dim))
            }
            Kernel::AttentionRope {
                kv,
                head_dim,
                norm,
                lanes,
                ..
            } => attention_rope::program(kv, norm, lanes, attention::in_subgroups(caps, head_dim)),
            _ => self.program(),
        }
    }

    /// Every program this kernel may use, one per device capability set.
    pub fn programs(self) -> Vec<Program> {
        match self {
            Kernel::Matvec(f, out) => vec![
                matvec::program(f, InputKind::Plain, out, false),
                matvec::program(f, InputKind::Plain, out, true),
            ],
            Kernel::MatvecGlu(f, _) => vec![
                matvec::program(f, InputKind::Glu, Epilogue::STORE, false),
                matvec::program(f, InputKind::Glu, Epilogue::STORE, true),
            ],
            Kernel::MatvecQ8(f, out) => vec![
                matvec::program(f, InputKind::Q8, out, false),
                matvec::program(f, InputKind::Q8, out, true),
            ],
            Kernel::MatvecNorm(f, out, addend) => vec![
                matvec::program(f, InputKind::Norm(addend), out, false),
                matvec::program(f, InputKind::Norm(addend), out, true),
            ],
            Kernel::MatvecGluOut(f, input, _) => vec![
                matvec::glu_out_program(f, input, false),
                matvec::glu_out_program(f, input, true),
            ],
            Kernel::MatvecScaled(f, out) => vec![
                matvec::program(f, InputKind::Scaled, out, false),
                matvec::program(f, InputKind::Scaled, out, true),
            ],
            Kernel::MatvecResidual(f) => vec![
                matvec::residual_program(f, false),
                matvec::residual_program(f, true),
            ],
            Kernel::MatmulCoop(f, out) => vec![
                matmul_coop::program(f, out, false),
                matmul_coop::program(f, out, true),
            ],
            Kernel::AttentionCoop { .. } => {
                vec![
                    attention_coop::program(false),
                    attention_coop::program(true),
                ]
            }
            Kernel::SampleTopK => vec![
                sample::topk_program(false, false),
                sample::topk_program(true, false),
            ],
            Kernel::SampleTopKDraw => vec![
                sample::topk_program(false, true),
                sample::topk_program(true, true),
            ],
            Kernel::Attention { kv, .. } => {
                vec![attention::program(kv, false), attention::program(kv, true)]
            }
            Kernel::AttentionRope {
                kv, norm, lanes, ..
            } => vec![
                attention_rope::program(kv, norm, lanes, false),
                attention_rope::program(kv, norm, lanes, true),
            ],
            _ => vec![self.program()],
        }
    }

    /// The files, entry point and bindings of this kernel (the variant that needs no
    /// optional feature; for `MatmulCoop`, whose every program needs one, the tensor-core
    /// program, which names it).
    pub fn program(self) -> Program {
        match self {
            Kernel::Matvec(f, out) => matvec::program(f, InputKind::Plain, out, false),
            Kernel::MatvecGlu(f, _) => matvec::program(f, InputKind::Glu, Epilogue::STORE, false),
            Kernel::MatvecQ8(f, out) => matvec::program(f, InputKind::Q8, out, false),
            Kernel::MatvecNorm(f, out, addend) => {
                matvec::program(f, InputKind::Norm(addend), out, false)
            }
            Kernel::MatvecGluOut(f, input, _) => matvec::glu_out_program(f, input, false),
            Kernel::MatvecScaled(f, out) => matvec::program(f, InputKind::Scaled, out, false),
            Kernel::MatvecResidual(f) => matvec::residual_program(f, false),
            Kernel::QuantizeQ8 => quantize::program(false),
            Kernel::QuantizeQ8Glu(_) => quantize::program(true),
            Kernel::EmbedRows(f) => embed::program(f),
            Kernel::Matmul(f, out) => matmul::program(f, out),
            Kernel::MatmulCoop(f, out) => matmul_coop::program(f, out, false),
            Kernel::MatmulReduceK(out) => split_k::reduce_program(out),
            Kernel::RmsNorm { weighted, in_place } => norm::program(weighted, in_place),
            Kernel::AddInPlace => elementwise::program(),
            Kernel::Copy => elementwise::copy_program(),
            Kernel::Unary(_) => unary::program(),
            Kernel::KvAppend(d) => kv::program(d),
            Kernel::Attention { kv, .. } => attention::program(kv, false),
            Kernel::AttentionRope {
                kv, norm, lanes, ..
            } => attention_rope::program(kv, norm, lanes, false),
            Kernel::AttentionCoop { .. } => attention_coop::program(false),
            Kernel::Glu(_) => glu::program(),
            Kernel::Argmax => argmax::program(),
            Kernel::SampleTopK => sample::topk_program(false, false),
            Kernel::SampleTopKDraw => sample::topk_program(false, true),
            Kernel::Rope(_) => rope::program(),
            Kernel::ResidualNorm { pre_norm, out, .. } => residual_norm::program(pre_norm, out),
            Kernel::HeadNormRope { norm, kv, .. } => head_norm_rope::program(norm, kv),
        }
    }

    /// The kernel's program name, for reports (`matvec_q4_k`, `rms_norm`, ...).
    pub fn name(self) -> String {
        self.program().name
    }

    /// WGSL `override` constants this variant sets (besides the workgroup size).
    fn constants(self) -> Vec<(&'static str, f64)> {
        match self {
            Kernel::Glu(a) | Kernel::QuantizeQ8Glu(a) => vec![("ACT", a.code())],
            Kernel::MatvecGlu(f, a) => vec![("ACT", a.code()), partial_units(f)],
            Kernel::Matvec(f, _) => vec![partial_units(f)],
            Kernel::MatvecNorm(f, _, _) => vec![x_reads(f)],
            Kernel::MatvecResidual(f) => vec![partial_units(f)],
            // x_q8.wgsl and x_scaled.wgsl have no PARTIAL_UNITS (rows of whole blocks of 32).
            Kernel::MatvecGluOut(_, InputKind::Q8 | InputKind::Scaled, a) => {
                vec![("ACT", a.code())]
            }
            Kernel::MatvecGluOut(f, InputKind::Norm(_), a) => vec![("ACT", a.code()), x_reads(f)],
            Kernel::MatvecGluOut(f, _, a) => vec![("ACT", a.code()), partial_units(f)],
            Kernel::Rope(m) => vec![("NEOX", m.code())],
            Kernel::ResidualNorm {
                pre_norm, groups, ..
            } => vec![
                ("PRE", f64::from(u8::from(pre_norm))),
                ("GROUPS", f64::from(groups)),
            ],
            Kernel::HeadNormRope { style, norm, .. } => {
                vec![("NEOX", style.code()), ("NORM", f64::from(u8::from(norm)))]
            }
            Kernel::Unary(op) => vec![("OP", op.code())],
            Kernel::Attention {
                head_dim,
                key_groups,
                ..
            } => vec![
                ("HD", f64::from(head_dim)),
                ("KEY_GROUPS", f64::from(key_groups)),
            ],
            Kernel::AttentionCoop { head_dim } => vec![("HD", f64::from(head_dim))],
            Kernel::AttentionRope {
                head_dim,
                style,
                norm,
                key_groups,
                ..
            } => vec![
                ("HD", f64::from(head_dim)),
                ("NEOX", style.code()),
                ("NORM", f64::from(u8::from(norm))),
                ("KEY_GROUPS", f64::from(key_groups)),
            ],
            _ => Vec::new(),
        }
    }
}

/// matvec/x_norm.wgsl's `X_READS` override for weights of format `f`.
fn x_reads(f: GpuFormat) -> (&'static str, f64) {
    ("X_READS", f64::from(matvec::input_reads(f)))
}

/// The matvec input files' `PARTIAL_UNITS` override for weights of format `f`.
fn partial_units(f: GpuFormat) -> (&'static str, f64) {
    (
        "PARTIAL_UNITS",
        f64::from(u8::from(!matvec::whole_block_rows(f))),
    )
}

/// What identifies one pipeline: the kernel and the WGSL overrides it is built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    pub kernel: Kernel,
    /// The `WG` override: invocations per workgroup, at most 256 (a power of two but for the
    /// matvec kernels, whose [`matvec::Lanes`] may take any multiple of their quads).
    pub workgroup_size: u32,
    /// The matvec's `QUADS` override: row quads side by side in a workgroup (1 for every
    /// other kernel, which has no such override).
    pub quads: u32,
    /// The matvec dot file's `PARTS` override, lanes a step ([`matvec::Lanes::parts`]); 0:
    /// not set (every kernel whose file has no such override).
    pub parts: u32,
}

/// A bind group layout (shared by every kernel with the same binding kinds) and its pipeline layout.
#[derive(Debug)]
pub struct Layout {
    pub kinds: &'static [BindingKind],
    pub bind_group: wgpu::BindGroupLayout,
    pub pipeline: wgpu::PipelineLayout,
}

/// One built pipeline.
#[derive(Debug)]
pub struct Pipeline {
    pub key: PipelineKey,
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
    pub fn pipeline(&self, key: PipelineKey) -> Arc<Pipeline> {
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
        let mut constants = key.kernel.constants();
        constants.push(("WG", f64::from(key.workgroup_size)));
        if key.quads != 1 {
            constants.push(("QUADS", f64::from(key.quads)));
        }
        if key.parts != 0 {
            constants.push(("PARTS", f64::from(key.parts)));
        }
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
        let p = Arc::new(Pipeline {
            key,
            compute,
            layout,
        });
        t.pipelines.insert(key, p.clone());
        p
    }
}
