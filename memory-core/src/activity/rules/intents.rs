//! The rules of the remembering store (see [`crate::activity::intents`] for the port's contract):
//! admission with its capacity and cleanup reopening, intent claims, saved commands, suppression
//! columns and the codecs of intent, reference and outbox rows.

use super::{corrupt, lease_expiry, next_epoch, parse_optional, parse_stored, stored_u64};
use crate::activity::intents::Admitted;
use crate::activity::{
    ActivityError, FencingEpoch, Intent, IntentClaim, IntentId, IntentLease, IntentState,
    IntentView, SavedCommand, SourceId, SourceReference, SourceRevision, WorkerId,
    canonical_progress_json,
};
use crate::document::{EpochMillis, MemoryKey};
use crate::ids::{DocumentId, OperationId, Revision};
use crate::namespace::NamespaceAddress;

/// The stored form of "every revision" in the suppression table.
pub const ALL_REVISIONS: &str = "";

/// The suppression column of `revision` (`None`: every revision, [`ALL_REVISIONS`]).
pub fn suppression_revision(revision: Option<&SourceRevision>) -> &str {
    revision.map_or(ALL_REVISIONS, SourceRevision::as_str)
}

/// The state column of an intent row.
pub fn state_column(state: IntentState) -> &'static str {
    match state {
        IntentState::Queued => "queued",
        IntentState::Done => "done",
    }
}

/// Reads a state column (anything but `done` is still open).
pub fn parse_state(column: &str) -> IntentState {
    if column == "done" {
        IntentState::Done
    } else {
        IntentState::Queued
    }
}

/// An intent checked and encoded for admission, before any transaction.
#[derive(Debug, Clone)]
pub struct PreparedAdmission {
    id: IntentId,
    /// The intent's canonical JSON, as stored.
    pub intent_json: String,
    capacity: Option<u64>,
    reopens: bool,
}

/// What admission does after reading the intent's stored state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmissionStep {
    /// Nothing to write: the intent is open, or a finished remember intent (which stays finished).
    Known(Admitted),
    /// Reopen the finished cleanup: queue it again, clearing its outcome and lease. A cleanup can be
    /// needed again when a write landed after the last cleanup ran.
    Reopen(Admitted),
    /// Insert it; when [`PreparedAdmission::is_counted`], count the open counted intents first and
    /// ask [`PreparedAdmission::check_room`].
    Insert,
}

impl PreparedAdmission {
    /// Admission through the queue: a remember intent counts against `capacity`, a cleanup never
    /// does (forgetting must not be refused because the queue is full).
    pub fn queued(intent: &Intent, capacity: u64) -> Result<Self, ActivityError> {
        let capacity = match intent {
            Intent::Remember { .. } => Some(capacity),
            Intent::Cleanup { .. } => None,
        };
        Self::new(intent, capacity)
    }

    /// Admission of a successor or of a suppression's cleanup: never counted.
    pub fn uncounted(intent: &Intent) -> Result<Self, ActivityError> {
        Self::new(intent, None)
    }

    fn new(intent: &Intent, capacity: Option<u64>) -> Result<Self, ActivityError> {
        Ok(Self {
            id: intent.id(),
            intent_json: canonical_progress_json("intent canonical JSON", intent)?,
            capacity,
            reopens: matches!(intent, Intent::Cleanup { .. }),
        })
    }

    /// The intent's id, the row's key.
    pub fn id(&self) -> &IntentId {
        &self.id
    }

    /// Whether the intent counts against capacity (the row's `counted` column).
    pub fn is_counted(&self) -> bool {
        self.capacity.is_some()
    }

    /// Decides over the stored state of the intent (`None`: never admitted).
    pub fn plan(&self, existing: Option<IntentState>) -> AdmissionStep {
        match existing {
            None => AdmissionStep::Insert,
            Some(IntentState::Queued) => AdmissionStep::Known(self.admitted(true)),
            Some(IntentState::Done) if self.reopens => AdmissionStep::Reopen(self.admitted(false)),
            Some(IntentState::Done) => AdmissionStep::Known(self.admitted(true)),
        }
    }

    /// Refuses a counted insert when `open` counted intents already fill the capacity; nothing is
    /// evicted.
    pub fn check_room(&self, open: u64) -> Result<(), ActivityError> {
        match self.capacity {
            Some(capacity) => check_room(open, capacity),
            None => Ok(()),
        }
    }

    /// What admission answers once the insert (or reopening) is persisted.
    pub fn admitted(&self, already_admitted: bool) -> Admitted {
        Admitted {
            id: self.id.clone(),
            already_admitted,
        }
    }
}

