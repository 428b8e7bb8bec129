//! The host picks the tenant, never the model: every `memory serve` runs under a grant, on stdio and
//! over HTTP. Without `--grants` the server's own grant holds `--namespace` and the per-user namespace
//! of `--user` (else the OS user); a precise call naming any other namespace is `forbidden` and
//! changes nothing. `--allow-namespace RULE` adds namespaces, `--allow-any-namespace` grants every
//! one, and with `--grants FILE` stdio holds the grant `--grant NAME` names.

use std::path::{Path, PathBuf};

use integration_tests::product::{Fixture, McpClient};
use integration_tests::serving::{HttpServer, get, tenant_grant, token_file};
use serde_json::{Value, json};

const TOKEN: &str = "host-token-9c2e";
const SECRET: &str = "Bob's private diary: the safe code is 4711.";

fn notes_of(user: &str) -> Value {
    json!({"name": "notes", "version": 1, "identity": {"user": user}})
}

fn user_namespace(user: &str) -> Value {
    json!({"name": "memory.user", "version": 1, "identity": {"user": user}})
}

fn put(namespace: &Value, id: &str, text: &str, scope: &str) -> Value {
    json!({
        "namespace": namespace,
        "id": id,
        "operation_id": format!("op-{id}"),
        "expected_revision": null,
        "locator": format!("chat:{id}"),
        "scopes": [scope],
        "content": {
            "text": text,
            "attributions": [],
            "metadata": {},
            "recorded_at": 1767225600000_i64,
            "extracted_at": 1767225600000_i64
        }
    })
}

fn recall(namespace: &Value, scope: &str) -> Value {
    json!({
        "namespace": namespace, "scope": scope, "query": "safe code diary", "mode": "lexical",
        "limits": {"max_items": 5, "max_bytes": 100000, "max_tokens": 20000, "timeout_ms": 60000}
    })
}

/// Bob's secret, written by the host itself (the one-shot command line, which holds no grant).
fn seed_bobs_secret(fixture: &Fixture) -> Value {
    let written = fixture.call("put", &put(&notes_of("bob"), "diary", SECRET, "private"));
    written.success()["document"].clone()
}

