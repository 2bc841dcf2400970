//! `cargo xtask test`: the whole suite, exactly as CI runs it (`.ci/run` calls this).
//!
//! Order: the Python reference the format tests compare against, the real models, formatting
//! and lints, shader validation, every test in the workspace, then the parity suites. Each step stops the run on failure.

use std::path::Path;
use std::process::Command;

/// The llama.cpp authors' Python package whose dequantization the format tests must equal.
const GGUF_PY: &str = "gguf==0.19.0";

pub fn run(root: &Path, lint: bool) -> Result<(), String> {
    ensure_python_reference()?;
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

/// Install `gguf` 0.19.0 and numpy for python3 unless they are already there.
fn ensure_python_reference() -> Result<(), String> {
    let probe = "import importlib.metadata as m, numpy; \
                 assert m.version('gguf') == '0.19.0', m.version('gguf')";
    let ok = Command::new("python3")
        .args(["-c", probe])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Ok(());
    }
    eprintln!("installing the Python reference ({GGUF_PY}, numpy)");
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            GGUF_PY,
            "numpy",
        ])
        .status()
        .map_err(|e| format!("cannot run python3 -m pip ({e}): install Python 3 with pip"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("pip install {GGUF_PY} numpy failed ({status})"))
    }
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
