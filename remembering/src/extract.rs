//! Extraction of memory from thread records, and the default extractor that needs no model service.

use std::collections::BTreeMap;

use memory_core::activity::{
    ActivityError, ModelUsage, RecordBody, RecordDigest, RememberingStore, Sequence,
    ThreadDestination, ThreadId, ThreadRecord,
};
use memory_core::document::{EpochMillis, MemoryAttribution, MemoryContent, MemoryScope};
use memory_core::namespace::NamespaceAddress;
use memory_core::{DocumentId, MemoryError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::ApplicationError;
use crate::statements::{DropReason, Sentence, SentenceKind, dropped_counts, normalize, segment};

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
/// - An attestation (`target` required) says the record states what the target document says: when
///   the document exists, its text and scopes are kept and the record's attributions (and metadata
///   members the document lacks) are added to it, as [`crate::app::KeepLatestMerger`] merges; when it
///   is absent, the content is written as a new document. Nothing is sent when the document already
///   holds every attribution. A definite conflict re-reads and merges again. A target withdrawn for
///   good (its statement was forgotten) is not revived: the statement said again goes to the
///   target's next incarnation (`<target>~1`, `<target>~2`, … up to [`MAX_INCARNATIONS`]), found by
///   writing, since a reader cannot tell a withdrawn document from an absent one.
/// - A withdrawal withdraws the target's revision current when prepared (nothing is sent when the
///   document is absent or already withdrawn); after a conflict it withdraws the latest revision.
///
/// Saved outputs of earlier versions decode unchanged: variants are only ever added.
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
    /// Add the record's attribution to a document that says the same (or create it).
    Attest {
        /// The namespace it is written to.
        namespace: NamespaceAddress,
        /// The document.
        target: DocumentId,
        /// The content to create it with, whose attributions and metadata are added otherwise.
        content: MemoryContent,
        /// Scopes allowed to recall it when it is created.
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

    /// An attestation of the document `target` (see [`Contribution::Attest`]).
    pub fn attest(
        namespace: NamespaceAddress,
        target: DocumentId,
        content: MemoryContent,
        scopes: Vec<MemoryScope>,
    ) -> Self {
        Self::Attest {
            namespace,
            target,
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

/// What one record yielded: the contributions to apply, and the parts of the record that were not
/// kept as memory, counted by reason (reason names are short, stable, lower-case words such as
/// `question`; `memory status` shows their totals). Nothing is dropped without being counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extraction {
    /// What to write.
    pub contributions: Vec<Contribution>,
    /// Parts not kept, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// What asking a model cost (nothing for an extractor that asks none).
    pub model: ModelUsage,
}

/// What the processor hands an extractor for one record.
#[derive(Clone, Copy)]
pub struct ExtractionRequest<'a> {
    /// The record.
    pub record: &'a ThreadRecord,
    /// The record just before it, when there is one and it is not forgotten.
    pub previous: Option<&'a ThreadRecord>,
    /// The records after it that the processor read with it (its page, up to the pass's captured
    /// tail): a batching extractor may extract them together, and is then asked about each of them
    /// in turn. Forgotten ones are among them: [`ExtractionRequest::is_forgotten`] tells.
    pub following: &'a [ThreadRecord],
    /// The thread's destination.
    pub destination: &'a ThreadDestination,
    /// The extraction time to stamp.
    pub now: EpochMillis,
    /// Where forgetting is recorded.
    pub suppression: &'a dyn RememberingStore,
}

impl ExtractionRequest<'_> {
    /// Whether `record` is forgotten (edited, deleted or revoked too): no one's context.
    pub fn is_forgotten(&self, record: &ThreadRecord) -> Result<bool, ActivityError> {
        crate::activity::record_is_forgotten(self.suppression, record)
    }
}

/// Why an extraction failed: a failure a retry would repeat parks the thread at the record; one that
/// may pass defers it to a later pass.
#[derive(Debug)]
pub enum ExtractFailure {
    /// The same record would fail the same way again (the thread is parked, with this kind).
    Permanent {
        /// The parked thread's kind (`extraction`, `model`).
        kind: &'static str,
        /// Why.
        source: ApplicationError,
    },
    /// It may succeed later (the record stays unprocessed, the thread pending).
    Transient(ApplicationError),
}

/// An extractor the processor drives: [`RecordExtractor`]s (synchronous, one record at a time) are
/// such extractors, and so is the model extractor ([`crate::model_extract`]), which asks over the
/// network about a batch of records.
///
/// Extraction may be nondeterministic: the processor saves a record's output before applying it, so
/// after a crash the saved output wins and the extractor is not asked about that record again.
pub trait ThreadExtractor: Send + Sync {
    /// What `request.record` contributes to `request.destination`.
    fn extract_thread(
        &self,
        request: ExtractionRequest<'_>,
    ) -> impl Future<Output = Result<Extraction, ExtractFailure>> + Send;
}

impl<T: RecordExtractor> ThreadExtractor for T {
    async fn extract_thread(
        &self,
        request: ExtractionRequest<'_>,
    ) -> Result<Extraction, ExtractFailure> {
        self.extract(
            request.record,
            request.previous,
            request.destination,
            request.now,
        )
        .map_err(|source| ExtractFailure::Permanent {
            kind: "extraction",
            source,
        })
    }
}

/// Turns one committed record into memory contributions (possibly none).
///
/// Extraction may be nondeterministic (a model call): the processor saves its output before applying it,
/// so after a crash the saved output wins and the extractor is not asked again.
///
/// The destination is the thread's (bound by whoever appended its first record, see
/// [`memory_core::activity::destination`]): an extractor writes there and never chooses another
/// namespace or grants other scopes.
pub trait RecordExtractor: Send + Sync {
    /// What `record` contributes to `destination`; `now` is the extraction time to stamp.
    /// `previous` is the record just before it in its thread, when there is one and it is not
    /// forgotten: what `record` may be answering.
    fn extract(
        &self,
        record: &ThreadRecord,
        previous: Option<&ThreadRecord>,
        destination: &ThreadDestination,
        now: EpochMillis,
    ) -> Result<Extraction, ApplicationError>;
}

/// The question a record answers: the last question of the record just before it in its thread,
/// when someone else asked it ([`answered_question`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnsweredQuestion {
    /// The question as written.
    pub text: String,
    /// Who asked it.
    pub speaker: String,
    /// The asking record's thread (a restatement elsewhere keeps the first answer's question).
    pub thread: ThreadId,
    /// The asking record's place in the thread.
    pub sequence: Sequence,
    /// The asking record's digest.
    pub digest: RecordDigest,
}

