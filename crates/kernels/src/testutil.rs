//! Test helpers: the shared device; random data lives in [`crate::parity::data`].

use std::sync::OnceLock;

use crate::device::{Caps, Gpu};
pub use crate::parity::data::{random_f32, random_weight};

/// The device shared by the parity tests. With no adapter the tests fail, unless
/// `RULLAMA_NO_GPU_TESTS=1`, which makes them pass with a loud message instead.
pub fn gpu() -> Option<&'static Gpu> {
    static GPU: OnceLock<Result<Gpu, String>> = OnceLock::new();
    match GPU.get_or_init(|| Gpu::open().map_err(|e| e.to_string())) {
        Ok(g) => Some(g),
        Err(e) if std::env::var("RULLAMA_NO_GPU_TESTS").is_ok_and(|v| v == "1") => {
            static LOUD: std::sync::Once = std::sync::Once::new();
            // Straight to stderr: the test harness captures eprintln! of passing tests.
            LOUD.call_once(|| {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "\n{0}\n!! SKIPPING ALL GPU TESTS (RULLAMA_NO_GPU_TESTS=1): {e}\n{0}\n",
                    "!".repeat(78)
                );
            });
            None
        }
        Err(e) => panic!("{e}\n(set RULLAMA_NO_GPU_TESTS=1 to skip GPU tests)"),
    }
}

/// Another device on the tests' adapter (`RULLAMA_ADAPTER`), opened without `features`: the
/// paths a device lacking them takes. `None` where [`gpu`] is `None` (no adapter, allowed).
pub fn device_without(features: wgpu::Features) -> Option<Gpu> {
    gpu()?;
    let options = crate::OpenOptions {
        without: features,
        ..Default::default()
    };
    let filter = std::env::var("RULLAMA_ADAPTER").ok();
    Some(Gpu::open_with_options(filter.as_deref(), options).unwrap())
}

/// Runs the kernel parity check `name` for `cases` random cases and fails on any miss.
pub fn parity(name: &str, cases: usize, seed: u64) {
    let Some(gpu) = gpu() else { return };
    let check = crate::parity::checks()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no parity check {name:?}"));
    let r = check.run(gpu, cases, seed);
    if r.skipped.is_some() {
        note(&r.to_string());
    }
    assert!(r.passed(), "{r}");
}

/// A line on stderr that shows even for a passing test (the harness captures `eprintln!`):
/// what a test could not check on this adapter.
pub fn note(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "note: {line}");
}

/// The capabilities of an NVIDIA GPU (subgroups of 32), with or without cooperative
/// matrices: for the rules that depend on them, tested on any device.
pub fn nvidia_caps(coop_f16: bool) -> Caps {
    Caps {
        shader_f16: true,
        subgroup: true,
        subgroup_min_size: 32,
        subgroup_max_size: 32,
        timestamps: false,
        coop_f16,
    }
}

/// The device for a tensor-core kernel's body: the tensor cores where it has them, else
/// (lavapipe) the kernel's emulated coop ops (`emulation`, a file under shaders/), which need
/// SHADER_F16; `None` (with a note) where neither runs.
pub fn coop_body_device(test: &str, emulation: &str) -> Option<&'static Gpu> {
    let gpu = gpu()?;
    if gpu.caps.coop_f16 {
        return Some(gpu);
    }
    if !gpu.caps.shader_f16 {
        note(&format!(
            "{test} skipped: no SHADER_F16 for the emulated coop ops"
        ));
        return None;
    }
    note(&format!(
        "{test}: no cooperative matrices here; the kernel's body ran over the emulated coop \
         ops ({emulation}), not the tensor cores"
    ));
    Some(gpu)
}
