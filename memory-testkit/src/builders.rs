//! Builders of keys, scopes and writes for store crates' own tests, so each
//! backend's backend-specific tests need not carry a copy. They panic on invalid input: every value is
//! a test's constant.

use memory_core::document::{
    MemoryAccess, MemoryAttribution, MemoryContent, MemoryKey, MemoryScope,
};
use memory_core::ids::{DocumentId, OperationId, Revision};
use memory_core::namespace::NamespaceAddress;
use memory_core::write::MemoryWrite;

/// The namespace of `tenant` under the test definition `memory-store-tests`, version 1.
///
/// # Panics
/// Never for a tenant name; the address is always valid.
pub fn namespace(tenant: &str) -> NamespaceAddress {
    NamespaceAddress::encode(
        "memory-store-tests",
        1,
        &serde_json::json!({ "tenant": tenant }),
    )
    .expect("valid namespace")
}

/// Document `id` in `tenant`'s namespace.
///
/// # Panics
/// When `id` is no valid document id.
pub fn key(tenant: &str, id: &str) -> MemoryKey {
    MemoryKey {
        namespace: namespace(tenant),
        id: DocumentId::new(id).expect("valid id"),
    }
}

/// A scope.
///
/// # Panics
/// When `name` is no valid scope.
pub fn scope(name: &str) -> MemoryScope {
    MemoryScope::new(name).expect("valid scope")
}

/// Reading `tenant`'s namespace through `scope_name`.
///
/// # Panics
/// When `scope_name` is no valid scope.
pub fn access(tenant: &str, scope_name: &str) -> MemoryAccess {
    MemoryAccess {
        namespace: namespace(tenant),
        scope: scope(scope_name),
    }
}

/// An operation id.
///
/// # Panics
/// When `id` is no valid operation id.
pub fn op(id: &str) -> OperationId {
    OperationId::new(id).expect("valid operation id")
}

/// Content with one attribution by `speaker`.
pub fn said(text: &str, speaker: &str) -> MemoryContent {
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

/// A put of `content` under the locator `loc:<id>`, readable through `scopes`.
///
/// # Panics
/// When an operation id or scope is invalid.
pub fn put(
    key: &MemoryKey,
    operation: &str,
    expected: Option<&Revision>,
    content: MemoryContent,
    scopes: &[&str],
) -> MemoryWrite {
    MemoryWrite::Put {
        key: key.clone(),
        operation_id: op(operation),
        expected_revision: expected.cloned(),
        locator: format!("loc:{}", key.id),
        content,
        scopes: scopes.iter().map(|name| scope(name)).collect(),
    }
}

/// A withdrawal of `expected`, for the reason "asked to forget".
///
/// # Panics
/// When the operation id is invalid.
pub fn withdraw(key: &MemoryKey, operation: &str, expected: &Revision) -> MemoryWrite {
    MemoryWrite::Withdraw {
        key: key.clone(),
        operation_id: op(operation),
        expected_revision: expected.clone(),
        reason: "asked to forget".to_owned(),
        by: None,
    }
}
