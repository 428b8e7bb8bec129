//! The memory-core store suites (change feed, lexical search, history, receipts, batches) against
//! SQLite, the broken stores they catch, and what only SQLite has: opening, format checks, the file's
//! own tables, corrupt rows and the files a refused write leaves unchanged.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::*;
use memory_core::canonical::{to_canonical_string, utf16_len};
use memory_core::write::MAX_CANONICAL_UTF16_UNITS;
use memory_core::{
    ErrorKind, InMemoryStore, ManualClock, MemoryContent, MemoryReader, MemoryWriter,
};
use memory_sqlite::{SqliteReader, SqliteStore, StoreFailure, storage_failure};
use memory_testkit::store::{
    CHANGE_FEED_RULES, LEXICAL_RULES, REVISION_RULES, STORE_RULES, run_all, run_store_rules,
};
use std::sync::Arc;

#[tokio::test]
async fn sqlite_store_passes_the_store_suites() {
    let report = run_all(|| std::future::ready(suited(Break::Nothing))).await;
    report.assert_all_passed();
    let every_rule: Vec<&str> = STORE_RULES
        .iter()
        .chain(CHANGE_FEED_RULES)
        .chain(LEXICAL_RULES)
        .chain(REVISION_RULES)
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
        (
            Break::SearchEveryNamespace,
            "each-namespace-searches-alone-at-any-size",
        ),
        (
            Break::NeighboursBackwards,
            "neighbours-follow-first-writes-within-namespace-and-scope",
        ),
        (
            Break::CorrectionsOldestFirst,
            "corrections-of-name-current-visible-correctors-newest-first",
        ),
        (
            Break::HistoryOnlyCurrent,
            "history-lists-every-revision-newest-first-with-its-words",
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
    let error = SqliteReader::open(&path).expect_err("no file");
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
    let error = SqliteReader::open(&path).expect_err("foreign schema");
    assert!(matches!(
        storage_failure(&error),
        Some(StoreFailure::SchemaMissing)
    ));
    assert_eq!(std::fs::read(&path).expect("file"), before);
}

#[test]
fn a_newer_schema_is_refused_by_store_and_reader() {
    let path = fresh_path();
    drop(open(&path));
    raw(&path)
        .execute(
            "INSERT INTO memory_schema_version (version, applied_at, recognised) VALUES (?1, 0, 0)",
            [memory_sqlite::SCHEMA_VERSION + 1],
        )
        .expect("a newer version");
    for error in [
        SqliteStore::open(&path).expect_err("store refuses"),
        SqliteReader::open(&path).expect_err("reader refuses"),
    ] {
        assert!(
            matches!(
                storage_failure(&error),
                Some(StoreFailure::SchemaTooNew { found, supported })
                    if *found == memory_sqlite::SCHEMA_VERSION + 1
                        && *supported == memory_sqlite::SCHEMA_VERSION
            ),
            "{error:?}"
        );
    }
}

#[test]
fn open_store_creates_only_the_crates_tables_and_uses_wal() {
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
    // One schema holds every store of this crate, so the memory store creates all of their tables.
    let ours = [
        "memory_",
        "thread_",
        "activity_",
        "extraction_",
        "remembering_",
        "semantic_",
    ];
    assert!(
        tables
            .iter()
            .all(|name| name == "app_owned" || ours.iter().any(|prefix| name.starts_with(prefix))),
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

/// The lexical index of storage format 1: one FTS5 table over every namespace.
const FORMAT_1_FTS: &str = "CREATE VIRTUAL TABLE memory_fts USING fts5(text, speakers, \
     content = '', contentless_delete = 1, tokenize = 'porter unicode61')";

/// A deterministic corpus for the ranking comparisons: stemmed variants, stop words, speakers.
fn lexical_corpus(seed: u64, size: usize) -> Vec<(String, String)> {
    const WORDS: [&str; 16] = [
        "running",
        "runs",
        "ran",
        "runner",
        "budget",
        "budgets",
        "review",
        "reviewed",
        "lunch",
        "noon",
        "the",
        "of",
        "garden",
        "gardening",
        "quarterly",
        "zebra",
    ];
    const SPEAKERS: [&str; 3] = ["Alice", "bob", "Carol"];
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    (0..size)
        .map(|_| {
            let length = 1 + next() % 12;
            let text: Vec<&str> = (0..length).map(|_| WORDS[next() % WORDS.len()]).collect();
            (text.join(" "), SPEAKERS[next() % SPEAKERS.len()].to_owned())
        })
        .collect()
}

const LEXICAL_QUERIES: [&str; 8] = [
    "runs",
    "budget review",
    "the lunch of alice",
    "gardening quarterly zebra",
    "who ran the budgets",
    "Bob",
    "carol running noon",
    "of the",
];

/// FTS5's own answers over `corpus` as format 1 computed them (the whole table was one namespace):
/// row numbers from 0 and negated `bm25()`, best first.
fn fts5_answers(
    corpus: &[(String, String)],
    query: &str,
    rules: &memory_sqlite::lexical::LexicalRules,
) -> Vec<(usize, f64)> {
    let connection = rusqlite::Connection::open_in_memory().unwrap();
    connection.execute_batch(FORMAT_1_FTS).unwrap();
    for (row, (text, speaker)) in (1_i64..).zip(corpus) {
        connection
            .execute(
                "INSERT INTO memory_fts (rowid, text, speakers) VALUES (?1, ?2, ?3)",
                rusqlite::params![row, text, speaker],
            )
            .unwrap();
    }
    let words = memory_sqlite::lexical::query_words_with(query, rules).unwrap();
    if words.is_empty() {
        // A query with no word left (stop words only) searches nothing.
        return Vec::new();
    }
    let expression = words
        .iter()
        .map(|word| format!("\"{word}\""))
        .collect::<Vec<_>>()
        .join(" OR ");
    let mut statement = connection
        .prepare(
            "SELECT rowid, bm25(memory_fts, ?2, ?3) AS rank FROM memory_fts \
             WHERE memory_fts MATCH ?1 ORDER BY rank, rowid",
        )
        .unwrap();
    statement
        .query_map(
            rusqlite::params![expression, rules.text_weight, rules.speaker_weight],
            |row| Ok(((row.get::<_, i64>(0)? - 1) as usize, -row.get::<_, f64>(1)?)),
        )
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn store_answers(
    store: &SqliteStore,
    tenant: &str,
    query: &str,
    rules: &memory_sqlite::lexical::LexicalRules,
) -> Vec<(usize, f64)> {
    store
        .search_with_rules(&access(tenant, "s"), query, 1_000, rules)
        .unwrap()
        .into_iter()
        .map(|hit| {
            let row = hit.key.id.as_str().trim_start_matches("d").parse().unwrap();
            (row, hit.score)
        })
        .collect()
}

/// `b` is BM25's length normalization: at 0 a term counts the same in a one-word turn and a long one;
/// at 1 the short one wins by its length. `k1` saturates repeated terms.
#[test]
fn the_rules_k1_and_b_shape_the_scores() {
    use memory_sqlite::lexical::LexicalRules;
    let store = open(&fresh_path());
    let corpus = [
        ("ada".to_owned(), "Bob".to_owned()),
        (
            "ada wrote about lunch budgets gardening and the quarterly review".to_owned(),
            "Bob".to_owned(),
        ),
        ("ada ada ada".to_owned(), "Bob".to_owned()),
        ("nothing here".to_owned(), "Bob".to_owned()),
    ];
    let writes = corpus
        .iter()
        .enumerate()
        .map(|(row, (text, speaker))| {
            let id = format!("d{row}");
            put(
                &key("lengths", &id),
                &format!("op-{id}"),
                None,
                said(text, speaker),
                &["s"],
            )
        })
        .collect::<Vec<_>>();
    for outcome in store.apply_batch(writes).unwrap() {
        outcome.unwrap();
    }
    let score = |rules: &LexicalRules, row: usize| {
        store_answers(&store, "lengths", "ada", rules)
            .into_iter()
            .find(|(found, _)| *found == row)
            .map(|(_, score)| score)
            .unwrap()
    };
    let no_length = LexicalRules {
        b: 0.0,
        ..LexicalRules::default()
    };
    assert!((score(&no_length, 0) - score(&no_length, 1)).abs() < 1e-12);
    let full_length = LexicalRules {
        b: 1.0,
        ..LexicalRules::default()
    };
    assert!(score(&full_length, 0) > score(&full_length, 1) * 1.5);
    // Three occurrences against one: the larger k1, the larger the gain.
    let gain = |k1: f64| {
        let rules = LexicalRules { k1, ..no_length };
        score(&rules, 2) / score(&rules, 0)
    };
    assert!(gain(0.5) < gain(2.0), "{} {}", gain(0.5), gain(2.0));
}

/// A namespace alone ranks and scores exactly as FTS5's `bm25()` did over the same documents (format
/// 1), under the default rules and other column weights; filling other namespaces with the same words
/// changes neither.
#[test]
fn a_namespace_alone_scores_as_fts5_did_and_others_change_nothing() {
    use memory_sqlite::lexical::LexicalRules;
    let store = open(&fresh_path());
    let corpus = lexical_corpus(7, 300);
    let writes = |tenant: &str, corpus: &[(String, String)]| {
        corpus
            .iter()
            .enumerate()
            .map(|(row, (text, speaker))| {
                let id = format!("d{row}");
                put(
                    &key(tenant, &id),
                    &format!("op-{id}"),
                    None,
                    said(text, speaker),
                    &["s"],
                )
            })
            .collect::<Vec<_>>()
    };
    for outcome in store.apply_batch(writes("alone", &corpus)).unwrap() {
        outcome.unwrap();
    }
    // FTS5's bm25() has k1 = 1.2 and b = 0.75; the product's default b differs (tuned).
    let fts5 = LexicalRules {
        k1: memory_sqlite::lexical::FTS5_K1,
        b: memory_sqlite::lexical::FTS5_B,
        ..LexicalRules::default()
    };
    let all_rules = [
        fts5,
        LexicalRules {
            stop_words: false,
            text_weight: 2.5,
            speaker_weight: 0.3,
            ..fts5
        },
        LexicalRules {
            speaker_weight: 0.0,
            ..fts5
        },
    ];
    let mut before = Vec::new();
    for rules in &all_rules {
        for query in LEXICAL_QUERIES {
            let expected = fts5_answers(&corpus, query, rules);
            let found = store_answers(&store, "alone", query, rules);
            let words = memory_sqlite::lexical::query_words_with(query, rules).unwrap();
            // Only a query of stop words alone may find nothing (it has no words to search).
            assert!(
                !expected.is_empty() || words.is_empty(),
                "{query:?} finds nothing to compare"
            );
            assert_eq!(found, expected, "{query:?} under {rules:?}");
            before.push(found);
        }
    }
    for tenant in ["other-1", "other-2", "other-3"] {
        let others = lexical_corpus(tenant.len() as u64 * 31 + 3, 400);
        for outcome in store.apply_batch(writes(tenant, &others)).unwrap() {
            outcome.unwrap();
        }
    }
    let mut after = Vec::new();
    for rules in &all_rules {
        for query in LEXICAL_QUERIES {
            after.push(store_answers(&store, "alone", query, rules));
        }
    }
    assert_eq!(after, before, "other namespaces changed the answers");
    store.reader().check_consistency().expect("consistent");
}

/// A file of storage format 1 (one FTS5 table over every namespace) is migrated by the first store
/// that opens it: readers refuse it until then, the FTS5 table is gone after, and every search answers
/// as before (the index is rebuilt from the stored documents; withdrawn ones stay out).
#[tokio::test]
async fn a_format_1_file_is_migrated_on_open_and_answers_as_before() {
    let path = fresh_path();
    let store = open(&path);
    let corpus = lexical_corpus(11, 60);
    let mut texts = std::collections::HashMap::new();
    for (row, (text, speaker)) in corpus.iter().enumerate() {
        let tenant = ["t1", "t2"][row % 2];
        let id = format!("d{row}");
        store
            .apply(put(
                &key(tenant, &id),
                &format!("op-{id}"),
                None,
                said(text, speaker),
                &["s"],
            ))
            .await
            .unwrap();
        texts.insert((tenant, id), (text.clone(), speaker.clone()));
    }
    // A replacement and a withdrawal, so the file holds more than first revisions.
    let replaced = store
        .read(&key("t1", "d0"))
        .await
        .unwrap()
        .unwrap()
        .revision;
    store
        .apply(put(
            &key("t1", "d0"),
            "op-d0-again",
            Some(&replaced),
            said("zebra budget", "Alice"),
            &["s"],
        ))
        .await
        .unwrap();
    texts.insert(
        ("t1", "d0".to_owned()),
        ("zebra budget".to_owned(), "Alice".to_owned()),
    );
    let withdrawn = store
        .read(&key("t2", "d1"))
        .await
        .unwrap()
        .unwrap()
        .revision;
    store
        .apply(withdraw(&key("t2", "d1"), "op-d1-forget", &withdrawn))
        .await
        .unwrap();
    let answers = |store: &SqliteStore| {
        let mut all = Vec::new();
        for tenant in ["t1", "t2"] {
            for query in LEXICAL_QUERIES.iter().chain(&["zebra"]) {
                all.push(
                    store
                        .reader()
                        .search_blocking(&access(tenant, "s"), query, 100)
                        .unwrap()
                        .into_iter()
                        .map(|hit| (hit.key, hit.score))
                        .collect::<Vec<_>>(),
                );
            }
        }
        all
    };
    let before = answers(&store);
    drop(store);

    // Turn the file into one of memory format 1 from before the versioned schema: the FTS5 table
    // holds the live documents, the lexical tables and the version table are gone, the markers are
    // back.
    let connection = raw(&path);
    connection.execute_batch(FORMAT_1_FTS).unwrap();
    let live: Vec<(i64, String, String)> = connection
        .prepare("SELECT entry, namespace, id FROM memory_documents WHERE withdrawn = 0")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(live.len(), corpus.len() - 1);
    for (entry, stored_namespace, id) in live {
        let tenant = if stored_namespace == namespace("t1").as_str() {
            "t1"
        } else {
            "t2"
        };
        let (text, speaker) = &texts[&(tenant, id)];
        connection
            .execute(
                "INSERT INTO memory_fts (rowid, text, speakers) VALUES (?1, ?2, ?3)",
                rusqlite::params![entry, text, speaker],
            )
            .unwrap();
    }
    connection
        .execute_batch(
            "DROP TABLE memory_lexical_namespaces; DROP TABLE memory_lexical_terms; \
             DROP TABLE memory_lexical_postings; DROP TABLE memory_lexical_documents; \
             DROP TABLE memory_schema_version; DROP TABLE activity_formats; \
             DROP INDEX memory_revisions_by_key; \
             ALTER TABLE memory_receipts DROP COLUMN redacted; \
             DROP INDEX remembering_suppressions_by_thread; \
             ALTER TABLE remembering_suppressions DROP COLUMN thread; \
             DROP TABLE remembering_suppression_count; \
             DROP TABLE semantic_chunk_counts; \
             UPDATE memory_meta SET value = 1 WHERE key = 'memory_store_format';",
        )
        .unwrap();
    drop(connection);

    let refused = SqliteReader::open(&path).expect_err("a reader does not migrate");
    assert!(
        matches!(
            storage_failure(&refused),
            Some(StoreFailure::SchemaTooOld { found: 0, supported })
                if *supported == memory_sqlite::SCHEMA_VERSION
        ),
        "{refused:?}"
    );
    let store = open(&path);
    assert_eq!(answers(&store), before);
    store.reader().check_consistency().expect("consistent");
    drop(store);
    let connection = raw(&path);
    let (version, fts_tables): (i64, i64) = connection
        .query_row(
            "SELECT (SELECT max(version) FROM memory_schema_version), \
             (SELECT count(*) FROM sqlite_schema WHERE name LIKE 'memory_fts%')",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!((version, fts_tables), (memory_sqlite::SCHEMA_VERSION, 0));
    SqliteReader::open(&path).expect("a reader opens the migrated file");
}
