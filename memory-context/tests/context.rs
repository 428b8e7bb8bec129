//! The context layer over a thread log: folds, views, compaction, history and references.

use crate::common;

use std::sync::Arc;

use common::*;
use memory_context::fold::{FoldScope, ReadStart};
use memory_context::history::Include;
use memory_context::{
    CompactionRequest, Context, ContextError, Conversation, FoldReader, Role, SegmentKind,
};
use memory_core::activity::{CompactionOutcome, RecordBody, RefusalReason, Sequence, ThreadLog};

fn request(keep_tokens: u64) -> CompactionRequest {
    CompactionRequest {
        measured_input_tokens: Some(50_000),
        keep_tokens,
        through: None,
        summarizer: Some("cheap-model".to_owned()),
    }
}

#[test]
fn a_warm_read_folds_only_what_was_appended_and_equals_a_rebuild() {
    let log = log();
    let thread = thread("t");
    for turn in 0..20 {
        user(&*log, &thread, &format!("question {turn}"));
        answer(&*log, &thread, &format!("answer {turn}"));
    }
    let reader = FoldReader::new(Conversation, FoldScope::Thread, log.clone());
    let cold = reader.read(&thread).expect("read");
    assert_eq!((cold.start, cold.read_now), (ReadStart::Cold, 40));
    user(&*log, &thread, "one more");
    let warm = reader.read(&thread).expect("read");
    assert_eq!((warm.start, warm.read_now), (ReadStart::Warm, 1));
    assert_eq!(
        warm.state,
        reader.read_uncached(&thread).expect("rebuild").state
    );
    assert_eq!(warm.state.segments.len(), 41);
}

#[test]
fn concurrent_readers_of_one_thread_fold_each_record_once() {
    let log = log();
    let thread = thread("t");
    for turn in 0..500 {
        user(&*log, &thread, &format!("question {turn}"));
    }
    let reader = Arc::new(FoldReader::new(
        Conversation,
        FoldScope::Thread,
        log.clone(),
    ));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let reader = Arc::clone(&reader);
            let thread = thread.clone();
            std::thread::spawn(move || reader.read(&thread).expect("read").read_now)
        })
        .collect();
    let folded: u64 = handles
        .into_iter()
        .map(|handle| handle.join().expect("joined"))
        .sum();
    assert_eq!(
        folded, 500,
        "single flight: every record folded once in all"
    );
}

#[test]
fn a_run_scoped_fold_starts_again_after_each_run() {
    let log = log();
    let thread = thread("t");
    user(&*log, &thread, "first run");
    run_completed(&*log, &thread);
    user(&*log, &thread, "second run");
    let run = FoldReader::new(Conversation, FoldScope::Run, log.clone());
    let state = run.read(&thread).expect("read").state;
    assert_eq!(state.segments.len(), 1);
    assert_eq!(state.segments[0].id(), "prompt:3");
    let whole = FoldReader::new(Conversation, FoldScope::Thread, log.clone());
    assert_eq!(whole.read(&thread).expect("read").state.segments.len(), 2);
}

#[test]
fn tool_results_attach_to_their_step_and_orphans_are_counted() {
    let log = log();
    let thread = thread("t");
    user(&*log, &thread, "find flights");
    answer(&*log, &thread, "Let me look.");
    call(&*log, &thread, "c1", "search");
    call(&*log, &thread, "c2", "search");
    result(&*log, &thread, "c2", "two");
    result(&*log, &thread, "c1", "one");
    result(&*log, &thread, "c9", "nobody asked");
    result(&*log, &thread, "c1", "again");
    let context = Context::new(log.clone());
    let read = context.read(&thread).expect("read");
    let kinds: Vec<_> = read.state.segments.iter().map(|s| s.kind()).collect();
    assert_eq!(kinds, vec![SegmentKind::Prompt, SegmentKind::Step]);
    assert_eq!(read.state.segments[1].id(), "step:2");
    assert_eq!(read.state.segments[1].records().len(), 5);
    assert_eq!(read.report.skipped.get("missing_step"), Some(&1));
    assert_eq!(read.report.skipped.get("duplicate_result"), Some(&1));
    let messages = context.view(&thread, 10_000).expect("view").view.messages();
    let roles: Vec<_> = messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        vec![Role::User, Role::Assistant, Role::Tool, Role::Tool]
    );
    assert_eq!(messages[1].tool_calls.len(), 2);
    assert_eq!(messages[2].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(messages[2].content, "one");
}

