//! The contract checks: one async function per rule of SPEC §2.2, each run on a fresh store. The rules
//! live by theme: `writes` (revisions, withdrawal, replays), `scoping` (operation ids, namespaces,
//! scopes, reads) and `limits` (refused input, size limits, corrupt receipts).

mod limits;
mod scoping;
mod writes;

use limits::*;
use scoping::*;
use writes::*;

use std::future::Future;

use memory_core::canonical::{to_canonical_string, utf16_len};
use memory_core::document::{EpochMillis, MemoryContent, MemoryKey, Withdrawal};
use memory_core::error::{ErrorKind, MemoryError};
use memory_core::ids::{DocumentId, OperationId, Revision};
use memory_core::write::{
    MAX_CANONICAL_UTF16_UNITS, MAX_LOCATOR_BYTES, MemoryReceipt, MemoryWrite, PreparedWrite,
    WriteKind, WritePlan,
};

use memory_core::ports::{MemoryReader, MemoryWriter};

use super::fixtures::{
    Brief, Checked, Failure, SUITE_LOCATOR, Store, SuiteTeams, SuiteUsers, SuiteUsersV2,
    WITHDRAWN_BY, apply_ok, apply_refused, ensure, key, namespace, put, read, receipt_bytes,
    scopes, withdraw,
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
pub(super) fn main_key() -> Result<MemoryKey, Failure> {
    key(&namespace::<SuiteUsers>("tenant-a", "user-1")?, "doc-1")
}

/// Creates the main document and returns its key and revision.
pub(super) async fn create<S: Store>(
    store: &S,
    text: &str,
) -> Result<(MemoryKey, Revision), Failure> {
    let key = main_key()?;
    let outcome = apply_ok(
        store,
        put(&key, "op-create", None, text, &["reader"])?,
        "create",
    )
    .await?;
    Ok((key, outcome.receipt.document.revision))
}
