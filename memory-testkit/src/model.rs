//! Model-based property test: random write sequences checked, step by step, against a plain `BTreeMap`
//! model of SPEC §2.2.
//!
//! The model decides every answer from first principles (it does not call [`memory_core::PreparedWrite`]), so a
//! store and the shared write rules are both checked against it. Revisions and times are the store's to
//! choose: the model learns them from each committed receipt and checks only that a revision is new for
//! its key.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

use memory_core::canonical::to_canonical_string;
use memory_core::document::{MemoryContent, MemoryDocument, MemoryKey, Withdrawal};
use memory_core::error::MemoryError;
use memory_core::ids::{DocumentId, OperationId, Revision};
use memory_core::namespace::NamespaceAddress;
use memory_core::revisions::{RevisionRetention, WordsToDrop, redact};
use memory_core::write::{MemoryReceipt, MemoryWrite, WriteOutcome};

use memory_core::ports::{MemoryReader, MemoryWriter};

use super::fixtures::{self, Store, SuiteTeams, SuiteUsers};
use super::{TestScale, proptest_config};

/// How many namespaces a sequence writes to: two identities of one definition and, with the first
/// identity, another definition, so document and operation ids collide across all three.
pub const MODEL_NAMESPACES: usize = 3;
/// The document ids, shared by every namespace.
pub const MODEL_DOCUMENTS: &[&str] = &["doc-a", "doc-\u{1f600}"];
/// The operation ids, few enough that sequences reuse them often.
pub const MODEL_OPERATIONS: &[&str] = &["op-0", "op-1", "op-2", "op-3", "op-4", "op-5"];
const TEXTS: &[&str] = &["first", "second \u{1f600}", "third \u{10ffff}\u{e000}", ""];
const SCOPE_SETS: &[&[&str]] = &[&[], &["reader"], &["reader", "auditor"]];
const REASONS: &[&str] = &["forget", "wrong \u{1f4a5}"];
const INVENTED_REVISION: &str = "r-never-issued";
/// Longest sequence in a default run, and with `MEMORY_TEST_SCALE=large`.
const SMALL_SEQUENCE: usize = 24;
const LARGE_SEQUENCE: usize = 64;

/// Which revision a generated write names as expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedChoice {
    /// None for a put (a create); an invented revision for a withdrawal.
    Absent,
    /// The current revision of the key, tombstones included (None for a put on a missing key).
    Current,
    /// The n-th (modulo) revision the key ever had; an invented revision when it never had one.
    Stale(usize),
    /// A revision no store ever issued.
    Invented,
}

/// One step of a generated sequence. Indices pick from the pools above, modulo their length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelStep {
    /// A put.
    Put {
        /// Namespace index.
        namespace: usize,
        /// Index into [`MODEL_DOCUMENTS`].
        document: usize,
        /// Index into [`MODEL_OPERATIONS`].
        operation: usize,
        /// The expected revision.
        expected: ExpectedChoice,
        /// Which text.
        text: usize,
        /// Which scope list.
        scopes: usize,
    },
    /// A withdrawal.
    Withdraw {
        /// Namespace index.
        namespace: usize,
        /// Index into [`MODEL_DOCUMENTS`].
        document: usize,
        /// Index into [`MODEL_OPERATIONS`].
        operation: usize,
        /// The expected revision.
        expected: ExpectedChoice,
        /// Which reason.
        reason: usize,
    },
    /// An exact retry of the n-th (modulo) command issued so far; nothing when none was.
    Replay {
        /// Which earlier command.
        command: usize,
    },
}

