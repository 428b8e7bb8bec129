//! The model extractor: a language model on an OpenAI-compatible endpoint proposes memories, and
//! only what the user said, literally, is kept ([`crate::proposals`]).
//!
//! - **A batch per call.** Asked about a user's record it has not seen, the extractor shows the model
//!   that record and the records after it in the processor's page (up to [`ModelLimits::batch_records`]
//!   records and [`ModelLimits::batch_chars`] characters; forgotten records and tool records are never
//!   shown; the record before the batch is shown as context only, never quotable), with the
//!   destination's closest existing memories (ids and text, through [`Resemblance`]). The answer's
//!   proposals are checked, and each kept one goes to the record it quotes. The processor asks about
//!   the batch's later records in turn and gets their share from memory, so a call covers the batch.
//!   (A batch's share not yet saved when the worker stops is asked for again by the next worker; a
//!   share that was saved never is: the processor replays it.)
//! - **What is kept.** A kept proposal attests the document of its text as said by the quoted record's
//!   speaker ([`crate::extract::statement_document_id`]: the same memory proposed again adds an
//!   attribution), with the record's attribution (speaker, observers and time from the record, never
//!   from the model), `kind: proposal`, the `record_digest`, its `quotes` and the `model`'s name; it
//!   goes to the thread's destination and its scopes, which the model never sees. A `corrects` of a
//!   shown memory is stored as the [`CORRECTS`] link, with the revision that was shown.
//! - **What is counted.** Rejected proposals are dropped parts of the asking record, by rule
//!   (`unsupported_quote`, `unsupported_text`, `unsupported_correction`), as are proposals past
//!   [`MAX_PROPOSALS`] (`too_many_proposals`) and a second proposal of the same memory for the same
//!   record (`repeated`). The calls, tokens and milliseconds are noted with the asking record
//!   ([`memory_core::activity::ModelUsage`]).
//! - **Failures.** A transient failure of the endpoint (down, 429, 5xx, a timeout; each already tried
//!   again within the client's bounds) defers the thread to a later pass. An answer that is not the
//!   asked JSON is asked for again, up to [`ModelLimits::answer_attempts`] calls; after that, or on a
//!   failure a retry would repeat (a 4xx, a request too large), the thread is parked with kind
//!   `model`. Nothing is handed to another extractor unless the worker was told so
//!   (`--fallback statements`): then the record is extracted by the statement extractor instead, and
//!   counted as a fallback.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use memory_core::DocumentId;
use memory_core::activity::{
    ModelUsage, RecordBody, Sequence, ThreadDestination, ThreadId, ThreadRecord,
};
use memory_core::document::MemoryContent;
use memory_core::recall::corrections::{CORRECTS, CorrectionLink};
use memory_model::{AnswerSchema, CallFailure, ChatAnswer, ChatModel, ChatRequest, ModelError};
use serde::Deserialize;

use crate::corrections::Resemblance;
use crate::error::ApplicationError;
use crate::extract::{
    Contribution, ExtractFailure, Extraction, ExtractionRequest, StatementExtractor,
    ThreadExtractor, statement_content, statement_document_id, statement_text,
};
use crate::proposals::{Proposal, Quote, Rejection, check};

/// Most proposals of one answer that are checked; the rest are counted as `too_many_proposals`.
pub const MAX_PROPOSALS: usize = 32;
/// Most batch shares held for records not yet asked about (past it, the oldest are asked again).
pub const MAX_HELD_SHARES: usize = 4_096;

/// How much one call shows and how often a wrong answer is asked again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLimits {
    /// Most records shown in one call.
    pub batch_records: usize,
    /// Most characters of record text shown in one call (a longer first record is shown cut, and
    /// quotes from what was shown are still its own words).
    pub batch_chars: usize,
    /// Most existing memories shown.
    pub shown_memories: usize,
    /// Most tokens of an answer.
    pub max_tokens: u32,
    /// Calls made for one batch while the answers are not the asked JSON.
    pub answer_attempts: u32,
}

impl Default for ModelLimits {
    fn default() -> Self {
        Self {
            batch_records: 8,
            batch_chars: 12_000,
            shown_memories: 8,
            max_tokens: 1_024,
            answer_attempts: 2,
        }
    }
}

