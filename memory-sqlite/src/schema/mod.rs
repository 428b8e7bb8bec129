//! One versioned schema for every table this crate keeps in a file: the memory store's documents,
//! receipts, changes and lexical index, the thread log, activity progress, the remembering store and
//! the vector store.
//!
//! # Versions
//! `memory_schema_version` holds one row per migration the file holds, as memory-postgres's table of
//! the same name does; [`SCHEMA_VERSION`] is the newest this build knows. Every store's open path
//! calls [`migrate`] on its own connection, so whichever store opens a file first brings all of it
//! to [`SCHEMA_VERSION`], in one `BEGIN IMMEDIATE` transaction: a failed migration leaves the file as
//! it was, and a second opener waits for the first and finds nothing left to do. A file whose
//! version is newer than this build's is refused with [`StoreFailure::SchemaTooNew`] before anything
//! is written to it. A reader migrates nothing: it refuses an older file with
//! [`StoreFailure::SchemaTooOld`] until a store has opened it.
//!
//! The version is a table rather than `PRAGMA user_version` because the file is not necessarily
//! ours alone: an application may keep its own tables in it (this crate creates only its own), and
//! `user_version` is one integer per file that such an application may use too, so a foreign file's
//! number would read as one of ours. A table of our own is unambiguous (a file without it holds none
//! of our versions), records each step, and says which steps a file from before the version table
//! already held.
//!
//! # Files from before the version table
//! Each store used to create its own tables and keep its own format marker; such a file is
//! recognised step by step (`legacy`), its steps are recorded as found, and the missing ones run.
//! The last of them sets the old markers to formats the old builds refuse (`migrations`).

mod legacy;
mod migrations;

use std::time::{SystemTime, UNIX_EPOCH};

use memory_core::activity::ActivityError;
use memory_core::{MemoryError, StoreFault};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::StoreFailure;
use migrations::MIGRATIONS;

/// The newest schema version this build migrates to, reads and writes: one per migration.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The version table. `recognised` is 1 for a step found in a file from before the table (not run by
/// this build), 0 for a step this build ran.
const VERSION_TABLE: &str = "
CREATE TABLE IF NOT EXISTS memory_schema_version (
    version INTEGER PRIMARY KEY,
    applied_at INTEGER NOT NULL,
    recognised INTEGER NOT NULL CHECK (recognised IN (0, 1))
) STRICT;
";

/// Why a file's schema could not be opened or migrated, before it becomes the opening store's error.
#[derive(Debug)]
pub(crate) enum SchemaError {
    /// SQLite failed during `operation`.
    Sqlite {
        operation: &'static str,
        error: rusqlite::Error,
    },
    /// The file's schema is not one this build opens (too new, too old for a reader, missing).
    Refused(StoreFailure),
    /// A migration found a stored row it could not read.
    Fault(StoreFault),
}

impl SchemaError {
    /// A failure of the model while migrating, keeping a store fault as it is.
    fn memory(operation: &'static str, error: MemoryError) -> Self {
        match error {
            MemoryError::Store(fault) => Self::Fault(fault),
            other => Self::Fault(StoreFault::storage(operation, other)),
        }
    }

    /// As the memory store and its readers report it: an SQLite failure stays a
    /// [`StoreFailure::Sqlite`], so a reader's busy retry still recognises it.
    pub(crate) fn into_memory_error(self) -> MemoryError {
        match self {
            Self::Sqlite { operation, error } => {
                MemoryError::storage(operation, StoreFailure::Sqlite(error))
            }
            Self::Refused(failure) => MemoryError::storage("open store", failure),
            Self::Fault(fault) => MemoryError::Store(fault),
        }
    }

    /// As every other store reports it: a busy database is [`StoreFault::Busy`].
    pub(crate) fn into_fault(self) -> StoreFault {
        match self {
            Self::Sqlite { operation, error } => crate::error::fault(operation, error),
            Self::Refused(failure) => StoreFault::storage("open store", failure),
            Self::Fault(fault) => fault,
        }
    }
}

impl From<SchemaError> for ActivityError {
    fn from(error: SchemaError) -> Self {
        Self::Store(error.into_fault())
    }
}

fn sqlite(operation: &'static str) -> impl Fn(rusqlite::Error) -> SchemaError {
    move |error| SchemaError::Sqlite { operation, error }
}

