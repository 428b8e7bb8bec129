//! `agent_memory._native`: the extension module of the Python package `agent_memory` (distribution
//! `agent-memory`).
//!
//! It holds no memory semantics of its own. An `Engine` opens a database exactly as the `memory`
//! binary does (memory-cli's [`Database`]: a SQLite path or a `postgres://` URL) and runs every call
//! through memory-cli's services, the ones the binary and the MCP server run:
//! - the precise operations (`put`, `withdraw`, `get`, `recall`, `sync`) through [`MemoryService`],
//!   their arguments decoded by the same wire types;
//! - the thread log (`thread_append`, `thread_forget`) through [`ThreadService`];
//! - the simple operations (`remember`, `search`, `forget`, `list`) through [`memory_service::simple`],
//!   in the namespace and scope the Python `Memory` was opened with, holding
//!   [`Grant::local`] (an in-process caller owns its database); `update` is
//!   [`simple::remember`] with an expected revision, `history` [`MemoryService::history`] (every
//!   revision);
//! - one worker pass (`remember_once`): memory-cli's intent worker, then its pending pass, as one
//!   iteration of `remembering-worker`.
//!
//! Arguments and answers cross the boundary as JSON text (the wire form every interface shares); the
//! Python layer (`python/agent_memory/`) turns them into dicts and dataclasses. A refusal becomes the
//! exception class of its kind (`agent_memory.errors.from_kind`). Every call releases the GIL while
//! Rust works ([`Python::detach`]), on one tokio runtime per process, so Python threads share an
//! engine and run in parallel. The semantic index catches up before each semantic recall (memory-cli's
//! one-shot freshness), so a write is recallable in every mode as soon as it returns; the model is
//! loaded on the first semantic recall, from the assets `memory doctor` finds (`doctor`).

use std::path::Path;
use std::sync::{Arc, LazyLock};

use memory_core::{DynamicNamespace, ErrorKind, MemoryScope};
use memory_service::blocking::blocking;
use memory_service::context::{ContextOperation, ContextTools};
use memory_service::database::{Client, Database, Opened, Store};
use memory_service::destination::{
    DestinationDefaults, DestinationRequest, local_principal, local_speaker, local_user,
};
use memory_service::grants::Grant;
use memory_service::input::decode_value;
use memory_service::list::ListArguments;
use memory_service::model_settings::{ModelSettings, ModelValues};
use memory_service::recall_service::Indexing;
use memory_service::refusal::{Refusal, to_json};
use memory_service::service::{MemoryService, Operation, RawArguments};
use memory_service::settings::{Corrections, SettingValues, Settings};
use memory_service::simple::{self, Defaults, ForgetArguments, RememberArguments, SearchArguments};
use memory_service::thread::{ThreadOperation, ThreadRequest, ThreadService};
use memory_service::wire::{
    DEFAULT_HISTORY_LIMIT, HistoryResult, RecallMode, SyncArguments, key_of, revisions_limit,
};
use memory_service::worker::{
    CorrectionLinking, Intents, ModelExtraction, ProcessorStores, WorkerExtractor, WorkerSettings,
    intent_worker, pending_pass,
};
use pyo3::prelude::*;
use remembering::PendingPass;
use remembering::worker::IntentPassLimits;
use serde_json::{Map, Value, json};

/// The one runtime of the process: every engine's calls are driven on it (`block_on` from the calling
/// Python thread, with the GIL released), and the services' store calls run on its blocking pool.
static RUNTIME: LazyLock<Result<tokio::runtime::Runtime, String>> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("agent-memory")
        .enable_all()
        .build()
        .map_err(|error| format!("could not start the async runtime: {error}"))
});

fn runtime() -> Result<&'static tokio::runtime::Runtime, Refusal> {
    RUNTIME
        .as_ref()
        .map_err(|message| Refusal::unavailable(message.clone()))
}

/// One worker's passes, built on first use.
struct Worker<S: Store> {
    intents: Intents<S>,
    pending: PendingPass<S, WorkerExtractor>,
}

