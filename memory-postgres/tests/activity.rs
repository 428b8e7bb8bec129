//! The PostgreSQL thread log, progress store, remembering store and vector store keep their rules, also
//! when several stores (separate pools, as separate processes have) use one database at once.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::{Arc, Barrier};

use common::{NOW, TestStore, fresh_store};
use memory_core::activity::{
    ActivityError, FencingEpoch, Intent, IntentOutcome, IntentState, MAX_PROGRESS_UTF16_UNITS,
    NewRecord, PendingOutput, ProcessorId, ProcessorVersion, ProgressKey, ProgressStore,
    RememberingStore, Sequence, SourceId, SourceReference, SourceRevision, ThreadId, ThreadLog,
    WorkerId,
};
use memory_core::vectors::{
    ProfileDigest, ReplaceOutcome, SourceGeneration, StoredChunk, StoredSource, StoredSourceState,
    VectorLoadLimits, VectorStore,
};
use memory_core::{DocumentId, ErrorKind, MemoryKey, NamespaceAddress, OperationId, Revision};

/// A fresh store for a synchronous test (the activity ports are synchronous).
fn blocking_store(test: &str) -> Option<(tokio::runtime::Runtime, TestStore)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = runtime.block_on(fresh_store(test))?;
    Some((runtime, store))
}

macro_rules! store_or_skip {
    ($name:literal) => {
        match blocking_store($name) {
            Some(pair) => pair,
            None => return,
        }
    };
}

fn thread(name: &str) -> ThreadId {
    ThreadId::new(name).unwrap()
}

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
    let (runtime, store) = store_or_skip!("thread_log_appends_in_sequence_and_pages_are_bounded");
    let log = store.thread_log();
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
    // Another store (pool) reads the same records back, digests verified.
    let before = log.read_page(&a, Sequence::ZERO, 100).unwrap();
    let other = runtime.block_on(store.another()).thread_log();
    assert_eq!(other.read_page(&a, Sequence::ZERO, 100).unwrap(), before);
    assert_eq!(other.threads(None, 10).unwrap(), vec![a.clone(), b.clone()]);
    assert_eq!(other.threads(Some(&a), 10).unwrap(), vec![b.clone()]);
    // Records are append-only, even for a raw connection.
    let raw = runtime.block_on(store.raw());
    for statement in [
        "UPDATE thread_records SET record_json = '{}'",
        "DELETE FROM thread_records",
    ] {
        let error = runtime
            .block_on(raw.batch_execute(statement))
            .expect_err(statement);
        assert!(
            error.to_string().contains("append-only")
                || format!("{error:?}").contains("append-only")
        );
    }
}