#[test]
fn a_view_elides_then_drops_the_oldest_but_keeps_the_current_turn_and_system() {
    let log = log();
    let thread = thread("t");
    system(&*log, &thread, "You are terse.");
    for turn in 0..30 {
        user(&*log, &thread, &format!("question {turn}"));
        call(&*log, &thread, &format!("c{turn}"), "read_file");
        result(&*log, &thread, &format!("c{turn}"), &"x".repeat(4_000));
        answer(&*log, &thread, &format!("answer {turn}"));
    }
    user(&*log, &thread, "the current question");
    let context = Context::new(log.clone());
    let whole = context.view(&thread, 1 << 30).expect("view").view;
    assert!(whole.fits && whole.dropped.is_empty() && whole.elided.is_empty());
    let elided = context.view(&thread, whole.tokens / 3).expect("view").view;
    assert!(!elided.elided.is_empty());
    assert!(elided.dropped.is_empty(), "elision alone was enough");
    assert!(elided.fits && elided.tokens <= elided.budget);
    let tight = context.view(&thread, 400).expect("view").view;
    assert!(!tight.dropped.is_empty());
    assert!(!tight.fits && !tight.over_budget && tight.tokens <= 400);
    let messages = tight.messages();
    assert_eq!(messages[0].content, "You are terse.");
    assert_eq!(
        messages.last().map(|m| m.content.as_str()),
        Some("the current question")
    );
    let tiny = context.view(&thread, 5).expect("view").view;
    assert!(tiny.over_budget && !tiny.fits);
    assert_eq!(
        tiny.segments.len(),
        2,
        "the system segment and the current turn stay"
    );
    assert!(matches!(
        context.view(&thread, 0),
        Err(ContextError::Invalid { .. })
    ));
}

#[test]
fn a_compaction_without_measured_tokens_is_refused_and_appends_nothing() {
    let log = log();
    let thread = thread("t");
    user(&*log, &thread, "hello");
    let context = Context::new(log.clone());
    let mut asked = request(10);
    asked.measured_input_tokens = None;
    let refused = context.compact(&thread, &asked, |_| Ok::<_, String>("s".to_owned()));
    assert!(matches!(refused, Err(ContextError::Unmeasured)));
    assert_eq!(log.inspect_tail(&thread).expect("tail"), Sequence::new(1));
}

#[test]
fn compaction_folds_old_segments_records_itself_and_keeps_the_log() {
    let log = log();
    let thread = thread("t");
    system(&*log, &thread, "You plan trips.");
    for turn in 0..10 {
        user(
            &*log,
            &thread,
            &format!("Book leg {turn} of the trip to Lisbon"),
        );
        call(&*log, &thread, &format!("c{turn}"), "book");
        result(
            &*log,
            &thread,
            &format!("c{turn}"),
            &format!("booking {turn} confirmed: ref ACCT-{turn}"),
        );
        answer(&*log, &thread, &format!("Leg {turn} is booked."));
    }
    user(&*log, &thread, "Which legs are booked?");
    let before = all_records(&*log, &thread);
    let context = Context::new(log.clone());
    let compacted = context
        .compact(&thread, &request(60), |plan| {
            assert!(
                plan.transcript()
                    .iter()
                    .any(|m| m.content.contains("ACCT-0"))
            );
            Ok::<_, String>("Legs 0 to 8 of the Lisbon trip are booked.".to_owned())
        })
        .expect("compacted");
    assert_eq!(compacted.compaction.outcome, CompactionOutcome::Folded);
    assert!(
        compacted
            .compaction
            .refusals
            .iter()
            .any(|refusal| refusal.reason == RefusalReason::System)
    );
    assert!(
        compacted
            .compaction
            .refusals
            .iter()
            .any(|refusal| refusal.reason == RefusalReason::Kept)
    );
    let after = all_records(&*log, &thread);
    assert_eq!(after[..before.len()], before[..], "the log is never edited");
    assert!(matches!(
        after.last().map(|r| &r.record.body),
        Some(RecordBody::Compaction(_))
    ));

    let view = context.view(&thread, 1 << 20).expect("view");
    let messages = view.view.messages();
    assert_eq!(messages[0].content, "You plan trips.");
    assert_eq!(messages[1].role, Role::System);
    assert!(messages[1].content.starts_with("[compacted history:"));
    assert!(
        messages[1]
            .content
            .ends_with("Legs 0 to 8 of the Lisbon trip are booked.")
    );
    assert!(!messages.iter().any(|m| m.content.contains("ACCT-0")));
    assert_eq!(
        view.state,
        FoldReader::new(Conversation, FoldScope::Thread, log.clone())
            .read_uncached(&thread)
            .expect("rebuild")
            .state,
        "the cached state after a compaction equals a rebuild"
    );

    // The folded records are still there, flagged as folded, and searchable.
    let found = context
        .history_search(&thread, "acct-0", Sequence::ZERO, 10, 10_000, Include::ALL)
        .expect("search");
    assert_eq!(found.matches.len(), 1);
    assert!(found.matches[0].folded);
    assert!(found.matches[0].text.contains("ACCT-0"));
    let page = context
        .history_read(&thread, Sequence::ZERO, 500, 1 << 20, Include::ALL)
        .expect("page");
    assert_eq!(page.records.len(), after.len());
    let folded = &compacted.compaction.folded;
    for range in folded {
        for sequence in range.first.get()..=range.last.get() {
            let record = &page.records[sequence as usize - 1];
            assert!(
                record.folded,
                "record {sequence} is reachable and marked folded"
            );
        }
    }
}

