//! Conversation activity and the ports that turn it into memory (SPEC §5).
//!
//! - [`thread`]: the append-only thread log: canonical records with [`Sequence`] numbers and digests.
//! - [`progress`]: committed-activity progress: fenced processor leases, cursors and pending output.
//! - [`intents`]: admitted remember and cleanup intents, suppression and source-to-target references.
//! - [`forgotten`]: forgotten thread records: which records of a thread are forgotten, and the
//!   placeholder every read shows in their place.
//! - [`suppression`]: source events (forget, edit, deletion, revocation) and read-time suppression.
//! - [`rollover`]: the window boundary a rollover appends (the handoff or excerpts the next window
//!   starts from).
//! - [`rules`]: the stores' decisions as pure functions (claims, fences, admission, saved commands)
//!   and the row codecs, so every backend keeps only its SQL, locks and transactions.
//!
//! These ports are synchronous on purpose: every call is one short local transaction, and the callers
//! (the remembering worker) run them between awaits of the memory writer. This module does no I/O.

pub mod compaction;
pub mod destination;
pub mod forgotten;
pub mod intents;
pub mod progress;
pub mod rollover;
pub mod rules;
pub mod suppression;
pub mod thread;

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::document::EpochMillis;
use crate::error::{ErrorKind, StoreFault};

pub use compaction::{
    CompactionOutcome, CompactionRecord, CompactionRefusal, RefusalReason, SequenceRange,
    SummarizerTokens,
};
pub use destination::{DestinationCount, ThreadDestination};
pub use intents::{
    Admitted, Intent, IntentClaim, IntentId, IntentLease, IntentOutcome, IntentState, IntentView,
    RecordSuppression, RememberingStore, SavedCommand, SourceId, SourceReference, SourceRevision,
    ThreadSuppressions,
};
pub use progress::{
    Claim, CorrectionCounts, ExtractionNote, ExtractionTotals, Lease, ModelUsage, PendingOutput,
    ProgressKey, ProgressStore, ProgressView,
};
pub use rollover::{RolloverCause, RolloverExcerpts, RolloverRecord};
pub use thread::{
    DEFAULT_MAX_TOOL_OUTPUT_BYTES, FoldCheckpoint, LogEntry, NewRecord, PendingThread, RecordBody,
    RecordDigest, ThreadBinding, ThreadLog, ThreadOverview, ThreadRecord, ToolOutputBound,
    UndecodableReason, UndecodableRecord, bound_tool_output, decode_stored_record,
};

/// Most UTF-16 code units in the canonical JSON of saved progress (pending output, proposals, commands).
pub const MAX_PROGRESS_UTF16_UNITS: usize = 16_777_216;

/// Errors of the activity ports.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ActivityError {
    /// A fenced write changed no row: the lease expired or a later claim superseded it. Nothing changed.
    #[error("lease with epoch {epoch} is stale (expired or superseded)")]
    StaleLease {
        /// The epoch of the refused lease.
        epoch: FencingEpoch,
    },
    /// Another worker holds an unexpired lease.
    #[error("lease is held by another worker until {until}")]
    LeaseHeld {
        /// When the current lease expires, epoch milliseconds.
        until: EpochMillis,
    },
    /// The admission queue is full; nothing was evicted and nothing was recorded.
    #[error("admission is at capacity ({capacity} open intents)")]
    AtCapacity {
        /// The configured capacity.
        capacity: u64,
    },
    /// A limit was exceeded before anything was written.
    #[error("{limit} exceeds its limit: {actual} > {max}")]
    TooLarge {
        /// The limit's name.
        limit: &'static str,
        /// The largest allowed value.
        max: u64,
        /// What was seen.
        actual: u64,
    },
    /// A field of the input is invalid.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The field.
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// Records or progress do not follow one another: `expected` was due, `found` was seen.
    #[error("noncontiguous progress: expected sequence {expected}, found {found}")]
    Noncontiguous {
        /// The sequence that had to come next.
        expected: Sequence,
        /// The sequence that was offered.
        found: Sequence,
    },
    /// Saved progress disagrees with the request (for example pending output for another record).
    #[error("progress mismatch: {what}")]
    ProgressMismatch {
        /// What disagreed, without user data.
        what: &'static str,
    },
    /// The thread is bound to another destination than the one the append named (see
    /// [`destination`]). Nothing was written.
    #[error("the thread is bound to another destination; its memory cannot be redirected")]
    DestinationConflict,
    /// The store failed: busy, poisoned, corrupt or a storage failure.
    #[error(transparent)]
    Store(#[from] StoreFault),
}

