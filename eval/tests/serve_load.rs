//! `memory-eval serve-load` at a tiny scale (200 documents, 4 tenants, 4 clients, 40 calls each)
//! through the built `memory` binary with the real model: only the correctness figures are asserted
//! (no answer holds another tenant's memory, every acknowledged write is read back, every
//! acknowledged forget hides its document, no error but the deliberate refusals); its latencies are
//! a bench's, never asserted. Needs `target/<profile>/memory` (built by `cargo test --workspace`,
//! or `cargo build -p memory-cli --bin memory`) and the model assets (`scripts/fetch-assets.sh`,
//! which `scripts/test.sh` runs first). The PostgreSQL run needs `MEMORY_TEST_POSTGRES_URL`
//! (`scripts/postgres-setup.sh`), unless `MEMORY_SKIP_POSTGRES=1` skips it loudly.

use std::time::Duration;

use eval::serve_load::report::ServeLoadReport;
use eval::serve_load::{ServeLoadOptions, run};

fn tiny(out: &std::path::Path, postgres: Option<String>) -> ServeLoadReport {
    let options = ServeLoadOptions {
        out: out.to_owned(),
        memory_bin: None,
        docs: 200,
        tenants: 4,
        clients: 4,
        duration: Duration::from_secs(3),
        ops: Some(40),
        idle_recalls: 10,
        think: Duration::ZERO,
        seed: 7,
        postgres,
        reuse_store: false,
        verbose: true,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let report = runtime
        .block_on(run(&options))
        .expect("the load run completes");
    assert!(
        out.join("serve-load.json").is_file(),
        "the report is written"
    );
    report
}

fn assert_correct(report: &ServeLoadReport) {
    let shown = serde_json::to_string_pretty(report).unwrap_or_default();
    assert_eq!(report.cross_tenant_answers, 0, "{shown}");
    assert!(
        report.acknowledged_writes > 0,
        "some remembers were acknowledged: {shown}"
    );
    assert_eq!(report.acknowledged_writes_missing, 0, "{shown}");
    assert_eq!(report.acknowledged_forgets_visible, 0, "{shown}");
    assert_eq!(report.unexpected_errors, 0, "{shown}");
    let refusals = report.deliberate_refusals;
    assert!(refusals.attempted > 0, "{shown}");
    assert_eq!(refusals.attempted, refusals.forbidden, "{shown}");
    assert!(report.correct(), "{shown}");
}

#[test]
fn tiny_load_on_sqlite_answers_every_tenant_only_its_own_memory() {
    let out = tempfile::tempdir().expect("a temporary folder");
    let report = tiny(out.path(), None);
    assert_correct(&report);
    assert_eq!(report.total_calls, 160);
}

#[test]
fn tiny_load_on_postgres_survives_a_killed_server() {
    let url = match std::env::var("MEMORY_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => url,
        _ if std::env::var("MEMORY_SKIP_POSTGRES").as_deref() == Ok("1") => {
            eprintln!(
                "SKIPPED (MEMORY_SKIP_POSTGRES=1): eval test `tiny_load_on_postgres_survives_a_killed_server` \
                 did not run against PostgreSQL"
            );
            return;
        }
        _ => panic!(
            "MEMORY_TEST_POSTGRES_URL is not set: run `export MEMORY_TEST_POSTGRES_URL=\"$(bash \
             scripts/postgres-setup.sh)\"` (it starts a local PostgreSQL server and prints the URL), or \
             set MEMORY_SKIP_POSTGRES=1 to skip the PostgreSQL tests loudly"
        ),
    };
    let out = tempfile::tempdir().expect("a temporary folder");
    let report = tiny(out.path(), Some(url));
    assert_correct(&report);
    assert_eq!(report.servers, 2);
    assert!(
        report.restart.is_some(),
        "server a was killed and restarted"
    );
}
