//! The segmented fold of a thread's conversation: what the binaries assemble model input from.
//!
//! Each record kind changes the state so:
//! - `user_input` opens a prompt segment, `system_message` a system segment, `assistant_message` an
//!   answer segment;
//! - `tool_call` joins the newest segment when that is a step still collecting calls (no result yet) or
//!   an answer (the text the model wrote before calling: the answer becomes a step), and otherwise opens
//!   a step of its own;
//! - `tool_result` attaches to the newest step that made the call; one with no such step (reason
//!   `missing_step`) or answering a call already answered (`duplicate_result`) is skipped and counted;
//! - `run_completed` changes nothing here (a run-scoped reader starts again after it);
//! - `compaction` with outcome `folded` removes the segments it folded and puts its summary in place
//!   of the earlier one; a compaction naming records at or after itself is skipped
//!   (`invalid_compaction`). The folded records stay in the log.
//! - `rollover` opens a new window (see [`crate::window`]): the segments before it leave the window
//!   but for the system instructions, the current turn's prompt, the trailing user messages and the
//!   steps still waiting for a result; the summary goes too (the handoff or excerpts stand in for
//!   everything covered). A rollover covering records at or after itself is skipped
//!   (`invalid_rollover`).
//!
//! Forgotten records come as their placeholders (see [`crate::fold`]) and fold like any record, so a
//! forgotten call still pairs with its result. A folded compaction is **withdrawn** (not applied: the
//! segments it would fold stay, and the summary in place stays) when its summary may carry a forgotten
//! record's text: it is itself forgotten, it folded a record forgotten after it was planned (one not in
//! its `forgotten` list), or the summary it replaced (`replaces`; on older records, the newest folded
//! compaction before it) was withdrawn. The view says so (`summary_withdrawn`) until a compaction
//! applies again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use memory_core::EpochMillis;
use memory_core::activity::{
    CompactionOutcome, CompactionRecord, RecordBody, Sequence, SequenceRange, ThreadRecord,
};

use serde::{Deserialize, Serialize};

use crate::fold::{Fold, SkipReason};
use crate::segment::{Message, Role, Segment, SegmentData, SegmentKind, StepCall, StepResult};
use crate::window::Window;

/// The summary standing in for folded records, and the frame it is shown in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// The summary, verbatim as the caller supplied it.
    pub text: String,
    /// Who wrote it.
    pub summarizer: Option<String>,
    /// The compaction record that carries it.
    pub compaction: Sequence,
    /// Every record range folded behind it, by this compaction and the ones before (whose summaries it
    /// replaces), oldest first.
    pub folded: Vec<SequenceRange>,
}

impl Summary {
    /// Records folded behind the summary.
    pub fn folded_records(&self) -> u64 {
        self.folded
            .iter()
            .map(|range| range.last.get() - range.first.get() + 1)
            .sum()
    }

    /// Whether `sequence` is folded behind the summary.
    pub fn covers(&self, sequence: Sequence) -> bool {
        self.folded.iter().any(|range| range.contains(sequence))
    }

    /// The system message a view shows: a frame written by this library, then the summary as data. The
    /// frame comes first, so whatever the summary says, the model reads what it is before reading it.
    pub fn message(&self) -> Message {
        let (first, last) = (
            self.folded
                .first()
                .map_or(Sequence::ZERO, |range| range.first),
            self.folded
                .last()
                .map_or(Sequence::ZERO, |range| range.last),
        );
        let writer = self
            .summarizer
            .as_deref()
            .map_or_else(|| "the host".to_owned(), |name| format!("'{name}'"));
        Message::text(
            Role::System,
            format!(
                "[compacted history: {} earlier records of this thread (records {first} to {last}) \
                 were folded out of this window by the compaction at record {}. The text after this \
                 line is a summary written by {writer}; it is a claim about the conversation, not the \
                 conversation. The folded records are kept verbatim in the thread's log: \
                 memory_history_read and memory_history_search return them.]\n{}",
                self.folded_records(),
                self.compaction,
                self.text
            ),
        )
    }
}

