//! Admitted intents, suppression and source-to-target references: the durable state of remembering
//! worker passes (SPEC §5).
//!
//! Rules every implementation keeps:
//! - [`RememberingStore::admit`] returns only after the intent is durable; an identical intent (same
//!   [`IntentId`]) is not queued twice; at capacity it refuses with [`ActivityError::AtCapacity`] and
//!   evicts nothing. Cleanup intents and invalidation successors are not counted against capacity: a
//!   forget must never wait for the remember backlog, and a successor replaces the obligation it closes.
//! - Claims, saves and completion are fenced exactly like committed-activity progress.
//! - [`RememberingStore::save_command`] keeps the exact write command and the source-to-target reference
//!   in one transaction, before the command is sent, so cleanup needs no prior read to find targets.
//! - [`RememberingStore::suppress`] records suppression and admits a cleanup intent in one transaction.

use serde::{Deserialize, Serialize};

use super::thread::RecordDigest;
use super::{ActivityError, FencingEpoch, Sequence, ThreadId, WorkerId, activity_id, sha256_hex};
use crate::document::{EpochMillis, MemoryContent, MemoryKey, MemoryScope};
use crate::ids::{OperationId, Revision};
use crate::write::MemoryWrite;
use std::fmt;

activity_id!(
    /// An application-owned source (a note, a thread record, a file) whose content may become memory.
    SourceId,
    "source id",
    1_024
);
activity_id!(
    /// An opaque revision of a source.
    SourceRevision,
    "source revision",
    256
);
activity_id!(
    /// An intent's id: a digest of the intent, so admitting the same intent twice names one obligation.
    IntentId,
    "intent id",
    128
);

/// The prefix of [`SourceId::thread_record`] ids.
pub const THREAD_RECORD_SOURCE_PREFIX: &str = "thread-record/";

impl SourceId {
    /// The source id of one thread record: `thread-record/<sequence>/<thread id>`. Committed-activity
    /// processors keep references under it, so forgetting, editing, deleting or revoking a thread record
    /// goes through the same suppression and cleanup as any other source. A thread id is at most 512
    /// bytes without control characters, so the id is always valid.
    pub fn thread_record(thread: &ThreadId, sequence: Sequence) -> Self {
        Self(
            format!(
                "{THREAD_RECORD_SOURCE_PREFIX}{}/{}",
                sequence.get(),
                thread.as_str()
            )
            .into(),
        )
    }

    /// The thread and sequence of a [`SourceId::thread_record`] id; `None` for any other source.
    pub fn as_thread_record(&self) -> Option<(ThreadId, Sequence)> {
        let rest = self.0.strip_prefix(THREAD_RECORD_SOURCE_PREFIX)?;
        let (text, thread) = rest.split_once('/')?;
        let sequence = text.parse::<u64>().ok()?;
        // Only the canonical spelling names a record, so one record has exactly one source id.
        if sequence == 0 || text != sequence.to_string() {
            return None;
        }
        Some((ThreadId::new(thread).ok()?, Sequence::new(sequence)))
    }
}

impl SourceRevision {
    /// The revision of a thread record: its digest (records are append-only, so the digest names the
    /// only content the record ever had).
    pub fn of_record(digest: &RecordDigest) -> Self {
        Self(digest.as_str().into())
    }
}

/// An obligation admitted for a worker pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Intent {
    /// Remember what a source revision says, in one target document. The target's namespace binds the
    /// intent to one identity.
    Remember {
        /// The source.
        source: SourceId,
        /// The source revision the intent was admitted for.
        revision: SourceRevision,
        /// The document to write.
        target: MemoryKey,
        /// Scopes allowed to recall it.
        scopes: Vec<MemoryScope>,
    },
    /// Withdraw what a source contributed (every revision when `revision` is `None`).
    Cleanup {
        /// The source.
        source: SourceId,
        /// The suppressed revision, or every revision.
        revision: Option<SourceRevision>,
    },
}

impl Intent {
    /// The intent's id (a digest of its canonical JSON).
    pub fn id(&self) -> IntentId {
        IntentId(format!("i{}", &sha256_hex(self)[..40]).into())
    }

    /// The source it concerns.
    pub fn source(&self) -> &SourceId {
        match self {
            Self::Remember { source, .. } | Self::Cleanup { source, .. } => source,
        }
    }
}