/// The versions a file records, ascending, or `None` when it has no version table.
fn recorded_versions(connection: &Connection) -> Result<Option<Vec<i64>>, SchemaError> {
    if !object_exists(connection, "table", "memory_schema_version")? {
        return Ok(None);
    }
    let mut statement = connection
        .prepare("SELECT version FROM memory_schema_version ORDER BY version")
        .map_err(sqlite("read schema version"))?;
    let versions = statement
        .query_map([], |row| row.get::<_, i64>(0))
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(sqlite("read schema version"))?;
    Ok(Some(versions))
}

fn refuse_newer(versions: &[i64]) -> Result<(), SchemaError> {
    match versions.last() {
        Some(&found) if found > SCHEMA_VERSION => {
            Err(SchemaError::Refused(StoreFailure::SchemaTooNew {
                found,
                supported: SCHEMA_VERSION,
            }))
        }
        _ => Ok(()),
    }
}

fn is_current(versions: &[i64]) -> bool {
    versions.iter().copied().eq(1..=SCHEMA_VERSION)
}

/// Brings the file to [`SCHEMA_VERSION`] (creating every table in a fresh file), or refuses a newer
/// one untouched. Every store calls this on its connection when it opens.
pub(crate) fn migrate(connection: &mut Connection) -> Result<(), SchemaError> {
    // Most opens find the file current: a read, without waiting for the write lock.
    if let Some(versions) = recorded_versions(connection)? {
        refuse_newer(&versions)?;
        if is_current(&versions) {
            return Ok(());
        }
    }
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite("migrate schema"))?;
    // Read again under the write lock: another opener may have migrated meanwhile.
    let held = match recorded_versions(&transaction)? {
        Some(versions) => {
            refuse_newer(&versions)?;
            versions
        }
        None => {
            let found = legacy::recognise(&transaction)?;
            transaction
                .execute_batch(VERSION_TABLE)
                .map_err(sqlite("migrate schema"))?;
            for &version in &found {
                record(&transaction, version, true)?;
            }
            if !found.is_empty() {
                tracing::info!(?found, "recognised a file from before the versioned schema");
            }
            found
        }
    };
    for migration in MIGRATIONS
        .iter()
        .filter(|migration| !held.contains(&migration.version))
    {
        transaction
            .execute_batch(migration.sql)
            .map_err(sqlite("migrate schema"))?;
        if let Some(rust) = migration.rust {
            rust(&transaction)?;
        }
        record(&transaction, migration.version, false)?;
        tracing::info!(
            version = migration.version,
            name = migration.name,
            "applied SQLite schema migration"
        );
    }
    transaction.commit().map_err(sqlite("migrate schema"))
}

fn record(connection: &Connection, version: i64, recognised: bool) -> Result<(), SchemaError> {
    // The time is for people reading the table; a clock before 1970 records 0.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        });
    connection
        .execute(
            "INSERT INTO memory_schema_version (version, applied_at, recognised) \
             VALUES (?1, ?2, ?3)",
            rusqlite::params![version, now, recognised],
        )
        .map(drop)
        .map_err(sqlite("migrate schema"))
}

/// Checks, without writing, that the file holds the schema at [`SCHEMA_VERSION`]: for a reader,
/// which migrates nothing.
pub(crate) fn check_current(connection: &Connection) -> Result<(), SchemaError> {
    match recorded_versions(connection)? {
        Some(versions) => {
            refuse_newer(&versions)?;
            if is_current(&versions) {
                Ok(())
            } else {
                Err(SchemaError::Refused(StoreFailure::SchemaTooOld {
                    found: versions.last().copied().unwrap_or(0),
                    supported: SCHEMA_VERSION,
                }))
            }
        }
        None if legacy::recognise(connection)?.is_empty() => {
            Err(SchemaError::Refused(StoreFailure::SchemaMissing))
        }
        None => Err(SchemaError::Refused(StoreFailure::SchemaTooOld {
            found: 0,
            supported: SCHEMA_VERSION,
        })),
    }
}

/// Whether the file holds a schema object (`table`, `index`) of that name.
fn object_exists(connection: &Connection, kind: &str, name: &str) -> Result<bool, SchemaError> {
    connection
        .query_row(
            "SELECT 1 FROM sqlite_schema WHERE type = ?1 AND name = ?2",
            [kind, name],
            |_| Ok(()),
        )
        .optional()
        .map(|found| found.is_some())
        .map_err(sqlite("read schema"))
}
