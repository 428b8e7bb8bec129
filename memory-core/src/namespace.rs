//! Namespace definitions, namespaces and their canonical addresses (SPEC §2.1).
//!
//! A [`NamespaceDefinition`] is a type: its name, version and identity type are compile-time facts, so a
//! `Namespace<UserConversations>` cannot be passed where a `Namespace<TeamNotes>` is expected. Stores key
//! documents by the type-erased [`NamespaceAddress`], the compact canonical JSON `[1,name,version,identity]`
//! (RFC 8785), which is the only form that ever reaches storage.
//!
//! Limits, all checked before anything is stored: the name is 1 to 256 UTF-16 code units; the version is
//! 1 to 2^53 - 1; the address is at most 4,096 UTF-8 bytes; the identity nests at most 16 containers with at
//! most 128 entries each; NaN, infinities and integers outside +/-(2^53 - 1) are refused. Untrusted identity
//! JSON given to [`Namespace::decode`] is refused above [`MAX_DECODE_INPUT_BYTES`] before it is parsed.
//!
//! Addresses can hold sensitive identifiers: [`NamespaceAddress`]'s `Debug` shows only a short digest.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical::{
    MAX_SAFE_INTEGER, StructureLimits, StructureViolation, check_structure, to_canonical_string,
    utf16_len,
};
use crate::document::{MemoryAccess, MemoryKey, MemoryScope};
use crate::error::AddressError;
use crate::ids::DocumentId;

/// The address format this crate writes and reads: the leading `1` of `[1,name,version,identity]`.
pub const ADDRESS_FORMAT: u64 = 1;
/// Most UTF-8 bytes in an address.
pub const MAX_ADDRESS_BYTES: usize = 4_096;
/// Most UTF-16 code units in a definition's name.
pub const MAX_NAME_UTF16_UNITS: usize = 256;
/// Most nested containers in an identity.
pub const MAX_IDENTITY_DEPTH: usize = 16;
/// Most entries in one container of an identity.
pub const MAX_IDENTITY_ENTRIES: usize = 128;
/// Most bytes of untrusted identity JSON text accepted by `decode`; whitespace and escapes may make the
/// text larger than the canonical address, so this is larger than [`MAX_ADDRESS_BYTES`], but bounded.
pub const MAX_DECODE_INPUT_BYTES: usize = 65_536;

const IDENTITY_LIMITS: StructureLimits = StructureLimits {
    max_depth: MAX_IDENTITY_DEPTH,
    max_entries: MAX_IDENTITY_ENTRIES,
};

/// A namespace definition: a name, a version and the type of the identity that completes a namespace.
///
/// The identity's JSON Schema ([`Namespace::identity_schema`]) is part of the definition's documentation.
pub trait NamespaceDefinition: Send + Sync + 'static {
    /// The definition's name, 1 to 256 UTF-16 code units.
    const NAME: &'static str;
    /// The definition's version, 1 to 2^53 - 1. A new version is a new namespace.
    const VERSION: u64;
    /// The identity that, with this definition, names one namespace.
    type Identity: Serialize + DeserializeOwned + JsonSchema + Clone + Send + Sync;
}

/// The canonical, type-erased address of a namespace: compact RFC 8785 JSON `[1,name,version,identity]`.
///
/// Construct it through [`Namespace`] or [`NamespaceAddress::encode`]; both enforce every limit.
///
/// The text is shared: a clone is a reference count, not a copy, so every document of a namespace
/// held in memory (an index's rows, a worker's batch) can point at one copy of its address.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NamespaceAddress(Arc<str>);

impl Serialize for NamespaceAddress {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl NamespaceAddress {
    /// Encodes a definition name, version and identity into a canonical address, checking every limit.
    pub fn encode<I: Serialize>(
        name: &str,
        version: u64,
        identity: &I,
    ) -> Result<Self, AddressError> {
        check_definition(name, version)?;
        // A JSON tree view catches depth, width and unsafe integers; the canonical encoder below catches
        // NaN and infinities, which `serde_json::Value` would silently turn into `null`.
        let tree =
            serde_json::to_value(identity).map_err(|error| AddressError::InvalidIdentity {
                detail: error.to_string(),
            })?;
        check_identity_tree(&tree)?;
        let identity_json =
            to_canonical_string(identity).map_err(|error| AddressError::UnrepresentableNumber {
                detail: error.to_string(),
            })?;
        let name_json =
            to_canonical_string(&name).map_err(|error| AddressError::InvalidIdentity {
                detail: error.to_string(),
            })?;
        let address = format!("[{ADDRESS_FORMAT},{name_json},{version},{identity_json}]");
        if address.len() > MAX_ADDRESS_BYTES {
            return Err(AddressError::LimitExceeded {
                limit: "address bytes",
                max: MAX_ADDRESS_BYTES as u64,
                actual: address.len() as u64,
            });
        }
        Ok(Self(address.into()))
    }

