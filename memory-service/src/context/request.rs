//! The context calls on the wire: each operation, its arguments and results, and the one decode
//! that checks a call before anything is read ([`ContextRequest::decode`]); what a compaction's answer
//! counts as in the server's metrics.

use memory_context::history::{Anchor, IncludeKind};
use memory_context::{CompactionRequest, ContextError, Message};
use memory_core::activity::{
    CompactionOutcome, CompactionRecord, CompactionRefusal, RolloverRecord, Sequence,
    SequenceRange, ThreadId,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::DEFAULT_KEEP_TOKENS;
use crate::grants::GrantedOperation;
use crate::notes::{ReadNotesArguments, WriteNotesArguments};
use crate::refusal::Refusal;
use crate::service::RawArguments;

/// One of the context operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContextOperation {
    /// `memory_context`.
    Context,
    /// `memory_compact`.
    Compact,
    /// `memory_history_read`.
    HistoryRead,
    /// `memory_history_search`.
    HistorySearch,
    /// `memory_new_context`.
    NewContext,
    /// `memory_context_remaining`.
    Remaining,
    /// `memory_read_notes`.
    ReadNotes,
    /// `memory_write_notes`.
    WriteNotes,
}

impl ContextOperation {
    /// The MCP tool name.
    pub fn tool_name(self) -> &'static str {
        match self {
            Self::Context => "memory_context",
            Self::Compact => "memory_compact",
            Self::HistoryRead => "memory_history_read",
            Self::HistorySearch => "memory_history_search",
            Self::NewContext => "memory_new_context",
            Self::Remaining => "memory_context_remaining",
            Self::ReadNotes => "memory_read_notes",
            Self::WriteNotes => "memory_write_notes",
        }
    }

    pub(super) fn granted(self) -> GrantedOperation {
        match self {
            Self::Compact => GrantedOperation::ThreadCompact,
            Self::NewContext => GrantedOperation::ThreadRollover,
            Self::ReadNotes => GrantedOperation::NotesRead,
            Self::WriteNotes => GrantedOperation::NotesWrite,
            Self::Context | Self::HistoryRead | Self::HistorySearch | Self::Remaining => {
                GrantedOperation::ThreadRead
            }
        }
    }
}

fn yes() -> bool {
    true
}

/// Arguments of `memory_context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextArguments {
    /// The thread.
    pub thread: String,
    /// Tokens the whole context (history and memory) may take.
    pub budget: u64,
    /// What to recall memory for (default: the current prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Whether to recall memory for the turn (default true).
    #[serde(default = "yes")]
    pub memory: bool,
    /// Whether the window rolls over by itself (default true) when eliding old tool outputs is not
    /// enough for the current turn to fit: false drops the turn's oldest settled steps from the view
    /// instead.
    #[serde(default = "yes")]
    pub rollover: bool,
}

/// Arguments of `memory_new_context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewContextArguments {
    /// The thread.
    pub thread: String,
    /// What the next window should know (at most 20,000 characters and 32 KiB as JSON); without it
    /// the window starts with short excerpts of what it covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<String>,
}

/// The answer of `memory_new_context`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct NewContextResult {
    /// The thread.
    pub thread: String,
    /// Whether a new window began (false: there was nothing to cover, and nothing was appended).
    pub rolled_over: bool,
    /// The window shown from now on.
    pub window: u64,
    /// The boundary record's sequence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<Sequence>,
    /// The boundary record appended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollover: Option<RolloverRecord>,
}

/// Arguments of `memory_context_remaining`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemainingArguments {
    /// The thread.
    pub thread: String,
    /// The budget to measure against (default: the server's --context-budget; one of the two is
    /// needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<u64>,
}

