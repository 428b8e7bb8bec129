//! A server a team shares (`memory serve --http --grants FILE`), driven through the built binary with
//! one token per tenant: each sees only its own memory through every tool, `forbidden` for the rest
//! (counted in `/metrics` by grant and tool), a revoked token stops working on SIGHUP, and a faulty
//! grants file refuses to start or, on reload, keeps the grants in force.

use std::path::{Path, PathBuf};

use integration_tests::product::{Fixture, MODES, McpClient, cited_documents};
use integration_tests::serving::{
    HttpServer, everything_grant, get, parse_metrics, sample, tenant_grant,
};
use memory_cli::grants::token_digest;
use serde_json::{Value, json};

const ANA: &str = "ana-token-5d1e";
const BOB: &str = "bob-token-77c0";
const READER: &str = "reader-token-0b3a";
const OPS: &str = "ops-token-e41f";

fn namespace_of(user: &str) -> Value {
    json!({"name": "notes", "version": 1, "identity": {"user": user}})
}

fn grants_text(tenants: &[(&str, &str)]) -> String {
    let mut text: String = tenants
        .iter()
        .map(|(name, token)| tenant_grant(name, token))
        .collect();
    text.push_str(&format!(
        r#"
[[grant]]
name = "ana-reader"
token_sha256 = "{reader}"
operations = ["recall", "get", "list"]
read_scopes = ["ana"]
default_namespace = {{ name = "notes", version = 1, identity = {{ user = "ana" }} }}
default_scope = "ana"

[[grant.namespaces]]
name = "notes"
identity = {{ user = "ana" }}
"#,
        reader = token_digest(READER),
    ));
    text.push_str(&everything_grant("ops", OPS));
    text
}

fn write_grants(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("grants.toml");
    std::fs::write(&path, text).expect("grants file");
    path
}

fn start(fixture: &Fixture, grants: &Path, more: &[&str]) -> HttpServer {
    let mut args = vec![
        "--grants".to_owned(),
        grants.to_str().expect("UTF-8 path").to_owned(),
    ];
    args.extend(more.iter().map(|arg| (*arg).to_owned()));
    HttpServer::start(fixture, &args, &[])
}

