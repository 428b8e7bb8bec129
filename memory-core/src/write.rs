//! Write commands, receipts and the rules that decide what a write does (SPEC §2.2).
//!
//! The rules live here, as pure functions, so that every store applies exactly the same ones: a store
//! calls [`PreparedWrite::prepare`] before it opens a transaction (all size limits are checked there), then,
//! inside the transaction, reads the receipt for `(namespace, operation_id)` and the current document and
//! calls [`PreparedWrite::plan`], and persists what the plan says.
//!
//! Decisions written down here:
//! - Revisions are derived from the command's canonical digest (`r` + 32 hex digits of SHA-256), so they
//!   are opaque, deterministic and need no random source.
//! - A withdrawal leaves a tombstone at a new revision with empty content: the current row no longer holds
//!   the withdrawn text. Receipts keep the document as it was when they were issued, so a replayed put
//!   still returns its original document.
//! - A receipt may be redacted later (its words dropped past the bound of revisions per document, or
//!   by the document's withdrawal, [`crate::revisions`]); a replay returns it redacted.
//! - `Put` with an expected revision on a missing document is a `Conflict { current: None }`; `Withdraw` of
//!   a missing document is `NotFound`; any write other than a replay on a withdrawn id is `Withdrawn`.

use crate::StoreFault;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::canonical::{to_canonical_string, utf16_len};
use crate::document::{
    EpochMillis, MemoryContent, MemoryDocument, MemoryKey, MemoryScope, Withdrawal,
};
use crate::error::MemoryError;
use crate::ids::{OperationId, Revision};

/// Most UTF-16 code units in the canonical JSON of a command, a document or a receipt.
pub const MAX_CANONICAL_UTF16_UNITS: usize = 16_777_216;
/// Most bytes in a locator or withdrawal reason.
pub const MAX_LOCATOR_BYTES: usize = 4_096;
/// Most scopes on one document.
pub const MAX_SCOPES: usize = 256;

/// The `by` of a withdrawal made by the remembering worker (its cleanup of a forgotten source).
pub const BY_WORKER: &str = "worker";

/// The `by` of a withdrawal asked by a server's caller holding the grant `name`.
pub fn by_grant(name: &str) -> String {
    format!("grant:{name}")
}

/// The `by` of a withdrawal asked by a local caller (the command line, the Python package) acting
/// for the user `name`.
pub fn by_user(name: &str) -> String {
    format!("user:{name}")
}

/// A write to one document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum MemoryWrite {
    /// Creates (no expected revision) or replaces (the current revision expected) a document.
    Put {
        /// The target.
        key: MemoryKey,
        /// Idempotency key, unique per namespace.
        operation_id: OperationId,
        /// `None` to create; otherwise the revision this write replaces.
        expected_revision: Option<Revision>,
        /// Where the document came from.
        locator: String,
        /// The new content.
        content: MemoryContent,
        /// Scopes allowed to recall it.
        scopes: Vec<MemoryScope>,
    },
    /// Withdraws a document for good.
    Withdraw {
        /// The target.
        key: MemoryKey,
        /// Idempotency key, unique per namespace.
        operation_id: OperationId,
        /// The revision being withdrawn.
        expected_revision: Revision,
        /// Why.
        reason: String,
        /// Who asked, as the door names its caller: `grant:NAME` for a server's caller (the grant it
        /// holds), `user:NAME` for a local caller (the command line, the Python package), `worker`
        /// for the remembering worker's cleanup. Kept on the tombstone ([`Withdrawal::by`]); part of
        /// the command, so the same withdrawal by someone else is another operation. Absent from the
        /// canonical JSON while `None`, so the digests of commands that name no one are unchanged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
}

impl MemoryWrite {
    /// The target key.
    pub fn key(&self) -> &MemoryKey {
        match self {
            Self::Put { key, .. } | Self::Withdraw { key, .. } => key,
        }
    }

    /// The operation id.
    pub fn operation_id(&self) -> &OperationId {
        match self {
            Self::Put { operation_id, .. } | Self::Withdraw { operation_id, .. } => operation_id,
        }
    }

