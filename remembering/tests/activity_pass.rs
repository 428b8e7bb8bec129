//! Committed-activity passes: save-apply-advance, fencing, lost acknowledgements, noncontiguous work.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::sync::Arc;

use memory_core::activity::{
    ActivityError, NewRecord, ProgressStore, RecordBody, Sequence, ThreadId, ThreadLog,
};
use memory_core::{ManualClock, MemoryReader};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use memory_testkit::activity::GappyLog;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use remembering::{
    PassLimits, PassPoint, PassStop, RememberingError, StatementExtractor, UnboundThreads,
};
use support::{
    CallAt, Fault, FaultyWriter, PauseAt, processor, statement_namespace, temp_db, thread,
};

const LIMITS: PassLimits = PassLimits {
    max_records: 100,
    page_size: 2,
    timeout_ms: 1_000,
    lease_ms: 2_000,
};

fn append_users(path: &std::path::Path, thread: &ThreadId, count: usize) {
    let log = SqliteThreadLog::open(path).unwrap();
    for index in 0..count {
        log.append(
            thread,
            NewRecord::user("ana", format!("fact {index}"), 100 + index as i64),
        )
        .unwrap();
    }
}

#[tokio::test]
async fn pass_applies_each_user_statement_once_with_attribution() {
    let db = temp_db();
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    let mut said = NewRecord::user("ana", "I live in Lisbon", 500);
    said.observers = vec!["bea".to_owned()];
    log.append(&t, said).unwrap();
    log.append(&t, NewRecord::assistant("I live in Lisbon", 501))
        .unwrap();
    log.append(
        &t,
        NewRecord {
            occurred_at: None,
            speaker: "assistant".to_owned(),
            observers: Vec::new(),
            body: RecordBody::RunCompleted {
                outcome: "completed".to_owned(),
            },
            opaque_cursor: None,
        },
    )
    .unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    let worker = processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS);
    let report = worker.run_pass(&t).await.unwrap();
    assert_eq!(report.processed, 3);
    assert_eq!(report.cursor, Sequence::new(3));
    assert_eq!(report.stop, PassStop::ReachedTail);
    assert!(!report.pending_beyond_tail);
    assert_eq!((report.kept, report.dropped.len()), (1, 0));
    // The assistant repeating the statement is not a second witness: one document, one attribution.
    let history = writer.inner.history();
    assert_eq!(history.len(), 1);
    let document = &history[0];
    assert_eq!(document.key.namespace, statement_namespace(&t));
    let attribution = &document.content.attributions[..];
    assert_eq!(attribution.len(), 1);
    assert_eq!(attribution[0].speaker, "ana");
    assert_eq!(attribution[0].observers, vec!["bea".to_owned()]);
    assert_eq!(attribution[0].activity_at, Some(500));
    let first = SqliteThreadLog::open(&db.path)
        .unwrap()
        .read_page(&t, Sequence::ZERO, 1)
        .unwrap();
    assert_eq!(attribution[0].locator, first[0].locator());
    let progress = SqliteProgressStore::open(&db.path).unwrap();
    let view = progress
        .inspect(&worker.key(&t, 0).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(
        (view.cursor, view.pending, view.last_advance_at),
        (Sequence::new(3), None, Some(1_000))
    );
    assert_eq!(view.lease, None, "the pass released its lease");
}

#[tokio::test]
async fn limits_bound_a_pass_and_work_beyond_the_captured_tail_is_reported() {
    let db = temp_db();
    let t = thread("t");
    append_users(&db.path, &t, 5);
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    let limited = PassLimits {
        max_records: 2,
        ..LIMITS
    };
    let report = processor(&db.path, writer.clone(), clock.clone(), "a", limited)
        .run_pass(&t)
        .await
        .unwrap();
    assert_eq!((report.processed, report.stop), (2, PassStop::MaxRecords));

    let ticking = clock.clone();
    let slow =
        processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS).with_hooks(Arc::new(
            CallAt::new(PassPoint::Advanced, 1, move || ticking.advance(1_000)),
        ));
    let report = slow.run_pass(&t).await.unwrap();
    assert_eq!((report.processed, report.stop), (1, PassStop::Timeout));

    let appender = SqliteThreadLog::open(&db.path).unwrap();
    let other = t.clone();
    let growing = processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS).with_hooks(
        Arc::new(CallAt::new(PassPoint::Advanced, 1, move || {
            appender
                .append(&other, NewRecord::user("ana", "late fact", 900))
                .unwrap();
        })),
    );
    let report = growing.run_pass(&t).await.unwrap();
    assert_eq!(report.captured_tail, Sequence::new(5));
    assert_eq!(
        report.cursor,
        Sequence::new(5),
        "the pass stops at the tail it captured"
    );
    assert!(report.pending_beyond_tail);
    let report = processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS)
        .run_pass(&t)
        .await
        .unwrap();
    assert_eq!((report.processed, report.cursor), (1, Sequence::new(6)));
    assert!(!report.pending_beyond_tail);
    assert_eq!(writer.inner.history().len(), 6);
}

#[tokio::test]
async fn lost_acknowledgement_retries_the_saved_output_and_lands_once() {
    let db = temp_db();
    let t = thread("t");
    append_users(&db.path, &t, 2);
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    writer.inject(Fault::LoseAcknowledgement);
    let worker = processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS);
    let error = worker.run_pass(&t).await.unwrap_err();
    assert!(matches!(error, RememberingError::Memory(_)), "{error:?}");
    let progress = SqliteProgressStore::open(&db.path).unwrap();
    let view = progress
        .inspect(&worker.key(&t, 0).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(view.cursor, Sequence::ZERO);
    assert!(
        view.pending.is_some(),
        "the output stays saved for the retry"
    );
    let landed = writer.inner.history()[0].clone();

    clock.advance(5_000);
    let report = worker.run_pass(&t).await.unwrap();
    assert_eq!(report.reused_saved_output, 1);
    assert_eq!(
        report.receipts[0].document, landed,
        "same receipt as the lost one"
    );
    assert_eq!(
        writer.inner.history().len(),
        2,
        "each record landed exactly once"
    );
    let sent = writer.sent.lock().unwrap().clone();
    assert_eq!(
        sent[0], sent[1],
        "the retry sent the saved command unchanged"
    );
}

