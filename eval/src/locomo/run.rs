//! LoCoMo through the product: every turn a document written by `memory import`'s code, one sync, then
//! every scored question recalled in every mode through [`MemoryService`], the code `memory recall`
//! and `memory serve` run, with the binaries' defaults.
//!
//! - Each conversation is its own namespace (`locomo`, version 1, identity `{"conversation": id}`), so
//!   a question is answered from its own conversation only, as LoCoMo's retrieval task asks.
//! - A turn's document: id = its `dia_id`, text = what was said, one attribution with the speaker, the
//!   other speaker as observer and the session's date as `activity_at`. Image captions are left out:
//!   the text is what the speaker wrote.
//! - A recall asks for 10 items (hit@10 needs ten) within byte and token limits far above ten turns,
//!   and a deadline far above any healthy recall, so limits never decide quality. Each mode is warmed
//!   up first; latency is the whole `execute` call (decoding, the implicit catch-up check, search,
//!   revalidation, composition), as a client in the same process sees it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use memory_service::grants::Grant;
use memory_service::import::{ImportObserver, ImportSummary, LineRefusal, import};
use memory_service::recall_service::Indexing;
use memory_service::service::{MemoryService, Operation, RawArguments};
use memory_service::settings::Settings;
use memory_sqlite::SqliteStore;
use serde_json::{Value, json};

use super::data::Conversation;
use crate::progress::Progress;

/// The namespace definition's name of every LoCoMo conversation.
pub const NAMESPACE_NAME: &str = "locomo";
/// The scope every turn is written with and recalled through.
pub const SCOPE: &str = "locomo";
/// Passages one recall may cite.
pub const MAX_ITEMS: u32 = 10;
/// Rendered bytes one recall may use: far above ten turns.
pub const MAX_BYTES: u64 = 256 * 1024;
/// Rendered tokens one recall may use: far above ten turns.
pub const MAX_TOKENS: u64 = 64 * 1024;
/// Deadline of one recall: far above any healthy recall, so it never decides quality.
pub const TIMEOUT_MS: u64 = 10_000;
/// Recalls per mode before timing starts.
pub const WARMUP_QUERIES: usize = 20;

/// The harness's grant: an in-process host's, as the command line and the Python package hold
/// ([`Grant::local`]).
pub fn harness_grant() -> Grant {
    Grant::local("eval", None)
}

/// The recall modes, in report order.
pub const MODES: [&str; 5] = ["lexical", "exact", "hnsw", "hybrid", NO_RERANK];
/// The report's name for hybrid recall with its rerank stage off (`rerank: false`); the other modes
/// have no such stage.
pub const NO_RERANK: &str = "hybrid-no-rerank";

/// The namespace of a conversation, as the wire takes it.
pub fn namespace(conversation: &Conversation) -> Value {
    json!({"name": NAMESPACE_NAME, "version": 1, "identity": {"conversation": conversation.id}})
}

/// One `memory_put` argument object per turn, as JSON Lines (what `memory import` reads).
pub fn put_lines(conversations: &[Conversation]) -> anyhow::Result<Vec<u8>> {
    let mut lines = Vec::new();
    for conversation in conversations {
        let namespace = namespace(conversation);
        let speakers: Vec<&str> = {
            let mut speakers: Vec<&str> = Vec::new();
            for (_, turn) in conversation.turns() {
                if !speakers.contains(&turn.speaker.as_str()) {
                    speakers.push(&turn.speaker);
                }
            }
            speakers
        };
        for (session, turn) in conversation.turns() {
            let observers: Vec<&str> = speakers
                .iter()
                .copied()
                .filter(|speaker| *speaker != turn.speaker)
                .collect();
            let locator = format!("locomo:{}/{}", conversation.id, turn.dia_id);
            let put = json!({
                "namespace": namespace,
                "id": turn.dia_id,
                "operation_id": format!("locomo-put-{}", turn.dia_id),
                "expected_revision": null,
                "locator": locator,
                "scopes": [SCOPE],
                "content": {
                    "text": turn.text,
                    "attributions": [{
                        "origin_id": format!("{}/{}", conversation.id, turn.dia_id),
                        "speaker": turn.speaker,
                        "observers": observers,
                        "locator": locator,
                        "activity_at": session.activity_at,
                        "interpretation": "verbatim dialogue turn",
                    }],
                    "metadata": {"session": session.number, "session_date": session.date_time},
                    "recorded_at": session.activity_at.unwrap_or(0),
                    "extracted_at": session.activity_at.unwrap_or(0),
                },
            });
            serde_json::to_writer(&mut lines, &put)?;
            lines.push(b'\n');
        }
    }
    Ok(lines)
}