    /// Put or withdraw.
    pub fn kind(&self) -> WriteKind {
        match self {
            Self::Put { .. } => WriteKind::Put,
            Self::Withdraw { .. } => WriteKind::Withdraw,
        }
    }
}

/// The kind of a write and of its receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteKind {
    /// A put.
    Put,
    /// A withdrawal.
    Withdraw,
}

impl WriteKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Put => "put",
            Self::Withdraw => "withdraw",
        }
    }
}

/// SHA-256 of a command's canonical JSON, lower-case hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CommandDigest(String);

impl CommandDigest {
    /// Wraps a stored digest, checking its shape.
    pub fn from_hex(hex: impl Into<String>) -> Result<Self, MemoryError> {
        let hex = hex.into();
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(MemoryError::Store(StoreFault::Corrupt {
                what: "command digest is not 64 lower-case hex digits".to_owned(),
            }));
        }
        Ok(Self(hex))
    }

    /// The hex text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What the store kept for one `(namespace, operation_id)`: the command's digest and the document as the
/// write left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryReceipt {
    /// The operation id.
    pub operation_id: OperationId,
    /// Digest of the canonical command.
    pub command_digest: CommandDigest,
    /// Put or withdraw.
    pub kind: WriteKind,
    /// The document as this write left it (its content empty once `redacted`).
    pub document: MemoryDocument,
    /// Set once the store no longer keeps this revision's words: past the bound of revisions per
    /// document, or after the document's withdrawal ([`crate::revisions`]). Absent from the stored
    /// JSON while false, so receipts written before it existed read back unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

/// The answer to a write: the receipt, and whether it was a replay of an earlier identical command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The receipt (the original one for a replay).
    pub receipt: MemoryReceipt,
    /// True when this call returned a stored receipt instead of writing.
    pub replayed: bool,
}

/// A validated, size-checked write with its digest; built before any transaction is opened.
#[derive(Debug, Clone)]
pub struct PreparedWrite {
    write: MemoryWrite,
    digest: CommandDigest,
}

/// What a store must do with a prepared write, given what it holds.
// The plan lives for one write and is consumed at once; boxing it would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WritePlan {
    /// Return the stored receipt; write nothing.
    Replay(MemoryReceipt),
    /// Store the document as current (with its predecessor link) and the receipt.
    Commit {
        /// The new current document.
        document: MemoryDocument,
        /// Its receipt.
        receipt: MemoryReceipt,
    },
}

impl PreparedWrite {
    /// Validates fields and checks the command's canonical size; nothing is written.
    pub fn prepare(write: MemoryWrite) -> Result<Self, MemoryError> {
        validate_fields(&write)?;
        // UTF-16 units of the text are a lower bound of the canonical size: refuse huge commands before
        // the canonical encoder allocates for them.
        let text_units = match &write {
            MemoryWrite::Put { content, .. } => utf16_len(&content.text),
            MemoryWrite::Withdraw { reason, .. } => utf16_len(reason),
        };
        check_units("command canonical JSON", text_units)?;
        let canonical = to_canonical_string(&write)
            .map_err(|error| MemoryError::invalid("command", error.to_string()))?;
        check_units("command canonical JSON", utf16_len(&canonical))?;
        let digest = CommandDigest(hex(&Sha256::digest(canonical.as_bytes())));
        Ok(Self { write, digest })
    }

    /// The write.
    pub fn write(&self) -> &MemoryWrite {
        &self.write
    }

    /// The command's digest.
    pub fn digest(&self) -> &CommandDigest {
        &self.digest
    }

