//! `cargo xtask test`: the whole suite, exactly as CI runs it (`.ci/run` calls this).
//!
//! Order: the Python reference the format tests compare against, the real models, formatting
//! and lints, shader validation, every test in the workspace, then the parity suites. Each step stops the run on failure.

use std::path::Path;
use std::process::Command;

pub fn run(root: &Path, lint: bool) -> Result<(), String> {
    crate::python_ref::ensure_installed()?;
    crate::models::run(root, &[])?;
    if lint {
        cargo(root, &["fmt", "--all", "--check"])?;
        cargo(
            root,
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        )?;
    }
    eprintln!("==> cargo xtask wgsl");
    crate::wgsl::run(root)?;
    cargo(root, &["test", "--workspace"])?;
    eprintln!("==> cargo xtask parity");
    crate::parity::run(root, &crate::parity::Args::default())
}

fn cargo(root: &Path, args: &[&str]) -> Result<(), String> {
    eprintln!("==> cargo {}", args.join(" "));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(args)
        .current_dir(root)
        .status()
        .map_err(|e| format!("running cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo {} failed ({status})", args.join(" ")))
    }
}