/// The product's service over a SQLite file: the store, its vectors in the same file, the real model
/// loaded on first need, catch-up freshness (what every one-shot `memory` command uses). Without
/// `semantic`, only the lexical mode answers (as `memory` without a model would).
pub fn open_service(
    database: &Path,
    semantic: bool,
) -> anyhow::Result<(Arc<SqliteStore>, MemoryService<SqliteStore>)> {
    let store = Arc::new(
        SqliteStore::open(database).with_context(|| format!("opening {}", database.display()))?,
    );
    // The settings `memory` reads from the environment (index capacity, encoding, search width).
    let settings =
        Settings::from_env().map_err(|refusal| anyhow::anyhow!("{}", refusal.message()))?;
    let indexing = if semantic {
        Indexing::CatchUp
    } else {
        Indexing::None
    };
    let service = MemoryService::open(Arc::clone(&store), &settings, indexing)
        .map_err(|refusal| anyhow::anyhow!("{}", refusal.message()))?;
    Ok((store, service))
}

struct ImportBar(indicatif::ProgressBar, u64);

impl ImportObserver for ImportBar {
    fn advanced(&mut self, bytes: u64) {
        self.0.inc(bytes);
    }
    fn refused(&mut self, _refusal: LineRefusal) {
        self.1 += 1;
    }
}

/// Writes every turn with `memory import`'s code (batched transactions). Re-running over the same file
/// replays: the operation ids and commands are the same, so nothing is written twice.
pub fn ingest(
    store: &SqliteStore,
    conversations: &[Conversation],
    progress: &Progress,
) -> anyhow::Result<ImportSummary> {
    let lines = put_lines(conversations)?;
    let mut bar = ImportBar(progress.bar("import", lines.len() as u64), 0);
    let summary = import(lines.as_slice(), store, &mut bar).context("importing the turns")?;
    bar.0.finish_and_clear();
    if summary.refused > 0 {
        anyhow::bail!("{} turns were refused by the store", summary.refused);
    }
    Ok(summary)
}

/// `memory_sync`: embeds every turn not yet indexed (the real model), returns the position reached.
pub async fn sync(
    service: &MemoryService<SqliteStore>,
    progress: &Progress,
) -> anyhow::Result<u64> {
    let spinner = progress.spinner("indexing (real model)");
    let answer = service
        .execute_as(
            &harness_grant(),
            Operation::Sync,
            RawArguments::Json(json!({})),
        )
        .await
        .map_err(|refusal| anyhow::anyhow!("sync refused: {}", refusal.message()))?;
    spinner.finish_and_clear();
    Ok(answer["indexed"].as_u64().unwrap_or_default())
}

/// A store written and indexed by [`indexed_store`].
pub struct IndexedStore {
    /// The store.
    pub store: Arc<SqliteStore>,
    /// The product's service over it.
    pub service: MemoryService<SqliteStore>,
    /// Turns written (one document each).
    pub turns: usize,
    /// Seconds spent writing the turns and indexing them with the real model.
    pub seconds: (f64, f64),
}

/// Opens the service on `database` ([`open_service`]), writes every turn ([`ingest`]) and indexes
/// them ([`sync`]), timing both: what every door's run starts from.
pub async fn indexed_store(
    database: &Path,
    conversations: &[Conversation],
    progress: &Progress,
) -> anyhow::Result<IndexedStore> {
    let (store, service) = open_service(database, true)?;
    let started = Instant::now();
    let summary = ingest(&store, conversations, progress)?;
    let import_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    sync(&service, progress).await?;
    Ok(IndexedStore {
        store,
        service,
        turns: (summary.written + summary.replayed) as usize,
        seconds: (import_seconds, started.elapsed().as_secs_f64()),
    })
}

