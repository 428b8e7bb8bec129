//! End-to-end tests of the semantic recall modes through the built binary, with the real embedding model.
//!
//! The model is found the way the binary always finds it (`MEMORY_ASSETS_DIR`, else the workspace's
//! `assets/` installed by `scripts/fetch-assets.sh`); a missing model fails these tests with the refusal
//! that names the script, it never skips them.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::ffi::OsStr;

use common::{Fixture, Outcome, put, recall, run_with_env, withdraw};
use serde_json::{Value, json};

const SEMANTIC_MODES: [&str; 3] = ["exact", "hnsw", "hybrid"];

/// Puts documents about different things; "ada" is the one a question about where Ada lives needs,
/// though it shares no word with that question but her name.
fn put_documents(fixture: &Fixture) -> Vec<(String, String)> {
    let documents = [
        ("ada", "Ada moved to Lisbon last spring."),
        ("tea", "Bob prefers green tea over coffee in the morning."),
        (
            "meeting",
            "The quarterly budget review is scheduled for Tuesday.",
        ),
        ("bike", "Carol repaired the chain of her old bicycle."),
    ];
    documents
        .iter()
        .enumerate()
        .map(|(index, (id, text))| {
            let outcome = fixture.call("put", &put(id, &format!("op-{index}"), None, text));
            outcome.assert_success();
            (
                (*id).to_owned(),
                outcome.json["revision"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn recalled_ids(outcome: &Outcome) -> Vec<String> {
    outcome.assert_success();
    outcome.json["passages"]
        .as_array()
        .expect("passages")
        .iter()
        .map(|passage| passage["source"]["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Runs the binary with `MEMORY_LOG=debug`, so standard error shows what the index did (counts only).
fn call_logged(fixture: &Fixture, operation: &str, argument: &Value) -> Outcome {
    run_with_env(
        Some(&fixture.db),
        &[operation, &argument.to_string()],
        None,
        &[("MEMORY_LOG", OsStr::new("semantic_index=debug"))],
    )
}

fn refreshes_logged(outcome: &Outcome) -> usize {
    outcome
        .stderr
        .lines()
        .filter(|line| line.contains("semantic source refreshed"))
        .count()
}

#[test]
fn every_semantic_mode_recalls_a_paraphrase_after_sync() {
    let fixture = Fixture::new();
    put_documents(&fixture);
    let synced = fixture.call("sync", &json!({}));
    synced.assert_success();
    assert_eq!(synced.json, json!({"indexed": 4, "unindexed": 0}));

    for mode in SEMANTIC_MODES {
        let outcome = fixture.call("recall", &recall("which city does Ada live in", mode));
        let ids = recalled_ids(&outcome);
        assert_eq!(
            ids.first().map(String::as_str),
            Some("ada"),
            "{mode}: {outcome:#?}"
        );
        let passage = &outcome.json["passages"][0];
        assert_eq!(passage["citation"], "memory:1");
        assert_eq!(
            passage["content"]["text"],
            "Ada moved to Lisbon last spring."
        );
        assert!(
            passage["score"].as_f64().is_some_and(|score| score > 0.0),
            "{mode}: {passage:#}"
        );
        assert!(
            outcome.json["text"]
                .as_str()
                .unwrap()
                .contains("Ada moved to Lisbon last spring."),
            "{mode}"
        );
        assert_eq!(outcome.json["outcomes"][0]["status"], "found", "{mode}");
    }
    // The lexical index has no word of the question but the name to go on; the semantic modes found
    // the answer by meaning.
    let lexical = fixture.call("recall", &recall("which town did she relocate", "lexical"));
    assert!(recalled_ids(&lexical).is_empty(), "{lexical:#?}");
    let semantic = fixture.call("recall", &recall("which town did she relocate", "exact"));
    assert_eq!(
        recalled_ids(&semantic).first().map(String::as_str),
        Some("ada")
    );
}

#[test]
fn a_semantic_recall_indexes_what_was_committed_before_it_without_a_sync() {
    let fixture = Fixture::new();
    put_documents(&fixture);
    let outcome = fixture.call("recall", &recall("where does Ada live now", "hnsw"));
    assert_eq!(
        recalled_ids(&outcome).first().map(String::as_str),
        Some("ada")
    );
}

#[test]
fn stored_vectors_mean_only_new_changes_are_embedded() {
    let fixture = Fixture::new();
    put_documents(&fixture);
    let first = call_logged(&fixture, "sync", &json!({}));
    first.assert_success();
    assert_eq!(refreshes_logged(&first), 4, "{}", first.stderr);

    // Nothing new: the stored position answers without embedding anything.
    let idle = call_logged(&fixture, "sync", &json!({}));
    assert_eq!(idle.json, json!({"indexed": 4, "unindexed": 0}));
    assert_eq!(refreshes_logged(&idle), 0, "{}", idle.stderr);

    fixture
        .call(
            "put",
            &put("paris", "op-9", None, "Dan lives in Paris with his sister."),
        )
        .assert_success();
    let recalled = call_logged(&fixture, "recall", &recall("which city is Dan in", "exact"));
    assert_eq!(refreshes_logged(&recalled), 1, "{}", recalled.stderr);
    assert_eq!(
        recalled_ids(&recalled).first().map(String::as_str),
        Some("paris")
    );
    assert!(
        recalled.stderr.contains("semantic index loaded"),
        "the earlier vectors were loaded from the file: {}",
        recalled.stderr
    );
}

#[test]
fn a_withdrawn_document_is_never_recalled_in_any_mode() {
    let fixture = Fixture::new();
    let revisions = put_documents(&fixture);
    fixture.call("sync", &json!({})).assert_success();
    let ada_revision = &revisions[0].1;
    fixture
        .call("withdraw", &withdraw("ada", "op-w", ada_revision))
        .assert_success();

    // Before any sync: the index still holds the vectors, revalidation drops them.
    for mode in SEMANTIC_MODES {
        let outcome = fixture.call("recall", &recall("which city does Ada live in", mode));
        assert!(
            !recalled_ids(&outcome).contains(&"ada".to_owned()),
            "{mode}: {outcome:#?}"
        );
    }
    let synced = fixture.call("sync", &json!({}));
    assert_eq!(synced.json, json!({"indexed": 5, "unindexed": 0}));
    for mode in ["lexical", "exact", "hnsw", "hybrid"] {
        for query in ["which city does Ada live in", "Ada moved to Lisbon"] {
            let outcome = fixture.call("recall", &recall(query, mode));
            let ids = recalled_ids(&outcome);
            assert!(!ids.contains(&"ada".to_owned()), "{mode}: {outcome:#?}");
            assert!(
                !outcome.json["text"].as_str().unwrap().contains("Lisbon"),
                "{mode}: {outcome:#?}"
            );
        }
    }
}

#[test]
fn missing_assets_refuse_semantic_modes_and_keep_lexical_working() {
    let fixture = Fixture::new();
    let empty = tempfile::tempdir().unwrap();
    let env = [("MEMORY_ASSETS_DIR", empty.path().as_os_str())];
    let run = |operation: &str, argument: &Value| {
        run_with_env(
            Some(&fixture.db),
            &[operation, &argument.to_string()],
            None,
            &env,
        )
    };

    // Nothing to index yet: sync needs no model.
    assert_eq!(
        run("sync", &json!({})).json,
        json!({"indexed": 0, "unindexed": 0})
    );
    run(
        "put",
        &put("ada", "op-1", None, "Ada moved to Lisbon last spring."),
    )
    .assert_success();

    let mut default_mode = recall("Lisbon", "hybrid");
    default_mode.as_object_mut().unwrap().remove("mode");
    for argument in [
        recall("Lisbon", "exact"),
        recall("Lisbon", "hnsw"),
        recall("Lisbon", "hybrid"),
        default_mode,
    ] {
        let outcome = run("recall", &argument);
        outcome.assert_refused("unavailable");
        let message = outcome.json["error"]["message"].as_str().unwrap();
        assert!(message.contains("scripts/fetch-assets.sh"), "{message}");
    }
    let synced = run("sync", &json!({}));
    synced.assert_refused("unavailable");
    assert!(
        synced.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("scripts/fetch-assets.sh")
    );

    let lexical = run("recall", &recall("Lisbon", "lexical"));
    assert_eq!(recalled_ids(&lexical), vec!["ada".to_owned()]);

    // With the model found again (the default lookup), the same file answers every mode.
    let synced = fixture.call("sync", &json!({}));
    assert_eq!(synced.json, json!({"indexed": 1, "unindexed": 0}));
    let outcome = fixture.call("recall", &recall("which city does Ada live in", "hybrid"));
    assert_eq!(recalled_ids(&outcome), vec!["ada".to_owned()]);
}

#[test]
fn store_and_vectors_share_one_database_file() {
    let fixture = Fixture::new();
    put_documents(&fixture);
    fixture.call("sync", &json!({})).assert_success();
    // Writes and reads keep working on the file that now holds the vector tables too.
    fixture
        .call(
            "put",
            &put("late", "op-late", None, "Eve adopted a grey cat."),
        )
        .assert_success();
    fixture.call("get", &common::get("ada")).assert_success();
    let connection = rusqlite::Connection::open(&fixture.db).unwrap();
    let chunks: i64 = connection
        .query_row("SELECT count(*) FROM semantic_chunks", [], |row| row.get(0))
        .unwrap();
    let documents: i64 = connection
        .query_row("SELECT count(*) FROM memory_documents", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(
        chunks, 4,
        "one chunk per short document, in the store's file"
    );
    assert!(documents >= 5);
    let position: i64 = connection
        .query_row("SELECT position FROM semantic_positions", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(position, 4);
}

/// The assets folder the binary finds by default (`MEMORY_ASSETS_DIR`, else the workspace's).
fn default_assets() -> std::path::PathBuf {
    std::env::var_os("MEMORY_ASSETS_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets"),
        std::path::PathBuf::from,
    )
}

/// An assets folder holding the default folder's runtime and embedding model, and a `reranker/`
/// made by `reranker` (nothing, or altered files).
fn assets_with(reranker: impl Fn(&std::path::Path)) -> tempfile::TempDir {
    let source = default_assets();
    let folder = tempfile::tempdir().unwrap();
    for part in ["onnxruntime", "model"] {
        std::os::unix::fs::symlink(source.join(part), folder.path().join(part)).unwrap();
    }
    reranker(folder.path());
    folder
}

#[test]
fn a_missing_or_altered_rerank_model_refuses_reranked_hybrid_recall_and_nothing_else() {
    let missing = assets_with(|_| {});
    let altered = assets_with(|folder| {
        let reranker = folder.join("reranker");
        std::fs::create_dir(&reranker).unwrap();
        for entry in std::fs::read_dir(default_assets().join("reranker")).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), reranker.join(entry.file_name())).unwrap();
        }
        // One byte changed: the file is no longer the pinned one.
        let model = reranker.join("model.onnx");
        let mut bytes = std::fs::read(&model).unwrap();
        bytes[1_000] ^= 0xff;
        std::fs::write(&model, bytes).unwrap();
    });
    for (folder, says) in [
        (&missing, "reranker/model.onnx"),
        (&altered, "not the pinned file"),
    ] {
        let fixture = Fixture::new();
        let run = |argument: &Value, rerank_model: Option<&str>| {
            let mut env = vec![("MEMORY_ASSETS_DIR", folder.path().as_os_str())];
            if let Some(value) = rerank_model {
                env.push(("MEMORY_RERANK_MODEL", OsStr::new(value)));
            }
            run_with_env(
                Some(&fixture.db),
                &["recall", &argument.to_string()],
                None,
                &env,
            )
        };
        fixture
            .call(
                "put",
                &put("ada", "op-1", None, "Ada moved to Lisbon last spring."),
            )
            .assert_success();
        // The embedding model is there: indexing needs nothing else.
        let synced = run_with_env(
            Some(&fixture.db),
            &["sync", "{}"],
            None,
            &[("MEMORY_ASSETS_DIR", folder.path().as_os_str())],
        );
        assert_eq!(synced.json, json!({"indexed": 1, "unindexed": 0}));

        // A hybrid recall that reranks needs the model: refused, naming the file and the fetch
        // command, never answered with another ranking.
        let refused = run(&recall("where does Ada live", "hybrid"), None);
        refused.assert_refused("unavailable");
        let message = refused.json["error"]["message"].as_str().unwrap();
        assert!(message.contains("scripts/fetch-assets.sh"), "{message}");
        assert!(message.contains(says), "{message}");

        // Without the stage, without the model, or in another mode, the same recall answers.
        let mut unranked = recall("where does Ada live", "hybrid");
        unranked["rerank"] = json!(false);
        for outcome in [
            run(&unranked, None),
            run(&recall("where does Ada live", "hybrid"), Some("off")),
            run(&recall("where does Ada live", "exact"), None),
            run(&recall("Lisbon", "lexical"), None),
        ] {
            assert_eq!(recalled_ids(&outcome), vec!["ada".to_owned()]);
        }
    }
}