/// Arguments of `memory_compact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactArguments {
    /// The thread.
    pub thread: String,
    /// The input tokens the provider reported for the last model call (required).
    #[serde(default)]
    pub measured_input_tokens: Option<u64>,
    /// Tokens of the newest segments kept verbatim (default 8,000); the current turn is always kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_tokens: Option<u64>,
    /// The summary, written from the plan a call without it answered; absent: answer the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The plan's `through`, required with `summary`: nothing newer is folded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through: Option<u64>,
    /// The plan's `forgotten`, passed back with `summary`: a record forgotten since the plan refuses
    /// the commit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forgotten: Vec<u64>,
    /// Who wrote the summary (a model's name), named in the frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarizer: Option<String>,
    /// Instead of a summary: why the host's summarizer failed on the plan (with the plan's `through`);
    /// recorded in the ledger as a `summarizer_failed` refusal, nothing folds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarizer_failed: Option<String>,
    /// Ask the process's model endpoint (`--model-url` / `--model`) for the summary and commit it in
    /// one call: no `summary`, `summarizer_failed` or `through` (the compaction plans, asks and
    /// commits itself). Refused (`unavailable`) when no model endpoint is set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub summarize: bool,
}

/// What a `memory_compact` call asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactStep {
    /// The plan (appends nothing).
    Plan,
    /// Commit this summary, written from the plan.
    Commit(String),
    /// Record that the summarizer failed on the plan, for this reason.
    SummarizerFailed(String),
    /// Ask the process's model for the summary, and commit it (or record its failure).
    Summarize,
}

/// What a compaction would fold: the answer of `memory_compact` without a summary.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct CompactionPlanWire {
    /// The newest record the plan folds (pass it back with the summary); absent when nothing folds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub through: Option<Sequence>,
    /// The record ranges it folds.
    pub folded: Vec<SequenceRange>,
    /// What refuses to fold.
    pub refusals: Vec<CompactionRefusal>,
    /// Characters the summary must stay under.
    pub replaced_chars: u64,
    /// The folded records that are forgotten (placeholders in `messages`): pass them back with the
    /// summary.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub forgotten: Vec<Sequence>,
    /// What to summarize: the earlier summary (in its frame) and the folded segments, tool outputs in
    /// full.
    pub messages: Vec<Message>,
}

/// The answer of `memory_compact`: a plan, or the compaction record appended.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct CompactResult {
    /// The thread.
    pub thread: String,
    /// The plan (a call without a summary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<CompactionPlanWire>,
    /// The sequence of the compaction record appended (a call with a summary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<Sequence>,
    /// The compaction record appended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionRecord>,
}

/// Arguments of `memory_history_read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryReadArguments {
    /// The thread.
    pub thread: String,
    /// Records after this sequence, oldest first (default 0: from the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// Instead of `after`: records before this record, newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
    /// Most records (1 to 500, default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Most bytes of record text (default 256 KiB; the first record always comes, cut to fit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
    /// Records shown besides the conversation: `system` (system instructions), `operational`
    /// (`run_completed` and `compaction` records). Default: neither.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<IncludeKind>,
}

/// Arguments of `memory_history_search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistorySearchArguments {
    /// The thread.
    pub thread: String,
    /// The text to find, literally and case-insensitively (1 to 1,024 bytes).
    pub text: String,
    /// Records after this sequence, oldest first (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// Instead of `after`: records before this record, newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
    /// Most matches (1 to 500, default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Most records read before answering where the search stopped (default 100,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan: Option<usize>,
    /// Records searched besides the conversation: `system`, `operational` (as for
    /// `memory_history_read`). Default: neither.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<IncludeKind>,
}

/// Where a history call starts: `after` (default 0) or `before`, never both.
fn anchor(after: Option<u64>, before: Option<u64>) -> Result<Anchor, Refusal> {
    match (after, before) {
        (Some(_), Some(_)) => Err(Refusal::invalid_input(
            "before and after: a history call reads forward from after or backward from before, \
             not both",
        )),
        (None, Some(before)) => Ok(Anchor::Before(Sequence::new(before))),
        (after, None) => Ok(Anchor::After(Sequence::new(after.unwrap_or(0)))),
    }
}