impl ActivityError {
    /// Builds an [`ActivityError::InvalidInput`].
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidInput {
            field,
            reason: reason.into(),
        }
    }

    /// Whether the same call may succeed later without any change ([`StoreFault::is_retryable`]). A
    /// lease held by another worker is not: that work is someone else's until the lease expires.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Store(fault) if fault.is_retryable())
    }

    /// The coarse kind a caller (or a wire protocol) acts on: limits and input faults keep their kind;
    /// a busy store, a full queue and a lease that is someone else's (held or superseded) are
    /// `unavailable`, retried later; progress that disagrees with itself is `corrupt`.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::TooLarge { .. } => ErrorKind::TooLarge,
            Self::InvalidInput { .. } => ErrorKind::InvalidInput,
            Self::AtCapacity { .. } | Self::LeaseHeld { .. } | Self::StaleLease { .. } => {
                ErrorKind::Unavailable
            }
            Self::Noncontiguous { .. } | Self::ProgressMismatch { .. } => ErrorKind::Corrupt,
            Self::DestinationConflict => ErrorKind::Conflict,
            Self::Store(fault) => fault.kind(),
        }
    }
}

/// A position in a thread's log. Records are numbered 1, 2, 3, ... per thread; [`Sequence::ZERO`] is the
/// cursor of a processor that has processed nothing.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct Sequence(u64);

impl Sequence {
    /// Before the first record.
    pub const ZERO: Self = Self(0);

    /// The sequence numbered `value`.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The sequence's number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The next sequence, or `None` past `u64::MAX`.
    pub fn next(self) -> Option<Self> {
        self.0.checked_add(1).map(Self)
    }

    /// The next sequence, staying at `u64::MAX` there: the record a cursor expects next.
    pub const fn saturating_next(self) -> Self {
        Self(self.0.saturating_add(1))
    }

    /// The sequence before this one, staying at [`Sequence::ZERO`]: the cursor just before a record.
    pub const fn saturating_previous(self) -> Self {
        Self(self.0.saturating_sub(1))
    }
}

impl fmt::Display for Sequence {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.0)
    }
}

/// A lease's fencing epoch: every claim gets a strictly larger one, even for the same owner, and every
/// progress write is conditional on it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct FencingEpoch(u64);

impl FencingEpoch {
    /// The epoch numbered `value`.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The epoch's number.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for FencingEpoch {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.0)
    }
}

/// The version of a processor's extraction logic; a new version processes a thread from its own cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProcessorVersion(u64);

