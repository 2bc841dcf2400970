//! The GPU layer (see docs/KERNELS.md): a wgpu device with its real limits, a pipeline table
//! keyed by [`PipelineKey`], GPU tensors, and steps: lists of [`Op`] values built once into
//! dispatches (one uniform arena, cached bind groups) and replayed in one compute pass.
//! Every kernel in [`ops`] has a CPU reference and parity checks beside it, compiled with the
//! `parity` feature (and in the crate's own tests): `parity` is the registry that runs them.
//!
//! ```rust
//! use rullama_kernels::ops::elementwise;
//! use rullama_kernels::{Gpu, GpuTensor, Readback, StepBuilder};
//!
//! // Any wgpu adapter will do (Vulkan, Metal, DX12; Mesa's lavapipe on a machine without a
//! // GPU). Without one there is nothing to run.
//! let Ok(gpu) = Gpu::open() else { return Ok(()) };
//! let a = GpuTensor::from_f32(&gpu, &[4], &[1.0, 2.0, 3.0, 4.0]);
//! let b = GpuTensor::from_f32(&gpu, &[4], &[10.0; 4]);
//! // A step is built once (pipelines, one uniform arena, bind groups), then replayed.
//! let mut builder = StepBuilder::new();
//! builder.push(elementwise::add_inplace((&a).into(), (&b).into(), 4)?);
//! let mut step = builder.build(&gpu);
//! let mut out = [0f32; 4];
//! Readback::new(&gpu, 16).run_and_read(&gpu, &mut step, &a, 0, &mut out)?;
//! assert_eq!(out, [11.0, 12.0, 13.0, 14.0]);
//! # Ok::<(), rullama_kernels::GpuError>(())
//! ```

#![warn(missing_docs)]

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
mod decode_tests;
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
