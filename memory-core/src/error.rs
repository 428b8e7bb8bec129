//! Typed errors of the memory model and its stores.
//!
//! One enum per family: [`AddressError`] for namespace addresses, [`MemoryError`] for reads and writes.
//! [`StoreFault`] is the leaf every store's failures share (busy, poisoned, corrupt, storage): it is
//! embedded, unchanged, in [`MemoryError`], [`crate::activity::ActivityError`] and semantic-index's
//! errors (the way redb embeds its `StorageError` in each operation's error), so a store fault
//! keeps its kind through every translation. [`ErrorKind`] is the stable, coarse classification a
//! caller (or a wire protocol) acts on.

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
    /// The store failed: busy, poisoned, corrupt or a storage failure.
    #[error(transparent)]
    Store(#[from] StoreFault),
}

/// What can go wrong in a store, whatever it stores: the one leaf of every store error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreFault {
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

impl StoreFault {
    /// Builds a [`StoreFault::Storage`] from any error.
    pub fn storage(
        operation: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Storage {
            operation,
            source: source.into(),
        }
    }

    /// Builds a [`StoreFault::Corrupt`].
    pub fn corrupt(what: impl Into<String>) -> Self {
        Self::Corrupt { what: what.into() }
    }

    /// The coarse kind: a busy store is `unavailable` (retried later), a poisoned one or a failure
    /// of the storage layer is `storage`, data that contradicts itself is `corrupt`.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Busy { .. } => ErrorKind::Unavailable,
            Self::Poisoned | Self::Storage { .. } => ErrorKind::Storage,
            Self::Corrupt { .. } => ErrorKind::Corrupt,
        }
    }

    /// Whether the same call may succeed later without any change: a busy store, or a failure of the
    /// storage layer that did not poison the store (a poisoned store needs reopening; corrupt data
    /// stays corrupt).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Busy { .. } | Self::Storage { .. })
    }
}

impl MemoryError {
    /// Builds a storage failure ([`StoreFault::Storage`]) from any error.
    pub fn storage(
        operation: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Store(StoreFault::storage(operation, source))
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
            Self::Store(fault) => fault.kind(),
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
    /// The caller's credential does not grant the call (a shared server's per-tenant grants). Says
    /// nothing about whether the target exists.
    Forbidden,
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
            Self::Forbidden => "forbidden",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::ActivityError;

    fn faults() -> Vec<(StoreFault, ErrorKind, bool)> {
        vec![
            (
                StoreFault::Busy { operation: "read" },
                ErrorKind::Unavailable,
                true,
            ),
            (StoreFault::Poisoned, ErrorKind::Storage, false),
            (StoreFault::corrupt("row"), ErrorKind::Corrupt, false),
            (
                StoreFault::storage("write", "disk"),
                ErrorKind::Storage,
                true,
            ),
        ]
    }

    /// A store fault keeps its kind and its retryability in every error that embeds it.
    #[test]
    fn a_store_fault_keeps_its_kind_in_every_error() {
        for (fault, kind, retryable) in faults() {
            assert_eq!(fault.kind(), kind, "{fault}");
            assert_eq!(fault.is_retryable(), retryable, "{fault}");
        }
        for (fault, kind, _) in faults() {
            let text = fault.to_string();
            let error = MemoryError::from(fault);
            assert_eq!(error.kind(), kind, "{text}");
            assert_eq!(error.to_string(), text, "the leaf's message, unchanged");
            assert!(matches!(error, MemoryError::Store(_)));
        }
        for (fault, kind, retryable) in faults() {
            let error = ActivityError::from(fault);
            assert_eq!((error.kind(), error.is_retryable()), (kind, retryable));
        }
    }
}
