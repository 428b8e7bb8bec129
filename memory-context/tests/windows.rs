//! Windows: pruning inside a long turn, the rollover boundary (by the model, or automatic), what a
//! new window shows, and history read backward with each record's window.

use crate::common;

use common::*;
use memory_context::history::{Anchor, Include};
use memory_context::{Context, ContextError, Role, TurnOptions, memory_reserve};
use memory_core::activity::{
    RecordBody, RememberingStore, RolloverCause, Sequence, SourceId, ThreadLog,
};

/// The hour-three run: one prompt, then 500 tool calls with results, the turn assembled every 10
/// calls under 8,000 tokens with the automatic rollover on.
#[test]
fn an_hour_long_turn_fits_its_budget_by_pruning_and_automatic_rollovers() {
    let log = log();
    let thread = thread("hour-three");
    let context = Context::new(log.clone()).forgetting(log.clone());
    system(&*log, &thread, "You are a careful build agent.");
    let prompt = user(&*log, &thread, "Migrate every crate to the new error type.");
    let budget = 8_000;
    let mut rollovers = 0;
    for index in 0..500 {
        let call_id = format!("call-{index}");
        call(&*log, &thread, &call_id, "run_tests");
        result(
            &*log,
            &thread,
            &call_id,
            &format!("test output {index}: {}", "ok line ".repeat(120)),
        );
        if index % 10 != 9 {
            continue;
        }
        let before = log.inspect_tail(&thread).expect("tail");
        let plan = context
            .prepare_turn_with(
                &thread,
                budget,
                TurnOptions {
                    memory_reserve: Some(memory_reserve(budget)),
                    auto_rollover: true,
                    ..TurnOptions::default()
                },
            )
            .expect("turn");
        let after = log.inspect_tail(&thread).expect("tail");
        rollovers += after.get() - before.get();
        let view = &plan.history.view;
        assert!(!view.over_budget, "call {index}: {} tokens", view.tokens);
        assert_eq!(
            view.dropped_in_turn, 0,
            "the rollover, not a drop, made it fit"
        );
        let messages = view.messages();
        assert_eq!(
            messages[0].role,
            Role::System,
            "the instructions come first"
        );
        assert!(
            messages
                .iter()
                .any(|message| message.content == "Migrate every crate to the new error type."),
            "the run's input survives every window"
        );
        // Every call shown is answered right after it.
        for (at, message) in messages.iter().enumerate() {
            for (offset, call) in message.tool_calls.iter().enumerate() {
                assert_eq!(
                    messages[at + 1 + offset].tool_call_id.as_deref(),
                    Some(call.id.as_str())
                );
            }
        }
    }
    assert!(rollovers >= 1, "an automatic rollover happened");
    let state = context.read(&thread).expect("read").state;
    assert_eq!(state.boundaries.len() as u64, rollovers);
    assert_eq!(
        state.current_prompt().map(|p| p.first()),
        Some(prompt.sequence)
    );
    // Every record stays reachable, and says which window it is in.
    let first_boundary = state.boundaries[0];
    let page = context
        .history_read(
            &thread,
            Anchor::Before(first_boundary),
            3,
            1 << 20,
            Include::ALL,
        )
        .expect("page");
    assert_eq!(page.records.len(), 3);
    assert_eq!(
        page.records[0].sequence,
        first_boundary.saturating_previous()
    );
    assert!(page.records.iter().all(|record| record.window == 1));
    assert_eq!(page.next_before, Some(page.records[2].sequence));
    let after = context
        .history_read(&thread, first_boundary, 1, 1 << 20, Include::ALL)
        .expect("page");
    assert_eq!(after.records[0].window, 2);
}

