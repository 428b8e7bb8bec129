//! The context layer through the interfaces: `memory context THREAD --budget TOKENS [--query TEXT]`, the
//! MCP tools `memory_context`, `memory_compact`, `memory_history_read` and `memory_history_search`, and
//! the hook's `--context-budget` (see [`memory_context`] for the rules).
//!
//! - **context** `{"thread", "budget", "query"?, "memory"?}` answers the thread's current turn as model
//!   input: the history view's messages (system instructions, the compaction summary in its frame, the
//!   segments that fit), then the memory recalled for the turn as one user message, with the view's
//!   report (tokens, dropped, elided, fits) and what folding skipped. The memory comes from the thread's
//!   destination (its binding; an unbound thread uses the caller's defaults), recalled (hybrid) for
//!   `query`, else the current prompt, within the tokens the history leaves; a retried turn (same prompt,
//!   same query) reuses the references the first attempt loaded in this process. The history leaves a
//!   quarter of the budget (at most 2,000 tokens) for the memory, plus whatever it does not need.
//!   `"memory": false` assembles the history alone.
//! - **compact** `{"thread", "measured_input_tokens", "keep_tokens"?, "summary"?, "through"?,
//!   "summarizer"?}`: without `summary`, answers the plan (what to summarize, as messages, and its
//!   `through`) and appends nothing; with `summary` and that `through`, appends the compaction record
//!   (also when nothing folds or the summary is not smaller: the refusal is recorded). Without
//!   `measured_input_tokens` it is refused (`invalid-input`): compaction is counted, never guessed.
//! - **history_read** `{"thread", "after"?, "limit"?, "max_bytes"?}` and **history_search** `{"thread",
//!   "text", "after"?, "limit"?, "scan"?}` page through and search (literally, case-insensitively) every
//!   record, folded ones included.
//!
//! Decisions: the context tools read a thread only through a grant that admits its destination (the
//! binding's namespace); an unbound thread is `forbidden` to a restricted grant, as for the thread
//! tools. `memory_context`'s recall also needs the grant's `recall` operation and read scope.
//! `keep_tokens` defaults to [`DEFAULT_KEEP_TOKENS`].

use std::sync::{Arc, OnceLock};

use memory_context::history::{
    DEFAULT_HISTORY_BYTES, DEFAULT_HISTORY_RECORDS, DEFAULT_SEARCH_SCAN, HistoryPage, HistorySearch,
};
use memory_context::tokens::MESSAGE_OVERHEAD_TOKENS;
use memory_context::{
    AssembledContext, CompactionRequest, Context, ContextError, Counter, Message, View,
};
use memory_core::activity::{
    CompactionRecord, CompactionRefusal, Sequence, SequenceRange, ThreadBinding, ThreadId,
    ThreadLog,
};
use memory_core::{DynamicNamespace, MemoryScope, TokenCounter};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::blocking::blocking;
use crate::database::Store;
use crate::destination::{DestinationDefaults, DestinationRequest};
use crate::grants::{Grant, GrantedOperation};
use crate::recall_service::{RecallQuery, one_shot_recall, query_tail};
use crate::refusal::{Refusal, to_json};
use crate::semantic::IndexOptions;
use crate::service::RawArguments;
use crate::wire::{RecallArguments, RecallMode, RecallResult, WireRecallLimits};

/// Tokens a compaction keeps verbatim when the call names none.
pub const DEFAULT_KEEP_TOKENS: u64 = 8_000;
/// The header of the memory block (the same words as the hook's).
pub const MEMORY_HEADER: &str = crate::hook::HEADER;
/// Most passages a turn's memory block holds.
pub const TURN_MEMORY_ITEMS: u32 = 8;
/// Milliseconds a turn's recall may take.
pub const TURN_MEMORY_TIMEOUT_MS: u64 = 10_000;

impl From<ContextError> for Refusal {
    fn from(error: ContextError) -> Self {
        match error {
            ContextError::Log(error) => Self::from(error),
            error => Self::new(error.kind(), error.to_string()),
        }
    }
}

/// One of the context operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContextOperation {
    /// `memory_context`.
    Context,
    /// `memory_compact`.
    Compact,
    /// `memory_history_read`.
    HistoryRead,
    /// `memory_history_search`.
    HistorySearch,
}

