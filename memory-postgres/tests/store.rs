//! The memory-core store suites (change feed, lexical search, history, receipts, batches) against
//! PostgreSQL, and what only PostgreSQL has: its stop words, the locator it cannot hold, corrupt rows,
//! schema migrations, revision races between several pools, notifications and blocking callers.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use memory_core::{
    ChangeFeed, ChangeSequence, ErrorKind, LexicalSearch, ManualClock, MemoryContent, MemoryError,
    MemoryReader, MemoryWriter, RevisionHistory,
};
use memory_postgres::{PostgresFailure, PostgresStore, SCHEMA_VERSION, postgres_failure};
use memory_testkit::store::run_all;

macro_rules! store_or_skip {
    ($name:literal) => {
        match fresh_store($name).await {
            Some(store) => store,
            None => return,
        }
    };
}

#[tokio::test]
async fn postgres_store_passes_the_store_suites() {
    let Some(url) = server_url("postgres_store_passes_the_store_suites") else {
        return;
    };
    run_all(|| store_at(url.clone())).await.assert_all_passed();
}

/// PostgreSQL's own text rules: stop words alone find nothing (SQLite's FTS5 has no stop words), its
/// ranking of operator words, and
/// a locator holding U+0000, which its text cannot store, is refused as input before any transaction.
#[tokio::test]
async fn stop_words_find_nothing_and_a_nul_locator_is_refused() {
    let store = store_or_skip!("stop_words_find_nothing_and_a_nul_locator_is_refused");
    store
        .apply(put(
            &key("t1", "d3"),
            "op-1",
            None,
            said("Lunch is at noon on Fridays", "Bob"),
            &["s"],
        ))
        .await
        .expect("put");
    for (id, text) in [
        ("d1", "Alice is running the quarterly budget review"),
        ("d2", "The budget was approved; budget talks are over"),
    ] {
        store
            .apply(put(
                &key("t1", id),
                &format!("op-{id}"),
                None,
                said(text, "carol"),
                &["s"],
            ))
            .await
            .expect("put");
    }
    let ids = |query: &'static str| {
        let store = &store;
        async move {
            store
                .search(&access("t1", "s"), query, 10)
                .await
                .expect("search")
                .into_iter()
                .map(|hit| hit.key.id.to_string())
                .collect::<Vec<_>>()
        }
    };
    assert!(ids("the is at").await.is_empty(), "stop words only");
    // ts_rank's order for operators taken as OR-ed words (the suite checks the set on every backend).
    assert_eq!(
        ids("!budget & (noon | x) <-> 'lunch':*").await,
        ["d3", "d2", "d1"]
    );
    let mut bad = put(
        &key("t1", "bad"),
        "op-2",
        None,
        MemoryContent::text("x"),
        &["s"],
    );
    if let memory_core::MemoryWrite::Put { locator, .. } = &mut bad {
        locator.push('\0');
    }
    assert_eq!(
        store.apply(bad).await.expect_err("refused").kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(store.head().await.expect("head"), ChangeSequence::new(3));
}

#[tokio::test]
async fn malformed_stored_rows_read_as_corrupt() {
    let store = store_or_skip!("malformed_stored_rows_read_as_corrupt");
    let doc = key("t1", "doc");
    store
        .apply(put(&doc, "op-1", None, MemoryContent::text("x"), &["s"]))
        .await
        .expect("put");
    let raw = store.raw().await;
    let original = raw
        .query_one("SELECT revision, body FROM memory_documents", &[])
        .await
        .expect("stored row");
    let (revision, body): (String, String) = (original.get(0), original.get(1));
    store.read(&doc).await.expect("intact row reads");
    for tamper in [
        "UPDATE memory_documents SET body = '{'",
        "UPDATE memory_documents SET body = '[]'",
        "UPDATE memory_documents SET body = replace(body, '\"loc:doc\"', '\"loc:other\"')",
        "UPDATE memory_documents SET revision = 'r0'",
    ] {
        raw.execute(
            "UPDATE memory_documents SET revision = $1, body = $2",
            &[&revision, &body],
        )
        .await
        .expect("restore");
        store
            .check_consistency()
            .await
            .expect("restored row is consistent");
        raw.batch_execute(tamper).await.expect("tamper");
        assert_eq!(
            store.read(&doc).await.expect_err(tamper).kind(),
            ErrorKind::Corrupt,
            "{tamper}"
        );
        assert_eq!(
            store.check_consistency().await.expect_err(tamper).kind(),
            ErrorKind::Corrupt
        );
    }
    raw.batch_execute("UPDATE memory_receipts SET body = 'null'")
        .await
        .expect("tamper receipt");
    let replay = store
        .apply(put(&doc, "op-1", None, MemoryContent::text("x"), &["s"]))
        .await
        .expect_err("corrupt receipt");
    assert_eq!(replay.kind(), ErrorKind::Corrupt);
}

