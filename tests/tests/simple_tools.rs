//! The simple tools through a real MCP client (rmcp over stdio), `memory list`, and an installed binary
//! finding its assets: the promises of issue 16 where users meet them.

use std::collections::HashSet;
use std::ffi::OsStr;

use integration_tests::product::McpClient;
use integration_tests::product::{Fixture, embedder_only_assets, memory_binary, put};
use integration_tests::serving::default_flags;
use serde_json::{Value, json};

const SIMPLE_TOOLS: [&str; 4] = [
    "memory_remember",
    "memory_search",
    "memory_forget",
    "memory_list",
];
const PRECISE_TOOLS: [&str; 15] = [
    "memory_put",
    "memory_withdraw",
    "memory_get",
    "memory_recall",
    "memory_sync",
    "memory_thread_append",
    "memory_thread_forget",
    "memory_context",
    "memory_compact",
    "memory_history_read",
    "memory_history_search",
    "memory_new_context",
    "memory_context_remaining",
    "memory_read_notes",
    "memory_write_notes",
];

fn ids_of(page: &Value) -> Vec<String> {
    page["documents"]
        .as_array()
        .expect("documents")
        .iter()
        .map(|document| document["id"].as_str().expect("an id").to_owned())
        .collect()
}

#[tokio::test]
async fn every_tool_has_annotations_and_an_output_schema_and_simple_ones_need_defaults() {
    let fixture = Fixture::new();
    let plain = McpClient::stdio(&fixture, &[], &[]).await;
    let names: HashSet<String> = plain.tool_names().await.into_iter().collect();
    assert_eq!(
        names,
        PRECISE_TOOLS
            .iter()
            .map(|name| (*name).to_owned())
            .collect()
    );
    plain.close().await;

    let session = McpClient::stdio(&fixture, &default_flags(), &[]).await;
    let tools = session.tools().await;
    assert_eq!(tools.len(), PRECISE_TOOLS.len() + SIMPLE_TOOLS.len());
    for tool in &tools {
        let annotations = tool
            .annotations
            .as_ref()
            .unwrap_or_else(|| panic!("{} has annotations", tool.name));
        let read_only = annotations.read_only_hint.expect("read-only hint");
        assert!(annotations.destructive_hint.is_some(), "{}", tool.name);
        assert!(annotations.idempotent_hint.is_some(), "{}", tool.name);
        let expected_read_only = matches!(
            tool.name.as_ref(),
            "memory_get"
                | "memory_recall"
                | "memory_sync"
                | "memory_search"
                | "memory_list"
                | "memory_context_remaining"
                | "memory_read_notes"
                | "memory_history_read"
                | "memory_history_search"
        );
        assert_eq!(read_only, expected_read_only, "{}", tool.name);
        let schema = tool
            .output_schema
            .as_ref()
            .unwrap_or_else(|| panic!("{} has an output schema", tool.name));
        assert_eq!(schema.get("type"), Some(&json!("object")), "{}", tool.name);
        assert!(schema.contains_key("properties"), "{}", tool.name);
    }
    let remember = tools
        .iter()
        .find(|tool| tool.name == "memory_remember")
        .expect("listed");
    let properties = remember
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .expect("properties");
    let mut fields: Vec<&str> = properties.keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        ["expected_revision", "id", "metadata", "speaker", "text"]
    );
    session.close().await;
}

#[tokio::test]
async fn only_a_namespace_without_a_scope_is_refused() {
    let fixture = Fixture::new();
    let namespace = json!({"name": "notes", "version": 1, "identity": {"user": "u1"}}).to_string();
    let outcome = fixture.run(&["serve", "--namespace", &namespace]);
    assert!(outcome.refused("invalid-input").contains("--scope"));
}

