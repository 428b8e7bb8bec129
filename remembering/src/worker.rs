//! Worker passes over admitted intents (SPEC §5).
//!
//! A remember pass is finite: claim, load the source, extract (possibly nothing), save the proposal,
//! re-check the source (an invalidation admits its successor durably), prepare and save the exact write
//! command with its source-to-target reference, then send it. An unknown outcome leaves the saved
//! command, and the next pass sends it again unchanged. Only a definite `Conflict` allows a new
//! operation id: the saved proposal (never a second extraction) is rebased on the latest document through
//! the application's [`Merger`]. `OperationConflict` closes the intent as failed and is returned as an
//! error.
//!
//! After a write lands, the pass checks suppression once more: a forget committed while the write was in
//! flight may have run its cleanup before the write landed, so the cleanup is admitted again.
//!
//! A cleanup pass walks the source's references and lets the application's [`Cleanup`] decide per
//! document: withdraw it, keep it, or rewrite it (the default,
//! [`crate::app::RemoveSourceAttributions`], removes the source's attributions and withdraws a
//! statement only when no witness remains). A cleanup write that meets a definite conflict reads the
//! document again and decides again.

use std::sync::Arc;

use memory_core::activity::{
    ActivityError, Intent, IntentClaim, IntentLease, IntentOutcome, RememberingStore, SavedCommand,
    SourceId, SourceReference, SourceRevision, WorkerId,
};
use memory_core::{
    Clock, MemoryContent, MemoryError, MemoryKey, MemoryReader, MemoryScope, MemoryWrite,
    MemoryWriter, OperationId, PreparedWrite,
};
use sha2::{Digest, Sha256};

use crate::app::{Cleanup, CleanupAction, Extractor, Merger, SourceLoader};
use crate::error::RememberingError;
use crate::hooks::{NoHooks, PassHooks, PassPoint};

/// Most rebases one pass tries before leaving the intent for a later pass.
pub const MAX_REBASES: u32 = 8;
/// References read per page during cleanup.
const REFERENCE_PAGE: usize = 256;

/// Limits of one intent pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntentPassLimits {
    /// Most intents handled in one pass.
    pub max_intents: usize,
    /// Each intent's lease length.
    pub lease_ms: u64,
}

impl Default for IntentPassLimits {
    fn default() -> Self {
        Self {
            max_intents: 100,
            lease_ms: 30_000,
        }
    }
}

/// What an intent pass did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IntentPassReport {
    /// Intents closed, with their outcomes.
    pub completed: Vec<IntentOutcome>,
}

/// The application's traits.
#[derive(Debug, Clone)]
pub struct Application<L, X, M, C> {
    /// Loads sources.
    pub loader: L,
    /// Extracts proposals.
    pub extractor: X,
    /// Rebases proposals.
    pub merger: M,
    /// Decides cleanup.
    pub cleanup: C,
}

/// Runs intent passes.
pub struct IntentWorker<S, L, X, M, C> {
    store: Arc<dyn RememberingStore>,
    memory: Arc<S>,
    app: Application<L, X, M, C>,
    clock: Arc<dyn Clock>,
    hooks: Arc<dyn PassHooks>,
    owner: WorkerId,
    limits: IntentPassLimits,
}

impl<S, L, X, M, C> std::fmt::Debug for IntentWorker<S, L, X, M, C> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("IntentWorker")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

pub(crate) fn derived_operation_id(parts: &[&str]) -> Result<OperationId, MemoryError> {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let hex: String = digest[..20]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    OperationId::new(format!("op{hex}"))
}