#[test]
fn a_rollover_shows_instructions_input_handoff_trailing_messages_and_pending_calls() {
    let log = log();
    let thread = thread("r");
    let context = Context::new(log.clone()).forgetting(log.clone());
    system(&*log, &thread, "Be brief.");
    user(&*log, &thread, "an old question");
    answer(&*log, &thread, "an old answer");
    let input = user(&*log, &thread, "deploy the service");
    call(&*log, &thread, "c1", "build");
    result(&*log, &thread, "c1", "built");
    call(&*log, &thread, "c2", "memory_new_context");
    let rolled = context
        .roll_over(
            &thread,
            Some("Built it; deploy is next.".to_owned()),
            RolloverCause::Model,
        )
        .expect("rollover")
        .expect("something to cover");
    assert_eq!(rolled.rollover.window, 2);
    assert_eq!(rolled.rollover.covered.first, Sequence::new(1));
    assert_eq!(rolled.rollover.covered.last, Sequence::new(7));
    result(&*log, &thread, "c2", "a new window begins");
    let view = context.view(&thread, 100_000).expect("view").view;
    let messages = view.messages();
    let texts: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts[0], "Be brief.");
    assert!(texts[1].starts_with("[window 2: this context window began at record 8"));
    assert!(texts[1].ends_with("Built it; deploy is next."));
    assert_eq!(texts[2], "deploy the service");
    assert!(!texts.iter().any(|text| text.contains("old question")));
    assert!(!texts.contains(&"built"), "a settled batch is covered");
    // The pending call and its result, which arrived after the boundary, still pair.
    assert_eq!(
        messages[3].tool_calls[0].function.name,
        "memory_new_context"
    );
    assert_eq!(messages[4].content, "a new window begins");
    assert_eq!(view.window.number, 2);
    assert_eq!(view.window.boundary, Some(rolled.sequence));
    // Nothing new to cover: a second rollover is a no-op and appends nothing.
    let tail = log.inspect_tail(&thread).expect("tail");
    assert!(
        context
            .roll_over(&thread, None, RolloverCause::Model)
            .expect("rollover")
            .is_some(),
        "the settled memory_new_context step is covered"
    );
    let tail_now = log.inspect_tail(&thread).expect("tail");
    assert_eq!(tail_now.get(), tail.get() + 1);
    assert!(
        context
            .roll_over(&thread, None, RolloverCause::Model)
            .expect("rollover")
            .is_none()
    );
    assert_eq!(log.inspect_tail(&thread).expect("tail"), tail_now);
    let _ = input;
}

