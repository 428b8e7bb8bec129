//! The remembering store suite: admission, fenced intent leases, saved commands and references,
//! suppression and the outbox.

use std::sync::Barrier;

use super::{ActivityBackend, ok, refused, sync_suite, thread, worker};
use crate::fixtures::{Checked, Failure, ensure};
use memory_core::activity::{
    ActivityError, FencingEpoch, Intent, IntentOutcome, IntentState, RecordSuppression,
    RememberingStore, SavedCommand, Sequence, SourceId, SourceReference, SourceRevision,
};
use memory_core::document::{MemoryContent, MemoryKey};
use memory_core::ids::{DocumentId, OperationId, Revision};
use memory_core::namespace::NamespaceAddress;
use memory_core::write::MemoryWrite;

sync_suite! {
    /// Every rule [`run_remembering_suite`] checks, in order.
    REMEMBERING_RULES;
    /// Runs every rule of [`REMEMBERING_RULES`], each on a fresh backend from `factory`.
    run_remembering_suite;
    ActivityBackend;
    "admission-is-idempotent-and-refuses-at-capacity" => admission_is_idempotent_and_refuses_at_capacity,
    "cleanups-and-successors-are-not-counted-against-capacity" => cleanups_and_successors_are_not_counted,
    "intent-claims-are-fenced-and-taken-over-after-expiry" => intent_claims_are_fenced,
    "first-saved-proposal-wins" => first_saved_proposal_wins,
    "saved-command-keeps-its-reference-and-only-a-later-attempt-replaces-it" => saved_command_rules,
    "completion-closes-the-intent-and-admits-its-successor" => completion_closes_the_intent,
    "a-finished-cleanup-reopens-and-a-finished-remember-stays-done" => finished_cleanup_reopens,
    "suppression-hides-contributions-and-admits-a-cleanup" => suppression_hides_contributions,
    "thread-suppressions-name-exactly-the-threads-records" => thread_suppressions_are_exact,
    "references-are-kept-once-and-paged-by-source" => references_are_kept_once_and_paged,
    "outbox-parks-up-to-capacity-and-admits-once" => outbox_parks_and_admits_once,
    "concurrent-workers-never-claim-one-intent-twice" => concurrent_workers_never_claim_twice,
}

fn target(id: &str) -> Result<MemoryKey, Failure> {
    Ok(MemoryKey {
        namespace: NamespaceAddress::encode("memory-core-activity", 1, &serde_json::json!({}))?,
        id: DocumentId::new(id)?,
    })
}

fn source(name: &str) -> Result<SourceId, Failure> {
    Ok(SourceId::new(name)?)
}

fn revision(name: &str) -> Result<SourceRevision, Failure> {
    Ok(SourceRevision::new(name)?)
}

fn remember(name: &str) -> Result<Intent, Failure> {
    Ok(Intent::Remember {
        source: source(name)?,
        revision: revision("v1")?,
        target: target(name)?,
        scopes: Vec::new(),
    })
}

fn cleanup(name: &str) -> Result<Intent, Failure> {
    Ok(Intent::Cleanup {
        source: source(name)?,
        revision: None,
    })
}

fn reference(name: &str, operation: &str, written: &str) -> Result<SourceReference, Failure> {
    Ok(SourceReference {
        source: source(name)?,
        source_revision: revision("v1")?,
        target: target(name)?,
        operation_id: OperationId::new(operation)?,
        revision: Revision::new(written)?,
    })
}

fn command(name: &str, attempt: u32) -> Result<SavedCommand, Failure> {
    Ok(SavedCommand {
        attempt,
        write: MemoryWrite::Withdraw {
            key: target(name)?,
            operation_id: OperationId::new(format!("op-{attempt}"))?,
            expected_revision: Revision::new("r")?,
            reason: "test".to_owned(),
            by: None,
        },
    })
}

fn is_stale(error: &ActivityError) -> bool {
    matches!(error, ActivityError::StaleLease { .. })
}

fn state_of<S: RememberingStore>(
    store: &S,
    intent: &Intent,
) -> Result<Option<IntentState>, Failure> {
    Ok(ok(store.inspect_intent(&intent.id()), "inspect intent")?.map(|view| view.state))
}

