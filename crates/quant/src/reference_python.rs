//! The reference we are checked against: the `gguf` Python package (written by the llama.cpp
//! authors), driven through a small script (`tests/dequant.py`, embedded here).
//!
//! Used by this crate's parity tests and by `cargo xtask parity --formats`. Every call runs
//! python once, exchanging raw little-endian files through a temporary directory. A missing
//! python, numpy or gguf is an error that says how to install them, never a silent pass.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use rullama_gguf::GgmlType;

/// The script, as shipped in `crates/quant/tests/dequant.py`.
pub const SCRIPT: &str = include_str!("../tests/dequant.py");

/// What to install when the reference is missing.
pub const INSTALL_HINT: &str = "pip install gguf==0.19.0 numpy";

/// Why the reference could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// The Python interpreter could not be started.
    #[error("cannot run {python:?} ({source}); install Python 3, then: {INSTALL_HINT}")]
    PythonMissing {
        /// The interpreter tried.
        python: OsString,
        /// Why it did not start.
        source: std::io::Error,
    },
    /// Python runs but cannot import `gguf` or `numpy`.
    #[error("the gguf/numpy Python packages are missing: {INSTALL_HINT}\n{stderr}")]
    PackagesMissing {
        /// What Python said.
        stderr: String,
    },
    /// The script exited with an error.
    #[error("the reference script failed ({status}):\n{stderr}")]
    Script {
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it said.
        stderr: String,
    },
    /// Writing the script's inputs or reading its outputs failed.
    #[error("{context}: {source}")]
    Io {
        /// Which file, doing what.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// The script answered something this side cannot parse.
    #[error("unexpected output from the reference script: {0}")]
    Output(String),
}

/// Versions and the types the reference can dequantize.
#[derive(Debug, Clone)]
pub struct ReferenceInfo {
    /// e.g. `gguf 0.19.0 numpy 2.4.6`.
    pub versions: String,
    /// Types `gguf.quants.dequantize` handles.
    pub dequantize: Vec<GgmlType>,
    /// Types `gguf.quants.quantize` handles.
    pub quantize: Vec<GgmlType>,
}

/// The first rows of one tensor, raw and as the reference dequantizes them.
#[derive(Debug, Clone)]
pub struct TensorSample {
    /// The tensor's name.
    pub name: String,
    /// The type id stored in the file.
    pub type_id: u32,
    /// Our type for `type_id`, `None` where we do not know the id.
    pub ggml_type: Option<GgmlType>,
    /// Values per row.
    pub row_len: usize,
    /// The sampled rows' bytes as stored.
    pub raw: Vec<u8>,
    /// `None` when the reference cannot dequantize this type.
    pub values: Option<Vec<f32>>,
}

/// Which tensors [`PythonReference::sample_tensors`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhichTensors {
    /// The first tensor (in file order) of each tensor type: one sample per type.
    FirstOfEachType,
    /// Every tensor in the file.
    All,
}

/// A handle on the Python reference: which interpreter, which script.
#[derive(Debug, Clone)]
pub struct PythonReference {
    python: OsString,
    script: Option<PathBuf>,
}

impl Default for PythonReference {
    fn default() -> Self {
        Self::new()
    }
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ReferenceError {
    let context = context.into();
    move |source| ReferenceError::Io { context, source }
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    let words = bytes.chunks_exact(4);
    words
        .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect()
}

fn read_f32(path: &Path) -> Result<Vec<f32>, ReferenceError> {
    Ok(f32s(
        &std::fs::read(path).map_err(io(path.display().to_string()))?,
    ))
}

impl PythonReference {
    /// `$PYTHON` (or `python3`) running the embedded script.
    pub fn new() -> Self {
        let python = std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into());
        PythonReference {
            python,
            script: None,
        }
    }

    /// Run the script at `path` instead of the embedded copy.
    pub fn with_script(mut self, path: impl Into<PathBuf>) -> Self {
        self.script = Some(path.into());
        self
    }

    /// Run the script with `args`; `dir` is the call's temporary directory.
    fn run(&self, dir: &Path, args: &[&OsStr]) -> Result<String, ReferenceError> {
        let script = match &self.script {
            Some(path) => path.clone(),
            None => {
                let path = dir.join("dequant.py");
                std::fs::write(&path, SCRIPT).map_err(io("writing the reference script"))?;
                path
            }
        };
        let output = Command::new(&self.python)
            .arg("-B")
            .arg(&script)
            .args(args)
            .output()
            .map_err(|source| ReferenceError::PythonMissing {
                python: self.python.clone(),
                source,
            })?;
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        match output.status.code() {
            Some(0) => Ok(String::from_utf8_lossy(&output.stdout).into_owned()),
            Some(3) => Err(ReferenceError::PackagesMissing { stderr }),
            _ => Err(ReferenceError::Script {
                status: output.status,
                stderr,
            }),
        }
    }

    fn temp_dir() -> Result<tempfile::TempDir, ReferenceError> {
        let dir = tempfile::Builder::new().prefix("rullama-ref-").tempdir();
        dir.map_err(io("creating a temp dir"))
    }

