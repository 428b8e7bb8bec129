//! A forgotten thread record is never shown again, anywhere (issue 42, item 1), through the built
//! binaries on a real SQLite file: ana says her PIN and password, two more records follow, the
//! assistant stores it with a tool call, and the window is compacted with a summary that repeats the
//! PIN. Then `memory thread forget` of the statement and of the tool's result:
//!
//! - `memory context --no-memory` (one-shot), MCP `memory_context`, `memory_history_read`,
//!   `memory_history_search` (stdio) and the hook's `--context-budget` show a placeholder
//!   `{"forgotten": true, "sequence", "forgotten_at"}` where each was, the tool call still followed by
//!   its (placeholder) result, and never the PIN or the password;
//! - the summary that folded the statement is withdrawn (`summary_withdrawn`), its records shown again,
//!   its text nowhere; a new plan hands the summarizer placeholders only; a commit from the plan made
//!   before the forget is refused (`conflict`); a new compaction applies;
//! - a retried turn after the forget recalls again instead of replaying its snapshot;
//! - the history tools leave out system instructions and operational records unless asked.
//!
//! The log itself stays append-only: every record is still there.

use integration_tests::hook::prompt_with_context;
use integration_tests::product::{Fixture, McpClient, Outcome, paired};
use integration_tests::serving::{HttpServer, ready};
use serde_json::{Value, json};

const THREAD: &str = "t1";
const SECRET: &str = "My bank PIN is K-4417 and my password is hunter2.";

fn append(fixture: &Fixture, record: Value) -> u64 {
    let argument = json!({"thread": THREAD, "record": record, "user": "ana"}).to_string();
    let outcome = fixture.run(&["thread", "append", &argument]);
    outcome.success()["sequence"].as_u64().expect("sequence")
}

fn forget(fixture: &Fixture, sequence: u64) {
    let argument =
        json!({"thread": THREAD, "sequence": sequence, "reason": "the user asked"}).to_string();
    fixture.run(&["thread", "forget", &argument]).success();
}

/// Whether `value`, as JSON text, says the PIN, the password or the summary that repeated them.
fn leaks(value: &Value) -> bool {
    let text = value.to_string();
    text.contains("K-4417") || text.contains("hunter2")
}

fn placeholder(content: &Value, sequence: u64) {
    let parsed: Value =
        serde_json::from_str(content.as_str().expect("text content")).expect("a JSON placeholder");
    assert_eq!(parsed["forgotten"], true, "{parsed:#}");
    assert_eq!(parsed["sequence"], sequence, "{parsed:#}");
    assert!(parsed["forgotten_at"].as_i64().is_some(), "{parsed:#}");
}