/// The services over one backend's store.
struct Services<S: Store> {
    memory: MemoryService<S>,
    threads: ThreadService,
    /// The context layer (`memory_context`, `memory_compact`, the history tools): one per engine, so
    /// its fold cache and a turn's references live as long as the engine.
    contexts: ContextTools<S>,
    /// Serializes this engine's worker passes (a pass holds leases; another engine or process may
    /// run its own).
    worker: tokio::sync::Mutex<Option<Worker<S>>>,
    /// How its worker links corrections (`corrections=` / `MEMORY_CORRECTIONS`).
    corrections: Corrections,
    /// The model its worker extracts with, if any (`model_url=`, `model=`, ... / `MEMORY_MODEL_*`).
    model: Option<ModelSettings>,
    /// Where a thread call or `resolve` that names no destination goes: the per-user namespace of
    /// the engine's user (`user=`, else `MEMORY_USER`, else the OS user: [`local_user`]), scope
    /// `agent`, as `memory thread append` and `memory hook` resolve it.
    defaults: DestinationDefaults,
}

impl<S: Store> Services<S> {
    /// The services over `store`, as `memory` builds them (a blocking call): the semantic index in
    /// catch-up mode with the model found by the assets lookup, the thread log beside the store.
    fn open(
        store: Arc<S>,
        settings: Settings,
        model: Option<ModelSettings>,
        defaults: DestinationDefaults,
    ) -> Result<Self, Refusal> {
        Ok(Self {
            threads: ThreadService::open(&*store)?.with_tool_output_bound(settings.tool_output),
            contexts: ContextTools::new(Arc::clone(&store), defaults.clone())
                .with_summarizer(model.as_ref().map(ModelSettings::open).transpose()?)
                .with_settings(settings.context.clone()),
            memory: MemoryService::open(store, &settings, Indexing::CatchUp)?,
            worker: tokio::sync::Mutex::new(None),
            corrections: settings.corrections,
            model,
            defaults,
        })
    }

    /// Runs one operation; `principal` is who the engine's user is (a withdrawal's `by`).
    async fn call(
        &self,
        operation: &str,
        arguments: Value,
        principal: Option<&str>,
    ) -> Result<Value, Refusal> {
        let precise = async |operation| {
            self.memory
                .execute_as(
                    &python_grant(principal),
                    operation,
                    RawArguments::Json(arguments.clone()),
                )
                .await
        };
        match operation {
            "put" => precise(Operation::Put).await,
            "withdraw" => precise(Operation::Withdraw).await,
            "get" => precise(Operation::Get).await,
            "recall" => precise(Operation::Recall).await,
            "sync" => precise(Operation::Sync).await,
            "thread_append" => self.thread(ThreadOperation::Append, arguments).await,
            "thread_forget" => self.thread(ThreadOperation::Forget, arguments).await,
            "context" => self.context(ContextOperation::Context, arguments).await,
            "compact" => self.context(ContextOperation::Compact, arguments).await,
            "history_read" => self.context(ContextOperation::HistoryRead, arguments).await,
            "history_search" => {
                self.context(ContextOperation::HistorySearch, arguments)
                    .await
            }
            "new_context" => self.context(ContextOperation::NewContext, arguments).await,
            "context_remaining" => self.context(ContextOperation::Remaining, arguments).await,
            "read_notes" => self.context(ContextOperation::ReadNotes, arguments).await,
            "write_notes" => self.context(ContextOperation::WriteNotes, arguments).await,
            "remember_once" => self.remember_once().await,
            "status" => {
                let SyncArguments {} = decode_value(arguments)?;
                let store = Arc::clone(self.memory.store());
                let vectors = {
                    let store = Arc::clone(&store);
                    blocking(move || store.open_vectors()).await??
                };
                // The index as this engine's semantic backend opens it, with its settings.
                let options = self
                    .memory
                    .recall()
                    .semantic()
                    .map(|semantic| semantic.index_options())
                    .unwrap_or_default();
                to_json(&memory_service::status::status(store, vectors, options).await?)
            }
            "resolve" => self.resolve(arguments),
            "remember" | "update" | "search" | "forget" | "list" | "history" => {
                let Simple {
                    namespace,
                    scope,
                    arguments,
                } = decode_value(arguments)?;
                let defaults = Defaults::new(namespace, MemoryScope::new(scope)?)?;
                self.simple(operation, &defaults, arguments, principal)
                    .await
            }
            other => Err(Refusal::invalid_input(format!(
                "unknown operation {other:?}"
            ))),
        }
    }