#[test]
fn concurrent_appends_to_one_thread_get_consecutive_sequences() {
    let (runtime, store) =
        store_or_skip!("concurrent_appends_to_one_thread_get_consecutive_sequences");
    let t = thread("shared");
    let start = Arc::new(Barrier::new(4));
    let appenders: Vec<_> = (0..4)
        .map(|writer| {
            let log = runtime.block_on(store.another()).thread_log();
            let (t, start) = (t.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                (0..10)
                    .map(|index| {
                        log.append(&t, NewRecord::user("ana", format!("{writer}/{index}"), 1))
                            .unwrap()
                            .sequence
                            .0
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut sequences: Vec<u64> = appenders
        .into_iter()
        .flat_map(|appender| appender.join().unwrap())
        .collect();
    sequences.sort_unstable();
    assert_eq!(sequences, (1..=40).collect::<Vec<_>>());
    let records = store
        .thread_log()
        .read_page(&t, Sequence::ZERO, 100)
        .unwrap();
    assert_eq!(records.len(), 40);
}

#[test]
fn every_claim_gets_a_fresh_epoch_even_for_the_same_owner() {
    let (_runtime, store) =
        store_or_skip!("every_claim_gets_a_fresh_epoch_even_for_the_same_owner");
    let progress = store.progress();
    let k = key("t");
    let first = progress.claim(&k, &worker("a"), 1_000, 0).unwrap();
    let second = progress.claim(&k, &worker("a"), 1_000, 10).unwrap();
    assert!(second.lease.epoch > first.lease.epoch);
    // The older handle of the same owner is fenced.
    assert!(matches!(
        progress.advance(&first.lease, Sequence(1), 20),
        Err(ActivityError::StaleLease { .. })
    ));
    assert!(matches!(
        progress.claim(&k, &worker("b"), 1_000, 20),
        Err(ActivityError::LeaseHeld { until: 1_010 })
    ));
    let third = progress.claim(&k, &worker("b"), 1_000, 1_010).unwrap();
    assert_eq!(third.lease.epoch, FencingEpoch(3));
}

#[test]
fn stale_lease_cannot_save_or_advance_and_nothing_changes() {
    let (_runtime, store) =
        store_or_skip!("stale_lease_cannot_save_or_advance_and_nothing_changes");
    let progress = store.progress();
    let k = key("t");
    let old = progress.claim(&k, &worker("a"), 100, 0).unwrap();
    // Expired: writes at or after expiry are refused.
    assert!(matches!(
        progress.save_pending(&old.lease, &pending(&k, 1, serde_json::json!(["a"])), 100),
        Err(ActivityError::StaleLease { .. })
    ));
    let new = progress.claim(&k, &worker("b"), 100, 150).unwrap();
    progress
        .save_pending(&new.lease, &pending(&k, 1, serde_json::json!(["b"])), 160)
        .unwrap();
    let before = progress.inspect(&k).unwrap().unwrap();
    for result in [
        progress.save_pending(&old.lease, &pending(&k, 1, serde_json::json!(["a"])), 50),
        progress.replace_pending(&old.lease, &pending(&k, 1, serde_json::json!(["a"])), 50),
        progress.advance(&old.lease, Sequence(1), 50),
        progress.release(&old.lease, 50),
    ] {
        assert!(
            matches!(result, Err(ActivityError::StaleLease { .. })),
            "{result:?}"
        );
    }
    assert_eq!(progress.inspect(&k).unwrap().unwrap(), before);
}

#[test]
fn saved_output_is_returned_with_the_claim_and_cleared_by_advancing() {
    let (_runtime, store) =
        store_or_skip!("saved_output_is_returned_with_the_claim_and_cleared_by_advancing");
    let progress = store.progress();
    let k = key("t");
    let claim = progress.claim(&k, &worker("a"), 1_000, 0).unwrap();
    assert!(matches!(
        progress.save_pending(&claim.lease, &pending(&k, 2, serde_json::json!(1)), 1),
        Err(ActivityError::Noncontiguous { .. })
    ));
    assert!(matches!(
        progress.replace_pending(&claim.lease, &pending(&k, 1, serde_json::json!(1)), 1),
        Err(ActivityError::ProgressMismatch { .. })
    ));
    progress
        .save_pending(
            &claim.lease,
            &pending(&k, 1, serde_json::json!({"w": 1})),
            1,
        )
        .unwrap();
    assert!(matches!(
        progress.save_pending(
            &claim.lease,
            &pending(&k, 1, serde_json::json!({"w": 2})),
            2
        ),
        Err(ActivityError::ProgressMismatch { .. })
    ));
    progress
        .replace_pending(
            &claim.lease,
            &pending(&k, 1, serde_json::json!({"w": 3})),
            2,
        )
        .unwrap();
    let again = progress.claim(&k, &worker("b"), 1_000, 2_000).unwrap();
    assert_eq!(
        again.pending.as_ref().map(|saved| saved.output.clone()),
        Some(serde_json::json!({"w": 3}))
    );
    assert!(matches!(
        progress.advance(&again.lease, Sequence(2), 2_001),
        Err(ActivityError::Noncontiguous { .. })
    ));
    progress.advance(&again.lease, Sequence(1), 2_002).unwrap();
    let view = progress.inspect(&k).unwrap().unwrap();
    assert_eq!(view.cursor, Sequence(1));
    assert_eq!(view.pending, None);
    assert_eq!(view.last_advance_at, Some(2_002));
    progress.release(&again.lease, 2_003).unwrap();
    assert_eq!(progress.inspect(&k).unwrap().unwrap().lease, None);
    assert_eq!(progress.inspect_all(10).unwrap().len(), 1);
    assert!(matches!(
        progress.inspect_all(0),
        Err(ActivityError::InvalidInput { .. })
    ));
}

#[test]
fn oversized_progress_is_refused_with_prior_progress_intact() {
    let (_runtime, store) =
        store_or_skip!("oversized_progress_is_refused_with_prior_progress_intact");
    let progress = store.progress();
    let k = key("t");
    let claim = progress.claim(&k, &worker("a"), 1_000, 0).unwrap();
    progress
        .save_pending(&claim.lease, &pending(&k, 1, serde_json::json!("small")), 1)
        .unwrap();
    progress.advance(&claim.lease, Sequence(1), 2).unwrap();
    let before = progress.inspect(&k).unwrap().unwrap();
    let huge = format!("{}\u{1F600}", "x".repeat(MAX_PROGRESS_UTF16_UNITS - 3));
    let error = progress
        .save_pending(&claim.lease, &pending(&k, 2, serde_json::json!(huge)), 3)
        .unwrap_err();
    assert!(matches!(error, ActivityError::TooLarge { .. }), "{error:?}");
    assert_eq!(progress.inspect(&k).unwrap().unwrap(), before);
    let fits = "x".repeat(MAX_PROGRESS_UTF16_UNITS - 2);
    progress
        .save_pending(&claim.lease, &pending(&k, 2, serde_json::json!(fits)), 3)
        .unwrap();
}

/// Workers on separate pools claim one key at the same instant: exactly one holds the lease, every
/// other is told it is held; then each fenced write of a superseded holder changes no row.
#[test]
fn concurrent_claims_leave_exactly_one_holder_and_fence_the_rest() {
    let (runtime, store) =
        store_or_skip!("concurrent_claims_leave_exactly_one_holder_and_fence_the_rest");
    let k = key("raced");
    let start = Arc::new(Barrier::new(6));
    let claimants: Vec<_> = (0..6)
        .map(|index| {
            let progress = runtime.block_on(store.another()).progress();
            let (k, start) = (k.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                progress.claim(&k, &worker(&format!("w{index}")), 10_000, 100)
            })
        })
        .collect();
    let results: Vec<_> = claimants.into_iter().map(|c| c.join().unwrap()).collect();
    let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for result in &results {
        if let Err(error) = result {
            assert!(
                matches!(error, ActivityError::LeaseHeld { until: 10_100 }),
                "{error:?}"
            );
        }
    }
    let holder = winners[0].lease.clone();
    assert_eq!(holder.epoch, FencingEpoch(1));
    let progress = store.progress();
    progress
        .save_pending(&holder, &pending(&k, 1, serde_json::json!("mine")), 200)
        .unwrap();
    // The lease expires; a new claim supersedes it; the old holder's writes change no row.
    let next = progress.claim(&k, &worker("late"), 10_000, 20_000).unwrap();
    assert_eq!(next.lease.epoch, FencingEpoch(2));
    let before = progress.inspect(&k).unwrap().unwrap();
    assert!(matches!(
        progress.advance(&holder, Sequence(1), 200),
        Err(ActivityError::StaleLease { .. })
    ));
    assert_eq!(progress.inspect(&k).unwrap().unwrap(), before);
    progress.advance(&next.lease, Sequence(1), 20_001).unwrap();
}

fn target(id: &str) -> MemoryKey {
    MemoryKey {
        namespace: NamespaceAddress::encode("n", 1, &serde_json::json!({})).unwrap(),
        id: DocumentId::new(id).unwrap(),
    }
}

fn remember(source: &str) -> Intent {
    Intent::Remember {
        source: SourceId::new(source).unwrap(),
        revision: SourceRevision::new("v1").unwrap(),
        target: target(source),
        scopes: Vec::new(),
    }
}

#[test]
fn intents_are_admitted_claimed_fenced_and_completed() {
    let (_runtime, store) = store_or_skip!("intents_are_admitted_claimed_fenced_and_completed");
    let remembering = store.remembering();
    let first = remembering.admit(&remember("s1"), 2, 0).unwrap();
    assert!(!first.already_admitted);
    assert!(
        remembering
            .admit(&remember("s1"), 2, 0)
            .unwrap()
            .already_admitted
    );
    remembering.admit(&remember("s2"), 2, 0).unwrap();
    assert!(matches!(
        remembering.admit(&remember("s3"), 2, 0),
        Err(ActivityError::AtCapacity { capacity: 2 })
    ));
    assert_eq!(remembering.open_intents().unwrap(), 2);
    let claim = remembering
        .claim_next(&worker("a"), 1_000, 10)
        .unwrap()
        .unwrap();
    assert_eq!(claim.lease.id, first.id);
    assert_eq!(claim.lease.epoch, FencingEpoch(1));
    let proposal = memory_core::MemoryContent::text("the user likes tea");
    remembering
        .save_proposal(&claim.lease, &proposal, 11)
        .unwrap();
    // Expired, the claim is taken over; the old lease's writes change no row.
    let takeover = remembering
        .claim_next(&worker("b"), 1_000, 2_000)
        .unwrap()
        .unwrap();
    assert_eq!(takeover.lease.id, first.id);
    assert_eq!(takeover.lease.epoch, FencingEpoch(2));
    assert_eq!(takeover.proposal, Some(proposal));
    assert!(matches!(
        remembering.complete(&claim.lease, &IntentOutcome::NothingToRemember, None, 2_001),
        Err(ActivityError::StaleLease { .. })
    ));
    let reference = SourceReference {
        source: SourceId::new("s1").unwrap(),
        source_revision: SourceRevision::new("v1").unwrap(),
        target: target("s1"),
        operation_id: OperationId::new("op").unwrap(),
        revision: Revision::new("r").unwrap(),
    };
    let command = memory_core::activity::SavedCommand {
        attempt: 1,
        write: memory_core::MemoryWrite::Withdraw {
            key: target("s1"),
            operation_id: OperationId::new("op").unwrap(),
            expected_revision: Revision::new("r").unwrap(),
            reason: "test".to_owned(),
        },
    };
    remembering
        .save_command(&takeover.lease, &command, &reference, 2_002)
        .unwrap();
    assert!(matches!(
        remembering.save_command(&takeover.lease, &command, &reference, 2_003),
        Err(ActivityError::ProgressMismatch { .. })
    ));
    remembering
        .complete(
            &takeover.lease,
            &IntentOutcome::Written {
                revision: Revision::new("r").unwrap(),
            },
            None,
            2_004,
        )
        .unwrap();
    let view = remembering.inspect_intent(&first.id).unwrap().unwrap();
    assert_eq!(view.state, IntentState::Done);
    assert_eq!(view.command, Some(command));
    assert_eq!(remembering.open_intents().unwrap(), 1);
    let source = SourceId::new("s1").unwrap();
    assert_eq!(remembering.references(&source, 0, 10).unwrap().len(), 1);
    // Suppression admits a cleanup and hides what the source contributed.
    assert!(
        !remembering
            .is_suppressed(&source, &SourceRevision::new("v1").unwrap())
            .unwrap()
    );
    remembering.suppress(&source, None, 3_000).unwrap();
    assert!(
        remembering
            .is_suppressed(&source, &SourceRevision::new("v1").unwrap())
            .unwrap()
    );
    assert_eq!(
        remembering
            .suppressed_contributions(&[
                (target("s1"), Revision::new("r").unwrap()),
                (target("s2"), Revision::new("r").unwrap()),
            ])
            .unwrap(),
        vec![true, false]
    );
    // References are kept once.
    remembering
        .save_references(std::slice::from_ref(&reference))
        .unwrap();
    assert_eq!(remembering.references(&source, 0, 10).unwrap().len(), 1);
    // The outbox parks and admits intents, up to its capacity.
    remembering.outbox_put(&remember("s4"), 1, 4_000).unwrap();
    assert!(matches!(
        remembering.outbox_put(&remember("s5"), 1, 4_000),
        Err(ActivityError::AtCapacity { capacity: 1 })
    ));
    let parked = remembering.outbox_peek(10).unwrap();
    assert_eq!(parked.len(), 1);
    remembering.outbox_admit(parked[0].0, 10, 4_001).unwrap();
    assert!(remembering.outbox_peek(10).unwrap().is_empty());
    assert!(matches!(
        remembering.outbox_admit(parked[0].0, 10, 4_002),
        Err(ActivityError::ProgressMismatch { .. })
    ));
}

/// Workers on separate pools claim intents at once: no intent is handed to two of them.
#[test]
fn concurrent_workers_never_claim_one_intent_twice() {
    let (runtime, store) = store_or_skip!("concurrent_workers_never_claim_one_intent_twice");
    let remembering = store.remembering();
    for index in 0..20 {
        remembering
            .admit(&remember(&format!("s{index}")), 100, 0)
            .unwrap();
    }
    let start = Arc::new(Barrier::new(4));
    let workers: Vec<_> = (0..4)
        .map(|index| {
            let remembering = runtime.block_on(store.another()).remembering();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let mut claimed = Vec::new();
                while let Some(claim) = remembering
                    .claim_next(&worker(&format!("w{index}")), 60_000, 10)
                    .unwrap()
                {
                    claimed.push(claim.lease.id.clone());
                }
                claimed
            })
        })
        .collect();
    let mut claimed: Vec<_> = workers
        .into_iter()
        .flat_map(|worker| worker.join().unwrap())
        .collect();
    assert_eq!(claimed.len(), 20);
    claimed.sort();
    claimed.dedup();
    assert_eq!(claimed.len(), 20, "an intent was claimed twice");
}

fn chunk(ordinal: u32, value: f32) -> StoredChunk {
    StoredChunk {
        ordinal,
        start: 0,
        end: 4,
        excerpt_digest: [ordinal as u8; 32],
        vector: vec![value, 1.0 - value],
    }
}

#[tokio::test]
async fn vectors_round_trip_fence_stale_writes_and_keep_positions_monotonic() {
    let Some(store) =
        fresh_store("vectors_round_trip_fence_stale_writes_and_keep_positions_monotonic").await
    else {
        return;
    };
    let vectors = store.vectors();
    let profile = ProfileDigest([7; 32]);
    let other_profile = ProfileDigest([8; 32]);
    let limits = VectorLoadLimits {
        dimensions: 2,
        max_sources: 10,
        max_chunks: 10,
    };
    let source =
        |id: &str, generation: u64, revision: &str, chunks: Vec<StoredChunk>| StoredSource {
            key: target(id),
            generation: SourceGeneration(generation),
            state: StoredSourceState::Indexed {
                revision: Revision::new(revision).unwrap(),
                chunks,
            },
        };
    let a = source("a", 2, "r2", vec![chunk(0, 0.25), chunk(1, 0.5)]);
    assert_eq!(
        vectors.replace_source(&profile, &a).await.unwrap(),
        ReplaceOutcome::Replaced
    );
    assert_eq!(
        vectors.load_sources(&profile, limits).await.unwrap(),
        vec![a.clone()]
    );
    assert!(
        vectors
            .load_sources(&other_profile, limits)
            .await
            .unwrap()
            .is_empty()
    );
    // An older generation, or the same generation with another revision, is fenced.
    for stale in [
        source("a", 1, "r1", vec![chunk(0, 0.0)]),
        source("a", 2, "other", vec![]),
    ] {
        assert_eq!(
            vectors.replace_source(&profile, &stale).await.unwrap(),
            ReplaceOutcome::Stale {
                current: SourceGeneration(2),
                withdrawn: false
            }
        );
    }
    assert_eq!(
        vectors.load_sources(&profile, limits).await.unwrap(),
        vec![a.clone()]
    );
    let withdrawn = StoredSource {
        key: target("a"),
        generation: SourceGeneration(3),
        state: StoredSourceState::Withdrawn,
    };
    assert_eq!(
        vectors.replace_source(&profile, &withdrawn).await.unwrap(),
        ReplaceOutcome::Replaced
    );
    assert_eq!(
        vectors
            .replace_source(&profile, &source("a", 9, "r9", vec![]))
            .await
            .unwrap(),
        ReplaceOutcome::Stale {
            current: SourceGeneration(3),
            withdrawn: true
        }
    );
    assert_eq!(
        vectors.load_sources(&profile, limits).await.unwrap(),
        vec![withdrawn]
    );
    // Limits are checked before rows are read; a vector of the wrong length is corrupt.
    let tight = VectorLoadLimits {
        max_sources: 0,
        ..limits
    };
    assert_eq!(
        vectors
            .load_sources(&profile, tight)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::TooLarge
    );
    vectors
        .replace_source(&other_profile, &source("b", 1, "r1", vec![chunk(0, 0.5)]))
        .await
        .unwrap();
    let three = VectorLoadLimits {
        dimensions: 3,
        ..limits
    };
    assert_eq!(
        vectors
            .load_sources(&other_profile, three)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Corrupt
    );
    // Positions never move backwards.
    assert_eq!(
        vectors.indexed_position(&profile).await.unwrap(),
        memory_core::ChangeSequence(0)
    );
    vectors
        .set_indexed_position(&profile, memory_core::ChangeSequence(5))
        .await
        .unwrap();
    vectors
        .set_indexed_position(&profile, memory_core::ChangeSequence(3))
        .await
        .unwrap();
    assert_eq!(
        vectors.indexed_position(&profile).await.unwrap(),
        memory_core::ChangeSequence(5)
    );
    let _ = NOW;
}
