//! Conversation activity through the interfaces: `memory thread append` and `memory thread forget`, and
//! the MCP tools `memory_thread_append` and `memory_thread_forget` (same arguments, same answers).
//!
//! - **append** `{"thread": ID, "record": NewRecord}` appends one record to the thread log (the serde form
//!   of [`memory_core::activity::NewRecord`]; `observers` defaults to `[]`, `occurred_at` and
//!   `opaque_cursor` to `null`) and answers `{"thread", "sequence", "digest"}` once it is committed. The
//!   remembering worker finds it there: its committed-activity passes turn user statements into memory.
//!   The optional `namespace`, `scope` and `user` name the thread's destination
//!   ([`crate::destination`]): the first append binds the thread to it, and an append naming another
//!   one is refused as `conflict` with nothing written.
//! - **rebind** (`memory thread rebind`, the shell only: no MCP tool, since a model must never be able
//!   to move a thread's memory into another tenant) binds a thread to another destination
//!   ([`ThreadService::rebind`]).
//! - **forget** `{"thread", "sequence", "reason", "event"?}` suppresses everything the record contributed
//!   and admits its cleanup in one transaction ([`SourceEvents::record`] with
//!   [`SourceId::thread_record`]), and only then answers `{"thread", "sequence", "event", "cleanup"}`
//!   (`cleanup` is the admitted cleanup intent's id). From that answer on no recall in any mode and no
//!   `memory_get` shows a contribution of the record (see [`crate::recall_service`]); the worker's next
//!   intent pass withdraws those documents, keeping later human corrections.
//!
//! Decisions:
//! - `event` is `forget` (the default), `delete` or `revoke`: the source-event model's three events
//!   that end a record's contributions. They suppress the same way today; the name says why, for the
//!   caller's own audit. Edit is not offered: thread records are append-only (a digest names the only
//!   content a record ever has), so a correction is a new record and a forget of the old one.
//! - A forget of a sequence the thread does not have (yet) is refused as `not-found` and records
//!   nothing: suppressing a record that may be appended later would silently drop it. Sequence 0 is
//!   `invalid-input` (sequences start at 1).
//! - Forgetting a record again is not an error: it answers the same cleanup id and re-admits the
//!   cleanup if it already ran (a write may have landed since).
//! - `reason` (1 to 4,096 bytes) is required so a host states why, but it is not stored: suppression
//!   records no reason, and the cleanup's withdrawals carry the worker's own. It is never logged.
//! - Input is decoded and validated (thread id, record limits, sequence, reason) before any store is
//!   opened, so refused input writes nothing. Store calls run on tokio's blocking pool: they are
//!   synchronous transactions.

use std::sync::{Arc, OnceLock};

use memory_core::activity::suppression::{SourceEvent, SourceEvents};
use memory_core::activity::{
    NewRecord, RecordBody, RememberingStore, Sequence, SourceId, ThreadDestination, ThreadId,
    ThreadLog, ToolOutputBound, bound_tool_output,
};
use memory_core::document::EpochMillis;
use memory_core::{Clock, ErrorKind, SystemClock};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument;

use crate::blocking::blocking;
use crate::database::Store;
use crate::destination::{DestinationDefaults, DestinationRequest};
use crate::grants::{Grant, GrantedOperation, Touches};
use crate::refusal::{Refusal, to_json};
use crate::service::RawArguments;

/// Most UTF-8 bytes of a forget's reason (the same as a withdrawal's).
pub const MAX_REASON_BYTES: usize = memory_core::write::MAX_LOCATOR_BYTES;

/// One of the thread operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadOperation {
    /// `memory_thread_append`.
    Append,
    /// `memory_thread_forget`.
    Forget,
}

impl ThreadOperation {
    /// The grant's operation it needs.
    pub fn granted(self) -> GrantedOperation {
        match self {
            Self::Append => GrantedOperation::ThreadAppend,
            Self::Forget => GrantedOperation::ThreadForget,
        }
    }

    /// The MCP tool name.
    pub fn tool_name(self) -> &'static str {
        match self {
            Self::Append => "memory_thread_append",
            Self::Forget => "memory_thread_forget",
        }
    }
}

