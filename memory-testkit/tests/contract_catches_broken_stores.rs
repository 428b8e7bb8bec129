//! The contract suite and the model must fail on stores that break a rule: each broken store here wraps
//! the in-memory store and breaks exactly one rule, and the suite must name that rule.

use std::collections::HashMap;
use std::sync::Mutex;

use memory_core::StoreFault;
use memory_core::{
    InMemoryStore, MemoryDocument, MemoryError, MemoryKey, MemoryReader, MemoryReceipt,
    MemoryScope, MemoryWrite, MemoryWriter, WriteOutcome,
};
use memory_testkit::{
    ExpectedChoice, ModelStep, ReceiptTamper, check_model_steps, run_contract_rules,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Returns stored receipts without flagging them as replays.
    ReplayNotFlagged,
    /// Keeps serving documents after their withdrawal.
    ReadsWithdrawn,
    /// Grants a default scope to documents that list none.
    GrantsDefaultScope,
    /// Answers `read_many` in reverse order.
    ReadManyReversed,
    /// Reports conflicts without naming the winning revision.
    ConflictWithoutWinner,
    /// Returns a stored receipt on replay without checking it against the command.
    TrustsStoredReceipts,
}

struct BrokenStore {
    inner: InMemoryStore,
    fault: Fault,
    /// The last document each write left, tombstones included.
    last_written: Mutex<HashMap<MemoryKey, MemoryDocument>>,
    /// Receipts overwritten through the tamper, by operation id.
    forged: Mutex<HashMap<String, MemoryReceipt>>,
}

impl BrokenStore {
    fn new(fault: Fault) -> Self {
        Self {
            inner: InMemoryStore::new(),
            fault,
            last_written: Mutex::new(HashMap::new()),
            forged: Mutex::new(HashMap::new()),
        }
    }

    fn break_read(
        &self,
        key: &MemoryKey,
        document: Option<MemoryDocument>,
    ) -> Option<MemoryDocument> {
        match self.fault {
            Fault::ReadsWithdrawn => document.or_else(|| {
                self.last_written
                    .lock()
                    .expect("not poisoned")
                    .get(key)
                    .cloned()
            }),
            Fault::GrantsDefaultScope => document.map(|mut document| {
                if document.scopes.is_empty() {
                    document
                        .scopes
                        .push(MemoryScope::new("reader").expect("valid scope"));
                }
                document
            }),
            _ => document,
        }
    }
}

impl MemoryReader for BrokenStore {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        let document = self.inner.read(key).await?;
        Ok(self.break_read(key, document))
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        let mut documents = Vec::with_capacity(keys.len());
        for key in keys {
            documents.push(self.read(key).await?);
        }
        if self.fault == Fault::ReadManyReversed {
            documents.reverse();
        }
        Ok(documents)
    }
}

impl MemoryWriter for BrokenStore {
    async fn apply(&self, write: MemoryWrite) -> Result<WriteOutcome, MemoryError> {
        let operation = write.operation_id().as_str().to_owned();
        match (self.inner.apply(write).await, self.fault) {
            (Ok(mut outcome), fault) => {
                if fault == Fault::ReplayNotFlagged {
                    outcome.replayed = false;
                }
                self.last_written.lock().expect("not poisoned").insert(
                    outcome.receipt.document.key.clone(),
                    outcome.receipt.document.clone(),
                );
                Ok(outcome)
            }
            (Err(MemoryError::Conflict { .. }), Fault::ConflictWithoutWinner) => {
                Err(MemoryError::Conflict { current: None })
            }
            (Err(MemoryError::Store(StoreFault::Corrupt { .. })), Fault::TrustsStoredReceipts) => {
                let forged = self
                    .forged
                    .lock()
                    .expect("not poisoned")
                    .get(&operation)
                    .cloned();
                match forged {
                    Some(receipt) => Ok(WriteOutcome {
                        receipt,
                        replayed: true,
                    }),
                    None => Err(MemoryError::Store(StoreFault::Corrupt {
                        what: "unexpected".to_owned(),
                    })),
                }
            }
            (Err(error), _) => Err(error),
        }
    }
}

impl ReceiptTamper for BrokenStore {
    async fn overwrite_receipt(&self, receipt: MemoryReceipt) -> Result<(), MemoryError> {
        self.forged
            .lock()
            .expect("not poisoned")
            .insert(receipt.operation_id.as_str().to_owned(), receipt.clone());
        self.inner.overwrite_receipt(receipt).await
    }
}

async fn assert_rule_catches(fault: Fault, rule: &str) {
    let report = run_contract_rules(|| async move { BrokenStore::new(fault) }, &[rule]).await;
    let failure = report
        .failure(rule)
        .unwrap_or_else(|| panic!("rule `{rule}` did not catch {fault:?}: {report}"));
    assert!(!report.is_success());
    assert!(failure.to_string().contains(rule), "{failure}");
}

#[tokio::test]
async fn suite_catches_a_replay_not_flagged_as_replay() {
    assert_rule_catches(Fault::ReplayNotFlagged, "replay-returns-original-receipt").await;
}

#[tokio::test]
async fn suite_catches_reads_of_withdrawn_documents() {
    assert_rule_catches(Fault::ReadsWithdrawn, "withdrawal-is-terminal").await;
}

#[tokio::test]
async fn suite_catches_default_scopes() {
    assert_rule_catches(
        Fault::GrantsDefaultScope,
        "empty-scope-list-grants-no-access",
    )
    .await;
}

#[tokio::test]
async fn suite_catches_read_many_out_of_order() {
    assert_rule_catches(Fault::ReadManyReversed, "read-many-keeps-order").await;
}

#[tokio::test]
async fn suite_catches_conflicts_that_hide_the_winner() {
    assert_rule_catches(
        Fault::ConflictWithoutWinner,
        "stale-revision-conflicts-and-winner-stays",
    )
    .await;
}

#[tokio::test]
async fn suite_catches_unchecked_stored_receipts() {
    for rule in [
        "corrupt-receipt-content",
        "corrupt-receipt-scopes",
        "corrupt-receipt-reason",
    ] {
        assert_rule_catches(Fault::TrustsStoredReceipts, rule).await;
    }
}

#[tokio::test]
async fn unknown_rule_names_are_reported() {
    let report = run_contract_rules(|| async { InMemoryStore::new() }, &["no-such-rule"]).await;
    assert!(report.failure("unknown-rule").is_some(), "{report}");
}

#[tokio::test]
async fn model_catches_broken_stores() {
    let create = ModelStep::Put {
        namespace: 0,
        document: 0,
        operation: 0,
        expected: ExpectedChoice::Absent,
        text: 0,
        scopes: 1,
    };
    let withdraw = ModelStep::Withdraw {
        namespace: 0,
        document: 0,
        operation: 1,
        expected: ExpectedChoice::Current,
        reason: 0,
    };
    let healthy = InMemoryStore::new();
    check_model_steps(
        &healthy,
        &[
            create.clone(),
            ModelStep::Replay { command: 0 },
            withdraw.clone(),
        ],
    )
    .await
    .expect("the in-memory store follows the model");
    let replay = check_model_steps(
        &BrokenStore::new(Fault::ReplayNotFlagged),
        &[create.clone(), ModelStep::Replay { command: 0 }],
    )
    .await;
    assert!(replay.is_err_and(|problem| problem.contains("step 1")));
    let withdrawn = check_model_steps(
        &BrokenStore::new(Fault::ReadsWithdrawn),
        &[create, withdraw],
    )
    .await;
    assert!(withdrawn.is_err_and(|problem| problem.contains("after step 1")));
}