/// The question `record` answers, if any: the last sentence classified as a question in
/// `previous` (a user input or an assistant message of another speaker). A terse answer ("Lisbon,
/// next month.") means nothing without it, and the question holds the words a later question about
/// the answer uses; the question itself is never kept as a memory of its own.
pub fn answered_question(
    record: &ThreadRecord,
    previous: Option<&ThreadRecord>,
) -> Option<AnsweredQuestion> {
    let previous = previous?;
    if previous.record.speaker == record.record.speaker || previous.sequence >= record.sequence {
        return None;
    }
    let (RecordBody::UserInput { text } | RecordBody::AssistantMessage { text }) =
        &previous.record.body
    else {
        return None;
    };
    let question = segment(text)
        .into_iter()
        .rev()
        .find(|sentence| sentence.kind == SentenceKind::Dropped(DropReason::Question))?;
    let asked = question.text(text);
    if asked.len() > MAX_ANSWERED_QUESTION_BYTES {
        return None;
    }
    Some(AnsweredQuestion {
        text: asked.to_owned(),
        speaker: previous.record.speaker.clone(),
        thread: previous.thread.clone(),
        sequence: previous.sequence,
        digest: previous.digest.clone(),
    })
}

/// Longest question carried by the statements answering it; a longer one is left out (a pasted
/// questionnaire is no context for a short answer).
pub const MAX_ANSWERED_QUESTION_BYTES: usize = 300;

/// The metadata member naming the question a statement answers: `{"text", "speaker", "thread",
/// "sequence", "record_digest"}` of the asking record, so forgetting that record can take the question out of the
/// statement again ([`strip_answered_question`]).
pub const ANSWERING: &str = "answering";

/// The text a statement is kept with when it answers `question`: the statement, then the question
/// in brackets, so both search and a reading model see what was answered.
pub fn with_answered_question(statement: &str, question: &str) -> String {
    format!("{statement} {}", answered_suffix(question))
}

fn answered_suffix(question: &str) -> String {
    format!("(answering: {question})")
}

/// `content` without the question it answers (text and [`ANSWERING`] member), when it names the
/// record `digest` as the asker; `None` when it does not. A text changed since (a human
/// correction) keeps its words; only the member goes.
pub fn strip_answered_question(content: &MemoryContent, digest: &str) -> Option<MemoryContent> {
    let answering = content.metadata.get(ANSWERING)?;
    if answering["record_digest"].as_str() != Some(digest) {
        return None;
    }
    let mut stripped = content.clone();
    statement_text(content).clone_into(&mut stripped.text);
    stripped.metadata.remove(ANSWERING);
    Some(stripped)
}

