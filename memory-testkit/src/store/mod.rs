//! The store suites: what every memory store keeps beyond the write rules of the
//! contract suite — the change feed, lexical search, history (the revision history port with its
//! bound and withdrawal, [`REVISION_RULES`]), stored receipts, batches and its own
//! consistency check — checked through the ports and an [`InspectableStore`] adapter.
//!
//! ```no_run
//! # async fn example<S: memory_testkit::store::InspectableStore>(open: impl FnMut() -> S) {
//! let mut open = open;
//! memory_testkit::store::run_all(|| std::future::ready(open()))
//!     .await
//!     .assert_all_passed();
//! # }
//! ```
//!
//! Each rule runs on a fresh, empty store from the factory. [`run_isolation_property`] adds the
//! random tenant-isolation property (reads and searches never cross namespaces or scopes).

mod documents;
mod feed;
mod isolation;
mod lexical;
mod revisions;

pub use documents::{STORE_RULES, run_store_suite};
pub use feed::{CHANGE_FEED_RULES, run_change_feed_suite};
pub use isolation::run_isolation_property;
pub use lexical::{LEXICAL_RULES, run_lexical_suite};
pub use revisions::{REVISION_RULES, run_revision_suite};

use std::future::Future;

use super::fixtures::{Failure, WITHDRAWN_BY};
use super::report::ContractReport;
use memory_core::document::{
    MemoryAccess, MemoryAttribution, MemoryContent, MemoryKey, MemoryScope,
};
use memory_core::error::MemoryError;
use memory_core::ids::{DocumentId, OperationId, Revision};
use memory_core::namespace::NamespaceAddress;
use memory_core::ports::{ChangeFeed, LexicalSearch, MemoryReader, MemoryWriter, RevisionHistory};
use memory_core::recall::corrections::CorrectionIndex;
use memory_core::revisions::RevisionRetention;
use memory_core::write::{MemoryReceipt, MemoryWrite, WriteOutcome};

/// One committed revision of a document and the revision it replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryLink {
    /// The revision.
    pub revision: Revision,
    /// The revision it replaced; `None` for the first.
    pub predecessor: Option<Revision>,
}

/// What a store's own consistency check counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsistencyCounts {
    /// Current rows (withdrawn tombstones included).
    pub documents: u64,
    /// Stored receipts.
    pub receipts: u64,
    /// Committed revisions.
    pub revisions: u64,
    /// Entries of the change sequence.
    pub changes: u64,
}

/// A memory store with the inspection every backend offers beside the ports; a store crate's tests
/// implement it on a thin wrapper of their store.
pub trait InspectableStore:
    MemoryReader + MemoryWriter + ChangeFeed + LexicalSearch + CorrectionIndex + RevisionHistory
{
    /// Every committed revision of `key`, oldest first.
    fn history(
        &self,
        key: &MemoryKey,
    ) -> impl Future<Output = Result<Vec<HistoryLink>, MemoryError>> + Send;

    /// The receipt stored for `operation` in `namespace`.
    fn receipt(
        &self,
        namespace: &NamespaceAddress,
        operation: &OperationId,
    ) -> impl Future<Output = Result<Option<MemoryReceipt>, MemoryError>> + Send;

    /// Checks every stored row against the others; `Corrupt` when they disagree.
    fn check_consistency(
        &self,
    ) -> impl Future<Output = Result<ConsistencyCounts, MemoryError>> + Send;

    /// Applies `writes` in order in one transaction; each gets its own answer, and a refused one
    /// changes nothing and does not stop the others.
    fn apply_batch(
        &self,
        writes: Vec<MemoryWrite>,
    ) -> impl Future<Output = Result<Vec<Result<WriteOutcome, MemoryError>>, MemoryError>> + Send;

    /// The most writes one batch may hold.
    fn max_batch_writes(&self) -> usize;

    /// The bound of revisions per document whose words the store keeps, as it was opened with.
    fn retention(&self) -> RevisionRetention;
}

/// Runs the store, change feed, lexical and revision suites, each rule on a fresh store from
/// `factory`.
pub async fn run_all<S, F, Fut>(mut factory: F) -> ContractReport
where
    S: InspectableStore,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    let mut report = ContractReport::default();
    let all = |_: &str| true;
    documents::run_selected(&mut factory, &all, &mut report).await;
    feed::run_selected(&mut factory, &all, &mut report).await;
    lexical::run_selected(&mut factory, &all, &mut report).await;
    revisions::run_selected(&mut factory, &all, &mut report).await;
    report
}