/// A record to append: the serde form of [`NewRecord`], with unknown fields refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireRecord {
    /// When it happened, epoch milliseconds; `null` (or absent) when unknown.
    #[serde(default)]
    pub occurred_at: Option<EpochMillis>,
    /// Who produced it (the user's display name, `assistant`, a tool name); at most 256 bytes.
    pub speaker: String,
    /// Who else saw it (at most 64 names of at most 256 bytes); absent means none.
    #[serde(default)]
    pub observers: Vec<String>,
    /// What it says.
    pub body: RecordBody,
    /// An opaque provider cursor (for example a response id), kept but outside the digest; at most
    /// 4,096 bytes.
    #[serde(default)]
    pub opaque_cursor: Option<String>,
}
impl From<WireRecord> for NewRecord {
    fn from(record: WireRecord) -> Self {
        Self {
            occurred_at: record.occurred_at,
            speaker: record.speaker,
            observers: record.observers,
            body: record.body,
            opaque_cursor: record.opaque_cursor,
        }
    }
}

/// Arguments of `memory_thread_append`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThreadAppendArguments {
    /// The thread: 1 to 512 bytes, no control characters.
    pub thread: String,
    /// The record; the log assigns its sequence.
    pub record: WireRecord,
    /// Where the thread's memory goes, `{"name", "version", "identity"}`; fixed by the thread's first
    /// append (a later append naming another destination is refused as `conflict`). Absent: the
    /// server's default namespace, else the per-user namespace of `user`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<memory_core::DynamicNamespace>,
    /// The scope granted to what is remembered (default: the server's, else `agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The user whose per-user namespace `{"name": "memory.user", "version": 1, "identity":
    /// {"user": USER}}` is the destination when no namespace is given (default: the server's OS
    /// user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// The answer of `memory_thread_append`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadAppendResult {
    /// The thread.
    pub thread: String,
    /// The record's position in the thread (1, 2, 3, ...).
    pub sequence: u64,
    /// SHA-256 of the record's canonical content (opaque cursor excluded), lower-case hex.
    pub digest: String,
}

/// The answer of `memory thread rebind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadRebindResult {
    /// The thread.
    pub thread: String,
    /// The binding's generation now (unchanged when the thread was already bound there).
    pub generation: u64,
}

/// Why a record's contributions must go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ForgetEvent {
    /// The user asked to forget it (the default).
    #[default]
    Forget,
    /// The record was deleted.
    Delete,
    /// Access to the record was revoked.
    Revoke,
}

impl ForgetEvent {
    fn source_event(self) -> SourceEvent {
        match self {
            Self::Forget => SourceEvent::Forget,
            Self::Delete => SourceEvent::Deleted,
            Self::Revoke => SourceEvent::Revoked,
        }
    }
}

/// Arguments of `memory_thread_forget`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThreadForgetArguments {
    /// The thread.
    pub thread: String,
    /// The record's sequence, as `memory_thread_append` answered it.
    pub sequence: u64,
    /// Why (1 to 4,096 bytes); required, not stored, never logged.
    pub reason: String,
    /// `forget` (the default), `delete` or `revoke`.
    #[serde(default)]
    pub event: ForgetEvent,
}

/// The answer of `memory_thread_forget`, given once suppression and cleanup are durable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadForgetResult {
    /// The thread.
    pub thread: String,
    /// The record's sequence.
    pub sequence: u64,
    /// The event recorded.
    pub event: ForgetEvent,
    /// The id of the admitted cleanup intent, which the worker runs to withdraw the contributions.
    pub cleanup: String,
}

/// A decoded and validated thread call.
// A request lives for one call and is consumed at once; boxing the append would only add an
// allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum ThreadRequest {
    /// `memory_thread_append`.
    Append {
        /// The thread.
        thread: ThreadId,
        /// The record, within its limits.
        record: NewRecord,
        /// Where the thread's memory goes (checked against its binding when appended).
        destination: ThreadDestination,
    },
    /// `memory_thread_forget`.
    Forget {
        /// The thread.
        thread: ThreadId,
        /// The record's sequence (at least 1).
        sequence: Sequence,
        /// The event.
        event: ForgetEvent,
    },
}

