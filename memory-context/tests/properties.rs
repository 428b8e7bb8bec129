//! Properties of the context layer over random threads: views within budget that never separate a
//! call from its result nor drop the current turn, compactions that never edit the log and whose folded
//! records stay reachable, a cached fold that always equals a rebuild, and retried turns that reuse
//! their references. Random forgets: no view, summary or history answer ever shows a forgotten record's
//! text (summaries here repeat the tokens of what they summarize, so a summary that covered a forgotten
//! record shows unless it is withdrawn), calls and results still pair, and a commit from a plan that
//! showed a record forgotten since is refused.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use memory_context::Strategy as ViewStrategy;
use memory_context::history::{Anchor, DEFAULT_SEARCH_SCAN, Include};
use memory_context::tokens::MESSAGE_OVERHEAD_TOKENS;
use memory_context::{
    CompactionRequest, Context, ContextError, Conversation, ConversationState, Counter, FoldReader,
    FoldScope, Role, SegmentData, SegmentKind, TurnOptions, View, ViewResult,
};
use memory_core::activity::{
    CompactionOutcome, NewRecord, RecordBody, RememberingStore, RolloverCause, Sequence, SourceId,
    ThreadId, ThreadLog, ThreadRecord,
};
use memory_testkit::InMemoryActivity;
use proptest::prelude::*;
use serde_json::json;

/// When a tool call's result arrives.
#[derive(Debug, Clone)]
enum Arrival {
    /// Right after the step's calls.
    Now,
    /// After this many later operations.
    Later(u8),
    /// Never.
    Never,
}

#[derive(Debug, Clone)]
enum Summarizer {
    /// A summary much smaller than what it replaces.
    Short,
    /// A summary exactly as long as what it replaces (refused as not smaller).
    TooLong,
    /// The summarizer fails.
    Fails,
}

#[derive(Debug, Clone)]
enum Op {
    System,
    Prompt,
    Answer,
    /// A model step: optional text before the calls, then 1 to 3 calls, each with an output size and
    /// when its result arrives.
    Step {
        text_first: bool,
        calls: Vec<(usize, Arrival)>,
    },
    RunCompleted,
    Compact {
        keep_tokens: u64,
        summarizer: Summarizer,
        measured: bool,
    },
    /// Plans a compaction now, commits a short summary for it `delay` operations later.
    PlanThenCommit {
        keep_tokens: u64,
        delay: u8,
    },
    /// Assembles the turn twice with no append in between.
    Retry {
        budget: u64,
        panics: bool,
    },
    /// Forgets a record (the `pick`th modulo the thread's length, compactions included).
    Forget {
        pick: u16,
    },
    /// The model asks for a new context, with a handoff or not; `beside`: from a step that holds
    /// another call too (refused).
    Rollover {
        handoff: bool,
        beside: bool,
    },
    /// Prepares a turn with the automatic rollover on.
    AutoTurn {
        budget: u64,
    },
    /// A new process: a fresh context over the same log, whose first read starts from the thread's
    /// checkpoint.
    Restart,
}

fn output_size() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0usize..300, 1 => 2_000usize..12_000]
}

fn arrival() -> impl Strategy<Value = Arrival> {
    prop_oneof![
        5 => Just(Arrival::Now),
        3 => (1u8..6).prop_map(Arrival::Later),
        1 => Just(Arrival::Never),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::System),
        5 => Just(Op::Prompt),
        4 => Just(Op::Answer),
        5 => (any::<bool>(), prop::collection::vec((output_size(), arrival()), 1..=3))
            .prop_map(|(text_first, calls)| Op::Step { text_first, calls }),
        1 => Just(Op::RunCompleted),
        2 => (
            0u64..3_000,
            prop_oneof![
                4 => Just(Summarizer::Short),
                2 => Just(Summarizer::TooLong),
                1 => Just(Summarizer::Fails),
            ],
            prop::bool::weighted(0.85),
        )
            .prop_map(|(keep_tokens, summarizer, measured)| Op::Compact {
                keep_tokens,
                summarizer,
                measured,
            }),
        1 => (0u64..2_000, 0u8..4)
            .prop_map(|(keep_tokens, delay)| Op::PlanThenCommit { keep_tokens, delay }),
        2 => (1u64..20_000, any::<bool>()).prop_map(|(budget, panics)| Op::Retry { budget, panics }),
        2 => any::<u16>().prop_map(|pick| Op::Forget { pick }),
        1 => (any::<bool>(), prop::bool::weighted(0.2))
            .prop_map(|(handoff, beside)| Op::Rollover { handoff, beside }),
        2 => (1u64..6_000).prop_map(|budget| Op::AutoTurn { budget }),
        1 => Just(Op::Restart),
    ]
}

