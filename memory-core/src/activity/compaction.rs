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
/// Most UTF-8 bytes of a stored compaction's summary: what a record must stay under to decode. New
/// summaries are held to the smaller [`MAX_NEW_SUMMARY_CHARS`] when they are committed; this larger
/// bound is kept so records written before that cap still read back.
pub const MAX_SUMMARY_BYTES: usize = 1_048_576;
/// Most characters of a summary a compaction commits now. A summary is meant to be much smaller than
/// the window it replaces; this cap keeps one caller from parking a megabyte in every later turn.
pub const MAX_NEW_SUMMARY_CHARS: usize = 65_536;
/// Most UTF-8 bytes of the reason a host gives for its summarizer's failure.
pub const MAX_FAILURE_BYTES: usize = 1_024;
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
    /// The span the plan would have folded, whose summarizer failed: nothing folded, and the failure is
    /// on the record instead of lost (a later compaction asks again: an outage may end).
    SummarizerFailed,
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
    /// The host's summarizer failed (its reason is the record's `failure`): refused, the window stays.
    SummarizerFailed,
}

impl CompactionOutcome {
    /// Every outcome.
    pub const ALL: [Self; 4] = [
        Self::Folded,
        Self::NothingToFold,
        Self::NotSmaller,
        Self::SummarizerFailed,
    ];

    /// Its name on the wire (the serde name), for labels and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Folded => "folded",
            Self::NothingToFold => "nothing_to_fold",
            Self::NotSmaller => "not_smaller",
            Self::SummarizerFailed => "summarizer_failed",
        }
    }
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
    /// Why the summarizer failed, as the host said it, when `outcome` is `summarizer_failed`. Absent
    /// otherwise, and absent from records written before this field (their digest is unchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Records of the folded ranges that were already forgotten when the compaction was planned: its
    /// summary was written from their placeholders, never their text, so forgetting them does not
    /// withdraw it. Ascending. Absent (empty) on records written before forgetting was read, which
    /// keeps their digests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forgotten: Vec<Sequence>,
    /// The compaction whose summary this one's summary replaced (and so was written from), or
    /// [`Sequence::ZERO`] when no summary was in place, on a folded compaction. Absent on records
    /// written before it was kept: those replaced the newest folded compaction before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<Sequence>,
    /// The tokens the summary call spent, as the endpoint reported them, when the summary was asked
    /// of a model by the compaction itself (`memory_compact` with `summarize`). Absent when the host
    /// wrote the summary, and on records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarizer_tokens: Option<SummarizerTokens>,
}

/// What one summary call spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummarizerTokens {
    /// Tokens of the request.
    pub prompt: u64,
    /// Tokens of the answer.
    pub completion: u64,
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
        match (self.outcome, &self.failure) {
            (CompactionOutcome::SummarizerFailed, None) => {
                return Err(ActivityError::invalid(
                    "compaction",
                    "a summarizer failure carries its reason",
                ));
            }
            (CompactionOutcome::SummarizerFailed, Some(failure)) => check_failure(failure)?,
            (_, Some(_)) => {
                return Err(ActivityError::invalid(
                    "compaction",
                    "only a summarizer failure carries a failure reason",
                ));
            }
            (_, None) => {}
        }
        if self.forgotten.len() > MAX_COMPACTION_RANGES {
            return Err(ActivityError::TooLarge {
                limit: "compaction forgotten records",
                max: MAX_COMPACTION_RANGES as u64,
                actual: self.forgotten.len() as u64,
            });
        }
        if !self.forgotten.windows(2).all(|pair| pair[0] < pair[1])
            || !self
                .forgotten
                .iter()
                .all(|sequence| self.folded.iter().any(|range| range.contains(*sequence)))
        {
            return Err(ActivityError::invalid(
                "forgotten",
                "must be ascending records of the folded ranges",
            ));
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

/// Checks the reason a host gives for its summarizer's failure: 1 to [`MAX_FAILURE_BYTES`] bytes of
/// text on one line (it is shown in history answers and logs, so no control characters).
pub fn check_failure(failure: &str) -> Result<(), ActivityError> {
    if failure.trim().is_empty()
        || failure.len() > MAX_FAILURE_BYTES
        || failure.chars().any(char::is_control)
    {
        return Err(ActivityError::invalid(
            "summarizer_failed",
            format!("must be 1 to {MAX_FAILURE_BYTES} bytes of text without control characters"),
        ));
    }
    Ok(())
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
            failure: None,
            forgotten: Vec::new(),
            replaces: None,
            summarizer_tokens: None,
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
    fn forgotten_records_lie_in_the_folded_ranges() {
        let mut record = folded(vec![range(1, 4), range(6, 9)]);
        record.forgotten = vec![Sequence::new(2), Sequence::new(7)];
        assert!(record.validate().is_ok());
        record.forgotten = vec![Sequence::new(5)];
        assert!(record.validate().is_err(), "5 is not folded");
        record.forgotten = vec![Sequence::new(7), Sequence::new(2)];
        assert!(record.validate().is_err(), "not ascending");
    }

    #[test]
    fn a_record_without_the_new_fields_keeps_its_form() {
        let record = folded(vec![range(1, 4)]);
        let text = serde_json::to_string(&record).expect("serializes");
        assert!(
            !text.contains("forgotten") && !text.contains("replaces"),
            "{text}"
        );
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

    #[test]
    fn an_outcome_names_itself_as_the_wire_does() {
        for outcome in CompactionOutcome::ALL {
            assert_eq!(
                serde_json::to_value(outcome).expect("serializes"),
                serde_json::json!(outcome.as_str())
            );
        }
    }

    #[test]
    fn a_failure_reason_comes_exactly_with_a_summarizer_failure() {
        let mut failed = folded(Vec::new());
        failed.summary = None;
        failed.outcome = CompactionOutcome::SummarizerFailed;
        assert!(failed.validate().is_err(), "a failure without its reason");
        failed.failure = Some("the endpoint answered 503".to_owned());
        assert!(failed.validate().is_ok());
        failed.failure = Some("x".repeat(MAX_FAILURE_BYTES + 1));
        assert!(failed.validate().is_err(), "too long");
        failed.failure = Some("line\nbreak".to_owned());
        assert!(failed.validate().is_err(), "control characters");
        let mut folded_with_reason = folded(vec![range(1, 2)]);
        folded_with_reason.failure = Some("no".to_owned());
        assert!(folded_with_reason.validate().is_err());
    }

    #[test]
    fn a_record_without_a_failure_keeps_the_shape_it_was_written_in() {
        let record = folded(vec![range(1, 2)]);
        let json = serde_json::to_value(&record).expect("serializes");
        assert!(json.get("failure").is_none(), "{json}");
        let back: CompactionRecord = serde_json::from_value(json).expect("decodes");
        assert_eq!(back, record);
    }
}
