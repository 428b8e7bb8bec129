//! The remembering worker: on a schedule, each pass first runs one intent pass (admitted remember and
//! cleanup intents, with thread records as sources, see [`remembering::thread_sources`]), then
//! committed-activity passes over the threads with new records (the log's pending-thread index),
//! with the default statement extractor (or a language model, `--model-url`), each into its
//! thread's destination.
//!
//! The database is a SQLite file (the default) or, given a `postgres://` URL, a PostgreSQL database
//! that several workers on several hosts share (see `--help`). Both backends run the same pass loop
//! over the `memory_core::activity` store traits and the memory store's `MemoryWriter`.
//!
//! It stops cleanly on SIGINT or SIGTERM: the pass in flight finishes (passes are finite and bounded by
//! their limits), then the process exits. A panic inside a pass poisons the worker: it exits with an
//! error instead of running further passes on state it no longer knows (see
//! [`remembering::schedule`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use clap::Parser;
use memory_cli::blocking::blocking;
use memory_cli::database::{Client, Database, with_store};
use memory_cli::model_settings::{Fallback, ModelSettings, ModelValues};
use memory_cli::settings::Corrections;
use memory_cli::worker::{
    CorrectionLinking, Intents, ModelExtraction, ProcessorStores, WorkerExtractor, WorkerSettings,
    intent_worker, pending_pass,
};
use memory_core::activity::{
    ProcessorId, ProcessorVersion, ThreadDestination, ThreadLog, WorkerId,
};
use memory_core::{MemoryReader, MemoryScope, MemoryWriter};
use remembering::schedule::{Schedule, run_schedule};
use remembering::worker::IntentPassLimits;
use remembering::{PassLimits, PendingPass, UnboundThreads};

#[derive(Debug, Parser)]
#[command(
    name = "remembering-worker",
    about = "Turns committed conversation activity into memory.",
    after_help = "\
Backends:
  --db takes a SQLite file path (the default backend) or a PostgreSQL URL (postgres:// or
  postgresql://). With a URL, the thread log, activity progress, the remembering store and the memory
  store are all in that database, so any number of workers on any number of hosts can share it: leases
  fenced by epoch make each thread's records land exactly once, and a killed worker's threads are taken
  over once its lease (--lease-ms) expires.

Examples:
  remembering-worker --db memory.sqlite
  MEMORY_DB=postgres://memory:secret@db.internal:5432/memory remembering-worker --worker-id host-a
  MEMORY_DB=postgres://memory:secret@db.internal:5432/memory remembering-worker --schema team_a --once

A URL holding a password belongs in MEMORY_DB rather than on the command line, where other users of
the host can read it (ps, /proc)."
)]
struct Args {
    /// The database: a SQLite file path, or a PostgreSQL URL (`postgres://user:password@host:port/db`).
    #[arg(long, env = "MEMORY_DB", hide_env_values = true)]
    db: String,
    /// PostgreSQL only: the schema holding the tables, created on first use (default: the
    /// connection's search_path, normally `public`).
    #[arg(long)]
    schema: Option<String>,
    /// Processor ids to run, each as NAME or NAME@VERSION; every one uses the statement extractor.
    #[arg(long = "processor", default_value = "statements@1")]
    processors: Vec<String>,
    /// This worker's id (defaults to one derived from the process id).
    #[arg(long)]
    worker_id: Option<String>,
    /// Scopes granted to what is remembered from threads with no destination (threads appended
    /// before destinations existed, or without one through the library). A bound thread's memory
    /// gets its destination's scopes.
    #[arg(long = "scope", default_value = "agent")]
    scopes: Vec<String>,
    /// The namespace ({name, version, identity}) of threads with no destination; without it, each
    /// such thread keeps the namespace of its own it always had. A bound thread's memory always goes
    /// to its destination.
    #[arg(long, value_name = "JSON")]
    namespace: Option<String>,
    /// Mark every thread pending before the first pass (after adding a processor version, whose
    /// progress starts empty); normally only threads with new records are visited.
    #[arg(long)]
    rescan: bool,
    /// How a correcting statement ("actually ...", "..., not X") is linked to the speaker's memory
    /// it corrects, so recall cites the correction first: `words` (shared words; no model),
    /// `model` (the embedding model's cosine: corrections worded unlike what they correct link too,
    /// at the cost of loading the model in the worker) or `off`.
    #[arg(
        long,
        env = memory_cli::settings::CORRECTIONS_ENV,
        value_parser = memory_cli::settings::parse_corrections,
        default_value = "words",
        value_name = "words|model|off"
    )]
    corrections: Corrections,
    /// The base URL of an OpenAI-compatible chat-completions endpoint (Ollama, vLLM, llama.cpp's
    /// server, a hosted API; plain HTTP), e.g. `http://127.0.0.1:8080/v1`: a language model then
    /// proposes memories instead of the statement extractor, and only what the user said in the
    /// quoted words is kept. Needs `--model`.
    #[arg(long, env = memory_cli::model_settings::MODEL_URL_ENV, value_name = "URL")]
    model_url: Option<String>,
    /// The model's name at `--model-url`.
    #[arg(long, env = memory_cli::model_settings::MODEL_ENV, value_name = "NAME")]
    model: Option<String>,
    /// A file holding the endpoint's key (sent as a bearer token; never logged or shown).
    #[arg(long, env = memory_cli::model_settings::MODEL_KEY_FILE_ENV, value_name = "PATH")]
    model_key_file: Option<std::path::PathBuf>,
    /// The limit of one attempt of one model call, in milliseconds (default 120000).
    #[arg(long, env = memory_cli::model_settings::MODEL_TIMEOUT_ENV, value_name = "MS")]
    model_timeout_ms: Option<u64>,
    /// When the model fails: `none` (the default) defers the thread to a later pass (endpoint down,
    /// 429, 5xx, timeout) or parks it (answers that keep being wrong); `statements` extracts the
    /// record with the statement extractor instead, counted as a fallback in `memory status`.
    #[arg(
        long,
        env = memory_cli::model_settings::MODEL_FALLBACK_ENV,
        value_parser = memory_cli::model_settings::parse_fallback,
        default_value = "none",
        value_name = "none|statements"
    )]
    fallback: Fallback,
    /// Milliseconds between passes.
    #[arg(long, default_value_t = 1_000)]
    interval_ms: u64,
    /// Run one pass over every pending thread, then exit.
    #[arg(long)]
    once: bool,
    /// Most records per thread per pass.
    #[arg(long, default_value_t = 1_000)]
    max_records: usize,
    /// Records per page.
    #[arg(long, default_value_t = 100)]
    page_size: usize,
    /// Milliseconds after which a pass starts no new record.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Lease length in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    lease_ms: u64,
    /// Most admitted intents handled per pass.
    #[arg(long, default_value_t = 100)]
    max_intents: usize,
}

