//! The memory-core activity suites (thread log, progress, remembering store) against PostgreSQL, one
//! fresh schema per rule, every handle a rule opens with a pool of its own (as another process would
//! have); and the append-only trigger below the port.
#![allow(clippy::unwrap_used)]

mod common;

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
