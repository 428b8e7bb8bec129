//! Where the embedding assets live: one folder, set by the `MEMORY_ASSETS_DIR` environment variable.
//!
//! Layout (what `scripts/fetch-assets.sh` installs):
//! ```text
//! <dir>/onnxruntime/libonnxruntime.so
//! <dir>/model/model.onnx
//! <dir>/model/{tokenizer.json, config.json, special_tokens_map.json, tokenizer_config.json}
//! ```
//! Without the variable, the folder is `assets/` at the root of the workspace this crate was built in when
//! that folder exists (so `cargo test` finds what the script fetched), else `assets/` in the current
//! directory. Nothing is ever downloaded at run time.

use std::path::{Path, PathBuf};

use crate::error::EmbedError;

/// The environment variable naming the assets folder.
pub const ASSETS_DIR_ENV: &str = "MEMORY_ASSETS_DIR";

/// The ONNX Runtime library, relative to the assets folder.
pub const RUNTIME_LIBRARY: &str = "onnxruntime/libonnxruntime.so";
/// The ONNX model, relative to the assets folder.
pub const MODEL_FILE: &str = "model/model.onnx";
/// The tokenizer files, relative to the assets folder, in the order fastembed's `TokenizerFiles` lists them.
pub const TOKENIZER_FILES: [&str; 4] = [
    "model/tokenizer.json",
    "model/config.json",
    "model/special_tokens_map.json",
    "model/tokenizer_config.json",
];

/// The assets folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelAssets {
    root: PathBuf,
}

impl ModelAssets {
    /// The folder named by `MEMORY_ASSETS_DIR`, or the default described in the module docs.
    pub fn from_env() -> Self {
        match std::env::var_os(ASSETS_DIR_ENV) {
            Some(dir) if !dir.is_empty() => Self::at(PathBuf::from(dir)),
            _ => Self::at(Self::default_dir()),
        }
    }

    /// An explicit folder.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The folder used when the environment variable is unset.
    pub fn default_dir() -> PathBuf {
        let workspace_assets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets");
        if workspace_assets.is_dir() {
            workspace_assets
        } else {
            PathBuf::from("assets")
        }
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The ONNX Runtime library's path.
    pub fn runtime_library(&self) -> PathBuf {
        self.root.join(RUNTIME_LIBRARY)
    }

    /// The model file's path.
    pub fn model_file(&self) -> PathBuf {
        self.root.join(MODEL_FILE)
    }

    /// The path of `tokenizer.json`, for exact token counting.
    pub fn tokenizer_file(&self) -> PathBuf {
        self.root.join(TOKENIZER_FILES[0])
    }

    /// Checks that every file is present; the error names the first missing one and the fetch command.
    pub fn check(&self) -> Result<(), EmbedError> {
        let mut paths = vec![self.runtime_library(), self.model_file()];
        paths.extend(TOKENIZER_FILES.iter().map(|file| self.root.join(file)));
        for path in paths {
            if !path.is_file() {
                return Err(EmbedError::MissingAsset { path });
            }
        }
        Ok(())
    }

    pub(crate) fn read(&self, relative: &str) -> Result<Vec<u8>, EmbedError> {
        let path = self.root.join(relative);
        std::fs::read(&path).map_err(|_| EmbedError::MissingAsset { path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_assets_name_the_fetch_command() {
        let assets = ModelAssets::at("/nonexistent/assets");
        let error = assets.check().err().map(|error| error.to_string());
        let message = error.unwrap_or_default();
        assert!(message.contains("scripts/fetch-assets.sh"), "{message}");
        assert!(message.contains("libonnxruntime.so"), "{message}");
    }
}
