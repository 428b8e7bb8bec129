//! Revisions, withdrawal and replays.

use super::*;

pub(super) async fn put_without_expected_revision_creates<S: Store>(store: &S) -> Checked {
    let key = main_key()?;
    let write = put(
        &key,
        "op-create",
        None,
        "first \u{1f600} text",
        &["reader", "auditor"],
    )?;
    let outcome = apply_ok(store, write.clone(), "create").await?;
    ensure!(!outcome.replayed, "a first write was reported as a replay");
    let receipt = &outcome.receipt;
    let document = &receipt.document;
    ensure!(
        receipt.kind == WriteKind::Put,
        "receipt kind is {:?}, not put",
        receipt.kind
    );
    ensure!(
        receipt.operation_id == *write.operation_id(),
        "receipt names operation {}, not {}",
        receipt.operation_id,
        write.operation_id()
    );
    ensure!(document.key == key, "receipt document has another key");
    ensure!(
        document.predecessor.is_none(),
        "a created document has a predecessor"
    );
    ensure!(
        document.withdrawn.is_none(),
        "a created document is withdrawn"
    );
    ensure!(document.locator == SUITE_LOCATOR, "locator was not kept");
    ensure!(
        document.content == MemoryContent::text("first \u{1f600} text"),
        "content was not kept as written"
    );
    ensure!(
        document.scopes == scopes(&["reader", "auditor"])?,
        "scopes were not kept in order"
    );
    let stored = read(store, &key).await?;
    ensure!(
        stored.as_ref() == Some(document),
        "read returns {} instead of the receipt's document",
        Brief(stored.as_ref())
    );
    Ok(())
}

pub(super) async fn create_of_existing_document_conflicts<S: Store>(store: &S) -> Checked {
    let (key, first_revision) = create(store, "winner").await?;
    let error = apply_refused(
        store,
        put(&key, "op-create-again", None, "loser", &["reader"])?,
        ErrorKind::Conflict,
        "second create",
    )
    .await?;
    let MemoryError::Conflict { current } = error else {
        return Err(Failure(format!("conflict error is not Conflict: {error}")));
    };
    ensure!(
        current.as_ref() == Some(&first_revision),
        "conflict names {current:?} instead of the current revision {first_revision}"
    );
    let stored = read(store, &key).await?;
    ensure!(
        stored.as_ref().map(|document| &document.content) == Some(&MemoryContent::text("winner")),
        "the refused create changed the document: {}",
        Brief(stored.as_ref())
    );
    Ok(())
}

pub(super) async fn expected_revision_on_missing_document_conflicts<S: Store>(
    store: &S,
) -> Checked {
    let key = main_key()?;
    let invented = Revision::new("r-never-issued")?;
    let error = apply_refused(
        store,
        put(&key, "op-1", Some(&invented), "text", &["reader"])?,
        ErrorKind::Conflict,
        "put with an expected revision on a missing document",
    )
    .await?;
    ensure!(
        matches!(error, MemoryError::Conflict { current: None }),
        "expected Conflict with no current revision, got {error:?}"
    );
    let stored = read(store, &key).await?;
    ensure!(
        stored.is_none(),
        "the refused put stored {}",
        Brief(stored.as_ref())
    );
    Ok(())
}

pub(super) async fn replacement_records_predecessor<S: Store>(store: &S) -> Checked {
    let (key, first) = create(store, "v1").await?;
    let second = apply_ok(
        store,
        put(&key, "op-2", Some(&first), "v2", &["reader"])?,
        "first replacement",
    )
    .await?
    .receipt
    .document;
    let third = apply_ok(
        store,
        put(&key, "op-3", Some(&second.revision), "v3", &["reader"])?,
        "second replacement",
    )
    .await?
    .receipt
    .document;
    ensure!(
        second.predecessor.as_ref() == Some(&first),
        "the first replacement records predecessor {:?}, not {first}",
        second.predecessor
    );
    ensure!(
        third.predecessor.as_ref() == Some(&second.revision),
        "the second replacement records predecessor {:?}, not {}",
        third.predecessor,
        second.revision
    );
    ensure!(
        first != second.revision && second.revision != third.revision && first != third.revision,
        "a replacement reused a revision"
    );
    let stored = read(store, &key).await?;
    ensure!(
        stored.as_ref() == Some(&third),
        "read returns {} instead of the last replacement",
        Brief(stored.as_ref())
    );
    Ok(())
}

