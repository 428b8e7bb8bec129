//! The thread log suite: sequences, pages, digests, listing and concurrent appends; destination
//! bindings and rebinding; the pending-thread index, settling and parking; the overview.

use std::sync::Barrier;

use super::{ActivityBackend, destination, ok, refused, sync_suite, thread};
use crate::fixtures::{Checked, Failure, ensure};
use memory_core::activity::thread::{MAX_PAGE_RECORDS, MAX_PARK_KIND_BYTES, MAX_PARTICIPANT_BYTES};
use memory_core::activity::{
    ActivityError, DestinationCount, FoldCheckpoint, LogEntry, NewRecord, PendingThread,
    RecordBody, RecordDigest, Sequence, ThreadBinding, ThreadDestination, ThreadLog,
    ThreadOverview,
};

sync_suite! {
    /// Every rule [`run_thread_log_suite`] checks, in order.
    THREAD_LOG_RULES;
    /// Runs every rule of [`THREAD_LOG_RULES`], each on a fresh backend from `factory`.
    run_thread_log_suite;
    ActivityBackend;
    "appends-number-each-thread-from-one" => appends_number_each_thread_from_one,
    "pages-start-after-the-cursor-and-are-bounded" => pages_start_after_the_cursor_and_are_bounded,
    "entries-read-every-stored-record-as-the-page-does" => entries_read_every_record_as_the_page_does,
    "records-read-back-whole-from-another-handle" => records_read_back_whole_from_another_handle,
    "record-digest-excludes-the-opaque-cursor" => record_digest_excludes_the_opaque_cursor,
    "oversized-records-are-refused-and-nothing-is-appended" => oversized_records_are_refused,
    "threads-are-listed-in-id-order-after-a-cursor" => threads_are_listed_in_id_order,
    "threads-are-listed-with-their-bindings" => threads_are_listed_with_their_bindings,
    "concurrent-appends-get-consecutive-sequences" => concurrent_appends_get_consecutive_sequences,
    "a-first-append-with-a-destination-binds-the-thread" => a_first_append_binds_the_thread,
    "an-append-naming-another-destination-is-refused-and-writes-nothing" => another_destination_is_refused,
    "an-unbound-thread-with-records-refuses-a-destination-until-rebound" => an_unbound_thread_refuses_a_destination,
    "rebind-needs-records-and-advances-the-generation" => rebind_advances_the_generation,
    "every-append-marks-the-thread-pending-and-settle-needs-its-tail" => appends_mark_pending_and_settle_needs_the_tail,
    "pending-threads-page-in-id-order-and-skip-parked-threads" => pending_threads_page_and_skip_parked,
    "rebind-unparks-a-thread-and-marks-it-pending" => rebind_unparks_and_marks_pending,
    "mark-all-pending-marks-every-thread-with-records" => mark_all_pending_marks_every_thread,
    "thread-page-limits-out-of-range-are-invalid" => thread_page_limits_out_of_range_are_invalid,
    "bad-park-kinds-are-refused-and-park-nothing" => bad_park_kinds_are_refused,
    "overview-counts-destinations-unbound-pending-and-parked" => overview_counts_threads,
    "concurrent-first-appends-bind-one-destination" => concurrent_first_appends_bind_one_destination,
    "a-checkpoint-reads-back-per-thread-fold-and-version-and-is-replaced" => checkpoints_round_trip,
}

fn checkpoints_round_trip<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let (t, u) = (thread("t")?, thread("u")?);
    say(&log, "t", "hello")?;
    let first = FoldCheckpoint {
        through: Sequence::new(1),
        forgotten: "f0".to_owned(),
        state: "{\"segments\": [\"caf\u{e9} \u{1F600}\"]}".to_owned(),
    };
    ensure!(
        ok(log.load_checkpoint(&t, "conversation", 1), "load")?.is_none(),
        "a checkpoint before any was saved"
    );
    ok(log.save_checkpoint(&t, "conversation", 1, &first), "save")?;
    let other = backend.thread_log();
    ensure!(
        ok(other.load_checkpoint(&t, "conversation", 1), "load")?.as_ref() == Some(&first),
        "the checkpoint does not read back whole from another handle"
    );
    for (thread, fold, version) in [
        (&u, "conversation", 1),
        (&t, "other", 1),
        (&t, "conversation", 2),
    ] {
        ensure!(
            ok(log.load_checkpoint(thread, fold, version), "load")?.is_none(),
            "a checkpoint of another thread, fold or version was found"
        );
    }
    let second = FoldCheckpoint {
        through: Sequence::new(7),
        forgotten: "f1".to_owned(),
        state: "{}".to_owned(),
    };
    ok(
        log.save_checkpoint(&t, "conversation", 1, &second),
        "save again",
    )?;
    ensure!(
        ok(log.load_checkpoint(&t, "conversation", 1), "load")?.as_ref() == Some(&second),
        "a saved checkpoint does not replace the one stored"
    );
    let refused = log.save_checkpoint(&t, "", 1, &second);
    ensure!(
        refused.as_ref().is_err_and(is_invalid),
        "a checkpoint without a fold name was not refused: {refused:?}"
    );
    Ok(())
}

