//! The Python reference the format checks compare against: the llama.cpp authors' `gguf`
//! package (its dequantization) and numpy under it. `cargo xtask test` (the unit tests of the
//! formats) and `cargo xtask parity --formats` both install it here, so either runs on a fresh
//! machine.

use std::process::Command;

/// The `gguf` release whose dequantization the formats must equal bit for bit.
const GGUF_PY: &str = "gguf==0.19.0";

/// Install `gguf` 0.19.0 and numpy for python3 unless they are already there.
pub fn ensure_installed() -> Result<(), String> {
    let probe = "import importlib.metadata as m, numpy; \
                 assert m.version('gguf') == '0.19.0', m.version('gguf')";
    let ok = Command::new("python3")
        .args(["-c", probe])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Ok(());
    }
    eprintln!("installing the Python reference ({GGUF_PY}, numpy) with pip");
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
