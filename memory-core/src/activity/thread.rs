//! The thread log: append-only canonical records per thread.
//!
//! A record's digest is SHA-256 over the canonical JSON of everything the record says (thread, sequence,
//! time, speaker, observers, body) and deliberately not over its opaque cursor: a provider continuation
//! token may be re-issued for the same content, and must not make the same statement look different.

use crate::StoreFault;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    ActivityError, CompactionRecord, DestinationCount, Sequence, ThreadDestination, ThreadId,
    sha256_hex,
};
use crate::document::EpochMillis;

/// Most UTF-8 bytes of a speaker or observer name.
pub const MAX_PARTICIPANT_BYTES: usize = 256;
/// Most observers on one record.
pub const MAX_OBSERVERS: usize = 64;
/// Most UTF-8 bytes of an opaque cursor.
pub const MAX_OPAQUE_CURSOR_BYTES: usize = 4_096;
/// Most records one page read may return.
pub const MAX_PAGE_RECORDS: usize = 10_000;

/// What a record says; also its wire form (tagged by `kind`) and input schema for callers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RecordBody {
    /// Something a user typed: the only kind the default extractor turns into memory.
    UserInput {
        /// The user's words.
        text: String,
    },
    /// Something the assistant said.
    AssistantMessage {
        /// The assistant's words.
        text: String,
    },
    /// The assistant called a tool.
    ToolCall {
        /// The call's id within the run.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The arguments as given.
        arguments: Value,
    },
    /// A tool answered.
    ToolResult {
        /// The call this answers.
        call_id: String,
        /// What the tool returned.
        output: Value,
        /// Whether the tool reported failure.
        is_error: bool,
    },
    /// A run of the agent finished.
    RunCompleted {
        /// How it ended (for example `completed`, `cancelled`).
        outcome: String,
    },
    /// Instructions the agent's host put into the thread. The context layer keeps them in every view
    /// and never folds them into a summary; the remembering worker never turns them into memory.
    SystemMessage {
        /// The instructions.
        text: String,
    },
    /// A compaction of the model's window (see [`CompactionRecord`]): it names the records it folded
    /// and carries the summary that stands in for them; the folded records stay in the log.
    Compaction(CompactionRecord),
}

/// A record to append; the log assigns its sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRecord {
    /// When it happened, epoch milliseconds; `None` when unknown.
    pub occurred_at: Option<EpochMillis>,
    /// Who produced it (the user's display name, `assistant`, a tool name).
    pub speaker: String,
    /// Who else saw it.
    pub observers: Vec<String>,
    /// What it says.
    pub body: RecordBody,
    /// An opaque provider cursor (for example a response id); kept, but outside the digest.
    pub opaque_cursor: Option<String>,
}

impl NewRecord {
    /// A user statement with no observers and no cursor.
    pub fn user(speaker: impl Into<String>, text: impl Into<String>, at: EpochMillis) -> Self {
        Self {
            occurred_at: Some(at),
            speaker: speaker.into(),
            observers: Vec::new(),
            body: RecordBody::UserInput { text: text.into() },
            opaque_cursor: None,
        }
    }

    /// An assistant message with no observers and no cursor.
    pub fn assistant(text: impl Into<String>, at: EpochMillis) -> Self {
        Self {
            occurred_at: Some(at),
            speaker: "assistant".to_owned(),
            observers: Vec::new(),
            body: RecordBody::AssistantMessage { text: text.into() },
            opaque_cursor: None,
        }
    }

    /// Checks field limits and the canonical size of the body before anything is stored.
    pub fn validate(&self) -> Result<(), ActivityError> {
        let check = |field: &'static str, text: &str, max: usize| {
            if text.len() > max {
                return Err(ActivityError::TooLarge {
                    limit: field,
                    max: max as u64,
                    actual: text.len() as u64,
                });
            }
            Ok(())
        };
        check("speaker bytes", &self.speaker, MAX_PARTICIPANT_BYTES)?;
        if self.observers.len() > MAX_OBSERVERS {
            return Err(ActivityError::TooLarge {
                limit: "observers",
                max: MAX_OBSERVERS as u64,
                actual: self.observers.len() as u64,
            });
        }
        for observer in &self.observers {
            check("observer bytes", observer, MAX_PARTICIPANT_BYTES)?;
        }
        if let Some(cursor) = &self.opaque_cursor {
            check("opaque cursor bytes", cursor, MAX_OPAQUE_CURSOR_BYTES)?;
        }
        if let RecordBody::Compaction(compaction) = &self.body {
            compaction.validate()?;
        }
        super::canonical_progress_json("record canonical JSON", &self.body)?;
        Ok(())
    }
}