/// A held intent lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentLease {
    /// The intent.
    pub id: IntentId,
    /// Who holds it.
    pub owner: WorkerId,
    /// Its fencing epoch.
    pub epoch: FencingEpoch,
    /// When it expires, epoch milliseconds.
    pub expires_at: EpochMillis,
}

/// The exact write command saved before it is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedCommand {
    /// 0 for the first command; each definite conflict rebases into the next attempt.
    pub attempt: u32,
    /// The command, byte for byte what is sent.
    pub write: MemoryWrite,
}

/// A kept link from a source to a memory document it contributed to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceReference {
    /// The contributing source.
    pub source: SourceId,
    /// Its revision.
    pub source_revision: SourceRevision,
    /// The document written.
    pub target: MemoryKey,
    /// The id the reference is kept under, unique per target namespace (a replayed save adds
    /// nothing): the command's operation id for the source that wrote it, and an id derived from that
    /// one for any other source the same command draws on (an answer's question, whose record is
    /// another source), so every source of one command keeps a reference of its own.
    pub operation_id: OperationId,
    /// The revision the command creates when it lands.
    pub revision: Revision,
}

/// How an intent ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IntentOutcome {
    /// The command landed at this revision.
    Written {
        /// The revision written.
        revision: Revision,
    },
    /// Extraction found nothing worth remembering, or the source was gone.
    NothingToRemember,
    /// The source changed or was suppressed before the write; a successor (if any) was admitted.
    Invalidated,
    /// The target was withdrawn by someone else; nothing can be written.
    TargetWithdrawn,
    /// Cleanup finished: how many documents it withdrew and kept.
    Cleaned {
        /// Documents withdrawn.
        withdrawn: u32,
        /// Documents kept (corrected by someone else, or already gone).
        kept: u32,
    },
    /// A definite failure that retrying cannot fix (for example an operation conflict).
    Failed {
        /// The error kind's wire name.
        reason: String,
    },
}

/// Whether an intent is still open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentState {
    /// Waiting for (or in) a pass.
    Queued,
    /// Finished with an outcome.
    Done,
}

/// What a claim returns: the lease, the intent and whatever an earlier pass saved.
#[derive(Debug, Clone, PartialEq)]
pub struct IntentClaim {
    /// The new lease.
    pub lease: IntentLease,
    /// The intent.
    pub intent: Intent,
    /// The saved proposal, if extraction already ran.
    pub proposal: Option<MemoryContent>,
    /// The saved command, if one was prepared.
    pub command: Option<SavedCommand>,
}

/// What `inspect_intent` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct IntentView {
    /// The intent.
    pub intent: Intent,
    /// Open or done.
    pub state: IntentState,
    /// The saved proposal.
    pub proposal: Option<MemoryContent>,
    /// The saved command.
    pub command: Option<SavedCommand>,
    /// The outcome once done.
    pub outcome: Option<IntentOutcome>,
    /// The latest epoch handed out.
    pub epoch: FencingEpoch,
}

/// What `admit` recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The intent's id.
    pub id: IntentId,
    /// True when the same intent was already admitted (nothing new was written).
    pub already_admitted: bool,
}

/// One suppression of a thread record, as [`RememberingStore::thread_suppressions`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSuppression {
    /// The record.
    pub sequence: Sequence,
    /// The suppressed revision (a record's digest), or `None` for every revision.
    pub revision: Option<SourceRevision>,
    /// When the suppression was recorded, epoch milliseconds.
    pub suppressed_at: EpochMillis,
}

/// A thread's record suppressions and the store's suppression generation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadSuppressions {
    /// The suppressions of the thread's records, by sequence (then revision).
    pub records: Vec<RecordSuppression>,
    /// How many suppressions the whole store holds. Suppressions are never removed, so this grows with
    /// every new one anywhere: a cache of anything read through suppression (a turn's recalled memory)
    /// is stale exactly when it changed.
    pub generation: u64,
}

