//! The memory-core activity suites (thread log, progress, remembering store) against PostgreSQL, one
//! fresh schema per rule, every handle a rule opens with a pool of its own (as another process would
//! have); and the append-only trigger below the port.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{TestStore, server_url, store_blocking};
use memory_core::activity::{NewRecord, ThreadId, ThreadLog};
use memory_postgres::progress::PostgresProgressStore;
use memory_postgres::remembering_store::PostgresRememberingStore;
use memory_postgres::thread_log::PostgresThreadLog;
use memory_testkit::activity::{ActivityBackend, run_all};

/// One fresh schema holding the activity tables.
struct PostgresActivity {
    store: TestStore,
}

impl ActivityBackend for PostgresActivity {
    type Log = PostgresThreadLog;
    type Progress = PostgresProgressStore;
    type Remembering = PostgresRememberingStore;

    fn thread_log(&self) -> PostgresThreadLog {
        self.store.another_blocking().thread_log()
    }

    fn progress(&self) -> PostgresProgressStore {
        self.store.another_blocking().progress()
    }

    fn remembering(&self) -> PostgresRememberingStore {
        self.store.another_blocking().remembering()
    }
}

#[test]
fn postgres_activity_stores_pass_every_activity_suite() {
    let Some(url) = server_url("postgres_activity_stores_pass_every_activity_suite") else {
        return;
    };
    run_all(|| PostgresActivity {
        store: store_blocking(&url),
    })
    .assert_all_passed();
}

/// Records are append-only below the port too: the schema's trigger refuses a raw update or delete.
#[test]
fn thread_records_are_append_only_for_a_raw_connection() {
    let Some(url) = server_url("thread_records_are_append_only_for_a_raw_connection") else {
        return;
    };
    let store = store_blocking(&url);
    store
        .thread_log()
        .append(
            &ThreadId::new("t").unwrap(),
            NewRecord::user("ana", "hello", 1),
        )
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let raw = runtime.block_on(store.raw());
    for statement in [
        "UPDATE thread_records SET record_json = '{}'",
        "DELETE FROM thread_records",
    ] {
        let error = runtime
            .block_on(raw.batch_execute(statement))
            .expect_err(statement);
        assert!(
            error.to_string().contains("append-only")
                || format!("{error:?}").contains("append-only")
        );
    }
}

/// A record damaged in the database (a JSON that no longer parses, a kind this build does not know, a
/// digest that does not match) is read past as undecodable: the records around it stay readable,
/// while `read_page` still refuses the page as corrupt.
#[test]
fn a_damaged_record_is_read_past_as_undecodable() {
    use memory_core::StoreFault;
    use memory_core::activity::{ActivityError, LogEntry, Sequence, UndecodableReason};
    let Some(url) = server_url("a_damaged_record_is_read_past_as_undecodable") else {
        return;
    };
    let store = store_blocking(&url);
    let log = store.thread_log();
    let thread = ThreadId::new("t").unwrap();
    let stored: Vec<_> = ["one", "two", "three"]
        .into_iter()
        .map(|text| {
            log.append(&thread, NewRecord::user("ana", text, 1))
                .unwrap()
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let raw = runtime.block_on(store.raw());
    runtime
        .block_on(
            raw.batch_execute(
                "ALTER TABLE thread_records DISABLE TRIGGER thread_records_append_only",
            ),
        )
        .unwrap();
    let row = runtime
        .block_on(raw.query_one(
            "SELECT record_json, digest FROM thread_records WHERE sequence = 2",
            &[],
        ))
        .unwrap();
    let (json, digest): (String, String) = (row.get(0), row.get(1));
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
        runtime
            .block_on(raw.execute(
                "UPDATE thread_records SET record_json = $1, digest = $2 WHERE sequence = 2",
                &[&damaged_json, &damaged_digest],
            ))
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
