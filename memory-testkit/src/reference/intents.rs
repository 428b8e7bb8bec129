//! The in-memory remembering store: intents, suppression, references and the outbox.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::activity::{InMemoryActivity, lease_expiry};
use super::stored;
use memory_core::activity::forgotten::record_suppression;
use memory_core::activity::intents::Admitted;
use memory_core::activity::rules::intents::suppression_revision;
use memory_core::activity::{
    ActivityError, FencingEpoch, Intent, IntentClaim, IntentId, IntentLease, IntentOutcome,
    IntentState, IntentView, RecordSuppression, RememberingStore, SavedCommand, SourceId,
    SourceReference, SourceRevision, ThreadId, ThreadSuppressions, WorkerId,
};
use memory_core::document::{EpochMillis, MemoryContent, MemoryKey};
use memory_core::ids::{OperationId, Revision};
use memory_core::namespace::NamespaceAddress;

/// Most rows one page of references or outbox entries may hold, as in the SQL stores.
pub(crate) const MAX_PAGE_ROWS: usize = 10_000;

#[derive(Debug, Clone)]
struct IntentRow {
    intent: Intent,
    /// Whether it counts against admission capacity (remember intents admitted by `admit`).
    counted: bool,
    state: IntentState,
    epoch: FencingEpoch,
    owner: Option<WorkerId>,
    lease_expires_at: Option<EpochMillis>,
    proposal: Option<MemoryContent>,
    command: Option<SavedCommand>,
    outcome: Option<IntentOutcome>,
}

#[derive(Debug, Default)]
pub(super) struct RememberingState {
    /// In admission order: the position is the row number, the claim order.
    intents: Vec<IntentRow>,
    by_id: HashMap<IntentId, usize>,
    /// `None` suppresses every revision of the source; the value is when (the first suppression's time
    /// is kept, as the stores keep the first row).
    suppressions: BTreeMap<(SourceId, Option<SourceRevision>), EpochMillis>,
    references: Vec<(u64, SourceReference)>,
    /// A reference is kept once per operation in its namespace.
    referenced: HashSet<(NamespaceAddress, OperationId)>,
    outbox: BTreeMap<u64, Intent>,
    last_outbox_row: u64,
}

impl RememberingState {
    /// Admits or reopens an intent; capacity applies to counted intents only (see the port's rules).
    fn admit(&mut self, intent: &Intent, capacity: Option<u64>) -> Result<Admitted, ActivityError> {
        let kept = stored("intent canonical JSON", intent)?;
        let id = intent.id();
        if let Some(&index) = self.by_id.get(&id) {
            let row = &mut self.intents[index];
            // A cleanup can be needed again (a write landed after the last one ran); a finished
            // remember intent stays finished.
            let reopen = row.state == IntentState::Done && matches!(intent, Intent::Cleanup { .. });
            if reopen {
                row.state = IntentState::Queued;
                row.outcome = None;
                row.owner = None;
                row.lease_expires_at = None;
            }
            return Ok(Admitted {
                id,
                already_admitted: !reopen,
            });
        }
        if let Some(capacity) = capacity {
            let open = self
                .intents
                .iter()
                .filter(|row| row.state == IntentState::Queued && row.counted)
                .count() as u64;
            if open >= capacity {
                return Err(ActivityError::AtCapacity { capacity });
            }
        }
        self.by_id.insert(id.clone(), self.intents.len());
        self.intents.push(IntentRow {
            intent: kept,
            counted: capacity.is_some(),
            state: IntentState::Queued,
            epoch: FencingEpoch::new(0),
            owner: None,
            lease_expires_at: None,
            proposal: None,
            command: None,
            outcome: None,
        });
        Ok(Admitted {
            id,
            already_admitted: false,
        })
    }

    /// The intent row `lease` may write, or `StaleLease`.
    fn fenced(
        &mut self,
        lease: &IntentLease,
        now: EpochMillis,
    ) -> Result<&mut IntentRow, ActivityError> {
        let stale = ActivityError::StaleLease { epoch: lease.epoch };
        let index = *self.by_id.get(&lease.id).ok_or(stale)?;
        let row = &mut self.intents[index];
        let current = row.state == IntentState::Queued
            && row.epoch == lease.epoch
            && row.owner.as_ref() == Some(&lease.owner)
            && row.lease_expires_at.is_some_and(|expiry| expiry > now);
        if current {
            Ok(row)
        } else {
            Err(ActivityError::StaleLease { epoch: lease.epoch })
        }
    }

    fn keep_reference(&mut self, reference: &SourceReference) {
        let slot = (
            reference.target.namespace.clone(),
            reference.operation_id.clone(),
        );
        if self.referenced.insert(slot) {
            let row = self.references.last().map_or(1, |(row, _)| row + 1);
            self.references.push((row, reference.clone()));
        }
    }

