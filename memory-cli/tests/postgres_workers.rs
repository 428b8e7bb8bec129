//! Several `remembering-worker` processes on one PostgreSQL database (`--db postgres://...`): every
//! thread record lands exactly once (one document per statement, one revision each, one kept reference
//! whose receipt is the one the store holds), and a worker killed with SIGKILL in the middle of a pass
//! is taken over by the other once its lease expires, with no record applied twice and no cursor ever
//! moving back.
//!
//! The tests need a server: `export MEMORY_TEST_POSTGRES_URL="$(bash scripts/postgres-setup.sh)"`.
//! Without it they fail with that hint, unless `MEMORY_SKIP_POSTGRES=1` asks for a loud skip (the rule
//! every PostgreSQL test of the workspace follows). Each test works in a fresh schema (the worker's
//! `--schema`) that it drops afterwards.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use memory_core::activity::{
    NewRecord, ProgressStore, ProgressView, RememberingStore, Sequence, SourceId,
    ThreadDestination, ThreadId, ThreadLog,
};
use memory_core::{ChangeFeed, ChangeSequence, MemoryKey, MemoryReader, MemoryScope};
use memory_postgres::{PostgresStore, SchemaName};
use remembering::extract::statement_document_id;

const BINARY: &str = env!("CARGO_BIN_EXE_remembering-worker");
const URL_VARIABLE: &str = "MEMORY_TEST_POSTGRES_URL";
/// A bound on every wait for the workers, generous for a loaded machine; never asserted as a time.
const PATIENCE: Duration = Duration::from_secs(180);

/// The server URL, or `None` (after a loud line) when PostgreSQL tests are skipped.
fn server_url(test: &str) -> Option<String> {
    match std::env::var(URL_VARIABLE) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var("MEMORY_SKIP_POSTGRES").as_deref() == Ok("1") => {
            let line = format!(
                "SKIPPED (MEMORY_SKIP_POSTGRES=1): remembering test `{test}` did not run against PostgreSQL"
            );
            println!("{line}");
            eprintln!("{line}");
            None
        }
        _ => panic!(
            "{URL_VARIABLE} is not set: run `export {URL_VARIABLE}=\"$(bash scripts/postgres-setup.sh)\"` \
             (it starts a local PostgreSQL server and prints the URL), or set MEMORY_SKIP_POSTGRES=1 to \
             skip the PostgreSQL tests loudly"
        ),
    }
}

/// A fresh schema, dropped with everything in it when this is dropped.
struct Schema {
    url: String,
    name: SchemaName,
}

impl Schema {
    fn fresh(url: String) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or(0);
        let name = SchemaName::new(format!(
            "remtest_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ))
        .unwrap();
        Self { url, name }
    }

    fn store(&self) -> PostgresStore {
        PostgresStore::builder(&self.url)
            .schema(self.name.clone())
            .pool_size(2)
            .connect_blocking()
            .unwrap()
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let url = self.url.clone();
        let name = self.name.as_str().to_owned();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                    .await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test schema {}", self.name.as_str());
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The document the statement extractor writes for record `sequence` of `thread` (as [`seed`]
/// wrote it, into the thread's own namespace: the seeded threads have no destination).
fn statement_key(thread: &ThreadId, sequence: u64) -> MemoryKey {
    let index = thread.as_str().trim_start_matches("thread-");
    MemoryKey {
        namespace: ThreadDestination::legacy_thread(
            thread,
            vec![MemoryScope::new("agent").unwrap()],
        )
        .unwrap()
        .namespace()
        .clone(),
        id: statement_document_id(
            "ana",
            &format!("I like tea number {sequence} of thread {index}"),
        )
        .unwrap(),
    }
}

/// `threads` threads of `records` user statements each.
fn seed(store: &PostgresStore, threads: usize, records: u64) -> Vec<ThreadId> {
    let log = store.thread_log();
    (0..threads)
        .map(|index| {
            let thread = ThreadId::new(format!("thread-{index}")).unwrap();
            for record in 1..=records {
                log.append(
                    &thread,
                    NewRecord::user(
                        "ana",
                        format!("I like tea number {record} of thread {index}"),
                        i64::try_from(record).unwrap(),
                    ),
                )
                .unwrap();
            }
            thread
        })
        .collect()
}

/// A worker process on `schema`; its stderr lines come through the returned receiver (read on a thread
/// of their own, so a full pipe never blocks the worker) and are echoed to this test's stderr.
fn spawn_worker(
    schema: &Schema,
    id: &str,
    extra: &[&str],
    stall_at: Option<&str>,
) -> (Worker, mpsc::Receiver<String>) {
    let mut command = Command::new(BINARY);
    command
        .arg("--db")
        .arg(&schema.url)
        .arg("--schema")
        .arg(schema.name.as_str())
        .arg("--worker-id")
        .arg(id)
        .args(extra)
        // The binary's own pass lines ("... pass finished") too: a test signals a worker only
        // once it has passed, so the stop always finds its signal handlers installed.
        .env("RUST_LOG", "warn,remembering_worker=info")
        .stderr(Stdio::piped());
    if let Some(spec) = stall_at {
        command.env("REMEMBERING_WORKER_STALL_AT", spec);
    }
    let mut child = command.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines, receiver) = mpsc::channel();
    let id = id.to_owned();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            eprintln!("[{id}] {line}");
            // The receiver may be gone; the worker's output is still echoed.
            let _ = lines.send(line);
        }
    });
    (Worker(child), receiver)
}

