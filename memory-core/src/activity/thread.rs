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
    /// A window boundary (see [`super::RolloverRecord`]): the context assembles a fresh window from
    /// here; the records before it stay in the log.
    Rollover(super::RolloverRecord),
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
    ///
    /// A blank speaker, or a blank text of a user input, assistant message or system message, is
    /// refused as invalid input: such a record says nothing, and the same blank text is refused by
    /// every memory write ([`crate::write`]). Every door appends through here.
    pub fn validate(&self) -> Result<(), ActivityError> {
        if self.speaker.trim().is_empty() {
            return Err(ActivityError::invalid("speaker", "must not be blank"));
        }
        if let RecordBody::UserInput { text }
        | RecordBody::AssistantMessage { text }
        | RecordBody::SystemMessage { text } = &self.body
            && text.trim().is_empty()
        {
            return Err(ActivityError::invalid("text", "must not be blank"));
        }
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
        match &self.body {
            RecordBody::Compaction(compaction) => compaction.validate()?,
            RecordBody::Rollover(rollover) => rollover.validate()?,
            _ => {}
        }
        super::canonical_progress_json("record canonical JSON", &self.body)?;
        Ok(())
    }
}

/// Default most bytes of a tool result's output an append keeps ([`ToolOutputBound`]).
pub const DEFAULT_MAX_TOOL_OUTPUT_BYTES: usize = 51_200;
/// Smallest [`ToolOutputBound`]: below it the head and tail would say too little to be worth keeping.
pub const MIN_MAX_TOOL_OUTPUT_BYTES: usize = 1_024;

/// How many bytes of a tool result's output an append keeps: a larger output is stored as an
/// envelope of its head and tail ([`bound_tool_output`]). At least [`MIN_MAX_TOOL_OUTPUT_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ToolOutputBound(usize);

impl ToolOutputBound {
    /// A bound of `max_bytes`; refused as invalid input below [`MIN_MAX_TOOL_OUTPUT_BYTES`].
    pub fn new(max_bytes: usize) -> Result<Self, ActivityError> {
        if max_bytes < MIN_MAX_TOOL_OUTPUT_BYTES {
            return Err(ActivityError::invalid(
                "max tool output bytes",
                format!("must be at least {MIN_MAX_TOOL_OUTPUT_BYTES}, not {max_bytes}"),
            ));
        }
        Ok(Self(max_bytes))
    }

    /// The most bytes kept.
    pub fn get(self) -> usize {
        self.0
    }
}

impl Default for ToolOutputBound {
    /// [`DEFAULT_MAX_TOOL_OUTPUT_BYTES`].
    fn default() -> Self {
        Self(DEFAULT_MAX_TOOL_OUTPUT_BYTES)
    }
}

/// Bounds a [`RecordBody::ToolResult`]'s output; every other record is returned unchanged.
///
/// The output's text is the string itself when the output is a JSON string, else its compact JSON.
/// When the text is longer than `bound` bytes, the output becomes the envelope
/// `{"truncated": true, "original_bytes": N, "omitted_bytes": M, "head": H, "tail": T}`: `H` is the
/// longest prefix and `T` the longest suffix of at most half the bound each, both cut at character
/// boundaries, and `M = N - len(H) - len(T)`.
pub fn bound_tool_output(mut record: NewRecord, bound: ToolOutputBound) -> NewRecord {
    if let RecordBody::ToolResult { output, .. } = &mut record.body {
        let serialized;
        let text = match &*output {
            Value::String(text) => text.as_str(),
            other => {
                serialized = other.to_string();
                serialized.as_str()
            }
        };
        if text.len() > bound.get() {
            let half = bound.get() / 2;
            let mut head_end = half;
            while !text.is_char_boundary(head_end) {
                head_end -= 1;
            }
            let mut tail_start = text.len() - half;
            while !text.is_char_boundary(tail_start) {
                tail_start += 1;
            }
            let (head, tail) = (&text[..head_end], &text[tail_start..]);
            *output = serde_json::json!({
                "truncated": true,
                "original_bytes": text.len(),
                "omitted_bytes": text.len() - head.len() - tail.len(),
                "head": head,
                "tail": tail,
            });
        }
    }
    record
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

/// Why a stored record could not be read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UndecodableReason {
    /// Its stored JSON does not parse as a record of this build (damaged, or a kind this build does
    /// not know).
    Parse,
    /// Its stored digest is malformed or does not match its content.
    Digest,
}

/// A stored record that no longer decodes: where it is and why, in place of its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndecodableRecord {
    /// Its position in the thread.
    pub sequence: Sequence,
    /// Why it does not decode.
    pub reason: UndecodableReason,
    /// What went wrong, for diagnostics (a parser's message may quote part of the stored text).
    pub detail: String,
}

