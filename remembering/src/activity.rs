//! Committed-activity processing over one thread (SPEC §5).
//!
//! A pass: claim the processor lease (fresh epoch), receive any pending output with the claim, capture
//! the thread tail once, then read bounded contiguous pages up to that tail and, per record, save the
//! extraction, apply it through the memory writer, and advance the cursor (which clears the pending
//! output in the same transaction). The pass starts no record once `timeout_ms` has passed or its lease
//! is about to end, and releases its lease at the end (the store waits at most 500 ms; otherwise the
//! lease simply expires).
//!
//! Each record's output names its target documents and actions (see [`Contribution`]). Before anything
//! is sent, the processor prepares the exact commands (reading a named target's current revision),
//! keeps a source-to-target reference per put under the record's source id
//! ([`SourceId::thread_record`]), and saves extraction and commands together as the pending output. A
//! retry by any worker replays the saved commands unchanged; document ids (for documents of the record's
//! own) and operation ids derive from the record's work id (processor, version, thread, sequence), so the
//! memory store's receipts make each record's effect land exactly once. Only a definite conflict takes a
//! new operation id: the saved contribution (never a second extraction) is rebased on the latest document
//! through the [`Merger`], and the new command is saved before it is sent. `OperationConflict` is an
//! error.
//!
//! Forgetting, editing, deleting or revoking a thread record goes through
//! [`crate::sources::SourceEvents`] with the record's source id: a suppressed record is not extracted,
//! its saved commands are not sent, and a put that lands while its record is suppressed admits the
//! record's cleanup again, so cleanup (an intent pass) withdraws it through the kept references. Until
//! then [`crate::sources::SuppressingReader`] hides it. Withdrawals keep no reference: they contribute
//! no content.

use std::sync::Arc;

use memory_core::activity::{
    ActivityError, Claim, Intent, PendingOutput, ProcessorId, ProcessorVersion, ProgressKey,
    ProgressStore, RememberingStore, SavedCommand, Sequence, SourceId, SourceReference,
    SourceRevision, ThreadId, ThreadLog, ThreadRecord, WorkId, WorkerId,
};
use memory_core::{
    Clock, DocumentId, MemoryError, MemoryKey, MemoryReader, MemoryReceipt, MemoryWrite,
    MemoryWriter, OperationId, PreparedWrite,
};
use serde::{Deserialize, Serialize};

use crate::app::{KeepLatestMerger, Merger};
use crate::error::RememberingError;
use crate::extract::{Contribution, RecordExtractor};
use crate::hooks::{NoHooks, PassHooks, PassPoint};
use crate::limits::PassLimits;
use crate::worker::MAX_REBASES;

/// Why a pass stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassStop {
    /// It processed everything up to the captured tail.
    ReachedTail,
    /// It processed `max_records`.
    MaxRecords,
    /// `timeout_ms` passed (or the lease was about to end).
    Timeout,
}

/// What one pass did.
#[derive(Debug, Clone, PartialEq)]
pub struct PassReport {
    /// The fencing epoch the pass held.
    pub epoch: memory_core::activity::FencingEpoch,
    /// The tail captured at the start.
    pub captured_tail: Sequence,
    /// The cursor at the end.
    pub cursor: Sequence,
    /// Records advanced past.
    pub processed: usize,
    /// Records whose saved output was applied instead of re-extracting.
    pub reused_saved_output: usize,
    /// Records advanced past without sending (all of) their commands because their source was
    /// suppressed (forgotten, edited, deleted or revoked).
    pub suppressed: usize,
    /// Commands rebased after a definite conflict.
    pub rebases: usize,
    /// Receipts of every write applied, in order (replays included).
    pub receipts: Vec<MemoryReceipt>,
    /// Why it stopped.
    pub stop: PassStop,
    /// Records exist beyond the captured tail (appended during the pass): schedule another pass.
    pub pending_beyond_tail: bool,
}

