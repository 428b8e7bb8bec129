//! The rollover record: the boundary where a thread's model window starts again.
//!
//! A rollover does not remove or rewrite anything: the records before the boundary stay in the log,
//! readable through the history tools, which say which window each record belongs to. From the boundary
//! on, the context layer assembles a fresh window: the current run's instructions and input, a window
//! marker, the handoff (or, without one, the [`RolloverExcerpts`] copied from the covered records), the
//! trailing user messages and any tool calls still waiting for their results. Only the context layer
//! appends these records (`memory_new_context`, or its automatic rollover); a caller's append of one is
//! refused. This module is the record's shape and its structural checks, which every append path runs
//! through [`super::NewRecord::validate`].

use serde::{Deserialize, Serialize};

use super::{ActivityError, Sequence, SequenceRange};

/// Most characters of a handoff.
pub const MAX_HANDOFF_CHARS: usize = 20_000;
/// Most bytes of a handoff as a JSON string (escapes included).
pub const MAX_HANDOFF_JSON_BYTES: usize = 32 * 1024;
/// Most excerpts of either kind one rollover carries.
pub const MAX_EXCERPTS: usize = 16;
/// Most characters of one excerpt's text.
pub const MAX_EXCERPT_CHARS: usize = 400;

/// Who asked for the rollover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RolloverCause {
    /// The model, with `memory_new_context`.
    Model,
    /// The context layer itself: the current run no longer fitted its budget by eliding old tool
    /// outputs alone.
    Automatic,
}

/// A text copied from one covered record. A forget of that record hides the copy too (the context
/// layer shows it as forgotten), as it hides the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Excerpt {
    /// The record the text was copied from.
    pub sequence: Sequence,
    /// Its first characters (at most [`MAX_EXCERPT_CHARS`]).
    pub text: String,
    /// Characters of the record's text not copied.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cut_chars: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// One tool call of the last batch before the boundary, with where its result is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallExcerpt {
    /// The call: `name(arguments)`, cut.
    pub call: Excerpt,
    /// The record of its result, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Sequence>,
    /// Whether the tool reported failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// What a rollover without a handoff carries instead: small, deterministic copies from the covered
/// records. They say what was asked and what was called, never whether an action succeeded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RolloverExcerpts {
    /// The newest covered user messages, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_messages: Vec<Excerpt>,
    /// The last tool batch (the newest covered step's calls), in call order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_tool_batch: Vec<CallExcerpt>,
}

/// A window boundary in a thread's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RolloverRecord {
    /// The window this record opens (the thread's first window is 1).
    pub window: u64,
    /// Who asked for it.
    pub cause: RolloverCause,
    /// The records before the boundary that the new window no longer shows (the run's input,
    /// instructions and pending calls are shown again all the same).
    pub covered: SequenceRange,
    /// What the model wrote for its next window, verbatim (at most [`MAX_HANDOFF_CHARS`] characters
    /// and [`MAX_HANDOFF_JSON_BYTES`] bytes as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<String>,
    /// Copies from the covered records, when there is no handoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpts: Option<RolloverExcerpts>,
}

/// Checks a handoff: not blank, at most [`MAX_HANDOFF_CHARS`] characters and
/// [`MAX_HANDOFF_JSON_BYTES`] bytes as a JSON string.
pub fn check_handoff(handoff: &str) -> Result<(), ActivityError> {
    if handoff.trim().is_empty() {
        return Err(ActivityError::invalid("handoff", "is empty"));
    }
    // Counting stops one past the cap, so a huge handoff is refused without a walk over all of it.
    if handoff.len() > MAX_HANDOFF_JSON_BYTES || handoff.chars().nth(MAX_HANDOFF_CHARS).is_some() {
        return Err(ActivityError::TooLarge {
            limit: "handoff characters",
            max: MAX_HANDOFF_CHARS as u64,
            actual: handoff.chars().count() as u64,
        });
    }
    let json_bytes = serde_json::to_string(handoff).map_or(usize::MAX, |json| json.len());
    if json_bytes > MAX_HANDOFF_JSON_BYTES {
        return Err(ActivityError::TooLarge {
            limit: "handoff JSON bytes",
            max: MAX_HANDOFF_JSON_BYTES as u64,
            actual: json_bytes as u64,
        });
    }
    Ok(())
}

impl RolloverRecord {
    /// Structural checks: a window past the first, a covered range in order, a valid handoff or
    /// excerpts within their bounds.
    pub fn validate(&self) -> Result<(), ActivityError> {
        if self.window < 2 {
            return Err(ActivityError::invalid(
                "rollover.window",
                "a rollover opens window 2 or later",
            ));
        }
        if self.covered.first > self.covered.last || self.covered.first == Sequence::ZERO {
            return Err(ActivityError::invalid(
                "rollover.covered",
                "must be a range of records, first to last",
            ));
        }
        if let Some(handoff) = &self.handoff {
            check_handoff(handoff)?;
        }
        if let Some(excerpts) = &self.excerpts {
            let texts = excerpts
                .user_messages
                .iter()
                .chain(excerpts.last_tool_batch.iter().map(|call| &call.call));
            if excerpts.user_messages.len() > MAX_EXCERPTS
                || excerpts.last_tool_batch.len() > MAX_EXCERPTS
            {
                return Err(ActivityError::TooLarge {
                    limit: "rollover excerpts",
                    max: MAX_EXCERPTS as u64,
                    actual: excerpts
                        .user_messages
                        .len()
                        .max(excerpts.last_tool_batch.len()) as u64,
                });
            }
            for excerpt in texts {
                if excerpt.text.chars().nth(MAX_EXCERPT_CHARS).is_some() {
                    return Err(ActivityError::TooLarge {
                        limit: "rollover excerpt characters",
                        max: MAX_EXCERPT_CHARS as u64,
                        actual: excerpt.text.chars().count() as u64,
                    });
                }
            }
        }
        Ok(())
    }
}

/// The excerpt of `text` from record `sequence`: its first [`MAX_EXCERPT_CHARS`] characters.
pub fn excerpt(sequence: Sequence, text: &str) -> Excerpt {
    let total = text.chars().count();
    Excerpt {
        sequence,
        text: text.chars().take(MAX_EXCERPT_CHARS).collect(),
        cut_chars: total.saturating_sub(MAX_EXCERPT_CHARS) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handoff_is_bounded_in_characters_and_in_json_bytes() {
        assert!(check_handoff("next: finish the migration").is_ok());
        assert!(check_handoff("  ").is_err());
        assert!(check_handoff(&"a".repeat(MAX_HANDOFF_CHARS)).is_ok());
        assert!(check_handoff(&"a".repeat(MAX_HANDOFF_CHARS + 1)).is_err());
        // 10,000 control characters are 10,000 characters but 60,000 bytes of JSON escapes.
        let escaped = "\u{1}".repeat(10_000);
        assert!(matches!(
            check_handoff(&escaped),
            Err(ActivityError::TooLarge {
                limit: "handoff JSON bytes",
                ..
            })
        ));
    }

    #[test]
    fn an_excerpt_keeps_the_first_characters_and_counts_the_rest() {
        let long = "é".repeat(MAX_EXCERPT_CHARS + 5);
        let cut = excerpt(Sequence::new(3), &long);
        assert_eq!(cut.text.chars().count(), MAX_EXCERPT_CHARS);
        assert_eq!(cut.cut_chars, 5);
        assert_eq!(excerpt(Sequence::new(3), "short").cut_chars, 0);
    }
}
