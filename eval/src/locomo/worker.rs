//! `memory-eval locomo --via worker`: LoCoMo through the thread log and the remembering worker
//! instead of a direct import, then indexed and recalled exactly as [`super::run`] does.
//!
//! - Every turn is appended as a `user_input` record (speaker = the turn's speaker, the other speaker
//!   as observer, `occurred_at` = the session's date when it parses), one thread per session
//!   (`locomo/<conversation>/session-<N>`), bound by its first append to the conversation's
//!   destination: the namespace and scope the direct import writes and recalls through
//!   ([`super::run::namespace`], [`super::run::SCOPE`]).
//! - The worker is the `remembering-worker` binary's committed-activity work: the processors the
//!   binary builds ([`memory_service::worker::pending_pass`] with the binary's defaults,
//!   [`memory_service::worker::WorkerSettings::defaults`]; see [`worker`]) driven through [`PendingPass`]
//!   until no thread is pending. The binary's intent pass is not run: no intent is
//!   ever admitted here, so it would do nothing.
//! - Then one sync and every scored question in every mode through [`super::run::recall_all_judged`]
//!   (the code, modes and limits of `memory-eval locomo`). A recalled document counts as each turn it
//!   is attributed to: its attributions' `origin_id`s (`thread-record:<digest>`) name the records, and
//!   a map kept while appending names each record's turn. A restated sentence is one document with
//!   several attributions, so it counts as several turns.
//! - Extraction is measured from the progress store's totals ([`ProgressStore::extraction_totals`]),
//!   and an evidence turn (one a scored question cites) is **lost by extraction** when no current
//!   document of its conversation is attributed to its record. Each lost turn is listed with the
//!   extractor's drop reasons for it and its sentences ([`crate::locomo::worker::LostTurn`]).
//!
//! Measured on all ten conversations (`memory-eval locomo --via worker`, the extractor of issue 30):
//! 5,882 records, 11,823 memories kept (11,624 documents), 5,274 sentences dropped (acknowledgement
//! 2,092, question 1,883, greeting 727, request 560, empty 9, code 3); 24 of 1,428 evidence turns
//! lost, 10 questions with all of their evidence lost. Hybrid hit@5 / hit@10 / share@10 0.687 /
//! 0.758 / 0.682 against the direct import's 0.706 / 0.792 / 0.722; the embedding modes gain
//! (exact hit@10 0.514 to 0.657: a sentence embeds better than a turn), lexical loses (0.682 to
//! 0.660). Where the 0.034 goes, measured once with documents cut as the extractor cuts them but
//! written through the import in turn order (hybrid hit@10): turns without their question
//! sentences 0.770, turns without the other dropped sentences 0.784, turns with only the kept
//! sentences 0.766, every sentence its own document with nothing dropped 0.762, only the kept
//! sentences as documents 0.757 (the worker's shape). So sentence-sized documents and dropped
//! questions each cost about 0.02-0.03 (the hybrid's context borrows from the turns around a reply,
//! and the question before an answer holds the words a question about it uses); evidence lost
//! outright costs at most 0.007.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use memory_core::activity::{
    ExtractionTotals, NewRecord, ProgressStore, RecordBody, ThreadDestination, ThreadId, ThreadLog,
    ThreadRecord,
};
use memory_core::{DynamicNamespace, MemoryLister, MemoryScope};
use memory_model::MeterSnapshot;
use memory_service::settings::Settings;
use memory_service::worker::{
    CorrectionLinking, ModelExtraction, ProcessorStores, WorkerExtractor, WorkerSettings,
    pending_pass,
};
use memory_sqlite::SqliteStore;
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use remembering::extract::record_origin_id;
use remembering::statements::{SentenceKind, segment};
use remembering::{PendingPass, StatementExtractor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::data::Conversation;
use super::run::{Answer, SCOPE, namespace, open_service, recall_all_judged, sync};
use crate::progress::Progress;

/// Passes in a row that process nothing while threads stay pending before the run is called stuck.
pub const MAX_IDLE_PASSES: usize = 3;
/// Most characters of a lost turn's text in the report.
pub const EXCERPT_CHARS: usize = 160;

/// The thread of a conversation's session.
pub fn thread_of(conversation: &Conversation, session: u32) -> anyhow::Result<ThreadId> {
    Ok(ThreadId::new(format!(
        "locomo/{}/session-{session}",
        conversation.id
    ))?)
}

/// The destination of a conversation's threads: its namespace and the scope the recall uses.
pub fn destination(conversation: &Conversation) -> anyhow::Result<ThreadDestination> {
    let namespace: DynamicNamespace = serde_json::from_value(namespace(conversation))?;
    let address = namespace
        .address()
        .context("the conversation's namespace")?;
    Ok(ThreadDestination::new(
        address,
        vec![MemoryScope::new(SCOPE)?],
    )?)
}

/// One appended turn.
#[derive(Debug, Clone)]
pub struct AppendedTurn {
    /// Index of its conversation in file order.
    pub conversation: usize,
    /// Its `dia_id`.
    pub dia_id: String,
    /// The record as the log stored it.
    pub record: ThreadRecord,
}

/// Every appended turn, found by its record's attribution origin id.
#[derive(Debug, Clone, Default)]
pub struct TurnLedger {
    turns: Vec<AppendedTurn>,
    by_origin: HashMap<String, usize>,
    by_turn: HashMap<(usize, String), usize>,
}

impl TurnLedger {
    /// Every turn, in append order.
    pub fn turns(&self) -> &[AppendedTurn] {
        &self.turns
    }

    fn push(&mut self, turn: AppendedTurn) {
        let index = self.turns.len();
        self.by_origin
            .insert(record_origin_id(&turn.record.digest), index);
        self.by_turn
            .insert((turn.conversation, turn.dia_id.clone()), index);
        self.turns.push(turn);
    }

    /// The turn an attribution's `origin_id` names.
    pub fn turn_of_origin(&self, origin_id: &str) -> Option<&AppendedTurn> {
        self.by_origin
            .get(origin_id)
            .map(|index| &self.turns[*index])
    }

    /// The turns of `conversation` a recalled passage's document is attributed to, each once, in
    /// attribution order.
    pub fn turns_of_passage(&self, conversation: usize, passage: &Value) -> Vec<String> {
        let mut turns: Vec<String> = Vec::new();
        for attribution in passage["content"]["attributions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(turn) = attribution["origin_id"]
                .as_str()
                .and_then(|origin| self.turn_of_origin(origin))
                && turn.conversation == conversation
                && !turns.contains(&turn.dia_id)
            {
                turns.push(turn.dia_id.clone());
            }
        }
        turns
    }
}

/// Appends every turn of `conversations` to `log` (see the module documentation).
pub fn append_turns(
    log: &dyn ThreadLog,
    conversations: &[Conversation],
    progress: &Progress,
) -> anyhow::Result<TurnLedger> {
    let total: usize = conversations.iter().map(|c| c.turns().count()).sum();
    let bar = progress.bar("append", total as u64);
    let mut ledger = TurnLedger::default();
    for (index, conversation) in conversations.iter().enumerate() {
        let destination = destination(conversation)?;
        let mut speakers: Vec<&str> = Vec::new();
        for (_, turn) in conversation.turns() {
            if !speakers.contains(&turn.speaker.as_str()) {
                speakers.push(&turn.speaker);
            }
        }
        for session in &conversation.sessions {
            let thread = thread_of(conversation, session.number)?;
            for turn in &session.turns {
                let record = NewRecord {
                    occurred_at: session.activity_at,
                    speaker: turn.speaker.clone(),
                    observers: speakers
                        .iter()
                        .filter(|speaker| **speaker != turn.speaker)
                        .map(|speaker| (*speaker).to_owned())
                        .collect(),
                    body: RecordBody::UserInput {
                        text: turn.text.clone(),
                    },
                    opaque_cursor: None,
                };
                let stored = log
                    .append_to(&thread, Some(&destination), record)
                    .with_context(|| format!("appending {} {}", conversation.id, turn.dia_id))?;
                ledger.push(AppendedTurn {
                    conversation: index,
                    dia_id: turn.dia_id.clone(),
                    record: stored,
                });
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(ledger)
}

/// The stores the worker runs on, all in one SQLite file (the binary's `sqlite_stores`).
#[derive(Clone)]
pub struct WorkerStores {
    /// The memory store (also the service's).
    pub memory: Arc<SqliteStore>,
    /// The thread log.
    pub log: Arc<SqliteThreadLog>,
    /// Activity progress (and the extraction notes).
    pub progress: Arc<SqliteProgressStore>,
    /// Source references and suppression.
    pub remembering: Arc<SqliteRememberingStore>,
}

impl WorkerStores {
    /// The activity stores of `database`, beside `memory` (already open on the same file).
    pub fn open(database: &Path, memory: Arc<SqliteStore>) -> anyhow::Result<Self> {
        Ok(Self {
            memory,
            log: Arc::new(SqliteThreadLog::open(database).context("opening the thread log")?),
            progress: Arc::new(
                SqliteProgressStore::open(database).context("opening activity progress")?,
            ),
            remembering: Arc::new(
                SqliteRememberingStore::open(database).context("opening the remembering store")?,
            ),
        })
    }
}

/// The committed-activity work of `remembering-worker` with its defaults: the very processors the
/// binary builds ([`memory_service::worker::pending_pass`] with [`WorkerSettings::defaults`]), under the
/// [`PendingPass`] the binary runs each pass. Corrections are linked as `MEMORY_CORRECTIONS` says, as
/// the binary reads it (`words` without it), so `MEMORY_CORRECTIONS=off` measures the run without
/// links.
pub fn worker(
    stores: &WorkerStores,
    model: Option<ModelExtraction>,
) -> anyhow::Result<PendingPass<SqliteStore, WorkerExtractor>> {
    let corrections = Settings::from_env()
        .map_err(|refusal| anyhow::anyhow!("{}", refusal.message()))?
        .corrections;
    worker_with(
        stores,
        CorrectionLinking::from_setting(corrections)
            .map_err(|refusal| anyhow::anyhow!("{}", refusal.message()))?,
        model,
    )
}

/// The binary's processors linking corrections as `corrections` says, extracting with `model`
/// (`remembering-worker --model-url`) or, without one, the statement extractor.
pub fn worker_with(
    stores: &WorkerStores,
    corrections: CorrectionLinking,
    model: Option<ModelExtraction>,
) -> anyhow::Result<PendingPass<SqliteStore, WorkerExtractor>> {
    let settings = WorkerSettings {
        corrections,
        model,
        ..WorkerSettings::defaults()?
    };
    Ok(pending_pass(
        &ProcessorStores {
            memory: stores.memory.clone(),
            log: stores.log.clone(),
            progress: stores.progress.clone(),
            remembering: stores.remembering.clone(),
        },
        &settings,
        None,
    )?)
}

/// What driving the worker to the end did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WorkerPasses {
    /// Pending passes run.
    pub passes: usize,
    /// Records processed over all of them.
    pub processed: usize,
    /// Processor passes that failed (the thread stayed pending and was retried).
    pub failed: usize,
    /// Threads parked (a model's answers that stayed wrong; the statement extractor parks none).
    #[serde(default)]
    pub parked: usize,
}

/// Runs `pending` pass after pass until `log` has no pending thread. [`MAX_IDLE_PASSES`] passes in a
/// row that process nothing fail the run (the measurement would be of part of the data); a parked
/// thread is counted ([`WorkerPasses::parked`]), and what it did not remember shows as evidence lost.
pub async fn drain(
    pending: &PendingPass<SqliteStore, WorkerExtractor>,
    log: &dyn ThreadLog,
    progress: &Progress,
) -> anyhow::Result<WorkerPasses> {
    let spinner = progress.spinner("remembering (worker passes)");
    let mut done = WorkerPasses::default();
    let mut idle = 0;
    loop {
        let report = pending.run().await.context("a worker pass")?;
        done.passes += 1;
        done.processed += report.processed;
        done.failed += report.failed;
        // A parked thread is part of what is measured (counted, and its records' evidence lost).
        done.parked += report.parked;
        if log.pending_threads(None, 1)?.is_empty() {
            break;
        }
        idle = if report.processed == 0 { idle + 1 } else { 0 };
        if idle >= MAX_IDLE_PASSES {
            bail!(
                "threads stay pending and {MAX_IDLE_PASSES} passes processed nothing: {report:?}"
            );
        }
    }
    spinner.finish_and_clear();
    Ok(done)
}

/// One evidence turn that no kept memory came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LostTurn {
    /// Its conversation's id.
    pub conversation: String,
    /// Its `dia_id`.
    pub dia_id: String,
    /// Who said it.
    pub speaker: String,
    /// Scored questions citing it.
    pub questions: usize,
    /// Why: the extractor's drop counts for its record, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Each sentence as the extractor classified it: `reason: text`.
    pub sentences: Vec<String>,
    /// Its text, cut at [`EXCERPT_CHARS`] characters.
    pub excerpt: String,
}

/// What extraction kept of the conversations, and which evidence it lost.
#[derive(Debug, Clone, Default)]
pub struct ExtractionCheck {
    /// Current documents in the conversations' namespaces.
    pub documents_in_store: usize,
    /// Turns with at least one kept memory.
    pub turns_with_memory: usize,
    /// Distinct turns cited as evidence by scored questions (ids naming no turn left out).
    pub evidence_turns: usize,
    /// Evidence ids of scored questions that name no turn of their conversation.
    pub evidence_naming_no_turn: usize,
    /// Scored questions all of whose evidence turns were lost.
    pub questions_with_all_evidence_lost: usize,
    /// The evidence turns lost, in conversation and turn order.
    pub lost: Vec<LostTurn>,
}

fn excerpt(text: &str) -> String {
    let mut cut: String = text.chars().take(EXCERPT_CHARS).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// Reads every current document of the conversations' namespaces and checks each scored question's
/// evidence turns against their attributions.
pub async fn check_extraction(
    store: &SqliteStore,
    conversations: &[Conversation],
    ledger: &TurnLedger,
) -> anyhow::Result<ExtractionCheck> {
    let mut check = ExtractionCheck::default();
    let mut remembered: BTreeSet<(usize, String)> = BTreeSet::new();
    for (index, conversation) in conversations.iter().enumerate() {
        let address = destination(conversation)?.namespace().clone();
        let mut after = None;
        loop {
            let page = store
                .list(&address, after, memory_core::MAX_LIST_LIMIT)
                .await
                .context("listing a conversation's memory")?;
            check.documents_in_store += page.documents.len();
            for document in &page.documents {
                for attribution in &document.content.attributions {
                    if let Some(turn) = ledger.turn_of_origin(&attribution.origin_id)
                        && turn.conversation == index
                    {
                        remembered.insert((index, turn.dia_id.clone()));
                    }
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    }
    check.turns_with_memory = remembered.len();
    let extractor = StatementExtractor::new();
    let mut cited: BTreeMap<(usize, String), usize> = BTreeMap::new();
    for (index, conversation) in conversations.iter().enumerate() {
        for question in conversation.scored_questions() {
            let mut all_lost = true;
            for id in &question.evidence {
                let key = (index, id.clone());
                if !ledger.by_turn.contains_key(&key) {
                    check.evidence_naming_no_turn += 1;
                    continue;
                }
                all_lost &= !remembered.contains(&key);
                *cited.entry(key).or_insert(0) += 1;
            }
            if all_lost
                && question
                    .evidence
                    .iter()
                    .any(|id| ledger.by_turn.contains_key(&(index, id.clone())))
            {
                check.questions_with_all_evidence_lost += 1;
            }
        }
    }
    check.evidence_turns = cited.len();
    for (key, questions) in cited {
        if remembered.contains(&key) {
            continue;
        }
        let Some(turn) = ledger.by_turn.get(&key).map(|index| &ledger.turns[*index]) else {
            continue;
        };
        let text = match &turn.record.record.body {
            RecordBody::UserInput { text } => text.as_str(),
            _ => "",
        };
        let dropped = extractor
            .statements(&turn.record, None, 0)
            .map(|found| found.dropped)
            .unwrap_or_default();
        let sentences = segment(text)
            .iter()
            .map(|sentence| {
                let reason = match sentence.kind {
                    SentenceKind::Statement => "statement",
                    SentenceKind::Dropped(reason) => reason.as_str(),
                };
                format!("{reason}: {}", sentence.text(text))
            })
            .collect();
        check.lost.push(LostTurn {
            conversation: conversations[key.0].id.clone(),
            dia_id: key.1,
            speaker: turn.record.record.speaker.clone(),
            questions,
            dropped,
            sentences,
            excerpt: excerpt(text),
        });
    }
    Ok(check)
}

/// Everything a via-worker run measured.
#[derive(Debug, Clone)]
pub struct ViaWorker {
    /// The extractor: `statements`, or `model NAME`.
    pub extractor: String,
    /// What the endpoint was asked, failed calls included (the model client's own meter).
    pub endpoint: Option<EndpointCalls>,
    /// Turns appended (records).
    pub appended: usize,
    /// Threads appended to (sessions).
    pub threads: usize,
    /// Seconds spent appending.
    pub append_seconds: f64,
    /// Seconds the worker took to drain the log.
    pub worker_seconds: f64,
    /// Its passes.
    pub passes: WorkerPasses,
    /// Seconds spent indexing with the real model (0 without it).
    pub sync_seconds: f64,
    /// The progress store's extraction totals.
    pub totals: ExtractionTotals,
    /// What extraction kept, and the evidence it lost.
    pub check: ExtractionCheck,
    /// Per mode, every scored question's answer.
    pub answers: BTreeMap<String, Vec<Answer>>,
}

/// The whole via-worker path over a fresh SQLite file at `database` (an existing one is removed
/// first, with its `-wal` and `-shm`: appending twice would double every thread): append, drain the
/// worker, check extraction, then (with `semantic`, one sync with the real model, as `locomo` does)
/// recall every scored question in each of `modes`.
pub async fn measure(
    database: &Path,
    conversations: &[Conversation],
    modes: &[&str],
    semantic: bool,
    model: Option<ModelExtraction>,
    progress: &Progress,
) -> anyhow::Result<ViaWorker> {
    for suffix in ["", "-wal", "-shm"] {
        let mut path = database.as_os_str().to_owned();
        path.push(suffix);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error).context("removing the previous via-worker database"),
        }
    }
    let (store, service) = open_service(database, semantic)?;
    let stores = WorkerStores::open(database, Arc::clone(&store))?;
    let started = Instant::now();
    let ledger = append_turns(stores.log.as_ref(), conversations, progress)?;
    let append_seconds = started.elapsed().as_secs_f64();
    let threads: BTreeSet<&ThreadId> = ledger
        .turns()
        .iter()
        .map(|turn| &turn.record.thread)
        .collect();
    let threads = threads.len();
    let extractor = model.as_ref().map_or_else(
        || "statements".to_owned(),
        |model| format!("model {}", model.model.name()),
    );
    let metered = model.as_ref().map(|model| Arc::clone(&model.model));
    let pending = worker(&stores, model)?;
    let started = Instant::now();
    let passes = drain(&pending, stores.log.as_ref(), progress).await?;
    let worker_seconds = started.elapsed().as_secs_f64();
    let totals = stores.progress.extraction_totals()?;
    let check = check_extraction(&store, conversations, &ledger).await?;
    let mut sync_seconds = 0.0;
    if semantic {
        let started = Instant::now();
        sync(&service, progress).await?;
        sync_seconds = started.elapsed().as_secs_f64();
    }
    let turns_of =
        |conversation: usize, passage: &Value| ledger.turns_of_passage(conversation, passage);
    let answers = recall_all_judged(&service, conversations, modes, progress, &turns_of)
        .await?
        .into_iter()
        .map(|(mode, answers)| (mode.to_owned(), answers))
        .collect();
    let endpoint = metered
        .and_then(|model| model.meter())
        .map(EndpointCalls::from);
    Ok(ViaWorker {
        extractor,
        endpoint,
        appended: ledger.turns().len(),
        threads,
        append_seconds,
        worker_seconds,
        passes,
        sync_seconds,
        totals,
        check,
        answers,
    })
}

/// Every call a run made to the model endpoint, read from the model client's meter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointCalls {
    /// Calls answered with a usable completion.
    pub answered: u64,
    /// Calls failed, by kind (`malformed` holds answers cut at `max_tokens`).
    pub failed: BTreeMap<String, u64>,
    /// Attempts made again after a transient failure.
    pub retries: u64,
    /// Prompt tokens over every answered attempt, a cut answer's included.
    pub prompt_tokens: u64,
    /// Completion tokens, likewise.
    pub completion_tokens: u64,
    /// Milliseconds of the answered calls, summed.
    pub answered_ms: u64,
}

impl From<MeterSnapshot> for EndpointCalls {
    fn from(meter: MeterSnapshot) -> Self {
        Self {
            answered: meter.calls,
            failed: meter
                .failures
                .into_iter()
                .map(|(kind, calls)| (kind.to_owned(), calls))
                .collect(),
            retries: meter.retries,
            prompt_tokens: meter.prompt_tokens,
            completion_tokens: meter.completion_tokens,
            answered_ms: meter.latency_ms_total,
        }
    }
}
