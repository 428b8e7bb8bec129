//! The store suite: reads, history, stored receipts, batches, text every store must hold, and the
//! store's own consistency check.

use super::{InspectableStore, access, async_suite, key, namespace, ok, put, said, withdraw};
use crate::fixtures::{Checked, Failure, ensure};
use memory_core::document::MemoryContent;
use memory_core::error::ErrorKind;
use memory_core::ids::{OperationId, Revision};
use memory_core::ports::ChangeSequence;

async_suite! {
    /// Every rule [`run_store_suite`] checks, in order.
    STORE_RULES;
    /// Runs every rule of [`STORE_RULES`], each on a fresh store from `factory`.
    run_store_suite;
    "reads-history-and-receipts-follow-every-write" => reads_history_and_receipts_follow_every_write,
    "a-batch-applies-writes-in-order-in-one-transaction" => a_batch_applies_writes_in_order,
    "text-with-nul-is-kept-and-searchable" => text_with_nul_is_kept_and_searchable,
    "long-text-is-stored-whole-and-its-start-searchable" => long_text_is_stored_whole,
}

async fn reads_history_and_receipts_follow_every_write<S: InspectableStore>(store: &S) -> Checked {
    let doc = key("t1", "doc")?;
    let first = ok(
        store
            .apply(put(&doc, "op-1", None, MemoryContent::text("one"), &["s"])?)
            .await,
        "create",
    )?;
    let second = ok(
        store
            .apply(put(
                &doc,
                "op-2",
                Some(&first.receipt.document.revision),
                MemoryContent::text("two"),
                &["s"],
            )?)
            .await,
        "replace",
    )?;
    let read = ok(store.read(&doc).await, "read")?;
    ensure!(
        read.as_ref() == Some(&second.receipt.document),
        "a read after a replacement is not the replacement"
    );
    let many = ok(
        store.read_many(&[doc.clone(), key("t1", "none")?]).await,
        "read many",
    )?;
    ensure!(
        many == [Some(second.receipt.document.clone()), None],
        "read_many answers {} documents, not the replacement and nothing",
        many.iter().flatten().count()
    );
    ok(
        store
            .apply(withdraw(&doc, "op-3", &second.receipt.document.revision)?)
            .await,
        "withdraw",
    )?;
    ensure!(
        ok(store.read(&doc).await, "read")?.is_none(),
        "a withdrawn document still reads"
    );
    let history = ok(store.history(&doc).await, "history")?;
    ensure!(
        history.len() == 3,
        "history holds {} revisions, not 3",
        history.len()
    );
    ensure!(
        history[0].predecessor.is_none(),
        "the first revision has a predecessor"
    );
    ensure!(
        history[0].revision == first.receipt.document.revision
            && history[1].revision == second.receipt.document.revision,
        "history is not in commit order"
    );
    for pair in history.windows(2) {
        ensure!(
            pair[1].predecessor.as_ref() == Some(&pair[0].revision),
            "a revision does not name its predecessor"
        );
    }
    let receipt = ok(
        store
            .receipt(&doc.namespace, &OperationId::new("op-2")?)
            .await,
        "receipt",
    )?;
    // The withdrawal took the words out of every earlier receipt (memory_core::revisions).
    ensure!(
        receipt.as_ref() == Some(&memory_core::revisions::redact(second.receipt.clone())),
        "the stored receipt is not the one returned, without its words after the withdrawal"
    );
    let unknown = ok(
        store
            .receipt(&namespace("t2")?, &OperationId::new("op-2")?)
            .await,
        "receipt",
    )?;
    ensure!(
        unknown.is_none(),
        "another namespace has the operation's receipt"
    );
    let counts = ok(store.check_consistency().await, "consistency")?;
    ensure!(
        (
            counts.documents,
            counts.receipts,
            counts.revisions,
            counts.changes
        ) == (1, 3, 3, 3),
        "consistency counted {counts:?}"
    );
    Ok(())
}

