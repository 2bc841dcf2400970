//! Where model files live: a path, an Ollama name, or a short name of a cached test model.
//!
//! Ollama keeps `$OLLAMA_MODELS` (default `~/.ollama/models`) as
//! `manifests/<registry>/<namespace>/<model>/<tag>` (JSON listing layers by media type and
//! digest) and `blobs/sha256-<hex>`. The layer of media type
//! `application/vnd.ollama.image.model` is the GGUF file itself, so resolving a name is two
//! file reads and no copying. Layers of `application/vnd.ollama.image.adapter` (a
//! Modelfile's `ADAPTER`) are LoRA adapters as llama.cpp LoRA GGUFs, which Ollama applies
//! with the model at scale 1: [`ResolvedModel::adapters`].

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A real model the project tests against, fetched by `cargo xtask models` into
/// [`models_cache_dir`]. `data/models.toml` says how each is fetched; an xtask test keeps the
/// two lists in step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownModel {
    /// Short name accepted wherever a model is asked for (`rullama run gemma3-270m`).
    pub name: &'static str,
    /// File name inside the cache directory.
    pub file: &'static str,
    /// Its size, checked after fetching.
    pub bytes: u64,
    /// Its SHA-256, hex, checked after fetching.
    pub sha256: &'static str,
}

/// The test models: one per architecture family the tests cover.
pub const KNOWN_MODELS: &[KnownModel] = &[
    KnownModel {
        name: "gemma3-270m",
        file: "gemma-3-270m-q4_k_m.gguf",
        bytes: 253_113_024,
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    },
    KnownModel {
        name: "smollm2-135m",
        file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        bytes: 98_362_432,
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    },
    KnownModel {
        name: "qwen2.5-0.5b",
        file: "qwen2.5-coder-0.5b-instruct.gguf",
        bytes: 491_400_064,
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    },
];

/// The model the README's first command runs.
pub const DEFAULT_MODEL: &str = "gemma3-270m";

const OLLAMA_MODEL_LAYER: &str = "application/vnd.ollama.image.model";
const OLLAMA_ADAPTER_LAYER: &str = "application/vnd.ollama.image.adapter";

/// Why a model argument names no file; each says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A known test model whose file is not in the cache yet.
    #[error(
        "`{name}` is a known test model but {path} does not exist; run `cargo xtask models` to fetch it"
    )]
    NotFetched {
        /// Its short name.
        name: String,
        /// Where its file should be.
        path: PathBuf,
    },
    /// Neither a file, nor a known test model, nor an Ollama model that is pulled.
    #[error(
        "no model `{arg}`: it is not a file, not a known test model ({known}), and no Ollama manifest exists at {manifest}"
    )]
    NotFound {
        /// What was asked for.
        arg: String,
        /// The known test models' names, joined for the message.
        known: String,
        /// Where its Ollama manifest would be.
        manifest: PathBuf,
    },
    /// An Ollama manifest that cannot be read or parsed, has no model layer, or names a
    /// model or adapter layer by a digest that is not `sha256:<64 hex>`.
    #[error("Ollama manifest {path}: {reason}")]
    BadManifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An Ollama manifest whose model or adapter blob is absent (a pull that did not finish).
    #[error(
        "Ollama manifest {manifest} names blob {blob}, which does not exist (is the download complete?)"
    )]
    MissingBlob {
        /// The manifest.
        manifest: PathBuf,
        /// The blob it names.
        blob: PathBuf,
    },
    /// No `HOME` to find the default directories under, and no variable naming them.
    #[error("cannot tell where the home directory is: set HOME, RULLAMA_MODELS or OLLAMA_MODELS")]
    NoHome,
    /// A model path, or the blob a manifest names, exists but is not a file.
    #[error("{path} is a directory, not a GGUF file")]
    Directory {
        /// The directory.
        path: PathBuf,
    },
}

/// How a model argument was resolved, for messages such as `inspect`'s header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// The argument was a path to a file.
    Path,
    /// A known test model in the cache.
    Cached {
        /// Its short name.
        name: &'static str,
    },
    /// An Ollama model: its blob.
    Ollama {
        /// The full name it resolved as.
        name: OllamaName,
    },
}