/// A conversation's segments and the summary of what came before them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConversationState {
    /// The summary of the folded records, if a compaction folded any.
    pub summary: Option<Arc<Summary>>,
    /// The segments, in log order (system segments included).
    pub segments: Vec<Arc<Segment>>,
    /// The records folded as placeholders, with when each was forgotten.
    pub forgotten: BTreeMap<Sequence, EpochMillis>,
    /// The compactions withdrawn since a compaction last applied (what a view reports as
    /// `summary_withdrawn`).
    pub withdrawn: Vec<Sequence>,
    /// Every compaction withdrawn.
    pub withdrawn_all: BTreeSet<Sequence>,
    /// The newest folded compaction, applied or withdrawn: what an older compaction record, which does
    /// not name the summary it replaced, replaced.
    pub newest_folded_compaction: Option<Sequence>,
    /// The window the segments belong to: `None` in the thread's first window, else the rollover that
    /// opened the current one.
    pub window: Option<Arc<Window>>,
    /// Every rollover boundary of the thread, in log order (what says which window a record is in).
    pub boundaries: Vec<Sequence>,
}

impl ConversationState {
    /// The index of the current turn's first segment: the newest prompt (0 when there is none, so
    /// every segment counts as the current turn).
    pub fn current_turn_start(&self) -> usize {
        self.segments
            .iter()
            .rposition(|segment| segment.kind() == SegmentKind::Prompt)
            .unwrap_or(0)
    }

    /// The number of the current window (1 until the first rollover).
    pub fn window_number(&self) -> u64 {
        self.window
            .as_ref()
            .map_or(1, |window| window.record.window)
    }

    /// The current turn's prompt segment.
    pub fn current_prompt(&self) -> Option<&Arc<Segment>> {
        self.segments
            .iter()
            .rev()
            .find(|segment| segment.kind() == SegmentKind::Prompt)
    }
}

/// The segmented conversation fold (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct Conversation;

const MISSING_STEP: SkipReason = "missing_step";
const DUPLICATE_RESULT: SkipReason = "duplicate_result";
const INVALID_COMPACTION: SkipReason = "invalid_compaction";

fn open(state: &mut ConversationState, prefix: &str, sequence: Sequence, data: SegmentData) {
    let kind = match &data {
        SegmentData::System { .. } => SegmentKind::System,
        SegmentData::Prompt { .. } => SegmentKind::Prompt,
        SegmentData::Step { .. } => SegmentKind::Step,
        SegmentData::Answer { .. } => SegmentKind::Answer,
    };
    state.segments.push(Arc::new(Segment::new(
        format!("{prefix}:{sequence}"),
        kind,
        vec![sequence],
        data,
    )));
}

/// A segment as a checkpoint stores it.
#[derive(Serialize, Deserialize)]
struct StoredSegment {
    id: String,
    kind: SegmentKind,
    records: Vec<Sequence>,
    data: SegmentData,
}

/// The state as a checkpoint stores it (version [`CONVERSATION_VERSION`]).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredState {
    summary: Option<Summary>,
    segments: Vec<StoredSegment>,
    forgotten: Vec<(Sequence, EpochMillis)>,
    withdrawn: Vec<Sequence>,
    withdrawn_all: Vec<Sequence>,
    newest_folded_compaction: Option<Sequence>,
    window: Option<Window>,
    boundaries: Vec<Sequence>,
}

/// The conversation fold's name, what its checkpoints are stored by.
pub const CONVERSATION_FOLD: &str = "conversation";
/// The version of [`ConversationState`]'s shape: bump it whenever the state or its stored form
/// changes, so no checkpoint of the old shape is ever read.
pub const CONVERSATION_VERSION: u32 = 1;

impl Fold for Conversation {
    type State = ConversationState;

    fn initial(&self) -> ConversationState {
        ConversationState::default()
    }

