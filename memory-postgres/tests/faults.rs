//! Killing the writer's PostgreSQL connection (`pg_terminate_backend` from another connection) while
//! writes run: no acknowledged write is lost, none is applied twice, and the database stays consistent.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use memory_core::{
    ChangeFeed, ChangeSequence, ErrorKind, ManualClock, MemoryContent, MemoryReader, MemoryWriter,
};
use memory_postgres::PostgresStore;

/// A store on `store`'s schema whose connections carry `name`, so they can be found and killed.
async fn victim(store: &TestStore, name: &str, retries: u32) -> PostgresStore {
    PostgresStore::builder(&store.guard.url)
        .schema(store.guard.schema.clone())
        .clock(Arc::new(ManualClock::new(NOW)))
        .application_name(name)
        .pool_size(2)
        .retries(retries)
        .connect()
        .await
        .unwrap()
}

/// Ends every backend of `name`; returns how many were ended.
async fn kill(raw: &tokio_postgres::Client, name: &str) -> i64 {
    raw.query_one(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = $1",
        &[&name],
    )
    .await
    .unwrap()
    .get(0)
}

/// Holds the store's write lock from a raw connection, so a write started later blocks inside its
/// transaction.
async fn hold_write_lock(raw: &tokio_postgres::Client) {
    raw.batch_execute("BEGIN; SELECT head FROM memory_change_head FOR UPDATE")
        .await
        .unwrap();
}

/// Waits until `name`'s backend is waiting on a lock (inside its write transaction).
async fn wait_until_blocked(raw: &tokio_postgres::Client, name: &str) {
    for _ in 0..1_000 {
        let waiting: i64 = raw
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE application_name = $1 AND wait_event_type = 'Lock'",
                &[&name],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the write never reached the write lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_killed_inside_the_write_transaction_is_retried_once() {
    let Some(store) =
        fresh_store("a_connection_killed_inside_the_write_transaction_is_retried_once").await
    else {
        return;
    };
    let name = format!("victim-{}", store.guard.schema.as_str());
    let writer = Arc::new(victim(&store, &name, memory_postgres::DEFAULT_RETRIES).await);
    let blocker = store.raw().await;
    let killer = store.raw().await;
    let doc = key("t1", "doc");
    let write = put(&doc, "op-1", None, MemoryContent::text("survives"), &["s"]);
    hold_write_lock(&blocker).await;
    let pending = {
        let writer = writer.clone();
        let write = write.clone();
        tokio::spawn(async move { writer.apply(write).await })
    };
    wait_until_blocked(&killer, &name).await;
    assert!(
        kill(&killer, &name).await >= 1,
        "the writer's backend was ended"
    );
    blocker.batch_execute("ROLLBACK").await.unwrap();
    let outcome = pending
        .await
        .unwrap()
        .expect("retried on a fresh connection");
    assert!(!outcome.replayed, "the killed attempt committed nothing");
    assert_eq!(
        store.read(&doc).await.unwrap(),
        Some(outcome.receipt.document.clone())
    );
    assert_eq!(store.history(&doc).await.unwrap().len(), 1);
    assert_eq!(store.head().await.unwrap(), ChangeSequence::new(1));
    store.check_consistency().await.expect("consistent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_retries_a_killed_write_is_unavailable_and_left_out_whole() {
    let Some(store) =
        fresh_store("without_retries_a_killed_write_is_unavailable_and_left_out_whole").await
    else {
        return;
    };
    let name = format!("victim-{}", store.guard.schema.as_str());
    let writer = Arc::new(victim(&store, &name, 0).await);
    let blocker = store.raw().await;
    let killer = store.raw().await;
    let doc = key("t1", "doc");
    let write = put(&doc, "op-1", None, MemoryContent::text("later"), &["s"]);
    hold_write_lock(&blocker).await;
    let pending = {
        let writer = writer.clone();
        let write = write.clone();
        tokio::spawn(async move { writer.apply(write).await })
    };
    wait_until_blocked(&killer, &name).await;
    assert!(kill(&killer, &name).await >= 1);
    blocker.batch_execute("ROLLBACK").await.unwrap();
    let error = pending.await.unwrap().expect_err("no retry allowed");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
    assert_eq!(store.read(&doc).await.unwrap(), None);
    assert_eq!(store.head().await.unwrap(), ChangeSequence::ZERO);
    // The caller's retry of the same write lands once.
    let outcome = writer.apply(write).await.expect("retry");
    assert!(!outcome.replayed);
    assert_eq!(store.head().await.unwrap(), ChangeSequence::new(1));
    store.check_consistency().await.expect("consistent");
}

/// Writers on one pool put documents while another connection keeps ending that pool's backends.
/// Every acknowledged write is present with the acknowledged revision and receipt; a write that failed
/// is either wholly there or wholly absent, and its retry never applies it twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_connections_during_writes_loses_no_acknowledged_write() {
    let Some(store) =
        fresh_store("killing_connections_during_writes_loses_no_acknowledged_write").await
    else {
        return;
    };
    let name = format!("victim-{}", store.guard.schema.as_str());
    let writer = Arc::new(victim(&store, &name, memory_postgres::DEFAULT_RETRIES).await);
    let running = Arc::new(AtomicBool::new(true));
    let killer = {
        let raw = store.raw().await;
        let (running, name) = (running.clone(), name.clone());
        tokio::spawn(async move {
            let mut ended = 0;
            while running.load(Ordering::SeqCst) {
                ended += kill(&raw, &name).await;
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            ended
        })
    };
    let mut tasks = Vec::new();
    for task in 0..3 {
        let writer = writer.clone();
        tasks.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            for index in 0..40 {
                let write = put(
                    &key("t1", &format!("d{task}-{index}")),
                    &format!("op-{task}-{index}"),
                    None,
                    MemoryContent::text(format!("note {task} {index}")),
                    &["s"],
                );
                let answer = writer.apply(write.clone()).await;
                answers.push((write, answer));
            }
            answers
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.extend(task.await.unwrap());
    }
    running.store(false, Ordering::SeqCst);
    let ended = killer.await.unwrap();
    assert!(
        ended >= 1,
        "no connection was ended: the test proved nothing"
    );

    let acknowledged: BTreeMap<_, _> = answers
        .iter()
        .filter_map(|(write, answer)| {
            answer
                .as_ref()
                .ok()
                .map(|outcome| (write.key().clone(), outcome))
        })
        .collect();
    for (key, outcome) in &acknowledged {
        assert_eq!(
            store.read(key).await.unwrap().as_ref(),
            Some(&outcome.receipt.document),
            "an acknowledged write is missing or changed"
        );
        assert_eq!(
            store
                .receipt(&key.namespace, &outcome.receipt.operation_id)
                .await
                .unwrap()
                .as_ref(),
            Some(&outcome.receipt)
        );
    }
    // Failed writes (retries exhausted) are whole or absent; retrying them lands each once.
    for (write, answer) in &answers {
        if let Err(error) = answer {
            assert_eq!(error.kind(), ErrorKind::Unavailable, "{error:?}");
            store
                .apply(write.clone())
                .await
                .expect("retry after the fault");
        }
    }
    for (write, _) in &answers {
        assert_eq!(store.history(write.key()).await.unwrap().len(), 1);
    }
    let report = store.check_consistency().await.expect("consistent");
    assert_eq!(report.documents, 120);
    assert_eq!(report.changes, 120);
    eprintln!(
        "killing_connections: {ended} backends ended, {} of 120 writes acknowledged first time",
        acknowledged.len()
    );
}
