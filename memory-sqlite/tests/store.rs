//! Opening, format checks, lexical search, the change feed, batches and corrupt rows.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use memory_core::canonical::{to_canonical_string, utf16_len};
use memory_core::write::MAX_CANONICAL_UTF16_UNITS;
use memory_core::{
    ChangeFeed, ChangeSequence, ErrorKind, InMemoryStore, LexicalSearch, ManualClock,
    MemoryContent, MemoryError, MemoryReader, MemoryWriter,
};
use memory_sqlite::{SqliteReader, SqliteStore, StoreFailure, storage_failure};
use std::sync::Arc;

fn raw(path: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).expect("raw connection")
}

#[test]
fn open_reader_refuses_a_missing_file_and_creates_nothing() {
    let path = fresh_path();
    let error = SqliteReader::open_reader(&path).expect_err("no file");
    assert_eq!(error.kind(), ErrorKind::Storage);
    assert!(!path.exists(), "the reader created the file");
}

#[test]
fn open_reader_refuses_a_foreign_database_without_touching_it() {
    let path = fresh_path();
    raw(&path)
        .execute_batch("CREATE TABLE other (x INTEGER);")
        .expect("foreign schema");
    let before = std::fs::read(&path).expect("file");
    let error = SqliteReader::open_reader(&path).expect_err("foreign schema");
    assert!(matches!(
        storage_failure(&error),
        Some(StoreFailure::SchemaMissing)
    ));
    assert_eq!(std::fs::read(&path).expect("file"), before);
}

#[test]
fn another_storage_format_is_refused_by_store_and_reader() {
    let path = fresh_path();
    drop(open(&path));
    raw(&path)
        .execute("UPDATE memory_meta SET value = value + 1", [])
        .expect("bump format");
    for error in [
        SqliteStore::open_store(&path).expect_err("store refuses"),
        SqliteReader::open_reader(&path).expect_err("reader refuses"),
    ] {
        assert!(
            matches!(
                storage_failure(&error),
                Some(StoreFailure::FormatMismatch { found, expected })
                    if *found == memory_sqlite::STORAGE_FORMAT + 1
                        && *expected == memory_sqlite::STORAGE_FORMAT
            ),
            "{error:?}"
        );
    }
}

#[test]
fn open_store_creates_only_its_own_tables_and_uses_wal() {
    let path = fresh_path();
    raw(&path)
        .execute_batch("CREATE TABLE app_owned (x INTEGER); INSERT INTO app_owned VALUES (7);")
        .expect("an application table");
    let store = open(&path);
    drop(store);
    let connection = raw(&path);
    let mode: String = connection
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .expect("journal mode");
    assert_eq!(mode, "wal");
    let kept: i64 = connection
        .query_row("SELECT x FROM app_owned", [], |row| row.get(0))
        .expect("application table kept");
    assert_eq!(kept, 7);
    let tables: Vec<String> = connection
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'memory_fts_%' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .expect("schema query")
        .query_map([], |row| row.get(0))
        .expect("schema rows")
        .collect::<Result<_, _>>()
        .expect("names");
    assert!(
        tables
            .iter()
            .all(|name| name == "app_owned" || name.starts_with("memory_")),
        "{tables:?}"
    );
    // Reopening an existing store is fine.
    drop(open(&path));
}

#[tokio::test]
async fn reads_see_puts_replacements_and_withdrawals() {
    let store = open(&fresh_path());
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
    store
        .apply(withdraw(&key, "op-3", &second.receipt.document.revision))
        .await
        .expect("withdraw");
    assert_eq!(store.read(&key).await.expect("read"), None);
    let history = store.reader().history(&key).expect("history");
    let links: Vec<_> = history
        .iter()
        .map(|link| (link.revision.clone(), link.predecessor.clone()))
        .collect();
    assert_eq!(links.len(), 3);
    assert_eq!(links[0].1, None);
    assert_eq!(links[1].1.as_ref(), Some(&links[0].0));
    assert_eq!(links[2].1.as_ref(), Some(&links[1].0));
    let report = store.reader().check_consistency().expect("consistent");
    assert_eq!(
        (report.documents, report.receipts, report.revisions),
        (1, 3, 3)
    );
}

#[tokio::test]
async fn the_change_feed_lists_every_commit_once_in_order() {
    let store = open(&fresh_path());
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
    store
        .apply(put(&a, "op-a", None, MemoryContent::text("a"), &["s"]))
        .await
        .expect("replay");
    store
        .apply(put(&a, "op-c", None, MemoryContent::text("c"), &["s"]))
        .await
        .expect_err("conflict");
    store
        .apply(withdraw(&a, "op-w", &created.receipt.document.revision))
        .await
        .expect("withdraw");
    let head = store.head().await.expect("head");
    let changes = store
        .changes_since(ChangeSequence(0), 100)
        .await
        .expect("changes");
    let keys: Vec<_> = changes.iter().map(|change| change.key.clone()).collect();
    assert_eq!(keys, vec![a.clone(), b.clone(), a.clone()]);
    assert!(
        changes
            .windows(2)
            .all(|pair| pair[0].sequence < pair[1].sequence)
    );
    assert_eq!(changes.last().map(|change| change.sequence), Some(head));
    let tail = store
        .changes_since(changes[0].sequence, 1)
        .await
        .expect("paged");
    assert_eq!(tail.len(), 1);
    assert_eq!(tail[0], changes[1]);
}