/// Everything one pass runs.
struct Work<W> {
    log: Arc<dyn ThreadLog>,
    intents: Intents<W>,
    pending: PendingPass<W, WorkerExtractor>,
}

fn parse_processor(text: &str) -> anyhow::Result<(ProcessorId, ProcessorVersion)> {
    let (name, version) = match text.split_once('@') {
        Some((name, version)) => (
            name,
            version
                .parse::<u64>()
                .with_context(|| "processor version must be a positive integer")?,
        ),
        None => (text, 1),
    };
    if version == 0 {
        return Err(anyhow!("processor version must be positive"));
    }
    Ok((ProcessorId::new(name)?, ProcessorVersion::new(version)))
}

fn build<W>(args: &Args, stores: ProcessorStores<W>) -> anyhow::Result<Work<W>>
where
    W: memory_cli::database::Store,
{
    let scopes = args
        .scopes
        .iter()
        .map(MemoryScope::new)
        .collect::<Result<Vec<_>, _>>()?;
    let unbound = match &args.namespace {
        Some(text) => {
            let namespace: memory_core::DynamicNamespace = serde_json::from_str(text)
                .context("--namespace must be {name, version, identity}")?;
            let address = namespace.address().context("invalid --namespace")?;
            UnboundThreads::Destination(
                ThreadDestination::new(address, scopes.clone()).context("invalid --scope")?,
            )
        }
        None => UnboundThreads::PerThread {
            scopes: scopes.clone(),
        },
    };
    let owner = WorkerId::new(
        args.worker_id
            .clone()
            .unwrap_or_else(|| format!("worker-{}", std::process::id())),
    )?;
    let settings = WorkerSettings {
        processors: args
            .processors
            .iter()
            .map(|text| parse_processor(text))
            .collect::<anyhow::Result<_>>()?,
        owner: owner.clone(),
        limits: PassLimits {
            max_records: args.max_records,
            page_size: args.page_size,
            timeout_ms: args.timeout_ms,
            lease_ms: args.lease_ms,
        },
        unbound,
        corrections: CorrectionLinking::from_setting(args.corrections)?,
        model: ModelSettings::new(ModelValues {
            url: args.model_url.clone(),
            model: args.model.clone(),
            key_file: args.model_key_file.clone(),
            fallback: Some(args.fallback),
            timeout_ms: args.model_timeout_ms,
        })?
        .map(|settings| ModelExtraction::open(&settings))
        .transpose()?,
    };
    let pending = pending_pass(&stores, &settings, stall::hooks()?)?;
    let intents = intent_worker(
        &stores,
        owner,
        IntentPassLimits {
            max_intents: args.max_intents,
            lease_ms: args.lease_ms,
        },
    )?;
    let log = stores.log;
    Ok(Work {
        pending,
        log,
        intents,
    })
}