/// A decoded and validated context call.
#[derive(Debug, Clone)]
pub enum ContextRequest {
    /// `memory_context`.
    Context {
        /// The thread.
        thread: ThreadId,
        /// The budget.
        budget: u64,
        /// The query, if given.
        query: Option<String>,
        /// Whether to recall memory.
        memory: bool,
        /// Whether the window may roll over by itself.
        rollover: bool,
    },
    /// `memory_new_context`.
    NewContext {
        /// The thread.
        thread: ThreadId,
        /// The handoff.
        handoff: Option<String>,
    },
    /// `memory_context_remaining`.
    Remaining {
        /// The thread.
        thread: ThreadId,
        /// The call's budget.
        budget: Option<u64>,
    },
    /// `memory_read_notes`.
    ReadNotes {
        /// The thread.
        thread: ThreadId,
    },
    /// `memory_write_notes`.
    WriteNotes {
        /// The thread.
        thread: ThreadId,
        /// The new notes.
        text: String,
        /// The revision read.
        expected_revision: Option<String>,
    },
    /// `memory_compact`.
    Compact {
        /// The thread.
        thread: ThreadId,
        /// What is asked.
        request: CompactionRequest,
        /// Plan, commit or record a failure.
        step: CompactStep,
        /// The plan's forgotten records, when committing.
        forgotten: Vec<Sequence>,
    },
    /// `memory_history_read`.
    HistoryRead {
        /// The thread.
        thread: ThreadId,
        /// Where it starts.
        anchor: Anchor,
        /// The arguments.
        arguments: HistoryReadArguments,
    },
    /// `memory_history_search`.
    HistorySearch {
        /// The thread.
        thread: ThreadId,
        /// Where it starts.
        anchor: Anchor,
        /// The arguments.
        arguments: HistorySearchArguments,
    },
}

impl ContextRequest {
    /// Decodes and validates `arguments` as the arguments of `operation`.
    pub fn decode(
        operation: ContextOperation,
        arguments: RawArguments<'_>,
    ) -> Result<Self, Refusal> {
        Ok(match operation {
            ContextOperation::Context => {
                let arguments: ContextArguments = arguments.decode()?;
                memory_context::view::check_budget(arguments.budget)?;
                Self::Context {
                    thread: ThreadId::new(arguments.thread)?,
                    budget: arguments.budget,
                    query: arguments.query.filter(|query| !query.trim().is_empty()),
                    memory: arguments.memory,
                    rollover: arguments.rollover,
                }
            }
            ContextOperation::Compact => {
                let arguments: CompactArguments = arguments.decode()?;
                let step = match (
                    arguments.summary,
                    arguments.summarizer_failed,
                    arguments.summarize,
                ) {
                    (Some(_), Some(_), _) => {
                        return Err(Refusal::invalid_input(
                            "summary and summarizer_failed: a call either commits a summary or \
                             records that the summarizer failed",
                        ));
                    }
                    (Some(_), None, true) | (None, Some(_), true) => {
                        return Err(Refusal::invalid_input(
                            "summarize: the model writes the summary, so the call names neither a \
                             summary nor a summarizer failure",
                        ));
                    }
                    (Some(summary), None, false) => CompactStep::Commit(summary),
                    (None, Some(failure), false) => CompactStep::SummarizerFailed(failure),
                    (None, None, true) => CompactStep::Summarize,
                    (None, None, false) => CompactStep::Plan,
                };
                let committed_from_a_plan = matches!(
                    step,
                    CompactStep::Commit(_) | CompactStep::SummarizerFailed(_)
                );
                if committed_from_a_plan != arguments.through.is_some() {
                    return Err(Refusal::invalid_input(
                        "through: a summary (or a summarizer failure) is committed with the \
                         `through` of the plan it was written from (call without either for the plan)",
                    ));
                }
                let request = CompactionRequest {
                    measured_input_tokens: arguments.measured_input_tokens,
                    keep_tokens: arguments.keep_tokens.unwrap_or(DEFAULT_KEEP_TOKENS),
                    through: arguments.through.map(Sequence::new),
                    summarizer: arguments.summarizer,
                };
                // The plan checks it too; refusing here answers before the thread is read.
                request.measured()?;
                Self::Compact {
                    thread: ThreadId::new(arguments.thread)?,
                    request,
                    step,
                    forgotten: arguments.forgotten.into_iter().map(Sequence::new).collect(),
                }
            }
            ContextOperation::HistoryRead => {
                let arguments: HistoryReadArguments = arguments.decode()?;
                Self::HistoryRead {
                    thread: ThreadId::new(arguments.thread.clone())?,
                    anchor: anchor(arguments.after, arguments.before)?,
                    arguments,
                }
            }
            ContextOperation::HistorySearch => {
                let arguments: HistorySearchArguments = arguments.decode()?;
                Self::HistorySearch {
                    thread: ThreadId::new(arguments.thread.clone())?,
                    anchor: anchor(arguments.after, arguments.before)?,
                    arguments,
                }
            }
            ContextOperation::NewContext => {
                let arguments: NewContextArguments = arguments.decode()?;
                if let Some(handoff) = &arguments.handoff {
                    memory_core::activity::rollover::check_handoff(handoff)?;
                }
                Self::NewContext {
                    thread: ThreadId::new(arguments.thread)?,
                    handoff: arguments.handoff,
                }
            }
            ContextOperation::Remaining => {
                let arguments: RemainingArguments = arguments.decode()?;
                if let Some(budget) = arguments.budget {
                    memory_context::view::check_budget(budget)?;
                }
                Self::Remaining {
                    thread: ThreadId::new(arguments.thread)?,
                    budget: arguments.budget,
                }
            }
            ContextOperation::ReadNotes => {
                let arguments: ReadNotesArguments = arguments.decode()?;
                Self::ReadNotes {
                    thread: ThreadId::new(arguments.thread)?,
                }
            }
            ContextOperation::WriteNotes => {
                let arguments: WriteNotesArguments = arguments.decode()?;
                crate::notes::check_notes(&arguments.text)?;
                Self::WriteNotes {
                    thread: ThreadId::new(arguments.thread)?,
                    text: arguments.text,
                    expected_revision: arguments.expected_revision,
                }
            }
        })
    }