/// Refuses one more entry where `used` already fills `capacity` (admission and the outbox).
pub fn check_room(used: u64, capacity: u64) -> Result<(), ActivityError> {
    if used >= capacity {
        return Err(ActivityError::AtCapacity { capacity });
    }
    Ok(())
}

/// The columns a claim reads, in this order.
pub const CLAIM_COLUMNS: &str =
    "id, intent_json, epoch, proposal_json, command_json, command_attempt";

/// The [`CLAIM_COLUMNS`] of the oldest claimable intent, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ClaimColumns {
    pub id: String,
    pub intent_json: String,
    pub epoch: i64,
    pub proposal_json: Option<String>,
    pub command_json: Option<String>,
    pub command_attempt: Option<i64>,
}

/// A checked intent claim, before any row is read.
#[derive(Debug, Clone)]
pub struct IntentClaimRequest {
    owner: WorkerId,
    expires_at: EpochMillis,
}

impl IntentClaimRequest {
    /// Checks a claim for `owner` lasting `lease_ms` from `now`.
    pub fn new(owner: &WorkerId, lease_ms: u64, now: EpochMillis) -> Result<Self, ActivityError> {
        Ok(Self {
            owner: owner.clone(),
            expires_at: lease_expiry(lease_ms, now)?,
        })
    }

    /// Decodes the oldest claimable row and decides the claim: the next epoch, this owner, the
    /// expiry. The backend persists the lease's epoch, owner and expiry under `columns.id`.
    pub fn plan(self, columns: ClaimColumns) -> Result<IntentClaim, ActivityError> {
        let epoch = next_epoch(Some(FencingEpoch::new(stored_u64(columns.epoch, "epoch")?)))?;
        let id = IntentId::new(columns.id).map_err(|_| corrupt("stored intent id is invalid"))?;
        let intent: Intent = parse_stored(&columns.intent_json, "intent")?;
        if intent.id() != id {
            return Err(corrupt("stored intent does not match its id"));
        }
        let command = saved_command(columns.command_json.as_deref(), columns.command_attempt)?;
        Ok(IntentClaim {
            lease: IntentLease {
                id,
                owner: self.owner,
                epoch,
                expires_at: self.expires_at,
            },
            intent,
            proposal: parse_optional(columns.proposal_json.as_deref(), "saved proposal")?,
            command,
        })
    }
}

/// A stored command and its attempt, which are saved together.
fn saved_command(
    json: Option<&str>,
    attempt: Option<i64>,
) -> Result<Option<SavedCommand>, ActivityError> {
    match (parse_optional(json, "saved command")?, attempt) {
        (Some(write), Some(attempt)) => Ok(Some(SavedCommand {
            attempt: u32::try_from(attempt).map_err(|_| corrupt("command attempt out of range"))?,
            write,
        })),
        (None, None) => Ok(None),
        _ => Err(corrupt("saved command is partly stored")),
    }
}

/// A command checked and encoded for saving, before any transaction.
#[derive(Debug, Clone)]
pub struct PreparedCommand {
    /// The command's canonical JSON.
    pub command_json: String,
    /// Its attempt, as stored.
    pub attempt: i64,
}

impl PreparedCommand {
    /// Checks the command's size and encodes it.
    pub fn new(command: &SavedCommand) -> Result<Self, ActivityError> {
        Ok(Self {
            command_json: canonical_progress_json("command canonical JSON", &command.write)?,
            attempt: i64::from(command.attempt),
        })
    }

    /// Refuses the save when the intent's stored attempt (read under the row lock) is this one or a
    /// later one: a saved command is replaced only by a later attempt.
    pub fn check_attempt(&self, stored: Option<i64>) -> Result<(), ActivityError> {
        if stored.is_some_and(|stored| stored >= self.attempt) {
            return Err(ActivityError::ProgressMismatch {
                what: "a command of this or a later attempt is already saved",
            });
        }
        Ok(())
    }
}

/// The refusal of a fenced intent write that changed no row (the lease is stale, or the intent done).
pub fn stale(lease: &IntentLease) -> ActivityError {
    ActivityError::StaleLease { epoch: lease.epoch }
}

/// The columns `inspect_intent` reads, in this order.
pub const VIEW_COLUMNS: &str =
    "intent_json, state, proposal_json, command_json, command_attempt, outcome_json, epoch";

