//! The in-memory activity stores keep every rule of the activity suites, and the suites fail on stores
//! that break one: each broken store here wraps the in-memory stores and breaks exactly one rule, and
//! the suite must name that rule.

use memory_core::activity::intents::Admitted;
use memory_core::activity::{
    ActivityError, Claim, Intent, IntentClaim, IntentId, IntentLease, IntentOutcome, IntentView,
    Lease, NewRecord, PendingOutput, ProgressKey, ProgressStore, ProgressView, RememberingStore,
    SavedCommand, Sequence, SourceId, SourceReference, SourceRevision, ThreadId, ThreadLog,
    ThreadRecord, WorkerId,
};
use memory_core::testing::InMemoryActivity;
use memory_core::testing::activity::{
    ActivityBackend, PROGRESS_RULES, REMEMBERING_RULES, THREAD_LOG_RULES, run_activity_rules,
    run_all,
};
use memory_core::{EpochMillis, MemoryContent, MemoryKey, Revision};

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
    /// The opaque cursor is dropped on append.
    DropsOpaqueCursor,
    /// Threads are listed in reverse id order.
    ThreadsReversed,
    /// A re-claim by the lease's owner keeps the epoch.
    ReclaimKeepsEpoch,
    /// A save with a stale lease is acknowledged (and dropped).
    StaleSaveAcknowledged,
    /// A second save for the same record replaces the first.
    SecondSaveReplaces,
    /// Cleanup intents count against admission capacity.
    CleanupsCounted,
    /// Completion with a stale lease is acknowledged.
    StaleCompletionAcknowledged,
    /// Admitting a parked intent leaves it parked.
    OutboxKeepsAdmitted,
}

#[derive(Debug, Clone)]
struct Broken {
    inner: InMemoryActivity,
    fault: Fault,
}

impl Broken {
    fn factory(fault: Fault) -> impl FnMut() -> Broken {
        move || Broken {
            inner: InMemoryActivity::new(),
            fault,
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

    fn threads(
        log: &Self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadId>, ActivityError> {
        let mut threads = log.inner.threads(after, limit)?;
        if log.fault == Fault::ThreadsReversed {
            threads.reverse();
        }
        Ok(threads)
    }
}

impl ThreadLog for Broken {
    fn append(
        &self,
        thread: &ThreadId,
        mut record: NewRecord,
    ) -> Result<ThreadRecord, ActivityError> {
        if self.fault == Fault::DropsOpaqueCursor {
            record.opaque_cursor = None;
        }
        self.inner.append(thread, record)
    }

    fn inspect_tail(&self, thread: &ThreadId) -> Result<Sequence, ActivityError> {
        self.inner.inspect_tail(thread)
    }

    fn read_page(
        &self,
        thread: &ThreadId,
        after: Sequence,
        limit: usize,
    ) -> Result<Vec<ThreadRecord>, ActivityError> {
        let after = match self.fault {
            Fault::PageIncludesCursor => Sequence(after.0.saturating_sub(1)),
            _ => after,
        };
        self.inner.read_page(thread, after, limit)
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
            Fault::DropsOpaqueCursor,
            "record-digest-excludes-the-opaque-cursor",
        ),
        (
            Fault::ThreadsReversed,
            "threads-are-listed-in-id-order-after-a-cursor",
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
