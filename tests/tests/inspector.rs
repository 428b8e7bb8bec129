//! The web inspector (`/ui` of `memory serve --http`) over HTTP, as a browser would drive it: sign in
//! with a token exchanged for a session cookie (HttpOnly, SameSite=Strict, never in a URL); ana
//! searches and sees her passage with its provenance, its `<script>` shown as text under a policy
//! that runs no script; bob's token sees none of it and forgets none of it; ana forgets it from the
//! page, and `memory recall` finds it no more; a wrong token, a cross-origin form post, a session
//! from before a restart and a server without a token are each answered plainly.

use std::ffi::OsStr;

use integration_tests::hook::{additional_context, claude_input, run_hook};
use integration_tests::product::Fixture;
use integration_tests::serving::{HttpServer, everything_grant, ready, tenant_grant};
use reqwest::header::{CONTENT_SECURITY_POLICY, COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use reqwest::redirect::Policy;
use serde_json::{Value, json};

const ANA: &str = "ana-ui-token-71c2";
const BOB: &str = "bob-ui-token-0d4e";
const OPS: &str = "ops-ui-token-5a90";
const TEXT: &str = "<script>alert(1)</script> Ana grows tomatoes in Porto.";

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .expect("a client")
}

fn put(fixture: &Fixture) {
    let argument = json!({
        "namespace": {"name": "notes", "version": 1, "identity": {"user": "ana"}},
        "id": "tomatoes", "operation_id": "tomatoes-1", "expected_revision": null,
        "locator": "thread:chat-1#4", "scopes": ["ana"],
        "content": {"text": TEXT, "attributions": [{"origin_id": "thread-record/chat-1/4",
            "speaker": "ana", "observers": [], "locator": "thread:chat-1#4",
            "activity_at": 1_760_000_000_000i64, "interpretation": "stated"}],
            "metadata": {}, "recorded_at": 0, "extracted_at": 0}
    });
    fixture.call("put", &argument).success();
}

/// The sign-in form posted with `token`, as a page of `origin` sends it.
async fn post_login(base: &str, origin: &str, token: &str) -> reqwest::Response {
    client()
        .post(format!("{base}/ui/login"))
        .header(ORIGIN, origin)
        .form(&[("token", token)])
        .send()
        .await
        .expect("the server answers")
}

/// Signs in with `token`; answers the session cookie (`name=value`).
async fn sign_in(base: &str, token: &str) -> String {
    let response = post_login(base, base, token).await;
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()[LOCATION], "/ui/memories");
    let cookie = response.headers()[SET_COOKIE]
        .to_str()
        .expect("a cookie")
        .to_owned();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(
        !cookie.contains(token)
            && !response.headers()[LOCATION]
                .to_str()
                .unwrap_or("")
                .contains(token)
    );
    cookie.split(';').next().expect("name=value").to_owned()
}

async fn page(base: &str, path: &str, cookie: &str) -> (u16, String, Option<String>) {
    let response = client()
        .get(format!("{base}{path}"))
        .header(COOKIE, cookie)
        .send()
        .await
        .expect("the server answers");
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get(LOCATION)
        .map(|location| location.to_str().unwrap_or("").to_owned());
    (status, response.text().await.expect("a body"), location)
}

/// Posts a form of the inspector's `path` with the session `cookie`, from `origin`.
async fn post_form(
    base: &str,
    path: &str,
    cookie: &str,
    origin: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    client()
        .post(format!("{base}{path}"))
        .header(COOKIE, cookie)
        .header(ORIGIN, origin)
        .form(fields)
        .send()
        .await
        .expect("the server answers")
}

