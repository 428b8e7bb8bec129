//! The in-memory activity stores keep every rule of the activity suites, and the suites fail on stores
//! that break one: each broken store here wraps the in-memory stores and breaks exactly one rule, and
//! the suite must name that rule.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use memory_core::activity::intents::Admitted;
use memory_core::activity::thread::{MAX_PAGE_RECORDS, check_park_kind};
use memory_core::activity::{
    ActivityError, Claim, ExtractionNote, ExtractionTotals, Intent, IntentClaim, IntentId,
    IntentLease, IntentOutcome, IntentView, Lease, LogEntry, NewRecord, PendingOutput,
    PendingThread, ProgressKey, ProgressStore, ProgressView, RememberingStore, SavedCommand,
    Sequence, SourceId, SourceReference, SourceRevision, ThreadBinding, ThreadDestination,
    ThreadId, ThreadLog, ThreadOverview, ThreadRecord, ThreadSuppressions, UndecodableReason,
    UndecodableRecord, WorkerId,
};
use memory_core::{EpochMillis, MemoryContent, MemoryKey, Revision};
use memory_testkit::InMemoryActivity;
use memory_testkit::activity::{
    ActivityBackend, PROGRESS_RULES, REMEMBERING_RULES, THREAD_LOG_RULES, run_activity_rules,
    run_all,
};

#[test]
fn in_memory_activity_passes_every_activity_suite() {
    let report = run_all(InMemoryActivity::new);
    report.assert_all_passed();
    let every_rule: Vec<&str> = THREAD_LOG_RULES
        .iter()
        .chain(PROGRESS_RULES)
        .chain(REMEMBERING_RULES)
        .copied()
        .collect();
    assert_eq!(report.passed, every_rule, "every rule runs, in order");
}

#[test]
fn an_unknown_rule_name_fails_the_run() {
    let report = run_activity_rules(InMemoryActivity::new, &["no-such-rule"]);
    assert!(report.failure("unknown-rule").is_some());
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Pages include the record at the cursor.
    PageIncludesCursor,
    /// `read_entries` reads every record as undecodable (while `read_page` reads them).
    EntriesUndecodable,
    /// The opaque cursor is dropped on append.
    DropsOpaqueCursor,
    /// Threads are listed in reverse id order.
    ThreadsReversed,
    /// A first append naming a destination leaves the thread unbound.
    FirstAppendIgnoresDestination,
    /// An append naming a destination is refused on any thread with records, even its own.
    OwnDestinationRefused,
    /// An append naming another destination rebinds the thread to it and is accepted.
    ConflictRedirects,
    /// An append naming another destination writes its record before it is refused.
    ConflictWritesTheRecord,
    /// An append naming a destination rebinds an unbound thread with records.
    UnboundThreadTakesDestination,
    /// A rebind of a thread without records answers a binding (and stores none).
    RebindOfEmptyThreadAnswers,
    /// A rebind to the destination the thread has moves it away and back (two generations).
    RebindToOwnDestinationBumps,
    /// An append leaves the thread settled.
    AppendLeavesThreadSettled,
    /// `settle` settles the thread at its current tail, whatever tail it was given.
    SettleIgnoresTail,
    /// Pending threads are listed in reverse id order.
    PendingThreadsReversed,
    /// `park` checks the kind and parks nothing.
    ParkIgnored,
    /// A rebind leaves a parked thread parked.
    RebindKeepsParked,
    /// `mark_all_pending` counts the threads with records and marks none.
    MarkAllPendingMarksNothing,
    /// Thread listings longer than the page limit are cut to it instead of refused.
    OversizedThreadPagesCut,
    /// A park with a bad kind parks the thread under `unknown`.
    BadParkKindReplaced,
    /// The overview lists destinations fewest threads first.
    OverviewFewestFirst,
    /// A re-claim by the lease's owner keeps the epoch.
    ReclaimKeepsEpoch,
    /// A save with a stale lease is acknowledged (and dropped).
    StaleSaveAcknowledged,
    /// A second save for the same record replaces the first.
    SecondSaveReplaces,
    /// Every extraction note is counted, a record's repeated note too.
    NoteCountedPerCall,
    /// An invalid extraction note is kept without its reasons.
    InvalidNoteKeptWithoutReasons,
    /// A note's model usage is not kept.
    ModelUsageDropped,
    /// Cleanup intents count against admission capacity.
    CleanupsCounted,
    /// Completion with a stale lease is acknowledged.
    StaleCompletionAcknowledged,
    /// Admitting a parked intent leaves it parked.
    OutboxKeepsAdmitted,
    /// A thread's suppressions are matched by the ending of the source id alone (a loose `LIKE`).
    ThreadSuppressionsBySuffix,
}

