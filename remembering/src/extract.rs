//! Extraction of memory from thread records, and the default extractor that needs no model service.

use memory_core::DocumentId;
use memory_core::activity::{RecordBody, ThreadId, ThreadRecord};
use memory_core::document::{EpochMillis, MemoryAttribution, MemoryContent, MemoryScope};
use memory_core::namespace::NamespaceAddress;
use serde::{Deserialize, Serialize};

use crate::error::ApplicationError;

/// What one record contributes to one memory document: the processor's output names its target key
/// and action, and the processor turns it into the exact write command it saves before sending.
///
/// - A put with `target: None` writes a document of its own, whose id derives from the record's work id
///   and the contribution's index; it is always created, never replaces anything.
/// - A put with `target: Some(id)` writes that document: created when absent, otherwise replacing the
///   revision current when the command is prepared (the extractor chose that document knowingly, for
///   example a correction of what the same person said before). Only a definite conflict between
///   preparing and landing rebases it, through the processor's [`crate::app::Merger`], which keeps a
///   concurrent human correction.
/// - A withdrawal withdraws the target's revision current when prepared (nothing is sent when the
///   document is absent or already withdrawn); after a conflict it withdraws the latest revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum Contribution {
    /// Write content.
    Put {
        /// The namespace it is written to.
        namespace: NamespaceAddress,
        /// The document, or `None` for a document of the record's own.
        target: Option<DocumentId>,
        /// Its content.
        content: MemoryContent,
        /// Scopes allowed to recall it.
        scopes: Vec<MemoryScope>,
    },
    /// Withdraw a document.
    Withdraw {
        /// The namespace of the document.
        namespace: NamespaceAddress,
        /// The document.
        target: DocumentId,
        /// Why (stored with the withdrawal).
        reason: String,
    },
}

impl Contribution {
    /// A put into a document of the record's own.
    pub fn put(
        namespace: NamespaceAddress,
        content: MemoryContent,
        scopes: Vec<MemoryScope>,
    ) -> Self {
        Self::Put {
            namespace,
            target: None,
            content,
            scopes,
        }
    }

    /// A put into the document `target`.
    pub fn put_at(
        namespace: NamespaceAddress,
        target: DocumentId,
        content: MemoryContent,
        scopes: Vec<MemoryScope>,
    ) -> Self {
        Self::Put {
            namespace,
            target: Some(target),
            content,
            scopes,
        }
    }

    /// A withdrawal of the document `target`.
    pub fn withdraw(
        namespace: NamespaceAddress,
        target: DocumentId,
        reason: impl Into<String>,
    ) -> Self {
        Self::Withdraw {
            namespace,
            target,
            reason: reason.into(),
        }
    }
}

/// Turns one committed record into memory contributions (possibly none).
///
/// Extraction may be nondeterministic (a model call): the processor saves its output before applying it,
/// so after a crash the saved output wins and the extractor is not asked again.
pub trait RecordExtractor: Send + Sync {
    /// What `record` contributes; `now` is the extraction time to stamp.
    fn extract(
        &self,
        record: &ThreadRecord,
        now: EpochMillis,
    ) -> Result<Vec<Contribution>, ApplicationError>;
}

/// The name of the namespace definition [`StatementExtractor`] writes to.
pub const STATEMENTS_NAMESPACE: &str = "remembering.thread-statements";

/// The default extractor: every original user statement becomes one attributed memory document.
///
/// - Speaker, observers and activity time come from the record; the attribution's locator points back
///   at the thread record (sequence and digest prefix); `interpretation` is `stated`.
/// - Only user input is a statement. Assistant messages, tool calls and tool results are never
///   witnesses: an assistant repeating what a user said adds neither a document nor an attribution.
/// - Documents go to a per-thread namespace of definition [`STATEMENTS_NAMESPACE`] (version 1, identity
///   `{"thread": <thread id>}`), with the configured scopes.
#[derive(Debug, Clone)]
pub struct StatementExtractor {
    scopes: Vec<MemoryScope>,
}

impl StatementExtractor {
    /// An extractor writing documents recallable through `scopes`.
    pub fn new(scopes: Vec<MemoryScope>) -> Self {
        Self { scopes }
    }

    /// The namespace statements of `thread` are written to.
    pub fn namespace(thread: &ThreadId) -> Result<NamespaceAddress, ApplicationError> {
        Ok(NamespaceAddress::encode(
            STATEMENTS_NAMESPACE,
            1,
            &serde_json::json!({ "thread": thread.as_str() }),
        )?)
    }
}

impl StatementExtractor {
    /// The attributed statement content of `record`, or `None` when it is no user statement.
    pub fn statement(&self, record: &ThreadRecord, now: EpochMillis) -> Option<MemoryContent> {
        let RecordBody::UserInput { text } = &record.record.body else {
            return None;
        };
        if text.trim().is_empty() {
            return None;
        }
        let mut metadata = serde_json::Map::new();
        metadata.insert("kind".to_owned(), "statement".into());
        metadata.insert("record_digest".to_owned(), record.digest.as_str().into());
        Some(MemoryContent {
            text: text.clone(),
            attributions: vec![MemoryAttribution {
                origin_id: format!("thread-record:{}", record.digest.as_str()),
                speaker: record.record.speaker.clone(),
                observers: record.record.observers.clone(),
                locator: record.locator(),
                activity_at: record.record.occurred_at,
                interpretation: "stated".to_owned(),
            }],
            metadata,
            recorded_at: now,
            extracted_at: now,
        })
    }

    /// The scopes statements are recallable through.
    pub fn scopes(&self) -> &[MemoryScope] {
        &self.scopes
    }
}

impl RecordExtractor for StatementExtractor {
    fn extract(
        &self,
        record: &ThreadRecord,
        now: EpochMillis,
    ) -> Result<Vec<Contribution>, ApplicationError> {
        let Some(content) = self.statement(record, now) else {
            return Ok(Vec::new());
        };
        Ok(vec![Contribution::put(
            Self::namespace(&record.thread)?,
            content,
            self.scopes.clone(),
        )])
    }
}