#[test]
fn a_summary_not_smaller_than_what_it_replaces_is_refused_and_recorded() {
    let log = log();
    let thread = thread("t");
    for turn in 0..4 {
        user(&*log, &thread, &format!("q{turn}"));
        answer(&*log, &thread, &format!("a{turn}"));
    }
    user(&*log, &thread, "now");
    let context = Context::new(log.clone());
    let before = context
        .view(&thread, 1 << 20)
        .expect("view")
        .view
        .messages();
    let refused = context
        .compact(&thread, &request(0), |_| {
            Ok::<_, String>("a summary far longer than the few short turns it replaces".to_owned())
        })
        .expect("recorded");
    assert_eq!(refused.compaction.outcome, CompactionOutcome::NotSmaller);
    assert!(refused.compaction.summary.is_none() && refused.compaction.folded.is_empty());
    assert_eq!(
        context
            .view(&thread, 1 << 20)
            .expect("view")
            .view
            .messages(),
        before
    );
}

#[test]
fn an_unanswered_tool_call_refuses_to_fold_and_so_does_what_follows() {
    let log = log();
    let thread = thread("t");
    user(&*log, &thread, &"an old long question ".repeat(20));
    answer(&*log, &thread, &"an old long answer ".repeat(20));
    user(&*log, &thread, "start a long job");
    call(&*log, &thread, "job", "run_job");
    answer(&*log, &thread, &"while it runs, more words ".repeat(20));
    user(&*log, &thread, "is it done?");
    let context = Context::new(log.clone());
    let compacted = context
        .compact(&thread, &request(0), |plan| {
            assert_eq!(
                plan.fold.len(),
                3,
                "the two old segments and the prompt before the call"
            );
            Ok::<_, String>("Old talk.".to_owned())
        })
        .expect("compacted");
    let reasons: Vec<_> = compacted
        .compaction
        .refusals
        .iter()
        .map(|refusal| refusal.reason)
        .collect();
    assert_eq!(
        reasons,
        vec![
            RefusalReason::UnresolvedToolCall,
            RefusalReason::AfterRefusal,
            RefusalReason::Kept
        ]
    );
}

#[test]
fn nothing_to_fold_is_recorded_without_asking_the_summarizer() {
    let log = log();
    let thread = thread("t");
    user(&*log, &thread, "only the current turn");
    let context = Context::new(log.clone());
    let compacted = context
        .compact(&thread, &request(0), |_| -> Result<String, String> {
            panic!("nothing to summarize")
        })
        .expect("recorded");
    assert_eq!(
        compacted.compaction.outcome,
        CompactionOutcome::NothingToFold
    );
    assert_eq!(compacted.sequence, Sequence::new(2));
}

