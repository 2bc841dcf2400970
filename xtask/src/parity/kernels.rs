//! `cargo xtask parity --kernels`: every GPU kernel against its CPU reference (f64) on the
//! adapter `RULLAMA_ADAPTER` names (or the best one), with more random cases than the unit
//! tests. The checks themselves live in `rullama_kernels::parity` (the unit tests run the same
//! code); this prints one row per check: cases, max |gpu - ref|, max error / bound, the bound,
//! pass. `RULLAMA_PARITY_CASES` (default 40) and `RULLAMA_PARITY_SEED` (default 1) override
//! the count and the seed; case i of a check draws from seed + i, so a failure is replayable.
//! `RULLAMA_PARITY_ONLY` (check names, comma-separated) runs those checks alone (a shader
//! variant tried on a remote GPU through `RULLAMA_SHADER_DIR`, say).

use rullama_kernels::Gpu;
use rullama_kernels::parity::checks;

fn env_num(name: &str, default: u64) -> Result<u64, String> {
    match std::env::var(name) {
        Ok(v) => v.parse().map_err(|e| format!("{name}={v:?}: {e}")),
        Err(_) => Ok(default),
    }
}

/// Runs every kernel check; returns the number of checks that failed.
pub fn run() -> Result<usize, String> {
    let cases = env_num("RULLAMA_PARITY_CASES", 40)? as usize;
    let seed = env_num("RULLAMA_PARITY_SEED", 1)?;
    let gpu = Gpu::open().map_err(|e| e.to_string())?;
    println!(
        "kernel parity on {} ({:?}, {:?}), {cases} cases per check, seed {seed}",
        gpu.info.name, gpu.info.backend, gpu.info.device_type
    );
    println!(
        "{:<16} {:>6} {:>12} {:>10}  {:<58} result",
        "kernel", "cases", "max abs err", "err/bound", "tolerance"
    );
    let only = std::env::var("RULLAMA_PARITY_ONLY").ok();
    let picked = |name: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|n| n == name))
    };
    let mut failures = 0;
    for check in checks().into_iter().filter(|c| picked(c.name)) {
        let t = std::time::Instant::now();
        let r = check.run(&gpu, cases, seed);
        let pass = r.passed();
        println!(
            "{:<16} {:>6} {:>12.3e} {:>10.4}  {:<58} {} ({:.1} s)",
            r.name,
            r.cases,
            r.errors.max_abs,
            r.errors.max_ratio,
            r.tolerance,
            match (pass, r.skipped) {
                (_, Some(_)) => "skip",
                (true, None) => "pass",
                (false, None) => "FAIL",
            },
            t.elapsed().as_secs_f64()
        );
        if !pass {
            failures += 1;
        }
        if !pass || r.skipped.is_some() {
            println!("    {r}");
        }
    }
    Ok(failures)
}
