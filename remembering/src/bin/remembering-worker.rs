//! The remembering worker: runs committed-activity passes over every thread of one SQLite file on a
//! schedule, with the default statement extractor.
//!
//! It stops cleanly on SIGINT or SIGTERM: the pass in flight finishes (passes are finite and bounded by
//! their limits), then the process exits. A panic inside a pass poisons the worker: it exits with an
//! error instead of running further passes on state it no longer knows.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use clap::Parser;
use memory_core::activity::{ProcessorId, ProcessorVersion, ThreadId, WorkerId};
use memory_core::{MemoryScope, SystemClock};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use remembering::{ActivityProcessor, ActivityProcessorParts, PassLimits, StatementExtractor};

/// Threads listed per page while scanning for work.
const THREAD_PAGE: usize = 256;

#[derive(Debug, Parser)]
#[command(
    name = "remembering-worker",
    about = "Turns committed conversation activity into memory."
)]
struct Args {
    /// The SQLite database file (memory store, thread log and progress).
    #[arg(long)]
    db: PathBuf,
    /// Processor ids to run, each as NAME or NAME@VERSION; every one uses the statement extractor.
    #[arg(long = "processor", default_value = "statements@1")]
    processors: Vec<String>,
    /// This worker's id (defaults to one derived from the process id).
    #[arg(long)]
    worker_id: Option<String>,
    /// Scopes granted to remembered statements.
    #[arg(long = "scope", default_value = "agent")]
    scopes: Vec<String>,
    /// Milliseconds between passes.
    #[arg(long, default_value_t = 1_000)]
    interval_ms: u64,
    /// Run one pass over every thread, then exit.
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
}

type Processor = ActivityProcessor<memory_sqlite::SqliteStore, StatementExtractor>;

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
    Ok((ProcessorId::new(name)?, ProcessorVersion(version)))
}

fn build(args: &Args) -> anyhow::Result<(Arc<SqliteThreadLog>, Vec<Arc<Processor>>)> {
    let memory = Arc::new(memory_sqlite::open_store(&args.db).context("opening memory store")?);
    let log = Arc::new(SqliteThreadLog::open(&args.db).context("opening thread log")?);
    let progress = Arc::new(SqliteProgressStore::open(&args.db).context("opening progress")?);
    let scopes = args
        .scopes
        .iter()
        .map(MemoryScope::new)
        .collect::<Result<Vec<_>, _>>()?;
    let owner = WorkerId::new(
        args.worker_id
            .clone()
            .unwrap_or_else(|| format!("worker-{}", std::process::id())),
    )?;
    let limits = PassLimits {
        max_records: args.max_records,
        page_size: args.page_size,
        timeout_ms: args.timeout_ms,
        lease_ms: args.lease_ms,
    };
    let mut processors = Vec::new();
    for text in &args.processors {
        let (processor, version) = parse_processor(text)?;
        processors.push(Arc::new(ActivityProcessor::new(ActivityProcessorParts {
            log: log.clone(),
            progress: progress.clone(),
            writer: memory.clone(),
            extractor: StatementExtractor::new(scopes.clone()),
            clock: Arc::new(SystemClock),
            processor,
            version,
            owner: owner.clone(),
            limits,
        })?));
    }
    Ok((log, processors))
}

/// One pass: every processor over every thread. Errors of one thread are logged and do not stop the
/// others (a held lease or a stale one is ordinary when several workers run).
async fn pass(log: Arc<SqliteThreadLog>, processors: Vec<Arc<Processor>>) -> anyhow::Result<usize> {
    let mut processed = 0;
    let mut after: Option<ThreadId> = None;
    loop {
        let threads = log.threads(after.as_ref(), THREAD_PAGE)?;
        let Some(last) = threads.last().cloned() else {
            break;
        };
        for thread in &threads {
            for processor in &processors {
                match processor.run_pass(thread).await {
                    Ok(report) => processed += report.processed,
                    Err(error) => tracing::warn!(%error, "thread pass failed"),
                }
            }
        }
        after = Some(last);
    }
    Ok(processed)
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for SIGTERM");
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let (log, processors) = build(&args)?;
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let mut stopping = false;
    loop {
        let mut handle = tokio::spawn(pass(log.clone(), processors.clone()));
        let joined = tokio::select! {
            joined = &mut handle => joined,
            () = &mut shutdown => {
                tracing::info!("signal received; finishing the pass in flight");
                stopping = true;
                handle.await
            }
        };
        match joined {
            Ok(Ok(processed)) => tracing::info!(processed, "pass finished"),
            Ok(Err(error)) => tracing::warn!(%error, "pass failed"),
            Err(join_error) if join_error.is_panic() => {
                return Err(anyhow!("a pass panicked; worker poisoned, stopping"));
            }
            Err(join_error) => return Err(anyhow!("pass was cancelled: {join_error}")),
        }
        if stopping || args.once {
            return Ok(());
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(args.interval_ms)) => {}
            () = &mut shutdown => {
                tracing::info!("signal received; stopping");
                return Ok(());
            }
        }
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