#[test]
fn a_commit_folds_nothing_newer_than_the_plan_it_was_written_from() {
    let log = log();
    let thread = thread("t");
    for turn in 0..6 {
        user(
            &*log,
            &thread,
            &format!("question number {turn} with some words"),
        );
        answer(
            &*log,
            &thread,
            &format!("answer number {turn} with some words"),
        );
    }
    user(&*log, &thread, "current");
    let context = Context::new(log.clone());
    let plan = context.plan_compaction(&thread, &request(0)).expect("plan");
    let through = plan.through.expect("something folds");
    // Meanwhile the turn ends and a new one starts: the old current prompt is now foldable, but was
    // not in the summary.
    answer(&*log, &thread, "current answer");
    user(&*log, &thread, "newer");
    let mut commit = request(0);
    commit.through = Some(through);
    let compacted = context
        .commit_compaction(&thread, &commit, "Six questions answered.".to_owned(), &[])
        .expect("committed");
    assert_eq!(compacted.compaction.folded, plan.folded);
    let missing = context.commit_compaction(&thread, &request(0), "x".to_owned(), &[]);
    assert!(matches!(
        missing,
        Err(ContextError::Invalid {
            field: "through",
            ..
        })
    ));
}

#[test]
fn a_retried_turn_reuses_its_references() {
    let log = log();
    let thread = thread("t");
    user(&*log, &thread, "Where do I live?");
    let context = Context::new(log.clone());
    let first = context
        .assemble(&thread, 1_000, None, |query, remaining| {
            assert_eq!(query, "Where do I live?");
            assert!(remaining > 0 && remaining < 1_000);
            Ok::<_, String>(("[memory:1] Ana lives in Lisbon.".to_owned(), 1))
        })
        .expect("assembled");
    let memory = first.memory.clone().expect("memory");
    assert!(!memory.reused);
    assert_eq!(
        first.messages.last().map(|m| m.content.as_str()),
        Some("[memory:1] Ana lives in Lisbon.")
    );
    let retry = context
        .assemble(
            &thread,
            1_000,
            None,
            |_, _| -> Result<(String, u64), String> { panic!("a retry loads nothing") },
        )
        .expect("assembled");
    assert!(retry.memory.as_ref().expect("memory").reused);
    assert_eq!(retry.messages, first.messages);
    assert!(
        all_records(&*log, &thread).len() == 1,
        "references are never written to the log"
    );
    user(&*log, &thread, "And where do I work?");
    let next = context
        .assemble(&thread, 1_000, None, |_, _| {
            Ok::<_, String>(("[memory:1] Ana works at a bakery.".to_owned(), 1))
        })
        .expect("assembled");
    assert!(
        !next.memory.expect("memory").reused,
        "a new turn loads its own"
    );
}

#[test]
fn a_record_that_no_longer_decodes_is_skipped_counted_and_shown_as_such() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("log.sqlite");
    let log = Arc::new(memory_sqlite::thread_log::SqliteThreadLog::open(&path).expect("open"));
    let thread = thread("t");
    user(&*log, &thread, "first");
    answer(&*log, &thread, "second");
    user(&*log, &thread, "third");
    let connection = rusqlite::Connection::open(&path).expect("sql");
    // Damage outside the product: the file's append-only trigger is dropped first.
    connection
        .execute_batch("DROP TRIGGER thread_records_append_only_update")
        .expect("trigger");
    connection
        .execute(
            "UPDATE thread_records SET record_json = ?1 WHERE sequence = 2",
            [r#"{"speaker":"x","observers":[],"occurred_at":null,"opaque_cursor":null,"body":{"kind":"from_a_newer_build"}}"#],
        )
        .expect("damaged");
    let context = Context::new(log.clone());
    let read = context
        .read(&thread)
        .expect("a damaged record never makes a thread unreadable");
    assert_eq!(read.state.segments.len(), 2);
    assert_eq!(read.report.skipped.get("undecodable"), Some(&1));
    assert_eq!(read.report.skipped_records[0].sequence, Sequence::new(2));
    let page = context
        .history_read(&thread, Sequence::ZERO, 10, 1 << 20, Include::ALL)
        .expect("page");
    let kinds: Vec<&str> = page
        .records
        .iter()
        .map(|record| record.kind.as_str())
        .collect();
    assert_eq!(kinds, ["user_input", "undecodable", "user_input"]);
}

