//! Restarting the PostgreSQL server (`pg_ctl restart -m immediate`: every connection dies, in-flight
//! transactions are lost, the server runs crash recovery) while writers are mid-transaction loses no
//! acknowledged write, and retrying the writes that failed lands each exactly once.
//!
//! Restarting the shared test cluster would break the tests running beside this one, so this test starts
//! a private server: `initdb` into a temporary directory and `pg_ctl start` on a free loopback port,
//! with the binaries of Debian's package (`/usr/lib/postgresql/<version>/bin`, installed by
//! `scripts/postgres-setup.sh`). PostgreSQL refuses to run as root, so as root the server runs as the
//! `postgres` user (through `runuser`) in a directory it owns. The skip rule is the other tests':
//! `MEMORY_SKIP_POSTGRES=1` skips loudly; otherwise missing binaries fail the test, naming the script.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{NOW, key, put, said};
use memory_core::{ManualClock, MemoryError, MemoryReader, MemoryWrite, MemoryWriter};
use memory_postgres::PostgresStore;

/// Concurrent writers, and the puts each issues one after another.
const WRITERS: u64 = 8;
const PUTS_PER_WRITER: u64 = 40;
/// The restart is issued once this many writes were acknowledged: well inside the run.
const RESTART_AFTER: u64 = 60;

/// The newest installed server's `bin` directory.
fn server_binaries() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("pg_ctl").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|meta| meta.uid() == 0)
        .unwrap_or(false)
}

