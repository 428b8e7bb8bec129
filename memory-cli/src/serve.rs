//! `memory serve`: the options it is given, checked before the store is opened, and the server's life:
//! load the model, keep the HNSW graph saved, serve stdio or HTTP, shut down cleanly.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::cli::ServeArgs;
use crate::database::{Database, Store};
use crate::discovery::{self, Discovery, DiscoveryGuard};
use crate::grants::{Grant, Grants, NamespaceRule};
use crate::http::{self, HttpState, Limits};
use crate::mcp::{MemoryServer, ServeError};
use crate::metrics::ServerMetrics;
use crate::refusal::Refusal;
use crate::semantic::SemanticBackend;
use crate::service::MemoryService;
use crate::simple::Defaults;
use memory_core::activity::ToolOutputBound;

/// How often the server saves its HNSW graph when it changed.
pub const GRAPH_SAVE_INTERVAL: Duration = Duration::from_secs(60);

/// `memory serve`'s options, checked.
#[derive(Debug)]
pub struct ServeOptions {
    /// `--http`: where to listen, with the token; `None` serves stdio.
    pub http: Option<HttpOptions>,
    /// The simple tools' namespace and scope.
    pub defaults: Option<Arc<Defaults>>,
    /// The grant a call on standard input and output holds: the server's own grant
    /// ([`Grant::server`]), or the one `--grant NAME` picks from `--grants`.
    pub local: Arc<Grant>,
    /// `--user`/`MEMORY_USER`: whose per-user namespace the server's grant holds.
    pub user: Option<String>,
    /// Where the discovery file goes while HTTP is served.
    pub discovery_path: PathBuf,
    /// The folder of `memory hook`'s error log for the database (the inspector's overview reads it).
    pub hook_dir: PathBuf,
    /// How much of a tool result's output memory_thread_append stores (`--max-tool-output-bytes`).
    pub tool_output: ToolOutputBound,
    /// The model memory_compact asks for a summary when a call says `summarize` (`--model-url`).
    pub summarizer: Option<Arc<dyn memory_model::ChatModel>>,
    /// `--context-budget`, `--context-capacity`, `--notes-id`.
    pub context: crate::settings::ContextSettings,
}

/// `--http`, its grants and its bounds.
pub struct HttpOptions {
    /// The address to bind.
    pub addr: SocketAddr,
    /// Which grant each token holds (loaded and checked before the store is opened).
    pub grants: Arc<Grants>,
    /// The token the discovery file names for the hook, if any.
    pub discovery_token: Option<String>,
    /// The bounds.
    pub limits: Limits,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("HttpOptions")
            .field("addr", &self.addr)
            .field("grants", &self.grants.count())
            .field(
                "discovery_token",
                &self.discovery_token.as_ref().map(|_| "<set>"),
            )
            .field("limits", &self.limits)
            .finish()
    }
}