    fn is_suppressed(&self, source: &SourceId, revision: &SourceRevision) -> bool {
        self.suppressions
            .contains_key(&(source.clone(), Some(revision.clone())))
            || self.suppressions.contains_key(&(source.clone(), None))
    }
}

fn counted_capacity(intent: &Intent, capacity: u64) -> Option<u64> {
    match intent {
        Intent::Remember { .. } => Some(capacity),
        Intent::Cleanup { .. } => None,
    }
}

impl RememberingStore for InMemoryActivity {
    fn admit(
        &self,
        intent: &Intent,
        capacity: u64,
        _now: EpochMillis,
    ) -> Result<Admitted, ActivityError> {
        self.lock()
            .remembering
            .admit(intent, counted_capacity(intent, capacity))
    }

    fn claim_next(
        &self,
        owner: &WorkerId,
        lease_ms: u64,
        now: EpochMillis,
    ) -> Result<Option<IntentClaim>, ActivityError> {
        let expires_at = lease_expiry(now, lease_ms)?;
        let mut state = self.lock();
        let remembering = &mut state.remembering;
        let Some(row) = remembering.intents.iter_mut().find(|row| {
            row.state == IntentState::Queued
                && (row.owner.is_none() || row.lease_expires_at.is_none_or(|expiry| expiry <= now))
        }) else {
            return Ok(None);
        };
        row.epoch = FencingEpoch::new(row.epoch.get().saturating_add(1));
        row.owner = Some(owner.clone());
        row.lease_expires_at = Some(expires_at);
        Ok(Some(IntentClaim {
            lease: IntentLease {
                id: row.intent.id(),
                owner: owner.clone(),
                epoch: row.epoch,
                expires_at,
            },
            intent: row.intent.clone(),
            proposal: row.proposal.clone(),
            command: row.command.clone(),
        }))
    }

    fn save_proposal(
        &self,
        lease: &IntentLease,
        proposal: &MemoryContent,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let proposal = stored("proposal canonical JSON", proposal)?;
        let mut state = self.lock();
        let row = state.remembering.fenced(lease, now)?;
        // The first saved proposal wins: a re-extraction must not change what a later pass resumes.
        row.proposal.get_or_insert(proposal);
        Ok(())
    }

    fn save_command(
        &self,
        lease: &IntentLease,
        command: &SavedCommand,
        reference: &SourceReference,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let write = stored("command canonical JSON", &command.write)?;
        let mut state = self.lock();
        let remembering = &mut state.remembering;
        let saved_attempt = remembering
            .by_id
            .get(&lease.id)
            .and_then(|&index| remembering.intents[index].command.as_ref())
            .map(|saved| saved.attempt);
        if saved_attempt.is_some_and(|saved| saved >= command.attempt) {
            return Err(ActivityError::ProgressMismatch {
                what: "a command of this or a later attempt is already saved",
            });
        }
        let row = remembering.fenced(lease, now)?;
        row.command = Some(SavedCommand {
            attempt: command.attempt,
            write,
        });
        remembering.keep_reference(reference);
        Ok(())
    }

    fn complete(
        &self,
        lease: &IntentLease,
        outcome: &IntentOutcome,
        successor: Option<&Intent>,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let outcome = stored("outcome canonical JSON", outcome)?;
        if let Some(successor) = successor {
            // Checked before anything changes, so completion and successor land together or not at all.
            stored("intent canonical JSON", successor)?;
        }
        let mut state = self.lock();
        let remembering = &mut state.remembering;
        let row = remembering.fenced(lease, now)?;
        row.state = IntentState::Done;
        row.outcome = Some(outcome);
        row.owner = None;
        row.lease_expires_at = None;
        if let Some(successor) = successor {
            remembering.admit(successor, None)?;
        }
        Ok(())
    }

    fn release(&self, lease: &IntentLease, now: EpochMillis) -> Result<(), ActivityError> {
        let mut state = self.lock();
        let row = state.remembering.fenced(lease, now)?;
        row.owner = None;
        row.lease_expires_at = None;
        Ok(())
    }

    fn suppress(
        &self,
        source: &SourceId,
        revision: Option<&SourceRevision>,
        now: EpochMillis,
    ) -> Result<IntentId, ActivityError> {
        let cleanup = Intent::Cleanup {
            source: source.clone(),
            revision: revision.cloned(),
        };
        let mut state = self.lock();
        let remembering = &mut state.remembering;
        let admitted = remembering.admit(&cleanup, None)?;
        remembering
            .suppressions
            .entry((source.clone(), revision.cloned()))
            .or_insert(now);
        Ok(admitted.id)
    }

