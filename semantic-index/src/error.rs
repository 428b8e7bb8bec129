//! Typed errors of the semantic index.

use std::path::PathBuf;

use memory_core::vectors::SourceGeneration;
use memory_core::{ErrorKind, MemoryError, StoreFault};

/// The command that installs the model assets; every missing-asset error names it.
pub const FETCH_ASSETS_COMMAND: &str = "scripts/fetch-assets.sh";

/// Errors of an [`crate::Embedder`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// A model file or the ONNX Runtime library is not where the configuration says.
    #[error(
        "embedding asset missing: {path} (run `{FETCH_ASSETS_COMMAND}` or set MEMORY_ASSETS_DIR)",
        path = path.display()
    )]
    MissingAsset {
        /// The file that was looked for.
        path: PathBuf,
    },
    /// The ONNX Runtime library exists but could not be loaded.
    #[error("could not load ONNX Runtime from {path}: {detail}", path = path.display())]
    RuntimeLoad {
        /// The library's path.
        path: PathBuf,
        /// The loader's message.
        detail: String,
    },
    /// The model file is not the one the profile names.
    #[error("model file does not match the profile's model_revision")]
    ModelMismatch,
    /// The cross-encoder's model file is not the pinned one ([`crate::cross_encoder`]).
    #[error(
        "cross-encoder model {path} is not the pinned file (run `{FETCH_ASSETS_COMMAND}` to fetch it again)",
        path = path.display()
    )]
    CrossEncoderMismatch {
        /// The model file.
        path: PathBuf,
    },
    /// The model failed to load or run.
    #[error("embedding model failed: {detail}")]
    Model {
        /// The model's message (never input text).
        detail: String,
    },
    /// The model returned another number of vectors than texts.
    #[error("embedder returned {actual} vectors for {expected} texts")]
    Count {
        /// Texts sent.
        expected: usize,
        /// Vectors received.
        actual: usize,
    },
    /// A vector has the wrong length.
    #[error("embedding has {actual} dimensions, the profile says {expected}")]
    Dimensions {
        /// The profile's dimensions.
        expected: usize,
        /// The vector's length.
        actual: usize,
    },
    /// A vector's norm is zero, NaN or infinite, or one of its components is not finite.
    #[error("embedding {index} has no positive finite norm")]
    Norm {
        /// Position of the vector in the batch.
        index: usize,
    },
}

/// Errors of profiles, indexes, refreshes and queries.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SemanticError {
    /// A field is out of range.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The field's name.
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// A size bound of the index or of a refresh was exceeded; nothing was changed.
    #[error("{limit} exceeds its limit: {actual} > {max}")]
    TooLarge {
        /// The bound's name.
        limit: &'static str,
        /// The largest allowed value.
        max: u64,
        /// What was seen (or a lower bound of it).
        actual: u64,
    },
    /// A query budget was exceeded; no partial result is returned.
    #[error("query budget {limit} exceeded: {actual} > {max}")]
    Budget {
        /// The budget's name.
        limit: &'static str,
        /// The largest allowed value.
        max: u64,
        /// What was needed (or a lower bound of it).
        actual: u64,
    },
    /// The query did not finish within `timeout_ms`.
    #[error("query deadline of {timeout_ms} ms passed")]
    Deadline {
        /// The deadline that passed.
        timeout_ms: u64,
    },
    /// The source was withdrawn; withdrawal is terminal and blocks later refreshes.
    #[error("source was withdrawn")]
    Withdrawn,
    /// The refresh carries an older generation than the source's recorded state.
    #[error("refresh of generation {attempted:?} is fenced by generation {current:?}")]
    Fenced {
        /// The recorded generation.
        current: SourceGeneration,
        /// The refused one.
        attempted: SourceGeneration,
    },
    /// The same generation was recorded with another revision.
    #[error("generation {generation:?} was already indexed with another revision")]
    Divergent {
        /// The generation in question.
        generation: SourceGeneration,
    },
    /// The embedder failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// The document store or the vector store failed.
    #[error(transparent)]
    Store(#[from] MemoryError),
    /// A background task failed to run to completion (it panicked or its runtime shut down).
    #[error("background task failed: {what}")]
    Task {
        /// Which task.
        what: &'static str,
    },
}

impl SemanticError {
    /// The coarse kind a caller acts on.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::InvalidInput { .. } => ErrorKind::InvalidInput,
            Self::TooLarge { .. } => ErrorKind::TooLarge,
            Self::Budget { .. } => ErrorKind::Budget,
            Self::Deadline { .. } => ErrorKind::Deadline,
            Self::Withdrawn => ErrorKind::Withdrawn,
            Self::Fenced { .. } | Self::Divergent { .. } => ErrorKind::Conflict,
            Self::Embed(EmbedError::MissingAsset { .. } | EmbedError::RuntimeLoad { .. }) => {
                ErrorKind::Unavailable
            }
            Self::Embed(_) | Self::Task { .. } => ErrorKind::Unavailable,
            Self::Store(error) => error.kind(),
        }
    }

    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidInput {
            field,
            reason: reason.into(),
        }
    }
}

impl From<StoreFault> for SemanticError {
    /// A store fault of the vector store, inside the [`MemoryError`] its port returns.
    fn from(fault: StoreFault) -> Self {
        Self::Store(MemoryError::Store(fault))
    }
}

#[cfg(test)]
mod fault_tests {
    use super::*;

    /// A store fault keeps its kind through a semantic error.
    #[test]
    fn a_store_fault_keeps_its_kind_in_a_semantic_error() {
        for fault in [
            StoreFault::Busy { operation: "load" },
            StoreFault::Poisoned,
            StoreFault::corrupt("vector"),
            StoreFault::storage("save", "disk"),
        ] {
            let kind = fault.kind();
            assert_eq!(SemanticError::from(fault).kind(), kind);
        }
    }
}
