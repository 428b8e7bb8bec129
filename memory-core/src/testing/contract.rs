//! The contract checks: one async function per rule of SPEC §2.2, each run on a fresh store.

use std::future::Future;

use crate::canonical::{to_canonical_string, utf16_len};
use crate::document::{EpochMillis, MemoryContent, MemoryKey, Withdrawal};
use crate::error::{ErrorKind, MemoryError};
use crate::ids::{DocumentId, OperationId, Revision};
use crate::write::{
    MAX_CANONICAL_UTF16_UNITS, MAX_LOCATOR_BYTES, MemoryReceipt, MemoryWrite, PreparedWrite,
    WriteKind, WritePlan,
};

use crate::ports::{MemoryReader, MemoryWriter};

use super::fixtures::{
    Brief, Checked, Failure, SUITE_LOCATOR, Store, SuiteTeams, SuiteUsers, SuiteUsersV2, apply_ok,
    apply_refused, ensure, key, namespace, put, read, receipt_bytes, scopes, withdraw,
};
use super::report::ContractReport;
use super::tamper::ReceiptTamper;

/// Every rule [`run_contract_suite`] checks, in the order it checks them.
pub const CONTRACT_RULES: &[&str] = &[
    "put-without-expected-revision-creates",
    "create-of-existing-document-conflicts",
    "expected-revision-on-missing-document-conflicts",
    "replacement-records-predecessor",
    "stale-revision-conflicts-and-winner-stays",
    "withdrawal-is-terminal",
    "withdrawal-checks-document-and-revision",
    "replay-returns-original-receipt",
    "replay-after-later-edit-keeps-the-edit",
    "replay-after-withdrawal-keeps-the-withdrawal",
    "reused-operation-id-with-other-command-conflicts",
    "namespaces-are-independent",
    "definitions-never-collide",
    "empty-scope-list-grants-no-access",
    "read-many-keeps-order",
    "refused-input-stores-nothing",
    "command-over-size-limit-refused",
    "receipt-at-size-limit-accepted",
    "receipt-over-size-limit-refused",
];

/// The corrupt-receipt rules, which only [`run_contract_suite_with_tamper`] checks: a replayed command
/// whose stored receipt disagrees with it in any of these fields is reported as corrupt.
pub const TAMPER_RULES: &[&str] = &[
    "corrupt-receipt-predecessor",
    "corrupt-receipt-kind",
    "corrupt-receipt-content",
    "corrupt-receipt-locator",
    "corrupt-receipt-scopes",
    "corrupt-receipt-reason",
    "corrupt-receipt-key",
    "corrupt-receipt-revision",
];

/// Runs every rule of [`CONTRACT_RULES`], each on a fresh, empty store from `factory`; the rules of
/// [`TAMPER_RULES`] are reported as skipped.
pub async fn run_contract_suite<S, F, Fut>(mut factory: F) -> ContractReport
where
    S: MemoryReader + MemoryWriter,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    let mut report = ContractReport::default();
    run_store_rules(&mut factory, &|_| true, &mut report).await;
    report.skipped.extend_from_slice(TAMPER_RULES);
    report
}

/// Runs every rule of [`CONTRACT_RULES`] and [`TAMPER_RULES`], each on a fresh, empty store from
/// `factory`. Wrap a store and a separate tamper with [`super::TamperableStore`] when the store itself
/// does not implement [`ReceiptTamper`].
pub async fn run_contract_suite_with_tamper<S, F, Fut>(mut factory: F) -> ContractReport
where
    S: MemoryReader + MemoryWriter + ReceiptTamper,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    let mut report = ContractReport::default();
    run_store_rules(&mut factory, &|_| true, &mut report).await;
    run_tamper_rules(&mut factory, &|_| true, &mut report).await;
    report
}

/// Runs only the named rules (of [`CONTRACT_RULES`] and [`TAMPER_RULES`]), for narrowing down a failure
/// or for testing the suite itself; a name that is no rule is reported as a failure.
pub async fn run_contract_rules<S, F, Fut>(mut factory: F, rules: &[&str]) -> ContractReport
where
    S: MemoryReader + MemoryWriter + ReceiptTamper,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    let mut report = ContractReport::default();
    let selected = |rule: &str| rules.contains(&rule);
    run_store_rules(&mut factory, &selected, &mut report).await;
    run_tamper_rules(&mut factory, &selected, &mut report).await;
    for rule in rules {
        if !CONTRACT_RULES.contains(rule) && !TAMPER_RULES.contains(rule) {
            report.record(
                "unknown-rule",
                Err(format!("no contract rule is named `{rule}`")),
            );
        }
    }
    report
}