fn admission_is_idempotent_and_refuses_at_capacity<B: ActivityBackend>(backend: &B) -> Checked {
    let store = backend.remembering();
    let first = ok(store.admit(&remember("s1")?, 2, 0), "admit")?;
    ensure!(
        !first.already_admitted,
        "a new intent was reported as already admitted"
    );
    ensure!(
        first.id == remember("s1")?.id(),
        "the admitted id is not the intent's id"
    );
    let again = ok(store.admit(&remember("s1")?, 2, 0), "admit again")?;
    ensure!(
        again.already_admitted && again.id == first.id,
        "a repeated admission was queued again"
    );
    ok(store.admit(&remember("s2")?, 2, 0), "admit a second")?;
    refused(
        store.admit(&remember("s3")?, 2, 0),
        |error| matches!(error, ActivityError::AtCapacity { capacity: 2 }),
        "an admission at capacity",
    )?;
    ensure!(
        ok(store.open_intents(), "count")? == 2,
        "capacity refusal changed the open count"
    );
    ensure!(
        state_of(&store, &remember("s3")?)?.is_none(),
        "a refused intent was recorded"
    );
    ensure!(
        state_of(&store, &remember("s1")?)? == Some(IntentState::Queued),
        "an admitted intent was evicted"
    );
    let repeat_at_capacity = ok(store.admit(&remember("s1")?, 2, 0), "repeat at capacity")?;
    ensure!(
        repeat_at_capacity.already_admitted,
        "a repeat at capacity was not answered as admitted"
    );
    let other = backend.remembering();
    ensure!(
        ok(other.open_intents(), "count from another handle")? == 2,
        "another handle counts otherwise"
    );
    Ok(())
}

fn cleanups_and_successors_are_not_counted<B: ActivityBackend>(backend: &B) -> Checked {
    let store = backend.remembering();
    ok(store.admit(&remember("s1")?, 1, 0), "admit")?;
    let cleanup = ok(store.admit(&cleanup("s9")?, 1, 0), "a cleanup at capacity")?;
    ensure!(!cleanup.already_admitted, "the cleanup was not admitted");
    ok(
        store.suppress(&source("s8")?, None, 0),
        "a suppression at capacity",
    )?;
    ensure!(
        ok(store.open_intents(), "count")? == 3,
        "cleanups are not open intents"
    );
    refused(
        store.admit(&remember("s2")?, 1, 0),
        |error| matches!(error, ActivityError::AtCapacity { capacity: 1 }),
        "a remember intent at capacity",
    )?;
    let claim = ok(store.claim_next(&worker("a")?, 1_000, 1), "claim")?
        .ok_or_else(|| Failure("nothing to claim".to_owned()))?;
    ensure!(
        claim.intent == remember("s1")?,
        "claims do not follow admission order"
    );
    ok(
        store.complete(
            &claim.lease,
            &IntentOutcome::Invalidated,
            Some(&remember("s3")?),
            2,
        ),
        "complete with a successor",
    )?;
    ensure!(
        state_of(&store, &remember("s3")?)? == Some(IntentState::Queued),
        "the successor was not admitted"
    );
    ok(
        store.admit(&remember("s4")?, 1, 3),
        "a remember intent beside an uncounted successor",
    )?;
    Ok(())
}