fn strategy() -> impl Strategy<Value = ViewStrategy> {
    prop_oneof![
        (0usize..6, 0usize..400).prop_map(|(keep_newest, keep_chars)| {
            ViewStrategy::ElideToolOutputs {
                keep_newest,
                keep_chars,
            }
        }),
        Just(ViewStrategy::DropOldest),
        (0usize..10).prop_map(|count| ViewStrategy::KeepNewest { count }),
    ]
}

fn views() -> impl Strategy<Value = Vec<(u64, Vec<ViewStrategy>)>> {
    prop::collection::vec(
        (1u64..20_000, prop::collection::vec(strategy(), 0..4)),
        1..4,
    )
}

/// The thread being generated, and what the test knows about it.
struct Thread {
    log: std::sync::Arc<InMemoryActivity>,
    thread: ThreadId,
    next_token: u64,
    next_call: u64,
    /// Results still to arrive: operations left before they do, call id, output size.
    pending: Vec<(u8, String, usize)>,
    /// Planned compactions waiting for their commit: operations left, the request, the plan's
    /// forgotten records and the summary written from its transcript.
    planned: Vec<(u8, CompactionRequest, Vec<Sequence>, String)>,
    /// Each record's unique token (compaction records have none).
    tokens: BTreeMap<Sequence, String>,
    /// Every record some folded compaction named.
    folded: BTreeSet<Sequence>,
    /// Every record forgotten.
    forgotten: BTreeSet<Sequence>,
    /// Every rollover boundary.
    boundaries: Vec<Sequence>,
}

impl Thread {
    fn token(&mut self) -> String {
        self.next_token += 1;
        format!("zq{:06}qz", self.next_token)
    }

    fn append(&mut self, speaker: &str, body: RecordBody, token: String) -> ThreadRecord {
        let stored = self
            .log
            .append(
                &self.thread,
                NewRecord {
                    occurred_at: Some(1_700_000_000_000),
                    speaker: speaker.to_owned(),
                    observers: Vec::new(),
                    body,
                    opaque_cursor: None,
                },
            )
            .expect("append");
        self.tokens.insert(stored.sequence, token);
        stored
    }

    fn text(&mut self, kind: &str) -> (String, String) {
        let token = self.token();
        (format!("{kind} {token} with a few more words"), token)
    }

    fn deliver(&mut self, call_id: &str, size: usize) {
        let token = self.token();
        let output = format!("{token} {}", "output line of a tool ".repeat(size / 22 + 1));
        self.append(
            "tool",
            RecordBody::ToolResult {
                call_id: call_id.to_owned(),
                output: json!(output),
                is_error: size.is_multiple_of(7),
            },
            token,
        );
    }

    /// Delivers the results whose time has come (one operation passed).
    fn tick(&mut self) {
        let mut due = Vec::new();
        self.pending.retain_mut(|(left, call_id, size)| {
            if *left == 0 {
                due.push((call_id.clone(), *size));
                false
            } else {
                *left -= 1;
                true
            }
        });
        for (call_id, size) in due {
            self.deliver(&call_id, size);
        }
    }
}

/// Every record of the thread, checking that a compaction never edits what was there.
fn assert_prefix(before: &[ThreadRecord], after: &[ThreadRecord]) -> Result<(), TestCaseError> {
    prop_assert!(after.len() >= before.len(), "the log lost records");
    prop_assert_eq!(&after[..before.len()], before, "a record changed");
    Ok(())
}