/// Processes committed activity for one processor version.
pub struct ActivityProcessor<W, E> {
    log: Arc<dyn ThreadLog>,
    progress: Arc<dyn ProgressStore>,
    references: Arc<dyn RememberingStore>,
    writer: Arc<W>,
    extractor: E,
    merger: Arc<dyn Merger>,
    clock: Arc<dyn Clock>,
    hooks: Arc<dyn PassHooks>,
    processor: ProcessorId,
    version: ProcessorVersion,
    owner: WorkerId,
    limits: PassLimits,
}

impl<W, E> std::fmt::Debug for ActivityProcessor<W, E> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ActivityProcessor")
            .field("processor", &self.processor)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Everything an [`ActivityProcessor`] needs.
pub struct ActivityProcessorParts<W, E> {
    /// The thread log.
    pub log: Arc<dyn ThreadLog>,
    /// The progress store.
    pub progress: Arc<dyn ProgressStore>,
    /// Where source-to-target references and suppression live (the remembering store).
    pub references: Arc<dyn RememberingStore>,
    /// The memory writer (it reads named targets to prepare commands, and latest documents to rebase).
    pub writer: Arc<W>,
    /// The extractor.
    pub extractor: E,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// The processor's id.
    pub processor: ProcessorId,
    /// The processor's version.
    pub version: ProcessorVersion,
    /// This worker's id.
    pub owner: WorkerId,
    /// Pass limits.
    pub limits: PassLimits,
}

impl<W: MemoryReader + MemoryWriter, E: RecordExtractor> ActivityProcessor<W, E> {
    /// A processor; its limits are checked here, before anything is claimed. Rebases use
    /// [`KeepLatestMerger`] unless [`ActivityProcessor::with_merger`] says otherwise.
    pub fn new(parts: ActivityProcessorParts<W, E>) -> Result<Self, RememberingError> {
        parts.limits.validate()?;
        Ok(Self {
            log: parts.log,
            progress: parts.progress,
            references: parts.references,
            writer: parts.writer,
            extractor: parts.extractor,
            merger: Arc::new(KeepLatestMerger),
            clock: parts.clock,
            hooks: Arc::new(NoHooks),
            processor: parts.processor,
            version: parts.version,
            owner: parts.owner,
            limits: parts.limits,
        })
    }

    /// Replaces the merger that rebases a saved contribution after a definite conflict.
    pub fn with_merger(mut self, merger: Arc<dyn Merger>) -> Self {
        self.merger = merger;
        self
    }

    /// Replaces the hooks (tests inject crashes and pauses through them).
    pub fn with_hooks(mut self, hooks: Arc<dyn PassHooks>) -> Self {
        self.hooks = hooks;
        self
    }

    /// The progress key of `thread`.
    pub fn key(&self, thread: &ThreadId) -> ProgressKey {
        ProgressKey {
            processor: self.processor.clone(),
            version: self.version,
            thread: thread.clone(),
        }
    }

    /// Runs one finite pass over `thread`.
    pub async fn run_pass(&self, thread: &ThreadId) -> Result<PassReport, RememberingError> {
        let key = self.key(thread);
        let claim = self.progress.claim(
            &key,
            &self.owner,
            self.limits.lease_ms,
            self.clock.now_millis(),
        )?;
        tracing::debug!(
            epoch = claim.lease.epoch.0,
            cursor = claim.cursor.0,
            "claimed activity lease"
        );
        self.hooks.at(PassPoint::Claimed).await;
        let result = self.process(&claim).await;
        match self.progress.release(&claim.lease, self.clock.now_millis()) {
            Ok(()) | Err(ActivityError::StaleLease { .. }) => {}
            Err(error) => tracing::warn!(%error, "lease release failed; it will expire"),
        }
        result
    }

