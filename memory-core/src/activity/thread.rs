//! The thread log: append-only canonical records per thread.
//!
//! A record's digest is SHA-256 over the canonical JSON of everything the record says (thread, sequence,
//! time, speaker, observers, body) and deliberately not over its opaque cursor: a provider continuation
//! token may be re-issued for the same content, and must not make the same statement look different.

use crate::StoreFault;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ActivityError, Sequence, ThreadId, sha256_hex};
use crate::document::EpochMillis;

/// Most UTF-8 bytes of a speaker or observer name.
pub const MAX_PARTICIPANT_BYTES: usize = 256;
/// Most observers on one record.
pub const MAX_OBSERVERS: usize = 64;
/// Most UTF-8 bytes of an opaque cursor.
pub const MAX_OPAQUE_CURSOR_BYTES: usize = 4_096;
/// Most records one page read may return.
pub const MAX_PAGE_RECORDS: usize = 10_000;

/// What a record says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RecordBody {
    /// Something a user typed.
    UserInput {
        /// The user's words.
        text: String,
    },
    /// Something the assistant said.
    AssistantMessage {
        /// The assistant's words.
        text: String,
    },
    /// The assistant called a tool.
    ToolCall {
        /// The call's id within the run.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The arguments as given.
        arguments: Value,
    },
    /// A tool answered.
    ToolResult {
        /// The call this answers.
        call_id: String,
        /// What the tool returned.
        output: Value,
        /// Whether the tool reported failure.
        is_error: bool,
    },
    /// A run of the agent finished.
    RunCompleted {
        /// How it ended (for example `completed`, `cancelled`).
        outcome: String,
    },
}

/// A record to append; the log assigns its sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRecord {
    /// When it happened, epoch milliseconds; `None` when unknown.
    pub occurred_at: Option<EpochMillis>,
    /// Who produced it (the user's display name, `assistant`, a tool name).
    pub speaker: String,
    /// Who else saw it.
    pub observers: Vec<String>,
    /// What it says.
    pub body: RecordBody,
    /// An opaque provider cursor (for example a response id); kept, but outside the digest.
    pub opaque_cursor: Option<String>,
}

impl NewRecord {
    /// A user statement with no observers and no cursor.
    pub fn user(speaker: impl Into<String>, text: impl Into<String>, at: EpochMillis) -> Self {
        Self {
            occurred_at: Some(at),
            speaker: speaker.into(),
            observers: Vec::new(),
            body: RecordBody::UserInput { text: text.into() },
            opaque_cursor: None,
        }
    }

    /// An assistant message with no observers and no cursor.
    pub fn assistant(text: impl Into<String>, at: EpochMillis) -> Self {
        Self {
            occurred_at: Some(at),
            speaker: "assistant".to_owned(),
            observers: Vec::new(),
            body: RecordBody::AssistantMessage { text: text.into() },
            opaque_cursor: None,
        }
    }

    /// Checks field limits and the canonical size of the body before anything is stored.
    pub fn validate(&self) -> Result<(), ActivityError> {
        let check = |field: &'static str, text: &str, max: usize| {
            if text.len() > max {
                return Err(ActivityError::TooLarge {
                    limit: field,
                    max: max as u64,
                    actual: text.len() as u64,
                });
            }
            Ok(())
        };
        check("speaker bytes", &self.speaker, MAX_PARTICIPANT_BYTES)?;
        if self.observers.len() > MAX_OBSERVERS {
            return Err(ActivityError::TooLarge {
                limit: "observers",
                max: MAX_OBSERVERS as u64,
                actual: self.observers.len() as u64,
            });
        }
        for observer in &self.observers {
            check("observer bytes", observer, MAX_PARTICIPANT_BYTES)?;
        }
        if let Some(cursor) = &self.opaque_cursor {
            check("opaque cursor bytes", cursor, MAX_OPAQUE_CURSOR_BYTES)?;
        }
        super::canonical_progress_json("record canonical JSON", &self.body)?;
        Ok(())
    }
}

/// SHA-256 over a record's canonical JSON, opaque cursor excluded.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RecordDigest(String);

impl RecordDigest {
    /// The digest of a record's content at a position.
    pub fn of(thread: &ThreadId, sequence: Sequence, record: &NewRecord) -> Self {
        Self(sha256_hex(&serde_json::json!({
            "thread": thread.as_str(),
            "sequence": sequence.0,
            "occurred_at": record.occurred_at,
            "speaker": record.speaker,
            "observers": record.observers,
            "body": record.body,
        })))
    }

    /// Wraps a stored digest, checking its shape.
    pub fn from_hex(hex: impl Into<String>) -> Result<Self, ActivityError> {
        let hex = hex.into();
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(ActivityError::Store(StoreFault::Corrupt {
                what: "record digest is not 64 lower-case hex digits".to_owned(),
            }));
        }
        Ok(Self(hex))
    }

    /// The hex text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A stored record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadRecord {
    /// Its thread.
    pub thread: ThreadId,
    /// Its position.
    pub sequence: Sequence,
    /// Its content.
    pub record: NewRecord,
    /// Digest of its content (cursor excluded).
    pub digest: RecordDigest,
}

impl ThreadRecord {
    /// A locator back to this record: `thread-record/<sequence>/<digest prefix>`. It names no thread id,
    /// because memory locators may be shown to readers who must not learn other identities.
    pub fn locator(&self) -> String {
        format!(
            "thread-record/{}/{}",
            self.sequence.0,
            &self.digest.as_str()[..16]
        )
    }
}

/// The append-only log of thread records.
pub trait ThreadLog: Send + Sync {
    /// Appends a record at the next sequence of `thread` and returns it as stored.
    fn append(&self, thread: &ThreadId, record: NewRecord) -> Result<ThreadRecord, ActivityError>;

    /// The sequence of the last record of `thread` ([`Sequence::ZERO`] when it has none).
    fn inspect_tail(&self, thread: &ThreadId) -> Result<Sequence, ActivityError>;

    /// Up to `limit` records of `thread` with a sequence greater than `after`, in order. `limit` must be
    /// between 1 and [`MAX_PAGE_RECORDS`].
    fn read_page(
        &self,
        thread: &ThreadId,
        after: Sequence,
        limit: usize,
    ) -> Result<Vec<ThreadRecord>, ActivityError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_ignores_the_opaque_cursor_only() {
        let thread = ThreadId::new("t").expect("valid");
        let mut record = NewRecord::user("ana", "I live in Lisbon", 5);
        let plain = RecordDigest::of(&thread, Sequence(1), &record);
        record.opaque_cursor = Some("resp_123".to_owned());
        assert_eq!(plain, RecordDigest::of(&thread, Sequence(1), &record));
        record.speaker = "bea".to_owned();
        assert_ne!(plain, RecordDigest::of(&thread, Sequence(1), &record));
        let record = NewRecord::user("ana", "I live in Lisbon", 5);
        assert_ne!(plain, RecordDigest::of(&thread, Sequence(2), &record));
    }
}