fn put(user: &str, id: &str, text: &str, scope: &str) -> Value {
    json!({
        "namespace": namespace_of(user),
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

fn recall(user: &str, scope: &str, query: &str, mode: &str) -> Value {
    json!({
        "namespace": namespace_of(user), "scope": scope, "query": query, "mode": mode,
        "limits": {"max_items": 10, "max_bytes": 100000, "max_tokens": 20000, "timeout_ms": 60000}
    })
}

fn user_record(text: &str) -> Value {
    json!({"speaker": "user", "body": {"kind": "user_input", "text": text}})
}

async fn metrics(server: &HttpServer) -> String {
    let (status, body) = get(&format!("{}/metrics", server.base()), Some(OPS)).await;
    assert_eq!(status, 200, "{body}");
    body
}

fn forbidden_count(body: &str, grant: &str, tool: &str) -> f64 {
    sample(
        &parse_metrics(body),
        "memory_forbidden_total",
        &[("grant", grant), ("tool", tool)],
    )
    .unwrap_or(0.0)
}

#[tokio::test]
async fn each_token_sees_only_its_own_memory_through_every_tool() {
    let fixture = Fixture::new();
    let grants = write_grants(
        fixture.dir.path(),
        &grants_text(&[("ana", ANA), ("bob", BOB)]),
    );
    let server = start(&fixture, &grants, &[]);
    let ana = McpClient::http(&server.url, Some(ANA)).await.expect("ana");
    let bob = McpClient::http(&server.url, Some(BOB)).await.expect("bob");
    assert_eq!(ana.tools().await.len(), 19, "the simple tools are listed");

    // Each writes through the simple tools (the grant's defaults) and the precise ones.
    let ana_id = ana
        .success(
            "memory_remember",
            json!({"text": "Ana's cat is called Miso."}),
        )
        .await["document"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let bob_id = bob
        .success(
            "memory_remember",
            json!({"text": "Bob's cat is called Rex."}),
        )
        .await["document"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    ana.success(
        "memory_put",
        put("ana", "ana-plan", "Ana plans a cat show in May.", "ana"),
    )
    .await;
    bob.success(
        "memory_put",
        put("bob", "bob-plan", "Bob plans a cat show in June.", "bob"),
    )
    .await;
    let appended = ana
        .success(
            "memory_thread_append",
            json!({"thread": "ana-thread", "record": user_record("My cat likes tuna.")}),
        )
        .await;
    assert_eq!(appended["sequence"], 1);
    ana.success("memory_sync", json!({})).await;

    // Recall in every mode, search, list and get: only one's own documents.
    for (client, user, own, other) in [
        (&ana, "ana", [&ana_id, "ana-plan"], [&bob_id, "bob-plan"]),
        (&bob, "bob", [&bob_id, "bob-plan"], [&ana_id, "ana-plan"]),
    ] {
        for mode in MODES.iter().copied().chain(["recent"]) {
            let found = client
                .success(
                    "memory_recall",
                    recall(user, user, "cat called show plans", mode),
                )
                .await;
            let cited = cited_documents(&found);
            assert!(!cited.is_empty(), "{user} {mode}: {found:#}");
            assert!(
                cited.iter().all(|id| own.contains(&id.as_str())),
                "{user} {mode} cites another's document: {cited:?}"
            );
        }
        let searched = client
            .success("memory_search", json!({"query": "cat called show"}))
            .await;
        let cited = cited_documents(&searched);
        assert!(!cited.is_empty());
        assert!(cited.iter().all(|id| !other.contains(&id.as_str())));
        let listed = client.success("memory_list", json!({})).await;
        let mut ids: Vec<&str> = listed["documents"]
            .as_array()
            .expect("documents")
            .iter()
            .map(|document| document["id"].as_str().expect("id"))
            .collect();
        ids.sort_unstable();
        let mut expected = own.to_vec();
        expected.sort_unstable();
        assert_eq!(ids, expected, "{user} lists");
        let got = client
            .success(
                "memory_get",
                json!({"namespace": namespace_of(user), "id": own[1]}),
            )
            .await;
        assert_eq!(got["document"]["id"], own[1]);
    }

    // Everything aimed at bob's namespace, scope or thread is forbidden to ana, with one message
    // whether the target exists or not.
    let exists = ana
        .refused(
            "memory_get",
            json!({"namespace": namespace_of("bob"), "id": "bob-plan"}),
            "forbidden",
        )
        .await;
    let absent = ana
        .refused(
            "memory_get",
            json!({"namespace": namespace_of("bob"), "id": "no-such-id"}),
            "forbidden",
        )
        .await;
    assert_eq!(exists, absent, "a refusal tells nothing about existence");
    // Bob's namespace through ana's own scope, and through bob's.
    for mode in MODES.iter().copied().chain(["recent"]) {
        ana.refused(
            "memory_recall",
            recall("bob", "ana", "cat", mode),
            "forbidden",
        )
        .await;
    }
    ana.refused(
        "memory_recall",
        recall("bob", "bob", "cat", "hybrid"),
        "forbidden",
    )
    .await;
    ana.refused(
        "memory_recall",
        recall("ana", "bob", "cat", "lexical"),
        "forbidden",
    )
    .await;
    ana.refused(
        "memory_put",
        put("bob", "ana-in-bob", "Ana writes into Bob's memory.", "bob"),
        "forbidden",
    )
    .await;
    ana.refused(
        "memory_put",
        put("ana", "ana-for-bob", "Ana grants to Bob's scope.", "bob"),
        "forbidden",
    )
    .await;
    ana.refused(
        "memory_withdraw",
        json!({"namespace": namespace_of("bob"), "id": "bob-plan", "operation_id": "w-1",
               "expected_revision": "r", "reason": "mine now"}),
        "forbidden",
    )
    .await;
    // Bob's ids mean nothing in ana's namespace.
    ana.refused(
        "memory_forget",
        json!({"id": bob_id, "reason": "not mine"}),
        "not-found",
    )
    .await;
    bob.refused(
        "memory_thread_append",
        json!({"thread": "ana-thread", "record": user_record("I read Ana's thread.")}),
        "forbidden",
    )
    .await;
    let bound = bob
        .refused(
            "memory_thread_forget",
            json!({"thread": "ana-thread", "sequence": 1, "reason": "x"}),
            "forbidden",
        )
        .await;
    let unbound = bob
        .refused(
            "memory_thread_forget",
            json!({"thread": "no-such-thread", "sequence": 1, "reason": "x"}),
            "forbidden",
        )
        .await;
    assert_eq!(bound, unbound);
    // The context tools read a thread only through a grant that admits its destination.
    let context = ana
        .success(
            "memory_context",
            json!({"thread": "ana-thread", "budget": 4000, "query": "cat show plans"}),
        )
        .await;
    let text = context.to_string();
    assert!(text.contains("My cat likes tuna."), "{context:#}");
    assert!(text.contains("Ana plans a cat show"), "{context:#}");
    assert!(!text.contains("Bob plans"), "{context:#}");
    for (tool, arguments) in [
        ("memory_context", json!({"budget": 4000})),
        ("memory_history_read", json!({})),
        ("memory_history_search", json!({"text": "tuna"})),
        ("memory_compact", json!({"measured_input_tokens": 9000})),
    ] {
        let mut on_bound = arguments.clone();
        on_bound["thread"] = json!("ana-thread");
        let mut on_unbound = arguments;
        on_unbound["thread"] = json!("no-such-thread");
        let bound = bob.refused(tool, on_bound, "forbidden").await;
        let unbound = bob.refused(tool, on_unbound, "forbidden").await;
        assert_eq!(bound, unbound, "{tool}");
    }
    bob.refused(
        "memory_thread_append",
        json!({"thread": "bob-thread", "record": user_record("hi"),
               "namespace": namespace_of("ana")}),
        "forbidden",
    )
    .await;

    // A grant without write operations reads and nothing else.
    let reader = McpClient::http(&server.url, Some(READER))
        .await
        .expect("reader");
    let searched = reader
        .success("memory_search", json!({"query": "cat"}))
        .await;
    assert!(!cited_documents(&searched).is_empty());
    reader
        .refused(
            "memory_remember",
            json!({"text": "reader writes"}),
            "forbidden",
        )
        .await;
    reader
        .refused(
            "memory_context",
            json!({"thread": "ana-thread", "budget": 4000}),
            "forbidden",
        )
        .await;
    reader
        .refused(
            "memory_forget",
            json!({"id": ana_id, "reason": "x"}),
            "forbidden",
        )
        .await;
    reader
        .refused(
            "memory_thread_append",
            json!({"thread": "reader-thread", "record": user_record("hi")}),
            "forbidden",
        )
        .await;

    // Nothing a refusal touched changed: bob's documents and ana's thread are as they were.
    let got = bob
        .success(
            "memory_get",
            json!({"namespace": namespace_of("bob"), "id": "bob-plan"}),
        )
        .await;
    assert_eq!(
        got["document"]["content"]["text"],
        "Bob plans a cat show in June."
    );
    let got = ana
        .success(
            "memory_get",
            json!({"namespace": namespace_of("ana"), "id": "ana-in-bob"}),
        )
        .await;
    assert_eq!(got["document"], Value::Null);
    let appended = ana
        .success(
            "memory_thread_append",
            json!({"thread": "ana-thread", "record": user_record("And sardines.")}),
        )
        .await;
    assert_eq!(
        appended["sequence"], 2,
        "bob's refused append added nothing"
    );
    // Ana's own forget works.
    ana.success("memory_forget", json!({"id": ana_id, "reason": "asked"}))
        .await;

    // Refusals are counted by grant and tool; /metrics is for a token granted everything.
    let body = metrics(&server).await;
    assert_eq!(forbidden_count(&body, "ana", "memory_get"), 2.0);
    assert_eq!(forbidden_count(&body, "ana", "memory_recall"), 7.0);
    assert_eq!(forbidden_count(&body, "ana", "memory_put"), 2.0);
    assert_eq!(forbidden_count(&body, "bob", "memory_thread_forget"), 2.0);
    assert_eq!(forbidden_count(&body, "bob", "memory_context"), 2.0);
    assert_eq!(forbidden_count(&body, "bob", "memory_history_search"), 2.0);
    assert_eq!(forbidden_count(&body, "ana-reader", "memory_remember"), 1.0);
    assert!(
        !body.contains("Miso") && !body.contains("bob-plan") && !body.contains("\"user\""),
        "no text, id or namespace in /metrics"
    );
    let (status, _) = get(&format!("{}/metrics", server.base()), Some(ANA)).await;
    assert_eq!(status, 403);
    assert!(
        McpClient::http(&server.url, Some("not-a-token"))
            .await
            .is_err()
    );
    assert!(McpClient::http(&server.url, None).await.is_err());
    for client in [ana, bob, reader] {
        client.close().await;
    }
}

#[tokio::test]
async fn a_revoked_token_stops_working_on_sighup_and_a_faulty_file_changes_nothing() {
    let fixture = Fixture::new();
    let grants = write_grants(
        fixture.dir.path(),
        &grants_text(&[("ana", ANA), ("bob", BOB)]),
    );
    let server = start(&fixture, &grants, &[]);
    let ana = McpClient::http(&server.url, Some(ANA)).await.expect("ana");
    ana.success("memory_remember", json!({"text": "Ana likes tea."}))
        .await;
    ana.close().await;

    let reloads = |body: &str, outcome: &str| {
        sample(
            &parse_metrics(body),
            "memory_grants_reloads_total",
            &[("outcome", outcome)],
        )
        .unwrap_or(0.0)
    };
    let wait_for_reload = |outcome: &'static str, seen: f64| {
        let server = &server;
        async move {
            for _ in 0..600 {
                if reloads(&metrics(server).await, outcome) > seen {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            panic!("the grants were not re-read ({outcome})");
        }
    };

    // A faulty file on reload: the old grants stay in force.
    std::fs::write(&grants, "[[grant]]\nname = \"ana\"\n").expect("write");
    server.signal("HUP");
    wait_for_reload("failed", 0.0).await;
    let ana = McpClient::http(&server.url, Some(ANA))
        .await
        .expect("ana still holds her grant");
    ana.close().await;

    // Ana's grant removed: her token is refused from the next request on; bob's works.
    std::fs::write(&grants, grants_text(&[("bob", BOB)])).expect("write");
    server.signal("HUP");
    wait_for_reload("ok", 0.0).await;
    assert!(McpClient::http(&server.url, Some(ANA)).await.is_err());
    let bob = McpClient::http(&server.url, Some(BOB)).await.expect("bob");
    bob.success("memory_remember", json!({"text": "Bob likes coffee."}))
        .await;
    bob.close().await;
    let body = metrics(&server).await;
    assert_eq!(
        sample(&parse_metrics(&body), "memory_grants", &[]),
        Some(3.0)
    );
}

#[test]
fn a_faulty_grants_file_refuses_to_start() {
    let fixture = Fixture::new();
    let dir = fixture.dir.path();
    for (name, text) in [
        ("empty.toml", String::new()),
        ("bad.toml", "[[grant]]\nname = \"x\"\n".to_owned()),
        (
            "bad.json",
            json!({"grant": [{"name": "x", "token_sha256": "00", "operations": ["*"]}]})
                .to_string(),
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        let outcome = fixture.run(&[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--grants",
            path.to_str().expect("UTF-8"),
        ]);
        let message = outcome.refused("invalid-input");
        assert!(message.contains(name), "{message}");
    }
    let missing = dir.join("missing.toml");
    let outcome = fixture.run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--grants",
        missing.to_str().expect("UTF-8"),
    ]);
    outcome.refused("invalid-input");
    // The hook's token must hold a grant of the file.
    let grants = write_grants(dir, &grants_text(&[("ana", ANA)]));
    let hook_token = dir.join("hook-token");
    std::fs::write(&hook_token, "unknown-token\n").expect("write");
    let outcome = fixture.run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--grants",
        grants.to_str().expect("UTF-8"),
        "--hook-token-file",
        hook_token.to_str().expect("UTF-8"),
    ]);
    assert!(outcome.refused("invalid-input").contains("holds no grant"));
}

#[tokio::test]
async fn the_discovery_file_names_the_hook_token_whose_grant_bounds_the_hook() {
    let fixture = Fixture::new();
    let dir = fixture.dir.path();
    let grants = write_grants(dir, &grants_text(&[("ana", ANA), ("bob", BOB)]));
    let hook_token = dir.join("hook-token");
    std::fs::write(&hook_token, format!("{ANA}\n")).expect("write");
    let server = start(
        &fixture,
        &grants,
        &["--hook-token-file", hook_token.to_str().expect("UTF-8")],
    );
    let discovery = server.discovery();
    assert_eq!(discovery.token.as_deref(), Some(ANA));
    let hook = McpClient::http(&discovery.url, discovery.token.as_deref())
        .await
        .expect("the hook's token is accepted");
    hook.success(
        "memory_thread_append",
        json!({"thread": "session-1", "record": user_record("I moved to Porto.")}),
    )
    .await;
    hook.refused(
        "memory_recall",
        recall("bob", "bob", "Porto", "lexical"),
        "forbidden",
    )
    .await;
    hook.close().await;
}

/// Two grants in one namespace, each with its own scope: documents are filtered by scope.
fn shared(name: &str, token: &str) -> String {
    format!(
        r#"
[[grant]]
name = "{name}"
token_sha256 = "{digest}"
operations = ["*"]
read_scopes = ["{name}"]
write_scopes = ["{name}"]
default_namespace = {{ name = "team", version = 1, identity = {{ team = "t1" }} }}
default_scope = "{name}"

[[grant.namespaces]]
name = "team"
identity = {{ team = "t1" }}
"#,
        digest = token_digest(token),
    )
}

#[tokio::test]
async fn in_a_shared_namespace_a_document_of_another_scope_is_absent_and_cannot_be_replaced() {
    let fixture = Fixture::new();
    let text = format!("{}{}", shared("ana", ANA), shared("bob", BOB));
    let grants = write_grants(fixture.dir.path(), &text);
    let server = start(&fixture, &grants, &[]);
    let ana = McpClient::http(&server.url, Some(ANA)).await.expect("ana");
    let bob = McpClient::http(&server.url, Some(BOB)).await.expect("bob");
    let team = json!({"name": "team", "version": 1, "identity": {"team": "t1"}});
    ana.success(
        "memory_remember",
        json!({"text": "Ana's draft budget.", "id": "budget"}),
    )
    .await;
    bob.success(
        "memory_remember",
        json!({"text": "Bob's salary notes.", "id": "salary"}),
    )
    .await;
    let listed = ana.success("memory_list", json!({})).await;
    let ids: Vec<&str> = listed["documents"]
        .as_array()
        .expect("documents")
        .iter()
        .map(|document| document["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["budget"]);
    let got = ana
        .success("memory_get", json!({"namespace": team, "id": "salary"}))
        .await;
    assert_eq!(got["document"], Value::Null, "absent to ana");
    ana.refused(
        "memory_remember",
        json!({"text": "Ana overwrites Bob.", "id": "salary"}),
        "forbidden",
    )
    .await;
    ana.refused(
        "memory_forget",
        json!({"id": "salary", "reason": "mine"}),
        "forbidden",
    )
    .await;
    let got = bob
        .success("memory_get", json!({"namespace": team, "id": "salary"}))
        .await;
    assert_eq!(got["document"]["content"]["text"], "Bob's salary notes.");
    ana.close().await;
    bob.close().await;
}

/// The journey over days on a shared server: each tenant's memory outlives a restart of the server,
/// a second session on the next day recalls what the first said, and the other tenant, on the same
/// database, still never sees it.
#[tokio::test]
async fn a_tenants_memory_outlives_a_restart_and_stays_its_own() {
    let fixture = Fixture::new();
    let grants = write_grants(
        fixture.dir.path(),
        &grants_text(&[("ana", ANA), ("bob", BOB)]),
    );
    let server = start(&fixture, &grants, &[]);
    let monday = McpClient::http(&server.url, Some(ANA)).await.expect("ana");
    monday
        .success(
            "memory_remember",
            json!({"text": "Ana's sister grows tomatoes in Porto."}),
        )
        .await;
    monday
        .success(
            "memory_thread_append",
            json!({"thread": "ana-monday", "record": user_record("I moved to Lisbon last spring.")}),
        )
        .await;
    monday.close().await;
    assert!(server.stop().success());

    let server = start(&fixture, &grants, &[]);
    let tuesday = McpClient::http(&server.url, Some(ANA)).await.expect("ana");
    let found = tuesday
        .success(
            "memory_search",
            json!({"query": "where do the tomatoes grow"}),
        )
        .await;
    assert!(
        found["text"]
            .as_str()
            .is_some_and(|text| text.contains("Porto")),
        "{found:#}"
    );
    tuesday
        .success(
            "memory_thread_append",
            json!({"thread": "ana-monday", "record": user_record("And I work from home now.")}),
        )
        .await;
    let bob = McpClient::http(&server.url, Some(BOB)).await.expect("bob");
    let found = bob
        .success(
            "memory_search",
            json!({"query": "where do the tomatoes grow"}),
        )
        .await;
    assert!(cited_documents(&found).is_empty(), "{found:#}");
    assert_eq!(
        bob.success("memory_list", json!({})).await["documents"],
        json!([])
    );
    bob.refused(
        "memory_thread_append",
        json!({"thread": "ana-monday", "record": user_record("Bob was here.")}),
        "forbidden",
    )
    .await;
    tuesday.close().await;
    bob.close().await;
}
