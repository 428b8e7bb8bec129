//! Forgotten records: suppressed on every read of the context layer, never erased from the log.

use crate::common;

use std::sync::Arc;

use common::*;
use memory_context::fold::ReadStart;
use memory_context::history::{Include, IncludeKind};
use memory_context::{CompactionRequest, Context, ContextError, Role};
use memory_core::activity::{
    CompactionOutcome, RememberingStore, Sequence, SourceId, ThreadId, ThreadLog,
};
use memory_testkit::InMemoryActivity;

const SECRET: &str = "My bank PIN is K-4417 and my password is hunter2.";

fn context(log: &Arc<InMemoryActivity>) -> Context {
    Context::new(log.clone()).forgetting(log.clone())
}

fn forget(log: &InMemoryActivity, thread: &ThreadId, sequence: u64, at: i64) {
    log.suppress(
        &SourceId::thread_record(thread, Sequence::new(sequence)),
        None,
        at,
    )
    .expect("suppress");
}

fn request(keep_tokens: u64) -> CompactionRequest {
    CompactionRequest {
        measured_input_tokens: Some(50_000),
        keep_tokens,
        through: None,
        summarizer: None,
    }
}

fn shows(context: &Context, thread: &ThreadId, text: &str) -> bool {
    let view = context.view(thread, 1 << 30).expect("view").view;
    view.messages().iter().any(|message| {
        message.content.contains(text)
            || message
                .tool_calls
                .iter()
                .any(|call| call.function.arguments.contains(text))
    })
}

