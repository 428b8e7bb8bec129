//! The PostgreSQL memory store: reads, history, the change feed, lexical search, batches, corrupt rows,
//! schema migrations, and revision races between several connections.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use memory_core::{
    ChangeFeed, ChangeSequence, ErrorKind, LexicalSearch, ManualClock, MemoryContent, MemoryError,
    MemoryReader, MemoryWriter,
};
use memory_postgres::{PostgresFailure, PostgresStore, SCHEMA_VERSION, postgres_failure};

macro_rules! store_or_skip {
    ($name:literal) => {
        match fresh_store($name).await {
            Some(store) => store,
            None => return,
        }
    };
}

#[tokio::test]
async fn reads_see_puts_replacements_and_withdrawals() {
    let store = store_or_skip!("reads_see_puts_replacements_and_withdrawals");
    let key = key("t1", "doc");
    let first = store
        .apply(put(&key, "op-1", None, MemoryContent::text("one"), &["s"]))
        .await
        .expect("create");
    let second = store
        .apply(put(
            &key,
            "op-2",
            Some(&first.receipt.document.revision),
            MemoryContent::text("two"),
            &["s"],
        ))
        .await
        .expect("replace");
    assert_eq!(
        store.read(&key).await.expect("read"),
        Some(second.receipt.document.clone())
    );
    assert_eq!(
        store
            .read_many(&[key.clone(), common::key("t1", "none")])
            .await
            .expect("read many"),
        vec![Some(second.receipt.document.clone()), None]
    );
    store
        .apply(withdraw(&key, "op-3", &second.receipt.document.revision))
        .await
        .expect("withdraw");
    assert_eq!(store.read(&key).await.expect("read"), None);
    let history = store.history(&key).await.expect("history");
    let links: Vec<_> = history
        .iter()
        .map(|link| (link.revision.clone(), link.predecessor.clone()))
        .collect();
    assert_eq!(links.len(), 3);
    assert_eq!(links[0].1, None);
    assert_eq!(links[1].1.as_ref(), Some(&links[0].0));
    assert_eq!(links[2].1.as_ref(), Some(&links[1].0));
    let receipt = store
        .receipt(&key.namespace, &op("op-2"))
        .await
        .expect("receipt")
        .expect("stored");
    assert_eq!(receipt, second.receipt);
    let report = store.check_consistency().await.expect("consistent");
    assert_eq!(
        (
            report.documents,
            report.receipts,
            report.revisions,
            report.changes
        ),
        (1, 3, 3, 3)
    );
}

#[tokio::test]
async fn the_change_feed_lists_every_commit_once_in_order() {
    let store = store_or_skip!("the_change_feed_lists_every_commit_once_in_order");
    assert_eq!(store.head().await.expect("head"), ChangeSequence(0));
    let a = key("t1", "a");
    let b = key("t1", "b");
    let created = store
        .apply(put(&a, "op-a", None, MemoryContent::text("a"), &["s"]))
        .await
        .expect("put a");
    store
        .apply(put(&b, "op-b", None, MemoryContent::text("b"), &["s"]))
        .await
        .expect("put b");
    // A replay and a refusal are not changes.
    assert!(
        store
            .apply(put(&a, "op-a", None, MemoryContent::text("a"), &["s"]))
            .await
            .expect("replay")
            .replayed
    );
    store
        .apply(put(&a, "op-c", None, MemoryContent::text("c"), &["s"]))
        .await
        .expect_err("conflict");
    store
        .apply(withdraw(&a, "op-w", &created.receipt.document.revision))
        .await
        .expect("withdraw");
    let head = store.head().await.expect("head");
    assert_eq!(head, ChangeSequence(3), "no gaps in the sequence");
    let changes = store
        .changes_since(ChangeSequence(0), 100)
        .await
        .expect("changes");
    let keys: Vec<_> = changes.iter().map(|change| change.key.clone()).collect();
    assert_eq!(keys, vec![a.clone(), b.clone(), a.clone()]);
    assert_eq!(changes.last().map(|change| change.sequence), Some(head));
    let tail = store
        .changes_since(changes[0].sequence, 1)
        .await
        .expect("paged");
    assert_eq!(tail, vec![changes[1].clone()]);
}

#[tokio::test]
async fn lexical_search_stems_ranks_and_indexes_speakers() {
    let store = store_or_skip!("lexical_search_stems_ranks_and_indexes_speakers");
    let docs = [
        (
            "d1",
            "Alice is running the quarterly budget review",
            "alice",
        ),
        (
            "d2",
            "The budget was approved; budget talks are over",
            "carol",
        ),
        ("d3", "Lunch is at noon on Fridays", "Bob"),
    ];
    for (id, text, speaker) in docs {
        store
            .apply(put(
                &key("t1", id),
                &format!("op-{id}"),
                None,
                said(text, speaker),
                &["s"],
            ))
            .await
            .expect("put");
    }
    let search = |query: &'static str| {
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
    assert_eq!(search("runs").await, ["d1"], "stemming");
    assert_eq!(search("bob").await, ["d3"], "speaker is indexed");
    assert_eq!(
        search("budget").await,
        ["d2", "d1"],
        "more occurrences rank higher"
    );
    assert!(search("").await.is_empty());
    assert!(search("  \"*^():  ").await.is_empty());
    assert!(search("the is at").await.is_empty(), "stop words only");
    assert_eq!(
        search("!budget & (noon | x) <-> 'lunch':*").await,
        ["d3", "d2", "d1"],
        "operators are words, OR-ed"
    );
    let hits = store
        .search(&access("t1", "s"), "budget", 10)
        .await
        .expect("search");
    assert!(hits[0].score > hits[1].score, "higher score is better");
    assert_eq!(hits[0].locator, "loc:d2");
    assert_eq!(
        Some(hits[0].revision.clone()),
        store
            .read(&key("t1", "d2"))
            .await
            .expect("read")
            .map(|document| document.revision)
    );
}

