//! Definitions, command builders and assertion helpers shared by the contract checks and the model.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use memory_core::canonical::to_canonical_string;
use memory_core::document::{MemoryContent, MemoryDocument, MemoryKey, MemoryScope};
use memory_core::error::{AddressError, ErrorKind, MemoryError};
use memory_core::ids::{DocumentId, OperationId, Revision};
use memory_core::namespace::{Namespace, NamespaceDefinition};
use memory_core::ports::{MemoryReader, MemoryWriter};
use memory_core::write::{MemoryReceipt, MemoryWrite, WriteOutcome};

/// Everything a contract check needs from a store.
pub(crate) trait Store: MemoryReader + MemoryWriter {}
impl<S: MemoryReader + MemoryWriter> Store for S {}

/// Why a check failed; the contract report prints it after the rule's name.
#[derive(Debug)]
pub(crate) struct Failure(pub(crate) String);

impl From<MemoryError> for Failure {
    fn from(error: MemoryError) -> Self {
        Self(format!("setup failed: {} ({error})", error.kind().as_str()))
    }
}

impl From<AddressError> for Failure {
    fn from(error: AddressError) -> Self {
        Self(format!("setup failed: {error}"))
    }
}

pub(crate) type Checked = Result<(), Failure>;

/// Returns a [`Failure`] from the enclosing check unless the condition holds.
macro_rules! ensure {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err($crate::fixtures::Failure(format!($($message)+)));
        }
    };
}
pub(crate) use ensure;

/// The identity of every namespace the suite writes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct SuiteIdentity {
    pub(crate) tenant: String,
    pub(crate) user: String,
}

/// The suite's main definition.
pub(crate) struct SuiteUsers;
impl NamespaceDefinition for SuiteUsers {
    const NAME: &'static str = "memory-core-contract-users";
    const VERSION: u64 = 1;
    type Identity = SuiteIdentity;
}

/// Same name, next version: a different namespace for the same identity.
pub(crate) struct SuiteUsersV2;
impl NamespaceDefinition for SuiteUsersV2 {
    const NAME: &'static str = "memory-core-contract-users";
    const VERSION: u64 = 2;
    type Identity = SuiteIdentity;
}

/// Another name, same identity type.
pub(crate) struct SuiteTeams;
impl NamespaceDefinition for SuiteTeams {
    const NAME: &'static str = "memory-core-contract-teams";
    const VERSION: u64 = 1;
    type Identity = SuiteIdentity;
}

pub(crate) fn identity(tenant: &str, user: &str) -> SuiteIdentity {
    SuiteIdentity {
        tenant: tenant.to_owned(),
        user: user.to_owned(),
    }
}

pub(crate) fn namespace<D: NamespaceDefinition<Identity = SuiteIdentity>>(
    tenant: &str,
    user: &str,
) -> Result<Namespace<D>, Failure> {
    Ok(Namespace::<D>::make(identity(tenant, user))?)
}

pub(crate) fn key<D: NamespaceDefinition>(
    namespace: &Namespace<D>,
    id: &str,
) -> Result<MemoryKey, Failure> {
    Ok(namespace.key(DocumentId::new(id)?))
}

pub(crate) fn scopes(names: &[&str]) -> Result<Vec<MemoryScope>, Failure> {
    names
        .iter()
        .map(|name| MemoryScope::new(*name).map_err(Failure::from))
        .collect()
}

/// The locator every suite put carries.
pub(crate) const SUITE_LOCATOR: &str = "contract://suite";

/// A put of `text` readable through `scope_names`.
pub(crate) fn put(
    key: &MemoryKey,
    operation_id: &str,
    expected_revision: Option<&Revision>,
    text: &str,
    scope_names: &[&str],
) -> Result<MemoryWrite, Failure> {
    Ok(MemoryWrite::Put {
        key: key.clone(),
        operation_id: OperationId::new(operation_id)?,
        expected_revision: expected_revision.cloned(),
        locator: SUITE_LOCATOR.to_owned(),
        content: MemoryContent::text(text),
        scopes: scopes(scope_names)?,
    })
}

/// Who the contract's withdrawals name (a store must keep it on the tombstone and its receipt).
pub(crate) const WITHDRAWN_BY: &str = "user:contract";

pub(crate) fn withdraw(
    key: &MemoryKey,
    operation_id: &str,
    expected_revision: &Revision,
    reason: &str,
) -> Result<MemoryWrite, Failure> {
    Ok(MemoryWrite::Withdraw {
        key: key.clone(),
        operation_id: OperationId::new(operation_id)?,
        expected_revision: expected_revision.clone(),
        reason: reason.to_owned(),
        by: Some(WITHDRAWN_BY.to_owned()),
    })
}

/// Applies a write that must succeed.
pub(crate) async fn apply_ok<S: Store>(
    store: &S,
    write: MemoryWrite,
    step: &str,
) -> Result<WriteOutcome, Failure> {
    store.apply(write).await.map_err(|error| {
        Failure(format!(
            "{step}: refused with {} ({error})",
            error.kind().as_str()
        ))
    })
}

/// Applies a write that must be refused with `kind`, and returns the error.
pub(crate) async fn apply_refused<S: Store>(
    store: &S,
    write: MemoryWrite,
    kind: ErrorKind,
    step: &str,
) -> Result<MemoryError, Failure> {
    match store.apply(write).await {
        Ok(outcome) => Err(Failure(format!(
            "{step}: expected {}, but the write was accepted (replayed: {})",
            kind.as_str(),
            outcome.replayed
        ))),
        Err(error) if error.kind() == kind => Ok(error),
        Err(error) => Err(Failure(format!(
            "{step}: expected {}, got {} ({error})",
            kind.as_str(),
            error.kind().as_str()
        ))),
    }
}

pub(crate) async fn read<S: Store>(
    store: &S,
    key: &MemoryKey,
) -> Result<Option<MemoryDocument>, Failure> {
    store.read(key).await.map_err(|error| {
        Failure(format!(
            "read failed with {} ({error})",
            error.kind().as_str()
        ))
    })
}

/// The receipt's canonical JSON: what "byte-identical" compares.
pub(crate) fn receipt_bytes(receipt: &MemoryReceipt) -> Result<String, Failure> {
    to_canonical_string(receipt)
        .map_err(|error| Failure(format!("receipt is not canonicalizable: {error}")))
}

/// A short, content-free description of a document for failure messages.
pub(crate) struct Brief<'a>(pub(crate) Option<&'a MemoryDocument>);

impl fmt::Display for Brief<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => formatter.write_str("no document"),
            Some(document) => write!(
                formatter,
                "document at {} (predecessor {:?}, withdrawn: {})",
                document.revision,
                document.predecessor.as_ref().map(Revision::as_str),
                document.withdrawn.is_some()
            ),
        }
    }
}

impl From<memory_core::activity::ActivityError> for Failure {
    fn from(error: memory_core::activity::ActivityError) -> Self {
        Self(format!("setup failed: {error}"))
    }
}
