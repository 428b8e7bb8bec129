//! Exact token counting with the embedding model's own `tokenizer.json`.

use std::path::Path;

use memory_core::tokens::{ApproximateTokenCounter, TokenCounter};
use tokenizers::Tokenizer;

use crate::assets::ModelAssets;
use crate::error::EmbedError;

/// Counts tokens exactly as the tokenizer in a `tokenizer.json` encodes them, without special tokens and
/// with truncation and padding turned off (a count must not be capped by the model's input length).
pub struct TokenizerCounter {
    tokenizer: Tokenizer,
}

impl std::fmt::Debug for TokenizerCounter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TokenizerCounter")
            .finish_non_exhaustive()
    }
}

impl TokenizerCounter {
    /// Loads the tokenizer of the assets' model.
    pub fn from_assets(assets: &ModelAssets) -> Result<Self, EmbedError> {
        Self::from_file(&assets.tokenizer_file())
    }

    /// Loads a `tokenizer.json` file.
    pub fn from_file(path: &Path) -> Result<Self, EmbedError> {
        let bytes = std::fs::read(path).map_err(|_| EmbedError::MissingAsset {
            path: path.to_path_buf(),
        })?;
        let mut tokenizer = Tokenizer::from_bytes(bytes).map_err(|error| EmbedError::Model {
            detail: format!("invalid tokenizer.json: {error}"),
        })?;
        tokenizer
            .with_truncation(None)
            .map_err(|error| EmbedError::Model {
                detail: format!("tokenizer truncation: {error}"),
            })?;
        tokenizer.with_padding(None);
        Ok(Self { tokenizer })
    }
}

impl TokenCounter for TokenizerCounter {
    fn count(&self, text: &str) -> usize {
        // Encoding a valid UTF-8 string does not fail for WordPiece vocabularies; should it ever, the
        // approximate count (which leans high) keeps budgets conservative rather than panicking.
        self.tokenizer
            .encode(text, false)
            .map(|encoding| encoding.len())
            .unwrap_or_else(|_| ApproximateTokenCounter.count(text))
    }
}
