//! Refused input, the size limits at their exact boundary, and corrupt stored receipts.

use super::*;

/// A put whose text is `units` UTF-16 code units: characters outside the Basic Multilingual Plane (two
/// units, four UTF-8 bytes each), plus one ASCII letter when `units` is odd.
pub(super) fn sized_put(
    key: &MemoryKey,
    operation_id: &str,
    units: usize,
) -> Result<MemoryWrite, Failure> {
    let mut text = String::with_capacity(units * 2 + 1);
    text.extend(std::iter::repeat_n('\u{1f9e0}', units / 2));
    if units % 2 == 1 {
        text.push('a');
    }
    Ok(MemoryWrite::Put {
        key: key.clone(),
        operation_id: OperationId::new(operation_id)?,
        expected_revision: None,
        locator: SUITE_LOCATOR.to_owned(),
        content: MemoryContent::text(text),
        scopes: scopes(&["reader"])?,
    })
}

pub(super) fn canonical_units<T: serde::Serialize>(value: &T) -> Result<usize, Failure> {
    to_canonical_string(value)
        .map(|text| utf16_len(&text))
        .map_err(|error| Failure(format!("not canonicalizable: {error}")))
}

/// The canonical size of the receipt a put of `sized_put(key, operation_id, 0)` would get at time
/// `now`; every text unit adds exactly one unit to it, since the characters used need no escaping and
/// the digest and revision have fixed lengths. (Measured with one unit of text less one, since a put
/// of empty text is refused.)
pub(super) fn receipt_overhead(
    key: &MemoryKey,
    operation_id: &str,
    now: EpochMillis,
) -> Result<usize, Failure> {
    let prepared = PreparedWrite::prepare(sized_put(key, operation_id, 1)?)?;
    match prepared.plan(None, None, now)? {
        WritePlan::Commit { receipt, .. } => Ok(canonical_units(&receipt)? - 1),
        WritePlan::Replay(_) => Err(Failure(
            "a plan without a stored receipt replayed".to_owned(),
        )),
    }
}

/// The time the store stamps on writes, learned from a small put (the receipt holds it, so its number
/// of digits moves the size boundary).
pub(super) async fn store_time<S: Store>(
    store: &S,
    namespace_key: &MemoryKey,
) -> Result<EpochMillis, Failure> {
    let probe_key = MemoryKey {
        namespace: namespace_key.namespace.clone(),
        id: DocumentId::new("clock-probe")?,
    };
    let outcome = apply_ok(
        store,
        put(&probe_key, "op-clock-probe", None, "probe", &[])?,
        "clock probe",
    )
    .await?;
    Ok(outcome.receipt.document.modified_at)
}

pub(super) async fn command_over_size_limit_refused<S: Store>(store: &S) -> Checked {
    let key = main_key()?;
    let empty_command_units = canonical_units(&sized_put(&key, "op-big", 0)?)?;
    // The command's canonical JSON is exactly one unit over the limit.
    let write = sized_put(
        &key,
        "op-big",
        MAX_CANONICAL_UTF16_UNITS + 1 - empty_command_units,
    )?;
    let error = apply_refused(
        store,
        write,
        ErrorKind::TooLarge,
        "command one unit over the limit",
    )
    .await?;
    ensure!(
        matches!(&error, MemoryError::TooLarge { limit, max, .. } if limit.contains("command") && *max == MAX_CANONICAL_UTF16_UNITS as u64),
        "the error does not name the command size limit: {error}"
    );
    expect_nothing_stored(store, &key, "op-big").await
}

pub(super) async fn receipt_at_size_limit_accepted<S: Store>(store: &S) -> Checked {
    let key = main_key()?;
    let now = store_time(store, &key).await?;
    let units = MAX_CANONICAL_UTF16_UNITS - receipt_overhead(&key, "op-big", now)?;
    let outcome = apply_ok(
        store,
        sized_put(&key, "op-big", units)?,
        "put whose receipt is exactly at the limit",
    )
    .await?;
    let receipt_units = canonical_units(&outcome.receipt)?;
    ensure!(
        receipt_units == MAX_CANONICAL_UTF16_UNITS,
        "the receipt is {receipt_units} units, not the limit (did the clock gain a digit?)"
    );
    let stored = read(store, &key).await?;
    ensure!(
        stored
            .as_ref()
            .map(|document| utf16_len(&document.content.text))
            == Some(units),
        "the document at the limit was not stored whole"
    );
    Ok(())
}

pub(super) async fn receipt_over_size_limit_refused<S: Store>(store: &S) -> Checked {
    let key = main_key()?;
    let now = store_time(store, &key).await?;
    let units = MAX_CANONICAL_UTF16_UNITS + 1 - receipt_overhead(&key, "op-big", now)?;
    let error = apply_refused(
        store,
        sized_put(&key, "op-big", units)?,
        ErrorKind::TooLarge,
        "put whose receipt is one unit over the limit",
    )
    .await?;
    ensure!(
        matches!(&error, MemoryError::TooLarge { limit, .. } if limit.contains("receipt")),
        "the error does not name the receipt size limit: {error}"
    );
    expect_nothing_stored(store, &key, "op-big").await
}

/// Checks that a refused write left neither a document nor a receipt for its operation id.
async fn expect_nothing_stored<S: Store>(
    store: &S,
    key: &MemoryKey,
    operation_id: &str,
) -> Checked {
    let stored = read(store, key).await?;
    ensure!(
        stored.is_none(),
        "the refused write stored {}",
        Brief(stored.as_ref())
    );
    let retry = apply_ok(
        store,
        put(key, operation_id, None, "small", &["reader"])?,
        "small put with the same operation id",
    )
    .await?;
    ensure!(!retry.replayed, "the refused write left a receipt behind");
    Ok(())
}