    /// The namespace and scope a `Memory` works in, resolved by the rule `memory hook` and `memory
    /// thread append` follow (a namespace, else the per-user namespace of `user`, else of the
    /// engine's user; scope `agent` by default).
    fn resolve(&self, arguments: Value) -> Result<Value, Refusal> {
        let request: DestinationRequest = decode_value(arguments)?;
        let resolved = self.defaults.resolve(&request)?;
        to_json(&json!({
            "namespace": resolved.namespace,
            "scope": resolved.scope.as_str(),
        }))
    }

    async fn thread(&self, operation: ThreadOperation, arguments: Value) -> Result<Value, Refusal> {
        // As `memory thread append` without flags: a destination the call leaves out falls back to
        // the per-user namespace of the engine's user and the scope `agent`.
        let request =
            ThreadRequest::decode(operation, RawArguments::Json(arguments), &self.defaults)?;
        self.threads.run_as(&python_grant(None), request).await
    }

    async fn context(
        &self,
        operation: ContextOperation,
        arguments: Value,
    ) -> Result<Value, Refusal> {
        // The context calls write no memory document, so no withdrawal names anyone here.
        let grant = python_grant(None);
        self.contexts
            .execute_as(
                &grant,
                operation,
                RawArguments::Json(arguments),
                &self.memory,
            )
            .await
    }

    async fn simple(
        &self,
        operation: &str,
        defaults: &Defaults,
        arguments: Value,
        principal: Option<&str>,
    ) -> Result<Value, Refusal> {
        let grant = python_grant(principal);
        let service = &self.memory;
        match operation {
            "remember" => to_json(
                &simple::remember(service, defaults, &grant, decode_value(arguments)?).await?,
            ),
            "update" => {
                let Update {
                    id,
                    text,
                    expected_revision,
                    speaker,
                    metadata,
                } = decode_value(arguments)?;
                let key = key_of(defaults.namespace(), &id)?;
                let current = service
                    .read_current(&key)
                    .await?
                    .filter(|document| document.withdrawn.is_none())
                    .ok_or_else(|| {
                        Refusal::new(
                            ErrorKind::NotFound,
                            "no current document has this id (never written, or deleted)",
                        )
                    })?;
                // Without an expected revision, `update` replaces the revision it just read (its
                // documented promise); with one, the store refuses a stale one (`conflict`).
                let expected = match expected_revision {
                    Some(revision) => revision,
                    None => current.revision.as_str().to_owned(),
                };
                let arguments = RememberArguments {
                    text,
                    id: Some(id),
                    expected_revision: Some(expected),
                    speaker,
                    metadata: Some(metadata.unwrap_or(current.content.metadata)),
                };
                to_json(&simple::remember(service, defaults, &grant, arguments).await?)
            }
            "search" => {
                let Search { query, limit, mode } = decode_value(arguments)?;
                let arguments = SearchArguments { query, limit };
                to_json(&simple::search_in_mode(service, defaults, arguments, mode).await?)
            }
            "forget" => {
                let arguments: ForgetArguments = decode_value(arguments)?;
                to_json(&simple::forget(service, defaults, &grant, arguments).await?)
            }
            "list" => {
                let arguments: ListArguments = decode_value(arguments)?;
                to_json(&simple::list(service, defaults, &grant, arguments).await?)
            }
            "history" => {
                let History { id, limit } = decode_value(arguments)?;
                let limit = revisions_limit("limit", limit.unwrap_or(DEFAULT_HISTORY_LIMIT))?;
                let key = key_of(defaults.namespace(), &id)?;
                // The one history read of `memory_get`'s revisions and `memory history`.
                let revisions = service.history(&key, limit, Some(&grant)).await?;
                to_json(&HistoryResult { revisions })
            }
            other => Err(Refusal::invalid_input(format!(
                "unknown operation {other:?}"
            ))),
        }
    }