#[tokio::test]
async fn lexical_search_stems_ranks_and_indexes_speakers() {
    let store = open(&fresh_path());
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
    assert_eq!(search("runs").await, ["d1"], "porter stemming");
    assert_eq!(search("bob").await, ["d3"], "speaker is indexed");
    assert_eq!(
        search("budget").await,
        ["d2", "d1"],
        "more occurrences rank higher"
    );
    assert!(search("").await.is_empty());
    assert!(search("  \"*^():  ").await.is_empty());
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
    let store = open(&fresh_path());
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
    assert_eq!(
        store
            .search(&access("t1", "b"), "zebra", 5)
            .await
            .expect("search")
            .len(),
        1
    );
    assert!(
        store
            .search(&access("t1", "c"), "zebra", 5)
            .await
            .expect("search")
            .is_empty()
    );
    assert!(
        store
            .search(&access("t2", "a"), "zebra", 5)
            .await
            .expect("search")
            .is_empty()
    );
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
    assert!(
        store
            .search(&access("t1", "a"), "zebra", 5)
            .await
            .expect("search")
            .is_empty()
    );
    assert!(
        store
            .search(&access("t1", "b"), "giraffe", 5)
            .await
            .expect("search")
            .is_empty()
    );
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
    assert!(
        store
            .search(&access("t1", "a"), "giraffe", 5)
            .await
            .expect("search")
            .is_empty()
    );
    store.reader().check_consistency().expect("consistent");
}

#[tokio::test]
async fn a_batch_applies_writes_in_order_in_one_transaction() {
    let store = open(&fresh_path());
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
        memory_sqlite::MAX_BATCH_WRITES + 1
    ];
    assert_eq!(
        store.apply_batch(too_many).expect_err("too many").kind(),
        ErrorKind::TooLarge
    );
}

#[tokio::test]
async fn malformed_stored_rows_read_as_corrupt() {
    let path = fresh_path();
    let store = open(&path);
    let doc = key("t1", "doc");
    store
        .apply(put(&doc, "op-1", None, MemoryContent::text("x"), &["s"]))
        .await
        .expect("put");
    let connection = raw(&path);
    let original: (String, String) = connection
        .query_row("SELECT revision, body FROM memory_documents", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .expect("stored row");
    store.read(&doc).await.expect("intact row reads");
    for tamper in [
        "UPDATE memory_documents SET body = '{'",
        "UPDATE memory_documents SET body = '[]'",
        "UPDATE memory_documents SET body = replace(body, '\"loc:doc\"', '\"loc:other\"')",
        "UPDATE memory_documents SET revision = 'r0'",
    ] {
        connection
            .execute(
                "UPDATE memory_documents SET revision = ?1, body = ?2",
                [&original.0, &original.1],
            )
            .expect("restore");
        store
            .reader()
            .check_consistency()
            .expect("restored row is consistent");
        connection.execute_batch(tamper).expect("tamper");
        assert_eq!(
            store.read(&doc).await.expect_err(tamper).kind(),
            ErrorKind::Corrupt,
            "{tamper}"
        );
        assert_eq!(
            store.reader().check_consistency().expect_err(tamper).kind(),
            ErrorKind::Corrupt
        );
    }
    connection
        .execute_batch("UPDATE memory_receipts SET body = 'null'")
        .expect("tamper receipt");
    let replay = store
        .apply(put(&doc, "op-1", None, MemoryContent::text("x"), &["s"]))
        .await
        .expect_err("corrupt receipt");
    assert_eq!(replay.kind(), ErrorKind::Corrupt);
}

/// The receipt of a put is the largest canonical text, so it sets the boundary (see memory-core).
#[tokio::test]
async fn size_boundary_with_astral_text_and_refusal_leaves_files_unchanged() {
    let path = fresh_path();
    let store = open(&path);
    let doc_key = key("t1", "big-1");
    let write_with = |id: &str, text: String| {
        put(
            &key("t1", id),
            &format!("op-{id}"),
            None,
            MemoryContent::text(text),
            &["s"],
        )
    };
    // The probe learns how many units the receipt adds around the text, on an identical clock.
    let probe = InMemoryStore::with_clock(Arc::new(ManualClock::new(NOW)));
    let probe_text = "\u{1F600}".to_owned();
    let probe_receipt = probe
        .apply(write_with("big-1", probe_text.clone()))
        .await
        .expect("probe")
        .receipt;
    let overhead = utf16_len(&to_canonical_string(&probe_receipt).expect("canonical"))
        - utf16_len(&probe_text);
    let text_units = MAX_CANONICAL_UTF16_UNITS - overhead;
    let astral = "\u{1F600}".repeat(text_units / 2);
    let exact_text = format!("{astral}{}", "a".repeat(text_units % 2));
    let accepted = store
        .apply(write_with("big-1", exact_text.clone()))
        .await
        .expect("exactly at the limit");
    assert_eq!(
        utf16_len(&to_canonical_string(&accepted.receipt).expect("canonical")),
        MAX_CANONICAL_UTF16_UNITS
    );
    assert_eq!(
        store
            .read(&doc_key)
            .await
            .expect("read")
            .map(|d| d.content.text.len()),
        Some(exact_text.len())
    );
    let before = file_sizes(&path);
    let refused = store
        .apply(write_with("big-2", format!("{exact_text}a")))
        .await
        .expect_err("one unit over");
    assert_eq!(refused.kind(), ErrorKind::TooLarge);
    assert_eq!(file_sizes(&path), before, "a refused write grew the files");
    assert!(
        store
            .reader()
            .receipt(&namespace("t1"), &op("op-big-2"))
            .expect("read")
            .is_none()
    );
    assert!(
        store
            .read(&key("t1", "big-2"))
            .await
            .expect("read")
            .is_none()
    );
    store.reader().check_consistency().expect("consistent");
}