    /// Decides what the write does, given the stored receipt for its operation id (if any) and the
    /// current document of its key (withdrawn tombstones included).
    pub fn plan(
        &self,
        stored_receipt: Option<&MemoryReceipt>,
        current: Option<&MemoryDocument>,
        now: EpochMillis,
    ) -> Result<WritePlan, MemoryError> {
        if let Some(receipt) = stored_receipt {
            if receipt.command_digest != self.digest {
                return Err(MemoryError::OperationConflict {
                    operation_id: self.write.operation_id().clone(),
                });
            }
            self.verify_receipt(receipt)?;
            return Ok(WritePlan::Replay(receipt.clone()));
        }
        if let Some(current) = current
            && current.key != *self.write.key()
        {
            return Err(MemoryError::Store(StoreFault::Corrupt {
                what: "current document is stored under another key".to_owned(),
            }));
        }
        let revision = self.revision();
        let document = match &self.write {
            MemoryWrite::Put {
                key,
                expected_revision,
                locator,
                content,
                scopes,
                ..
            } => {
                match (current, expected_revision) {
                    (Some(current), _) if current.withdrawn.is_some() => {
                        return Err(MemoryError::Withdrawn);
                    }
                    (None, None) => {}
                    (Some(current), expected) if Some(&current.revision) == expected.as_ref() => {}
                    (current, _) => {
                        return Err(MemoryError::Conflict {
                            current: current.map(|document| document.revision.clone()),
                        });
                    }
                }
                MemoryDocument {
                    key: key.clone(),
                    revision,
                    predecessor: expected_revision.clone(),
                    locator: locator.clone(),
                    content: content.clone(),
                    scopes: scopes.clone(),
                    modified_at: now,
                    withdrawn: None,
                }
            }
            MemoryWrite::Withdraw {
                key,
                expected_revision,
                reason,
                by,
                ..
            } => {
                let Some(current) = current else {
                    return Err(MemoryError::NotFound);
                };
                if current.withdrawn.is_some() {
                    return Err(MemoryError::Withdrawn);
                }
                if current.revision != *expected_revision {
                    return Err(MemoryError::Conflict {
                        current: Some(current.revision.clone()),
                    });
                }
                MemoryDocument {
                    key: key.clone(),
                    revision,
                    predecessor: Some(expected_revision.clone()),
                    locator: current.locator.clone(),
                    content: MemoryContent::tombstone(),
                    scopes: Vec::new(),
                    modified_at: now,
                    withdrawn: Some(Withdrawal {
                        reason: reason.clone(),
                        by: by.clone(),
                    }),
                }
            }
        };
        let receipt = MemoryReceipt {
            operation_id: self.write.operation_id().clone(),
            command_digest: self.digest.clone(),
            kind: self.write.kind(),
            document,
            redacted: false,
        };
        // The document's canonical JSON is a member of the receipt's, so this one check bounds both.
        check_canonical_size("receipt canonical JSON", &receipt)?;
        Ok(WritePlan::Commit {
            document: receipt.document.clone(),
            receipt,
        })
    }

    /// The revision this command creates when it commits.
    pub fn revision(&self) -> Revision {
        let digest = Sha256::digest(format!("revision:{}", self.digest.as_str()).as_bytes());
        let text = format!("r{}", &hex(&digest)[..32]);
        Revision::new(text).unwrap_or_else(|_| unreachable!("a 33-character hex revision is valid"))
    }

    /// Checks a stored receipt against this (digest-equal) command; a mismatch means corrupt storage.
    pub fn verify_receipt(&self, receipt: &MemoryReceipt) -> Result<(), MemoryError> {
        let corrupt = |what: &str| {
            MemoryError::Store(StoreFault::Corrupt {
                what: format!("receipt does not match its command: {what}"),
            })
        };
        let document = &receipt.document;
        if receipt.operation_id != *self.write.operation_id() {
            return Err(corrupt("operation id"));
        }
        if document.key != *self.write.key() {
            return Err(corrupt("key"));
        }
        if receipt.kind != self.write.kind() {
            return Err(corrupt("result kind"));
        }
        if document.revision != self.revision() {
            return Err(corrupt("revision"));
        }
        match &self.write {
            MemoryWrite::Put {
                expected_revision,
                locator,
                content,
                scopes,
                ..
            } => {
                if document.predecessor != *expected_revision {
                    return Err(corrupt("predecessor"));
                }
                // A redacted receipt kept no words to compare: it must hold none at all.
                if receipt.redacted {
                    if document.content != MemoryContent::tombstone() {
                        return Err(corrupt("content"));
                    }
                } else if document.content != *content
                    && !same_canonical(&document.content, content)
                {
                    return Err(corrupt("content"));
                }
                // Canonical equality, not `Value` equality: `5` and `5.0` are one JSON number, and a
                // command whose canonical form matched the digest must not read as corrupt for it.
                if document.locator != *locator {
                    return Err(corrupt("locator"));
                }
                if document.scopes != *scopes {
                    return Err(corrupt("scopes"));
                }
                if document.withdrawn.is_some() {
                    return Err(corrupt("result kind"));
                }
            }
            MemoryWrite::Withdraw {
                expected_revision,
                reason,
                by,
                ..
            } => {
                if document.predecessor.as_ref() != Some(expected_revision) {
                    return Err(corrupt("predecessor"));
                }
                match &document.withdrawn {
                    Some(withdrawal) if withdrawal.reason == *reason && withdrawal.by == *by => {}
                    Some(withdrawal) if withdrawal.reason == *reason => return Err(corrupt("by")),
                    Some(_) => return Err(corrupt("reason")),
                    None => return Err(corrupt("result kind")),
                }
            }
        }
        Ok(())
    }
}

