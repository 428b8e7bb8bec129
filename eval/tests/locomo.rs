//! LoCoMo: the loader and the metrics on a hand-made slice in LoCoMo's layout, recall through the
//! product's service, the tuning's determinism, and the product's defaults against the committed
//! tuning choice. The real archive is read when `../shared/data/locomo10.zip` is present.

use std::path::{Path, PathBuf};

use eval::locomo::data::{Conversation, load};
use eval::locomo::metrics::{figures, question_scores};
use eval::locomo::report::{IN_PROCESS, THROUGH_SERVER};
use eval::locomo::run::{MODES, ingest, open_service, recall_all};
use eval::locomo::server;
use eval::locomo::tune::{Tuned, tune};
use eval::progress::Progress;
use memory_sqlite::lexical::LexicalRules;
use semantic_index::{DeterministicEmbedder, HybridParams, Preprocessing, SemanticProfile};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/locomo-mini.json")
}

fn conversations() -> Vec<Conversation> {
    load(&fixture()).expect("the fixture loads")
}

/// `locomo --via server` measures the door a host uses: every mode's answers through the built
/// `memory serve --http` (real models, the binary's defaults) are the service's in this process over
/// the same store, question by question. Needs `target/<profile>/memory` (built by `cargo test
/// --workspace`) and the model assets (`scripts/fetch-assets.sh`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_answers_every_mode_as_the_service_does() {
    let conversations = conversations();
    let directory = tempfile::tempdir().expect("temporary directory");
    let (report, through_server) = server::measure(
        "locomo-mini.json",
        &conversations,
        directory.path(),
        None,
        &Progress::hidden(),
    )
    .await
    .expect("the run through the server completes");
    assert_eq!(report.door, THROUGH_SERVER);
    assert_eq!((report.turns, report.questions), (12, 6));
    let (_, service) = open_service(&directory.path().join("locomo-via-server.sqlite"), true)
        .expect("the same store in process");
    let in_process = recall_all(&service, &conversations, &MODES, &Progress::hidden())
        .await
        .expect("recall in process");
    for mode in MODES {
        let (served, local) = (&through_server[mode], &in_process[mode]);
        assert_eq!(served.len(), 6, "{mode}");
        for (served, local) in served.iter().zip(local) {
            assert!(!served.refused && !local.refused, "{mode}: {served:?}");
            assert!(!served.ranked.is_empty(), "{mode}: {served:?}");
            assert_eq!(served.ranked, local.ranked, "{mode}");
            assert!(
                served.latency_ms > 0.0,
                "{mode}: timed as the client sees it"
            );
        }
    }
}

