//! The default embedder: a local ONNX model through fastembed, with mean pooling, loaded from
//! [`ModelAssets`] and never from the network.

use std::sync::Mutex;

use fastembed::{
    InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel,
};
use sha2::{Digest, Sha256};

use crate::assets::{MODEL_FILE, ModelAssets, TOKENIZER_FILES};
use crate::embed::Embedder;
use crate::error::EmbedError;
use crate::profile::SemanticProfile;

/// Texts per model call: large enough to amortize the call, small enough to bound the padded batch tensor.
pub const DEFAULT_BATCH_SIZE: usize = 64;

/// fastembed's `TextEmbedding` with the profile's model.
pub struct FastembedEmbedder {
    model: Mutex<TextEmbedding>,
    dimensions: usize,
    batch_size: usize,
}

impl std::fmt::Debug for FastembedEmbedder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("FastembedEmbedder")
            .field("dimensions", &self.dimensions)
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

/// Loads ONNX Runtime from `assets` once per process; later calls reuse the loaded library.
fn load_runtime(assets: &ModelAssets) -> Result<(), EmbedError> {
    let path = assets.runtime_library();
    if !path.is_file() {
        return Err(EmbedError::MissingAsset { path });
    }
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    // The builder only matters for custom environments; sessions create the default one on first use.
    let _environment = ort::init_from(&path).map_err(|error| EmbedError::RuntimeLoad {
        path: path.clone(),
        detail: error.to_string(),
    })?;
    Ok(())
}

impl FastembedEmbedder {
    /// Loads the model of `profile` from `assets`. Fails with [`EmbedError::MissingAsset`] naming the
    /// fetch script when a file is absent, and with [`EmbedError::ModelMismatch`] when the model file's
    /// sha256 is not the profile's `model_revision`.
    pub fn load(assets: &ModelAssets, profile: &SemanticProfile) -> Result<Self, EmbedError> {
        assets.check()?;
        let onnx = assets.read(MODEL_FILE)?;
        let digest: String = Sha256::digest(&onnx)
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        if digest != profile.model_revision {
            return Err(EmbedError::ModelMismatch);
        }
        load_runtime(assets)?;
        let tokenizer_files = TokenizerFiles {
            tokenizer_file: assets.read(TOKENIZER_FILES[0])?,
            config_file: assets.read(TOKENIZER_FILES[1])?,
            special_tokens_map_file: assets.read(TOKENIZER_FILES[2])?,
            tokenizer_config_file: assets.read(TOKENIZER_FILES[3])?,
        };
        let model =
            UserDefinedEmbeddingModel::new(onnx, tokenizer_files).with_pooling(Pooling::Mean);
        let options = InitOptionsUserDefined::new().with_max_length(profile.max_sequence_length);
        let model = TextEmbedding::try_new_from_user_defined(model, options).map_err(|error| {
            EmbedError::Model {
                detail: error.to_string(),
            }
        })?;
        Ok(Self {
            model: Mutex::new(model),
            dimensions: profile.dimensions,
            batch_size: DEFAULT_BATCH_SIZE,
        })
    }

    /// Sets the number of texts per model call (at least 1).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }
}

impl Embedder for FastembedEmbedder {
    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // A panic inside the model leaves nothing half-updated in the session we rely on; reuse it.
        let mut model = self
            .model
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        model
            .embed(texts, Some(self.batch_size))
            .map_err(|error| EmbedError::Model {
                detail: error.to_string(),
            })
    }
}