impl ThreadRequest {
    /// What it touches, for the one grant check ([`Grant::check`]): the operation, and for an
    /// append the destination's namespace and the scopes its memory is granted to. Whose thread it
    /// is (its binding) is read and checked by [`ThreadService::run_as`].
    pub fn touches(&self) -> Touches<'_> {
        let operation = Some(self.operation().granted());
        match self {
            Self::Append { destination, .. } => Touches {
                operation,
                namespace: Some(destination.namespace()),
                read_scope: None,
                write_scopes: destination.scopes(),
            },
            Self::Forget { .. } => Touches {
                operation,
                ..Touches::default()
            },
        }
    }

    /// Decodes and validates `arguments` as the arguments of `operation`; an append's destination
    /// falls back to `defaults` ([`crate::destination`]).
    pub fn decode(
        operation: ThreadOperation,
        arguments: RawArguments<'_>,
        defaults: &DestinationDefaults,
    ) -> Result<Self, Refusal> {
        match operation {
            ThreadOperation::Append => {
                let arguments: ThreadAppendArguments = arguments.decode()?;
                let thread = ThreadId::new(arguments.thread)?;
                let record = NewRecord::from(arguments.record);
                record.validate()?;
                let destination = defaults
                    .resolve(&DestinationRequest {
                        namespace: arguments.namespace,
                        scope: arguments.scope,
                        user: arguments.user,
                    })?
                    .destination;
                Ok(Self::Append {
                    thread,
                    record,
                    destination,
                })
            }
            ThreadOperation::Forget => {
                let arguments: ThreadForgetArguments = arguments.decode()?;
                let thread = ThreadId::new(arguments.thread)?;
                if arguments.sequence == 0 {
                    return Err(Refusal::invalid_input(
                        "sequence: must be at least 1 (records are numbered from 1)",
                    ));
                }
                if arguments.reason.trim().is_empty() {
                    return Err(Refusal::invalid_input("reason: must not be empty"));
                }
                if arguments.reason.len() > MAX_REASON_BYTES {
                    return Err(Refusal::too_large(
                        "reason bytes",
                        MAX_REASON_BYTES as u64,
                        arguments.reason.len() as u64,
                    ));
                }
                Ok(Self::Forget {
                    thread,
                    sequence: Sequence::new(arguments.sequence),
                    event: arguments.event,
                })
            }
        }
    }

    /// Which operation it is.
    pub fn operation(&self) -> ThreadOperation {
        match self {
            Self::Append { .. } => ThreadOperation::Append,
            Self::Forget { .. } => ThreadOperation::Forget,
        }
    }
}

/// Most threads one listing answers ([`ThreadService::threads_as`]).
pub const MAX_LISTED_THREADS: usize = 100;
/// Most thread ids one listing reads, the grant's or not: a log of many tenants is walked a piece at
/// a time, and each answer says where the next piece starts.
pub const MAX_SCANNED_THREADS: usize = 10_000;
/// Thread ids read from the log per call while listing.
const LISTING_PAGE: usize = 256;

/// A page of the threads a grant reads ([`ThreadService::threads_as`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadsPage {
    /// The grant's threads, in id order.
    pub threads: Vec<String>,
    /// Thread ids read to find them (another tenant's included).
    pub scanned: usize,
    /// Where the next page starts (pass it as `after`); `None` at the end of the log.
    pub next_after: Option<String>,
}

/// The thread operations over one database's thread log and remembering store.
#[derive(Clone)]
pub struct ThreadService {
    log: Arc<dyn ThreadLog>,
    remembering: Arc<dyn RememberingStore>,
    clock: Arc<dyn Clock>,
    tool_output: ToolOutputBound,
}

impl std::fmt::Debug for ThreadService {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ThreadService")
            .finish_non_exhaustive()
    }
}

