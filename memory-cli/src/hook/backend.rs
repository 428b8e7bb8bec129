//! Where a hook's appends and recalls go: the running server (found through its discovery file), or the
//! database itself, one-shot, through the same services the `memory` commands use ([`ThreadService`],
//! [`crate::recall_service::RecallService`]). Reads of the thread's tail (for the records' hook identities) always go to the
//! database: they need no model, and the server offers no tool for them.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use memory_core::ErrorKind;
use memory_core::activity::{
    NewRecord, Sequence, ThreadId, ThreadLog, ThreadRecord, ToolOutputBound,
};
use serde_json::Value;

use crate::blocking::blocking;
use crate::context::one_shot_context;
use crate::database::{Client, Database, Store, with_store};
use crate::destination::{DestinationDefaults, Resolved};
use crate::discovery::{Discovery, path_for};
use crate::hook::server::{ServerError, ServerSession};
use crate::hook::{EXPIRED_SESSION_KIND, Failure};
use crate::recall_service::{RecallQuery, one_shot_recall};
use crate::refusal::{Refusal, to_json};
use crate::settings::Settings;
use crate::thread::{ThreadAppendResult, ThreadService};
use crate::wire::{RecallArguments, RecallResult};

/// Records read per page while looking back through a thread's tail.
const TAIL_PAGE: usize = 64;

/// How a hook reaches the memory: through a running `memory serve --http` while it serves the
/// hook's namespace, directly otherwise.
///
/// A server its grant does not let serve the hook's namespace (the server of another user of the
/// machine, which holds only its own user's namespace by default) refuses as `forbidden`; the hook
/// then answers one-shot, as it would with no server at all, and says so on standard error. The hook
/// holds the database either way (it reads the thread's tail there), so this opens nothing the
/// server's grant kept closed; it only keeps a second user's hook from answering nothing.
pub struct Backend {
    /// The server's session, while the hook goes through one.
    server: Option<ServerSession>,
    /// The database.
    database: Database,
    /// The process's settings, for answering one-shot: the index's (`--max-chunks`,
    /// `--compact-vectors`, `--hnsw-ef-search`) and the bound of its appends' tool results
    /// (`--max-tool-output-bytes`).
    settings: Settings,
    /// The thread service of appends the hook makes itself after a server refused it.
    own_log: Option<OpenedLog>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(if self.is_server() {
            "Backend::Server"
        } else {
            "Backend::OneShot"
        })
    }
}

impl Backend {
    /// The server of `database` when its discovery file names one that answers within `patience`;
    /// one-shot otherwise (no file, a stale one, a server that does not open a session in time,
    /// `--no-server`). Each is said on standard error, and the hook answers one-shot rather than not
    /// at all. One-shot, it runs with `settings`.
    pub async fn find(
        database: &Database,
        settings: Settings,
        no_server: bool,
        patience: Duration,
    ) -> Self {
        let server = if no_server {
            None
        } else {
            connect(database, patience).await
        };
        Self {
            server,
            database: database.clone(),
            settings,
            own_log: None,
        }
    }

    /// Whether a server answers.
    pub fn is_server(&self) -> bool {
        self.server.is_some()
    }

    /// The tool output bound of its own appends when it appends itself (one-shot); `None` when a
    /// server appends (with the server's bound). What [`OpenedLog::open`] takes.
    pub fn one_shot_appends(&self) -> Option<ToolOutputBound> {
        match self.server {
            Some(_) => None,
            None => Some(self.settings.tool_output),
        }
    }

    /// Appends `record` to `thread` (`memory_thread_append`).
    pub async fn append(
        &mut self,
        log: &OpenedLog,
        thread: &ThreadId,
        destination: &Resolved,
        record: NewRecord,
    ) -> Result<ThreadAppendResult, Failure> {
        if let Some(session) = &mut self.server {
            // The destination is resolved here, by the hook, so the server binds the thread
            // where a one-shot hook would (the server's own defaults do not apply).
            let arguments = serde_json::json!({
                "thread": thread.as_str(),
                "namespace": destination.namespace,
                "scope": destination.scope.as_str(),
                "record": to_json(&record)?,
            });
            match tool(session, "memory_thread_append", arguments).await {
                Ok(answer) => {
                    return Ok(serde_json::from_value(answer).map_err(|error| {
                        Refusal::new(
                            ErrorKind::Corrupt,
                            format!("memory_thread_append answer: {error}"),
                        )
                    })?);
                }
                Err(failure) => self.leave_if_forbidden(failure).await?,
            }
        }
        // A log opened for a server that then refused has no service: the hook appends itself
        // after all, through a service of its own (opened once for all the hook's appends).
        let service = match &log.service {
            Some(service) => service,
            None => match &mut self.own_log {
                Some(own) => own.service()?,
                own @ None => {
                    let bound = Some(self.settings.tool_output);
                    own.insert(OpenedLog::open(&self.database, bound).await?)
                        .service()?
                }
            },
        };
        Ok(service
            .append(
                thread.clone(),
                Some(destination.destination.clone()),
                record,
            )
            .await?)
    }