#[tokio::test]
async fn memory_remember_retried_returns_the_same_receipt() {
    let fixture = Fixture::new();
    let session = McpClient::stdio(&fixture, &default_flags(), &[]).await;
    let call = json!({"text": "The user prefers green tea.", "metadata": {"topic": "drinks"}});
    let first = session.success("memory_remember", call.clone()).await;
    let retried = session.success("memory_remember", call.clone()).await;
    assert_eq!(first["replayed"], false);
    assert_eq!(retried["replayed"], true);
    assert_eq!(retried["revision"], first["revision"]);
    assert_eq!(retried["document"], first["document"]);
    assert_eq!(first["document"]["scopes"], json!(["assistant"]));
    assert_eq!(
        first["document"]["content"]["attributions"][0]["speaker"],
        "user"
    );

    // With an id and its current revision, a later call replaces it, and its retry replays too.
    let tea = first["document"]["id"].as_str().expect("an id").to_owned();
    let replace = json!({"text": "The user now prefers oolong.", "id": tea, "speaker": "ana",
                         "expected_revision": first["revision"]});
    let replaced = session.success("memory_remember", replace.clone()).await;
    assert_eq!(replaced["replayed"], false);
    assert_eq!(replaced["document"]["predecessor"], first["revision"]);
    let again = session.success("memory_remember", replace).await;
    assert_eq!(again["replayed"], true);
    assert_eq!(again["revision"], replaced["revision"]);

    // The precise tools see the same document.
    let got = session
        .success(
            "memory_get",
            json!({"namespace": {"name": "notes", "version": 1, "identity": {"user": "u1"}}, "id": tea}),
        )
        .await;
    assert_eq!(got["document"]["revision"], replaced["revision"]);
    session.close().await;
}

#[tokio::test]
async fn memory_forget_then_memory_search_never_returns_it() {
    let fixture = Fixture::new();
    let session = McpClient::stdio(&fixture, &default_flags(), &[]).await;
    let kept = session
        .success(
            "memory_remember",
            json!({"text": "Ana keeps a garden of tomatoes on her balcony."}),
        )
        .await;
    let forgotten = session
        .success(
            "memory_remember",
            json!({"text": "Ana keeps her spare house key under the doormat."}),
        )
        .await;
    let forgotten_id = forgotten["document"]["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    session.success("memory_sync", json!({})).await;
    let query = json!({"query": "where does Ana keep her house key", "limit": 10});
    let before = session.success("memory_search", query.clone()).await;
    let cited = |result: &Value| -> Vec<String> {
        result["passages"]
            .as_array()
            .expect("passages")
            .iter()
            .map(|passage| passage["source"]["id"].as_str().expect("id").to_owned())
            .collect()
    };
    assert!(cited(&before).contains(&forgotten_id), "{before:#}");

    let withdrawn = session
        .success(
            "memory_forget",
            json!({"id": forgotten_id, "reason": "the user asked"}),
        )
        .await;
    assert!(
        withdrawn["document"]["withdrawn"].is_object(),
        "{withdrawn:#}"
    );
    for query in [
        json!({"query": "where does Ana keep her house key", "limit": 50}),
        json!({"query": "spare house key doormat", "limit": 50}),
        json!({"query": "Ana", "limit": 50}),
    ] {
        let after = session.success("memory_search", query).await;
        assert!(!cited(&after).contains(&forgotten_id), "{after:#}");
        assert!(
            !after["text"]
                .as_str()
                .unwrap_or_default()
                .contains("doormat")
        );
    }
    let listed = session.success("memory_list", json!({})).await;
    assert_eq!(
        ids_of(&listed),
        [kept["document"]["id"].as_str().expect("id")]
    );
    session
        .refused(
            "memory_forget",
            json!({"id": forgotten_id, "reason": "again"}),
            "not-found",
        )
        .await;
    session.close().await;
}

#[tokio::test]
async fn memory_list_pages_through_250_documents_without_a_gap_or_repeat() {
    let fixture = Fixture::new();
    let lines: Vec<Value> = (0..250)
        .map(|index| put(&format!("doc-{index:03}"), &format!("Note number {index}.")))
        .collect();
    assert_eq!(fixture.import(&lines).success()["written"], 250);
    let newest_first: Vec<String> = (0..250)
        .rev()
        .map(|index| format!("doc-{index:03}"))
        .collect();

    let session = McpClient::stdio(&fixture, &default_flags(), &[]).await;
    for limit in [7, 100] {
        let mut listed = Vec::new();
        let mut cursor = Value::Null;
        let mut pages = 0;
        loop {
            let page = session
                .success("memory_list", json!({"cursor": cursor, "limit": limit}))
                .await;
            pages += 1;
            assert!(pages <= 250, "the walk does not end");
            listed.extend(ids_of(&page));
            cursor = page["next_cursor"].clone();
            if cursor.is_null() {
                break;
            }
        }
        let distinct: HashSet<&String> = listed.iter().collect();
        assert_eq!(distinct.len(), listed.len(), "a repeat with limit {limit}");
        assert_eq!(
            listed, newest_first,
            "a gap or a wrong order with limit {limit}"
        );
    }
    session
        .refused("memory_list", json!({"limit": 101}), "too-large")
        .await;
    session
        .refused(
            "memory_list",
            json!({"cursor": "not-a-cursor"}),
            "invalid-input",
        )
        .await;
    session.close().await;

    // `memory list` pages the same way from a shell.
    let namespace = json!({"name": "notes", "version": 1, "identity": {"user": "u1"}}).to_string();
    let mut listed = Vec::new();
    let mut argument = json!({"limit": 100});
    loop {
        let outcome = fixture.run(&["list", "--namespace", &namespace, &argument.to_string()]);
        let page = outcome.success().clone();
        listed.extend(ids_of(&page));
        if page["next_cursor"].is_null() {
            break;
        }
        argument = json!({"limit": 100, "cursor": page["next_cursor"]});
    }
    assert_eq!(listed, newest_first);
    fixture.run(&["list"]).refused("invalid-input");
}

/// The assets the workspace's tests use (fetched by scripts/fetch-assets.sh).
fn workspace_assets() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets")
}

