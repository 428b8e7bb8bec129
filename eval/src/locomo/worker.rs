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
use memory_core::activity::ModelUsage;
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
use super::metrics::RetrievalFigures;
use super::report::{ModeReport, mode_report};
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

/// One mode's figures of the direct import, read back from its `locomo.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectMode {
    /// The mode.
    pub mode: String,
    /// All conversations.
    pub all: RetrievalFigures,
}

/// The direct import's figures, beside which the via-worker ones are reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectFigures {
    /// The report they were read from.
    pub report: String,
    /// Per mode.
    pub modes: Vec<DirectMode>,
}

/// The direct import's figures from a `locomo.json` written by `memory-eval locomo`, when there is
/// one.
pub fn read_direct(path: &Path) -> anyhow::Result<Option<DirectFigures>> {
    #[derive(Deserialize)]
    struct Report {
        modes: Vec<DirectMode>,
    }
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    let report: Report =
        serde_json::from_slice(&bytes).with_context(|| format!("reading {}", path.display()))?;
    Ok(Some(DirectFigures {
        report: path.display().to_string(),
        modes: report.modes,
    }))
}

/// The via-worker report (`locomo-via-worker.json`; the Markdown has the same figures).
#[derive(Debug, Clone, Serialize)]
pub struct ViaWorkerReport {
    /// `worker`.
    pub via: String,
    /// The worker's extractor: `statements` (the default), or `model NAME` (`--model-url`).
    #[serde(default = "statements")]
    pub extractor: String,
    /// What the model's calls cost (zero for the statement extractor).
    #[serde(default)]
    pub model: ModelUsage,
    /// What the endpoint was asked, failed calls included; `model` counts the calls of the
    /// extractions the worker recorded, which a parked or deferred batch's calls are not part of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<EndpointCalls>,
    /// Seconds the worker took per record.
    #[serde(default)]
    pub seconds_per_record: f64,
    /// The statement extractor's figures on the same conversations, beside a model's run (read from
    /// `locomo-via-worker.json` when it covers as many conversations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statements: Option<DirectFigures>,
    /// The data that was read.
    pub data: String,
    /// Conversations read.
    pub conversations: usize,
    /// Turns appended, one `user_input` record each.
    pub turns: usize,
    /// Threads (one per session).
    pub threads: usize,
    /// Questions of categories 1-4 with evidence.
    pub questions: usize,
    /// Seconds spent appending.
    pub append_seconds: f64,
    /// Seconds the worker took to drain the log.
    pub worker_seconds: f64,
    /// The worker's passes.
    pub worker: WorkerPasses,
    /// Seconds spent indexing with the real model.
    pub sync_seconds: f64,
    /// Records the extraction notes count.
    pub records_extracted: u64,
    /// Memories kept (contributions: a restatement kept again adds an attribution to its document).
    pub documents_kept: u64,
    /// Current documents in the conversations' namespaces.
    pub documents_in_store: usize,
    /// Sentences (or whole inputs) dropped, by reason.
    pub documents_dropped_by_reason: BTreeMap<String, u64>,
    /// Turns with at least one kept memory.
    pub turns_with_memory: usize,
    /// Distinct turns scored questions cite as evidence.
    pub evidence_turns: usize,
    /// Evidence ids naming no turn (never findable, in either path).
    pub evidence_naming_no_turn: usize,
    /// Evidence turns no kept memory came from.
    pub evidence_turns_lost: usize,
    /// Scored questions all of whose evidence turns were lost.
    pub questions_with_all_evidence_lost: usize,
    /// The lost evidence turns.
    pub evidence_turns_lost_list: Vec<LostTurn>,
    /// Per mode (the same figures as `locomo.json`'s).
    pub modes: Vec<ModeReport>,
    /// The direct import's figures, when its report was there.
    pub direct: Option<DirectFigures>,
}

impl ViaWorkerReport {
    /// The report of `run`, modes in `order`.
    pub fn new(
        data: &str,
        conversations: &[Conversation],
        run: &ViaWorker,
        order: &[&str],
        direct: Option<DirectFigures>,
    ) -> Self {
        let mut modes: Vec<ModeReport> = run
            .answers
            .iter()
            .map(|(mode, answers)| mode_report(mode, answers))
            .collect();
        modes.sort_by_key(|mode| order.iter().position(|name| *name == mode.mode));
        Self {
            via: "worker".to_owned(),
            extractor: run.extractor.clone(),
            model: run.totals.model,
            endpoint: run.endpoint.clone(),
            seconds_per_record: if run.appended == 0 {
                0.0
            } else {
                run.worker_seconds / run.appended as f64
            },
            statements: None,
            data: data.to_owned(),
            conversations: conversations.len(),
            turns: run.appended,
            threads: run.threads,
            questions: run.answers.values().next().map_or(0, Vec::len),
            append_seconds: run.append_seconds,
            worker_seconds: run.worker_seconds,
            worker: run.passes,
            sync_seconds: run.sync_seconds,
            records_extracted: run.totals.records,
            documents_kept: run.totals.kept,
            documents_in_store: run.check.documents_in_store,
            documents_dropped_by_reason: run.totals.dropped.clone(),
            turns_with_memory: run.check.turns_with_memory,
            evidence_turns: run.check.evidence_turns,
            evidence_naming_no_turn: run.check.evidence_naming_no_turn,
            evidence_turns_lost: run.check.lost.len(),
            questions_with_all_evidence_lost: run.check.questions_with_all_evidence_lost,
            evidence_turns_lost_list: run.check.lost.clone(),
            modes,
            direct,
        }
    }
}

