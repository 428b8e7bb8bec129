//! Versioned schema migrations, applied on open.
//!
//! `memory_schema_version` holds one row per applied migration. Opening a store takes a transaction-level
//! advisory lock (so concurrent openers on several hosts migrate once), creates the schema named in the
//! options if needed, applies every migration newer than the recorded version in order, and records each,
//! all in one transaction: a failed migration leaves the database as it was. A database whose recorded
//! version is newer than [`SCHEMA_VERSION`] is refused with [`PostgresFailure::SchemaTooNew`] and left
//! untouched, so an old build never misreads rows written by a newer one.
//!
//! To change the schema, append a migration; never edit one that has shipped.

use deadpool_postgres::Object;
use memory_core::MemoryError;

use crate::db::SchemaName;
use crate::error::{Fail, PostgresFailure};
use crate::retry::commit;

/// The newest schema version this build migrates to, reads and writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The advisory lock key that serializes migrations in one database ("memory-m" in ASCII).
const MIGRATION_LOCK: i64 = 0x6d65_6d6f_7279_2d6d;

/// Migration 1: every table of the memory store, the activity stores and the vector store.
///
/// - `memory_documents`: the current document of each key (withdrawn tombstones included); `search` is
///   its full-text vector (NULL once withdrawn), GIN-indexed; `body` is the document's JSON.
/// - `memory_document_scopes`: scopes of current, non-withdrawn documents, with their namespace, so search
///   filters namespace and scope in the same statement that matches.
/// - `memory_change_head`: one row holding the latest change sequence. Every write transaction locks it
///   first, which makes writers take turns and sequence numbers follow commit order without gaps, so a
///   follower reading `changes_since` never skips a change that commits later with a smaller number.
/// - `memory_changes`, `memory_revisions`, `memory_receipts`: as in SQLite.
/// - `memory_tsquery_or`: an aggregate OR-ing `tsquery` values, so a query's words are combined without
///   ever being parsed as query syntax.
/// - Text keys that are paged or listed in order are `COLLATE "C"`, so the order is bytewise, as in
///   SQLite, whatever the database's locale.
/// - `thread_records`, `thread_heads` (per-thread tail, row-locked by appends), `activity_progress`,
///   `remembering_*`, `semantic_*`: the activity and vector tables.
const MIGRATION_1: &str = r#"
CREATE TABLE memory_documents (
    entry BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    revision TEXT NOT NULL,
    withdrawn BOOLEAN NOT NULL,
    locator TEXT NOT NULL,
    search TSVECTOR,
    body TEXT NOT NULL,
    UNIQUE (namespace, id),
    CHECK ((search IS NULL) OR NOT withdrawn)
);
CREATE INDEX memory_documents_search ON memory_documents USING GIN (search);
CREATE TABLE memory_document_scopes (
    entry BIGINT NOT NULL REFERENCES memory_documents (entry),
    scope TEXT NOT NULL,
    namespace TEXT NOT NULL,
    PRIMARY KEY (entry, scope)
);
CREATE INDEX memory_document_scopes_by_scope ON memory_document_scopes (namespace, scope, entry);
CREATE TABLE memory_change_head (
    singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    head BIGINT NOT NULL CHECK (head >= 0)
);
INSERT INTO memory_change_head (singleton, head) VALUES (TRUE, 0);
CREATE TABLE memory_changes (
    sequence BIGINT PRIMARY KEY CHECK (sequence > 0),
    namespace TEXT NOT NULL,
    id TEXT NOT NULL
);
CREATE TABLE memory_revisions (
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    revision TEXT NOT NULL,
    predecessor TEXT,
    sequence BIGINT NOT NULL UNIQUE,
    PRIMARY KEY (namespace, id, revision)
);
CREATE TABLE memory_receipts (
    namespace TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    id TEXT NOT NULL,
    revision TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (namespace, operation_id)
);
CREATE INDEX memory_receipts_by_revision ON memory_receipts (namespace, id, revision);
CREATE AGGREGATE memory_tsquery_or (tsquery) (SFUNC = tsquery_or, STYPE = tsquery);

CREATE TABLE thread_records (
    thread TEXT NOT NULL,
    sequence BIGINT NOT NULL CHECK (sequence > 0),
    record_json TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (thread, sequence)
);
CREATE TABLE thread_heads (
    thread TEXT COLLATE "C" PRIMARY KEY,
    tail BIGINT NOT NULL CHECK (tail > 0)
);
CREATE FUNCTION thread_records_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'thread records are append-only';
END
$$;
CREATE TRIGGER thread_records_append_only
    BEFORE UPDATE OR DELETE ON thread_records
    FOR EACH ROW EXECUTE FUNCTION thread_records_append_only();