fn sequences(records: &[memory_core::activity::ThreadRecord]) -> Vec<u64> {
    records.iter().map(|record| record.sequence.get()).collect()
}

fn appends_number_each_thread_from_one<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let (a, b) = (thread("a")?, thread("b")?);
    ensure!(
        ok(log.inspect_tail(&a), "tail of an empty thread")? == Sequence::ZERO,
        "an empty thread's tail is not zero"
    );
    for index in 0..5 {
        let stored = ok(
            log.append(&a, NewRecord::user("ana", format!("fact {index}"), index)),
            "append",
        )?;
        ensure!(
            stored.sequence == Sequence::new(index as u64 + 1),
            "append {index} got sequence {}",
            stored.sequence
        );
        ensure!(stored.thread == a, "the stored record names another thread");
    }
    let first_of_b = ok(
        log.append(&b, NewRecord::assistant("hello", 1)),
        "append to b",
    )?;
    ensure!(
        first_of_b.sequence == Sequence::new(1),
        "another thread's first record got {}",
        first_of_b.sequence
    );
    let tails = (
        ok(log.inspect_tail(&a), "tail")?,
        ok(log.inspect_tail(&b), "tail")?,
    );
    ensure!(
        tails == (Sequence::new(5), Sequence::new(1)),
        "tails are {tails:?}, expected (5, 1)"
    );
    Ok(())
}

fn pages_start_after_the_cursor_and_are_bounded<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let a = thread("a")?;
    for index in 0..5 {
        ok(
            log.append(&a, NewRecord::user("ana", format!("fact {index}"), index)),
            "append",
        )?;
    }
    let page = ok(log.read_page(&a, Sequence::new(1), 2), "read page")?;
    ensure!(
        sequences(&page) == [2, 3],
        "page after 1 of 2 is {:?}",
        sequences(&page)
    );
    let rest = ok(log.read_page(&a, Sequence::new(3), 10), "read page")?;
    ensure!(
        sequences(&rest) == [4, 5],
        "page after 3 is {:?}",
        sequences(&rest)
    );
    ensure!(
        ok(
            log.read_page(&a, Sequence::new(5), 10),
            "read past the tail"
        )?
        .is_empty(),
        "a page past the tail is not empty"
    );
    ensure!(
        ok(
            log.read_page(&thread("none")?, Sequence::ZERO, 10),
            "read unknown"
        )?
        .is_empty(),
        "a thread without records has records"
    );
    for limit in [0, MAX_PAGE_RECORDS + 1] {
        refused(
            log.read_page(&a, Sequence::ZERO, limit),
            |error| matches!(error, ActivityError::InvalidInput { .. }),
            &format!("a page of {limit} records"),
        )?;
    }
    ensure!(
        ok(
            log.read_page(&a, Sequence::ZERO, MAX_PAGE_RECORDS),
            "largest page"
        )?
        .len()
            == 5,
        "the largest page does not hold every record"
    );
    Ok(())
}

fn entries_read_every_record_as_the_page_does<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let a = thread("a")?;
    for index in 0..5 {
        ok(
            log.append(&a, NewRecord::user("ana", format!("fact {index}"), index)),
            "append",
        )?;
    }
    for (after, limit) in [(0, 10), (1, 2), (3, 10), (5, 10)] {
        let after = Sequence::new(after);
        let page = ok(log.read_page(&a, after, limit), "read page")?;
        let entries = ok(log.read_entries(&a, after, limit), "read entries")?;
        ensure!(
            entries == page.into_iter().map(LogEntry::Record).collect::<Vec<_>>(),
            "the entries after {after} (limit {limit}) are not the page's records: {entries:?}"
        );
    }
    for limit in [0, MAX_PAGE_RECORDS + 1] {
        refused(
            log.read_entries(&a, Sequence::ZERO, limit),
            |error| matches!(error, ActivityError::InvalidInput { .. }),
            &format!("entries of {limit} records"),
        )?;
    }
    Ok(())
}

fn records_read_back_whole_from_another_handle<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let t = thread("t")?;
    let records = [
        NewRecord {
            observers: vec!["bea".to_owned(), "carl".to_owned()],
            opaque_cursor: Some("resp_1".to_owned()),
            ..NewRecord::user("ana", "I moved to Porto \u{1F600}", 10)
        },
        NewRecord {
            occurred_at: None,
            speaker: "search".to_owned(),
            observers: Vec::new(),
            body: RecordBody::ToolCall {
                call_id: "c1".to_owned(),
                name: "search".to_owned(),
                arguments: serde_json::json!({"q": "porto", "n": 5, "nested": [1.5, null, true]}),
            },
            opaque_cursor: None,
        },
        NewRecord {
            occurred_at: Some(12),
            speaker: "search".to_owned(),
            observers: Vec::new(),
            body: RecordBody::ToolResult {
                call_id: "c1".to_owned(),
                output: serde_json::json!("no results"),
                is_error: true,
            },
            opaque_cursor: None,
        },
        NewRecord {
            occurred_at: Some(13),
            speaker: "assistant".to_owned(),
            observers: Vec::new(),
            body: RecordBody::RunCompleted {
                outcome: "completed".to_owned(),
            },
            opaque_cursor: None,
        },
    ];
    let mut appended = Vec::new();
    for record in records {
        appended.push(ok(log.append(&t, record), "append")?);
    }
    for record in &appended {
        ensure!(
            record.digest == RecordDigest::of(&t, record.sequence, &record.record),
            "the digest of record {} is not the digest of its content",
            record.sequence
        );
    }
    let here = ok(log.read_page(&t, Sequence::ZERO, 100), "read back")?;
    ensure!(
        here == appended,
        "records read back differ from what append returned"
    );
    let other = backend.thread_log();
    let there = ok(
        other.read_page(&t, Sequence::ZERO, 100),
        "read from another handle",
    )?;
    ensure!(there == appended, "another handle reads other records");
    Ok(())
}

