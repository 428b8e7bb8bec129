//! Every earlier format of a file opens with today's stores. Each format is rebuilt from its frozen
//! DDL (`fixtures/schema/`, the SQL the builds of the time ran, markers included) and filled with
//! rows through that SQL (copied from a file today's stores wrote, whose tables have the same
//! columns); then today's stores open it. Every row survives, every store answers as it does on the
//! file the rows came from, the file ends with exactly a fresh file's schema, and opening it again
//! changes nothing. A file of a newer version is refused by every store and reader, untouched.
#![allow(clippy::unwrap_used)]

use crate::common;

mod answers;
mod files;
mod formats;
mod source;

use memory_core::MemoryError;
use memory_core::activity::{ActivityError, NewRecord, Sequence, ThreadLog};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use memory_sqlite::vectors::SqliteVectorStore;
use memory_sqlite::{
    SCHEMA_VERSION, SqliteReader, SqliteStore, StoreFailure, fault_failure, storage_failure,
};
use rusqlite::Connection;

use answers::{
    memory_answers_as_the_source, open_all, open_first, progress_answers_as_the_source,
    remembering_answers_as_the_source, thread_log_answers_as_the_source,
    vectors_answer_as_the_source,
};
use common::NOW;
use files::{
    all_rows, columns, old_markers, recorded_versions, rows, rows_of, schema, stored_rows,
};
use formats::{FORMATS, MEMORY_2, Opener, THREAD_LOG_1, VERSIONED_11};
use source::{build, thread, write_source};

#[tokio::test]
async fn every_earlier_format_is_migrated_without_losing_a_row() {
    let source = write_source().await;
    let fresh = common::fresh_path();
    drop(common::open(&fresh));
    let fresh_schema = schema(&fresh);
    let originals = open_all(&source.path);

    for format in FORMATS {
        let name = format.name;
        let path = build(format, &source);
        let before = stored_rows(&path);
        // Read back as the format's own columns: a later step may add some.
        let before_columns: Vec<Vec<String>> = {
            let connection = Connection::open(&path).unwrap();
            before
                .iter()
                .map(|(table, _)| match table.as_str() {
                    "sqlite_sequence" => vec!["*".to_owned()],
                    table => columns(&connection, table),
                })
                .collect()
        };
        assert!(
            before.iter().all(|(_, rows)| !rows.is_empty()),
            "{name}: every table of the format holds rows before the migration: {before:?}"
        );

        open_first(&path, format.first);
        let stores = open_all(&path);

        // Every row survives, unchanged.
        {
            let connection = Connection::open(&path).unwrap();
            for ((table, rows_before), columns) in before.iter().zip(&before_columns) {
                assert_eq!(
                    &rows_of(&connection, table, columns),
                    rows_before,
                    "{name}: {table}"
                );
            }
            let integrity: String = connection
                .query_row("PRAGMA integrity_check", [], |row| row.get(0))
                .unwrap();
            assert_eq!(integrity, "ok", "{name}");
        }

        // Every step is recorded; those the format already held as recognised.
        let expected: Vec<(i64, bool)> = (1..=SCHEMA_VERSION)
            .map(|version| (version, format.steps().contains(&version)))
            .collect();
        assert_eq!(recorded_versions(&path), expected, "{name}");
        // The file now has exactly a fresh file's schema.
        assert_eq!(schema(&path), fresh_schema, "{name}");
        // Builds from before the version table find formats they refuse.
        assert_eq!(
            old_markers(&path),
            [
                ("activity_progress".to_owned(), 2),
                ("memory_store_format".to_owned(), 3),
                ("remembering".to_owned(), 2),
                ("thread_log".to_owned(), 2),
            ],
            "{name}"
        );

        // The stores answer as on the file the rows came from, and take writes.
        thread_log_answers_as_the_source(format, &stores.log, &originals.log);
        progress_answers_as_the_source(format, &stores.progress, &originals.progress);
        remembering_answers_as_the_source(format, &stores.remembering, &originals.remembering);
        vectors_answer_as_the_source(format, &stores.vectors, &originals.vectors).await;
        memory_answers_as_the_source(format, &stores.memory, &originals.memory, &source.keys).await;
        let appended = stores
            .log
            .append(&thread("a"), NewRecord::user("ana", "after", NOW))
            .unwrap();
        let tail = if format.has(&THREAD_LOG_1) { 3 } else { 0 };
        assert_eq!(appended.sequence, Sequence::new(tail + 1), "{name}");
        SqliteReader::open(&path).expect("a reader opens the migrated file");

        // Settled once, a thread stays settled: nothing is filled in again on the next open.
        let pending = stores.log.overview().unwrap().pending;
        assert!(
            stores
                .log
                .settle(&thread("a"), Sequence::new(tail + 1))
                .unwrap()
        );
        drop(stores);
        let everything = all_rows(&path);
        let reopened = open_all(&path);
        assert_eq!(
            reopened.log.overview().unwrap().pending,
            pending - 1,
            "{name}"
        );
        drop(reopened);
        assert_eq!(
            all_rows(&path),
            everything,
            "{name}: a second open changes nothing"
        );
    }
}

