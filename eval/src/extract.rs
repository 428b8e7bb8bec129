//! The eval extractor and the keyed writer that turn committed thread records into `person/topic`
//! memory documents.
//!
//! The remembering crate's committed-activity processor derives every written document id from the
//! record's work id and always creates (`expected_revision: None`); its extractor cannot name a target
//! key nor ask for a withdrawal. The harness needs corrections to become new revisions of one document
//! and forget requests to withdraw it, so:
//! - [`CorpusExtractor`] (a [`RecordExtractor`]) marks each contribution with the document it is about
//!   and what it does ([`TARGET_FIELD`], [`ACTION_FIELD`] in the content metadata);
//! - [`KeyedWriter`] sits between the processor and the store and rewrites each marked put into a put on
//!   the target key at its current revision, or into a withdrawal of it.
//!
//! Gap, documented rather than hidden: the rewrite reads the current revision when it runs, so a replay
//! of the same record after a crash between apply and advance would send a different command under the
//! same operation id and be refused as an operation conflict. The harness never crashes mid-pass; a
//! production extractor needs keyed contributions in the remembering crate itself.

use memory_core::activity::{RecordBody, ThreadRecord};
use memory_core::{
    DocumentId, EpochMillis, MemoryAttribution, MemoryContent, MemoryError, MemoryKey,
    MemoryReader, MemoryScope, MemoryWrite, MemoryWriter, NamespaceAddress, WriteOutcome,
};
use remembering::{ApplicationError, Contribution, RecordExtractor};

use crate::corpus::{Recognised, document_id, recognise};

/// Metadata member naming the target document id.
pub const TARGET_FIELD: &str = "eval_target";
/// Metadata member naming the action: [`ACTION_STATE`] or [`ACTION_FORGET`].
pub const ACTION_FIELD: &str = "eval_action";
/// The action of a statement or correction.
pub const ACTION_STATE: &str = "state";
/// The action of a forget request.
pub const ACTION_FORGET: &str = "forget";

/// The extractor the harness runs: user sentences the corpus recognises become contributions.
#[derive(Debug, Clone)]
pub struct CorpusExtractor {
    namespace: NamespaceAddress,
    scopes: Vec<MemoryScope>,
}

impl CorpusExtractor {
    /// An extractor writing into `namespace`, recallable through `scopes`.
    pub fn new(namespace: NamespaceAddress, scopes: Vec<MemoryScope>) -> Self {
        Self { namespace, scopes }
    }
}

impl RecordExtractor for CorpusExtractor {
    fn extract(
        &self,
        record: &ThreadRecord,
        now: EpochMillis,
    ) -> Result<Vec<Contribution>, ApplicationError> {
        // Only the user's own words are statements; an assistant echo is no second witness.
        let RecordBody::UserInput { text } = &record.record.body else {
            return Ok(Vec::new());
        };
        let Some(recognised) = recognise(text) else {
            return Ok(Vec::new());
        };
        let person = &record.record.speaker;
        let (topic, action, interpretation) = match recognised {
            Recognised::State {
                topic, correction, ..
            } => (
                topic,
                ACTION_STATE,
                if correction { "corrected" } else { "stated" },
            ),
            Recognised::Forget { topic } => (topic, ACTION_FORGET, "forget-request"),
        };
        let mut metadata = serde_json::Map::new();
        metadata.insert(TARGET_FIELD.to_owned(), document_id(person, topic).into());
        metadata.insert(ACTION_FIELD.to_owned(), action.into());
        metadata.insert("topic".to_owned(), topic.into());
        Ok(vec![Contribution {
            namespace: self.namespace.clone(),
            content: MemoryContent {
                text: text.clone(),
                attributions: vec![MemoryAttribution {
                    origin_id: format!("thread-record:{}", record.digest.as_str()),
                    speaker: person.clone(),
                    observers: record.record.observers.clone(),
                    locator: record.locator(),
                    activity_at: record.record.occurred_at,
                    interpretation: interpretation.to_owned(),
                }],
                metadata,
                recorded_at: now,
                extracted_at: now,
            },
            scopes: self.scopes.clone(),
        }])
    }
}

/// A writer that rewrites the processor's marked puts into keyed puts and withdrawals (see the module
/// docs); unmarked writes pass through unchanged.
#[derive(Debug)]
pub struct KeyedWriter<S> {
    store: std::sync::Arc<S>,
}

impl<S> KeyedWriter<S> {
    /// Wraps `store`.
    pub fn new(store: std::sync::Arc<S>) -> Self {
        Self { store }
    }
}

fn metadata_str<'a>(content: &'a MemoryContent, field: &str) -> Option<&'a str> {
    content
        .metadata
        .get(field)
        .and_then(serde_json::Value::as_str)
}

impl<S: MemoryReader + MemoryWriter> MemoryWriter for KeyedWriter<S> {
    async fn apply(&self, write: MemoryWrite) -> Result<WriteOutcome, MemoryError> {
        let MemoryWrite::Put {
            key,
            operation_id,
            locator,
            content,
            scopes,
            ..
        } = &write
        else {
            return self.store.apply(write).await;
        };
        let (Some(target), Some(action)) = (
            metadata_str(content, TARGET_FIELD),
            metadata_str(content, ACTION_FIELD),
        ) else {
            return self.store.apply(write).await;
        };
        let target = MemoryKey {
            namespace: key.namespace.clone(),
            id: DocumentId::new(target)?,
        };
        let current = self.store.read(&target).await?;
        let rewritten = match action {
            ACTION_FORGET => MemoryWrite::Withdraw {
                expected_revision: current.ok_or(MemoryError::NotFound)?.revision,
                key: target,
                operation_id: operation_id.clone(),
                reason: "the user asked to forget".to_owned(),
            },
            _ => MemoryWrite::Put {
                expected_revision: current.map(|document| document.revision),
                key: target,
                operation_id: operation_id.clone(),
                locator: locator.clone(),
                content: content.clone(),
                scopes: scopes.clone(),
            },
        };
        self.store.apply(rewritten).await
    }
}