fn record_digest_excludes_the_opaque_cursor<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let t = thread("t")?;
    let mut record = NewRecord::user("ana", "I moved to Porto", 10);
    record.opaque_cursor = Some("resp_1".to_owned());
    let stored = ok(log.append(&t, record.clone()), "append")?;
    record.opaque_cursor = None;
    ensure!(
        stored.digest == RecordDigest::of(&t, Sequence::new(1), &record),
        "the digest covers the opaque cursor"
    );
    let read = ok(log.read_page(&t, Sequence::ZERO, 1), "read")?;
    ensure!(
        read.first()
            .and_then(|record| record.record.opaque_cursor.as_deref())
            == Some("resp_1"),
        "the opaque cursor was not kept"
    );
    Ok(())
}

fn oversized_records_are_refused<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let t = thread("t")?;
    ok(log.append(&t, NewRecord::user("ana", "first", 1)), "append")?;
    let long_speaker = NewRecord::user("a".repeat(MAX_PARTICIPANT_BYTES + 1), "hi", 2);
    refused(
        log.append(&t, long_speaker),
        |error| matches!(error, ActivityError::TooLarge { .. }),
        "a speaker over the limit",
    )?;
    let fits = NewRecord::user("a".repeat(MAX_PARTICIPANT_BYTES), "hi", 3);
    let stored = ok(log.append(&t, fits), "a speaker at the limit")?;
    ensure!(
        stored.sequence == Sequence::new(2),
        "a refused record took a sequence (next is {})",
        stored.sequence
    );
    Ok(())
}

fn threads_are_listed_in_id_order<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    for name in ["b", "a", "c"] {
        ok(
            log.append(&thread(name)?, NewRecord::assistant("hello", 1)),
            "append",
        )?;
    }
    ok(
        log.append(&thread("a")?, NewRecord::assistant("again", 2)),
        "append",
    )?;
    let other = backend.thread_log();
    let names = |after: Option<&str>, limit: usize| -> Result<Vec<String>, Failure> {
        let after = after.map(thread).transpose()?;
        let listed = ok(other.threads(after.as_ref(), limit), "list threads")?;
        Ok(listed
            .iter()
            .map(|thread| thread.as_str().to_owned())
            .collect())
    };
    ensure!(
        names(None, 10)? == ["a", "b", "c"],
        "threads listed as {:?}",
        names(None, 10)?
    );
    ensure!(
        names(Some("a"), 10)? == ["b", "c"],
        "after a: {:?}",
        names(Some("a"), 10)?
    );
    ensure!(
        names(None, 2)? == ["a", "b"],
        "two threads: {:?}",
        names(None, 2)?
    );
    ensure!(
        names(Some("c"), 10)?.is_empty(),
        "threads after the last one"
    );
    refused(
        other.threads(None, 0),
        |error| matches!(error, ActivityError::InvalidInput { .. }),
        "a listing of 0 threads",
    )
}

/// `threads_with_bindings` lists what `threads` lists, each thread with what `binding` answers for
/// it: bound at a first append, unbound, rebound to a later generation.
fn threads_are_listed_with_their_bindings<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let (ana, bea) = (destination("ana", &["a"])?, destination("bea", &["a"])?);
    say_to(&log, "c", &ana, "bound at its first append")?;
    say(&log, "a", "never bound")?;
    say(&log, "b", "bound later")?;
    rebind(&log, "b", &bea)?;
    rebind(&log, "b", &ana)?;
    let other = backend.thread_log();
    let listed = |after: Option<&str>, limit: usize| {
        let after = after.map(thread).transpose()?;
        let listed = ok(
            other.threads_with_bindings(after.as_ref(), limit),
            "list threads with bindings",
        )?;
        Ok::<_, Failure>(
            listed
                .into_iter()
                .map(|(thread, binding)| (thread.as_str().to_owned(), binding))
                .collect::<Vec<_>>(),
        )
    };
    let expected = vec![
        ("a".to_owned(), None),
        ("b".to_owned(), bound(&ana, 2)),
        ("c".to_owned(), bound(&ana, 0)),
    ];
    let all = listed(None, 10)?;
    ensure!(all == expected, "threads with bindings: {all:?}");
    for name in ["a", "b", "c"] {
        let binding = binding_of(&other, name)?;
        ensure!(
            all.iter()
                .any(|(listed, with)| listed == name && *with == binding),
            "{name}'s listed binding is not its binding {binding:?}"
        );
    }
    let page = listed(Some("a"), 1)?;
    ensure!(page == expected[1..2], "one thread after a: {page:?}");
    ensure!(
        listed(Some("c"), 10)?.is_empty(),
        "threads after the last one"
    );
    refused(
        other.threads_with_bindings(None, 0),
        |error| matches!(error, ActivityError::InvalidInput { .. }),
        "a listing of 0 threads with bindings",
    )
}

