//! The Rust side of the Python package's bench (`python/bench/bench.py`): `memory_remember` and
//! `memory_search` (memory-cli's `simple` services, the ones the Python `Memory.add` and
//! `Memory.search` call) on a SQLite file, timed per call, with no Python in the way.
//!
//! Usage: `simple_bench DB TEXTS.jsonl QUERIES.jsonl MODE` (one JSON string per line); prints one
//! JSON object: `add_ms` and `search_ms` (every call's milliseconds, in order) and `hits`.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use memory_cli::database::{Client, Database, Opened};
use memory_cli::grants::Grant;
use memory_cli::recall_service::RecallService;
use memory_cli::semantic::SemanticBackend;
use memory_cli::service::MemoryService;
use memory_cli::simple::{self, Defaults, RememberArguments, SearchArguments};
use memory_cli::wire::RecallMode;
use memory_core::{DynamicNamespace, MemoryScope};

fn lines(path: &str) -> anyhow::Result<Vec<String>> {
    std::fs::read_to_string(path)?
        .lines()
        .map(|line| serde_json::from_str(line).context("a JSON string per line"))
        .collect()
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, db, texts, queries, mode] = args.as_slice() else {
        anyhow::bail!("usage: simple_bench DB TEXTS.jsonl QUERIES.jsonl MODE");
    };
    let mode: RecallMode = serde_json::from_value(serde_json::Value::String(mode.clone()))?;
    let (texts, queries) = (lines(texts)?, lines(queries)?);
    let Opened::Sqlite(store) = Database::select(db.as_ref(), None)?.open(Client::MEMORY)? else {
        anyhow::bail!("a SQLite path");
    };
    let semantic = SemanticBackend::catching_up(Arc::clone(&store), store_vectors(&store)?)?;
    let service = MemoryService::new(
        Arc::clone(&store),
        RecallService::with_semantic(Arc::clone(&store), Arc::new(semantic)),
    );
    let namespace = DynamicNamespace {
        name: "bench".to_owned(),
        version: 1,
        identity: serde_json::Value::Null,
    };
    let defaults = Defaults::new(namespace, MemoryScope::new("agent")?)?;
    let grant = Grant::everything("bench", None);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut add_ms = Vec::with_capacity(texts.len());
    for text in texts {
        let arguments = RememberArguments {
            text,
            id: None,
            expected_revision: None,
            speaker: None,
            metadata: None,
        };
        let started = Instant::now();
        runtime.block_on(simple::remember(&service, &defaults, &grant, arguments))?;
        add_ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    runtime.block_on(service.recall().sync())?;
    let mut search_ms = Vec::with_capacity(queries.len());
    let mut hits = 0;
    for query in queries {
        let arguments = SearchArguments {
            query,
            limit: Some(5),
        };
        let started = Instant::now();
        let found =
            runtime.block_on(simple::search_in_mode(&service, &defaults, arguments, mode))?;
        search_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        hits += found.passages.len();
    }
    println!(
        "{}",
        serde_json::json!({"add_ms": add_ms, "search_ms": search_ms, "hits": hits})
    );
    Ok(())
}

fn store_vectors(
    store: &Arc<memory_sqlite::SqliteStore>,
) -> Result<Arc<memory_sqlite::vectors::SqliteVectorStore>, memory_cli::refusal::Refusal> {
    use memory_cli::database::Store as _;
    store.open_vectors()
}
