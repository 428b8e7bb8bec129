//! Fold checkpoints and the fold cache: a cold read after a restart starts from the thread's
//! checkpoint on a real SQLite file, a checkpoint of another version, another forgotten set or an
//! unknown sequence is never used, and the cache counts hits, misses, rebuilds and evictions (by its
//! bound and by idle expiry on an injected clock).

use crate::common;

use std::sync::Arc;

use common::*;
use memory_context::fold::{FoldReader, FoldScope, ReadStart};
use memory_context::{Context, Conversation, Fold};
use memory_core::ManualClock;
use memory_core::activity::{FoldCheckpoint, RememberingStore, Sequence, SourceId, ThreadLog};
use memory_sqlite::thread_log::SqliteThreadLog;

fn long_thread(log: &dyn ThreadLog, thread: &memory_core::activity::ThreadId, turns: usize) {
    system(log, thread, "Be brief.");
    for turn in 0..turns {
        user(log, thread, &format!("question {turn}"));
        call(log, thread, &format!("c{turn}"), "lookup");
        result(log, thread, &format!("c{turn}"), &format!("found {turn}"));
        answer(log, thread, &format!("answer {turn}"));
    }
}

#[test]
fn a_cold_read_after_a_restart_starts_from_the_checkpoint_and_equals_a_rebuild() {
    let directory = tempfile::tempdir().expect("directory");
    let path = directory.path().join("memory.sqlite");
    let thread = thread("long");
    {
        let log = Arc::new(SqliteThreadLog::open(&path).expect("open"));
        long_thread(&*log, &thread, 100);
        let reader = FoldReader::new(Conversation, FoldScope::Thread, log.clone());
        let first = reader.read(&thread).expect("read");
        assert_eq!(first.start, ReadStart::Cold);
        assert_eq!(reader.stats().checkpoint_saves, 1);
    }
    // A new process.
    let log = Arc::new(SqliteThreadLog::open(&path).expect("open again"));
    user(&*log, &thread, "one more");
    let reader = FoldReader::new(Conversation, FoldScope::Thread, log.clone());
    let restored = reader.read(&thread).expect("read");
    assert_eq!(restored.start, ReadStart::Checkpoint);
    assert_eq!(
        restored.read_now, 1,
        "only the record after the checkpoint is folded"
    );
    let rebuilt = reader.read_uncached(&thread).expect("rebuild");
    assert_eq!(restored.state, rebuilt.state);
    assert_eq!(restored.report, rebuilt.report);
    assert_eq!(restored.through, rebuilt.through);
    let stats = reader.stats();
    assert_eq!((stats.misses, stats.checkpoint_restores), (1, 1));
    assert_eq!(reader.read(&thread).expect("read").start, ReadStart::Warm);
    assert_eq!(reader.stats().hits, 1);

    // Without checkpoints a cold read folds every record again.
    let replaying =
        FoldReader::new(Conversation, FoldScope::Thread, log.clone()).checkpointing(None);
    let replayed = replaying.read(&thread).expect("read");
    assert_eq!(replayed.start, ReadStart::Cold);
    assert_eq!(replayed.read_now, 402);
}