/// Generates sequences of 1 to `max_len` steps: mostly puts, some withdrawals and replays.
pub fn model_steps(max_len: usize) -> impl Strategy<Value = Vec<ModelStep>> {
    let put_expected = prop_oneof![
        3 => Just(ExpectedChoice::Current),
        2 => Just(ExpectedChoice::Absent),
        1 => (0..4_usize).prop_map(ExpectedChoice::Stale),
        1 => Just(ExpectedChoice::Invented),
    ];
    // Withdrawals mostly name the current revision, or they would rarely withdraw anything.
    let withdraw_expected = prop_oneof![
        6 => Just(ExpectedChoice::Current),
        1 => (0..4_usize).prop_map(ExpectedChoice::Stale),
        1 => Just(ExpectedChoice::Invented),
    ];
    let target = (
        0..MODEL_NAMESPACES,
        0..MODEL_DOCUMENTS.len(),
        0..MODEL_OPERATIONS.len(),
    );
    let step = prop_oneof![
        5 => (target.clone(), put_expected, 0..TEXTS.len(), 0..SCOPE_SETS.len()).prop_map(
            |((namespace, document, operation), expected, text, scopes)| ModelStep::Put {
                namespace, document, operation, expected, text, scopes,
            }
        ),
        2 => (target, withdraw_expected, 0..REASONS.len()).prop_map(
            |((namespace, document, operation), expected, reason)| ModelStep::Withdraw {
                namespace, document, operation, expected, reason,
            }
        ),
        2 => (0..64_usize).prop_map(|command| ModelStep::Replay { command }),
    ];
    proptest::collection::vec(step, 1..=max_len.max(1))
}

/// Runs the model property on fresh stores from `factory`, one per generated sequence, with
/// [`proptest_config`] (32 cases by default). Call it from a plain `#[test]`: it runs its own
/// single-threaded tokio runtime.
///
/// # Panics
/// When a sequence breaks the model, with the minimized sequence and the broken rule; or when no tokio
/// runtime can be built.
#[track_caller]
pub fn run_model_property<S, F, Fut>(factory: F)
where
    S: MemoryReader + MemoryWriter,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("cannot build a tokio runtime for the model property: {error}"),
    };
    let max_len = match TestScale::from_env() {
        TestScale::Small => SMALL_SEQUENCE,
        TestScale::Large => LARGE_SEQUENCE,
    };
    let mut runner = TestRunner::new(proptest_config());
    let result = runner.run(&model_steps(max_len), |steps| {
        runtime.block_on(async {
            let store = factory().await;
            check_model_steps(&store, &steps)
                .await
                .map_err(TestCaseError::fail)
        })
    });
    if let Err(error) = result {
        panic!("store diverged from the model: {error}");
    }
}

/// Applies `steps` to `store` (which must be empty) and to the model, comparing after every step the
/// answer (outcome kind, receipt, replay flag) and every current document.
pub async fn check_model_steps<S: MemoryReader + MemoryWriter>(
    store: &S,
    steps: &[ModelStep],
) -> Result<(), String> {
    let mut model = Model::new().map_err(|failure| failure.0)?;
    for (index, step) in steps.iter().enumerate() {
        let Some(write) = model.command(step)? else {
            continue;
        };
        let expected = model.predict(&write)?;
        let actual = store.apply(write.clone()).await;
        model
            .settle(&write, &expected, actual)
            .map_err(|problem| format!("step {index} ({step:?}): {problem}"))?;
        model
            .compare_documents(store)
            .await
            .map_err(|problem| format!("after step {index} ({step:?}): {problem}"))?;
    }
    Ok(())
}

/// What the model says a write must do.
#[derive(Debug, Clone)]
enum Expected {
    Commit,
    Replay(Box<MemoryReceipt>),
    Conflict(Option<Revision>),
    OperationConflict,
    Withdrawn,
    NotFound,
    /// A put of blank text: refused before any receipt or document is read.
    InvalidInput,
}

struct Model {
    namespaces: Vec<NamespaceAddress>,
    /// Current document per key, withdrawal tombstones included.
    current: BTreeMap<MemoryKey, MemoryDocument>,
    /// Every revision each key ever had, oldest first.
    revisions: BTreeMap<MemoryKey, Vec<Revision>>,
    /// Per `(namespace, operation id)`: the command's canonical JSON and its receipt.
    receipts: BTreeMap<(NamespaceAddress, OperationId), (String, MemoryReceipt)>,
    /// Every command issued, for replays.
    issued: Vec<MemoryWrite>,
}

