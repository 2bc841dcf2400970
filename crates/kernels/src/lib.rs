//! The GPU layer (see docs/ARCHITECTURE.md).
