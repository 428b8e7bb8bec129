//! The SQLite thread log and progress store keep their rules.
#![allow(clippy::unwrap_used)]

mod support;

use memory_core::activity::{
    ActivityError, FencingEpoch, MAX_PROGRESS_UTF16_UNITS, NewRecord, PendingOutput, ProcessorId,
    ProcessorVersion, ProgressKey, ProgressStore, RecordDigest, Sequence, ThreadLog, WorkerId,
};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use support::{temp_db, thread};

fn key(name: &str) -> ProgressKey {
    ProgressKey {
        processor: ProcessorId::new("statements").unwrap(),
        version: ProcessorVersion(1),
        thread: thread(name),
    }
}

fn worker(name: &str) -> WorkerId {
    WorkerId::new(name).unwrap()
}

fn pending(key: &ProgressKey, sequence: u64, output: serde_json::Value) -> PendingOutput {
    PendingOutput {
        sequence: Sequence(sequence),
        work_id: key.work_id(Sequence(sequence)),
        output,
    }
}

#[test]
fn thread_log_appends_in_sequence_and_pages_are_bounded() {
    let db = temp_db();
    let log = SqliteThreadLog::open(&db.path).unwrap();
    let (a, b) = (thread("a"), thread("b"));
    assert_eq!(log.inspect_tail(&a).unwrap(), Sequence::ZERO);
    for index in 0..5 {
        let stored = log
            .append(&a, NewRecord::user("ana", format!("fact {index}"), index))
            .unwrap();
        assert_eq!(stored.sequence, Sequence(index as u64 + 1));
    }
    log.append(&b, NewRecord::assistant("hello", 1)).unwrap();
    assert_eq!(log.inspect_tail(&a).unwrap(), Sequence(5));
    assert_eq!(log.inspect_tail(&b).unwrap(), Sequence(1));
    let page = log.read_page(&a, Sequence(1), 2).unwrap();
    assert_eq!(
        page.iter()
            .map(|record| record.sequence.0)
            .collect::<Vec<_>>(),
        vec![2, 3]
    );
    assert!(log.read_page(&a, Sequence(5), 10).unwrap().is_empty());
    assert!(matches!(
        log.read_page(&a, Sequence::ZERO, 0),
        Err(ActivityError::InvalidInput { .. })
    ));
    assert!(matches!(
        log.read_page(&a, Sequence::ZERO, 10_001),
        Err(ActivityError::InvalidInput { .. })
    ));
    // Reopening reads the same records back, digests verified.
    let before = log.read_page(&a, Sequence::ZERO, 100).unwrap();
    drop(log);
    let log = SqliteThreadLog::open(&db.path).unwrap();
    assert_eq!(log.read_page(&a, Sequence::ZERO, 100).unwrap(), before);
    assert_eq!(log.threads(None, 10).unwrap(), vec![a.clone(), b.clone()]);
}

#[test]
fn record_digest_excludes_the_opaque_cursor() {
    let db = temp_db();
    let log = SqliteThreadLog::open(&db.path).unwrap();
    let t = thread("t");
    let mut record = NewRecord::user("ana", "I moved to Porto", 10);
    record.opaque_cursor = Some("resp_1".to_owned());
    let stored = log.append(&t, record.clone()).unwrap();
    record.opaque_cursor = None;
    assert_eq!(stored.digest, RecordDigest::of(&t, Sequence(1), &record));
    let read = log.read_page(&t, Sequence::ZERO, 1).unwrap();
    assert_eq!(read[0].record.opaque_cursor.as_deref(), Some("resp_1"));
}

