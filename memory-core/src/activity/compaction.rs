//! The compaction record: what a compaction of a model's window appends to a thread's log.
//!
//! Compaction edits the window a model is sent, never the log: the records it folds stay where they are,
//! readable and searchable, and the compaction itself is one more record naming what it folded, the
//! measured input tokens that asked for it, what refused to fold and the summary that stands in for the
//! folded records from then on. The rules that plan a compaction live in the context layer
//! (`memory-context`); this module is the record's shape and its structural checks, which every append
//! path runs through [`super::NewRecord::validate`].

use serde::{Deserialize, Serialize};

use super::{ActivityError, Sequence};

/// Most ranges (folded or refused) one compaction record names.
pub const MAX_COMPACTION_RANGES: usize = 10_000;
/// Most UTF-8 bytes of a compaction's summary.
pub const MAX_SUMMARY_BYTES: usize = 1_048_576;
/// Most UTF-8 bytes of the summarizer's name.
pub const MAX_SUMMARIZER_BYTES: usize = 256;

/// An inclusive run of record sequences of one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SequenceRange {
    /// The first record of the run.
    pub first: Sequence,
    /// The last record of the run (equal to `first` for one record).
    pub last: Sequence,
}

impl SequenceRange {
    /// Whether `sequence` lies in the range.
    pub fn contains(&self, sequence: Sequence) -> bool {
        self.first <= sequence && sequence <= self.last
    }
}

/// Why a span of records was not folded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RefusalReason {
    /// A system record: instructions are never summarized away.
    System,
    /// Among the newest records the compaction keeps verbatim (the current turn, and what fits the
    /// size it keeps).
    Kept,
    /// A model step with a tool call that has no result yet: folding it would leave the result, when it
    /// arrives, answering a call the model can no longer see.
    UnresolvedToolCall,
    /// After a span that refused: a compaction folds one contiguous run, so nothing that refused ever
    /// sits after a summary of what came later.
    AfterRefusal,
}

/// A span that refused to fold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactionRefusal {
    /// The records of the span.
    pub range: SequenceRange,
    /// Why it stayed.
    pub reason: RefusalReason,
}

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompactionOutcome {
    /// The folded ranges now stand behind the summary.
    Folded,
    /// Nothing could fold (everything refused); the window stays as it was.
    NothingToFold,
    /// The summary was not smaller than what it would have replaced: refused, the window stays.
    NotSmaller,
}

/// A compaction, as appended to the thread it compacts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactionRecord {
    /// What it did.
    pub outcome: CompactionOutcome,
    /// The record ranges folded into the summary, oldest first; empty unless `outcome` is `folded`.
    pub folded: Vec<SequenceRange>,
    /// The input tokens the provider reported for the call that asked for this compaction: counted,
    /// never guessed.
    pub measured_input_tokens: u64,
    /// The spans that refused to fold, oldest first.
    pub refusals: Vec<CompactionRefusal>,
    /// The summary the caller supplied, verbatim, when `outcome` is `folded`. It covers the earlier
    /// summary too: a later compaction replaces it.
    pub summary: Option<String>,
    /// Who wrote the summary (a model's name), shown in the frame around it.
    pub summarizer: Option<String>,
    /// Characters of what the summary replaces (the earlier summary and the folded records, as
    /// rendered for the model): characters, because they are exact.
    pub replaced_chars: u64,
    /// Characters of the summary the caller supplied (also when refused as not smaller).
    pub summary_chars: u64,
}