#[test]
fn a_forgotten_record_is_a_placeholder_in_every_read_and_calls_still_pair() {
    let log = log();
    let thread = thread("t1");
    user(&*log, &thread, SECRET);
    answer(&*log, &thread, "Noted.");
    call(&*log, &thread, "c1", "vault");
    result(&*log, &thread, "c1", "hunter2 stored");
    user(&*log, &thread, "What is the weather?");
    let context = context(&log);
    assert!(shows(&context, &thread, "K-4417"));
    assert_eq!(context.read(&thread).expect("read").start, ReadStart::Warm);

    forget(&log, &thread, 1, 77);
    forget(&log, &thread, 4, 78);
    let read = context.read(&thread).expect("read");
    assert_eq!(
        read.start,
        ReadStart::Cold,
        "a forget since rebuilds the fold"
    );
    assert!(!shows(&context, &thread, "K-4417") && !shows(&context, &thread, "hunter2"));
    let messages = context
        .view(&thread, 1 << 30)
        .expect("view")
        .view
        .messages();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&messages[0].content).expect("json"),
        serde_json::json!({"forgotten": true, "sequence": 1, "forgotten_at": 77})
    );
    // The call and its result still pair.
    let step = messages
        .iter()
        .position(|message| !message.tool_calls.is_empty())
        .expect("a step");
    assert_eq!(messages[step].tool_calls[0].id, "c1");
    assert_eq!(messages[step + 1].role, Role::Tool);
    assert_eq!(messages[step + 1].tool_call_id.as_deref(), Some("c1"));
    assert!(messages[step + 1].content.contains(r#""forgotten":true"#));
    // A warm read after that stays warm.
    answer(&*log, &thread, "Sunny.");
    assert_eq!(context.read(&thread).expect("read").start, ReadStart::Warm);

    let page = context
        .history_read(&thread, Sequence::ZERO, 50, 1 << 20, Include::ALL)
        .expect("page");
    assert_eq!(page.records.len(), 6);
    assert!(page.records[0].forgotten && page.records[0].forgotten_at == Some(77));
    assert_eq!(page.records[3].call_id.as_deref(), Some("c1"));
    let text = serde_json::to_string(&page).expect("serializes");
    assert!(
        !text.contains("K-4417") && !text.contains("hunter2"),
        "{text}"
    );
    for needle in ["K-4417", "hunter2", "forgotten"] {
        let found = context
            .history_search(&thread, needle, Sequence::ZERO, 10, 1_000, Include::ALL)
            .expect("search");
        assert!(found.matches.is_empty(), "{needle} matched {found:?}");
    }
    assert_eq!(
        all_records(&*log, &thread).len(),
        6,
        "the log stays append-only"
    );
}

#[test]
fn a_summary_that_folded_a_forgotten_record_is_withdrawn_until_a_new_compaction() {
    let log = log();
    let thread = thread("t1");
    user(&*log, &thread, SECRET);
    answer(&*log, &thread, "Noted, Ana.");
    for turn in 0..4 {
        user(&*log, &thread, &format!("question {turn} with a few words"));
        answer(&*log, &thread, &format!("answer {turn} with a few words"));
    }
    user(&*log, &thread, "current");
    let context = context(&log);
    let first = context
        .compact(&thread, &request(0), |plan| {
            assert!(plan.forgotten.is_empty());
            Ok::<_, String>("Ana's PIN is K-4417.".to_owned())
        })
        .expect("compacted");
    assert_eq!(first.compaction.outcome, CompactionOutcome::Folded);
    assert_eq!(first.compaction.replaces, Some(Sequence::ZERO));
    answer(&*log, &thread, "current answer");
    for turn in 0..3 {
        user(&*log, &thread, &format!("later question {turn} with words"));
        answer(&*log, &thread, &format!("later answer {turn} with words"));
    }
    user(&*log, &thread, "newest");
    let second = context
        .compact(&thread, &request(0), |_| {
            Ok::<_, String>("Ana's PIN is K-4417; later talk.".to_owned())
        })
        .expect("compacted");
    assert_eq!(second.compaction.outcome, CompactionOutcome::Folded);
    assert_eq!(second.compaction.replaces, Some(first.sequence));
    let before = context.view(&thread, 1 << 30).expect("view").view;
    assert!(before.summary.is_some() && before.summary_withdrawn.is_empty());
    assert!(shows(&context, &thread, "K-4417"), "the summary says it");

    forget(&log, &thread, 1, 500);
    let view = context.view(&thread, 1 << 30).expect("view").view;
    assert!(view.summary.is_none(), "both summaries are withdrawn");
    assert_eq!(
        view.summary_withdrawn,
        vec![first.sequence, second.sequence]
    );
    assert!(!shows(&context, &thread, "K-4417"));
    assert!(
        shows(&context, &thread, "question 0 with a few words"),
        "the records the summaries covered are shown again"
    );
    let wire = serde_json::to_value(&view).expect("serializes");
    assert_eq!(
        wire["summary_withdrawn"],
        serde_json::json!([first.sequence.get(), second.sequence.get()])
    );
    // History: the withdrawn summaries are neither shown nor found.
    let page = context
        .history_read(&thread, Sequence::ZERO, 500, 1 << 20, Include::ALL)
        .expect("page");
    assert!(
        !serde_json::to_string(&page)
            .expect("serializes")
            .contains("K-4417")
    );
    assert!(
        page.records
            .iter()
            .filter(|record| record.kind == "compaction")
            .all(|record| record.summary_withdrawn)
    );

    // A plan now hands the summarizer the placeholder, and a commit from an older plan is refused.
    let plan = context.plan_compaction(&thread, &request(0)).expect("plan");
    assert_eq!(plan.forgotten, vec![Sequence::new(1)]);
    assert!(plan.previous.is_none());
    let transcript = serde_json::to_string(&plan.transcript()).expect("serializes");
    assert!(!transcript.contains("K-4417"), "{transcript}");
    let mut commit = request(0);
    commit.through = plan.through;
    let stale = context.commit_compaction(&thread, &commit, "Talk.".to_owned(), &[]);
    assert!(matches!(
        stale,
        Err(ContextError::ForgottenSincePlan { ref records }) if records == &[Sequence::new(1)]
    ));
    let third = context
        .commit_compaction(
            &thread,
            &commit,
            "Ana asked questions.".to_owned(),
            &plan.forgotten,
        )
        .expect("committed");
    assert_eq!(third.compaction.outcome, CompactionOutcome::Folded);
    assert_eq!(third.compaction.forgotten, vec![Sequence::new(1)]);
    let after = context.view(&thread, 1 << 30).expect("view").view;
    assert!(
        after.summary_withdrawn.is_empty(),
        "a new compaction applied"
    );
    assert_eq!(
        after.summary.as_ref().map(|summary| summary.compaction),
        Some(third.sequence)
    );
    // The cached state equals a rebuild.
    let cached = context.read(&thread).expect("read").state;
    let rebuilt = memory_context::FoldReader::new(
        memory_context::Conversation,
        memory_context::FoldScope::Thread,
        log.clone(),
    )
    .forgetting(log.clone())
    .read_uncached(&thread)
    .expect("rebuild")
    .state;
    assert_eq!(cached, rebuilt);
}

#[test]
fn a_retried_turn_after_a_forget_recalls_again() {
    let log = log();
    let thread = thread("t1");
    user(&*log, &thread, SECRET);
    user(&*log, &thread, "What do you know about me?");
    let context = context(&log);
    let load = |text: &'static str| move |_: &str, _: u64| Ok::<_, String>((text.to_owned(), 1));
    let first = context
        .assemble(
            &thread,
            2_000,
            None,
            load("[memory:1] Ana's PIN is K-4417."),
        )
        .expect("assembled");
    assert!(!first.memory.expect("memory").reused);
    let retry = context
        .assemble(&thread, 2_000, None, load("unused"))
        .expect("assembled");
    assert!(retry.memory.expect("memory").reused);
    // A forget anywhere in the store (here another thread's record) changes the generation.
    let other = ThreadId::new("t2").expect("valid");
    user(&*log, &other, "something else");
    forget(&log, &other, 1, 9);
    let after = context
        .assemble(&thread, 2_000, None, load("[memory:0]"))
        .expect("assembled");
    let memory = after.memory.expect("memory");
    assert!(
        !memory.reused,
        "the snapshot is not replayed after a forget"
    );
    assert_eq!(
        after
            .messages
            .last()
            .map(|message| message.content.as_str()),
        Some("[memory:0]"),
        "the memory block is the new recall's"
    );
}

#[test]
fn history_leaves_out_system_and_operational_records_unless_asked() {
    let log = log();
    let thread = thread("t1");
    system(&*log, &thread, "You are terse.");
    user(&*log, &thread, "terse question");
    answer(&*log, &thread, "terse answer");
    run_completed(&*log, &thread);
    let context = context(&log);
    let kinds = |include: Include| -> Vec<String> {
        context
            .history_read(&thread, Sequence::ZERO, 50, 1 << 20, include)
            .expect("page")
            .records
            .into_iter()
            .map(|record| record.kind)
            .collect()
    };
    assert_eq!(
        kinds(Include::default()),
        ["user_input", "assistant_message"]
    );
    assert_eq!(
        kinds(Include::of(&[IncludeKind::System])),
        ["system_message", "user_input", "assistant_message"]
    );
    assert_eq!(
        kinds(Include::of(&[IncludeKind::Operational])),
        ["user_input", "assistant_message", "run_completed"]
    );
    assert_eq!(kinds(Include::ALL).len(), 4);
    let search = |text: &str, include: Include| {
        context
            .history_search(&thread, text, Sequence::ZERO, 10, 1_000, include)
            .expect("search")
            .matches
            .len()
    };
    assert_eq!(search("terse", Include::default()), 2);
    assert_eq!(search("terse", Include::of(&[IncludeKind::System])), 3);
    assert_eq!(search("completed", Include::default()), 0);
    assert_eq!(search("completed", Include::ALL), 1);
    // A page of one skips what it leaves out and says where to go on.
    let page = context
        .history_read(&thread, Sequence::ZERO, 1, 1 << 20, Include::default())
        .expect("page");
    assert_eq!(page.records[0].sequence, Sequence::new(2));
    assert_eq!(page.next_after, Some(Sequence::new(2)));
    let last = context
        .history_read(&thread, Sequence::new(2), 1, 1 << 20, Include::default())
        .expect("page");
    assert_eq!(last.records[0].sequence, Sequence::new(3));
    assert_eq!(last.next_after, None);
}

#[test]
fn a_forgotten_record_in_another_thread_with_a_similar_id_is_not_forgotten_here() {
    let log = log();
    let here = thread("t1");
    let there = ThreadId::new("x/t1").expect("valid");
    user(&*log, &here, "keep me");
    user(&*log, &there, "forget me");
    forget(&log, &there, 1, 3);
    let context = context(&log);
    assert!(shows(&context, &here, "keep me"));
    assert!(!shows(&context, &there, "forget me"));
    let _: &dyn ThreadLog = &*log;
}