macro_rules! check {
    ($report:expr, $factory:expr, $selected:expr, $rule:literal, $check:expr) => {{
        if $selected($rule) {
            let store = ($factory)().await;
            let result = $check(&store).await;
            $report.record($rule, result.map_err(|failure: Failure| failure.0));
        }
    }};
}

async fn run_store_rules<S, F, Fut>(
    factory: &mut F,
    selected: &dyn Fn(&str) -> bool,
    report: &mut ContractReport,
) where
    S: Store,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    check!(
        report,
        factory,
        selected,
        "put-without-expected-revision-creates",
        put_without_expected_revision_creates
    );
    check!(
        report,
        factory,
        selected,
        "create-of-existing-document-conflicts",
        create_of_existing_document_conflicts
    );
    check!(
        report,
        factory,
        selected,
        "expected-revision-on-missing-document-conflicts",
        expected_revision_on_missing_document_conflicts
    );
    check!(
        report,
        factory,
        selected,
        "replacement-records-predecessor",
        replacement_records_predecessor
    );
    check!(
        report,
        factory,
        selected,
        "stale-revision-conflicts-and-winner-stays",
        stale_revision_conflicts_and_winner_stays
    );
    check!(
        report,
        factory,
        selected,
        "withdrawal-is-terminal",
        withdrawal_is_terminal
    );
    check!(
        report,
        factory,
        selected,
        "withdrawal-checks-document-and-revision",
        withdrawal_checks_document_and_revision
    );
    check!(
        report,
        factory,
        selected,
        "replay-returns-original-receipt",
        replay_returns_original_receipt
    );
    check!(
        report,
        factory,
        selected,
        "replay-after-later-edit-keeps-the-edit",
        replay_after_later_edit_keeps_the_edit
    );
    check!(
        report,
        factory,
        selected,
        "replay-after-withdrawal-keeps-the-withdrawal",
        replay_after_withdrawal_keeps_the_withdrawal
    );
    check!(
        report,
        factory,
        selected,
        "reused-operation-id-with-other-command-conflicts",
        reused_operation_id_with_other_command_conflicts
    );
    check!(
        report,
        factory,
        selected,
        "namespaces-are-independent",
        namespaces_are_independent
    );
    check!(
        report,
        factory,
        selected,
        "definitions-never-collide",
        definitions_never_collide
    );
    check!(
        report,
        factory,
        selected,
        "empty-scope-list-grants-no-access",
        empty_scope_list_grants_no_access
    );
    check!(
        report,
        factory,
        selected,
        "read-many-keeps-order",
        read_many_keeps_order
    );
    check!(
        report,
        factory,
        selected,
        "refused-input-stores-nothing",
        refused_input_stores_nothing
    );
    check!(
        report,
        factory,
        selected,
        "command-over-size-limit-refused",
        command_over_size_limit_refused
    );
    check!(
        report,
        factory,
        selected,
        "receipt-at-size-limit-accepted",
        receipt_at_size_limit_accepted
    );
    check!(
        report,
        factory,
        selected,
        "receipt-over-size-limit-refused",
        receipt_over_size_limit_refused
    );
}

async fn run_tamper_rules<S, F, Fut>(
    factory: &mut F,
    selected: &dyn Fn(&str) -> bool,
    report: &mut ContractReport,
) where
    S: Store + ReceiptTamper,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    check!(
        report,
        factory,
        selected,
        "corrupt-receipt-predecessor",
        corrupt_receipt_predecessor
    );
    check!(
        report,
        factory,
        selected,
        "corrupt-receipt-kind",
        corrupt_receipt_kind
    );
    check!(
        report,
        factory,
        selected,
        "corrupt-receipt-content",
        corrupt_receipt_content
    );
    check!(
        report,
        factory,
        selected,
        "corrupt-receipt-locator",
        corrupt_receipt_locator
    );
    check!(
        report,
        factory,
        selected,
        "corrupt-receipt-scopes",
        corrupt_receipt_scopes
    );
    check!(
        report,
        factory,
        selected,
        "corrupt-receipt-reason",
        corrupt_receipt_reason
    );
    check!(
        report,
        factory,
        selected,
        "corrupt-receipt-key",
        corrupt_receipt_key
    );
    check!(
        report,
        factory,
        selected,
        "corrupt-receipt-revision",
        corrupt_receipt_revision
    );
}

