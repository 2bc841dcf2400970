//! Which kernel a dispatch runs: [`Kernel`], one variant per kernel family (an op module),
//! each holding the family's own variant type. The module describes its kernels through
//! [`KernelFamily`] beside the op, its WGSL and its parity checks: which variants exist,
//! their programs on each kind of device, their WGSL override constants and their checks.
//!
//! A new kernel is a module with a type implementing [`KernelFamily`] and one line in the
//! list of families below; the list makes the enum, [`Kernel::all`] and the registry of
//! parity checks, so no family can be missing from any of them.

use crate::device::Caps;
use crate::ops::{
    adamw, argmax, attention, attention_backward, attention_coop, attention_rope, attention_train,
    attention_train_coop, cross_entropy, dropout, elementwise, embed, f16_copy, f16_copy_x, glu,
    glu_backward, head_norm_rope, kv, matmul, matmul_coop, matmul_dense, matmul_input_grad,
    matmul_small_m, matmul_thin, matmul_weight_grad, matvec, norm, quantize, residual_norm,
    rms_norm_backward, rope, rope_backward, sample, split_k, split_sum, unary,
};
#[cfg(any(test, feature = "parity"))]
use crate::parity::Check;
use crate::pipeline::PipelineKey;
use crate::shader::Program;

/// What an op module says of its kernels: the variants it builds, their programs and their
/// override constants (and, for tests, their parity checks). Implemented by each family's
/// variant type, which [`Kernel`] holds.
pub trait KernelFamily: Copy + Into<Kernel> {
    /// Every variant the crate can build (`cargo xtask wgsl` validates each one's programs).
    fn variants() -> Vec<Self>;

    /// The files, entry point and bindings of the variant's program that needs no optional
    /// feature (for the tensor-core kernels, whose every program needs one, the tensor-core
    /// program, which names it).
    fn program(self) -> Program;

    /// A tensor-core kernel's body over emulated cooperative-matrix ops (needs only
    /// SHADER_F16): what a device without cooperative matrices builds, which only tests ask
    /// for. `None` for every other family.
    fn emulated_program(self) -> Option<Program> {
        None
    }

    /// Every program this variant may use, one per device capability set, the one of
    /// [`KernelFamily::program`] first (then the emulated one, where there is one).
    fn programs(self) -> Vec<Program> {
        std::iter::once(self.program())
            .chain(self.emulated_program())
            .collect()
    }

    /// The program on a device with `caps`: [`KernelFamily::emulated_program`] where there is
    /// one and the device has no cooperative matrices, else [`KernelFamily::program`] (a
    /// family with a subgroup program overrides this to pick it where the device has
    /// `Features::SUBGROUP`).
    fn program_for(self, caps: &Caps) -> Program {
        match self.emulated_program() {
            Some(emulated) if !caps.coop_f16 => emulated,
            _ => self.program(),
        }
    }

    /// WGSL `override` constants the variant sets, besides the ones from its
    /// [`crate::PipelineKey`] (`WG`, `QUADS`, `PARTS`).
    fn constants(self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// The pipeline keys its ops build the variant with: its workgroup sizes (`WG`), and for
    /// the matvec, whose lanes follow the shape, a few of its lane layouts. `cargo xtask wgsl`
    /// checks the variant's programs under each key's constants ([`PipelineKey::constants`]:
    /// workgroup memory, validation), and a debug build refuses to build a pipeline for a key
    /// not listed, so no workgroup size goes unchecked.
    fn pipeline_keys(self) -> Vec<PipelineKey>;

    /// The parity checks of the family's kernels (`crate::parity::checks` collects every
    /// family's).
    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<Check>;
}

/// [`KernelFamily`] through a reference, so that one `match` over [`Kernel`] reaches any
/// family's.
trait Family {
    fn program(&self) -> Program;
    fn programs(&self) -> Vec<Program>;
    fn program_for(&self, caps: &Caps) -> Program;
    fn constants(&self) -> Vec<(&'static str, f64)>;
    fn pipeline_keys(&self) -> Vec<PipelineKey>;
}

impl<K: KernelFamily> Family for K {
    fn program(&self) -> Program {
        KernelFamily::program(*self)
    }

    fn programs(&self) -> Vec<Program> {
        KernelFamily::programs(*self)
    }

    fn program_for(&self, caps: &Caps) -> Program {
        KernelFamily::program_for(*self, caps)
    }

    fn constants(&self) -> Vec<(&'static str, f64)> {
        KernelFamily::constants(*self)
    }