fn statements() -> String {
    "statements".to_owned()
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The Markdown report.
pub fn markdown(report: &ViaWorkerReport) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# LoCoMo recall through the remembering worker\n\n{} conversations, {} turns appended as \
         `user_input` records to {} threads (one per session), read from `{}`; the worker \
         (extractor: {}) drained the log in {} passes ({} threads parked); {} questions of \
         categories 1-4. Append {:.1} s, worker {:.1} s ({:.3} s per record), indexing with the \
         real model {:.1} s.\n",
        report.conversations,
        report.turns,
        report.threads,
        report.data,
        report.extractor,
        report.worker.passes,
        report.worker.parked,
        report.questions,
        report.append_seconds,
        report.worker_seconds,
        report.seconds_per_record,
        report.sync_seconds
    );
    if report.extractor != "statements" {
        model_markdown(&mut text, report);
    }
    let _ = writeln!(text, "## Beside the direct import (all conversations)\n");
    match &report.direct {
        Some(direct) => {
            let _ = writeln!(
                text,
                "Direct figures from `{}`.\n\n| mode | hit@5 direct | hit@5 via worker | hit@10 \
                 direct | hit@10 via worker | share@10 direct | share@10 via worker |\n| --- | --- \
                 | --- | --- | --- | --- | --- |",
                direct.report
            );
            for mode in &report.modes {
                let beside = direct.modes.iter().find(|other| other.mode == mode.mode);
                let figure =
                    |value: Option<f64>| value.map_or("-".to_owned(), |v| format!("{v:.3}"));
                let _ = writeln!(
                    text,
                    "| {} | {} | {:.3} | {} | {:.3} | {} | {:.3} |",
                    mode.mode,
                    figure(beside.map(|d| d.all.hit_at_5)),
                    mode.all.hit_at_5,
                    figure(beside.map(|d| d.all.hit_at_10)),
                    mode.all.hit_at_10,
                    figure(beside.map(|d| d.all.share_at_10)),
                    mode.all.share_at_10
                );
            }
        }
        None => {
            let _ = writeln!(
                text,
                "No direct report was found (run `memory-eval locomo` first).\n\n| mode | hit@5 | \
                 hit@10 | share@10 |\n| --- | --- | --- | --- |"
            );
            for mode in &report.modes {
                let _ = writeln!(
                    text,
                    "| {} | {:.3} | {:.3} | {:.3} |",
                    mode.mode, mode.all.hit_at_5, mode.all.hit_at_10, mode.all.share_at_10
                );
            }
        }
    }
    let dropped: u64 = report.documents_dropped_by_reason.values().sum();
    let _ = writeln!(
        text,
        "\n## Extraction\n\n{} records extracted; {} memories kept ({} documents in the store, {} \
         turns with a memory), {} parts dropped:\n\n| reason | dropped |\n| --- | --- |",
        report.records_extracted,
        report.documents_kept,
        report.documents_in_store,
        report.turns_with_memory,
        dropped
    );
    for (reason, count) in &report.documents_dropped_by_reason {
        let _ = writeln!(text, "| {reason} | {count} |");
    }
    let _ = writeln!(
        text,
        "\n## Evidence turns lost by extraction\n\n{} of {} evidence turns produced no kept memory; \
         {} questions lost all of their evidence ({} evidence ids name no turn).\n\n| conversation \
         | turn | speaker | questions | dropped | sentences |\n| --- | --- | --- | --- | --- | --- |",
        report.evidence_turns_lost,
        report.evidence_turns,
        report.questions_with_all_evidence_lost,
        report.evidence_naming_no_turn
    );
    for lost in &report.evidence_turns_lost_list {
        let dropped: Vec<String> = lost
            .dropped
            .iter()
            .map(|(reason, count)| format!("{reason} {count}"))
            .collect();
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {} | {} |",
            cell(&lost.conversation),
            lost.dia_id,
            cell(&lost.speaker),
            lost.questions,
            dropped.join(", "),
            cell(&lost.sentences.join(" / "))
        );
    }
    let _ = writeln!(text);
    text.push_str(&super::report::modes_markdown(&report.modes));
    text
}