#[derive(Debug, Clone)]
struct Broken {
    inner: InMemoryActivity,
    fault: Fault,
    /// Every park acknowledged, so `RebindKeepsParked` can park the thread again.
    parks: Arc<Mutex<BTreeMap<ThreadId, (Sequence, String)>>>,
    /// Notes taken so far, so `NoteCountedPerCall` can note each call as another record.
    notes: Arc<AtomicU64>,
}

impl Broken {
    fn factory(fault: Fault) -> impl FnMut() -> Broken {
        move || Broken {
            inner: InMemoryActivity::new(),
            fault,
            parks: Arc::default(),
            notes: Arc::default(),
        }
    }

    /// The listing limit the store applies to a requested one.
    fn page_limit(&self, limit: usize) -> usize {
        if self.fault == Fault::OversizedThreadPagesCut {
            limit.min(MAX_PAGE_RECORDS)
        } else {
            limit
        }
    }
}

impl ActivityBackend for Broken {
    type Log = Self;
    type Progress = Self;
    type Remembering = Self;

    fn thread_log(&self) -> Self {
        self.clone()
    }

    fn progress(&self) -> Self {
        self.clone()
    }

    fn remembering(&self) -> Self {
        self.clone()
    }
}

impl ThreadLog for Broken {
    fn append_to(
        &self,
        thread: &ThreadId,
        destination: Option<&ThreadDestination>,
        mut record: NewRecord,
    ) -> Result<ThreadRecord, ActivityError> {
        if self.fault == Fault::DropsOpaqueCursor {
            record.opaque_cursor = None;
        }
        let destination = match self.fault {
            Fault::FirstAppendIgnoresDestination => None,
            Fault::OwnDestinationRefused
                if destination.is_some() && self.inner.inspect_tail(thread)? > Sequence::ZERO =>
            {
                return Err(ActivityError::DestinationConflict);
            }
            _ => destination,
        };
        let stored = match (
            self.inner.append_to(thread, destination, record.clone()),
            destination,
        ) {
            (Err(ActivityError::DestinationConflict), Some(destination)) => {
                let bound = self.inner.binding(thread)?.is_some();
                match self.fault {
                    Fault::ConflictRedirects if bound => {
                        self.inner.rebind(thread, destination)?;
                        self.inner.append(thread, record)
                    }
                    Fault::UnboundThreadTakesDestination if !bound => {
                        self.inner.rebind(thread, destination)?;
                        self.inner.append(thread, record)
                    }
                    Fault::ConflictWritesTheRecord => {
                        self.inner.append(thread, record)?;
                        Err(ActivityError::DestinationConflict)
                    }
                    _ => Err(ActivityError::DestinationConflict),
                }
            }
            (result, _) => result,
        }?;
        if self.fault == Fault::AppendLeavesThreadSettled {
            self.inner.settle(thread, stored.sequence)?;
        }
        Ok(stored)
    }

    fn inspect_tail(&self, thread: &ThreadId) -> Result<Sequence, ActivityError> {
        self.inner.inspect_tail(thread)
    }