impl<S, L, X, M, C> IntentWorker<S, L, X, M, C>
where
    S: MemoryReader + MemoryWriter,
    L: SourceLoader,
    X: Extractor,
    M: Merger,
    C: Cleanup,
{
    /// A worker.
    pub fn new(
        store: Arc<dyn RememberingStore>,
        memory: Arc<S>,
        app: Application<L, X, M, C>,
        clock: Arc<dyn Clock>,
        owner: WorkerId,
        limits: IntentPassLimits,
    ) -> Result<Self, RememberingError> {
        if limits.max_intents == 0 {
            return Err(RememberingError::InvalidLimits {
                field: "max_intents",
                reason: "must be positive",
            });
        }
        if limits.lease_ms == 0 || i64::try_from(limits.lease_ms).is_err() {
            return Err(RememberingError::InvalidLimits {
                field: "lease_ms",
                reason: "must be positive and fit in 63 bits",
            });
        }
        Ok(Self {
            store,
            memory,
            app,
            clock,
            hooks: Arc::new(NoHooks),
            owner,
            limits,
        })
    }

    /// Replaces the hooks.
    pub fn with_hooks(mut self, hooks: Arc<dyn PassHooks>) -> Self {
        self.hooks = hooks;
        self
    }

    /// Handles up to `max_intents` intents. Stops at the first error (the intent stays queued, its saved
    /// state intact, and its lease is released).
    pub async fn run_pass(&self) -> Result<IntentPassReport, RememberingError> {
        let mut report = IntentPassReport::default();
        for _ in 0..self.limits.max_intents {
            let Some(claim) = self.store.claim_next(
                &self.owner,
                self.limits.lease_ms,
                self.clock.now_millis(),
            )?
            else {
                break;
            };
            self.hooks.at(PassPoint::Claimed).await;
            match self.handle(&claim).await {
                Ok(outcome) => report.completed.push(outcome),
                Err(error) => {
                    match self.store.release(&claim.lease, self.clock.now_millis()) {
                        Ok(()) | Err(ActivityError::StaleLease { .. }) => {}
                        Err(release_error) => {
                            tracing::warn!(%release_error, "intent lease release failed");
                        }
                    }
                    return Err(error);
                }
            }
        }
        Ok(report)
    }

    async fn handle(&self, claim: &IntentClaim) -> Result<IntentOutcome, RememberingError> {
        match &claim.intent {
            Intent::Remember {
                source,
                revision,
                target,
                scopes,
            } => {
                let request = RememberRequest {
                    source,
                    revision,
                    target,
                    scopes,
                };
                self.remember(claim, &request).await
            }
            Intent::Cleanup { source, revision } => {
                self.cleanup(&claim.lease, source, revision.as_ref()).await
            }
        }
    }

    fn complete(
        &self,
        lease: &IntentLease,
        outcome: IntentOutcome,
        successor: Option<&Intent>,
    ) -> Result<IntentOutcome, RememberingError> {
        self.store
            .complete(lease, &outcome, successor, self.clock.now_millis())?;
        self.log_outcome(&outcome);
        Ok(outcome)
    }

    fn log_outcome(&self, outcome: &IntentOutcome) {
        let kind = match outcome {
            IntentOutcome::Written { .. } => "written",
            IntentOutcome::NothingToRemember => "nothing",
            IntentOutcome::Invalidated => "invalidated",
            IntentOutcome::TargetWithdrawn => "target-withdrawn",
            IntentOutcome::Cleaned { .. } => "cleaned",
            IntentOutcome::Failed { .. } => "failed",
        };
        tracing::debug!(outcome = kind, "intent completed");
    }

    async fn load(
        &self,
        source: &SourceId,
    ) -> Result<Option<crate::app::LoadedSource>, RememberingError> {
        self.app
            .loader
            .load(source)
            .await
            .map_err(|source| RememberingError::Application {
                operation: "load_source",
                source,
            })
    }

    async fn remember(
        &self,
        claim: &IntentClaim,
        request: &RememberRequest<'_>,
    ) -> Result<IntentOutcome, RememberingError> {
        let lease = &claim.lease;
        let (mut command, proposal) = match (&claim.command, &claim.proposal) {
            (Some(command), Some(proposal)) => (command.clone(), proposal.clone()),
            (_, saved_proposal) => {
                let proposal = match saved_proposal {
                    Some(proposal) => proposal.clone(),
                    None => match self.extract(claim, request).await? {
                        Extracted::Proposal(proposal) => proposal,
                        Extracted::Done(outcome) => return Ok(outcome),
                    },
                };
                if let Some(outcome) = self.recheck(lease, request).await? {
                    return Ok(outcome);
                }
                let command = self.prepare(claim, request, &proposal, 0).await?;
                (command, proposal)
            }
        };
        loop {
            self.hooks.at(PassPoint::BeforeApply).await;
            let result = self.memory.apply(command.write.clone()).await;
            self.hooks.at(PassPoint::AfterApply).await;
            match result {
                Ok(outcome) => {
                    if self.store.is_suppressed(request.source, request.revision)? {
                        self.store.admit(
                            &Intent::Cleanup {
                                source: request.source.clone(),
                                revision: Some(request.revision.clone()),
                            },
                            0,
                            self.clock.now_millis(),
                        )?;
                    }
                    let revision = outcome.receipt.document.revision;
                    return self.complete(lease, IntentOutcome::Written { revision }, None);
                }
                Err(MemoryError::Conflict { .. }) => {
                    let attempt = command.attempt.saturating_add(1);
                    if attempt > MAX_REBASES {
                        return Err(RememberingError::TooManyRebases { attempts: attempt });
                    }
                    command = self.prepare(claim, request, &proposal, attempt).await?;
                }
                Err(error @ MemoryError::OperationConflict { .. }) => {
                    self.complete(
                        lease,
                        IntentOutcome::Failed {
                            reason: error.kind().as_str().to_owned(),
                        },
                        None,
                    )?;
                    return Err(error.into());
                }
                Err(MemoryError::Withdrawn) => {
                    return self.complete(lease, IntentOutcome::TargetWithdrawn, None);
                }
                // Unknown outcome: the saved command is sent again, unchanged, by a later pass.
                Err(error) => return Err(error.into()),
            }
        }
    }

    async fn extract(
        &self,
        claim: &IntentClaim,
        request: &RememberRequest<'_>,
    ) -> Result<Extracted, RememberingError> {
        let lease = &claim.lease;
        let Some(loaded) = self.load(request.source).await? else {
            return Ok(Extracted::Done(self.complete(
                lease,
                IntentOutcome::NothingToRemember,
                None,
            )?));
        };
        if loaded.revision != *request.revision {
            let successor = request.successor(&loaded.revision);
            return Ok(Extracted::Done(self.complete(
                lease,
                IntentOutcome::Invalidated,
                Some(&successor),
            )?));
        }
        let proposal = self
            .app
            .extractor
            .extract(request.source, &loaded, self.clock.now_millis())
            .await
            .map_err(|source| RememberingError::Application {
                operation: "extract",
                source,
            })?;
        self.hooks.at(PassPoint::Extracted).await;
        let Some(proposal) = proposal else {
            return Ok(Extracted::Done(self.complete(
                lease,
                IntentOutcome::NothingToRemember,
                None,
            )?));
        };
        self.store
            .save_proposal(lease, &proposal, self.clock.now_millis())?;
        self.hooks.at(PassPoint::OutputSaved).await;
        Ok(Extracted::Proposal(proposal))
    }

    /// Re-checks the source after extraction; returns the outcome when the intent is invalidated.
    async fn recheck(
        &self,
        lease: &IntentLease,
        request: &RememberRequest<'_>,
    ) -> Result<Option<IntentOutcome>, RememberingError> {
        let current = self.load(request.source).await?;
        self.hooks.at(PassPoint::Rechecked).await;
        let successor = match &current {
            None => None,
            Some(loaded) if loaded.revision != *request.revision => {
                Some(request.successor(&loaded.revision))
            }
            Some(_) => {
                if !self.store.is_suppressed(request.source, request.revision)? {
                    return Ok(None);
                }
                None
            }
        };
        self.complete(lease, IntentOutcome::Invalidated, successor.as_ref())
            .map(Some)
    }

    /// Builds the exact command for `attempt` on the latest document and saves it with its reference.
    async fn prepare(
        &self,
        claim: &IntentClaim,
        request: &RememberRequest<'_>,
        proposal: &MemoryContent,
        attempt: u32,
    ) -> Result<SavedCommand, RememberingError> {
        let latest = self.memory.read(request.target).await?;
        let (expected_revision, content) = match &latest {
            None => (None, proposal.clone()),
            Some(document) => (
                Some(document.revision.clone()),
                self.app
                    .merger
                    .merge(document, proposal)
                    .map_err(|source| RememberingError::Application {
                        operation: "merge",
                        source,
                    })?,
            ),
        };
        let operation_id = derived_operation_id(&[claim.lease.id.as_str(), &attempt.to_string()])?;
        let write = MemoryWrite::Put {
            key: request.target.clone(),
            operation_id: operation_id.clone(),
            expected_revision,
            locator: format!("source/{}", request.revision.as_str()),
            content,
            scopes: request.scopes.to_vec(),
        };
        let revision = PreparedWrite::prepare(write.clone())?.revision();
        let command = SavedCommand { attempt, write };
        self.store.save_command(
            &claim.lease,
            &command,
            &SourceReference {
                source: request.source.clone(),
                source_revision: request.revision.clone(),
                target: request.target.clone(),
                operation_id,
                revision,
            },
            self.clock.now_millis(),
        )?;
        self.hooks.at(PassPoint::CommandSaved).await;
        Ok(command)
    }

    async fn cleanup(
        &self,
        lease: &IntentLease,
        source: &SourceId,
        revision: Option<&SourceRevision>,
    ) -> Result<IntentOutcome, RememberingError> {
        let (mut withdrawn, mut kept) = (0_u32, 0_u32);
        let mut after = 0;
        loop {
            let page = self.store.references(source, after, REFERENCE_PAGE)?;
            if page.is_empty() {
                break;
            }
            for (row, reference) in page {
                after = row;
                if revision.is_some_and(|revision| *revision != reference.source_revision) {
                    continue;
                }
                if self.clean_one(lease, &reference).await? {
                    withdrawn = withdrawn.saturating_add(1);
                } else {
                    kept = kept.saturating_add(1);
                }
            }
        }
        self.complete(lease, IntentOutcome::Cleaned { withdrawn, kept }, None)
    }
}