fn check_view(
    view: &View,
    state: &ConversationState,
    result: &ViewResult,
) -> Result<(), TestCaseError> {
    // Within budget, and the count is the recount of what is shown.
    if result.fits {
        prop_assert!(result.tokens <= result.budget);
        prop_assert!(result.dropped.is_empty());
    }
    prop_assert_eq!(result.over_budget, result.tokens > result.budget);
    let recount = result
        .segments
        .iter()
        .map(|segment| view.segment_tokens(segment))
        .sum::<u64>()
        + result
            .summary
            .as_deref()
            .map_or(0, |summary| view.summary_tokens(summary))
        + result
            .marker
            .as_deref()
            .map_or(0, |window| view.marker_tokens(window));
    prop_assert_eq!(result.tokens, recount);
    prop_assert_eq!(
        result.tokens,
        view.counter().count_messages(&result.messages()) as u64,
        "tokens are the count of the messages shown"
    );

    // Never a system segment, the current turn's prompt (the run's input), a step still waiting for a
    // result inside the current turn, the newest segment or the summary; and a segment of the current
    // turn goes only once every earlier segment that could go has gone.
    let shown: BTreeSet<&str> = result.segments.iter().map(|s| s.id()).collect();
    let turn = state.current_turn_start();
    let newest = state.segments.len().saturating_sub(1);
    let mut in_turn_dropped = 0u64;
    for (index, segment) in state.segments.iter().enumerate() {
        let protected = segment.kind() == SegmentKind::System
            || index == newest
            || (index >= turn
                && (segment.kind() == SegmentKind::Prompt || segment.has_unresolved_call()));
        if protected {
            prop_assert!(
                shown.contains(segment.id()),
                "segment {} (instructions, input, pending call or newest) was dropped",
                segment.id()
            );
        }
        if index >= turn && !shown.contains(segment.id()) {
            in_turn_dropped += 1;
            for earlier in &state.segments[..turn] {
                prop_assert!(
                    earlier.kind() == SegmentKind::System || !shown.contains(earlier.id()),
                    "{} of the current turn was dropped before {} of an earlier one",
                    segment.id(),
                    earlier.id()
                );
            }
        }
    }
    prop_assert_eq!(result.dropped_in_turn, in_turn_dropped);
    prop_assert_eq!(&result.summary, &state.summary);
    let all: BTreeSet<&str> = state.segments.iter().map(|s| s.id()).collect();
    let dropped: BTreeSet<&str> = result.dropped.iter().map(String::as_str).collect();
    prop_assert_eq!(shown.len() + dropped.len(), all.len());
    prop_assert_eq!(shown.union(&dropped).copied().collect::<BTreeSet<_>>(), all);

    // No segment shows a call without the message for it, or a result apart from its call.
    for segment in &result.segments {
        if let SegmentData::Step { calls, results, .. } = segment.data() {
            let messages = segment.messages();
            prop_assert_eq!(messages.len(), calls.len() + 1);
            for result in results {
                prop_assert!(calls.iter().any(|call| call.call_id == result.call_id));
            }
        }
    }

    // In the messages, every call is answered by exactly one tool message right after it, and every
    // tool message answers a call of the assistant message before its run.
    let messages = result.messages();
    let mut index = 0;
    while index < messages.len() {
        let message = &messages[index];
        prop_assert!(
            message.role != Role::Tool,
            "a tool message at {} answers no call right before it",
            index
        );
        index += 1;
        if message.role == Role::Assistant && !message.tool_calls.is_empty() {
            let calls: Vec<&str> = message.tool_calls.iter().map(|c| c.id.as_str()).collect();
            let mut answered = Vec::new();
            while index < messages.len() && messages[index].role == Role::Tool {
                let id = messages[index].tool_call_id.as_deref().unwrap_or("");
                prop_assert!(calls.contains(&id), "tool message {} answers no call", id);
                answered.push(id);
                index += 1;
            }
            let mut sorted_calls = calls.clone();
            sorted_calls.sort_unstable();
            answered.sort_unstable();
            prop_assert_eq!(answered, sorted_calls, "one tool message per call");
        }
    }
    Ok(())
}

