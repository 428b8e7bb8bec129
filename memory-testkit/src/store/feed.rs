//! The change feed suite: every commit once, in order, with no gaps; replays and refusals are no
//! changes; pages start after the given position.

use super::{InspectableStore, async_suite, key, ok, put, withdraw};
use crate::fixtures::{Checked, ensure};
use memory_core::document::MemoryContent;
use memory_core::ports::ChangeSequence;

async_suite! {
    /// Every rule [`run_change_feed_suite`] checks, in order.
    CHANGE_FEED_RULES;
    /// Runs every rule of [`CHANGE_FEED_RULES`], each on a fresh store from `factory`.
    run_change_feed_suite;
    "the-change-feed-lists-every-commit-once-in-order" => every_commit_once_in_order,
    "change-pages-start-after-the-position-and-are-bounded" => pages_start_after_the_position,
}

async fn every_commit_once_in_order<S: InspectableStore>(store: &S) -> Checked {
    ensure!(
        ok(store.head().await, "head")? == ChangeSequence::ZERO,
        "an empty store's head is not 0"
    );
    ensure!(
        ok(
            store.changes_since(ChangeSequence::ZERO, 10).await,
            "changes"
        )?
        .is_empty(),
        "an empty store lists changes"
    );
    let (a, b) = (key("t1", "a")?, key("t1", "b")?);
    let created = ok(
        store
            .apply(put(&a, "op-a", None, MemoryContent::text("a"), &["s"])?)
            .await,
        "put a",
    )?;
    ok(
        store
            .apply(put(&b, "op-b", None, MemoryContent::text("b"), &["s"])?)
            .await,
        "put b",
    )?;
    let replay = ok(
        store
            .apply(put(&a, "op-a", None, MemoryContent::text("a"), &["s"])?)
            .await,
        "replay",
    )?;
    ensure!(replay.replayed, "a repeated command was not a replay");
    ensure!(
        store
            .apply(put(&a, "op-c", None, MemoryContent::text("c"), &["s"])?)
            .await
            .is_err(),
        "a create of an existing document was accepted"
    );
    ok(
        store
            .apply(withdraw(&a, "op-w", &created.receipt.document.revision)?)
            .await,
        "withdraw",
    )?;
    let head = ok(store.head().await, "head")?;
    ensure!(
        head == ChangeSequence::new(3),
        "the head is {} after three commits",
        head.get()
    );
    let changes = ok(
        store.changes_since(ChangeSequence::ZERO, 100).await,
        "changes",
    )?;
    let keys: Vec<_> = changes.iter().map(|change| change.key.clone()).collect();
    ensure!(
        keys == [a.clone(), b, a],
        "changes list {} keys, not a, b, a",
        keys.len()
    );
    let sequences: Vec<u64> = changes.iter().map(|change| change.sequence.get()).collect();
    ensure!(sequences == [1, 2, 3], "change sequences are {sequences:?}");
    Ok(())
}

async fn pages_start_after_the_position<S: InspectableStore>(store: &S) -> Checked {
    for index in 0..5 {
        let doc = key("t1", &format!("d{index}"))?;
        ok(
            store
                .apply(put(
                    &doc,
                    &format!("op-{index}"),
                    None,
                    MemoryContent::text("x"),
                    &["s"],
                )?)
                .await,
            "put",
        )?;
    }
    let all = ok(
        store.changes_since(ChangeSequence::ZERO, 100).await,
        "changes",
    )?;
    let page = ok(
        store.changes_since(all[0].sequence, 1).await,
        "a page of one",
    )?;
    ensure!(
        page == all[1..2],
        "the page of one after the first change is not the second"
    );
    let rest = ok(store.changes_since(all[1].sequence, 10).await, "the rest")?;
    ensure!(
        rest == all[2..],
        "the page after the second change is not the rest"
    );
    ensure!(
        ok(
            store.changes_since(all[4].sequence, 10).await,
            "past the head"
        )?
        .is_empty(),
        "a page after the head is not empty"
    );
    ensure!(
        ok(
            store.changes_since(ChangeSequence::ZERO, 2).await,
            "a page of two"
        )?
        .len()
            == 2,
        "a page of two does not hold two changes"
    );
    Ok(())
}
