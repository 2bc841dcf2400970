//! What the CLI's end-to-end tests share: running the built binary and requiring a cached
//! test model. Each test file compiles its own copy (`mod common;`) and uses part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

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