#[test]
fn a_binary_copied_with_its_assets_beside_it_finds_them() {
    let install = tempfile::tempdir().expect("temporary directory");
    let bin = install.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin folder");
    let copied = bin.join("memory");
    std::fs::copy(memory_binary(), &copied).expect("the binary is copied");
    std::os::unix::fs::symlink(
        workspace_assets()
            .canonicalize()
            .expect("the workspace's assets are fetched"),
        bin.join("assets"),
    )
    .expect("assets beside the binary");
    let home = install.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let run = |args: &[&str], env: &[(&str, &OsStr)]| {
        let output = std::process::Command::new(&copied)
            .env_remove("MEMORY_ASSETS_DIR")
            .env_remove("XDG_DATA_HOME")
            .env_remove("MEMORY_DB")
            .env("HOME", &home)
            .envs(env.iter().copied())
            .args(args)
            .output()
            .expect("the copied binary runs");
        let json: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        (output.status.code(), json)
    };

    let (code, report) = run(&["doctor"], &[]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["assets"]["source"], "beside_binary", "{report:#}");
    assert_eq!(report["assets"]["complete"], true);
    assert_eq!(
        report["assets"]["rerank_model"]["verified"], true,
        "{report:#}"
    );
    let beside = bin.canonicalize().expect("bin folder").join("assets");
    assert_eq!(report["assets"]["dir"], beside.display().to_string());
    assert!(report["fix"].is_null());

    // The copied binary recalls semantically with them.
    let db = install.path().join("notes.sqlite");
    let db = db.to_str().expect("UTF-8 path");
    let (code, _) = run(
        &[
            "--db",
            db,
            "put",
            &put("tea", "The user prefers green tea.").to_string(),
        ],
        &[],
    );
    assert_eq!(code, Some(0));
    let recall = json!({
        "namespace": {"name": "notes", "version": 1, "identity": {"user": "u1"}},
        "scope": "assistant", "query": "what does the user like to drink", "mode": "exact",
        "limits": {"max_items": 3, "max_bytes": 4000, "max_tokens": 1000, "timeout_ms": 60000}
    });
    let (code, answer) = run(&["--db", db, "recall", &recall.to_string()], &[]);
    assert_eq!(code, Some(0), "{answer:#}");
    assert_eq!(answer["passages"][0]["source"]["id"], "tea", "{answer:#}");

    // An explicit folder wins, and an empty one is reported with the command that fills it.
    let empty = install.path().join("empty-assets");
    let (code, report) = run(&["doctor"], &[("MEMORY_ASSETS_DIR", empty.as_os_str())]);
    assert_eq!(code, Some(2), "{report:#}");
    assert_eq!(report["assets"]["source"], "env");
    assert_eq!(
        report["candidates"][0]["missing"].as_array().map(Vec::len),
        Some(6)
    );
    let fix = report["fix"].as_str().expect("a fix command");
    assert!(
        fix.contains("fetch-assets.sh") && fix.contains("empty-assets"),
        "{fix}"
    );

    // The embedding model without the rerank model: semantic recall works, hybrid recall's
    // default stage does not, so the folder is reported incomplete with the same fix.
    let embedder_only = embedder_only_assets();
    let (code, report) = run(
        &["doctor"],
        &[("MEMORY_ASSETS_DIR", embedder_only.path().as_os_str())],
    );
    assert_eq!(code, Some(2), "{report:#}");
    assert_eq!(report["assets"]["complete"], true);
    assert_eq!(report["assets"]["rerank_model"]["verified"], false);
    assert_eq!(
        report["assets"]["rerank_model"]["missing"][0],
        "reranker/model.onnx"
    );
    assert!(
        report["fix"]
            .as_str()
            .is_some_and(|fix| fix.contains("fetch-assets.sh"))
    );
}
