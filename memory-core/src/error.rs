//! Typed errors of the memory model and its stores.
//!
//! One enum per family: [`AddressError`] for namespace addresses, [`MemoryError`] for reads and writes.
//! [`ErrorKind`] is the stable, coarse classification a caller (or a wire protocol) acts on.

use crate::ids::{OperationId, Revision};

/// What went wrong with a namespace definition, identity or address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddressError {
    /// A limit of the address format was exceeded; `limit` names it.
    #[error("namespace {limit} exceeds its limit: {actual} > {max}")]
    LimitExceeded {
        /// Which limit (for example `address bytes`, `identity depth`).
        limit: &'static str,
        /// The largest allowed value.
        max: u64,
        /// What was seen (or the first value past the limit, when counting stopped early).
        actual: u64,
    },
    /// The definition's name is empty or longer than 256 UTF-16 code units.
    #[error("namespace name must be 1 to 256 UTF-16 code units, got {units}")]
    InvalidName {
        /// The name's length in UTF-16 code units.
        units: usize,
    },
    /// The definition's version is zero or above 2^53 - 1.
    #[error("namespace version must be between 1 and 2^53 - 1, got {version}")]
    InvalidVersion {
        /// The version that was refused.
        version: u64,
    },
    /// A number that JSON cannot carry exactly: NaN, an infinity, or an integer outside +/-(2^53 - 1).
    #[error("identity holds a number JSON cannot represent: {detail}")]
    UnrepresentableNumber {
        /// Which number, described without the identity itself.
        detail: String,
    },
    /// The identity JSON is malformed or does not match the definition's identity type.
    #[error("identity is invalid: {detail}")]
    InvalidIdentity {
        /// Parser or type error, without the identity's values.
        detail: String,
    },
    /// The address is valid for this definition but is not in canonical form.
    #[error("namespace address is not canonical")]
    NotCanonical,
    /// The address belongs to another definition (name or version differs).
    #[error("namespace address belongs to another definition")]
    OtherDefinition,
    /// The address is not a `[1, name, version, identity]` array.
    #[error("unsupported namespace address format")]
    UnsupportedFormat,
}

/// Errors of memory reads and writes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The expected revision is not the current one; nothing changed. `current` is the winner, if any.
    #[error("revision conflict")]
    Conflict {
        /// The current revision of the document (None when it does not exist).
        current: Option<Revision>,
    },
    /// The operation id was already used with a different command in this namespace.
    #[error("operation id was already used with a different command")]
    OperationConflict {
        /// The reused operation id.
        operation_id: OperationId,
    },
    /// The document was withdrawn; withdrawal is terminal.
    #[error("document was withdrawn")]
    Withdrawn,
    /// The document does not exist.
    #[error("document not found")]
    NotFound,
    /// A size limit was exceeded before any work was done.
    #[error("{limit} exceeds its limit: {actual} > {max}")]
    TooLarge {
        /// The limit's name.
        limit: &'static str,
        /// The largest allowed value.
        max: u64,
        /// What was seen (or a lower bound of it).
        actual: u64,
    },
    /// A field of the input is invalid.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The field's name.
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// A namespace address or identity was refused.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// Stored data contradicts itself (for example a receipt that does not match its command).
    #[error("corrupt data: {what}")]
    Corrupt {
        /// What was found inconsistent, without user data.
        what: String,
    },
    /// The store is busy; the same call may succeed later.
    #[error("store is busy: {operation}")]
    Busy {
        /// The operation that could not get the store.
        operation: &'static str,
    },
    /// The store refuses writes after an earlier I/O failure left its state unknown; reopen it.
    #[error("store is poisoned by an earlier failure; reopen it")]
    Poisoned,
    /// The storage layer failed.
    #[error("storage failure during {operation}")]
    Storage {
        /// The operation that failed.
        operation: &'static str,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl MemoryError {
    /// Builds a [`MemoryError::Storage`] from any error.
    pub fn storage(
        operation: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Storage {
            operation,
            source: source.into(),
        }
    }

    /// Builds a [`MemoryError::InvalidInput`].
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidInput {
            field,
            reason: reason.into(),
        }
    }

    /// The coarse kind a caller acts on.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Conflict { .. } => ErrorKind::Conflict,
            Self::OperationConflict { .. } => ErrorKind::OperationConflict,
            Self::Withdrawn => ErrorKind::Withdrawn,
            Self::NotFound => ErrorKind::NotFound,
            Self::TooLarge { .. } => ErrorKind::TooLarge,
            Self::InvalidInput { .. } => ErrorKind::InvalidInput,
            Self::Address(AddressError::LimitExceeded { .. }) => ErrorKind::TooLarge,
            Self::Address(_) => ErrorKind::InvalidInput,
            Self::Corrupt { .. } => ErrorKind::Corrupt,
            Self::Busy { .. } => ErrorKind::Unavailable,
            Self::Poisoned | Self::Storage { .. } => ErrorKind::Storage,
        }
    }
}

/// The stable classification of every error this project returns; the wire name is [`ErrorKind::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A stale or wrong expected revision.
    Conflict,
    /// An operation id reused with another command.
    OperationConflict,
    /// The target was withdrawn.
    Withdrawn,
    /// A size limit was exceeded.
    TooLarge,
    /// Malformed or out-of-range input.
    InvalidInput,
    /// A recall budget was exceeded.
    Budget,
    /// A deadline passed.
    Deadline,
    /// Nothing exists at the key.
    NotFound,
    /// A source or store is temporarily unavailable.
    Unavailable,
    /// The storage layer failed.
    Storage,
    /// Stored data is inconsistent.
    Corrupt,
}

impl ErrorKind {
    /// The kebab-case name used on the wire (`operation-conflict`, `too-large`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Conflict => "conflict",
            Self::OperationConflict => "operation-conflict",
            Self::Withdrawn => "withdrawn",
            Self::TooLarge => "too-large",
            Self::InvalidInput => "invalid-input",
            Self::Budget => "budget",
            Self::Deadline => "deadline",
            Self::NotFound => "not-found",
            Self::Unavailable => "unavailable",
            Self::Storage => "storage",
            Self::Corrupt => "corrupt",
        }
    }
}