    /// One pass of `remembering-worker`: the intent pass (remember and cleanup intents), then every
    /// thread with new records, with the binary's default processor and limits.
    async fn remember_once(&self) -> Result<Value, Refusal> {
        let mut worker = self.worker.lock().await;
        if worker.is_none() {
            let store = Arc::clone(self.memory.store());
            let stores = blocking(move || ProcessorStores::open(store)).await??;
            let corrections = self.corrections;
            let model = self.model.clone();
            let settings = WorkerSettings {
                // `model` loads the embedding model: off the async workers.
                corrections: blocking(move || CorrectionLinking::from_setting(corrections))
                    .await??,
                // Reads the key's file: off the async workers too.
                model: blocking(move || model.as_ref().map(ModelExtraction::open).transpose())
                    .await??,
                ..WorkerSettings::defaults()?
            };
            *worker = Some(Worker {
                pending: pending_pass(&stores, &settings, None)?,
                intents: intent_worker(
                    &stores,
                    settings.owner.clone(),
                    IntentPassLimits::default(),
                )?,
            });
        }
        let Some(worker) = worker.as_ref() else {
            return Err(Refusal::unavailable("the worker could not be built"));
        };
        let intents = worker.intents.run_pass().await?;
        let pending = worker.pending.run().await?;
        Ok(json!({
            "intents": intents.completed.len(),
            "threads": pending.threads,
            "processed": pending.processed,
            "settled": pending.settled,
            "parked": pending.parked,
            "failed": pending.failed,
        }))
    }
}

/// A simple operation's envelope: the `Memory`'s namespace and scope, and the call's arguments.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Simple {
    namespace: DynamicNamespace,
    scope: String,
    arguments: Value,
}

/// `update(id, text, *, expected_revision=None, metadata=None, speaker=None)`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Update {
    id: String,
    text: String,
    #[serde(default)]
    expected_revision: Option<String>,
    #[serde(default)]
    speaker: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
}

/// `search(query, *, limit=5, mode="hybrid")`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Search {
    query: String,
    #[serde(default)]
    limit: Option<u32>,
    #[serde(default)]
    mode: RecallMode,
}

/// `history(id, *, limit=100)`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct History {
    id: String,
    #[serde(default)]
    limit: Option<u32>,
}

/// The services over whichever backend the database is.
enum Backend {
    Sqlite(Services<memory_sqlite::SqliteStore>),
    Postgres(Services<memory_postgres::PostgresStore>),
}

impl Backend {
    /// Opens `db` with `settings` (the `Memory`'s keyword arguments, each missing one from its
    /// `MEMORY_*` variable as `memory` reads it: [`Settings::resolve`]), checked before the database
    /// is opened.
    fn open(
        db: &str,
        schema: Option<&str>,
        settings: SettingValues,
        model: ModelValues,
        defaults: DestinationDefaults,
    ) -> Result<Self, Refusal> {
        let settings = Settings::resolve(settings)?;
        let model = ModelSettings::resolve(model)?;
        let database = Database::select(Path::new(db), schema)?;
        Ok(match database.open(Client::MEMORY)? {
            Opened::Sqlite(store) => {
                Self::Sqlite(Services::open(store, settings, model, defaults)?)
            }
            Opened::Postgres(store) => {
                Self::Postgres(Services::open(store, settings, model, defaults)?)
            }
        })
    }

    async fn call(
        &self,
        operation: &str,
        arguments: Value,
        principal: Option<&str>,
    ) -> Result<Value, Refusal> {
        match self {
            Self::Sqlite(services) => services.call(operation, arguments, principal).await,
            Self::Postgres(services) => services.call(operation, arguments, principal).await,
        }
    }
}

/// An open database and the services over it. Shared by Python threads: every call releases the GIL.
#[pyclass(frozen, name = "Engine", module = "agent_memory._native")]
struct Engine {
    backend: Arc<Backend>,
    /// Who the engine's user is: `user:NAME` for the `user` it was opened with, else `MEMORY_USER`,
    /// else the OS user, as `memory withdraw` names it ([`local_principal`]).
    principal: Option<String>,
    /// The user it was opened with, else `MEMORY_USER`, else the OS user ([`local_user`]); `None`
    /// when no user is known.
    #[pyo3(get)]
    user: Option<String>,
    /// Who speaks the user's words when a call names no speaker ([`local_speaker`]): the hook's
    /// default too.
    #[pyo3(get)]
    speaker: String,
}

