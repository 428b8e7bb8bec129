//! The web inspector at `/ui` of `memory serve --http`: the same process and port as `/mcp`, pages
//! rendered on the server with no script, and nothing fetched from elsewhere (the one style sheet is
//! in the binary), so it works offline.
//!
//! - **Sign-in.** A token is required even on loopback: it is entered once in the page, checked
//!   against the grants (`--grants`, or the server's own token) and exchanged for a session cookie
//!   ([`session`]); it never appears in a URL. A server that admits callers without a token
//!   (loopback, none set) keeps the inspector closed and says how to open it. A wrong token, an expired session and a session from
//!   before a restart are each answered with the sign-in page and a plain message.
//! - **What a caller sees.** Every page reads through the signed-in grant, by the same functions the
//!   MCP tools call: the memories of the grant's namespace and scope (its defaults, else the server's
//!   `--namespace`/`--scope`, else where its thread appends go: `MemoryServer::memory_defaults`),
//!   newest first or searched in a recall mode, each with its
//!   provenance and citation; forgetting one, with a reason, is `memory_forget`. A thread's records
//!   (tool calls beside their results, forgotten ones as placeholders, compactions and rollovers) are
//!   `memory_history_read`'s, and its context preview is `memory_context` with no memory and no
//!   rollover, so it recalls nothing, fills no cache and writes nothing.
//! - **Untrusted text.** Memory text is rendered escaped, under a strict Content-Security-Policy (no
//!   script at all, styles from this origin only, no framing), `nosniff` and `no-store`.
//! - **State changes** are `POST` forms whose `Origin` (or `Sec-Fetch-Site`) must be this server's
//!   own: a cross-origin form post is refused (`403`) before anything is read.
//!
//! Decisions: server-rendered HTML (maud) and one CSS file are the smallest stack that does this well:
//! no build step, no JavaScript to audit, and every page works with the keyboard and at any zoom.
//! - **Overview** (`overview.rs`): the store, the index, the worker, the hook's errors and charts of
//!   the last day's writes and recall latency, for the grants that read `/metrics`.

mod overview;
mod pages;
pub mod session;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, Query, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HOST, LOCATION, ORIGIN, REFERRER_POLICY,
    SET_COOKIE, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::Markup;
use serde::Deserialize;

use crate::context::ContextOperation;
use crate::database::Store;
use crate::grants::{Grant, GrantedOperation, Grants};
use crate::http::HttpState;
use crate::list::ListArguments;
use crate::mcp::MemoryServer;
use crate::refusal::Refusal;
use crate::service::Operation;
use crate::simple::{self, ForgetArguments, RememberArguments};
use crate::wire::RecallMode;
use crate::wire::RecallResult;
use session::{Lookup, Sessions};

/// The policy every inspector response carries: no script, styles and forms of this origin only.
pub const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'none'; style-src 'self'; \
     img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
/// A search's limits unless the form asks others: a page has room for more than a model's turn
/// (`memory_search`'s are 5 passages, 8,000 bytes, 2,000 tokens, 10 s).
const SEARCH_ITEMS: u64 = 20;
const SEARCH_BYTES: u64 = 32_000;
const SEARCH_TOKENS: u64 = 8_000;
const SEARCH_TIMEOUT_MS: u64 = 10_000;
/// Documents the list shows.
const LIST_LIMIT: u32 = 50;

/// What the inspector's handlers share.
pub struct Inspector<S: Store> {
    server: MemoryServer<S>,
    grants: Arc<Grants>,
    sessions: Sessions,
    /// What `/healthz` and `/metrics` read: the overview shows the same.
    state: Arc<HttpState<S>>,
}

/// What the sign-in page says on a server that needs no token.
const NO_TOKEN: &str = "This server needs no token, so the inspector is closed: a token is required \
     even on loopback. Start the server with --token-file (or MEMORY_TOKEN) or --grants.";

impl<S: Store> Inspector<S> {
    /// Whether the server admits callers without a token (loopback, no token set): then the
    /// inspector admits nobody.
    fn open(&self) -> bool {
        self.grants.caller(None).is_some()
    }

    /// The inspector of `server`, whose callers sign in with a token `grants` knows; its overview
    /// reads `state`.
    pub fn new(
        server: MemoryServer<S>,
        grants: Arc<Grants>,
        state: Arc<HttpState<S>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            server,
            grants,
            sessions: Sessions::default(),
            state,
        })
    }
}

