//! The memory-core activity suites (thread log, progress, remembering store) against SQLite files: each
//! rule gets a fresh file, and every handle a rule opens is its own connection to it.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use memory_core::activity::ThreadId;
use memory_core::testing::activity::{ActivityBackend, run_all};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;

/// One fresh SQLite file holding the activity tables.
struct SqliteActivity {
    path: PathBuf,
}

impl ActivityBackend for SqliteActivity {
    type Log = SqliteThreadLog;
    type Progress = SqliteProgressStore;
    type Remembering = SqliteRememberingStore;

    fn thread_log(&self) -> SqliteThreadLog {
        SqliteThreadLog::open(&self.path).unwrap()
    }

    fn progress(&self) -> SqliteProgressStore {
        SqliteProgressStore::open(&self.path).unwrap()
    }

    fn remembering(&self) -> SqliteRememberingStore {
        SqliteRememberingStore::open(&self.path).unwrap()
    }
}

#[test]
fn sqlite_activity_stores_pass_every_activity_suite() {
    run_all(|| SqliteActivity {
        path: common::fresh_path(),
    })
    .assert_all_passed();
}

/// Records are append-only below the port too: the file's triggers refuse a raw update or delete.
#[test]
fn thread_records_are_append_only_for_a_raw_connection() {
    use memory_core::activity::{NewRecord, ThreadLog};
    let path = common::fresh_path();
    let log = SqliteThreadLog::open(&path).unwrap();
    log.append(
        &ThreadId::new("t").unwrap(),
        NewRecord::user("ana", "hello", 1),
    )
    .unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    for statement in [
        "UPDATE thread_records SET record_json = '{}'",
        "DELETE FROM thread_records",
    ] {
        let error = raw.execute_batch(statement).expect_err(statement);
        assert!(error.to_string().contains("append-only"), "{error}");
    }
}

/// A file written before destinations and the pending index (thread records only, no pending rows,
/// no marker) opens with every existing thread pending once and unbound, so the worker's next pass
/// visits each of them, and its records keep their place.
#[test]
fn a_thread_log_from_before_the_pending_index_marks_every_thread_pending_once() {
    use memory_core::activity::{NewRecord, Sequence, ThreadLog};
    let path = common::fresh_path();
    {
        let log = SqliteThreadLog::open(&path).unwrap();
        for (thread, records) in [("a", 2), ("b", 1)] {
            for at in 0..records {
                log.append(
                    &ThreadId::new(thread).unwrap(),
                    NewRecord::user("ana", "hello", at),
                )
                .unwrap();
            }
        }
    }
    // Make the file look like one an earlier build wrote.
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch(
        "DROP TABLE thread_pending; DROP TABLE thread_parks; DROP TABLE thread_bindings;
         DELETE FROM activity_formats WHERE component = 'thread_log.pending';",
    )
    .unwrap();
    drop(raw);
    let log = SqliteThreadLog::open(&path).unwrap();
    let pending: Vec<(String, u64)> = log
        .pending_threads(None, 10)
        .unwrap()
        .into_iter()
        .map(|pending| (pending.thread.as_str().to_owned(), pending.tail.0))
        .collect();
    assert_eq!(pending, [("a".to_owned(), 2), ("b".to_owned(), 1)]);
    let overview = log.overview().unwrap();
    assert_eq!((overview.unbound, overview.pending), (2, 2));
    assert_eq!(
        log.inspect_tail(&ThreadId::new("a").unwrap()).unwrap(),
        Sequence(2)
    );
    // Settled once, a reopen does not mark them again.
    assert!(
        log.settle(&ThreadId::new("a").unwrap(), Sequence(2))
            .unwrap()
    );
    drop(log);
    let log = SqliteThreadLog::open(&path).unwrap();
    assert_eq!(log.overview().unwrap().pending, 1);
}