/// The statement a statement document says, without the question it answers (its whole text when
/// it answers none, or when the text no longer ends with the question: a human changed it).
pub fn statement_text(content: &MemoryContent) -> &str {
    content
        .metadata
        .get(ANSWERING)
        .and_then(|answering| answering["text"].as_str())
        .and_then(|question| content.text.strip_suffix(&answered_suffix(question)))
        .map_or(content.text.as_str(), str::trim_end)
}

/// Most incarnations of one attested document (see [`Contribution::Attest`]): a statement forgotten
/// this many times and said again is not remembered again (the processor logs it).
pub const MAX_INCARNATIONS: u32 = 64;

/// The document id of incarnation `incarnation` of `target`: `target` itself for 0, else
/// `<target>~<incarnation>`.
pub fn incarnation_id(target: &DocumentId, incarnation: u32) -> Result<DocumentId, MemoryError> {
    if incarnation == 0 {
        return Ok(target.clone());
    }
    DocumentId::new(format!("{}~{incarnation}", target.as_str()))
}

/// Which incarnation of `target` the document `id` is (`None`: none of them).
pub fn incarnation_of(target: &DocumentId, id: &DocumentId) -> Option<u32> {
    if id == target {
        return Some(0);
    }
    let suffix = id
        .as_str()
        .strip_prefix(target.as_str())?
        .strip_prefix('~')?;
    let incarnation = suffix.parse::<u32>().ok()?;
    // Only the canonical spelling names an incarnation, so each has exactly one id.
    (incarnation > 0 && suffix == incarnation.to_string()).then_some(incarnation)
}

/// The document id of what `speaker` states when saying `text`: `s-` and 32 hex digits of SHA-256
/// over the speaker and the statement's [`normalize`]d text, so the same statement said again by the
/// same person (in any thread bound to the same destination) is the same document.
pub fn statement_document_id(speaker: &str, text: &str) -> Result<DocumentId, MemoryError> {
    let normalized = normalize(text);
    let mut hasher = Sha256::new();
    for part in [speaker, normalized.as_str()] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let hex: String = hasher.finalize()[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    DocumentId::new(format!("s-{hex}"))
}

/// Whether `document` is still the statement its id was derived from by `speaker` (its text not
/// changed since, beyond case, spacing and trailing punctuation): cleanup tells an attested
/// statement, which goes with its last witness, from a human correction, which stays.
pub fn is_statement_of(key: &DocumentId, speaker: &str, text: &str) -> bool {
    statement_document_id(speaker, text)
        .is_ok_and(|statement| incarnation_of(&statement, key).is_some())
}

/// One statement the default extractor keeps: the document it belongs to and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptStatement {
    /// The statement's document ([`statement_document_id`]).
    pub target: DocumentId,
    /// The sentence, its attribution and its evidence.
    pub content: MemoryContent,
}

/// What the default extractor finds in one record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordStatements {
    /// Statements kept, in the order said, each once.
    pub kept: Vec<KeptStatement>,
    /// Sentences not kept, by reason ([`DropReason::as_str`]).
    pub dropped: BTreeMap<String, u64>,
}

/// The default extractor: each statement a user makes becomes one attributed memory.
///
/// - Only user input is a statement. Assistant messages, tool calls and tool results are never
///   witnesses: an assistant repeating what a user said adds neither a document nor an attribution.
/// - A user input is split into sentences and classified ([`crate::statements`]): statements are
///   kept; questions, requests, greetings, acknowledgements, pasted code and empty parts are dropped
///   and counted by reason, as is a statement the same record already made (`repeated`). An input
///   of only whitespace counts once as `empty`.
/// - Each kept sentence attests the document of its statement ([`statement_document_id`]), so a
///   statement said again later by the same speaker is one document with one more attribution.
///   Its content is the sentence as written; metadata `kind: statement`, the `record_digest` and
///   `evidence: {"start", "end"}`, the sentence's byte range in the record's text (for the first
///   record that said it: later ones add attributions only).
/// - A statement of a record that answers another speaker's question (the last question of the
///   thread's previous record, [`answered_question`]) keeps it: its text is the sentence followed by
///   `(answering: <question>)`, and the [`ANSWERING`] member names the asking record, which keeps a
///   reference of its own to the document so that forgetting it takes the question out again
///   ([`crate::app::RemoveSourceAttributions`]). Measured on LoCoMo through the worker, this is what
///   brings hybrid recall to the direct import's level: the question holds the words a later
///   question about the answer uses. The document id is still the statement's alone.
/// - Speaker, observers and activity time come from the record; the attribution's origin is
///   `thread-record:<digest>`, its locator points back at the thread record (sequence and digest
///   prefix), and `interpretation` is `stated`.
/// - Documents go to the thread's destination, recallable through its scopes.
#[derive(Debug, Clone, Default)]
pub struct StatementExtractor;

