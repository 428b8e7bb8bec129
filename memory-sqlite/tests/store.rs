//! The memory-core store suites (change feed, lexical search, history, receipts, batches) against
//! SQLite, the broken stores they catch, and what only SQLite has: opening, format checks, the file's
//! own tables, corrupt rows and the files a refused write leaves unchanged.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use memory_core::canonical::{to_canonical_string, utf16_len};
use memory_core::testing::store::{
    CHANGE_FEED_RULES, LEXICAL_RULES, STORE_RULES, run_all, run_store_rules,
};
use memory_core::write::MAX_CANONICAL_UTF16_UNITS;
use memory_core::{
    ErrorKind, InMemoryStore, ManualClock, MemoryContent, MemoryReader, MemoryWriter,
};
use memory_sqlite::{SqliteReader, SqliteStore, StoreFailure, storage_failure};
use std::sync::Arc;

#[tokio::test]
async fn sqlite_store_passes_the_store_suites() {
    let report = run_all(|| std::future::ready(suited(Break::Nothing))).await;
    report.assert_all_passed();
    let every_rule: Vec<&str> = STORE_RULES
        .iter()
        .chain(CHANGE_FEED_RULES)
        .chain(LEXICAL_RULES)
        .copied()
        .collect();
    assert_eq!(report.passed, every_rule, "every rule runs, in order");
}

/// Each broken store breaks one rule, and the suites must name it.
#[tokio::test]
async fn the_store_suites_catch_broken_stores() {
    for (broken, rule) in [
        (
            Break::FeedIncludesPosition,
            "change-pages-start-after-the-position-and-are-bounded",
        ),
        (
            Break::SearchWorstFirst,
            "search-stems-ranks-and-indexes-speakers",
        ),
        (
            Break::HistoryWithoutPredecessors,
            "reads-history-and-receipts-follow-every-write",
        ),
    ] {
        let report = run_store_rules(|| std::future::ready(suited(broken)), &[rule]).await;
        assert!(
            report.failure(rule).is_some(),
            "{broken:?} passed `{rule}`:\n{report}"
        );
    }
    let unknown = run_store_rules(|| std::future::ready(suited(Break::Nothing)), &["none"]).await;
    assert!(unknown.failure("unknown-rule").is_some());
}

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
