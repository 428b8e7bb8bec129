//! End-to-end tests of `memory --db postgres://...`: the built binary against a real PostgreSQL server,
//! one fresh schema per test (dropped afterwards), and two `memory serve` processes sharing one schema.
//!
//! The server's URL comes from `MEMORY_TEST_POSTGRES_URL` (`scripts/postgres-setup.sh` starts a local
//! server and prints it). Without it these tests fail naming the script, unless
//! `MEMORY_SKIP_POSTGRES=1` asks for a loud skip. The embedding-mode test uses the real model, found the
//! way the binary always finds it (`MEMORY_ASSETS_DIR`, else the workspace's `assets/`).

#![allow(clippy::unwrap_used)]

use crate::common;

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{Outcome, get, put, recall, run_with_env};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

const URL_VARIABLE: &str = "MEMORY_TEST_POSTGRES_URL";

/// The server URL, or `None` after printing the loud skip line when `MEMORY_SKIP_POSTGRES=1`.
fn server_url(test: &str) -> Option<String> {
    match std::env::var(URL_VARIABLE) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var("MEMORY_SKIP_POSTGRES").as_deref() == Ok("1") => {
            let line = format!(
                "SKIPPED (MEMORY_SKIP_POSTGRES=1): memory-cli test `{test}` did not run against PostgreSQL"
            );
            println!("{line}");
            eprintln!("{line}");
            None
        }
        _ => panic!(
            "{URL_VARIABLE} is not set: run `export {URL_VARIABLE}=\"$(bash scripts/postgres-setup.sh)\"` \
             (it starts a local PostgreSQL server and prints the URL), or set MEMORY_SKIP_POSTGRES=1 to \
             skip the PostgreSQL tests loudly"
        ),
    }
}

/// One fresh schema on the test server, dropped with everything in it when this is dropped.
struct Database {
    url: String,
    schema: String,
}

impl Database {
    fn fresh(test: &str) -> Option<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let url = server_url(test)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or(0);
        let schema = format!(
            "memcli_{}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            nanos
        );
        Some(Self { url, schema })
    }

    /// `memory --db URL --schema S <operation> JSON`.
    fn call(&self, operation: &str, argument: &Value) -> Outcome {
        self.run(&[operation, &argument.to_string()])
    }

    fn run(&self, args: &[&str]) -> Outcome {
        let mut all = vec!["--schema", self.schema.as_str()];
        all.extend_from_slice(args);
        run_with_env(Some(Path::new(&self.url)), &all, None, &[])
    }

    /// `memory --db URL --schema S serve`, connected as an MCP client.
    async fn serve(&self) -> RunningService<RoleClient, ()> {
        let command = tokio::process::Command::new(common::BINARY).configure(|command| {
            command
                .env_remove("MEMORY_DB")
                .env_remove("MEMORY_LOG")
                .arg("--db")
                .arg(&self.url)
                .arg("--schema")
                .arg(&self.schema)
                // The tests name the namespaces they write: the server's grant holds every one.
                .args(["serve", "--allow-any-namespace"]);
        });
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts");
        ().serve(transport)
            .await
            .expect("the MCP handshake succeeds")
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let url = self.url.clone();
        let schema = self.schema.clone();
        // A thread of its own, so the schema is dropped whether or not this runs inside a runtime.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test schema {}", self.schema);
        }
    }
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    arguments: Value,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("tool arguments are an object");
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .expect("a tool call gets a result, refusals included")
}

fn success(result: &CallToolResult) -> Value {
    assert_eq!(result.is_error, Some(false), "{result:#?}");
    result
        .structured_content
        .clone()
        .expect("structured content")
}

fn error_kind(result: &CallToolResult) -> Option<String> {
    if result.is_error != Some(true) {
        return None;
    }
    let content = result.structured_content.as_ref()?;
    content["error"]["kind"].as_str().map(str::to_owned)
}