fn intent_claims_are_fenced<B: ActivityBackend>(backend: &B) -> Checked {
    let store = backend.remembering();
    ensure!(
        ok(store.claim_next(&worker("a")?, 1_000, 0), "claim")?.is_none(),
        "an empty store handed out an intent"
    );
    let first = ok(store.admit(&remember("s1")?, 10, 0), "admit")?;
    ok(store.admit(&remember("s2")?, 10, 0), "admit")?;
    refused(
        store.claim_next(&worker("a")?, 0, 5),
        |error| matches!(error, ActivityError::InvalidInput { .. }),
        "a zero-length lease",
    )?;
    let claim = ok(store.claim_next(&worker("a")?, 1_000, 10), "claim")?
        .ok_or_else(|| Failure("nothing to claim".to_owned()))?;
    ensure!(
        claim.lease.id == first.id,
        "the oldest intent was not claimed first"
    );
    ensure!(
        claim.lease.epoch == FencingEpoch::new(1),
        "the first epoch is {}",
        claim.lease.epoch
    );
    ensure!(
        claim.lease.expires_at == 1_010,
        "the lease expires at {}",
        claim.lease.expires_at
    );
    ensure!(
        claim.proposal.is_none() && claim.command.is_none(),
        "a new intent has saved work"
    );
    let second = ok(store.claim_next(&worker("b")?, 1_000, 20), "claim")?
        .ok_or_else(|| Failure("the second intent was not claimable".to_owned()))?;
    ensure!(
        second.intent == remember("s2")?,
        "a held intent was handed out again"
    );
    ensure!(
        ok(store.claim_next(&worker("c")?, 1_000, 30), "claim")?.is_none(),
        "an intent was handed out while held"
    );
    let proposal = MemoryContent::text("the user likes tea");
    ok(
        store.save_proposal(&claim.lease, &proposal, 11),
        "save proposal",
    )?;
    let takeover = ok(store.claim_next(&worker("b")?, 1_000, 2_000), "takeover")?
        .ok_or_else(|| Failure("an expired lease was not taken over".to_owned()))?;
    ensure!(
        takeover.lease.id == first.id,
        "the takeover claimed another intent"
    );
    ensure!(
        takeover.lease.epoch == FencingEpoch::new(2),
        "the takeover's epoch is {}",
        takeover.lease.epoch
    );
    ensure!(
        takeover.proposal == Some(proposal),
        "the takeover lost the saved proposal"
    );
    let done = IntentOutcome::NothingToRemember;
    refused(
        store.complete(&claim.lease, &done, None, 2_001),
        is_stale,
        "complete with a superseded lease",
    )?;
    refused(
        store.release(&claim.lease, 2_001),
        is_stale,
        "release with a superseded lease",
    )?;
    refused(
        store.save_proposal(&takeover.lease, &MemoryContent::text("x"), 3_000),
        is_stale,
        "a save at the lease's expiry",
    )?;
    let renewed = ok(store.claim_next(&worker("c")?, 1_000, 3_000), "claim")?;
    ensure!(
        renewed.is_some_and(|claim| claim.lease.id == first.id),
        "an expired intent was not claimable"
    );
    Ok(())
}

fn first_saved_proposal_wins<B: ActivityBackend>(backend: &B) -> Checked {
    let store = backend.remembering();
    ok(store.admit(&remember("s1")?, 10, 0), "admit")?;
    let claim = ok(store.claim_next(&worker("a")?, 1_000, 1), "claim")?
        .ok_or_else(|| Failure("nothing to claim".to_owned()))?;
    let first = MemoryContent::text("first");
    ok(store.save_proposal(&claim.lease, &first, 2), "save")?;
    ok(
        store.save_proposal(&claim.lease, &MemoryContent::text("second"), 3),
        "save again",
    )?;
    let view = ok(store.inspect_intent(&claim.lease.id), "inspect")?;
    ensure!(
        view.and_then(|view| view.proposal) == Some(first),
        "a later proposal replaced the first"
    );
    ok(store.release(&claim.lease, 4), "release")?;
    let again = ok(
        store.claim_next(&worker("b")?, 1_000, 5),
        "claim after release",
    )?;
    ensure!(
        again.is_some_and(|claim| claim.lease.epoch == FencingEpoch::new(2)),
        "a released intent was not claimable at once with a new epoch"
    );
    Ok(())
}

