//! `memory serve --http ADDR`: the MCP server over streamable HTTP (rmcp's server transport in an axum
//! router), with `GET /healthz` and `GET /metrics` beside it.
//!
//! - `/mcp`: rmcp's `StreamableHttpService` (sessions kept in memory), behind the [`gate::Gate`]:
//!   every request's bearer token must name a grant ([`crate::grants`]: a `--grants` file, or the
//!   server's own grant the `--token-file` token holds), else it is answered `401` before rmcp sees it; the
//!   bounds of a shared server ([`Limits`]) are answered `429`/`503` with `Retry-After`. rmcp's own
//!   `Host` check (against DNS rebinding) stays on for a loopback address; on any other address the
//!   token is the guard and every host name is accepted.
//! - `/metrics`: [`ServerMetrics`] as OpenMetrics text, for the server's own token or one granted
//!   everything.
//! - `/ui`: the web inspector ([`ui`]), signed in with a token exchanged for a session cookie.
//! - `/healthz`: open to anyone (probes), telling no more than readiness: `200 {"status":"ready"}`
//!   once the store is open (it is before the socket is bound) and the model and index are loaded;
//!   `503 {"status":"starting"}` while they load, `503 {"status":"degraded"}` when the load failed
//!   (the lexical mode and writes still work; `memory doctor` says what is missing).
//!
//! Connections are accepted by `accept.rs` (hyper with a header read timeout), request bodies are
//! bounded in size (rmcp) and in stall time (tower-http's body timeout). A token is required unless
//! the address is a loopback one ([`check_token_policy`]). Requests are never logged with their
//! arguments.

mod accept;
pub mod gate;
pub mod ui;

pub use gate::Limits;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::blocking::on_blocking_pool;
use crate::database::Store;
use crate::grants::Grants;
use crate::mcp::{MemoryServer, ServeError};
use crate::metrics::{CONTENT_TYPE, IndexSnapshot, LoadedIndex, ServerMetrics};
use crate::refusal::Refusal;
use crate::semantic::SemanticBackend;

/// The path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// The environment variable holding the bearer token when no `--token-file` is given.
pub const TOKEN_ENV: &str = "MEMORY_TOKEN";

/// Most bytes of a token file: a token is a line, not a document.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The token from `--token-file PATH`, else from [`TOKEN_ENV`], trimmed; an empty one is refused.
pub fn read_token(token_file: Option<&std::path::Path>) -> Result<Option<String>, Refusal> {
    match token_file {
        Some(path) => read_token_file(path).map(Some),
        None => std::env::var(TOKEN_ENV)
            .ok()
            .map(|token| checked_token(token, TOKEN_ENV))
            .transpose(),
    }
}

/// The token in the file at `path`, trimmed; an empty one is refused.
pub fn read_token_file(path: &std::path::Path) -> Result<String, Refusal> {
    let shown = path.display();
    let bytes = crate::input::read_bounded(
        std::fs::File::open(path)
            .map_err(|error| Refusal::invalid_input(format!("token file {shown}: {error}")))?,
        MAX_TOKEN_FILE_BYTES,
    )
    .map_err(|failure| match failure {
        crate::input::ReadFailure::Refused(refusal) => refusal,
        crate::input::ReadFailure::Io(error) => {
            Refusal::invalid_input(format!("token file {shown}: {error}"))
        }
    })?;
    let token = String::from_utf8(bytes)
        .map_err(|_| Refusal::invalid_input(format!("token file {shown}: not UTF-8")))?;
    checked_token(token, &format!("token file {shown}"))
}

fn checked_token(token: String, source: &str) -> Result<String, Refusal> {
    let token = token.trim().to_owned();
    if token.is_empty() {
        return Err(Refusal::invalid_input(format!(
            "the bearer token is empty ({source})"
        )));
    }
    if token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(Refusal::invalid_input(format!(
            "the bearer token holds spaces or control characters ({source})"
        )));
    }
    Ok(token)
}

/// Refuses to serve a non-loopback address without credentials (a token or a grants file).
pub fn check_token_policy(addr: SocketAddr, has_credentials: bool) -> Result<(), Refusal> {
    if !has_credentials && !addr.ip().is_loopback() {
        return Err(Refusal::invalid_input(format!(
            "--http {addr} is not a loopback address: give a bearer token with --token-file PATH or \
             {TOKEN_ENV}, or grants with --grants FILE, or bind 127.0.0.1"
        )));
    }
    Ok(())
}

/// The MCP URL clients on this machine use for a server bound to `local`: an unspecified address
/// (`0.0.0.0`, `::`) is reached through loopback.
pub fn mcp_url(local: SocketAddr) -> String {
    let ip = match local.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)
        }
        ip => ip,
    };
    format!("http://{}{MCP_PATH}", SocketAddr::new(ip, local.port()))
}

/// What `/healthz` and `/metrics` read.
pub struct HttpState<S: Store> {
    store: Arc<S>,
    semantic: Arc<SemanticBackend<S>>,
    metrics: Arc<ServerMetrics>,
    /// Set once the first load of the model and index has finished, loaded or not.
    load_finished: AtomicBool,
    /// The folder whose log holds `memory hook`'s errors for this database (the overview shows them).
    hook_dir: std::path::PathBuf,
}

