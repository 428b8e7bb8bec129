//! Views: a conversation's state trimmed to a token budget, as a pure function.
//!
//! A view counts the state's tokens and applies its strategies in order, each at most once and only
//! while the state is over budget, recounting after each. Strategies work on whole segments, so a view
//! never separates a tool call from its result; none drops a system segment, the summary, the window
//! marker, the current turn's prompt, a step still waiting for a tool result or the newest segment.
//! Inside the current turn (a long run of tool calls after one prompt), the settled steps and answers
//! before the newest segment may go, oldest first, but only after every earlier turn has gone: that is
//! the pruning that lets an hour-long run fit (the context's automatic rollover turns it into a
//! window boundary instead; see [`crate::window`]). A view never changes the state it reads.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;

use crate::ContextError;
use crate::conversation::{ConversationState, Summary};
use crate::segment::{Message, Segment, SegmentKind};
use crate::tokens::Counter;
use crate::window::{Window, WindowIdentity};

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// Most tokens a budget may name (a budget of "no limit" in practice).
pub const MAX_BUDGET_TOKENS: u64 = 1 << 40;

/// One way of bringing a state under budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    /// Cuts the tool outputs of every segment older than the newest `keep_newest` to `keep_chars`
    /// characters, with a note naming the record that holds the whole output. Removes no segment.
    ElideToolOutputs {
        /// Segments kept whole, newest first.
        keep_newest: usize,
        /// Characters of each output kept.
        keep_chars: usize,
    },
    /// Drops whole segments, oldest first, until the state fits.
    DropOldest,
    /// Drops every segment older than the newest `count`.
    KeepNewest {
        /// Segments kept.
        count: usize,
    },
}

/// Segments [`Strategy::ElideToolOutputs`] keeps whole by default.
pub const DEFAULT_ELIDE_KEEP_NEWEST: usize = 4;
/// Characters of an old tool output a default view keeps.
pub const DEFAULT_ELIDE_KEEP_CHARS: usize = 200;

/// A budgeted view: a counter and strategies.
#[derive(Debug, Clone)]
pub struct View {
    counter: Counter,
    strategies: Vec<Strategy>,
}

impl Default for View {
    /// Elide old tool outputs (the newest [`DEFAULT_ELIDE_KEEP_NEWEST`] segments whole), then drop the
    /// oldest segments, with the approximate counter.
    fn default() -> Self {
        Self::new(
            Counter::default(),
            vec![
                Strategy::ElideToolOutputs {
                    keep_newest: DEFAULT_ELIDE_KEEP_NEWEST,
                    keep_chars: DEFAULT_ELIDE_KEEP_CHARS,
                },
                Strategy::DropOldest,
            ],
        )
    }
}

/// A view of a state under a budget. Its wire form is the report: everything but the summary and
/// the segments, which travel as messages ([`ViewResult::messages`]).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ViewResult {
    /// The summary of folded records (never dropped).
    #[serde(skip)]
    pub summary: Option<Arc<Summary>>,
    /// The segments shown, in log order (system segments included).
    #[serde(skip)]
    pub segments: Vec<Arc<Segment>>,
    /// Tokens of what is shown, as the view's counter counts them.
    pub tokens: u64,
    /// The budget.
    pub budget: u64,
    /// Whether `tokens` exceeds the budget even after every strategy (the current turn alone is too big).
    pub over_budget: bool,
    /// Whether the whole state is shown within the budget: nothing dropped, not over budget. A view that
    /// had to drop segments is within budget but does not fit: that is when to compact.
    pub fits: bool,
    /// Ids of the segments dropped, oldest first.
    pub dropped: Vec<String>,
    /// Ids of the segments shown with elided tool outputs.
    pub elided: Vec<String>,
    /// Of `dropped`, the segments of the current turn (settled steps and answers after its prompt).
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_in_turn: u64,
    /// The window shown (1 until the thread's first rollover).
    pub window: WindowIdentity,
    /// The window marker (after a rollover), shown after the system segments.
    #[serde(skip)]
    pub marker: Option<Arc<Window>>,
    /// The compactions whose summaries are withdrawn because they covered a record forgotten since
    /// (their records are shown again, under the same budget rules), until a compaction applies again.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub summary_withdrawn: Vec<memory_core::activity::Sequence>,
}

impl ViewResult {
    /// The chat messages: system segments first, then the summary in its frame, then the rest in order.
    pub fn messages(&self) -> Vec<Message> {
        let mut messages = Vec::new();
        for segment in &self.segments {
            if segment.kind() == SegmentKind::System {
                messages.extend(segment.messages());
            }
        }
        if let Some(marker) = &self.marker {
            messages.push(marker.message());
        }
        if let Some(summary) = &self.summary {
            messages.push(summary.message());
        }
        for segment in &self.segments {
            if segment.kind() != SegmentKind::System {
                messages.extend(segment.messages());
            }
        }
        messages
    }
}

/// Where [`View::split`] cuts a state for a compaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Index of the first kept segment; every non-system segment before it is to be summarized.
    pub kept_from: usize,
    /// Tokens of the kept non-system segments.
    pub kept_tokens: u64,
}

/// Checks a token budget: between 1 and [`MAX_BUDGET_TOKENS`].
pub fn check_budget(budget: u64) -> Result<u64, ContextError> {
    if budget == 0 || budget > MAX_BUDGET_TOKENS {
        return Err(ContextError::invalid(
            "budget",
            format!("must be between 1 and {MAX_BUDGET_TOKENS} tokens"),
        ));
    }
    Ok(budget)
}