#[pymethods]
impl Engine {
    /// Opens `db` (a SQLite path, created when missing, or a `postgres://` URL with an optional
    /// `schema`), as `memory --db DB [--schema NAME]` does, for `user` (who its withdrawals name),
    /// with `settings` (JSON of [`SettingValues`] and, under `model`, of [`ModelValues`]; a missing
    /// field from its `MEMORY_*` variable).
    #[new]
    #[pyo3(signature = (db, schema = None, user = None, settings = None))]
    fn new(
        py: Python<'_>,
        db: &str,
        schema: Option<&str>,
        user: Option<&str>,
        settings: Option<&str>,
    ) -> PyResult<Self> {
        // Who the engine's user is, read once: its namespace, its withdrawals and its speaker follow.
        let user = local_user(user);
        py.detach(|| {
            let (settings, model) = match settings {
                Some(text) => {
                    let mut values: Value = serde_json::from_str(text)
                        .map_err(|error| Refusal::invalid_input(format!("settings: {error}")))?;
                    let model = values
                        .as_object_mut()
                        .and_then(|values| values.remove("model"))
                        .map_or_else(|| Ok(ModelValues::default()), decode_value)?;
                    (decode_value(values)?, model)
                }
                None => (SettingValues::default(), ModelValues::default()),
            };
            let defaults = DestinationDefaults {
                user: user.clone(),
                ..DestinationDefaults::default()
            };
            Backend::open(db, schema, settings, model, defaults)
        })
        .map(|backend| Self {
            backend: Arc::new(backend),
            principal: local_principal(user.as_deref()),
            speaker: local_speaker(user.as_deref()),
            user,
        })
        .map_err(|refusal| refused(py, &refusal))
    }

    /// Runs `operation` with `arguments` (JSON text) and answers its result as JSON text.
    fn call(&self, py: Python<'_>, operation: &str, arguments: &str) -> PyResult<String> {
        let backend = Arc::clone(&self.backend);
        let principal = self.principal.as_deref();
        py.detach(|| {
            let arguments: Value = serde_json::from_str(arguments)
                .map_err(|error| Refusal::invalid_input(format!("arguments: {error}")))?;
            runtime()?.block_on(backend.call(operation, arguments, principal))
        })
        .map(|answer| answer.to_string())
        .map_err(|refusal| refused(py, &refusal))
    }
}

/// The exception of `refusal`'s kind (`agent_memory.errors.from_kind(kind, message)`).
fn refused(py: Python<'_>, refusal: &Refusal) -> PyErr {
    let exception = py
        .import("agent_memory.errors")
        .and_then(|errors| errors.getattr("from_kind"))
        .and_then(|from_kind| from_kind.call1((refusal.kind().as_str(), refusal.message())));
    match exception {
        Ok(exception) => PyErr::from_value(exception),
        Err(error) => error,
    }
}

/// `memory doctor`'s report as JSON text: where the model assets are looked for, what is missing, and
/// the command that fetches them.
#[pyfunction]
fn doctor() -> PyResult<String> {
    serde_json::to_string(&memory_service::doctor::doctor())
        .map_err(|error| pyo3::exceptions::PyRuntimeError::new_err(error.to_string()))
}

/// The engine's embedding model (all-MiniLM-L6-v2, the default profile), loaded on first use from
/// the assets `memory doctor` finds: the vectors a semantic recall compares. Offered so a Python
/// caller (the bench's LangGraph `InMemoryStore`) can embed with exactly the engine's model.
static EMBEDDER: LazyLock<Result<semantic_index::FastembedEmbedder, Refusal>> =
    LazyLock::new(|| {
        let profile = semantic_index::SemanticProfile::minilm_l6_v2();
        semantic_index::FastembedEmbedder::load(&semantic_index::ModelAssets::from_env(), &profile)
            .map_err(Refusal::from)
    });

/// Embeds `texts` with the engine's model (as queries when `query`); 384 floats per text.
#[pyfunction]
#[pyo3(signature = (texts, query = false))]
fn embed(py: Python<'_>, texts: Vec<String>, query: bool) -> PyResult<Vec<Vec<f32>>> {
    use semantic_index::Embedder as _;
    py.detach(|| {
        let embedder = EMBEDDER.as_ref().map_err(Clone::clone)?;
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = if query {
            embedder.embed_query(&texts)
        } else {
            embedder.embed(&texts)
        };
        vectors.map_err(Refusal::from)
    })
    .map_err(|refusal| refused(py, &refusal))
}

/// The extension module.
#[pymodule(name = "_native")]
fn native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Engine>()?;
    module.add_function(wrap_pyfunction!(doctor, module)?)?;
    module.add_function(wrap_pyfunction!(embed, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

/// The process is the host and owns its database (a `Memory` picks its namespace in code, never a
/// model): it holds every grant, held by the engine's user (who its withdrawals name).
fn python_grant(principal: Option<&str>) -> Grant {
    Grant::local("python", principal.map(str::to_owned))
}