impl ContextOperation {
    /// The MCP tool name.
    pub fn tool_name(self) -> &'static str {
        match self {
            Self::Context => "memory_context",
            Self::Compact => "memory_compact",
            Self::HistoryRead => "memory_history_read",
            Self::HistorySearch => "memory_history_search",
        }
    }

    fn granted(self) -> GrantedOperation {
        match self {
            Self::Compact => GrantedOperation::ThreadCompact,
            _ => GrantedOperation::ThreadRead,
        }
    }
}

fn yes() -> bool {
    true
}

/// Arguments of `memory_context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextArguments {
    /// The thread.
    pub thread: String,
    /// Tokens the whole context (history and memory) may take.
    pub budget: u64,
    /// What to recall memory for (default: the current prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Whether to recall memory for the turn (default true).
    #[serde(default = "yes")]
    pub memory: bool,
}

/// Arguments of `memory_compact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactArguments {
    /// The thread.
    pub thread: String,
    /// The input tokens the provider reported for the last model call (required).
    #[serde(default)]
    pub measured_input_tokens: Option<u64>,
    /// Tokens of the newest segments kept verbatim (default 8,000); the current turn is always kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_tokens: Option<u64>,
    /// The summary, written from the plan a call without it answered; absent: answer the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The plan's `through`, required with `summary`: nothing newer is folded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through: Option<u64>,
    /// Who wrote the summary (a model's name), named in the frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarizer: Option<String>,
}

/// What a compaction would fold: the answer of `memory_compact` without a summary.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct CompactionPlanWire {
    /// The newest record the plan folds (pass it back with the summary); absent when nothing folds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub through: Option<Sequence>,
    /// The record ranges it folds.
    pub folded: Vec<SequenceRange>,
    /// What refuses to fold.
    pub refusals: Vec<CompactionRefusal>,
    /// Characters the summary must stay under.
    pub replaced_chars: u64,
    /// What to summarize: the earlier summary (in its frame) and the folded segments, tool outputs in
    /// full.
    pub messages: Vec<Message>,
}

/// The answer of `memory_compact`: a plan, or the compaction record appended.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct CompactResult {
    /// The thread.
    pub thread: String,
    /// The plan (a call without a summary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<CompactionPlanWire>,
    /// The sequence of the compaction record appended (a call with a summary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<Sequence>,
    /// The compaction record appended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionRecord>,
}

/// Arguments of `memory_history_read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryReadArguments {
    /// The thread.
    pub thread: String,
    /// Records after this sequence (default 0: from the first).
    #[serde(default)]
    pub after: u64,
    /// Most records (1 to 500, default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Most bytes of record text (default 256 KiB; the first record always comes, cut to fit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
}

/// Arguments of `memory_history_search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistorySearchArguments {
    /// The thread.
    pub thread: String,
    /// The text to find, literally and case-insensitively (1 to 1,024 bytes).
    pub text: String,
    /// Records after this sequence (default 0).
    #[serde(default)]
    pub after: u64,
    /// Most matches (1 to 500, default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Most records read before answering where the search stopped (default 100,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan: Option<usize>,
}

/// A decoded and validated context call.
#[derive(Debug, Clone)]
pub enum ContextRequest {
    /// `memory_context`.
    Context {
        /// The thread.
        thread: ThreadId,
        /// The budget.
        budget: u64,
        /// The query, if given.
        query: Option<String>,
        /// Whether to recall memory.
        memory: bool,
    },
    /// `memory_compact`.
    Compact {
        /// The thread.
        thread: ThreadId,
        /// What is asked.
        request: CompactionRequest,
        /// The summary, when committing.
        summary: Option<String>,
    },
    /// `memory_history_read`.
    HistoryRead {
        /// The thread.
        thread: ThreadId,
        /// The arguments.
        arguments: HistoryReadArguments,
    },
    /// `memory_history_search`.
    HistorySearch {
        /// The thread.
        thread: ThreadId,
        /// The arguments.
        arguments: HistorySearchArguments,
    },
}