/// `memory-eval locomo`: every turn written and indexed into `OUT/locomo.sqlite`, every scored
/// question recalled in every mode in process.
pub async fn measure(
    data: &str,
    conversations: &[Conversation],
    out: &Path,
    progress: &Progress,
) -> anyhow::Result<super::report::LocomoReport> {
    std::fs::create_dir_all(out)?;
    let indexed = indexed_store(&out.join("locomo.sqlite"), conversations, progress).await?;
    let answers = recall_all(&indexed.service, conversations, &MODES, progress).await?;
    Ok(super::report::LocomoReport::new(
        super::report::IN_PROCESS,
        data,
        conversations.len(),
        indexed.turns,
        indexed.seconds,
        &answers,
    ))
}

/// One question's answer in one mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Index of the conversation in file order.
    pub conversation: usize,
    /// The question's category.
    pub category: u8,
    /// Its evidence turn ids.
    pub evidence: Vec<String>,
    /// Recalled document ids in citation order, each once (the direct import's documents are turns:
    /// their ids are the turns' `dia_id`s).
    pub ranked: Vec<String>,
    /// The turns each of `ranked` stands for, in the same order: the id itself for the direct import,
    /// the attributed turns for a document the worker wrote (see [`super::worker`]).
    pub ranked_turns: Vec<Vec<String>>,
    /// The whole call, milliseconds.
    pub latency_ms: f64,
    /// Whether the recall was refused (counted as an empty answer).
    pub refused: bool,
}

/// The recall arguments of `question` in `mode`.
pub fn recall_arguments(conversation: &Conversation, question: &str, mode: &str) -> Value {
    let mut arguments = json!({
        "namespace": namespace(conversation),
        "scope": SCOPE,
        "query": question,
        "mode": mode,
        "limits": {
            "max_items": MAX_ITEMS,
            "max_bytes": MAX_BYTES,
            "max_tokens": MAX_TOKENS,
            "timeout_ms": TIMEOUT_MS,
        },
    });
    if mode == NO_RERANK {
        arguments["mode"] = json!("hybrid");
        arguments["rerank"] = json!(false);
    }
    arguments
}

/// The distinct source ids of a recall answer, in citation order.
pub fn ranked_sources(answer: &Value) -> Vec<String> {
    let mut ranked: Vec<String> = Vec::new();
    for passage in answer["passages"].as_array().into_iter().flatten() {
        if let Some(id) = passage["source"]["id"].as_str()
            && !ranked.iter().any(|seen| seen == id)
        {
            ranked.push(id.to_owned());
        }
    }
    ranked
}

/// The turns a passage of the direct import stands for: its source id, which is the turn's `dia_id`.
pub fn direct_turns(_conversation: usize, passage: &Value) -> Vec<String> {
    passage["source"]["id"]
        .as_str()
        .map(|id| vec![id.to_owned()])
        .unwrap_or_default()
}

/// The distinct source ids of a recall answer in citation order, each with the turns its first
/// passage stands for (`turns_of(conversation, passage)`).
pub fn ranked_documents(
    answer: &Value,
    conversation: usize,
    turns_of: &dyn Fn(usize, &Value) -> Vec<String>,
) -> (Vec<String>, Vec<Vec<String>>) {
    let mut ranked: Vec<String> = Vec::new();
    let mut turns: Vec<Vec<String>> = Vec::new();
    for passage in answer["passages"].as_array().into_iter().flatten() {
        if let Some(id) = passage["source"]["id"].as_str()
            && !ranked.iter().any(|seen| seen == id)
        {
            ranked.push(id.to_owned());
            turns.push(turns_of(conversation, passage));
        }
    }
    (ranked, turns)
}

