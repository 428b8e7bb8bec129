//! The namespace and scope a caller's simple operations work in (a server's `--namespace` and
//! `--scope`, a grant's defaults, a Python `Memory`'s): its own module, so the grants that carry
//! defaults and the simple operations that use them both name it without naming each other.

use memory_core::ids::lower_hex;
use memory_core::{DocumentId, DynamicNamespace, MemoryKey, MemoryScope, NamespaceAddress};
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::refusal::Refusal;
use crate::wire::address_of;

/// The namespace and scope the simple tools work in.
#[derive(Debug, Clone)]
pub struct Defaults {
    namespace: DynamicNamespace,
    address: NamespaceAddress,
    scope: MemoryScope,
}

impl Defaults {
    /// The defaults, with the namespace's address checked.
    pub fn new(namespace: DynamicNamespace, scope: MemoryScope) -> Result<Self, Refusal> {
        Ok(Self {
            address: address_of(&namespace)?,
            namespace,
            scope,
        })
    }

    /// The default namespace.
    pub fn namespace(&self) -> &DynamicNamespace {
        &self.namespace
    }

    /// Where a thread append that names no destination goes: this namespace and scope.
    pub fn destination_defaults(&self) -> crate::destination::DestinationDefaults {
        crate::destination::DestinationDefaults {
            namespace: Some(self.namespace.clone()),
            scope: Some(self.scope.clone()),
            user: None,
        }
    }

    /// The default namespace's address.
    pub fn address(&self) -> &NamespaceAddress {
        &self.address
    }

    /// The default scope.
    pub fn scope(&self) -> &MemoryScope {
        &self.scope
    }

    /// The key of document `id` in the default namespace (`invalid-input` for an id the store refuses).
    pub fn key(&self, id: &str) -> Result<MemoryKey, Refusal> {
        Ok(MemoryKey {
            namespace: self.address.clone(),
            id: DocumentId::new(id)?,
        })
    }

    /// The lower-case hex SHA-256 of the canonical JSON of one call in these defaults.
    pub(crate) fn digest_of(
        &self,
        tool: &str,
        arguments: &impl Serialize,
    ) -> Result<String, Refusal> {
        let call = json!({
            "tool": tool,
            "namespace": self.address.as_str(),
            "scope": self.scope.as_str(),
            "arguments": arguments,
        });
        let canonical = memory_core::canonical::to_canonical_string(&call)
            .map_err(|error| Refusal::invalid_input(format!("arguments: {error}")))?;
        Ok(lower_hex(&Sha256::digest(canonical.as_bytes())))
    }
}