/// The extractor of the module docs.
pub struct ModelExtractor {
    model: Arc<dyn ChatModel>,
    memories: Option<Arc<dyn Resemblance>>,
    fallback: Option<StatementExtractor>,
    limits: ModelLimits,
    held: Mutex<HeldShares>,
}

impl std::fmt::Debug for ModelExtractor {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ModelExtractor")
            .field("model", &self.model.name())
            .field("fallback", &self.fallback.is_some())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Shares of batches for records the processor has not asked about yet.
#[derive(Default)]
struct HeldShares {
    shares: HashMap<(ThreadId, Sequence), HeldShare>,
}

struct HeldShare {
    /// The record's digest and destination when the batch was asked: a share is only ever handed to
    /// the same record going to the same place.
    digest: String,
    destination: ThreadDestination,
    extraction: Extraction,
}

impl ModelExtractor {
    /// An extractor asking `model`, showing it the memories `memories` finds (none without it).
    pub fn new(model: Arc<dyn ChatModel>, memories: Option<Arc<dyn Resemblance>>) -> Self {
        Self {
            model,
            memories,
            fallback: None,
            limits: ModelLimits::default(),
            held: Mutex::new(HeldShares::default()),
        }
    }

    /// Extracts a record by the statement extractor when the model fails, instead of deferring or
    /// parking its thread (`remembering-worker --fallback statements`).
    pub fn with_statement_fallback(mut self) -> Self {
        self.fallback = Some(StatementExtractor::new());
        self
    }

    /// Replaces the limits.
    pub fn with_limits(mut self, limits: ModelLimits) -> Self {
        self.limits = limits;
        self
    }

    fn take_held(&self, request: &ExtractionRequest<'_>) -> Option<Extraction> {
        let record = request.record;
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let share = held
            .shares
            .remove(&(record.thread.clone(), record.sequence))?;
        (share.digest == record.digest.as_str() && share.destination == *request.destination)
            .then_some(share.extraction)
    }

    fn hold(&self, destination: &ThreadDestination, shares: Vec<(&ThreadRecord, Extraction)>) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.shares.len() + shares.len() > MAX_HELD_SHARES {
            held.shares.clear();
        }
        for (record, extraction) in shares {
            held.shares.insert(
                (record.thread.clone(), record.sequence),
                HeldShare {
                    digest: record.digest.as_str().to_owned(),
                    destination: destination.clone(),
                    extraction,
                },
            );
        }
    }