#[tokio::test]
async fn noncontiguous_pending_work_stops_the_pass_before_the_gap() {
    let db = temp_db();
    let t = thread("t");
    append_users(&db.path, &t, 5);
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    let worker = remembering::ActivityProcessor::new(remembering::ActivityProcessorParts {
        log: Arc::new(GappyLog::new(
            SqliteThreadLog::open(&db.path).unwrap(),
            Sequence::new(3),
        )),
        progress: Arc::new(SqliteProgressStore::open(&db.path).unwrap()),
        references: Arc::new(
            memory_sqlite::remembering_store::SqliteRememberingStore::open(&db.path).unwrap(),
        ),
        writer: writer.clone(),
        extractor: StatementExtractor::new(),
        clock: clock.clone(),
        processor: memory_core::activity::ProcessorId::new("statements").unwrap(),
        version: memory_core::activity::ProcessorVersion::new(1),
        owner: memory_core::activity::WorkerId::new("a").unwrap(),
        limits: LIMITS,
        unbound: UnboundThreads::PerThread {
            scopes: support::scopes(),
        },
    })
    .unwrap();
    let error = worker.run_pass(&t).await.unwrap_err();
    assert!(
        matches!(
            error,
            RememberingError::Activity(ActivityError::Noncontiguous { expected, found })
                if expected == Sequence::new(3) && found == Sequence::new(4)
        ),
        "{error:?}"
    );
    let view = SqliteProgressStore::open(&db.path)
        .unwrap()
        .inspect(&worker.key(&t, 0).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(view.cursor, Sequence::new(2));
    assert_eq!(
        writer.inner.history().len(),
        2,
        "nothing after the gap was applied"
    );
}

fn seeds() -> u64 {
    match std::env::var("MEMORY_TEST_SCALE").as_deref() {
        Ok("large") => 1_000,
        _ => 24,
    }
}

/// Worker A pauses at a random point past its lease; B claims with a higher epoch and finishes; A resumes.
async fn stale_worker_case(seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let db = temp_db();
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    let total = rng.random_range(1..=8_usize);
    let mut statements = 0;
    for index in 0..total {
        let record = if rng.random_bool(0.7) {
            statements += 1;
            NewRecord::user("ana", format!("fact {index}"), index as i64)
        } else {
            NewRecord::assistant(format!("reply {index}"), index as i64)
        };
        log.append(&t, record).unwrap();
    }
    let limits = PassLimits {
        page_size: rng.random_range(1..=4),
        ..LIMITS
    };
    let point = PassPoint::ACTIVITY[rng.random_range(0..PassPoint::ACTIVITY.len())];
    let occurrence = rng.random_range(1..=total);
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    let hooks = Arc::new(PauseAt::new(point, occurrence));
    let worker_a = Arc::new(
        processor(&db.path, writer.clone(), clock.clone(), "a", limits).with_hooks(hooks.clone()),
    );
    let key = worker_a.key(&t, 0).unwrap();
    let a_thread = t.clone();
    let runner = worker_a.clone();
    let mut task = tokio::spawn(async move { runner.run_pass(&a_thread).await });
    let paused = tokio::select! {
        () = hooks.paused.notified() => true,
        finished = &mut task => {
            finished.unwrap().unwrap();
            false
        }
    };
    let progress = SqliteProgressStore::open(&db.path).unwrap();
    let cursor_before_b = progress.inspect(&key).unwrap().unwrap().cursor;
    clock.advance(limits.lease_ms as i64 + 1);
    let worker_b = processor(&db.path, writer.clone(), clock.clone(), "b", limits);
    let report_b = worker_b.run_pass(&t).await.unwrap();
    assert!(report_b.epoch.get() >= 2, "seed {seed}");
    assert!(
        report_b.cursor >= cursor_before_b,
        "seed {seed}: progress moved back"
    );
    let history_after_b = writer.inner.history();
    let view_after_b = progress.inspect(&key).unwrap().unwrap();
    if paused {
        hooks.resume.notify_one();
        let result_a = task.await.unwrap();
        if let Err(error) = &result_a {
            assert!(error.is_stale_lease(), "seed {seed}: {error:?}");
        }
    }
    assert_eq!(
        writer.inner.history(),
        history_after_b,
        "seed {seed}: A changed memory"
    );
    assert_eq!(
        progress.inspect(&key).unwrap().unwrap(),
        view_after_b,
        "seed {seed}: A changed progress"
    );
    assert_eq!(
        view_after_b.cursor,
        Sequence::new(total as u64),
        "seed {seed}"
    );
    assert_eq!(view_after_b.pending, None, "seed {seed}");
    // Each statement's effect landed exactly once.
    assert_eq!(history_after_b.len(), statements, "seed {seed}");
    let mut keys: Vec<_> = history_after_b.iter().map(|d| d.key.clone()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), statements, "seed {seed}");
    for key in keys {
        assert!(writer.read(&key).await.unwrap().is_some(), "seed {seed}");
    }
}

#[tokio::test]
async fn stale_worker_changes_nothing_after_a_newer_claim() {
    for seed in 0..seeds() {
        stale_worker_case(seed).await;
    }
}