#[test]
fn a_new_context_call_beside_other_calls_is_refused_with_nothing_written() {
    let log = log();
    let thread = thread("beside");
    let context = Context::new(log.clone());
    user(&*log, &thread, "a question");
    answer(&*log, &thread, "an answer");
    user(&*log, &thread, "go on");
    call(&*log, &thread, "c1", "mcp__memory__memory_new_context");
    call(&*log, &thread, "c2", "read_file");
    let tail = log.inspect_tail(&thread).expect("tail");
    let refused = context.roll_over(&thread, None, RolloverCause::Model);
    assert!(
        matches!(
            refused,
            Err(ContextError::Invalid {
                field: "memory_new_context",
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(log.inspect_tail(&thread).expect("tail"), tail);
    // The automatic rollover is the host's, not a step's: it is not refused.
    assert!(
        context
            .roll_over(&thread, None, RolloverCause::Automatic)
            .expect("rollover")
            .is_some()
    );
}

#[test]
fn excerpts_say_what_was_asked_and_called_and_a_forget_hides_their_copy() {
    let log = log();
    let thread = thread("x");
    let context = Context::new(log.clone()).forgetting(log.clone());
    let secret = user(&*log, &thread, "my locker code is 4417");
    answer(&*log, &thread, "noted");
    user(&*log, &thread, "now fix the build");
    call(&*log, &thread, "c1", "cargo_build");
    result(&*log, &thread, "c1", "error[E0425]");
    answer(&*log, &thread, "fixed");
    user(&*log, &thread, "thanks");
    let rolled = context
        .roll_over(&thread, None, RolloverCause::Automatic)
        .expect("rollover")
        .expect("covers");
    let excerpts = rolled
        .rollover
        .excerpts
        .expect("excerpts without a handoff");
    assert_eq!(
        excerpts.user_messages.len(),
        2,
        "the kept prompt is not excerpted"
    );
    assert_eq!(excerpts.last_tool_batch.len(), 1);
    let marker = context
        .view(&thread, 100_000)
        .expect("view")
        .view
        .messages()[0]
        .content
        .clone();
    assert!(marker.contains("my locker code is 4417"));
    assert!(marker.contains("cargo_build"));
    assert!(!marker.to_lowercase().contains("succeeded") || marker.contains("do not say whether"));
    log.suppress(
        &SourceId::thread_record(&thread, secret.sequence),
        None,
        1_800_000_000_000,
    )
    .expect("forget");
    let marker = context
        .view(&thread, 100_000)
        .expect("view")
        .view
        .messages()[0]
        .content
        .clone();
    assert!(!marker.contains("4417"), "{marker}");
    assert!(marker.contains(&format!("user (record {}): [forgotten]", secret.sequence)));
    // The record itself is still in the log, shown as its placeholder.
    let stored = log
        .read_page(&thread, Sequence::ZERO, 100)
        .expect("page")
        .into_iter()
        .any(|record| matches!(&record.record.body, RecordBody::Rollover(_)));
    assert!(stored);
}

#[test]
fn history_before_is_bounded_newest_first_and_refuses_an_anchor_outside_the_thread() {
    let log = log();
    let thread = thread("h");
    let context = Context::new(log.clone());
    for index in 0..10 {
        user(&*log, &thread, &format!("message {index}"));
    }
    let page = context
        .history_read(
            &thread,
            Anchor::Before(Sequence::new(6)),
            2,
            1 << 20,
            Include::default(),
        )
        .expect("page");
    let sequences: Vec<u64> = page.records.iter().map(|r| r.sequence.get()).collect();
    assert_eq!(sequences, vec![5, 4]);
    assert_eq!(page.next_before, Some(Sequence::new(4)));
    let last = context
        .history_read(
            &thread,
            Anchor::Before(Sequence::new(3)),
            10,
            1 << 20,
            Include::default(),
        )
        .expect("page");
    assert_eq!(last.records.len(), 2);
    assert_eq!(last.next_before, None);
    let found = context
        .history_search(
            &thread,
            "message",
            Anchor::Before(Sequence::new(9)),
            3,
            100,
            Include::default(),
        )
        .expect("search");
    let sequences: Vec<u64> = found.matches.iter().map(|r| r.sequence.get()).collect();
    assert_eq!(sequences, vec![8, 7, 6]);
    assert_eq!(found.next_before, Some(Sequence::new(6)));
    for outside in [0, 11] {
        let refused = context.history_read(
            &thread,
            Anchor::Before(Sequence::new(outside)),
            2,
            1 << 20,
            Include::default(),
        );
        assert!(
            matches!(refused, Err(ContextError::AnchorNotFound { .. })),
            "{refused:?}"
        );
    }
}

#[test]
fn a_backward_page_the_log_cannot_give_whole_fails_instead_of_answering_with_a_hole() {
    let log = log();
    let thread = thread("gap");
    for index in 0..6 {
        user(&*log, &thread, &format!("message {index}"));
    }
    let gappy = memory_testkit::activity::GappyLog::new((*log).clone(), Sequence::new(3));
    let context = Context::new(std::sync::Arc::new(gappy));
    let refused = context.history_read(
        &thread,
        Anchor::Before(Sequence::new(6)),
        10,
        1 << 20,
        Include::default(),
    );
    assert!(
        matches!(refused, Err(ContextError::Gap { .. })),
        "{refused:?}"
    );
    assert_eq!(
        refused.map(|_| ()).map_err(|error| error.kind()),
        Err(memory_core::ErrorKind::Corrupt)
    );
    // Above the hole a page still reads.
    let page = context
        .history_read(
            &thread,
            Anchor::Before(Sequence::new(6)),
            1,
            1 << 20,
            Include::default(),
        )
        .expect("page");
    assert_eq!(page.records.len(), 1);
}