#[test]
fn every_claim_gets_a_fresh_epoch_even_for_the_same_owner() {
    let db = temp_db();
    let store = SqliteProgressStore::open(&db.path).unwrap();
    let k = key("t");
    let first = store.claim(&k, &worker("a"), 1_000, 0).unwrap();
    let second = store.claim(&k, &worker("a"), 1_000, 10).unwrap();
    assert!(second.lease.epoch > first.lease.epoch);
    // The older handle of the same owner is fenced.
    assert!(matches!(
        store.advance(&first.lease, Sequence(1), 20),
        Err(ActivityError::StaleLease { .. })
    ));
    assert!(matches!(
        store.claim(&k, &worker("b"), 1_000, 20),
        Err(ActivityError::LeaseHeld { until: 1_010 })
    ));
    let third = store.claim(&k, &worker("b"), 1_000, 1_010).unwrap();
    assert_eq!(third.lease.epoch, FencingEpoch(3));
}

#[test]
fn stale_lease_cannot_save_or_advance_and_nothing_changes() {
    let db = temp_db();
    let store = SqliteProgressStore::open(&db.path).unwrap();
    let k = key("t");
    let old = store.claim(&k, &worker("a"), 100, 0).unwrap();
    // Expired: writes at or after expiry are refused.
    assert!(matches!(
        store.save_pending(&old.lease, &pending(&k, 1, serde_json::json!(["a"])), 100),
        Err(ActivityError::StaleLease { .. })
    ));
    let new = store.claim(&k, &worker("b"), 100, 150).unwrap();
    store
        .save_pending(&new.lease, &pending(&k, 1, serde_json::json!(["b"])), 160)
        .unwrap();
    let before = store.inspect(&k).unwrap().unwrap();
    for result in [
        store.save_pending(&old.lease, &pending(&k, 1, serde_json::json!(["a"])), 50),
        store.advance(&old.lease, Sequence(1), 50),
        store.release(&old.lease, 50),
    ] {
        assert!(
            matches!(result, Err(ActivityError::StaleLease { .. })),
            "{result:?}"
        );
    }
    assert_eq!(store.inspect(&k).unwrap().unwrap(), before);
}

#[test]
fn saved_output_is_returned_with_the_claim_and_cleared_by_advancing() {
    let db = temp_db();
    let store = SqliteProgressStore::open(&db.path).unwrap();
    let k = key("t");
    let claim = store.claim(&k, &worker("a"), 1_000, 0).unwrap();
    assert!(matches!(
        store.save_pending(&claim.lease, &pending(&k, 2, serde_json::json!(1)), 1),
        Err(ActivityError::Noncontiguous { .. })
    ));
    store
        .save_pending(
            &claim.lease,
            &pending(&k, 1, serde_json::json!({"w": 1})),
            1,
        )
        .unwrap();
    // A saved output wins: it cannot be replaced, not even by its own lease.
    assert!(matches!(
        store.save_pending(
            &claim.lease,
            &pending(&k, 1, serde_json::json!({"w": 2})),
            2
        ),
        Err(ActivityError::ProgressMismatch { .. })
    ));
    let again = store.claim(&k, &worker("b"), 1_000, 2_000).unwrap();
    assert_eq!(
        again.pending.as_ref().map(|saved| saved.output.clone()),
        Some(serde_json::json!({"w": 1}))
    );
    assert!(matches!(
        store.advance(&again.lease, Sequence(2), 2_001),
        Err(ActivityError::Noncontiguous { .. })
    ));
    store.advance(&again.lease, Sequence(1), 2_002).unwrap();
    let view = store.inspect(&k).unwrap().unwrap();
    assert_eq!(view.cursor, Sequence(1));
    assert_eq!(view.pending, None);
    assert_eq!(view.last_advance_at, Some(2_002));
    store.release(&again.lease, 2_003).unwrap();
    assert_eq!(store.inspect(&k).unwrap().unwrap().lease, None);
    assert_eq!(store.inspect_all(10).unwrap().len(), 1);
}

