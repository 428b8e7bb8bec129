//! What idle threads cost the worker's activity pass (issue #30 §3). The pass visits only the threads
//! the log marks pending, so a database with many idle, fully processed threads should process a few
//! active threads' new records in about the time a database holding only those threads takes.
//!
//! Two SQLite files in a temporary directory, each processed by a [`PendingPass`] built as the
//! `remembering-worker` binary builds its own (the statement extractor, processor `statements`@1,
//! its default pass limits, unbound threads remembered per thread in scope `agent`):
//! - A: `IDLE_THREADS_COUNT` idle threads (default 10,000) of a few records each plus 10 active
//!   threads, every record already processed and every thread settled;
//! - B: the 10 active threads alone, with the same records, equally processed.
//!
//! Each round appends the same number of new user statements to every active thread of both files
//! and times one `PendingPass::run` over each (alternating which goes first, so both share the
//! machine's noise). Then it times idle passes (nothing appended) over A, which must process nothing
//! and write nothing: the file, its WAL and the thread log overview are unchanged.
//!
//! Prints plain figures (`idle_threads_pass_ratio` is A's median over B's); asserts what the passes
//! did, never how long they took. Run with `cargo bench -p remembering --bench idle_threads`;
//! `IDLE_THREADS_COUNT` and `IDLE_THREADS_ROUNDS` (default 9) shrink or grow the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use memory_core::activity::{
    NewRecord, ProcessorId, ProcessorVersion, ThreadId, ThreadLog, WorkerId,
};
use memory_core::{MemoryScope, SystemClock};
use memory_sqlite::SqliteStore;
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use remembering::{
    ActivityProcessor, ActivityProcessorParts, PassLimits, PendingPass, PendingReport,
    StatementExtractor, UnboundThreads,
};
use sha2::{Digest, Sha256};

/// Idle threads in A unless `IDLE_THREADS_COUNT` says otherwise.
const DEFAULT_IDLE_THREADS: usize = 10_000;
/// Timed rounds per side unless `IDLE_THREADS_ROUNDS` says otherwise.
const DEFAULT_ROUNDS: usize = 9;
/// Threads that receive new records each round, in both files.
const ACTIVE_THREADS: usize = 10;
/// Records every thread holds before the rounds.
const EARLIER_RECORDS: usize = 3;
/// New user statements per active thread per round.
const NEW_RECORDS: usize = 5;
/// Idle passes timed over A.
const IDLE_PASSES: usize = 9;

fn env_count(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(text) if !text.trim().is_empty() => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a count, not {text:?}")),
        _ => default,
    }
}

/// A user statement the statement extractor keeps, distinct per thread and record.
fn statement(thread: &str, index: usize) -> NewRecord {
    NewRecord::user(
        "ana",
        format!("I keep notebook {index} of {thread} on the shelf by the window."),
        index as i64,
    )
}

/// One SQLite file with the stores and the pending pass the worker binary would run over it.
struct Side {
    name: &'static str,
    path: PathBuf,
    log: Arc<SqliteThreadLog>,
    pass: PendingPass<SqliteStore, StatementExtractor>,
    active: Vec<ThreadId>,
    /// Records appended to each active thread so far.
    appended: usize,
}