    fn read_entries(
        &self,
        thread: &ThreadId,
        after: Sequence,
        limit: usize,
    ) -> Result<Vec<LogEntry>, ActivityError> {
        let after = match self.fault {
            Fault::PageIncludesCursor => after.saturating_previous(),
            _ => after,
        };
        let entries = self.inner.read_entries(thread, after, limit)?;
        if self.fault != Fault::EntriesUndecodable {
            return Ok(entries);
        }
        Ok(entries
            .into_iter()
            .map(|entry| {
                LogEntry::Undecodable(UndecodableRecord {
                    sequence: entry.sequence(),
                    reason: UndecodableReason::Parse,
                    detail: "broken on purpose".to_owned(),
                })
            })
            .collect())
    }

    fn read_page(
        &self,
        thread: &ThreadId,
        after: Sequence,
        limit: usize,
    ) -> Result<Vec<ThreadRecord>, ActivityError> {
        if self.fault == Fault::EntriesUndecodable {
            return self.inner.read_page(thread, after, limit);
        }
        self.read_entries(thread, after, limit)?
            .into_iter()
            .map(LogEntry::into_record)
            .collect()
    }

    fn binding(&self, thread: &ThreadId) -> Result<Option<ThreadBinding>, ActivityError> {
        self.inner.binding(thread)
    }

    fn rebind(
        &self,
        thread: &ThreadId,
        destination: &ThreadDestination,
    ) -> Result<ThreadBinding, ActivityError> {
        match self.fault {
            Fault::RebindOfEmptyThreadAnswers
                if self.inner.inspect_tail(thread)? == Sequence::ZERO =>
            {
                Ok(ThreadBinding {
                    destination: destination.clone(),
                    generation: 0,
                })
            }
            Fault::RebindToOwnDestinationBumps
                if self
                    .inner
                    .binding(thread)?
                    .is_some_and(|binding| binding.destination == *destination) =>
            {
                let detour = ThreadDestination::for_user("detour", destination.scopes().to_vec())?;
                self.inner.rebind(thread, &detour)?;
                self.inner.rebind(thread, destination)
            }
            Fault::RebindKeepsParked => {
                let binding = self.inner.rebind(thread, destination)?;
                let parked = self
                    .parks
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(thread)
                    .cloned();
                if let Some((sequence, kind)) = parked {
                    self.inner.park(thread, sequence, &kind)?;
                }
                Ok(binding)
            }
            _ => self.inner.rebind(thread, destination),
        }
    }

    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadId>, ActivityError> {
        let mut threads = self.inner.threads(after, self.page_limit(limit))?;
        if self.fault == Fault::ThreadsReversed {
            threads.reverse();
        }
        Ok(threads)
    }

    fn pending_threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<PendingThread>, ActivityError> {
        let mut pending = self.inner.pending_threads(after, self.page_limit(limit))?;
        if self.fault == Fault::PendingThreadsReversed {
            pending.reverse();
        }
        Ok(pending)
    }

    fn mark_all_pending(&self) -> Result<u64, ActivityError> {
        if self.fault == Fault::MarkAllPendingMarksNothing {
            return Ok(self.inner.threads(None, MAX_PAGE_RECORDS)?.len() as u64);
        }
        self.inner.mark_all_pending()
    }

    fn settle(&self, thread: &ThreadId, tail: Sequence) -> Result<bool, ActivityError> {
        let tail = match self.fault {
            Fault::SettleIgnoresTail => self.inner.inspect_tail(thread)?,
            _ => tail,
        };
        self.inner.settle(thread, tail)
    }

    fn park(&self, thread: &ThreadId, sequence: Sequence, kind: &str) -> Result<(), ActivityError> {
        match self.fault {
            Fault::ParkIgnored => return check_park_kind(kind),
            Fault::BadParkKindReplaced if check_park_kind(kind).is_err() => {
                return self.inner.park(thread, sequence, "unknown");
            }
            _ => {}
        }
        self.inner.park(thread, sequence, kind)?;
        self.parks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(thread.clone(), (sequence, kind.to_owned()));
        Ok(())
    }

