//! Opening the stores on a file and checking that they answer as on the file the rows came from.

use std::path::Path;

use memory_core::activity::{
    ExtractionTotals, ProgressStore, RememberingStore, Sequence, SourceId, SourceRevision,
    ThreadId, ThreadLog, ThreadSuppressions,
};
use memory_core::vectors::VectorStore;
use memory_core::{
    ChangeFeed, ChangeSequence, LexicalSearch, MemoryKey, MemoryReader, MemoryWriter,
};
use memory_sqlite::SqliteStore;
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use memory_sqlite::vectors::SqliteVectorStore;

use super::formats::{
    Format, MEMORY_1, MEMORY_2, Opener, PROGRESS_1, PROGRESS_EXTRACTION, REMEMBERING_1,
    THREAD_LOG_1, THREAD_LOG_PENDING, VECTORS_1, VECTORS_UNINDEXED_GRAPHS,
};
use super::source::{PROFILE, limits, remember};
use crate::common::{self, access, key, put, said};

/// Queries whose answers are compared, per tenant.
pub const QUERIES: &[&str] = &[
    "budget review",
    "zebra",
    "Alice running",
    "garden lunch",
    "Bob",
];

/// Every store on one file.
pub struct Stores {
    pub memory: SqliteStore,
    pub log: SqliteThreadLog,
    pub progress: SqliteProgressStore,
    pub remembering: SqliteRememberingStore,
    pub vectors: SqliteVectorStore,
}

/// Opens every store (after [`open_first`], they find the file current).
pub fn open_all(path: &Path) -> Stores {
    Stores {
        memory: common::open(path),
        log: SqliteThreadLog::open(path).unwrap(),
        progress: SqliteProgressStore::open(path).unwrap(),
        remembering: SqliteRememberingStore::open(path).unwrap(),
        vectors: SqliteVectorStore::open(path).unwrap(),
    }
}

/// Opens only `opener`'s store, so it is the one that migrates the file.
pub fn open_first(path: &Path, opener: Opener) {
    match opener {
        Opener::Memory => drop(common::open(path)),
        Opener::ThreadLog => drop(SqliteThreadLog::open(path).unwrap()),
        Opener::Progress => drop(SqliteProgressStore::open(path).unwrap()),
        Opener::Remembering => drop(SqliteRememberingStore::open(path).unwrap()),
        Opener::Vectors => drop(SqliteVectorStore::open(path).unwrap()),
    }
}

pub async fn search_answers(store: &SqliteStore) -> Vec<Vec<(MemoryKey, f64)>> {
    let mut answers = Vec::new();
    for tenant in ["t1", "t2"] {
        for query in QUERIES {
            answers.push(
                store
                    .search(&access(tenant, "s"), query, 100)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|hit| (hit.key, hit.score))
                    .collect(),
            );
        }
    }
    answers
}

pub fn threads_of(log: &SqliteThreadLog) -> Vec<ThreadId> {
    log.threads(None, 100).unwrap()
}

/// Checks the memory store on `migrated` against the source, through the ports.
pub async fn memory_answers_as_the_source(
    format: &Format,
    migrated: &SqliteStore,
    source: &SqliteStore,
    keys: &[MemoryKey],
) {
    let name = format.name;
    let held = format.has(&MEMORY_1) || format.has(&MEMORY_2);
    for key in keys {
        let expected = if held {
            source.read(key).await.unwrap()
        } else {
            None
        };
        assert_eq!(
            migrated.read(key).await.unwrap(),
            expected,
            "{name}: {key:?}"
        );
    }
    let (head, changes) = (
        migrated.head().await.unwrap(),
        migrated
            .changes_since(ChangeSequence::ZERO, 100)
            .await
            .unwrap(),
    );
    if held {
        assert_eq!(head, source.head().await.unwrap(), "{name}");
        assert_eq!(
            changes,
            source
                .changes_since(ChangeSequence::ZERO, 100)
                .await
                .unwrap(),
            "{name}"
        );
        assert_eq!(
            search_answers(migrated).await,
            search_answers(source).await,
            "{name}: search answers as before (format 1's index rebuilt from the bodies)"
        );
    } else {
        assert!(changes.is_empty(), "{name}");
    }
    migrated.reader().check_consistency().unwrap();
    // A write, then a search that finds it.
    migrated
        .apply(put(
            &key("t1", "after"),
            "op-after",
            None,
            said("okapi after the migration", "Erin"),
            &["s"],
        ))
        .await
        .unwrap();
    let hits = migrated
        .search(&access("t1", "s"), "okapi", 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "{name}");
    assert_eq!(hits[0].key, key("t1", "after"), "{name}");
    migrated.reader().check_consistency().unwrap();
}