/// One pass: one intent pass, then every processor over every pending thread
/// ([`remembering::pending`]). Errors are logged and do not stop the rest (a held lease or a stale
/// one is ordinary when several workers run).
async fn pass<W>(work: Arc<Work<W>>)
where
    W: MemoryReader + MemoryWriter + 'static,
{
    match work.intents.run_pass().await {
        Ok(report) => tracing::info!(intents = report.completed.len(), "intent pass finished"),
        Err(error) => tracing::warn!(%error, "intent pass failed"),
    }
    match work.pending.run().await {
        Ok(report) => tracing::info!(
            threads = report.threads,
            processed = report.processed,
            settled = report.settled,
            parked = report.parked,
            failed = report.failed,
            "activity pass finished"
        ),
        Err(error) => tracing::warn!(%error, "listing pending threads failed"),
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    // Listening before the database is even opened, so a stop at any point (a supervisor's SIGTERM
    // while a PostgreSQL connection is still being made included) ends the worker cleanly, before
    // its first pass or between two.
    let shutdown = memory_cli::signals::shutdown_signal();
    let database = Database::select(Path::new(&args.db), args.schema.as_deref())?;
    let opened = database.open_async(Client::WORKER).await?;
    with_store!(opened, store => {
        let stores = blocking(move || ProcessorStores::open(store)).await??;
        run_on(&args, stores, shutdown).await
    })
}

/// The schedule over one backend's stores: the same pass loop whatever holds them, until `shutdown`.
async fn run_on<W>(
    args: &Args,
    stores: ProcessorStores<W>,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()>
where
    W: memory_cli::database::Store,
{
    let work = Arc::new(build(args, stores)?);
    if args.rescan {
        let log = Arc::clone(&work.log);
        let marked = blocking(move || log.mark_all_pending())
            .await
            .context("marking threads pending")??;
        tracing::info!(marked, "every thread marked pending");
    }
    let schedule = Schedule {
        interval: Duration::from_millis(args.interval_ms),
        once: args.once,
    };
    let passes = run_schedule(schedule, || pass(work.clone()), shutdown)
        .await
        .map_err(|error| anyhow!("{error}; stopping"))?;
    tracing::info!(passes, "worker stopped");
    Ok(())
}

/// Fault injection for tests (feature `failpoints`): `REMEMBERING_WORKER_STALL_AT=POINT:N` makes the
/// Nth arrival at pass point POINT (a [`remembering::PassPoint`] name, counted over every processor
/// and thread of this process) print `remembering-worker: stalled at POINT` on stderr and never
/// return, so a test can kill the worker at a known place in the middle of a pass. Only committed-
/// activity passes get the hook. Without the feature the variable is ignored.
mod stall {
    use std::sync::Arc;

    use remembering::PassHooks;

    /// The variable naming the stall point.
    #[cfg(feature = "failpoints")]
    const VARIABLE: &str = "REMEMBERING_WORKER_STALL_AT";

    #[cfg(feature = "failpoints")]
    struct StallAt {
        point: remembering::PassPoint,
        occurrence: u64,
        seen: std::sync::atomic::AtomicU64,
    }

    #[cfg(feature = "failpoints")]
    impl PassHooks for StallAt {
        fn at(&self, point: remembering::PassPoint) -> remembering::hooks::HookFuture<'_> {
            use std::sync::atomic::Ordering;
            if point == self.point
                && self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.occurrence
            {
                eprintln!("remembering-worker: stalled at {}", point.name());
                return Box::pin(std::future::pending());
            }
            Box::pin(std::future::ready(()))
        }
    }

    /// The hooks the environment asks for, if any.
    #[cfg(feature = "failpoints")]
    pub fn hooks() -> anyhow::Result<Option<Arc<dyn PassHooks>>> {
        use anyhow::Context;
        let Ok(spec) = std::env::var(VARIABLE) else {
            return Ok(None);
        };
        let (name, occurrence) = spec
            .split_once(':')
            .with_context(|| format!("{VARIABLE} must be POINT:N"))?;
        let point = remembering::PassPoint::from_name(name)
            .with_context(|| format!("{VARIABLE}: unknown pass point {name}"))?;
        let occurrence = occurrence
            .parse::<u64>()
            .with_context(|| format!("{VARIABLE}: N must be a positive integer"))?;
        Ok(Some(Arc::new(StallAt {
            point,
            occurrence,
            seen: std::sync::atomic::AtomicU64::new(0),
        })))
    }

    /// Without the feature there are no hooks.
    #[cfg(not(feature = "failpoints"))]
    #[allow(clippy::unnecessary_wraps)]
    pub fn hooks() -> anyhow::Result<Option<Arc<dyn PassHooks>>> {
        Ok(None)
    }
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(run(args))
}