/// Runs only the named rules (of the three suites); a name that is no rule is reported as a failure.
pub async fn run_store_rules<S, F, Fut>(mut factory: F, rules: &[&str]) -> ContractReport
where
    S: InspectableStore,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    let selected = |rule: &str| rules.contains(&rule);
    let mut report = ContractReport::default();
    documents::run_selected(&mut factory, &selected, &mut report).await;
    feed::run_selected(&mut factory, &selected, &mut report).await;
    lexical::run_selected(&mut factory, &selected, &mut report).await;
    revisions::run_selected(&mut factory, &selected, &mut report).await;
    for rule in rules {
        let known = [
            STORE_RULES,
            CHANGE_FEED_RULES,
            LEXICAL_RULES,
            REVISION_RULES,
        ]
        .iter()
        .any(|names| names.contains(rule));
        if !known {
            report.record(
                "unknown-rule",
                Err(format!("no store rule is named `{rule}`")),
            );
        }
    }
    report
}

/// Defines an async suite from one list of `"rule-name" => check` pairs (see the activity suites).
macro_rules! async_suite {
    (
        $(#[$names_doc:meta])* $names:ident;
        $(#[$run_doc:meta])* $run:ident;
        $($rule:literal => $check:ident),+ $(,)?
    ) => {
        $(#[$names_doc])*
        pub const $names: &[&str] = &[$($rule),+];

        pub(super) async fn run_selected<S, F, Fut>(
            factory: &mut F,
            selected: &dyn Fn(&str) -> bool,
            report: &mut $crate::report::ContractReport,
        ) where
            S: $crate::store::InspectableStore,
            F: FnMut() -> Fut,
            Fut: std::future::Future<Output = S>,
        {
            $(
                if selected($rule) {
                    let store = factory().await;
                    let result: $crate::fixtures::Checked = $check(&store).await;
                    report.record($rule, result.map_err(|failure| failure.0));
                }
            )+
        }

        $(#[$run_doc])*
        pub async fn $run<S, F, Fut>(mut factory: F) -> $crate::report::ContractReport
        where
            S: $crate::store::InspectableStore,
            F: FnMut() -> Fut,
            Fut: std::future::Future<Output = S>,
        {
            let mut report = $crate::report::ContractReport::default();
            run_selected(&mut factory, &|_| true, &mut report).await;
            report
        }
    };
}
pub(crate) use async_suite;

/// The value of a call that must succeed, or a failure naming `step`.
pub(crate) fn ok<T>(result: Result<T, MemoryError>, step: &str) -> Result<T, Failure> {
    result.map_err(|error| {
        Failure(format!(
            "{step}: failed with {} ({error})",
            error.kind().as_str()
        ))
    })
}

pub(crate) fn namespace(tenant: &str) -> Result<NamespaceAddress, Failure> {
    Ok(NamespaceAddress::encode(
        "memory-core-store-suite",
        1,
        &serde_json::json!({ "tenant": tenant }),
    )?)
}

pub(crate) fn key(tenant: &str, id: &str) -> Result<MemoryKey, Failure> {
    Ok(MemoryKey {
        namespace: namespace(tenant)?,
        id: DocumentId::new(id)?,
    })
}

pub(crate) fn access(tenant: &str, scope: &str) -> Result<MemoryAccess, Failure> {
    Ok(MemoryAccess {
        namespace: namespace(tenant)?,
        scope: MemoryScope::new(scope)?,
    })
}

/// Content with one attribution by `speaker`.
pub(crate) fn said(text: &str, speaker: &str) -> MemoryContent {
    MemoryContent {
        attributions: vec![MemoryAttribution {
            origin_id: "thread-1".to_owned(),
            speaker: speaker.to_owned(),
            observers: Vec::new(),
            locator: "record-1".to_owned(),
            activity_at: None,
            interpretation: "stated".to_owned(),
        }],
        ..MemoryContent::text(text)
    }
}

/// A put of `content` under `loc:<id>`, readable through `scopes`.
pub(crate) fn put(
    key: &MemoryKey,
    operation: &str,
    expected: Option<&Revision>,
    content: MemoryContent,
    scopes: &[&str],
) -> Result<MemoryWrite, Failure> {
    Ok(MemoryWrite::Put {
        key: key.clone(),
        operation_id: OperationId::new(operation)?,
        expected_revision: expected.cloned(),
        locator: format!("loc:{}", key.id),
        content,
        scopes: scopes
            .iter()
            .map(|name| MemoryScope::new(*name))
            .collect::<Result<_, _>>()?,
    })
}

pub(crate) fn withdraw(
    key: &MemoryKey,
    operation: &str,
    expected: &Revision,
) -> Result<MemoryWrite, Failure> {
    Ok(MemoryWrite::Withdraw {
        key: key.clone(),
        operation_id: OperationId::new(operation)?,
        expected_revision: expected.clone(),
        reason: "asked to forget".to_owned(),
        by: Some(WITHDRAWN_BY.to_owned()),
    })
}