    /// Recalls (`memory_recall`).
    pub async fn recall(&mut self, arguments: RecallArguments) -> Result<RecallResult, Failure> {
        if let Some(session) = &mut self.server {
            match tool(session, "memory_recall", to_json(&arguments)?).await {
                Ok(answer) => {
                    return Ok(serde_json::from_value(answer).map_err(|error| {
                        Refusal::new(ErrorKind::Corrupt, format!("memory_recall answer: {error}"))
                    })?);
                }
                Err(failure) => self.leave_if_forbidden(failure).await?,
            }
        }
        let query = RecallQuery::new(arguments)?;
        let opened = self.database.open_async(Client::HOOK).await?;
        let settings = self.settings.clone();
        Ok(with_store!(opened, store => one_shot_recall(store, settings, query).await)?)
    }

    /// Assembles the thread's turn (`memory_context`): through the server, whose references cache a
    /// retried turn reuses; one-shot as `memory context` does, the memory of an unbound thread coming
    /// from `defaults` (the hook's own destination).
    pub async fn context(
        &mut self,
        thread: &ThreadId,
        budget: u64,
        query: Option<String>,
        defaults: &DestinationDefaults,
    ) -> Result<Value, Failure> {
        if let Some(session) = &mut self.server {
            let mut arguments = serde_json::json!({"thread": thread.as_str(), "budget": budget});
            if let Some(query) = &query {
                arguments["query"] = Value::String(query.clone());
            }
            match tool(session, "memory_context", arguments).await {
                Ok(answer) => return Ok(answer),
                Err(failure) => self.leave_if_forbidden(failure).await?,
            }
        }
        let opened = self.database.open_async(Client::HOOK).await?;
        let (settings, thread) = (self.settings.clone(), thread.clone());
        // The served hook's memory_context rolls over by default: so does this one.
        let assembled = with_store!(opened, store => one_shot_context(
            store, settings, None, thread, budget, query, Some(defaults), true,
        )
        .await)?;
        Ok(to_json(&assembled)?)
    }

    /// A server's refusal: `forbidden` (its grant does not serve the hook's namespace) leaves the
    /// server for one-shot, said on standard error; anything else is the hook's failure.
    async fn leave_if_forbidden(&mut self, failure: Failure) -> Result<(), Failure> {
        if failure.kind != ErrorKind::Forbidden.as_str() {
            return Err(failure);
        }
        eprintln!(
            "memory hook: {} ({}); answering one-shot",
            failure.message, failure.kind
        );
        if let Some(session) = self.server.take() {
            session.close().await;
        }
        Ok(())
    }

    /// Ends a server session.
    pub async fn close(self) {
        if let Some(session) = self.server {
            session.close().await;
        }
    }
}

/// The session of the server the discovery file of `database` names, if one answers within
/// `patience`. Only opening the session is bounded so: it changes nothing on the server, so a hung
/// server (stopped, or stuck) is left for one-shot with no write in doubt, where a tool call cut
/// short might still be applied after the hook had appended the same record itself.
async fn connect(database: &Database, patience: Duration) -> Option<ServerSession> {
    let path = path_for(database);
    let discovery = match Discovery::read(&path) {
        Ok(Some(discovery)) => discovery,
        Ok(None) => return None,
        Err(error) => {
            eprintln!("memory hook: {error}; answering one-shot");
            return None;
        }
    };
    if !process_alive(discovery.pid) {
        eprintln!(
            "memory hook: the server in {} (pid {}) is not running; answering one-shot",
            path.display(),
            discovery.pid
        );
        return None;
    }
    match tokio::time::timeout(patience, ServerSession::connect(&discovery)).await {
        Ok(Ok(session)) => Some(session),
        Ok(Err(error)) => {
            eprintln!("memory hook: {error}; answering one-shot");
            None
        }
        Err(_) => {
            eprintln!(
                "memory hook: the server at {} (pid {}) did not open a session within {} ms; \
                 answering one-shot",
                discovery.url,
                discovery.pid,
                patience.as_millis()
            );
            None
        }
    }
}

async fn tool(session: &mut ServerSession, name: &str, arguments: Value) -> Result<Value, Failure> {
    let answer = session.call_tool(name, arguments).await.map_err(|error| {
        let kind = match error {
            ServerError::SessionExpired { .. } => EXPIRED_SESSION_KIND,
            _ => "server",
        };
        Failure::new(kind, error.to_string())
    })?;
    if answer.is_error {
        let kind = answer.content["error"]["kind"].as_str().unwrap_or("server");
        let message = answer.content["error"]["message"]
            .as_str()
            .unwrap_or("the server refused without a message");
        return Err(Failure::new(kind, format!("server: {message}")));
    }
    Ok(answer.content)
}