async fn compact(client: &McpClient, forgotten: Value, summary: &str, through: u64) -> Value {
    client
        .success(
            "memory_compact",
            json!({
                "thread": THREAD,
                "measured_input_tokens": 9_000,
                "keep_tokens": 0,
                "summary": summary,
                "through": through,
                "forgotten": forgotten,
            }),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_record_is_never_shown_again_in_any_view_tool_or_summary() {
    let fixture = Fixture::new();
    let system = append(
        &fixture,
        json!({"speaker": "host", "body": {"kind": "system_message", "text": "You are a careful assistant."}}),
    );
    let secret = append(
        &fixture,
        json!({"speaker": "ana", "body": {"kind": "user_input", "text": SECRET}}),
    );
    let call = append(
        &fixture,
        json!({"speaker": "assistant", "body": {"kind": "tool_call", "call_id": "c1", "name": "vault_store", "arguments": {"item": "credentials"}}}),
    );
    let result = append(
        &fixture,
        json!({"speaker": "vault_store", "body": {"kind": "tool_result", "call_id": "c1", "output": "stored PIN K-4417", "is_error": false}}),
    );
    append(
        &fixture,
        json!({"speaker": "assistant", "body": {"kind": "assistant_message", "text": "Stored safely."}}),
    );
    append(
        &fixture,
        json!({"speaker": "ana", "body": {"kind": "user_input", "text": "What is the weather like in Lisbon?"}}),
    );
    fixture.worker_pass();
    let context = || fixture.run(&["context", THREAD, "--budget", "2000", "--no-memory"]);
    assert!(
        leaks(context().success()),
        "the secret is shown before the forget"
    );

    // A compaction whose summary repeats the PIN, and a plan made before the forget.
    let client = fixture.serve().await;
    let plan = client
        .success(
            "memory_compact",
            json!({"thread": THREAD, "measured_input_tokens": 9_000, "keep_tokens": 0}),
        )
        .await["plan"]
        .clone();
    assert!(leaks(&plan["messages"]));
    let through = plan["through"].as_u64().expect("through");
    let folded = compact(&client, json!([]), "Ana's PIN is K-4417; stored.", through).await;
    assert_eq!(folded["compaction"]["outcome"], "folded", "{folded:#}");
    let summary_at = folded["sequence"].as_u64().expect("sequence");
    append(
        &fixture,
        json!({"speaker": "assistant", "body": {"kind": "assistant_message", "text": "It is sunny."}}),
    );
    let last = append(
        &fixture,
        json!({"speaker": "ana", "body": {"kind": "user_input", "text": "Thanks! And tomorrow?"}}),
    );
    let before = client
        .success(
            "memory_context",
            json!({"thread": THREAD, "budget": 2000, "memory": false}),
        )
        .await;
    assert!(
        before["messages"][1]["content"]
            .as_str()
            .is_some_and(|frame| frame.contains("K-4417"))
    );
    let old_plan = client
        .success(
            "memory_compact",
            json!({"thread": THREAD, "measured_input_tokens": 9_000, "keep_tokens": 0}),
        )
        .await["plan"]
        .clone();
    // A retried turn reuses its snapshot...
    let turn = json!({"thread": THREAD, "budget": 2000});
    let first = client.success("memory_context", turn.clone()).await;
    assert_eq!(first["memory"]["reused"], false, "{first:#}");
    let retried = client.success("memory_context", turn.clone()).await;
    assert_eq!(retried["memory"]["reused"], true, "{retried:#}");

    forget(&fixture, secret);
    forget(&fixture, result);

    // ...and after a forget recalls again.
    let after_forget = client.success("memory_context", turn.clone()).await;
    assert_eq!(after_forget["memory"]["reused"], false, "{after_forget:#}");
    assert!(!leaks(&after_forget), "{after_forget:#}");

    // The one-shot context: placeholders, the call paired with its placeholder result, no summary.
    let one_shot = context();
    let one_shot = one_shot.success();
    assert!(!leaks(one_shot), "{one_shot:#}");
    assert_eq!(one_shot["view"]["summary_withdrawn"], json!([summary_at]));
    let messages = paired(&one_shot["messages"]);
    assert_eq!(messages[0]["content"], "You are a careful assistant.");
    placeholder(&messages[1]["content"], secret);
    assert_eq!(messages[2]["tool_calls"][0]["id"], "c1");
    assert_eq!(messages[3]["tool_call_id"], "c1");
    placeholder(&messages[3]["content"], result);
    assert!(
        messages.iter().all(|message| !message["content"]
            .as_str()
            .unwrap_or("")
            .starts_with("[compacted")),
        "the withdrawn summary is not shown"
    );

    // MCP: the context, the history tools.
    let served = client
        .success(
            "memory_context",
            json!({"thread": THREAD, "budget": 2000, "memory": false}),
        )
        .await;
    assert!(!leaks(&served), "{served:#}");
    assert_eq!(served["messages"], one_shot["messages"]);
    assert_eq!(served["view"]["summary_withdrawn"], json!([summary_at]));
    let page = client
        .success("memory_history_read", json!({"thread": THREAD}))
        .await;
    assert!(!leaks(&page), "{page:#}");
    let records = page["records"].as_array().expect("records");
    assert_ne!(
        records[0]["sequence"], system,
        "system instructions are left out"
    );
    assert_eq!(records[0]["sequence"], secret);
    assert_eq!(records[0]["forgotten"], true);
    placeholder(&records[0]["text"], secret);
    assert!(records.iter().all(|record| record["kind"] != "compaction"));
    let everything = client
        .success(
            "memory_history_read",
            json!({"thread": THREAD, "include": ["system", "operational"]}),
        )
        .await;
    assert!(!leaks(&everything), "{everything:#}");
    let all = everything["records"].as_array().expect("records");
    assert_eq!(all[0]["kind"], "system_message");
    let compaction = all
        .iter()
        .find(|record| record["sequence"] == summary_at)
        .expect("the compaction record");
    assert_eq!(compaction["summary_withdrawn"], true, "{compaction:#}");
    assert_eq!(all.len() as u64, last, "every record is still in the log");
    let call_record = all
        .iter()
        .find(|record| record["sequence"] == call)
        .expect("the call");
    assert_eq!(call_record["call_id"], "c1");
    for text in ["K-4417", "hunter2", "PIN"] {
        let found = client
            .success(
                "memory_history_search",
                json!({"thread": THREAD, "text": text, "include": ["system", "operational"]}),
            )
            .await;
        assert_eq!(found["matches"], json!([]), "{text}: {found:#}");
    }
    let weather = client
        .success(
            "memory_history_search",
            json!({"thread": THREAD, "text": "weather"}),
        )
        .await;
    assert_eq!(weather["matches"].as_array().map(Vec::len), Some(1));
    let instructions = client
        .success(
            "memory_history_search",
            json!({"thread": THREAD, "text": "careful"}),
        )
        .await;
    assert_eq!(instructions["matches"], json!([]), "left out unless asked");

    // A commit from the plan made before the forget is refused; a new plan shows placeholders only.
    let old_through = old_plan["through"].as_u64().expect("through");
    client
        .refused(
            "memory_compact",
            json!({
                "thread": THREAD,
                "measured_input_tokens": 9_000,
                "keep_tokens": 0,
                "summary": "Ana's PIN is K-4417.",
                "through": old_through,
            }),
            "conflict",
        )
        .await;
    let plan = client
        .success(
            "memory_compact",
            json!({"thread": THREAD, "measured_input_tokens": 9_000, "keep_tokens": 0}),
        )
        .await["plan"]
        .clone();
    assert!(!leaks(&plan), "{plan:#}");
    assert_eq!(plan["forgotten"], json!([secret, result]));
    let again = compact(
        &client,
        plan["forgotten"].clone(),
        "Ana stored something; then asked about the weather.",
        plan["through"].as_u64().expect("through"),
    )
    .await;
    assert_eq!(again["compaction"]["outcome"], "folded", "{again:#}");
    let compacted = client
        .success(
            "memory_context",
            json!({"thread": THREAD, "budget": 2000, "memory": false}),
        )
        .await;
    assert!(!leaks(&compacted), "{compacted:#}");
    assert!(
        compacted["view"].get("summary_withdrawn").is_none(),
        "{compacted:#}"
    );
    client.close().await;

    // The hook's assembled context (one-shot).
    let hooked = hook_context(&fixture, "And the day after?", "p-1");
    assert_eq!(hooked.code, 0, "{hooked:#?}");
    assert!(hooked.json["messages"].is_array(), "{hooked:#?}");
    assert!(!leaks(&hooked.json), "{hooked:#?}");

    // The same through `memory serve --http` (ana's server, the README's daily setup): MCP over HTTP
    // and the hook served through it show the placeholders, never the words.
    let server = HttpServer::start(&fixture, &["--user".to_owned(), "ana".to_owned()], &[]);
    ready(&server.base()).await;
    let http = McpClient::http(&server.url, None)
        .await
        .expect("a loopback client connects");
    for (tool, arguments) in [
        (
            "memory_context",
            json!({"thread": THREAD, "budget": 2000, "memory": false}),
        ),
        (
            "memory_history_read",
            json!({"thread": THREAD, "include": ["system", "operational"]}),
        ),
        (
            "memory_history_search",
            json!({"thread": THREAD, "text": "K-4417"}),
        ),
    ] {
        let answer = http.success(tool, arguments).await;
        assert!(!leaks(&answer), "{tool}: {answer:#}");
    }
    let found = http
        .success(
            "memory_history_search",
            json!({"thread": THREAD, "text": "K-4417"}),
        )
        .await;
    assert_eq!(found["matches"], json!([]), "{found:#}");
    http.close().await;
    let served = hook_context(&fixture, "And the week after?", "p-2");
    assert_eq!(served.code, 0, "{served:#?}");
    assert!(served.json["messages"].is_array(), "{served:#?}");
    assert!(!leaks(&served.json), "{served:#?}");
    assert!(
        served.stderr.is_empty(),
        "the hook answered through the server without a failure: {served:#?}"
    );
}

/// `memory hook prompt` of ana's with an assembled context of 2,000 tokens: one-shot, or through the
/// server when one runs for the database.
fn hook_context(fixture: &Fixture, prompt: &str, prompt_id: &str) -> Outcome {
    prompt_with_context(fixture, THREAD, "ana", prompt, prompt_id, 2000)
}
