//! The GPU layer (see docs/KERNELS.md): a wgpu device with its real limits, a pipeline table
//! keyed by [`PipelineKey`], GPU tensors, and steps: lists of [`Op`] values built once into
//! dispatches (one uniform arena, cached bind groups) and replayed in one compute pass.
//! Every kernel in [`ops`] has a CPU reference and parity checks beside it, compiled with the
//! `parity` feature (and in the crate's own tests): `parity` is the registry that runs them.

pub mod device;
pub mod error;
pub mod format;
pub mod kernel;
pub mod layout;
pub mod op;
pub mod ops;
#[cfg(any(test, feature = "parity"))]
pub mod parity;
pub mod pipeline;
pub mod profile;
pub mod read_ring;
pub mod readback;
pub mod shader;
pub mod step;
pub mod tensor;
pub mod wait;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;

pub use device::{Caps, Gpu, OpenOptions};
pub use error::GpuError;
pub use format::GpuFormat;
pub use kernel::{Kernel, KernelFamily};
pub use op::{Op, grid_1d};
pub use ops::glu::Activation;
pub use ops::rope::RopeStyle;
pub use pipeline::PipelineKey;
pub use profile::{KernelTime, PROFILE_FEATURES, StepProfile};
pub use read_ring::{ReadRing, Ticket};
pub use readback::Readback;
pub use step::{OpId, Step, StepBuilder};
pub use tensor::{
    BufferId, Dtype, GpuBuffer, GpuTensor, GpuWeight, View, WeightChunk, WeightRows, WeightShape,
};
pub use wait::{Block, Wait, Yield};
