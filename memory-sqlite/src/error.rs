//! The typed storage failures this crate puts inside [`MemoryError::Storage`], and how SQLite errors are
//! classified (busy, poisoning, plain failure).

use memory_core::MemoryError;
use rusqlite::ErrorCode;

/// What went wrong below the memory model. It is the `source` of a [`MemoryError::Storage`]; callers that
/// need the detail downcast to it (see [`storage_failure`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreFailure {
    /// The file holds no memory store (a fresh or foreign database opened by [`crate::open_reader`]).
    #[error("the database holds no memory store schema")]
    SchemaMissing,
    /// The file was written with another storage format than this build reads and writes.
    #[error("storage format {found} is not the supported format {expected}")]
    FormatMismatch {
        /// The format number recorded in the file.
        found: i64,
        /// The format number this build supports.
        expected: i64,
    },
    /// A fault injected by a failpoint.
    #[error("injected fault at {point}")]
    Injected {
        /// The failpoint's name.
        point: &'static str,
        /// Whether the fault stands for an I/O failure (which poisons the store).
        io: bool,
    },
    /// An error reported by SQLite.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

/// The [`StoreFailure`] inside a [`MemoryError::Storage`], if that is what the error carries.
pub fn storage_failure(error: &MemoryError) -> Option<&StoreFailure> {
    match error {
        MemoryError::Storage { source, .. } => source.downcast_ref::<StoreFailure>(),
        _ => None,
    }
}

/// How a failure inside a write transaction is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureClass {
    /// Another connection holds a lock; the whole transaction may be retried.
    Busy,
    /// The file's state is unknown (I/O error, full disk, corruption, failed sync): stop writing.
    Poisoning,
    /// An ordinary failure; the rolled-back transaction left the store as it was.
    Plain,
}

pub(crate) fn classify(error: &rusqlite::Error) -> FailureClass {
    match error.sqlite_error_code() {
        // SQLITE_PROTOCOL is a lock race in the WAL index that SQLite itself gave up retrying.
        Some(
            ErrorCode::DatabaseBusy
            | ErrorCode::DatabaseLocked
            | ErrorCode::FileLockingProtocolFailed,
        ) => FailureClass::Busy,
        Some(
            ErrorCode::SystemIoFailure
            | ErrorCode::DiskFull
            | ErrorCode::DatabaseCorrupt
            | ErrorCode::NotADatabase
            | ErrorCode::CannotOpen,
        ) => FailureClass::Poisoning,
        _ => FailureClass::Plain,
    }
}

/// Wraps an SQLite error as a storage error of `operation`.
pub(crate) fn sqlite(operation: &'static str) -> impl Fn(rusqlite::Error) -> MemoryError {
    move |error| MemoryError::storage(operation, StoreFailure::Sqlite(error))
}

/// A stored row that does not parse or contradicts itself.
pub(crate) fn corrupt(what: impl Into<String>) -> MemoryError {
    MemoryError::Corrupt { what: what.into() }
}
