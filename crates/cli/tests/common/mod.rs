//! What the CLI's end-to-end tests share: running the built binary and requiring a cached
//! test model. Each test file compiles its own copy (`mod common;`) and uses part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rullama_synth::{Tiny, tiny_model};

/// The built `rullama` with `args`, before it runs (for environment or extra arguments).
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rullama"));
    cmd.args(args);
    cmd
}

/// Runs `cmd`: (success, stdout, stderr), both streams UTF-8.
pub fn output(mut cmd: Command) -> (bool, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run rullama");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8 output");
    (status.success(), text(stdout), text(stderr))
}

/// `rullama ARGS`: (success, stdout, stderr).
pub fn rullama(args: &[&str]) -> (bool, String, String) {
    output(command(args))
}

/// The cached test model `name`'s path; fails the test with how to fetch it if it is missing.
pub fn cached(name: &str) -> PathBuf {
    rullama_gguf::store::cached_test_model(name)
        .unwrap_or_else(|| panic!("test model {name} is not cached: run `cargo xtask models`"))
}

/// The tiny synthetic model `tiny` (seed 7: the same bytes every run) in a temporary file,
/// removed when the handle drops.
pub fn tiny(tiny: Tiny) -> tempfile::TempPath {
    tiny_bytes(&tiny_model(tiny, 7))
}

/// `bytes` in a temporary `.gguf` file, removed when the handle drops.
pub fn tiny_bytes(bytes: &[u8]) -> tempfile::TempPath {
    let mut file = tempfile::Builder::new()
        .suffix(".gguf")
        .tempfile()
        .expect("a temporary file");
    std::io::Write::write_all(&mut file, bytes).expect("write the model");
    file.into_temp_path()
}

/// Runs `cmd` with stdin closed, killing it past `limit`: (exit code, stdout, stderr). A run
/// past the limit, or ended by a signal (an abort, a crash), fails the test: whatever the
/// input, the CLI ends with success or an error of its own.
pub fn bounded(mut cmd: Command, limit: Duration) -> (i32, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rullama");
    let start = Instant::now();
    while child.try_wait().expect("wait for rullama").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("rullama ran past {limit:?}: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("rullama's output");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    );
    let code = status
        .code()
        .unwrap_or_else(|| panic!("rullama ended by a signal ({status}): {stderr}"));
    assert!(!stderr.contains("panicked"), "{stderr}");
    (code, stdout, stderr)
}

/// `rullama ARGS` within `limit` and an address-space budget of `max_gib` GiB (`ulimit -v`),
/// so that an allocation the machine could not back fails inside the budget (where an
/// unchecked one would abort: a signal, which fails the test) on any machine.
pub fn rullama_within(args: &[&str], limit: Duration, max_gib: u64) -> (i32, String, String) {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -v {} && exec \"$0\" \"$@\"", max_gib << 20))
        .arg(env!("CARGO_BIN_EXE_rullama"))
        .args(args);
    bounded(cmd, limit)
}