impl ContextRequest {
    /// Decodes and validates `arguments` as the arguments of `operation`.
    pub fn decode(
        operation: ContextOperation,
        arguments: RawArguments<'_>,
    ) -> Result<Self, Refusal> {
        Ok(match operation {
            ContextOperation::Context => {
                let arguments: ContextArguments = arguments.decode()?;
                memory_context::view::check_budget(arguments.budget)?;
                Self::Context {
                    thread: ThreadId::new(arguments.thread)?,
                    budget: arguments.budget,
                    query: arguments.query.filter(|query| !query.trim().is_empty()),
                    memory: arguments.memory,
                }
            }
            ContextOperation::Compact => {
                let arguments: CompactArguments = arguments.decode()?;
                if arguments.summary.is_some() != arguments.through.is_some() {
                    return Err(Refusal::invalid_input(
                        "summary and through: a summary is committed with the `through` of the plan \
                         it was written from (call without a summary for the plan)",
                    ));
                }
                let request = CompactionRequest {
                    measured_input_tokens: arguments.measured_input_tokens,
                    keep_tokens: arguments.keep_tokens.unwrap_or(DEFAULT_KEEP_TOKENS),
                    through: arguments.through.map(Sequence::new),
                    summarizer: arguments.summarizer,
                };
                if request.measured_input_tokens.is_none() {
                    return Err(ContextError::Unmeasured.into());
                }
                Self::Compact {
                    thread: ThreadId::new(arguments.thread)?,
                    request,
                    summary: arguments.summary,
                }
            }
            ContextOperation::HistoryRead => {
                let arguments: HistoryReadArguments = arguments.decode()?;
                Self::HistoryRead {
                    thread: ThreadId::new(arguments.thread.clone())?,
                    arguments,
                }
            }
            ContextOperation::HistorySearch => {
                let arguments: HistorySearchArguments = arguments.decode()?;
                Self::HistorySearch {
                    thread: ThreadId::new(arguments.thread.clone())?,
                    arguments,
                }
            }
        })
    }

    fn thread(&self) -> &ThreadId {
        match self {
            Self::Context { thread, .. }
            | Self::Compact { thread, .. }
            | Self::HistoryRead { thread, .. }
            | Self::HistorySearch { thread, .. } => thread,
        }
    }
}

/// Where a turn's memory is recalled from.
#[derive(Debug, Clone)]
pub struct MemorySource {
    /// The namespace.
    pub namespace: DynamicNamespace,
    /// The scope read.
    pub scope: MemoryScope,
}

impl MemorySource {
    /// The memory of a thread with `binding`: its destination's namespace and first scope; an unbound
    /// thread's comes from `defaults`.
    pub fn of(
        binding: Option<&ThreadBinding>,
        defaults: &DestinationDefaults,
    ) -> Result<Self, Refusal> {
        let Some(binding) = binding else {
            let resolved = defaults.resolve(&DestinationRequest::default())?;
            return Ok(Self {
                namespace: resolved.namespace,
                scope: resolved.scope,
            });
        };
        let corrupt = |what: String| Refusal::new(memory_core::ErrorKind::Corrupt, what);
        let (name, version, identity) =
            binding.destination.namespace().parts().map_err(|error| {
                corrupt(format!("the thread's destination does not parse: {error}"))
            })?;
        let scope = binding
            .destination
            .scopes()
            .first()
            .cloned()
            .ok_or_else(|| corrupt("the thread's destination has no scope".to_owned()))?;
        Ok(Self {
            namespace: DynamicNamespace {
                name,
                version,
                identity,
            },
            scope,
        })
    }
}

/// The context layer over one database's thread log.
#[derive(Clone)]
pub struct ContextService {
    log: Arc<dyn ThreadLog>,
    context: Arc<Context>,
}

impl std::fmt::Debug for ContextService {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ContextService")
            .finish_non_exhaustive()
    }
}

impl ContextService {
    /// The context of `log`'s threads, counting tokens with `tokenizer` (the approximate counter
    /// when `None`).
    pub fn new(log: Arc<dyn ThreadLog>, tokenizer: Option<Arc<dyn TokenCounter>>) -> Self {
        let view = match tokenizer {
            Some(tokenizer) => View::new(
                Counter::new(tokenizer),
                View::default().strategies().to_vec(),
            ),
            None => View::default(),
        };
        Self {
            context: Arc::new(Context::with_view(Arc::clone(&log), view)),
            log,
        }
    }