fn concurrent_appends_get_consecutive_sequences<B: ActivityBackend>(backend: &B) -> Checked {
    const WRITERS: usize = 4;
    const EACH: usize = 10;
    let t = thread("shared")?;
    let start = Barrier::new(WRITERS);
    let logs: Vec<B::Log> = (0..WRITERS).map(|_| backend.thread_log()).collect();
    let outcomes: Vec<Result<Vec<u64>, ActivityError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = logs
            .iter()
            .enumerate()
            .map(|(writer, log)| {
                let (t, start) = (&t, &start);
                scope.spawn(move || {
                    start.wait();
                    (0..EACH)
                        .map(|index| {
                            log.append(t, NewRecord::user("ana", format!("{writer}/{index}"), 1))
                                .map(|record| record.sequence.get())
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut sequences = Vec::new();
    for outcome in outcomes {
        sequences.extend(ok(outcome, "a concurrent append")?);
    }
    sequences.sort_unstable();
    let total = (WRITERS * EACH) as u64;
    ensure!(
        sequences == (1..=total).collect::<Vec<_>>(),
        "concurrent appends got sequences {sequences:?}"
    );
    let log = backend.thread_log();
    let records = ok(log.read_page(&t, Sequence::ZERO, 100), "read")?;
    ensure!(
        records.len() as u64 == total,
        "{} records were kept",
        records.len()
    );
    Ok(())
}

fn is_conflict(error: &ActivityError) -> bool {
    matches!(error, ActivityError::DestinationConflict)
}

fn is_invalid(error: &ActivityError) -> bool {
    matches!(error, ActivityError::InvalidInput { .. })
}

/// Appends a user statement naming no destination.
fn say(log: &impl ThreadLog, name: &str, text: &str) -> Result<Sequence, Failure> {
    let record = ok(
        log.append(&thread(name)?, NewRecord::user("ana", text, 1)),
        &format!("append to {name}"),
    )?;
    Ok(record.sequence)
}

/// Appends a user statement naming `destination`.
fn say_to(
    log: &impl ThreadLog,
    name: &str,
    destination: &ThreadDestination,
    text: &str,
) -> Result<Sequence, Failure> {
    let record = ok(
        log.append_to(
            &thread(name)?,
            Some(destination),
            NewRecord::user("ana", text, 1),
        ),
        &format!("append to {name} naming its destination"),
    )?;
    Ok(record.sequence)
}

fn bound(destination: &ThreadDestination, generation: u64) -> Option<ThreadBinding> {
    Some(ThreadBinding {
        destination: destination.clone(),
        generation,
    })
}

fn binding_of(log: &impl ThreadLog, name: &str) -> Result<Option<ThreadBinding>, Failure> {
    ok(log.binding(&thread(name)?), &format!("binding of {name}"))
}

fn tail_of(log: &impl ThreadLog, name: &str) -> Result<Sequence, Failure> {
    ok(log.inspect_tail(&thread(name)?), &format!("tail of {name}"))
}

/// The pending threads after `after` as `(name, tail)` pairs.
fn pending(
    log: &impl ThreadLog,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<(String, u64)>, Failure> {
    let after = after.map(thread).transpose()?;
    let listed = ok(
        log.pending_threads(after.as_ref(), limit),
        "list pending threads",
    )?;
    Ok(listed
        .into_iter()
        .map(|PendingThread { thread, tail }| (thread.as_str().to_owned(), tail.get()))
        .collect())
}

/// `(name, tail)` pairs, for comparing with [`pending`].
fn pairs(expected: &[(&str, u64)]) -> Vec<(String, u64)> {
    expected
        .iter()
        .map(|(name, tail)| ((*name).to_owned(), *tail))
        .collect()
}

fn settle(log: &impl ThreadLog, name: &str, tail: u64) -> Result<bool, Failure> {
    ok(
        log.settle(&thread(name)?, Sequence::new(tail)),
        &format!("settle {name} at {tail}"),
    )
}

fn park(log: &impl ThreadLog, name: &str, sequence: u64, kind: &str) -> Result<(), Failure> {
    ok(
        log.park(&thread(name)?, Sequence::new(sequence), kind),
        &format!("park {name}"),
    )
}

fn rebind(
    log: &impl ThreadLog,
    name: &str,
    destination: &ThreadDestination,
) -> Result<ThreadBinding, Failure> {
    ok(
        log.rebind(&thread(name)?, destination),
        &format!("rebind {name}"),
    )
}

/// The overview, with parked kinds sorted (their order is not part of the contract).
fn overview(log: &impl ThreadLog) -> Result<ThreadOverview, Failure> {
    let mut overview = ok(log.overview(), "overview")?;
    overview.parked.sort();
    Ok(overview)
}

fn listed_threads(log: &impl ThreadLog) -> Result<Vec<String>, Failure> {
    let listed = ok(log.threads(None, MAX_PAGE_RECORDS), "list threads")?;
    Ok(listed
        .iter()
        .map(|thread| thread.as_str().to_owned())
        .collect())
}

fn a_first_append_binds_the_thread<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let ana = destination("ana", &["b", "a"])?;
    ensure!(
        binding_of(&log, "t")?.is_none(),
        "a thread without records has a binding"
    );
    let first = say_to(&log, "t", &ana, "first")?;
    ensure!(first == Sequence::new(1), "the first append got {first}");
    let binding = binding_of(&log, "t")?;
    ensure!(
        binding == bound(&ana, 0),
        "after a first append naming a destination the binding is {binding:?}"
    );
    let reordered = destination("ana", &["a", "b", "a"])?;
    ok(
        log.append_to(
            &thread("t")?,
            Some(&reordered),
            NewRecord::user("ana", "second", 2),
        ),
        "an append naming the same destination, its scopes in another order",
    )?;
    say(&log, "t", "third")?;
    let other = backend.thread_log();
    let seen = binding_of(&other, "t")?;
    ensure!(
        seen == bound(&ana, 0),
        "after later appends another handle reads the binding {seen:?}"
    );
    let tail = tail_of(&other, "t")?;
    ensure!(
        tail == Sequence::new(3),
        "the bound thread's tail is {tail}"
    );
    say(&log, "plain", "no destination")?;
    ensure!(
        binding_of(&log, "plain")?.is_none(),
        "a thread appended without a destination is bound"
    );
    Ok(())
}

fn another_destination_is_refused<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let t = thread("t")?;
    let ana = destination("ana", &["a"])?;
    say_to(&log, "t", &ana, "first")?;
    let records = ok(log.read_page(&t, Sequence::ZERO, 10), "read")?;
    let pending_before = pending(&log, None, 10)?;
    for (other, what) in [
        (destination("bea", &["a"])?, "another namespace"),
        (
            destination("ana", &["a", "b"])?,
            "the same namespace with other scopes",
        ),
    ] {
        refused(
            log.append_to(&t, Some(&other), NewRecord::user("eve", "redirected", 2)),
            is_conflict,
            &format!("an append naming {what}"),
        )?;
        refused(
            backend.thread_log().append_to(
                &t,
                Some(&other),
                NewRecord::user("eve", "redirected", 3),
            ),
            is_conflict,
            &format!("an append from another handle naming {what}"),
        )?;
    }
    let other = backend.thread_log();
    let tail = tail_of(&other, "t")?;
    ensure!(
        tail == Sequence::new(1),
        "refused appends moved the tail to {tail}"
    );
    ensure!(
        ok(other.read_page(&t, Sequence::ZERO, 10), "read")? == records,
        "refused appends changed the records"
    );
    let binding = binding_of(&other, "t")?;
    ensure!(
        binding == bound(&ana, 0),
        "refused appends changed the binding to {binding:?}"
    );
    let pending_after = pending(&other, None, 10)?;
    ensure!(
        pending_after == pending_before,
        "refused appends changed the pending threads from {pending_before:?} to {pending_after:?}"
    );
    let next = say_to(&log, "t", &ana, "second")?;
    ensure!(
        next == Sequence::new(2),
        "a refused append took a sequence (next is {next})"
    );
    Ok(())
}

fn an_unbound_thread_refuses_a_destination<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let t = thread("legacy")?;
    let (ana, bea) = (destination("ana", &["a"])?, destination("bea", &["a"])?);
    say(&log, "legacy", "first")?;
    say(&log, "legacy", "second")?;
    refused(
        log.append_to(&t, Some(&ana), NewRecord::user("ana", "third", 3)),
        is_conflict,
        "an append naming a destination to an unbound thread with records",
    )?;
    let tail = tail_of(&log, "legacy")?;
    ensure!(
        tail == Sequence::new(2),
        "the refused append moved the tail to {tail}"
    );
    let binding = binding_of(&log, "legacy")?;
    ensure!(
        binding.is_none(),
        "the refused append bound the thread: {binding:?}"
    );
    let next = say(&log, "legacy", "third")?;
    ensure!(
        next == Sequence::new(3),
        "an append naming no destination got {next}"
    );
    let rebound = rebind(&log, "legacy", &ana)?;
    ensure!(
        Some(rebound) == bound(&ana, 1),
        "the rebind answered another binding"
    );
    say_to(&log, "legacy", &ana, "fourth")?;
    refused(
        log.append_to(&t, Some(&bea), NewRecord::user("ana", "fifth", 5)),
        is_conflict,
        "an append naming another destination than the rebound one",
    )
}

fn rebind_advances_the_generation<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let (ana, bea) = (destination("ana", &["a"])?, destination("bea", &["a"])?);
    refused(
        log.rebind(&thread("empty")?, &ana),
        is_invalid,
        "a rebind of a thread without records",
    )?;
    ensure!(
        binding_of(&log, "empty")?.is_none(),
        "a refused rebind bound the thread"
    );
    say(&log, "legacy", "before bindings")?;
    let first = rebind(&log, "legacy", &ana)?;
    ensure!(
        Some(first.clone()) == bound(&ana, 1),
        "the first rebind of an unbound thread answered {first:?}"
    );
    let same = rebind(&log, "legacy", &ana)?;
    ensure!(
        same == first,
        "a rebind to the destination it has answered {same:?}"
    );
    let moved = rebind(&log, "legacy", &bea)?;
    ensure!(
        Some(moved) == bound(&bea, 2),
        "a second rebind answered another binding"
    );
    let seen = binding_of(&backend.thread_log(), "legacy")?;
    ensure!(
        seen == bound(&bea, 2),
        "after two rebinds another handle reads {seen:?}"
    );

    say_to(&log, "bound", &ana, "first")?;
    let rebound = rebind(&log, "bound", &bea)?;
    ensure!(
        Some(rebound) == bound(&bea, 1),
        "a rebind of a bound thread did not take the next generation"
    );
    refused(
        log.append_to(
            &thread("bound")?,
            Some(&ana),
            NewRecord::user("ana", "old", 2),
        ),
        is_conflict,
        "an append naming the destination the thread was rebound from",
    )?;
    let tail = say_to(&log, "bound", &bea, "second")?;
    ensure!(
        settle(&log, "bound", tail.get())?,
        "the thread could not be settled at its tail"
    );
    let unchanged = rebind(&log, "bound", &bea)?;
    ensure!(
        Some(unchanged) == bound(&bea, 1),
        "a rebind to the destination it has changed the binding"
    );
    let listed = pending(&log, None, 10)?;
    ensure!(
        !listed.iter().any(|(name, _)| name == "bound"),
        "a rebind to the destination it has marked the thread pending: {listed:?}"
    );
    let threads = listed_threads(&log)?;
    ensure!(
        threads == ["bound", "legacy"],
        "threads listed as {threads:?}"
    );
    Ok(())
}

fn appends_mark_pending_and_settle_needs_the_tail<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let ana = destination("ana", &["a"])?;
    ensure!(
        pending(&log, None, 10)?.is_empty(),
        "an empty log has pending threads"
    );
    say(&log, "t", "one")?;
    let listed = pending(&log, None, 10)?;
    ensure!(listed == pairs(&[("t", 1)]), "after one append: {listed:?}");
    say(&log, "t", "two")?;
    let listed = pending(&log, None, 10)?;
    ensure!(
        listed == pairs(&[("t", 2)]),
        "after two appends: {listed:?}"
    );
    ensure!(
        !settle(&log, "t", 1)?,
        "a settle with a stale tail succeeded"
    );
    let listed = pending(&log, None, 10)?;
    ensure!(
        listed == pairs(&[("t", 2)]),
        "after a stale settle: {listed:?}"
    );
    // A worker's pass read tail 2; an append lands before it settles.
    say(&log, "t", "three")?;
    ensure!(
        !settle(&log, "t", 2)?,
        "a settle raced by an append succeeded"
    );
    let listed = pending(&log, None, 10)?;
    ensure!(
        listed == pairs(&[("t", 3)]),
        "after a raced settle: {listed:?}"
    );
    ensure!(settle(&log, "t", 3)?, "a settle at the pending tail failed");
    let listed = pending(&log, None, 10)?;
    ensure!(listed.is_empty(), "after settling: {listed:?}");
    ensure!(!settle(&log, "t", 3)?, "a second settle succeeded");
    ensure!(
        !settle(&log, "never", 1)?,
        "a thread without records was settled"
    );
    say_to(&log, "u", &ana, "bound")?;
    say(&log, "t", "four")?;
    let listed = pending(&backend.thread_log(), None, 10)?;
    ensure!(
        listed == pairs(&[("t", 4), ("u", 1)]),
        "another handle lists {listed:?}"
    );
    Ok(())
}

fn pending_threads_page_and_skip_parked<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    for name in ["c", "a", "e", "b", "d"] {
        say(&log, name, "hello")?;
    }
    say(&log, "a", "again")?;
    let all = pending(&log, None, 10)?;
    ensure!(
        all == pairs(&[("a", 2), ("b", 1), ("c", 1), ("d", 1), ("e", 1)]),
        "pending threads listed as {all:?}"
    );
    for (after, limit, expected) in [
        (None, 2, pairs(&[("a", 2), ("b", 1)])),
        (Some("b"), 2, pairs(&[("c", 1), ("d", 1)])),
        (Some("bb"), 10, pairs(&[("c", 1), ("d", 1), ("e", 1)])),
        (Some("e"), 10, Vec::new()),
    ] {
        let page = pending(&log, after, limit)?;
        ensure!(
            page == expected,
            "{limit} pending threads after {after:?}: {page:?}"
        );
    }
    park(&log, "c", 1, "invalid-input")?;
    let page = pending(&log, Some("a"), 2)?;
    ensure!(
        page == pairs(&[("b", 1), ("d", 1)]),
        "2 pending threads after a, c parked: {page:?}"
    );
    say(&log, "c", "more")?;
    let listed = pending(&backend.thread_log(), None, 10)?;
    ensure!(
        listed == pairs(&[("a", 2), ("b", 1), ("d", 1), ("e", 1)]),
        "with c parked and appended to: {listed:?}"
    );
    Ok(())
}

fn rebind_unparks_and_marks_pending<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let (ana, bea) = (destination("ana", &["a"])?, destination("bea", &["a"])?);
    say_to(&log, "t", &ana, "one")?;
    say_to(&log, "t", &ana, "two")?;
    park(&log, "t", 2, "corrupt")?;
    say(&log, "t", "three")?;
    let listed = pending(&log, None, 10)?;
    ensure!(listed.is_empty(), "a parked thread is listed: {listed:?}");
    let rebound = rebind(&log, "t", &bea)?;
    ensure!(
        Some(rebound) == bound(&bea, 1),
        "the rebind answered another binding"
    );
    let listed = pending(&log, None, 10)?;
    ensure!(
        listed == pairs(&[("t", 3)]),
        "after its rebind the thread is listed as {listed:?}"
    );
    say(&log, "legacy", "before bindings")?;
    ensure!(
        settle(&log, "legacy", 1)?,
        "the legacy thread could not be settled"
    );
    park(&log, "legacy", 1, "invalid-input")?;
    let parked = overview(&log)?.parked;
    ensure!(
        parked == [("invalid-input".to_owned(), 1)],
        "with one thread parked the overview shows {parked:?}"
    );
    rebind(&log, "legacy", &ana)?;
    let listed = pending(&backend.thread_log(), None, 10)?;
    ensure!(
        listed == pairs(&[("legacy", 1), ("t", 3)]),
        "after rebinding a settled, parked thread: {listed:?}"
    );
    let parked = overview(&log)?.parked;
    ensure!(
        parked.is_empty(),
        "after every parked thread was rebound the overview shows {parked:?}"
    );
    Ok(())
}