fn text_error(error: impl fmt::Display) -> String {
    error.to_string()
}

impl Model {
    fn new() -> Result<Self, fixtures::Failure> {
        Ok(Self {
            namespaces: vec![
                fixtures::namespace::<SuiteUsers>("tenant", "user")?
                    .address()
                    .clone(),
                fixtures::namespace::<SuiteUsers>("tenant", "user-\u{1f600}")?
                    .address()
                    .clone(),
                fixtures::namespace::<SuiteTeams>("tenant", "user")?
                    .address()
                    .clone(),
            ],
            current: BTreeMap::new(),
            revisions: BTreeMap::new(),
            receipts: BTreeMap::new(),
            issued: Vec::new(),
        })
    }

    fn key(&self, namespace: usize, document: usize) -> Result<MemoryKey, String> {
        Ok(MemoryKey {
            namespace: self.namespaces[namespace % self.namespaces.len()].clone(),
            id: DocumentId::new(MODEL_DOCUMENTS[document % MODEL_DOCUMENTS.len()])
                .map_err(text_error)?,
        })
    }

    fn all_keys(&self) -> Result<Vec<MemoryKey>, String> {
        let mut keys = Vec::new();
        for namespace in 0..self.namespaces.len() {
            for document in 0..MODEL_DOCUMENTS.len() {
                keys.push(self.key(namespace, document)?);
            }
        }
        Ok(keys)
    }

    fn resolve(&self, key: &MemoryKey, choice: ExpectedChoice) -> Result<Option<Revision>, String> {
        let invented = || Revision::new(INVENTED_REVISION).map_err(text_error);
        Ok(match choice {
            ExpectedChoice::Absent => None,
            ExpectedChoice::Current => self
                .current
                .get(key)
                .map(|document| document.revision.clone()),
            ExpectedChoice::Stale(index) => match self.revisions.get(key) {
                Some(revisions) if !revisions.is_empty() => {
                    Some(revisions[index % revisions.len()].clone())
                }
                _ => Some(invented()?),
            },
            ExpectedChoice::Invented => Some(invented()?),
        })
    }

    /// The concrete command of a step, or `None` for a replay with nothing to replay.
    fn command(&mut self, step: &ModelStep) -> Result<Option<MemoryWrite>, String> {
        let operation_id = |operation: usize| {
            OperationId::new(MODEL_OPERATIONS[operation % MODEL_OPERATIONS.len()])
                .map_err(text_error)
        };
        let write = match *step {
            ModelStep::Put {
                namespace,
                document,
                operation,
                expected,
                text,
                scopes,
            } => {
                let key = self.key(namespace, document)?;
                MemoryWrite::Put {
                    expected_revision: self.resolve(&key, expected)?,
                    key,
                    operation_id: operation_id(operation)?,
                    locator: format!("model://{document}"),
                    content: MemoryContent::text(TEXTS[text % TEXTS.len()]),
                    scopes: fixtures::scopes(SCOPE_SETS[scopes % SCOPE_SETS.len()])
                        .map_err(|failure| failure.0)?,
                }
            }
            ModelStep::Withdraw {
                namespace,
                document,
                operation,
                expected,
                reason,
            } => {
                let key = self.key(namespace, document)?;
                let expected_revision = match self.resolve(&key, expected)? {
                    Some(revision) => revision,
                    None => Revision::new(INVENTED_REVISION).map_err(text_error)?,
                };
                MemoryWrite::Withdraw {
                    key,
                    operation_id: operation_id(operation)?,
                    expected_revision,
                    reason: REASONS[reason % REASONS.len()].to_owned(),
                    by: None,
                }
            }
            ModelStep::Replay { command } => {
                if self.issued.is_empty() {
                    return Ok(None);
                }
                self.issued[command % self.issued.len()].clone()
            }
        };
        self.issued.push(write.clone());
        Ok(Some(write))
    }

