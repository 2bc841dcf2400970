//! The matvec's kernel family: one skeleton (`matvec/matvec.wgsl`) whose variants differ in
//! their input, dot and store files.

use crate::device::Caps;
use crate::format::GpuFormat;
use crate::kernel::KernelFamily;
use crate::ops::epilogue::Epilogue;
use crate::ops::glu::Activation;
#[cfg(any(test, feature = "parity"))]
use crate::parity::Check;
use crate::pipeline::PipelineKey;
use crate::shader::Program;

use super::{
    Addend, InputKind, Store, assemble, checked_lanes, input_reads, q8_supported, whole_block_rows,
};

/// A decode matvec kernel: the weight's format, what it multiplies and what it stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatvecKernel {
    /// `y = W x [+ bias]`, into one output or split over several.
    Plain(GpuFormat, Epilogue),
    /// `y = W (act(gate) * up)`: the GLU computed as the input is read.
    Glu(GpuFormat, Activation),
    /// `y = W x' [+ bias]` with x' a q8 vector (two int8 digits per input, blocks of 32 with
    /// f32 scales), integer dot products; only for [`q8_supported`] formats.
    Q8(GpuFormat, Epilogue),
    /// `y = W x [+ bias]` with x = rms_norm(h + a') computed by every workgroup (and h's
    /// update stored), a' = a or rms_norm(a) (the [`Addend`]): a decode step's residual_norm
    /// folded into its product.
    Norm(GpuFormat, Epilogue, Addend),
    /// `y = act(W_gate x) * (W_up x)` (the GLU epilogue: gate|up stacked, the GLU stored)
    /// with x a vector (`InputKind::Plain`), a q8 vector (`InputKind::Q8`), a norm input or
    /// a scaled input.
    GluOut(GpuFormat, InputKind, Activation),
    /// `y = W x [+ bias]` with x = z / rms(h') from what a residual epilogue stored (z and
    /// the partial sums of h'^2; [`super::ScaledInput`]).
    Scaled(GpuFormat, Epilogue),
    /// `a = W x` with the residual epilogue: h += a row by row, z = h * w_out and the partial
    /// sums of h^2 stored ([`super::matvec_residual`]).
    Residual(GpuFormat),
}

impl MatvecKernel {
    /// The program, with the subgroup reduction or without. Only the input, dot and store
    /// files differ between variants: one skeleton. A GLU input has no bias or split
    /// epilogue (its `up` takes binding 5, the bias's; no model stacks down projections).
    fn program_with(self, subgroup: bool) -> Program {
        let (f, input, store) = self.files();
        assemble(f, input, store, subgroup)
    }

    /// The weight's format, the input and the store the program is assembled from.
    fn files(self) -> (GpuFormat, InputKind, Store) {
        match self {
            MatvecKernel::Plain(f, out) => (f, InputKind::Plain, Store::Rows(out)),
            MatvecKernel::Glu(f, _) => (f, InputKind::Glu, Store::Rows(Epilogue::STORE)),
            MatvecKernel::Q8(f, out) => (f, InputKind::Q8, Store::Rows(out)),
            MatvecKernel::Norm(f, out, addend) => (f, InputKind::Norm(addend), Store::Rows(out)),
            MatvecKernel::GluOut(f, input, _) => (f, input, Store::Glu),
            MatvecKernel::Scaled(f, out) => (f, InputKind::Scaled, Store::Rows(out)),
            MatvecKernel::Residual(f) => (f, InputKind::Plain, Store::Residual),
        }
    }
}

impl KernelFamily for MatvecKernel {
    fn variants() -> Vec<MatvecKernel> {
        let acts = [Activation::GeluTanh, Activation::Silu];
        let mut all = Vec::new();
        for &f in crate::shader::weight_formats() {
            all.extend(Epilogue::ALL.map(|out| MatvecKernel::Plain(f, out)));
            all.extend(acts.map(|act| MatvecKernel::Glu(f, act)));
            if q8_supported(f) {
                all.extend(Epilogue::ALL.map(|out| MatvecKernel::Q8(f, out)));
            }
            for addend in Addend::ALL {
                all.extend(Epilogue::ALL.map(|out| MatvecKernel::Norm(f, out, addend)));
            }
            all.extend(Epilogue::ALL.map(|out| MatvecKernel::Scaled(f, out)));
            all.push(MatvecKernel::Residual(f));
            for act in acts {
                let mut inputs = vec![InputKind::Plain];
                inputs.extend(Addend::ALL.map(InputKind::Norm));
                inputs.push(InputKind::Scaled);
                if q8_supported(f) {
                    inputs.push(InputKind::Q8);
                }
                all.extend(inputs.into_iter().map(|i| MatvecKernel::GluOut(f, i, act)));
            }
        }
        all
    }

    fn program(self) -> Program {
        self.program_with(false)
    }

    fn programs(self) -> Vec<Program> {
        vec![self.program_with(false), self.program_with(true)]
    }

    fn program_for(self, caps: &Caps) -> Program {
        self.program_with(caps.subgroup)
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        match self {
            MatvecKernel::Glu(f, a) => vec![("ACT", a.code()), partial_units(f)],
            MatvecKernel::Plain(f, _) | MatvecKernel::Residual(f) => vec![partial_units(f)],
            MatvecKernel::Norm(f, _, _) => vec![x_reads(f)],
            // x_q8.wgsl and x_scaled.wgsl have no PARTIAL_UNITS (rows of whole blocks of 32).
            MatvecKernel::GluOut(_, InputKind::Q8 | InputKind::Scaled, a) => {
                vec![("ACT", a.code())]
            }
            MatvecKernel::GluOut(f, InputKind::Norm(_), a) => vec![("ACT", a.code()), x_reads(f)],
            MatvecKernel::GluOut(f, _, a) => vec![("ACT", a.code()), partial_units(f)],
            MatvecKernel::Q8(..) | MatvecKernel::Scaled(..) => Vec::new(),
        }
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        let (f, input, _) = self.files();
        checked_lanes(f, input)
            .into_iter()
            .map(|l| l.key(self))
            .collect()
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<Check> {
        super::parity::checks()
    }
}

/// matvec/x_norm.wgsl's `X_READS` override for weights of format `f`.
fn x_reads(f: GpuFormat) -> (&'static str, f64) {
    ("X_READS", f64::from(input_reads(f)))
}

/// The matvec input files' `PARTIAL_UNITS` override for weights of format `f`.
fn partial_units(f: GpuFormat) -> (&'static str, f64) {
    ("PARTIAL_UNITS", f64::from(u8::from(!whole_block_rows(f))))
}
