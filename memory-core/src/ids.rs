//! Identifier newtypes. Each is validated on construction (non-empty, bounded) and is never a bare string
//! in an API.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::MemoryError;

macro_rules! string_id {
    ($(#[$meta:meta])* $name:ident, $field:literal, $max:expr) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, JsonSchema)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Most UTF-8 bytes this identifier may hold.
            pub const MAX_BYTES: usize = $max;

            /// Validates and wraps an identifier: 1 to `MAX_BYTES` UTF-8 bytes, no control characters.
            pub fn new(value: impl Into<String>) -> Result<Self, MemoryError> {
                let value = value.into();
                if value.is_empty() {
                    return Err(MemoryError::invalid($field, "must not be empty"));
                }
                if value.len() > Self::MAX_BYTES {
                    return Err(MemoryError::TooLarge {
                        limit: concat!($field, " bytes"),
                        max: Self::MAX_BYTES as u64,
                        actual: value.len() as u64,
                    });
                }
                if value.chars().any(char::is_control) {
                    return Err(MemoryError::invalid($field, "must not contain control characters"));
                }
                Ok(Self(value))
            }

            /// The identifier's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(formatter, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = String::deserialize(deserializer)?;
                Self::new(value).map_err(serde::de::Error::custom)
            }
        }
    };
}

string_id!(
    /// The id of a document inside its namespace.
    DocumentId,
    "document id",
    1_024
);
string_id!(
    /// The caller-chosen id that makes a write idempotent within a namespace.
    OperationId,
    "operation id",
    256
);
string_id!(
    /// An opaque document revision. Revisions are compared for equality only, never ordered by meaning.
    Revision,
    "revision",
    256
);