#[tokio::test]
async fn lexical_search_follows_replacements_scopes_and_withdrawals() {
    let store = store_or_skip!("lexical_search_follows_replacements_scopes_and_withdrawals");
    let doc = key("t1", "doc");
    let created = store
        .apply(put(
            &doc,
            "op-1",
            None,
            MemoryContent::text("zebra crossing"),
            &["a", "b"],
        ))
        .await
        .expect("put");
    let count = |tenant: &'static str, scope: &'static str, query: &'static str| {
        let store = &store;
        async move {
            store
                .search(&access(tenant, scope), query, 5)
                .await
                .expect("search")
                .len()
        }
    };
    assert_eq!(count("t1", "b", "zebra").await, 1);
    assert_eq!(count("t1", "c", "zebra").await, 0);
    assert_eq!(count("t2", "a", "zebra").await, 0);
    let replaced = store
        .apply(put(
            &doc,
            "op-2",
            Some(&created.receipt.document.revision),
            MemoryContent::text("giraffe"),
            &["a"],
        ))
        .await
        .expect("replace");
    assert_eq!(count("t1", "a", "zebra").await, 0);
    assert_eq!(count("t1", "b", "giraffe").await, 0);
    let hits = store
        .search(&access("t1", "a"), "giraffe", 5)
        .await
        .expect("search");
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].revision, replaced.receipt.document.revision);
    store
        .apply(withdraw(&doc, "op-3", &replaced.receipt.document.revision))
        .await
        .expect("withdraw");
    assert_eq!(count("t1", "a", "giraffe").await, 0);
    store.check_consistency().await.expect("consistent");
}

#[tokio::test]
async fn a_batch_applies_writes_in_order_in_one_transaction() {
    let store = store_or_skip!("a_batch_applies_writes_in_order_in_one_transaction");
    let a = key("t1", "a");
    let first = put(&a, "op-1", None, MemoryContent::text("first"), &["s"]);
    let outcomes = store
        .apply_batch(vec![
            first.clone(),
            put(&a, "op-2", None, MemoryContent::text("second"), &["s"]),
            first,
            put(
                &key("t1", "b"),
                "op-3",
                None,
                MemoryContent::text("b"),
                &["s"],
            ),
        ])
        .await
        .expect("batch");
    assert!(!outcomes[0].as_ref().expect("created").replayed);
    assert_eq!(
        outcomes[1]
            .as_ref()
            .map_err(MemoryError::kind)
            .expect_err("conflict"),
        ErrorKind::Conflict
    );
    assert!(outcomes[2].as_ref().expect("replayed").replayed);
    assert!(outcomes[3].is_ok());
    assert_eq!(store.head().await.expect("head"), ChangeSequence(2));
    let too_many = vec![
        put(&a, "x", None, MemoryContent::text("x"), &[]);
        memory_postgres::MAX_BATCH_WRITES + 1
    ];
    assert_eq!(
        store
            .apply_batch(too_many)
            .await
            .expect_err("too many")
            .kind(),
        ErrorKind::TooLarge
    );
    store.check_consistency().await.expect("consistent");
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
async fn text_postgres_cannot_hold_is_indexed_or_refused_before_any_transaction() {
    let store =
        store_or_skip!("text_postgres_cannot_hold_is_indexed_or_refused_before_any_transaction");
    let doc = key("t1", "nul");
    // U+0000 in the text is kept in the document and read as a space by the search index.
    let created = store
        .apply(put(
            &doc,
            "op-1",
            None,
            MemoryContent::text("walrus\u{0}tusk"),
            &["s"],
        ))
        .await
        .expect("put with U+0000 in its text");
    assert_eq!(
        store
            .read(&doc)
            .await
            .expect("read")
            .expect("stored")
            .content
            .text,
        "walrus\u{0}tusk"
    );
    assert_eq!(
        store
            .search(&access("t1", "s"), "tusk", 5)
            .await
            .expect("search")
            .len(),
        1
    );
    // A locator with U+0000 is refused as input, and nothing is written.
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
    assert_eq!(store.head().await.expect("head"), ChangeSequence(1));
    // A text far above the indexed prefix is stored whole; its start stays searchable.
    let long = format!("narwhal {}", "lexeme ".repeat(60_000));
    let replaced = store
        .apply(put(
            &doc,
            "op-3",
            Some(&created.receipt.document.revision),
            MemoryContent::text(long.clone()),
            &["s"],
        ))
        .await
        .expect("long put");
    assert_eq!(replaced.receipt.document.content.text, long);
    assert_eq!(
        store
            .search(&access("t1", "s"), "narwhal", 5)
            .await
            .expect("search")
            .len(),
        1
    );
    store.check_consistency().await.expect("consistent");
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
        .changes_since(ChangeSequence(0), 1_000)
        .await
        .expect("changes");
    let sequences: Vec<u64> = changes.iter().map(|change| change.sequence.0).collect();
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