impl ServeOptions {
    /// Checks the arguments: the defaults decode and come as a pair, and a non-loopback address has a
    /// token.
    pub fn new(database: &Database, arguments: &ServeArgs) -> Result<Self, Refusal> {
        let namespace = arguments.defaults.namespace()?;
        let scope = arguments.defaults.scope()?;
        let defaults = match (namespace, scope) {
            (Some(namespace), Some(scope)) => Some(Arc::new(Defaults::new(namespace, scope)?)),
            (None, None) => None,
            _ => {
                return Err(Refusal::invalid_input(
                    "--namespace and --scope (MEMORY_NAMESPACE, MEMORY_SCOPE) go together: the \
                     simple tools need both",
                ));
            }
        };
        let user = arguments.user.clone();
        let server = Arc::new(server_grant(arguments, defaults.as_ref())?);
        let mut local = Arc::clone(&server);
        let http = match arguments.http {
            Some(addr) => {
                let token = http::read_token(arguments.token_file.as_deref())?;
                http::check_token_policy(addr, token.is_some() || arguments.grants.is_some())?;
                if arguments.grants.is_some()
                    && token.is_none()
                    && (arguments.allow_any_namespace || !arguments.allow_namespace.is_empty())
                {
                    return Err(Refusal::invalid_input(
                        "--allow-namespace and --allow-any-namespace widen the server's own \
                         grant, which only the --token-file token holds beside --grants",
                    ));
                }
                let grants = Grants::new(arguments.grants.clone(), token.clone(), server)
                    .map_err(|error| Refusal::invalid_input(error.to_string()))?;
                let discovery_token = match &arguments.hook_token_file {
                    Some(path) => {
                        let hook = http::read_token_file(path)?;
                        if grants.caller(Some(&hook)).is_none() {
                            return Err(Refusal::invalid_input(format!(
                                "--hook-token-file {}: the token holds no grant of --grants",
                                path.display()
                            )));
                        }
                        Some(hook)
                    }
                    None => token,
                };
                Some(HttpOptions {
                    addr,
                    grants: Arc::new(grants),
                    discovery_token,
                    limits: arguments.limits,
                })
            }
            None => {
                if let Some(file) = &arguments.grants {
                    local = stdio_grant(file, arguments.grant.as_deref(), server)?;
                }
                None
            }
        };
        Ok(Self {
            http,
            defaults,
            local,
            user,
            discovery_path: discovery::path_for(database),
            hook_dir: crate::hook::state::dir_for(database),
            tool_output: ToolOutputBound::default(),
            summarizer: None,
            context: crate::settings::ContextSettings::new(
                arguments.context_budget,
                arguments.context_capacity,
                arguments.notes_id.clone(),
            )?,
        })
    }

    /// Bounds the tool results memory_thread_append stores at `bound`.
    pub fn with_tool_output_bound(mut self, bound: ToolOutputBound) -> Self {
        self.tool_output = bound;
        self
    }

    /// Has memory_compact ask `model` for a summary when a call says `summarize`.
    pub fn with_summarizer(mut self, model: Option<Arc<dyn memory_model::ChatModel>>) -> Self {
        self.summarizer = model;
        self
    }
}

/// The server's own grant (see [`crate::grants`]): `--namespace`, the per-user namespace of `--user`
/// (else the OS user, when known), and each `--allow-namespace` rule; every namespace with
/// `--allow-any-namespace`.
fn server_grant(arguments: &ServeArgs, defaults: Option<&Arc<Defaults>>) -> Result<Grant, Refusal> {
    let mut rules = Vec::new();
    for text in &arguments.allow_namespace {
        match crate::grants::parse_rule(text)
            .map_err(|error| Refusal::invalid_input(format!("--allow-namespace {text}: {error}")))?
        {
            Some(rule) => rules.push(rule),
            // `{"name": "*"}` is every namespace, as in a grants file.
            None => return Ok(Grant::server(None, defaults.cloned())),
        }
    }
    if arguments.allow_any_namespace {
        return Ok(Grant::server(None, defaults.cloned()));
    }
    if let Some(defaults) = defaults {
        rules.extend(NamespaceRule::exactly(defaults.address()));
    }
    // A --user given is checked (a bad one refuses to start); an OS user no namespace can hold
    // (which the hook would refuse as well) adds nothing.
    let user = match &arguments.user {
        Some(user) => Some(user_address(user)?),
        None => crate::destination::os_user().and_then(|user| user_address(&user).ok()),
    };
    if let Some(address) = user {
        rules.extend(NamespaceRule::exactly(&address));
    }
    Ok(Grant::server(Some(rules), defaults.cloned()))
}

fn user_address(user: &str) -> Result<memory_core::NamespaceAddress, Refusal> {
    Ok(memory_core::activity::destination::user_namespace(user)?)
}

/// The grant `--grant NAME` names in the grants file `file`, for standard input and output; the file
/// is read once (SIGHUP re-reads grants over HTTP only).
fn stdio_grant(file: &Path, name: Option<&str>, server: Arc<Grant>) -> Result<Arc<Grant>, Refusal> {
    let Some(name) = name else {
        return Err(Refusal::invalid_input(
            "--grants on standard input and output needs --grant NAME: there is no bearer token \
             to pick a grant by",
        ));
    };
    let grants = Grants::new(Some(file.to_owned()), None, server)
        .map_err(|error| Refusal::invalid_input(error.to_string()))?;
    grants.named(name).ok_or_else(|| {
        Refusal::invalid_input(format!(
            "--grant {name}: {} has no grant of that name",
            file.display()
        ))
    })
}