impl View {
    /// A view counting with `counter` and applying `strategies` in order.
    pub fn new(counter: Counter, strategies: Vec<Strategy>) -> Self {
        Self {
            counter,
            strategies,
        }
    }

    /// Its strategies, in order.
    pub fn strategies(&self) -> &[Strategy] {
        &self.strategies
    }

    /// Its counter.
    pub fn counter(&self) -> &Counter {
        &self.counter
    }

    /// Tokens of the summary's message.
    pub fn summary_tokens(&self, summary: &Summary) -> u64 {
        self.counter.count_messages(&[summary.message()]) as u64
    }

    /// Tokens of a window marker's message.
    pub fn marker_tokens(&self, window: &Window) -> u64 {
        self.counter.count_messages(&[window.message()]) as u64
    }

    /// Tokens of a segment.
    pub fn segment_tokens(&self, segment: &Segment) -> u64 {
        segment.tokens(&self.counter) as u64
    }

    /// Trims `state` to `budget` tokens (see the module docs); the budget must pass [`check_budget`].
    pub fn apply(
        &self,
        state: &ConversationState,
        budget: u64,
    ) -> Result<ViewResult, ContextError> {
        let budget = check_budget(budget)?;
        let protected_from = state.current_turn_start();
        let mut segments: Vec<(usize, Arc<Segment>)> =
            state.segments.iter().cloned().enumerate().collect();
        let mut tokens = state
            .summary
            .as_deref()
            .map_or(0, |summary| self.summary_tokens(summary))
            + state
                .window
                .as_deref()
                .map_or(0, |window| self.marker_tokens(window))
            + segments
                .iter()
                .map(|(_, segment)| self.segment_tokens(segment))
                .sum::<u64>();
        let mut dropped = Vec::new();
        let mut elided = Vec::new();
        let newest = state.segments.len().saturating_sub(1);
        let droppable = |index: usize, segment: &Segment| match segment.kind() {
            SegmentKind::System => false,
            _ if index < protected_from => true,
            SegmentKind::Prompt => false,
            SegmentKind::Step => index < newest && !segment.has_unresolved_call(),
            SegmentKind::Answer => index < newest,
        };
        let mut dropped_in_turn = 0u64;
        for strategy in &self.strategies {
            if tokens <= budget {
                break;
            }
            match strategy {
                Strategy::ElideToolOutputs {
                    keep_newest,
                    keep_chars,
                } => {
                    let old = segments.len().saturating_sub(*keep_newest);
                    for (_, segment) in segments.iter_mut().take(old) {
                        let short = segment.elided(*keep_chars);
                        if !Arc::ptr_eq(&short, segment) {
                            tokens =
                                tokens - self.segment_tokens(segment) + self.segment_tokens(&short);
                            elided.push(short.id().to_owned());
                            *segment = short;
                        }
                    }
                }
                Strategy::DropOldest => {
                    let mut kept = Vec::with_capacity(segments.len());
                    for (index, segment) in segments {
                        if tokens > budget && droppable(index, &segment) {
                            tokens -= self.segment_tokens(&segment);
                            dropped_in_turn += u64::from(index >= protected_from);
                            dropped.push(segment.id().to_owned());
                        } else {
                            kept.push((index, segment));
                        }
                    }
                    segments = kept;
                }
                Strategy::KeepNewest { count } => {
                    let old = segments.len().saturating_sub(*count);
                    let mut kept = Vec::with_capacity(segments.len());
                    for (position, (index, segment)) in segments.into_iter().enumerate() {
                        if position < old && droppable(index, &segment) {
                            tokens -= self.segment_tokens(&segment);
                            dropped_in_turn += u64::from(index >= protected_from);
                            dropped.push(segment.id().to_owned());
                        } else {
                            kept.push((index, segment));
                        }
                    }
                    segments = kept;
                }
            }
        }
        // A set: a long thread's view both elides and drops thousands of segments.
        let dropped_ids: HashSet<&str> = dropped.iter().map(String::as_str).collect();
        elided.retain(|id| !dropped_ids.contains(id.as_str()));
        let over_budget = tokens > budget;
        Ok(ViewResult {
            summary: state.summary.clone(),
            segments: segments.into_iter().map(|(_, segment)| segment).collect(),
            tokens,
            budget,
            over_budget,
            fits: !over_budget && dropped.is_empty(),
            dropped,
            elided,
            dropped_in_turn,
            window: WindowIdentity::of(state),
            marker: state.window.clone(),
            summary_withdrawn: state.withdrawn.clone(),
        })
    }

    /// Cuts `state` for a compaction that keeps `keep_tokens`: the newest whole non-system segments
    /// whose tokens fit are kept (stopping at the first that does not), and always every segment from
    /// `keep_from` on. The summary does not count: a compaction summarizes it again.
    pub fn split(&self, state: &ConversationState, keep_tokens: u64, keep_from: usize) -> Split {
        let mut kept_tokens = 0u64;
        let mut kept_from = state.segments.len();
        for (index, segment) in state.segments.iter().enumerate().rev() {
            if segment.kind() == SegmentKind::System {
                continue;
            }
            let tokens = self.segment_tokens(segment);
            if index >= keep_from || kept_tokens + tokens <= keep_tokens {
                kept_tokens += tokens;
                kept_from = index;
            } else {
                break;
            }
        }
        Split {
            kept_from: kept_from.min(keep_from),
            kept_tokens,
        }
    }
}
