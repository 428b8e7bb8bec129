//! The progress suite: fenced leases, contiguous cursors, saved output and its limits, and the
//! extraction notes kept for `memory status`.

use std::collections::BTreeMap;
use std::sync::Barrier;

use super::{ActivityBackend, ok, pending, progress_key, refused, sync_suite, worker};
use crate::fixtures::{Checked, ensure};
use memory_core::activity::progress::{MAX_NOTE_REASON_BYTES, MAX_NOTE_REASONS};
use memory_core::activity::{
    ActivityError, CorrectionCounts, ExtractionNote, ExtractionTotals, FencingEpoch,
    MAX_PROGRESS_UTF16_UNITS, ModelUsage, ProgressStore, Sequence,
};

sync_suite! {
    /// Every rule [`run_progress_suite`] checks, in order.
    PROGRESS_RULES;
    /// Runs every rule of [`PROGRESS_RULES`], each on a fresh backend from `factory`.
    run_progress_suite;
    ActivityBackend;
    "every-claim-gets-a-fresh-epoch" => every_claim_gets_a_fresh_epoch,
    "stale-lease-writes-change-nothing" => stale_lease_writes_change_nothing,
    "saved-output-wins-and-returns-with-the-claim" => saved_output_wins_and_returns_with_the_claim,
    "replace-pending-needs-a-saved-output-and-a-current-lease" => replace_pending_needs_a_saved_output,
    "oversized-progress-is-refused-with-prior-progress-intact" => oversized_progress_is_refused,
    "inputs-out-of-range-are-invalid" => inputs_out_of_range_are_invalid,
    "inspect-all-lists-keys-in-order" => inspect_all_lists_keys_in_order,
    "concurrent-claims-leave-exactly-one-holder" => concurrent_claims_leave_exactly_one_holder,
    "extraction-notes-count-each-record-once" => extraction_notes_count_each_record_once,
    "invalid-extraction-notes-are-refused-and-change-nothing" => invalid_extraction_notes_are_refused,
}

fn is_stale(error: &ActivityError) -> bool {
    matches!(error, ActivityError::StaleLease { .. })
}

fn is_noncontiguous(error: &ActivityError) -> bool {
    matches!(error, ActivityError::Noncontiguous { .. })
}

fn is_mismatch(error: &ActivityError) -> bool {
    matches!(error, ActivityError::ProgressMismatch { .. })
}

fn every_claim_gets_a_fresh_epoch<B: ActivityBackend>(backend: &B) -> Checked {
    let progress = backend.progress();
    let k = progress_key("statements", 1, "t")?;
    let first = ok(progress.claim(&k, &worker("a")?, 1_000, 0), "first claim")?;
    ensure!(
        first.cursor == Sequence::ZERO && first.pending.is_none(),
        "a new key has progress"
    );
    ensure!(
        first.lease.epoch == FencingEpoch::new(1),
        "the first epoch is {}",
        first.lease.epoch
    );
    ensure!(
        first.lease.expires_at == 1_000,
        "the lease expires at {}",
        first.lease.expires_at
    );
    let second = ok(
        progress.claim(&k, &worker("a")?, 1_000, 10),
        "re-claim by the owner",
    )?;
    ensure!(
        second.lease.epoch > first.lease.epoch,
        "a re-claim kept the epoch"
    );
    refused(
        progress.advance(&first.lease, Sequence::new(1), 20),
        is_stale,
        "the owner's older handle",
    )?;
    refused(
        progress.claim(&k, &worker("b")?, 1_000, 20),
        |error| matches!(error, ActivityError::LeaseHeld { until: 1_010 }),
        "a claim while another worker holds the lease",
    )?;
    let third = ok(
        progress.claim(&k, &worker("b")?, 1_000, 1_010),
        "a claim at expiry",
    )?;
    ensure!(
        third.lease.epoch == FencingEpoch::new(3),
        "the third epoch is {}",
        third.lease.epoch
    );
    Ok(())
}

