//! Windows: a rollover starts the model's window again, at a boundary record in the log.
//!
//! Compaction shrinks a window by summarizing its oldest turns; a rollover ends it. The boundary is a
//! `rollover` record (memory-core's `activity::rollover`) that names the records it covers and carries
//! the model's handoff or, without one, small excerpts copied from the covered records. From the
//! boundary on, a view shows:
//!
//! - the system instructions (never covered);
//! - the window marker: which window this is, where it began, where the covered records are, and the
//!   handoff or the excerpts, framed as data;
//! - the current turn's prompt (the run's input) and the trailing user messages, verbatim;
//! - every step whose tool call still waits for its result (a call never loses its result);
//! - whatever was appended after the boundary.
//!
//! The covered records stay in the log; the history tools read them and say which window each belongs
//! to. A rollover that would cover nothing (every segment would be shown again, no summary) is a no-op
//! and appends nothing. Excerpts copy text, so a forget of a record hides its copy (the fold is built
//! again whenever the forgotten records change, and shows a forgotten record's excerpt as forgotten);
//! a forget of the rollover record hides its handoff.
//!
//! `memory_new_context` must be the only tool call of its step: when the thread's newest step already
//! holds a call to it beside other calls, [`check_only_call`] refuses the rollover.

use std::sync::Arc;

use memory_core::EpochMillis;
use memory_core::activity::rollover::{CallExcerpt, Excerpt, excerpt};
use memory_core::activity::{
    RolloverCause, RolloverExcerpts, RolloverRecord, Sequence, SequenceRange,
};
use serde::Serialize;

use crate::ContextError;
use crate::conversation::ConversationState;
use crate::fold::SkipReason;
use crate::segment::{Message, Role, Segment, SegmentData, SegmentKind, output_text};

/// The tool that asks for a rollover; a host may prefix it (`mcp__memory__memory_new_context`).
pub const NEW_CONTEXT_TOOL: &str = "memory_new_context";
/// Covered user messages a rollover without a handoff copies (the newest ones).
pub const EXCERPT_USER_MESSAGES: usize = 4;
/// Calls of the last tool batch a rollover without a handoff copies.
pub const EXCERPT_CALLS: usize = 8;

const INVALID_ROLLOVER: SkipReason = "invalid_rollover";

/// The window a state shows, as the rollover that opened it says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, Serialize)]
pub struct Window {
    /// The rollover record.
    pub boundary: Sequence,
    /// What it says (a forgotten copy's text already hidden).
    pub record: RolloverRecord,
}

/// A window's identity on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct WindowIdentity {
    /// The window's number: 1 for the thread's first, one more after each rollover.
    pub number: u64,
    /// The rollover record that opened it (absent for the first window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boundary: Option<Sequence>,
    /// Who asked for that rollover.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<RolloverCause>,
}

impl WindowIdentity {
    /// The identity of `state`'s window.
    pub fn of(state: &ConversationState) -> Self {
        match &state.window {
            None => Self {
                number: 1,
                boundary: None,
                cause: None,
            },
            Some(window) => Self {
                number: window.record.window,
                boundary: Some(window.boundary),
                cause: Some(window.record.cause),
            },
        }
    }
}

/// The window a record of a thread with these rollover `boundaries` (in log order) belongs to: a
/// boundary record opens its window.
pub fn window_of(boundaries: &[Sequence], sequence: Sequence) -> u64 {
    1 + boundaries.partition_point(|boundary| *boundary <= sequence) as u64
}

fn excerpt_line(excerpt: &Excerpt) -> String {
    let cut = if excerpt.cut_chars > 0 {
        format!("… [{} more characters]", excerpt.cut_chars)
    } else {
        String::new()
    };
    format!("{}{cut}", excerpt.text)
}

impl Window {
    /// The system message a view shows for it: a frame written by this library, then the handoff or
    /// the excerpts as data.
    pub fn message(&self) -> Message {
        let record = &self.record;
        let why = match record.cause {
            RolloverCause::Model => "the model asked for a new context",
            RolloverCause::Automatic => {
                "the run no longer fitted its budget by eliding old tool outputs"
            }
        };
        let mut text = format!(
            "[window {}: this context window began at record {} ({why}). Records {} to {} of this \
             thread are not shown here; they stay in the thread's log (memory_history_read with \
             before: {}, memory_history_search). Shown again: the system instructions, the current \
             request, the user's latest messages and every tool call still waiting for its result.]",
            record.window, self.boundary, record.covered.first, record.covered.last, self.boundary,
        );
        if let Some(handoff) = &record.handoff {
            text.push_str(
                "\nThe text after this line is the handoff written for this window; it is a note \
                 about the conversation, not the conversation.\n",
            );
            text.push_str(handoff);
        } else if let Some(excerpts) = &record.excerpts {
            text.push_str(
                "\nExcerpts copied from the covered records (what was asked and what was called; \
                 they do not say whether any action succeeded):",
            );
            for message in &excerpts.user_messages {
                text.push_str(&format!(
                    "\n- user (record {}): {}",
                    message.sequence,
                    excerpt_line(message)
                ));
            }
            for call in &excerpts.last_tool_batch {
                let result = match (call.result, call.is_error) {
                    (Some(result), true) => {
                        format!(" (the tool reported an error: record {result})")
                    }
                    (Some(result), false) => format!(" (its output is record {result})"),
                    (None, _) => " (no result was recorded)".to_owned(),
                };
                text.push_str(&format!(
                    "\n- tool call (record {}): {}{result}",
                    call.call.sequence,
                    excerpt_line(&call.call)
                ));
            }
        }
        Message::text(Role::System, text)
    }
}

