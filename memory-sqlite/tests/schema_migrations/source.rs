//! A file today's stores wrote, with rows in every table, and an earlier format rebuilt from its
//! frozen DDL and filled with those rows.

use std::path::PathBuf;

use memory_core::activity::{
    ExtractionNote, Intent, NewRecord, ProcessorId, ProcessorVersion, ProgressKey, ProgressStore,
    RememberingStore, Sequence, SourceId, SourceReference, SourceRevision, ThreadDestination,
    ThreadId, ThreadLog, WorkerId,
};
use memory_core::vectors::{
    GraphSnapshot, ProfileDigest, SourceGeneration, StoredChunk, StoredSource, StoredSourceState,
    UnindexedReason, VectorLoadLimits, VectorStore,
};
use memory_core::{ChangeSequence, MemoryKey, MemoryReader, MemoryWriter, OperationId, Revision};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use memory_sqlite::vectors::SqliteVectorStore;
use rusqlite::Connection;

use super::files::{columns, our_tables};
use super::formats::{Format, MEMORY_1};
use crate::common::{self, NOW, key, put, said, scope, withdraw};

pub const PROFILE: ProfileDigest = ProfileDigest::from_bytes([1; 32]);

pub fn limits() -> VectorLoadLimits {
    VectorLoadLimits {
        dimensions: 2,
        max_sources: 100,
        max_chunks: 100,
    }
}

pub fn thread(name: &str) -> ThreadId {
    ThreadId::new(name).unwrap()
}

pub fn progress_key() -> ProgressKey {
    ProgressKey {
        processor: ProcessorId::new("extract").unwrap(),
        version: ProcessorVersion::new(1),
        thread: thread("a"),
    }
}

pub fn remember(source: &str) -> Intent {
    Intent::Remember {
        source: SourceId::new(source).unwrap(),
        revision: SourceRevision::new("v1").unwrap(),
        target: key("t1", source),
        scopes: vec![scope("s")],
    }
}

pub fn reference() -> SourceReference {
    SourceReference {
        source: SourceId::new("src-a").unwrap(),
        source_revision: SourceRevision::new("v1").unwrap(),
        target: key("t1", "src-a"),
        operation_id: OperationId::new("op-src-a").unwrap(),
        revision: Revision::new("r-src-a").unwrap(),
    }
}

/// A file today's stores wrote, holding rows in every table, and what format 1's FTS5 table held
/// for it: `(entry, text, speakers)` of each live document.
pub struct Source {
    pub path: PathBuf,
    pub keys: Vec<MemoryKey>,
    fts_rows: Vec<(i64, String, String)>,
}

