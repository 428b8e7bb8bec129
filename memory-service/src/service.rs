//! The five operations over one store, shared by the command line and the MCP server.
//!
//! A call is decoded into a [`Request`] first (nothing is opened or read for input that is refused), then
//! run against the store; the answer is the operation's wire result or a [`Refusal`]. Nothing here knows
//! which interface called it.

use std::sync::Arc;

use memory_core::{MemoryDocument, MemoryKey, MemoryWrite, StoredRevision};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tracing::Instrument;

use crate::blocking::on_blocking_pool;
use crate::database::Store;
use crate::feed::CommitSignal;
use crate::grants::{Grant, GrantedOperation, Touches};
use crate::input::{decode_bytes, decode_value};
use crate::recall_service::{Indexing, RecallQuery, RecallService};
use crate::refusal::{Refusal, to_json};
use crate::settings::Settings;
use crate::wire::{
    DEFAULT_HISTORY_LIMIT, GetArguments, GetResult, HistoryArguments, HistoryResult, PutArguments,
    RecallArguments, SyncArguments, WireDocument, WireRevision, WithdrawArguments, WriteResult,
    key_of, revisions_limit,
};

/// One of the five operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `memory_put`.
    Put,
    /// `memory_withdraw`.
    Withdraw,
    /// `memory_get`.
    Get,
    /// `memory_recall`.
    Recall,
    /// `memory_sync`.
    Sync,
}

impl Operation {
    /// Every operation, in the order the tools are listed.
    pub const ALL: [Self; 5] = [
        Self::Put,
        Self::Withdraw,
        Self::Get,
        Self::Recall,
        Self::Sync,
    ];

    /// The MCP tool name (`memory_put`, ...).
    pub fn tool_name(self) -> &'static str {
        match self {
            Self::Put => "memory_put",
            Self::Withdraw => "memory_withdraw",
            Self::Get => "memory_get",
            Self::Recall => "memory_recall",
            Self::Sync => "memory_sync",
        }
    }
}

/// Raw, untrusted arguments of one call.
#[derive(Debug)]
pub enum RawArguments<'a> {
    /// JSON text (command line, standard input, an import line).
    Text(&'a [u8]),
    /// An already parsed JSON value (MCP tool arguments).
    Json(Value),
}

impl RawArguments<'_> {
    /// Decodes the arguments as `T`: the one decoding of every interface's untrusted arguments.
    pub fn decode<T: DeserializeOwned>(self) -> Result<T, Refusal> {
        match self {
            Self::Text(bytes) => decode_bytes(bytes),
            Self::Json(value) => decode_value(value),
        }
    }
}

/// One decoded and validated call: ids, scopes, namespaces and limits are memory-core types already,
/// so input refused for its shape or size is refused before any store is opened.
#[derive(Debug, Clone)]
pub enum Request {
    /// `memory_put` or `memory_withdraw`.
    Write(MemoryWrite),
    /// `memory_get`: the key, and how many of its revisions to answer too (none without `revisions`).
    Get(MemoryKey, Option<usize>),
    /// `memory_recall`.
    Recall(RecallQuery),
    /// `memory_sync`.
    Sync,
}

impl Request {
    /// Decodes and validates `arguments` as the arguments of `operation`.
    pub fn decode(operation: Operation, arguments: RawArguments<'_>) -> Result<Self, Refusal> {
        Ok(match operation {
            Operation::Put => Self::Write(arguments.decode::<PutArguments>()?.into_write()?),
            Operation::Withdraw => {
                Self::Write(arguments.decode::<WithdrawArguments>()?.into_write()?)
            }
            Operation::Get => {
                let arguments: GetArguments = arguments.decode()?;
                let revisions = arguments
                    .revisions
                    .map(|asked| revisions_limit("revisions", asked))
                    .transpose()?;
                Self::Get(key_of(&arguments.namespace, &arguments.id)?, revisions)
            }
            Operation::Recall => {
                Self::Recall(RecallQuery::new(arguments.decode::<RecallArguments>()?)?)
            }
            Operation::Sync => {
                let SyncArguments {} = arguments.decode()?;
                Self::Sync
            }
        })
    }