impl Side {
    fn open(name: &'static str, path: PathBuf) -> Self {
        let log = Arc::new(SqliteThreadLog::open(&path).unwrap());
        let dyn_log: Arc<dyn ThreadLog> = log.clone();
        // As `remembering-worker`'s `build` does with its default flags.
        let processor = ActivityProcessor::new(ActivityProcessorParts {
            log: Arc::clone(&dyn_log),
            progress: Arc::new(SqliteProgressStore::open(&path).unwrap()),
            references: Arc::new(SqliteRememberingStore::open(&path).unwrap()),
            writer: Arc::new(SqliteStore::open(&path).unwrap()),
            extractor: StatementExtractor::new(),
            clock: Arc::new(SystemClock),
            processor: ProcessorId::new("statements").unwrap(),
            version: ProcessorVersion::new(1),
            owner: WorkerId::new(format!("worker-{}", std::process::id())).unwrap(),
            limits: PassLimits {
                max_records: 1_000,
                page_size: 100,
                timeout_ms: 10_000,
                lease_ms: 30_000,
            },
            unbound: UnboundThreads::PerThread {
                scopes: vec![MemoryScope::new("agent").unwrap()],
            },
        })
        .unwrap();
        let active = (0..ACTIVE_THREADS)
            .map(|index| ThreadId::new(format!("active-{index:02}")).unwrap())
            .collect();
        Self {
            name,
            path,
            log,
            pass: PendingPass::new(dyn_log, vec![processor]),
            active,
            appended: 0,
        }
    }

    /// Appends `count` statements to each thread, one transaction (and sync) per record, as
    /// `memory thread append` would.
    fn append(&self, threads: impl Iterator<Item = ThreadId>, from: usize, count: usize) -> usize {
        let mut appended = 0;
        for thread in threads {
            for index in from..from + count {
                self.log
                    .append(&thread, statement(thread.as_str(), index))
                    .unwrap();
                appended += 1;
            }
        }
        appended
    }

    /// Appends the next `count` statements to every active thread.
    fn append_active(&mut self, count: usize) -> usize {
        let appended = self.append(self.active.clone().into_iter(), self.appended, count);
        self.appended += count;
        appended
    }

    fn pending(&self) -> usize {
        usize::try_from(self.log.overview().unwrap().pending).unwrap()
    }

    /// Runs pending passes until no thread is pending; returns the records processed and passes run.
    fn settle_all(&self, runtime: &tokio::runtime::Runtime) -> (usize, usize) {
        let (mut processed, mut passes) = (0, 0);
        while self.pending() > 0 {
            let report = runtime.block_on(self.pass.run()).unwrap();
            assert_eq!(report.failed, 0, "{}: a thread pass failed", self.name);
            assert_eq!(report.parked, 0, "{}: a thread was parked", self.name);
            processed += report.processed;
            passes += 1;
            assert!(passes < 100, "{}: threads stay pending", self.name);
        }
        (processed, passes)
    }

    /// Times one pass over the active threads' new records.
    fn timed_pass(&self, runtime: &tokio::runtime::Runtime) -> f64 {
        assert_eq!(self.pending(), ACTIVE_THREADS);
        let started = Instant::now();
        let report = runtime.block_on(self.pass.run()).unwrap();
        let elapsed = started.elapsed().as_secs_f64() * 1_000.0;
        assert_eq!(
            report,
            PendingReport {
                threads: ACTIVE_THREADS,
                processed: ACTIVE_THREADS * NEW_RECORDS,
                settled: ACTIVE_THREADS,
                parked: 0,
                failed: 0,
            },
            "{}: the pass over the active threads",
            self.name
        );
        assert_eq!(
            self.pending(),
            0,
            "{}: every active thread settled",
            self.name
        );
        elapsed
    }

    /// What the file holds, to tell whether a pass wrote anything: the database file and its WAL
    /// (size and content digest) and the thread log overview.
    fn fingerprint(&self) -> String {
        let mut parts = Vec::new();
        for path in [self.path.clone(), wal_of(&self.path)] {
            match std::fs::read(&path) {
                Ok(bytes) => parts.push(format!(
                    "{}: {} bytes, sha256 {:x}",
                    path.display(),
                    bytes.len(),
                    Sha256::digest(&bytes)
                )),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    parts.push(format!("{}: absent", path.display()));
                }
                Err(error) => panic!("reading {}: {error}", path.display()),
            }
        }
        parts.push(format!("{:?}", self.log.overview().unwrap()));
        parts.join("; ")
    }
}

fn wal_of(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    }
}