    fn thread_suppressions(&self, thread: &ThreadId) -> Result<ThreadSuppressions, ActivityError> {
        let state = self.lock();
        let suppressions = &state.remembering.suppressions;
        let mut records: Vec<RecordSuppression> = suppressions
            .iter()
            .filter_map(|((source, revision), at)| {
                record_suppression(
                    thread,
                    source.as_str(),
                    suppression_revision(revision.as_ref()),
                    *at,
                )
            })
            .collect();
        records.sort_by(|a, b| (a.sequence, &a.revision).cmp(&(b.sequence, &b.revision)));
        Ok(ThreadSuppressions {
            records,
            generation: suppressions.len() as u64,
        })
    }

    fn is_suppressed(
        &self,
        source: &SourceId,
        revision: &SourceRevision,
    ) -> Result<bool, ActivityError> {
        Ok(self.lock().remembering.is_suppressed(source, revision))
    }

    fn save_references(&self, references: &[SourceReference]) -> Result<(), ActivityError> {
        if references.len() > MAX_PAGE_ROWS {
            return Err(ActivityError::TooLarge {
                limit: "references per save",
                max: MAX_PAGE_ROWS as u64,
                actual: references.len() as u64,
            });
        }
        let mut state = self.lock();
        for reference in references {
            state.remembering.keep_reference(reference);
        }
        Ok(())
    }

    fn references(
        &self,
        source: &SourceId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, SourceReference)>, ActivityError> {
        if limit == 0 || limit > MAX_PAGE_ROWS {
            return Err(ActivityError::invalid(
                "reference page limit",
                format!("must be between 1 and {MAX_PAGE_ROWS}"),
            ));
        }
        let state = self.lock();
        Ok(state
            .remembering
            .references
            .iter()
            .filter(|(row, reference)| reference.source == *source && *row > after)
            .take(limit)
            .cloned()
            .collect())
    }

    fn suppressed_contributions(
        &self,
        documents: &[(MemoryKey, Revision)],
    ) -> Result<Vec<bool>, ActivityError> {
        if documents.len() > MAX_PAGE_ROWS {
            return Err(ActivityError::TooLarge {
                limit: "documents per suppression check",
                max: MAX_PAGE_ROWS as u64,
                actual: documents.len() as u64,
            });
        }
        let state = self.lock();
        let remembering = &state.remembering;
        Ok(documents
            .iter()
            .map(|(key, revision)| {
                remembering.references.iter().any(|(_, reference)| {
                    reference.target == *key
                        && reference.revision == *revision
                        && remembering.is_suppressed(&reference.source, &reference.source_revision)
                })
            })
            .collect())
    }

    fn inspect_intent(&self, id: &IntentId) -> Result<Option<IntentView>, ActivityError> {
        let state = self.lock();
        let remembering = &state.remembering;
        Ok(remembering.by_id.get(id).map(|&index| {
            let row = &remembering.intents[index];
            IntentView {
                intent: row.intent.clone(),
                state: row.state,
                proposal: row.proposal.clone(),
                command: row.command.clone(),
                outcome: row.outcome.clone(),
                epoch: row.epoch,
            }
        }))
    }

    fn open_intents(&self) -> Result<u64, ActivityError> {
        let state = self.lock();
        Ok(state
            .remembering
            .intents
            .iter()
            .filter(|row| row.state == IntentState::Queued)
            .count() as u64)
    }

    fn outbox_put(
        &self,
        intent: &Intent,
        capacity: u64,
        _now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let kept = stored("intent canonical JSON", intent)?;
        let mut state = self.lock();
        let remembering = &mut state.remembering;
        if remembering.outbox.len() as u64 >= capacity {
            return Err(ActivityError::AtCapacity { capacity });
        }
        remembering.last_outbox_row += 1;
        remembering.outbox.insert(remembering.last_outbox_row, kept);
        Ok(())
    }

    fn outbox_peek(&self, limit: usize) -> Result<Vec<(u64, Intent)>, ActivityError> {
        if limit == 0 || limit > MAX_PAGE_ROWS {
            return Err(ActivityError::invalid(
                "outbox page limit",
                format!("must be between 1 and {MAX_PAGE_ROWS}"),
            ));
        }
        let state = self.lock();
        Ok(state
            .remembering
            .outbox
            .iter()
            .take(limit)
            .map(|(row, intent)| (*row, intent.clone()))
            .collect())
    }

    fn outbox_admit(
        &self,
        row: u64,
        capacity: u64,
        _now: EpochMillis,
    ) -> Result<Admitted, ActivityError> {
        let mut state = self.lock();
        let remembering = &mut state.remembering;
        let Some(intent) = remembering.outbox.get(&row).cloned() else {
            return Err(ActivityError::ProgressMismatch {
                what: "parked intent is gone",
            });
        };
        let admitted = remembering.admit(&intent, counted_capacity(&intent, capacity))?;
        remembering.outbox.remove(&row);
        Ok(admitted)
    }
}