impl ProcessorVersion {
    /// The version numbered `value`.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The version's number.
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// An activity identifier: a validated string newtype (see [`crate::ids`]) refused with [`ActivityError`].
macro_rules! activity_id {
    ($(#[$meta:meta])* $name:ident, $field:literal, $max:expr) => {
        $crate::ids::string_id!($(#[$meta])* $name, $field, $max, ActivityError);
    };
}
pub(crate) use activity_id;

activity_id!(
    /// A conversation thread. Sensitive like any identity: logs show counts, not thread ids.
    ThreadId,
    "thread id",
    512
);
activity_id!(
    /// A processor of committed activity (for example `facts`).
    ProcessorId,
    "processor id",
    128
);
activity_id!(
    /// A worker instance that claims leases.
    WorkerId,
    "worker id",
    128
);
activity_id!(
    /// The id of one unit of work: derived from processor, version, thread and sequence only, never from
    /// the worker or the clock, so a retry after a crash names the same work.
    WorkId,
    "work id",
    128
);

impl WorkId {
    /// The work id of one record for one processor version.
    pub fn derive(
        processor: &ProcessorId,
        version: ProcessorVersion,
        thread: &ThreadId,
        sequence: Sequence,
    ) -> Self {
        let digest = sha256_hex(&serde_json::json!([
            "work",
            processor.as_str(),
            version.get(),
            thread.as_str(),
            sequence.get()
        ]));
        Self(format!("w{}", &digest[..40]).into())
    }
}

/// SHA-256 of a value's canonical JSON, lower-case hex. Values that cannot be canonicalized (NaN) hash
/// their debug form instead; every caller passes plain data, so that arm is never reached in practice.
pub(crate) fn sha256_hex<T: Serialize>(value: &T) -> String {
    let canonical = crate::canonical::to_canonical_string(value).unwrap_or_default();
    crate::ids::lower_hex(&Sha256::digest(canonical.as_bytes()))
}

/// Checks the canonical size of saved progress and returns its canonical JSON.
pub fn canonical_progress_json<T: Serialize>(
    limit: &'static str,
    value: &T,
) -> Result<String, ActivityError> {
    let canonical = crate::canonical::to_canonical_string(value)
        .map_err(|error| ActivityError::invalid("progress", error.to_string()))?;
    let units = crate::canonical::utf16_len(&canonical);
    if units > MAX_PROGRESS_UTF16_UNITS {
        return Err(ActivityError::TooLarge {
            limit,
            max: MAX_PROGRESS_UTF16_UNITS as u64,
            actual: units as u64,
        });
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_ids_depend_on_every_input_and_nothing_else() {
        let processor = ProcessorId::new("facts").expect("valid");
        let thread = ThreadId::new("t1").expect("valid");
        let base = WorkId::derive(
            &processor,
            ProcessorVersion::new(1),
            &thread,
            Sequence::new(3),
        );
        assert_eq!(
            base,
            WorkId::derive(
                &processor,
                ProcessorVersion::new(1),
                &thread,
                Sequence::new(3)
            )
        );
        let others = [
            WorkId::derive(
                &ProcessorId::new("other").expect("valid"),
                ProcessorVersion::new(1),
                &thread,
                Sequence::new(3),
            ),
            WorkId::derive(
                &processor,
                ProcessorVersion::new(2),
                &thread,
                Sequence::new(3),
            ),
            WorkId::derive(
                &processor,
                ProcessorVersion::new(1),
                &ThreadId::new("t2").expect("valid"),
                Sequence::new(3),
            ),
            WorkId::derive(
                &processor,
                ProcessorVersion::new(1),
                &thread,
                Sequence::new(4),
            ),
        ];
        assert!(others.iter().all(|other| *other != base));
    }

    #[test]
    fn activity_kinds_and_retries() {
        let cases = [
            (
                ActivityError::StaleLease {
                    epoch: FencingEpoch::new(1),
                },
                ErrorKind::Unavailable,
                false,
            ),
            (
                ActivityError::LeaseHeld { until: 5 },
                ErrorKind::Unavailable,
                false,
            ),
            (
                ActivityError::AtCapacity { capacity: 1 },
                ErrorKind::Unavailable,
                false,
            ),
            (
                ActivityError::Store(StoreFault::Busy {
                    operation: "append",
                }),
                ErrorKind::Unavailable,
                true,
            ),
            (
                ActivityError::TooLarge {
                    limit: "x",
                    max: 1,
                    actual: 2,
                },
                ErrorKind::TooLarge,
                false,
            ),
            (
                ActivityError::invalid("x", "y"),
                ErrorKind::InvalidInput,
                false,
            ),
            (
                ActivityError::Noncontiguous {
                    expected: Sequence::new(1),
                    found: Sequence::new(3),
                },
                ErrorKind::Corrupt,
                false,
            ),
            (
                ActivityError::ProgressMismatch { what: "x" },
                ErrorKind::Corrupt,
                false,
            ),
            (
                ActivityError::Store(StoreFault::Corrupt {
                    what: "x".to_owned(),
                }),
                ErrorKind::Corrupt,
                false,
            ),
            (
                ActivityError::Store(StoreFault::Storage {
                    operation: "append",
                    source: "disk".into(),
                }),
                ErrorKind::Storage,
                true,
            ),
        ];
        for (error, kind, retryable) in cases {
            assert_eq!(error.kind(), kind, "{error}");
            assert_eq!(error.is_retryable(), retryable, "{error}");
        }
    }

    #[test]
    fn progress_json_over_the_limit_is_refused() {
        let text = "x".repeat(MAX_PROGRESS_UTF16_UNITS);
        let error = canonical_progress_json("pending output", &text).expect_err("too large");
        assert!(matches!(error, ActivityError::TooLarge { .. }));
        assert!(canonical_progress_json("pending output", &"small").is_ok());
    }
}