async fn forget(base: &str, cookie: &str, origin: &str, id: &str) -> reqwest::Response {
    post_form(
        base,
        "/ui/forget",
        cookie,
        origin,
        &[("id", id), ("reason", "the user asked")],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_shows_each_token_its_own_memory_and_forgets_from_the_page() {
    let fixture = Fixture::new();
    put(&fixture);
    let grants =
        tenant_grant("ana", ANA) + &tenant_grant("bob", BOB) + &everything_grant("ops", OPS);
    let server = HttpServer::with_grants(&fixture, &grants);
    ready(&server.base()).await;
    let base = server.base();

    // The sign-in page, under a policy that runs no script.
    let response = client()
        .get(format!("{base}/ui"))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    let policy = response.headers()[CONTENT_SECURITY_POLICY]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(policy.starts_with("default-src 'none'"), "{policy}");
    assert!(!policy.contains("script-src"), "{policy}");
    assert!(
        response
            .text()
            .await
            .expect("body")
            .contains("name=\"token\"")
    );

    // A wrong token, and a form posted from another site.
    let wrong = post_login(&base, &base, "not-a-token").await;
    assert_eq!(wrong.status(), 401);
    assert!(wrong.text().await.expect("body").contains("holds no grant"));
    let forged = post_login(&base, "http://evil.example", ANA).await;
    assert_eq!(forged.status(), 403);
    assert!(forged.headers().get(SET_COOKIE).is_none());

    // Ana sees her passage with its provenance, its markup as text.
    let ana = sign_in(&base, ANA).await;
    let (status, found, _) = page(&base, "/ui/memories?q=tomatoes&mode=lexical", &ana).await;
    assert_eq!(status, 200);
    assert!(
        found.contains("&lt;script&gt;alert(1)&lt;/script&gt; Ana grows tomatoes in Porto."),
        "{found}"
    );
    assert!(!found.contains("<script>"), "{found}");
    assert!(found.contains("<dt>Said by</dt><dd>ana</dd>"), "{found}");
    assert!(found.contains("memory:1"), "{found}");
    assert!(found.contains("<dt>Score (lexical)</dt>"), "{found}");
    assert!(
        found.contains(
            "<li>notes (every version), identities with {&quot;user&quot;:&quot;ana&quot;}</li>"
        ),
        "what ana's grant reaches: {found}"
    );
    let (status, refused, _) = page(&base, "/ui/memories?q=tomatoes&limit=0", &ana).await;
    assert_eq!(status, 200, "{refused}");
    assert!(
        refused.contains("invalid recall limit") && refused.contains("must be positive"),
        "memory_recall's own refusal, on the page: {refused}"
    );
    assert!(!refused.contains("Porto"), "{refused}");
    let (_, small, _) = page(
        &base,
        "/ui/memories?q=tomatoes&mode=lexical&max_bytes=30",
        &ana,
    )
    .await;
    assert!(
        !small.contains("Ana grows tomatoes in Porto."),
        "a passage past the bytes asked for is not shown: {small}"
    );
    let (_, hybrid, _) = page(&base, "/ui/memories?q=tomatoes&mode=hybrid", &ana).await;
    assert!(hybrid.contains("<dt>Lexical (BM25)</dt>"), "{hybrid}");
    assert!(hybrid.contains("<dt>Embedding (cosine)</dt>"), "{hybrid}");
    assert!(hybrid.contains("<dt>Fused</dt>"), "{hybrid}");

    // Bob sees none of it and cannot forget it by naming it.
    let bob = sign_in(&base, BOB).await;
    let (_, listed, _) = page(&base, "/ui/memories", &bob).await;
    assert!(listed.contains("No memories yet."), "{listed}");
    assert!(!listed.contains("tomatoes"), "{listed}");
    let (_, searched, _) = page(&base, "/ui/memories?q=tomatoes&mode=lexical", &bob).await;
    assert!(!searched.contains("Porto"), "{searched}");
    let refused = forget(&base, &bob, &base, "tomatoes").await;
    assert_eq!(refused.status(), 404);

    // Ana's thread: a long tool run, each call beside its result, and a preview that writes nothing.
    let append = |record: Value| {
        let argument = json!({"thread": "run-1", "record": record,
            "namespace": {"name": "notes", "version": 1, "identity": {"user": "ana"}}, "scope": "ana"});
        fixture
            .run(&["thread", "append", &argument.to_string()])
            .success();
    };
    append(
        json!({"speaker": "ana", "observers": [], "occurred_at": null,
        "body": {"kind": "user_input", "text": "Run the whole test suite."}}),
    );
    for index in 0..30 {
        append(
            json!({"speaker": "assistant", "observers": [], "occurred_at": null,
            "body": {"kind": "tool_call", "call_id": format!("c{index}"), "name": "run_tests", "arguments": {}}}),
        );
        append(
            json!({"speaker": "tool", "observers": [], "occurred_at": null,
            "body": {"kind": "tool_result", "call_id": format!("c{index}"),
                     "output": format!("<b>shard {index}</b> ok"), "is_error": false}}),
        );
    }
    let (status, run, _) = page(&base, "/ui/threads?thread=run-1&budget=600", &ana).await;
    assert_eq!(status, 200, "{run}");
    assert!(run.contains("#2 tool_call"), "{run}");
    assert!(run.contains("&lt;b&gt;shard 29&lt;/b&gt; ok"), "{run}");
    assert!(!run.contains("<b>shard"), "{run}");
    assert!(run.contains("Context preview"), "{run}");
    assert!(run.contains("segments dropped"), "{run}");
    let tail = fixture.run(&["context", "run-1", "--remaining", "--budget", "600"]);
    assert_eq!(
        tail.success()["through"],
        61,
        "the preview appended nothing"
    );
    assert_eq!(tail.success()["window"]["number"], 1, "{tail:#?}");
    let (status, _, _) = page(&base, "/ui/threads?thread=run-1", &bob).await;
    assert_eq!(status, 403, "bob reaches none of ana's threads");
    let (_, listed, _) = page(&base, "/ui/threads", &ana).await;
    assert!(
        listed.contains("<a href=\"/ui/threads?thread=run-1\">run-1</a>"),
        "ana's threads are listed: {listed}"
    );
    let (_, listed, _) = page(&base, "/ui/threads", &bob).await;
    assert!(
        !listed.contains("run-1") && listed.contains("No thread of yours"),
        "{listed}"
    );

    // A forget posted from another site does nothing; from the page it forgets for good.
    assert_eq!(
        forget(&base, &ana, "http://evil.example", "tomatoes")
            .await
            .status(),
        403
    );
    let (_, still, _) = page(&base, "/ui/memories", &ana).await;
    assert!(still.contains("Ana grows tomatoes"), "{still}");
    let done = forget(&base, &ana, &base, "tomatoes").await;
    assert_eq!(done.status(), 303);
    let (_, after, _) = page(&base, "/ui/memories?forgotten=tomatoes", &ana).await;
    assert!(after.contains("Forgotten: tomatoes"), "{after}");
    assert!(after.contains("No memories yet."), "{after}");
    let recalled = fixture.call(
        "recall",
        &json!({"namespace": {"name": "notes", "version": 1, "identity": {"user": "ana"}},
                "scope": "ana", "query": "tomatoes Porto", "mode": "lexical",
                "limits": {"max_items": 5, "max_bytes": 4000, "max_tokens": 1000, "timeout_ms": 60000}}),
    );
    assert_eq!(
        recalled.success()["passages"],
        Value::Array(Vec::new()),
        "{recalled:#?}"
    );

    // The overview: for a grant to everything (it names every namespace), with this run's traffic;
    // a tenant is told it is not theirs, with a way back.
    let (status, refused, _) = page(&base, "/ui/overview", &ana).await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused.contains("Back to the inspector"), "{refused}");
    let ops = sign_in(&base, OPS).await;
    let (status, overview, _) = page(&base, "/ui/overview?hours=24", &ops).await;
    assert_eq!(status, 200, "{overview}");
    assert!(overview.contains("<dt>Latest change</dt>"), "{overview}");
    assert!(
        overview.contains("<dt>Threads pending</dt><dd>1</dd>"),
        "{overview}"
    );
    assert!(
        overview.contains("(ana): 1 threads"),
        "ana's thread under its destination: {overview}"
    );
    assert!(overview.contains("No hook errors logged."), "{overview}");
    assert!(
        overview.contains("<rect class=\"bar\""),
        "a chart of this run's writes: {overview}"
    );
    // This server's traffic: ana's forget (bob's was refused as not-found; the cross-origin one
    // never reached the store), four searches (one refused for its limits before it ran is no recall, as over MCP).
    assert!(
        overview.contains("<td>1</td><td>1</td><td>4</td><td>0</td>"),
        "{overview}"
    );

    // A session from before a restart is answered with the sign-in page and a plain message.
    drop(server);
    let server = HttpServer::with_grants(&fixture, &grants);
    ready(&server.base()).await;
    let base = server.base();
    let (status, _, location) = page(&base, "/ui/memories", &ana).await;
    assert_eq!((status, location.as_deref()), (303, Some("/ui?expired=1")));
    let (_, message, _) = page(&base, "/ui?expired=1", &ana).await;
    assert!(message.contains("Your session has ended"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_needs_no_token_keeps_the_inspector_closed() {
    let fixture = Fixture::new();
    let server = HttpServer::start(&fixture, &[], &[]);
    ready(&server.base()).await;
    let base = server.base();
    let response = client()
        .get(format!("{base}/ui"))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 403);
    assert!(
        response
            .text()
            .await
            .expect("body")
            .contains("--token-file")
    );
    let login = post_login(&base, &base, "anything").await;
    assert_eq!(login.status(), 403);
    assert!(login.headers().get(SET_COOKIE).is_none());
}

async fn edit(base: &str, cookie: &str, id: &str, revision: &str, text: &str) -> reqwest::Response {
    let fields = [("id", id), ("expected_revision", revision), ("text", text)];
    post_form(base, "/ui/edit", cookie, base, &fields).await
}

/// A person corrects what the worker remembered, from the page, with the revision the page showed:
/// a stale revision is a conflict that writes nothing, and the correction outlives the forget of the
/// words it came from (the worker's cleanup withdraws only what the source still stated).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correction_from_the_page_is_a_persons_and_the_cleanup_keeps_it() {
    let fixture = Fixture::new();
    let argument = json!({"thread": "chat-7", "record": {"speaker": "ana", "observers": [],
        "occurred_at": null, "body": {"kind": "user_input", "text": "My sister grows tomatoes in Porto."}},
        "namespace": {"name": "notes", "version": 1, "identity": {"user": "ana"}}, "scope": "ana"});
    fixture
        .run(&["thread", "append", &argument.to_string()])
        .success();
    fixture.worker_pass();

    let server = HttpServer::with_grants(
        &fixture,
        &(tenant_grant("ana", ANA) + &tenant_grant("bob", BOB)),
    );
    ready(&server.base()).await;
    let base = server.base();
    let ana = sign_in(&base, ANA).await;
    let (_, listed, _) = page(&base, "/ui/memories", &ana).await;
    assert!(
        listed.contains("My sister grows tomatoes in Porto."),
        "{listed}"
    );
    let field = |name: &str| -> String {
        let at = listed
            .find(&format!("name=\"{name}\" value=\""))
            .unwrap_or_else(|| panic!("{name} in the edit form: {listed}"));
        let rest = &listed[at + name.len() + 15..];
        rest[..rest.find('"').expect("a closing quote")].to_owned()
    };
    let (id, revision) = (field("id"), field("expected_revision"));

    // A stale revision is refused as the tools refuse it, and writes nothing.
    let stale = edit(
        &base,
        &ana,
        &id,
        "r-stale",
        "My sister grows peppers in Porto.",
    )
    .await;
    assert_eq!(stale.status(), 409, "{}", stale.text().await.expect("body"));
    let corrected = edit(
        &base,
        &ana,
        &id,
        &revision,
        "My sister grows peppers in Braga.",
    )
    .await;
    assert_eq!(corrected.status(), 303);
    let location = corrected.headers()[LOCATION]
        .to_str()
        .expect("ascii")
        .to_owned();
    let (_, after, _) = page(&base, &location, &ana).await;
    assert!(after.contains("Corrected: revision"), "{after}");
    assert!(
        after.contains("My sister grows peppers in Braga."),
        "{after}"
    );
    assert!(!after.contains("tomatoes"), "{after}");
    assert!(
        after.contains("<dt>Said by</dt><dd>grant:ana</dd>"),
        "{after}"
    );
    let (status, history, _) = page(&base, &format!("/ui/revisions?id={id}"), &ana).await;
    assert_eq!(status, 200, "{history}");
    let (corrected_at, remembered_at) = (
        history
            .find("My sister grows peppers in Braga.")
            .expect("the correction"),
        history
            .find("My sister grows tomatoes in Porto.")
            .expect("what the worker remembered"),
    );
    assert!(corrected_at < remembered_at, "newest first: {history}");
    assert!(history.contains("Back to the memories"), "{history}");

    // Ana's words are forgotten; the worker's cleanup keeps the person's correction.
    fixture
        .run(&[
            "thread",
            "forget",
            &json!({"thread": "chat-7", "sequence": 1, "reason": "asked"}).to_string(),
        ])
        .success();
    fixture.worker_pass();
    let (_, kept, _) = page(&base, "/ui/memories?q=peppers+Braga&mode=lexical", &ana).await;
    assert!(kept.contains("My sister grows peppers in Braga."), "{kept}");
    let (_, history, _) = page(&base, &format!("/ui/revisions?id={id}"), &ana).await;
    assert!(
        !history.contains("tomatoes"),
        "the forgotten words are no longer shown: {history}"
    );
    // Another token reaches none of it by URL.
    let (status, _, _) = page(
        &base,
        &format!("/ui/revisions?id={id}"),
        &sign_in(&base, BOB).await,
    )
    .await;
    assert_eq!(status, 404);
}

/// The hooks user's journey into the inspector: what the one-shot hook took on Monday and the worker
/// remembered is on the page of the server the hooks use (no `--namespace`, no `--scope`: the OS
/// user's own namespace, scope `agent`); forgetting it there, the served hook and the one-shot hook
/// no longer recall it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hooks_users_memory_is_on_the_page_and_a_forget_there_reaches_every_hook() {
    let fixture = Fixture::new();
    let ana: [(&str, &OsStr); 2] = [("USER", OsStr::new("ana")), ("LOGNAME", OsStr::new("ana"))];
    let prompt = |session: &str, text: &str| {
        let transcript = fixture.dir.path().join(format!("{session}.jsonl"));
        let input = claude_input("user-prompt-submit.json", session, &transcript, Some(text));
        run_hook(&fixture, &["prompt"], &input, &ana)
    };
    assert_eq!(
        prompt("monday", "My sister grows tomatoes in Porto.").code,
        0
    );
    fixture.worker_pass();
    let token = fixture.dir.path().join("token");
    std::fs::write(&token, format!("{ANA}\n")).expect("the token file");
    let args = [
        "--token-file".to_owned(),
        token.to_str().expect("UTF-8").to_owned(),
    ];
    let server = HttpServer::start(&fixture, &args, &ana);
    ready(&server.base()).await;
    let base = server.base();
    let cookie = sign_in(&base, ANA).await;
    let (status, listed, _) = page(&base, "/ui/memories", &cookie).await;
    assert_eq!(status, 200, "{listed}");
    assert!(
        listed.contains("My sister grows tomatoes in Porto."),
        "{listed}"
    );
    assert!(listed.contains("scope <code>agent</code>"), "{listed}");
    let asked = "What does my sister grow?";
    assert!(
        additional_context(&prompt("tuesday", asked), "UserPromptSubmit").contains("tomatoes"),
        "the served hook recalls it"
    );
    let field = "name=\"id\" value=\"";
    let at = listed.find(field).expect("a forget form") + field.len();
    let id = &listed[at..at + listed[at..].find('"').expect("a closing quote")];
    assert_eq!(forget(&base, &cookie, &base, id).await.status(), 303);
    assert!(
        !prompt("wednesday", asked).stdout.contains("tomatoes"),
        "the served hook recalls it no more"
    );
    drop(server);
    assert!(
        !prompt("thursday", asked).stdout.contains("tomatoes"),
        "nor the one-shot hook"
    );
}