impl<S, L, X, M, C> IntentWorker<S, L, X, M, C>
where
    S: MemoryReader + MemoryWriter,
    L: SourceLoader,
    X: Extractor,
    M: Merger,
    C: Cleanup,
{
    /// Cleans the document of one reference; answers whether it withdrew it (otherwise it is kept,
    /// perhaps rewritten). A definite conflict means someone wrote meanwhile: the document is read
    /// again and the cleanup decides again, up to [`MAX_REBASES`] times.
    async fn clean_one(
        &self,
        lease: &IntentLease,
        reference: &SourceReference,
    ) -> Result<bool, RememberingError> {
        let mut attempt = 0_u32;
        loop {
            let Some(current) = self.memory.read(&reference.target).await? else {
                return Ok(false);
            };
            let action = self.app.cleanup.cleanup(&current, reference);
            let step = match &action {
                CleanupAction::Keep => return Ok(false),
                CleanupAction::Withdraw => "cleanup",
                CleanupAction::Rewrite(_) => "cleanup-rewrite",
            };
            // Derived from the revision it replaces: a retry after an unknown outcome decides on
            // what it reads then, and never reuses an id for another command.
            let operation_id = derived_operation_id(&[
                step,
                lease.id.as_str(),
                reference.operation_id.as_str(),
                current.revision.as_str(),
            ])?;
            let write = match action {
                CleanupAction::Rewrite(content) => MemoryWrite::Put {
                    key: reference.target.clone(),
                    operation_id,
                    expected_revision: Some(current.revision.clone()),
                    locator: current.locator.clone(),
                    content,
                    scopes: current.scopes.clone(),
                },
                CleanupAction::Withdraw | CleanupAction::Keep => MemoryWrite::Withdraw {
                    key: reference.target.clone(),
                    operation_id,
                    expected_revision: current.revision.clone(),
                    reason: "source withdrawn".to_owned(),
                    by: Some(memory_core::write::BY_WORKER.to_owned()),
                },
            };
            let withdraws = matches!(write, MemoryWrite::Withdraw { .. });
            match self.memory.apply(write).await {
                Ok(_) => return Ok(withdraws),
                Err(MemoryError::Withdrawn | MemoryError::NotFound) => return Ok(false),
                Err(MemoryError::Conflict { .. }) if attempt < MAX_REBASES => {
                    attempt += 1;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
}

enum Extracted {
    Proposal(MemoryContent),
    Done(IntentOutcome),
}

struct RememberRequest<'a> {
    source: &'a SourceId,
    revision: &'a SourceRevision,
    target: &'a MemoryKey,
    scopes: &'a [MemoryScope],
}

impl RememberRequest<'_> {
    fn successor(&self, revision: &SourceRevision) -> Intent {
        Intent::Remember {
            source: self.source.clone(),
            revision: revision.clone(),
            target: self.target.clone(),
            scopes: self.scopes.to_vec(),
        }
    }
}