/// Creates document `id`, writes a target command on it (a replacement, or a withdrawal), overwrites the
/// target's receipt with `forge` applied, replays the target and expects `Corrupt`, with the current
/// document unchanged.
async fn expect_corrupt_after<S, Forge>(
    store: &S,
    id: &str,
    target: Target,
    forge: Forge,
) -> Checked
where
    S: Store + ReceiptTamper,
    Forge: Fn(&mut MemoryReceipt),
{
    let users = namespace::<SuiteUsers>("tenant-a", "user-1")?;
    let key = key(&users, id)?;
    let create_operation = format!("op-create-{id}");
    let first = apply_ok(
        store,
        put(&key, &create_operation, None, "original", &["reader"])?,
        "create",
    )
    .await?
    .receipt
    .document
    .revision;
    let target_operation = format!("op-target-{id}");
    let target = match target {
        Target::Withdrawal => withdraw(&key, &target_operation, &first, "forget")?,
        Target::Replacement => put(
            &key,
            &target_operation,
            Some(&first),
            "replacement",
            &["reader"],
        )?,
    };
    let receipt = apply_ok(store, target.clone(), "target write")
        .await?
        .receipt;
    let mut forged = receipt.clone();
    forge(&mut forged);
    ensure!(forged != receipt, "the forgery changed nothing (suite bug)");
    store.overwrite_receipt(forged).await?;
    let before = read(store, &key).await?;
    apply_refused(
        store,
        target,
        ErrorKind::Corrupt,
        "replay against a forged receipt",
    )
    .await?;
    let after = read(store, &key).await?;
    ensure!(
        before == after,
        "detecting the corrupt receipt changed the document: {}",
        Brief(after.as_ref())
    );
    Ok(())
}

/// The write whose receipt a corrupt-receipt check forges.
#[derive(Debug, Clone, Copy)]
enum Target {
    Replacement,
    Withdrawal,
}

pub(super) async fn corrupt_receipt_predecessor<S: Store + ReceiptTamper>(store: &S) -> Checked {
    expect_corrupt_after(store, "put", Target::Replacement, |receipt| {
        receipt.document.predecessor = None
    })
    .await?;
    expect_corrupt_after(store, "withdraw", Target::Withdrawal, |receipt| {
        receipt.document.predecessor = None
    })
    .await
}

pub(super) async fn corrupt_receipt_kind<S: Store + ReceiptTamper>(store: &S) -> Checked {
    expect_corrupt_after(store, "kind", Target::Replacement, |receipt| {
        receipt.kind = WriteKind::Withdraw
    })
    .await?;
    expect_corrupt_after(store, "marker", Target::Replacement, |receipt| {
        receipt.document.withdrawn = Some(Withdrawal {
            reason: "forged".to_owned(),
            by: None,
        });
    })
    .await?;
    expect_corrupt_after(store, "withdraw-kind", Target::Withdrawal, |receipt| {
        receipt.kind = WriteKind::Put
    })
    .await?;
    expect_corrupt_after(store, "withdraw-marker", Target::Withdrawal, |receipt| {
        receipt.document.withdrawn = None
    })
    .await
}

pub(super) async fn corrupt_receipt_content<S: Store + ReceiptTamper>(store: &S) -> Checked {
    expect_corrupt_after(store, "doc", Target::Replacement, |receipt| {
        receipt
            .document
            .content
            .text
            .push_str(" (edited behind the store's back)");
    })
    .await
}

pub(super) async fn corrupt_receipt_locator<S: Store + ReceiptTamper>(store: &S) -> Checked {
    expect_corrupt_after(store, "doc", Target::Replacement, |receipt| {
        receipt.document.locator = "contract://forged".to_owned();
    })
    .await
}

pub(super) async fn corrupt_receipt_scopes<S: Store + ReceiptTamper>(store: &S) -> Checked {
    expect_corrupt_after(store, "doc", Target::Replacement, |receipt| {
        receipt.document.scopes.clear()
    })
    .await
}

pub(super) async fn corrupt_receipt_reason<S: Store + ReceiptTamper>(store: &S) -> Checked {
    expect_corrupt_after(store, "doc", Target::Withdrawal, |receipt| {
        receipt.document.withdrawn = Some(Withdrawal {
            reason: "forged reason".to_owned(),
            by: Some(WITHDRAWN_BY.to_owned()),
        });
    })
    .await?;
    // Who withdrew it is part of the tombstone too: another name on the same reason is corrupt.
    expect_corrupt_after(store, "doc-by", Target::Withdrawal, |receipt| {
        receipt.document.withdrawn = Some(Withdrawal {
            reason: "forget".to_owned(),
            by: Some("user:forged".to_owned()),
        });
    })
    .await
}

pub(super) async fn corrupt_receipt_key<S: Store + ReceiptTamper>(store: &S) -> Checked {
    let other_id = DocumentId::new("doc-forged")?;
    expect_corrupt_after(store, "doc", Target::Replacement, |receipt| {
        receipt.document.key.id = other_id.clone()
    })
    .await
}

pub(super) async fn corrupt_receipt_revision<S: Store + ReceiptTamper>(store: &S) -> Checked {
    let forged = Revision::new("r-forged")?;
    expect_corrupt_after(store, "doc", Target::Replacement, |receipt| {
        receipt.document.revision = forged.clone()
    })
    .await
}