    /// Checks untrusted identity JSON text against every limit and encodes the address it names.
    ///
    /// The identity is taken as plain JSON (no identity type); typed definitions use [`Namespace::decode`].
    pub fn decode_untyped(
        name: &str,
        version: u64,
        identity_json: &str,
    ) -> Result<Self, AddressError> {
        let tree = parse_untrusted(identity_json)?;
        Self::encode(name, version, &tree)
    }

    /// Parses a stored address of any definition, checking that it is canonical. Stores use this to read
    /// addresses back from rows; it never trusts the text.
    pub fn parse(address: &str) -> Result<Self, AddressError> {
        let (name, version, identity) = split_address(address)?;
        let rebuilt = Self::encode(&name, version, &identity)?;
        if &*rebuilt.0 != address {
            return Err(AddressError::NotCanonical);
        }
        Ok(rebuilt)
    }

    /// The definition name, version and identity the address names (what a policy matches on).
    pub fn parts(&self) -> Result<(String, u64, Value), AddressError> {
        split_address(&self.0)
    }

    /// The canonical text. Sensitive: never log it or put it into recall text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether both share one copy of their text (so interning can tell a shared address from an
    /// equal one).
    pub fn shares_text_with(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A short, stable, non-reversible fingerprint for logs and diagnostics.
    pub fn fingerprint(&self) -> String {
        crate::ids::lower_hex(&Sha256::digest(self.0.as_bytes())[..6])
    }
}

impl fmt::Debug for NamespaceAddress {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "NamespaceAddress(#{})", self.fingerprint())
    }
}

impl<'de> Deserialize<'de> for NamespaceAddress {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A namespace of definition `D`: the definition plus one identity value.
pub struct Namespace<D: NamespaceDefinition> {
    identity: D::Identity,
    address: NamespaceAddress,
    definition: PhantomData<fn() -> D>,
}

impl<D: NamespaceDefinition> Clone for Namespace<D> {
    fn clone(&self) -> Self {
        Self {
            identity: self.identity.clone(),
            address: self.address.clone(),
            definition: PhantomData,
        }
    }
}

impl<D: NamespaceDefinition> fmt::Debug for Namespace<D> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Namespace")
            .field("definition", &D::NAME)
            .field("version", &D::VERSION)
            .field("address", &self.address)
            .finish()
    }
}

impl<D: NamespaceDefinition> PartialEq for Namespace<D> {
    fn eq(&self, other: &Self) -> bool {
        self.address == other.address
    }
}

impl<D: NamespaceDefinition> Eq for Namespace<D> {}

impl<D: NamespaceDefinition> Namespace<D> {
    /// Builds a namespace from a typed identity.
    pub fn make(identity: D::Identity) -> Result<Self, AddressError> {
        let address = NamespaceAddress::encode(D::NAME, D::VERSION, &identity)?;
        Ok(Self {
            identity,
            address,
            definition: PhantomData,
        })
    }

    /// Validates untrusted identity JSON (size first, then structure, then the identity type).
    pub fn decode(identity_json: &str) -> Result<Self, AddressError> {
        let tree = parse_untrusted(identity_json)?;
        let identity: D::Identity =
            serde_json::from_value(tree).map_err(|error| AddressError::InvalidIdentity {
                detail: error.to_string(),
            })?;
        Self::make(identity)
    }

    /// Checks a stored address against this definition.
    ///
    /// Tells apart an unsupported format, another definition (name or version) and a non-canonical text.
    pub fn restore(address: &str) -> Result<Self, AddressError> {
        let (name, version, identity_tree) = split_address(address)?;
        if name != D::NAME || version != D::VERSION {
            return Err(AddressError::OtherDefinition);
        }
        let identity: D::Identity = serde_json::from_value(identity_tree).map_err(|error| {
            AddressError::InvalidIdentity {
                detail: error.to_string(),
            }
        })?;
        let namespace = Self::make(identity)?;
        if namespace.address.as_str() != address {
            return Err(AddressError::NotCanonical);
        }
        Ok(namespace)
    }

    /// The typed identity.
    pub fn identity(&self) -> &D::Identity {
        &self.identity
    }