pub(super) async fn stale_revision_conflicts_and_winner_stays<S: Store>(store: &S) -> Checked {
    let (key, first) = create(store, "base").await?;
    let winner = apply_ok(
        store,
        put(&key, "op-winner", Some(&first), "winner", &["reader"])?,
        "winning edit",
    )
    .await?
    .receipt
    .document;
    let error = apply_refused(
        store,
        put(&key, "op-loser", Some(&first), "loser", &["reader"])?,
        ErrorKind::Conflict,
        "edit based on the replaced revision",
    )
    .await?;
    ensure!(
        matches!(&error, MemoryError::Conflict { current: Some(current) } if *current == winner.revision),
        "conflict does not name the winner's revision: {error:?}"
    );
    let invented = Revision::new("r-never-issued")?;
    let error = apply_refused(
        store,
        put(&key, "op-wrong", Some(&invented), "wrong", &["reader"])?,
        ErrorKind::Conflict,
        "edit based on a revision that never existed",
    )
    .await?;
    ensure!(
        matches!(&error, MemoryError::Conflict { current: Some(current) } if *current == winner.revision),
        "conflict does not name the winner's revision: {error:?}"
    );
    let stored = read(store, &key).await?;
    ensure!(
        stored.as_ref() == Some(&winner),
        "the refused edits changed the document: read returns {}",
        Brief(stored.as_ref())
    );
    // The loser's operation id was not consumed: nothing of the refused write was kept.
    let retried = apply_ok(
        store,
        put(
            &key,
            "op-loser",
            Some(&winner.revision),
            "loser, rebased",
            &["reader"],
        )?,
        "rebased retry of the loser",
    )
    .await?;
    ensure!(!retried.replayed, "a refused write left a receipt behind");
    Ok(())
}

pub(super) async fn withdrawal_is_terminal<S: Store>(store: &S) -> Checked {
    let (key, first) = create(store, "to be withdrawn").await?;
    let outcome = apply_ok(
        store,
        withdraw(&key, "op-withdraw", &first, "asked to forget")?,
        "withdrawal",
    )
    .await?;
    ensure!(
        !outcome.replayed,
        "a first withdrawal was reported as a replay"
    );
    let tombstone = &outcome.receipt.document;
    ensure!(
        outcome.receipt.kind == WriteKind::Withdraw,
        "receipt kind is {:?}",
        outcome.receipt.kind
    );
    ensure!(
        tombstone.withdrawn
            == Some(Withdrawal {
                reason: "asked to forget".to_owned(),
                by: Some(WITHDRAWN_BY.to_owned()),
            }),
        "the withdrawal receipt does not carry the reason and who asked"
    );
    ensure!(
        tombstone.predecessor.as_ref() == Some(&first),
        "the withdrawal records predecessor {:?}, not {first}",
        tombstone.predecessor
    );
    let stored = read(store, &key).await?;
    ensure!(
        stored.is_none(),
        "read returns a withdrawn document: {}",
        Brief(stored.as_ref())
    );
    let many = store.read_many(std::slice::from_ref(&key)).await?;
    ensure!(many == vec![None], "read_many returns a withdrawn document");
    for (step, write) in [
        (
            "create after withdrawal",
            put(&key, "op-recreate", None, "back", &["reader"])?,
        ),
        (
            "put on the withdrawn revision",
            put(&key, "op-on-old", Some(&first), "back", &["reader"])?,
        ),
        (
            "put on the tombstone's revision",
            put(
                &key,
                "op-on-tombstone",
                Some(&tombstone.revision),
                "back",
                &["reader"],
            )?,
        ),
        (
            "second withdrawal",
            withdraw(&key, "op-withdraw-again", &tombstone.revision, "again")?,
        ),
    ] {
        apply_refused(store, write, ErrorKind::Withdrawn, step).await?;
    }
    let stored = read(store, &key).await?;
    ensure!(
        stored.is_none(),
        "a refused write revived the document: {}",
        Brief(stored.as_ref())
    );
    Ok(())
}

