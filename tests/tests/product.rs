//! The product contract, end to end through the built `memory` binary: one-shot commands from a shell
//! and `memory serve` through an MCP client over stdio, on a real SQLite file with the real model.
//!
//! Each test states one promise of SPEC §8 as a user sees it. They use the real embedding model from
//! `assets/` (`scripts/fetch-assets.sh`, which `scripts/test.sh` runs first).

#![allow(clippy::unwrap_used)]

use integration_tests::product::{Fixture, MODES, cited_documents, put, recall};
use serde_json::{Value, json};

/// Twenty documents that all match "green tea", each a different sentence.
fn tea_documents() -> Vec<Value> {
    (0..20)
        .map(|n| {
            put(
                &format!("tea-{n:02}"),
                &format!("Note {n}: the user drinks green tea with breakfast number {n}."),
            )
        })
        .collect()
}

fn assert_ten_documents(mode: &str, result: &Value, through: &str) {
    let cited = cited_documents(result);
    assert_eq!(
        cited.len(),
        10,
        "{through} {mode}: max_items 10 over 20 matching documents cites 10 documents, got {cited:?}"
    );
    let expected_by = match mode {
        "lexical" => Value::Null,
        "exact" => json!("exact"),
        // A small index builds its graph at once, so hnsw and hybrid are answered by it.
        _ => json!("hnsw"),
    };
    assert_eq!(result["answered_by"], expected_by, "{through} {mode}");
}