/// Runs a server binary, as `postgres` when this process is root; panics with its output on failure.
fn run_server_tool(bin: &Path, tool: &str, args: &[&str]) {
    let program = bin.join(tool);
    let output = if running_as_root() {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(&program)
            .args(args)
            .output()
    } else {
        Command::new(&program).args(args).output()
    }
    .unwrap_or_else(|error| panic!("could not run {}: {error}", program.display()));
    assert!(
        output.status.success(),
        "{tool} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A private PostgreSQL server in a temporary directory, stopped (immediately) and deleted on drop.
struct PrivateServer {
    bin: PathBuf,
    data: String,
    options: String,
    log: String,
    port: u16,
    _directory: tempfile::TempDir,
}

impl PrivateServer {
    fn start() -> Self {
        let bin = server_binaries().unwrap_or_else(|| {
            panic!(
                "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin: run \
                 `bash scripts/postgres-setup.sh` (it installs Debian's postgresql package), or set \
                 MEMORY_SKIP_POSTGRES=1 to skip the PostgreSQL tests loudly"
            )
        });
        let directory = tempfile::tempdir().unwrap();
        if running_as_root() {
            let status = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(directory.path())
                .status()
                .unwrap();
            assert!(status.success(), "could not hand the directory to postgres");
        }
        let root = directory.path().to_str().unwrap().to_owned();
        let data = format!("{root}/data");
        let log = format!("{root}/server.log");
        // Trust on loopback for the test's own throwaway cluster; `--no-sync` only skips flushing the
        // bootstrap files (the server itself runs with fsync and synchronous_commit on, the defaults).
        run_server_tool(
            &bin,
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        // Bound and released at once: a small window in which another process could take the port,
        // which would only make `pg_ctl start` fail loudly.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let options = format!("-p {port} -c listen_addresses=127.0.0.1 -k {root}");
        let server = Self {
            bin,
            data,
            options,
            log,
            port,
            _directory: directory,
        };
        server.pg_ctl(&["start", "-w", "-t", "60"]);
        server
    }

    fn pg_ctl(&self, action: &[&str]) {
        let mut args: Vec<&str> = action.to_vec();
        args.extend(["-D", &self.data, "-o", &self.options, "-l", &self.log]);
        run_server_tool(&self.bin, "pg_ctl", &args);
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let root = running_as_root();
        let program = self.bin.join("pg_ctl");
        let mut command = if root {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&program);
            command
        } else {
            Command::new(&program)
        };
        let stopped = command
            .args(["stop", "-m", "immediate", "-D", &self.data])
            .output();
        if !matches!(&stopped, Ok(output) if output.status.success()) {
            eprintln!("could not stop the private server in {}", self.data);
        }
    }
}

/// The write of writer `writer`'s `index`th put.
fn write(writer: u64, index: u64) -> MemoryWrite {
    put(
        &key("restart", &format!("w{writer}-{index}")),
        &format!("op-{writer}-{index}"),
        None,
        said(&format!("writer {writer} wrote number {index}"), "user"),
        &["s"],
    )
}

async fn connect(url: &str, retries: u32) -> Arc<PostgresStore> {
    Arc::new(
        PostgresStore::builder(url)
            .clock(Arc::new(ManualClock::new(NOW)))
            .pool_size(WRITERS as usize)
            .retries(retries)
            .connect()
            .await
            .unwrap(),
    )
}

async fn postmaster_started(url: &str) -> String {
    common::raw_client(url, None)
        .await
        .query_one("SELECT pg_postmaster_start_time()::text", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(
    clippy::disallowed_methods,
    reason = "initdb and pg_ctl are blocking processes the test waits for off the runtime, not store calls"
)]
async fn restarting_the_server_mid_transaction_loses_no_acknowledged_write() {
    if std::env::var("MEMORY_SKIP_POSTGRES").as_deref() == Ok("1") {
        let line = "SKIPPED (MEMORY_SKIP_POSTGRES=1): memory-postgres test \
                    `restarting_the_server_mid_transaction_loses_no_acknowledged_write` did not run";
        println!("{line}");
        eprintln!("{line}");
        return;
    }
    let server = Arc::new(
        tokio::task::spawn_blocking(PrivateServer::start)
            .await
            .unwrap(),
    );
    let url = server.url();
    let started_before = postmaster_started(&url).await;
    // Even writers are patient: enough retries (5 ms doubling to 400 ms each) to ride out an
    // immediate restart with crash recovery, about 15 s in all. Odd writers retry nothing, so the
    // restart reaches them as failures, which they retry themselves after the run.
    let patient = connect(&url, 40).await;
    let impatient = connect(&url, 0).await;
    let acknowledged_count = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let store = if writer % 2 == 0 {
                patient.clone()
            } else {
                impatient.clone()
            };
            let acknowledged_count = acknowledged_count.clone();
            tokio::spawn(async move {
                let mut acknowledged = Vec::new();
                let mut failed: Vec<(u64, MemoryError)> = Vec::new();
                for index in 0..PUTS_PER_WRITER {
                    match store.apply(write(writer, index)).await {
                        Ok(outcome) => {
                            acknowledged_count.fetch_add(1, Ordering::Relaxed);
                            acknowledged.push((index, outcome));
                        }
                        Err(error) => failed.push((index, error)),
                    }
                }
                (writer, acknowledged, failed)
            })
        })
        .collect();
    // Restart once the run is well under way, while the writers keep writing.
    while acknowledged_count.load(Ordering::Relaxed) < RESTART_AFTER {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let acknowledged_before_restart = acknowledged_count.load(Ordering::Relaxed);
    assert!(
        acknowledged_before_restart < WRITERS * PUTS_PER_WRITER,
        "the restart comes while writes are still being issued"
    );
    let restarting = server.clone();
    tokio::task::spawn_blocking(move || {
        restarting.pg_ctl(&["restart", "-m", "immediate", "-w", "-t", "60"]);
    })
    .await
    .unwrap();
    assert_ne!(
        postmaster_started(&url).await,
        started_before,
        "the server restarted"
    );

    let store = patient;
    let mut failures = 0_u64;
    for task in writers {
        let (writer, acknowledged, failed) = task.await.unwrap();
        for (index, outcome) in acknowledged {
            let write = write(writer, index);
            let document = store.read(write.key()).await.unwrap().unwrap_or_else(|| {
                panic!("acknowledged write {writer}/{index} is missing after the restart")
            });
            assert_eq!(document, outcome.receipt.document);
            let receipt = store
                .receipt(&write.key().namespace, &outcome.receipt.operation_id)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(receipt, outcome.receipt);
        }
        for (index, error) in failed {
            // Only "unavailable" may come out of a restart; the caller retries it.
            assert_eq!(error.kind().as_str(), "unavailable", "{error}");
            failures += 1;
            let outcome = store.apply(write(writer, index)).await.unwrap();
            assert_eq!(
                store.read(write(writer, index).key()).await.unwrap(),
                Some(outcome.receipt.document)
            );
        }
    }
    // Every put, acknowledged at once or retried, landed exactly once, and issuing it again is a
    // replay of the same receipt.
    for writer in 0..WRITERS {
        for index in 0..PUTS_PER_WRITER {
            let history = store.history(write(writer, index).key()).await.unwrap();
            assert_eq!(history.len(), 1, "put {writer}/{index} has one revision");
            let again = store.apply(write(writer, index)).await.unwrap();
            assert!(again.replayed, "put {writer}/{index} is a replay");
            assert_eq!(again.receipt.document.revision, history[0].revision);
        }
    }
    let report = store.check_consistency().await.unwrap();
    assert_eq!(report.documents, WRITERS * PUTS_PER_WRITER);
    assert_eq!(report.receipts, WRITERS * PUTS_PER_WRITER);
    assert_eq!(report.changes, WRITERS * PUTS_PER_WRITER);
    println!(
        "restart after {acknowledged_before_restart} acknowledged writes; {failures} writes failed and were retried"
    );
}