fn saved_command_rules<B: ActivityBackend>(backend: &B) -> Checked {
    let store = backend.remembering();
    ok(store.admit(&remember("s1")?, 10, 0), "admit")?;
    let claim = ok(store.claim_next(&worker("a")?, 1_000, 1), "claim")?
        .ok_or_else(|| Failure("nothing to claim".to_owned()))?;
    let kept = reference("s1", "op-0", "r0")?;
    ok(
        store.save_command(&claim.lease, &command("s1", 0)?, &kept, 2),
        "save command",
    )?;
    for attempt in [0, 0] {
        refused(
            store.save_command(&claim.lease, &command("s1", attempt)?, &kept, 3),
            |error| matches!(error, ActivityError::ProgressMismatch { .. }),
            "a command of the same attempt",
        )?;
    }
    let rebased = reference("s1", "op-1", "r1")?;
    ok(
        store.save_command(&claim.lease, &command("s1", 1)?, &rebased, 4),
        "a later attempt",
    )?;
    refused(
        store.save_command(&claim.lease, &command("s1", 0)?, &kept, 5),
        |error| matches!(error, ActivityError::ProgressMismatch { .. }),
        "an earlier attempt",
    )?;
    let takeover = ok(store.claim_next(&worker("b")?, 1_000, 2_000), "takeover")?
        .ok_or_else(|| Failure("nothing to take over".to_owned()))?;
    ensure!(
        takeover.command == Some(command("s1", 1)?),
        "the takeover got {:?}",
        takeover.command
    );
    refused(
        store.save_command(&claim.lease, &command("s1", 2)?, &rebased, 2_001),
        is_stale,
        "a command saved with a superseded lease",
    )?;
    let references = ok(store.references(&source("s1")?, 0, 10), "references")?;
    let listed: Vec<_> = references
        .into_iter()
        .map(|(_, reference)| reference)
        .collect();
    ensure!(
        listed == [kept, rebased],
        "the command references are {listed:?}"
    );
    Ok(())
}

fn completion_closes_the_intent<B: ActivityBackend>(backend: &B) -> Checked {
    let store = backend.remembering();
    let admitted = ok(store.admit(&remember("s1")?, 10, 0), "admit")?;
    let claim = ok(store.claim_next(&worker("a")?, 1_000, 1), "claim")?
        .ok_or_else(|| Failure("nothing to claim".to_owned()))?;
    ok(
        store.save_command(
            &claim.lease,
            &command("s1", 0)?,
            &reference("s1", "op-0", "r")?,
            2,
        ),
        "save",
    )?;
    let written = IntentOutcome::Written {
        revision: Revision::new("r")?,
    };
    ok(
        store.complete(&claim.lease, &written, Some(&remember("s2")?), 3),
        "complete",
    )?;
    let view = ok(store.inspect_intent(&admitted.id), "inspect")?
        .ok_or_else(|| Failure("a completed intent is gone".to_owned()))?;
    ensure!(
        view.state == IntentState::Done,
        "a completed intent is {}",
        view.state
    );
    ensure!(
        view.outcome == Some(written),
        "the outcome is {:?}",
        view.outcome
    );
    ensure!(
        view.command == Some(command("s1", 0)?),
        "completion lost the saved command"
    );
    ensure!(
        view.epoch == FencingEpoch::new(1),
        "the view's epoch is {}",
        view.epoch
    );
    ensure!(
        view.intent == remember("s1")?,
        "the view names another intent"
    );
    ensure!(
        ok(store.open_intents(), "count")? == 1,
        "the successor is not the only open intent"
    );
    refused(
        store.complete(&claim.lease, &IntentOutcome::Invalidated, None, 4),
        is_stale,
        "a second completion",
    )?;
    let next = ok(store.claim_next(&worker("b")?, 1_000, 5), "claim")?
        .ok_or_else(|| Failure("the successor was not claimable".to_owned()))?;
    ensure!(
        next.intent == remember("s2")?,
        "a done intent was claimed again"
    );
    let failed = IntentOutcome::Failed {
        reason: "conflict".to_owned(),
    };
    ok(store.complete(&next.lease, &failed, None, 6), "complete")?;
    ensure!(
        ok(store.open_intents(), "count")? == 0,
        "open intents remain"
    );
    ensure!(
        ok(store.claim_next(&worker("c")?, 1_000, 7), "claim")?.is_none(),
        "a done intent was handed out"
    );
    ensure!(
        ok(store.inspect_intent(&remember("never")?.id()), "inspect")?.is_none(),
        "an unknown intent has a view"
    );
    Ok(())
}