CREATE TABLE activity_progress (
    processor TEXT COLLATE "C" NOT NULL,
    version BIGINT NOT NULL,
    thread TEXT COLLATE "C" NOT NULL,
    cursor BIGINT NOT NULL DEFAULT 0 CHECK (cursor >= 0),
    epoch BIGINT NOT NULL DEFAULT 0,
    owner TEXT,
    lease_expires_at BIGINT,
    pending_sequence BIGINT,
    pending_work_id TEXT,
    pending_json TEXT,
    last_advance_at BIGINT,
    PRIMARY KEY (processor, version, thread)
);

CREATE TABLE remembering_intents (
    row BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    intent_json TEXT NOT NULL,
    counted BOOLEAN NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued', 'done')),
    epoch BIGINT NOT NULL DEFAULT 0,
    owner TEXT,
    lease_expires_at BIGINT,
    proposal_json TEXT,
    command_json TEXT,
    command_attempt BIGINT,
    outcome_json TEXT,
    admitted_at BIGINT NOT NULL
);
CREATE INDEX remembering_intents_open ON remembering_intents (state, row);
CREATE TABLE remembering_suppressions (
    source TEXT NOT NULL,
    revision TEXT NOT NULL,
    suppressed_at BIGINT NOT NULL,
    PRIMARY KEY (source, revision)
);
CREATE TABLE remembering_references (
    row BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source TEXT NOT NULL,
    source_revision TEXT NOT NULL,
    target_namespace TEXT NOT NULL,
    target_id TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    revision TEXT NOT NULL,
    UNIQUE (target_namespace, operation_id)
);
CREATE INDEX remembering_references_source ON remembering_references (source, row);
CREATE INDEX remembering_references_target
    ON remembering_references (target_namespace, target_id, revision);
CREATE TABLE remembering_outbox (
    row BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    intent_json TEXT NOT NULL,
    parked_at BIGINT NOT NULL
);

CREATE TABLE semantic_sources (
    profile BYTEA NOT NULL,
    namespace TEXT NOT NULL,
    document_id TEXT NOT NULL,
    generation BIGINT NOT NULL,
    revision TEXT,
    withdrawn BOOLEAN NOT NULL,
    PRIMARY KEY (profile, namespace, document_id)
);
CREATE TABLE semantic_chunks (
    profile BYTEA NOT NULL,
    namespace TEXT NOT NULL,
    document_id TEXT NOT NULL,
    ordinal BIGINT NOT NULL,
    start_byte BIGINT NOT NULL,
    end_byte BIGINT NOT NULL,
    excerpt_digest BYTEA NOT NULL,
    vector BYTEA NOT NULL,
    PRIMARY KEY (profile, namespace, document_id, ordinal)
);
CREATE TABLE semantic_positions (
    profile BYTEA PRIMARY KEY,
    position BIGINT NOT NULL
);
"#;

/// Migration 2: what the semantic index cannot hold, and its persisted search graph.
///
/// - `semantic_unindexed`: sources a limit refused, with the reason and refused generation (an
///   admitted vector replacement deletes the key's row in its transaction); keys are `COLLATE "C"`
///   because retries page through them in order.
/// - `semantic_graphs`: one persisted search graph per profile, opaque bytes tagged with the position
///   and vector-set digest they were built over.
const MIGRATION_2: &str = r#"
CREATE TABLE semantic_unindexed (
    profile BYTEA NOT NULL,
    namespace TEXT COLLATE "C" NOT NULL,
    document_id TEXT COLLATE "C" NOT NULL,
    generation BIGINT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (profile, namespace, document_id)
);
CREATE INDEX semantic_unindexed_by_reason
    ON semantic_unindexed (profile, reason, namespace, document_id);
CREATE TABLE semantic_graphs (
    profile BYTEA PRIMARY KEY,
    position BIGINT NOT NULL,
    vector_set BYTEA NOT NULL,
    chunks BIGINT NOT NULL,
    graph BYTEA NOT NULL
);
"#;