    /// Names who asks on a withdrawal: `grant`'s holder ([`Grant::principal`], stamped by
    /// [`MemoryService::run_as`]); the arguments never say. Other requests are unchanged, and no
    /// principal is formatted for them.
    fn asked_by(mut self, grant: &Grant) -> Self {
        if let Self::Write(MemoryWrite::Withdraw { by, .. }) = &mut self {
            *by = Some(grant.principal());
        }
        self
    }

    /// What it touches, for the one grant check ([`Grant::check`]): its operation, namespace and
    /// scopes.
    pub fn touches(&self) -> Touches<'_> {
        match self {
            Self::Sync => Touches::default(),
            Self::Recall(query) => Touches {
                operation: Some(GrantedOperation::Recall),
                namespace: Some(&query.access().namespace),
                read_scope: Some(&query.access().scope),
                write_scopes: &[],
            },
            Self::Get(key, _) => Touches {
                operation: Some(GrantedOperation::Get),
                namespace: Some(&key.namespace),
                ..Touches::default()
            },
            Self::Write(MemoryWrite::Put { key, scopes, .. }) => Touches {
                operation: Some(GrantedOperation::Put),
                namespace: Some(&key.namespace),
                read_scope: None,
                write_scopes: scopes,
            },
            Self::Write(MemoryWrite::Withdraw { key, .. }) => Touches {
                operation: Some(GrantedOperation::Withdraw),
                namespace: Some(&key.namespace),
                ..Touches::default()
            },
        }
    }

    /// The document a write replaces or withdraws, which the grant must see and write.
    fn replaces(&self) -> Option<&MemoryKey> {
        match self {
            Self::Write(MemoryWrite::Put { key, .. } | MemoryWrite::Withdraw { key, .. }) => {
                Some(key)
            }
            _ => None,
        }
    }

    /// Which operation it is.
    pub fn operation(&self) -> Operation {
        match self {
            Self::Write(MemoryWrite::Put { .. }) => Operation::Put,
            Self::Write(MemoryWrite::Withdraw { .. }) => Operation::Withdraw,
            Self::Get(..) => Operation::Get,
            Self::Recall(_) => Operation::Recall,
            Self::Sync => Operation::Sync,
        }
    }
}

/// The operations over one store.
pub struct MemoryService<S: Store> {
    store: Arc<S>,
    recall: RecallService<S>,
    /// Signalled after each committed write and before each sync, so a [`crate::feed::WakingFeed`] indexer wakes.
    commits: Option<CommitSignal>,
}

impl<S: Store> std::fmt::Debug for MemoryService<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MemoryService")
            .finish_non_exhaustive()
    }
}

impl<S: Store> MemoryService<S> {
    /// The one builder of the memory operations every door runs: the recall modes of
    /// [`RecallService::open`] (the semantic index as `indexing` asks, configured by `settings`), and
    /// for a server that follows the feed, its commits waking the feed. A blocking call, like
    /// [`RecallService::open`].
    pub fn open(
        store: Arc<S>,
        settings: &Settings,
        indexing: Indexing<S::Feed>,
    ) -> Result<Self, Refusal> {
        let commits = match &indexing {
            Indexing::Following(following) => following.commits.clone(),
            _ => None,
        };
        let recall = RecallService::open(Arc::clone(&store), settings, indexing)?;
        let service = Self::new(store, recall);
        Ok(match commits {
            Some(commits) => service.with_commit_signal(commits),
            None => service,
        })
    }

    /// The operations over `store`, with the recall plumbing `recall`.
    pub fn new(store: Arc<S>, recall: RecallService<S>) -> Self {
        Self {
            store,
            recall,
            commits: None,
        }
    }

    /// Signals `commits` after every committed write and before every sync (the server's indexer
    /// follows a [`crate::feed::WakingFeed`] woken by it).
    pub fn with_commit_signal(mut self, commits: CommitSignal) -> Self {
        self.commits = Some(commits);
        self
    }

