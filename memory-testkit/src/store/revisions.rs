//! The revision history suite: a document's history through [`memory_core::RevisionHistory`] lists
//! every revision with its words (text, attribution, time), keeps the words of the newest revisions
//! up to the store's bound, and after a withdrawal keeps none anywhere but the tombstone.

use super::{InspectableStore, access, async_suite, key, ok, put, said, withdraw};
use crate::fixtures::{Checked, Failure, ensure};
use memory_core::document::MemoryContent;
use memory_core::ids::OperationId;
use memory_core::revisions::{MAX_REVISIONS_PER_READ, StoredRevision, redact};
use memory_core::write::WriteOutcome;

async_suite! {
    /// Every rule [`run_revision_suite`] checks, in order.
    REVISION_RULES;
    /// Runs every rule of [`REVISION_RULES`], each on a fresh store from `factory`.
    run_revision_suite;
    "history-lists-every-revision-newest-first-with-its-words" => lists_every_revision,
    "history-keeps-the-words-of-the-newest-revisions-only" => keeps_the_newest_words,
    "a-withdrawal-leaves-only-the-tombstone" => a_withdrawal_leaves_only_the_tombstone,
}

async fn lists_every_revision<S: InspectableStore>(store: &S) -> Checked {
    let doc = key("t1", "doc")?;
    let mut written: Vec<WriteOutcome> = Vec::new();
    for (index, (text, speaker)) in [("one", "ana"), ("two", "bo"), ("three", "cy")]
        .into_iter()
        .enumerate()
    {
        let expected = written
            .last()
            .map(|outcome| &outcome.receipt.document.revision);
        let outcome = ok(
            store
                .apply(put(
                    &doc,
                    &format!("op-{index}"),
                    expected,
                    said(text, speaker),
                    &["s"],
                )?)
                .await,
            "write",
        )?;
        written.push(outcome);
    }
    ok(
        store
            .apply(put(
                &key("t1", "other")?,
                "op-other",
                None,
                MemoryContent::text("elsewhere"),
                &["s"],
            )?)
            .await,
        "write another document",
    )?;
    let history = ok(store.revisions(&doc, 10).await, "revisions")?;
    ensure!(
        history.len() == 3,
        "the history lists {} revisions of three writes",
        history.len()
    );
    for (read, outcome) in history.iter().zip(written.iter().rev()) {
        ensure!(
            read.document == outcome.receipt.document,
            "a revision does not read as its write left it (text, attribution, time), newest first"
        );
        ensure!(
            read.words_kept,
            "a revision within the bound lost its words"
        );
    }
    ensure!(
        history
            .windows(2)
            .all(|pair| pair[0].sequence > pair[1].sequence
                && pair[0].document.predecessor.as_ref() == Some(&pair[1].document.revision)),
        "the history is not newest first along the predecessor chain"
    );
    let newest = ok(store.revisions(&doc, 2).await, "revisions")?;
    ensure!(
        newest.len() == 2 && newest[..] == history[..2],
        "a limit of 2 answers {} revisions, not the newest two",
        newest.len()
    );
    let huge = ok(store.revisions(&doc, usize::MAX).await, "revisions")?;
    ensure!(
        huge == history,
        "a limit above {MAX_REVISIONS_PER_READ} is not clamped"
    );
    let never = ok(store.revisions(&key("t1", "never")?, 10).await, "revisions")?;
    ensure!(never.is_empty(), "a key never written has a history");
    let elsewhere = ok(store.revisions(&key("t2", "doc")?, 10).await, "revisions")?;
    ensure!(
        elsewhere.is_empty(),
        "another namespace's key shares the document's history"
    );
    ok(store.check_consistency().await, "consistency")?;
    Ok(())
}

