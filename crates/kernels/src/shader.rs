//! The table of WGSL programs: which files make each program, its entry point and the bindings
//! the Rust side binds. `cargo xtask wgsl` validates every program with naga and compares these
//! bindings with naga's reflection, so this table is the one source both sides share.
//!
//! WGSL has no `#include`; a program is the concatenation of its files, in order (module-scope
//! declarations may come in any order in WGSL, so a format file can use the skeleton's bindings).

use std::borrow::Cow;
use std::path::Path;

use crate::format::GpuFormat;

/// How a kernel sees one binding. Binding `i` of group 0 is `bindings[i]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BindingKind {
    /// The per-op parameter struct, bound with a dynamic offset into the step's uniform arena.
    Uniform,
    /// A storage buffer the kernel only reads (`var<storage, read>`).
    StorageRead,
    /// A storage buffer the kernel writes (`var<storage, read_write>`).
    StorageReadWrite,
    /// No binding at this number: a program whose optional binding (a bias at 5) is left out
    /// while later numbers are used keeps those numbers. The op passes no buffer for it.
    Absent,
}

/// The binding numbers a program binds a buffer at (every kind but [`BindingKind::Absent`]),
/// with their kinds.
pub fn bound(kinds: &[BindingKind]) -> impl Iterator<Item = (u32, BindingKind)> + '_ {
    (0u32..)
        .zip(kinds.iter().copied())
        .filter(|&(_, k)| k != BindingKind::Absent)
}

/// One `.wgsl` file under `shaders/`, compiled into the crate.
#[derive(Debug)]
pub struct ShaderFile {
    /// Path relative to `shaders/`.
    pub path: &'static str,
    /// Its text as compiled in ([`ShaderFile::text`] may read a replacement).
    pub source: &'static str,
}

macro_rules! shader_file {
    ($path:literal) => {
        $crate::shader::ShaderFile {
            path: $path,
            source: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../shaders/",
                $path
            )),
        }
    };
}
pub(crate) use shader_file;

impl ShaderFile {
    /// The file's text: the compiled-in copy, or where `RULLAMA_SHADER_DIR` names a folder
    /// laid out like `shaders/` that has this file, that folder's copy (kernel tuning on a
    /// remote GPU: variants tried in one run without rebuilding the binary). Everything that
    /// reads a shader's text goes through here, so a replaced file is seen whole.
    pub fn text(&self) -> Cow<'static, str> {
        std::env::var_os(SHADER_DIR_VAR)
            .and_then(|dir| std::fs::read_to_string(Path::new(&dir).join(self.path)).ok())
            .map_or(Cow::Borrowed(self.source), Cow::Owned)
    }
}

/// Byte helpers and the decoded-unit buffer shared by every kernel that reads quantized weights.
pub static BLOCKS: ShaderFile = shader_file!("common/blocks.wgsl");
/// The split-output part of the weight kernels' parameters (a field of their `Params`).
pub static SPLIT_PARAMS: ShaderFile = shader_file!("common/split_params.wgsl");
/// The cooperative-matrix types and product of the tensor-core kernels (opens their programs
/// with its `enable` directives); each kernel's `coop_io.wgsl` adds its loads and stores.
pub static COOP_OPS: ShaderFile = shader_file!("common/coop_ops.wgsl");
/// The same in plain arithmetic, with each kernel's `coop_io_emul.wgsl`: a tensor-core
/// kernel's body runs on devices without tensor cores (tests).
pub static COOP_EMUL: ShaderFile = shader_file!("common/coop_emul.wgsl");

/// The bindings of every kernel that reads a weight chunk (matvec, matmul, embedding gather):
/// params, the chunk as vec4s (`w`), an input, the output, and the chunk again as words
/// (`w_words` in common/blocks.wgsl). The op passes the chunk's buffer at 1 and 4.
pub const WEIGHT_KERNEL_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];

/// Environment variable naming a folder of shader files that replace the compiled-in ones
/// (see [`ShaderFile::text`]).
pub const SHADER_DIR_VAR: &str = "RULLAMA_SHADER_DIR";

/// One compute program: files concatenated in order, one entry point, its bindings.
#[derive(Debug, Clone)]
pub struct Program {
    /// The kernel's name (`matvec_q4_k`).
    pub name: String,
    /// Its files, concatenated in this order (a format's decoder, then the kernel).
    pub files: Vec<&'static ShaderFile>,
    /// The entry point.
    pub entry: &'static str,
    /// Its bindings, by number.
    pub bindings: &'static [BindingKind],
    /// `size_of` the Rust parameter struct bound at binding 0 (checked against WGSL's layout).
    pub params_size: usize,
}

impl Program {
    /// The WGSL source handed to wgpu: its files' texts ([`ShaderFile::text`]) in order.
    pub fn source(&self) -> String {
        let mut s = String::new();
        for f in &self.files {
            let text = f.text();
            s.push_str(&text);
            if !text.ends_with('\n') {
                s.push('\n');
            }
        }
        s
    }

    /// Maps a 1-based line of [`Program::source`] to (file path, 1-based line in that file).
    pub fn locate(&self, line: usize) -> (&'static str, usize) {
        let mut first = 1;
        for f in &self.files {
            let n = f.text().lines().count().max(1);
            if line < first + n {
                return (f.path, line - first + 1);
            }
            first += n;
        }
        (self.files.last().map_or("?", |f| f.path), line)
    }
}

/// Every program the crate can build: one per kernel and weight format, and the bench's
/// [`coop_peak_program`].
pub fn all_programs() -> Vec<Program> {
    crate::kernel::Kernel::all()
        .into_iter()
        .flat_map(|k| k.programs())
        .chain([coop_peak_program()])
        .collect()
}

/// The kernels bench's measure of the tensor cores themselves (`coop_peak/...`): no kernel
/// runs it, but it is WGSL like the rest, so it lives in `shaders/` and `cargo xtask wgsl`
/// checks it. Its overrides `ITERS` and `MODE` pick the work; `Params` is 16 bytes.
pub fn coop_peak_program() -> Program {
    static BODY: ShaderFile = shader_file!("bench/coop_peak.wgsl");
    Program {
        name: "coop_peak".into(),
        files: vec![&COOP_OPS, &BODY],
        entry: "main",
        bindings: &[BindingKind::Uniform, BindingKind::StorageReadWrite],
        params_size: 16,
    }
}

/// Every shader file the crate compiles in (each belongs to at least one program).
pub fn all_files() -> Vec<&'static ShaderFile> {
    let mut files: Vec<&'static ShaderFile> = Vec::new();
    for p in all_programs() {
        for f in p.files {
            if !files.iter().any(|g| g.path == f.path) {
                files.push(f);
            }
        }
    }
    files
}

/// Weight formats with a GPU decoder; kept here so the table lists every (kernel, format).
pub(crate) fn weight_formats() -> &'static [GpuFormat] {
    &GpuFormat::ALL
}