fn mark_all_pending_marks_every_thread<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let ana = destination("ana", &["a"])?;
    say(&log, "a", "one")?;
    say(&log, "b", "one")?;
    say(&log, "b", "two")?;
    say_to(&log, "c", &ana, "one")?;
    refused(
        log.rebind(&thread("empty")?, &ana),
        is_invalid,
        "a rebind of a thread without records",
    )?;
    for (name, tail) in pending(&log, None, 10)? {
        ensure!(settle(&log, &name, tail)?, "{name} could not be settled");
    }
    ensure!(
        pending(&log, None, 10)?.is_empty(),
        "settled threads are listed"
    );
    park(&log, "c", 1, "corrupt")?;
    for round in ["first", "second"] {
        let marked = ok(log.mark_all_pending(), "mark all pending")?;
        ensure!(
            marked == 3,
            "the {round} marking answered {marked}, not the 3 threads with records"
        );
        let listed = pending(&backend.thread_log(), None, 10)?;
        ensure!(
            listed == pairs(&[("a", 1), ("b", 2)]),
            "after the {round} marking (c parked): {listed:?}"
        );
    }
    Ok(())
}

fn thread_page_limits_out_of_range_are_invalid<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    say(&log, "a", "hello")?;
    let a = thread("a")?;
    for limit in [0, MAX_PAGE_RECORDS + 1] {
        for after in [None, Some(&a)] {
            refused(
                log.threads(after, limit),
                is_invalid,
                &format!("a listing of {limit} threads after {after:?}"),
            )?;
            refused(
                log.pending_threads(after, limit),
                is_invalid,
                &format!("a listing of {limit} pending threads after {after:?}"),
            )?;
        }
    }
    let threads = ok(log.threads(None, MAX_PAGE_RECORDS), "largest listing")?;
    ensure!(
        threads == [a.clone()],
        "the largest listing holds {threads:?}"
    );
    let listed = ok(
        log.pending_threads(None, MAX_PAGE_RECORDS),
        "largest pending listing",
    )?;
    ensure!(
        listed
            == [PendingThread {
                thread: a,
                tail: Sequence::new(1)
            }],
        "the largest pending listing holds {listed:?}"
    );
    Ok(())
}