/// Whether a line containing `needle` arrives before the worker's stderr closes or [`PATIENCE`] ends.
fn wait_for_line(lines: &mpsc::Receiver<String>, needle: &str) -> bool {
    let started = Instant::now();
    while let Some(left) = PATIENCE.checked_sub(started.elapsed()) {
        match lines.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

/// A worker process, killed when dropped unless it was waited for, so a failing test leaves no worker
/// running against its dropped schema.
struct Worker(Child);

impl Worker {
    fn wait(&mut self) -> std::process::ExitStatus {
        self.0.wait().unwrap()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn signal(child: &Worker, signal: &str) {
    let status = Command::new("kill")
        .arg(signal)
        .arg(child.0.id().to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} failed");
}

/// Watches every thread's cursor: each observation must be at or past the previous one.
#[derive(Default)]
struct CursorWatch {
    seen: BTreeMap<ThreadId, Sequence>,
}

impl CursorWatch {
    fn observe(&mut self, progress: &dyn ProgressStore) -> Vec<ProgressView> {
        let views = progress.inspect_all(1_000).unwrap();
        for view in &views {
            let before = self
                .seen
                .insert(view.key.thread.clone(), view.cursor)
                .unwrap_or(Sequence::ZERO);
            assert!(
                view.cursor >= before,
                "cursor of {} moved back from {} to {}",
                view.key.thread.as_str(),
                before.get(),
                view.cursor.get()
            );
        }
        views
    }

    /// Observes until every thread's cursor reached `tail`; panics after [`PATIENCE`].
    fn until_done(&mut self, progress: &dyn ProgressStore, threads: &[ThreadId], tail: u64) {
        let started = Instant::now();
        loop {
            let views = self.observe(progress);
            let done = threads.iter().all(|thread| {
                views
                    .iter()
                    .any(|view| &view.key.thread == thread && view.cursor == Sequence::new(tail))
            });
            if done {
                return;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "workers did not finish every thread; progress: {views:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Every record landed exactly once: the change sequence holds one change per statement, each on its
/// own document; every document has one revision; each record's source keeps exactly one reference,
/// naming that revision, and the receipt stored for its operation names it too.
fn assert_each_record_applied_once(store: &PostgresStore, threads: &[ThreadId], records: u64) {
    let runtime = runtime();
    let statements = threads.len() * usize::try_from(records).unwrap();
    let changes = runtime
        .block_on(store.changes_since(ChangeSequence::ZERO, statements + 10))
        .unwrap();
    assert_eq!(changes.len(), statements, "one change per statement");
    let mut changed: Vec<_> = changes.iter().map(|change| change.key.clone()).collect();
    changed.sort_by(|a, b| {
        (a.namespace.as_str(), a.id.as_str()).cmp(&(b.namespace.as_str(), b.id.as_str()))
    });
    changed.dedup();
    assert_eq!(changed.len(), statements, "one document per statement");
    let remembering = store.remembering();
    for thread in threads {
        for sequence in 1..=records {
            let key = statement_key(thread, sequence);
            let document = runtime
                .block_on(store.read(&key))
                .unwrap()
                .unwrap_or_else(|| panic!("no document for {} #{sequence}", thread.as_str()));
            let history = runtime.block_on(store.history(&key)).unwrap();
            assert_eq!(
                history.len(),
                1,
                "{} #{sequence} written once",
                thread.as_str()
            );
            let references = remembering
                .references(
                    &SourceId::thread_record(thread, Sequence::new(sequence)),
                    0,
                    10,
                )
                .unwrap();
            assert_eq!(
                references.len(),
                1,
                "{} #{sequence}: one command, kept once",
                thread.as_str()
            );
            let reference = &references[0].1;
            assert_eq!(reference.target, key);
            assert_eq!(reference.revision, document.revision);
            let receipt = runtime
                .block_on(store.receipt(&key.namespace, &reference.operation_id))
                .unwrap()
                .unwrap();
            assert_eq!(receipt.document.key, key);
            assert_eq!(receipt.document.revision, document.revision);
        }
    }
    runtime.block_on(store.check_consistency()).unwrap();
}

#[test]
fn two_workers_on_one_database_apply_every_record_exactly_once() {
    let Some(url) = server_url("two_workers_on_one_database_apply_every_record_exactly_once")
    else {
        return;
    };
    let schema = Schema::fresh(url);
    let store = schema.store();
    const RECORDS: u64 = 8;
    let threads = seed(&store, 4, RECORDS);
    // Small passes and a short interval, so the two workers take turns on the same threads.
    let flags = [
        "--interval-ms",
        "20",
        "--max-records",
        "2",
        "--page-size",
        "1",
    ];
    let (a, a_lines) = spawn_worker(&schema, "a", &flags, None);
    let (b, b_lines) = spawn_worker(&schema, "b", &flags, None);
    let mut workers = [(a, a_lines), (b, b_lines)];
    let progress = store.progress();
    CursorWatch::default().until_done(&progress, &threads, RECORDS);
    for (worker, lines) in &mut workers {
        assert!(
            wait_for_line(lines, "pass finished"),
            "the worker never passed"
        );
        signal(worker, "-TERM");
        let status = worker.wait();
        assert!(status.success(), "worker exited with {status:?}");
    }
    assert_each_record_applied_once(&store, &threads, RECORDS);
}

#[test]
fn a_worker_killed_mid_pass_is_taken_over_after_its_lease_expires() {
    let Some(url) = server_url("a_worker_killed_mid_pass_is_taken_over_after_its_lease_expires")
    else {
        return;
    };
    let schema = Schema::fresh(url);
    let store = schema.store();
    const RECORDS: u64 = 6;
    let threads = seed(&store, 3, RECORDS);
    let progress = store.progress();
    let mut watch = CursorWatch::default();
    // A short lease (a pass starts no new record after its timeout, which must be shorter), so the
    // takeover comes soon after the kill.
    let flags = [
        "--interval-ms",
        "50",
        "--page-size",
        "1",
        "--timeout-ms",
        "1000",
        "--lease-ms",
        "2000",
    ];

    // Worker a stalls right after its third write landed, before its cursor passed that record: the
    // write is applied and the saved output still pending, the hardest place to die.
    let (mut a, a_lines) = spawn_worker(&schema, "a", &flags, Some("after-apply:3"));
    assert!(
        wait_for_line(&a_lines, "stalled at after-apply"),
        "worker a did not stall"
    );
    let views = watch.observe(&progress);
    let held: Vec<_> = views
        .iter()
        .filter(|view| matches!(&view.lease, Some((owner, _)) if owner.as_str() == "a"))
        .collect();
    assert_eq!(held.len(), 1, "a holds one lease while stalled: {views:?}");
    let stalled = held[0].clone();
    assert!(stalled.pending.is_some(), "a stalled with its output saved");
    assert!(
        stalled.cursor < Sequence::new(RECORDS),
        "a stalled mid-thread"
    );
    signal(&a, "-KILL");
    let status = a.wait();
    assert!(!status.success(), "a was killed");

    let (mut b, _b_lines) = spawn_worker(&schema, "b", &flags, None);
    watch.until_done(&progress, &threads, RECORDS);
    signal(&b, "-TERM");
    let status = b.wait();
    assert!(status.success(), "worker b exited with {status:?}");

    let taken_over = progress.inspect(&stalled.key).unwrap().unwrap();
    assert!(
        taken_over.epoch > stalled.epoch,
        "b claimed a's thread with a newer epoch"
    );
    assert_each_record_applied_once(&store, &threads, RECORDS);
}