pub(super) async fn withdrawal_checks_document_and_revision<S: Store>(store: &S) -> Checked {
    let key = main_key()?;
    let invented = Revision::new("r-never-issued")?;
    apply_refused(
        store,
        withdraw(&key, "op-withdraw-missing", &invented, "gone")?,
        ErrorKind::NotFound,
        "withdrawal of a missing document",
    )
    .await?;
    let (key, first) = create(store, "kept").await?;
    let second = apply_ok(
        store,
        put(&key, "op-2", Some(&first), "kept, edited", &["reader"])?,
        "edit",
    )
    .await?
    .receipt
    .document;
    let error = apply_refused(
        store,
        withdraw(&key, "op-withdraw-stale", &first, "stale")?,
        ErrorKind::Conflict,
        "withdrawal of a replaced revision",
    )
    .await?;
    ensure!(
        matches!(&error, MemoryError::Conflict { current: Some(current) } if *current == second.revision),
        "conflict does not name the current revision: {error:?}"
    );
    let stored = read(store, &key).await?;
    ensure!(
        stored.as_ref() == Some(&second),
        "a refused withdrawal changed the document: {}",
        Brief(stored.as_ref())
    );
    Ok(())
}

/// Replays `write` and checks that the answer is `original`, byte for byte, marked as a replay.
pub(super) async fn expect_replay<S: Store>(
    store: &S,
    write: MemoryWrite,
    original: &MemoryReceipt,
    step: &str,
) -> Checked {
    let outcome = apply_ok(store, write, step).await?;
    ensure!(
        outcome.replayed,
        "{step}: the retry is not marked as a replay"
    );
    ensure!(
        receipt_bytes(&outcome.receipt)? == receipt_bytes(original)?,
        "{step}: the retry returned another receipt ({}) than the original ({})",
        Brief(Some(&outcome.receipt.document)),
        Brief(Some(&original.document))
    );
    Ok(())
}

pub(super) async fn replay_returns_original_receipt<S: Store>(store: &S) -> Checked {
    let key = main_key()?;
    let write = put(&key, "op-create", None, "once \u{10ffff}", &["reader"])?;
    let original = apply_ok(store, write.clone(), "create").await?.receipt;
    expect_replay(store, write.clone(), &original, "first retry").await?;
    expect_replay(store, write, &original, "second retry").await?;
    let stored = read(store, &key).await?;
    ensure!(
        stored.as_ref() == Some(&original.document),
        "retries changed the document: {}",
        Brief(stored.as_ref())
    );
    Ok(())
}

pub(super) async fn replay_after_later_edit_keeps_the_edit<S: Store>(store: &S) -> Checked {
    let key = main_key()?;
    let create_write = put(&key, "op-create", None, "v1", &["reader"])?;
    let created = apply_ok(store, create_write.clone(), "create")
        .await?
        .receipt;
    let edit_write = put(
        &key,
        "op-edit",
        Some(&created.document.revision),
        "v2",
        &["reader"],
    )?;
    let edited = apply_ok(store, edit_write.clone(), "edit").await?.receipt;
    expect_replay(
        store,
        create_write,
        &created,
        "retry of the create after the edit",
    )
    .await?;
    expect_replay(store, edit_write, &edited, "retry of the edit").await?;
    let stored = read(store, &key).await?;
    ensure!(
        stored.as_ref() == Some(&edited.document),
        "the retry undid the later edit: read returns {}",
        Brief(stored.as_ref())
    );
    Ok(())
}

pub(super) async fn replay_after_withdrawal_keeps_the_withdrawal<S: Store>(store: &S) -> Checked {
    let key = main_key()?;
    let create_write = put(&key, "op-create", None, "v1", &["reader"])?;
    let created = apply_ok(store, create_write.clone(), "create")
        .await?
        .receipt;
    let withdraw_write = withdraw(&key, "op-withdraw", &created.document.revision, "forget")?;
    let withdrawn = apply_ok(store, withdraw_write.clone(), "withdrawal")
        .await?
        .receipt;
    // The withdrawal took the create's words out of its receipt (memory_core::revisions): the
    // retry answers the same revision without them.
    expect_replay(
        store,
        create_write,
        &memory_core::revisions::redact(created.clone()),
        "retry of the create after the withdrawal",
    )
    .await?;
    expect_replay(store, withdraw_write, &withdrawn, "retry of the withdrawal").await?;
    let stored = read(store, &key).await?;
    ensure!(
        stored.is_none(),
        "a retry revived the withdrawn document: {}",
        Brief(stored.as_ref())
    );
    apply_refused(
        store,
        put(
            &key,
            "op-after",
            Some(&created.document.revision),
            "v2",
            &["reader"],
        )?,
        ErrorKind::Withdrawn,
        "put after the retries",
    )
    .await?;
    Ok(())
}
