//! Compaction planning: what a compaction folds, what refuses, and the record it appends.
//!
//! Compaction edits the window, never the log. A plan reads the conversation's state and picks one
//! contiguous run of the oldest segments to fold: the newest whole segments that fit `keep_tokens` are
//! kept, and so is the whole current turn; a system segment never folds (it is pinned at the head of
//! every view); a step whose tool call has no result refuses, and so does everything after it, so nothing
//! that refused ever sits after a summary of what came later. The caller supplies the summary (of the
//! earlier summary and the folded segments, in full); one that is not smaller, in characters, than what
//! it replaces is refused, and so is a summary longer than [`MAX_NEW_SUMMARY_CHARS`]. A summarizer that
//! fails folds nothing, and its failure is recorded too ([`CompactionPlan::failed_record`]). Either way
//! the compaction is recorded: the record names the folded ranges, the measured input tokens that asked
//! for it, and every refusal. Each record of the thread gets at most one answer: folded, or refused for
//! one reason; a refused span never reaches over a folded record (a late tool result of a folded step
//! folds with its step even when a kept prompt came before it).
//!
//! A measured count of 0 input tokens is no measurement (a provider that reports no usage says 0), so it
//! is refused as [`ContextError::Unmeasured`] like a missing one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use memory_core::activity::compaction::MAX_NEW_SUMMARY_CHARS;
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
    /// never guessed; `None` or `0` is refused with [`ContextError::Unmeasured`]).
    pub measured_input_tokens: Option<u64>,
    /// Tokens of the newest segments kept verbatim (the current turn is kept whatever its size).
    pub keep_tokens: u64,
    /// Fold nothing newer than this record: a commit passes back the `through` of the plan its summary
    /// was written from, so records appended meanwhile are never folded unsummarized.
    pub through: Option<Sequence>,
    /// Who writes the summary (a model's name), for the frame.
    pub summarizer: Option<String>,
}

impl CompactionRequest {
    /// The measured input tokens, or [`ContextError::Unmeasured`] when none were given or the count
    /// is 0 (no measurement): the one rule every door checks, before reading anything.
    pub fn measured(&self) -> Result<u64, ContextError> {
        self.measured_input_tokens
            .filter(|tokens| *tokens > 0)
            .ok_or(ContextError::Unmeasured)
    }
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
    /// The folded records that are forgotten: the transcript holds their placeholders, and the
    /// record names them, so forgetting them later does not withdraw this summary.
    pub forgotten: Vec<Sequence>,
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
            failure: None,
            forgotten: if folded {
                self.forgotten.clone()
            } else {
                Vec::new()
            },
            replaces: folded.then(|| {
                self.previous
                    .as_ref()
                    .map_or(Sequence::ZERO, |previous| previous.compaction)
            }),
            summarizer_tokens: None,
        }
    }

    /// The record of this plan when the host's summarizer failed with `failure` (see
    /// [`memory_core::activity::compaction::check_failure`]): nothing folds, and the span the plan would
    /// have folded is refused as `summarizer_failed` beside the plan's other refusals. A plan with
    /// nothing to fold asked no summarizer, so its record is `nothing_to_fold` whatever the host says.
    pub fn failed_record(&self, failure: String, summarizer: Option<String>) -> CompactionRecord {
        if self.fold.is_empty() {
            return self.record(None, summarizer);
        }
        let mut refusals: Vec<CompactionRefusal> = self
            .folded
            .iter()
            .map(|range| CompactionRefusal {
                range: *range,
                reason: RefusalReason::SummarizerFailed,
            })
            .chain(self.refusals.iter().cloned())
            .collect();
        refusals.sort_by_key(|refusal| refusal.range.first);
        CompactionRecord {
            outcome: CompactionOutcome::SummarizerFailed,
            folded: Vec::new(),
            measured_input_tokens: self.measured_input_tokens,
            refusals,
            summary: None,
            summarizer,
            replaced_chars: self.replaced_chars,
            summary_chars: 0,
            failure: Some(failure),
            forgotten: Vec::new(),
            replaces: None,
            summarizer_tokens: None,
        }
    }
}

/// Checks a summary the caller wrote before it is committed: not blank, at most
/// [`MAX_NEW_SUMMARY_CHARS`] characters.
pub fn check_summary(summary: &str) -> Result<(), ContextError> {
    if summary.trim().is_empty() {
        return Err(ContextError::invalid("summary", "is empty"));
    }
    // Counting stops one past the cap, so a huge summary is refused without a walk over all of it.
    if summary.chars().nth(MAX_NEW_SUMMARY_CHARS).is_some() {
        return Err(ContextError::invalid(
            "summary",
            format!("must be at most {MAX_NEW_SUMMARY_CHARS} characters"),
        ));
    }
    Ok(())
}

/// Plans a compaction of `state` (see the module docs).
pub fn plan(
    view: &View,
    state: &ConversationState,
    request: &CompactionRequest,
) -> Result<CompactionPlan, ContextError> {
    let measured_input_tokens = request.measured()?;
    if request.keep_tokens > MAX_BUDGET_TOKENS {
        return Err(ContextError::invalid(
            "keep_tokens",
            format!("must be at most {MAX_BUDGET_TOKENS}"),
        ));
    }
    let current_turn = state.current_turn_start();
    let split = view.split(state, request.keep_tokens, current_turn);
    let mut fold = Vec::new();
    let mut refused: Vec<(&Segment, RefusalReason)> = Vec::new();
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
            Some(reason) => refused.push((segment, reason)),
        }
    }
    let folded = folded_ranges(state, &fold);
    let refusals = refusal_ranges(&folded, &refused);
    let replaced_chars = state
        .summary
        .as_deref()
        .map_or(0, |summary| summary.text.chars().count() as u64)
        + fold
            .iter()
            .map(|segment| segment.chars() as u64)
            .sum::<u64>();
    let folded = folded_ranges(state, &fold);
    // Every forgotten record the ranges cover, those of no segment (a `run_completed`) included.
    let forgotten: Vec<Sequence> = state
        .forgotten
        .keys()
        .copied()
        .filter(|record| folded.iter().any(|range| range.contains(*record)))
        .collect();
    Ok(CompactionPlan {
        forgotten,
        folded,
        through: fold.iter().map(|segment| segment.last()).max(),
        fold,
        previous: state.summary.clone(),
        refusals,
        replaced_chars,
        measured_input_tokens,
    })
}

/// The refused spans: each refused segment's own records, a run of one reason merged while no record
/// with another answer (refused for another reason, or inside a `folded` range) lies between. A
/// segment's records may interleave with another's (a step's result arriving after a later prompt), and
/// a folded range also takes the records of no segment between folded ones, so a span is built from
/// records, never from a segment's first and last alone, which could reach over a folded record.
fn refusal_ranges(
    folded: &[SequenceRange],
    refused: &[(&Segment, RefusalReason)],
) -> Vec<CompactionRefusal> {
    let answers: BTreeMap<Sequence, RefusalReason> = refused
        .iter()
        .flat_map(|(segment, reason)| {
            segment
                .records()
                .iter()
                .map(move |&sequence| (sequence, *reason))
        })
        .collect();
    let mut refusals: Vec<CompactionRefusal> = Vec::new();
    for (sequence, reason) in answers {
        if let Some(last) = refusals.last_mut()
            && last.reason == reason
            && !folded
                .iter()
                .any(|range| range.first < sequence && range.last > last.range.last)
        {
            last.range.last = sequence;
            continue;
        }
        refusals.push(CompactionRefusal {
            range: SequenceRange {
                first: sequence,
                last: sequence,
            },
            reason,
        });
    }
    refusals
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
