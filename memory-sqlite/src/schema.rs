//! The memory store's tables, its storage format number, and the checks run when a file is opened.
//!
//! The format number lives in a row of `memory_meta` rather than in `PRAGMA user_version`, because the
//! file is shared with the other stores of this crate (thread log, progress, remembering), each of which
//! owns its own tables and may keep its own format number.
//!
//! A file of an older format is migrated by the first store that opens it, in the same transaction that
//! checks the format (see [`MIGRATIONS`]); a reader refuses it until then, and a newer format is refused
//! by both.

use rusqlite::{Connection, OptionalExtension};

use crate::error::{StoreFailure, sqlite};
use crate::rows::{DocumentRow, speakers};
use memory_core::MemoryError;

/// The storage format this build reads and writes (2: the lexical index keyed by namespace). It is one
/// more than the number of migrations: add one from the previous format with any change to the tables
/// or to how rows are encoded. A file of an older format is migrated by the first store that opens it;
/// a newer one is refused rather than misread.
pub const STORAGE_FORMAT: i64 = MIGRATIONS.len() as i64 + 1;

/// A migration from one format to the next, inside the opening transaction, after the current tables
/// were created (`IF NOT EXISTS`, so a migration finds the new tables empty and the old ones intact).
type Migration = fn(&rusqlite::Transaction<'_>) -> Result<(), MemoryError>;

/// Every migration, in order: the one at index `n` brings format `n + 1` to `n + 2`.
///
/// - Format 1 to 2: the lexical index moves from one FTS5 table over every namespace (`memory_fts`) to
///   the namespace-keyed tables of [`crate::lexical`]; every live document is indexed again from its
///   stored body, then `memory_fts` is dropped.
const MIGRATIONS: &[Migration] = &[lexical_by_namespace];

/// The key of the format row in `memory_meta`.
const FORMAT_KEY: &str = "memory_store_format";

/// Tables of the memory store.
///
/// - `memory_documents`: the current document of each key (withdrawn tombstones included). `entry` is a
///   stable row id shared with the FTS and scope tables. `body` is the document's JSON, kept last so that
///   lookups of the narrow columns do not read it.
/// - `memory_document_scopes`: the scopes of each current, non-withdrawn document, with its namespace, so
///   lexical search filters namespace, scope and withdrawal with one primary-key lookup per match and
///   reads `memory_documents` only for the hits it returns. Its index by `(namespace, scope, entry)`
///   finds a document's written-order neighbours in one seek each (`crate::neighbours`); a file
///   written before the index existed gains it when a store next opens it (an index changes no
///   row, so the format number stays).
/// - `memory_revisions`: every committed revision and its predecessor link, with its change sequence.
/// - `memory_receipts`: one receipt per `(namespace, operation_id)`, its JSON stored exactly as returned.
/// - `memory_changes`: the change sequence; `AUTOINCREMENT` so a sequence number is never reused.
/// - `memory_lexical_*`: the lexical index, keyed by namespace ([`crate::lexical::CREATE_TABLES`]).
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
CREATE INDEX IF NOT EXISTS memory_document_scopes_by_scope
    ON memory_document_scopes (namespace, scope, entry);
";

/// Creates the tables (idempotently) and records or checks the format number, in one transaction.
pub(crate) fn create_or_check(connection: &mut Connection) -> Result<(), MemoryError> {
    let transaction = connection
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sqlite("create schema"))?;
    // A file written by a newer (or no known) format must be refused before anything is created in it.
    if table_exists(&transaction, "memory_meta")?
        && let Some(found) = stored_format(&transaction)?
        && !(1..=STORAGE_FORMAT).contains(&found)
    {
        check_format(found)?;
    }
    transaction
        .execute_batch(CREATE_TABLES)
        .and_then(|()| transaction.execute_batch(crate::lexical::CREATE_TABLES))
        .map_err(sqlite("create schema"))?;
    transaction
        .execute(
            "INSERT INTO memory_meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
            rusqlite::params![FORMAT_KEY, STORAGE_FORMAT],
        )
        .map_err(sqlite("create schema"))?;
    let found = stored_format(&transaction)?
        .ok_or_else(|| MemoryError::storage("create schema", StoreFailure::SchemaMissing))?;
    if (1..STORAGE_FORMAT).contains(&found) {
        for (from, migration) in (1..).zip(MIGRATIONS).skip((found - 1) as usize) {
            migration(&transaction)?;
            tracing::info!(from, to = from + 1, "migrated the memory store's format");
        }
        transaction
            .execute(
                "UPDATE memory_meta SET value = ?2 WHERE key = ?1",
                rusqlite::params![FORMAT_KEY, STORAGE_FORMAT],
            )
            .map_err(sqlite("migrate schema"))?;
    }
    let found = stored_format(&transaction)?
        .ok_or_else(|| MemoryError::storage("create schema", StoreFailure::SchemaMissing))?;
    check_format(found)?;
    transaction.commit().map_err(sqlite("create schema"))
}

/// Format 1 to 2: index every live document under its namespace, then drop the FTS5 table.
fn lexical_by_namespace(transaction: &rusqlite::Transaction<'_>) -> Result<(), MemoryError> {
    const OPERATION: &str = "migrate schema";
    let mut documents = transaction
        .prepare(
            "SELECT entry, namespace, id, revision, withdrawn, locator, body \
             FROM memory_documents WHERE withdrawn = 0 ORDER BY entry",
        )
        .map_err(sqlite(OPERATION))?;
    let mut rows = documents.query([]).map_err(sqlite(OPERATION))?;
    while let Some(row) = rows.next().map_err(sqlite(OPERATION))? {
        let entry: i64 = row.get(0).map_err(sqlite(OPERATION))?;
        let document = DocumentRow {
            namespace: row.get(1).map_err(sqlite(OPERATION))?,
            id: row.get(2).map_err(sqlite(OPERATION))?,
            revision: row.get(3).map_err(sqlite(OPERATION))?,
            withdrawn: row.get(4).map_err(sqlite(OPERATION))?,
            locator: row.get(5).map_err(sqlite(OPERATION))?,
            body: row.get(6).map_err(sqlite(OPERATION))?,
        }
        .decode()?;
        crate::lexical::index_document(
            transaction,
            entry,
            document.key.namespace.as_str(),
            &document.content.text,
            &speakers(&document),
        )
        .map_err(|error| error.into_memory_error(OPERATION))?;
    }
    transaction
        .execute_batch("DROP TABLE IF EXISTS memory_fts")
        .map_err(sqlite(OPERATION))
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
    ]
    .into_iter()
    .chain(crate::lexical::TABLES)
    {
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