fn bad_park_kinds_are_refused<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let t = thread("t")?;
    say(&log, "t", "hello")?;
    for (kind, what) in [
        (String::new(), "an empty kind"),
        (
            "k".repeat(MAX_PARK_KIND_BYTES + 1),
            "a kind one byte too long",
        ),
        (
            "\u{e9}".repeat(MAX_PARK_KIND_BYTES / 2 + 1),
            "a kind of fewer characters than the limit but more bytes",
        ),
        ("bad\nkind".to_owned(), "a kind with a newline"),
        ("bad\u{0}kind".to_owned(), "a kind with a NUL"),
    ] {
        refused(log.park(&t, Sequence::new(1), &kind), is_invalid, what)?;
    }
    let listed = pending(&log, None, 10)?;
    ensure!(
        listed == pairs(&[("t", 1)]),
        "after refused parks the pending threads are {listed:?}"
    );
    let parked = overview(&log)?.parked;
    ensure!(
        parked.is_empty(),
        "after refused parks the overview shows {parked:?}"
    );
    let longest = "k".repeat(MAX_PARK_KIND_BYTES);
    park(&log, "t", 1, &longest)?;
    ensure!(
        pending(&log, None, 10)?.is_empty(),
        "a thread parked with the longest kind is listed"
    );
    let parked = overview(&log)?.parked;
    ensure!(
        parked == [(longest, 1)],
        "with one thread parked the overview shows {parked:?}"
    );
    Ok(())
}