    pub(super) fn thread(&self) -> &ThreadId {
        match self {
            Self::Context { thread, .. }
            | Self::Compact { thread, .. }
            | Self::HistoryRead { thread, .. }
            | Self::HistorySearch { thread, .. }
            | Self::NewContext { thread, .. }
            | Self::Remaining { thread, .. }
            | Self::ReadNotes { thread }
            | Self::WriteNotes { thread, .. } => thread,
        }
    }
}

/// What a `memory_compact` answer counts as in the server's metrics: the appended record's outcome, or
/// `unmeasured` for a call refused without a measured token count; `None` for a plan or another
/// refusal.
pub fn compaction_outcome(answer: &Result<Value, Refusal>) -> Option<&'static str> {
    match answer {
        Ok(value) => {
            let outcome = value.get("compaction")?.get("outcome")?;
            serde_json::from_value::<CompactionOutcome>(outcome.clone())
                .ok()
                .map(CompactionOutcome::as_str)
        }
        Err(refusal) => {
            (refusal.message() == ContextError::Unmeasured.to_string()).then_some("unmeasured")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compactions_are_counted_by_outcome_and_unmeasured_refusals_too() {
        for outcome in [
            "folded",
            "nothing_to_fold",
            "not_smaller",
            "summarizer_failed",
        ] {
            let answer =
                Ok(json!({"thread": "t", "sequence": 9, "compaction": {"outcome": outcome}}));
            assert_eq!(compaction_outcome(&answer), Some(outcome));
        }
        let plan = Ok(json!({"thread": "t", "plan": {"through": 3}}));
        assert_eq!(compaction_outcome(&plan), None, "a plan appends nothing");
        let unmeasured = ContextRequest::decode(
            ContextOperation::Compact,
            RawArguments::Json(json!({"thread": "t", "measured_input_tokens": 0})),
        )
        .map(|_| Value::Null);
        assert_eq!(compaction_outcome(&unmeasured), Some("unmeasured"));
        let other = Err(Refusal::invalid_input("through: missing"));
        assert_eq!(compaction_outcome(&other), None);
    }
}