/// SHA-256 over a record's canonical JSON, opaque cursor excluded.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RecordDigest(String);

impl RecordDigest {
    /// The digest of a record's content at a position.
    pub fn of(thread: &ThreadId, sequence: Sequence, record: &NewRecord) -> Self {
        Self(sha256_hex(&serde_json::json!({
            "thread": thread.as_str(),
            "sequence": sequence.get(),
            "occurred_at": record.occurred_at,
            "speaker": record.speaker,
            "observers": record.observers,
            "body": record.body,
        })))
    }

    /// Wraps a stored digest, checking its shape.
    pub fn from_hex(hex: impl Into<String>) -> Result<Self, ActivityError> {
        let hex = hex.into();
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(ActivityError::Store(StoreFault::Corrupt {
                what: "record digest is not 64 lower-case hex digits".to_owned(),
            }));
        }
        Ok(Self(hex))
    }

    /// The hex text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A stored record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadRecord {
    /// Its thread.
    pub thread: ThreadId,
    /// Its position.
    pub sequence: Sequence,
    /// Its content.
    pub record: NewRecord,
    /// Digest of its content (cursor excluded).
    pub digest: RecordDigest,
}

impl ThreadRecord {
    /// A locator back to this record: `thread-record/<sequence>/<digest prefix>`. It names no thread id,
    /// because memory locators may be shown to readers who must not learn other identities.
    pub fn locator(&self) -> String {
        format!(
            "thread-record/{}/{}",
            self.sequence.get(),
            &self.digest.as_str()[..16]
        )
    }
}

/// A thread's stored binding: its destination and how many times it was rebound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadBinding {
    /// Where the thread's memory goes.
    pub destination: ThreadDestination,
    /// 0 when bound by the first append; each [`ThreadLog::rebind`] adds one. A worker remembers a
    /// rebound thread again from its first record (its progress is kept per generation), so the new
    /// destination receives all of the thread's memory.
    pub generation: u64,
}

/// A thread with records that some processor may not have seen yet (see
/// [`ThreadLog::pending_threads`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingThread {
    /// The thread.
    pub thread: ThreadId,
    /// Its tail when it was last marked pending.
    pub tail: Sequence,
}

/// What `memory status` shows of the thread log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ThreadOverview {
    /// Threads per bound destination (at most [`MAX_OVERVIEW_DESTINATIONS`], most threads first).
    pub destinations: Vec<DestinationCount>,
    /// Threads with records and no binding (appended before bindings existed).
    pub unbound: u64,
    /// Threads whose stored destination no longer validates (damaged outside the product); the
    /// worker parks them, and `rebind` repairs them.
    pub unreadable: u64,
    /// Threads marked pending (records a worker has not settled).
    pub pending: u64,
    /// Parked threads by the kind of the error that parked them.
    pub parked: Vec<(String, u64)>,
}

/// Most destinations [`ThreadOverview::destinations`] lists.
pub const MAX_OVERVIEW_DESTINATIONS: usize = 100;
/// Most UTF-8 bytes of a parking reason's kind.
pub const MAX_PARK_KIND_BYTES: usize = 64;

/// The append-only log of thread records, with each thread's destination binding and the index of
/// threads with work pending.
///
/// Rules every implementation keeps (the thread log contract suite checks them):
/// - [`ThreadLog::append_to`] with a destination binds an unbound thread that has no records, in the
///   append's own transaction; on a thread bound to another destination, or on an unbound thread that
///   already has records, it is refused with [`ActivityError::DestinationConflict`] and writes nothing.
///   Without a destination it appends to whatever the thread is bound to (or to no binding).
/// - Every append marks the thread pending with its new tail, in the same transaction.
///   [`ThreadLog::settle`] unmarks it only while its tail is still the one given, so an append racing
///   a worker's pass keeps the thread pending.
/// - A parked thread is not listed by [`ThreadLog::pending_threads`] until it is rebound.
pub trait ThreadLog: Send + Sync {
    /// Appends a record at the next sequence of `thread` and returns it as stored, binding the thread
    /// to `destination` when this is its first record (see the trait's rules).
    fn append_to(
        &self,
        thread: &ThreadId,
        destination: Option<&ThreadDestination>,
        record: NewRecord,
    ) -> Result<ThreadRecord, ActivityError>;

