//! The semantic profile: everything that decides what a vector means. Its digest keys stored vectors, so
//! vectors of different profiles never mix.

use memory_core::MemoryContent;
use memory_core::canonical::to_canonical_string;
pub use memory_core::vectors::ProfileDigest;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::chunk::chunk_text;
use crate::error::SemanticError;

/// How source text is cut into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkingConfig {
    /// Most UTF-8 bytes in one chunk (at least 4, so any code point fits).
    pub max_chunk_bytes: usize,
}

/// What text is embedded for a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preprocessing {
    /// The chunk text alone.
    TextOnly,
    /// The first attribution's speaker, `": "`, then the chunk text (the text alone when there is no
    /// attribution): who said a thing is often what a query asks about.
    SpeakerThenText,
}

/// Everything that decides what a stored vector means.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SemanticProfile {
    /// Who computes the vectors (for example `fastembed`).
    pub provider: String,
    /// The model's name.
    pub model: String,
    /// The exact model weights, for example the sha256 of the ONNX file.
    pub model_revision: String,
    /// Vector length.
    pub dimensions: usize,
    /// Most tokens the model reads from one text; longer texts are truncated by the tokenizer.
    pub max_sequence_length: usize,
    /// How sources are chunked.
    pub chunking: ChunkingConfig,
    /// What is embedded for each chunk.
    pub preprocessing: Preprocessing,
}

/// The sha256 of the int8 all-MiniLM-L6-v2 ONNX file that `scripts/fetch-assets.sh` installs.
pub const MINILM_L6_V2_INT8_SHA256: &str =
    "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6";

/// Smallest `max_chunk_bytes`: any code point (at most 4 bytes) must fit one chunk.
pub const MIN_CHUNK_BYTES: usize = 4;

/// Largest accepted dimension count, far above any sentence-embedding model in use.
pub const MAX_DIMENSIONS: usize = 16_384;

impl SemanticProfile {
    /// The default profile: all-MiniLM-L6-v2 (int8 ONNX) through fastembed with mean pooling, 384
    /// dimensions, the 256 tokens the model was trained on, chunks of at most 1,024 bytes (about 230
    /// English tokens, so a chunk is rarely truncated) and speaker-then-text preprocessing.
    pub fn minilm_l6_v2() -> Self {
        Self {
            provider: "fastembed".to_owned(),
            model: "sentence-transformers/all-MiniLM-L6-v2 (int8 onnx, mean pooling)".to_owned(),
            model_revision: MINILM_L6_V2_INT8_SHA256.to_owned(),
            dimensions: 384,
            max_sequence_length: 256,
            chunking: ChunkingConfig {
                max_chunk_bytes: 1_024,
            },
            preprocessing: Preprocessing::SpeakerThenText,
        }
    }

    /// Checks the fields' ranges.
    pub fn validate(&self) -> Result<(), SemanticError> {
        if self.dimensions == 0 || self.dimensions > MAX_DIMENSIONS {
            return Err(SemanticError::InvalidInput {
                field: "profile.dimensions",
                reason: format!("must be 1 to {MAX_DIMENSIONS}"),
            });
        }
        if self.max_sequence_length == 0 {
            return Err(SemanticError::InvalidInput {
                field: "profile.max_sequence_length",
                reason: "must be positive".to_owned(),
            });
        }
        if self.chunking.max_chunk_bytes < MIN_CHUNK_BYTES {
            return Err(SemanticError::InvalidInput {
                field: "profile.chunking.max_chunk_bytes",
                reason: format!("must be at least {MIN_CHUNK_BYTES}"),
            });
        }
        Ok(())
    }

    /// What is embedded for `chunk`, a chunk of `content`'s text, under [`Self::preprocessing`].
    pub fn embedded_text(&self, content: &MemoryContent, chunk: &str) -> String {
        match (self.preprocessing, content.attributions.first()) {
            (Preprocessing::SpeakerThenText, Some(attribution)) => {
                format!("{}: {chunk}", attribution.speaker)
            }
            _ => chunk.to_owned(),
        }
    }

    /// Every text the index embeds for `content`, in chunk order: its chunks under
    /// [`Self::chunking`], each through [`Self::embedded_text`]. A refresh embeds exactly these, so
    /// a benchmark can give the embedder alone the same work (`memory-eval sync-texts`).
    pub fn embedded_texts(&self, content: &MemoryContent) -> Vec<String> {
        chunk_text(&content.text, self.chunking)
            .iter()
            .map(|chunk| self.embedded_text(content, chunk.text(&content.text)))
            .collect()
    }

    /// The sha256 of the profile's RFC 8785 canonical JSON.
    pub fn digest(&self) -> Result<ProfileDigest, SemanticError> {
        let canonical = to_canonical_string(self).map_err(|error| SemanticError::InvalidInput {
            field: "profile",
            reason: error.to_string(),
        })?;
        Ok(ProfileDigest::from_bytes(
            Sha256::digest(canonical.as_bytes()).into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn digest_changes_when_any_field_changes() {
        let base = SemanticProfile::minilm_l6_v2();
        let digest = base.digest().unwrap();
        assert_eq!(digest, base.clone().digest().unwrap());
        let variants: [fn(&mut SemanticProfile); 7] = [
            |p| p.provider.push('x'),
            |p| p.model.push('x'),
            |p| p.model_revision.push('x'),
            |p| p.dimensions += 1,
            |p| p.max_sequence_length += 1,
            |p| p.chunking.max_chunk_bytes += 1,
            |p| p.preprocessing = Preprocessing::TextOnly,
        ];
        let mut seen = std::collections::HashSet::from([digest]);
        for change in variants {
            let mut changed = base.clone();
            change(&mut changed);
            assert!(seen.insert(changed.digest().unwrap()), "{changed:?}");
        }
    }

    #[test]
    fn validation_names_the_field() {
        let mut profile = SemanticProfile::minilm_l6_v2();
        profile.chunking.max_chunk_bytes = 3;
        let error = profile.validate().unwrap_err();
        assert!(error.to_string().contains("max_chunk_bytes"), "{error}");
        profile = SemanticProfile::minilm_l6_v2();
        profile.dimensions = 0;
        assert!(profile.validate().is_err());
    }
}