fn stale_lease_writes_change_nothing<B: ActivityBackend>(backend: &B) -> Checked {
    let progress = backend.progress();
    let k = progress_key("statements", 1, "t")?;
    let old = ok(progress.claim(&k, &worker("a")?, 100, 0), "claim")?;
    refused(
        progress.save_pending(&old.lease, &pending(&k, 1, serde_json::json!(["a"])), 100),
        is_stale,
        "a write at the lease's expiry",
    )?;
    let new = ok(
        progress.claim(&k, &worker("b")?, 100, 150),
        "claim after expiry",
    )?;
    ok(
        progress.save_pending(&new.lease, &pending(&k, 1, serde_json::json!(["b"])), 160),
        "save by the new holder",
    )?;
    let before = ok(progress.inspect(&k), "inspect")?;
    let output = pending(&k, 1, serde_json::json!(["a"]));
    for (step, result) in [
        ("save", progress.save_pending(&old.lease, &output, 50)),
        ("replace", progress.replace_pending(&old.lease, &output, 50)),
        (
            "advance",
            progress.advance(&old.lease, Sequence::new(1), 50),
        ),
        ("release", progress.release(&old.lease, 50)),
    ] {
        refused(result, is_stale, &format!("{step} with a superseded lease"))?;
    }
    ensure!(
        ok(progress.inspect(&k), "inspect")? == before,
        "a stale write changed progress"
    );
    let other = backend.progress();
    ensure!(
        ok(other.inspect(&k), "inspect from another handle")? == before,
        "another handle sees other progress"
    );
    Ok(())
}

fn saved_output_wins_and_returns_with_the_claim<B: ActivityBackend>(backend: &B) -> Checked {
    let progress = backend.progress();
    let k = progress_key("statements", 1, "t")?;
    let claim = ok(progress.claim(&k, &worker("a")?, 1_000, 0), "claim")?;
    refused(
        progress.save_pending(&claim.lease, &pending(&k, 2, serde_json::json!(1)), 1),
        is_noncontiguous,
        "an output for the record after next",
    )?;
    let mut foreign = pending(&k, 1, serde_json::json!(1));
    foreign.work_id = progress_key("other", 1, "t")?.work_id(Sequence::new(1));
    refused(
        progress.save_pending(&claim.lease, &foreign, 1),
        is_mismatch,
        "an output with another key's work id",
    )?;
    ok(
        progress.save_pending(
            &claim.lease,
            &pending(&k, 1, serde_json::json!({"w": 1, "n": 5.0})),
            1,
        ),
        "save",
    )?;
    refused(
        progress.save_pending(
            &claim.lease,
            &pending(&k, 1, serde_json::json!({"w": 2})),
            2,
        ),
        is_mismatch,
        "a second save for the same record",
    )?;
    let again = ok(
        progress.claim(&k, &worker("b")?, 1_000, 2_000),
        "claim after expiry",
    )?;
    let saved = again.pending.as_ref().map(|saved| saved.output.clone());
    ensure!(
        saved == Some(serde_json::json!({"w": 1, "n": 5})),
        "the claim returned {saved:?}, not the saved output"
    );
    ensure!(
        again.pending.as_ref().map(|saved| &saved.work_id) == Some(&k.work_id(Sequence::new(1))),
        "the saved output lost its work id"
    );
    refused(
        progress.advance(&again.lease, Sequence::new(2), 2_001),
        is_noncontiguous,
        "an advance by two records",
    )?;
    ok(
        progress.advance(&again.lease, Sequence::new(1), 2_002),
        "advance",
    )?;
    let view = ok(progress.inspect(&k), "inspect")?;
    let Some(view) = view else {
        return Err(crate::fixtures::Failure(
            "no progress after advancing".to_owned(),
        ));
    };
    ensure!(
        view.cursor == Sequence::new(1),
        "the cursor is {}",
        view.cursor
    );
    ensure!(view.pending.is_none(), "advancing kept the pending output");
    ensure!(
        view.last_advance_at == Some(2_002),
        "last advance at {:?}",
        view.last_advance_at
    );
    ensure!(
        view.epoch == FencingEpoch::new(2),
        "the view's epoch is {}",
        view.epoch
    );
    ensure!(
        view.lease == Some((worker("b")?, 3_000)),
        "the view's lease is {:?}",
        view.lease
    );
    ok(progress.release(&again.lease, 2_003), "release")?;
    let released = ok(progress.inspect(&k), "inspect")?.and_then(|view| view.lease);
    ensure!(
        released.is_none(),
        "a released lease is still shown: {released:?}"
    );
    refused(
        progress.advance(&again.lease, Sequence::new(2), 2_004),
        is_stale,
        "an advance after release",
    )?;
    let next = ok(
        progress.claim(&k, &worker("c")?, 1_000, 2_005),
        "a claim after release",
    )?;
    ensure!(
        next.cursor == Sequence::new(1) && next.pending.is_none(),
        "the claim after release lost progress"
    );
    Ok(())
}

