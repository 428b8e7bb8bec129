//! Every migration, in order. Steps 1 to 10 are the tables as the stores created them before the
//! schema was versioned, in the order they appeared (their SQL is what those builds ran, so a file
//! they wrote is recognised step by step, `super::legacy`); step 11 is the first of the versioned
//! schema; step 12 keeps every revision's words readable as history, and drops a withdrawn
//! document's; step 13 finds a thread's suppressions without reading every other's; step 14 reads
//! corrections backwards; step 15 keeps the context layer's fold checkpoints.
//!
//! To change the schema, append a migration; never edit one that has shipped.

use rusqlite::Transaction;

use super::SchemaError;
use crate::rows::{DocumentRow, decode_receipt, encode, speakers};

/// The Rust part of a step, for what SQL cannot do (such as tokenizing stored documents).
type RustStep = fn(&Transaction<'_>) -> Result<(), SchemaError>;

/// One numbered step: its SQL, then its Rust part, in the opening transaction.
pub(super) struct Migration {
    /// The schema version the step brings the file to.
    pub(super) version: i64,
    /// What the step adds, for the log.
    pub(super) name: &'static str,
    pub(super) sql: &'static str,
    pub(super) rust: Option<RustStep>,
}

/// Every migration; the one at index `n` brings the file to version `n + 1`.
pub(super) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "memory tables",
        sql: MEMORY_TABLES,
        rust: None,
    },
    Migration {
        version: 2,
        name: "lexical index keyed by namespace",
        sql: LEXICAL_TABLES,
        rust: Some(index_by_namespace),
    },
    Migration {
        version: 3,
        name: "written-order neighbours index",
        sql: NEIGHBOURS_INDEX,
        rust: None,
    },
    Migration {
        version: 4,
        name: "thread log",
        sql: THREAD_LOG_TABLES,
        rust: None,
    },
    Migration {
        version: 5,
        name: "activity progress",
        sql: PROGRESS_TABLES,
        rust: None,
    },
    Migration {
        version: 6,
        name: "remembering store",
        sql: REMEMBERING_TABLES,
        rust: None,
    },
    Migration {
        version: 7,
        name: "chunk vectors",
        sql: VECTOR_TABLES,
        rust: None,
    },
    Migration {
        version: 8,
        name: "unindexed sources and persisted graphs",
        sql: UNINDEXED_AND_GRAPH_TABLES,
        rust: None,
    },
    Migration {
        version: 9,
        name: "thread destinations and the pending index",
        sql: THREAD_DESTINATIONS_AND_PENDING,
        rust: None,
    },
    Migration {
        version: 10,
        name: "extraction notes",
        sql: EXTRACTION_TABLES,
        rust: None,
    },
    Migration {
        version: 11,
        name: "one versioned schema",
        sql: FENCE_UNVERSIONED_BUILDS,
        rust: None,
    },
    Migration {
        version: 12,
        name: "revision history and withdrawn words",
        sql: REVISION_HISTORY,
        rust: Some(drop_withdrawn_words),
    },
    Migration {
        version: 13,
        name: "suppressions by thread and their count",
        sql: SUPPRESSIONS_BY_THREAD,
        rust: None,
    },
    Migration {
        version: 14,
        name: "corrections by the document they correct",
        sql: CORRECTIONS_INDEX,
        rust: None,
    },
    Migration {
        version: 15,
        name: "fold checkpoints",
        sql: FOLD_CHECKPOINTS,
        rust: None,
    },
    Migration {
        version: 16,
        name: "stored chunks by profile",
        sql: CHUNK_COUNTS,
        rust: None,
    },
];

/// How many chunks each profile stores, kept in one row per profile by the replacement that changes
/// them, in its transaction: `memory sync` with nothing to index checks the stored chunks against the
/// index's capacity without loading them, and a `count(*)` of `semantic_chunks` walks every page of
/// its vectors. The step counts once what is already there.
const CHUNK_COUNTS: &str = "
CREATE TABLE IF NOT EXISTS semantic_chunk_counts (
    profile BLOB NOT NULL PRIMARY KEY,
    chunks INTEGER NOT NULL CHECK (chunks >= 0)
) WITHOUT ROWID;
INSERT OR REPLACE INTO semantic_chunk_counts (profile, chunks)
    SELECT profile, COUNT(*) FROM semantic_chunks GROUP BY profile;