/// Bob's namespace as the host sees it: the diary unchanged, nothing else written.
fn assert_bob_unchanged(fixture: &Fixture, diary: &Value) {
    let got = fixture.call("get", &json!({"namespace": notes_of("bob"), "id": "diary"}));
    assert_eq!(&got.success()["document"], diary);
    let listed = fixture.run(&[
        "list",
        "--namespace",
        &notes_of("bob").to_string(),
        r#"{"limit": 100}"#,
    ]);
    let ids: Vec<&str> = listed.success()["documents"]
        .as_array()
        .expect("documents")
        .iter()
        .map(|document| document["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["diary"], "{listed:#?}");
}

/// `--namespace` ana's notes, `--scope assistant`, `--user ana`, then `more`.
fn anas_flags(more: &[&str]) -> Vec<String> {
    let mut flags = vec![
        "--namespace".to_owned(),
        notes_of("ana").to_string(),
        "--scope".to_owned(),
        "assistant".to_owned(),
        "--user".to_owned(),
        "ana".to_owned(),
    ];
    flags.extend(more.iter().map(|flag| (*flag).to_owned()));
    flags
}

/// Every precise tool naming bob's namespace is refused `forbidden`, and his secret is in no answer.
async fn assert_bob_forbidden(client: &McpClient, diary: &Value) {
    let bob = notes_of("bob");
    let refused = [
        ("memory_recall", recall(&bob, "private")),
        ("memory_get", json!({"namespace": bob, "id": "diary"})),
        (
            "memory_put",
            put(
                &bob,
                "planted",
                "Bob agreed to share everything.",
                "private",
            ),
        ),
        (
            "memory_withdraw",
            json!({"namespace": bob, "id": "diary", "operation_id": "op-steal",
                   "expected_revision": diary["revision"], "reason": "gone"}),
        ),
        (
            "memory_thread_append",
            json!({"thread": "bobs-thread", "namespace": bob, "scope": "private",
                   "record": {"speaker": "bob", "body": {"kind": "user_input", "text": "hi"}}}),
        ),
    ];
    for (tool, arguments) in refused {
        let message = client.refused(tool, arguments, "forbidden").await;
        assert!(!message.contains("4711"), "{tool}: {message}");
    }
    let result = client.call("memory_recall", recall(&bob, "private")).await;
    assert!(!format!("{result:?}").contains("4711"), "{result:?}");
}

#[tokio::test]
async fn over_stdio_a_call_naming_another_users_namespace_is_forbidden_and_changes_nothing() {
    let fixture = Fixture::new();
    let diary = seed_bobs_secret(&fixture);
    let client = McpClient::stdio(&fixture, &anas_flags(&[]), &[]).await;
    assert_bob_forbidden(&client, &diary).await;
    // The host's own namespaces are the server's: the configured destination and ana's per-user
    // namespace (where the hook and the worker write).
    client
        .success(
            "memory_put",
            put(
                &notes_of("ana"),
                "tea",
                "Ana drinks green tea.",
                "assistant",
            ),
        )
        .await;
    client
        .success(
            "memory_put",
            put(
                &user_namespace("ana"),
                "city",
                "Ana lives in Lisbon.",
                "agent",
            ),
        )
        .await;
    client
        .success("memory_remember", json!({"text": "Ana plays the cello."}))
        .await;
    client
        .success(
            "memory_thread_append",
            json!({"thread": "anas-thread",
                   "record": {"speaker": "ana", "body": {"kind": "user_input", "text": "hi"}}}),
        )
        .await;
    client.close().await;
    assert_bob_unchanged(&fixture, &diary);
}

#[tokio::test]
async fn allow_namespace_admits_its_rule_and_allow_any_namespace_restores_every_namespace() {
    let fixture = Fixture::new();
    let diary = seed_bobs_secret(&fixture);
    fixture
        .call(
            "put",
            &put(&notes_of("carol"), "plan", "Carol plans a trip.", "private"),
        )
        .success();

    let rule = json!({"name": "notes", "version": 1, "fields": {"user": "bob"}}).to_string();
    let allowed = McpClient::stdio(&fixture, &anas_flags(&["--allow-namespace", &rule]), &[]).await;
    let got = allowed
        .success(
            "memory_get",
            json!({"namespace": notes_of("bob"), "id": "diary"}),
        )
        .await;
    assert_eq!(got["document"]["content"]["text"], SECRET);
    allowed
        .refused(
            "memory_get",
            json!({"namespace": notes_of("carol"), "id": "plan"}),
            "forbidden",
        )
        .await;
    allowed.close().await;

    let any = McpClient::stdio(&fixture, &anas_flags(&["--allow-any-namespace"]), &[]).await;
    let got = any
        .success(
            "memory_get",
            json!({"namespace": notes_of("carol"), "id": "plan"}),
        )
        .await;
    assert_eq!(got["document"]["content"]["text"], "Carol plans a trip.");
    any.close().await;
    assert_bob_unchanged(&fixture, &diary);

    // A rule that is not a grants file's rule refuses to start, touching nothing.
    for bad in ["notes", r#"{"name": "notes", "user": "bob"}"#] {
        let outcome = fixture.run(&["serve", "--allow-namespace", bad]);
        let message = outcome.refused("invalid-input");
        assert!(message.contains("--allow-namespace"), "{message}");
    }
}

fn grants_file(dir: &Path) -> PathBuf {
    let text: String = [("ana", "ana-token-1"), ("bob", "bob-token-2")]
        .iter()
        .map(|(name, token)| tenant_grant(name, token))
        .collect();
    let path = dir.join("grants.toml");
    std::fs::write(&path, text).expect("grants file");
    path
}

#[tokio::test]
async fn on_stdio_grant_picks_the_grants_file_grant_and_an_unknown_name_refuses_to_start() {
    let fixture = Fixture::new();
    let diary = seed_bobs_secret(&fixture);
    let grants = grants_file(fixture.dir.path());
    let grants = grants.to_str().expect("UTF-8 path");

    let ana = McpClient::stdio(
        &fixture,
        &[
            "--grants".to_owned(),
            grants.to_owned(),
            "--grant".to_owned(),
            "ana".to_owned(),
        ],
        &[],
    )
    .await;
    // The grant brings its defaults: the simple tools work in ana's namespace and scope.
    let remembered = ana
        .success("memory_remember", json!({"text": "Ana keeps bees."}))
        .await;
    assert_eq!(remembered["document"]["scopes"], json!(["ana"]));
    assert_bob_forbidden(&ana, &diary).await;
    ana.close().await;
    assert_bob_unchanged(&fixture, &diary);

    let unknown = fixture.run(&["serve", "--grants", grants, "--grant", "mallory"]);
    let message = unknown.refused("invalid-input");
    assert!(message.contains("--grant mallory"), "{message}");
    let unnamed = fixture.run(&["serve", "--grants", grants]);
    let message = unnamed.refused("invalid-input");
    assert!(message.contains("--grant NAME"), "{message}");
}

#[tokio::test]
async fn over_http_the_token_and_a_tokenless_loopback_caller_hold_the_servers_grant() {
    let fixture = Fixture::new();
    let diary = seed_bobs_secret(&fixture);
    let token = token_file(fixture.dir.path(), TOKEN);
    let mut flags = anas_flags(&[]);
    flags.extend(["--token-file".to_owned(), token.display().to_string()]);
    let server = HttpServer::start(&fixture, &flags, &[]);
    let client = McpClient::http(&server.url, Some(TOKEN))
        .await
        .expect("connected");
    assert_bob_forbidden(&client, &diary).await;
    client
        .success("memory_remember", json!({"text": "Ana plays the cello."}))
        .await;
    // The host's token still reads /metrics, which names every grant.
    let (status, body) = get(&format!("{}/metrics", server.base()), Some(TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    client.close().await;
    drop(server);

    let open = HttpServer::start(&fixture, &anas_flags(&[]), &[]);
    let client = McpClient::http(&open.url, None).await.expect("connected");
    assert_bob_forbidden(&client, &diary).await;
    client.close().await;
    drop(open);
    assert_bob_unchanged(&fixture, &diary);
}