impl<S: Store> HttpState<S> {
    /// The state over the server's store, semantic index and metrics, and the folder of the hook's
    /// error log for its database.
    pub fn new(
        store: Arc<S>,
        semantic: Arc<SemanticBackend<S>>,
        metrics: Arc<ServerMetrics>,
        hook_dir: std::path::PathBuf,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            semantic,
            metrics,
            load_finished: AtomicBool::new(false),
            hook_dir,
        })
    }

    /// The server's store.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The server's metrics.
    pub fn server_metrics(&self) -> &Arc<ServerMetrics> {
        &self.metrics
    }

    /// The folder of the hook's error log.
    pub fn hook_dir(&self) -> &std::path::Path {
        &self.hook_dir
    }

    /// The store's head and the loaded index's counts (`None` for the index before the model is
    /// loaded), as `/metrics` reports them; `None` when the store cannot be read.
    pub async fn index_snapshot(&self) -> Option<IndexSnapshot> {
        let store = Arc::clone(&self.store);
        let head = match on_blocking_pool(async move { store.head().await }).await {
            Ok(Ok(head)) => head.get(),
            _ => return None,
        };
        let index = match self.semantic.loaded_index() {
            Some(index) => match index.status().await {
                Ok(status) => Some(LoadedIndex {
                    indexed: status.indexed_position,
                    chunks: status.stats.live_chunks as u64,
                    capacity: status.stats.max_chunks as u64,
                    unindexed: status
                        .unindexed
                        .into_iter()
                        .map(|(reason, count)| (reason.to_string(), count))
                        .collect(),
                    hnsw: status.stats.hnsw.as_str(),
                    compact_vectors: status.stats.compact_vectors,
                    ef_search: status.stats.hnsw_ef_search as u64,
                }),
                Err(_) => None,
            },
            None => None,
        };
        Some(IndexSnapshot { head, index })
    }

    /// Loads the model and the index (in the background, while the socket already answers).
    pub fn start_loading(self: &Arc<Self>) {
        let state = Arc::clone(self);
        tokio::spawn(async move {
            state.semantic.load_now().await;
            state.load_finished.store(true, Ordering::SeqCst);
        });
    }

    fn health(&self) -> Response {
        let (status, state) = if self.semantic.loaded_index().is_some() {
            (StatusCode::OK, "ready")
        } else if self.load_finished.load(Ordering::SeqCst) {
            (StatusCode::SERVICE_UNAVAILABLE, "degraded")
        } else {
            (StatusCode::SERVICE_UNAVAILABLE, "starting")
        };
        json_response(status, &serde_json::json!({ "status": state }))
    }

    async fn scrape(&self) -> Response {
        let Some(snapshot) = self.index_snapshot().await else {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "the store could not be read",
            )
                .into_response();
        };
        self.metrics.set_index(&snapshot);
        let mut response = self.metrics.encode().into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
        response
    }
}

fn json_response(status: StatusCode, value: &serde_json::Value) -> Response {
    let mut response = (status, value.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Serves `server` on `listener` until `shutdown` completes, then closes every MCP session: callers
/// hold the grant `grants` finds for their token, within `limits`.
pub async fn serve_http<S: Store>(
    listener: tokio::net::TcpListener,
    server: MemoryServer<S>,
    state: Arc<HttpState<S>>,
    grants: Arc<Grants>,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let local = listener
        .local_addr()
        .map_err(|error| ServeError::Http(error.to_string()))?;
    let mut config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(usize::try_from(limits.max_body_bytes).unwrap_or(usize::MAX));
    if !local.ip().is_loopback() {
        config = config.disable_allowed_hosts();
    }
    let cancel_sessions = config.cancellation_token.clone();
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(limits.session_idle_timeout());
    let sessions = Arc::new(sessions);
    let server = if grants.has_file() {
        server.with_simple_tools()
    } else {
        server
    };
    let inspector = ui::Inspector::new(server.clone(), Arc::clone(&grants), Arc::clone(&state));
    let mcp = StreamableHttpService::new(move || Ok(server.clone()), Arc::clone(&sessions), config);
    let gate = gate::Gate::new(grants, limits, sessions, Arc::clone(&state.metrics));
    let admit = {
        let gate = Arc::clone(&gate);
        from_fn(move |request: Request, next: Next| Arc::clone(&gate).admit(request, next))
    };
    let metrics_state = Arc::clone(&state);
    let protected = Router::new()
        .nest_service(MCP_PATH, mcp)
        .route(
            "/metrics",
            get(move || {
                let state = Arc::clone(&metrics_state);
                let gate = Arc::clone(&gate);
                async move {
                    state.metrics.set_sessions(gate.open_sessions().await);
                    state.scrape().await
                }
            }),
        )
        .layer(admit);
    let app = Router::new()
        .route(
            "/healthz",
            get(move || {
                let state = Arc::clone(&state);
                async move { state.health() }
            }),
        )
        .merge(protected)
        .nest("/ui", ui::router(inspector))
        .fallback(|| async { (StatusCode::NOT_FOUND, Body::empty()) })
        .layer(RequestBodyTimeoutLayer::new(limits.body_timeout()));
    accept::serve(listener, app, limits.header_timeout(), async move {
        shutdown.await;
        // Streams held open by clients (SSE) end with their sessions.
        cancel_sessions.cancel();
    })
    .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_required_off_loopback_only() {
        let loopback: SocketAddr = "127.0.0.1:0".parse().expect("address");
        let v6: SocketAddr = "[::1]:0".parse().expect("address");
        let open: SocketAddr = "0.0.0.0:8181".parse().expect("address");
        assert!(check_token_policy(loopback, false).is_ok());
        assert!(check_token_policy(v6, false).is_ok());
        assert!(check_token_policy(open, false).is_err());
        assert!(check_token_policy(open, true).is_ok());
    }

    #[test]
    fn urls_name_a_reachable_address() {
        let url = |addr: &str| mcp_url(addr.parse().expect("address"));
        assert_eq!(url("127.0.0.1:8181"), "http://127.0.0.1:8181/mcp");
        assert_eq!(url("0.0.0.0:9"), "http://127.0.0.1:9/mcp");
        assert_eq!(url("[::]:9"), "http://[::1]:9/mcp");
    }
}
