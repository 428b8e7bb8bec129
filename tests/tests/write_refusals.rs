//! Writes that would lose or store nothing are refused through the built binaries: `memory_remember`
//! replaces an existing document only at the revision its caller names (a correction made in
//! between is never overwritten), and empty or whitespace-only text is `invalid-input` on every
//! write path (`memory put`, `memory_put`, `memory import`, `memory_remember`), with nothing written.
//! A thread record that says nothing (a blank speaker or text) is refused at every door that appends
//! (`memory thread append`, `memory_thread_append` over stdio and HTTP, the hook served and
//! one-shot), with nothing appended.

use integration_tests::hook::{assert_silent_failure, run_hook};
use integration_tests::product::{Fixture, McpClient, Outcome, namespace, put};
use integration_tests::serving::{HttpServer, default_flags};
use serde_json::{Value, json};

const BLANKS: [&str; 3] = ["", "   ", "\n\t \u{3000}"];

fn get(id: &str) -> Value {
    json!({"namespace": namespace(), "id": id})
}

#[tokio::test]
async fn memory_remember_replaces_only_the_revision_the_caller_names() {
    let fixture = Fixture::new();
    let session = McpClient::stdio(&fixture, &default_flags(), &[]).await;
    let first = session
        .success(
            "memory_remember",
            json!({"text": "The user prefers green tea.", "id": "tea"}),
        )
        .await;
    let first_revision = first["revision"].clone();
    // A person corrects the memory in between (the precise tool, at the revision they read).
    let mut correction = put("tea", "The user prefers oolong, not green tea.");
    correction["operation_id"] = json!("op-correction");
    correction["expected_revision"] = first_revision.clone();
    let corrected = session.success("memory_put", correction).await;
    let corrected_revision = corrected["revision"].clone();

    // Replacing without an expected revision, or with the stale one, is a conflict that changes
    // nothing: the correction stays.
    let message = session
        .refused(
            "memory_remember",
            json!({"text": "The user prefers black tea.", "id": "tea"}),
            "conflict",
        )
        .await;
    assert!(message.contains("expected_revision"), "{message}");
    session
        .refused(
            "memory_remember",
            json!({"text": "The user prefers black tea.", "id": "tea",
                   "expected_revision": first_revision}),
            "conflict",
        )
        .await;
    let current = session.success("memory_get", get("tea")).await;
    assert_eq!(current["document"]["revision"], corrected_revision);
    assert_eq!(
        current["document"]["content"]["text"],
        "The user prefers oolong, not green tea."
    );

    // With the current revision it replaces it, and a retry of that call replays.
    let replace = json!({"text": "The user prefers black tea.", "id": "tea",
                         "expected_revision": corrected_revision});
    let replaced = session.success("memory_remember", replace.clone()).await;
    assert_eq!(replaced["replayed"], false);
    assert_eq!(replaced["document"]["predecessor"], corrected_revision);
    let again = session.success("memory_remember", replace).await;
    assert_eq!(again["replayed"], true);
    assert_eq!(again["revision"], replaced["revision"]);
    session.close().await;
}