fn replace_pending_needs_a_saved_output<B: ActivityBackend>(backend: &B) -> Checked {
    let progress = backend.progress();
    let k = progress_key("statements", 1, "t")?;
    let claim = ok(progress.claim(&k, &worker("a")?, 1_000, 0), "claim")?;
    refused(
        progress.replace_pending(&claim.lease, &pending(&k, 1, serde_json::json!(1)), 1),
        is_mismatch,
        "a replacement with nothing saved",
    )?;
    ok(
        progress.save_pending(&claim.lease, &pending(&k, 1, serde_json::json!(1)), 1),
        "save",
    )?;
    refused(
        progress.replace_pending(&claim.lease, &pending(&k, 2, serde_json::json!(1)), 1),
        is_mismatch,
        "a replacement for another record",
    )?;
    ok(
        progress.replace_pending(&claim.lease, &pending(&k, 1, serde_json::json!(2)), 2),
        "replace",
    )?;
    let saved = ok(progress.inspect(&k), "inspect")?
        .and_then(|view| view.pending)
        .map(|p| p.output);
    ensure!(
        saved == Some(serde_json::json!(2)),
        "after replacing, the output is {saved:?}"
    );
    let newer = ok(
        progress.claim(&k, &worker("b")?, 1_000, 2_000),
        "claim after expiry",
    )?;
    refused(
        progress.replace_pending(&claim.lease, &pending(&k, 1, serde_json::json!(3)), 2_001),
        is_stale,
        "a replacement with a superseded lease",
    )?;
    let handed = newer.pending.map(|saved| saved.output);
    ensure!(
        handed == Some(serde_json::json!(2)),
        "the newer claim got {handed:?}"
    );
    let kept = ok(progress.inspect(&k), "inspect")?
        .and_then(|view| view.pending)
        .map(|p| p.output);
    ensure!(
        kept == Some(serde_json::json!(2)),
        "a stale replacement changed the output to {kept:?}"
    );
    Ok(())
}

fn oversized_progress_is_refused<B: ActivityBackend>(backend: &B) -> Checked {
    let progress = backend.progress();
    let k = progress_key("statements", 1, "t")?;
    let claim = ok(progress.claim(&k, &worker("a")?, 1_000, 0), "claim")?;
    ok(
        progress.save_pending(&claim.lease, &pending(&k, 1, serde_json::json!("small")), 1),
        "save",
    )?;
    ok(
        progress.advance(&claim.lease, Sequence::new(1), 2),
        "advance",
    )?;
    let before = ok(progress.inspect(&k), "inspect")?;
    // With its quotes the JSON string is one UTF-16 unit over the limit: the astral character counts two.
    let huge = format!("{}\u{1F600}", "x".repeat(MAX_PROGRESS_UTF16_UNITS - 3));
    refused(
        progress.save_pending(&claim.lease, &pending(&k, 2, serde_json::json!(huge)), 3),
        |error| matches!(error, ActivityError::TooLarge { .. }),
        "an output one unit over the limit",
    )?;
    ensure!(
        ok(progress.inspect(&k), "inspect")? == before,
        "a refused output changed progress"
    );
    let fits = "x".repeat(MAX_PROGRESS_UTF16_UNITS - 2);
    ok(
        progress.save_pending(&claim.lease, &pending(&k, 2, serde_json::json!(fits)), 3),
        "an output at the limit",
    )?;
    Ok(())
}

fn inputs_out_of_range_are_invalid<B: ActivityBackend>(backend: &B) -> Checked {
    let progress = backend.progress();
    let k = progress_key("statements", 1, "t")?;
    let invalid = |error: &ActivityError| matches!(error, ActivityError::InvalidInput { .. });
    refused(
        progress.claim(&k, &worker("a")?, 0, 0),
        invalid,
        "a claim of a zero-length lease",
    )?;
    ensure!(
        ok(progress.inspect(&k), "inspect")?.is_none(),
        "a refused claim left progress"
    );
    let claim = ok(progress.claim(&k, &worker("a")?, 1_000, 0), "claim")?;
    refused(
        progress.advance(&claim.lease, Sequence::ZERO, 1),
        invalid,
        "an advance to zero",
    )?;
    refused(progress.inspect_all(0), invalid, "inspecting zero rows")?;
    Ok(())
}