    /// The records one call shows, the asking record first.
    fn batch<'r>(
        &self,
        request: &ExtractionRequest<'r>,
    ) -> Result<Vec<&'r ThreadRecord>, ExtractFailure> {
        let mut batch = vec![request.record];
        let mut chars = shown_text(request.record).map_or(0, |(_, text)| text.chars().count());
        for record in request.following {
            if batch.len() >= self.limits.batch_records {
                break;
            }
            let Some((_, text)) = shown_text(record) else {
                continue;
            };
            let length = text.chars().count();
            if chars + length > self.limits.batch_chars {
                break;
            }
            if request.is_forgotten(record).map_err(transient)? {
                continue;
            }
            chars += length;
            batch.push(record);
        }
        Ok(batch)
    }

    async fn ask(
        &self,
        request: &ExtractionRequest<'_>,
        batch: &[&ThreadRecord],
    ) -> Result<(Extraction, Vec<Extraction>), (ModelUsage, ExtractFailure)> {
        let mut usage = ModelUsage::default();
        let shown = match &self.memories {
            Some(memories) => {
                let said: Vec<&str> = batch
                    .iter()
                    .filter(|record| matches!(record.record.body, RecordBody::UserInput { .. }))
                    .filter_map(|record| shown_text(record).map(|(_, text)| text))
                    .collect();
                memories
                    .resembling(
                        request.destination,
                        &said.join(" "),
                        self.limits.shown_memories,
                    )
                    .await
                    .map_err(|error| (usage, transient(error)))?
                    .into_iter()
                    .map(|found| found.document)
                    .collect()
            }
            None => Vec::new(),
        };
        let chat = ChatRequest {
            system: INSTRUCTIONS.to_owned(),
            user: material(request.previous, batch, &shown, self.limits.batch_chars),
            schema: Some(AnswerSchema {
                name: "memories".to_owned(),
                schema: answer_schema(batch.len()),
            }),
            max_tokens: self.limits.max_tokens,
        };
        let mut last_malformed = String::new();
        for _ in 0..self.limits.answer_attempts.max(1) {
            let answer =
                self.model.complete(&chat).await.map_err(|failure| {
                    (usage.plus(cost(&failure)), model_failure(failure.error))
                })?;
            usage = usage.plus(answered(&answer));
            match parse_answer(&answer.content) {
                Ok(proposals) => {
                    let shown_links: Vec<CorrectionLink> = shown
                        .iter()
                        .map(|document| CorrectionLink {
                            id: document.key.id.clone(),
                            revision: document.revision.clone(),
                        })
                        .collect();
                    return Ok(self.distribute(request, batch, proposals, &shown_links, usage));
                }
                Err(why) => {
                    tracing::warn!(
                        model = self.model.name(),
                        why,
                        "the model's answer is not the asked JSON"
                    );
                    last_malformed = why;
                }
            }
        }
        Err((
            usage,
            ExtractFailure::Permanent {
                kind: "model",
                source: ApplicationError::from(format!(
                    "the model answered {} times without the asked JSON: {last_malformed}",
                    self.limits.answer_attempts.max(1)
                )),
            },
        ))
    }

    /// Checks each proposal and gives each kept one to the record it quotes: the asking record's
    /// extraction (with the counts and the usage) and the later records' shares, in batch order.
    fn distribute(
        &self,
        request: &ExtractionRequest<'_>,
        batch: &[&ThreadRecord],
        proposals: Vec<Proposal>,
        shown: &[CorrectionLink],
        usage: ModelUsage,
    ) -> (Extraction, Vec<Extraction>) {
        let records: Vec<ThreadRecord> = batch.iter().map(|record| (*record).clone()).collect();
        let shown_ids: Vec<DocumentId> = shown.iter().map(|link| link.id.clone()).collect();
        let mut shares: Vec<Extraction> = vec![Extraction::default(); batch.len()];
        let mut dropped: BTreeMap<String, u64> = BTreeMap::new();
        let total = proposals.len();
        for proposal in proposals.into_iter().take(MAX_PROPOSALS) {
            let quoted = match check(&proposal, &records, &shown_ids) {
                Ok(quoted) => quoted,
                Err(rejection) => {
                    *dropped.entry(rejection.as_str().to_owned()).or_default() += 1;
                    continue;
                }
            };
            let Some(place) = records
                .iter()
                .position(|record| record.sequence == quoted.sequence)
            else {
                continue;
            };
            let Ok(target) = statement_document_id(&quoted.record.speaker, &proposal.text) else {
                *dropped
                    .entry(Rejection::UnsupportedText.as_str().to_owned())
                    .or_default() += 1;
                continue;
            };
            let share = &mut shares[place];
            let already = share.contributions.iter().any(|contribution| {
                matches!(contribution, Contribution::Attest { target: kept, .. } if *kept == target)
            });
            if already {
                *dropped.entry("repeated".to_owned()).or_default() += 1;
                continue;
            }
            let link = proposal
                .corrects
                .as_ref()
                .and_then(|id| shown.iter().find(|link| link.id.as_str() == id));
            share.contributions.push(Contribution::attest(
                request.destination.namespace().clone(),
                target,
                self.content(quoted, &proposal, link, request.now),
                request.destination.scopes().to_vec(),
            ));
        }
        if total > MAX_PROPOSALS {
            dropped.insert(
                "too_many_proposals".to_owned(),
                (total - MAX_PROPOSALS) as u64,
            );
        }
        let mut shares = shares.into_iter();
        let mut asking = shares.next().unwrap_or_default();
        asking.dropped = dropped;
        asking.model = usage;
        (asking, shares.collect())
    }

    fn content(
        &self,
        record: &ThreadRecord,
        proposal: &Proposal,
        corrects: Option<&CorrectionLink>,
        now: memory_core::document::EpochMillis,
    ) -> MemoryContent {
        let mut metadata = serde_json::Map::new();
        metadata.insert("kind".to_owned(), "proposal".into());
        metadata.insert("record_digest".to_owned(), record.digest.as_str().into());
        metadata.insert(
            "quotes".to_owned(),
            proposal
                .evidence
                .iter()
                .map(|quote| serde_json::Value::from(quote.text.as_str()))
                .collect(),
        );
        metadata.insert("model".to_owned(), self.model.name().into());
        if let Some(link) = corrects {
            metadata.insert(CORRECTS.to_owned(), link.to_json());
        }
        statement_content(record, proposal.text.trim().to_owned(), metadata, now)
    }

    async fn fall_back(
        &self,
        request: &ExtractionRequest<'_>,
        usage: ModelUsage,
        failure: ExtractFailure,
    ) -> Result<Extraction, ExtractFailure> {
        let Some(statements) = &self.fallback else {
            return Err(failure);
        };
        let reason = match &failure {
            ExtractFailure::Permanent { source, .. } | ExtractFailure::Transient(source) => {
                source.to_string()
            }
        };
        tracing::warn!(
            model = self.model.name(),
            reason,
            "the model failed: extracting statements instead"
        );
        // The statement extractor as the worker runs it without a model (the blanket impl).
        let mut extraction = ThreadExtractor::extract_thread(statements, *request).await?;
        extraction.model = usage.plus(ModelUsage {
            fallbacks: 1,
            ..ModelUsage::default()
        });
        Ok(extraction)
    }
}

