//! Where the embedding assets live, and how an installed `memory` finds them.
//!
//! Layout (what `scripts/fetch-assets.sh DIR` installs into any of the folders below):
//! ```text
//! <dir>/onnxruntime/libonnxruntime.so
//! <dir>/model/model.onnx
//! <dir>/model/{tokenizer.json, config.json, special_tokens_map.json, tokenizer_config.json}
//! <dir>/reranker/model.onnx
//! <dir>/reranker/{tokenizer.json, config.json, special_tokens_map.json, tokenizer_config.json}
//! ```
//! The `reranker/` files are the rerank stage's cross-encoder ([`crate::cross_encoder`]): not needed
//! to embed, so a folder without them is still complete; a process that loads the cross-encoder
//! checks them itself ([`ModelAssets::check_cross_encoder`]).
//! Lookup ([`ModelAssets::from_env`], [`ModelAssets::locate`]), first match wins:
//! 1. `$MEMORY_ASSETS_DIR` when set (used even when incomplete: an explicit choice is never second-guessed);
//! 2. `assets/` beside the running binary (`<dir of the executable>/assets`, the executable's real path,
//!    symbolic links resolved), when complete: a binary copied or `cargo install`ed with its assets
//!    beside it;
//! 3. the user's data directory, `$XDG_DATA_HOME/memory/assets` (default
//!    `~/.local/share/memory/assets`), when complete;
//! 4. `assets/` at the root of the workspace this crate was built in, when complete (so `cargo test` and
//!    `cargo run` find what the script fetched there).
//!
//! With no complete folder, the user data folder (else `assets/` in the current directory) is the one
//! named in errors, since that is where an installed binary's assets belong. Nothing is ever downloaded
//! at run time.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::cross_encoder::CROSS_ENCODER_SHA256;
use crate::error::EmbedError;

/// The lower-case hex sha256 of `bytes`: how a model file is checked against its pin.
pub fn sha256_hex(bytes: &[u8]) -> String {
    memory_core::ids::lower_hex(&Sha256::digest(bytes))
}

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

/// The cross-encoder's ONNX model, relative to the assets folder.
pub const CROSS_ENCODER_MODEL_FILE: &str = "reranker/model.onnx";
/// The cross-encoder's tokenizer files, relative to the assets folder, in `TokenizerFiles`' order.
pub const CROSS_ENCODER_TOKENIZER_FILES: [&str; 4] = [
    "reranker/tokenizer.json",
    "reranker/config.json",
    "reranker/special_tokens_map.json",
    "reranker/tokenizer_config.json",
];

/// The assets folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelAssets {
    root: PathBuf,
}

impl ModelAssets {
    /// The folder the lookup in the module docs chooses.
    pub fn from_env() -> Self {
        Self::locate().assets
    }

    /// The lookup of the module docs, with every candidate it considered.
    pub fn locate() -> Located {
        let candidates = candidates();
        let chosen = candidates
            .iter()
            .find(|candidate| candidate.source == AssetsSource::Env || candidate.is_complete())
            .or_else(|| {
                candidates
                    .iter()
                    .find(|candidate| candidate.source == AssetsSource::UserData)
            })
            .cloned();
        match chosen {
            Some(candidate) => Located {
                assets: Self::at(candidate.root.clone()),
                source: Some(candidate.source),
                complete: candidate.is_complete(),
                candidates,
            },
            None => Located {
                assets: Self::at("assets"),
                source: None,
                complete: false,
                candidates,
            },
        }
    }

    /// An explicit folder.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The folder used when the environment variable is unset (the lookup's choice among the others).
    pub fn default_dir() -> PathBuf {
        let candidates: Vec<Candidate> = candidates()
            .into_iter()
            .filter(|candidate| candidate.source != AssetsSource::Env)
            .collect();
        candidates
            .iter()
            .find(|candidate| candidate.is_complete())
            .or_else(|| {
                candidates
                    .iter()
                    .find(|candidate| candidate.source == AssetsSource::UserData)
            })
            .map_or_else(
                || PathBuf::from("assets"),
                |candidate| candidate.root.clone(),
            )
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

    /// Every file the folder must hold, relative to it, in the order [`Self::check`] looks.
    pub fn required_files() -> Vec<&'static str> {
        let mut files = vec![RUNTIME_LIBRARY, MODEL_FILE];
        files.extend(TOKENIZER_FILES);
        files
    }

