//! One user's scenario through every door that offers each operation (issue 41): the `memory`
//! command one-shot, the MCP server on stdio and over streamable HTTP. Each door runs the scenario on
//! its own fresh database, through the built binaries; the answers must be identical, what differs by
//! nature aside (times, which index answered and its position, who a withdrawal names: see
//! [`normalized`]). The Python package runs the same scenario against the command line in
//! `python/tests/test_conformance.py`.
//!
//! Which door offers which operation (`-`: not offered there):
//!
//! | step            | command line                 | MCP (stdio, HTTP)                  |
//! |-----------------|------------------------------|------------------------------------|
//! | put             | `memory put`                 | `memory_put`                       |
//! | get             | `memory get`                 | `memory_get`                       |
//! | history         | `memory history`             | `memory_get {revisions}`           |
//! | recall (5 modes)| `memory recall`              | `memory_recall`                    |
//! | sync            | `memory sync`                | `memory_sync`                      |
//! | withdraw        | `memory withdraw`            | `memory_withdraw`                  |
//! | thread append   | `memory thread append`       | `memory_thread_append`             |
//! | thread forget   | `memory thread forget`       | `memory_thread_forget`             |
//! | context         | `memory context`             | `memory_context`                   |
//! | worker pass     | `remembering-worker --once` (the same for every door)             |
//!
//! | hook prompt     | `memory hook prompt --no-server` (one-shot; also beside the stdio server) | through the HTTP server |
//!
//! The hook answers one-shot beside the command line and the stdio server, and through the running
//! HTTP server beside that door, so its served and one-shot answers are compared here too (and over
//! many sessions with the worker running between prompts by `tests/hook_stress.rs`). The one-shot
//! hook loads no rerank model unless asked (the one difference between the doors the docs name, see
//! `docs/hooks.md`), so here it is asked (`--rerank-model on`), as every other door loads it by
//! default: the same rule then answers at every door.

use integration_tests::hook::run_hook;
use integration_tests::product::{Fixture, McpClient, namespace, put};
use integration_tests::serving::HttpServer;
use serde_json::{Map, Value, json};

/// The recall modes every door offers.
const MODES: [&str; 5] = ["lexical", "recent", "exact", "hnsw", "hybrid"];

/// A door: how one step's arguments reach the product.
enum Door {
    Cli,
    Mcp(McpClient),
}

impl Door {
    /// Runs `operation` (the command's name; the tool is `memory_<operation>`) with `arguments` and
    /// answers the result, or `{"refused": KIND}`.
    async fn call(&self, fixture: &Fixture, operation: &str, arguments: Value) -> Value {
        match self {
            Self::Cli => {
                let text = arguments.to_string();
                let args: Vec<&str> = match operation {
                    "thread_append" => vec!["thread", "append", &text],
                    "thread_forget" => vec!["thread", "forget", &text],
                    operation => vec![operation, &text],
                };
                answer_of_cli(fixture.run(&args))
            }
            Self::Mcp(client) => {
                let result = client.call(&format!("memory_{operation}"), arguments).await;
                let content = result.structured_content.unwrap_or(Value::Null);
                if result.is_error == Some(true) {
                    json!({"refused": content["error"]["kind"]})
                } else {
                    content
                }
            }
        }
    }

    /// A document's revisions: `memory history` on the command line, `memory_get {revisions}` over
    /// MCP (the one history read behind both).
    async fn history(&self, fixture: &Fixture, id: &str) -> Value {
        match self {
            Self::Cli => {
                let text = json!({"namespace": namespace(), "id": id, "limit": 10}).to_string();
                answer_of_cli(fixture.run(&["history", &text]))["revisions"].clone()
            }
            Self::Mcp(_) => {
                let got = self
                    .call(
                        fixture,
                        "get",
                        json!({"namespace": namespace(), "id": id, "revisions": 10}),
                    )
                    .await;
                got["revisions"].clone()
            }
        }
    }

    /// A thread's assembled context: `memory context THREAD --budget N` on the command line,
    /// `memory_context` over MCP.
    async fn context(&self, fixture: &Fixture, thread: &str, budget: u64) -> Value {
        match self {
            Self::Cli => answer_of_cli(fixture.run(&[
                "context",
                thread,
                "--budget",
                &budget.to_string(),
                "--query",
                "Which city does Ana live in?",
            ])),
            Self::Mcp(_) => {
                self.call(
                    fixture,
                    "context",
                    json!({
                        "thread": thread, "budget": budget,
                        "query": "Which city does Ana live in?"
                    }),
                )
                .await
            }
        }
    }
}

fn answer_of_cli(outcome: integration_tests::product::Outcome) -> Value {
    if outcome.code == 0 {
        outcome.json
    } else {
        json!({"refused": outcome.json["error"]["kind"]})
    }
}

fn recall(query: &str, mode: &str) -> Value {
    json!({
        "namespace": namespace(), "scope": "assistant", "query": query, "mode": mode,
        "limits": {"max_items": 3, "max_bytes": 20000, "max_tokens": 5000, "timeout_ms": 60000}
    })
}