/// A summary of `messages` that repeats every token in them (so it carries what it summarizes).
fn summary_of(messages: &[memory_context::Message]) -> String {
    let text = serde_json::to_string(messages).expect("serializes");
    let mut tokens: Vec<&str> = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("zq") {
        let candidate = rest.get(at..at + 10).unwrap_or("");
        if candidate.len() == 10 && candidate.ends_with("qz") && !tokens.contains(&candidate) {
            tokens.push(candidate);
        }
        rest = &rest[at + 2..];
    }
    format!("Earlier: {}.", tokens.join(" "))
}

/// No forgotten record's token in `text`.
fn check_nothing_forgotten(thread: &Thread, text: &str, what: &str) -> Result<(), TestCaseError> {
    for sequence in &thread.forgotten {
        if let Some(token) = thread.tokens.get(sequence) {
            prop_assert!(
                !text.contains(token.as_str()),
                "{} shows forgotten record {}'s text",
                what,
                sequence
            );
        }
    }
    Ok(())
}

/// A memory block that fits what is left (an empty one when nothing does).
fn memory_block(query: &str, remaining: u64) -> (String, u64) {
    let text = format!("[memory:1] what is known about: {query}");
    let tokens = (MESSAGE_OVERHEAD_TOKENS + Counter::default().count(&text)) as u64;
    if tokens <= remaining {
        (text, 1)
    } else {
        (String::new(), 0)
    }
}

fn check_history(
    context: &Context,
    thread: &Thread,
    page_records: usize,
    page_bytes: usize,
) -> Result<(), TestCaseError> {
    let records = all_records(&*thread.log, &thread.thread);
    // Without forgets every folded compaction applies; with them, a withdrawn one folds nothing.
    let summary = context.read(&thread.thread).expect("read").state.summary;
    let folded = |sequence: &Sequence| {
        if thread.forgotten.is_empty() {
            thread.folded.contains(sequence)
        } else {
            summary
                .as_ref()
                .is_some_and(|summary| summary.covers(*sequence))
        }
    };
    let mut seen = Vec::new();
    let mut after = Sequence::ZERO;
    loop {
        let page = context
            .history_read(
                &thread.thread,
                after,
                page_records,
                page_bytes,
                Include::ALL,
            )
            .expect("history page");
        check_nothing_forgotten(
            thread,
            &serde_json::to_string(&page).expect("serializes"),
            "a history page",
        )?;
        for record in &page.records {
            prop_assert_eq!(
                record.forgotten,
                thread.forgotten.contains(&record.sequence),
                "record {} forgotten flag",
                record.sequence
            );
            prop_assert_eq!(
                record.folded,
                folded(&record.sequence),
                "record {} folded flag",
                record.sequence
            );
            seen.push(record.sequence);
        }
        match page.next_after {
            Some(next) => {
                prop_assert!(next > after, "a page moves forward");
                after = next;
            }
            None => break,
        }
    }
    let expected: Vec<Sequence> = records.iter().map(|record| record.sequence).collect();
    prop_assert_eq!(
        seen,
        expected.clone(),
        "history pages reach every record once"
    );

    // Backward from the newest record, newest first, each record in its window.
    if let Some(&newest) = expected.last() {
        let mut seen = Vec::new();
        let mut before = newest;
        loop {
            let page = context
                .history_read(
                    &thread.thread,
                    Anchor::Before(before),
                    page_records,
                    page_bytes,
                    Include::ALL,
                )
                .expect("history page");
            for record in &page.records {
                prop_assert_eq!(
                    record.window,
                    1 + thread
                        .boundaries
                        .iter()
                        .filter(|b| **b <= record.sequence)
                        .count() as u64,
                    "record {} window",
                    record.sequence
                );
                seen.push(record.sequence);
            }
            prop_assert!(page.next_after.is_none());
            match page.next_before {
                Some(next) => {
                    prop_assert!(next < before, "a page moves backward");
                    before = next;
                }
                None => break,
            }
        }
        let mut older: Vec<Sequence> = expected[..expected.len() - 1].to_vec();
        older.reverse();
        prop_assert_eq!(
            seen,
            older,
            "pages before the newest reach every older record once"
        );
    }

    // A folded record's unique token finds it (a sample, so large threads stay quick).
    for sequence in thread.folded.iter().step_by(thread.folded.len() / 8 + 1) {
        let Some(token) = thread.tokens.get(sequence) else {
            continue;
        };
        let found = context
            .history_search(
                &thread.thread,
                token,
                Sequence::ZERO,
                10,
                DEFAULT_SEARCH_SCAN,
                Include::ALL,
            )
            .expect("search");
        if thread.forgotten.contains(sequence) {
            prop_assert!(found.matches.is_empty(), "forgotten token {} found", token);
            continue;
        }
        // The record first; summaries that repeat its token come after it.
        prop_assert!(!found.matches.is_empty(), "token {} not found", token);
        prop_assert_eq!(found.matches[0].sequence, *sequence);
        prop_assert_eq!(found.matches[0].folded, folded(sequence));
        prop_assert!(found.matches[0].text.contains(token.as_str()));
    }
    for sequence in &thread.forgotten {
        let Some(token) = thread.tokens.get(sequence) else {
            continue;
        };
        let found = context
            .history_search(
                &thread.thread,
                token,
                Sequence::ZERO,
                10,
                DEFAULT_SEARCH_SCAN,
                Include::ALL,
            )
            .expect("search");
        prop_assert!(found.matches.is_empty(), "forgotten token {} found", token);
    }
    Ok(())
}