    async fn process(&self, claim: &Claim) -> Result<PassReport, RememberingError> {
        let lease = &claim.lease;
        let thread = &lease.key.thread;
        let started = self.clock.now_millis();
        let timeout = i64::try_from(self.limits.timeout_ms).unwrap_or(i64::MAX);
        let deadline = started.saturating_add(timeout).min(lease.expires_at);
        let captured_tail = self.log.inspect_tail(thread)?;
        let mut report = PassReport {
            epoch: lease.epoch,
            captured_tail,
            cursor: claim.cursor,
            processed: 0,
            reused_saved_output: 0,
            suppressed: 0,
            rebases: 0,
            receipts: Vec::new(),
            stop: PassStop::ReachedTail,
            pending_beyond_tail: false,
        };
        let mut pending = claim.pending.clone();
        if let Some(saved) = &pending {
            let expected = next(claim.cursor)?;
            if saved.sequence != expected {
                return Err(ActivityError::Noncontiguous {
                    expected,
                    found: saved.sequence,
                }
                .into());
            }
        }
        'pages: while report.cursor < captured_tail {
            let remaining_records = self.limits.max_records - report.processed;
            if remaining_records == 0 {
                report.stop = PassStop::MaxRecords;
                break;
            }
            let to_tail = usize::try_from(captured_tail.0 - report.cursor.0).unwrap_or(usize::MAX);
            let page_limit = self.limits.page_size.min(remaining_records).min(to_tail);
            let page = self.log.read_page(thread, report.cursor, page_limit)?;
            if page.is_empty() {
                return Err(ActivityError::Noncontiguous {
                    expected: next(report.cursor)?,
                    found: captured_tail,
                }
                .into());
            }
            for record in &page {
                let expected = next(report.cursor)?;
                if record.sequence != expected {
                    return Err(ActivityError::Noncontiguous {
                        expected,
                        found: record.sequence,
                    }
                    .into());
                }
                if self.clock.now_millis() >= deadline {
                    report.stop = PassStop::Timeout;
                    break 'pages;
                }
                let saved = pending
                    .take()
                    .filter(|saved| saved.sequence == record.sequence);
                let output = match saved {
                    Some(saved) => {
                        report.reused_saved_output += 1;
                        Some(decode_output(&saved)?)
                    }
                    None => self.extract_and_save(claim, record, &mut report).await?,
                };
                if let Some(mut output) = output {
                    self.send(claim, record, &mut output, &mut report).await?;
                }
                self.progress
                    .advance(lease, record.sequence, self.clock.now_millis())?;
                report.cursor = record.sequence;
                report.processed += 1;
                self.hooks.at(PassPoint::Advanced).await;
            }
        }
        if report.stop == PassStop::ReachedTail {
            report.pending_beyond_tail = !self.log.read_page(thread, captured_tail, 1)?.is_empty();
        }
        tracing::debug!(
            processed = report.processed,
            reused = report.reused_saved_output,
            writes = report.receipts.len(),
            "activity pass finished"
        );
        Ok(report)
    }

    /// Extracts a record, prepares its exact commands, keeps their references and saves both as the
    /// pending output. `None` when there is nothing to send (nothing extracted, or the record's source
    /// is suppressed).
    async fn extract_and_save(
        &self,
        claim: &Claim,
        record: &ThreadRecord,
        report: &mut PassReport,
    ) -> Result<Option<RecordOutput>, RememberingError> {
        let source = RecordSource::of(record);
        if self
            .references
            .is_suppressed(&source.id, &source.revision)?
        {
            report.suppressed += 1;
            return Ok(None);
        }
        let work_id = claim.lease.key.work_id(record.sequence);
        let contributions = self
            .extractor
            .extract(record, self.clock.now_millis())
            .map_err(|source| RememberingError::Application {
                operation: "extract",
                source,
            })?;
        self.hooks.at(PassPoint::Extracted).await;
        let mut commands = Vec::with_capacity(contributions.len());
        for (index, contribution) in contributions.iter().enumerate() {
            commands.push(
                self.prepare(&work_id, record, index, contribution, 0)
                    .await?,
            );
        }
        // Nothing to send means nothing to save: advancing is then the record's only effect.
        if commands.iter().all(Option::is_none) {
            return Ok(None);
        }
        let output = RecordOutput {
            contributions,
            commands,
        };
        let references: Vec<SourceReference> = output
            .commands
            .iter()
            .flatten()
            .filter_map(|command| source.reference(&command.write).transpose())
            .collect::<Result<_, _>>()?;
        // References first: if the save below never happens, they name revisions no document reaches.
        self.references.save_references(&references)?;
        self.progress.save_pending(
            &claim.lease,
            &output.pending(record.sequence, work_id)?,
            self.clock.now_millis(),
        )?;
        self.hooks.at(PassPoint::OutputSaved).await;
        Ok(Some(output))
    }

    /// The exact command of contribution `index` for `attempt` (0: first; later: a rebase on the
    /// latest document). `None` when there is nothing to send.
    async fn prepare(
        &self,
        work_id: &WorkId,
        record: &ThreadRecord,
        index: usize,
        contribution: &Contribution,
        attempt: u32,
    ) -> Result<Option<SavedCommand>, RememberingError> {
        let own_id = format!("{}-{index}", work_id.as_str());
        let operation_id = OperationId::new(if attempt == 0 {
            own_id.clone()
        } else {
            format!("{own_id}-r{attempt}")
        })?;
        let write = match contribution {
            Contribution::Put {
                namespace,
                target,
                content,
                scopes,
            } => {
                let key = MemoryKey {
                    namespace: namespace.clone(),
                    id: match target {
                        Some(target) => target.clone(),
                        None => DocumentId::new(own_id)?,
                    },
                };
                // A document of the record's own is created on the first attempt without a read.
                let latest = if target.is_none() && attempt == 0 {
                    None
                } else {
                    self.writer.read(&key).await?
                };
                let (expected_revision, content) = match latest {
                    None => (None, content.clone()),
                    Some(latest) if attempt == 0 => (Some(latest.revision), content.clone()),
                    Some(latest) => {
                        let merged = self.merger.merge(&latest, content).map_err(|source| {
                            RememberingError::Application {
                                operation: "merge",
                                source,
                            }
                        })?;
                        (Some(latest.revision), merged)
                    }
                };
                MemoryWrite::Put {
                    key,
                    operation_id,
                    expected_revision,
                    locator: record.locator(),
                    content,
                    scopes: scopes.clone(),
                }
            }
            Contribution::Withdraw {
                namespace,
                target,
                reason,
            } => {
                let key = MemoryKey {
                    namespace: namespace.clone(),
                    id: target.clone(),
                };
                let Some(latest) = self.writer.read(&key).await? else {
                    return Ok(None);
                };
                MemoryWrite::Withdraw {
                    key,
                    operation_id,
                    expected_revision: latest.revision,
                    reason: reason.clone(),
                }
            }
        };
        Ok(Some(SavedCommand { attempt, write }))
    }

    /// Sends a record's saved commands in order; a definite conflict rebases the saved contribution
    /// into a new saved command before it is sent.
    async fn send(
        &self,
        claim: &Claim,
        record: &ThreadRecord,
        output: &mut RecordOutput,
        report: &mut PassReport,
    ) -> Result<(), RememberingError> {
        if output.commands.len() != output.contributions.len() {
            return Err(RememberingError::CorruptOutput {
                what: "saved commands do not match saved contributions".to_owned(),
            });
        }
        let source = RecordSource::of(record);
        let work_id = claim.lease.key.work_id(record.sequence);
        for index in 0..output.commands.len() {
            let Some(mut command) = output.commands[index].clone() else {
                continue;
            };
            loop {
                // A forget acknowledged after the output was saved: nothing more is sent.
                if self
                    .references
                    .is_suppressed(&source.id, &source.revision)?
                {
                    report.suppressed += 1;
                    return Ok(());
                }
                self.hooks.at(PassPoint::BeforeApply).await;
                let result = self.writer.apply(command.write.clone()).await;
                self.hooks.at(PassPoint::AfterApply).await;
                match result {
                    Ok(outcome) => {
                        report.receipts.push(outcome.receipt);
                        if matches!(command.write, MemoryWrite::Put { .. }) {
                            self.readmit_cleanup_if_suppressed(&source)?;
                        }
                        break;
                    }
                    Err(MemoryError::Conflict { .. }) => {
                        let attempt = command.attempt.saturating_add(1);
                        if attempt > MAX_REBASES {
                            return Err(RememberingError::TooManyRebases { attempts: attempt });
                        }
                        let rebased = self
                            .prepare(
                                &work_id,
                                record,
                                index,
                                &output.contributions[index],
                                attempt,
                            )
                            .await?;
                        output.commands[index] = rebased.clone();
                        if let Some(reference) = rebased
                            .as_ref()
                            .map(|rebased| source.reference(&rebased.write))
                            .transpose()?
                            .flatten()
                        {
                            self.references.save_references(&[reference])?;
                        }
                        self.progress.replace_pending(
                            &claim.lease,
                            &output.pending(record.sequence, work_id.clone())?,
                            self.clock.now_millis(),
                        )?;
                        report.rebases += 1;
                        self.hooks.at(PassPoint::CommandSaved).await;
                        match rebased {
                            Some(rebased) => command = rebased,
                            None => break,
                        }
                    }
                    // Withdrawal is terminal: a put cannot land and a withdrawal already happened.
                    Err(MemoryError::Withdrawn) => break,
                    Err(MemoryError::NotFound)
                        if matches!(command.write, MemoryWrite::Withdraw { .. }) =>
                    {
                        break;
                    }
                    // Unknown outcomes stay saved for an unchanged retry; `OperationConflict` is an
                    // error, never a reason to invent a new command.
                    Err(error) => return Err(error.into()),
                }
            }
        }
        Ok(())
    }

    /// A put that lands while its record is suppressed may have raced the record's cleanup, which then
    /// found nothing to withdraw: the cleanup is admitted again.
    fn readmit_cleanup_if_suppressed(&self, source: &RecordSource) -> Result<(), RememberingError> {
        if self
            .references
            .is_suppressed(&source.id, &source.revision)?
        {
            self.references.admit(
                &Intent::Cleanup {
                    source: source.id.clone(),
                    revision: Some(source.revision.clone()),
                },
                0,
                self.clock.now_millis(),
            )?;
        }
        Ok(())
    }
}

