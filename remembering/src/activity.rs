//! Committed-activity processing over one thread (SPEC §5).
//!
//! A pass: claim the processor lease (fresh epoch), receive any pending output with the claim, capture
//! the thread tail once, then read bounded contiguous pages up to that tail and, per record, save the
//! extraction, apply it through the memory writer, and advance the cursor (which clears the pending
//! output in the same transaction). The pass starts no record once `timeout_ms` has passed or its lease
//! is about to end, and releases its lease at the end (the store waits at most 500 ms; otherwise the
//! lease simply expires).
//!
//! Writes are deterministic functions of the saved output: document ids and operation ids derive from
//! the record's work id (processor, version, thread, sequence), so a retry by any worker replays the same
//! commands, and the memory store's receipts make each record's effect land exactly once.

use std::sync::Arc;

use memory_core::activity::{
    ActivityError, Claim, PendingOutput, ProcessorId, ProcessorVersion, ProgressKey, ProgressStore,
    Sequence, ThreadId, ThreadLog, ThreadRecord, WorkId, WorkerId,
};
use memory_core::{
    Clock, DocumentId, MemoryKey, MemoryReceipt, MemoryWrite, MemoryWriter, OperationId,
};

use crate::error::RememberingError;
use crate::extract::{Contribution, RecordExtractor};
use crate::hooks::{NoHooks, PassHooks, PassPoint};
use crate::limits::PassLimits;

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
    writer: Arc<W>,
    extractor: E,
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
    /// The memory writer.
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

impl<W: MemoryWriter, E: RecordExtractor> ActivityProcessor<W, E> {
    /// A processor; its limits are checked here, before anything is claimed.
    pub fn new(parts: ActivityProcessorParts<W, E>) -> Result<Self, RememberingError> {
        parts.limits.validate()?;
        Ok(Self {
            log: parts.log,
            progress: parts.progress,
            writer: parts.writer,
            extractor: parts.extractor,
            clock: parts.clock,
            hooks: Arc::new(NoHooks),
            processor: parts.processor,
            version: parts.version,
            owner: parts.owner,
            limits: parts.limits,
        })
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
                let reused = saved.is_some();
                let writes = match saved {
                    Some(saved) => decode_output(&saved)?,
                    None => self.extract_and_save(claim, record).await?,
                };
                if reused {
                    report.reused_saved_output += 1;
                }
                for write in writes {
                    self.hooks.at(PassPoint::BeforeApply).await;
                    let outcome = self.writer.apply(write).await?;
                    self.hooks.at(PassPoint::AfterApply).await;
                    report.receipts.push(outcome.receipt);
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

    async fn extract_and_save(
        &self,
        claim: &Claim,
        record: &ThreadRecord,
    ) -> Result<Vec<MemoryWrite>, RememberingError> {
        let work_id = claim.lease.key.work_id(record.sequence);
        let contributions = self
            .extractor
            .extract(record, self.clock.now_millis())
            .map_err(|source| RememberingError::Application {
                operation: "extract",
                source,
            })?;
        let writes = to_writes(&work_id, record, contributions)?;
        self.hooks.at(PassPoint::Extracted).await;
        // Nothing to apply means nothing to save: advancing is then the record's only effect.
        if !writes.is_empty() {
            let output =
                serde_json::to_value(&writes).map_err(|error| RememberingError::CorruptOutput {
                    what: error.to_string(),
                })?;
            self.progress.save_pending(
                &claim.lease,
                &PendingOutput {
                    sequence: record.sequence,
                    work_id,
                    output,
                },
                self.clock.now_millis(),
            )?;
            self.hooks.at(PassPoint::OutputSaved).await;
        }
        Ok(writes)
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

/// The exact writes of a record's contributions: ids derive from the work id and the contribution's index.
pub fn to_writes(
    work_id: &WorkId,
    record: &ThreadRecord,
    contributions: Vec<Contribution>,
) -> Result<Vec<MemoryWrite>, RememberingError> {
    contributions
        .into_iter()
        .enumerate()
        .map(|(index, contribution)| {
            let id = format!("{}-{index}", work_id.as_str());
            Ok(MemoryWrite::Put {
                key: MemoryKey {
                    namespace: contribution.namespace,
                    id: DocumentId::new(id.clone())?,
                },
                operation_id: OperationId::new(id)?,
                expected_revision: None,
                locator: record.locator(),
                content: contribution.content,
                scopes: contribution.scopes,
            })
        })
        .collect()
}

fn decode_output(saved: &PendingOutput) -> Result<Vec<MemoryWrite>, RememberingError> {
    serde_json::from_value(saved.output.clone()).map_err(|error| RememberingError::CorruptOutput {
        what: error.to_string(),
    })
}