#[tokio::test]
async fn blank_text_is_refused_as_invalid_input_on_every_write_path() {
    let fixture = Fixture::new();
    // The command line.
    for (n, blank) in BLANKS.iter().enumerate() {
        let id = format!("cli-{n}");
        let refused = fixture.call("put", &put(&id, blank));
        assert!(
            refused.refused("invalid-input").contains("content.text"),
            "{refused:#?}"
        );
        assert_eq!(
            fixture.call("get", &get(&id)).success()["document"],
            Value::Null
        );
    }
    // An import: each blank line is refused, the others are written.
    let mut lines: Vec<Value> = BLANKS
        .iter()
        .enumerate()
        .map(|(n, blank)| put(&format!("import-{n}"), blank))
        .collect();
    lines.push(put("kept", "The user keeps a sourdough starter."));
    let imported = fixture.import(&lines);
    assert_eq!(imported.code, 2, "{imported:#?}");
    assert_eq!(imported.json["written"], 1, "{imported:#?}");
    assert_eq!(imported.json["refused"], BLANKS.len(), "{imported:#?}");
    assert_eq!(
        imported.stderr.matches("invalid-input").count(),
        BLANKS.len(),
        "{imported:#?}"
    );

    // The MCP tools.
    let session = McpClient::stdio(&fixture, &default_flags(), &[]).await;
    for (n, blank) in BLANKS.iter().enumerate() {
        session
            .refused(
                "memory_put",
                put(&format!("mcp-{n}"), blank),
                "invalid-input",
            )
            .await;
        session
            .refused("memory_remember", json!({"text": blank}), "invalid-input")
            .await;
        session
            .refused(
                "memory_remember",
                json!({"text": blank, "id": format!("remember-{n}")}),
                "invalid-input",
            )
            .await;
    }
    let listed = session.success("memory_list", json!({"limit": 100})).await;
    let ids: Vec<&str> = listed["documents"]
        .as_array()
        .expect("documents")
        .iter()
        .map(|document| document["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["kept"], "{listed:#}");
    session.close().await;
}

/// `memory thread append ARGUMENT`.
fn append(fixture: &Fixture, argument: &Value) -> Outcome {
    fixture.run(&["thread", "append", &argument.to_string()])
}

/// Thread records that say nothing: a blank speaker, and a blank text of each text-bearing kind.
fn blank_records() -> Vec<Value> {
    let mut records = vec![json!({"speaker": " ", "body": {"kind": "user_input", "text": "Hi."}})];
    for kind in ["user_input", "assistant_message", "system_message"] {
        for blank in BLANKS {
            records.push(json!({"speaker": "ana", "body": {"kind": kind, "text": blank}}));
        }
    }
    records
}

#[tokio::test]
async fn a_blank_thread_record_is_refused_at_every_door_and_appends_nothing() {
    const THREAD: &str = "blank";
    let fixture = Fixture::new();
    // The command line.
    for record in blank_records() {
        let refused = append(
            &fixture,
            &json!({"thread": THREAD, "record": record, "user": "ana"}),
        );
        assert!(
            refused.refused("invalid-input").contains("blank"),
            "{refused:#?}"
        );
    }
    // MCP over stdio, and over HTTP with the hook served beside it.
    let stdio = McpClient::stdio(&fixture, &default_flags(), &[]).await;
    let server = HttpServer::start(&fixture, &default_flags(), &[]);
    let http = McpClient::http(&server.url, None)
        .await
        .expect("the HTTP session opens");
    for client in [&stdio, &http] {
        for record in blank_records() {
            let refused = client
                .refused(
                    "memory_thread_append",
                    json!({"thread": THREAD, "record": record, "user": "ana"}),
                    "invalid-input",
                )
                .await;
            assert!(refused.contains("blank"), "{refused}");
        }
    }
    // The hook, served and then one-shot: a blank prompt is the hook's failure, never a record.
    for no_server in [false, true] {
        for blank in BLANKS {
            let input = json!({"session": THREAD, "prompt": blank}).to_string();
            let mut args = vec![
                "prompt",
                "--format",
                "json",
                "--user",
                "ana",
                "--speaker",
                "ana",
            ];
            if no_server {
                args.push("--no-server");
            }
            let outcome = run_hook(&fixture, &args, &input, &[]);
            assert!(
                assert_silent_failure(&outcome).contains("blank"),
                "{outcome:#?}"
            );
        }
    }
    stdio.close().await;
    http.close().await;
    drop(server);
    // Nothing was appended: the thread's first record is the next one that says something.
    let appended = append(
        &fixture,
        &json!({"thread": THREAD, "user": "ana",
                "record": {"speaker": "ana", "body": {"kind": "user_input", "text": "Hi."}}}),
    );
    let appended = appended.success();
    assert_eq!(appended["sequence"], 1, "{appended:#}");
}