#[test]
fn a_recall_cites_as_many_documents_as_max_items_in_every_mode_from_the_shell() {
    let fixture = Fixture::new();
    let imported = fixture.import(&tea_documents());
    assert_eq!(imported.success()["written"], 20, "{imported:#?}");
    fixture.call("sync", &json!({})).success();
    for mode in MODES {
        let outcome = fixture.call("recall", &recall("green tea breakfast", mode, 10));
        assert_ten_documents(mode, outcome.success(), "memory recall");
    }
    // max_sources lowers the number of distinct documents below max_items.
    let mut limited = recall("green tea breakfast", "lexical", 10);
    limited["limits"]["max_sources"] = json!(3);
    let outcome = fixture.call("recall", &limited);
    assert_eq!(cited_documents(outcome.success()).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recall_cites_as_many_documents_as_max_items_in_every_mode_over_mcp() {
    let fixture = Fixture::new();
    let client = fixture.serve().await;
    for document in tea_documents() {
        client.success("memory_put", document).await;
    }
    client.success("memory_sync", json!({})).await;
    for mode in MODES {
        let result = client
            .success("memory_recall", recall("green tea breakfast", mode, 10))
            .await;
        assert_ten_documents(mode, &result, "memory_recall");
    }
    client.close().await;
}

#[test]
fn a_recall_that_cannot_catch_the_index_up_in_time_is_unavailable_and_says_how_far_behind() {
    let fixture = Fixture::new();
    // Enough documents that embedding them all takes far longer than the recall's deadline.
    let documents: Vec<Value> = (0..1_500)
        .map(|n| {
            put(
                &format!("d{n}"),
                &format!("Entry {n} of the diary mentions a walk in the park on day {n}."),
            )
        })
        .collect();
    fixture.import(&documents).success();
    let mut lagging = recall("a walk in the park", "exact", 5);
    lagging["limits"]["timeout_ms"] = json!(3_000);
    let started = std::time::Instant::now();
    let outcome = fixture.call("recall", &lagging);
    let elapsed = started.elapsed();
    let message = outcome.refused("unavailable").to_owned();
    eprintln!("refused after {elapsed:?}: {message}");
    assert!(message.contains("memory sync"), "{message}");
    if !message.contains("did not load") {
        // The model loaded in time; the catch-up stopped at the deadline, short of the head.
        let behind: u64 = message
            .split_whitespace()
            .find_map(|word| word.parse().ok())
            .expect("the refusal counts the changes behind");
        assert!(behind > 0 && behind <= 1_500, "{message}");
    }
    // Lexical recall does not wait for the semantic index.
    let lexical = fixture.call("recall", &recall("walk in the park", "lexical", 5));
    assert_eq!(cited_documents(lexical.success()).len(), 5);
}

/// `count` short documents about different things.
fn diary(count: usize) -> Vec<Value> {
    const TOPICS: [&str; 8] = [
        "a walk in the park",
        "baking bread",
        "a violin lesson",
        "fixing the bicycle",
        "a trip to the harbor",
        "planting tomatoes",
        "a chess tournament",
        "painting the kitchen",
    ];
    (0..count)
        .map(|n| {
            put(
                &format!("d{n}"),
                &format!("Day {n}: we spent the afternoon on {}.", TOPICS[n % 8]),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hnsw_over_thousands_of_chunks_is_answered_by_a_persisted_graph_that_restarts_load() {
    let fixture = Fixture::new();
    fixture.import(&diary(3_000)).success();
    fixture.call("sync", &json!({})).success();
    // A one-shot open loads the graph the sync persisted: no build, no embedding.
    let status = fixture.run(&["status"]);
    let status = status.success();
    assert!(
        status["chunks"]["live"].as_u64().unwrap() >= 3_000,
        "{status:#}"
    );
    assert_eq!(status["behind"], 0, "{status:#}");
    assert_eq!(status["hnsw"]["state"], "ready", "{status:#}");
    assert_eq!(status["hnsw"]["origin"], "loaded_from_store", "{status:#}");
    assert_eq!(status["hnsw"]["builds"], 0, "{status:#}");
    assert_eq!(status["hnsw"]["ef_search"], 128, "{status:#}");
    let hnsw = fixture.call("recall", &recall("baking bread", "hnsw", 5));
    assert_eq!(hnsw.success()["answered_by"], "hnsw", "{hnsw:#?}");
    assert_eq!(cited_documents(hnsw.success()).len(), 5);
    // The search width is not part of the graph: a wider one is served by the same persisted graph,
    // from the flag or the environment; a width out of range is refused before anything opens.
    let with_width = |width: &str| Fixture {
        dir: tempfile::tempdir().unwrap(),
        db: fixture.db.clone(),
        options: vec!["--hnsw-ef-search".to_owned(), width.to_owned()],
    };
    let wider = with_width("400");
    let status = wider.run(&["status"]);
    let status = status.success();
    assert_eq!(status["hnsw"]["ef_search"], 400, "{status:#}");
    assert_eq!(status["hnsw"]["state"], "ready", "{status:#}");
    let widened = wider.call("recall", &recall("baking bread", "hnsw", 5));
    assert_eq!(widened.success()["answered_by"], "hnsw", "{widened:#?}");
    assert_eq!(cited_documents(widened.success()).len(), 5);
    let from_env = fixture.run_env(&["status"], &[("MEMORY_HNSW_EF_SEARCH", "300".as_ref())]);
    assert_eq!(from_env.success()["hnsw"]["ef_search"], 300);
    for width in ["0", "10001"] {
        let refused = with_width(width).call("recall", &recall("baking bread", "hnsw", 5));
        let message = refused.refused("invalid-input");
        assert!(message.contains("ef_search"), "{width}: {message}");
    }
    let exact = fixture.call("recall", &recall("baking bread", "exact", 5));
    assert_eq!(exact.success()["answered_by"], "exact");
    // A restarted server answers by the loaded graph from its first recall, with no build to wait for.
    let client = fixture.serve().await;
    let served = client
        .success("memory_recall", recall("a violin lesson", "hnsw", 5))
        .await;
    assert_eq!(served["answered_by"], "hnsw", "{served:#}");
    client.close().await;
}

#[test]
fn a_sync_past_max_chunks_is_refused_and_the_rest_is_counted_not_hidden() {
    let fixture = Fixture::new().with_options(&["--max-chunks", "12"]);
    fixture.import(&diary(20)).success();
    let refused = fixture.call("sync", &json!({}));
    let message = refused.refused("too-large");
    assert!(message.contains("max_chunks"), "{message}");
    let status = fixture.run(&["status"]);
    let status = status.success();
    assert_eq!(status["chunks"]["capacity"], 12, "{status:#}");
    assert_eq!(status["chunks"]["live"], 12, "{status:#}");
    assert_eq!(
        status["unindexed"]["by_reason"]["capacity"], 8,
        "{status:#}"
    );
    // What fits stays searchable; a larger capacity takes the rest.
    let exact = fixture.call("recall", &recall("baking bread", "exact", 3));
    assert!(!cited_documents(exact.success()).is_empty());
    let roomy = Fixture {
        dir: tempfile::tempdir().unwrap(),
        db: fixture.db.clone(),
        options: vec!["--max-chunks".to_owned(), "1000".to_owned()],
    };
    let synced = roomy.call("sync", &json!({}));
    assert_eq!(synced.success()["unindexed"], 0, "{synced:#?}");
    let status = roomy.run(&["status"]);
    assert_eq!(status.success()["chunks"]["live"], 20);
}

/// The namespace the tests' thread records are bound to (each append names `user` ana): hers.
fn statements_namespace() -> Value {
    json!({"name": "memory.user", "version": 1, "identity": {"user": "ana"}})
}

fn statements_recall(query: &str, mode: &str) -> Value {
    json!({
        "namespace": statements_namespace(), "scope": "agent", "query": query, "mode": mode,
        "limits": {"max_items": 5, "max_bytes": 8000, "max_tokens": 2000, "timeout_ms": 60000}
    })
}

fn recalled_texts(outcome: &integration_tests::product::Outcome) -> String {
    outcome.success()["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_forgotten_record_is_never_recalled_from_acknowledgement_on_in_any_mode() {
    let fixture = Fixture::new();
    let record = |text: &str, at: i64| {
        json!({"thread": "chat-7", "user": "ana", "record": {
            "occurred_at": at, "speaker": "ana", "observers": ["assistant"],
            "body": {"kind": "user_input", "text": text}
        }})
    };
    let appended = fixture.run(&[
        "thread",
        "append",
        &record(
            "I adopted a grey cat named Miso last winter.",
            1_767_225_600_000,
        )
        .to_string(),
    ]);
    let sequence = appended.success()["sequence"].as_u64().unwrap();
    fixture
        .run(&[
            "thread",
            "append",
            &record("I play the violin every Sunday morning.", 1_767_225_660_000).to_string(),
        ])
        .success();
    fixture.worker_pass();
    fixture.call("sync", &json!({})).success();
    for mode in MODES {
        let text =
            recalled_texts(&fixture.call("recall", &statements_recall("grey cat Miso", mode)));
        assert!(
            text.contains("Miso"),
            "{mode}: the statement is recalled before the forget"
        );
    }
    let forget = json!({"thread": "chat-7", "sequence": sequence, "reason": "the user asked"});
    fixture
        .run(&["thread", "forget", &forget.to_string()])
        .success();
    // Acknowledged, cleanup not run yet: suppressed at read time in every mode.
    for mode in MODES {
        let text =
            recalled_texts(&fixture.call("recall", &statements_recall("grey cat Miso", mode)));
        assert!(
            !text.contains("Miso"),
            "{mode}: recalled after the forget: {text}"
        );
        let kept =
            recalled_texts(&fixture.call("recall", &statements_recall("violin Sunday", mode)));
        assert!(kept.contains("violin"), "{mode}: the other record stays");
    }
    // The worker's cleanup withdraws it; it stays gone.
    fixture.worker_pass();
    fixture.call("sync", &json!({})).success();
    for mode in MODES {
        let text =
            recalled_texts(&fixture.call("recall", &statements_recall("grey cat Miso", mode)));
        assert!(
            !text.contains("Miso"),
            "{mode}: recalled after cleanup: {text}"
        );
    }
}

/// `count` distinct sentences: who, did what, where.
fn varied(count: usize) -> Vec<Value> {
    const WHO: [&str; 6] = [
        "My sister",
        "The old fisherman",
        "Our neighbour",
        "A young doctor",
        "The chef",
        "The pilot",
    ];
    const DID: [&str; 5] = [
        "repaired a wooden boat",
        "baked rye bread",
        "learned the violin",
        "planted tomatoes",
        "ran a marathon",
    ];
    const WHERE: [&str; 4] = [
        "by the harbor",
        "in the mountains",
        "at the old school",
        "after the storm",
    ];
    (0..count)
        .map(|n| {
            let text = format!(
                "{} {} {} (note {n}).",
                WHO[n % WHO.len()],
                DID[(n / WHO.len()) % DID.len()],
                WHERE[(n / (WHO.len() * DID.len())) % WHERE.len()]
            );
            put(&format!("v{n}"), &text)
        })
        .collect()
}

/// A namespace large enough to be found by one pass over the index's rows (at least 4,096 rows and
/// most of the table) answers an exact and an HNSW recall from the shell with its nearest
/// documents: the 35 documents saying the query's sentence (each of `varied`'s 120 sentences is
/// said 35 times) fill the top 8, and the passages cite the stored text.
#[test]
fn exact_and_hnsw_recalls_over_a_namespace_of_thousands_cite_its_nearest_documents() {
    let fixture = Fixture::new();
    fixture.import(&varied(4_200)).success();
    assert_eq!(fixture.call("sync", &json!({})).success()["indexed"], 4_200);
    for mode in ["exact", "hnsw"] {
        let answer = fixture.call(
            "recall",
            &recall(
                "The old fisherman repaired a wooden boat by the harbor",
                mode,
                8,
            ),
        );
        let answer = answer.success();
        assert_eq!(cited_documents(answer).len(), 8, "{mode}: {answer:#}");
        for passage in answer["passages"].as_array().unwrap() {
            let text = passage["content"]["text"].as_str().unwrap();
            assert!(
                text.starts_with("The old fisherman repaired a wooden boat by the harbor"),
                "{mode}: {text}"
            );
        }
    }
}

/// `--compact-vectors` holds int8 codes in memory and rescores each query's candidates with their
/// stored f32 vectors: every mode cites the same passages, in the same order, with the same scores as
/// the f32 index over the same store.
#[test]
fn compact_vectors_recall_what_f32_recalls_from_the_shell() {
    let fixture = Fixture::new();
    fixture.import(&varied(120)).success();
    fixture.call("sync", &json!({})).success();
    let compact = Fixture {
        dir: tempfile::tempdir().unwrap(),
        db: fixture.db.clone(),
        options: vec!["--compact-vectors".to_owned()],
    };
    assert_eq!(
        fixture.run(&["status"]).success()["chunks"]["encoding"],
        "f32"
    );
    assert_eq!(
        compact.run(&["status"]).success()["chunks"]["encoding"],
        "int8"
    );
    let from_env = fixture.run_env(&["status"], &[("MEMORY_COMPACT_VECTORS", "1".as_ref())]);
    assert_eq!(from_env.success()["chunks"]["encoding"], "int8");
    for (query, mode) in [
        ("who fixed a boat near the sea", "exact"),
        ("music lessons", "hnsw"),
        ("a doctor running a long race", "hybrid"),
    ] {
        let f32_answer = fixture.call("recall", &recall(query, mode, 8));
        let compact_answer = compact.call("recall", &recall(query, mode, 8));
        let (f32_answer, compact_answer) = (f32_answer.success(), compact_answer.success());
        assert_eq!(cited_documents(f32_answer).len(), 8, "{f32_answer:#}");
        assert_eq!(
            f32_answer["passages"], compact_answer["passages"],
            "{mode}: {f32_answer:#} against {compact_answer:#}"
        );
        assert_eq!(f32_answer["answered_by"], compact_answer["answered_by"]);
    }
}

/// Hybrid recall lets a conversation turn borrow relevance from the turns written around it: the
/// reply that names the flowers ("The orange ones, ...") shares no word with the question and is
/// further from it in meaning than turns about blossom and woods written elsewhere in the chat, so
/// the two rankings alone put those first; the turn written just before it matches the question
/// best, and through it the reply is the second document cited.
#[test]
fn a_hybrid_recall_cites_the_reply_written_right_after_the_best_match() {
    let turns = [
        (
            "c00",
            "Spring came early and the whole park smelled of blossom.",
        ),
        ("c01", "The train was late again this morning."),
        ("c02", "I finally fixed the squeaky door in the hallway."),
        ("c03", "We watched a documentary about deep sea fish."),
        (
            "c04",
            "My neighbour asked me which flowers I grow in the garden.",
        ),
        ("c05", "The orange ones, same as my grandmother had."),
        ("c06", "Dinner was pasta with too much salt."),
        ("c07", "My laptop battery barely lasts two hours now."),
        ("c08", "The football match went to extra time."),
        (
            "c09",
            "We hiked through woods full of wild plants and moss.",
        ),
        ("c10", "The dentist appointment moved to Thursday."),
    ];
    let fixture = Fixture::new();
    let documents: Vec<Value> = turns.iter().map(|(id, text)| put(id, text)).collect();
    fixture.import(&documents).success();
    fixture.call("sync", &json!({})).success();
    let outcome = fixture.call(
        "recall",
        &recall(
            "Which flowers does the user grow in the garden?",
            "hybrid",
            2,
        ),
    );
    let answer = outcome.success();
    assert_eq!(
        cited_documents(answer),
        ["c04", "c05"],
        "the best match and the reply written right after it: {answer:#}"
    );
}