/// The [`VIEW_COLUMNS`] of one intent, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ViewColumns {
    pub intent_json: String,
    pub state: String,
    pub proposal_json: Option<String>,
    pub command_json: Option<String>,
    pub command_attempt: Option<i64>,
    pub outcome_json: Option<String>,
    pub epoch: i64,
}

impl ViewColumns {
    /// Decodes what `inspect_intent` shows. Inspection is lenient about a half-stored command (it
    /// shows none) so an operator can still look at a damaged row; a claim refuses it.
    pub fn decode(self) -> Result<IntentView, ActivityError> {
        let command = match (
            parse_optional(self.command_json.as_deref(), "saved command")?,
            self.command_attempt,
        ) {
            (Some(write), Some(attempt)) => Some(SavedCommand {
                attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
                write,
            }),
            _ => None,
        };
        Ok(IntentView {
            intent: parse_stored(&self.intent_json, "intent")?,
            state: parse_state(&self.state),
            proposal: parse_optional(self.proposal_json.as_deref(), "saved proposal")?,
            command,
            outcome: parse_optional(self.outcome_json.as_deref(), "outcome")?,
            epoch: FencingEpoch::new(stored_u64(self.epoch, "epoch")?),
        })
    }
}

/// The columns of a reference page, in this order.
pub const REFERENCE_COLUMNS: &str =
    "row, source_revision, target_namespace, target_id, operation_id, revision";

/// The [`REFERENCE_COLUMNS`] of one reference, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ReferenceColumns {
    pub row: i64,
    pub source_revision: String,
    pub target_namespace: String,
    pub target_id: String,
    pub operation_id: String,
    pub revision: String,
}

impl ReferenceColumns {
    /// The columns of `reference` after its row number: source, source revision, target namespace,
    /// target id, operation id and revision, as inserted.
    pub fn of(reference: &SourceReference) -> [&str; 6] {
        [
            reference.source.as_str(),
            reference.source_revision.as_str(),
            reference.target.namespace.as_str(),
            reference.target.id.as_str(),
            reference.operation_id.as_str(),
            reference.revision.as_str(),
        ]
    }

    /// Decodes one stored reference of `source` with its row number.
    pub fn decode(self, source: &SourceId) -> Result<(u64, SourceReference), ActivityError> {
        let bad = |what: &str| corrupt(format!("stored reference has an invalid {what}"));
        Ok((
            stored_u64(self.row, "reference row")?,
            SourceReference {
                source: source.clone(),
                source_revision: SourceRevision::new(self.source_revision)
                    .map_err(|_| bad("source revision"))?,
                target: MemoryKey {
                    namespace: NamespaceAddress::parse(&self.target_namespace)
                        .map_err(|_| bad("namespace"))?,
                    id: DocumentId::new(self.target_id).map_err(|_| bad("document id"))?,
                },
                operation_id: OperationId::new(self.operation_id)
                    .map_err(|_| bad("operation id"))?,
                revision: Revision::new(self.revision).map_err(|_| bad("revision"))?,
            },
        ))
    }
}

/// Decodes one parked intent of the outbox with its row number.
pub fn parked(row: i64, intent_json: &str) -> Result<(u64, Intent), ActivityError> {
    Ok((
        stored_u64(row, "outbox row")?,
        parse_stored(intent_json, "parked intent")?,
    ))
}

