//! The thread commands against PostgreSQL (`memory --db postgres://...`): append, the worker's passes
//! over the same database, and a forget that no recall mode shows from its acknowledgement on, before
//! and after cleanup. One fresh schema per test, dropped afterwards.
//!
//! The server's URL comes from `MEMORY_TEST_POSTGRES_URL` (`scripts/postgres-setup.sh` starts a local
//! server and prints it). Without it this test fails naming the script, unless `MEMORY_SKIP_POSTGRES=1`
//! asks for a loud skip.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::thread_support;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{Outcome, run_with_env};
use memory_core::activity::IntentState;
use memory_postgres::PostgresStore;
use serde_json::{Value, json};
use thread_support::*;

const URL_VARIABLE: &str = "MEMORY_TEST_POSTGRES_URL";

/// One fresh schema on the test server, dropped with everything in it when this is dropped.
struct Database {
    url: String,
    schema: String,
}

impl Database {
    fn fresh() -> Option<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let url = match std::env::var(URL_VARIABLE) {
            Ok(url) if !url.trim().is_empty() => url,
            _ if std::env::var("MEMORY_SKIP_POSTGRES").as_deref() == Ok("1") => {
                let line = "SKIPPED (MEMORY_SKIP_POSTGRES=1): memory-cli thread test did not run \
                            against PostgreSQL";
                println!("{line}");
                eprintln!("{line}");
                return None;
            }
            _ => panic!(
                "{URL_VARIABLE} is not set: run `export {URL_VARIABLE}=\"$(bash \
                 scripts/postgres-setup.sh)\"`, or set MEMORY_SKIP_POSTGRES=1 to skip loudly"
            ),
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or(0);
        let schema = format!(
            "memthread_{}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            nanos
        );
        Some(Self { url, schema })
    }

    fn run(&self, args: &[&str]) -> Outcome {
        let mut all = vec!["--schema", self.schema.as_str()];
        all.extend_from_slice(args);
        run_with_env(Some(Path::new(&self.url)), &all, None, &[])
    }

    fn call(&self, operation: &str, argument: &Value) -> Value {
        succeeded(self.run(&[operation, &argument.to_string()]))
    }

    /// The worker's stores on the same schema, as `remembering-worker --db URL --schema S` opens them.
    fn worker(&self) -> WorkerStores<PostgresStore> {
        let database =
            memory_cli::database::Database::select(Path::new(&self.url), Some(&self.schema))
                .unwrap();
        let memory_cli::database::Opened::Postgres(memory) =
            database.open(memory_cli::database::Client::WORKER).unwrap()
        else {
            panic!("a URL opens PostgreSQL");
        };
        memory_cli::worker::ProcessorStores::open(memory)
            .unwrap()
            .into()
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let url = self.url.clone();
        let schema = self.schema.clone();
        // A thread of its own, so the schema is dropped whether or not this runs inside a runtime.
        let dropped = std::thread::spawn(move || {
            let runtime = runtime();
            runtime.block_on(async move {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test schema {}", self.schema);
        }
    }
}

#[test]
fn a_forgotten_record_is_not_recalled_from_postgresql_before_or_after_cleanup() {
    let Some(database) = Database::fresh() else {
        return;
    };
    let thread = |command: &str, argument: &Value| {
        succeeded(database.run(&["thread", command, &argument.to_string()]))
    };
    assert_append_answer(
        &thread("append", &append(THREAD, user_record(FORGOTTEN, 1))),
        THREAD,
        1,
    );
    assert_append_answer(
        &thread("append", &append(THREAD, user_record(KEPT, 2))),
        THREAD,
        2,
    );

    let worker = database.worker();
    let runtime = runtime();
    assert_eq!(runtime.block_on(worker.activity_pass(THREAD)), 2);
    database.call("sync", &json!({}));
    let mut recall_call = |argument: &Value| database.call("recall", argument);
    let forgotten = recalled_id(&mut recall_call, FORGOTTEN_QUERY, FORGOTTEN);
    check_modes(
        &mut recall_call,
        FORGOTTEN_QUERY,
        &forgotten,
        FORGOTTEN,
        true,
        "before the forget",
    );

    let cleanup = assert_forget_answer(&thread("forget", &forget(THREAD, 1)), THREAD, 1);
    let view = worker
        .remembering
        .inspect_intent(&cleanup)
        .unwrap()
        .unwrap();
    assert_eq!(
        view.state,
        IntentState::Queued,
        "cleanup has not run: {view:?}"
    );
    check_modes(
        &mut recall_call,
        FORGOTTEN_QUERY,
        &forgotten,
        FORGOTTEN,
        false,
        "after the forget, before cleanup",
    );
    check_modes(
        &mut recall_call,
        KEPT_QUERY,
        "-",
        KEPT,
        true,
        "the other record, before cleanup",
    );
    assert!(database.call("get", &get(&forgotten))["document"].is_null());
    database
        .run(&["thread", "forget", &forget(THREAD, 3).to_string()])
        .assert_refused("not-found");

    runtime.block_on(worker.intent_pass());
    worker.assert_cleaned(&cleanup);
    database.call("sync", &json!({}));
    check_modes(
        &mut recall_call,
        FORGOTTEN_QUERY,
        &forgotten,
        FORGOTTEN,
        false,
        "after cleanup",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_record_is_never_shown_by_the_context_tools_on_postgresql() {
    let Some(database) = Database::fresh() else {
        return;
    };
    a_forgotten_record_is_never_shown_by_the_context_tools(&[
        "--db",
        &database.url,
        "--schema",
        &database.schema,
    ])
    .await;
}
