//! Identifier newtypes. Each is validated on construction (non-empty, bounded) and is never a bare string
//! in an API.

use schemars::JsonSchema;

use crate::error::MemoryError;

/// Defines a validated string newtype: 1 to `$max` UTF-8 bytes, no control characters, checked on
/// construction and on deserialization. `$error` must offer `invalid(field, reason)` and a
/// `TooLarge { limit, max, actual }` variant. Display and Debug are left to the caller, so ids that must
/// not show their value (authorities) can redact it.
macro_rules! validated_string_id {
    ($(#[$meta:meta])* $name:ident, $field:literal, $max:expr, $error:ident) => {
        $(#[$meta])*
        // A boxed `str` rather than a `String`: ids are never grown in place, and an index holds
        // one per source, where a `String`'s capacity word would be 8 of its 24 bytes.
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(Box<str>);

        impl $name {
            /// Most UTF-8 bytes this identifier may hold.
            pub const MAX_BYTES: usize = $max;

            /// Validates and wraps an identifier: 1 to `MAX_BYTES` UTF-8 bytes, no control characters.
            pub fn new(value: impl Into<String>) -> Result<Self, $error> {
                let value = value.into();
                if value.is_empty() {
                    return Err($error::invalid($field, "must not be empty"));
                }
                if value.len() > Self::MAX_BYTES {
                    return Err($error::TooLarge {
                        limit: concat!($field, " bytes"),
                        max: Self::MAX_BYTES as u64,
                        actual: value.len() as u64,
                    });
                }
                if value.chars().any(char::is_control) {
                    return Err($error::invalid($field, "must not contain control characters"));
                }
                Ok(Self(value.into_boxed_str()))
            }

            /// The identifier's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = <String as serde::Deserialize>::deserialize(deserializer)?;
                Self::new(value).map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use validated_string_id;

/// A validated string newtype whose value may be shown: Display prints it, Debug prints `Name("value")`.
macro_rules! string_id {
    ($(#[$meta:meta])* $name:ident, $field:literal, $max:expr, $error:ident) => {
        $crate::ids::validated_string_id!($(#[$meta])* $name, $field, $max, $error);

        impl std::fmt::Display for $name {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str(self.as_str())
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(formatter, "{}({:?})", stringify!($name), self.as_str())
            }
        }
    };
}
pub(crate) use string_id;

string_id!(
    /// The id of a document inside its namespace.
    #[derive(JsonSchema)]
    DocumentId,
    "document id",
    1_024,
    MemoryError
);
string_id!(
    /// The caller-chosen id that makes a write idempotent within a namespace.
    #[derive(JsonSchema)]
    OperationId,
    "operation id",
    256,
    MemoryError
);
string_id!(
    /// An opaque document revision. Revisions are compared for equality only, never ordered by meaning.
    #[derive(JsonSchema)]
    Revision,
    "revision",
    256,
    MemoryError
);

/// `bytes` as lower-case hexadecimal: how every digest and id of this project is spelt.
pub fn lower_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(text, "{byte:02x}");
    }
    text
}