/// The refusal of admitting a parked intent that another admitter already took.
pub fn parked_gone() -> ActivityError {
    ActivityError::ProgressMismatch {
        what: "parked intent is gone",
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::activity::ThreadId;

    fn remember() -> Intent {
        let thread = ThreadId::new("t").expect("valid");
        Intent::Remember {
            source: SourceId::thread_record(&thread, crate::activity::Sequence::new(1)),
            revision: SourceRevision::new("r1").expect("valid"),
            target: MemoryKey {
                namespace: NamespaceAddress::parse(r#"[1,"notes",1,{}]"#).expect("valid"),
                id: DocumentId::new("d").expect("valid"),
            },
            scopes: Vec::new(),
        }
    }

    fn cleanup() -> Intent {
        Intent::Cleanup {
            source: SourceId::new("s").expect("valid"),
            revision: None,
        }
    }

    proptest! {
        /// Capacity refuses exactly when the open counted intents fill it, and only counted intents.
        #[test]
        fn capacity_refuses_only_a_full_queue(open in 0_u64..20, capacity in 0_u64..20) {
            let counted = PreparedAdmission::uncounted(&cleanup()).expect("valid");
            prop_assert!(counted.check_room(open).is_ok());
            match check_room(open, capacity) {
                Err(ActivityError::AtCapacity { capacity: reported }) => {
                    prop_assert!(open >= capacity);
                    prop_assert_eq!(reported, capacity);
                }
                Ok(()) => prop_assert!(open < capacity),
                Err(other) => prop_assert!(false, "unexpected {other}"),
            }
        }

        /// A command is saved only over an earlier attempt.
        #[test]
        fn commands_replace_only_earlier_attempts(stored in prop::option::of(0_i64..10), attempt in 0_u32..10) {
            let command = PreparedCommand { command_json: String::new(), attempt: i64::from(attempt) };
            let refused = command.check_attempt(stored).is_err();
            prop_assert_eq!(refused, stored.is_some_and(|stored| stored >= i64::from(attempt)));
        }
    }

    #[test]
    fn admission_inserts_new_intents_and_reopens_only_cleanups() {
        let cleanup_admission = PreparedAdmission::queued(&cleanup(), 3).expect("valid");
        assert!(!cleanup_admission.is_counted());
        assert_eq!(cleanup_admission.plan(None), AdmissionStep::Insert);
        assert!(matches!(
            cleanup_admission.plan(Some(IntentState::Queued)),
            AdmissionStep::Known(Admitted {
                already_admitted: true,
                ..
            })
        ));
        assert!(matches!(
            cleanup_admission.plan(Some(IntentState::Done)),
            AdmissionStep::Reopen(Admitted {
                already_admitted: false,
                ..
            })
        ));
        let admission = PreparedAdmission::queued(&remember(), 3).expect("valid");
        assert!(admission.is_counted());
        assert_eq!(admission.plan(None), AdmissionStep::Insert);
        assert!(matches!(
            admission.plan(Some(IntentState::Done)),
            AdmissionStep::Known(Admitted {
                already_admitted: true,
                ..
            })
        ));
        assert!(matches!(
            admission.check_room(3),
            Err(ActivityError::AtCapacity { capacity: 3 })
        ));
        assert!(admission.check_room(2).is_ok());
        assert!(
            !PreparedAdmission::uncounted(&remember())
                .expect("valid")
                .is_counted()
        );
    }

    #[test]
    fn claims_decode_the_row_and_raise_its_epoch() {
        let intent = cleanup();
        let owner = WorkerId::new("w").expect("valid");
        let columns = ClaimColumns {
            id: intent.id().as_str().to_owned(),
            intent_json: serde_json::to_string(&intent).expect("serializes"),
            epoch: 4,
            proposal_json: None,
            command_json: None,
            command_attempt: None,
        };
        let claim = IntentClaimRequest::new(&owner, 10, 100)
            .expect("valid")
            .plan(columns.clone())
            .expect("claimed");
        assert_eq!(claim.lease.epoch, FencingEpoch::new(5));
        assert_eq!(claim.lease.expires_at, 110);
        assert_eq!(claim.intent, intent);
        assert!(IntentClaimRequest::new(&owner, 0, 100).is_err());
        for broken in [
            ClaimColumns {
                id: "other".to_owned(),
                ..columns.clone()
            },
            ClaimColumns {
                command_attempt: Some(1),
                ..columns.clone()
            },
            ClaimColumns {
                epoch: -1,
                ..columns.clone()
            },
            ClaimColumns {
                intent_json: "{".to_owned(),
                ..columns
            },
        ] {
            let request = IntentClaimRequest::new(&owner, 10, 100).expect("valid");
            assert!(matches!(
                request.plan(broken),
                Err(ActivityError::Store(crate::StoreFault::Corrupt { .. }))
            ));
        }
    }

    #[test]
    fn columns_round_trip() {
        assert_eq!(
            parse_state(state_column(IntentState::Done)),
            IntentState::Done
        );
        assert_eq!(
            parse_state(state_column(IntentState::Queued)),
            IntentState::Queued
        );
        assert_eq!(suppression_revision(None), ALL_REVISIONS);
        assert!(parked(-1, "{}").is_err());
        let (row, parked_intent) =
            parked(7, &serde_json::to_string(&cleanup()).expect("serializes")).expect("valid");
        assert_eq!((row, parked_intent), (7, cleanup()));
        let bad = ReferenceColumns {
            row: 1,
            source_revision: "r".to_owned(),
            target_namespace: "not an address".to_owned(),
            target_id: "d".to_owned(),
            operation_id: "o".to_owned(),
            revision: "v".to_owned(),
        };
        assert!(matches!(
            bad.decode(&SourceId::new("s").expect("valid")),
            Err(ActivityError::Store(crate::StoreFault::Corrupt { what })) if what.contains("namespace")
        ));
    }
}
