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
//! An attestation ([`Contribution::Attest`], what the default extractor emits for each statement)
//! always reads its target: it creates the document, or adds the record's attribution to it without
//! touching its text, and sends nothing when the attribution is already there. A target withdrawn
//! for good moves the attestation to the target's next incarnation, like a rebase (a new operation
//! id, the new command saved before it is sent).
//!
//! Forgetting, editing, deleting or revoking a thread record goes through
//! [`crate::sources::SourceEvents`] with the record's source id: a suppressed record is not extracted,
//! its saved commands are not sent, and a put that lands while its record is suppressed admits the
//! record's cleanup again, so cleanup (an intent pass) withdraws it through the kept references. Until
//! then [`crate::sources::SuppressingReader`] hides it. Withdrawals keep no reference: they contribute
//! no content.

use std::sync::Arc;

use std::collections::BTreeMap;

use memory_core::activity::{
    ActivityError, Claim, CorrectionCounts, ExtractionNote, Intent, PendingOutput, ProcessorId,
    ProcessorVersion, ProgressKey, ProgressStore, RecordDigest, RememberingStore, SavedCommand,
    Sequence, SourceId, SourceReference, SourceRevision, ThreadDestination, ThreadId, ThreadLog,
    ThreadRecord, WorkId, WorkerId,
};
use memory_core::document::MemoryScope;
use memory_core::recall::corrections::CORRECTS;
use memory_core::{
    Clock, DocumentId, MemoryError, MemoryKey, MemoryReader, MemoryReceipt, MemoryWrite,
    MemoryWriter, OperationId, PreparedWrite,
};
use serde::{Deserialize, Serialize};

use crate::app::{KeepLatestMerger, Merger};
use crate::corrections::{RESEMBLING_CANDIDATES, Resemblance, corrected_memory, correction_cues};
use crate::error::RememberingError;
use crate::extract::MAX_INCARNATIONS;
use crate::extract::{
    Contribution, ExtractFailure, ExtractionRequest, ThreadExtractor, incarnation_id,
    incarnation_of, statement_text,
};
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
    /// A record could not be remembered for a reason a retry cannot change (its extraction failed,
    /// or the thread's destination no longer validates): the thread is parked
    /// ([`ThreadLog::park`]) at that record until it is rebound, and the worker goes on with others.
    Parked,
}

/// Where the memory of a thread with no binding goes (threads appended before bindings existed, or
/// through the library without a destination).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnboundThreads {
    /// A namespace per thread ([`ThreadDestination::legacy_thread`]) with these scopes: where such
    /// threads always went.
    PerThread {
        /// The scopes granted.
        scopes: Vec<MemoryScope>,
    },
    /// One destination for all of them (`remembering-worker --namespace`).
    Destination(ThreadDestination),
}

impl UnboundThreads {
    /// The destination of an unbound `thread`.
    pub fn destination(&self, thread: &ThreadId) -> Result<ThreadDestination, ActivityError> {
        match self {
            Self::PerThread { scopes } => ThreadDestination::legacy_thread(thread, scopes.clone()),
            Self::Destination(destination) => Ok(destination.clone()),
        }
    }
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
    /// Contributions extracted (kept) by this pass's extractions.
    pub kept: u64,
    /// Parts of records not kept, by reason, in this pass's extractions.
    pub dropped: BTreeMap<String, u64>,
    /// Where the pass parked the thread, and the kind of error, when it did.
    pub parked: Option<(Sequence, String)>,
}

impl PassReport {
    /// A report of a pass that has done nothing yet: no records, receipts, drops or parking, stopping
    /// for `stop` unless the pass says otherwise.
    fn empty(
        epoch: memory_core::activity::FencingEpoch,
        captured_tail: Sequence,
        cursor: Sequence,
        stop: PassStop,
    ) -> Self {
        Self {
            epoch,
            captured_tail,
            cursor,
            processed: 0,
            reused_saved_output: 0,
            suppressed: 0,
            rebases: 0,
            receipts: Vec::new(),
            stop,
            pending_beyond_tail: false,
            kept: 0,
            dropped: BTreeMap::new(),
            parked: None,
        }
    }
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
    unbound: UnboundThreads,
    /// Where correcting statements find what they correct (`None`: no links are made).
    resemblance: Option<Arc<dyn Resemblance>>,
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
    /// Where threads with no binding go.
    pub unbound: UnboundThreads,
}

