//! Thread records as remembering sources: the application the `remembering-worker` binary runs intent
//! passes with. A record's source id is [`SourceId::thread_record`] and its revision the record digest
//! ([`SourceRevision::of_record`]), the same ids committed-activity processing keeps its references
//! under, so forgetting a thread record cleans up what the processor wrote from it.
//!
//! Remember intents for any other kind of source fail to load with [`NotAThreadRecord`] and stay queued
//! (never closed as "nothing to remember", which would drop an application's obligation silently): an
//! application with its own sources runs [`crate::worker::IntentWorker`] in-process with its loader.

use std::sync::Arc;

use memory_core::activity::{SourceId, SourceRevision, ThreadLog, ThreadRecord};
use memory_core::document::{EpochMillis, MemoryContent};

use crate::app::{Extractor, LoadedSource, SourceLoader};
use crate::error::ApplicationError;
use crate::extract::StatementExtractor;

/// A source id that names no thread record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("source is not a thread record; this worker loads thread records only")]
pub struct NotAThreadRecord;

/// Loads thread records from the thread log.
#[derive(Clone)]
pub struct ThreadRecordLoader {
    log: Arc<dyn ThreadLog>,
}

impl std::fmt::Debug for ThreadRecordLoader {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ThreadRecordLoader")
            .finish_non_exhaustive()
    }
}

impl ThreadRecordLoader {
    /// A loader over `log`.
    pub fn new(log: Arc<dyn ThreadLog>) -> Self {
        Self { log }
    }

    fn load_record(&self, source: &SourceId) -> Result<Option<ThreadRecord>, ApplicationError> {
        let (thread, sequence) = source.as_thread_record().ok_or(NotAThreadRecord)?;
        let before = sequence.saturating_previous();
        Ok(self
            .log
            .read_page(&thread, before, 1)?
            .into_iter()
            .find(|record| record.sequence == sequence))
    }
}

impl SourceLoader for ThreadRecordLoader {
    async fn load(&self, source: &SourceId) -> Result<Option<LoadedSource>, ApplicationError> {
        let Some(record) = self.load_record(source)? else {
            return Ok(None);
        };
        Ok(Some(LoadedSource {
            revision: SourceRevision::of_record(&record.digest),
            body: serde_json::to_value(&record)?,
        }))
    }
}

/// Proposes a record's statement (see [`StatementExtractor::statement`]); anything else proposes
/// nothing.
#[derive(Debug, Clone)]
pub struct StatementProposals {
    statements: StatementExtractor,
}

impl StatementProposals {
    /// Proposals shaped like `statements` makes them.
    pub fn new(statements: StatementExtractor) -> Self {
        Self { statements }
    }
}

impl Extractor for StatementProposals {
    async fn extract(
        &self,
        _source: &SourceId,
        loaded: &LoadedSource,
        now: EpochMillis,
    ) -> Result<Option<MemoryContent>, ApplicationError> {
        let record: ThreadRecord = serde_json::from_value(loaded.body.clone())?;
        Ok(self.statements.statement(&record, now))
    }
}