fn run(
    ops: Vec<Op>,
    context_strategies: Vec<ViewStrategy>,
    views: Vec<(u64, Vec<ViewStrategy>)>,
    page: (usize, usize),
) -> Result<(), TestCaseError> {
    let log = log();
    // Checkpoints every few records, so restarts start from them.
    let fresh_context = {
        let log = log.clone();
        move || {
            Context::with_view(
                log.clone(),
                View::new(Counter::default(), context_strategies.clone()),
            )
            .forgetting(log.clone())
            .checkpointing(Some(3))
        }
    };
    let mut context = fresh_context();
    let rebuild =
        FoldReader::new(Conversation, FoldScope::Thread, log.clone()).forgetting(log.clone());
    let views: Vec<(u64, View)> = views
        .into_iter()
        .map(|(budget, strategies)| (budget, View::new(Counter::default(), strategies)))
        .collect();
    let mut thread = Thread {
        log,
        thread: thread("p"),
        next_token: 0,
        next_call: 0,
        pending: Vec::new(),
        planned: Vec::new(),
        tokens: BTreeMap::new(),
        folded: BTreeSet::new(),
        forgotten: BTreeSet::new(),
        boundaries: Vec::new(),
    };
    for op in ops {
        thread.tick();
        let mut due = Vec::new();
        thread
            .planned
            .retain_mut(|(left, request, forgotten, summary)| {
                if *left == 0 {
                    due.push((request.clone(), forgotten.clone(), summary.clone()));
                    false
                } else {
                    *left -= 1;
                    true
                }
            });
        for (request, forgotten, summary) in due {
            let before = all_records(&*thread.log, &thread.thread);
            let committed =
                match context.commit_compaction(&thread.thread, &request, summary, &forgotten) {
                    Err(ContextError::ForgottenSincePlan { records }) => {
                        prop_assert!(
                            records
                                .iter()
                                .all(|record| thread.forgotten.contains(record)
                                    && !forgotten.contains(record))
                        );
                        let after = all_records(&*thread.log, &thread.thread);
                        prop_assert_eq!(after, before, "a refused commit appends nothing");
                        continue;
                    }
                    other => other.expect("commit"),
                };
            if committed.compaction.outcome == CompactionOutcome::Folded {
                prop_assert!(
                    committed
                        .compaction
                        .folded
                        .iter()
                        .all(|range| Some(range.last) <= request.through)
                );
            }
            record_compaction(
                &mut thread,
                &before,
                committed.sequence,
                &committed.compaction,
            )?;
        }
        match op {
            Op::System => {
                let (text, token) = thread.text("system");
                thread.append("host", RecordBody::SystemMessage { text }, token);
            }
            Op::Prompt => {
                let (text, token) = thread.text("prompt");
                thread.append("ana", RecordBody::UserInput { text }, token);
            }
            Op::Answer => {
                let (text, token) = thread.text("answer");
                thread.append("assistant", RecordBody::AssistantMessage { text }, token);
            }
            Op::Step { text_first, calls } => {
                if text_first {
                    let (text, token) = thread.text("let me check");
                    thread.append("assistant", RecordBody::AssistantMessage { text }, token);
                }
                let mut now = Vec::new();
                for (size, arrival) in calls {
                    thread.next_call += 1;
                    let call_id = format!("call-{}", thread.next_call);
                    let token = thread.token();
                    thread.append(
                        "assistant",
                        RecordBody::ToolCall {
                            call_id: call_id.clone(),
                            name: "read_file".to_owned(),
                            arguments: json!({ "path": token }),
                        },
                        token,
                    );
                    match arrival {
                        Arrival::Now => now.push((call_id, size)),
                        Arrival::Later(left) => thread.pending.push((left, call_id, size)),
                        Arrival::Never => {}
                    }
                }
                for (call_id, size) in now {
                    thread.deliver(&call_id, size);
                }
            }
            Op::RunCompleted => {
                let token = thread.token();
                thread.append(
                    "host",
                    RecordBody::RunCompleted {
                        outcome: format!("completed {token}"),
                    },
                    token,
                );
            }
            Op::Compact {
                keep_tokens,
                summarizer,
                measured,
            } => {
                let before = all_records(&*thread.log, &thread.thread);
                let request = CompactionRequest {
                    measured_input_tokens: measured.then_some(40_000),
                    keep_tokens,
                    through: None,
                    summarizer: Some("small-model".to_owned()),
                };
                let outcome = context.compact(&thread.thread, &request, |plan| match summarizer {
                    Summarizer::Short => Ok(summary_of(&plan.transcript())),
                    Summarizer::TooLong => Ok("s".repeat(
                        (plan.replaced_chars as usize)
                            .clamp(1, memory_core::activity::compaction::MAX_SUMMARY_BYTES),
                    )),
                    Summarizer::Fails => Err("the summarizer is down"),
                });
                match (measured, &summarizer, outcome) {
                    (false, _, Err(ContextError::Unmeasured))
                    | (_, Summarizer::Fails, Err(ContextError::Summarizer(_))) => {
                        let after = all_records(&*thread.log, &thread.thread);
                        prop_assert_eq!(after, before, "a refused compaction appends nothing");
                    }
                    (true, _, Ok(compacted)) => {
                        if matches!(summarizer, Summarizer::TooLong)
                            && compacted.compaction.replaced_chars
                                <= memory_core::activity::compaction::MAX_SUMMARY_BYTES as u64
                        {
                            prop_assert_ne!(
                                compacted.compaction.outcome,
                                CompactionOutcome::Folded
                            );
                        }
                        record_compaction(
                            &mut thread,
                            &before,
                            compacted.sequence,
                            &compacted.compaction,
                        )?;
                    }
                    (_, _, other) => {
                        prop_assert!(
                            false,
                            "unexpected compaction answer {:?}",
                            other.map(|c| c.compaction)
                        );
                    }
                }
            }
            Op::PlanThenCommit { keep_tokens, delay } => {
                let request = CompactionRequest {
                    measured_input_tokens: Some(30_000),
                    keep_tokens,
                    through: None,
                    summarizer: None,
                };
                let plan = context
                    .plan_compaction(&thread.thread, &request)
                    .expect("plan");
                if let Some(through) = plan.through
                    && plan.replaced_chars > 100
                {
                    thread.planned.push((
                        delay,
                        CompactionRequest {
                            through: Some(through),
                            ..request
                        },
                        plan.forgotten.clone(),
                        summary_of(&plan.transcript()),
                    ));
                }
            }
            Op::Retry { budget, panics } => {
                let first = context
                    .assemble(&thread.thread, budget, None, |query, remaining| {
                        Ok::<_, String>(memory_block(query, remaining))
                    })
                    .expect("assembled");
                let retry = context
                    .assemble(
                        &thread.thread,
                        budget,
                        None,
                        |_, _| -> Result<(String, u64), String> {
                            if panics {
                                panic!("a retried turn loads nothing")
                            }
                            Err("a retried turn loads nothing".to_owned())
                        },
                    )
                    .expect("retried");
                prop_assert_eq!(&retry.messages, &first.messages);
                prop_assert_eq!(retry.tokens, first.tokens);
                if let Some(memory) = &first.memory {
                    let again = retry.memory.as_ref().expect("the retry has the memory");
                    prop_assert!(again.reused);
                    prop_assert_eq!((&again.query, again.turn), (&memory.query, memory.turn));
                } else {
                    prop_assert!(retry.memory.is_none());
                }
            }
            Op::Rollover { handoff, beside } => {
                if beside {
                    for name in ["memory_new_context", "read_file"] {
                        thread.next_call += 1;
                        let call_id = format!("call-{}", thread.next_call);
                        let token = thread.token();
                        thread.append(
                            "assistant",
                            RecordBody::ToolCall {
                                call_id: call_id.clone(),
                                name: name.to_owned(),
                                arguments: json!({ "note": token }),
                            },
                            token,
                        );
                        thread.pending.push((0, call_id, 10));
                    }
                }
                let before = all_records(&*thread.log, &thread.thread);
                let (text, token) = if handoff {
                    let (text, token) = thread.text("handoff");
                    (Some(text), Some(token))
                } else {
                    (None, None)
                };
                match context.roll_over(&thread.thread, text, RolloverCause::Model) {
                    Err(ContextError::Invalid { field, .. }) => {
                        prop_assert!(beside, "only a step with other calls refuses");
                        prop_assert_eq!(field, "memory_new_context");
                        let after = all_records(&*thread.log, &thread.thread);
                        prop_assert_eq!(after, before, "a refused rollover appends nothing");
                    }
                    Ok(Some(rolled)) => {
                        prop_assert!(!beside, "a step with other calls never rolls over");
                        let after = all_records(&*thread.log, &thread.thread);
                        assert_prefix(&before, &after)?;
                        prop_assert_eq!(after.len(), before.len() + 1);
                        prop_assert_eq!(after.last().map(|r| r.sequence), Some(rolled.sequence));
                        roll(&mut thread, rolled.sequence, token);
                    }
                    Ok(None) => {
                        prop_assert!(!beside, "a step with other calls is refused");
                        let after = all_records(&*thread.log, &thread.thread);
                        prop_assert_eq!(after, before, "a no-op rollover appends nothing");
                    }
                    Err(other) => prop_assert!(false, "unexpected rollover answer {}", other),
                }
            }
            Op::AutoTurn { budget } => {
                let before = all_records(&*thread.log, &thread.thread);
                let plan = context
                    .prepare_turn_with(
                        &thread.thread,
                        budget,
                        TurnOptions {
                            auto_rollover: true,
                            ..TurnOptions::default()
                        },
                    )
                    .expect("turn");
                let after = all_records(&*thread.log, &thread.thread);
                assert_prefix(&before, &after)?;
                if after.len() > before.len() {
                    prop_assert_eq!(after.len(), before.len() + 1, "one rollover at most");
                    let last = after.last().expect("the rollover");
                    prop_assert!(matches!(
                        &last.record.body,
                        RecordBody::Rollover(rollover) if rollover.cause == RolloverCause::Automatic
                    ));
                    roll(&mut thread, last.sequence, None);
                }
                prop_assert_eq!(
                    plan.history.view.dropped_in_turn,
                    0,
                    "the automatic rollover leaves nothing of the turn to drop"
                );
            }
            Op::Restart => context = fresh_context(),
            Op::Forget { pick } => {
                let records = all_records(&*thread.log, &thread.thread);
                if !records.is_empty() {
                    let record = &records[usize::from(pick) % records.len()];
                    thread
                        .log
                        .suppress(
                            &SourceId::thread_record(&thread.thread, record.sequence),
                            None,
                            1_800_000_000_000,
                        )
                        .expect("forget");
                    thread.forgotten.insert(record.sequence);
                    let after = all_records(&*thread.log, &thread.thread);
                    prop_assert_eq!(after, records, "a forget edits no record");
                }
            }
        }

        // The cached fold equals a rebuild after every step.
        let cached = context.read(&thread.thread).expect("read");
        let rebuilt = rebuild.read_uncached(&thread.thread).expect("rebuild");
        prop_assert_eq!(&cached.state, &rebuilt.state);
        prop_assert_eq!(cached.through, rebuilt.through);
        prop_assert_eq!(&cached.report, &rebuilt.report);

        // The instructions and the current input are always in the state a view cuts.
        let records = all_records(&*thread.log, &thread.thread);
        let ids: BTreeSet<&str> = cached.state.segments.iter().map(|s| s.id()).collect();
        for record in &records {
            if matches!(record.record.body, RecordBody::SystemMessage { .. }) {
                let id = format!("system:{}", record.sequence);
                prop_assert!(ids.contains(id.as_str()), "instructions {} lost", id);
            }
        }
        if let Some(prompt) = records
            .iter()
            .rfind(|record| matches!(record.record.body, RecordBody::UserInput { .. }))
        {
            let id = format!("prompt:{}", prompt.sequence);
            prop_assert!(ids.contains(id.as_str()), "the current input {} lost", id);
        }
        prop_assert_eq!(&cached.state.boundaries, &thread.boundaries);

        let thread_view = context.view(&thread.thread, views[0].0).expect("view");
        check_view(context.view_rules(), &cached.state, &thread_view.view)?;
        check_nothing_forgotten(
            &thread,
            &serde_json::to_string(&thread_view.view.messages()).expect("serializes"),
            "the context's view",
        )?;
        for (budget, view) in &views {
            let result = view.apply(&cached.state, *budget).expect("view");
            check_view(view, &cached.state, &result)?;
            check_nothing_forgotten(
                &thread,
                &serde_json::to_string(&result.messages()).expect("serializes"),
                "a view",
            )?;
        }
        // A plan never hands the summarizer a forgotten record's text.
        let plan = context
            .plan_compaction(
                &thread.thread,
                &CompactionRequest {
                    measured_input_tokens: Some(1),
                    keep_tokens: 0,
                    through: None,
                    summarizer: None,
                },
            )
            .expect("plan");
        check_nothing_forgotten(
            &thread,
            &serde_json::to_string(&plan.transcript()).expect("serializes"),
            "a plan's transcript",
        )?;
    }
    check_history(&context, &thread, page.0, page.1)?;
    Ok(())
}