/// The inspector's routes, to nest at `/ui`.
pub fn router<S: Store>(inspector: Arc<Inspector<S>>) -> Router {
    Router::new()
        .route("/", get(index::<S>))
        .route("/style.css", get(style))
        .route("/login", post(login::<S>))
        .route("/logout", post(logout::<S>))
        .route("/overview", get(overview::overview::<S>))
        .route("/memories", get(memories::<S>))
        .route("/forget", post(forget::<S>))
        .route("/edit", post(edit::<S>))
        .route("/revisions", get(revisions::<S>))
        .route("/threads", get(threads::<S>))
        .with_state(inspector)
        .layer(axum::middleware::map_response(secured))
}

/// Adds the inspector's security headers to a response.
async fn secured(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY_VALUE),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (X_FRAME_OPTIONS, "DENY"),
        // Not `no-referrer`: under it a browser sends `Origin: null` on this page's own form posts.
        (REFERRER_POLICY, "same-origin"),
        (CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn page(status: StatusCode, markup: Markup) -> Response {
    (
        status,
        [(CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

fn redirect(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, to.to_owned())]).into_response()
}

/// Whether a state-changing request comes from this server's own pages: its `Origin` names this
/// host (or, without one or with an opaque `null`, the browser says `Sec-Fetch-Site: same-origin`).
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(HOST).and_then(|host| host.to_str().ok()) else {
        return false;
    };
    match headers.get(ORIGIN).and_then(|origin| origin.to_str().ok()) {
        Some(origin) if origin != "null" => {
            origin == format!("http://{host}") || origin == format!("https://{host}")
        }
        // No origin, or an opaque one: only the browser's own word that the post is same-origin.
        _ => headers
            .get("sec-fetch-site")
            .is_some_and(|site| site == "same-origin"),
    }
}

fn cross_origin() -> Response {
    page(
        StatusCode::FORBIDDEN,
        pages::problem(
            "Refused",
            "This form was not sent from this inspector's own pages, so nothing was done.",
        ),
    )
}

/// The signed-in grant, or where a caller without one is sent.
fn signed_in<S: Store>(
    inspector: &Inspector<S>,
    headers: &HeaderMap,
) -> Result<Arc<Grant>, &'static str> {
    match inspector.sessions.lookup(headers) {
        Lookup::Live(_, grant) => Ok(grant),
        Lookup::Expired => Err("/ui?expired=1"),
        Lookup::None => Err("/ui"),
    }
}