fn finished_cleanup_reopens<B: ActivityBackend>(backend: &B) -> Checked {
    let store = backend.remembering();
    for intent in [remember("s1")?, cleanup("s1")?] {
        ok(store.admit(&intent, 10, 0), "admit")?;
        let claim = ok(store.claim_next(&worker("a")?, 1_000, 1), "claim")?
            .ok_or_else(|| Failure("nothing to claim".to_owned()))?;
        let outcome = IntentOutcome::Cleaned {
            withdrawn: 1,
            kept: 0,
        };
        ok(store.complete(&claim.lease, &outcome, None, 2), "complete")?;
    }
    let remember_again = ok(
        store.admit(&remember("s1")?, 10, 3),
        "admit a finished remember intent",
    )?;
    ensure!(
        remember_again.already_admitted,
        "a finished remember intent was queued again"
    );
    ensure!(
        state_of(&store, &remember("s1")?)? == Some(IntentState::Done),
        "a finished remember intent reopened"
    );
    let cleanup_again = ok(
        store.admit(&cleanup("s1")?, 10, 3),
        "admit a finished cleanup",
    )?;
    ensure!(
        !cleanup_again.already_admitted,
        "a finished cleanup was not reopened"
    );
    let view = ok(store.inspect_intent(&cleanup_again.id), "inspect")?
        .ok_or_else(|| Failure("the cleanup is gone".to_owned()))?;
    ensure!(
        view.state == IntentState::Queued && view.outcome.is_none(),
        "the reopened cleanup is {view:?}"
    );
    let claim = ok(store.claim_next(&worker("b")?, 1_000, 4), "claim")?;
    ensure!(
        claim
            .is_some_and(|claim| claim.lease.id == cleanup_again.id
                && claim.lease.epoch == FencingEpoch::new(2)),
        "the reopened cleanup was not claimable with a fresh epoch"
    );
    Ok(())
}

fn thread_suppressions_are_exact<B: ActivityBackend>(backend: &B) -> Checked {
    let store = backend.remembering();
    let (t1, other) = (thread("t1")?, thread("x/t1")?);
    let read = |of| ok(store.thread_suppressions(of), "read thread suppressions");
    let empty = read(&t1)?;
    ensure!(
        empty.records.is_empty() && empty.generation == 0,
        "a fresh store reads {empty:?}"
    );
    // Another thread whose id ends like this one's, a longer id, another source and a record.
    ok(
        store.suppress(&SourceId::thread_record(&other, Sequence::new(2)), None, 5),
        "suppress",
    )?;
    ok(
        store.suppress(
            &SourceId::thread_record(&thread("t10")?, Sequence::new(2)),
            None,
            5,
        ),
        "suppress",
    )?;
    ok(store.suppress(&source("note/t1")?, None, 5), "suppress")?;
    ok(
        store.suppress(
            &SourceId::thread_record(&t1, Sequence::new(12)),
            Some(&revision("d12")?),
            7,
        ),
        "suppress a revision",
    )?;
    ok(
        store.suppress(&SourceId::thread_record(&t1, Sequence::new(3)), None, 9),
        "suppress",
    )?;
    // Again, later: the first time stays.
    ok(
        store.suppress(&SourceId::thread_record(&t1, Sequence::new(3)), None, 11),
        "suppress again",
    )?;
    let read_now = read(&t1)?;
    let expected = vec![
        RecordSuppression {
            sequence: Sequence::new(3),
            revision: None,
            suppressed_at: 9,
        },
        RecordSuppression {
            sequence: Sequence::new(12),
            revision: Some(revision("d12")?),
            suppressed_at: 7,
        },
    ];
    ensure!(
        read_now.records == expected,
        "t1's suppressions read {:?}",
        read_now.records
    );
    ensure!(
        read_now.generation == 5,
        "the generation is {} after five suppressions",
        read_now.generation
    );
    let others = read(&other)?;
    ensure!(
        others.records.len() == 1 && others.records[0].sequence == Sequence::new(2),
        "x/t1's suppressions read {:?}",
        others.records
    );
    Ok(())
}