    /// The canonical address.
    pub fn address(&self) -> &NamespaceAddress {
        &self.address
    }

    /// The key of document `id` in this namespace.
    pub fn key(&self, id: DocumentId) -> MemoryKey {
        MemoryKey {
            namespace: self.address.clone(),
            id,
        }
    }

    /// Access to this namespace through `scope`.
    pub fn access(&self, scope: MemoryScope) -> MemoryAccess {
        MemoryAccess {
            namespace: self.address.clone(),
            scope,
        }
    }

    /// The JSON Schema of the definition's identity type.
    pub fn identity_schema() -> schemars::Schema {
        schemars::schema_for!(D::Identity)
    }
}

fn check_definition(name: &str, version: u64) -> Result<(), AddressError> {
    if name.len() > MAX_NAME_UTF16_UNITS * 3 {
        // Cheap early refusal: every UTF-16 unit takes at most 3 UTF-8 bytes.
        return Err(AddressError::InvalidName {
            units: utf16_len(name),
        });
    }
    let units = utf16_len(name);
    if units == 0 || units > MAX_NAME_UTF16_UNITS {
        return Err(AddressError::InvalidName { units });
    }
    if version == 0 || version > MAX_SAFE_INTEGER {
        return Err(AddressError::InvalidVersion { version });
    }
    Ok(())
}

fn check_identity_tree(tree: &Value) -> Result<(), AddressError> {
    check_structure(tree, IDENTITY_LIMITS).map_err(|violation| match violation {
        StructureViolation::TooDeep { depth } => AddressError::LimitExceeded {
            limit: "identity depth",
            max: MAX_IDENTITY_DEPTH as u64,
            actual: depth as u64,
        },
        StructureViolation::TooManyEntries { entries } => AddressError::LimitExceeded {
            limit: "identity container entries",
            max: MAX_IDENTITY_ENTRIES as u64,
            actual: entries as u64,
        },
        StructureViolation::UnsafeInteger => AddressError::UnrepresentableNumber {
            detail: "integer outside +/-(2^53 - 1)".to_owned(),
        },
    })
}

fn parse_untrusted(identity_json: &str) -> Result<Value, AddressError> {
    if identity_json.len() > MAX_DECODE_INPUT_BYTES {
        return Err(AddressError::LimitExceeded {
            limit: "identity JSON bytes",
            max: MAX_DECODE_INPUT_BYTES as u64,
            actual: identity_json.len() as u64,
        });
    }
    let tree: Value =
        serde_json::from_str(identity_json).map_err(|error| AddressError::InvalidIdentity {
            detail: error.to_string(),
        })?;
    check_identity_tree(&tree)?;
    Ok(tree)
}

/// Splits an address into name, version and identity, after the size check and the format check.
fn split_address(address: &str) -> Result<(String, u64, Value), AddressError> {
    if address.len() > MAX_ADDRESS_BYTES {
        return Err(AddressError::LimitExceeded {
            limit: "address bytes",
            max: MAX_ADDRESS_BYTES as u64,
            actual: address.len() as u64,
        });
    }
    let tree: Value = serde_json::from_str(address).map_err(|_| AddressError::UnsupportedFormat)?;
    let Value::Array(mut parts) = tree else {
        return Err(AddressError::UnsupportedFormat);
    };
    if parts.len() != 4 || parts[0].as_u64() != Some(ADDRESS_FORMAT) {
        return Err(AddressError::UnsupportedFormat);
    }
    let identity = parts.pop().unwrap_or(Value::Null);
    let version = match &parts[2] {
        Value::Number(number) => number.as_u64().ok_or(AddressError::NotCanonical)?,
        _ => return Err(AddressError::UnsupportedFormat),
    };
    let name = match &parts[1] {
        Value::String(name) => name.clone(),
        _ => return Err(AddressError::UnsupportedFormat),
    };
    check_identity_tree(&identity)?;
    Ok((name, version, identity))
}

/// A definition chosen at run time (for the command line and the MCP server), with a JSON identity that is
/// checked against every limit. Typed definitions are preferred in library code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DynamicNamespace {
    /// The definition's name.
    pub name: String,
    /// The definition's version.
    pub version: u64,
    /// The identity, any JSON value within the limits.
    pub identity: Value,
}

impl DynamicNamespace {
    /// The canonical address, after every limit check.
    pub fn address(&self) -> Result<NamespaceAddress, AddressError> {
        NamespaceAddress::encode(&self.name, self.version, &self.identity)
    }
}