impl StatementExtractor {
    /// The default extractor.
    pub fn new() -> Self {
        Self
    }

    /// The statements `record` makes and the sentences it drops; each statement carries
    /// `answering`, the question the record answers, when there is one.
    pub fn statements(
        &self,
        record: &ThreadRecord,
        answering: Option<&AnsweredQuestion>,
        now: EpochMillis,
    ) -> Result<RecordStatements, MemoryError> {
        let RecordBody::UserInput { text } = &record.record.body else {
            return Ok(RecordStatements::default());
        };
        let sentences = segment(text);
        let mut found = RecordStatements {
            kept: Vec::new(),
            dropped: dropped_counts(&sentences),
        };
        if sentences.is_empty() {
            found
                .dropped
                .insert(DropReason::Empty.as_str().to_owned(), 1);
        }
        for sentence in sentences {
            if sentence.kind != SentenceKind::Statement {
                continue;
            }
            let said = sentence.text(text);
            let target = statement_document_id(&record.record.speaker, said)?;
            if found.kept.iter().any(|kept| kept.target == target) {
                *found
                    .dropped
                    .entry(DropReason::Repeated.as_str().to_owned())
                    .or_insert(0) += 1;
                continue;
            }
            let mut metadata = statement_metadata(record);
            metadata.insert(
                "evidence".to_owned(),
                serde_json::json!({ "start": sentence.start, "end": sentence.end }),
            );
            let text = match answering {
                Some(question) => {
                    metadata.insert(
                        ANSWERING.to_owned(),
                        serde_json::json!({
                            "text": question.text,
                            "speaker": question.speaker,
                            "thread": question.thread.as_str(),
                            "sequence": question.sequence.get(),
                            "record_digest": question.digest.as_str(),
                        }),
                    );
                    with_answered_question(said, &question.text)
                }
                None => said.to_owned(),
            };
            found.kept.push(KeptStatement {
                target,
                content: statement_content(record, text, metadata, now),
            });
        }
        Ok(found)
    }

    /// All statements of `record` as one proposal (for an intent that names one target), or `None`
    /// when it makes none: the kept sentences joined by a space, with metadata `kind: statement`,
    /// the `record_digest` and `evidence_spans`, the sentences' byte ranges.
    pub fn statement(&self, record: &ThreadRecord, now: EpochMillis) -> Option<MemoryContent> {
        let RecordBody::UserInput { text } = &record.record.body else {
            return None;
        };
        let kept: Vec<Sentence> = segment(text)
            .into_iter()
            .filter(|sentence| sentence.kind == SentenceKind::Statement)
            .collect();
        if kept.is_empty() {
            return None;
        }
        let joined = kept
            .iter()
            .map(|sentence| sentence.text(text))
            .collect::<Vec<_>>()
            .join(" ");
        let spans: Vec<serde_json::Value> = kept
            .iter()
            .map(|sentence| serde_json::json!({ "start": sentence.start, "end": sentence.end }))
            .collect();
        let mut metadata = statement_metadata(record);
        metadata.insert("evidence_spans".to_owned(), spans.into());
        Some(statement_content(record, joined, metadata, now))
    }
}

fn statement_metadata(record: &ThreadRecord) -> serde_json::Map<String, serde_json::Value> {
    let mut metadata = serde_json::Map::new();
    metadata.insert("kind".to_owned(), "statement".into());
    metadata.insert("record_digest".to_owned(), record.digest.as_str().into());
    metadata
}

/// What `record` states as `text`, attributed to the record (speaker, observers and activity time
/// from it; interpretation `stated`), stamped `now`.
pub(crate) fn statement_content(
    record: &ThreadRecord,
    text: String,
    metadata: serde_json::Map<String, serde_json::Value>,
    now: EpochMillis,
) -> MemoryContent {
    MemoryContent {
        text,
        attributions: vec![MemoryAttribution {
            origin_id: record_origin_id(&record.digest),
            speaker: record.record.speaker.clone(),
            observers: record.record.observers.clone(),
            locator: record.locator(),
            activity_at: record.record.occurred_at,
            interpretation: "stated".to_owned(),
        }],
        metadata,
        recorded_at: now,
        extracted_at: now,
    }
}

