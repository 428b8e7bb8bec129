//! The context layer's one error type.

use memory_core::ErrorKind;
use memory_core::activity::ActivityError;

/// Why a context read, view or compaction was refused. Nothing is written by a refusal.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// The thread log refused or failed.
    #[error(transparent)]
    Log(#[from] ActivityError),
    /// A compaction was asked for without the provider's measured input tokens (or with 0, which
    /// is what a provider that reports no usage says): compaction is counted, never guessed.
    #[error(
        "a compaction needs the input tokens the provider measured for the last call \
         (measured_input_tokens); none was given (or 0, which is no measurement), and a guessed \
         count is refused"
    )]
    Unmeasured,
    /// An argument is out of range or malformed.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The argument.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Recalling the turn's references failed.
    #[error("recalling the turn's memory failed: {0}")]
    Recall(String),
    /// The summarizer the caller supplied failed; nothing was appended.
    #[error("the summarizer failed: {0}")]
    Summarizer(String),
    /// A summary was committed from a plan whose transcript showed records forgotten since: it may
    /// carry their text, so nothing was appended.
    #[error(
        "records {records:?} were forgotten after the plan the summary was written from: plan again \
         and summarize the new transcript"
    )]
    ForgottenSincePlan {
        /// The records forgotten since the plan.
        records: Vec<memory_core::activity::Sequence>,
    },
    /// A history anchor (`before`) that is not a record of the thread.
    #[error("record {anchor} is not a record of this thread")]
    AnchorNotFound {
        /// The anchor.
        anchor: memory_core::activity::Sequence,
    },
    /// A page read backward could not be established: the log did not produce these records.
    #[error(
        "a full page could not be established: records {first} to {last} of the thread could not be \
         read"
    )]
    Gap {
        /// The first record missing from the range read.
        first: memory_core::activity::Sequence,
        /// The last record of the range read.
        last: memory_core::activity::Sequence,
    },
}

impl ContextError {
    /// An [`ContextError::Invalid`].
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Invalid {
            field,
            reason: reason.into(),
        }
    }

    /// The error's kind on the wire.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Log(error) => error.kind(),
            Self::Unmeasured | Self::Invalid { .. } => ErrorKind::InvalidInput,
            Self::Summarizer(_) | Self::Recall(_) => ErrorKind::Unavailable,
            Self::ForgottenSincePlan { .. } => ErrorKind::Conflict,
            Self::AnchorNotFound { .. } => ErrorKind::NotFound,
            Self::Gap { .. } => ErrorKind::Corrupt,
        }
    }
}
