//! The memory-core activity suites (thread log, progress, remembering store) against SQLite files: each
//! rule gets a fresh file, and every handle a rule opens is its own connection to it.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use memory_core::activity::ThreadId;
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use memory_testkit::activity::{ActivityBackend, run_all};

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