    /// The thread's binding.
    pub async fn binding(&self, thread: &ThreadId) -> Result<Option<ThreadBinding>, Refusal> {
        let log = Arc::clone(&self.log);
        let thread = thread.clone();
        Ok(blocking(move || log.binding(&thread)).await??)
    }

    /// Assembles the thread's turn (see the module docs); `recall` answers a recall's arguments.
    pub async fn assemble(
        &self,
        thread: ThreadId,
        budget: u64,
        query: Option<String>,
        source: Option<MemorySource>,
        recall: impl AsyncFnOnce(RecallArguments) -> Result<RecallResult, Refusal>,
    ) -> Result<AssembledContext, Refusal> {
        let context = Arc::clone(&self.context);
        let reserve = source
            .is_some()
            .then(|| memory_context::memory_reserve(budget));
        let plan = {
            let thread = thread.clone();
            blocking(move || context.prepare_turn(&thread, budget, query.as_deref(), reserve))
                .await??
        };
        // The header comes with the block, in the same message.
        let header_tokens = (self.context.view_rules().counter().count(MEMORY_HEADER)
            + MESSAGE_OVERHEAD_TOKENS) as u64;
        let loaded = match (plan.to_load(), source) {
            (Some((query, remaining)), Some(source)) if remaining > header_tokens => {
                let max_tokens = remaining - header_tokens;
                let answer = recall(RecallArguments {
                    namespace: source.namespace,
                    scope: source.scope.as_str().to_owned(),
                    query: query_tail(query).to_owned(),
                    mode: RecallMode::Hybrid,
                    limits: WireRecallLimits {
                        max_items: TURN_MEMORY_ITEMS,
                        max_sources: None,
                        // Rendered text is rarely over four bytes a token: the token limit binds.
                        max_bytes: max_tokens.saturating_mul(8).min(1 << 20),
                        max_tokens,
                        timeout_ms: TURN_MEMORY_TIMEOUT_MS,
                    },
                })
                .await?;
                let passages = answer.passages.len() as u64;
                let text = if passages == 0 {
                    String::new()
                } else {
                    format!("{MEMORY_HEADER}{}", answer.text)
                };
                Some((text, passages))
            }
            _ => None,
        };
        Ok(self.context.finish_turn(plan, loaded))
    }

    /// Runs a compaction, history read or search (context calls go through [`Self::assemble`]).
    pub async fn run_log_call(&self, request: ContextRequest) -> Result<Value, Refusal> {
        let context = Arc::clone(&self.context);
        blocking(move || -> Result<Value, Refusal> {
            match request {
                ContextRequest::Compact {
                    thread,
                    request,
                    summary,
                } => {
                    let answer = match summary {
                        None => {
                            let plan = context.plan_compaction(&thread, &request)?;
                            CompactResult {
                                thread: thread.as_str().to_owned(),
                                plan: Some(CompactionPlanWire {
                                    through: plan.through,
                                    messages: plan.transcript(),
                                    folded: plan.folded,
                                    refusals: plan.refusals,
                                    replaced_chars: plan.replaced_chars,
                                }),
                                sequence: None,
                                compaction: None,
                            }
                        }
                        Some(summary) => {
                            let compacted =
                                context.commit_compaction(&thread, &request, summary)?;
                            CompactResult {
                                thread: thread.as_str().to_owned(),
                                plan: None,
                                sequence: Some(compacted.sequence),
                                compaction: Some(compacted.compaction),
                            }
                        }
                    };
                    to_json(&answer)
                }
                ContextRequest::HistoryRead { thread, arguments } => {
                    let page: HistoryPage = context.history_read(
                        &thread,
                        Sequence::new(arguments.after),
                        arguments.limit.unwrap_or(DEFAULT_HISTORY_RECORDS),
                        arguments.max_bytes.unwrap_or(DEFAULT_HISTORY_BYTES),
                    )?;
                    to_json(&page)
                }
                ContextRequest::HistorySearch { thread, arguments } => {
                    let found: HistorySearch = context.history_search(
                        &thread,
                        &arguments.text,
                        Sequence::new(arguments.after),
                        arguments.limit.unwrap_or(DEFAULT_HISTORY_RECORDS),
                        arguments.scan.unwrap_or(DEFAULT_SEARCH_SCAN),
                    )?;
                    to_json(&found)
                }
                ContextRequest::Context { .. } => Err(Refusal::invalid_input(
                    "memory_context is assembled with its recall, not as a log call",
                )),
            }
        })
        .await?
    }
}