impl CompactionRecord {
    /// Checks the record's shape: ranges well formed, ascending and disjoint, a summary exactly when
    /// something was folded, and the size limits.
    pub fn validate(&self) -> Result<(), ActivityError> {
        let ranges = self.folded.len().saturating_add(self.refusals.len());
        if ranges > MAX_COMPACTION_RANGES {
            return Err(ActivityError::TooLarge {
                limit: "compaction ranges",
                max: MAX_COMPACTION_RANGES as u64,
                actual: ranges as u64,
            });
        }
        check_ranges("folded ranges", self.folded.iter(), true)?;
        // Refused spans are segments, whose records may interleave (a step's result can arrive after a
        // later prompt), so they need only be well formed.
        check_ranges(
            "refused ranges",
            self.refusals.iter().map(|refusal| &refusal.range),
            false,
        )?;
        match (self.outcome, &self.summary) {
            (CompactionOutcome::Folded, None) => {
                return Err(ActivityError::invalid(
                    "compaction",
                    "a folded compaction carries its summary",
                ));
            }
            (CompactionOutcome::Folded, Some(_)) if self.folded.is_empty() => {
                return Err(ActivityError::invalid(
                    "compaction",
                    "a folded compaction names the records it folded",
                ));
            }
            (CompactionOutcome::Folded, Some(_)) => {}
            (_, Some(_)) => {
                return Err(ActivityError::invalid(
                    "compaction",
                    "only a folded compaction carries a summary",
                ));
            }
            (_, None) if !self.folded.is_empty() => {
                return Err(ActivityError::invalid(
                    "compaction",
                    "only a folded compaction names folded records",
                ));
            }
            (_, None) => {}
        }
        if let Some(summary) = &self.summary {
            if summary.trim().is_empty() {
                return Err(ActivityError::invalid("summary", "is empty"));
            }
            if summary.len() > MAX_SUMMARY_BYTES {
                return Err(ActivityError::TooLarge {
                    limit: "summary bytes",
                    max: MAX_SUMMARY_BYTES as u64,
                    actual: summary.len() as u64,
                });
            }
        }
        if let Some(summarizer) = &self.summarizer
            && (summarizer.len() > MAX_SUMMARIZER_BYTES || summarizer.chars().any(char::is_control))
        {
            return Err(ActivityError::invalid(
                "summarizer",
                format!("must be at most {MAX_SUMMARIZER_BYTES} bytes without control characters"),
            ));
        }
        Ok(())
    }
}

fn check_ranges<'a>(
    field: &'static str,
    ranges: impl Iterator<Item = &'a SequenceRange>,
    disjoint: bool,
) -> Result<(), ActivityError> {
    let mut previous: Option<Sequence> = None;
    for range in ranges {
        if range.first == Sequence::ZERO || range.first > range.last {
            return Err(ActivityError::invalid(
                field,
                format!(
                    "{}..{} is not a run of records (sequences start at 1, first <= last)",
                    range.first, range.last
                ),
            ));
        }
        if disjoint && previous.is_some_and(|last| range.first <= last) {
            return Err(ActivityError::invalid(
                field,
                "must be in ascending order and disjoint",
            ));
        }
        previous = Some(range.last);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(first: u64, last: u64) -> SequenceRange {
        SequenceRange {
            first: Sequence::new(first),
            last: Sequence::new(last),
        }
    }

    fn folded(ranges: Vec<SequenceRange>) -> CompactionRecord {
        CompactionRecord {
            outcome: CompactionOutcome::Folded,
            folded: ranges,
            measured_input_tokens: 40_000,
            refusals: Vec::new(),
            summary: Some("the user asked about flights".to_owned()),
            summarizer: None,
            replaced_chars: 900,
            summary_chars: 28,
        }
    }

    #[test]
    fn ranges_must_be_ascending_disjoint_runs() {
        assert!(folded(vec![range(1, 4), range(6, 9)]).validate().is_ok());
        assert!(folded(vec![range(0, 4)]).validate().is_err());
        assert!(folded(vec![range(5, 4)]).validate().is_err());
        assert!(folded(vec![range(1, 4), range(4, 9)]).validate().is_err());
        assert!(folded(vec![range(6, 9), range(1, 4)]).validate().is_err());
    }

    #[test]
    fn a_summary_comes_exactly_with_folded_records() {
        assert!(folded(Vec::new()).validate().is_err());
        let mut refused = folded(Vec::new());
        refused.outcome = CompactionOutcome::NotSmaller;
        assert!(
            refused.validate().is_err(),
            "a refused one keeps no summary"
        );
        refused.summary = None;
        assert!(refused.validate().is_ok());
        let mut empty = folded(vec![range(1, 2)]);
        empty.summary = Some("  ".to_owned());
        assert!(empty.validate().is_err());
    }
}