impl ThreadService {
    /// The operations over `log` and `remembering`, stamping suppression with `clock`.
    pub fn new(
        log: Arc<dyn ThreadLog>,
        remembering: Arc<dyn RememberingStore>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            log,
            remembering,
            clock,
            tool_output: ToolOutputBound::default(),
        }
    }

    /// Bounds the output of every tool result it appends at `bound` (`--max-tool-output-bytes`;
    /// default [`memory_core::activity::DEFAULT_MAX_TOOL_OUTPUT_BYTES`]): a larger output is stored
    /// as its head and tail ([`bound_tool_output`]).
    pub fn with_tool_output_bound(mut self, bound: ToolOutputBound) -> Self {
        self.tool_output = bound;
        self
    }

    /// Opens the thread log and remembering store of `store`'s database (a blocking call).
    pub fn open<S: Store>(store: &S) -> Result<Self, Refusal> {
        Ok(Self::new(
            store.open_thread_log()?,
            store.open_remembering()?,
            Arc::new(SystemClock),
        ))
    }

    /// Runs a decoded request as `grant`'s holder, the one way in for every door (the MCP servers
    /// with the caller's grant, the command line and the Python package with their local one,
    /// [`Grant::local`]): the operation, then for a restricted grant the destination's namespace and
    /// scopes and the thread's binding (see [`crate::grants`] for what a refusal tells), are checked
    /// before anything is written.
    pub async fn run_as(&self, grant: &Grant, request: ThreadRequest) -> Result<Value, Refusal> {
        grant.check(&request.touches())?;
        if !grant.is_unrestricted() {
            let (thread, appending) = match &request {
                ThreadRequest::Append { thread, .. } => (thread.clone(), true),
                ThreadRequest::Forget { thread, .. } => (thread.clone(), false),
            };
            let log = Arc::clone(&self.log);
            let binding = blocking(move || log.binding(&thread)).await??;
            // Forgetting in a thread nobody bound tells nothing apart from another's thread; an
            // append binds it.
            grant.allow_thread(binding.as_ref(), appending)?;
        }
        self.run(request).await
    }

    /// The threads `grant` reads (bound to one of its namespaces; every thread for a grant to
    /// everything), in id order after `after`: at most `limit` (1 to [`MAX_LISTED_THREADS`]), reading
    /// at most [`MAX_SCANNED_THREADS`] ids of the log, so a listing never walks a whole large log.
    /// Needs the `thread_read` operation, as reading a thread does; the binding rule is
    /// [`Grant::allow_thread`]'s, the one every thread call is checked by.
    pub async fn threads_as(
        &self,
        grant: &Grant,
        after: Option<ThreadId>,
        limit: usize,
    ) -> Result<ThreadsPage, Refusal> {
        grant.allow_operation(GrantedOperation::ThreadRead)?;
        if !(1..=MAX_LISTED_THREADS).contains(&limit) {
            return Err(Refusal::invalid_input(format!(
                "limit must be 1 to {MAX_LISTED_THREADS}"
            )));
        }
        let log = Arc::clone(&self.log);
        let grant = grant.clone();
        blocking(move || {
            let mut page = ThreadsPage {
                threads: Vec::new(),
                scanned: 0,
                next_after: None,
            };
            let mut cursor = after;
            while page.scanned < MAX_SCANNED_THREADS {
                let wanted = LISTING_PAGE.min(MAX_SCANNED_THREADS - page.scanned);
                // One read a page: each thread with its binding.
                let listed = log.threads_with_bindings(cursor.as_ref(), wanted)?;
                let exhausted = listed.len() < wanted;
                for (id, binding) in listed {
                    page.scanned += 1;
                    let readable = grant.is_unrestricted()
                        || grant.allow_thread(binding.as_ref(), false).is_ok();
                    if readable {
                        page.threads.push(id.as_str().to_owned());
                    }
                    cursor = Some(id);
                    if page.threads.len() == limit {
                        page.next_after = cursor.map(|id| id.as_str().to_owned());
                        return Ok(page);
                    }
                }
                if exhausted {
                    return Ok(page);
                }
            }
            page.next_after = cursor.map(|id| id.as_str().to_owned());
            Ok::<_, Refusal>(page)
        })
        .await?
    }

    /// Runs a request already checked ([`Self::run_as`]).
    async fn run(&self, request: ThreadRequest) -> Result<Value, Refusal> {
        let span = tracing::debug_span!("operation", name = request.operation().tool_name());
        async move {
            let answer = match request {
                ThreadRequest::Append {
                    thread,
                    record,
                    destination,
                } => to_json(&self.append(thread, Some(destination), record).await?),
                ThreadRequest::Forget {
                    thread,
                    sequence,
                    event,
                } => to_json(&self.forget(thread, sequence, event).await?),
            };
            if let Err(refusal) = &answer {
                tracing::debug!(kind = refusal.kind().as_str(), "refused");
            }
            answer
        }
        .instrument(span)
        .await
    }

    /// `memory_thread_append`: binds an unbound thread without records to `destination`; refused as
    /// `conflict` (nothing written) when the thread is bound elsewhere. A tool result's output is
    /// bounded first ([`Self::with_tool_output_bound`]). A `compaction` or `rollover` record is
    /// refused as `invalid-input` with nothing written: they are appended by `memory_compact` and
    /// `memory_new_context` (the context layer, through the [`ThreadLog`] port), never by a caller.
    pub async fn append(
        &self,
        thread: ThreadId,
        destination: Option<ThreadDestination>,
        record: NewRecord,
    ) -> Result<ThreadAppendResult, Refusal> {
        match record.body {
            RecordBody::Compaction(_) => {
                return Err(Refusal::invalid_input(
                    "record.body: compactions are appended by memory_compact, not by \
                     memory_thread_append",
                ));
            }
            RecordBody::Rollover(_) => {
                return Err(Refusal::invalid_input(
                    "record.body: a new window is started by memory_new_context (or by the context \
                     itself), not by memory_thread_append",
                ));
            }
            _ => {}
        }
        let record = bound_tool_output(record, self.tool_output);
        let log = Arc::clone(&self.log);
        let stored =
            blocking(move || log.append_to(&thread, destination.as_ref(), record)).await??;
        Ok(ThreadAppendResult {
            thread: stored.thread.as_str().to_owned(),
            sequence: stored.sequence.get(),
            digest: stored.digest.as_str().to_owned(),
        })
    }

    /// `memory thread rebind`: binds `thread` to `destination` (see [`ThreadLog::rebind`]); the
    /// worker then remembers the thread's records again, into the new destination.
    pub async fn rebind(
        &self,
        thread: ThreadId,
        destination: ThreadDestination,
    ) -> Result<ThreadRebindResult, Refusal> {
        let log = Arc::clone(&self.log);
        let answer = thread.as_str().to_owned();
        let binding = blocking(move || log.rebind(&thread, &destination)).await??;
        Ok(ThreadRebindResult {
            thread: answer,
            generation: binding.generation,
        })
    }

    /// `memory_thread_forget`: answers only once the suppression and its cleanup intent are committed.
    pub async fn forget(
        &self,
        thread: ThreadId,
        sequence: Sequence,
        event: ForgetEvent,
    ) -> Result<ThreadForgetResult, Refusal> {
        let log = Arc::clone(&self.log);
        let events = SourceEvents::new(Arc::clone(&self.remembering), Arc::clone(&self.clock));
        let (thread, acknowledged) = blocking(move || {
            // Records are append-only, so one that exists now exists at the suppression too.
            let before = sequence.saturating_previous();
            let exists = log
                .read_page(&thread, before, 1)?
                .iter()
                .any(|record| record.sequence == sequence);
            if !exists {
                return Err(Refusal::new(
                    ErrorKind::NotFound,
                    format!("the thread has no record at sequence {sequence}"),
                ));
            }
            let source = SourceId::thread_record(&thread, sequence);
            let acknowledged = events.record(&source, &event.source_event())?;
            Ok((thread, acknowledged))
        })
        .await??;
        Ok(ThreadForgetResult {
            thread: thread.as_str().to_owned(),
            sequence: sequence.get(),
            event,
            cleanup: acknowledged.cleanup.as_str().to_owned(),
        })
    }
}