/// Migration 3: lexical search keyed by namespace inside the index.
///
/// - `memory_lexical_keys(namespace, search)`: a document's lexemes, each prefixed with the first 16
///   hex digits of its namespace's md5 (`<digest>:<lexeme>`), as a text array.
/// - `memory_documents_lexical`: a GIN index over those keys, so a search's keys (its words' lexemes
///   under the caller's digest) find the namespace's matching documents only: a namespace's posting
///   lists hold its own documents. Without it, the GIN index over `search` collected every namespace's
///   matches (573,542 of 1,000,000 documents for two words) before the namespace filter kept 57. An
///   expression index rather than a stored column: no row is rewritten. Rejected: one more lexeme
///   naming the namespace in `search` (GIN then skips through every namespace's postings of a frequent
///   word, 180 pages for a 100-document namespace), and `btree_gin`'s `(namespace, search)` index (an
///   extension lives in one schema, and dropping that schema would drop the other schemas' indexes).
///   The price is size: 610 MB for 1,000,000 short documents, against 71 MB for the index over
///   `search`.
/// - `memory_documents_search`, the index over `search` alone, is dropped: no statement uses it.
const MIGRATION_3: &str = r#"
CREATE FUNCTION memory_lexical_keys(namespace TEXT, search TSVECTOR) RETURNS TEXT[]
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT ARRAY(SELECT left(md5(namespace), 16) || ':' || lexeme FROM unnest(search)) $$;
CREATE INDEX memory_documents_lexical ON memory_documents
    USING GIN (memory_lexical_keys(namespace, search));
DROP INDEX memory_documents_search;
"#;

/// Migration 4: thread destinations, the pending-thread index and extraction notes.
///
/// - `thread_heads.destination`, `.generation`: the thread's binding (null: a thread from before
///   bindings), written under the head's row lock that appends already take.
/// - `thread_pending(thread, tail)`: threads with records a worker has not settled; every existing
///   thread starts pending once, and the worker's first passes settle the idle ones.
/// - `thread_parks(thread, sequence, kind)`: threads parked at a record that cannot be remembered.
/// - `extraction_notes` (one row per processor, version, thread and noted record) and
///   `extraction_totals` (name, amount): what extraction kept and dropped, for `memory status`.
const MIGRATION_4: &str = r#"
ALTER TABLE thread_heads ADD COLUMN destination TEXT, ADD COLUMN generation BIGINT
    CHECK (generation >= 0);
CREATE INDEX thread_heads_by_destination ON thread_heads (destination)
    WHERE destination IS NOT NULL;
CREATE TABLE thread_pending (
    thread TEXT COLLATE "C" PRIMARY KEY,
    tail BIGINT NOT NULL CHECK (tail > 0)
);
INSERT INTO thread_pending (thread, tail) SELECT thread, tail FROM thread_heads;
CREATE TABLE thread_parks (
    thread TEXT COLLATE "C" PRIMARY KEY,
    sequence BIGINT NOT NULL,
    kind TEXT NOT NULL
);
CREATE TABLE extraction_notes (
    processor TEXT COLLATE "C" NOT NULL,
    version BIGINT NOT NULL,
    thread TEXT COLLATE "C" NOT NULL,
    sequence BIGINT NOT NULL,
    PRIMARY KEY (processor, version, thread, sequence)
);
CREATE TABLE extraction_totals (
    name TEXT COLLATE "C" PRIMARY KEY,
    amount BIGINT NOT NULL CHECK (amount >= 0)
);
"#;

/// Migration 5: a document's history (`memory_core::revisions`).
///
/// - `memory_receipts.redacted`: the receipt's words were dropped (past the bound of revisions per
///   document, or withdrawn), so a write finds the ones still holding words without decoding the
///   others.
/// - `memory_revisions_by_key`: history reads walk a key's revisions by sequence.
/// - Databases from before it kept every withdrawn document's earlier words in its receipts: they
///   are redacted now (the content emptied as a tombstone's, `redacted` set), as a withdrawal
///   redacts them from this version on. The bound of revisions per document is not applied here:
///   each document meets it at its next write.
const MIGRATION_5: &str = r#"
ALTER TABLE memory_receipts ADD COLUMN redacted BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX memory_revisions_by_key ON memory_revisions (namespace, id, sequence);
UPDATE memory_receipts AS r
SET redacted = TRUE,
    body = jsonb_set(
        jsonb_set(
            r.body::jsonb,
            '{document,content}',
            '{"text":"","attributions":[],"metadata":{},"recorded_at":0,"extracted_at":0}'::jsonb
        ),
        '{redacted}',
        'true'::jsonb
    )::text
FROM memory_documents AS d
WHERE d.namespace = r.namespace AND d.id = r.id AND d.withdrawn AND r.revision <> d.revision;
"#;