fn suppression_hides_contributions<B: ActivityBackend>(backend: &B) -> Checked {
    let store = backend.remembering();
    let (s1, s2) = (source("s1")?, source("s2")?);
    let (v1, v2) = (revision("v1")?, revision("v2")?);
    ok(
        store.save_references(&[
            reference("s1", "op-1", "r1")?,
            reference("s2", "op-2", "r2")?,
        ]),
        "save",
    )?;
    ensure!(
        !ok(store.is_suppressed(&s1, &v1), "check")?,
        "a source is suppressed before suppression"
    );
    let contributions = |documents: &[(MemoryKey, Revision)]| {
        ok(
            store.suppressed_contributions(documents),
            "check contributions",
        )
    };
    let documents = [
        (target("s1")?, Revision::new("r1")?),
        (target("s2")?, Revision::new("r2")?),
        (target("s1")?, Revision::new("other")?),
    ];
    ensure!(
        contributions(&documents)? == [false, false, false],
        "contributions hidden before suppression"
    );
    let id = ok(store.suppress(&s1, None, 10), "suppress every revision")?;
    ensure!(
        id == cleanup("s1")?.id(),
        "suppression admitted another intent than the cleanup"
    );
    ensure!(
        state_of(&store, &cleanup("s1")?)? == Some(IntentState::Queued),
        "the cleanup is not queued"
    );
    ensure!(
        ok(store.is_suppressed(&s1, &v1), "check")? && ok(store.is_suppressed(&s1, &v2), "check")?,
        "not every revision is suppressed"
    );
    ensure!(
        !ok(store.is_suppressed(&s2, &v1), "check")?,
        "suppression spread to another source"
    );
    ensure!(
        contributions(&documents)? == [true, false, false],
        "contributions are {:?}",
        contributions(&documents)?
    );
    ok(store.suppress(&s2, Some(&v2), 11), "suppress one revision")?;
    ensure!(
        !ok(store.is_suppressed(&s2, &v1), "check")?,
        "a revision suppression covers another revision"
    );
    ensure!(
        ok(store.is_suppressed(&s2, &v2), "check")?,
        "the suppressed revision is not suppressed"
    );
    let only_v1 = Intent::Cleanup {
        source: s2.clone(),
        revision: Some(v2.clone()),
    };
    ensure!(
        state_of(&store, &only_v1)? == Some(IntentState::Queued),
        "the revision's cleanup is not queued"
    );
    ok(store.suppress(&s1, None, 12), "suppress again")?;
    ensure!(
        ok(store.open_intents(), "count")? == 2,
        "a repeated suppression queued another cleanup"
    );
    ensure!(
        ok(store.suppressed_contributions(&[]), "check none")?.is_empty(),
        "no documents, some answers"
    );
    let other = backend.remembering();
    ensure!(
        ok(other.is_suppressed(&s1, &v1), "check from another handle")?,
        "another handle does not see the suppression"
    );
    Ok(())
}

fn references_are_kept_once_and_paged<B: ActivityBackend>(backend: &B) -> Checked {
    let store = backend.remembering();
    let record = SourceId::thread_record(&thread("t")?, Sequence::new(3));
    let at = |operation: &str| -> Result<SourceReference, Failure> {
        Ok(SourceReference {
            source: record.clone(),
            ..reference("s1", operation, "r")?
        })
    };
    let first = at("op-1")?;
    ok(store.save_references(std::slice::from_ref(&first)), "save")?;
    ok(
        store.save_references(&[first.clone(), at("op-2")?, at("op-3")?]),
        "save again",
    )?;
    ok(store.save_references(&[]), "save nothing")?;
    let kept = ok(store.references(&record, 0, 10), "references")?;
    let listed: Vec<_> = kept
        .iter()
        .map(|(_, reference)| reference.clone())
        .collect();
    ensure!(
        listed == [first, at("op-2")?, at("op-3")?],
        "kept references are {listed:?}"
    );
    ensure!(
        kept.windows(2).all(|pair| pair[0].0 < pair[1].0),
        "reference rows do not increase"
    );
    let page = ok(store.references(&record, kept[0].0, 1), "page")?;
    ensure!(
        page == kept[1..2],
        "the page after the first row is {page:?}"
    );
    ensure!(
        ok(
            store.references(&record, kept[2].0, 10),
            "page past the end"
        )?
        .is_empty(),
        "a page past the last row is not empty"
    );
    let other = SourceId::thread_record(&thread("t")?, Sequence::new(4));
    ensure!(
        ok(store.references(&other, 0, 10), "references")?.is_empty(),
        "another source has references"
    );
    refused(
        store.references(&record, 0, 0),
        |error| matches!(error, ActivityError::InvalidInput { .. }),
        "a page of 0 references",
    )
}