    /// Appends a record without naming a destination.
    fn append(&self, thread: &ThreadId, record: NewRecord) -> Result<ThreadRecord, ActivityError> {
        self.append_to(thread, None, record)
    }

    /// The sequence of the last record of `thread` ([`Sequence::ZERO`] when it has none).
    fn inspect_tail(&self, thread: &ThreadId) -> Result<Sequence, ActivityError>;

    /// Up to `limit` records of `thread` with a sequence greater than `after`, in order. `limit` must be
    /// between 1 and [`MAX_PAGE_RECORDS`].
    fn read_page(
        &self,
        thread: &ThreadId,
        after: Sequence,
        limit: usize,
    ) -> Result<Vec<ThreadRecord>, ActivityError>;

    /// The thread's binding, if it has one.
    fn binding(&self, thread: &ThreadId) -> Result<Option<ThreadBinding>, ActivityError>;

    /// Binds `thread` (which must have records, else `invalid-input`) to `destination`, replacing any
    /// binding with the next generation (an unbound thread's first binding is generation 1: its
    /// earlier records were remembered elsewhere under generation 0), unparking it and marking it
    /// pending. Binding a thread to the destination it already
    /// has changes nothing. Answers the binding in effect.
    fn rebind(
        &self,
        thread: &ThreadId,
        destination: &ThreadDestination,
    ) -> Result<ThreadBinding, ActivityError>;

    /// Up to `limit` thread ids that have records, in id order, after `after` (exclusive). `limit` must
    /// be between 1 and [`MAX_PAGE_RECORDS`].
    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadId>, ActivityError>;

    /// Up to `limit` unparked pending threads in id order after `after` (exclusive). `limit` must be
    /// between 1 and [`MAX_PAGE_RECORDS`].
    fn pending_threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<PendingThread>, ActivityError>;

    /// Marks every thread with records pending (after a new processor version, which has its own
    /// cursors); answers how many were marked.
    fn mark_all_pending(&self) -> Result<u64, ActivityError>;

    /// Unmarks `thread` if its pending tail is still `tail`; answers whether it did.
    fn settle(&self, thread: &ThreadId, tail: Sequence) -> Result<bool, ActivityError>;

    /// Parks `thread`: a record at `sequence` cannot be remembered for a reason of kind `kind` (an
    /// error kind, at most [`MAX_PARK_KIND_BYTES`]); it stays parked until rebound.
    fn park(&self, thread: &ThreadId, sequence: Sequence, kind: &str) -> Result<(), ActivityError>;

    /// Threads per destination, unbound, pending and parked threads.
    fn overview(&self) -> Result<ThreadOverview, ActivityError>;
}

/// What an append does to the thread's binding: the one rule every store applies inside its append
/// transaction, given the binding and tail it read there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingStep {
    /// Leave the binding as it is.
    Keep,
    /// Bind the thread to the requested destination (generation 0).
    Bind,
}

/// Decides an append's [`BindingStep`], or refuses it with [`ActivityError::DestinationConflict`].
pub fn binding_step(
    current: Option<&ThreadBinding>,
    tail: Sequence,
    requested: Option<&ThreadDestination>,
) -> Result<BindingStep, ActivityError> {
    match (requested, current) {
        (None, _) => Ok(BindingStep::Keep),
        (Some(requested), Some(current)) if current.destination == *requested => {
            Ok(BindingStep::Keep)
        }
        (Some(_), Some(_)) => Err(ActivityError::DestinationConflict),
        // An unbound thread with records was appended before bindings existed: naming a destination
        // now would silently split its memory, so it is refused until the thread is rebound.
        (Some(_), None) if tail > Sequence::ZERO => Err(ActivityError::DestinationConflict),
        (Some(_), None) => Ok(BindingStep::Bind),
    }
}