/// The same promise through the built binaries: `memory-eval locomo` in process and `--via server`
/// (which starts the built `memory serve --http`) report the same figures of every mode, each naming
/// its door; the worker's model flags are refused with another door before anything is written.
#[test]
fn both_doors_of_memory_eval_locomo_report_the_same_figures() {
    let out = tempfile::tempdir().expect("temporary directory");
    let run = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_memory-eval"))
            .arg("--out")
            .arg(out.path())
            .args(["locomo", "--data"])
            .arg(fixture())
            .args(extra)
            .output()
            .expect("memory-eval runs")
    };
    let refused = run(&["--via", "server", "--model-url", "http://127.0.0.1:9/v1"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("apply to --via worker only"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(
        !out.path().join("locomo").exists(),
        "a refused run writes nothing"
    );
    for extra in [&[][..], &["--via", "server"][..]] {
        let output = run(extra);
        assert!(
            output.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let read = |stem: &str| -> serde_json::Value {
        let path = out.path().join("locomo").join(format!("{stem}.json"));
        serde_json::from_str(&std::fs::read_to_string(&path).expect("the report is written"))
            .expect("the report is JSON")
    };
    let (local, served) = (read("locomo"), read("locomo-via-server"));
    assert_eq!(local["door"], IN_PROCESS);
    assert_eq!(served["door"], THROUGH_SERVER);
    let modes = local["modes"].as_array().expect("modes");
    assert_eq!(modes.len(), MODES.len());
    for (local, served) in modes.iter().zip(served["modes"].as_array().expect("modes")) {
        assert_eq!(local["mode"], served["mode"]);
        assert_eq!(local["all"], served["all"], "{}", local["mode"]);
        assert_eq!(local["refused"], 0, "{}", local["mode"]);
        assert_eq!(served["refused"], 0, "{}", served["mode"]);
    }
}

#[test]
fn the_loader_reads_sessions_dates_and_normalized_evidence() {
    let conversations = conversations();
    assert_eq!(conversations.len(), 2);
    let first = &conversations[0];
    assert_eq!(first.id, "mini-1");
    assert_eq!(
        first.sessions.len(),
        2,
        "a date without turns is no session"
    );
    assert_eq!(first.turns().count(), 9);
    // 2024-03-03T09:05:00Z.
    assert_eq!(first.sessions[0].activity_at, Some(1_709_456_700_000));
    let scored: Vec<_> = first.scored_questions().collect();
    assert_eq!(
        scored.len(),
        4,
        "category 5 and a question without evidence are not scored"
    );
    assert_eq!(scored[2].evidence, ["D1:1", "D2:2"]);
    let second = &conversations[1];
    let pastry = second.scored_questions().nth(1).expect("a second question");
    assert_eq!(pastry.evidence, ["D1:2", "D1:3"], "`D:1:3` is normalized");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lexical_recall_through_the_service_finds_known_evidence() {
    let conversations = conversations();
    let directory = tempfile::tempdir().expect("temporary directory");
    let (store, service) =
        open_service(&directory.path().join("locomo.sqlite"), false).expect("service");
    let summary = ingest(&store, &conversations, &Progress::hidden()).expect("ingest");
    assert_eq!(summary.written, 12);
    let replay = ingest(&store, &conversations, &Progress::hidden()).expect("replay");
    assert_eq!(
        (replay.written, replay.replayed),
        (0, 12),
        "a rerun writes nothing"
    );
    let answers = recall_all(&service, &conversations, &["lexical"], &Progress::hidden())
        .await
        .expect("recall");
    let lexical = &answers["lexical"];
    assert_eq!(lexical.len(), 6);
    assert!(lexical.iter().all(|answer| !answer.refused));
    // "What did Ada name her puppy?": stop words out, "name" and "puppy" do not occur in D1:3, "Ada"
    // is its speaker; the evidence turn is found among the top ten of Ada's turns.
    let puppy = &lexical[0];
    assert!(
        puppy.ranked.contains(&"D1:3".to_owned()),
        "{:?}",
        puppy.ranked
    );
    // "Where did Cyril move for his new job?" is answered from its own conversation only: "D1:1" of
    // mini-2 first (mini-1 has its own "D1:1", about a puppy).
    let work = &lexical[4];
    assert_eq!(work.conversation, 1);
    assert_eq!(work.ranked.first().map(String::as_str), Some("D1:1"));
    // "When did Brook run the half marathon?": evidence D1:4 and D2:1 both say "half marathon".
    let marathon = &lexical[1];
    let scores = question_scores(&marathon.evidence, &marathon.ranked);
    assert_eq!(scores[2], 1.0);
    assert_eq!(
        scores[4], 1.0,
        "both evidence turns in the top ten: share 2/2"
    );
    let all = figures(
        lexical
            .iter()
            .map(|answer| (answer.evidence.as_slice(), answer.ranked.as_slice())),
    );
    assert_eq!(all.questions, 6);
    assert!(all.hit_at_10 > 0.5, "{all:?}");
}

#[test]
fn the_tuning_is_deterministic() {
    let conversations = conversations();
    let directory = tempfile::tempdir().expect("temporary directory");
    let (store, _service) =
        open_service(&directory.path().join("locomo.sqlite"), false).expect("service");
    ingest(&store, &conversations, &Progress::hidden()).expect("ingest");
    let embedder = DeterministicEmbedder::new(64);
    let run = || {
        let report = tune(
            &store,
            &conversations,
            &embedder,
            None,
            None,
            0.0,
            &Progress::hidden(),
        )
        .expect("tuning");
        serde_json::to_string(&report).expect("json")
    };
    let first = run();
    assert_eq!(first, run());
    assert!(first.contains("\"lever\":\"fusion\""), "{first}");
}

#[test]
fn the_product_defaults_are_the_tuned_values() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("locomo-tuned.json");
    let tuned: Tuned =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("the committed choice"))
            .expect("a tuning choice");
    let rules = LexicalRules::default();
    assert_eq!(
        (
            rules.stop_words,
            rules.text_weight,
            rules.speaker_weight,
            rules.k1,
            rules.b
        ),
        (
            tuned.lexical_stop_words,
            tuned.lexical_text_weight,
            tuned.lexical_speaker_weight,
            tuned.lexical_k1,
            tuned.lexical_b
        )
    );
    assert_eq!(tuned.lexical_rm3, None, "the product has no RM3 feedback");
    let hybrid = HybridParams::default();
    assert_eq!(
        (
            hybrid.method,
            hybrid.k,
            hybrid.lexical_weight,
            hybrid.embedding_weight
        ),
        (
            tuned.fusion,
            tuned.rrf_k,
            tuned.lexical_weight,
            tuned.embedding_weight
        )
    );
    assert_eq!(hybrid.lexical_candidates, tuned.lexical_candidates);
    assert_eq!(hybrid.embedding_candidates, tuned.embedding_candidates);
    assert_eq!(
        (hybrid.context_weight, hybrid.context_reach),
        (tuned.context_weight, tuned.context_reach)
    );
    assert_eq!(
        (hybrid.rerank, hybrid.rerank_weights),
        (tuned.rerank, tuned.rerank_weights)
    );
    // The cross-encoder is loaded by default only where the tuning chose it.
    assert_eq!(
        (
            memory_service::semantic::RerankModel::default()
                == memory_service::semantic::RerankModel::On,
            hybrid.cross_rerank_weights
        ),
        (tuned.cross_rerank, tuned.cross_rerank_weights)
    );
    let preprocessing = SemanticProfile::minilm_l6_v2().preprocessing;
    let expected = match tuned.embedded_text {
        eval::locomo::levers::EmbeddedText::Text => Some(Preprocessing::TextOnly),
        eval::locomo::levers::EmbeddedText::SpeakerThenText => Some(Preprocessing::SpeakerThenText),
        _ => None,
    };
    assert_eq!(Some(preprocessing), expected);
}

#[test]
fn the_real_archive_loads_when_present() {
    let archive = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/locomo10.zip");
    if !archive.exists() {
        eprintln!("skipped: {} is not present", archive.display());
        return;
    }
    let conversations = load(&archive).expect("the archive loads");
    assert_eq!(conversations.len(), 10);
    assert_eq!(conversations[0].id, "26", "file order is sorted names");
    let turns: usize = conversations.iter().map(|c| c.turns().count()).sum();
    let questions: usize = conversations
        .iter()
        .map(|c| c.scored_questions().count())
        .sum();
    assert_eq!((turns, questions), (5_882, 1_536));
    let first = conversations[0]
        .scored_questions()
        .next()
        .expect("a question");
    assert_eq!(first.evidence, ["D1:3"]);
    let _ = MODES;
}