/// The model's section: what it kept and rejected, what it cost, and recall beside the statement
/// extractor's on the same conversations.
fn model_markdown(text: &mut String, report: &ViaWorkerReport) {
    use std::fmt::Write as _;
    let rejected = |rule: &str| {
        report
            .documents_dropped_by_reason
            .get(rule)
            .copied()
            .unwrap_or(0)
    };
    let _ = writeln!(
        text,
        "## The model\n\n{} memories kept from {} records; proposals rejected: {} unsupported \
         quotes, {} unsupported texts, {} unsupported corrections. Recorded with the extractions: \
         {} calls, {} prompt and {} completion tokens, {:.1} s waiting for answers ({:.3} s per record for the whole \
         worker), {} records extracted by statements instead.\n",
        report.documents_kept,
        report.records_extracted,
        rejected("unsupported_quote"),
        rejected("unsupported_text"),
        rejected("unsupported_correction"),
        report.model.calls,
        report.model.prompt_tokens,
        report.model.completion_tokens,
        report.model.latency_ms as f64 / 1_000.0,
        report.seconds_per_record,
        report.model.fallbacks,
    );
    if let Some(endpoint) = &report.endpoint {
        let failed: Vec<String> = endpoint
            .failed
            .iter()
            .map(|(kind, calls)| format!("{calls} {kind}"))
            .collect();
        let _ = writeln!(
            text,
            "The endpoint, every call counted (parked and deferred batches' too): {} answered, \
             {} failed ({}), {} retried attempts; {} prompt and {} completion tokens; {:.1} s in \
             answered calls.\n",
            endpoint.answered,
            endpoint.failed.values().sum::<u64>(),
            if failed.is_empty() {
                "none".to_owned()
            } else {
                failed.join(", ")
            },
            endpoint.retries,
            endpoint.prompt_tokens,
            endpoint.completion_tokens,
            endpoint.answered_ms as f64 / 1_000.0,
        );
    }
    match &report.statements {
        Some(statements) => {
            let _ = writeln!(
                text,
                "Beside the statement extractor on the same conversations (`{}`):\n\n| mode | \
                 hit@10 statements | hit@10 model | share@10 statements | share@10 model |\n| --- \
                 | --- | --- | --- | --- |",
                statements.report
            );
            for mode in &report.modes {
                let beside = statements
                    .modes
                    .iter()
                    .find(|other| other.mode == mode.mode);
                let figure =
                    |value: Option<f64>| value.map_or("-".to_owned(), |v| format!("{v:.3}"));
                let _ = writeln!(
                    text,
                    "| {} | {} | {:.3} | {} | {:.3} |",
                    mode.mode,
                    figure(beside.map(|d| d.all.hit_at_10)),
                    mode.all.hit_at_10,
                    figure(beside.map(|d| d.all.share_at_10)),
                    mode.all.share_at_10
                );
            }
            let _ = writeln!(text);
        }
        None => {
            let _ = writeln!(
                text,
                "No statement-extractor run of as many conversations was found beside it (run \
                 `memory-eval locomo --via worker --conversations {}` first).\n",
                report.conversations
            );
        }
    }
}

/// The file stem a run's report is written under: `locomo-via-worker` for the statement extractor,
/// `locomo-via-model` for a model's.
pub fn stem(report: &ViaWorkerReport) -> &'static str {
    if report.extractor == "statements" {
        "locomo-via-worker"
    } else {
        "locomo-via-model"
    }
}

/// Writes `<stem>.md`, `<stem>.json` and its SVGs to `out` ([`stem`]).
pub fn write(report: &ViaWorkerReport, out: &Path) -> anyhow::Result<()> {
    let stem = stem(report);
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join(format!("{stem}.md")), markdown(report))?;
    std::fs::write(
        out.join(format!("{stem}.json")),
        serde_json::to_string_pretty(report)? + "\n",
    )?;
    super::report::write_charts(&report.modes, out, stem, "LoCoMo via the worker")
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

/// The statement extractor's via-worker figures from `locomo-via-worker.json` in `out`, when they
/// cover `conversations` conversations (the same ones, since `--conversations N` takes the first N).
pub fn read_statements(out: &Path, conversations: usize) -> anyhow::Result<Option<DirectFigures>> {
    let path = out.join("locomo-via-worker.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    #[derive(Deserialize)]
    struct Saved {
        conversations: usize,
        #[serde(default = "statements")]
        extractor: String,
        modes: Vec<DirectMode>,
    }
    let saved: Saved =
        serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
    Ok(
        (saved.conversations == conversations && saved.extractor == "statements").then(|| {
            DirectFigures {
                report: path.display().to_string(),
                modes: saved.modes,
            }
        }),
    )
}
