//! The typed storage failures this crate puts inside a [`StoreFault::Storage`], and the one
//! classification of SQLite errors (busy, poisoning, plain failure) that every store of this crate
//! uses: the memory store, the vector store and the activity stores all call [`classify`] (through
//! [`fault`]), and the [`StoreFault`] it gives is embedded unchanged in a `MemoryError` or an
//! `ActivityError`, so a busy database is `unavailable` from each of them.

use memory_core::MemoryError;
use memory_core::StoreFault;
use memory_core::activity::ActivityError;
use rusqlite::ErrorCode;

/// What went wrong below the memory model. It is the `source` of a [`StoreFault::Storage`];
/// callers that need the detail downcast to it (see [`storage_failure`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreFailure {
    /// The file holds no memory store (a fresh or foreign database opened by [`crate::SqliteReader::open`]).
    #[error("the database holds no memory store schema")]
    SchemaMissing,
    /// The file's schema is older than this build's. A store migrates it when it opens the file; a
    /// reader, which writes nothing, refuses it until then.
    #[error("schema version {found} is older than the supported version {supported}")]
    SchemaTooOld {
        /// The newest version the file records; 0 for a file from before the schema was versioned.
        found: i64,
        /// The version this build reads and writes ([`crate::SCHEMA_VERSION`]).
        supported: i64,
    },
    /// The file's schema is newer than this build knows; every store and reader refuses it without
    /// writing to it, so an old build never misreads rows a newer one wrote.
    #[error("schema version {found} is newer than the supported version {supported}")]
    SchemaTooNew {
        /// The newest version the file records.
        found: i64,
        /// The version this build reads and writes ([`crate::SCHEMA_VERSION`]).
        supported: i64,
    },
    /// A file from before the versioned schema carries a format marker no build wrote.
    #[error("unknown format {found} in the pre-versioning marker {marker}")]
    UnknownLegacyFormat {
        /// The marker: the memory store's format or an activity store's component.
        marker: &'static str,
        /// The value found.
        found: i64,
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

/// The [`StoreFailure`] inside a [`StoreFault::Storage`], if that is what the error carries.
pub fn storage_failure(error: &MemoryError) -> Option<&StoreFailure> {
    match error {
        MemoryError::Store(fault) => fault_failure(fault),
        _ => None,
    }
}

/// The [`StoreFailure`] inside a store fault, whichever error embeds it (an activity store's
/// [`ActivityError::Store`] as well as a [`MemoryError::Store`]).
pub fn fault_failure(fault: &StoreFault) -> Option<&StoreFailure> {
    match fault {
        StoreFault::Storage { source, .. } => source.downcast_ref::<StoreFailure>(),
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

/// Wraps an SQLite error as a storage error of `operation`, for callers that retry a busy store
/// themselves (they find the busy error again with [`storage_failure`] and [`classify`]).
pub(crate) fn sqlite(operation: &'static str) -> impl Fn(rusqlite::Error) -> MemoryError {
    move |error| MemoryError::storage(operation, StoreFailure::Sqlite(error))
}

/// The store fault of an SQLite error that is not retried: busy is [`StoreFault::Busy`] (kind
/// `unavailable`), anything else a storage failure carrying it.
pub(crate) fn fault(operation: &'static str, error: rusqlite::Error) -> StoreFault {
    match classify(&error) {
        FailureClass::Busy => StoreFault::Busy { operation },
        FailureClass::Poisoning | FailureClass::Plain => {
            StoreFault::storage(operation, StoreFailure::Sqlite(error))
        }
    }
}

/// [`fault`] as a memory error, for `map_err`.
pub(crate) fn memory_error(operation: &'static str) -> impl Fn(rusqlite::Error) -> MemoryError {
    move |error| fault(operation, error).into()
}

/// [`fault`] as an activity error, for `map_err`.
pub(crate) fn activity_error(operation: &'static str) -> impl Fn(rusqlite::Error) -> ActivityError {
    move |error| fault(operation, error).into()
}

pub(crate) use memory_core::storage::corrupt;

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;

    use super::*;

    fn sqlite_error(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    /// Every translation of one SQLite error keeps its kind: busy and locked are `unavailable` from
    /// the memory store (after its retries), the vector store and the activity stores alike.
    #[test]
    fn a_busy_database_is_unavailable_from_every_store() {
        for code in [
            rusqlite::ffi::SQLITE_BUSY,
            rusqlite::ffi::SQLITE_LOCKED,
            rusqlite::ffi::SQLITE_PROTOCOL,
        ] {
            let retried = sqlite("read")(sqlite_error(code));
            assert!(
                storage_failure(&retried).is_some_and(|failure| matches!(
                    failure,
                    StoreFailure::Sqlite(error) if classify(error) == FailureClass::Busy
                )),
                "the retrying reader must still see busy"
            );
            assert_eq!(
                memory_error("load vectors")(sqlite_error(code)).kind(),
                ErrorKind::Unavailable
            );
            let activity = activity_error("append")(sqlite_error(code));
            assert_eq!(activity.kind(), ErrorKind::Unavailable);
            assert!(activity.is_retryable());
        }
    }

    #[test]
    fn other_failures_stay_storage_failures_everywhere() {
        for code in [
            rusqlite::ffi::SQLITE_IOERR,
            rusqlite::ffi::SQLITE_CONSTRAINT,
        ] {
            assert_eq!(
                memory_error("load vectors")(sqlite_error(code)).kind(),
                ErrorKind::Storage
            );
            assert_eq!(
                activity_error("append")(sqlite_error(code)).kind(),
                ErrorKind::Storage
            );
            assert_eq!(
                sqlite("read")(sqlite_error(code)).kind(),
                ErrorKind::Storage
            );
        }
    }
}