    fn signal_commit(&self) {
        if let Some(commits) = &self.commits {
            commits.committed();
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The recall plumbing (listing hides forgotten sources through it, as `memory_get` does).
    pub fn recall(&self) -> &RecallService<S> {
        &self.recall
    }

    /// Decodes `arguments` for `operation`, runs it as `grant`'s holder ([`Self::run_as`]) and
    /// answers its wire result as JSON.
    pub async fn execute_as(
        &self,
        grant: &Grant,
        operation: Operation,
        arguments: RawArguments<'_>,
    ) -> Result<Value, Refusal> {
        self.run_as(grant, Request::decode(operation, arguments)?)
            .await
    }

    /// Runs a decoded request as `grant`'s holder, the one way in for every door (the MCP servers
    /// with the caller's grant, the command line and the Python package with their local one,
    /// [`Grant::local`]): the withdrawal's `by` is the grant's principal, the request is checked
    /// against the grant ([`Self::authorize`]) before anything is read or written for it, and a
    /// restricted grant's `memory_get` shows only what it may read.
    pub async fn run_as(&self, grant: &Grant, request: Request) -> Result<Value, Refusal> {
        let request = request.asked_by(grant);
        self.authorize(grant, &request).await?;
        match request {
            Request::Get(key, revisions) if !grant.is_unrestricted() => {
                to_json(&self.get_filtered(&key, revisions, Some(grant)).await?)
            }
            request => self.run(request).await,
        }
    }

    /// Checks `request` against `grant`: what it touches ([`Request::touches`], [`Grant::check`]),
    /// then, for a restricted grant, that a document being replaced or withdrawn is one the grant
    /// sees and writes (one read; a grant to everything needs none).
    pub async fn authorize(&self, grant: &Grant, request: &Request) -> Result<(), Refusal> {
        grant.check(&request.touches())?;
        let Some(key) = request.replaces() else {
            return Ok(());
        };
        if grant.is_unrestricted() {
            return Ok(());
        }
        match self.read_current(key).await? {
            Some(current) => grant.allow_replace(&current),
            None => Ok(()),
        }
    }

    /// Runs a request already checked (by [`Self::run_as`], or by a service that checked its own
    /// call against the grant first: the simple tools, the thread tools' worker writes).
    pub(crate) async fn run(&self, request: Request) -> Result<Value, Refusal> {
        let span = tracing::debug_span!("operation", name = request.operation().tool_name());
        async move {
            let answer = match request {
                Request::Write(write) => to_json(&self.write(write).await?),
                Request::Get(key, revisions) => to_json(&self.get(&key, revisions).await?),
                Request::Recall(query) => to_json(&self.recall.recall(query).await?),
                Request::Sync => {
                    // Wakes the indexer now, for writes other processes made since its last read.
                    self.signal_commit();
                    to_json(&self.recall.sync().await?)
                }
            };
            if let Err(refusal) = &answer {
                tracing::debug!(kind = refusal.kind().as_str(), "refused");
            }
            answer
        }
        .instrument(span)
        .await
    }

    /// `memory_put` and `memory_withdraw`.
    ///
    /// The store call runs on the blocking pool: SQLite answers synchronously (an `fsync` per commit,
    /// and a pause between retries when another process holds the lock), which must not stall the
    /// server's async workers.
    pub(crate) async fn write(&self, write: MemoryWrite) -> Result<WriteResult, Refusal> {
        let store = Arc::clone(&self.store);
        let outcome = on_blocking_pool(async move { store.apply(write).await }).await?;
        // A refused write may still follow a lost acknowledgement of a committed one: wake either way.
        self.signal_commit();
        WriteResult::from_outcome(outcome?)
    }

    /// The current document of `key` as stored, withdrawn or not and whatever read-time suppression
    /// shows: what a write replaces (read on the blocking pool). Unchecked: the simple operations read
    /// through it after their own grant check.
    pub async fn read_current(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, Refusal> {
        read_current(&self.store, key).await
    }

    /// `memory_get`: the current document of `key`, as recall would show it, and with `revisions`
    /// up to that many of its revisions ([`Self::history`]).
    pub(crate) async fn get(
        &self,
        key: &MemoryKey,
        revisions: Option<usize>,
    ) -> Result<GetResult, Refusal> {
        self.get_filtered(key, revisions, None).await
    }

    async fn get_filtered(
        &self,
        key: &MemoryKey,
        revisions: Option<usize>,
        grant: Option<&Grant>,
    ) -> Result<GetResult, Refusal> {
        let document = self
            .read_current(key)
            .await?
            .filter(|document| grant.is_none_or(|grant| grant.can_read(document)));
        // A forgotten source's contribution reads as gone, exactly as recall hides it.
        let document = self
            .recall
            .visible(document)
            .await?
            .map(WireDocument::from_document)
            .transpose()?;
        let revisions = match revisions {
            Some(limit) => Some(self.history(key, limit, grant).await?),
            None => None,
        };
        Ok(GetResult {
            document,
            revisions,
        })
    }

    /// `memory history` (its JSON arguments decoded here) as the process's own caller.
    pub async fn history_of(&self, arguments: RawArguments<'_>) -> Result<Value, Refusal> {
        let arguments: HistoryArguments = arguments.decode()?;
        let limit = revisions_limit("limit", arguments.limit.unwrap_or(DEFAULT_HISTORY_LIMIT))?;
        let key = key_of(&arguments.namespace, &arguments.id)?;
        to_json(&HistoryResult {
            revisions: self.history(&key, limit, None).await?,
        })
    }

    /// Up to `limit` of `key`'s revisions, newest first: the one history read behind `memory_get`'s
    /// `revisions`, `memory history` and the Python package's `history`.
    ///
    /// Each revision shows its text, attributions and time while the store keeps its words
    /// (memory-core's `revisions`: the newest ones up to the store's bound, none after a
    /// withdrawal, whose tombstone shows when and why). Read-time suppression applies as for
    /// `memory_get`: a revision a forgotten source wrote shows no words, and while the current
    /// revision is one, no revision does (its cleanup will withdraw the document). With `grant`,
    /// only the revisions the grant may read are shown, and the tombstone only beside one of them.
    pub async fn history(
        &self,
        key: &MemoryKey,
        limit: usize,
        grant: Option<&Grant>,
    ) -> Result<Vec<WireRevision>, Refusal> {
        let store = Arc::clone(&self.store);
        let read = key.clone();
        let revisions =
            on_blocking_pool(async move { store.revisions(&read, limit).await }).await??;
        let readable =
            |document: &MemoryDocument| grant.is_none_or(|grant| grant.can_read(document));
        let any_readable = revisions
            .iter()
            .any(|revision| revision.document.withdrawn.is_none() && readable(&revision.document));
        let revisions: Vec<StoredRevision> = revisions
            .into_iter()
            .filter(|revision| match revision.document.withdrawn {
                Some(_) => any_readable,
                None => readable(&revision.document),
            })
            .collect();
        let with_words = revisions
            .iter()
            .map(|revision| {
                (revision.words_kept && revision.document.withdrawn.is_none())
                    .then(|| revision.document.clone())
            })
            .collect();
        let visible = self.recall.visible_each(with_words).await?;
        let current_forgotten = revisions
            .first()
            .is_some_and(|revision| revision.words_kept && revision.document.withdrawn.is_none())
            && visible.first().is_some_and(Option::is_none);
        Ok(revisions
            .into_iter()
            .zip(visible)
            .map(|(revision, visible)| {
                let shown = visible.is_some() && !current_forgotten;
                WireRevision::from_document(revision.document, shown)
            })
            .collect())
    }
}

/// The current document of `key` in `store` as stored (read on the blocking pool): what
/// [`MemoryService::read_current`] reads, for a door that holds only the store (the one-shot context).
pub async fn read_current<S: Store>(
    store: &Arc<S>,
    key: &MemoryKey,
) -> Result<Option<MemoryDocument>, Refusal> {
    let store = Arc::clone(store);
    let key = key.clone();
    Ok(on_blocking_pool(async move { store.read(&key).await }).await??)
}
