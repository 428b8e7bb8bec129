//! The eval extractor that turns committed thread records into `person/topic` memory documents.
//!
//! The remembering crate's committed-activity processor lets each contribution name its target
//! document and action, and saves the exact command (target revision included) before sending it, so a
//! crash retry replays it unchanged. [`CorpusExtractor`] puts statements and corrections on the
//! `person/topic` document (a correction becomes its next revision) and turns a forget request into a
//! withdrawal of it.

use memory_core::activity::{RecordBody, ThreadDestination, ThreadRecord};
use memory_core::{DocumentId, EpochMillis, MemoryAttribution, MemoryContent};
use remembering::{ApplicationError, Contribution, Extraction, RecordExtractor};

use crate::corpus::{Recognised, document_id, recognise};

/// The extractor the harness runs: user sentences the corpus recognises become contributions, written
/// to the thread's destination.
#[derive(Debug, Clone, Copy, Default)]
pub struct CorpusExtractor;

impl RecordExtractor for CorpusExtractor {
    fn extract(
        &self,
        record: &ThreadRecord,
        _previous: Option<&ThreadRecord>,
        destination: &ThreadDestination,
        now: EpochMillis,
    ) -> Result<Extraction, ApplicationError> {
        Ok(Extraction {
            contributions: self.contributions(record, destination, now)?,
            ..Extraction::default()
        })
    }
}

impl CorpusExtractor {
    fn contributions(
        self,
        record: &ThreadRecord,
        destination: &ThreadDestination,
        now: EpochMillis,
    ) -> Result<Vec<Contribution>, ApplicationError> {
        let namespace = destination.namespace();
        // Only the user's own words are statements; an assistant echo is no second witness.
        let RecordBody::UserInput { text } = &record.record.body else {
            return Ok(Vec::new());
        };
        let Some(recognised) = recognise(text) else {
            return Ok(Vec::new());
        };
        let person = &record.record.speaker;
        let (topic, interpretation) = match recognised {
            Recognised::State {
                topic, correction, ..
            } => (topic, if correction { "corrected" } else { "stated" }),
            Recognised::Forget { topic } => {
                return Ok(vec![Contribution::withdraw(
                    namespace.clone(),
                    DocumentId::new(document_id(person, topic))?,
                    "the user asked to forget",
                )]);
            }
        };
        let mut metadata = serde_json::Map::new();
        metadata.insert("topic".to_owned(), topic.into());
        Ok(vec![Contribution::put_at(
            namespace.clone(),
            DocumentId::new(document_id(person, topic))?,
            MemoryContent {
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
            destination.scopes().to_vec(),
        )])
    }
}
