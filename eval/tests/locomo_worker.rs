//! `memory-eval locomo --via worker` on a hand-made conversation in LoCoMo's layout: the turns go
//! through the thread log and the worker's default extractor, and recall is judged by the turns each
//! recalled document is attributed to.

use std::path::{Path, PathBuf};

use eval::locomo::data::{Conversation, load};
use eval::locomo::worker::measure;
use eval::locomo::worker_report::{ViaWorkerReport, markdown};
use eval::progress::Progress;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/locomo-worker-mini.json")
}

fn conversations() -> Vec<Conversation> {
    load(&fixture()).expect("the fixture loads")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn via_the_worker_questions_are_dropped_statements_recalled_and_lost_evidence_listed() {
    let conversations = conversations();
    let directory = tempfile::tempdir().expect("temporary directory");
    let database = directory.path().join("locomo-via-worker.sqlite");
    let run = measure(
        &database,
        &conversations,
        &["lexical"],
        false,
        None,
        &Progress::hidden(),
    )
    .await
    .expect("the via-worker path");
    assert_eq!((run.appended, run.threads), (8, 2));
    assert_eq!(run.totals.records, 8, "every record's extraction is noted");

    // Questions are dropped and counted: "How have you been?" is a greeting, "What breed is he?" and
    // "Did you know beagles were bred for hunting hares?" are questions.
    assert_eq!(
        run.totals.dropped.get("question"),
        Some(&2),
        "{:?}",
        run.totals
    );
    assert!(
        run.totals.dropped.contains_key("acknowledgement"),
        "{:?}",
        run.totals
    );
    // Kept: D1:2, D2:1 and its restatement D2:3, which attests D2:1's document instead of adding one.
    assert_eq!(run.totals.kept, 3, "{:?}", run.totals);
    assert_eq!(run.check.documents_in_store, 2);
    assert_eq!(run.check.turns_with_memory, 3);

    // D1:4, a question, is the only evidence of "What were beagles bred for?": lost and listed.
    assert_eq!(run.check.evidence_turns, 3, "category 5 is not scored");
    assert_eq!(run.check.questions_with_all_evidence_lost, 1);
    let lost: Vec<&str> = run
        .check
        .lost
        .iter()
        .map(|lost| lost.dia_id.as_str())
        .collect();
    assert_eq!(lost, ["D1:4"]);
    let beagles = &run.check.lost[0];
    assert_eq!(beagles.speaker, "Brook");
    assert_eq!(beagles.dropped.get("question"), Some(&1));
    assert_eq!(
        beagles.sentences,
        ["question: Did you know beagles were bred for hunting hares?"]
    );

    // The statement is recalled, judged by its attribution: "What is the name of Brook's puppy?"
    // finds the document of D1:2 first.
    let lexical = &run.answers["lexical"];
    assert_eq!(lexical.len(), 3);
    assert!(lexical.iter().all(|answer| !answer.refused));
    assert_eq!(
        lexical[0].ranked_turns.first(),
        Some(&vec!["D1:2".to_owned()]),
        "{:?}",
        lexical[0]
    );
    // The lost evidence cannot be found.
    assert!(
        lexical[1]
            .ranked_turns
            .iter()
            .all(|turns| !turns.contains(&"D1:4".to_owned())),
        "{:?}",
        lexical[1]
    );
    // The restated sentence is one document standing for both of its turns, so the evidence D2:3
    // is found through it.
    assert!(
        lexical[2]
            .ranked_turns
            .contains(&vec!["D2:1".to_owned(), "D2:3".to_owned()]),
        "{:?}",
        lexical[2]
    );

    let report = ViaWorkerReport::new("fixture", &conversations, &run, &["lexical"], None);
    let figures = &report.modes[0].all;
    assert_eq!(figures.questions, 3);
    assert!((figures.hit_at_10 - 2.0 / 3.0).abs() < 1e-12, "{figures:?}");
    let json = serde_json::to_value(&report).expect("json");
    assert_eq!(json["via"], "worker");
    assert_eq!(json["documents_kept"], 3);
    assert_eq!(json["documents_dropped_by_reason"]["question"], 2);
    assert_eq!(json["evidence_turns_lost"], 1);
    assert_eq!(json["evidence_turns_lost_list"][0]["dia_id"], "D1:4");
    for name in ["hit@5", "hit@10", "evidence share@10"] {
        assert!(json["modes"][0]["all"].get(name).is_some(), "{name}");
    }
    let text = markdown(&report);
    assert!(
        text.contains("| worker-mini | D1:4 | Brook | 1 | question 1 |"),
        "{text}"
    );

    // A second run over the same file starts afresh instead of appending every turn twice.
    let again = measure(
        &database,
        &conversations,
        &["lexical"],
        false,
        None,
        &Progress::hidden(),
    )
    .await
    .expect("a second run");
    assert_eq!(
        (again.totals.records, again.check.documents_in_store),
        (8, 2)
    );
}

/// With a model (`--model-url`), the same path asks it: one call per batch, only literal quotes kept,
/// the rest counted by rule, and the report says what the calls cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn via_a_model_the_report_counts_kept_rejected_and_the_calls_cost() {
    use memory_testkit::chat_stub::{ChatStub, StubReply};
    // Each user record becomes a memory quoting it whole; each also gets an invented number.
    let stub = ChatStub::start(|body| {
        let material = body["messages"][1]["content"].as_str().unwrap_or_default();
        let mut memories = Vec::new();
        for line in material.lines() {
            let Some((number, said)) = line.strip_prefix('[').and_then(|rest| rest.split_once("] ")) else {
                continue;
            };
            let Some((_, text)) = said.split_once(" (user): ") else {
                continue;
            };
            let record = number.parse::<u64>().unwrap_or(0);
            memories.push(serde_json::json!({"text": text, "evidence": [{"record": record, "quote": text}], "corrects": null}));
            memories.push(serde_json::json!({"text": "It happened in 1999.", "evidence": [{"record": record, "quote": text}], "corrects": null}));
        }
        StubReply::content(serde_json::json!({"memories": memories}).to_string())
    })
    .expect("the stub endpoint");
    let settings = memory_service::model_settings::ModelSettings::new(
        memory_service::model_settings::ModelValues {
            url: Some(stub.url()),
            model: Some("stub".to_owned()),
            ..Default::default()
        },
    )
    .expect("valid")
    .expect("a model");
    let model = memory_service::worker::ModelExtraction::open(&settings).expect("opens");
    let conversations = conversations();
    let directory = tempfile::tempdir().expect("temporary directory");
    let run = measure(
        &directory.path().join("locomo-via-model.sqlite"),
        &conversations,
        &["lexical"],
        false,
        Some(model),
        &Progress::hidden(),
    )
    .await
    .expect("the via-model path");
    assert_eq!(run.extractor, "model stub");
    assert_eq!(run.totals.records, 8);
    assert_eq!(run.totals.model.calls as usize, stub.requests().len());
    assert!(run.totals.model.calls >= 2, "at least a call per thread");
    let endpoint = run.endpoint.clone().expect("the client's meter");
    assert_eq!(endpoint.answered as usize, stub.requests().len());
    assert!(endpoint.failed.is_empty(), "{endpoint:?}");
    assert!(run.totals.kept >= 6, "{:?}", run.totals);
    assert_eq!(
        run.totals.dropped.get("unsupported_text").copied(),
        Some(run.totals.kept),
        "every invented year is rejected: {:?}",
        run.totals
    );
    let report = ViaWorkerReport::new("mini", &conversations, &run, &["lexical"], None);
    let text = markdown(&report);
    assert!(text.contains("## The model"), "{text}");
    assert!(
        text.contains(&format!("{} calls", run.totals.model.calls)),
        "{text}"
    );
    assert!(
        text.contains(&format!("{} answered, 0 failed", endpoint.answered)),
        "{text}"
    );
    assert_eq!(
        eval::locomo::worker_report::stem(&report),
        "locomo-via-model"
    );
}
