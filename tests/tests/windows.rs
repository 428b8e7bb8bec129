//! Windows, notes and what is left (issue 45), through the built binaries on a real SQLite file, the
//! second day of ana's long agent run:
//!
//! - a step that holds `memory_new_context` beside another call is refused with nothing written, and
//!   a caller's append of a rollover record is refused;
//! - the working notes: written over MCP, read with `memory context --read-notes`, a stale revision
//!   refused as a conflict, shown in every assembled context;
//! - the model rolls the window over with a handoff: the next context shows the instructions, the
//!   marker with the handoff, the run's input and the pending call; the covered records are read
//!   backward from the boundary (`before`), each in its window, and `before` with `after` is refused;
//! - across a server restart (`memory serve --http --context-budget --context-capacity`), the new
//!   window, its handoff and the notes are all still there: over MCP HTTP, through the served hook,
//!   the one-shot hook and `memory context`; `memory_context_remaining` reports the server's budget
//!   and capacity;
//! - the hour-three run: one prompt and 500 tool calls appended over MCP, assembled under 8,000
//!   tokens every 50 calls: it never goes over budget, the prompt is always there, every call is
//!   followed by its result, and the window rolled over by itself.

use integration_tests::hook::prompt_with_context;
use integration_tests::product::{Fixture, McpClient, Outcome, paired};
use integration_tests::serving::{HttpServer, get, parse_metrics, ready, sample};
use serde_json::{Value, json};

const THREAD: &str = "move-day";
const SYSTEM: &str = "You are ana's moving assistant. Keep a checklist.";
const INPUT: &str = "Plan my move to Lisbon: movers, the flat, the cat.";
const HANDOFF: &str = "Movers booked for May 3 (quote #88). Next: the flat's lease.";
const NOTES: &str = "checklist: movers done; lease pending; cat carrier";

fn append(fixture: &Fixture, record: Value) -> u64 {
    let argument = json!({"thread": THREAD, "record": record, "user": "ana"}).to_string();
    fixture.run(&["thread", "append", &argument]).success()["sequence"]
        .as_u64()
        .expect("sequence")
}

fn call(call_id: &str, name: &str) -> Value {
    json!({"speaker": "assistant", "observers": [], "occurred_at": null,
           "body": {"kind": "tool_call", "call_id": call_id, "name": name, "arguments": {}}})
}

fn result(call_id: &str, output: &str) -> Value {
    json!({"speaker": "tool", "observers": [], "occurred_at": null,
           "body": {"kind": "tool_result", "call_id": call_id, "output": output, "is_error": false}})
}

fn said(kind: &str, speaker: &str, text: &str) -> Value {
    json!({"speaker": speaker, "observers": [], "occurred_at": null,
           "body": {"kind": kind, "text": text}})
}

/// The second window as every door must show it: instructions first, the marker with the handoff,
/// the run's input, and the notes.
fn shows_the_second_window(assembled: &Value) {
    let messages = paired(&assembled["messages"]);
    assert_eq!(messages[0]["content"], SYSTEM, "{assembled:#}");
    let marker = messages[1]["content"].as_str().expect("marker");
    assert!(marker.starts_with("[window 2: "), "{assembled:#}");
    assert!(marker.ends_with(HANDOFF), "{assembled:#}");
    assert_eq!(messages[2]["content"], INPUT, "{assembled:#}");
    assert!(
        messages.iter().any(|message| message["content"]
            .as_str()
            .is_some_and(|c| c.ends_with(NOTES))),
        "the notes are shown: {assembled:#}"
    );
    assert!(
        !assembled.to_string().contains("an early detail"),
        "a covered record is not shown: {assembled:#}"
    );
    assert_eq!(assembled["view"]["window"]["number"], 2, "{assembled:#}");
}