    fn overview(&self) -> Result<ThreadOverview, ActivityError> {
        let mut overview = self.inner.overview()?;
        if self.fault == Fault::OverviewFewestFirst {
            overview.destinations.reverse();
        }
        Ok(overview)
    }
}

impl ProgressStore for Broken {
    fn claim(
        &self,
        key: &ProgressKey,
        owner: &WorkerId,
        lease_ms: u64,
        now: EpochMillis,
    ) -> Result<Claim, ActivityError> {
        if self.fault == Fault::ReclaimKeepsEpoch
            && let Some(view) = self.inner.inspect(key)?
            && let Some((holder, until)) = &view.lease
            && holder == owner
            && *until > now
        {
            return Ok(Claim {
                lease: Lease {
                    key: key.clone(),
                    owner: owner.clone(),
                    epoch: view.epoch,
                    expires_at: *until,
                },
                cursor: view.cursor,
                pending: view.pending,
            });
        }
        self.inner.claim(key, owner, lease_ms, now)
    }

    fn save_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        match (self.inner.save_pending(lease, pending, now), self.fault) {
            (Err(ActivityError::StaleLease { .. }), Fault::StaleSaveAcknowledged) => Ok(()),
            (Err(ActivityError::ProgressMismatch { .. }), Fault::SecondSaveReplaces) => {
                self.inner.replace_pending(lease, pending, now)
            }
            (result, _) => result,
        }
    }

    fn replace_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        self.inner.replace_pending(lease, pending, now)
    }

    fn advance(&self, lease: &Lease, to: Sequence, now: EpochMillis) -> Result<(), ActivityError> {
        self.inner.advance(lease, to, now)
    }

    fn release(&self, lease: &Lease, now: EpochMillis) -> Result<(), ActivityError> {
        ProgressStore::release(&self.inner, lease, now)
    }

    fn inspect(&self, key: &ProgressKey) -> Result<Option<ProgressView>, ActivityError> {
        self.inner.inspect(key)
    }

    fn inspect_all(&self, limit: usize) -> Result<Vec<ProgressView>, ActivityError> {
        self.inner.inspect_all(limit)
    }

    fn note_extraction(
        &self,
        key: &ProgressKey,
        sequence: Sequence,
        note: &ExtractionNote,
    ) -> Result<(), ActivityError> {
        match self.fault {
            Fault::NoteCountedPerCall => {
                // Each call lands on a record of its own, far past any the suites name.
                let call = self.notes.fetch_add(1, Ordering::Relaxed);
                self.inner
                    .note_extraction(key, Sequence::new(u64::MAX - call), note)
            }
            Fault::InvalidNoteKeptWithoutReasons if note.validate().is_err() => {
                let kept = ExtractionNote {
                    dropped: BTreeMap::new(),
                    ..note.clone()
                };
                self.inner.note_extraction(key, sequence, &kept)
            }
            Fault::ModelUsageDropped => {
                let kept = ExtractionNote {
                    model: memory_core::activity::ModelUsage::default(),
                    ..note.clone()
                };
                self.inner.note_extraction(key, sequence, &kept)
            }
            _ => self.inner.note_extraction(key, sequence, note),
        }
    }

    fn extraction_totals(&self) -> Result<ExtractionTotals, ActivityError> {
        self.inner.extraction_totals()
    }
}