#[tokio::test]
async fn migrations_are_recorded_and_a_newer_schema_is_refused_untouched() {
    let store = store_or_skip!("migrations_are_recorded_and_a_newer_schema_is_refused_untouched");
    let raw = store.raw().await;
    let versions: Vec<i64> = raw
        .query(
            "SELECT version FROM memory_schema_version ORDER BY version",
            &[],
        )
        .await
        .expect("versions")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
    // Reconnecting migrates nothing twice.
    let again = store.another().await;
    drop(again);
    let count: i64 = raw
        .query_one("SELECT count(*) FROM memory_schema_version", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(count, SCHEMA_VERSION);
    raw.execute(
        "INSERT INTO memory_schema_version (version) VALUES ($1)",
        &[&(SCHEMA_VERSION + 1)],
    )
    .await
    .expect("a newer build's migration");
    let error = PostgresStore::builder(&store.guard.url)
        .schema(store.guard.schema.clone())
        .connect()
        .await
        .expect_err("newer schema");
    assert!(
        matches!(
            postgres_failure(&error),
            Some(PostgresFailure::SchemaTooNew { found, supported })
                if *found == SCHEMA_VERSION + 1 && *supported == SCHEMA_VERSION
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    // Port 1 on loopback: nothing listens there, so every connection attempt is refused.
    let error = PostgresStore::builder("postgres://memory:x@127.0.0.1:1/memory_test")
        .retries(2)
        .connect()
        .await
        .expect_err("nothing listens on port 1");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
}

/// Several stores (each with its own pool, as separate processes have) race to replace one revision:
/// exactly one wins, every other gets a conflict naming the winner, and the history has one successor.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_revision_race_across_connections_has_exactly_one_winner() {
    let store = store_or_skip!("a_revision_race_across_connections_has_exactly_one_winner");
    let doc = key("t1", "raced");
    let base = store
        .apply(put(
            &doc,
            "op-base",
            None,
            MemoryContent::text("base"),
            &["s"],
        ))
        .await
        .expect("base");
    let base_revision = base.receipt.document.revision.clone();
    for round in 0..3 {
        let expected = store
            .read(&doc)
            .await
            .expect("read")
            .expect("present")
            .revision;
        let mut racers = Vec::new();
        for racer in 0..6 {
            let contender = Arc::new(store.another().await);
            let write = put(
                &doc,
                &format!("op-{round}-{racer}"),
                Some(&expected),
                MemoryContent::text(format!("round {round} racer {racer}")),
                &["s"],
            );
            racers.push(tokio::spawn(async move { contender.apply(write).await }));
        }
        let mut winners = Vec::new();
        let mut losers = Vec::new();
        for racer in racers {
            match racer.await.expect("racer task") {
                Ok(outcome) => winners.push(outcome),
                Err(error) => losers.push(error),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one winner");
        let winner = winners[0].receipt.document.revision.clone();
        for loser in &losers {
            assert!(
                matches!(loser, MemoryError::Conflict { current: Some(current) } if *current == winner),
                "round {round}: {loser:?}"
            );
        }
        assert_eq!(
            store.read(&doc).await.expect("read").map(|d| d.revision),
            Some(winner)
        );
    }
    let history = store.history(&doc).await.expect("history");
    assert_eq!(history.len(), 4);
    assert_eq!(history[0].revision, base_revision);
    for pair in history.windows(2) {
        assert_eq!(pair[1].predecessor.as_ref(), Some(&pair[0].revision));
    }
    store.check_consistency().await.expect("consistent");
}

/// Concurrent writers to distinct keys from several stores: every write commits once, the change
/// sequence has no gap and lists each key once, and replays of the same operations from other stores
/// are answered from receipts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_keep_the_change_sequence_whole() {
    let store = store_or_skip!("concurrent_writers_keep_the_change_sequence_whole");
    let mut writers = Vec::new();
    for writer in 0..4 {
        let contender = store.another().await;
        writers.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for index in 0..15 {
                let doc = key("t1", &format!("w{writer}-{index}"));
                outcomes.push(
                    contender
                        .apply(put(
                            &doc,
                            &format!("op-{writer}-{index}"),
                            None,
                            MemoryContent::text(format!("writer {writer} note {index}")),
                            &["s"],
                        ))
                        .await
                        .expect("write"),
                );
            }
            outcomes
        }));
    }
    let mut committed = 0;
    for writer in writers {
        committed += writer.await.expect("writer").len();
    }
    assert_eq!(committed, 60);
    let changes = store
        .changes_since(ChangeSequence::ZERO, 1_000)
        .await
        .expect("changes");
    let sequences: Vec<u64> = changes.iter().map(|change| change.sequence.get()).collect();
    assert_eq!(sequences, (1..=60).collect::<Vec<_>>());
    let mut keys: Vec<_> = changes.iter().map(|change| change.key.clone()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 60);
    let other = Arc::new(store.another().await);
    let replay = other
        .apply(put(
            &key("t1", "w2-3"),
            "op-2-3",
            None,
            MemoryContent::text("writer 2 note 3"),
            &["s"],
        ))
        .await
        .expect("replay");
    assert!(replay.replayed);
    let report = store.check_consistency().await.expect("consistent");
    assert_eq!(report.changes, 60);
}