impl ThreadExtractor for ModelExtractor {
    async fn extract_thread(
        &self,
        request: ExtractionRequest<'_>,
    ) -> Result<Extraction, ExtractFailure> {
        if let Some(held) = self.take_held(&request) {
            return Ok(held);
        }
        // Only a user's words become memory: a batch starts at a user's record.
        if !matches!(request.record.record.body, RecordBody::UserInput { .. }) {
            return Ok(Extraction::default());
        }
        let batch = self.batch(&request)?;
        match self.ask(&request, &batch).await {
            Ok((asking, later)) => {
                self.hold(
                    request.destination,
                    batch.iter().skip(1).copied().zip(later).collect(),
                );
                Ok(asking)
            }
            Err((usage, failure)) => self.fall_back(&request, usage, failure).await,
        }
    }
}

/// What the model is told.
const INSTRUCTIONS: &str = "\
You pick out what is worth remembering about the people in a conversation, for their assistant.
The records are numbered. Propose memories only from what a user (role user) states: facts about
themselves and the people and things in their life, plans, preferences, decisions. Questions,
greetings, requests and what the assistant says are never memories.
Each memory has:
- text: one short, self-contained sentence.
- evidence: one or more quotes, each copied character for character from one user record, with
  that record's number. All quotes of one memory come from the same record.
- corrects: the id of one of the listed existing memories when the user says in words (actually,
  not, no longer, instead, anymore, changed) that it is wrong or out of date; otherwise null.
Never write a name, a number or a date that is not in the quotes.
Answer with JSON only: {\"memories\": [...]}, an empty list when there is nothing to remember.";

/// Most characters of a memory's text in the answer schema: one short sentence.
pub const SCHEMA_TEXT_CHARS: usize = 300;
/// Most characters of one quote in the answer schema (a quote may be part of a record).
pub const SCHEMA_QUOTE_CHARS: usize = 300;
/// Most quotes of one memory in the answer schema.
pub const SCHEMA_QUOTES: usize = 3;

/// The answer's JSON schema, bounded for a batch of `records` records: at most two memories a
/// record (and never past [`MAX_PROPOSALS`]), [`SCHEMA_QUOTES`] quotes of [`SCHEMA_QUOTE_CHARS`] and a
/// text of [`SCHEMA_TEXT_CHARS`]. An endpoint that decodes under the schema (llama.cpp's grammar,
/// vLLM's guided decoding) then cannot run a small model's answer on to `max_tokens`, which it
/// otherwise does (an endless list, or one string that never closes). The bounds only shape what is
/// asked: what is kept is decided by [`crate::proposals`] whatever the answer's size.
fn answer_schema(records: usize) -> serde_json::Value {
    let memories = (records.max(1) * 2).min(MAX_PROPOSALS);
    serde_json::json!({
        "type": "object",
        "properties": {
            "memories": {
                "type": "array",
                "maxItems": memories,
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "minLength": 1, "maxLength": SCHEMA_TEXT_CHARS},
                        "evidence": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": SCHEMA_QUOTES,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "record": {"type": "integer"},
                                    "quote": {
                                        "type": "string",
                                        "minLength": 1,
                                        "maxLength": SCHEMA_QUOTE_CHARS
                                    }
                                },
                                "required": ["record", "quote"],
                                "additionalProperties": false
                            }
                        },
                        "corrects": {"type": ["string", "null"], "maxLength": 128}
                    },
                    "required": ["text", "evidence", "corrects"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["memories"],
        "additionalProperties": false
    })
}