async fn keeps_the_newest_words<S: InspectableStore>(store: &S) -> Checked {
    let kept = store.retention().max_revisions();
    let doc = key("t1", "bounded")?;
    let mut written: Vec<WriteOutcome> = Vec::new();
    for index in 0..kept + 2 {
        let expected = written
            .last()
            .map(|outcome| &outcome.receipt.document.revision);
        let write = put(
            &doc,
            &format!("op-{index}"),
            expected,
            said(&format!("version {index}"), "ana"),
            &["s"],
        )?;
        written.push(ok(store.apply(write).await, "write")?);
    }
    let history = ok(store.revisions(&doc, kept + 10).await, "revisions")?;
    ensure!(
        history.len() == kept + 2,
        "the history lists {} of {} revisions: a revision past the bound was forgotten whole",
        history.len(),
        kept + 2
    );
    for (age, (read, outcome)) in history.iter().zip(written.iter().rev()).enumerate() {
        if age < kept {
            ensure!(
                read.words_kept && read.document == outcome.receipt.document,
                "revision {age} from the newest lost its words within a bound of {kept}"
            );
        } else {
            ensure!(
                !read.words_kept && read.document.content == MemoryContent::tombstone(),
                "revision {age} from the newest keeps its words past a bound of {kept}"
            );
            ensure!(
                read.document.revision == outcome.receipt.document.revision
                    && read.document.predecessor == outcome.receipt.document.predecessor
                    && read.document.modified_at == outcome.receipt.document.modified_at,
                "a revision past the bound lost its revision, predecessor or time"
            );
        }
    }
    let oldest = &written[0];
    let replay = ok(
        store
            .apply(put(&doc, "op-0", None, said("version 0", "ana"), &["s"])?)
            .await,
        "replay of the oldest write",
    )?;
    ensure!(
        replay.replayed && replay.receipt == redact(oldest.receipt.clone()),
        "a replay past the bound is not its receipt without the words"
    );
    let newest = written
        .last()
        .ok_or_else(|| Failure("no write".to_owned()))?;
    let stored = ok(
        store
            .receipt(
                &doc.namespace,
                &OperationId::new(format!("op-{}", kept + 1))?,
            )
            .await,
        "receipt",
    )?;
    ensure!(
        stored.as_ref() == Some(&newest.receipt),
        "the newest receipt lost its words"
    );
    ok(store.check_consistency().await, "consistency")?;
    Ok(())
}

async fn a_withdrawal_leaves_only_the_tombstone<S: InspectableStore>(store: &S) -> Checked {
    let doc = key("t1", "secret")?;
    let first = ok(
        store
            .apply(put(&doc, "op-1", None, said("walrus tusk", "ana"), &["s"])?)
            .await,
        "create",
    )?;
    let second = ok(
        store
            .apply(put(
                &doc,
                "op-2",
                Some(&first.receipt.document.revision),
                said("walrus ivory", "bo"),
                &["s"],
            )?)
            .await,
        "replace",
    )?;
    let withdrawn = ok(
        store
            .apply(withdraw(&doc, "op-3", &second.receipt.document.revision)?)
            .await,
        "withdraw",
    )?;
    let history = ok(store.revisions(&doc, 10).await, "revisions")?;
    ensure!(
        history.len() == 3,
        "the withdrawn document's history lists {} revisions, not 3",
        history.len()
    );
    ensure!(
        history[0].document == withdrawn.receipt.document
            && history[0].document.withdrawn.is_some(),
        "the newest revision is not the tombstone (who, when, why)"
    );
    let words_left = |revisions: &[StoredRevision]| {
        revisions.iter().any(|revision| {
            revision.document.content.text.contains("walrus")
                || !revision.document.content.attributions.is_empty()
        })
    };
    ensure!(
        !words_left(&history) && history[1..].iter().all(|revision| !revision.words_kept),
        "a withdrawn document's history still holds words"
    );
    for (operation, outcome) in [("op-1", &first), ("op-2", &second)] {
        let stored = ok(
            store
                .receipt(&doc.namespace, &OperationId::new(operation)?)
                .await,
            "receipt",
        )?;
        ensure!(
            stored.as_ref() == Some(&redact(outcome.receipt.clone())),
            "the receipt of {operation} still holds the withdrawn words"
        );
    }
    let replay = ok(
        store
            .apply(put(&doc, "op-1", None, said("walrus tusk", "ana"), &["s"])?)
            .await,
        "replay",
    )?;
    ensure!(
        replay.replayed && replay.receipt.document.content == MemoryContent::tombstone(),
        "a replay after the withdrawal answers the withdrawn words"
    );
    let hits = ok(
        store.search(&access("t1", "s")?, "walrus", 5).await,
        "search",
    )?;
    ensure!(
        hits.is_empty(),
        "a withdrawn document's words are searchable"
    );
    ok(store.check_consistency().await, "consistency")?;
    Ok(())
}