/// A model argument resolved to a GGUF file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedModel {
    /// The GGUF file.
    pub path: PathBuf,
    /// How the argument was read.
    pub source: ModelSource,
    /// LoRA adapters that come with the model (an Ollama model's adapter layers, in the
    /// manifest's order), to apply at scale 1; empty for a path or a test model.
    pub adapters: Vec<PathBuf>,
}

/// `$RULLAMA_MODELS`, else `~/.cache/rullama/models`.
pub fn models_cache_dir() -> Result<PathBuf, StoreError> {
    if let Some(dir) = std::env::var_os("RULLAMA_MODELS") {
        return Ok(PathBuf::from(dir));
    }
    home_dir().map(|h| h.join(".cache/rullama/models"))
}

/// `$OLLAMA_MODELS`, else `~/.ollama/models`.
pub fn ollama_models_dir() -> Result<PathBuf, StoreError> {
    if let Some(dir) = std::env::var_os("OLLAMA_MODELS") {
        return Ok(PathBuf::from(dir));
    }
    home_dir().map(|h| h.join(".ollama/models"))
}

fn home_dir() -> Result<PathBuf, StoreError> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or(StoreError::NoHome)
}

/// The known test model called `name`, if there is one.
pub fn known_model(name: &str) -> Option<&'static KnownModel> {
    KNOWN_MODELS.iter().find(|m| m.name == name)
}

/// The cached file of a known test model, if it has been fetched.
pub fn cached_test_model(name: &str) -> Option<PathBuf> {
    let model = known_model(name)?;
    let path = models_cache_dir().ok()?.join(model.file);
    path.is_file().then_some(path)
}

/// Resolve what a user typed as MODEL: an existing file, a known test model's short name, or an
/// Ollama name looked up under [`ollama_models_dir`].
pub fn resolve(arg: &str) -> Result<ResolvedModel, StoreError> {
    let as_path = Path::new(arg);
    if as_path.is_file() {
        return Ok(ResolvedModel {
            path: as_path.to_path_buf(),
            source: ModelSource::Path,
            adapters: Vec::new(),
        });
    }

    if let Some(model) = known_model(arg) {
        let path = models_cache_dir()?.join(model.file);
        if !path.is_file() {
            return Err(StoreError::NotFetched {
                name: arg.to_string(),
                path,
            });
        }
        return Ok(ResolvedModel {
            path,
            source: ModelSource::Cached { name: model.name },
            adapters: Vec::new(),
        });
    }
    match resolve_ollama(arg, &ollama_models_dir()?) {
        // Not an Ollama model either: a directory was meant as a path (`.`, `models/`).
        Err(StoreError::NotFound { .. }) if as_path.is_dir() => Err(StoreError::Directory {
            path: as_path.to_path_buf(),
        }),
        other => other,
    }
}

/// An Ollama model reference, `[registry/][namespace/]model[:tag]`, with Ollama's defaults
/// filled in (`registry.ollama.ai`, `library`, `latest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OllamaName {
    /// `registry.ollama.ai` unless given.
    pub registry: String,
    /// `library` unless given.
    pub namespace: String,
    /// The model (`gemma3`).
    pub model: String,
    /// `latest` unless given (`270m`).
    pub tag: String,
}

impl OllamaName {
    /// Parse a name; `None` when it cannot be an Ollama name (empty parts, `..`, too many `/`).
    pub fn parse(name: &str) -> Option<OllamaName> {
        let (path, tag) = match name.rsplit_once(':') {
            // A colon inside the registry part (`host:port/...`) is not a tag separator.
            Some((path, tag)) if !tag.contains('/') => (path, tag),
            _ => (name, "latest"),
        };
        let parts: Vec<&str> = path.split('/').collect();
        let (registry, namespace, model) = match parts.as_slice() {
            [model] => ("registry.ollama.ai", "library", *model),
            [namespace, model] => ("registry.ollama.ai", *namespace, *model),
            [registry, namespace, model] => (*registry, *namespace, *model),
            _ => return None,
        };
        let valid = |s: &str| !s.is_empty() && s != "." && s != ".." && !s.contains('\\');
        if ![registry, namespace, model, tag].into_iter().all(valid) {
            return None;
        }
        Some(OllamaName {
            registry: registry.to_string(),
            namespace: namespace.to_string(),
            model: model.to_string(),
            tag: tag.to_string(),
        })
    }