/// The origin id of attributions to a thread record: `thread-record:<digest>`.
pub fn record_origin_id(digest: &RecordDigest) -> String {
    format!("thread-record:{}", digest.as_str())
}

impl RecordExtractor for StatementExtractor {
    fn extract(
        &self,
        record: &ThreadRecord,
        previous: Option<&ThreadRecord>,
        destination: &ThreadDestination,
        now: EpochMillis,
    ) -> Result<Extraction, ApplicationError> {
        let answering = answered_question(record, previous);
        let found = self.statements(record, answering.as_ref(), now)?;
        Ok(Extraction {
            contributions: found
                .kept
                .into_iter()
                .map(|kept| {
                    Contribution::attest(
                        destination.namespace().clone(),
                        kept.target,
                        kept.content,
                        destination.scopes().to_vec(),
                    )
                })
                .collect(),
            dropped: found.dropped,
            model: ModelUsage::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use memory_core::activity::{NewRecord, RecordDigest, Sequence, ThreadId};

    fn record(speaker: &str, text: &str) -> ThreadRecord {
        let thread = ThreadId::new("t").unwrap();
        let record = NewRecord::user(speaker, text, 5);
        ThreadRecord {
            digest: RecordDigest::of(&thread, Sequence::new(1), &record),
            thread,
            sequence: Sequence::new(1),
            record,
        }
    }

    #[test]
    fn statement_ids_name_the_speaker_and_the_normalized_text() {
        let id = statement_document_id("ana", "I like tea.").unwrap();
        assert!(id.as_str().starts_with("s-") && id.as_str().len() == 34);
        assert_eq!(id, statement_document_id("ana", " i LIKE  tea!").unwrap());
        assert_ne!(id, statement_document_id("bea", "I like tea.").unwrap());
        assert_ne!(id, statement_document_id("ana", "I like coffee.").unwrap());
        // Length-prefixed parts: moving a word between speaker and text is another statement.
        assert_ne!(
            statement_document_id("ana i", "like tea").unwrap(),
            statement_document_id("ana", "i like tea").unwrap()
        );
        for incarnation in [0, 1, 17] {
            let next = incarnation_id(&id, incarnation).unwrap();
            assert_eq!(incarnation_of(&id, &next), Some(incarnation));
            assert!(is_statement_of(&next, "ana", "I like tea"));
        }
        for other in ["s-x", "x~1", "~01", "~0", "~-1", "~1~2", "~"] {
            let other = DocumentId::new(format!("{}{other}", id.as_str())).unwrap();
            assert_eq!(incarnation_of(&id, &other), None, "{other:?}");
        }
        assert!(!is_statement_of(&id, "ana", "I like green tea"));
    }

    #[test]
    fn a_record_keeps_each_statement_once_and_counts_the_rest() {
        let text = "Hi! I like tea. Do you? I like tea! ```x```";
        let found = StatementExtractor::new()
            .statements(&record("ana", text), None, 9)
            .unwrap();
        assert_eq!(found.kept.len(), 1);
        let kept = &found.kept[0];
        assert_eq!(kept.content.text, "I like tea.");
        assert_eq!(
            kept.target,
            statement_document_id("ana", "I like tea").unwrap()
        );
        assert_eq!(
            kept.content.metadata["evidence"],
            serde_json::json!({"start": 4, "end": 15})
        );
        assert_eq!(kept.content.extracted_at, 9);
        assert_eq!(
            found.dropped,
            [
                ("code", 1),
                ("greeting", 1),
                ("question", 1),
                ("repeated", 1)
            ]
            .into_iter()
            .map(|(reason, count)| (reason.to_owned(), count))
            .collect()
        );
        let blank = StatementExtractor::new()
            .statements(&record("ana", " \n "), None, 9)
            .unwrap();
        assert!(blank.kept.is_empty());
        assert_eq!(blank.dropped, BTreeMap::from([("empty".to_owned(), 1)]));
        let proposal = StatementExtractor::new()
            .statement(&record("ana", "Hi! I like tea. I live in Lisbon. Why?"), 9)
            .unwrap();
        assert_eq!(proposal.text, "I like tea. I live in Lisbon.");
        assert_eq!(
            proposal.metadata["evidence_spans"],
            serde_json::json!([{"start": 4, "end": 15}, {"start": 16, "end": 33}])
        );
        assert_eq!(
            StatementExtractor::new().statement(&record("ana", "Thanks!"), 9),
            None
        );
    }
}