fn overview_counts_threads<B: ActivityBackend>(backend: &B) -> Checked {
    let log = backend.thread_log();
    let empty = overview(&log)?;
    ensure!(
        empty == ThreadOverview::default(),
        "an empty log's overview is {empty:?}"
    );
    let ana = destination("ana", &["a"])?;
    let bea = destination("bea", &["a"])?;
    let ana_elsewhere = destination("ana", &["c"])?;
    for name in ["a1", "a2", "a3"] {
        say_to(&log, name, &ana, "hello")?;
    }
    say_to(&log, "b1", &bea, "hello")?;
    say_to(&log, "c1", &ana_elsewhere, "hello")?;
    say(&log, "u1", "before bindings")?;
    say(&log, "u2", "before bindings")?;
    rebind(&log, "u2", &bea)?;
    refused(
        log.rebind(&thread("empty")?, &ana),
        is_invalid,
        "a rebind of a thread without records",
    )?;
    for name in ["a1", "b1"] {
        ensure!(settle(&log, name, 1)?, "{name} could not be settled");
    }
    for (name, kind) in [
        ("a2", "invalid-input"),
        ("a3", "invalid-input"),
        ("u1", "corrupt"),
    ] {
        park(&log, name, 1, kind)?;
    }
    let expected = ThreadOverview {
        destinations: vec![
            DestinationCount {
                destination: ana,
                threads: 3,
            },
            DestinationCount {
                destination: bea,
                threads: 2,
            },
            DestinationCount {
                destination: ana_elsewhere,
                threads: 1,
            },
        ],
        unbound: 1,
        unreadable: 0,
        // Parked threads stay marked: a2, a3, c1, u1 and u2.
        pending: 5,
        parked: vec![("corrupt".to_owned(), 1), ("invalid-input".to_owned(), 2)],
    };
    for (handle, log) in [("this", log), ("another", backend.thread_log())] {
        let seen = overview(&log)?;
        ensure!(
            seen == expected,
            "{handle} handle's overview is {seen:?}, expected {expected:?}"
        );
    }
    Ok(())
}

