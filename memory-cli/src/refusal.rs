//! Typed refusals: the `{"error": {"kind", "message"}}` answer every interface gives for a request it
//! will not carry out.
//!
//! The kinds are exactly [`ErrorKind::as_str`] of memory-core, so a refusal from the command line, the MCP
//! server or the library means the same thing. Messages name the field or limit at fault; they are meant
//! for the caller only and are never logged.

use memory_core::{ErrorKind, MemoryError};
use serde_json::{Value, json};

/// A request that was refused, with the kind a caller acts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} refusal: {message}", kind.as_str())]
pub struct Refusal {
    kind: ErrorKind,
    message: String,
}

impl Refusal {
    /// A refusal of `kind` explained by `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// Malformed JSON, a wrong type, an unknown or missing field, an out-of-range value.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }

    /// A size limit exceeded before any work was done.
    pub fn too_large(limit: &str, max: u64, actual: u64) -> Self {
        Self::new(
            ErrorKind::TooLarge,
            format!("{limit} exceeds its limit: {actual} > {max}"),
        )
    }

    /// Something this build or this store cannot do (yet, or right now).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The explanation.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The wire form: `{"error": {"kind": K, "message": text}}`.
    pub fn to_json(&self) -> Value {
        json!({ "error": { "kind": self.kind.as_str(), "message": self.message } })
    }
}

impl From<MemoryError> for Refusal {
    fn from(error: MemoryError) -> Self {
        // `Display` of a storage error hides its source; the kind says what a caller can do about it.
        Self::new(error.kind(), error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_form_uses_the_kebab_case_kind() {
        let refusal = Refusal::from(MemoryError::OperationConflict {
            operation_id: memory_core::OperationId::new("op").expect("valid id"),
        });
        assert_eq!(
            refusal.to_json(),
            json!({"error": {"kind": "operation-conflict", "message": "operation id was already used with a different command"}})
        );
    }

    #[test]
    fn address_limits_are_too_large_and_other_address_faults_invalid() {
        let too_deep = memory_core::AddressError::LimitExceeded {
            limit: "identity depth",
            max: 16,
            actual: 17,
        };
        assert_eq!(
            Refusal::from(MemoryError::from(too_deep)).kind(),
            ErrorKind::TooLarge
        );
        let bad_name = memory_core::AddressError::InvalidName { units: 0 };
        assert_eq!(
            Refusal::from(MemoryError::from(bad_name)).kind(),
            ErrorKind::InvalidInput
        );
    }
}