/// A file of version 11 (the last before the revision history) kept a withdrawn document's earlier
/// words in its receipts and its terms in the lexical dictionary. Step 12 drops both, and every
/// document's history reads from its receipts: a replaced document lists both revisions with their
/// words, a withdrawn one its tombstone and a revision without words.
#[tokio::test]
async fn a_version_11_file_gains_its_history_and_loses_withdrawn_words() {
    let source = write_source().await;
    let path = build(
        &formats::Format {
            name: "versioned schema 11",
            pieces: &[&VERSIONED_11],
            first: Opener::Memory,
        },
        &source,
    );
    let withdrawn = common::key("t2", "d1");
    {
        // As a version 11 build left the file: the withdrawn document's put receipt whole, and the
        // term only it used still in the dictionary.
        let connection = Connection::open(&path).unwrap();
        let body: String = connection
            .query_row(
                "SELECT body FROM memory_receipts WHERE operation_id = 'op-t2-d1'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        let mut receipt: memory_core::MemoryReceipt = serde_json::from_str(&body).unwrap();
        receipt.document.content = common::said("zebra crossing review", "Carol");
        receipt.redacted = false;
        connection
            .execute(
                "UPDATE memory_receipts SET body = ?1 WHERE operation_id = 'op-t2-d1'",
                [serde_json::to_string(&receipt).unwrap()],
            )
            .unwrap();
        connection
            .execute(
                "INSERT INTO memory_lexical_terms (term) VALUES ('cross')",
                [],
            )
            .unwrap();
    }
    let holds = |word: &str| {
        all_rows(&path)
            .iter()
            .any(|(_, rows)| rows.iter().any(|row| row.contains(word)))
    };
    assert!(
        holds("crossing") && holds("\"cross\""),
        "the version 11 file holds the words"
    );
    let before = stored_rows(&path);

    let store = SqliteStore::open(&path).unwrap();
    assert!(
        !holds("crossing") && !holds("\"cross\""),
        "a withdrawn document's words survive the migration"
    );
    assert!(
        !holds("Carol"),
        "a withdrawn document's author survives the migration"
    );
    let expected: Vec<(i64, bool)> = (1..=SCHEMA_VERSION)
        .map(|version| (version, false))
        .collect();
    assert_eq!(recorded_versions(&path), expected);
    let fresh = common::fresh_path();
    drop(common::open(&fresh));
    assert_eq!(schema(&path), schema(&fresh));
    // Every other row is as it was.
    let connection = Connection::open(&path).unwrap();
    for (table, rows_before) in &before {
        if [
            "memory_receipts",
            "memory_lexical_terms",
            "memory_schema_version",
        ]
        .contains(&table.as_str())
        {
            continue;
        }
        let columns = match table.as_str() {
            "sqlite_sequence" => vec!["*".to_owned()],
            table => columns(&connection, table),
        };
        assert_eq!(
            &rows_of(&connection, table, &columns),
            rows_before,
            "{table}"
        );
    }

    use memory_core::RevisionHistory as _;
    let replaced = store.revisions(&common::key("t1", "d2"), 10).await.unwrap();
    let texts: Vec<&str> = replaced
        .iter()
        .map(|revision| revision.document.content.text.as_str())
        .collect();
    assert_eq!(texts, ["zebra budget", "running the garden club"]);
    let gone = store.revisions(&withdrawn, 10).await.unwrap();
    assert_eq!(gone.len(), 2);
    assert!(gone[0].document.withdrawn.is_some());
    assert!(!gone[1].words_kept && gone[1].document.content.text.is_empty());
    store.reader().check_consistency().unwrap();
}

/// A reader writes nothing, so it refuses a file from before the version table until a store has
/// migrated it; a fresh file has no schema at all.
#[test]
fn a_reader_refuses_an_unmigrated_file_without_touching_it() {
    let path = common::fresh_path();
    let connection = Connection::open(&path).unwrap();
    for piece in FORMATS[4].pieces {
        connection.execute_batch(piece.sql).unwrap();
    }
    drop(connection);
    let before = std::fs::read(&path).unwrap();
    let error = SqliteReader::open(&path).expect_err("an unmigrated file");
    assert!(
        matches!(
            storage_failure(&error),
            Some(StoreFailure::SchemaTooOld { found: 0, supported }) if *supported == SCHEMA_VERSION
        ),
        "{error:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    drop(SqliteThreadLog::open(&path).unwrap());
    SqliteReader::open(&path).expect("migrated by the thread log");
}

fn too_new(failure: Option<&StoreFailure>) -> bool {
    matches!(
        failure,
        Some(StoreFailure::SchemaTooNew { found, supported })
            if *found == SCHEMA_VERSION + 1 && *supported == SCHEMA_VERSION
    )
}

fn activity_too_new<T>(result: Result<T, ActivityError>) -> bool {
    match result {
        Err(ActivityError::Store(fault)) => too_new(fault_failure(&fault)),
        _ => false,
    }
}

fn memory_too_new<T>(result: Result<T, MemoryError>) -> bool {
    match result {
        Err(error) => too_new(storage_failure(&error)),
        Ok(_) => false,
    }
}

/// A file a newer build migrated is refused by every store and reader of this one, with a typed
/// error, and left as it was.
#[test]
fn a_newer_schema_is_refused_by_every_store_untouched() {
    let path = common::fresh_path();
    drop(common::open(&path));
    Connection::open(&path)
        .unwrap()
        .execute(
            "INSERT INTO memory_schema_version (version, applied_at, recognised) \
             VALUES (?1, 0, 0)",
            [SCHEMA_VERSION + 1],
        )
        .unwrap();
    let (rows_before, schema_before) = (all_rows(&path), schema(&path));
    assert!(memory_too_new(SqliteStore::open(&path)), "memory store");
    assert!(memory_too_new(SqliteReader::open(&path)), "reader");
    assert!(
        memory_too_new(SqliteVectorStore::open(&path)),
        "vector store"
    );
    assert!(activity_too_new(SqliteThreadLog::open(&path)), "thread log");
    assert!(
        activity_too_new(SqliteProgressStore::open(&path)),
        "progress"
    );
    assert!(
        activity_too_new(SqliteRememberingStore::open(&path)),
        "remembering store"
    );
    assert_eq!(all_rows(&path), rows_before);
    assert_eq!(schema(&path), schema_before);
}

/// A marker that no build before the version table wrote is refused, not guessed at.
#[test]
fn an_unknown_pre_versioning_marker_is_refused() {
    let path = common::fresh_path();
    let connection = Connection::open(&path).unwrap();
    connection.execute_batch(MEMORY_2.sql).unwrap();
    connection
        .execute_batch("UPDATE memory_meta SET value = 9")
        .unwrap();
    drop(connection);
    let error = SqliteStore::open(&path).expect_err("unknown format");
    assert!(
        matches!(
            storage_failure(&error),
            Some(StoreFailure::UnknownLegacyFormat {
                marker: "memory_store_format",
                found: 9
            })
        ),
        "{error:?}"
    );
}

/// Every store opening one old file at once: one of them migrates it, the others wait and find it
/// current, and each step is applied once.
#[test]
fn stores_opening_an_old_file_at_once_migrate_it_once() {
    let path = common::fresh_path();
    let connection = Connection::open(&path).unwrap();
    connection
        .pragma_update(None, "journal_mode", "WAL")
        .unwrap();
    for piece in FORMATS[0].pieces {
        connection.execute_batch(piece.sql).unwrap();
    }
    connection
        .execute_batch(
            "INSERT INTO thread_records (thread, sequence, record_json, digest) \
             VALUES ('x', 1, '{}', 'd'), ('x', 2, '{}', 'd'), ('y', 1, '{}', 'd');",
        )
        .unwrap();
    drop(connection);
    let barrier = std::sync::Barrier::new(5);
    std::thread::scope(|threads| {
        for opener in [
            Opener::Memory,
            Opener::ThreadLog,
            Opener::Progress,
            Opener::Remembering,
            Opener::Vectors,
        ] {
            let (barrier, path) = (&barrier, &path);
            threads.spawn(move || {
                barrier.wait();
                open_first(path, opener);
            });
        }
    });
    let expected: Vec<(i64, bool)> = (1..=SCHEMA_VERSION)
        .map(|version| (version, FORMATS[0].steps().contains(&version)))
        .collect();
    assert_eq!(recorded_versions(&path), expected);
    let pending = rows(&Connection::open(&path).unwrap(), "thread_pending");
    assert_eq!(
        pending,
        [
            "[Text(\"x\"), Integer(2)]".to_owned(),
            "[Text(\"y\"), Integer(1)]".to_owned()
        ]
    );
}
