//! Committed-activity progress: one row per (processor, version, thread) holding the fenced lease, the
//! cursor (last processed sequence), the pending output of the next record, and the last advance time.
//!
//! Rules every implementation keeps:
//! - [`ProgressStore::claim`] succeeds when no unexpired lease is held by another owner, and always hands
//!   out a strictly larger [`FencingEpoch`] (a re-claim by the same owner fences its older handle too).
//! - Every write names the lease; it applies only while the epoch is current and the lease unexpired, and
//!   must change exactly one row, else it fails with [`ActivityError::StaleLease`] and changes nothing.
//! - Pending output is saved only for `cursor + 1` and only when none is saved: a saved output wins over a
//!   re-extraction. Only [`ProgressStore::replace_pending`] changes a saved output, for the same record
//!   (a rebase of its saved command). Advancing moves the cursor by exactly one record and clears the pending output in the
//!   same transaction.
//! - Saved output larger than [`super::MAX_PROGRESS_UTF16_UNITS`] is refused with prior progress intact.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    ActivityError, FencingEpoch, ProcessorId, ProcessorVersion, Sequence, ThreadId, WorkId,
    WorkerId,
};
use crate::document::EpochMillis;

/// Whose progress: a processor version over one thread.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProgressKey {
    /// The processor.
    pub processor: ProcessorId,
    /// Its version.
    pub version: ProcessorVersion,
    /// The thread.
    pub thread: ThreadId,
}

impl ProgressKey {
    /// The work id of the record at `sequence`.
    pub fn work_id(&self, sequence: Sequence) -> WorkId {
        WorkId::derive(&self.processor, self.version, &self.thread, sequence)
    }
}

/// A held lease. Every progress write presents it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// What it covers.
    pub key: ProgressKey,
    /// Who holds it.
    pub owner: WorkerId,
    /// Its fencing epoch.
    pub epoch: FencingEpoch,
    /// When it expires, epoch milliseconds.
    pub expires_at: EpochMillis,
}

/// Extraction output saved for one record before it is applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingOutput {
    /// The record it belongs to (always `cursor + 1`).
    pub sequence: Sequence,
    /// The record's work id.
    pub work_id: WorkId,
    /// The processor's output, as JSON.
    pub output: Value,
}

/// What a claim returns: the lease, the cursor and any pending output saved by an earlier holder.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The new lease.
    pub lease: Lease,
    /// The last processed sequence.
    pub cursor: Sequence,
    /// Output saved for `cursor + 1` and not yet advanced past.
    pub pending: Option<PendingOutput>,
}

/// What `inspect` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressView {
    /// Whose progress.
    pub key: ProgressKey,
    /// The last processed sequence.
    pub cursor: Sequence,
    /// Pending output, if any.
    pub pending: Option<PendingOutput>,
    /// When the cursor last moved, epoch milliseconds.
    pub last_advance_at: Option<EpochMillis>,
    /// The latest epoch handed out.
    pub epoch: FencingEpoch,
    /// The latest lease's owner and expiry, while it is unreleased.
    pub lease: Option<(WorkerId, EpochMillis)>,
}

/// What extracting one record yielded, kept for `memory status`: how many memories it kept, and the
/// parts not kept by reason.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExtractionNote {
    /// Contributions kept.
    pub kept: u64,
    /// Parts not kept, by reason (at most [`MAX_NOTE_REASONS`] reasons of at most
    /// [`MAX_NOTE_REASON_BYTES`] bytes).
    pub dropped: BTreeMap<String, u64>,
    /// Statements that said, in words, that they correct something, and what became of them.
    #[serde(default)]
    pub corrections: CorrectionCounts,
    /// What asking a language model for this record's memories cost (all zero for an extractor that
    /// asks none). A batch's call is noted with the record that asked it.
    #[serde(default)]
    pub model: ModelUsage,
}

/// What a model extractor's calls cost: calls answered, tokens as the endpoint reported them,
/// milliseconds waited, and records extracted by the statement extractor instead because the model
/// failed (`remembering-worker --fallback statements`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ModelUsage {
    /// Calls answered.
    pub calls: u64,
    /// Tokens of the requests.
    pub prompt_tokens: u64,
    /// Tokens of the answers.
    pub completion_tokens: u64,
    /// Milliseconds from each call's first attempt to its answer, summed.
    pub latency_ms: u64,
    /// Records extracted without the model because it failed.
    pub fallbacks: u64,
}

