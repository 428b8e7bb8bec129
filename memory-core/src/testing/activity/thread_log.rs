//! The thread log suite: sequences, pages, digests, listing and concurrent appends.

use std::sync::Barrier;

use super::{ActivityBackend, ok, refused, sync_suite, thread};
use crate::activity::thread::{MAX_PAGE_RECORDS, MAX_PARTICIPANT_BYTES};
use crate::activity::{ActivityError, NewRecord, RecordBody, RecordDigest, Sequence, ThreadLog};
use crate::testing::fixtures::{Checked, Failure, ensure};

sync_suite! {
    /// Every rule [`run_thread_log_suite`] checks, in order.
    THREAD_LOG_RULES;
    /// Runs every rule of [`THREAD_LOG_RULES`], each on a fresh backend from `factory`.
    run_thread_log_suite;
    ActivityBackend;
    "appends-number-each-thread-from-one" => appends_number_each_thread_from_one,
    "pages-start-after-the-cursor-and-are-bounded" => pages_start_after_the_cursor_and_are_bounded,
    "records-read-back-whole-from-another-handle" => records_read_back_whole_from_another_handle,
    "record-digest-excludes-the-opaque-cursor" => record_digest_excludes_the_opaque_cursor,
    "oversized-records-are-refused-and-nothing-is-appended" => oversized_records_are_refused,
    "threads-are-listed-in-id-order-after-a-cursor" => threads_are_listed_in_id_order,
    "concurrent-appends-get-consecutive-sequences" => concurrent_appends_get_consecutive_sequences,
}

fn sequences(records: &[crate::activity::ThreadRecord]) -> Vec<u64> {
    records.iter().map(|record| record.sequence.0).collect()
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
            stored.sequence == Sequence(index as u64 + 1),
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
        first_of_b.sequence == Sequence(1),
        "another thread's first record got {}",
        first_of_b.sequence
    );
    let tails = (
        ok(log.inspect_tail(&a), "tail")?,
        ok(log.inspect_tail(&b), "tail")?,
    );
    ensure!(
        tails == (Sequence(5), Sequence(1)),
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
    let page = ok(log.read_page(&a, Sequence(1), 2), "read page")?;
    ensure!(
        sequences(&page) == [2, 3],
        "page after 1 of 2 is {:?}",
        sequences(&page)
    );
    let rest = ok(log.read_page(&a, Sequence(3), 10), "read page")?;
    ensure!(
        sequences(&rest) == [4, 5],
        "page after 3 is {:?}",
        sequences(&rest)
    );
    ensure!(
        ok(log.read_page(&a, Sequence(5), 10), "read past the tail")?.is_empty(),
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
        stored.digest == RecordDigest::of(&t, Sequence(1), &record),
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
        stored.sequence == Sequence(2),
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
        let listed = ok(B::threads(&other, after.as_ref(), limit), "list threads")?;
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
        B::threads(&other, None, 0),
        |error| matches!(error, ActivityError::InvalidInput { .. }),
        "a listing of 0 threads",
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
                                .map(|record| record.sequence.0)
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