    /// The manifest's path under an Ollama models directory.
    pub fn manifest_path(&self, root: &Path) -> PathBuf {
        root.join("manifests")
            .join(&self.registry)
            .join(&self.namespace)
            .join(&self.model)
            .join(&self.tag)
    }
}

impl std::fmt::Display for OllamaName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}/{}:{}",
            self.registry, self.namespace, self.model, self.tag
        )
    }
}

#[derive(Deserialize)]
struct Manifest {
    layers: Vec<Layer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Layer {
    media_type: String,
    digest: String,
}

/// Resolve an Ollama name against the models directory `root`.
pub fn resolve_ollama(arg: &str, root: &Path) -> Result<ResolvedModel, StoreError> {
    let not_found = |manifest: PathBuf| StoreError::NotFound {
        arg: arg.to_string(),
        known: KNOWN_MODELS
            .iter()
            .map(|m| m.name)
            .collect::<Vec<_>>()
            .join(", "),
        manifest,
    };
    let Some(name) = OllamaName::parse(arg) else {
        return Err(not_found(root.join("manifests")));
    };
    let manifest = name.manifest_path(root);
    let text = match std::fs::read_to_string(&manifest) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found(manifest)),
        Err(e) => {
            return Err(StoreError::BadManifest {
                path: manifest,
                reason: e.to_string(),
            });
        }
    };
    let bad = |reason: String| StoreError::BadManifest {
        path: manifest.clone(),
        reason,
    };
    let parsed: Manifest = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let layer = parsed
        .layers
        .iter()
        .find(|l| l.media_type == OLLAMA_MODEL_LAYER)
        .ok_or_else(|| bad(format!("no layer of media type {OLLAMA_MODEL_LAYER}")))?;
    let path = blob_path(root, &manifest, layer, "model")?;
    let adapters = parsed
        .layers
        .iter()
        .filter(|l| l.media_type == OLLAMA_ADAPTER_LAYER)
        .map(|l| blob_path(root, &manifest, l, "adapter"))
        .collect::<Result<_, _>>()?;
    Ok(ResolvedModel {
        path,
        source: ModelSource::Ollama { name },
        adapters,
    })
}

