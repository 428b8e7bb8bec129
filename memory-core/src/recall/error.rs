//! The typed errors of recall and revalidation.
//!
//! Messages name limits, declaration ids and counts only: never passage text, authorities or namespace
//! values, which can be private.

use crate::error::{ErrorKind, MemoryError};
use crate::recall::ids::SourceId;

/// Why a recall or a revalidation failed. No partial result accompanies any of these.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecallError {
    /// A limit was out of range when the limits were built.
    #[error("invalid recall limit {field}: {reason}")]
    InvalidLimits {
        /// The limit's name (for example `max_items`).
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// The same declaration id was given to two recall sources.
    #[error("recall source {source_id} is declared twice")]
    DuplicateSource {
        /// The repeated declaration id.
        source_id: SourceId,
    },
    /// An input budget was exceeded; nothing was returned.
    #[error("recall budget {limit} exceeded: more than {max} (reached {actual})")]
    Budget {
        /// The budget's name (`max_input_bytes`).
        limit: &'static str,
        /// The budget.
        max: u64,
        /// The amount reached when the budget was found exceeded (a lower bound of the full amount).
        actual: u64,
    },
    /// The whole recall did not finish within `timeout_ms`.
    #[error("recall did not finish within {timeout_ms} ms")]
    Deadline {
        /// The deadline that passed.
        timeout_ms: u64,
    },
    /// An essential source answered `Unavailable`.
    #[error("essential recall source {source_id} is unavailable")]
    EssentialUnavailable {
        /// The source's declaration id.
        source_id: SourceId,
        /// The reason the source gave.
        reason: String,
    },
    /// An essential source answered `InsufficientFreshness`.
    #[error("essential recall source {source_id} is not fresh enough")]
    EssentialStale {
        /// The source's declaration id.
        source_id: SourceId,
    },
    /// A passage of an essential source did not fit the output limits.
    #[error("essential recall source {source_id} does not fit the recall limit {limit}")]
    EssentialDoesNotFit {
        /// The source's declaration id.
        source_id: SourceId,
        /// The first limit that refused one of its passages.
        limit: &'static str,
    },
    /// Two passages share an authority, source id, known revision and passage id but differ in content.
    #[error("recall source {source_id} returned a passage that conflicts with an earlier one")]
    ConflictingPassages {
        /// The declaration id of the source whose passage was found conflicting.
        source_id: SourceId,
    },
    /// A passage could not be encoded as JSON to be measured (for example a non-finite number).
    #[error("a passage of recall source {source_id} cannot be encoded as JSON")]
    UnencodablePassage {
        /// The declaration id of the source.
        source_id: SourceId,
    },
    /// A reader or store failed; the error keeps its type.
    #[error(transparent)]
    Source(#[from] MemoryError),
}

impl RecallError {
    /// The coarse kind a caller acts on.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::InvalidLimits { .. }
            | Self::DuplicateSource { .. }
            | Self::UnencodablePassage { .. } => ErrorKind::InvalidInput,
            Self::Budget { .. } | Self::EssentialDoesNotFit { .. } => ErrorKind::Budget,
            Self::Deadline { .. } => ErrorKind::Deadline,
            Self::EssentialUnavailable { .. } | Self::EssentialStale { .. } => {
                ErrorKind::Unavailable
            }
            Self::ConflictingPassages { .. } => ErrorKind::Conflict,
            Self::Source(error) => error.kind(),
        }
    }
}