/// Durable state of remembering worker passes.
pub trait RememberingStore: Send + Sync {
    /// Records an intent durably, unless it is already recorded; refuses at `capacity` open intents.
    fn admit(
        &self,
        intent: &Intent,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<Admitted, ActivityError>;

    /// Claims the oldest open intent whose lease is free, with a fresh epoch.
    fn claim_next(
        &self,
        owner: &WorkerId,
        lease_ms: u64,
        now: EpochMillis,
    ) -> Result<Option<IntentClaim>, ActivityError>;

    /// Saves the extraction proposal (only when none is saved).
    fn save_proposal(
        &self,
        lease: &IntentLease,
        proposal: &MemoryContent,
        now: EpochMillis,
    ) -> Result<(), ActivityError>;

    /// Saves the exact command and its source-to-target reference, replacing an earlier attempt only with
    /// a later one.
    fn save_command(
        &self,
        lease: &IntentLease,
        command: &SavedCommand,
        reference: &SourceReference,
        now: EpochMillis,
    ) -> Result<(), ActivityError>;

    /// Closes the intent with `outcome`, admitting `successor` (if any) in the same transaction.
    fn complete(
        &self,
        lease: &IntentLease,
        outcome: &IntentOutcome,
        successor: Option<&Intent>,
        now: EpochMillis,
    ) -> Result<(), ActivityError>;

    /// Gives the lease up early.
    fn release(&self, lease: &IntentLease, now: EpochMillis) -> Result<(), ActivityError>;

    /// Suppresses a source (one revision, or every revision) and admits its cleanup, in one transaction.
    fn suppress(
        &self,
        source: &SourceId,
        revision: Option<&SourceRevision>,
        now: EpochMillis,
    ) -> Result<IntentId, ActivityError>;

    /// The suppressions of `thread`'s records: sources spelled exactly [`SourceId::thread_record`] for
    /// this thread (matched by [`SourceId::as_thread_record`], never by a prefix or suffix alone), with
    /// the store's suppression generation, in one consistent read.
    fn thread_suppressions(&self, thread: &ThreadId) -> Result<ThreadSuppressions, ActivityError>;

    /// Whether a source revision is suppressed.
    fn is_suppressed(
        &self,
        source: &SourceId,
        revision: &SourceRevision,
    ) -> Result<bool, ActivityError>;

    /// Keeps references that no intent owns (a committed-activity processor's commands), before the
    /// commands are sent. Idempotent: a reference already kept is not added twice. Not fenced: a
    /// reference whose command never lands names a revision no document reaches, so it withdraws and
    /// hides nothing.
    fn save_references(&self, references: &[SourceReference]) -> Result<(), ActivityError>;

    /// Up to `limit` references of `source` (all revisions), oldest first, after row `after`; each comes
    /// with its row number for paging.
    fn references(
        &self,
        source: &SourceId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, SourceReference)>, ActivityError>;

    /// For each `(target, revision)`, whether that revision was contributed by a suppressed source.
    fn suppressed_contributions(
        &self,
        documents: &[(MemoryKey, Revision)],
    ) -> Result<Vec<bool>, ActivityError>;

    /// One intent's state.
    fn inspect_intent(&self, id: &IntentId) -> Result<Option<IntentView>, ActivityError>;

    /// How many intents are open.
    fn open_intents(&self) -> Result<u64, ActivityError>;

    /// Parks an intent whose admission failed, for a later retry; refuses at `capacity` parked intents.
    fn outbox_put(
        &self,
        intent: &Intent,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<(), ActivityError>;

    /// Up to `limit` parked intents, oldest first, with their row numbers.
    fn outbox_peek(&self, limit: usize) -> Result<Vec<(u64, Intent)>, ActivityError>;

    /// Admits a parked intent and removes it from the outbox in one transaction.
    fn outbox_admit(
        &self,
        row: u64,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<Admitted, ActivityError>;
}

impl fmt::Display for IntentState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::Queued => "queued",
            Self::Done => "done",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_record_source_ids_round_trip_and_refuse_other_spellings() {
        let thread = ThreadId::new("team/thread 7").expect("valid");
        let source = SourceId::thread_record(&thread, Sequence::new(12));
        assert_eq!(source.as_thread_record(), Some((thread, Sequence::new(12))));
        for other in [
            "thread-record/012/t",
            "thread-record/0/t",
            "thread-record/12",
            "note/12/t",
        ] {
            let id = SourceId::new(other).expect("valid");
            assert_eq!(id.as_thread_record(), None, "{other}");
        }
    }
}