/// The blob of `layer` (a `what` layer of `manifest`): a `sha256:<64 hex>` digest naming a
/// file under `root/blobs`.
fn blob_path(
    root: &Path,
    manifest: &Path,
    layer: &Layer,
    what: &str,
) -> Result<PathBuf, StoreError> {
    let hex = layer
        .digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| StoreError::BadManifest {
            path: manifest.to_path_buf(),
            reason: format!(
                "{what} layer digest `{}` is not sha256:<64 hex>",
                layer.digest
            ),
        })?;
    let blob = root.join("blobs").join(format!("sha256-{hex}"));
    if blob.is_dir() {
        return Err(StoreError::Directory { path: blob });
    }
    if !blob.is_file() {
        return Err(StoreError::MissingBlob {
            manifest: manifest.to_path_buf(),
            blob,
        });
    }
    Ok(blob)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ollama_names_get_ollamas_defaults() {
        let n = OllamaName::parse("gemma3:270m").unwrap();
        assert_eq!(n.to_string(), "registry.ollama.ai/library/gemma3:270m");
        let n = OllamaName::parse("library/qwen2.5:0.5b").unwrap();
        assert_eq!(n.to_string(), "registry.ollama.ai/library/qwen2.5:0.5b");
        let n = OllamaName::parse("hf.co/bartowski/model").unwrap();
        assert_eq!(n.to_string(), "hf.co/bartowski/model:latest");
        let n = OllamaName::parse("localhost:5000/me/m").unwrap();
        assert_eq!(
            (n.registry.as_str(), n.tag.as_str()),
            ("localhost:5000", "latest")
        );
        assert_eq!(OllamaName::parse("a/b/c/d"), None);
        assert_eq!(OllamaName::parse("../x"), None);
        assert_eq!(OllamaName::parse(""), None);
    }

    fn write_store(root: &Path, layers: &str) {
        let dir = root.join("manifests/registry.ollama.ai/library/gemma3");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("270m"),
            format!(r#"{{"schemaVersion":2,"layers":[{layers}]}}"#),
        )
        .unwrap();
        std::fs::create_dir_all(root.join("blobs")).unwrap();
    }

    #[test]
    fn resolves_the_model_layer_to_its_blob() {
        let root = tempfile::tempdir().unwrap();
        let hex = "ab".repeat(32);
        write_store(
            root.path(),
            &format!(
                r#"{{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:{}"}},
                   {{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:{hex}"}}"#,
                "cd".repeat(32)
            ),
        );
        let blob = root.path().join(format!("blobs/sha256-{hex}"));
        std::fs::write(&blob, b"GGUF").unwrap();
        let resolved = resolve_ollama("gemma3:270m", root.path()).unwrap();
        assert_eq!(resolved.path, blob);
        assert!(matches!(resolved.source, ModelSource::Ollama { .. }));
        assert!(resolved.adapters.is_empty());
    }

    /// A Modelfile's `ADAPTER` layers come with the model, in the manifest's order; one whose
    /// blob is missing or whose digest is bad is an error, as the model's would be.
    #[test]
    fn adapter_layers_come_with_the_model() {
        let root = tempfile::tempdir().unwrap();
        let (model, a1, a2) = ("ab".repeat(32), "01".repeat(32), "02".repeat(32));
        let layer = |t: &str, hex: &str| {
            format!(r#"{{"mediaType":"application/vnd.ollama.image.{t}","digest":"sha256:{hex}"}}"#)
        };
        let layers = [
            layer("adapter", &a2),
            layer("model", &model),
            layer("adapter", &a1),
        ];
        write_store(root.path(), &layers.join(","));
        for hex in [&model, &a1] {
            std::fs::write(root.path().join(format!("blobs/sha256-{hex}")), b"GGUF").unwrap();
        }
        let err = resolve_ollama("gemma3:270m", root.path()).unwrap_err();
        assert!(
            matches!(&err, StoreError::MissingBlob { blob, .. }
            if blob.ends_with(format!("sha256-{a2}"))),
            "{err}"
        );
        std::fs::write(root.path().join(format!("blobs/sha256-{a2}")), b"GGUF").unwrap();
        let resolved = resolve_ollama("gemma3:270m", root.path()).unwrap();
        let blob = |hex: &str| root.path().join(format!("blobs/sha256-{hex}"));
        assert_eq!(resolved.path, blob(&model));
        assert_eq!(resolved.adapters, [blob(&a2), blob(&a1)]);

        write_store(
            root.path(),
            &[layer("model", &model), layer("adapter", "x")].join(","),
        );
        let err = resolve_ollama("gemma3:270m", root.path()).unwrap_err();
        assert!(
            err.to_string().contains("adapter layer digest `sha256:x`"),
            "{err}"
        );
    }

    #[test]
    fn errors_say_what_was_looked_for() {
        let root = tempfile::tempdir().unwrap();
        let err = resolve_ollama("nosuch:1b", root.path()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("manifests/registry.ollama.ai/library/nosuch/1b"),
            "{msg}"
        );
        assert!(msg.contains("gemma3-270m"), "{msg}");

        let hex = "ef".repeat(32);
        write_store(
            root.path(),
            &format!(
                r#"{{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:{hex}"}}"#
            ),
        );
        let err = resolve_ollama("gemma3:270m", root.path()).unwrap_err();
        assert!(matches!(err, StoreError::MissingBlob { .. }), "{err}");
        assert!(err.to_string().contains(&format!("sha256-{hex}")));
        // A blob that is a directory is said to be one, not to be missing.
        let blob = root.path().join(format!("blobs/sha256-{hex}"));
        std::fs::create_dir(&blob).unwrap();
        let err = resolve_ollama("gemma3:270m", root.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{} is a directory, not a GGUF file", blob.display())
        );
        std::fs::remove_dir(&blob).unwrap();
        // So is a MODEL argument naming a directory.
        let dir = root.path().display().to_string();
        let err = resolve(&dir).unwrap_err();
        assert!(matches!(err, StoreError::Directory { .. }), "{err}");

        write_store(
            root.path(),
            r#"{"mediaType":"application/vnd.ollama.image.model","digest":"md5:1"}"#,
        );
        let err = resolve_ollama("gemma3:270m", root.path()).unwrap_err();
        assert!(matches!(err, StoreError::BadManifest { .. }), "{err}");

        write_store(root.path(), "");
        let err = resolve_ollama("gemma3:270m", root.path()).unwrap_err();
        assert!(err.to_string().contains("no layer of media type"), "{err}");
    }
}