#[test]
fn a_thread_longer_than_the_budget_still_leaves_its_memory_a_reserve() {
    let log = log();
    let thread = thread("t");
    for turn in 0..40 {
        user(
            &*log,
            &thread,
            &format!("question number {turn} with a few more words"),
        );
        answer(
            &*log,
            &thread,
            &format!("answer number {turn} with a few more words"),
        );
    }
    user(&*log, &thread, "Where do I live?");
    let context = Context::new(log.clone());
    let budget = 400;
    let assembled = context
        .assemble(&thread, budget, None, |_, remaining| {
            assert!(remaining >= memory_context::memory_reserve(budget));
            Ok::<_, String>(("[memory:1] Ana lives in Lisbon.".to_owned(), 1))
        })
        .expect("assembled");
    assert!(!assembled.view.dropped.is_empty());
    assert!(assembled.tokens <= budget, "{} tokens", assembled.tokens);
    assert_eq!(
        assembled.messages.last().map(|m| m.content.as_str()),
        Some("[memory:1] Ana lives in Lisbon.")
    );
    let retry = context
        .assemble(
            &thread,
            budget,
            None,
            |_, _| -> Result<(String, u64), String> { panic!("a retry loads nothing") },
        )
        .expect("assembled");
    assert_eq!(
        retry.messages, assembled.messages,
        "an unchanged turn retries the same"
    );
}

#[test]
fn two_processes_folding_the_same_records_count_them_once() {
    let log = log();
    let thread = thread("t");
    for turn in 0..6 {
        user(
            &*log,
            &thread,
            &format!("question number {turn} with some words"),
        );
        answer(
            &*log,
            &thread,
            &format!("answer number {turn} with some words"),
        );
    }
    user(&*log, &thread, "current");
    let context = Context::new(log.clone());
    let first = context
        .compact(&thread, &request(0), |_| {
            Ok::<_, String>("Six answers.".to_owned())
        })
        .expect("compacted");
    let folded = context
        .read(&thread)
        .expect("read")
        .state
        .summary
        .expect("summary")
        .folded_records();
    // Another process planned from the same state and appends the same ranges.
    let mut again = all_records(&*log, &thread)
        .last()
        .expect("the compaction")
        .record
        .clone();
    again.body = RecordBody::Compaction(first.compaction.clone());
    log.append(&thread, again).expect("appended");
    let summary = context
        .read(&thread)
        .expect("read")
        .state
        .summary
        .expect("summary");
    assert_eq!(summary.folded_records(), folded);
    assert_eq!(summary.folded, first.compaction.folded);
}

#[test]
fn a_measured_count_of_zero_is_no_measurement() {
    let log = log();
    let thread = thread("t");
    user(&*log, &thread, &"an old question ".repeat(30));
    answer(&*log, &thread, &"an old answer ".repeat(30));
    user(&*log, &thread, "now");
    let context = Context::new(log.clone());
    let mut asked = request(0);
    asked.measured_input_tokens = Some(0);
    let refused = context.compact(&thread, &asked, |_| Ok::<_, String>("s".to_owned()));
    assert!(
        matches!(refused, Err(ContextError::Unmeasured)),
        "{refused:?}"
    );
    assert!(matches!(
        context.plan_compaction(&thread, &asked),
        Err(ContextError::Unmeasured)
    ));
    assert_eq!(log.inspect_tail(&thread).expect("tail"), Sequence::new(3));
}

#[test]
fn a_new_summary_is_at_most_65536_characters() {
    let log = log();
    let thread = thread("t");
    // Enough old text that a cap-sized summary would still be smaller than what it replaces.
    for turn in 0..3 {
        user(&*log, &thread, &"x".repeat(40_000));
        answer(&*log, &thread, &format!("answer {turn}"));
    }
    user(&*log, &thread, "now");
    let context = Context::new(log.clone());
    let plan = context.plan_compaction(&thread, &request(0)).expect("plan");
    let mut commit = request(0);
    commit.through = plan.through;
    // Characters, not bytes: a summary of 65,536 two-byte characters is at the cap and commits.
    let too_long = "é".repeat(65_537);
    let refused = context.commit_compaction(&thread, &commit, too_long, &[]);
    assert!(
        matches!(&refused, Err(ContextError::Invalid { .. })),
        "{refused:?}"
    );
    assert_eq!(log.inspect_tail(&thread).expect("tail"), Sequence::new(7));
    let at_cap = context
        .commit_compaction(&thread, &commit, "é".repeat(65_536), &[])
        .expect("a summary at the cap commits");
    assert_eq!(at_cap.compaction.outcome, CompactionOutcome::Folded);
}