/// The thread operations of a server: the stores are opened on the first call that needs them, so a
/// server that is never asked about threads opens nothing more, and a refused call opens nothing.
pub struct ThreadTools<S> {
    store: Arc<S>,
    defaults: DestinationDefaults,
    tool_output: ToolOutputBound,
    service: OnceLock<ThreadService>,
}

impl<S> std::fmt::Debug for ThreadTools<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ThreadTools")
            .field("opened", &self.service.get().is_some())
            .finish_non_exhaustive()
    }
}

impl<S: Store> ThreadTools<S> {
    /// Thread operations over `store`'s database; appends that name no destination fall back to
    /// `defaults`.
    pub fn new(store: Arc<S>, defaults: DestinationDefaults) -> Self {
        Self {
            store,
            defaults,
            tool_output: ToolOutputBound::default(),
            service: OnceLock::new(),
        }
    }

    /// Bounds the tool results its appends store at `bound` (see
    /// [`ThreadService::with_tool_output_bound`]).
    pub fn with_tool_output_bound(mut self, bound: ToolOutputBound) -> Self {
        self.tool_output = bound;
        self
    }

    /// Runs a call as `grant`'s holder: the operation is checked before the arguments are decoded,
    /// the destination falls back to the grant's defaults (else the server's), and the rest is
    /// [`ThreadService::run_as`]'s one check.
    pub async fn execute_as(
        &self,
        grant: &Grant,
        operation: ThreadOperation,
        arguments: RawArguments<'_>,
    ) -> Result<Value, Refusal> {
        grant.allow_operation(operation.granted())?;
        let defaults = grant.destination_defaults_or(&self.defaults);
        let request = ThreadRequest::decode(operation, arguments, &defaults)?;
        self.service().await?.run_as(grant, request).await
    }