impl UndecodableRecord {
    /// The store fault a reader that needs every record reports for it.
    pub fn to_fault(&self) -> StoreFault {
        StoreFault::Corrupt {
            what: self.detail.clone(),
        }
    }
}

/// One position of a thread's log as [`ThreadLog::read_entries`] reads it.
// Nearly every entry is a record: boxing it would allocate once per record read to shrink the rare
// undecodable one.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogEntry {
    /// A record that decodes and matches its digest.
    Record(ThreadRecord),
    /// A record that does not.
    Undecodable(UndecodableRecord),
}

impl LogEntry {
    /// The entry's position in its thread.
    pub fn sequence(&self) -> Sequence {
        match self {
            Self::Record(record) => record.sequence,
            Self::Undecodable(undecodable) => undecodable.sequence,
        }
    }

    /// The record, or [`StoreFault::Corrupt`] for an undecodable one (what [`ThreadLog::read_page`]
    /// answers).
    pub fn into_record(self) -> Result<ThreadRecord, ActivityError> {
        match self {
            Self::Record(record) => Ok(record),
            Self::Undecodable(undecodable) => Err(ActivityError::Store(undecodable.to_fault())),
        }
    }
}

/// Reads back a stored record of `thread` at `sequence` from its stored JSON (the serde form of
/// [`NewRecord`]) and stored digest: the one decoding rule of every store. A record whose JSON does
/// not parse is [`UndecodableReason::Parse`]; one whose digest is not 64 lower-case hex digits or does
/// not match its content ([`RecordDigest::of`]) is [`UndecodableReason::Digest`].
pub fn decode_stored_record(
    thread: &ThreadId,
    sequence: Sequence,
    record_json: &str,
    digest: &str,
) -> LogEntry {
    let undecodable = |reason, detail: String| {
        LogEntry::Undecodable(UndecodableRecord {
            sequence,
            reason,
            detail,
        })
    };
    let record: NewRecord = match serde_json::from_str(record_json) {
        Ok(record) => record,
        Err(error) => {
            return undecodable(
                UndecodableReason::Parse,
                format!("thread record {sequence} does not parse: {error}"),
            );
        }
    };
    let Ok(digest) = RecordDigest::from_hex(digest) else {
        return undecodable(
            UndecodableReason::Digest,
            format!("thread record {sequence}: digest is not 64 lower-case hex digits"),
        );
    };
    if RecordDigest::of(thread, sequence, &record) != digest {
        return undecodable(
            UndecodableReason::Digest,
            format!("thread record {sequence} does not match its digest"),
        );
    }
    LogEntry::Record(ThreadRecord {
        thread: thread.clone(),
        sequence,
        record,
        digest,
    })
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

    /// Up to `limit` entries of `thread` with a sequence greater than `after`, in order: each stored
    /// record, or, for one that no longer decodes (see [`decode_stored_record`]), an
    /// [`LogEntry::Undecodable`] in its place, so one damaged record never makes the thread
    /// unreadable. `limit` must be between 1 and [`MAX_PAGE_RECORDS`] ([`check_record_page`]).
    fn read_entries(
        &self,
        thread: &ThreadId,
        after: Sequence,
        limit: usize,
    ) -> Result<Vec<LogEntry>, ActivityError>;

    /// Up to `limit` records of `thread` with a sequence greater than `after`, in order. `limit` must be
    /// between 1 and [`MAX_PAGE_RECORDS`]. A record that no longer decodes fails the whole page with
    /// [`StoreFault::Corrupt`] (see [`LogEntry::into_record`]); [`ThreadLog::read_entries`] reads past it.
    fn read_page(
        &self,
        thread: &ThreadId,
        after: Sequence,
        limit: usize,
    ) -> Result<Vec<ThreadRecord>, ActivityError> {
        self.read_entries(thread, after, limit)?
            .into_iter()
            .map(LogEntry::into_record)
            .collect()
    }

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

    /// [`ThreadLog::threads`] with each thread's binding ([`ThreadLog::binding`]): what a listing
    /// that filters threads by their binding reads. A backend answers a page in one read (the
    /// default asks for each binding in turn, one round trip a thread on a server's store).
    fn threads_with_bindings(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<(ThreadId, Option<ThreadBinding>)>, ActivityError> {
        self.threads(after, limit)?
            .into_iter()
            .map(|thread| {
                let binding = self.binding(&thread)?;
                Ok((thread, binding))
            })
            .collect()
    }

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

    /// The checkpoint of the fold named `fold` at `version` for `thread`, if one is stored. A log
    /// that keeps no checkpoints answers `None` (the provided default): a cold read then folds the
    /// thread from its first record.
    fn load_checkpoint(
        &self,
        thread: &ThreadId,
        fold: &str,
        version: u32,
    ) -> Result<Option<FoldCheckpoint>, ActivityError> {
        let _ = (thread, fold, version);
        Ok(None)
    }

    /// Stores `checkpoint` as the one of the fold named `fold` at `version` for `thread`, replacing
    /// the one stored unless that one is folded further (`through` greater). A log that keeps no
    /// checkpoints stores nothing (the provided default).
    fn save_checkpoint(
        &self,
        thread: &ThreadId,
        fold: &str,
        version: u32,
        checkpoint: &FoldCheckpoint,
    ) -> Result<(), ActivityError> {
        let _ = (thread, fold, version, checkpoint);
        Ok(())
    }
}

/// Most bytes of a checkpoint's encoded state: a larger state is not stored (its thread folds from
/// its first record, or from an older checkpoint, after a restart).
pub const MAX_CHECKPOINT_BYTES: usize = 16 * 1024 * 1024;
/// Most bytes of a fold's name.
pub const MAX_FOLD_NAME_BYTES: usize = 128;

/// A fold's state as persisted beside the log, so a cold read starts from it instead of record 1.
/// It is a cache of what the log says: a state that no longer decodes, or was folded with other
/// forgotten records, is never used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldCheckpoint {
    /// The newest record the state was folded through.
    pub through: Sequence,
    /// The fingerprint of the thread's forgotten records the state was folded with
    /// ([`super::forgotten::ForgottenRecords::fingerprint`]).
    pub forgotten: String,
    /// The encoded state (the fold's own encoding), at most [`MAX_CHECKPOINT_BYTES`].
    pub state: String,
}