/// Serves until stdin closes (stdio) or SIGINT/SIGTERM (HTTP), then saves the graph and stops the
/// indexer.
/// `service` is the one builder's ([`MemoryService::open`] with
/// [`crate::recall_service::Indexing::Following`]): its
/// semantic backend is the one the server loads, saves and stops.
pub async fn serve<S: Store>(
    service: MemoryService<S>,
    options: ServeOptions,
) -> Result<(), ServeError> {
    let store = Arc::clone(service.store());
    let semantic = service.recall().semantic().cloned().ok_or_else(|| {
        ServeError::Start("a server's services follow the store with a semantic index".to_owned())
    })?;
    let metrics = Arc::new(ServerMetrics::new());
    if let Some(model) = &options.summarizer {
        metrics.watch_model(Arc::clone(model));
    }
    let server = MemoryServer::new(
        Arc::new(service),
        options.defaults,
        options.local,
        options.user,
        Arc::clone(&metrics),
    )
    .with_tool_output_bound(options.tool_output)
    .with_summarizer(options.summarizer)
    .with_context_settings(options.context);
    {
        let watched = server.clone();
        metrics.watch_folds(Arc::new(move || watched.fold_stats()));
    }
    // The graph the indexer keeps up to date is saved now and then (a no-op when unchanged), so a
    // restart after a crash loads a recent one rather than rebuilding; shutdown saves it too.
    let saver = {
        let semantic = Arc::clone(&semantic);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(GRAPH_SAVE_INTERVAL);
            every.tick().await;
            loop {
                every.tick().await;
                semantic.save_graph().await;
            }
        })
    };
    let served = match options.http {
        None => {
            // The model and the stored vectors are loaded before the first request is read, so the
            // first recall does not pay for them (a failed load leaves lexical and writes working).
            semantic.load_now().await;
            crate::mcp::serve_stdio(server).await
        }
        Some(http) => {
            serve_http(
                store,
                &semantic,
                server,
                metrics,
                http,
                options.discovery_path,
                options.hook_dir,
            )
            .await
        }
    };
    saver.abort();
    semantic.shutdown().await;
    served
}

async fn serve_http<S: Store>(
    store: Arc<S>,
    semantic: &Arc<SemanticBackend<S>>,
    server: MemoryServer<S>,
    metrics: Arc<ServerMetrics>,
    options: HttpOptions,
    discovery_path: PathBuf,
    hook_dir: PathBuf,
) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|error| {
            ServeError::Http(format!("could not listen on {}: {error}", options.addr))
        })?;
    let local = listener
        .local_addr()
        .map_err(|error| ServeError::Http(error.to_string()))?;
    // Listening for SIGTERM before anything is announced: a supervisor may stop the server as soon
    // as it reads the line below.
    let shutdown = crate::signals::shutdown_signal();
    let grants = Arc::clone(&options.grants);
    metrics.set_grants(grants.count());
    {
        let grants = Arc::clone(&grants);
        let metrics = Arc::clone(&metrics);
        crate::signals::on_hangup(move || match grants.reload() {
            Ok(count) => {
                metrics.grants_loaded(Ok(count));
                eprintln!("memory: SIGHUP: grants re-read, {count} in force");
            }
            Err(error) => {
                metrics.grants_loaded(Err(()));
                eprintln!("memory: SIGHUP: {error}; the previous grants stay in force");
            }
        });
    }
    let state = HttpState::new(store, Arc::clone(semantic), metrics, hook_dir);
    // The socket answers (/healthz says "starting") while the model loads.
    state.start_loading();
    let url = http::mcp_url(local);
    let guard = DiscoveryGuard::publish(
        discovery_path,
        &Discovery {
            version: discovery::VERSION,
            url: url.clone(),
            pid: std::process::id(),
            token: options.discovery_token.clone(),
        },
    )
    .map_err(|error| ServeError::Http(error.to_string()))?;
    // The one line a supervisor or a test reads: where the server listens (never the token).
    eprintln!("memory: serving MCP at {url}");
    let served = http::serve_http(listener, server, state, grants, options.limits, shutdown).await;
    drop(guard);
    served
}
