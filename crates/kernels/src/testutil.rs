//! Test helpers: the shared device; random data lives in [`crate::parity::data`].

use std::sync::OnceLock;

use crate::device::Gpu;
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
