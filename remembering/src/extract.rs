//! Extraction of memory from thread records, and the default extractor that needs no model service.

use memory_core::activity::{RecordBody, ThreadId, ThreadRecord};
use memory_core::document::{EpochMillis, MemoryAttribution, MemoryContent, MemoryScope};
use memory_core::namespace::NamespaceAddress;
use serde::{Deserialize, Serialize};

use crate::error::ApplicationError;

/// One memory document a record contributes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contribution {
    /// The namespace it is written to.
    pub namespace: NamespaceAddress,
    /// Its content.
    pub content: MemoryContent,
    /// Scopes allowed to recall it.
    pub scopes: Vec<MemoryScope>,
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

impl RecordExtractor for StatementExtractor {
    fn extract(
        &self,
        record: &ThreadRecord,
        now: EpochMillis,
    ) -> Result<Vec<Contribution>, ApplicationError> {
        let RecordBody::UserInput { text } = &record.record.body else {
            return Ok(Vec::new());
        };
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let mut metadata = serde_json::Map::new();
        metadata.insert("kind".to_owned(), "statement".into());
        metadata.insert("record_digest".to_owned(), record.digest.as_str().into());
        Ok(vec![Contribution {
            namespace: Self::namespace(&record.thread)?,
            content: MemoryContent {
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
            },
            scopes: self.scopes.clone(),
        }])
    }
}