/// `memory context` and the one-shot hook: the thread's turn over `store`'s database, counting with
/// `tokenizer`, its memory recalled one-shot (as `memory recall` recalls) from the thread's destination,
/// or for an unbound thread from `memory`'s defaults; `memory` `None` recalls nothing.
pub async fn one_shot_context<S: Store>(
    store: Arc<S>,
    index: IndexOptions,
    tokenizer: Option<Arc<dyn TokenCounter>>,
    thread: ThreadId,
    budget: u64,
    query: Option<String>,
    memory: Option<&DestinationDefaults>,
) -> Result<AssembledContext, Refusal> {
    let log = {
        let store = Arc::clone(&store);
        blocking(move || store.open_thread_log()).await??
    };
    let service = ContextService::new(log, tokenizer);
    let source = match memory {
        Some(defaults) => Some(MemorySource::of(
            service.binding(&thread).await?.as_ref(),
            defaults,
        )?),
        None => None,
    };
    service
        .assemble(thread, budget, query, source, async |arguments| {
            one_shot_recall(store, index, RecallQuery::new(arguments)?).await
        })
        .await
}

/// The context operations of a server: the thread log is opened on the first call that needs it.
pub struct ContextTools<S> {
    store: Arc<S>,
    defaults: DestinationDefaults,
    service: OnceLock<ContextService>,
}

impl<S> std::fmt::Debug for ContextTools<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ContextTools")
            .field("opened", &self.service.get().is_some())
            .finish_non_exhaustive()
    }
}

impl<S: Store> ContextTools<S> {
    /// Context operations over `store`'s database; an unbound thread's memory comes from `defaults`.
    pub fn new(store: Arc<S>, defaults: DestinationDefaults) -> Self {
        Self {
            store,
            defaults,
            service: OnceLock::new(),
        }
    }

    async fn service(&self) -> Result<ContextService, Refusal> {
        if let Some(service) = self.service.get() {
            return Ok(service.clone());
        }
        let store = Arc::clone(&self.store);
        let log = blocking(move || store.open_thread_log()).await??;
        // Two first calls may both open; one wins (and its fold cache serves every later call).
        Ok(self
            .service
            .get_or_init(|| ContextService::new(log, None))
            .clone())
    }

    /// Runs a call as `grant`'s holder: the operation first, then the thread's binding, then (for
    /// `memory_context` with memory) the recall operation and the read scope; `recall` runs a recall.
    pub async fn execute_as(
        &self,
        grant: &Grant,
        operation: ContextOperation,
        arguments: RawArguments<'_>,
        recall: impl AsyncFnOnce(RecallArguments) -> Result<RecallResult, Refusal>,
    ) -> Result<Value, Refusal> {
        grant.allow_operation(operation.granted())?;
        let request = ContextRequest::decode(operation, arguments)?;
        let service = self.service().await?;
        let recalls = matches!(request, ContextRequest::Context { memory: true, .. });
        // One read of the binding serves the grant's check and the memory's source.
        let binding = if recalls || !grant.is_unrestricted() {
            service.binding(request.thread()).await?
        } else {
            None
        };
        if !grant.is_unrestricted() {
            grant.allow_thread(binding.as_ref(), false)?;
        }
        match request {
            ContextRequest::Context {
                thread,
                budget,
                query,
                memory,
            } => {
                let source = if memory {
                    let defaults = grant.destination_defaults_or(&self.defaults);
                    let source = MemorySource::of(binding.as_ref(), &defaults)?;
                    grant.allow_operation(GrantedOperation::Recall)?;
                    grant.allow_namespace(&source.namespace.address().map_err(|error| {
                        Refusal::invalid_input(format!("namespace: {error}"))
                    })?)?;
                    grant.allow_read_scope(&source.scope)?;
                    Some(source)
                } else {
                    None
                };
                to_json(
                    &service
                        .assemble(thread, budget, query, source, recall)
                        .await?,
                )
            }
            request => service.run_log_call(request).await,
        }
    }
}