impl FoldCheckpoint {
    /// Checks the fold's name and the state's size before anything is stored.
    pub fn check(&self, fold: &str) -> Result<(), ActivityError> {
        if fold.is_empty() || fold.len() > MAX_FOLD_NAME_BYTES {
            return Err(ActivityError::invalid(
                "fold",
                format!("a fold's name is 1 to {MAX_FOLD_NAME_BYTES} bytes"),
            ));
        }
        if self.state.len() > MAX_CHECKPOINT_BYTES {
            return Err(ActivityError::TooLarge {
                limit: "checkpoint bytes",
                max: MAX_CHECKPOINT_BYTES as u64,
                actual: self.state.len() as u64,
            });
        }
        Ok(())
    }
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

/// Checks a page limit of [`ThreadLog::read_entries`] and [`ThreadLog::read_page`].
pub fn check_record_page(limit: usize) -> Result<(), ActivityError> {
    if limit == 0 || limit > MAX_PAGE_RECORDS {
        return Err(ActivityError::invalid(
            "page limit",
            format!("must be between 1 and {MAX_PAGE_RECORDS}"),
        ));
    }
    Ok(())
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

    fn undecodable_reason(entry: &LogEntry) -> Option<UndecodableReason> {
        match entry {
            LogEntry::Record(_) => None,
            LogEntry::Undecodable(undecodable) => Some(undecodable.reason),
        }
    }

    #[test]
    fn a_stored_record_decodes_only_with_its_own_digest() {
        let thread = ThreadId::new("t").expect("valid");
        let sequence = Sequence::new(3);
        let record = NewRecord::user("ana", "I live in Lisbon", 5);
        let json = serde_json::to_string(&record).expect("serializes");
        let digest = RecordDigest::of(&thread, sequence, &record);
        match decode_stored_record(&thread, sequence, &json, digest.as_str()) {
            LogEntry::Record(stored) => {
                assert_eq!(stored.record, record);
                assert_eq!(stored.sequence, sequence);
                assert_eq!(stored.digest, digest);
            }
            LogEntry::Undecodable(undecodable) => panic!("decodes: {undecodable:?}"),
        }
        let unknown_kind = json.replace("user_input", "telepathy");
        let other = RecordDigest::of(&thread, Sequence::new(4), &record);
        let cases = [
            ("{not json", digest.as_str(), UndecodableReason::Parse),
            (
                unknown_kind.as_str(),
                digest.as_str(),
                UndecodableReason::Parse,
            ),
            (json.as_str(), other.as_str(), UndecodableReason::Digest),
            (json.as_str(), "ABC", UndecodableReason::Digest),
            (
                json.as_str(),
                &digest.as_str().to_uppercase(),
                UndecodableReason::Digest,
            ),
        ];
        for (stored, stored_digest, reason) in cases {
            let entry = decode_stored_record(&thread, sequence, stored, stored_digest);
            assert_eq!(
                undecodable_reason(&entry),
                Some(reason),
                "{stored} {stored_digest}"
            );
            assert_eq!(entry.sequence(), sequence);
            assert!(matches!(
                entry.into_record(),
                Err(ActivityError::Store(StoreFault::Corrupt { .. }))
            ));
        }
    }

    #[test]
    fn undecodable_entries_serialize_their_reason_in_snake_case() {
        let entry = LogEntry::Undecodable(UndecodableRecord {
            sequence: Sequence::new(2),
            reason: UndecodableReason::Digest,
            detail: "d".to_owned(),
        });
        assert_eq!(
            serde_json::to_value(&entry).expect("serializes"),
            serde_json::json!({"undecodable": {"sequence": 2, "reason": "digest", "detail": "d"}})
        );
    }

    fn tool_result(output: Value) -> NewRecord {
        NewRecord {
            occurred_at: Some(1),
            speaker: "search".to_owned(),
            observers: Vec::new(),
            body: RecordBody::ToolResult {
                call_id: "c1".to_owned(),
                output,
                is_error: false,
            },
            opaque_cursor: None,
        }
    }

    fn output_of(record: &NewRecord) -> &Value {
        match &record.body {
            RecordBody::ToolResult { output, .. } => output,
            other => panic!("not a tool result: {other:?}"),
        }
    }

    #[test]
    fn a_bound_below_the_floor_is_invalid_input() {
        assert!(matches!(
            ToolOutputBound::new(MIN_MAX_TOOL_OUTPUT_BYTES - 1),
            Err(ActivityError::InvalidInput { .. })
        ));
        assert_eq!(
            ToolOutputBound::new(MIN_MAX_TOOL_OUTPUT_BYTES)
                .map(ToolOutputBound::get)
                .ok(),
            Some(MIN_MAX_TOOL_OUTPUT_BYTES)
        );
        assert_eq!(
            ToolOutputBound::default().get(),
            DEFAULT_MAX_TOOL_OUTPUT_BYTES
        );
    }

    #[test]
    fn a_large_structured_output_is_measured_as_compact_json() {
        let bound = ToolOutputBound::new(1_024).expect("valid");
        let output = serde_json::json!({"rows": vec!["é"; 1_000]});
        let text = output.to_string();
        let bounded = bound_tool_output(tool_result(output), bound);
        let envelope = output_of(&bounded);
        assert_eq!(envelope["truncated"], true);
        assert_eq!(envelope["original_bytes"], text.len());
        let head = envelope["head"].as_str().expect("head");
        let tail = envelope["tail"].as_str().expect("tail");
        assert!(text.starts_with(head) && text.ends_with(tail));
        assert!(head.len() <= 512 && head.len() >= 510, "{}", head.len());
        let other = NewRecord::user("ana", "x".repeat(10_000), 1);
        assert_eq!(bound_tool_output(other.clone(), bound), other);
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        #[test]
        fn bounded_outputs_keep_a_prefix_and_a_suffix_within_the_bound(
            text in proptest::collection::vec(
                proptest::prop_oneof![proptest::char::range('a', 'z'), proptest::char::any()],
                0..600,
            )
            .prop_map(String::from_iter),
            repeat in 1usize..8,
            extra in 0usize..3_000,
            as_string in proptest::bool::ANY,
        ) {
            let max = MIN_MAX_TOOL_OUTPUT_BYTES + extra;
            let bound = ToolOutputBound::new(max).expect("valid");
            let text = text.repeat(repeat);
            let output = if as_string {
                Value::String(text.clone())
            } else {
                serde_json::json!([text.clone(), 1])
            };
            let measured = match &output {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            let record = tool_result(output.clone());
            let bounded = bound_tool_output(record.clone(), bound);
            if measured.len() <= max {
                proptest::prop_assert_eq!(bounded, record);
            } else {
                let envelope = output_of(&bounded);
                let head = envelope["head"].as_str().expect("head");
                let tail = envelope["tail"].as_str().expect("tail");
                proptest::prop_assert_eq!(&envelope["truncated"], &Value::Bool(true));
                proptest::prop_assert!(head.len() + tail.len() <= max);
                proptest::prop_assert!(head.len() <= max / 2 && tail.len() <= max / 2);
                // The longest cut: at most three bytes short of half, one character's remainder.
                proptest::prop_assert!(head.len() + 3 >= max / 2 && tail.len() + 3 >= max / 2);
                proptest::prop_assert!(measured.starts_with(head));
                proptest::prop_assert!(measured.ends_with(tail));
                proptest::prop_assert_eq!(envelope["original_bytes"].as_u64(), Some(measured.len() as u64));
                proptest::prop_assert_eq!(
                    envelope["omitted_bytes"].as_u64(),
                    Some((measured.len() - head.len() - tail.len()) as u64)
                );
            }
        }
    }
}
