//! The served and the one-shot `memory hook` over the same sessions (issue 42, item 3): a user states
//! facts through the prompt hook of a running `memory serve --http`, the remembering worker runs
//! between prompts, and each question is asked of the server right after the worker's pass, then of
//! the database one-shot (`--no-server`) after a `memory_sync` through the server. Both must cite the same passages with
//! the same `answered_by`, and the served answer must hold the fact just remembered: a served recall
//! answering from an index behind the store (what the worker wrote in another process) answered
//! nothing while the one-shot hook, which catches up, answered. Sessions start with a session-start
//! hook or without one. Every empty answer is logged with why.
//!
//! Scale: a few rounds by default (tens of hook runs); `MEMORY_TEST_SCALE=large` runs hundreds.

use std::ffi::OsStr;

use integration_tests::hook::run_hook;
use integration_tests::product::{Fixture, McpClient, Outcome};
use integration_tests::serving::{HttpServer, wait_until_ready};
use serde_json::{Value, json};

/// Facts stated and questions that ask for them in other words (so the embedding side, which
/// follows the store in the server, must hold the fact for it to be cited first).
const FACTS: &[(&str, &str, &str)] = &[
    (
        "I am allergic to peanuts and shellfish.",
        "Any food allergies I should keep in mind for dinner?",
        "peanuts",
    ),
    (
        "My daughter Lena is vegetarian.",
        "Does anyone in the family avoid eating meat?",
        "vegetarian",
    ),
    (
        "We live in a flat in Lisbon near the river.",
        "Which city is our home in?",
        "Lisbon",
    ),
    (
        "I play the cello in a community orchestra.",
        "What musical instrument do I practise?",
        "cello",
    ),
    (
        "My brother Tomas works as a firefighter in Porto.",
        "What is my sibling's job?",
        "firefighter",
    ),
    (
        "Our dog Biscuit is afraid of thunderstorms.",
        "Which pet gets scared during bad weather?",
        "Biscuit",
    ),
    (
        "I run a half marathon every October.",
        "Which races do I train for each autumn?",
        "marathon",
    ),
    (
        "My grandmother taught me to bake sourdough bread.",
        "Who showed me how to make loaves?",
        "sourdough",
    ),
];

fn rounds() -> usize {
    match std::env::var("MEMORY_TEST_SCALE").as_deref() {
        Ok("large") => 120,
        _ => FACTS.len(),
    }
}

/// One hook in the generic form for user `ana`; `served: false` answers one-shot.
fn hook(
    fixture: &Fixture,
    event: &str,
    session: &str,
    prompt: Option<&str>,
    served: bool,
) -> Value {
    let mut input = json!({"event": event, "session": session});
    if let Some(prompt) = prompt {
        input["prompt"] = prompt.into();
    }
    let mut args = vec![
        event,
        "--format",
        "json",
        "--user",
        "ana",
        "--speaker",
        "ana",
        "--timeout-ms",
        "60000",
    ];
    if !served {
        args.push("--no-server");
    }
    let no_user: [(&str, &OsStr); 0] = [];
    let outcome: Outcome = run_hook(fixture, &args, &input.to_string(), &no_user);
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    assert!(
        outcome.json.is_object(),
        "the hook answered (served: {served}): {outcome:#?}"
    );
    outcome.json
}

/// What a recall answer is compared on: each passage's document, passage and text, in citation
/// order, and the index that answered.
fn cited(answer: &Value) -> (Vec<(String, String, String)>, Value) {
    let passages = answer["passages"]
        .as_array()
        .map(|passages| {
            passages
                .iter()
                .map(|passage| {
                    (
                        passage["source"]["id"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        passage["passage_id"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        passage["content"]["text"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (passages, answer["answered_by"].clone())
}

fn hook_errors(fixture: &Fixture) -> Value {
    let status = fixture.run(&["status"]);
    assert_eq!(status.code, 0, "{status:#?}");
    status.json["hooks"]["errors"].clone()
}

#[test]
fn the_served_and_the_one_shot_hook_cite_the_same_passages_with_the_worker_running_between() {
    let fixture = Fixture::new();
    // The server holds the grant of the user whose hooks it serves (the host picks the tenant).
    let server = HttpServer::start(&fixture, &["--user".to_owned(), "ana".to_owned()], &[]);
    wait_until_ready(&server.base());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");

    // Nothing is remembered yet: the served answer is empty, and says why in the log.
    let empty = hook(
        &fixture,
        "prompt",
        "stress-empty",
        Some("Hello, how are you?"),
        true,
    );
    assert_eq!(empty["context"], "", "{empty}");
    let errors = hook_errors(&fixture);
    let no_match = &errors["by_kind"]["no-match"];
    assert_eq!(no_match["count"], 1, "{errors}");
    let message = no_match["last"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("served"), "{message}");
    assert!(message.contains("store's head"), "{message}");

    for round in 0..rounds() {
        let (fact, question, expected) = FACTS[round % FACTS.len()];
        // Two rounds per session; every other session begins with a session-start hook.
        let session = format!("stress-{}", round / 2);
        if round % 4 == 0 {
            let served = cited(&hook(&fixture, "session-start", &session, None, true));
            let one_shot = cited(&hook(&fixture, "session-start", &session, None, false));
            assert_eq!(served, one_shot, "round {round}: session-start");
        }
        hook(&fixture, "prompt", &session, Some(fact), true);
        fixture.worker_pass();
        // Right after the worker's pass: the server must answer from an index holding it.
        let served_answer = hook(&fixture, "prompt", &session, Some(question), true);
        let served = cited(&served_answer);
        assert!(
            served.0.iter().any(|(_, _, text)| text.contains(expected)),
            "round {round}: the served hook misses what the worker just remembered: {served_answer}"
        );
        // A sync through the server: it saves the server's graph, which the one-shot hook then
        // loads (one-shot hooks never build one), so both answer from an HNSW graph.
        runtime.block_on(async {
            let client = McpClient::http(&server.url, None)
                .await
                .expect("an MCP session");
            client.success("memory_sync", json!({})).await;
            client.close().await;
        });
        let one_shot_answer = hook(&fixture, "prompt", &session, Some(question), false);
        assert_eq!(
            one_shot_answer["already_recorded"], 1,
            "the question was appended once: {one_shot_answer}"
        );
        assert_eq!(
            served,
            cited(&one_shot_answer),
            "round {round}: served {served_answer}\none-shot {one_shot_answer}"
        );
    }
    // No hook failed; only empty answers (the first prompt's) are in the log.
    let errors = hook_errors(&fixture);
    let kinds: Vec<&String> = errors["by_kind"]
        .as_object()
        .map(|kinds| kinds.keys().collect())
        .unwrap_or_default();
    assert_eq!(kinds, ["no-match"], "{errors}");
    drop(server);
}