pub async fn write_source() -> Source {
    let path = common::fresh_path();
    let store = common::open(&path);
    let corpus = [
        ("t1", "d1", "the budget review ran long", "Alice"),
        ("t1", "d2", "running the garden club", "Bob"),
        ("t1", "d3", "lunch with the budget team", "Alice"),
        ("t2", "d1", "zebra crossing review", "Carol"),
        ("t2", "d2", "a garden lunch with Bob", "Dave"),
        ("t2", "d3", "Alice runs the review", "Bob"),
    ];
    let mut keys = Vec::new();
    for (tenant, id, text, speaker) in corpus {
        store
            .apply(put(
                &key(tenant, id),
                &format!("op-{tenant}-{id}"),
                None,
                said(text, speaker),
                &["s"],
            ))
            .await
            .unwrap();
        keys.push(key(tenant, id));
    }
    // A replacement and a withdrawal, so the file holds more than first revisions.
    let replaced = store
        .read(&key("t1", "d2"))
        .await
        .unwrap()
        .unwrap()
        .revision;
    store
        .apply(put(
            &key("t1", "d2"),
            "op-t1-d2-again",
            Some(&replaced),
            said("zebra budget", "Alice"),
            &["s"],
        ))
        .await
        .unwrap();
    let withdrawn = store
        .read(&key("t2", "d1"))
        .await
        .unwrap()
        .unwrap()
        .revision;
    store
        .apply(withdraw(&key("t2", "d1"), "op-t2-d1-forget", &withdrawn))
        .await
        .unwrap();
    drop(store);

    let log = SqliteThreadLog::open(&path).unwrap();
    let destination = ThreadDestination::for_user("ana", vec![scope("s")]).unwrap();
    for at in 0..3 {
        log.append_to(
            &thread("a"),
            Some(&destination),
            NewRecord::user("ana", format!("hello {at}"), NOW + at),
        )
        .unwrap();
    }
    log.append(&thread("b"), NewRecord::user("bo", "one record", NOW))
        .unwrap();
    for at in 0..2 {
        log.append(&thread("c"), NewRecord::user("cy", "settled", NOW + at))
            .unwrap();
    }
    assert!(log.settle(&thread("c"), Sequence::new(2)).unwrap());
    log.append(&thread("d"), NewRecord::user("di", "parked", NOW))
        .unwrap();
    log.park(&thread("d"), Sequence::new(1), "invalid-input")
        .unwrap();
    drop(log);

    let progress = SqliteProgressStore::open(&path).unwrap();
    let claim = progress
        .claim(&progress_key(), &WorkerId::new("w1").unwrap(), 60_000, NOW)
        .unwrap();
    progress
        .advance(&claim.lease, Sequence::new(1), NOW)
        .unwrap();
    progress
        .note_extraction(
            &progress_key(),
            Sequence::new(1),
            &ExtractionNote {
                kept: 2,
                dropped: [("question".to_owned(), 1)].into(),
                ..ExtractionNote::default()
            },
        )
        .unwrap();
    drop(progress);

    let remembering = SqliteRememberingStore::open(&path).unwrap();
    remembering.admit(&remember("src-a"), 10, NOW).unwrap();
    remembering
        .suppress(&SourceId::new("src-b").unwrap(), None, NOW)
        .unwrap();
    // A forgotten thread record: step 13 finds it by its thread, and counts it with the rest.
    remembering
        .suppress(
            &SourceId::thread_record(&thread("a"), Sequence::new(2)),
            None,
            NOW,
        )
        .unwrap();
    remembering.save_references(&[reference()]).unwrap();
    remembering.outbox_put(&remember("src-c"), 10, NOW).unwrap();
    drop(remembering);

    let vectors = SqliteVectorStore::open(&path).unwrap();
    let chunk = |ordinal: u32, vector: [f32; 2]| StoredChunk {
        ordinal,
        start: u64::from(ordinal) * 4,
        end: u64::from(ordinal) * 4 + 4,
        excerpt_digest: [ordinal as u8; 32],
        vector: vector.to_vec(),
    };
    vectors
        .replace_source(
            &PROFILE,
            &StoredSource {
                key: key("t1", "d1"),
                generation: SourceGeneration::new(1),
                state: StoredSourceState::Indexed {
                    revision: Revision::new("r1").unwrap(),
                    chunks: vec![chunk(0, [1.0, 0.0]), chunk(1, [0.6, 0.8])],
                },
            },
        )
        .await
        .unwrap();
    vectors
        .replace_source(
            &PROFILE,
            &StoredSource {
                key: key("t2", "d1"),
                generation: SourceGeneration::new(2),
                state: StoredSourceState::Withdrawn,
            },
        )
        .await
        .unwrap();
    vectors
        .set_indexed_position(&PROFILE, ChangeSequence::new(7))
        .await
        .unwrap();
    vectors
        .record_unindexed(
            &PROFILE,
            &key("t1", "d3"),
            SourceGeneration::new(3),
            UnindexedReason::Capacity,
        )
        .await
        .unwrap();
    vectors
        .save_graph(
            &PROFILE,
            &GraphSnapshot {
                position: ChangeSequence::new(7),
                vector_set: [9; 32],
                chunks: 2,
                bytes: vec![1, 2, 3],
            },
        )
        .await
        .unwrap();
    drop(vectors);

    let connection = Connection::open(&path).unwrap();
    let fts_rows = corpus
        .iter()
        .filter_map(|(tenant, id, text, speaker)| {
            let (text, speaker) = match (*tenant, *id) {
                ("t2", "d1") => return None,
                ("t1", "d2") => ("zebra budget", "Alice"),
                _ => (*text, *speaker),
            };
            let entry = connection
                .query_row(
                    "SELECT entry FROM memory_documents WHERE namespace = ?1 AND id = ?2",
                    [key(tenant, id).namespace.as_str(), id],
                    |row| row.get::<_, i64>(0),
                )
                .unwrap();
            Some((entry, text.to_owned(), speaker.to_owned()))
        })
        .collect();
    Source {
        path,
        keys,
        fts_rows,
    }
}

/// Builds `format` from its frozen DDL and fills every table it has with the source's rows.
pub fn build(format: &Format, source: &Source) -> PathBuf {
    let path = common::fresh_path();
    let connection = Connection::open(&path).unwrap();
    connection
        .pragma_update(None, "journal_mode", "WAL")
        .unwrap();
    for piece in format.pieces {
        connection.execute_batch(piece.sql).unwrap();
    }
    connection
        .execute(
            "ATTACH DATABASE ?1 AS source",
            [source.path.to_str().unwrap()],
        )
        .unwrap();
    // The format's own columns: today's tables may have gained some since (step 12's
    // `memory_receipts.redacted`). A format with the version table lists its steps itself.
    for table in our_tables(&connection) {
        if table == "memory_schema_version" {
            continue;
        }
        let columns = columns(&connection, &table).join(", ");
        connection
            .execute_batch(&format!(
                "INSERT INTO main.\"{table}\" ({columns}) SELECT {columns} FROM source.\"{table}\""
            ))
            .unwrap();
    }
    if format.has(&MEMORY_1) {
        for (entry, text, speakers) in &source.fts_rows {
            connection
                .execute(
                    "INSERT INTO memory_fts (rowid, text, speakers) VALUES (?1, ?2, ?3)",
                    rusqlite::params![entry, text, speakers],
                )
                .unwrap();
        }
    }
    connection.execute_batch("DETACH DATABASE source").unwrap();
    path
}