/// Notes a rollover at `sequence` (its handoff's `token`): the summary in place goes with it.
fn roll(thread: &mut Thread, sequence: Sequence, token: Option<String>) {
    thread.boundaries.push(sequence);
    thread.folded.clear();
    if let Some(token) = token {
        thread.tokens.insert(sequence, token);
    }
}

/// Checks a compaction's append and notes what it folded.
fn record_compaction(
    thread: &mut Thread,
    before: &[ThreadRecord],
    sequence: Sequence,
    compaction: &memory_core::activity::CompactionRecord,
) -> Result<(), TestCaseError> {
    let after = all_records(&*thread.log, &thread.thread);
    assert_prefix(before, &after)?;
    prop_assert_eq!(
        after.len(),
        before.len() + 1,
        "a compaction appends one record"
    );
    let last = after.last().expect("the compaction record");
    prop_assert_eq!(last.sequence, sequence);
    prop_assert_eq!(
        &last.record.body,
        &RecordBody::Compaction(compaction.clone())
    );
    // Each record gets at most one answer: folded, or refused for one reason.
    let mut answered = BTreeSet::new();
    for range in compaction
        .folded
        .iter()
        .chain(compaction.refusals.iter().map(|refusal| &refusal.range))
    {
        for record in range.first.get()..=range.last.get() {
            prop_assert!(
                answered.insert(record),
                "record {} has two answers in {:?}",
                record,
                compaction
            );
        }
    }
    for range in &compaction.folded {
        prop_assert!(range.last < sequence);
        for folded in range.first.get()..=range.last.get() {
            thread.folded.insert(Sequence::new(folded));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(memory_testkit::proptest_config())]

    #[test]
    fn random_threads_keep_every_context_promise(
        ops in prop::collection::vec(op(), 1..60),
        context_strategies in prop::collection::vec(strategy(), 0..4),
        views in views(),
        page in (1usize..40, 50usize..20_000),
    ) {
        run(ops, context_strategies, views, page)?;
    }
}