    /// The required files that are not there (relative to the folder).
    pub fn missing(&self) -> Vec<&'static str> {
        Self::required_files()
            .into_iter()
            .filter(|file| !self.root.join(file).is_file())
            .collect()
    }

    /// Checks that every file is present; the error names the first missing one and the fetch command.
    pub fn check(&self) -> Result<(), EmbedError> {
        match self.missing().first() {
            Some(file) => Err(EmbedError::MissingAsset {
                path: self.root.join(file),
            }),
            None => Ok(()),
        }
    }

    /// Every file the cross-encoder needs, relative to the folder (the runtime library first).
    pub fn cross_encoder_files() -> Vec<&'static str> {
        let mut files = vec![RUNTIME_LIBRARY, CROSS_ENCODER_MODEL_FILE];
        files.extend(CROSS_ENCODER_TOKENIZER_FILES);
        files
    }

    /// The cross-encoder's files that are not there (relative to the folder).
    pub fn cross_encoder_missing(&self) -> Vec<&'static str> {
        Self::cross_encoder_files()
            .into_iter()
            .filter(|file| !self.root.join(file).is_file())
            .collect()
    }

    /// Checks that every cross-encoder file is present; the error names the first missing one and
    /// the fetch command.
    pub fn check_cross_encoder(&self) -> Result<(), EmbedError> {
        match self.cross_encoder_missing().first() {
            Some(file) => Err(EmbedError::MissingAsset {
                path: self.root.join(file),
            }),
            None => Ok(()),
        }
    }

    /// Whether every cross-encoder file is there and its model file is the pinned one (reads it
    /// whole: 34 MB).
    pub fn cross_encoder_is_pinned(&self) -> bool {
        self.cross_encoder_missing().is_empty()
            && std::fs::read(self.root.join(CROSS_ENCODER_MODEL_FILE))
                .is_ok_and(|bytes| sha256_hex(&bytes) == CROSS_ENCODER_SHA256)
    }

    pub(crate) fn read(&self, relative: &str) -> Result<Vec<u8>, EmbedError> {
        let path = self.root.join(relative);
        std::fs::read(&path).map_err(|_| EmbedError::MissingAsset { path })
    }
}

/// Where a candidate folder comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssetsSource {
    /// `$MEMORY_ASSETS_DIR`.
    Env,
    /// `assets/` beside the running binary.
    BesideBinary,
    /// The user's data directory (`$XDG_DATA_HOME/memory/assets`, default `~/.local/share/memory/assets`).
    UserData,
    /// `assets/` of the workspace this binary was built in.
    Workspace,
}

impl AssetsSource {
    /// A short name (`env`, `beside_binary`, `user_data`, `workspace`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Env => "env",
            Self::BesideBinary => "beside_binary",
            Self::UserData => "user_data",
            Self::Workspace => "workspace",
        }
    }
}

/// One folder the lookup considers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Where it comes from.
    pub source: AssetsSource,
    /// The folder.
    pub root: PathBuf,
}

impl Candidate {
    /// Whether every required file is there.
    pub fn is_complete(&self) -> bool {
        ModelAssets::at(self.root.clone()).missing().is_empty()
    }
}

/// What the lookup chose and what it considered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The folder used.
    pub assets: ModelAssets,
    /// Where it comes from; `None` when no candidate could even be named.
    pub source: Option<AssetsSource>,
    /// Whether it holds every required file.
    pub complete: bool,
    /// Every folder considered, in lookup order (only `$MEMORY_ASSETS_DIR` when that is set).
    pub candidates: Vec<Candidate>,
}

/// The candidate folders in lookup order.
fn candidates() -> Vec<Candidate> {
    if let Some(dir) = std::env::var_os(ASSETS_DIR_ENV).filter(|dir| !dir.is_empty()) {
        return vec![Candidate {
            source: AssetsSource::Env,
            root: PathBuf::from(dir),
        }];
    }
    let mut found = Vec::new();
    if let Some(dir) = beside_binary() {
        found.push(Candidate {
            source: AssetsSource::BesideBinary,
            root: dir,
        });
    }
    if let Some(dir) = user_data_dir(
        std::env::var_os("XDG_DATA_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    ) {
        found.push(Candidate {
            source: AssetsSource::UserData,
            root: dir,
        });
    }
    found.push(Candidate {
        source: AssetsSource::Workspace,
        root: Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets"),
    });
    found
}

/// `<dir of the running executable>/assets`.
fn beside_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    Some(exe.parent()?.join("assets"))
}

/// `$XDG_DATA_HOME/memory/assets` when that is an absolute path (the XDG rule: a relative one is
/// ignored), else `$HOME/.local/share/memory/assets`.
pub fn user_data_dir(
    xdg_data_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    let base = match xdg_data_home.map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => PathBuf::from(home.filter(|home| !home.is_empty())?).join(".local/share"),
    };
    Some(base.join("memory/assets"))
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

    #[test]
    fn the_user_data_folder_follows_xdg() {
        use std::ffi::OsStr;
        assert_eq!(
            user_data_dir(Some(OsStr::new("/xdg")), Some(OsStr::new("/home/u"))),
            Some(PathBuf::from("/xdg/memory/assets"))
        );
        // A relative XDG_DATA_HOME is ignored, as the specification says.
        assert_eq!(
            user_data_dir(Some(OsStr::new("rel")), Some(OsStr::new("/home/u"))),
            Some(PathBuf::from("/home/u/.local/share/memory/assets"))
        );
        assert_eq!(
            user_data_dir(None, Some(OsStr::new("/home/u"))),
            Some(PathBuf::from("/home/u/.local/share/memory/assets"))
        );
        assert_eq!(user_data_dir(None, None), None);
    }

    #[test]
    fn missing_lists_every_absent_file() {
        let dir = std::env::temp_dir().join(format!("assets-missing-{}", std::process::id()));
        let assets = ModelAssets::at(&dir);
        assert_eq!(assets.missing(), ModelAssets::required_files());
        std::fs::create_dir_all(dir.join("model")).expect("folder");
        std::fs::write(dir.join(MODEL_FILE), b"x").expect("file");
        assert!(!assets.missing().contains(&MODEL_FILE));
        assert_eq!(
            assets.missing().len(),
            ModelAssets::required_files().len() - 1
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