fn recalled_ids(answer: &Value) -> Vec<String> {
    answer["passages"]
        .as_array()
        .expect("passages")
        .iter()
        .map(|passage| passage["source"]["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn put_get_recall_and_import_through_the_command() {
    let Some(database) = Database::fresh("put_get_recall_and_import_through_the_command") else {
        return;
    };
    let created = database.call(
        "put",
        &put("tea", "op-1", None, "The user prefers green tea."),
    );
    created.assert_success();
    let revision = created.json["revision"].as_str().unwrap().to_owned();

    let read = database.call("get", &get("tea"));
    read.assert_success();
    assert_eq!(read.json["document"]["revision"], revision.as_str());
    assert_eq!(
        read.json["document"]["content"]["text"],
        "The user prefers green tea."
    );

    let recalled = database.call("recall", &recall("green tea", "lexical"));
    recalled.assert_success();
    assert_eq!(recalled_ids(&recalled.json), ["tea"]);

    // The write rules hold through the command: a stale create is a conflict, a retry a replay.
    database
        .call("put", &put("tea", "op-2", None, "black tea"))
        .assert_refused("conflict");
    let replayed = database.call(
        "put",
        &put("tea", "op-1", None, "The user prefers green tea."),
    );
    replayed.assert_success();
    assert_eq!(replayed.json["replayed"], true);

    // Import writes through the same database in batches.
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("import.jsonl");
    let lines = [
        put("bike", "op-3", None, "Carol repaired her bicycle chain."),
        put("tea", "op-4", None, "a stale create of an existing id"),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let imported = database.run(&["import", file.to_str().unwrap()]);
    assert_eq!(imported.code, 2, "one line is refused: {imported:#?}");
    assert_eq!(
        imported.json,
        json!({"written": 1, "replayed": 0, "refused": 1})
    );
    let bike = database.call("recall", &recall("bicycle chain", "lexical"));
    bike.assert_success();
    assert_eq!(recalled_ids(&bike.json), ["bike"]);

    // Two documents were committed: that is the head a sync reports, whoever asks.
    let synced = database.call("sync", &json!({}));
    synced.assert_success();
    assert_eq!(synced.json, json!({"indexed": 2, "unindexed": 0}));
}

#[test]
fn a_schema_without_a_url_is_refused_and_an_unreachable_server_is_unavailable() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("memory.sqlite");
    let refused = run_with_env(
        Some(&file),
        &["--schema", "team_a", "get", &get("tea").to_string()],
        None,
        &[],
    );
    refused.assert_refused("invalid-input");
    assert!(!file.exists(), "a refused command created the SQLite file");

    // Port 1 on loopback: nothing listens there. The password must appear nowhere in the answer.
    let url = "postgres://memory:not-a-real-secret@127.0.0.1:1/memory";
    let unreachable = run_with_env(
        Some(Path::new(url)),
        &["get", &get("tea").to_string()],
        None,
        &[],
    );
    unreachable.assert_refused("unavailable");
    assert!(
        unreachable.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not connect to the PostgreSQL database"),
        "{unreachable:#?}"
    );
    for output in [&unreachable.stdout, &unreachable.stderr] {
        assert!(!output.contains("not-a-real-secret"), "{unreachable:#?}");
    }
    // The URL in MEMORY_DB is not shown by --help either.
    let help = run_with_env(None, &["--help"], None, &[("MEMORY_DB", OsStr::new(url))]);
    help.assert_success();
    assert!(help.stdout.contains("postgres://"), "{help:#?}");
    assert!(!help.stdout.contains("not-a-real-secret"), "{help:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_one_server_is_recalled_through_the_other() {
    let Some(database) =
        Database::fresh("a_write_through_one_server_is_recalled_through_the_other")
    else {
        return;
    };
    let writer = database.serve().await;
    let reader = database.serve().await;

    let documents = [
        ("ada", "Ada moved to Lisbon last spring."),
        ("tea", "Bob prefers green tea over coffee in the morning."),
        (
            "meeting",
            "The quarterly budget review is scheduled for Tuesday.",
        ),
    ];
    for (index, (id, text)) in documents.iter().enumerate() {
        let written = call(
            &writer,
            "memory_put",
            put(id, &format!("op-{index}"), None, text),
        )
        .await;
        assert_eq!(success(&written)["replayed"], false);
    }

    let synced = success(&call(&reader, "memory_sync", json!({})).await);
    assert_eq!(synced, json!({"indexed": 3, "unindexed": 0}));

    let lexical = success(&call(&reader, "memory_recall", recall("green tea", "lexical")).await);
    assert_eq!(recalled_ids(&lexical), ["tea"]);
    // Shares no word with the document but the name: only the embedding index finds it.
    for mode in ["exact", "hnsw", "hybrid"] {
        let semantic = success(
            &call(
                &reader,
                "memory_recall",
                recall("In which city does Ada live now?", mode),
            )
            .await,
        );
        assert_eq!(
            recalled_ids(&semantic).first().map(String::as_str),
            Some("ada"),
            "mode {mode}: {semantic:#}"
        );
    }

    // A later write, after the reader's index is loaded and following, is recalled too.
    let later = call(
        &writer,
        "memory_put",
        put(
            "bike",
            "op-9",
            None,
            "Carol repaired the chain of her old bicycle.",
        ),
    )
    .await;
    success(&later);
    let synced = success(&call(&reader, "memory_sync", json!({})).await);
    assert_eq!(synced, json!({"indexed": 4, "unindexed": 0}));
    let semantic = success(
        &call(
            &reader,
            "memory_recall",
            recall("Who fixed a bike?", "exact"),
        )
        .await,
    );
    assert_eq!(
        recalled_ids(&semantic).first().map(String::as_str),
        Some("bike"),
        "{semantic:#}"
    );

    writer.cancel().await.unwrap();
    reader.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_race_across_two_servers_has_exactly_one_winner() {
    let Some(database) =
        Database::fresh("a_revision_race_across_two_servers_has_exactly_one_winner")
    else {
        return;
    };
    let first = database.serve().await;
    let second = database.serve().await;
    let created = success(
        &call(
            &first,
            "memory_put",
            put("tea", "op-0", None, "The user prefers green tea."),
        )
        .await,
    );
    let mut revision = created["revision"].as_str().unwrap().to_owned();

    // Several rounds, so the two calls really overlap in some of them; every round must have exactly
    // one winner whatever the interleaving.
    for round in 0..10 {
        let (a, b) = tokio::join!(
            call(
                &first,
                "memory_put",
                put(
                    "tea",
                    &format!("a-{round}"),
                    Some(&revision),
                    &format!("round {round}: black tea")
                ),
            ),
            call(
                &second,
                "memory_put",
                put(
                    "tea",
                    &format!("b-{round}"),
                    Some(&revision),
                    &format!("round {round}: white tea")
                ),
            ),
        );
        let (winner, loser) = match (error_kind(&a), error_kind(&b)) {
            (None, Some(kind)) => (success(&a), kind),
            (Some(kind), None) => (success(&b), kind),
            _ => panic!("round {round}: not exactly one winner: {a:#?} {b:#?}"),
        };
        assert_eq!(loser, "conflict", "round {round}");
        assert_eq!(winner["replayed"], false);
        revision = winner["revision"].as_str().unwrap().to_owned();
        // Both servers read the winner's revision.
        for server in [&first, &second] {
            let read = success(&call(server, "memory_get", get("tea")).await);
            assert_eq!(read["document"]["revision"], revision.as_str());
        }
    }
    first.cancel().await.unwrap();
    second.cancel().await.unwrap();
}