#[tokio::test]
async fn stores_work_without_the_callers_runtime() {
    let Some(url) = server_url("stores_work_without_the_callers_runtime") else {
        return;
    };
    // Connect and use a store from a plain thread (no runtime), then drop it inside an async task.
    let store = std::thread::spawn(move || {
        let schema = unique_schema();
        let store = PostgresStore::builder(&url)
            .schema(schema.clone())
            .clock(Arc::new(ManualClock::new(NOW)))
            .connect_blocking()
            .expect("connect without a runtime");
        TestStore {
            store,
            guard: SchemaGuard { url, schema },
        }
    })
    .join()
    .expect("thread");
    store
        .apply(put(
            &key("t1", "a"),
            "op-1",
            None,
            MemoryContent::text("a"),
            &["s"],
        ))
        .await
        .expect("write");
    tokio::spawn(async move { drop(store) })
        .await
        .expect("drop inside a task");
}

/// Every committed write transaction notifies its new change head on `memory_changes`, so followers on
/// other hosts can wake; a refused write notifies nothing.
#[tokio::test]
async fn committed_writes_notify_the_new_change_head() {
    let store = store_or_skip!("committed_writes_notify_the_new_change_head");
    let mut config: tokio_postgres::Config = store.guard.url.parse().unwrap();
    config.options(format!("-c search_path={}", store.guard.schema.as_str()));
    let (listener, mut connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let prefix = format!("{}:", store.guard.schema.as_str());
    tokio::spawn(async move {
        while let Some(message) =
            std::future::poll_fn(|context| connection.poll_message(context)).await
        {
            match message {
                // Other tests' schemas notify on the same channel: keep this schema's only.
                Ok(tokio_postgres::AsyncMessage::Notification(notification))
                    if notification.payload().starts_with(&prefix) =>
                {
                    let _ = sender.send((
                        notification.channel().to_owned(),
                        notification.payload().to_owned(),
                    ));
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    listener
        .batch_execute(&format!("LISTEN {}", memory_postgres::CHANGE_CHANNEL))
        .await
        .unwrap();
    let doc = key("t1", "doc");
    store
        .apply(put(&doc, "op-1", None, MemoryContent::text("x"), &["s"]))
        .await
        .unwrap();
    store
        .apply(put(&doc, "op-2", None, MemoryContent::text("y"), &["s"]))
        .await
        .expect_err("conflict: nothing committed, nothing notified");
    let second = store
        .apply(put(
            &key("t1", "other"),
            "op-3",
            None,
            MemoryContent::text("z"),
            &["s"],
        ))
        .await
        .unwrap();
    assert!(!second.replayed);
    // A guard against hanging only: notifications are delivered on commit.
    let guard = Duration::from_secs(60);
    for head in [1, 2] {
        let (channel, payload) = tokio::time::timeout(guard, receiver.recv())
            .await
            .expect("notified")
            .expect("listener open");
        assert_eq!(channel, memory_postgres::CHANGE_CHANNEL);
        assert_eq!(payload, format!("{}:{head}", store.guard.schema.as_str()));
    }
}

/// A synchronous caller (a bulk import on a plain thread) commits a batch; a refused write in it
/// changes nothing and does not stop the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_batch_commits_from_a_plain_thread() {
    let Some(store) = fresh_store("a_blocking_batch_commits_from_a_plain_thread").await else {
        return;
    };
    let writer = store.store.clone();
    let answers = std::thread::spawn(move || {
        writer.apply_batch_blocking(vec![
            put(
                &key("a", "one"),
                "op-1",
                None,
                said("first", "user"),
                &["s"],
            ),
            // Expects a revision of a key that does not exist: refused.
            put(
                &key("a", "two"),
                "op-2",
                Some(&memory_core::Revision::new("r-none").unwrap()),
                said("second", "user"),
                &["s"],
            ),
            put(
                &key("a", "three"),
                "op-3",
                None,
                said("third", "user"),
                &["s"],
            ),
        ])
    })
    .join()
    .unwrap()
    .unwrap();
    assert_eq!(answers.len(), 3);
    assert!(answers[0].is_ok());
    assert!(answers[1].is_err());
    assert!(answers[2].is_ok());
    assert!(store.read(&key("a", "one")).await.unwrap().is_some());
    assert!(store.read(&key("a", "two")).await.unwrap().is_none());
    assert!(store.read(&key("a", "three")).await.unwrap().is_some());
}

/// A schema at version 2 (full-text index over `search` alone) is brought to version 3 by the next
/// store that connects: the namespace-keyed index replaces it, and every search answers as before,
/// in each namespace and scope (the index is an expression over rows that stay as they are).
#[tokio::test]
async fn a_version_2_schema_gains_the_namespace_keyed_index_and_answers_as_before() {
    let store =
        store_or_skip!("a_version_2_schema_gains_the_namespace_keyed_index_and_answers_as_before");
    let texts = [
        (
            "t1",
            "d1",
            "Alice is running the quarterly budget review",
            "alice",
        ),
        (
            "t1",
            "d2",
            "The budget was approved; budget talks are over",
            "carol",
        ),
        ("t1", "d3", "Lunch is at noon on Fridays", "Bob"),
        ("t2", "d1", "budget lunch with the zebra", "alice"),
        ("t2", "d2", "garden review at noon", "dave"),
    ];
    for (tenant, id, text, speaker) in texts {
        store
            .apply(put(
                &key(tenant, id),
                &format!("op-{id}"),
                None,
                said(text, speaker),
                &["s"],
            ))
            .await
            .expect("put");
    }
    let answers = |store: PostgresStore| async move {
        let mut all = Vec::new();
        for tenant in ["t1", "t2"] {
            for query in [
                "budget",
                "reviewing",
                "noon lunch",
                "alice zebra",
                "the budget garden",
            ] {
                let hits = store
                    .search(&access(tenant, "s"), query, 10)
                    .await
                    .expect("search");
                all.push(
                    hits.into_iter()
                        .map(|hit| (hit.key, hit.score))
                        .collect::<Vec<_>>(),
                );
            }
        }
        all
    };
    let before = answers(store.another().await).await;
    assert!(before.iter().all(|hits| !hits.is_empty()), "{before:?}");
    let raw = store.raw().await;
    raw.batch_execute(
        "DROP INDEX memory_documents_lexical; \
         DROP FUNCTION memory_lexical_keys(TEXT, TSVECTOR); \
         CREATE INDEX memory_documents_search ON memory_documents USING GIN (search); \
         ALTER TABLE thread_heads DROP COLUMN destination, DROP COLUMN generation; \
         DROP TABLE thread_pending, thread_parks, extraction_notes, extraction_totals; \
         ALTER TABLE memory_receipts DROP COLUMN redacted; \
         DROP INDEX memory_revisions_by_key; \
         ALTER TABLE remembering_suppressions DROP COLUMN thread; \
         DROP TABLE remembering_suppression_count; \
         DROP TABLE semantic_chunk_counts; \
         DELETE FROM memory_schema_version WHERE version >= 3;",
    )
    .await
    .expect("back to version 2");
    let migrated = store.another().await;
    let indexes: Vec<String> = raw
        .query(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() \
             AND tablename = 'memory_documents' ORDER BY indexname",
            &[],
        )
        .await
        .expect("indexes")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        indexes
            .iter()
            .any(|name| name == "memory_documents_lexical")
            && !indexes.iter().any(|name| name == "memory_documents_search"),
        "{indexes:?}"
    );
    assert_eq!(answers(migrated).await, before);
}

/// A database of version 4 (before the revision history) kept a withdrawn document's earlier words
/// in its receipts. Migration 5 redacts them, and every document's history reads from its receipts.
#[tokio::test]
async fn a_version_4_schema_gains_its_history_and_loses_withdrawn_words() {
    let store = store_or_skip!("a_version_4_schema_gains_its_history_and_loses_withdrawn_words");
    let kept = key("t1", "kept");
    let gone = key("t1", "gone");
    let first = store
        .apply(put(
            &kept,
            "op-kept-1",
            None,
            said("plain oats", "ana"),
            &["s"],
        ))
        .await
        .expect("put");
    store
        .apply(put(
            &kept,
            "op-kept-2",
            Some(&first.receipt.document.revision),
            said("steel-cut oats", "bo"),
            &["s"],
        ))
        .await
        .expect("replace");
    let doomed = store
        .apply(put(
            &gone,
            "op-gone-1",
            None,
            said("marzipan secret", "cy"),
            &["s"],
        ))
        .await
        .expect("put");
    store
        .apply(withdraw(
            &gone,
            "op-gone-2",
            &doomed.receipt.document.revision,
        ))
        .await
        .expect("withdraw");
    // Back to version 4, as its builds left a withdrawal: the put's receipt whole.
    let raw = store.raw().await;
    let whole = serde_json::to_string(&doomed.receipt).unwrap();
    raw.execute(
        "UPDATE memory_receipts SET body = $1 WHERE operation_id = 'op-gone-1'",
        &[&whole],
    )
    .await
    .unwrap();
    raw.batch_execute(
        "ALTER TABLE memory_receipts DROP COLUMN redacted; \
         DROP INDEX memory_revisions_by_key; \
         ALTER TABLE remembering_suppressions DROP COLUMN thread; \
         DROP TABLE remembering_suppression_count; \
         DROP TABLE semantic_chunk_counts; \
         DELETE FROM memory_schema_version WHERE version >= 5;",
    )
    .await
    .expect("back to version 4");
    let holding = |word: &'static str| {
        let raw = &raw;
        async move {
            let count: i64 = raw
                .query_one(
                    "SELECT count(*) FROM memory_receipts WHERE body LIKE '%' || $1 || '%'",
                    &[&word],
                )
                .await
                .unwrap()
                .get(0);
            count
        }
    };
    assert_eq!(holding("marzipan").await, 1);

    let migrated = store.another().await;
    assert_eq!(
        holding("marzipan").await,
        0,
        "withdrawn words survive migration 5"
    );
    assert_eq!(holding("oats").await, 2, "kept words are kept");
    let history = migrated.revisions(&kept, 10).await.unwrap();
    let texts: Vec<&str> = history
        .iter()
        .map(|revision| revision.document.content.text.as_str())
        .collect();
    assert_eq!(texts, ["steel-cut oats", "plain oats"]);
    let tombstone = migrated.revisions(&gone, 10).await.unwrap();
    assert_eq!(tombstone.len(), 2);
    assert!(tombstone[0].document.withdrawn.is_some());
    assert!(!tombstone[1].words_kept && tombstone[1].document.content.text.is_empty());
    migrated.check_consistency().await.expect("consistent");
}