#[test]
fn oversized_progress_is_refused_with_prior_progress_intact() {
    let db = temp_db();
    let store = SqliteProgressStore::open(&db.path).unwrap();
    let k = key("t");
    let claim = store.claim(&k, &worker("a"), 1_000, 0).unwrap();
    store
        .save_pending(&claim.lease, &pending(&k, 1, serde_json::json!("small")), 1)
        .unwrap();
    store.advance(&claim.lease, Sequence(1), 2).unwrap();
    let before = store.inspect(&k).unwrap().unwrap();
    // The JSON string's quotes push it one code unit past the limit... and an astral character counts two.
    let huge = format!("{}\u{1F600}", "x".repeat(MAX_PROGRESS_UTF16_UNITS - 3));
    let error = store
        .save_pending(&claim.lease, &pending(&k, 2, serde_json::json!(huge)), 3)
        .unwrap_err();
    assert!(matches!(error, ActivityError::TooLarge { .. }), "{error:?}");
    assert_eq!(store.inspect(&k).unwrap().unwrap(), before);
    let fits = "x".repeat(MAX_PROGRESS_UTF16_UNITS - 2);
    store
        .save_pending(&claim.lease, &pending(&k, 2, serde_json::json!(fits)), 3)
        .unwrap();
}

#[test]
fn replace_pending_needs_a_saved_output_for_the_record_and_a_current_lease() {
    let db = temp_db();
    let store = SqliteProgressStore::open(&db.path).unwrap();
    let k = key("t");
    let claim = store.claim(&k, &worker("a"), 1_000, 0).unwrap();
    assert!(matches!(
        store.replace_pending(&claim.lease, &pending(&k, 1, serde_json::json!(1)), 1),
        Err(ActivityError::ProgressMismatch { .. })
    ));
    store
        .save_pending(&claim.lease, &pending(&k, 1, serde_json::json!(1)), 1)
        .unwrap();
    store
        .replace_pending(&claim.lease, &pending(&k, 1, serde_json::json!(2)), 2)
        .unwrap();
    let view = store.inspect(&k).unwrap().unwrap();
    assert_eq!(
        view.pending.map(|saved| saved.output),
        Some(serde_json::json!(2))
    );
    // A superseded lease cannot replace what the newer holder will replay.
    let newer = store.claim(&k, &worker("b"), 1_000, 2_000).unwrap();
    assert!(matches!(
        store.replace_pending(&claim.lease, &pending(&k, 1, serde_json::json!(3)), 2_001),
        Err(ActivityError::StaleLease { .. })
    ));
    assert_eq!(
        newer.pending.map(|saved| saved.output),
        Some(serde_json::json!(2))
    );
    assert_eq!(
        store
            .inspect(&k)
            .unwrap()
            .unwrap()
            .pending
            .map(|saved| saved.output),
        Some(serde_json::json!(2))
    );
}

#[test]
fn saved_references_are_kept_once_and_paged_by_source() {
    use memory_core::activity::{RememberingStore, SourceId, SourceReference, SourceRevision};
    use memory_sqlite::remembering_store::SqliteRememberingStore;

    let db = temp_db();
    let store = SqliteRememberingStore::open(&db.path).unwrap();
    let source = SourceId::thread_record(&thread("t"), Sequence(3));
    let reference = SourceReference {
        source: source.clone(),
        source_revision: SourceRevision::new("digest").unwrap(),
        target: memory_core::MemoryKey {
            namespace: memory_core::NamespaceAddress::encode("n", 1, &serde_json::json!({}))
                .unwrap(),
            id: memory_core::DocumentId::new("d").unwrap(),
        },
        operation_id: memory_core::OperationId::new("op").unwrap(),
        revision: memory_core::Revision::new("r").unwrap(),
    };
    store
        .save_references(std::slice::from_ref(&reference))
        .unwrap();
    store
        .save_references(std::slice::from_ref(&reference))
        .unwrap();
    let kept = store.references(&source, 0, 10).unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].1, reference);
    let other = SourceId::thread_record(&thread("t"), Sequence(4));
    assert!(store.references(&other, 0, 10).unwrap().is_empty());
}