    /// Versions, and the types the reference supports that we have a type for.
    pub fn info(&self) -> Result<ReferenceInfo, ReferenceError> {
        let dir = Self::temp_dir()?;
        let out = self.run(dir.path(), &["info".as_ref()])?;
        let bad = |line: &str| ReferenceError::Output(line.to_string());
        let mut lines = out.lines();
        let versions = lines.next().ok_or_else(|| bad(&out))?.to_string();
        let (mut dequantize, mut quantize) = (Vec::new(), Vec::new());
        for line in lines {
            let (id, can_quantize) = line.split_once(' ').ok_or_else(|| bad(line))?;
            let id: u32 = id.parse().map_err(|_| bad(line))?;
            let Some(t) = GgmlType::from_id(id) else {
                continue;
            };
            dequantize.push(t);
            if can_quantize == "1" {
                quantize.push(t);
            }
        }
        Ok(ReferenceInfo {
            versions,
            dequantize,
            quantize,
        })
    }

    /// Write each job's input as `<job>.<input_ext>`, run `mode`, read back `<job>.<output_ext>`.
    fn exchange(
        &self,
        mode: &str,
        jobs: &[(GgmlType, Vec<u8>)],
        (input_ext, output_ext): (&str, &str),
    ) -> Result<Vec<Vec<u8>>, ReferenceError> {
        let dir = Self::temp_dir()?;
        let mut manifest = String::new();
        for (job, (t, input)) in jobs.iter().enumerate() {
            let path = dir.path().join(format!("{job}.{input_ext}"));
            std::fs::write(&path, input).map_err(io(path.display().to_string()))?;
            manifest.push_str(&format!("{job} {}\n", t.id()));
        }
        let manifest_path = dir.path().join("manifest.txt");
        std::fs::write(&manifest_path, manifest).map_err(io("writing the manifest"))?;
        self.run(dir.path(), &[mode.as_ref(), dir.path().as_os_str()])?;
        let output = |job| {
            let path = dir.path().join(format!("{job}.{output_ext}"));
            std::fs::read(&path).map_err(io(path.display().to_string()))
        };
        (0..jobs.len()).map(output).collect()
    }

    /// Dequantize each `(type, whole blocks)` job with `gguf.quants.dequantize`; one python
    /// run for all of them.
    pub fn dequantize(&self, jobs: &[(GgmlType, &[u8])]) -> Result<Vec<Vec<f32>>, ReferenceError> {
        let jobs: Vec<_> = jobs.iter().map(|&(t, bytes)| (t, bytes.to_vec())).collect();
        let out = self.exchange("blocks", &jobs, ("bin", "f32"))?;
        Ok(out.iter().map(|bytes| f32s(bytes)).collect())
    }

    /// Quantize each `(type, values)` job with `gguf.quants.quantize` (which follows
    /// llama.cpp's reference quantizers); one python run for all of them.
    pub fn quantize(&self, jobs: &[(GgmlType, &[f32])]) -> Result<Vec<Vec<u8>>, ReferenceError> {
        let le = |x: &[f32]| x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
        let jobs: Vec<_> = jobs.iter().map(|&(t, x)| (t, le(x))).collect();
        self.exchange("quantize", &jobs, ("f32", "bin"))
    }

    /// The first `rows` rows of tensors in the GGUF file at `path` (the first tensor of each
    /// type, or every tensor), read by `gguf.GGUFReader` (so not through our own parser) and
    /// dequantized by `gguf.quants`. `rows = usize::MAX` takes whole tensors.
    pub fn sample_tensors(
        &self,
        path: &Path,
        rows: usize,
        which: WhichTensors,
    ) -> Result<Vec<TensorSample>, ReferenceError> {
        let dir = Self::temp_dir()?;
        let rows = rows.min(i64::MAX as usize).to_string();
        let which: &OsStr = match which {
            WhichTensors::FirstOfEachType => "first".as_ref(),
            WhichTensors::All => "all".as_ref(),
        };
        let args = [
            "tensors".as_ref(),
            path.as_os_str(),
            dir.path().as_os_str(),
            rows.as_ref(),
            which,
        ];
        self.run(dir.path(), &args)?;
        let manifest = std::fs::read_to_string(dir.path().join("manifest.txt"))
            .map_err(io("reading the tensor manifest"))?;
        let mut samples = Vec::new();
        for line in manifest.lines() {
            let bad = || ReferenceError::Output(line.to_string());
            let mut fields = line.splitn(4, ' ');
            let mut next = || fields.next().ok_or_else(bad);
            let (job, type_id, row_len, name) = (next()?, next()?, next()?, next()?);
            let type_id: u32 = type_id.parse().map_err(|_| bad())?;
            let bin = dir.path().join(format!("{job}.bin"));
            let f32_path = dir.path().join(format!("{job}.f32"));
            samples.push(TensorSample {
                name: name.to_string(),
                type_id,
                ggml_type: GgmlType::from_id(type_id),
                row_len: row_len.parse().map_err(|_| bad())?,
                raw: std::fs::read(&bin).map_err(io(bin.display().to_string()))?,
                values: if f32_path.exists() {
                    Some(read_f32(&f32_path)?)
                } else {
                    None
                },
            });
        }
        Ok(samples)
    }
}