    fn predict(&self, write: &MemoryWrite) -> Result<Expected, String> {
        if let MemoryWrite::Put { content, .. } = write
            && content.text.trim().is_empty()
        {
            return Ok(Expected::InvalidInput);
        }
        let slot = (write.key().namespace.clone(), write.operation_id().clone());
        if let Some((command, receipt)) = self.receipts.get(&slot) {
            let canonical = to_canonical_string(write).map_err(text_error)?;
            return Ok(if *command == canonical {
                Expected::Replay(Box::new(receipt.clone()))
            } else {
                Expected::OperationConflict
            });
        }
        let current = self.current.get(write.key());
        Ok(match (write, current) {
            (_, Some(document)) if document.withdrawn.is_some() => Expected::Withdrawn,
            (
                MemoryWrite::Put {
                    expected_revision: None,
                    ..
                },
                None,
            ) => Expected::Commit,
            (
                MemoryWrite::Put {
                    expected_revision, ..
                },
                current,
            ) => {
                let current = current.map(|document| document.revision.clone());
                if current.is_some() && current == *expected_revision {
                    Expected::Commit
                } else {
                    Expected::Conflict(current)
                }
            }
            (MemoryWrite::Withdraw { .. }, None) => Expected::NotFound,
            (
                MemoryWrite::Withdraw {
                    expected_revision, ..
                },
                Some(document),
            ) => {
                if document.revision == *expected_revision {
                    Expected::Commit
                } else {
                    Expected::Conflict(Some(document.revision.clone()))
                }
            }
        })
    }

    /// Compares the store's answer with the prediction and, for a commit, learns the new document.
    fn settle(
        &mut self,
        write: &MemoryWrite,
        expected: &Expected,
        actual: Result<WriteOutcome, MemoryError>,
    ) -> Result<(), String> {
        match (expected, actual) {
            (Expected::Commit, Ok(outcome)) if !outcome.replayed => {
                self.check_committed(write, &outcome.receipt)?;
                let canonical = to_canonical_string(write).map_err(text_error)?;
                let key = write.key().clone();
                self.revisions
                    .entry(key.clone())
                    .or_default()
                    .push(outcome.receipt.document.revision.clone());
                let drop = RevisionRetention::default().words_to_drop(&outcome.receipt.document);
                self.current
                    .insert(key.clone(), outcome.receipt.document.clone());
                self.receipts.insert(
                    (write.key().namespace.clone(), write.operation_id().clone()),
                    (canonical, outcome.receipt),
                );
                self.drop_words(&key, drop);
                Ok(())
            }
            (Expected::Replay(original), Ok(outcome)) if outcome.replayed => {
                let original_bytes = to_canonical_string(original).map_err(text_error)?;
                let replayed_bytes = to_canonical_string(&outcome.receipt).map_err(text_error)?;
                if original_bytes == replayed_bytes {
                    Ok(())
                } else {
                    Err("a replay returned another receipt than the original".to_owned())
                }
            }
            (Expected::Conflict(expected), Err(MemoryError::Conflict { current }))
                if *expected == current =>
            {
                Ok(())
            }
            (Expected::OperationConflict, Err(MemoryError::OperationConflict { operation_id }))
                if operation_id == *write.operation_id() =>
            {
                Ok(())
            }
            (Expected::Withdrawn, Err(MemoryError::Withdrawn))
            | (Expected::NotFound, Err(MemoryError::NotFound))
            | (Expected::InvalidInput, Err(MemoryError::InvalidInput { .. })) => Ok(()),
            (expected, Ok(outcome)) => Err(format!(
                "model expects {}, store answered Ok (replayed: {}, revision {})",
                describe(expected),
                outcome.replayed,
                outcome.receipt.document.revision
            )),
            (expected, Err(error)) => Err(format!(
                "model expects {}, store answered {error:?}",
                describe(expected)
            )),
        }
    }