impl ModelUsage {
    /// The sum of two usages (saturating).
    pub fn plus(self, other: Self) -> Self {
        Self {
            calls: self.calls.saturating_add(other.calls),
            prompt_tokens: self.prompt_tokens.saturating_add(other.prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_add(other.completion_tokens),
            latency_ms: self.latency_ms.saturating_add(other.latency_ms),
            fallbacks: self.fallbacks.saturating_add(other.fallbacks),
        }
    }

    /// Each count with its total row's name ([`crate::activity::rules::progress`]).
    pub fn named(&self) -> [(&'static str, u64); 5] {
        [
            ("model:calls", self.calls),
            ("model:prompt_tokens", self.prompt_tokens),
            ("model:completion_tokens", self.completion_tokens),
            ("model:latency_ms", self.latency_ms),
            ("model:fallbacks", self.fallbacks),
        ]
    }

    /// Sets the count a total row names; `false` when the name is none of [`ModelUsage::named`].
    pub fn set_named(&mut self, name: &str, amount: u64) -> bool {
        let slot = match name {
            "model:calls" => &mut self.calls,
            "model:prompt_tokens" => &mut self.prompt_tokens,
            "model:completion_tokens" => &mut self.completion_tokens,
            "model:latency_ms" => &mut self.latency_ms,
            "model:fallbacks" => &mut self.fallbacks,
            _ => return false,
        };
        *slot = amount;
        true
    }
}

/// What became of the statements that say they correct something ("actually", "not X", "no
/// longer", ...): linked to the earlier memory they most resemble, or refused (no memory of the
/// same speaker resembled them enough, so no link was made).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CorrectionCounts {
    /// Linked to the memory they correct.
    pub linked: u64,
    /// Said in correcting words, but nothing resembled them enough to link.
    pub refused: u64,
}

/// Most reasons one [`ExtractionNote`] names.
pub const MAX_NOTE_REASONS: usize = 32;
/// Most UTF-8 bytes of one reason.
pub const MAX_NOTE_REASON_BYTES: usize = 64;

impl ExtractionNote {
    /// Checks the note's limits before anything is stored.
    pub fn validate(&self) -> Result<(), ActivityError> {
        if self.dropped.len() > MAX_NOTE_REASONS {
            return Err(ActivityError::TooLarge {
                limit: "extraction note reasons",
                max: MAX_NOTE_REASONS as u64,
                actual: self.dropped.len() as u64,
            });
        }
        for reason in self.dropped.keys() {
            if reason.is_empty()
                || reason.len() > MAX_NOTE_REASON_BYTES
                || reason.chars().any(char::is_control)
            {
                return Err(ActivityError::invalid(
                    "extraction note reason",
                    format!(
                        "must be 1 to {MAX_NOTE_REASON_BYTES} bytes without control characters"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Totals of every [`ExtractionNote`] kept: memories kept and parts dropped by reason.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExtractionTotals {
    /// Records noted.
    pub records: u64,
    /// Contributions kept.
    pub kept: u64,
    /// Parts not kept, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Correcting statements linked and refused.
    #[serde(default)]
    pub corrections: CorrectionCounts,
    /// What the model extractor's calls cost.
    #[serde(default)]
    pub model: ModelUsage,
}

/// Durable committed-activity progress.
pub trait ProgressStore: Send + Sync {
    /// Claims the lease for `lease_ms` milliseconds from `now`, with a fresh epoch.
    fn claim(
        &self,
        key: &ProgressKey,
        owner: &WorkerId,
        lease_ms: u64,
        now: EpochMillis,
    ) -> Result<Claim, ActivityError>;

    /// Saves the pending output of record `cursor + 1`.
    fn save_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError>;

    /// Replaces the pending output already saved for the same record (a rebase after a definite
    /// conflict saves its new command this way, before sending it). Refused with
    /// [`ActivityError::ProgressMismatch`] when no output is saved for `pending.sequence`.
    fn replace_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError>;

    /// Moves the cursor from `to - 1` to `to`, clearing the pending output in the same transaction.
    fn advance(&self, lease: &Lease, to: Sequence, now: EpochMillis) -> Result<(), ActivityError>;

    /// Gives the lease up so the next claim need not wait for expiry. Implementations bound the time
    /// they wait for the store (500 ms); past that the lease simply expires.
    fn release(&self, lease: &Lease, now: EpochMillis) -> Result<(), ActivityError>;

    /// The progress of one key, if any was ever claimed.
    fn inspect(&self, key: &ProgressKey) -> Result<Option<ProgressView>, ActivityError>;

    /// Up to `limit` progress rows, ordered by processor, version and thread.
    fn inspect_all(&self, limit: usize) -> Result<Vec<ProgressView>, ActivityError>;

    /// Keeps what extracting the record at `sequence` yielded, once per key and sequence: a second
    /// note of the same record (a re-extraction after a crash) changes nothing, so the totals count
    /// each record once. Unfenced on purpose: it records a fact about a record, not progress.
    fn note_extraction(
        &self,
        key: &ProgressKey,
        sequence: Sequence,
        note: &ExtractionNote,
    ) -> Result<(), ActivityError>;

    /// The totals of every note kept.
    fn extraction_totals(&self) -> Result<ExtractionTotals, ActivityError>;
}
