//! The memory store's tables, its storage format number, and the checks run when a file is opened.
//!
//! The format number lives in a row of `memory_meta` rather than in `PRAGMA user_version`, because the
//! file is shared with the other stores of this crate (thread log, progress, remembering), each of which
//! owns its own tables and may keep its own format number.

use rusqlite::{Connection, OptionalExtension};

use crate::error::{StoreFailure, sqlite};
use memory_core::MemoryError;

/// The storage format this build reads and writes. Bump it with any change to the tables below or to how
/// rows are encoded; a file of another format is refused rather than misread.
pub const STORAGE_FORMAT: i64 = 1;

/// The key of the format row in `memory_meta`.
const FORMAT_KEY: &str = "memory_store_format";

/// Tables of the memory store.
///
/// - `memory_documents`: the current document of each key (withdrawn tombstones included). `entry` is a
///   stable row id shared with the FTS and scope tables. `body` is the document's JSON, kept last so that
///   lookups of the narrow columns do not read it.
/// - `memory_document_scopes`: the scopes of each current, non-withdrawn document, with its namespace, so
///   lexical search filters namespace, scope and withdrawal with one primary-key lookup per match and
///   reads `memory_documents` only for the hits it returns.
/// - `memory_revisions`: every committed revision and its predecessor link, with its change sequence.
/// - `memory_receipts`: one receipt per `(namespace, operation_id)`, its JSON stored exactly as returned.
/// - `memory_changes`: the change sequence; `AUTOINCREMENT` so a sequence number is never reused.
/// - `memory_fts`: contentless FTS5 over text and speakers; its rowid is `memory_documents.entry`.
const CREATE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS memory_meta (
    key TEXT PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS memory_documents (
    entry INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    revision TEXT NOT NULL,
    withdrawn INTEGER NOT NULL CHECK (withdrawn IN (0, 1)),
    locator TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (namespace, id)
) STRICT;
CREATE TABLE IF NOT EXISTS memory_document_scopes (
    entry INTEGER NOT NULL,
    scope TEXT NOT NULL,
    namespace TEXT NOT NULL,
    PRIMARY KEY (entry, scope)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memory_changes (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,
    id TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS memory_revisions (
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    revision TEXT NOT NULL,
    predecessor TEXT,
    sequence INTEGER NOT NULL UNIQUE,
    PRIMARY KEY (namespace, id, revision)
) STRICT;
CREATE TABLE IF NOT EXISTS memory_receipts (
    namespace TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    id TEXT NOT NULL,
    revision TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (namespace, operation_id)
) STRICT;
CREATE INDEX IF NOT EXISTS memory_receipts_by_revision ON memory_receipts (namespace, id, revision);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
    text,
    speakers,
    content = '',
    contentless_delete = 1,
    tokenize = 'porter unicode61'
);
";

/// Creates the tables (idempotently) and records or checks the format number, in one transaction.
pub(crate) fn create_or_check(connection: &mut Connection) -> Result<(), MemoryError> {
    let transaction = connection
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sqlite("create schema"))?;
    // A file written by another format must be refused before anything is created in it.
    if table_exists(&transaction, "memory_meta")?
        && let Some(found) = stored_format(&transaction)?
    {
        check_format(found)?;
    }
    transaction
        .execute_batch(CREATE_TABLES)
        .map_err(sqlite("create schema"))?;
    transaction
        .execute(
            "INSERT INTO memory_meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
            rusqlite::params![FORMAT_KEY, STORAGE_FORMAT],
        )
        .map_err(sqlite("create schema"))?;
    let found = stored_format(&transaction)?
        .ok_or_else(|| MemoryError::storage("create schema", StoreFailure::SchemaMissing))?;
    check_format(found)?;
    transaction.commit().map_err(sqlite("create schema"))
}

/// Checks, without writing, that the file holds this store's schema at this format.
pub(crate) fn check_existing(connection: &Connection) -> Result<(), MemoryError> {
    let missing = || MemoryError::storage("open reader", StoreFailure::SchemaMissing);
    if !table_exists(connection, "memory_meta")? {
        return Err(missing());
    }
    let found = stored_format(connection)?.ok_or_else(missing)?;
    check_format(found)?;
    for table in [
        "memory_documents",
        "memory_document_scopes",
        "memory_changes",
        "memory_revisions",
        "memory_receipts",
        "memory_fts",
    ] {
        if !table_exists(connection, table)? {
            return Err(missing());
        }
    }
    Ok(())
}

fn check_format(found: i64) -> Result<(), MemoryError> {
    if found == STORAGE_FORMAT {
        Ok(())
    } else {
        Err(MemoryError::storage(
            "open store",
            StoreFailure::FormatMismatch {
                found,
                expected: STORAGE_FORMAT,
            },
        ))
    }
}

fn table_exists(connection: &Connection, name: &str) -> Result<bool, MemoryError> {
    connection
        .query_row(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            [name],
            |_| Ok(()),
        )
        .optional()
        .map(|found| found.is_some())
        .map_err(sqlite("read schema"))
}

fn stored_format(connection: &Connection) -> Result<Option<i64>, MemoryError> {
    connection
        .query_row(
            "SELECT value FROM memory_meta WHERE key = ?1",
            [FORMAT_KEY],
            |row| row.get::<_, i64>(0),
        )
        .optional()
        .map_err(sqlite("read schema"))
}