    /// As a store drops a key's words after a commit (memory_core::revisions), for the stores the
    /// property opens with the default bound: the receipts past the newest `drop.kept()` revisions
    /// answer their replays without words.
    fn drop_words(&mut self, key: &MemoryKey, drop: WordsToDrop) {
        let Some(revisions) = self.revisions.get(key) else {
            return;
        };
        let old: Vec<&Revision> = revisions.iter().rev().skip(drop.kept()).collect();
        for (_, receipt) in self.receipts.values_mut() {
            if receipt.document.key == *key && old.contains(&&receipt.document.revision) {
                *receipt = redact(receipt.clone());
            }
        }
    }

    fn check_committed(&self, write: &MemoryWrite, receipt: &MemoryReceipt) -> Result<(), String> {
        let document = &receipt.document;
        let mut problems = Vec::new();
        if receipt.kind != write.kind() {
            problems.push("kind");
        }
        if receipt.operation_id != *write.operation_id() {
            problems.push("operation id");
        }
        if document.key != *write.key() {
            problems.push("key");
        }
        let earlier = self.revisions.get(write.key());
        if earlier.is_some_and(|revisions| revisions.contains(&document.revision)) {
            problems.push("revision reused");
        }
        match write {
            MemoryWrite::Put {
                expected_revision,
                locator,
                content,
                scopes,
                ..
            } => {
                if document.predecessor != *expected_revision {
                    problems.push("predecessor");
                }
                if document.locator != *locator {
                    problems.push("locator");
                }
                if document.content != *content {
                    problems.push("content");
                }
                if document.scopes != *scopes {
                    problems.push("scopes");
                }
                if document.withdrawn.is_some() {
                    problems.push("withdrawn marker");
                }
            }
            MemoryWrite::Withdraw {
                expected_revision,
                reason,
                by,
                ..
            } => {
                if document.predecessor.as_ref() != Some(expected_revision) {
                    problems.push("predecessor");
                }
                if document.withdrawn
                    != Some(Withdrawal {
                        reason: reason.clone(),
                        by: by.clone(),
                    })
                {
                    problems.push("withdrawal reason");
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the committed receipt is wrong in: {}",
                problems.join(", ")
            ))
        }
    }

    async fn compare_documents<S: Store>(&self, store: &S) -> Result<(), String> {
        let keys = self.all_keys()?;
        let stored = store
            .read_many(&keys)
            .await
            .map_err(|error| format!("read_many failed: {error}"))?;
        if stored.len() != keys.len() {
            return Err(format!(
                "read_many answered {} of {} keys",
                stored.len(),
                keys.len()
            ));
        }
        for (key, stored) in keys.iter().zip(stored) {
            let expected = self
                .current
                .get(key)
                .filter(|document| document.withdrawn.is_none());
            if stored.as_ref() != expected {
                return Err(format!(
                    "document {} of namespace #{} is {} in the store, {} in the model",
                    key.id,
                    key.namespace.fingerprint(),
                    fixtures::Brief(stored.as_ref()),
                    fixtures::Brief(expected)
                ));
            }
            let single = store
                .read(key)
                .await
                .map_err(|error| format!("read failed: {error}"))?;
            if single.as_ref() != expected {
                return Err(format!(
                    "read and read_many disagree on document {}",
                    key.id
                ));
            }
        }
        Ok(())
    }
}

fn describe(expected: &Expected) -> String {
    match expected {
        Expected::Commit => "a commit".to_owned(),
        Expected::Replay(_) => "a replay".to_owned(),
        Expected::Conflict(current) => format!("Conflict {{ current: {current:?} }}"),
        Expected::OperationConflict => "OperationConflict".to_owned(),
        Expected::Withdrawn => "Withdrawn".to_owned(),
        Expected::NotFound => "NotFound".to_owned(),
        Expected::InvalidInput => "InvalidInput".to_owned(),
    }
}