async fn a_batch_applies_writes_in_order<S: InspectableStore>(store: &S) -> Checked {
    let a = key("t1", "a")?;
    let first = put(&a, "op-1", None, MemoryContent::text("first"), &["s"])?;
    let missing = Revision::new("r-none")?;
    let outcomes = ok(
        store
            .apply_batch(vec![
                first.clone(),
                put(&a, "op-2", None, MemoryContent::text("second"), &["s"])?,
                first,
                put(
                    &key("t1", "b")?,
                    "op-3",
                    None,
                    MemoryContent::text("b"),
                    &["s"],
                )?,
                put(
                    &key("t1", "c")?,
                    "op-4",
                    Some(&missing),
                    MemoryContent::text("c"),
                    &["s"],
                )?,
            ])
            .await,
        "batch",
    )?;
    ensure!(
        outcomes.len() == 5,
        "{} answers for 5 writes",
        outcomes.len()
    );
    ensure!(
        matches!(&outcomes[0], Ok(outcome) if !outcome.replayed),
        "the first write was not created"
    );
    ensure!(
        matches!(&outcomes[1], Err(error) if error.kind() == ErrorKind::Conflict),
        "a create of an existing key in the batch did not conflict"
    );
    ensure!(
        matches!(&outcomes[2], Ok(outcome) if outcome.replayed),
        "a repeat in the batch was not a replay"
    );
    ensure!(
        outcomes[3].is_ok(),
        "a write after refusals in the batch was not applied"
    );
    ensure!(
        outcomes[4].is_err(),
        "a write expecting a missing revision was applied"
    );
    ensure!(
        ok(store.head().await, "head")? == ChangeSequence::new(2),
        "the batch committed other than two changes"
    );
    ensure!(
        ok(store.read(&key("t1", "c")?).await, "read")?.is_none(),
        "a refused write in a batch stored a document"
    );
    let too_many =
        vec![put(&a, "x", None, MemoryContent::text("x"), &[])?; store.max_batch_writes() + 1];
    match store.apply_batch(too_many).await {
        Err(error) if error.kind() == ErrorKind::TooLarge => {}
        Err(error) => {
            return Err(Failure(format!(
                "an oversized batch failed with {}",
                error.kind().as_str()
            )));
        }
        Ok(_) => return Err(Failure("an oversized batch was applied".to_owned())),
    }
    ensure!(
        ok(store.head().await, "head")? == ChangeSequence::new(2),
        "an oversized batch committed changes"
    );
    ok(store.check_consistency().await, "consistency")?;
    Ok(())
}

async fn text_with_nul_is_kept_and_searchable<S: InspectableStore>(store: &S) -> Checked {
    let doc = key("t1", "nul")?;
    ok(
        store
            .apply(put(
                &doc,
                "op-1",
                None,
                MemoryContent::text("walrus\u{0}tusk"),
                &["s"],
            )?)
            .await,
        "put",
    )?;
    let text = ok(store.read(&doc).await, "read")?.map(|document| document.content.text);
    ensure!(
        text.as_deref() == Some("walrus\u{0}tusk"),
        "the text with U+0000 reads back as {text:?}"
    );
    let hits = ok(store.search(&access("t1", "s")?, "tusk", 5).await, "search")?;
    ensure!(
        hits.len() == 1,
        "the word after U+0000 finds {} documents",
        hits.len()
    );
    ok(store.check_consistency().await, "consistency")?;
    Ok(())
}

async fn long_text_is_stored_whole<S: InspectableStore>(store: &S) -> Checked {
    let doc = key("t1", "long")?;
    // Far above what a full-text index keeps of one document (PostgreSQL caps a tsvector at 1 MiB).
    let long = format!("narwhal {}", "lexeme ".repeat(60_000));
    let written = ok(
        store
            .apply(put(&doc, "op-1", None, said(&long, "ana"), &["s"])?)
            .await,
        "put",
    )?;
    ensure!(
        written.receipt.document.content.text == long,
        "the receipt does not hold the whole text"
    );
    let read = ok(store.read(&doc).await, "read")?.map(|document| document.content.text);
    ensure!(
        read.as_deref() == Some(long.as_str()),
        "the long text does not read back whole"
    );
    let hits = ok(
        store.search(&access("t1", "s")?, "narwhal", 5).await,
        "search",
    )?;
    ensure!(
        hits.len() == 1,
        "the start of a long text finds {} documents",
        hits.len()
    );
    ok(store.check_consistency().await, "consistency")?;
    Ok(())
}