/// The database's thread log (and, one-shot, the thread service over it), opened for one hook.
pub struct OpenedLog {
    log: Arc<dyn ThreadLog>,
    service: Option<ThreadService>,
}

impl std::fmt::Debug for OpenedLog {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("OpenedLog").finish_non_exhaustive()
    }
}

impl OpenedLog {
    /// Opens the thread log of `database`; with `service` (a tool output bound), the thread service
    /// (and its remembering store) too, for one-shot appends bounding tool outputs at it.
    pub async fn open(
        database: &Database,
        service: Option<ToolOutputBound>,
    ) -> Result<Self, Refusal> {
        let Some(bound) = service else {
            let database = database.clone();
            let log = blocking(move || database.open_thread_log(Client::HOOK)).await??;
            return Ok(Self { log, service: None });
        };
        let opened = database.open_async(Client::HOOK).await?;
        // For PostgreSQL the log and the service share the store's connection pool.
        with_store!(opened, store => blocking(move || {
            Ok(Self {
                service: Some(ThreadService::open(&*store)?.with_tool_output_bound(bound)),
                log: store.open_thread_log()?,
            })
        })
        .await?)
    }

    fn service(&self) -> Result<&ThreadService, Refusal> {
        self.service
            .as_ref()
            .ok_or_else(|| Refusal::new(ErrorKind::Storage, "the thread service is not open"))
    }

    /// The latest record of `thread` (looking back at most `max_records`) whose opaque cursor
    /// satisfies `matches`, newest first.
    pub async fn find_in_tail(
        &self,
        thread: &ThreadId,
        max_records: u64,
        matches: impl Fn(&str) -> bool + Send + 'static,
    ) -> Result<Option<ThreadRecord>, Refusal> {
        let log = Arc::clone(&self.log);
        let thread = thread.clone();
        blocking(move || {
            let tail = log.inspect_tail(&thread)?;
            let floor = tail.get().saturating_sub(max_records);
            let mut end = tail.get();
            while end > floor {
                let after = end.saturating_sub(TAIL_PAGE as u64).max(floor);
                let page = log.read_page(&thread, Sequence::new(after), TAIL_PAGE)?;
                if let Some(found) = page.into_iter().rev().find(|record| {
                    record.sequence.get() <= end
                        && record.record.opaque_cursor.as_deref().is_some_and(&matches)
                }) {
                    return Ok(Some(found));
                }
                end = after;
            }
            Ok(None)
        })
        .await?
    }

    /// The opaque cursors of the last `max_records` records of `thread`.
    pub async fn cursors_in_tail(
        &self,
        thread: &ThreadId,
        max_records: u64,
    ) -> Result<HashSet<String>, Refusal> {
        let log = Arc::clone(&self.log);
        let thread = thread.clone();
        blocking(move || {
            let tail = log.inspect_tail(&thread)?;
            let mut after = tail.get().saturating_sub(max_records);
            let mut cursors = HashSet::new();
            while after < tail.get() {
                let page = log.read_page(&thread, Sequence::new(after), TAIL_PAGE)?;
                let Some(last) = page.last().map(|record| record.sequence.get()) else {
                    break;
                };
                cursors.extend(
                    page.into_iter()
                        .filter_map(|record| record.record.opaque_cursor),
                );
                after = last;
            }
            Ok(cursors)
        })
        .await?
    }

    /// The texts of the latest `count` user inputs of `thread` among its last `max_records` records,
    /// oldest first.
    pub async fn latest_user_inputs(
        &self,
        thread: &ThreadId,
        count: usize,
        max_records: usize,
    ) -> Result<Vec<String>, Refusal> {
        let log = Arc::clone(&self.log);
        let thread = thread.clone();
        blocking(move || {
            let tail = log.inspect_tail(&thread)?;
            let after = tail.get().saturating_sub(max_records as u64);
            let page = log.read_page(&thread, Sequence::new(after), max_records.max(1))?;
            let mut texts: Vec<String> = page
                .into_iter()
                .rev()
                .filter_map(|record| match record.record.body {
                    memory_core::activity::RecordBody::UserInput { text } => Some(text),
                    _ => None,
                })
                .take(count)
                .collect();
            texts.reverse();
            Ok(texts)
        })
        .await?
    }
}

/// Whether process `pid` is alive: on Linux `/proc/<pid>` exists; elsewhere it is assumed alive and
/// the connection decides.
fn process_alive(pid: u32) -> bool {
    let proc = std::path::Path::new("/proc");
    !proc.is_dir() || proc.join(pid.to_string()).exists()
}
