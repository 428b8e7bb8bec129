//! The memory-core activity suites (thread log, progress, remembering store) against SQLite files: each
//! rule gets a fresh file, and every handle a rule opens is its own connection to it.
#![allow(clippy::unwrap_used)]

use crate::common;

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

/// A record damaged in the file (a JSON that no longer parses, a kind this build does not know, a
/// digest that does not match) is read past as undecodable: the records around it stay readable,
/// while `read_page` still refuses the page as corrupt.
#[test]
fn a_damaged_record_is_read_past_as_undecodable() {
    use memory_core::StoreFault;
    use memory_core::activity::{
        ActivityError, LogEntry, NewRecord, Sequence, ThreadLog, UndecodableReason,
    };
    let path = common::fresh_path();
    let log = SqliteThreadLog::open(&path).unwrap();
    let thread = ThreadId::new("t").unwrap();
    let stored: Vec<_> = ["one", "two", "three"]
        .into_iter()
        .map(|text| {
            log.append(&thread, NewRecord::user("ana", text, 1))
                .unwrap()
        })
        .collect();
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch("DROP TRIGGER thread_records_append_only_update")
        .unwrap();
    let (json, digest): (String, String) = raw
        .query_row(
            "SELECT record_json, digest FROM thread_records WHERE sequence = 2",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    let damages = [
        (
            "{\"speaker\": ".to_owned(),
            digest.clone(),
            UndecodableReason::Parse,
        ),
        (
            json.replace("user_input", "telepathy"),
            digest.clone(),
            UndecodableReason::Parse,
        ),
        (
            json.clone(),
            stored[0].digest.as_str().to_owned(),
            UndecodableReason::Digest,
        ),
    ];
    for (damaged_json, damaged_digest, reason) in damages {
        raw.execute(
            "UPDATE thread_records SET record_json = ?1, digest = ?2 WHERE sequence = 2",
            [&damaged_json, &damaged_digest],
        )
        .unwrap();
        let entries = log.read_entries(&thread, Sequence::ZERO, 10).unwrap();
        assert_eq!(entries.len(), 3, "{reason:?}");
        assert_eq!(entries[0], LogEntry::Record(stored[0].clone()));
        match &entries[1] {
            LogEntry::Undecodable(undecodable) => {
                assert_eq!(undecodable.sequence, Sequence::new(2));
                assert_eq!(undecodable.reason, reason);
            }
            LogEntry::Record(record) => panic!("{reason:?}: read as a record: {record:?}"),
        }
        assert_eq!(entries[2], LogEntry::Record(stored[2].clone()));
        let refused = log.read_page(&thread, Sequence::ZERO, 10).unwrap_err();
        assert!(
            matches!(refused, ActivityError::Store(StoreFault::Corrupt { .. })),
            "{refused:?}"
        );
        assert_eq!(
            log.read_page(&thread, Sequence::new(2), 10).unwrap(),
            vec![stored[2].clone()]
        );
    }
}