fn describe(values: &[f64]) -> String {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    format!(
        "median {:.2} ms, min {:.2} ms, max {:.2} ms over {} passes",
        median(values),
        sorted[0],
        sorted[sorted.len() - 1],
        values.len()
    )
}

/// Builds a side: `idle` idle threads and the active ones, each with its earlier records, every
/// record processed and every thread settled.
fn build(
    name: &'static str,
    path: PathBuf,
    idle: usize,
    runtime: &tokio::runtime::Runtime,
) -> Side {
    let mut side = Side::open(name, path);
    let started = Instant::now();
    let idle_records = side.append(
        (0..idle).map(|index| ThreadId::new(format!("idle-{index:06}")).unwrap()),
        0,
        EARLIER_RECORDS,
    );
    let active_records = side.append_active(EARLIER_RECORDS);
    let appended_in = started.elapsed().as_secs_f64();
    assert_eq!(side.pending(), idle + ACTIVE_THREADS);
    let started = Instant::now();
    let (processed, passes) = side.settle_all(runtime);
    let settled_in = started.elapsed().as_secs_f64();
    assert_eq!(processed, idle_records + active_records);
    println!(
        "setup {name}: {} threads, {} records appended in {appended_in:.1} s, processed and settled in {settled_in:.1} s ({passes} pass(es))",
        idle + ACTIVE_THREADS,
        idle_records + active_records,
    );
    side
}

fn main() {
    let idle = env_count("IDLE_THREADS_COUNT", DEFAULT_IDLE_THREADS);
    let rounds = env_count("IDLE_THREADS_ROUNDS", DEFAULT_ROUNDS).max(1);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();

    let started = Instant::now();
    let mut crowded = build("A", dir.path().join("crowded.sqlite"), idle, &runtime);
    let mut alone = build("B", dir.path().join("alone.sqlite"), 0, &runtime);
    println!(
        "setup total: {:.1} s (A with {idle} idle threads, B without)",
        started.elapsed().as_secs_f64()
    );

    let (mut crowded_ms, mut alone_ms) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let order: [&mut Side; 2] = if round % 2 == 0 {
            [&mut crowded, &mut alone]
        } else {
            [&mut alone, &mut crowded]
        };
        for side in order {
            assert_eq!(
                side.append_active(NEW_RECORDS),
                ACTIVE_THREADS * NEW_RECORDS
            );
            let elapsed = side.timed_pass(&runtime);
            if side.name == "A" {
                crowded_ms.push(elapsed);
            } else {
                alone_ms.push(elapsed);
            }
        }
    }

    let mut idle_ms = Vec::new();
    for _ in 0..IDLE_PASSES {
        let before = crowded.fingerprint();
        let started = Instant::now();
        let report = runtime.block_on(crowded.pass.run()).unwrap();
        idle_ms.push(started.elapsed().as_secs_f64() * 1_000.0);
        assert_eq!(
            report,
            PendingReport::default(),
            "an idle pass does nothing"
        );
        assert_eq!(crowded.fingerprint(), before, "an idle pass writes nothing");
    }

    println!(
        "pass over {ACTIVE_THREADS} active threads x {NEW_RECORDS} new records, A ({idle} idle threads): {}",
        describe(&crowded_ms)
    );
    println!(
        "pass over {ACTIVE_THREADS} active threads x {NEW_RECORDS} new records, B (no idle threads): {}",
        describe(&alone_ms)
    );
    println!(
        "idle pass over A: {}, 0 records, nothing written",
        describe(&idle_ms)
    );
    println!("idle_threads_pass_ms_a {:.2}", median(&crowded_ms));
    println!("idle_threads_pass_ms_b {:.2}", median(&alone_ms));
    println!(
        "idle_threads_pass_ratio {:.2}",
        median(&crowded_ms) / median(&alone_ms)
    );
    println!("idle_pass_ms {:.3}", median(&idle_ms));
}