/// Recalls every scored question of `conversations` in each of `modes`; answers per mode, in question
/// order. Each recalled document is one turn ([`direct_turns`]), as the direct import writes them.
pub async fn recall_all<'m>(
    service: &MemoryService<SqliteStore>,
    conversations: &[Conversation],
    modes: &[&'m str],
    progress: &Progress,
) -> anyhow::Result<BTreeMap<&'m str, Vec<Answer>>> {
    recall_all_judged(service, conversations, modes, progress, &direct_turns).await
}

/// [`recall_all`], with `turns_of(conversation index, passage)` naming the turns a recalled
/// document stands for (how hits are judged).
pub async fn recall_all_judged<'m>(
    service: &MemoryService<SqliteStore>,
    conversations: &[Conversation],
    modes: &[&'m str],
    progress: &Progress,
    turns_of: &(dyn Fn(usize, &Value) -> Vec<String> + Sync),
) -> anyhow::Result<BTreeMap<&'m str, Vec<Answer>>> {
    let mut door = InProcess {
        service,
        // One grant for every timed call: building it is not part of a recall's latency.
        grant: harness_grant(),
    };
    recall_through(&mut door, conversations, modes, progress, turns_of).await
}

/// Where the harness's recalls go: the product's service in this process ([`InProcess`]), or a
/// built `memory serve --http` over MCP (`super::server`). Both take the same `memory_recall`
/// arguments and answer its wire result, so the figures of the two doors compare.
pub trait RecallDoor {
    /// One `memory_recall`: its wire answer, or the refusal's kind.
    fn recall(&mut self, arguments: Value) -> impl Future<Output = Result<Value, String>>;
}

/// The product's service in this process, under the harness's grant.
#[derive(Debug)]
pub struct InProcess<'s> {
    /// The service `memory recall` runs.
    pub service: &'s MemoryService<SqliteStore>,
    /// The caller's grant.
    pub grant: Grant,
}

impl RecallDoor for InProcess<'_> {
    async fn recall(&mut self, arguments: Value) -> Result<Value, String> {
        self.service
            .execute_as(
                &self.grant,
                Operation::Recall,
                RawArguments::Json(arguments),
            )
            .await
            .map_err(|refusal| refusal.kind().as_str().to_owned())
    }
}

/// Recalls every scored question of `conversations` in each of `modes` through `door`, each mode
/// warmed up first; answers per mode, in question order. Latency is the whole call as the door's
/// caller sees it.
pub async fn recall_through<'m>(
    door: &mut impl RecallDoor,
    conversations: &[Conversation],
    modes: &[&'m str],
    progress: &Progress,
    turns_of: &(dyn Fn(usize, &Value) -> Vec<String> + Sync),
) -> anyhow::Result<BTreeMap<&'m str, Vec<Answer>>> {
    let questions: Vec<(usize, &Conversation, &super::data::Question)> = conversations
        .iter()
        .enumerate()
        .flat_map(|(index, conversation)| {
            conversation
                .scored_questions()
                .map(move |question| (index, conversation, question))
        })
        .collect();
    let mut answers = BTreeMap::new();
    for &mode in modes {
        for (_, conversation, question) in questions.iter().take(WARMUP_QUERIES) {
            let _ = door
                .recall(recall_arguments(conversation, &question.text, mode))
                .await;
        }
        let bar = progress.bar(mode, questions.len() as u64);
        let mut mode_answers = Vec::with_capacity(questions.len());
        for (index, conversation, question) in &questions {
            let arguments = recall_arguments(conversation, &question.text, mode);
            let started = Instant::now();
            let result = door.recall(arguments).await;
            let latency_ms = started.elapsed().as_secs_f64() * 1_000.0;
            let ((ranked, ranked_turns), refused) = match result {
                Ok(answer) => (ranked_documents(&answer, *index, turns_of), false),
                Err(kind) => {
                    tracing::warn!(mode, kind, "recall refused");
                    ((Vec::new(), Vec::new()), true)
                }
            };
            mode_answers.push(Answer {
                conversation: *index,
                category: question.category,
                evidence: question.evidence.clone(),
                ranked,
                ranked_turns,
                latency_ms,
                refused,
            });
            bar.inc(1);
        }
        bar.finish_and_clear();
        answers.insert(mode, mode_answers);
    }
    Ok(answers)
}