#[test]
fn a_checkpoint_of_another_version_or_forgotten_set_or_a_missing_record_is_ignored() {
    let log = log();
    let thread = thread("t");
    long_thread(&*log, &thread, 70);
    let writer =
        FoldReader::new(Conversation, FoldScope::Thread, log.clone()).forgetting(log.clone());
    writer.read(&thread).expect("read");
    let stored = log
        .load_checkpoint(&thread, Conversation.name(), Conversation.version())
        .expect("load")
        .expect("a checkpoint was stored");
    assert_eq!(stored.through, Sequence::new(281));

    // Another version of the fold finds nothing.
    assert!(
        log.load_checkpoint(&thread, Conversation.name(), Conversation.version() + 1)
            .expect("load")
            .is_none()
    );
    // A checkpoint through a record the log does not have is ignored.
    log.save_checkpoint(
        &thread,
        Conversation.name(),
        Conversation.version(),
        &FoldCheckpoint {
            through: Sequence::new(10_000),
            ..stored.clone()
        },
    )
    .expect("save");
    let reader =
        FoldReader::new(Conversation, FoldScope::Thread, log.clone()).forgetting(log.clone());
    assert_eq!(reader.read(&thread).expect("read").start, ReadStart::Cold);
    assert_eq!(reader.stats().checkpoints_ignored, 1);

    // A state that does not decode is ignored.
    log.save_checkpoint(
        &thread,
        Conversation.name(),
        Conversation.version(),
        &FoldCheckpoint {
            state: "{\"fold\": \"conversation\"}\n{}".to_owned(),
            ..stored.clone()
        },
    )
    .expect("save");
    let reader =
        FoldReader::new(Conversation, FoldScope::Thread, log.clone()).forgetting(log.clone());
    assert_eq!(reader.read(&thread).expect("read").start, ReadStart::Cold);

    // A checkpoint folded before a forget is never used after it: its copy of the text stays hidden.
    log.save_checkpoint(
        &thread,
        Conversation.name(),
        Conversation.version(),
        &stored,
    )
    .expect("save");
    log.suppress(
        &SourceId::thread_record(&thread, Sequence::new(2)),
        None,
        1_800_000_000_000,
    )
    .expect("forget");
    let reader =
        FoldReader::new(Conversation, FoldScope::Thread, log.clone()).forgetting(log.clone());
    let read = reader.read(&thread).expect("read");
    assert_eq!(read.start, ReadStart::Cold);
    assert!(read.state.forgotten.contains_key(&Sequence::new(2)));
    assert!(!format!("{:?}", read.state.segments[1].data()).contains("question 0"));
}

#[test]
fn the_cache_counts_rebuilds_and_evicts_by_its_bound_and_when_idle() {
    let log = log();
    let (a, b) = (thread("a"), thread("b"));
    long_thread(&*log, &a, 2);
    long_thread(&*log, &b, 2);
    let clock = Arc::new(ManualClock::new(1_000));
    let reader = FoldReader::with_capacity(Conversation, FoldScope::Thread, log.clone(), 1)
        .forgetting(log.clone())
        .with_idle_expiry(60_000, clock.clone());
    reader.read(&a).expect("read");
    reader.read(&b).expect("read");
    assert_eq!(
        reader.stats().evictions,
        1,
        "the bound of one thread evicts a"
    );
    clock.advance(60_001);
    reader.read(&a).expect("read");
    let stats = reader.stats();
    assert_eq!(stats.evictions, 2, "b idled out, leaving room for a");
    assert_eq!((stats.misses, stats.hits, stats.cached), (3, 0, 1));
    reader.read(&a).expect("read");
    assert_eq!(reader.stats().hits, 1);
    log.suppress(
        &SourceId::thread_record(&a, Sequence::new(2)),
        None,
        1_800_000_000_000,
    )
    .expect("forget");
    reader.read(&a).expect("read");
    assert_eq!(
        reader.stats().rebuilds,
        1,
        "a forget since makes the cached state fold again"
    );
    let context = Context::new(log.clone());
    context.view(&a, 1_000).expect("view");
    assert_eq!(context.fold_stats().misses, 1);
}

#[test]
fn a_state_too_large_to_store_is_counted_and_the_read_still_answers() {
    let log = log();
    let thread = thread("large");
    // Two records of 9 MB each: together more than a checkpoint may hold.
    for index in 0..2 {
        user(
            &*log,
            &thread,
            &format!("{index} {}", "x".repeat(9_000_000)),
        );
    }
    let reader =
        FoldReader::new(Conversation, FoldScope::Thread, log.clone()).checkpointing(Some(1));
    let read = reader.read(&thread).expect("the read answers");
    assert_eq!(read.state.segments.len(), 2);
    let stats = reader.stats();
    assert_eq!((stats.checkpoint_saves, stats.checkpoints_unsaved), (0, 1));
    assert!(
        log.load_checkpoint(&thread, Conversation.name(), Conversation.version())
            .expect("load")
            .is_none()
    );
}