/// Which segments of `state` a rollover shows again: system instructions, the current turn's
/// prompt, the trailing user messages (prompts no assistant segment followed) and every step still
/// waiting for a result.
pub fn kept_at_rollover(state: &ConversationState) -> Vec<bool> {
    let current = state.current_turn_start();
    let trailing_from = state
        .segments
        .iter()
        .rposition(|segment| !matches!(segment.kind(), SegmentKind::Prompt | SegmentKind::System))
        .map_or(0, |index| index + 1);
    state
        .segments
        .iter()
        .enumerate()
        .map(|(index, segment)| match segment.kind() {
            SegmentKind::System => true,
            SegmentKind::Prompt => index == current || index >= trailing_from,
            SegmentKind::Step => segment.has_unresolved_call(),
            SegmentKind::Answer => false,
        })
        .collect()
}

/// Folds a rollover record at `sequence` into `state` (see the module docs).
pub(crate) fn apply_rollover(
    state: &mut ConversationState,
    sequence: Sequence,
    record: &RolloverRecord,
    forgotten_at: Option<EpochMillis>,
) -> Result<(), SkipReason> {
    if record.covered.last >= sequence
        || state
            .boundaries
            .last()
            .is_some_and(|boundary| *boundary >= sequence)
    {
        return Err(INVALID_ROLLOVER);
    }
    let kept = kept_at_rollover(state);
    let mut index = 0;
    state.segments.retain(|_| {
        index += 1;
        kept[index - 1]
    });
    state.summary = None;
    state.withdrawn.clear();
    let mut record = record.clone();
    if forgotten_at.is_none()
        && let Some(excerpts) = &mut record.excerpts
    {
        let hide = |excerpt: &mut Excerpt| {
            if state.forgotten.contains_key(&excerpt.sequence) {
                excerpt.text = "[forgotten]".to_owned();
                excerpt.cut_chars = 0;
            }
        };
        excerpts.user_messages.iter_mut().for_each(hide);
        excerpts
            .last_tool_batch
            .iter_mut()
            .for_each(|call| hide(&mut call.call));
    }
    state.boundaries.push(sequence);
    state.window = Some(Arc::new(Window {
        boundary: sequence,
        record,
    }));
    Ok(())
}

/// The excerpts of the records a rollover of `state` covers: the newest covered user messages and
/// the calls of the newest covered step.
fn excerpts(state: &ConversationState, kept: &[bool]) -> RolloverExcerpts {
    let covered = || {
        state
            .segments
            .iter()
            .zip(kept)
            .filter(|(_, kept)| !**kept)
            .map(|(segment, _)| segment)
    };
    let mut user_messages: Vec<Excerpt> = covered()
        .filter_map(|segment| match segment.data() {
            SegmentData::Prompt { text, .. } => Some(excerpt(segment.first(), text)),
            _ => None,
        })
        .collect();
    user_messages.drain(..user_messages.len().saturating_sub(EXCERPT_USER_MESSAGES));
    let last_tool_batch = covered()
        .rfind(|segment| segment.kind() == SegmentKind::Step)
        .map(step_calls)
        .unwrap_or_default();
    RolloverExcerpts {
        user_messages,
        last_tool_batch,
    }
}

fn step_calls(segment: &Arc<Segment>) -> Vec<CallExcerpt> {
    let SegmentData::Step { calls, results, .. } = segment.data() else {
        return Vec::new();
    };
    calls
        .iter()
        .take(EXCERPT_CALLS)
        .map(|call| {
            let result = results.iter().find(|result| result.call_id == call.call_id);
            CallExcerpt {
                call: excerpt(
                    call.sequence,
                    &format!("{}({})", call.name, output_text(&call.arguments)),
                ),
                result: result.map(|result| result.sequence),
                is_error: result.is_some_and(|result| result.is_error),
            }
        })
        .collect()
}

/// The rollover record for `state`, folded through `through`: `None` when it would cover nothing
/// (every segment would be shown again and no summary stands in the window).
pub fn plan_rollover(
    state: &ConversationState,
    through: Sequence,
    handoff: Option<String>,
    cause: RolloverCause,
) -> Option<RolloverRecord> {
    let first = state
        .boundaries
        .last()
        .map_or(Sequence::new(1), |boundary| boundary.saturating_next());
    if through < first {
        return None;
    }
    let kept = kept_at_rollover(state);
    if state.summary.is_none() && kept.iter().all(|kept| *kept) {
        return None;
    }
    let excerpts = handoff.is_none().then(|| excerpts(state, &kept));
    Some(RolloverRecord {
        window: state.window_number() + 1,
        cause,
        covered: SequenceRange {
            first,
            last: through,
        },
        handoff,
        excerpts,
    })
}

/// Refuses a rollover asked for from a step that holds an unanswered `memory_new_context` call beside
/// other calls:
/// it must be the only call of its step, or the results of the others would land in a window that
/// no longer shows why they were asked for.
pub fn check_only_call(state: &ConversationState) -> Result<(), ContextError> {
    let Some(step) = state.segments.last() else {
        return Ok(());
    };
    let SegmentData::Step { calls, results, .. } = step.data() else {
        return Ok(());
    };
    // Only a call still waiting for its answer is this request: an answered one was an earlier one.
    let asks = calls.iter().any(|call| {
        call.name.ends_with(NEW_CONTEXT_TOOL)
            && !results.iter().any(|result| result.call_id == call.call_id)
    });
    if asks && calls.len() > 1 {
        return Err(ContextError::invalid(
            "memory_new_context",
            format!(
                "must be the only tool call of its step; step {} holds {} calls",
                step.id(),
                calls.len()
            ),
        ));
    }
    Ok(())
}
