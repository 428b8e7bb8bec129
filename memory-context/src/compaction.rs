//! Compaction planning: what a compaction folds, what refuses, and the record it appends.
//!
//! Compaction edits the window, never the log. A plan reads the conversation's state and picks one
//! contiguous run of the oldest segments to fold: the newest whole segments that fit `keep_tokens` are
//! kept, and so is the whole current turn; a system segment never folds (it is pinned at the head of
//! every view); a step whose tool call has no result refuses, and so does everything after it, so nothing
//! that refused ever sits after a summary of what came later. The caller supplies the summary (of the
//! earlier summary and the folded segments, in full); one that is not smaller, in characters, than what
//! it replaces is refused. Either way the compaction is recorded: the record names the folded ranges, the
//! measured input tokens that asked for it, and every refusal.

use std::collections::BTreeSet;
use std::sync::Arc;

use memory_core::activity::{
    CompactionOutcome, CompactionRecord, CompactionRefusal, RefusalReason, Sequence, SequenceRange,
};

use crate::ContextError;
use crate::conversation::{ConversationState, Summary};
use crate::segment::{Message, Segment, SegmentKind};
use crate::view::{MAX_BUDGET_TOKENS, View};

/// What a compaction is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionRequest {
    /// The input tokens the provider reported for the last call: required (a compaction is counted,
    /// never guessed; `None` is refused with [`ContextError::Unmeasured`]).
    pub measured_input_tokens: Option<u64>,
    /// Tokens of the newest segments kept verbatim (the current turn is kept whatever its size).
    pub keep_tokens: u64,
    /// Fold nothing newer than this record: a commit passes back the `through` of the plan its summary
    /// was written from, so records appended meanwhile are never folded unsummarized.
    pub through: Option<Sequence>,
    /// Who writes the summary (a model's name), for the frame.
    pub summarizer: Option<String>,
}

/// A compaction's plan: what to summarize.
#[derive(Debug, Clone)]
pub struct CompactionPlan {
    /// The segments to fold, oldest first, tool outputs in full.
    pub fold: Vec<Arc<Segment>>,
    /// The summary in place now, which the new one replaces (so it must cover it).
    pub previous: Option<Arc<Summary>>,
    /// The record ranges the fold covers.
    pub folded: Vec<SequenceRange>,
    /// What refused to fold.
    pub refusals: Vec<CompactionRefusal>,
    /// Characters the summary must stay under: the earlier summary and the folded segments.
    pub replaced_chars: u64,
    /// The newest record folded: what a commit passes back as [`CompactionRequest::through`].
    pub through: Option<Sequence>,
    /// The measured input tokens of the request.
    pub measured_input_tokens: u64,
}

impl CompactionPlan {
    /// What to summarize, as chat messages: the earlier summary (in its frame) and the folded segments.
    pub fn transcript(&self) -> Vec<Message> {
        let mut messages = Vec::new();
        if let Some(previous) = &self.previous {
            messages.push(previous.message());
        }
        for segment in &self.fold {
            messages.extend(segment.messages());
        }
        messages
    }

    /// The record this plan appends with `summary` (the caller's; `None` when nothing folds).
    pub fn record(&self, summary: Option<String>, summarizer: Option<String>) -> CompactionRecord {
        let summary_chars = summary
            .as_deref()
            .map_or(0, |summary| summary.chars().count() as u64);
        let outcome = match &summary {
            _ if self.fold.is_empty() => CompactionOutcome::NothingToFold,
            Some(_) if summary_chars < self.replaced_chars => CompactionOutcome::Folded,
            _ => CompactionOutcome::NotSmaller,
        };
        let folded = outcome == CompactionOutcome::Folded;
        CompactionRecord {
            outcome,
            folded: if folded {
                self.folded.clone()
            } else {
                Vec::new()
            },
            measured_input_tokens: self.measured_input_tokens,
            refusals: self.refusals.clone(),
            summary: summary.filter(|_| folded),
            summarizer,
            replaced_chars: self.replaced_chars,
            summary_chars,
        }
    }
}