";

/// The context layer's fold checkpoints (memory-context's `fold`): each thread's newest state of one
/// fold at one version, a cache of what the log says, so a cold read starts from it.
const FOLD_CHECKPOINTS: &str = "
CREATE TABLE IF NOT EXISTS thread_fold_checkpoints (
    thread TEXT NOT NULL,
    fold TEXT NOT NULL,
    version INTEGER NOT NULL,
    through INTEGER NOT NULL,
    forgotten TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (thread, fold, version)
) STRICT;
";

/// The reverse of correction links (`crate::corrections`): the current documents whose `corrects`
/// member names a document, by namespace and the named id. Partial, so documents without a link (all
/// but a few) cost nothing. A body that cannot hold a link is not parsed, and one that is not JSON
/// (a damaged row) indexes as no link, so the store's consistency check, not a failing index, is
/// what reports it.
const CORRECTIONS_INDEX: &str = "
CREATE INDEX IF NOT EXISTS memory_documents_by_correction ON memory_documents (
    namespace, iif(instr(body, '\"corrects\"') AND json_valid(body), json_extract(body, '$.content.metadata.corrects.id'), NULL)
) WHERE iif(instr(body, '\"corrects\"') AND json_valid(body), json_extract(body, '$.content.metadata.corrects.id'), NULL) IS NOT NULL;
";

/// The memory store's tables as its first format had them, with its search in one FTS5 table over
/// every namespace (`memory_fts`, replaced by step 2).
///
/// - `memory_documents`: the current document of each key (withdrawn tombstones included). `entry` is a
///   stable row id shared with the search and scope tables. `body` is the document's JSON, kept last so
///   that lookups of the narrow columns do not read it.
/// - `memory_document_scopes`: the scopes of each current, non-withdrawn document, with its namespace, so
///   lexical search filters namespace, scope and withdrawal with one primary-key lookup per match and
///   reads `memory_documents` only for the hits it returns.
/// - `memory_revisions`: every committed revision and its predecessor link, with its change sequence.
/// - `memory_receipts`: one receipt per `(namespace, operation_id)`, its JSON stored exactly as returned.
/// - `memory_changes`: the change sequence; `AUTOINCREMENT` so a sequence number is never reused.
const MEMORY_TABLES: &str = "
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

/// The lexical index keyed by namespace (`crate::lexical`'s `tables` module describes each table).
/// Entries are `memory_documents.entry`. Plain `CREATE TABLE`: the step fills them, so it must find
/// them new.
const LEXICAL_TABLES: &str = "
CREATE TABLE memory_lexical_namespaces (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL UNIQUE,
    documents INTEGER NOT NULL CHECK (documents >= 0),
    tokens INTEGER NOT NULL CHECK (tokens >= 0)
) STRICT;
CREATE TABLE memory_lexical_terms (
    id INTEGER PRIMARY KEY,
    term TEXT NOT NULL UNIQUE
) STRICT;
CREATE TABLE memory_lexical_postings (
    namespace_id INTEGER NOT NULL,
    term_id INTEGER NOT NULL,
    entry INTEGER NOT NULL,
    text_count INTEGER NOT NULL,
    speakers_count INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (namespace_id, term_id, entry)
) STRICT, WITHOUT ROWID;
CREATE TABLE memory_lexical_documents (
    entry INTEGER PRIMARY KEY,
    namespace_id INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    terms BLOB NOT NULL
) STRICT;
";

/// Finds a document's written-order neighbours in one seek each (`crate::neighbours`).
const NEIGHBOURS_INDEX: &str = "
CREATE INDEX IF NOT EXISTS memory_document_scopes_by_scope
    ON memory_document_scopes (namespace, scope, entry);
";

/// Thread records, append-only below the port too: the triggers refuse a raw update or delete.
const THREAD_LOG_TABLES: &str = "
    CREATE TABLE IF NOT EXISTS thread_records (
        thread TEXT NOT NULL,
        sequence INTEGER NOT NULL CHECK (sequence > 0),
        record_json TEXT NOT NULL,
        digest TEXT NOT NULL,
        PRIMARY KEY (thread, sequence)
    ) WITHOUT ROWID;
    CREATE TRIGGER IF NOT EXISTS thread_records_append_only_update
        BEFORE UPDATE ON thread_records
        BEGIN SELECT RAISE(ABORT, 'thread records are append-only'); END;
    CREATE TRIGGER IF NOT EXISTS thread_records_append_only_delete
        BEFORE DELETE ON thread_records
        BEGIN SELECT RAISE(ABORT, 'thread records are append-only'); END;
