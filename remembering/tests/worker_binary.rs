//! The worker binary processes committed activity and stops cleanly on SIGTERM.
#![allow(clippy::unwrap_used)]

use std::process::Command;

use memory_core::activity::{NewRecord, ProgressStore, Sequence, ThreadId, ThreadLog};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::thread_log::SqliteThreadLog;

const BINARY: &str = env!("CARGO_BIN_EXE_remembering-worker");

#[test]
fn once_processes_every_thread_and_sigterm_stops_cleanly() {
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
    let status = Command::new(BINARY)
        .arg("--db")
        .arg(&path)
        .arg("--once")
        .status()
        .unwrap();
    assert!(status.success());
    let progress = SqliteProgressStore::open(&path).unwrap();
    let views = progress.inspect_all(10).unwrap();
    assert_eq!(views.len(), 2);
    assert!(views.iter().all(|view| view.cursor == Sequence(2)));

    let mut child = Command::new(BINARY)
        .arg("--db")
        .arg(&path)
        .arg("--interval-ms")
        .arg("50")
        .spawn()
        .unwrap();
    // Wait until the worker has run at least one more pass (a lease epoch moved), then signal it.
    let epoch_before: u64 = views.iter().map(|view| view.epoch.0).sum();
    for _ in 0..400 {
        let epochs: u64 = progress
            .inspect_all(10)
            .unwrap()
            .iter()
            .map(|v| v.epoch.0)
            .sum();
        if epochs > epoch_before {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "worker exited with {status:?}");
}