fn outbox_parks_and_admits_once<B: ActivityBackend>(backend: &B) -> Checked {
    let store = backend.remembering();
    ok(store.outbox_put(&remember("s1")?, 2, 0), "park")?;
    ok(store.outbox_put(&remember("s2")?, 2, 1), "park")?;
    refused(
        store.outbox_put(&remember("s3")?, 2, 2),
        |error| matches!(error, ActivityError::AtCapacity { capacity: 2 }),
        "parking at capacity",
    )?;
    let parked = ok(store.outbox_peek(10), "peek")?;
    let intents: Vec<_> = parked.iter().map(|(_, intent)| intent.clone()).collect();
    ensure!(
        intents == [remember("s1")?, remember("s2")?],
        "parked intents are {intents:?}"
    );
    ensure!(
        ok(store.outbox_peek(1), "peek one")? == parked[..1],
        "a short peek is not the oldest"
    );
    ensure!(
        ok(store.open_intents(), "count")? == 0,
        "parking admitted an intent"
    );
    let admitted = ok(store.outbox_admit(parked[0].0, 10, 3), "admit parked")?;
    ensure!(
        admitted.id == remember("s1")?.id() && !admitted.already_admitted,
        "the parked intent was not admitted"
    );
    ensure!(
        ok(store.outbox_peek(10), "peek")? == parked[1..],
        "the admitted intent is still parked"
    );
    refused(
        store.outbox_admit(parked[0].0, 10, 4),
        |error| matches!(error, ActivityError::ProgressMismatch { .. }),
        "admitting a parked intent twice",
    )?;
    refused(
        store.outbox_admit(parked[1].0, 1, 5),
        |error| matches!(error, ActivityError::AtCapacity { capacity: 1 }),
        "admitting a parked intent at capacity",
    )?;
    ensure!(
        ok(store.outbox_peek(10), "peek")? == parked[1..],
        "a refused admission dropped the parked intent"
    );
    refused(
        store.outbox_peek(0),
        |error| matches!(error, ActivityError::InvalidInput { .. }),
        "a peek of 0 rows",
    )
}

fn concurrent_workers_never_claim_twice<B: ActivityBackend>(backend: &B) -> Checked {
    const WORKERS: usize = 4;
    const INTENTS: usize = 20;
    let store = backend.remembering();
    for index in 0..INTENTS {
        ok(
            store.admit(&remember(&format!("s{index}"))?, 100, 0),
            "admit",
        )?;
    }
    let start = Barrier::new(WORKERS);
    let stores: Vec<B::Remembering> = (0..WORKERS).map(|_| backend.remembering()).collect();
    let owners = (0..WORKERS)
        .map(|index| worker(&format!("w{index}")))
        .collect::<Result<Vec<_>, _>>()?;
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = stores
            .iter()
            .zip(&owners)
            .map(|(store, owner)| {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    let mut claimed = Vec::new();
                    loop {
                        match store.claim_next(owner, 60_000, 10) {
                            Ok(Some(claim)) => claimed.push(claim.lease.id),
                            Ok(None) => return Ok(claimed),
                            Err(error) => return Err(error),
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect::<Vec<_>>()
    });
    let mut claimed = Vec::new();
    for result in results {
        claimed.extend(ok(result, "a concurrent claim")?);
    }
    let total = claimed.len();
    claimed.sort();
    claimed.dedup();
    ensure!(
        claimed.len() == total,
        "an intent was claimed twice ({total} claims, {} intents)",
        claimed.len()
    );
    ensure!(
        total == INTENTS,
        "{total} of {INTENTS} intents were claimed"
    );
    Ok(())
}