/// A record's role and the text a call shows of it (`None`: a record no call shows).
fn shown_text(record: &ThreadRecord) -> Option<(&'static str, &str)> {
    match &record.record.body {
        RecordBody::UserInput { text } => Some(("user", text)),
        RecordBody::AssistantMessage { text } => Some(("assistant", text)),
        _ => None,
    }
}

/// The user message of a call: the memories shown, the context record and the batch.
fn material(
    previous: Option<&ThreadRecord>,
    batch: &[&ThreadRecord],
    shown: &[memory_core::MemoryDocument],
    batch_chars: usize,
) -> String {
    let mut material = String::from("Existing memories (id: text):\n");
    if shown.is_empty() {
        material.push_str("(none)\n");
    }
    for document in shown {
        material.push_str(&format!(
            "- {}: {}\n",
            document.key.id.as_str(),
            one_line(statement_text(&document.content))
        ));
    }
    if let Some((role, text)) = previous
        .and_then(|record| shown_text(record).map(|(role, text)| (record, role, text)))
        .map(|(record, role, text)| (format!("{} ({role})", record.record.speaker), text))
    {
        material.push_str("\nSaid just before (context only, not to be quoted):\n");
        material.push_str(&format!("{role}: {}\n", cut(text, batch_chars / 4)));
    }
    material.push_str("\nRecords:\n");
    for record in batch {
        if let Some((role, text)) = shown_text(record) {
            material.push_str(&format!(
                "[{}] {} ({role}): {}\n",
                record.sequence.get(),
                record.record.speaker,
                cut(text, batch_chars)
            ));
        }
    }
    material
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `chars` characters of `text` (cut at a character boundary).
fn cut(text: &str, chars: usize) -> &str {
    text.char_indices()
        .nth(chars)
        .map_or(text, |(end, _)| &text[..end])
}

#[derive(Deserialize)]
struct Answer {
    memories: Vec<ProposedMemory>,
}

#[derive(Deserialize)]
struct ProposedMemory {
    text: String,
    #[serde(default)]
    evidence: Vec<ProposedQuote>,
    #[serde(default)]
    corrects: Option<String>,
}

#[derive(Deserialize)]
struct ProposedQuote {
    record: u64,
    quote: String,
}

/// The proposals of an answer: the JSON object of the schema, alone or fenced in prose (a plain
/// answer of an endpoint without structured output); an empty `corrects` is none.
pub fn parse_answer(content: &str) -> Result<Vec<Proposal>, String> {
    let start = content.find('{').ok_or("no JSON object")?;
    let end = content.rfind('}').ok_or("no JSON object")?;
    let json = content.get(start..=end).ok_or("no JSON object")?;
    let answer: Answer =
        serde_json::from_str(json).map_err(|error| format!("not the asked JSON: {error}"))?;
    Ok(answer
        .memories
        .into_iter()
        .map(|memory| Proposal {
            text: memory.text,
            evidence: memory
                .evidence
                .into_iter()
                .map(|quote| Quote {
                    record: Sequence::new(quote.record),
                    text: quote.quote,
                })
                .collect(),
            corrects: memory.corrects.filter(|id| !id.is_empty()),
        })
        .collect())
}

fn answered(answer: &ChatAnswer) -> ModelUsage {
    ModelUsage {
        calls: 1,
        prompt_tokens: answer.usage.prompt,
        completion_tokens: answer.usage.completion,
        latency_ms: answer.latency_ms,
        fallbacks: 0,
    }
}

/// A failed call is a call too: its tokens were generated (an answer cut at `max_tokens` is the
/// costliest kind) and its time waited.
fn cost(failure: &CallFailure) -> ModelUsage {
    ModelUsage {
        calls: 1,
        prompt_tokens: failure.usage.prompt,
        completion_tokens: failure.usage.completion,
        latency_ms: failure.latency_ms,
        fallbacks: 0,
    }
}

fn model_failure(error: ModelError) -> ExtractFailure {
    if error.is_transient() {
        ExtractFailure::Transient(Box::new(error))
    } else {
        ExtractFailure::Permanent {
            kind: "model",
            source: Box::new(error),
        }
    }
}

fn transient(error: impl std::error::Error + Send + Sync + 'static) -> ExtractFailure {
    ExtractFailure::Transient(Box::new(error))
}
