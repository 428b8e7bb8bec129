//! Following the shared change sequence across processes: `LISTEN`/`NOTIFY` wakes the follower, the
//! head poll catches what a notification missed, a lost connection is reopened, and semantic-index's
//! `Indexer` over a follower makes a write through another store instance (another pool, as another
//! host would have) recallable on this one.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{NOW, access, fresh_store, key, put, said};
use memory_core::{ChangeFeed, ChangeSequence, ManualClock, MemoryWrite, MemoryWriter};
use memory_postgres::{ChangeFollower, FollowerOptions, PostgresStore};
use semantic_index::{
    ChunkingConfig, DeterministicEmbedder, IndexKind, Indexer, IndexerOptions, Preprocessing,
    QueryLimits, SemanticIndex, SemanticIndexConfig, SemanticProfile,
};

/// Only guards against a hung test; every wait below normally ends in milliseconds.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Long enough that the head poll never fires during a test: whatever the follower learns after it
/// connected, it learned from a notification (or from the read that follows a reconnection).
const NO_POLL: Duration = Duration::from_secs(3_600);

fn listen_only() -> FollowerOptions {
    FollowerOptions {
        poll_interval: NO_POLL,
        ..FollowerOptions::default()
    }
}

/// Waits until the follower has `LISTEN`ed on `count` connections in all.
async fn until_connected(follower: &ChangeFollower, count: u64) {
    tokio::time::timeout(HANG_GUARD, async {
        while follower.connections() < count {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the follower never connected");
}

async fn wait_past(follower: &ChangeFollower, after: ChangeSequence) -> ChangeSequence {
    tokio::time::timeout(HANG_GUARD, follower.wait_past(after))
        .await
        .expect("the follower never saw the change")
        .unwrap()
}

/// Applies `write` through `store` and returns the head after it: the write's own sequence, as the test
/// is the schema's only writer.
async fn committed<S: MemoryWriter + ChangeFeed>(store: &S, write: MemoryWrite) -> ChangeSequence {
    let outcome = store.apply(write).await.unwrap();
    assert!(!outcome.replayed);
    store.head().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_from_another_pool_wakes_the_follower() {
    let Some(store) = fresh_store("a_notification_from_another_pool_wakes_the_follower").await
    else {
        return;
    };
    let other_host = store.another().await;
    let follower = store.follow_changes_with(listen_only()).await.unwrap();
    until_connected(&follower, 1).await;
    let before = follower.known_head();
    let written = committed(
        &other_host,
        put(&key("a", "tea"), "op-1", None, said("tea", "user"), &["s"]),
    )
    .await;
    let seen = wait_past(&follower, before).await;
    assert_eq!(seen, written);
    assert_eq!(follower.known_head(), store.head().await.unwrap());
    assert!(follower.notifications() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_notification_is_caught_by_the_head_poll() {
    let Some(store) = fresh_store("a_missed_notification_is_caught_by_the_head_poll").await else {
        return;
    };
    let follower = store
        .follow_changes_with(FollowerOptions {
            poll_interval: Duration::from_millis(20),
            ..FollowerOptions::default()
        })
        .await
        .unwrap();
    until_connected(&follower, 1).await;
    let before = follower.known_head();
    // Advances the head the way a writer would, but without its NOTIFY.
    let raw = store.raw().await;
    let advanced: i64 = raw
        .query_one(
            "UPDATE memory_change_head SET head = head + 1 RETURNING head",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let seen = wait_past(&follower, before).await;
    assert_eq!(seen, ChangeSequence::new(u64::try_from(advanced).unwrap()));
    assert_eq!(follower.notifications(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_is_reopened_and_nothing_committed_meanwhile_is_missed() {
    let Some(store) =
        fresh_store("a_lost_connection_is_reopened_and_nothing_committed_meanwhile_is_missed")
            .await
    else {
        return;
    };
    let name = format!("follower_test_{}", store.guard.schema.as_str());
    let watched = PostgresStore::builder(&store.guard.url)
        .schema(store.guard.schema.clone())
        .clock(Arc::new(ManualClock::new(NOW)))
        .application_name(name.clone())
        .connect()
        .await
        .unwrap();
    let follower = watched.follow_changes_with(listen_only()).await.unwrap();
    until_connected(&follower, 1).await;
    let before = follower.known_head();
    let raw = store.raw().await;
    let terminated: i64 = raw
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1",
            &[&format!("{name} follower")],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(terminated, 1, "exactly the follower's connection is ended");
    // Committed while the follower is (probably) reconnecting: either its notification reaches the new
    // connection, or the head read after `LISTEN` finds it. The poll never runs in this test.
    let written = committed(
        &store,
        put(&key("a", "k"), "op-1", None, said("kept", "user"), &["s"]),
    )
    .await;
    assert_eq!(wait_past(&follower, before).await, written);
    until_connected(&follower, 2).await;
    // And it keeps listening on the new connection.
    let again = committed(
        &store,
        put(&key("a", "k2"), "op-2", None, said("more", "user"), &["s"]),
    )
    .await;
    assert_eq!(wait_past(&follower, written).await, again);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_since_waits_for_the_next_change_then_answers() {
    let Some(store) = fresh_store("changes_since_waits_for_the_next_change_then_answers").await
    else {
        return;
    };
    let follower = Arc::new(
        store
            .follow_changes_with(FollowerOptions {
                poll_interval: NO_POLL,
                idle_wait: HANG_GUARD,
                ..FollowerOptions::default()
            })
            .await
            .unwrap(),
    );
    until_connected(&follower, 1).await;
    let head = follower.known_head();
    let waiting = {
        let follower = follower.clone();
        tokio::spawn(async move { follower.changes_since(head, 10).await })
    };
    let other_host = store.another().await;
    let written = committed(
        &other_host,
        put(&key("a", "w"), "op-1", None, said("woken", "user"), &["s"]),
    )
    .await;
    let changes = waiting.await.unwrap().unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].sequence, written);
    assert_eq!(changes[0].key, key("a", "w"));
}

fn profile() -> SemanticProfile {
    SemanticProfile {
        provider: "test".to_owned(),
        model: "deterministic".to_owned(),
        model_revision: "1".to_owned(),
        dimensions: 64,
        max_sequence_length: 128,
        chunking: ChunkingConfig {
            max_chunk_bytes: 256,
        },
        preprocessing: Preprocessing::TextOnly,
    }
}

/// Commit-to-recallable across hosts: host A runs an `Indexer` over its follower, host B (its own
/// pool) writes; the document becomes semantically recallable on A without A writing or polling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_another_host_becomes_recallable_through_the_indexer() {
    let Some(store) =
        fresh_store("a_write_on_another_host_becomes_recallable_through_the_indexer").await
    else {
        return;
    };
    let host_a = store.store.clone();
    let host_b = store.another().await;
    // Neither the head poll nor the end of an idle wait comes within the test: the indexer can only
    // learn of host B's write through the notification.
    let follower = Arc::new(
        host_a
            .follow_changes_with(FollowerOptions {
                poll_interval: NO_POLL,
                idle_wait: NO_POLL,
                ..FollowerOptions::default()
            })
            .await
            .unwrap(),
    );
    until_connected(&follower, 1).await;
    let index = Arc::new(
        SemanticIndex::open(
            SemanticIndexConfig::new(profile()),
            Arc::new(DeterministicEmbedder::new(64)),
            Arc::new(host_a.vectors()),
        )
        .await
        .unwrap(),
    );
    let indexer = Indexer::spawn(
        index.clone(),
        follower.clone(),
        Arc::new(host_a.clone()),
        IndexerOptions {
            // The follower's `changes_since` does the waiting; an empty round only re-asks.
            poll_interval: Duration::from_millis(1),
            ..IndexerOptions::default()
        },
    )
    .await
    .unwrap();
    let text = "the user keeps the spare key under the blue flowerpot";
    let written = committed(
        &host_b,
        put(
            &key("a", "spare-key"),
            "op-1",
            None,
            said(text, "user"),
            &["s"],
        ),
    )
    .await;
    tokio::time::timeout(HANG_GUARD, indexer.wait_until_indexed(written))
        .await
        .expect("host A never indexed host B's write")
        .unwrap();
    let limits = QueryLimits::new(1_024, 10, 10_000, 0.1, 60_000, IndexKind::Exact);
    let result = index
        .query(&host_a, &access("a", "s"), text, limits)
        .await
        .unwrap();
    let keys: Vec<_> = result.hits.iter().map(|hit| hit.key.clone()).collect();
    assert_eq!(keys, vec![key("a", "spare-key")]);
    assert!(
        follower.notifications() >= 1,
        "the follower was woken by NOTIFY"
    );
    // Not `shutdown`, which would wait out the idle wait in progress: dropping aborts the task.
    drop(indexer);
}