/// Migration 6: every assembled context reads its thread's suppressions and the count of all
/// suppressions (the generation a turn's cached references are keyed by); before it both read every
/// suppression of every thread.
///
/// - `remembering_suppressions.thread`: the thread of a thread record's source
///   (`thread-record/SEQUENCE/THREAD`, memory-core's `SourceId::thread_record`; `NULL` for other
///   sources), stored and indexed so one thread's rows are one index range. The exact spelling is
///   still checked by memory-core's `record_suppression` on each row read.
/// - `remembering_suppression_count`: the count in one row, raised by the write that adds a
///   suppression, in its transaction (the remembering lock serializes those writes).
const MIGRATION_6: &str = r#"
ALTER TABLE remembering_suppressions ADD COLUMN thread TEXT GENERATED ALWAYS AS (
    CASE WHEN left(source, 14) = 'thread-record/'
        THEN substring(source from '^thread-record/[^/]*/(.*)$')
    END
) STORED;
CREATE INDEX remembering_suppressions_by_thread ON remembering_suppressions (thread);
CREATE TABLE remembering_suppression_count (
    single INTEGER PRIMARY KEY CHECK (single = 1),
    suppressions BIGINT NOT NULL CHECK (suppressions >= 0)
);
INSERT INTO remembering_suppression_count (single, suppressions)
    SELECT 1, COUNT(*) FROM remembering_suppressions;
"#;

/// Every migration, in order; migration `n` (1-based) brings the schema to version `n`.
const MIGRATIONS: &[&str] = &[
    MIGRATION_1,
    MIGRATION_2,
    MIGRATION_3,
    MIGRATION_4,
    MIGRATION_5,
    MIGRATION_6,
    MIGRATION_7,
    MIGRATION_8,
    MIGRATION_9,
];

/// How many chunks each profile stores, kept in one row per profile by the replacement that changes
/// them, in its transaction (the source row's lock orders replacements of one document; the count's
/// row lock orders the rest): `memory sync` with nothing to index and a load's bound read it without
/// walking the vectors. The migration counts once what is already there.
const MIGRATION_9: &str = r#"
CREATE TABLE semantic_chunk_counts (
    profile BYTEA PRIMARY KEY,
    chunks BIGINT NOT NULL CHECK (chunks >= 0)
);
INSERT INTO semantic_chunk_counts (profile, chunks)
    SELECT profile, COUNT(*) FROM semantic_chunks GROUP BY profile;
"#;

/// The context layer's fold checkpoints (memory-context's `fold`): each thread's newest state of one
/// fold at one version, a cache of what the log says, so a cold read starts from it.
const MIGRATION_8: &str = r#"
CREATE TABLE IF NOT EXISTS thread_fold_checkpoints (
    thread TEXT NOT NULL,
    fold TEXT NOT NULL,
    version BIGINT NOT NULL,
    through BIGINT NOT NULL,
    forgotten TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (thread, fold, version)
);
"#;

/// The reverse of correction links (`crate::corrections`): the current documents whose `corrects`
/// member names a document, by namespace and the named id. Partial, so documents without a link (all
/// but a few) cost nothing. `memory_corrects_id` reads the member as `json` (not `jsonb`, which has no
/// room for the `\u0000` a document's text may hold), skips the parse of a body that cannot hold a
/// link, and reads a body that is not JSON (a damaged row) as no link, so the store's consistency
/// check, not a failing index, is what reports it.
const MIGRATION_7: &str = r#"
CREATE OR REPLACE FUNCTION memory_corrects_id(body TEXT) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF strpos(body, '"corrects"') = 0 THEN
        RETURN NULL;
    END IF;
    BEGIN
        RETURN body::json #>> '{content,metadata,corrects,id}';
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END;
END
$$;
CREATE INDEX IF NOT EXISTS memory_documents_by_correction
    ON memory_documents (namespace, memory_corrects_id(body))
    WHERE memory_corrects_id(body) IS NOT NULL;
"#;

/// Creates `schema` if given and brings it to [`SCHEMA_VERSION`], in one transaction.
pub(crate) async fn migrate(
    client: &mut Object,
    schema: Option<&SchemaName>,
) -> Result<(), Fail<MemoryError>> {
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    if let Some(schema) = schema {
        // The name was validated to need no quoting.
        transaction
            .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {}", schema.as_str()))
            .await?;
    }
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS memory_schema_version (
                version BIGINT PRIMARY KEY,
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )",
        )
        .await?;
    let found: i64 = transaction
        .query_one(
            "SELECT COALESCE(max(version), 0) FROM memory_schema_version",
            &[],
        )
        .await?
        .get(0);
    if found > SCHEMA_VERSION {
        return Err(Fail::Model(MemoryError::storage(
            "open store",
            PostgresFailure::SchemaTooNew {
                found,
                supported: SCHEMA_VERSION,
            },
        )));
    }
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        let version = index as i64 + 1;
        transaction.batch_execute(migration).await?;
        transaction
            .execute(
                "INSERT INTO memory_schema_version (version) VALUES ($1)",
                &[&version],
            )
            .await?;
        tracing::info!(version, "applied PostgreSQL schema migration");
    }
    commit(transaction).await
}
