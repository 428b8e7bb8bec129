//! Errors of remembering passes, admission and source events.

use memory_core::MemoryError;
use memory_core::activity::ActivityError;

/// An error an application trait (extractor, merger, source loader) returned.
pub type ApplicationError = Box<dyn std::error::Error + Send + Sync>;

/// What went wrong in a pass, an admission or a source event.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RememberingError {
    /// The progress, thread log or remembering store refused or failed (a stale lease is one case).
    #[error(transparent)]
    Activity(#[from] ActivityError),
    /// The memory store refused or failed; an unknown outcome leaves the saved command for a retry.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// An application trait failed.
    #[error("{operation} failed")]
    Application {
        /// Which trait method.
        operation: &'static str,
        /// Its error.
        #[source]
        source: ApplicationError,
    },
    /// Extraction could not be done now for a reason that may pass (the model endpoint is down,
    /// rate-limited or timing out): the record stays unprocessed and its thread pending, for a later
    /// pass. Never parks the thread.
    #[error("{operation} deferred")]
    Deferred {
        /// Which step.
        operation: &'static str,
        /// Why.
        #[source]
        source: ApplicationError,
    },
    /// A pass limit is out of range.
    #[error("invalid pass limit {field}: {reason}")]
    InvalidLimits {
        /// The limit.
        field: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// Saved output does not decode as this processor's output.
    #[error("saved output is unreadable: {what}")]
    CorruptOutput {
        /// What was wrong, without user data.
        what: String,
    },
    /// Conflicts kept coming back; the intent stays queued for a later pass.
    #[error("gave up after {attempts} rebases")]
    TooManyRebases {
        /// Rebases tried.
        attempts: u32,
    },
    /// A pass panicked earlier; this worker stops instead of continuing on unknown state.
    #[error("worker is poisoned by a panic in an earlier pass")]
    Poisoned,
}

impl RememberingError {
    /// True for a stale lease: another worker owns the work now, and this one must stop quietly.
    pub fn is_stale_lease(&self) -> bool {
        matches!(self, Self::Activity(ActivityError::StaleLease { .. }))
    }
}