/// Why a state-changing form was not taken.
enum FormRefused {
    /// It was not posted from this inspector's own pages.
    CrossOrigin,
    /// No live session posted it: where to sign in.
    SignIn(&'static str),
}

impl IntoResponse for FormRefused {
    fn into_response(self) -> Response {
        match self {
            Self::CrossOrigin => cross_origin(),
            Self::SignIn(to) => redirect(to),
        }
    }
}

/// The grant behind a state-changing form: refused unless it was posted from this inspector's own
/// pages by a signed-in session.
fn form_grant<S: Store>(
    inspector: &Inspector<S>,
    headers: &HeaderMap,
) -> Result<Arc<Grant>, FormRefused> {
    if !same_origin(headers) {
        return Err(FormRefused::CrossOrigin);
    }
    signed_in(inspector, headers).map_err(FormRefused::SignIn)
}

#[derive(Deserialize)]
struct IndexQuery {
    #[serde(default)]
    expired: Option<String>,
}

async fn index<S: Store>(
    State(inspector): State<Arc<Inspector<S>>>,
    headers: HeaderMap,
    Query(query): Query<IndexQuery>,
) -> Response {
    if let Lookup::Live(..) = inspector.sessions.lookup(&headers) {
        return redirect("/ui/memories");
    }
    if inspector.open() {
        return page(StatusCode::FORBIDDEN, pages::sign_in(Some(NO_TOKEN)));
    }
    let message = query.expired.map(|_| {
        "Your session has ended (it expired, you signed out, or the server restarted). Sign in again."
    });
    page(StatusCode::OK, pages::sign_in(message))
}

async fn style() -> Response {
    (
        [(CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("style.css"),
    )
        .into_response()
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

async fn login<S: Store>(
    State(inspector): State<Arc<Inspector<S>>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if !same_origin(&headers) {
        return cross_origin();
    }
    if inspector.open() {
        return page(StatusCode::FORBIDDEN, pages::sign_in(Some(NO_TOKEN)));
    }
    let token = form.token.trim();
    // An empty token is no token, even on a server whose loopback callers need none over /mcp.
    let grant = (!token.is_empty())
        .then(|| inspector.grants.caller(Some(token)))
        .flatten();
    let Some(grant) = grant else {
        return page(
            StatusCode::UNAUTHORIZED,
            pages::sign_in(Some("That token holds no grant on this server.")),
        );
    };
    let id = inspector.sessions.open(grant);
    let mut response = redirect("/ui/memories");
    if let Ok(cookie) = HeaderValue::from_str(&session::set_cookie(&id, session::SESSION_TTL)) {
        response.headers_mut().insert(SET_COOKIE, cookie);
    }
    response
}

async fn logout<S: Store>(
    State(inspector): State<Arc<Inspector<S>>>,
    headers: HeaderMap,
) -> Response {
    if !same_origin(&headers) {
        return cross_origin();
    }
    if let Lookup::Live(id, _) = inspector.sessions.lookup(&headers) {
        inspector.sessions.close(&id);
    }
    let mut response = redirect("/ui");
    if let Ok(cookie) = HeaderValue::from_str(&session::clear_cookie()) {
        response.headers_mut().insert(SET_COOKIE, cookie);
    }
    response
}

#[derive(Deserialize)]
struct MemoriesQuery {
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    forgotten: Option<String>,
    #[serde(default)]
    edited: Option<String>,
    #[serde(default)]
    limit: Option<u64>,
    #[serde(default)]
    max_bytes: Option<u64>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

fn mode_of(name: &str) -> Option<RecallMode> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

async fn memories<S: Store>(
    State(inspector): State<Arc<Inspector<S>>>,
    headers: HeaderMap,
    Query(query): Query<MemoriesQuery>,
) -> Response {
    let grant = match signed_in(&inspector, &headers) {
        Ok(signed) => signed,
        Err(to) => return redirect(to),
    };
    let search = query.q.as_deref().map(str::trim).filter(|q| !q.is_empty());
    let operation = if search.is_some() {
        GrantedOperation::Recall
    } else {
        GrantedOperation::List
    };
    let defaults = match inspector.server.memory_defaults(&grant, operation) {
        Ok(defaults) => defaults,
        Err(refusal) => {
            return page(
                status_of(refusal.kind()),
                pages::problem("Not allowed", refusal.message()),
            );
        }
    };
    let mode_name = query.mode.as_deref().unwrap_or("hybrid");
    let Some(mode) = pages::MODES
        .contains(&mode_name)
        .then(|| mode_of(mode_name))
        .flatten()
    else {
        return page(
            StatusCode::BAD_REQUEST,
            pages::problem(
                "Unknown mode",
                "Choose one of the recall modes the form offers.",
            ),
        );
    };
    let service = inspector.server.service();
    // memory_recall checks them (a bad one is answered on the page); the inspector adds no rule.
    let limits = pages::SearchLimits {
        items: query.limit.unwrap_or(SEARCH_ITEMS),
        bytes: query.max_bytes.unwrap_or(SEARCH_BYTES),
        tokens: query.max_tokens.unwrap_or(SEARCH_TOKENS),
        timeout_ms: query.timeout_ms.unwrap_or(SEARCH_TIMEOUT_MS),
    };
    let mut notice = query
        .forgotten
        .map(|id| {
            (
                false,
                format!("Forgotten: {id}. It is no longer read, searched or listed."),
            )
        })
        .or_else(|| {
            query.edited.map(|revision| {
                (
                    false,
                    format!(
                        "Corrected: revision {revision}, yours. The worker's cleanup keeps it even \
                         when the words it came from are forgotten."
                    ),
                )
            })
        });
    let (found, listed) = match search {
        Some(text) => {
            let recalled = match recall_arguments(&defaults, text, mode, &limits) {
                Ok(arguments) => {
                    inspector
                        .server
                        .operation_call(&grant, Operation::Recall, arguments)
                        .await
                }
                Err(refusal) => Err(refusal),
            }
            .and_then(|answer| {
                serde_json::from_value::<RecallResult>(answer).map_err(|error| {
                    Refusal::new(
                        memory_core::ErrorKind::Corrupt,
                        format!("the recall's answer did not decode: {error}"),
                    )
                })
            });
            match recalled {
                Ok(found) => (Some(found), None),
                Err(refusal) => {
                    notice = Some((true, refusal.message().to_owned()));
                    (None, None)
                }
            }
        }
        None => {
            let arguments = ListArguments {
                cursor: None,
                limit: Some(LIST_LIMIT),
            };
            match simple::list(service, &defaults, &grant, arguments).await {
                Ok(listed) => (None, Some(listed)),
                Err(refusal) => {
                    notice = Some((true, refusal.message().to_owned()));
                    (None, None)
                }
            }
        }
    };
    let namespace = defaults.address().as_str().to_owned();
    page(
        StatusCode::OK,
        pages::memories(pages::MemoriesView {
            grant: grant.name(),
            reach: reach(&grant),
            limits,
            namespace: &namespace,
            scope: defaults.scope().as_str(),
            query: search,
            mode: mode_name,
            found,
            listed,
            notice,
        }),
    )
}

/// `memory_recall`'s arguments for a search of the page: the grant's default namespace and scope,
/// the query, the mode and the form's limits.
fn recall_arguments(
    defaults: &simple::Defaults,
    query: &str,
    mode: RecallMode,
    limits: &pages::SearchLimits,
) -> Result<serde_json::Value, Refusal> {
    let (name, version, identity) = defaults.address().parts().map_err(|error| {
        Refusal::new(
            memory_core::ErrorKind::Corrupt,
            format!("the default namespace does not split: {error}"),
        )
    })?;
    Ok(serde_json::json!({
        "namespace": {"name": name, "version": version, "identity": identity},
        "scope": defaults.scope().as_str(),
        "query": query,
        "mode": mode,
        "limits": {
            "max_items": limits.items, "max_bytes": limits.bytes,
            "max_tokens": limits.tokens, "timeout_ms": limits.timeout_ms,
        },
    }))
}

/// What `grant` reaches, in words.
fn reach(grant: &Grant) -> (Vec<String>, String, String, Vec<&'static str>) {
    let namespaces = grant.namespace_rules().map_or_else(
        || vec!["every namespace".to_owned()],
        |rules| {
            rules
                .iter()
                .map(crate::grants::NamespaceRule::describe)
                .collect()
        },
    );
    (
        namespaces,
        grant.read_scopes().describe(),
        grant.write_scopes().describe(),
        grant.operations().map(GrantedOperation::as_str).collect(),
    )
}

/// The status a refusal is answered with on a page.
fn status_of(kind: memory_core::ErrorKind) -> StatusCode {
    use memory_core::ErrorKind;
    match kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::BAD_REQUEST,
    }
}

#[derive(Deserialize)]
struct ForgetForm {
    id: String,
    reason: String,
}

async fn forget<S: Store>(
    State(inspector): State<Arc<Inspector<S>>>,
    headers: HeaderMap,
    Form(form): Form<ForgetForm>,
) -> Response {
    let grant = match form_grant(&inspector, &headers) {
        Ok(grant) => grant,
        Err(refused) => return refused.into_response(),
    };
    let answer = inspector
        .server
        .forget_as(
            &grant,
            inspector
                .server
                .memory_defaults(&grant, GrantedOperation::Forget)
                .map(|defaults| {
                    let arguments = ForgetArguments {
                        id: form.id.clone(),
                        reason: form.reason,
                    };
                    (defaults, arguments)
                }),
        )
        .await;
    match answer {
        Ok(_) => redirect(&format!("/ui/memories?forgotten={}", shown_id(&form.id))),
        Err(refusal) => page(
            status_of(refusal.kind()),
            pages::problem("Not forgotten", refusal.message()),
        ),
    }
}

/// An id or revision as a redirect's query shows it back: its plain characters only.
fn shown_id(id: &str) -> String {
    id.chars()
        .filter(|character| character.is_ascii_alphanumeric() || "-_.:".contains(*character))
        .collect()
}

#[derive(Deserialize)]
struct RevisionsQuery {
    id: String,
}

/// Revisions a page shows, newest first.
const REVISIONS_SHOWN: usize = 100;

/// A memory's revisions, newest first, as `memory_get`'s `revisions` reads them for the grant.
async fn revisions<S: Store>(
    State(inspector): State<Arc<Inspector<S>>>,
    headers: HeaderMap,
    Query(query): Query<RevisionsQuery>,
) -> Response {
    let grant = match signed_in(&inspector, &headers) {
        Ok(signed) => signed,
        Err(to) => return redirect(to),
    };
    let read = match inspector
        .server
        .memory_defaults(&grant, GrantedOperation::Get)
        .and_then(|defaults| defaults.key(&query.id))
    {
        Ok(key) => {
            inspector
                .server
                .service()
                .history(&key, REVISIONS_SHOWN, Some(&grant))
                .await
        }
        Err(refusal) => Err(refusal),
    };
    match read {
        Ok(revisions) if revisions.is_empty() => page(
            StatusCode::NOT_FOUND,
            pages::problem("No such memory", "No memory you may read has this id."),
        ),
        Ok(revisions) => page(
            StatusCode::OK,
            pages::revisions(grant.name(), &query.id, &revisions),
        ),
        Err(refusal) => page(
            status_of(refusal.kind()),
            pages::problem("Not shown", refusal.message()),
        ),
    }
}

#[derive(Deserialize)]
struct EditForm {
    id: String,
    expected_revision: String,
    text: String,
}

/// A person's correction of a memory: `memory_remember` with the document's id and the revision the
/// page showed, said by the signed-in grant's principal. A memory changed since is a `conflict`,
/// and nothing is written; the new revision is not the worker's, so its cleanup never undoes it.
async fn edit<S: Store>(
    State(inspector): State<Arc<Inspector<S>>>,
    headers: HeaderMap,
    Form(form): Form<EditForm>,
) -> Response {
    let grant = match form_grant(&inspector, &headers) {
        Ok(grant) => grant,
        Err(refused) => return refused.into_response(),
    };
    let mut metadata = serde_json::Map::new();
    metadata.insert(
        "correction".to_owned(),
        serde_json::json!({"by": grant.principal(), "of_revision": form.expected_revision, "via": "inspector"}),
    );
    let answer = inspector
        .server
        .remember_as(
            &grant,
            inspector
                .server
                .memory_defaults(&grant, GrantedOperation::Remember)
                .map(|defaults| {
                    let arguments = RememberArguments {
                        text: form.text,
                        id: Some(form.id),
                        expected_revision: Some(form.expected_revision),
                        speaker: Some(grant.principal()),
                        metadata: Some(metadata),
                    };
                    (defaults, arguments)
                }),
        )
        .await;
    match answer {
        Ok(receipt) => {
            let revision = receipt["revision"].as_str().unwrap_or_default();
            redirect(&format!("/ui/memories?edited={}", shown_id(revision)))
        }
        Err(refusal) => page(
            status_of(refusal.kind()),
            pages::problem("Not corrected", refusal.message()),
        ),
    }
}

#[derive(Deserialize)]
struct ThreadsQuery {
    #[serde(default)]
    thread: Option<String>,
    #[serde(default)]
    budget: Option<u64>,
    #[serde(default)]
    after: Option<u64>,
    #[serde(default)]
    threads_after: Option<String>,
}

/// Threads the list shows a page.
const THREADS_LISTED: usize = 50;

/// The preview's budget when the form names none.
const PREVIEW_BUDGET: u64 = 8_000;
/// Records a threads page shows.
const THREAD_RECORDS: u64 = 100;

async fn threads<S: Store>(
    State(inspector): State<Arc<Inspector<S>>>,
    headers: HeaderMap,
    Query(query): Query<ThreadsQuery>,
) -> Response {
    let grant = match signed_in(&inspector, &headers) {
        Ok(signed) => signed,
        Err(to) => return redirect(to),
    };
    let budget = query.budget.unwrap_or(PREVIEW_BUDGET);
    let thread = query
        .thread
        .as_deref()
        .map(str::trim)
        .filter(|thread| !thread.is_empty());
    let mut view = pages::ThreadView {
        grant: grant.name(),
        thread,
        budget,
        listed: None,
        history: None,
        preview: None,
        error: None,
    };
    if thread.is_none() {
        let after = match query
            .threads_after
            .map(memory_core::activity::ThreadId::new)
            .transpose()
        {
            Ok(after) => after,
            Err(error) => {
                return page(
                    StatusCode::BAD_REQUEST,
                    pages::problem("Not listed", &error.to_string()),
                );
            }
        };
        match inspector
            .server
            .threads_of(&grant, after, THREADS_LISTED)
            .await
        {
            Ok(listed) => view.listed = Some(listed),
            Err(refusal) => view.error = Some(refusal.message().to_owned()),
        }
    }
    if let Some(thread) = thread {
        let history = inspector
            .server
            .context_call(
                &grant,
                ContextOperation::HistoryRead,
                serde_json::json!({
                    "thread": thread, "after": query.after.unwrap_or(0), "limit": THREAD_RECORDS,
                    "include": ["system", "operational"],
                }),
            )
            .await;
        let preview = inspector
            .server
            .context_call(
                &grant,
                ContextOperation::Context,
                serde_json::json!({
                    "thread": thread, "budget": budget, "memory": false, "rollover": false,
                }),
            )
            .await;
        match (history, preview) {
            (Ok(history), Ok(preview)) => {
                view.history = Some(history);
                view.preview = Some(preview);
            }
            (Err(refusal), _) | (_, Err(refusal)) => {
                let status = status_of(refusal.kind());
                view.error = Some(refusal.message().to_owned());
                return page(status, pages::thread(view));
            }
        }
    }
    page(StatusCode::OK, pages::thread(view))
}