#[test]
fn a_summarizer_failure_is_recorded_as_a_refusal_and_folds_nothing() {
    let log = log();
    let thread = thread("t");
    for turn in 0..4 {
        user(&*log, &thread, &format!("old question {turn} ").repeat(10));
        answer(&*log, &thread, &format!("old answer {turn} ").repeat(10));
    }
    user(&*log, &thread, "now");
    let context = Context::new(log.clone());
    let before = context
        .view(&thread, 1 << 20)
        .expect("view")
        .view
        .messages();
    // The summarizer a library caller hands in fails: the ledger says so.
    let failed = context
        .compact(&thread, &request(0), |_| {
            Err::<String, _>("the endpoint answered 503\nretry later")
        })
        .expect("recorded");
    assert_eq!(
        failed.compaction.outcome,
        CompactionOutcome::SummarizerFailed
    );
    assert_eq!(
        failed.compaction.failure.as_deref(),
        Some("the endpoint answered 503 retry later")
    );
    assert!(failed.compaction.folded.is_empty() && failed.compaction.summary.is_none());
    assert!(
        failed
            .compaction
            .refusals
            .iter()
            .any(|refusal| refusal.reason == RefusalReason::SummarizerFailed
                && refusal.range.first == Sequence::new(1)),
        "{:?}",
        failed.compaction.refusals
    );
    assert_eq!(
        context
            .view(&thread, 1 << 20)
            .expect("view")
            .view
            .messages(),
        before,
        "nothing folded"
    );
    // A host that summarizes itself reports its failure with the plan's `through`.
    let plan = context.plan_compaction(&thread, &request(0)).expect("plan");
    let mut commit = request(0);
    let without_through = context.record_summarizer_failure(&thread, &commit, "timeout".into());
    assert!(matches!(without_through, Err(ContextError::Invalid { .. })));
    commit.through = plan.through;
    let blank = context.record_summarizer_failure(&thread, &commit, "  ".into());
    assert!(blank.is_err(), "a failure names its reason");
    let recorded = context
        .record_summarizer_failure(&thread, &commit, "timeout after 30 s".into())
        .expect("recorded");
    assert_eq!(
        recorded.compaction.outcome,
        CompactionOutcome::SummarizerFailed
    );
    // Both failures are in the log, and history shows why.
    let page = context
        .history_read(
            &thread,
            Sequence::ZERO,
            100,
            1 << 20,
            memory_context::history::Include::ALL,
        )
        .expect("history");
    assert!(
        page.records
            .iter()
            .any(|record| record.text.contains("timeout after 30 s")),
        "{page:?}"
    );
}

#[test]
fn a_late_result_of_a_folded_step_gets_one_answer() {
    // A step's result arrives after the next prompt: the step folds with its result, and the kept
    // span (the current turn) must not reach over that result.
    let log = log();
    let thread = thread("t");
    user(&*log, &thread, &"an old question ".repeat(30)); // 1
    call(&*log, &thread, "lookup", "search"); // 2
    user(&*log, &thread, "the current question"); // 3
    result(&*log, &thread, "lookup", &"a late result ".repeat(30)); // 4
    answer(&*log, &thread, "the current answer"); // 5
    let context = Context::new(log.clone());
    let plan = context.plan_compaction(&thread, &request(0)).expect("plan");
    let folded: Vec<u64> = plan
        .folded
        .iter()
        .flat_map(|range| range.first.get()..=range.last.get())
        .collect();
    assert_eq!(folded, vec![1, 2, 4], "the step folds with its late result");
    let mut answers = std::collections::BTreeMap::new();
    for sequence in &folded {
        answers.insert(*sequence, "folded".to_owned());
    }
    for refusal in &plan.refusals {
        for sequence in refusal.range.first.get()..=refusal.range.last.get() {
            let previous = answers.insert(sequence, format!("{:?}", refusal.reason));
            assert!(
                previous.is_none(),
                "record {sequence} has two answers: {previous:?} and {:?} ({:?} / {:?})",
                refusal.reason,
                plan.folded,
                plan.refusals
            );
        }
    }
    assert_eq!(answers.len(), 5, "every record has its answer: {answers:?}");
}