/// The saved output of one record: what the extractor returned (rebases start from it, never from a
/// second extraction) and one exact command per contribution (`None`: nothing to send).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordOutput {
    contributions: Vec<Contribution>,
    commands: Vec<Option<SavedCommand>>,
}

impl RecordOutput {
    fn pending(
        &self,
        sequence: Sequence,
        work_id: WorkId,
    ) -> Result<PendingOutput, RememberingError> {
        let output =
            serde_json::to_value(self).map_err(|error| RememberingError::CorruptOutput {
                what: error.to_string(),
            })?;
        Ok(PendingOutput {
            sequence,
            work_id,
            output,
        })
    }
}

/// A record as a remembering source.
struct RecordSource {
    id: SourceId,
    revision: SourceRevision,
}

impl RecordSource {
    fn of(record: &ThreadRecord) -> Self {
        Self {
            id: SourceId::thread_record(&record.thread, record.sequence),
            revision: SourceRevision::of_record(&record.digest),
        }
    }

    /// The reference a put keeps; withdrawals contribute no content and keep none.
    fn reference(&self, write: &MemoryWrite) -> Result<Option<SourceReference>, RememberingError> {
        if !matches!(write, MemoryWrite::Put { .. }) {
            return Ok(None);
        }
        let revision = PreparedWrite::prepare(write.clone())?.revision();
        Ok(Some(SourceReference {
            source: self.id.clone(),
            source_revision: self.revision.clone(),
            target: write.key().clone(),
            operation_id: write.operation_id().clone(),
            revision,
        }))
    }
}

fn next(sequence: Sequence) -> Result<Sequence, RememberingError> {
    sequence.next().ok_or_else(|| {
        ActivityError::TooLarge {
            limit: "thread sequence",
            max: u64::MAX,
            actual: u64::MAX,
        }
        .into()
    })
}

fn decode_output(saved: &PendingOutput) -> Result<RecordOutput, RememberingError> {
    serde_json::from_value(saved.output.clone()).map_err(|error| RememberingError::CorruptOutput {
        what: error.to_string(),
    })
}