impl RememberingStore for Broken {
    fn admit(
        &self,
        intent: &Intent,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<Admitted, ActivityError> {
        if self.fault == Fault::CleanupsCounted
            && matches!(intent, Intent::Cleanup { .. })
            && self.inner.open_intents()? >= capacity
        {
            return Err(ActivityError::AtCapacity { capacity });
        }
        self.inner.admit(intent, capacity, now)
    }

    fn claim_next(
        &self,
        owner: &WorkerId,
        lease_ms: u64,
        now: EpochMillis,
    ) -> Result<Option<IntentClaim>, ActivityError> {
        self.inner.claim_next(owner, lease_ms, now)
    }

    fn save_proposal(
        &self,
        lease: &IntentLease,
        proposal: &MemoryContent,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        self.inner.save_proposal(lease, proposal, now)
    }

    fn save_command(
        &self,
        lease: &IntentLease,
        command: &SavedCommand,
        reference: &SourceReference,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        self.inner.save_command(lease, command, reference, now)
    }

    fn complete(
        &self,
        lease: &IntentLease,
        outcome: &IntentOutcome,
        successor: Option<&Intent>,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        match (
            self.inner.complete(lease, outcome, successor, now),
            self.fault,
        ) {
            (Err(ActivityError::StaleLease { .. }), Fault::StaleCompletionAcknowledged) => Ok(()),
            (result, _) => result,
        }
    }

    fn release(&self, lease: &IntentLease, now: EpochMillis) -> Result<(), ActivityError> {
        RememberingStore::release(&self.inner, lease, now)
    }

    fn suppress(
        &self,
        source: &SourceId,
        revision: Option<&SourceRevision>,
        now: EpochMillis,
    ) -> Result<IntentId, ActivityError> {
        self.inner.suppress(source, revision, now)
    }

    fn thread_suppressions(&self, thread: &ThreadId) -> Result<ThreadSuppressions, ActivityError> {
        let mut read = self.inner.thread_suppressions(thread)?;
        if self.fault == Fault::ThreadSuppressionsBySuffix {
            // What a `LIKE '%/<thread>'` reads: x/t1's records too.
            let other = ThreadId::new(format!("x/{}", thread.as_str()))?;
            read.records
                .extend(self.inner.thread_suppressions(&other)?.records);
        }
        Ok(read)
    }

    fn is_suppressed(
        &self,
        source: &SourceId,
        revision: &SourceRevision,
    ) -> Result<bool, ActivityError> {
        self.inner.is_suppressed(source, revision)
    }

    fn save_references(&self, references: &[SourceReference]) -> Result<(), ActivityError> {
        self.inner.save_references(references)
    }

    fn references(
        &self,
        source: &SourceId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, SourceReference)>, ActivityError> {
        self.inner.references(source, after, limit)
    }

    fn suppressed_contributions(
        &self,
        documents: &[(MemoryKey, Revision)],
    ) -> Result<Vec<bool>, ActivityError> {
        self.inner.suppressed_contributions(documents)
    }

    fn inspect_intent(&self, id: &IntentId) -> Result<Option<IntentView>, ActivityError> {
        self.inner.inspect_intent(id)
    }

    fn open_intents(&self) -> Result<u64, ActivityError> {
        self.inner.open_intents()
    }

    fn outbox_put(
        &self,
        intent: &Intent,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        self.inner.outbox_put(intent, capacity, now)
    }

    fn outbox_peek(&self, limit: usize) -> Result<Vec<(u64, Intent)>, ActivityError> {
        self.inner.outbox_peek(limit)
    }

    fn outbox_admit(
        &self,
        row: u64,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<Admitted, ActivityError> {
        let parked = self.inner.outbox_peek(10_000)?;
        let admitted = self.inner.outbox_admit(row, capacity, now)?;
        if self.fault == Fault::OutboxKeepsAdmitted
            && let Some((_, intent)) = parked.into_iter().find(|(parked, _)| *parked == row)
        {
            self.inner.outbox_put(&intent, u64::MAX, now)?;
        }
        Ok(admitted)
    }
}

#[test]
fn each_broken_activity_store_fails_the_rule_it_breaks() {
    let cases = [
        (
            Fault::PageIncludesCursor,
            "pages-start-after-the-cursor-and-are-bounded",
        ),
        (
            Fault::EntriesUndecodable,
            "entries-read-every-stored-record-as-the-page-does",
        ),
        (
            Fault::DropsOpaqueCursor,
            "record-digest-excludes-the-opaque-cursor",
        ),
        (
            Fault::ThreadsReversed,
            "threads-are-listed-in-id-order-after-a-cursor",
        ),
        (
            Fault::FirstAppendIgnoresDestination,
            "a-first-append-with-a-destination-binds-the-thread",
        ),
        (
            Fault::OwnDestinationRefused,
            "a-first-append-with-a-destination-binds-the-thread",
        ),
        (
            Fault::ConflictRedirects,
            "an-append-naming-another-destination-is-refused-and-writes-nothing",
        ),
        (
            Fault::ConflictRedirects,
            "concurrent-first-appends-bind-one-destination",
        ),
        (
            Fault::ConflictWritesTheRecord,
            "an-append-naming-another-destination-is-refused-and-writes-nothing",
        ),
        (
            Fault::UnboundThreadTakesDestination,
            "an-unbound-thread-with-records-refuses-a-destination-until-rebound",
        ),
        (
            Fault::RebindOfEmptyThreadAnswers,
            "rebind-needs-records-and-advances-the-generation",
        ),
        (
            Fault::RebindToOwnDestinationBumps,
            "rebind-needs-records-and-advances-the-generation",
        ),
        (
            Fault::AppendLeavesThreadSettled,
            "every-append-marks-the-thread-pending-and-settle-needs-its-tail",
        ),
        (
            Fault::SettleIgnoresTail,
            "every-append-marks-the-thread-pending-and-settle-needs-its-tail",
        ),
        (
            Fault::PendingThreadsReversed,
            "pending-threads-page-in-id-order-and-skip-parked-threads",
        ),
        (
            Fault::ParkIgnored,
            "pending-threads-page-in-id-order-and-skip-parked-threads",
        ),
        (
            Fault::RebindKeepsParked,
            "rebind-unparks-a-thread-and-marks-it-pending",
        ),
        (
            Fault::MarkAllPendingMarksNothing,
            "mark-all-pending-marks-every-thread-with-records",
        ),
        (
            Fault::OversizedThreadPagesCut,
            "thread-page-limits-out-of-range-are-invalid",
        ),
        (
            Fault::BadParkKindReplaced,
            "bad-park-kinds-are-refused-and-park-nothing",
        ),
        (
            Fault::OverviewFewestFirst,
            "overview-counts-destinations-unbound-pending-and-parked",
        ),
        (Fault::ReclaimKeepsEpoch, "every-claim-gets-a-fresh-epoch"),
        (
            Fault::StaleSaveAcknowledged,
            "stale-lease-writes-change-nothing",
        ),
        (
            Fault::SecondSaveReplaces,
            "saved-output-wins-and-returns-with-the-claim",
        ),
        (
            Fault::NoteCountedPerCall,
            "extraction-notes-count-each-record-once",
        ),
        (
            Fault::ModelUsageDropped,
            "extraction-notes-count-each-record-once",
        ),
        (
            Fault::InvalidNoteKeptWithoutReasons,
            "invalid-extraction-notes-are-refused-and-change-nothing",
        ),
        (
            Fault::CleanupsCounted,
            "cleanups-and-successors-are-not-counted-against-capacity",
        ),
        (
            Fault::StaleCompletionAcknowledged,
            "intent-claims-are-fenced-and-taken-over-after-expiry",
        ),
        (
            Fault::OutboxKeepsAdmitted,
            "outbox-parks-up-to-capacity-and-admits-once",
        ),
        (
            Fault::ThreadSuppressionsBySuffix,
            "thread-suppressions-name-exactly-the-threads-records",
        ),
    ];
    for (fault, rule) in cases {
        let report = run_activity_rules(Broken::factory(fault), &[rule]);
        assert!(
            report.failure(rule).is_some(),
            "{fault:?} was not caught by `{rule}`:\n{report}"
        );
        // The whole run fails too, so a backend with this fault cannot pass.
        assert!(!run_all(Broken::factory(fault)).is_success(), "{fault:?}");
    }
}