/// What may differ between two doors by nature, left out before answers are compared: when something
/// was written or read (each run has its own clock), which index answered and where it stood
/// (`answered_by`, `index_position`, `store_head`: a server's index follows the store in the
/// background, a one-shot command catches up), and who a withdrawal names (each door names its own
/// caller, and the withdrawal's revision, derived from its command, differs with it: revisions are
/// compared by the order they first appear in, [`numbered_revisions`]). Everything else must be
/// equal: document ids, texts, scores, citations, limits, refusals.
/// The fields are listed once, in `tests/conformance-differing.json`, for this suite and the
/// Python package's.
fn normalized(value: &Value) -> Value {
    static DIFFERING: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        let list: Value =
            serde_json::from_str(include_str!("../conformance-differing.json")).expect("JSON");
        serde_json::from_value(list["fields"].clone()).expect("a list of field names")
    });
    match value {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .filter(|(name, _)| !DIFFERING.contains(name))
                .map(|(name, member)| (name.clone(), normalized(member)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        // A message's content may be JSON text (a forgotten record's placeholder, a tool's output).
        Value::String(text) if text.starts_with('{') => match serde_json::from_str::<Value>(text) {
            Ok(inner @ Value::Object(_)) => Value::String(normalized(&inner).to_string()),
            _ => value.clone(),
        },
        other => other.clone(),
    }
}

/// Each distinct revision (`r` and 32 hex digits) replaced by `rev-N`, N its order of first
/// appearance across the door's answers, so two doors' histories compare link by link.
fn numbered_revisions(answers: &mut [(String, Value)]) {
    fn is_revision(text: &str) -> bool {
        text.len() == 33
            && text.starts_with('r')
            && text[1..].bytes().all(|byte| byte.is_ascii_hexdigit())
    }
    fn renumber(value: &mut Value, seen: &mut Vec<String>) {
        match value {
            Value::String(text) if is_revision(text) => {
                let number = match seen.iter().position(|known| known == text) {
                    Some(number) => number,
                    None => {
                        seen.push(text.clone());
                        seen.len() - 1
                    }
                };
                *text = format!("rev-{number}");
            }
            Value::Array(items) => items.iter_mut().for_each(|item| renumber(item, seen)),
            Value::Object(members) => members
                .values_mut()
                .for_each(|member| renumber(member, seen)),
            _ => {}
        }
    }
    let mut seen = Vec::new();
    for (_, answer) in answers {
        renumber(answer, &mut seen);
    }
}

/// `memory hook prompt` in the generic form for the scenario's namespace: one-shot (`--no-server`)
/// unless `served`, when the running HTTP server's discovery file sends it there.
fn hook_prompt(fixture: &Fixture, prompt: &str, served: bool) -> Value {
    let namespace = namespace().to_string();
    let mut args = vec![
        "--namespace",
        &namespace,
        "--scope",
        "assistant",
        "prompt",
        "--format",
        "json",
        "--speaker",
        "ana",
        "--timeout-ms",
        "60000",
        "--rerank-model",
        "on",
    ];
    if !served {
        args.push("--no-server");
    }
    let input = json!({"session": "hook-session", "prompt": prompt}).to_string();
    let outcome = run_hook(fixture, &args, &input, &[]);
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    assert!(outcome.json.is_object(), "the hook answered: {outcome:#?}");
    let answer = outcome.json;
    json!({
        "context": answer["context"],
        "passages": answer["passages"],
        "appended": answer["appended"],
        "already_recorded": answer["already_recorded"],
    })
}

/// The scenario, step by step: (step name, answer); the hook goes through the HTTP server when
/// `hook_served`.
async fn scenario(fixture: &Fixture, door: &Door, hook_served: bool) -> Vec<(String, Value)> {
    let mut answers = Vec::new();
    let mut record =
        |step: &str, answer: Value| answers.push((step.to_owned(), normalized(&answer)));

    for (id, text) in [
        ("tea", "Ana drinks green tea every morning."),
        ("city", "Ana moved to Lisbon last spring."),
        ("pet", "Ana's cat Miso sleeps on the piano."),
    ] {
        record(
            &format!("put {id}"),
            door.call(fixture, "put", put(id, text)).await,
        );
    }
    let replaced = door
        .call(
            fixture,
            "get",
            json!({"namespace": namespace(), "id": "tea"}),
        )
        .await;
    let mut edit = put("tea", "Ana switched to black coffee.");
    edit["operation_id"] = json!("op-tea-2");
    edit["expected_revision"] = replaced["document"]["revision"].clone();
    record("put tea again", door.call(fixture, "put", edit).await);
    // A stale revision is refused the same way everywhere.
    let mut stale = put("tea", "Ana drinks milk.");
    stale["operation_id"] = json!("op-tea-stale");
    stale["expected_revision"] = replaced["document"]["revision"].clone();
    record("stale put", door.call(fixture, "put", stale).await);
    record(
        "get tea",
        door.call(
            fixture,
            "get",
            json!({"namespace": namespace(), "id": "tea"}),
        )
        .await,
    );
    record("sync", door.call(fixture, "sync", json!({})).await);
    for mode in MODES {
        record(
            &format!("recall {mode}"),
            door.call(fixture, "recall", recall("What does Ana drink?", mode))
                .await,
        );
    }

    let pet = door
        .call(
            fixture,
            "get",
            json!({"namespace": namespace(), "id": "pet"}),
        )
        .await;
    record(
        "withdraw pet",
        door.call(
            fixture,
            "withdraw",
            json!({
                "namespace": namespace(), "id": "pet", "operation_id": "op-pet-gone",
                "expected_revision": pet["document"]["revision"], "reason": "asked to forget"
            }),
        )
        .await,
    );
    record("history tea", door.history(fixture, "tea").await);
    record("history pet", door.history(fixture, "pet").await);
    for mode in MODES {
        record(
            &format!("recall {mode} after withdraw"),
            door.call(
                fixture,
                "recall",
                recall("Which pet sleeps on the piano?", mode),
            )
            .await,
        );
    }

    // A conversation: the worker remembers it, a forgotten record is never shown.
    for (at, text) in [
        (
            1_767_225_600_000_i64,
            "I live in Porto now, near the river.",
        ),
        (1_767_225_660_000, "My bank PIN is 4417."),
        (1_767_225_720_000, "Which city do I live in?"),
        (
            1_767_225_780_000,
            "Actually, I live in Braga now, not Porto.",
        ),
    ] {
        record(
            &format!("append {at}"),
            door.call(
                fixture,
                "thread_append",
                json!({
                    "thread": "t1",
                    "record": {"speaker": "ana", "occurred_at": at,
                               "body": {"kind": "user_input", "text": text}},
                    "namespace": namespace(), "scope": "assistant",
                }),
            )
            .await,
        );
    }
    record(
        "forget the PIN",
        door.call(
            fixture,
            "thread_forget",
            json!({"thread": "t1", "sequence": 2, "reason": "a secret"}),
        )
        .await,
    );
    fixture.worker_pass();
    record(
        "sync after the worker",
        door.call(fixture, "sync", json!({})).await,
    );
    for mode in MODES {
        record(
            &format!("recall {mode} of the conversation"),
            door.call(fixture, "recall", recall("Where does Ana live?", mode))
                .await,
        );
    }
    record("context", door.context(fixture, "t1", 4_000).await);
    record(
        "hook prompt",
        hook_prompt(fixture, "Where does Ana live these days?", hook_served),
    );
    numbered_revisions(&mut answers);
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_door_answers_one_scenario_alike() {
    let server_flags = ["--allow-any-namespace".to_owned()];

    let cli_fixture = Fixture::new();
    let cli = scenario(&cli_fixture, &Door::Cli, false).await;

    let stdio_fixture = Fixture::new();
    let stdio = Door::Mcp(McpClient::stdio(&stdio_fixture, &server_flags, &[]).await);
    let over_stdio = scenario(&stdio_fixture, &stdio, false).await;
    if let Door::Mcp(client) = stdio {
        client.close().await;
    }

    let http_fixture = Fixture::new();
    let server = HttpServer::start(&http_fixture, &server_flags, &[]);
    let http = Door::Mcp(
        McpClient::http(&server.url, None)
            .await
            .expect("an HTTP client connects"),
    );
    let over_http = scenario(&http_fixture, &http, true).await;
    if let Door::Mcp(client) = http {
        client.close().await;
    }
    drop(server);

    // The scenario says something at every step (no door answered an empty shape by accident).
    assert!(cli.iter().all(|(_, answer)| !answer.is_null()), "{cli:#?}");
    assert!(
        cli.iter()
            .any(|(step, answer)| step == "stale put" && answer["refused"] == "conflict"),
        "{cli:#?}"
    );
    // The hook recalled the conversation's memory (an empty answer would compare equal too).
    assert!(
        cli.iter().any(|(step, answer)| step == "hook prompt"
            && answer["context"]
                .as_str()
                .is_some_and(|text| text.contains("Porto"))),
        "{cli:#?}"
    );
    // The correction in words leads what it corrects, which names it.
    assert!(
        cli.iter()
            .any(|(step, answer)| step == "recall hybrid of the conversation"
                && answer["passages"][0]["content"]["text"]
                    .as_str()
                    .is_some_and(|text| text.contains("Braga"))
                && answer["passages"][1]["corrected_by"] == "memory:1"),
        "{cli:#?}"
    );
    // Every mode places corrections (lexical and recent in their own search's task).
    for mode in ["lexical", "recent", "exact", "hnsw"] {
        let step = format!("recall {mode} of the conversation");
        assert!(
            cli.iter().any(|(name, answer)| *name == step
                && answer["passages"]
                    .as_array()
                    .is_some_and(|passages| passages
                        .iter()
                        .any(|passage| passage["corrected_by"] == "memory:1"))),
            "{mode}: {cli:#?}"
        );
    }
    for (door, answers) in [("MCP stdio", &over_stdio), ("MCP HTTP", &over_http)] {
        assert_eq!(answers.len(), cli.len());
        for ((step, expected), (_, found)) in cli.iter().zip(answers.iter()) {
            assert_eq!(
                found, expected,
                "{door} answers `{step}` differently from the command line"
            );
        }
    }
}
