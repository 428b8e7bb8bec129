//! The worker binary processes committed activity, runs admitted intents (a forgotten thread record's
//! cleanup), and stops cleanly on SIGTERM and SIGINT.
#![allow(clippy::unwrap_used)]

use std::process::Command;

use std::sync::Arc;

use memory_core::activity::{
    IntentOutcome, IntentState, NewRecord, ProgressStore, RememberingStore, Sequence, SourceId,
    ThreadDestination, ThreadId, ThreadLog,
};
use memory_core::{MemoryKey, MemoryReader, MemoryScope, SystemClock};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use remembering::extract::statement_document_id;
use remembering::sources::{SourceEvent, SourceEvents};

const BINARY: &str = env!("CARGO_BIN_EXE_remembering-worker");

/// One `remembering-worker --db PATH --once`; answers its exit status.
fn run_once(path: &std::path::Path) -> std::process::ExitStatus {
    Command::new(BINARY)
        .arg("--db")
        .arg(path)
        .arg("--once")
        .status()
        .unwrap()
}

#[test]
fn once_processes_threads_and_forget_cleanup_and_signals_stop_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let log = SqliteThreadLog::open(&path).unwrap();
    for name in ["a", "b"] {
        let thread = ThreadId::new(name).unwrap();
        log.append(&thread, NewRecord::user("ana", "I like tea", 1))
            .unwrap();
        log.append(&thread, NewRecord::assistant("noted", 2))
            .unwrap();
    }
    let status = run_once(&path);
    assert!(status.success());
    let progress = SqliteProgressStore::open(&path).unwrap();
    let views = progress.inspect_all(10).unwrap();
    assert_eq!(views.len(), 2);
    assert!(views.iter().all(|view| view.cursor == Sequence::new(2)));

    // Forget thread a's statement: the next pass runs the admitted cleanup and withdraws it.
    let a = ThreadId::new("a").unwrap();
    // The threads have no destination: each went to its own namespace, as before destinations.
    let key = MemoryKey {
        namespace: ThreadDestination::legacy_thread(&a, vec![MemoryScope::new("agent").unwrap()])
            .unwrap()
            .namespace()
            .clone(),
        id: statement_document_id("ana", "I like tea").unwrap(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let memory = memory_sqlite::SqliteStore::open(&path).unwrap();
    assert!(runtime.block_on(memory.read(&key)).unwrap().is_some());
    let remembering = Arc::new(SqliteRememberingStore::open(&path).unwrap());
    let cleanup = SourceEvents::new(remembering.clone(), Arc::new(SystemClock))
        .record(
            &SourceId::thread_record(&a, Sequence::new(1)),
            &SourceEvent::Forget,
        )
        .unwrap()
        .cleanup;
    let status = run_once(&path);
    assert!(status.success());
    let view = remembering.inspect_intent(&cleanup).unwrap().unwrap();
    assert_eq!(view.state, IntentState::Done);
    assert_eq!(
        view.outcome,
        Some(IntentOutcome::Cleaned {
            withdrawn: 1,
            kept: 0
        })
    );
    assert_eq!(runtime.block_on(memory.read(&key)).unwrap(), None);

    for signal in ["-TERM", "-INT"] {
        let mut child = Command::new(BINARY)
            .arg("--db")
            .arg(&path)
            .arg("--interval-ms")
            .arg("50")
            .env("RUST_LOG", "info")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Signalled once a pass has finished (every thread is settled, so passes claim nothing and
        // write nothing): the worker listens for signals before its first pass, so the stop is
        // always its own clean shutdown, however slowly it started.
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(
            child.stderr.take().expect("piped standard error"),
        ));
        assert!(
            lines
                .by_ref()
                .map_while(Result::ok)
                .any(|line| line.contains("pass finished")),
            "the worker exited before finishing a pass"
        );
        std::thread::spawn(move || lines.for_each(drop));
        let killed = Command::new("kill")
            .arg(signal)
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(killed.success());
        let status = child.wait().unwrap();
        assert!(
            status.success(),
            "worker exited with {status:?} after {signal}"
        );
    }
}

/// A thread whose stored destination no longer validates is parked (and counted by `memory status`),
/// and the worker goes on with every other thread; rebinding the thread unparks it.
#[test]
fn a_thread_with_a_destination_that_no_longer_validates_is_parked_and_the_rest_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let log = SqliteThreadLog::open(&path).unwrap();
    let scopes = vec![MemoryScope::new("agent").unwrap()];
    let ana = ThreadDestination::for_user("ana", scopes.clone()).unwrap();
    for name in ["bad", "good"] {
        log.append_to(
            &ThreadId::new(name).unwrap(),
            Some(&ana),
            NewRecord::user("ana", format!("I keep a diary called {name}."), 1),
        )
        .unwrap();
    }
    // Something outside the product damages one binding.
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection
        .execute(
            "UPDATE thread_bindings SET destination = '{\"namespace\":\"not an address\",\"scopes\":[\"agent\"]}' WHERE thread = 'bad'",
            [],
        )
        .unwrap();
    let status = run_once(&path);
    assert!(status.success(), "one bad thread does not stop the worker");
    let memory = memory_sqlite::SqliteStore::open(&path).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let good = MemoryKey {
        namespace: ana.namespace().clone(),
        id: statement_document_id("ana", "I keep a diary called good.").unwrap(),
    };
    assert!(runtime.block_on(memory.read(&good)).unwrap().is_some());
    let overview = log.overview().unwrap();
    assert_eq!(overview.parked, vec![("destination".to_owned(), 1)]);
    assert_eq!(overview.unreadable, 1);
    assert_eq!(
        overview.destinations.len(),
        1,
        "the good thread's destination is listed"
    );
    // Parked threads are not visited again until they are rebound.
    assert!(
        log.pending_threads(None, 10)
            .unwrap()
            .iter()
            .all(|pending| pending.thread.as_str() != "bad")
    );
    let bea = ThreadDestination::for_user("bea", scopes).unwrap();
    log.rebind(&ThreadId::new("bad").unwrap(), &bea).unwrap();
    let status = run_once(&path);
    assert!(status.success());
    let rebound = MemoryKey {
        namespace: bea.namespace().clone(),
        id: statement_document_id("ana", "I keep a diary called bad.").unwrap(),
    };
    assert!(runtime.block_on(memory.read(&rebound)).unwrap().is_some());
    assert!(log.overview().unwrap().parked.is_empty());
    assert_eq!(log.overview().unwrap().pending, 0);
}