    fn pipeline_keys(&self) -> Vec<PipelineKey> {
        KernelFamily::pipeline_keys(*self)
    }
}

/// The one list of kernel families: makes [`Kernel`] (a variant per family, documented as
/// written here), `From` each family's type, [`Kernel::all`] and the registry of checks.
macro_rules! families {
    ($($(#[$doc:meta])* $variant:ident($family:ty),)+) => {
        /// Which kernel: a family (the op module that builds it) and the family's variant
        /// (its program and override constants). Part of the [`crate::PipelineKey`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Kernel {
            $($(#[$doc])* $variant($family),)+
        }

        $(impl From<$family> for Kernel {
            fn from(k: $family) -> Kernel {
                Kernel::$variant(k)
            }
        })+

        impl Kernel {
            /// Every kernel variant the crate can build (the WGSL check walks this list):
            /// each family's own list, family by family.
            pub fn all() -> Vec<Kernel> {
                let mut all = Vec::new();
                $(all.extend(<$family>::variants().into_iter().map(Kernel::$variant));)+
                all
            }

            fn family(&self) -> &dyn Family {
                match self {
                    $(Kernel::$variant(k) => k,)+
                }
            }

            /// Every family's parity checks, with the family's name.
            #[cfg(any(test, feature = "parity"))]
            pub(crate) fn checks_by_family() -> Vec<(&'static str, Vec<Check>)> {
                vec![$((stringify!($variant), <$family>::checks()),)+]
            }

            /// How many families there are (the test that every one is listed).
            #[cfg(test)]
            const FAMILIES: usize = [$(stringify!($variant)),+].len();
        }
    };
}

families! {
    /// The decode matvecs, `y = W x` with `W` a weight in its block format: their inputs and
    /// epilogues ([`matvec::MatvecKernel`]).
    Matvec(matvec::MatvecKernel),
    /// A vector rounded to the q8 layout (the matvec's q8 input), or a GLU computed as it is
    /// read and rounded so.
    Quantize(quantize::QuantizeKernel),
    /// Gather rows of an embedding table (token ids read from a GPU buffer).
    EmbedRows(embed::EmbedKernel),
    /// `Y = X W^T [+ bias]` for a block of tokens (f32 FMAs), into one output or split over
    /// several.
    Matmul(matmul::MatmulKernel),
    /// The matmul's backward through its weight: `dX = dY W`, the weight read in its block
    /// format (f32 FMAs).
    MatmulInputGrad(matmul_input_grad::MatmulInputGradKernel),
    /// Products with a side of at most 16 (LoRA's, forward and input gradient), in f32.
    MatmulThin(matmul_thin::MatmulThinKernel),
    /// The gradient of a trainable f32 weight: `dW (+)= dY^T X` over a sequence.
    MatmulWeightGrad(matmul_weight_grad::MatmulWeightGradKernel),
    /// The training products' split second half: partial sums added up in split order.
    SplitSum(split_sum::SplitSumKernel),
    /// The same on the tensor cores (cooperative matrices: f16 tiles, f32 accumulation);
    /// only on a device with `Caps::coop_f16` (`Matmul::kernel` picks it).
    MatmulCoop(matmul_coop::MatmulCoopKernel),
    /// The tensor-core product over F16 weights copied as stored, in larger tiles.
    MatmulDense(matmul_dense::MatmulDenseKernel),
    /// The tensor-core product of a few token rows (up to 64 a workgroup), split over its
    /// inputs so that each weight block is decoded once and the GPU stays full.
    MatmulSmallM(matmul_small_m::MatmulSmallMKernel),
    /// A weight's rows decoded and rounded to f16, for the dense kernel.
    F16Copy(f16_copy::F16CopyKernel),
    /// A block of activations rounded to f16, for the dense kernel.
    F16CopyX(f16_copy_x::F16CopyXKernel),
    /// Split K's second dispatch: the partial products added up and stored through the
    /// product's epilogue.
    MatmulReduceK(split_k::ReduceKKernel),
    /// RMS norm over rows, with or without a gain vector, out of place or in place.
    RmsNorm(norm::RmsNormKernel),
    /// The RMS norm's backward: dx from x, the gain and dy, per row.
    RmsNormBackward(rms_norm_backward::RmsNormBackwardKernel),
    /// `dst += src` (src repeating with a period: bias rows), `out = a + b`, and `dst = src`.
    Elementwise(elementwise::ElementwiseKernel),
    /// Scale or soft-cap, in place or out of place.
    Unary(unary::UnaryKernel),
    /// LoRA dropout, in place or out of place: a mask hashed from a seed and each element's
    /// index.
    Dropout(dropout::DropoutKernel),
    /// Write K and V rows into a cache.
    KvAppend(kv::KvAppendKernel),
    /// Attention over a cache (decode or causal prompt block).
    Attention(attention::AttentionKernel),
    /// The decode attention (one token) with head_norm_rope_kv folded in.
    AttentionRope(attention_rope::AttentionRopeKernel),
    /// Attention of a prompt block over an f16 cache on the tensor cores (one split); its
    /// emulated program on a device without cooperative matrices (tests).
    AttentionCoop(attention_coop::AttentionCoopKernel),
    /// Causal attention over a block without a cache, for training: o and each row's
    /// log-sum-exp.
    AttentionTrain(attention_train::AttentionTrainKernel),
    /// The training attention's backward: dq, then dk and dv, weights recomputed from lse.
    AttentionBackward(attention_backward::AttentionBackwardKernel),
    /// The training attention's forward and backward on the tensor cores (head dims 64, 128,
    /// 256); their emulated programs on a device without cooperative matrices (tests).
    AttentionTrainCoop(attention_train_coop::AttentionTrainCoopKernel),
    /// `out = act(gate) * up`.
    Glu(glu::GluKernel),
    /// `dgate = dy * up * act'(gate)`, `dup = dy * act(gate)`: the GLU's backward.
    GluBackward(glu_backward::GluBackwardKernel),
    /// Index of the largest element.
    Argmax(argmax::ArgmaxKernel),
    /// Sampling: the selection levels, the last of which draws.
    Sample(sample::SampleKernel),
    /// Rotary position embedding, in place.
    Rope(rope::RopeKernel),
    /// RoPE's backward: the gradient turned by the transposed rotation, in place.
    RopeBackward(rope_backward::RopeBackwardKernel),
    /// The loss head: cross-entropy per row and its gradient over the logits, in place.
    CrossEntropy(cross_entropy::CrossEntropyKernel),
    /// AdamW over a flat parameter buffer: the gradient's squared norm (two reduction
    /// stages) and the clipped update.
    AdamW(adamw::AdamWKernel),
    /// `h += [rms_norm(a) * w_in]`, then optionally `y = rms_norm(h) * w_out` (and y's q8
    /// copy), per row.
    ResidualNorm(residual_norm::ResidualNormKernel),
    /// Optional per-head weighted RMS norm, then RoPE, in place, over q and optionally k;
    /// optionally k's finished heads and the v heads stored into a cache.
    HeadNormRope(head_norm_rope::HeadNormRopeKernel),
}

impl Kernel {
    /// Whether the kernel is a decode matvec (`matvec/matvec.wgsl`: the `QUADS` override,
    /// any workgroup size).
    pub fn is_matvec(self) -> bool {
        matches!(self, Kernel::Matvec(_))
    }

    /// The files, entry point and bindings of this kernel on a device with `caps`
    /// ([`KernelFamily::program_for`]).
    pub fn program_for(self, caps: &Caps) -> Program {
        self.family().program_for(caps)
    }

    /// Every program this kernel may use, one per device capability set
    /// ([`KernelFamily::programs`]).
    pub fn programs(self) -> Vec<Program> {
        self.family().programs()
    }

    /// The program that needs no optional feature ([`KernelFamily::program`]).
    pub fn program(self) -> Program {
        self.family().program()
    }

    /// The kernel's program name, for reports (`matvec_q4_k`, `rms_norm`, ...).
    pub fn name(self) -> String {
        self.program().name
    }

    /// WGSL `override` constants this variant sets (besides the pipeline key's).
    pub(crate) fn constants(self) -> Vec<(&'static str, f64)> {
        self.family().constants()
    }

    /// The pipeline keys its ops build this kernel with ([`KernelFamily::pipeline_keys`]).
    pub fn pipeline_keys(self) -> Vec<PipelineKey> {
        self.family().pipeline_keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::nvidia_caps;

    /// Every family lists variants, and every variant of [`Kernel::all`] has its programs
    /// from its family: `program` first among `programs`, and `program_for` one of them on
    /// every kind of device; and pipeline keys, its own.
    #[test]
    fn every_family_describes_its_kernels() {
        let all = Kernel::all();
        let mut families: Vec<_> = all.iter().map(std::mem::discriminant).collect();
        families.dedup();
        assert_eq!(
            families.len(),
            Kernel::FAMILIES,
            "a family lists no variant"
        );
        let plain = Caps {
            shader_f16: false,
            subgroup: false,
            subgroup_min_size: 0,
            subgroup_max_size: 0,
            timestamps: false,
            coop_f16: false,
        };
        let devices = [plain, nvidia_caps(false), nvidia_caps(true)];
        for k in all {
            let programs = k.programs();
            assert!(!programs.is_empty(), "{k:?}");
            let same = |a: &Program, b: &Program| a.name == b.name && a.source() == b.source();
            assert!(same(&k.program(), &programs[0]), "{k:?}");
            for caps in &devices {
                let p = k.program_for(caps);
                assert!(programs.iter().any(|q| same(q, &p)), "{k:?} on {caps:?}");
            }
            let keys = k.pipeline_keys();
            assert!(!keys.is_empty(), "{k:?} lists no pipeline key");
            assert!(keys.iter().all(|key| key.kernel == k), "{k:?}: {keys:?}");
        }
    }

    /// Every family has parity checks, and no two checks share a name (the tests find
    /// theirs by name).
    #[test]
    fn every_family_has_checks() {
        let families = Kernel::checks_by_family();
        assert_eq!(families.len(), Kernel::FAMILIES);
        for (family, checks) in &families {
            assert!(!checks.is_empty(), "{family} has no parity check");
        }
        let mut names: Vec<_> = families
            .iter()
            .flat_map(|(_, checks)| checks.iter().map(|c| c.name))
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "two checks share a name");
    }
}