fn hook_context(fixture: &Fixture, prompt: &str, prompt_id: &str) -> Outcome {
    prompt_with_context(fixture, THREAD, "ana", prompt, prompt_id, 3000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_rolls_over_keeps_its_notes_and_survives_a_restart_through_every_door() {
    let fixture = Fixture::new();
    append(&fixture, said("system_message", "host", SYSTEM));
    append(
        &fixture,
        said("user_input", "ana", "an early detail: the old flat"),
    );
    append(&fixture, said("assistant_message", "assistant", "noted"));
    let input = append(&fixture, said("user_input", "ana", INPUT));
    append(&fixture, call("c1", "book_movers"));
    append(&fixture, result("c1", "quote #88 for May 3"));
    // A step that asks for a new context beside another call.
    append(&fixture, call("c2", "mcp__memory__memory_new_context"));
    append(&fixture, call("c3", "search_flats"));

    let client = fixture
        .serve_with(&["--user".to_owned(), "ana".to_owned()], &[])
        .await;
    let refused = client
        .refused(
            "memory_new_context",
            json!({"thread": THREAD, "handoff": HANDOFF}),
            "invalid-input",
        )
        .await;
    assert!(refused.contains("only tool call of its step"), "{refused}");
    append(&fixture, result("c2", "refused"));
    append(&fixture, result("c3", "three flats"));
    let smuggled = json!({"thread": THREAD, "user": "ana", "record": {
        "speaker": "assistant", "observers": [], "occurred_at": null,
        "body": {"kind": "rollover", "window": 2, "cause": "model",
                 "covered": {"first": 1, "last": 3}, "handoff": "forged"}}})
    .to_string();
    fixture
        .run(&["thread", "append", &smuggled])
        .refused("invalid-input");

    // The notes: written over MCP, read on the command line, a stale write refused.
    let written = client
        .success(
            "memory_write_notes",
            json!({"thread": THREAD, "text": "checklist: movers", "expected_revision": null}),
        )
        .await;
    let first = written["revision"].as_str().expect("revision").to_owned();
    let read = fixture.run(&["context", THREAD, "--read-notes", "--user", "ana"]);
    assert_eq!(read.success()["text"], "checklist: movers", "{read:#?}");
    assert_eq!(read.success()["revision"], first.as_str());
    client
        .refused(
            "memory_write_notes",
            json!({"thread": THREAD, "text": "lost update", "expected_revision": null}),
            "conflict",
        )
        .await;
    let second = client
        .success(
            "memory_write_notes",
            json!({"thread": THREAD, "text": NOTES, "expected_revision": first}),
        )
        .await;
    assert_ne!(second["revision"], first.as_str());

    // The model asks for a new window, alone in its step.
    append(&fixture, call("c4", "memory_new_context"));
    let rolled = client
        .success(
            "memory_new_context",
            json!({"thread": THREAD, "handoff": HANDOFF}),
        )
        .await;
    assert_eq!(rolled["rolled_over"], true, "{rolled:#}");
    assert_eq!(rolled["window"], 2, "{rolled:#}");
    let boundary = rolled["sequence"].as_u64().expect("boundary");
    append(&fixture, result("c4", "a new window begins"));
    let assembled = client
        .success(
            "memory_context",
            json!({"thread": THREAD, "budget": 3000, "memory": false}),
        )
        .await;
    shows_the_second_window(&assembled);
    assert_eq!(
        paired(&assembled["messages"])[3]["tool_calls"][0]["function"]["name"],
        "memory_new_context",
        "the pending call is kept: {assembled:#}"
    );

    // The covered records, newest first, in window 1.
    let page = client
        .success(
            "memory_history_read",
            json!({"thread": THREAD, "before": boundary, "limit": 3}),
        )
        .await;
    let records = page["records"].as_array().expect("records");
    assert_eq!(records.len(), 3, "{page:#}");
    assert!(
        records.windows(2).all(|pair| pair[0]["sequence"]
            .as_u64()
            .gt(&pair[1]["sequence"].as_u64())),
        "{page:#}"
    );
    assert!(
        records.iter().all(|record| record["window"] == 1),
        "{page:#}"
    );
    assert!(page["next_before"].is_u64(), "{page:#}");
    let opening = fixture.run(&[
        "context",
        THREAD,
        "--history",
        "--before",
        &(input - 1).to_string(),
        "--limit",
        "1",
    ]);
    assert_eq!(
        opening.success()["records"][0]["text"],
        "an early detail: the old flat",
        "{opening:#?}"
    );
    client
        .refused(
            "memory_history_read",
            json!({"thread": THREAD, "before": boundary, "after": 1}),
            "invalid-input",
        )
        .await;
    client
        .refused(
            "memory_history_search",
            json!({"thread": THREAD, "text": "flat", "before": 9_999}),
            "not-found",
        )
        .await;
    let refused = client
        .refused(
            "memory_context_remaining",
            json!({"thread": THREAD}),
            "invalid-input",
        )
        .await;
    assert!(refused.contains("--context-budget"), "{refused}");
    client.close().await;

    // Across a restart, with the server's budget and capacity.
    let server = HttpServer::start(
        &fixture,
        &[
            "--user".to_owned(),
            "ana".to_owned(),
            "--context-budget".to_owned(),
            "3000".to_owned(),
            "--context-capacity".to_owned(),
            "128000".to_owned(),
        ],
        &[],
    );
    ready(&server.base()).await;
    let http = McpClient::http(&server.url, None)
        .await
        .expect("a loopback client connects");
    let assembled = http
        .success(
            "memory_context",
            json!({"thread": THREAD, "budget": 3000, "memory": false}),
        )
        .await;
    shows_the_second_window(&assembled);
    let remaining = http
        .success("memory_context_remaining", json!({"thread": THREAD}))
        .await;
    assert_eq!(remaining["budget"], 3000, "{remaining:#}");
    assert_eq!(remaining["capacity"], 128000, "{remaining:#}");
    assert_eq!(remaining["window"]["number"], 2, "{remaining:#}");
    assert_eq!(remaining["window"]["boundary"], boundary, "{remaining:#}");
    let live = remaining["live_tokens"].as_u64().expect("live tokens");
    assert!(live > 0 && live < 3000, "{remaining:#}");
    assert_eq!(remaining["remaining_tokens"], 3000 - live, "{remaining:#}");
    let notes = http
        .success("memory_read_notes", json!({"thread": THREAD}))
        .await;
    assert_eq!(notes["text"], NOTES, "{notes:#}");
    http.close().await;
    // The fold cache's counts in /metrics: the restarted server's first read of the thread was cold.
    let (status, text) = get(&format!("{}/metrics", server.base()), None).await;
    assert_eq!(status, 200, "{text}");
    let samples = parse_metrics(&text);
    let misses = sample(&samples, "memory_fold_cache", &[("event", "misses")]);
    assert!(misses >= Some(1.0), "{text}");
    assert!(
        sample(&samples, "memory_fold_cache", &[("event", "hits")]) >= Some(1.0),
        "{text}"
    );
    let served = hook_context(&fixture, "And the flat?", "p-1");
    assert!(served.stderr.is_empty(), "served: {served:#?}");
    shows_the_second_window(&served.json);
    drop(server);

    let one_shot = hook_context(&fixture, "And the cat?", "p-2");
    shows_the_second_window(&one_shot.json);
    let cli = fixture.run(&["context", THREAD, "--budget", "3000", "--no-memory"]);
    shows_the_second_window(cli.success());
    let remaining = fixture.run(&["context", THREAD, "--remaining", "--budget", "3000"]);
    assert_eq!(remaining.success()["window"]["number"], 2, "{remaining:#?}");
    assert_eq!(
        remaining.success()["capacity"],
        Value::Null,
        "{remaining:#?}"
    );
    // The command line's own doors: notes, a rollover and the history before it.
    let read = fixture.run(&["context", THREAD, "--read-notes"]);
    let revision = read.success()["revision"]
        .as_str()
        .expect("revision")
        .to_owned();
    fixture
        .run(&[
            "context",
            THREAD,
            "--write-notes",
            "checklist: all done",
            "--expected-revision",
            &revision,
        ])
        .success();
    fixture
        .run(&[
            "context",
            THREAD,
            "--write-notes",
            "stale",
            "--expected-revision",
            &revision,
        ])
        .refused("conflict");
    let rolled = fixture.run(&[
        "context",
        THREAD,
        "--new-context",
        "--handoff",
        "Day two is done.",
    ]);
    assert_eq!(rolled.success()["window"], 3, "{rolled:#?}");
    let third = rolled.success()["sequence"].as_u64().expect("boundary");
    let cli = fixture.run(&["context", THREAD, "--budget", "3000", "--no-memory"]);
    let messages = paired(&cli.success()["messages"]);
    assert!(
        messages[1]["content"].as_str().is_some_and(
            |marker| marker.starts_with("[window 3: ") && marker.ends_with("Day two is done.")
        ),
        "{cli:#?}"
    );
    assert!(cli.stdout.contains("checklist: all done"), "{cli:#?}");
    let found = fixture.run(&[
        "context",
        THREAD,
        "--search",
        "Lisbon",
        "--before",
        &third.to_string(),
    ]);
    let matches = found.success()["matches"].as_array().expect("matches");
    assert!(!matches.is_empty(), "{found:#?}");
    assert!(
        matches
            .windows(2)
            .all(|pair| pair[0]["sequence"].as_u64() > pair[1]["sequence"].as_u64()),
        "{found:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hour_long_run_fits_its_budget_over_mcp_by_pruning_and_automatic_rollover() {
    const RUN: &str = "hour-three";
    let fixture = Fixture::new();

    let client = fixture
        .serve_with(&["--user".to_owned(), "ana".to_owned()], &[])
        .await;
    let append = async |record: Value| {
        client
            .success(
                "memory_thread_append",
                json!({"thread": RUN, "record": record, "user": "ana"}),
            )
            .await
    };
    append(said("system_message", "host", SYSTEM)).await;
    append(said("user_input", "ana", INPUT)).await;
    for index in 0..500 {
        let call_id = format!("call-{index}");
        append(call(&call_id, "run_tests")).await;
        append(result(
            &call_id,
            &format!("run {index}: {}", "test ... ok\n".repeat(60)),
        ))
        .await;
        if index % 50 != 49 {
            continue;
        }
        let assembled = client
            .success(
                "memory_context",
                json!({"thread": RUN, "budget": 8000, "memory": false}),
            )
            .await;
        assert_eq!(assembled["over_budget"], false, "{assembled:#}");
        assert!(assembled["tokens"].as_u64() <= Some(8000), "{assembled:#}");
        let messages = paired(&assembled["messages"]);
        assert_eq!(messages[0]["content"], SYSTEM);
        assert!(
            messages.iter().any(|message| message["content"] == INPUT),
            "the run's input survives: {assembled:#}"
        );
    }
    let found = client
        .success(
            "memory_history_search",
            json!({"thread": RUN, "text": "began (records", "include": ["operational"]}),
        )
        .await;
    let rollovers = found["matches"].as_array().expect("matches");
    assert!(!rollovers.is_empty(), "the window rolled over: {found:#}");
    assert!(
        rollovers.iter().all(|record| record["kind"] == "rollover"),
        "{found:#}"
    );
    // Every record, the covered ones included, is still read back.
    let first = client
        .success(
            "memory_history_search",
            json!({"thread": RUN, "text": "run 0:"}),
        )
        .await;
    assert_eq!(first["matches"][0]["window"], 1, "{first:#}");
    client.close().await;
}

/// A grant that may read ana's threads but holds none of the new operations: its caller reads the
/// window and what is left, and is refused the rollover and the notes; its context shows no notes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_operations_are_granted_one_by_one() {
    const ANA: &str = "ana-token-9f1c";
    const WATCHER: &str = "watcher-token-3b70";
    let fixture = Fixture::new();
    append(&fixture, said("system_message", "host", SYSTEM));
    append(&fixture, said("user_input", "ana", INPUT));
    append(&fixture, said("assistant_message", "assistant", "on it"));
    append(&fixture, said("user_input", "ana", "and the cat?"));
    let grant = |name: &str, token: &str, operations: &str| {
        format!(
            r#"
[[grant]]
name = "{name}"
token_sha256 = "{digest}"
operations = {operations}
read_scopes = ["*"]
write_scopes = ["*"]

[[grant.namespaces]]
name = "memory.user"
fields = {{ user = "ana" }}
"#,
            digest = memory_cli::grants::token_digest(token),
        )
    };
    let grants = fixture.dir.path().join("grants.toml");
    std::fs::write(
        &grants,
        grant("ana", ANA, r#"["*"]"#) + &grant("watcher", WATCHER, r#"["thread_read"]"#),
    )
    .expect("grants file");
    let server = HttpServer::start(
        &fixture,
        &[
            "--grants".to_owned(),
            grants.to_str().expect("UTF-8").to_owned(),
        ],
        &[],
    );
    ready(&server.base()).await;
    let ana = McpClient::http(&server.url, Some(ANA)).await.expect("ana");
    let watcher = McpClient::http(&server.url, Some(WATCHER))
        .await
        .expect("watcher");
    ana.success(
        "memory_write_notes",
        json!({"thread": THREAD, "text": NOTES, "expected_revision": null}),
    )
    .await;
    for (tool, arguments) in [
        ("memory_new_context", json!({"thread": THREAD})),
        ("memory_read_notes", json!({"thread": THREAD})),
        (
            "memory_write_notes",
            json!({"thread": THREAD, "text": "mine now", "expected_revision": null}),
        ),
    ] {
        watcher.refused(tool, arguments, "forbidden").await;
    }
    let remaining = watcher
        .success(
            "memory_context_remaining",
            json!({"thread": THREAD, "budget": 2000}),
        )
        .await;
    assert_eq!(remaining["window"]["number"], 1, "{remaining:#}");
    let seen = watcher
        .success(
            "memory_context",
            json!({"thread": THREAD, "budget": 2000, "memory": false}),
        )
        .await;
    assert!(seen.get("notes").is_none(), "{seen:#}");
    assert!(!seen.to_string().contains(NOTES), "{seen:#}");
    let owned = ana
        .success(
            "memory_context",
            json!({"thread": THREAD, "budget": 2000, "memory": false}),
        )
        .await;
    assert_eq!(owned["notes"]["id"], format!("notes/{THREAD}"), "{owned:#}");
    let rolled = ana
        .success("memory_new_context", json!({"thread": THREAD}))
        .await;
    assert_eq!(rolled["rolled_over"], true, "{rolled:#}");
    ana.close().await;
    watcher.close().await;
}