    fn name(&self) -> &'static str {
        CONVERSATION_FOLD
    }

    fn version(&self) -> u32 {
        CONVERSATION_VERSION
    }

    fn checkpoints(&self) -> bool {
        true
    }

    fn encode(&self, state: &ConversationState) -> Option<String> {
        let stored = StoredState {
            summary: state.summary.as_deref().cloned(),
            segments: state
                .segments
                .iter()
                .map(|segment| StoredSegment {
                    id: segment.id().to_owned(),
                    kind: segment.kind(),
                    records: segment.records().to_vec(),
                    data: segment.data().clone(),
                })
                .collect(),
            forgotten: state.forgotten.iter().map(|(k, v)| (*k, *v)).collect(),
            withdrawn: state.withdrawn.clone(),
            withdrawn_all: state.withdrawn_all.iter().copied().collect(),
            newest_folded_compaction: state.newest_folded_compaction,
            window: state.window.as_deref().cloned(),
            boundaries: state.boundaries.clone(),
        };
        serde_json::to_string(&stored).ok()
    }

    fn decode(&self, encoded: &str) -> Option<ConversationState> {
        let stored: StoredState = serde_json::from_str(encoded).ok()?;
        Some(ConversationState {
            summary: stored.summary.map(Arc::new),
            segments: stored
                .segments
                .into_iter()
                .map(|segment| {
                    Arc::new(Segment::new(
                        segment.id,
                        segment.kind,
                        segment.records,
                        segment.data,
                    ))
                })
                .collect(),
            forgotten: stored.forgotten.into_iter().collect(),
            withdrawn: stored.withdrawn,
            withdrawn_all: stored.withdrawn_all.into_iter().collect(),
            newest_folded_compaction: stored.newest_folded_compaction,
            window: stored.window.map(Arc::new),
            boundaries: stored.boundaries,
        })
    }

    fn apply(
        &self,
        state: &mut ConversationState,
        record: &ThreadRecord,
        forgotten_at: Option<EpochMillis>,
    ) -> Result<(), SkipReason> {
        let sequence = record.sequence;
        if let Some(at) = forgotten_at
            && !matches!(record.record.body, RecordBody::Compaction(_))
        {
            state.forgotten.insert(sequence, at);
        }
        match &record.record.body {
            RecordBody::UserInput { text } => open(
                state,
                "prompt",
                sequence,
                SegmentData::Prompt {
                    speaker: record.record.speaker.clone(),
                    text: text.clone(),
                },
            ),
            RecordBody::SystemMessage { text } => open(
                state,
                "system",
                sequence,
                SegmentData::System { text: text.clone() },
            ),
            RecordBody::AssistantMessage { text } => open(
                state,
                "answer",
                sequence,
                SegmentData::Answer { text: text.clone() },
            ),
            RecordBody::ToolCall {
                call_id,
                name,
                arguments,
            } => {
                let call = StepCall {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    arguments: arguments.clone(),
                    sequence,
                };
                call_into(state, call);
            }
            RecordBody::ToolResult {
                call_id,
                output,
                is_error,
            } => {
                let result = StepResult {
                    call_id: call_id.clone(),
                    output: crate::segment::output_text(output),
                    is_error: *is_error,
                    sequence,
                    elided_chars: 0,
                };
                attach_result(state, result)?;
            }
            RecordBody::RunCompleted { .. } => {}
            RecordBody::Compaction(compaction) => {
                apply_compaction(state, sequence, compaction, forgotten_at.is_some())?;
            }
            RecordBody::Rollover(rollover) => {
                crate::window::apply_rollover(state, sequence, rollover, forgotten_at)?;
            }
        }
        Ok(())
    }
}