fn concurrent_first_appends_bind_one_destination<B: ActivityBackend>(backend: &B) -> Checked {
    const WRITERS: usize = 4;
    const EACH: usize = 5;
    let t = thread("contested")?;
    let destinations = (0..WRITERS)
        .map(|writer| destination(&format!("user{writer}"), &["a"]))
        .collect::<Result<Vec<_>, _>>()?;
    let start = Barrier::new(WRITERS);
    let logs: Vec<B::Log> = (0..WRITERS).map(|_| backend.thread_log()).collect();
    let outcomes: Vec<Vec<Result<Sequence, ActivityError>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = logs
            .iter()
            .zip(&destinations)
            .enumerate()
            .map(|(writer, (log, destination))| {
                let (t, start) = (&t, &start);
                scope.spawn(move || {
                    start.wait();
                    (0..EACH)
                        .map(|index| {
                            log.append_to(
                                t,
                                Some(destination),
                                NewRecord::user("ana", format!("{writer}/{index}"), 1),
                            )
                            .map(|record| record.sequence)
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut winners = Vec::new();
    for (writer, outcome) in outcomes.into_iter().enumerate() {
        let mut accepted = 0;
        for result in outcome {
            match result {
                Ok(_) => accepted += 1,
                Err(ActivityError::DestinationConflict) => {}
                Err(error) => {
                    return Err(Failure(format!(
                        "writer {writer}'s append was refused with {error:?}"
                    )));
                }
            }
        }
        if accepted > 0 {
            winners.push((writer, accepted));
        }
    }
    let [(winner, accepted)] = winners[..] else {
        return Err(Failure(format!(
            "appends of {} writers were accepted (writer, appends): {winners:?}",
            winners.len()
        )));
    };
    ensure!(
        accepted == EACH,
        "{accepted} of the binding writer's {EACH} appends were accepted"
    );
    let log = backend.thread_log();
    let binding = ok(log.binding(&t), "binding")?;
    ensure!(
        binding == bound(&destinations[winner], 0),
        "the thread is bound to {binding:?}, not to the destination of the writer whose appends were accepted"
    );
    let tail = ok(log.inspect_tail(&t), "tail")?;
    ensure!(
        tail == Sequence::new(EACH as u64),
        "the contested thread's tail is {tail}"
    );
    Ok(())
}