";

/// Committed-activity progress: one fenced lease and cursor per processor, version and thread.
const PROGRESS_TABLES: &str = "
    CREATE TABLE IF NOT EXISTS activity_progress (
        processor TEXT NOT NULL,
        version INTEGER NOT NULL,
        thread TEXT NOT NULL,
        cursor INTEGER NOT NULL DEFAULT 0 CHECK (cursor >= 0),
        epoch INTEGER NOT NULL DEFAULT 0,
        owner TEXT,
        lease_expires_at INTEGER,
        pending_sequence INTEGER,
        pending_work_id TEXT,
        pending_json TEXT,
        last_advance_at INTEGER,
        PRIMARY KEY (processor, version, thread)
    ) WITHOUT ROWID;
";

/// Admitted intents, suppressions, source-to-target references and the admission outbox.
const REMEMBERING_TABLES: &str = "
    CREATE TABLE IF NOT EXISTS remembering_intents (
        row INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        intent_json TEXT NOT NULL,
        counted INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'done')),
        epoch INTEGER NOT NULL DEFAULT 0,
        owner TEXT,
        lease_expires_at INTEGER,
        proposal_json TEXT,
        command_json TEXT,
        command_attempt INTEGER,
        outcome_json TEXT,
        admitted_at INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS remembering_intents_open ON remembering_intents (state, row);
    CREATE TABLE IF NOT EXISTS remembering_suppressions (
        source TEXT NOT NULL,
        revision TEXT NOT NULL,
        suppressed_at INTEGER NOT NULL,
        PRIMARY KEY (source, revision)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS remembering_references (
        row INTEGER PRIMARY KEY AUTOINCREMENT,
        source TEXT NOT NULL,
        source_revision TEXT NOT NULL,
        target_namespace TEXT NOT NULL,
        target_id TEXT NOT NULL,
        operation_id TEXT NOT NULL,
        revision TEXT NOT NULL,
        UNIQUE (target_namespace, operation_id)
    );
    CREATE INDEX IF NOT EXISTS remembering_references_source ON remembering_references (source, row);
    CREATE INDEX IF NOT EXISTS remembering_references_target
        ON remembering_references (target_namespace, target_id, revision);
    CREATE TABLE IF NOT EXISTS remembering_outbox (
        row INTEGER PRIMARY KEY AUTOINCREMENT,
        intent_json TEXT NOT NULL,
        parked_at INTEGER NOT NULL
    );
";

/// Chunk vectors keyed by profile digest, so vectors of different profiles never mix, and each
/// profile's indexed position.
const VECTOR_TABLES: &str = "
CREATE TABLE IF NOT EXISTS semantic_sources (
    profile BLOB NOT NULL,
    namespace TEXT NOT NULL,
    document_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    revision TEXT,
    withdrawn INTEGER NOT NULL,
    PRIMARY KEY (profile, namespace, document_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS semantic_chunks (
    profile BLOB NOT NULL,
    namespace TEXT NOT NULL,
    document_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    start_byte INTEGER NOT NULL,
    end_byte INTEGER NOT NULL,
    excerpt_digest BLOB NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (profile, namespace, document_id, ordinal)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS semantic_positions (
    profile BLOB NOT NULL PRIMARY KEY,
    position INTEGER NOT NULL
) WITHOUT ROWID;
";

/// What the semantic index cannot hold (by reason) and the search graphs it built.
const UNINDEXED_AND_GRAPH_TABLES: &str = "
CREATE TABLE IF NOT EXISTS semantic_unindexed (
    profile BLOB NOT NULL,
    namespace TEXT NOT NULL,
    document_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (profile, namespace, document_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS semantic_unindexed_by_reason
    ON semantic_unindexed (profile, reason, namespace, document_id);
CREATE TABLE IF NOT EXISTS semantic_graphs (
    profile BLOB NOT NULL PRIMARY KEY,
    position INTEGER NOT NULL,
    vector_set BLOB NOT NULL,
    chunks INTEGER NOT NULL,
    graph BLOB NOT NULL
) WITHOUT ROWID;
";

/// Each thread's bound destination, the threads with records not yet settled, and parked threads.
/// The threads already in the log are all pending once (the worker's first passes settle the idle
/// ones), which a migration does exactly once.
const THREAD_DESTINATIONS_AND_PENDING: &str = "
    CREATE TABLE IF NOT EXISTS thread_bindings (
        thread TEXT PRIMARY KEY,
        destination TEXT NOT NULL,
        generation INTEGER NOT NULL CHECK (generation >= 0)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS thread_bindings_by_destination ON thread_bindings (destination);
    CREATE TABLE IF NOT EXISTS thread_pending (
        thread TEXT PRIMARY KEY,
        tail INTEGER NOT NULL CHECK (tail > 0)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS thread_parks (
        thread TEXT PRIMARY KEY,
        sequence INTEGER NOT NULL,
        kind TEXT NOT NULL
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO thread_pending (thread, tail)
        SELECT thread, MAX(sequence) FROM thread_records GROUP BY thread;
";

/// What extracting each record yielded, once per record, and the running totals.
const EXTRACTION_TABLES: &str = "
    CREATE TABLE IF NOT EXISTS extraction_notes (
        processor TEXT NOT NULL,
        version INTEGER NOT NULL,
        thread TEXT NOT NULL,
        sequence INTEGER NOT NULL,
        PRIMARY KEY (processor, version, thread, sequence)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS extraction_totals (
        name TEXT PRIMARY KEY,
        amount INTEGER NOT NULL CHECK (amount >= 0)
    ) WITHOUT ROWID;
";

/// Builds from before the versioned schema read only their own markers (`memory_meta`'s format and
/// `activity_formats`' per store) and never look at `memory_schema_version`: the markers are set to
/// formats those builds refuse, so an old binary stops at a file it can no longer read instead of
/// writing into it. (Their vector store checked no marker; it opens such a file as before.) The
/// thread log's one-time marker is spent: step 9 did its work.
const FENCE_UNVERSIONED_BUILDS: &str = "
CREATE TABLE IF NOT EXISTS memory_meta (
    key TEXT PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
) STRICT;
INSERT INTO memory_meta (key, value) VALUES ('memory_store_format', 3)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
CREATE TABLE IF NOT EXISTS activity_formats (
    component TEXT PRIMARY KEY,
    format INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO activity_formats (component, format)
    VALUES ('thread_log', 2), ('activity_progress', 2), ('remembering', 2)
    ON CONFLICT (component) DO UPDATE SET format = excluded.format;
DELETE FROM activity_formats WHERE component = 'thread_log.pending';
";

/// A document's history is read from its receipts (`memory_core::revisions`): `redacted` marks a
/// receipt whose words were dropped (past the bound of revisions per document, or withdrawn), so a
/// write finds the ones still holding words without decoding the others; history reads walk a key's
/// revisions by sequence; removing a document from the index finds whether any other document
/// still uses each of its terms.
const REVISION_HISTORY: &str = "
ALTER TABLE memory_receipts
    ADD COLUMN redacted INTEGER NOT NULL DEFAULT 0 CHECK (redacted IN (0, 1));
CREATE INDEX IF NOT EXISTS memory_revisions_by_key ON memory_revisions (namespace, id, sequence);
CREATE INDEX IF NOT EXISTS memory_lexical_postings_by_term ON memory_lexical_postings (term_id);
";

/// Every assembled context reads its thread's suppressions and the store-wide count of suppressions
/// (the generation a turn's cached references are keyed by). Before this step both read every
/// suppression of every thread. `thread` is the thread of a thread record's source
/// (`thread-record/SEQUENCE/THREAD`, memory-core's `SourceId::thread_record`; `NULL` for other
/// sources), a virtual column indexed so one thread's rows are one range; the exact spelling is still
/// checked by memory-core's `record_suppression` on each row read. The count is kept in one row,
/// raised by the write that adds a suppression, in its transaction.
const SUPPRESSIONS_BY_THREAD: &str = "
ALTER TABLE remembering_suppressions ADD COLUMN thread TEXT GENERATED ALWAYS AS (
    CASE WHEN substr(source, 1, 14) = 'thread-record/'
        THEN substr(source, 15 + instr(substr(source, 15), '/'))
    END
) VIRTUAL;
CREATE INDEX IF NOT EXISTS remembering_suppressions_by_thread
    ON remembering_suppressions (thread);
CREATE TABLE IF NOT EXISTS remembering_suppression_count (
    single INTEGER PRIMARY KEY CHECK (single = 1),
    suppressions INTEGER NOT NULL
);
INSERT OR IGNORE INTO remembering_suppression_count (single, suppressions)
    SELECT 1, COUNT(*) FROM remembering_suppressions;
";

/// Step 12: files from before it kept every withdrawn document's earlier words in its receipts, and
/// every term ever indexed in the dictionary. Both go now (the terms no current document uses), as
/// a write drops them from this step on. The bound
/// of revisions per document is not applied here: each document meets it at its next write.
fn drop_withdrawn_words(transaction: &Transaction<'_>) -> Result<(), SchemaError> {
    const OPERATION: &str = "migrate schema";
    let sqlite = |error| SchemaError::Sqlite {
        operation: OPERATION,
        error,
    };
    let withdrawn: Vec<(String, String, String)> = transaction
        .prepare(
            "SELECT r.namespace, r.operation_id, r.body FROM memory_receipts AS r \
             JOIN memory_documents AS d ON d.namespace = r.namespace AND d.id = r.id \
             WHERE d.withdrawn = 1 AND r.revision != d.revision AND r.redacted = 0",
        )
        .and_then(|mut statement| {
            statement
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
                .collect::<Result<_, _>>()
        })
        .map_err(sqlite)?;
    let mut update = transaction
        .prepare(
            "UPDATE memory_receipts SET body = ?3, redacted = 1 \
             WHERE namespace = ?1 AND operation_id = ?2",
        )
        .map_err(sqlite)?;
    for (namespace, operation_id, body) in withdrawn {
        let address = memory_core::NamespaceAddress::parse(&namespace).map_err(|_| {
            SchemaError::Fault(memory_core::StoreFault::corrupt(
                "stored namespace address is invalid",
            ))
        })?;
        let receipt = decode_receipt(&body, &address, &operation_id)
            .map_err(|error| SchemaError::memory(OPERATION, error))?;
        let body = encode(&memory_core::revisions::redact(receipt))
            .map_err(|error| SchemaError::memory(OPERATION, error))?;
        update
            .execute(rusqlite::params![namespace, operation_id, body])
            .map_err(sqlite)?;
    }
    transaction
        .execute_batch(
            "DELETE FROM memory_lexical_terms WHERE NOT EXISTS \
             (SELECT 1 FROM memory_lexical_postings WHERE term_id = memory_lexical_terms.id)",
        )
        .map_err(sqlite)
}

/// Step 2: every live document is indexed again from its stored body under its namespace, then the
/// FTS5 table over every namespace is dropped.
fn index_by_namespace(transaction: &Transaction<'_>) -> Result<(), SchemaError> {
    const OPERATION: &str = "migrate schema";
    let sqlite = |error| SchemaError::Sqlite {
        operation: OPERATION,
        error,
    };
    let mut documents = transaction
        .prepare(
            "SELECT entry, namespace, id, revision, withdrawn, locator, body \
             FROM memory_documents WHERE withdrawn = 0 ORDER BY entry",
        )
        .map_err(sqlite)?;
    let mut rows = documents.query([]).map_err(sqlite)?;
    while let Some(row) = rows.next().map_err(sqlite)? {
        let entry: i64 = row.get(0).map_err(sqlite)?;
        let document = DocumentRow {
            namespace: row.get(1).map_err(sqlite)?,
            id: row.get(2).map_err(sqlite)?,
            revision: row.get(3).map_err(sqlite)?,
            withdrawn: row.get(4).map_err(sqlite)?,
            locator: row.get(5).map_err(sqlite)?,
            body: row.get(6).map_err(sqlite)?,
        }
        .decode()
        .map_err(|error| SchemaError::memory(OPERATION, error))?;
        crate::lexical::index_document(
            transaction,
            entry,
            document.key.namespace.as_str(),
            &document.content.text,
            &speakers(&document),
        )
        .map_err(|error| SchemaError::memory(OPERATION, error.into_memory_error(OPERATION)))?;
    }
    transaction
        .execute_batch("DROP TABLE IF EXISTS memory_fts")
        .map_err(sqlite)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_count_up_from_one_in_list_order() {
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version, index as i64 + 1, "{}", migration.name);
        }
    }
}