/// Checks the thread log on `migrated` against the source: records as they were; the pending
/// index as it was, or, for a log from before it, every thread pending once at its tail.
pub fn thread_log_answers_as_the_source(
    format: &Format,
    migrated: &SqliteThreadLog,
    source: &SqliteThreadLog,
) {
    let name = format.name;
    if !format.has(&THREAD_LOG_1) {
        assert!(threads_of(migrated).is_empty(), "{name}");
        return;
    }
    let threads = threads_of(source);
    assert_eq!(threads_of(migrated), threads, "{name}");
    for thread in &threads {
        assert_eq!(
            migrated.read_page(thread, Sequence::ZERO, 100).unwrap(),
            source.read_page(thread, Sequence::ZERO, 100).unwrap(),
            "{name}: {thread:?}"
        );
    }
    if format.has(&THREAD_LOG_PENDING) {
        assert_eq!(
            migrated.pending_threads(None, 100).unwrap(),
            source.pending_threads(None, 100).unwrap(),
            "{name}: the pending index is kept, not filled again"
        );
        assert_eq!(
            migrated.overview().unwrap(),
            source.overview().unwrap(),
            "{name}"
        );
    } else {
        let pending: Vec<(ThreadId, Sequence)> = migrated
            .pending_threads(None, 100)
            .unwrap()
            .into_iter()
            .map(|pending| (pending.thread, pending.tail))
            .collect();
        let every_thread: Vec<(ThreadId, Sequence)> = threads
            .iter()
            .map(|thread| (thread.clone(), migrated.inspect_tail(thread).unwrap()))
            .collect();
        assert_eq!(pending, every_thread, "{name}: every thread pending once");
        let overview = migrated.overview().unwrap();
        assert_eq!(
            (overview.unbound, overview.pending),
            (threads.len() as u64, threads.len() as u64),
            "{name}"
        );
    }
}

pub fn progress_answers_as_the_source(
    format: &Format,
    migrated: &SqliteProgressStore,
    source: &SqliteProgressStore,
) {
    let name = format.name;
    let expected = if format.has(&PROGRESS_1) {
        source.inspect_all(100).unwrap()
    } else {
        Vec::new()
    };
    assert_eq!(migrated.inspect_all(100).unwrap(), expected, "{name}");
    let totals = if format.has(&PROGRESS_EXTRACTION) {
        source.extraction_totals().unwrap()
    } else {
        ExtractionTotals::default()
    };
    assert_eq!(migrated.extraction_totals().unwrap(), totals, "{name}");
}

pub fn remembering_answers_as_the_source(
    format: &Format,
    migrated: &SqliteRememberingStore,
    source: &SqliteRememberingStore,
) {
    let name = format.name;
    let held = format.has(&REMEMBERING_1);
    let answers = |store: &SqliteRememberingStore| {
        (
            store.open_intents().unwrap(),
            format!("{:?}", store.outbox_peek(10).unwrap()),
            format!(
                "{:?}",
                store
                    .references(&SourceId::new("src-a").unwrap(), 0, 10)
                    .unwrap()
            ),
            store
                .is_suppressed(
                    &SourceId::new("src-b").unwrap(),
                    &SourceRevision::new("v1").unwrap(),
                )
                .unwrap(),
            format!(
                "{:?}",
                store.inspect_intent(&remember("src-a").id()).unwrap()
            ),
            format!(
                "{:?}",
                store
                    .thread_suppressions(&ThreadId::new("a").unwrap())
                    .unwrap()
            ),
        )
    };
    let found = answers(migrated);
    if held {
        assert_eq!(found, answers(source), "{name}");
        assert!(found.0 > 0 && found.3, "{name}: the source has rows here");
        assert!(
            found.5.contains("generation: 2") && found.5.contains("sequence: Sequence(2)"),
            "{name}: the thread's suppression and the count of all: {}",
            found.5
        );
    } else {
        assert_eq!(
            found,
            (
                0,
                "[]".to_owned(),
                "[]".to_owned(),
                false,
                "None".to_owned(),
                format!("{:?}", ThreadSuppressions::default()),
            ),
            "{name}"
        );
    }
}

pub async fn vectors_answer_as_the_source(
    format: &Format,
    migrated: &SqliteVectorStore,
    source: &SqliteVectorStore,
) {
    let name = format.name;
    let (sources, position) = if format.has(&VECTORS_1) {
        (
            source.load_sources(&PROFILE, limits()).await.unwrap(),
            source.indexed_position(&PROFILE).await.unwrap(),
        )
    } else {
        (Vec::new(), ChangeSequence::ZERO)
    };
    assert_eq!(
        migrated.load_sources(&PROFILE, limits()).await.unwrap(),
        sources,
        "{name}"
    );
    assert_eq!(
        migrated.indexed_position(&PROFILE).await.unwrap(),
        position,
        "{name}"
    );
    let (unindexed, graph) = if format.has(&VECTORS_UNINDEXED_GRAPHS) {
        (
            source.unindexed_counts(&PROFILE).await.unwrap(),
            source.load_graph(&PROFILE, 1_000).await.unwrap(),
        )
    } else {
        (Vec::new(), None)
    };
    assert_eq!(
        migrated.unindexed_counts(&PROFILE).await.unwrap(),
        unindexed,
        "{name}"
    );
    assert_eq!(
        migrated.load_graph(&PROFILE, 1_000).await.unwrap(),
        graph,
        "{name}"
    );
}