/// The key most checks write to.
fn main_key() -> Result<MemoryKey, Failure> {
    key(&namespace::<SuiteUsers>("tenant-a", "user-1")?, "doc-1")
}

/// Creates the main document and returns its key and revision.
async fn create<S: Store>(store: &S, text: &str) -> Result<(MemoryKey, Revision), Failure> {
    let key = main_key()?;
    let outcome = apply_ok(
        store,
        put(&key, "op-create", None, text, &["reader"])?,
        "create",
    )
    .await?;
    Ok((key, outcome.receipt.document.revision))
}

async fn put_without_expected_revision_creates<S: Store>(store: &S) -> Checked {
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

async fn create_of_existing_document_conflicts<S: Store>(store: &S) -> Checked {
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

async fn expected_revision_on_missing_document_conflicts<S: Store>(store: &S) -> Checked {
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

async fn replacement_records_predecessor<S: Store>(store: &S) -> Checked {
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

async fn stale_revision_conflicts_and_winner_stays<S: Store>(store: &S) -> Checked {
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

async fn withdrawal_is_terminal<S: Store>(store: &S) -> Checked {
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
                reason: "asked to forget".to_owned()
            }),
        "the withdrawal receipt does not carry the reason"
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

async fn withdrawal_checks_document_and_revision<S: Store>(store: &S) -> Checked {
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
async fn expect_replay<S: Store>(
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

async fn replay_returns_original_receipt<S: Store>(store: &S) -> Checked {
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

async fn replay_after_later_edit_keeps_the_edit<S: Store>(store: &S) -> Checked {
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

async fn replay_after_withdrawal_keeps_the_withdrawal<S: Store>(store: &S) -> Checked {
    let key = main_key()?;
    let create_write = put(&key, "op-create", None, "v1", &["reader"])?;
    let created = apply_ok(store, create_write.clone(), "create")
        .await?
        .receipt;
    let withdraw_write = withdraw(&key, "op-withdraw", &created.document.revision, "forget")?;
    let withdrawn = apply_ok(store, withdraw_write.clone(), "withdrawal")
        .await?
        .receipt;
    expect_replay(
        store,
        create_write,
        &created,
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

async fn reused_operation_id_with_other_command_conflicts<S: Store>(store: &S) -> Checked {
    let key = main_key()?;
    let original_write = put(&key, "op-shared", None, "original", &["reader"])?;
    let original = apply_ok(store, original_write.clone(), "create")
        .await?
        .receipt;
    let other_key = MemoryKey {
        namespace: key.namespace.clone(),
        id: DocumentId::new("doc-2")?,
    };
    for (step, write) in [
        (
            "same key, other text",
            put(&key, "op-shared", None, "changed", &["reader"])?,
        ),
        (
            "same key, other scopes",
            put(&key, "op-shared", None, "original", &["other"])?,
        ),
        (
            "same key, an expected revision",
            put(
                &key,
                "op-shared",
                Some(&original.document.revision),
                "original",
                &["reader"],
            )?,
        ),
        (
            "other key",
            put(&other_key, "op-shared", None, "original", &["reader"])?,
        ),
        (
            "a withdrawal",
            withdraw(&key, "op-shared", &original.document.revision, "forget")?,
        ),
    ] {
        let error = apply_refused(store, write, ErrorKind::OperationConflict, step).await?;
        ensure!(
            matches!(&error, MemoryError::OperationConflict { operation_id } if operation_id.as_str() == "op-shared"),
            "{step}: the error does not name the reused operation id: {error:?}"
        );
    }
    let stored = read(store, &key).await?;
    ensure!(
        stored.as_ref() == Some(&original.document),
        "a conflicting reuse changed the document: {}",
        Brief(stored.as_ref())
    );
    let other = read(store, &other_key).await?;
    ensure!(
        other.is_none(),
        "a conflicting reuse created {}",
        Brief(other.as_ref())
    );
    expect_replay(
        store,
        original_write,
        &original,
        "retry of the original command",
    )
    .await
}

async fn namespaces_are_independent<S: Store>(store: &S) -> Checked {
    let first_key = key(&namespace::<SuiteUsers>("tenant-a", "user-1")?, "doc-1")?;
    let second_key = key(&namespace::<SuiteUsers>("tenant-a", "user-2")?, "doc-1")?;
    ensure!(
        first_key.namespace != second_key.namespace,
        "two identities share an address"
    );
    let first_write = put(&first_key, "op-same", None, "first namespace", &["reader"])?;
    let second_write = put(
        &second_key,
        "op-same",
        None,
        "second namespace",
        &["reader"],
    )?;
    let first = apply_ok(store, first_write.clone(), "create in the first namespace").await?;
    let second = apply_ok(
        store,
        second_write.clone(),
        "same id and operation id in the second namespace",
    )
    .await?;
    ensure!(
        !second.replayed,
        "the second namespace's write was taken as a replay of the first's"
    );
    apply_ok(
        store,
        withdraw(
            &first_key,
            "op-withdraw",
            &first.receipt.document.revision,
            "forget",
        )?,
        "withdrawal in the first namespace",
    )
    .await?;
    let stored = read(store, &second_key).await?;
    ensure!(
        stored.as_ref() == Some(&second.receipt.document),
        "the first namespace's withdrawal reached the second: {}",
        Brief(stored.as_ref())
    );
    let edited = apply_ok(
        store,
        put(
            &second_key,
            "op-withdraw",
            Some(&second.receipt.document.revision),
            "edited",
            &["reader"],
        )?,
        "reuse of the first namespace's withdrawal operation id in the second",
    )
    .await?;
    ensure!(
        !edited.replayed,
        "an operation id of the first namespace was replayed in the second"
    );
    expect_replay(
        store,
        first_write,
        &first.receipt,
        "retry in the first namespace",
    )
    .await?;
    Ok(())
}

async fn definitions_never_collide<S: Store>(store: &S) -> Checked {
    let users = namespace::<SuiteUsers>("tenant-a", "user-1")?;
    let users_v2 = namespace::<SuiteUsersV2>("tenant-a", "user-1")?;
    let teams = namespace::<SuiteTeams>("tenant-a", "user-1")?;
    let addresses = [users.address(), users_v2.address(), teams.address()];
    for (index, address) in addresses.iter().enumerate() {
        ensure!(
            !addresses[index + 1..].contains(address),
            "two definitions share the address {address:?}"
        );
    }
    let keys = [
        key(&users, "doc-1")?,
        key(&users_v2, "doc-1")?,
        key(&teams, "doc-1")?,
    ];
    let mut written = Vec::new();
    for (index, key) in keys.iter().enumerate() {
        let outcome = apply_ok(
            store,
            put(
                key,
                "op-same",
                None,
                &format!("definition {index}"),
                &["reader"],
            )?,
            "same identity, id and operation id under another definition",
        )
        .await?;
        ensure!(
            !outcome.replayed,
            "definition {index}'s write was taken as a replay"
        );
        written.push(outcome.receipt.document);
    }
    let stored = store.read_many(&keys).await?;
    ensure!(
        stored
            .iter()
            .zip(&written)
            .all(|(stored, written)| stored.as_ref() == Some(written)),
        "documents of different definitions overwrote each other"
    );
    Ok(())
}

async fn empty_scope_list_grants_no_access<S: Store>(store: &S) -> Checked {
    let users = namespace::<SuiteUsers>("tenant-a", "user-1")?;
    let other = namespace::<SuiteUsers>("tenant-a", "user-2")?;
    let hidden_key = key(&users, "hidden")?;
    apply_ok(
        store,
        put(&hidden_key, "op-hidden", None, "no scopes", &[])?,
        "put with no scopes",
    )
    .await?;
    let Some(hidden) = read(store, &hidden_key).await? else {
        return Err(Failure(
            "a document with no scopes cannot be read by key".to_owned(),
        ));
    };
    ensure!(
        hidden.scopes.is_empty(),
        "the store granted scopes nobody asked for"
    );
    for scope in scopes(&["reader", "writer", "admin", "*"])? {
        ensure!(
            !hidden.is_visible_to(&users.access(scope.clone())),
            "a document with no scopes is visible to scope {}",
            scope.as_str()
        );
    }
    let shared_key = key(&users, "shared")?;
    let created = apply_ok(
        store,
        put(&shared_key, "op-shared", None, "reader only", &["reader"])?,
        "put",
    )
    .await?;
    let Some(shared) = read(store, &shared_key).await? else {
        return Err(Failure(
            "a scoped document cannot be read by key".to_owned(),
        ));
    };
    let reader = scopes(&["reader"])?.remove(0);
    let writer = scopes(&["writer"])?.remove(0);
    ensure!(
        shared.is_visible_to(&users.access(reader.clone())),
        "a listed scope cannot see its document"
    );
    ensure!(
        !shared.is_visible_to(&users.access(writer)),
        "an unlisted scope sees the document"
    );
    ensure!(
        !shared.is_visible_to(&other.access(reader.clone())),
        "the scope of another namespace sees the document"
    );
    let withdrawn = apply_ok(
        store,
        withdraw(
            &shared_key,
            "op-withdraw",
            &created.receipt.document.revision,
            "forget",
        )?,
        "withdrawal",
    )
    .await?;
    ensure!(
        !withdrawn
            .receipt
            .document
            .is_visible_to(&users.access(reader)),
        "a withdrawn document is visible to its former scope"
    );
    Ok(())
}

async fn read_many_keeps_order<S: Store>(store: &S) -> Checked {
    let users = namespace::<SuiteUsers>("tenant-a", "user-1")?;
    let [first, second, missing] = [
        key(&users, "first")?,
        key(&users, "second")?,
        key(&users, "missing")?,
    ];
    let first_document = apply_ok(
        store,
        put(&first, "op-1", None, "one", &["reader"])?,
        "put first",
    )
    .await?
    .receipt
    .document;
    let second_revision = apply_ok(
        store,
        put(&second, "op-2", None, "two", &["reader"])?,
        "put second",
    )
    .await?
    .receipt
    .document
    .revision;
    apply_ok(
        store,
        withdraw(&second, "op-3", &second_revision, "forget")?,
        "withdraw second",
    )
    .await?;
    let answer = store
        .read_many(&[missing.clone(), first.clone(), second, first])
        .await?;
    ensure!(
        answer
            == vec![
                None,
                Some(first_document.clone()),
                None,
                Some(first_document)
            ],
        "read_many answered {:?} for [missing, first, withdrawn, first]",
        answer
            .iter()
            .map(|document| document.is_some())
            .collect::<Vec<_>>()
    );
    ensure!(
        store.read_many(&[]).await?.is_empty(),
        "read_many of no keys returned documents"
    );
    Ok(())
}

async fn refused_input_stores_nothing<S: Store>(store: &S) -> Checked {
    let key = main_key()?;
    let duplicate_scopes = put(&key, "op-1", None, "text", &["reader", "reader"])?;
    apply_refused(
        store,
        duplicate_scopes,
        ErrorKind::InvalidInput,
        "put listing a scope twice",
    )
    .await?;
    let mut long_locator = put(&key, "op-1", None, "text", &["reader"])?;
    if let MemoryWrite::Put { locator, .. } = &mut long_locator {
        *locator = "l".repeat(MAX_LOCATOR_BYTES + 1);
    }
    let error = apply_refused(
        store,
        long_locator,
        ErrorKind::TooLarge,
        "put with an oversized locator",
    )
    .await?;
    ensure!(
        matches!(&error, MemoryError::TooLarge { limit, .. } if limit.contains("locator")),
        "the error does not name the locator limit: {error}"
    );
    let stored = read(store, &key).await?;
    ensure!(
        stored.is_none(),
        "refused input stored {}",
        Brief(stored.as_ref())
    );
    let outcome = apply_ok(
        store,
        put(&key, "op-1", None, "text", &["reader"])?,
        "valid put with the same operation id",
    )
    .await?;
    ensure!(!outcome.replayed, "refused input left a receipt behind");
    Ok(())
}

/// A put whose text is `units` UTF-16 code units: characters outside the Basic Multilingual Plane (two
/// units, four UTF-8 bytes each), plus one ASCII letter when `units` is odd.
fn sized_put(key: &MemoryKey, operation_id: &str, units: usize) -> Result<MemoryWrite, Failure> {
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

fn canonical_units<T: serde::Serialize>(value: &T) -> Result<usize, Failure> {
    to_canonical_string(value)
        .map(|text| utf16_len(&text))
        .map_err(|error| Failure(format!("not canonicalizable: {error}")))
}

/// The canonical size of the receipt a put of `sized_put(key, operation_id, 0)` gets at time `now`;
/// every text unit adds exactly one unit to it, since the characters used need no escaping and the
/// digest and revision have fixed lengths.
fn receipt_overhead(
    key: &MemoryKey,
    operation_id: &str,
    now: EpochMillis,
) -> Result<usize, Failure> {
    let prepared = PreparedWrite::prepare(sized_put(key, operation_id, 0)?)?;
    match prepared.plan(None, None, now)? {
        WritePlan::Commit { receipt, .. } => canonical_units(&receipt),
        WritePlan::Replay(_) => Err(Failure(
            "a plan without a stored receipt replayed".to_owned(),
        )),
    }
}

/// The time the store stamps on writes, learned from a small put (the receipt holds it, so its number
/// of digits moves the size boundary).
async fn store_time<S: Store>(
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

async fn command_over_size_limit_refused<S: Store>(store: &S) -> Checked {
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

async fn receipt_at_size_limit_accepted<S: Store>(store: &S) -> Checked {
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

async fn receipt_over_size_limit_refused<S: Store>(store: &S) -> Checked {
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

async fn corrupt_receipt_predecessor<S: Store + ReceiptTamper>(store: &S) -> Checked {
    expect_corrupt_after(store, "put", Target::Replacement, |receipt| {
        receipt.document.predecessor = None
    })
    .await?;
    expect_corrupt_after(store, "withdraw", Target::Withdrawal, |receipt| {
        receipt.document.predecessor = None
    })
    .await
}

async fn corrupt_receipt_kind<S: Store + ReceiptTamper>(store: &S) -> Checked {
    expect_corrupt_after(store, "kind", Target::Replacement, |receipt| {
        receipt.kind = WriteKind::Withdraw
    })
    .await?;
    expect_corrupt_after(store, "marker", Target::Replacement, |receipt| {
        receipt.document.withdrawn = Some(Withdrawal {
            reason: "forged".to_owned(),
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

async fn corrupt_receipt_content<S: Store + ReceiptTamper>(store: &S) -> Checked {
    expect_corrupt_after(store, "doc", Target::Replacement, |receipt| {
        receipt
            .document
            .content
            .text
            .push_str(" (edited behind the store's back)");
    })
    .await
}

async fn corrupt_receipt_locator<S: Store + ReceiptTamper>(store: &S) -> Checked {
    expect_corrupt_after(store, "doc", Target::Replacement, |receipt| {
        receipt.document.locator = "contract://forged".to_owned();
    })
    .await
}

async fn corrupt_receipt_scopes<S: Store + ReceiptTamper>(store: &S) -> Checked {
    expect_corrupt_after(store, "doc", Target::Replacement, |receipt| {
        receipt.document.scopes.clear()
    })
    .await
}

async fn corrupt_receipt_reason<S: Store + ReceiptTamper>(store: &S) -> Checked {
    expect_corrupt_after(store, "doc", Target::Withdrawal, |receipt| {
        receipt.document.withdrawn = Some(Withdrawal {
            reason: "forged reason".to_owned(),
        });
    })
    .await
}

async fn corrupt_receipt_key<S: Store + ReceiptTamper>(store: &S) -> Checked {
    let other_id = DocumentId::new("doc-forged")?;
    expect_corrupt_after(store, "doc", Target::Replacement, |receipt| {
        receipt.document.key.id = other_id.clone()
    })
    .await
}

async fn corrupt_receipt_revision<S: Store + ReceiptTamper>(store: &S) -> Checked {
    let forged = Revision::new("r-forged")?;
    expect_corrupt_after(store, "doc", Target::Replacement, |receipt| {
        receipt.document.revision = forged.clone()
    })
    .await
}
