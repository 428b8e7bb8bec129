//! Failpoints around the write transaction: what a fault before, inside, at and after `COMMIT` leaves
//! behind, the lost acknowledgement, and poisoning after an I/O failure.
//!
//! Failpoints are process-wide, so every test here holds a `fail::FailScenario` (which serializes them).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use memory_core::StoreFault;
use memory_core::{
    ErrorKind, LexicalSearch, MemoryContent, MemoryError, MemoryReader, MemoryWriter,
};
use memory_sqlite::{StoreFailure, fault, storage_failure};

fn injected(error: &MemoryError, point: &str) -> bool {
    matches!(storage_failure(error), Some(StoreFailure::Injected { point: found, .. }) if *found == point)
}

#[tokio::test]
async fn a_fault_before_begin_writes_nothing() {
    let scenario = fail::FailScenario::setup();
    let path = fresh_path();
    let store = open(&path);
    let doc = key("t1", "doc");
    fail::cfg(fault::BEFORE_BEGIN, "1*return").expect("failpoint");
    let error = store
        .apply(put(&doc, "op-1", None, MemoryContent::text("x"), &["s"]))
        .await
        .expect_err("injected");
    assert!(injected(&error, fault::BEFORE_BEGIN), "{error:?}");
    assert!(!store.is_poisoned());
    assert!(store.read(&doc).await.expect("read").is_none());
    assert!(
        store
            .reader()
            .receipt(&namespace("t1"), &op("op-1"))
            .expect("read")
            .is_none()
    );
    // The retry goes through.
    let outcome = store
        .apply(put(&doc, "op-1", None, MemoryContent::text("x"), &["s"]))
        .await
        .expect("retry");
    assert!(!outcome.replayed);
    scenario.teardown();
}

#[tokio::test]
async fn an_ordinary_fault_inside_the_transaction_rolls_back_without_poisoning() {
    let scenario = fail::FailScenario::setup();
    let path = fresh_path();
    let store = open(&path);
    let doc = key("t1", "doc");
    fail::cfg(fault::INSIDE_TRANSACTION, "1*return").expect("failpoint");
    let error = store
        .apply(put(&doc, "op-1", None, MemoryContent::text("x"), &["s"]))
        .await
        .expect_err("injected");
    assert!(injected(&error, fault::INSIDE_TRANSACTION), "{error:?}");
    assert!(!store.is_poisoned());
    assert!(store.read(&doc).await.expect("read").is_none());
    assert!(
        store
            .search(&access("t1", "s"), "x", 5)
            .await
            .expect("search")
            .is_empty()
    );
    let report = store.reader().check_consistency().expect("consistent");
    assert_eq!(report.receipts, 0);
    store
        .apply(put(&doc, "op-1", None, MemoryContent::text("x"), &["s"]))
        .await
        .expect("the store keeps writing");
    scenario.teardown();
}

/// An I/O failure inside the transaction or a failed commit leaves the file's state unknown to the
/// process: it must stop writing until reopened.
#[tokio::test]
async fn an_io_failure_inside_the_transaction_or_at_commit_poisons_the_store() {
    let scenario = fail::FailScenario::setup();
    for point in [fault::INSIDE_TRANSACTION, fault::COMMIT] {
        let path = fresh_path();
        let store = open(&path);
        let doc = key("t1", "doc");
        let kept = store
            .apply(put(
                &key("t1", "kept"),
                "op-0",
                None,
                MemoryContent::text("kept"),
                &["s"],
            ))
            .await
            .expect("before the fault");
        fail::cfg(point, "1*return(io)").expect("failpoint");
        let error = store
            .apply(put(&doc, "op-1", None, MemoryContent::text("x"), &["s"]))
            .await
            .expect_err("injected");
        assert_eq!(error.kind(), ErrorKind::Storage);
        assert!(store.is_poisoned(), "{point}");
        // Every later write is refused, even a replay, even though the failpoint is spent.
        for write in [
            put(&doc, "op-2", None, MemoryContent::text("y"), &["s"]),
            put(
                &key("t1", "kept"),
                "op-0",
                None,
                MemoryContent::text("kept"),
                &["s"],
            ),
        ] {
            assert!(matches!(
                store.apply(write).await,
                Err(MemoryError::Store(StoreFault::Poisoned))
            ));
        }
        assert!(matches!(
            store.apply_batch(vec![put(
                &doc,
                "op-3",
                None,
                MemoryContent::text("z"),
                &["s"]
            )]),
            Err(MemoryError::Store(StoreFault::Poisoned))
        ));
        // Reads keep working.
        assert_eq!(
            store.read(&key("t1", "kept")).await.expect("read"),
            Some(kept.receipt.document.clone())
        );
        drop(store);
        let reopened = open(&path);
        assert!(!reopened.is_poisoned());
        assert!(
            reopened.read(&doc).await.expect("read").is_none(),
            "{point}: rolled back"
        );
        reopened.reader().check_consistency().expect("consistent");
        reopened
            .apply(put(&doc, "op-1", None, MemoryContent::text("x"), &["s"]))
            .await
            .expect("a reopened store writes again");
    }
    scenario.teardown();
}

#[tokio::test]
async fn a_fault_after_commit_keeps_the_write_and_the_retry_returns_its_receipt() {
    let scenario = fail::FailScenario::setup();
    for point in [fault::AFTER_COMMIT, fault::LOST_ACKNOWLEDGEMENT] {
        let path = fresh_path();
        let store = open(&path);
        let doc = key("t1", "doc");
        let write = put(&doc, "op-1", None, MemoryContent::text("x"), &["s"]);
        fail::cfg(point, "1*return").expect("failpoint");
        let error = store
            .apply(write.clone())
            .await
            .expect_err("acknowledgement lost");
        assert!(injected(&error, point), "{error:?}");
        assert!(!store.is_poisoned());
        let stored = store
            .reader()
            .receipt(&namespace("t1"), &op("op-1"))
            .expect("read")
            .expect("the write committed");
        let retry = store.apply(write).await.expect("retry");
        assert!(retry.replayed);
        assert_eq!(retry.receipt, stored);
        assert_eq!(
            store.reader().history(&doc).expect("history").len(),
            1,
            "exactly one revision"
        );
        assert_eq!(store.read(&doc).await.expect("read"), Some(stored.document));
        store.reader().check_consistency().expect("consistent");
    }
    scenario.teardown();
}