fn call_into(state: &mut ConversationState, call: StepCall) {
    let sequence = call.sequence;
    if let Some(newest) = state.segments.last() {
        let joined = match newest.data() {
            SegmentData::Step {
                text,
                calls,
                results,
            } if results.is_empty() => Some((text.clone(), calls.clone())),
            SegmentData::Answer { text } => Some((text.clone(), Vec::new())),
            _ => None,
        };
        if let Some((text, mut calls)) = joined {
            let id = format!("step:{}", newest.first());
            let mut records = newest.records().to_vec();
            records.push(sequence);
            calls.push(call);
            let step = Segment::new(
                id,
                SegmentKind::Step,
                records,
                SegmentData::Step {
                    text,
                    calls,
                    results: Vec::new(),
                },
            );
            if let Some(last) = state.segments.last_mut() {
                *last = Arc::new(step);
            }
            return;
        }
    }
    open(
        state,
        "step",
        sequence,
        SegmentData::Step {
            text: String::new(),
            calls: vec![call],
            results: Vec::new(),
        },
    );
}

fn attach_result(state: &mut ConversationState, result: StepResult) -> Result<(), SkipReason> {
    let Some(index) = state.segments.iter().rposition(|segment| {
        matches!(segment.data(), SegmentData::Step { calls, .. }
            if calls.iter().any(|call| call.call_id == result.call_id))
    }) else {
        return Err(MISSING_STEP);
    };
    let segment = &state.segments[index];
    let SegmentData::Step {
        text,
        calls,
        results,
    } = segment.data()
    else {
        return Err(MISSING_STEP);
    };
    if results.iter().any(|known| known.call_id == result.call_id) {
        return Err(DUPLICATE_RESULT);
    }
    let mut records = segment.records().to_vec();
    records.push(result.sequence);
    let mut results = results.clone();
    results.push(result);
    state.segments[index] = Arc::new(Segment::new(
        segment.id().to_owned(),
        SegmentKind::Step,
        records,
        SegmentData::Step {
            text: text.clone(),
            calls: calls.clone(),
            results,
        },
    ));
    Ok(())
}

fn apply_compaction(
    state: &mut ConversationState,
    sequence: Sequence,
    compaction: &CompactionRecord,
    forgotten: bool,
) -> Result<(), SkipReason> {
    if compaction
        .folded
        .iter()
        .chain(compaction.refusals.iter().map(|refusal| &refusal.range))
        .any(|range| range.last >= sequence)
    {
        return Err(INVALID_COMPACTION);
    }
    if compaction.outcome != CompactionOutcome::Folded {
        return Ok(());
    }
    let Some(text) = &compaction.summary else {
        return Err(INVALID_COMPACTION);
    };
    if compaction
        .replaces
        .is_some_and(|replaced| replaced >= sequence)
    {
        return Err(INVALID_COMPACTION);
    }
    let replaced = match compaction.replaces {
        Some(Sequence::ZERO) => None,
        Some(replaced) => Some(replaced),
        None => state.newest_folded_compaction,
    };
    state.newest_folded_compaction = Some(sequence);
    let folded_since_planned = state.forgotten.keys().any(|record| {
        compaction
            .folded
            .iter()
            .any(|range| range.contains(*record))
            && compaction.forgotten.binary_search(record).is_err()
    });
    if forgotten
        || folded_since_planned
        || replaced.is_some_and(|replaced| state.withdrawn_all.contains(&replaced))
    {
        state.withdrawn_all.insert(sequence);
        state.withdrawn.push(sequence);
        return Ok(());
    }
    state.withdrawn.clear();
    state.segments.retain(|segment| {
        !compaction
            .folded
            .iter()
            .any(|range| range.contains(segment.first()))
    });
    let mut folded: Vec<SequenceRange> = state
        .summary
        .as_ref()
        .map(|summary| summary.folded.clone())
        .unwrap_or_default();
    folded.extend(compaction.folded.iter().copied());
    folded.sort_by_key(|range| range.first);
    // Two compactions planned from one state fold the same records: count them once.
    folded.dedup_by(|later, earlier| {
        let overlaps = later.first <= earlier.last.saturating_next();
        if overlaps {
            earlier.last = earlier.last.max(later.last);
        }
        overlaps
    });
    state.summary = Some(Arc::new(Summary {
        text: text.clone(),
        summarizer: compaction.summarizer.clone(),
        compaction: sequence,
        folded,
    }));
    Ok(())
}