    /// The threads `grant` reads ([`ThreadService::threads_as`]).
    pub async fn threads_as(
        &self,
        grant: &Grant,
        after: Option<ThreadId>,
        limit: usize,
    ) -> Result<ThreadsPage, Refusal> {
        self.service().await?.threads_as(grant, after, limit).await
    }

    async fn service(&self) -> Result<ThreadService, Refusal> {
        if let Some(service) = self.service.get() {
            return Ok(service.clone());
        }
        let store = Arc::clone(&self.store);
        let bound = self.tool_output;
        let opened = blocking(move || {
            ThreadService::open(&*store).map(|service| service.with_tool_output_bound(bound))
        })
        .await??;
        // Two first calls may both open; one wins and the other's handles are dropped.
        Ok(self.service.get_or_init(|| opened).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::decode_value;

    fn test_defaults() -> DestinationDefaults {
        DestinationDefaults {
            user: Some("ana".to_owned()),
            ..DestinationDefaults::default()
        }
    }

    #[test]
    fn the_wire_record_reads_every_serde_form_of_a_new_record() {
        let records = [
            NewRecord::user("ana", "I live in Lisbon", 5),
            NewRecord::assistant("noted", 6),
            NewRecord {
                occurred_at: None,
                speaker: "search".to_owned(),
                observers: vec!["ana".to_owned()],
                body: RecordBody::ToolCall {
                    call_id: "c1".to_owned(),
                    name: "search".to_owned(),
                    arguments: serde_json::json!({"q": ["tea", 1, null]}),
                },
                opaque_cursor: Some("resp_1".to_owned()),
            },
            NewRecord {
                occurred_at: Some(7),
                speaker: "search".to_owned(),
                observers: Vec::new(),
                body: RecordBody::ToolResult {
                    call_id: "c1".to_owned(),
                    output: serde_json::json!("ok"),
                    is_error: false,
                },
                opaque_cursor: None,
            },
            NewRecord {
                occurred_at: Some(8),
                speaker: "assistant".to_owned(),
                observers: Vec::new(),
                body: RecordBody::RunCompleted {
                    outcome: "completed".to_owned(),
                },
                opaque_cursor: None,
            },
        ];
        for record in records {
            let json = serde_json::to_value(&record).expect("serializes");
            let wire: WireRecord = decode_value(json).expect("the serde form decodes");
            assert_eq!(NewRecord::from(wire), record);
        }
    }

    #[test]
    fn bad_thread_arguments_are_refused_with_their_kinds() {
        let user =
            serde_json::json!({"speaker": "ana", "body": {"kind": "user_input", "text": "hi"}});
        let cases = [
            (
                ThreadOperation::Append,
                serde_json::json!({"thread": "t", "record": user, "extra": 1}),
                ErrorKind::InvalidInput,
            ),
            (
                ThreadOperation::Append,
                serde_json::json!({"thread": "t", "record": {"speaker": "ana", "typo": 1,
                    "body": {"kind": "user_input", "text": "hi"}}}),
                ErrorKind::InvalidInput,
            ),
            (
                ThreadOperation::Append,
                serde_json::json!({"thread": "", "record": user}),
                ErrorKind::InvalidInput,
            ),
            (
                ThreadOperation::Append,
                serde_json::json!({"thread": "t".repeat(513), "record": user}),
                ErrorKind::TooLarge,
            ),
            (
                ThreadOperation::Append,
                serde_json::json!({"thread": "t", "record": {"speaker": "a".repeat(257),
                    "body": {"kind": "user_input", "text": "hi"}}}),
                ErrorKind::TooLarge,
            ),
            (
                ThreadOperation::Forget,
                serde_json::json!({"thread": "t", "sequence": 0, "reason": "asked"}),
                ErrorKind::InvalidInput,
            ),
            (
                ThreadOperation::Forget,
                serde_json::json!({"thread": "t", "sequence": 1, "reason": " "}),
                ErrorKind::InvalidInput,
            ),
            (
                ThreadOperation::Forget,
                serde_json::json!({"thread": "t", "sequence": 1, "reason": "r".repeat(4_097)}),
                ErrorKind::TooLarge,
            ),
            (
                ThreadOperation::Forget,
                serde_json::json!({"thread": "t", "sequence": 1, "reason": "asked", "event": "edit"}),
                ErrorKind::InvalidInput,
            ),
        ];
        for (operation, arguments, kind) in cases {
            let refusal = ThreadRequest::decode(
                operation,
                RawArguments::Json(arguments.clone()),
                &test_defaults(),
            )
            .expect_err("refused");
            assert_eq!(refusal.kind(), kind, "{arguments}: {refusal}");
        }
        let request = ThreadRequest::decode(
            ThreadOperation::Forget,
            RawArguments::Json(
                serde_json::json!({"thread": "t", "sequence": 3, "reason": "asked"}),
            ),
            &test_defaults(),
        )
        .expect("valid");
        assert!(matches!(
            request,
            ThreadRequest::Forget {
                sequence,
                event: ForgetEvent::Forget,
                ..
            } if sequence == Sequence::new(3)
        ));
    }

    #[tokio::test]
    async fn a_listing_shows_a_grant_its_own_threads_a_page_at_a_time() {
        use crate::database::{Client, Database, Opened};
        let directory = tempfile::tempdir().expect("temporary directory");
        let database = Database::Sqlite(directory.path().join("memory.sqlite"));
        let Opened::Sqlite(store) = database.open(Client::MEMORY).expect("opened") else {
            panic!("a path opens SQLite");
        };
        let service = ThreadService::open(&*store).expect("thread service");
        let destination = |user: &str| {
            DestinationDefaults {
                user: Some(user.to_owned()),
                ..DestinationDefaults::default()
            }
            .resolve(&DestinationRequest::default())
            .expect("a destination")
            .destination
        };
        for (thread, user) in [
            ("a-ana", "ana"),
            ("b-bob", "bob"),
            ("c-ana", "ana"),
            ("d-ana", "ana"),
        ] {
            service
                .append(
                    ThreadId::new(thread).expect("id"),
                    Some(destination(user)),
                    NewRecord::user(user, "hello", 1),
                )
                .await
                .expect("appended");
        }
        let ana_namespace = destination("ana");
        let ana = Grant::server(
            Some(vec![
                crate::grants::NamespaceRule::exactly(ana_namespace.namespace()).expect("a rule"),
            ]),
            None,
        );
        let first = service.threads_as(&ana, None, 2).await.expect("listed");
        assert_eq!(
            first.threads,
            ["a-ana", "c-ana"],
            "bob's thread is not ana's"
        );
        assert_eq!(first.scanned, 3);
        let after = ThreadId::new(first.next_after.expect("more")).expect("id");
        let second = service
            .threads_as(&ana, Some(after), 2)
            .await
            .expect("listed");
        assert_eq!(second.threads, ["d-ana"]);
        assert_eq!(second.next_after, None, "the end of the log");
        let everything = Grant::local("host", None);
        let all = service
            .threads_as(&everything, None, 10)
            .await
            .expect("listed");
        assert_eq!(all.threads.len(), 4);
        let refused = service.threads_as(&ana, None, MAX_LISTED_THREADS + 1).await;
        assert_eq!(
            refused.expect_err("too many").kind(),
            ErrorKind::InvalidInput
        );
    }
}