impl<W: MemoryReader + MemoryWriter, E: ThreadExtractor> ActivityProcessor<W, E> {
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
            unbound: parts.unbound,
            resemblance: None,
        })
    }

    /// Links correcting statements to the memory they correct, found through `resemblance`
    /// ([`crate::corrections`]); without it no statement is linked.
    pub fn with_corrections(mut self, resemblance: Arc<dyn Resemblance>) -> Self {
        self.resemblance = Some(resemblance);
        self
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

    /// The progress key of `thread` while its binding is of `generation`: generation 0 (and an
    /// unbound thread) keeps the processor's own id; a rebound thread's progress is kept under
    /// `<processor>~g<generation>`, so its records are remembered again, into the new destination.
    pub fn key(&self, thread: &ThreadId, generation: u64) -> Result<ProgressKey, ActivityError> {
        let processor = if generation == 0 {
            self.processor.clone()
        } else {
            ProcessorId::new(format!("{}~g{generation}", self.processor.as_str()))?
        };
        Ok(ProgressKey {
            processor,
            version: self.version,
            thread: thread.clone(),
        })
    }

    /// Runs one finite pass over `thread`, into the thread's destination.
    pub async fn run_pass(&self, thread: &ThreadId) -> Result<PassReport, RememberingError> {
        // A binding that no longer validates is this thread's problem, not the worker's: park it.
        let binding = match self.log.binding(thread) {
            Ok(binding) => binding,
            Err(ActivityError::Store(memory_core::StoreFault::Corrupt { .. })) => {
                return self.park_unclaimed(thread, "destination");
            }
            Err(error) => return Err(error.into()),
        };
        let (destination, generation) = match binding {
            Some(binding) => (binding.destination, binding.generation),
            None => match self.unbound.destination(thread) {
                Ok(destination) => (destination, 0),
                Err(_) => return self.park_unclaimed(thread, "destination"),
            },
        };
        let key = self.key(thread, generation)?;
        let claim = self.progress.claim(
            &key,
            &self.owner,
            self.limits.lease_ms,
            self.clock.now_millis(),
        )?;
        tracing::debug!(
            epoch = claim.lease.epoch.get(),
            cursor = claim.cursor.get(),
            "claimed activity lease"
        );
        self.hooks.at(PassPoint::Claimed).await;
        let result = self.process(&claim, &destination).await;
        match self.progress.release(&claim.lease, self.clock.now_millis()) {
            Ok(()) | Err(ActivityError::StaleLease { .. }) => {}
            Err(error) => tracing::warn!(%error, "lease release failed; it will expire"),
        }
        result
    }

    /// Parks a thread whose destination cannot be known, at its first record.
    fn park_unclaimed(
        &self,
        thread: &ThreadId,
        kind: &str,
    ) -> Result<PassReport, RememberingError> {
        let at = Sequence::new(1);
        self.log.park(thread, at, kind)?;
        tracing::warn!(kind, "thread parked: its destination does not validate");
        Ok(PassReport {
            parked: Some((at, kind.to_owned())),
            ..PassReport::empty(
                memory_core::activity::FencingEpoch::new(0),
                self.log.inspect_tail(thread)?,
                Sequence::ZERO,
                PassStop::Parked,
            )
        })
    }

    async fn process(
        &self,
        claim: &Claim,
        destination: &ThreadDestination,
    ) -> Result<PassReport, RememberingError> {
        let lease = &claim.lease;
        let thread = &lease.key.thread;
        let started = self.clock.now_millis();
        let timeout = i64::try_from(self.limits.timeout_ms).unwrap_or(i64::MAX);
        let deadline = started.saturating_add(timeout).min(lease.expires_at);
        let captured_tail = self.log.inspect_tail(thread)?;
        let mut report = PassReport::empty(
            lease.epoch,
            captured_tail,
            claim.cursor,
            PassStop::ReachedTail,
        );
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
        // What the next record may be answering: the record at the cursor (read once here, then
        // carried along), unless it is forgotten.
        let mut previous = if report.cursor == Sequence::ZERO || report.cursor >= captured_tail {
            None
        } else {
            self.log
                .read_page(thread, report.cursor.saturating_previous(), 1)?
                .into_iter()
                .find(|record| record.sequence == report.cursor)
        };
        'pages: while report.cursor < captured_tail {
            let remaining_records = self.limits.max_records - report.processed;
            if remaining_records == 0 {
                report.stop = PassStop::MaxRecords;
                break;
            }
            let to_tail =
                usize::try_from(captured_tail.get() - report.cursor.get()).unwrap_or(usize::MAX);
            let page_limit = self.limits.page_size.min(remaining_records).min(to_tail);
            let page = self.log.read_page(thread, report.cursor, page_limit)?;
            if page.is_empty() {
                return Err(ActivityError::Noncontiguous {
                    expected: next(report.cursor)?,
                    found: captured_tail,
                }
                .into());
            }
            for (index, record) in page.iter().enumerate() {
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
                    None => {
                        match self
                            .extract_and_save(
                                claim,
                                record,
                                previous.as_ref(),
                                page.get(index + 1..).unwrap_or_default(),
                                destination,
                                &mut report,
                            )
                            .await
                        {
                            Ok(output) => output,
                            // The same record would fail the same way on every retry: park the
                            // thread here (the cursor stays before it) and let the worker go on.
                            Err(Extracted::Parked { kind, source }) => {
                                tracing::warn!(kind, error = %source, "thread parked");
                                self.log.park(thread, record.sequence, kind)?;
                                report.stop = PassStop::Parked;
                                report.parked = Some((record.sequence, kind.to_owned()));
                                break 'pages;
                            }
                            Err(Extracted::Failed(error)) => return Err(error),
                        }
                    }
                };
                if let Some(mut output) = output {
                    self.send(claim, record, &mut output, &mut report).await?;
                }
                self.progress
                    .advance(lease, record.sequence, self.clock.now_millis())?;
                report.cursor = record.sequence;
                report.processed += 1;
                previous = Some(record.clone());
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
        previous: Option<&ThreadRecord>,
        following: &[ThreadRecord],
        destination: &ThreadDestination,
        report: &mut PassReport,
    ) -> Result<Option<RecordOutput>, Extracted> {
        let source = RecordSource::of(record);
        if source.is_forgotten(&*self.references)? {
            report.suppressed += 1;
            return Ok(None);
        }
        // A forgotten record is no one's context either.
        let previous = match previous {
            Some(asked) if RecordSource::of(asked).is_forgotten(&*self.references)? => None,
            previous => previous,
        };
        let work_id = claim.lease.key.work_id(record.sequence);
        let request = ExtractionRequest {
            record,
            previous,
            following,
            destination,
            now: self.clock.now_millis(),
            suppression: &*self.references,
        };
        let mut extraction = match self.extractor.extract_thread(request).await {
            Ok(extraction) => extraction,
            Err(ExtractFailure::Permanent { kind, source }) => {
                return Err(Extracted::Parked { kind, source });
            }
            Err(ExtractFailure::Transient(source)) => {
                return Err(Extracted::Failed(RememberingError::Deferred {
                    operation: "extract",
                    source,
                }));
            }
        };
        // Part of the extraction: saved with it below, so a retry replays the link, never
        // searches again.
        let corrections = self
            .link_corrections(&mut extraction.contributions, record, destination)
            .await?;
        let note = ExtractionNote {
            kept: extraction.contributions.len() as u64,
            dropped: extraction.dropped,
            corrections,
            model: extraction.model,
        };
        note.validate()?;
        // Noted once per record (a re-extraction after a crash notes nothing new).
        self.progress
            .note_extraction(&claim.lease.key, record.sequence, &note)?;
        report.kept = report.kept.saturating_add(note.kept);
        for (reason, count) in note.dropped {
            *report.dropped.entry(reason).or_default() += count;
        }
        let contributions = extraction.contributions;
        self.hooks.at(PassPoint::Extracted).await;
        let mut commands = Vec::with_capacity(contributions.len());
        for (index, contribution) in contributions.iter().enumerate() {
            commands.push(
                self.prepare(&work_id, record, index, contribution, 0, 0)
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
        let mut references = Vec::new();
        for command in output.commands.iter().flatten() {
            references.extend(command_references(&source, &command.write)?);
        }
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

    /// Links each statement of `contributions` that says it corrects something
    /// ([`correction_cues`]) to the memory it corrects ([`corrected_memory`]), as its
    /// [`CORRECTS`] member; counts the links made and refused.
    async fn link_corrections(
        &self,
        contributions: &mut [Contribution],
        record: &ThreadRecord,
        destination: &ThreadDestination,
    ) -> Result<CorrectionCounts, RememberingError> {
        let mut counts = CorrectionCounts::default();
        let Some(resemblance) = &self.resemblance else {
            return Ok(counts);
        };
        for contribution in contributions {
            let (Contribution::Attest {
                target, content, ..
            }
            | Contribution::Put {
                target: Some(target),
                content,
                ..
            }) = contribution
            else {
                continue;
            };
            // Linked already by the extractor (a model's proposal, whose quotes the checks found to
            // hold correcting words): counted as linked, never searched for again.
            if content.metadata.contains_key(CORRECTS) {
                counts.linked += 1;
                continue;
            }
            let said = statement_text(content).to_owned();
            if correction_cues(&said).is_empty() {
                continue;
            }
            let candidates = resemblance
                .resembling(destination, &said, RESEMBLING_CANDIDATES)
                .await?;
            match corrected_memory(&said, &record.record.speaker, target, &candidates) {
                Some(link) => {
                    content.metadata.insert(CORRECTS.to_owned(), link.to_json());
                    counts.linked += 1;
                }
                None => counts.refused += 1,
            }
        }
        Ok(counts)
    }

    /// The exact command of contribution `index` for `attempt` (0: first; later: a rebase on the
    /// latest document, or an attestation moved to the next incarnation of its target) into
    /// `incarnation` of an attested target (0 for everything else). `None` when there is nothing to
    /// send.
    async fn prepare(
        &self,
        work_id: &WorkId,
        record: &ThreadRecord,
        index: usize,
        contribution: &Contribution,
        attempt: u32,
        incarnation: u32,
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
            Contribution::Attest {
                namespace,
                target,
                content,
                scopes,
            } => {
                let key = MemoryKey {
                    namespace: namespace.clone(),
                    id: incarnation_id(target, incarnation)?,
                };
                // Always read: whether this creates the document or attests it depends on it.
                let (expected_revision, content, scopes) = match self.writer.read(&key).await? {
                    None => (None, content.clone(), scopes.clone()),
                    Some(latest) => {
                        let merged =
                            KeepLatestMerger.merge(&latest, content).map_err(|source| {
                                RememberingError::Application {
                                    operation: "attest",
                                    source,
                                }
                            })?;
                        // Already attested (the same record seen again, say by a new processor
                        // version): a new revision would say nothing new.
                        let mut unchanged = merged.clone();
                        unchanged.extracted_at = latest.content.extracted_at;
                        if unchanged == latest.content {
                            return Ok(None);
                        }
                        // An attestation adds provenance only: the text and who may recall it
                        // stay as the document has them.
                        (Some(latest.revision), merged, latest.scopes)
                    }
                };
                MemoryWrite::Put {
                    key,
                    operation_id,
                    expected_revision,
                    locator: record.locator(),
                    content,
                    scopes,
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
                    by: Some(memory_core::write::BY_WORKER.to_owned()),
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
                if source.is_forgotten(&*self.references)? {
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
                            if let Some(asking) = asking_source(&command.write) {
                                self.readmit_cleanup_if_suppressed(&asking)?;
                            }
                        }
                        break;
                    }
                    Err(error @ (MemoryError::Conflict { .. } | MemoryError::Withdrawn)) => {
                        let contribution = &output.contributions[index];
                        let current = incarnation_of_command(contribution, &command);
                        let incarnation = match (&error, contribution) {
                            (MemoryError::Conflict { .. }, _) => current,
                            // An attested statement withdrawn for good is said again: it goes to
                            // the next incarnation of its document.
                            (_, Contribution::Attest { .. }) if current < MAX_INCARNATIONS => {
                                current + 1
                            }
                            // Withdrawal is terminal: a put cannot land and a withdrawal already
                            // happened.
                            _ => {
                                if matches!(contribution, Contribution::Attest { .. }) {
                                    tracing::warn!(
                                        incarnations = MAX_INCARNATIONS,
                                        "statement forgotten too often; not remembered again"
                                    );
                                }
                                break;
                            }
                        };
                        let attempt = command.attempt.saturating_add(1);
                        // Moves to a next incarnation take an attempt each but are no rebases.
                        let rebases = attempt.saturating_sub(incarnation);
                        if rebases > MAX_REBASES {
                            return Err(RememberingError::TooManyRebases { attempts: rebases });
                        }
                        let rebased = self
                            .prepare(&work_id, record, index, contribution, attempt, incarnation)
                            .await?;
                        output.commands[index] = rebased.clone();
                        if let Some(rebased) = &rebased {
                            let references = command_references(&source, &rebased.write)?;
                            if !references.is_empty() {
                                self.references.save_references(&references)?;
                            }
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
        if source.is_forgotten(&*self.references)? {
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

/// The incarnation of an attested target that `command` writes (0 for other contributions).
fn incarnation_of_command(contribution: &Contribution, command: &SavedCommand) -> u32 {
    match contribution {
        Contribution::Attest { target, .. } => {
            incarnation_of(target, &command.write.key().id).unwrap_or(0)
        }
        Contribution::Put { .. } | Contribution::Withdraw { .. } => 0,
    }
}

/// Why a record's extraction did not save an output.
enum Extracted {
    /// A failure a retry would repeat: park the thread at the record with `kind`.
    Parked {
        kind: &'static str,
        source: crate::error::ApplicationError,
    },
    /// Anything else: the pass fails, and the thread stays pending.
    Failed(RememberingError),
}

impl From<RememberingError> for Extracted {
    fn from(error: RememberingError) -> Self {
        Self::Failed(error)
    }
}

impl From<ActivityError> for Extracted {
    fn from(error: ActivityError) -> Self {
        Self::Failed(error.into())
    }
}

impl From<MemoryError> for Extracted {
    fn from(error: MemoryError) -> Self {
        Self::Failed(error.into())
    }
}

/// Whether `record` is forgotten (its source suppressed: forgotten, edited, deleted or revoked).
pub fn record_is_forgotten(
    references: &dyn RememberingStore,
    record: &ThreadRecord,
) -> Result<bool, ActivityError> {
    RecordSource::of(record).is_forgotten(references)
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

    /// Whether the record is forgotten (its source suppressed).
    fn is_forgotten(&self, references: &dyn RememberingStore) -> Result<bool, ActivityError> {
        references.is_suppressed(&self.id, &self.revision)
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

/// The asking record of a put whose content answers a question ([`crate::extract::ANSWERING`]), as
/// a source: named by its own thread, which is not the writing record's when an attestation kept
/// the question of a first answer said in another thread.
fn asking_source(write: &MemoryWrite) -> Option<RecordSource> {
    let MemoryWrite::Put { content, .. } = write else {
        return None;
    };
    let answering = content.metadata.get(crate::extract::ANSWERING)?;
    let thread = ThreadId::new(answering["thread"].as_str()?).ok()?;
    let sequence = Sequence::new(answering["sequence"].as_u64()?);
    let digest = answering["record_digest"].as_str()?;
    Some(RecordSource {
        id: SourceId::thread_record(&thread, sequence),
        revision: SourceRevision::of_record(&RecordDigest::from_hex(digest).ok()?),
    })
}

/// The references a command keeps: the record's own, and the asking record's when the content
/// carries the question it answers, so forgetting the question takes it out of the answer.
fn command_references(
    source: &RecordSource,
    write: &MemoryWrite,
) -> Result<Vec<SourceReference>, RememberingError> {
    let mut references: Vec<SourceReference> = source.reference(write)?.into_iter().collect();
    if let Some(asking) = asking_source(write)
        && let Some(mut reference) = asking.reference(write)?
    {
        // Stores keep one reference per (namespace, operation id); the asker's is keyed by an id
        // derived from the command's, so each source of one command keeps a reference of its own
        // (a replay derives the same one and adds nothing).
        reference.operation_id =
            crate::worker::derived_operation_id(&["asked", reference.operation_id.as_str()])?;
        references.push(reference);
    }
    Ok(references)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use memory_core::MemoryContent;
    use memory_core::namespace::NamespaceAddress;

    fn namespace() -> NamespaceAddress {
        NamespaceAddress::encode("people", 1, &serde_json::json!({"team": "x"})).unwrap()
    }

    /// Outputs saved before attestations existed still decode: variants and fields are only added.
    #[test]
    fn saved_outputs_of_earlier_versions_decode_and_attestations_round_trip() {
        let content = serde_json::to_value(MemoryContent::text("I live in Lisbon")).unwrap();
        let key = serde_json::json!({"namespace": namespace().as_str(), "id": "d"});
        let saved = PendingOutput {
            sequence: Sequence::new(1),
            work_id: WorkId::new("w").unwrap(),
            output: serde_json::json!({
                "contributions": [
                    {"action": "put", "namespace": namespace().as_str(), "target": null,
                     "content": content, "scopes": ["agent"]},
                    {"action": "withdraw", "namespace": namespace().as_str(), "target": "d",
                     "reason": "asked"},
                ],
                "commands": [
                    {"attempt": 0, "write": {"kind": "put", "key": key,
                     "operation_id": "w-0", "expected_revision": null, "locator": "l",
                     "content": content, "scopes": ["agent"]}},
                    null,
                ],
            }),
        };
        let output = decode_output(&saved).unwrap();
        assert!(matches!(
            output.contributions[..],
            [
                Contribution::Put { target: None, .. },
                Contribution::Withdraw { .. }
            ]
        ));

        let attest = RecordOutput {
            contributions: vec![Contribution::attest(
                namespace(),
                DocumentId::new("s-1").unwrap(),
                MemoryContent::text("I like tea"),
                vec![MemoryScope::new("agent").unwrap()],
            )],
            commands: vec![None],
        };
        let pending = attest
            .pending(Sequence::new(1), WorkId::new("w").unwrap())
            .unwrap();
        assert_eq!(pending.output["contributions"][0]["action"], "attest");
        assert_eq!(decode_output(&pending).unwrap(), attest);
    }
}