fn inspect_all_lists_keys_in_order<B: ActivityBackend>(backend: &B) -> Checked {
    let progress = backend.progress();
    let keys = [
        progress_key("facts", 2, "a")?,
        progress_key("statements", 1, "b")?,
        progress_key("facts", 1, "b")?,
        progress_key("facts", 1, "a")?,
    ];
    for key in &keys {
        ok(progress.claim(key, &worker("w")?, 1_000, 0), "claim")?;
    }
    let listed: Vec<_> = ok(progress.inspect_all(10), "inspect all")?
        .into_iter()
        .map(|view| view.key)
        .collect();
    let expected = [
        keys[3].clone(),
        keys[2].clone(),
        keys[0].clone(),
        keys[1].clone(),
    ];
    ensure!(listed == expected, "inspect_all listed {listed:?}");
    let two = ok(progress.inspect_all(2), "inspect two")?;
    ensure!(
        two.len() == 2 && two[0].key == expected[0],
        "a limited listing is not its prefix"
    );
    Ok(())
}

fn concurrent_claims_leave_exactly_one_holder<B: ActivityBackend>(backend: &B) -> Checked {
    const CLAIMANTS: usize = 6;
    let k = progress_key("statements", 1, "raced")?;
    let start = Barrier::new(CLAIMANTS);
    let stores: Vec<B::Progress> = (0..CLAIMANTS).map(|_| backend.progress()).collect();
    let owners = (0..CLAIMANTS)
        .map(|index| worker(&format!("w{index}")))
        .collect::<Result<Vec<_>, _>>()?;
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = stores
            .iter()
            .zip(&owners)
            .map(|(progress, owner)| {
                let (k, start) = (&k, &start);
                scope.spawn(move || {
                    start.wait();
                    progress.claim(k, owner, 10_000, 100)
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
    let mut winners = Vec::new();
    for result in results {
        match result {
            Ok(claim) => winners.push(claim),
            Err(ActivityError::LeaseHeld { until: 10_100 }) => {}
            Err(error) => {
                return Err(crate::fixtures::Failure(format!(
                    "a claimant got {error:?}"
                )));
            }
        }
    }
    ensure!(
        winners.len() == 1,
        "{} claimants hold the lease",
        winners.len()
    );
    let holder = winners.remove(0).lease;
    ensure!(
        holder.epoch == FencingEpoch::new(1),
        "the winner's epoch is {}",
        holder.epoch
    );
    let progress = backend.progress();
    ok(
        progress.save_pending(&holder, &pending(&k, 1, serde_json::json!("mine")), 200),
        "save",
    )?;
    let next = ok(
        progress.claim(&k, &worker("late")?, 10_000, 20_000),
        "claim after expiry",
    )?;
    ensure!(
        next.lease.epoch == FencingEpoch::new(2),
        "the next epoch is {}",
        next.lease.epoch
    );
    let before = ok(progress.inspect(&k), "inspect")?;
    refused(
        progress.advance(&holder, Sequence::new(1), 200),
        is_stale,
        "the superseded holder's advance",
    )?;
    ensure!(
        ok(progress.inspect(&k), "inspect")? == before,
        "a superseded advance changed progress"
    );
    ok(
        progress.advance(&next.lease, Sequence::new(1), 20_001),
        "the new holder's advance",
    )?;
    Ok(())
}

/// A note of `kept` contributions and the given parts dropped by reason.
fn note(kept: u64, dropped: &[(&str, u64)]) -> ExtractionNote {
    ExtractionNote {
        kept,
        dropped: dropped
            .iter()
            .map(|(reason, count)| ((*reason).to_owned(), *count))
            .collect(),
        corrections: CorrectionCounts::default(),
        model: ModelUsage::default(),
    }
}

/// [`note`] with what a model's call cost.
fn model_note(kept: u64, calls: u64, prompt_tokens: u64, fallbacks: u64) -> ExtractionNote {
    ExtractionNote {
        model: ModelUsage {
            calls,
            prompt_tokens,
            completion_tokens: calls * 7,
            latency_ms: calls * 11,
            fallbacks,
        },
        ..note(kept, &[])
    }
}

/// [`note`] with correcting statements linked and refused.
fn correcting_note(kept: u64, linked: u64, refused: u64) -> ExtractionNote {
    ExtractionNote {
        corrections: CorrectionCounts { linked, refused },
        ..note(kept, &[])
    }
}

fn extraction_notes_count_each_record_once<B: ActivityBackend>(backend: &B) -> Checked {
    let progress = backend.progress();
    let totals = ok(progress.extraction_totals(), "totals")?;
    ensure!(
        totals == ExtractionTotals::default(),
        "a fresh store's totals are {totals:?}"
    );
    let first = progress_key("statements", 1, "t")?;
    let other_thread = progress_key("statements", 1, "u")?;
    let other_version = progress_key("statements", 2, "t")?;
    let notes = [
        (&first, 1, note(2, &[("duplicate", 1)])),
        // The same record noted again, as after a crash between the note and the advance: ignored,
        // even though the re-extraction yielded something else.
        (&first, 1, note(5, &[("other", 3)])),
        (&first, 2, note(1, &[("duplicate", 2), ("too-long", 1)])),
        (&other_thread, 1, note(0, &[("duplicate", 1)])),
        (&other_version, 1, note(3, &[])),
        (&other_version, 2, correcting_note(1, 1, 0)),
        (&other_version, 3, correcting_note(0, 0, 2)),
        // Ignored like any note of a record noted before.
        (&other_version, 3, correcting_note(0, 5, 5)),
        (&other_thread, 2, model_note(2, 1, 300, 0)),
        (&other_thread, 3, model_note(1, 2, 500, 1)),
        (&other_thread, 3, model_note(9, 9, 9, 9)),
    ];
    for (key, sequence, extracted) in &notes {
        ok(
            progress.note_extraction(key, Sequence::new(*sequence), extracted),
            "note an extraction",
        )?;
    }
    let expected = ExtractionTotals {
        records: 8,
        kept: 10,
        dropped: BTreeMap::from([("duplicate".to_owned(), 4), ("too-long".to_owned(), 1)]),
        corrections: CorrectionCounts {
            linked: 1,
            refused: 2,
        },
        model: ModelUsage {
            calls: 3,
            prompt_tokens: 800,
            completion_tokens: 21,
            latency_ms: 33,
            fallbacks: 1,
        },
    };
    let totals = ok(progress.extraction_totals(), "totals")?;
    ensure!(
        totals == expected,
        "the totals are {totals:?}, expected {expected:?}"
    );
    let (key, sequence, extracted) = &notes[2];
    ok(
        backend
            .progress()
            .note_extraction(key, Sequence::new(*sequence), extracted),
        "note the same record from another handle",
    )?;
    let seen = ok(backend.progress().extraction_totals(), "totals")?;
    ensure!(
        seen == expected,
        "after a note repeated from another handle the totals are {seen:?}"
    );
    Ok(())
}

fn invalid_extraction_notes_are_refused<B: ActivityBackend>(backend: &B) -> Checked {
    let progress = backend.progress();
    let k = progress_key("statements", 1, "t")?;
    ok(
        progress.note_extraction(&k, Sequence::new(1), &note(1, &[("duplicate", 1)])),
        "note an extraction",
    )?;
    let before = ok(progress.extraction_totals(), "totals")?;
    let too_many: Vec<String> = (0..=MAX_NOTE_REASONS)
        .map(|index| format!("reason-{index}"))
        .collect();
    let too_many = ExtractionNote {
        kept: 1,
        dropped: too_many.into_iter().map(|reason| (reason, 1)).collect(),
        ..note(1, &[])
    };
    refused(
        progress.note_extraction(&k, Sequence::new(2), &too_many),
        |error| matches!(error, ActivityError::TooLarge { .. }),
        "a note of one reason too many",
    )?;
    let long = "r".repeat(MAX_NOTE_REASON_BYTES + 1);
    for (bad, what) in [
        (note(1, &[("", 1)]), "a note with an empty reason"),
        (
            note(1, &[(long.as_str(), 1)]),
            "a note with a reason one byte too long",
        ),
        (
            note(1, &[("bad\nreason", 1)]),
            "a note with a newline in a reason",
        ),
    ] {
        refused(
            progress.note_extraction(&k, Sequence::new(2), &bad),
            |error| matches!(error, ActivityError::InvalidInput { .. }),
            what,
        )?;
    }
    let after = ok(progress.extraction_totals(), "totals")?;
    ensure!(
        after == before,
        "refused notes changed the totals from {before:?} to {after:?}"
    );
    // A refused note does not take the record's place: a valid note of it still counts.
    ok(
        progress.note_extraction(&k, Sequence::new(2), &note(2, &[])),
        "note the record a refused note named",
    )?;
    let totals = ok(progress.extraction_totals(), "totals")?;
    ensure!(
        totals.records == before.records + 1 && totals.kept == before.kept + 2,
        "a valid note after refused ones of the same record left the totals at {totals:?}"
    );
    Ok(())
}