fn validate_fields(write: &MemoryWrite) -> Result<(), MemoryError> {
    let check_text = |field: &'static str, text: &str| -> Result<(), MemoryError> {
        if text.len() > MAX_LOCATOR_BYTES {
            return Err(MemoryError::TooLarge {
                limit: field,
                max: MAX_LOCATOR_BYTES as u64,
                actual: text.len() as u64,
            });
        }
        Ok(())
    };
    match write {
        MemoryWrite::Put {
            locator,
            scopes,
            content,
            ..
        } => {
            check_text("locator bytes", locator)?;
            check_remembered_text(&content.text)?;
            if scopes.len() > MAX_SCOPES {
                return Err(MemoryError::TooLarge {
                    limit: "scopes",
                    max: MAX_SCOPES as u64,
                    actual: scopes.len() as u64,
                });
            }
            for (index, scope) in scopes.iter().enumerate() {
                if scopes[..index].contains(scope) {
                    return Err(MemoryError::invalid("scopes", "a scope is listed twice"));
                }
            }
            if content
                .attributions
                .iter()
                .any(|a| a.locator.len() > MAX_LOCATOR_BYTES)
            {
                return Err(MemoryError::TooLarge {
                    limit: "attribution locator bytes",
                    max: MAX_LOCATOR_BYTES as u64,
                    actual: MAX_LOCATOR_BYTES as u64 + 1,
                });
            }
        }
        MemoryWrite::Withdraw { reason, by, .. } => {
            check_text("reason bytes", reason)?;
            if let Some(by) = by {
                check_text("by bytes", by)?;
                if by.is_empty() || by.chars().any(char::is_control) {
                    return Err(MemoryError::invalid(
                        "by",
                        "must be 1 to 4,096 bytes without control characters",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Refuses a document text that is empty or only whitespace: nothing would be recalled from it, and
/// every door (`memory_put`, import, `memory_remember`, the Python package) writes through here, so
/// none of them stores one.
fn check_remembered_text(text: &str) -> Result<(), MemoryError> {
    if text.trim().is_empty() {
        return Err(MemoryError::invalid(
            "content.text",
            "is empty or only whitespace: there is nothing to remember",
        ));
    }
    Ok(())
}

fn same_canonical<T: Serialize>(left: &T, right: &T) -> bool {
    match (to_canonical_string(left), to_canonical_string(right)) {
        (Ok(left), Ok(right)) => left == right,
        _ => false,
    }
}

fn check_units(limit: &'static str, units: usize) -> Result<(), MemoryError> {
    if units > MAX_CANONICAL_UTF16_UNITS {
        return Err(MemoryError::TooLarge {
            limit,
            max: MAX_CANONICAL_UTF16_UNITS as u64,
            actual: units as u64,
        });
    }
    Ok(())
}

fn check_canonical_size<T: Serialize>(limit: &'static str, value: &T) -> Result<(), MemoryError> {
    let canonical = to_canonical_string(value)
        .map_err(|error| MemoryError::invalid("document", error.to_string()))?;
    check_units(limit, utf16_len(&canonical))
}

use crate::ids::lower_hex as hex;