/// A thread's binding as [`rebinding`] reads it: the destination when it still validates (`None`
/// for a stored destination damaged outside the product, which a rebind repairs), and the generation.
pub type CurrentBinding<'a> = (Option<&'a ThreadDestination>, u64);

/// What [`ThreadLog::rebind`] writes, given the binding and tail read in its transaction: `None` when
/// the thread is already bound to `destination` (nothing changes); refused when it has no records.
pub fn rebinding(
    current: Option<CurrentBinding<'_>>,
    tail: Sequence,
    destination: &ThreadDestination,
) -> Result<Option<ThreadBinding>, ActivityError> {
    if tail == Sequence::ZERO {
        return Err(ActivityError::invalid(
            "thread",
            "has no records; its first append binds it",
        ));
    }
    let generation = match current {
        Some((Some(current), _)) if current == destination => return Ok(None),
        Some((_, generation)) => generation.checked_add(1).ok_or(ActivityError::TooLarge {
            limit: "binding generation",
            max: u64::MAX,
            actual: u64::MAX,
        })?,
        // A thread from before bindings: its records were remembered elsewhere under generation 0's
        // progress, so its first binding is generation 1 and they are remembered again.
        None => 1,
    };
    Ok(Some(ThreadBinding {
        destination: destination.clone(),
        generation,
    }))
}

/// Builds [`ThreadOverview::destinations`] from stored (destination JSON, thread count) rows: each
/// destination is read back through [`ThreadDestination::from_stored`]; most threads first, then by
/// the stored text, at most [`MAX_OVERVIEW_DESTINATIONS`]. A row that no longer validates is not
/// listed but counted, in the second answer, so one damaged binding cannot hide the rest.
pub fn overview_destinations(
    rows: impl IntoIterator<Item = (String, u64)>,
) -> (Vec<DestinationCount>, u64) {
    let mut readable = Vec::new();
    let mut unreadable = 0u64;
    for (stored, threads) in rows {
        match ThreadDestination::from_stored(&stored) {
            Ok(destination) => readable.push((stored, destination, threads)),
            Err(_) => unreadable = unreadable.saturating_add(threads),
        }
    }
    readable.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    readable.truncate(MAX_OVERVIEW_DESTINATIONS);
    let destinations = readable
        .into_iter()
        .map(|(_, destination, threads)| DestinationCount {
            destination,
            threads,
        })
        .collect();
    (destinations, unreadable)
}

/// Checks a page limit of [`ThreadLog::threads`] and [`ThreadLog::pending_threads`].
pub fn check_thread_page(limit: usize) -> Result<(), ActivityError> {
    if limit == 0 || limit > MAX_PAGE_RECORDS {
        return Err(ActivityError::invalid(
            "thread page limit",
            format!("must be between 1 and {MAX_PAGE_RECORDS}"),
        ));
    }
    Ok(())
}

/// Checks a parking kind of [`ThreadLog::park`].
pub fn check_park_kind(kind: &str) -> Result<(), ActivityError> {
    if kind.is_empty() || kind.len() > MAX_PARK_KIND_BYTES || kind.chars().any(char::is_control) {
        return Err(ActivityError::invalid(
            "park kind",
            format!("must be 1 to {MAX_PARK_KIND_BYTES} bytes without control characters"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_ignores_the_opaque_cursor_only() {
        let thread = ThreadId::new("t").expect("valid");
        let mut record = NewRecord::user("ana", "I live in Lisbon", 5);
        let plain = RecordDigest::of(&thread, Sequence::new(1), &record);
        record.opaque_cursor = Some("resp_123".to_owned());
        assert_eq!(plain, RecordDigest::of(&thread, Sequence::new(1), &record));
        record.speaker = "bea".to_owned();
        assert_ne!(plain, RecordDigest::of(&thread, Sequence::new(1), &record));
        let record = NewRecord::user("ana", "I live in Lisbon", 5);
        assert_ne!(plain, RecordDigest::of(&thread, Sequence::new(2), &record));
    }
}