/// Plans a compaction of `state` (see the module docs).
pub fn plan(
    view: &View,
    state: &ConversationState,
    request: &CompactionRequest,
) -> Result<CompactionPlan, ContextError> {
    let measured_input_tokens = request
        .measured_input_tokens
        .ok_or(ContextError::Unmeasured)?;
    if request.keep_tokens > MAX_BUDGET_TOKENS {
        return Err(ContextError::invalid(
            "keep_tokens",
            format!("must be at most {MAX_BUDGET_TOKENS}"),
        ));
    }
    let current_turn = state.current_turn_start();
    let split = view.split(state, request.keep_tokens, current_turn);
    let mut fold = Vec::new();
    let mut refusals: Vec<CompactionRefusal> = Vec::new();
    let mut refusing = false;
    for (index, segment) in state.segments.iter().enumerate() {
        let reason = if segment.kind() == SegmentKind::System {
            Some(RefusalReason::System)
        } else if index >= split.kept_from {
            Some(RefusalReason::Kept)
        } else if refusing {
            Some(RefusalReason::AfterRefusal)
        } else if segment.has_unresolved_call() {
            refusing = true;
            Some(RefusalReason::UnresolvedToolCall)
        } else if request
            .through
            .is_some_and(|through| segment.last() > through)
        {
            refusing = true;
            Some(RefusalReason::Kept)
        } else {
            None
        };
        match reason {
            None => fold.push(Arc::clone(segment)),
            Some(reason) => refuse(&mut refusals, segment, reason),
        }
    }
    let replaced_chars = state
        .summary
        .as_deref()
        .map_or(0, |summary| summary.text.chars().count() as u64)
        + fold
            .iter()
            .map(|segment| segment.chars() as u64)
            .sum::<u64>();
    Ok(CompactionPlan {
        folded: folded_ranges(state, &fold),
        through: fold.iter().map(|segment| segment.last()).max(),
        fold,
        previous: state.summary.clone(),
        refusals,
        replaced_chars,
        measured_input_tokens,
    })
}

/// Adds a refusal, merging it into the previous one when the reason is the same.
fn refuse(refusals: &mut Vec<CompactionRefusal>, segment: &Segment, reason: RefusalReason) {
    let range = SequenceRange {
        first: segment.first(),
        last: segment.last(),
    };
    if let Some(previous) = refusals.last_mut()
        && previous.reason == reason
    {
        previous.range.first = previous.range.first.min(range.first);
        previous.range.last = previous.range.last.max(range.last);
        return;
    }
    refusals.push(CompactionRefusal { range, reason });
}

/// The record ranges a fold covers: from its oldest record to its newest, less the records of the
/// segments it does not fold (records of no segment in between, such as `run_completed`, go with it).
fn folded_ranges(state: &ConversationState, fold: &[Arc<Segment>]) -> Vec<SequenceRange> {
    let folded: BTreeSet<Sequence> = fold
        .iter()
        .flat_map(|segment| segment.records().iter().copied())
        .collect();
    let (Some(&low), Some(&high)) = (folded.first(), folded.last()) else {
        return Vec::new();
    };
    let others: BTreeSet<Sequence> = state
        .segments
        .iter()
        .filter(|segment| !fold.iter().any(|folded| Arc::ptr_eq(folded, segment)))
        .flat_map(|segment| segment.records().iter().copied())
        .filter(|sequence| (low..=high).contains(sequence))
        .collect();
    let mut ranges = Vec::new();
    let mut start = low;
    for &other in &others {
        if other > start {
            ranges.push(SequenceRange {
                first: start,
                last: other.saturating_previous(),
            });
        }
        start = other.saturating_next();
    }
    if start <= high {
        ranges.push(SequenceRange {
            first: start,
            last: high,
        });
    }
    ranges
}
