//! Tests that need other processes: crashes (abort at each failpoint, SIGKILL at random moments), a
//! revision race between writer processes, and a read-only view of a file another process is writing.
//!
//! This binary has no libtest harness: `main` runs the parent tests, or one child role when
//! `MEMORY_SQLITE_CHILD` names it (the parent spawns this same executable). Positional arguments filter
//! tests by name, as with libtest. Seeds and rounds are few by default; `MEMORY_TEST_SCALE=large` runs many
//! more.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use memory_core::StoreFault;
use memory_core::{MemoryContent, MemoryError, MemoryKey, MemoryReceipt, MemoryWrite, Revision};
use memory_sqlite::{SqliteReader, SqliteStore, fault};
use memory_testkit::TestScale;
use serde::{Deserialize, Serialize};

const CHILD_ROLE: &str = "MEMORY_SQLITE_CHILD";
const CHILD_PATH: &str = "MEMORY_SQLITE_CHILD_PATH";
const CHILD_SEED: &str = "MEMORY_SQLITE_CHILD_SEED";

/// One acknowledged write, as the child printed it: the command and the receipt it got back.
#[derive(Debug, Serialize, Deserialize)]
struct Ack {
    write: MemoryWrite,
    receipt: MemoryReceipt,
}

/// A small deterministic generator (SplitMix64), so every seed replays the same operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

fn main() {
    let outcome = match std::env::var(CHILD_ROLE).as_deref() {
        Ok("crash-writer") => child_crash_writer(),
        Ok("racer") => child_racer(),
        Ok("steady-writer") => child_steady_writer(),
        _ => run_parent_tests(),
    };
    std::process::exit(outcome);
}

fn run_parent_tests() -> i32 {
    let tests: [(&str, fn()); 3] = [
        (
            "crash_at_failpoints_and_random_kills_loses_no_acknowledged_write",
            crash_test,
        ),
        (
            "revision_race_between_processes_has_one_winner_and_no_busy",
            race_test,
        ),
        (
            "reader_process_sees_commits_and_never_blocks_the_writer",
            reader_test,
        ),
    ];
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    if arguments.iter().any(|argument| argument == "--list") {
        for (name, _) in tests {
            println!("{name}: test");
        }
        return 0;
    }
    let filters: Vec<&String> = arguments
        .iter()
        .filter(|argument| !argument.starts_with('-'))
        .collect();
    let selected: Vec<_> = tests
        .into_iter()
        .filter(|(name, _)| {
            filters.is_empty() || filters.iter().any(|filter| name.contains(filter.as_str()))
        })
        .collect();
    println!("\nrunning {} tests", selected.len());
    let mut failed = Vec::new();
    for (name, test) in &selected {
        let result = std::panic::catch_unwind(test);
        println!(
            "test {name} ... {}",
            if result.is_ok() { "ok" } else { "FAILED" }
        );
        if result.is_err() {
            failed.push(*name);
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failed.len(),
        failed.len()
    );
    i32::from(!failed.is_empty())
}

fn child(role: &str, path: &Path, seed: u64) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("own executable"));
    command
        .env(CHILD_ROLE, role)
        .env(CHILD_PATH, path)
        .env(CHILD_SEED, seed.to_string())
        .env_remove("FAILPOINTS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    command
}

fn child_env() -> (PathBuf, u64) {
    let path = PathBuf::from(std::env::var_os(CHILD_PATH).expect("child path"));
    let seed = std::env::var(CHILD_SEED)
        .ok()
        .and_then(|seed| seed.parse().ok())
        .expect("child seed");
    (path, seed)
}

// ---------------------------------------------------------------------------------------------------
// Crash test

const CRASH_TENANTS: [&str; 2] = ["a", "b"];
const CRASH_IDS: [&str; 3] = ["k0", "k1", "k2"];
const CRASH_MAX_OPERATIONS: u64 = 60;

/// How a crash child dies.
#[derive(Debug, Clone, Copy)]
enum CrashMode {
    /// Aborts at the n-th evaluation of a failpoint.
    Abort(&'static str),
    /// The parent sends SIGKILL after reading a number of acknowledgements.
    Kill,
}

const CRASH_MODES: [CrashMode; 5] = [
    CrashMode::Abort(fault::BEFORE_BEGIN),
    CrashMode::Abort(fault::INSIDE_TRANSACTION),
    CrashMode::Abort(fault::COMMIT),
    CrashMode::Abort(fault::AFTER_COMMIT),
    CrashMode::Kill,
];

fn crash_test() {
    let seeds: u64 = match TestScale::from_env() {
        TestScale::Small => 10,
        TestScale::Large => 250,
    };
    for seed in 0..seeds {
        let mode = CRASH_MODES[(seed % CRASH_MODES.len() as u64) as usize];
        let path = fresh_path();
        let mut rng = Rng(seed ^ 0xC0FF_EE00);
        let mut command = child("crash-writer", &path, seed);
        let kill_after = match mode {
            CrashMode::Abort(point) => {
                let skip = rng.below(25);
                command.env("FAILPOINTS", format!("{point}={skip}*off->return(abort)"));
                None
            }
            CrashMode::Kill => Some(rng.below(30)),
        };
        let mut process = command.spawn().expect("spawn crash writer");
        let acks = collect_acks(&mut process, kill_after);
        let status = process.wait().expect("child ends");
        if let CrashMode::Abort(_) = mode {
            // Failpoint evaluations outnumber acknowledgements, so the abort always comes.
            assert!(
                !status.success(),
                "seed {seed}: the child was meant to crash"
            );
        }
        let committed = verify_after_crash(&path, &acks, seed);
        eprintln!(
            "crash seed {seed} ({mode:?}): {} acknowledged, {committed} committed receipts",
            acks.len()
        );
    }
}

/// Reads acknowledgements until the child's stdout closes; kills it after `kill_after` of them.
fn collect_acks(process: &mut Child, kill_after: Option<u64>) -> Vec<Ack> {
    let stdout = process.stdout.take().expect("piped stdout");
    let mut reader = BufReader::new(stdout);
    let mut acks = Vec::new();
    let mut line = String::new();
    loop {
        if kill_after == Some(acks.len() as u64) {
            process.kill().expect("SIGKILL");
        }
        line.clear();
        let read = reader.read_line(&mut line).expect("child output");
        // A line cut short by the crash was never a complete acknowledgement.
        if read == 0 || !line.ends_with('\n') {
            break;
        }
        if let Some(json) = line.trim_end().strip_prefix("ACK ") {
            acks.push(serde_json::from_str(json).expect("acknowledgement parses"));
        }
    }
    acks
}

fn verify_after_crash(path: &Path, acks: &[Ack], seed: u64) -> u64 {
    let store = SqliteStore::open(path).expect("reopens after crash");
    let integrity: String = rusqlite::Connection::open(path)
        .expect("raw connection")
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity check");
    assert_eq!(integrity, "ok", "seed {seed}");
    let report = store
        .reader()
        .check_consistency()
        .unwrap_or_else(|error| panic!("seed {seed}: inconsistent after crash: {error}"));
    assert!(report.receipts >= acks.iter().filter(|ack| ack_is_first(ack, acks)).count() as u64);
    for ack in acks {
        let namespace = &ack.receipt.document.key.namespace;
        let stored = store
            .reader()
            .receipt_json(namespace, &ack.receipt.operation_id)
            .expect("read receipt")
            .unwrap_or_else(|| panic!("seed {seed}: an acknowledged receipt is missing"));
        // A later withdrawal of the document (or the revision bound) drops an earlier receipt's
        // words and keeps the rest: the acknowledged receipt stays, less its words.
        let redacted = serde_json::from_str::<serde_json::Value>(&stored)
            .expect("a stored receipt is JSON")["redacted"]
            == serde_json::json!(true);
        let expected = if redacted {
            memory_core::revisions::redact(ack.receipt.clone())
        } else {
            ack.receipt.clone()
        };
        assert_eq!(
            stored,
            serde_json::to_string(&expected).expect("encodes"),
            "seed {seed}: receipt changed"
        );
    }
    for ack in acks {
        let retry = store
            .apply_blocking(ack.write.clone())
            .unwrap_or_else(|error| panic!("seed {seed}: retry failed: {error}"));
        assert!(retry.replayed, "seed {seed}");
        // A replay answers the receipt as stored: without its words once they were dropped.
        let expected = if retry.receipt.redacted {
            memory_core::revisions::redact(ack.receipt.clone())
        } else {
            ack.receipt.clone()
        };
        assert_eq!(retry.receipt, expected, "seed {seed}");
    }
    store
        .reader()
        .check_consistency()
        .expect("still consistent");
    report.receipts
}

fn ack_is_first(ack: &Ack, acks: &[Ack]) -> bool {
    acks.iter()
        .find(|other| {
            other.receipt.operation_id == ack.receipt.operation_id
                && other.receipt.document.key.namespace == ack.receipt.document.key.namespace
        })
        .is_some_and(|first| std::ptr::eq(first, ack))
}

fn crash_key(rng: &mut Rng) -> MemoryKey {
    key(
        CRASH_TENANTS[rng.below(CRASH_TENANTS.len() as u64) as usize],
        CRASH_IDS[rng.below(CRASH_IDS.len() as u64) as usize],
    )
}

fn crash_text(rng: &mut Rng) -> String {
    const WORDS: [&str; 6] = [
        "alpha",
        "beta",
        "gamma",
        "\u{1F600}",
        "delta",
        "\u{4e2d}\u{6587}",
    ];
    (0..1 + rng.below(6))
        .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

fn child_crash_writer() -> i32 {
    let scenario = fail::FailScenario::setup();
    let (path, seed) = child_env();
    let store = SqliteStore::open(&path).expect("child opens the store");
    let mut rng = Rng(seed);
    let mut current: std::collections::HashMap<MemoryKey, Revision> = Default::default();
    let mut acked: Vec<MemoryWrite> = Vec::new();
    let stdout = std::io::stdout();
    let print = |write: &MemoryWrite, receipt: &MemoryReceipt| {
        let ack = Ack {
            write: write.clone(),
            receipt: receipt.clone(),
        };
        let mut out = stdout.lock();
        writeln!(out, "ACK {}", serde_json::to_string(&ack).expect("encodes")).expect("stdout");
        out.flush().expect("stdout");
    };
    for step in 0..CRASH_MAX_OPERATIONS {
        let operation = format!("s{seed}-op{step}");
        let choice = rng.below(100);
        let next_put = |rng: &mut Rng, operation: String| {
            let target = crash_key(rng);
            let mut expected = current.get(&target).cloned();
            if rng.below(10) == 0 {
                expected = None;
            }
            put(
                &target,
                &operation,
                expected.as_ref(),
                MemoryContent::text(crash_text(rng)),
                &["s"],
            )
        };
        let writes: Vec<MemoryWrite> = if choice < 60 {
            vec![next_put(&mut rng, operation)]
        } else if choice < 67 {
            let target = crash_key(&mut rng);
            match current.get(&target) {
                Some(revision) => vec![withdraw(&target, &operation, revision)],
                None => continue,
            }
        } else if choice < 85 && !acked.is_empty() {
            vec![acked[rng.below(acked.len() as u64) as usize].clone()]
        } else {
            (0..2 + rng.below(2))
                .map(|index| next_put(&mut rng, format!("{operation}-{index}")))
                .collect()
        };
        let outcomes = if writes.len() == 1 {
            vec![store.apply_blocking(writes[0].clone())]
        } else {
            match store.apply_batch(writes.clone()) {
                Ok(outcomes) => outcomes,
                Err(error) => vec![Err(error)],
            }
        };
        for (write, outcome) in writes.iter().zip(outcomes) {
            match outcome {
                Ok(outcome) => {
                    current.insert(
                        write.key().clone(),
                        outcome.receipt.document.revision.clone(),
                    );
                    print(write, &outcome.receipt);
                    acked.push(write.clone());
                }
                Err(
                    MemoryError::Store(StoreFault::Storage { .. })
                    | MemoryError::Store(StoreFault::Busy { .. })
                    | MemoryError::Store(StoreFault::Poisoned),
                ) => {
                    return 3;
                }
                Err(_) => {}
            }
        }
    }
    scenario.teardown();
    0
}

// ---------------------------------------------------------------------------------------------------
// Revision race

const RACERS: u64 = 4;

fn race_test() {
    let rounds = match TestScale::from_env() {
        TestScale::Small => 3,
        TestScale::Large => 25,
    };
    let directory = fresh_dir();
    let path = directory.join("memory.sqlite");
    let target = key("a", "contested");
    let mut revision = {
        let store = SqliteStore::open(&path).expect("store");
        store
            .apply_blocking(put(
                &target,
                "seed",
                None,
                MemoryContent::text("start"),
                &["s"],
            ))
            .expect("first revision")
            .receipt
            .document
            .revision
    };
    for round in 0..rounds {
        let go = directory.join(format!("go-{round}"));
        let mut racers: Vec<(Child, BufReader<std::process::ChildStdout>)> = (0..RACERS)
            .map(|racer| {
                let mut process = child("racer", &path, round * 100 + racer)
                    .env("MEMORY_SQLITE_RACE_GO", &go)
                    .env("MEMORY_SQLITE_RACE_EXPECTED", revision.as_str())
                    .spawn()
                    .expect("spawn racer");
                let stdout = BufReader::new(process.stdout.take().expect("piped"));
                (process, stdout)
            })
            .collect();
        for (_, stdout) in &mut racers {
            let mut line = String::new();
            stdout.read_line(&mut line).expect("ready line");
            assert_eq!(line.trim(), "ready");
        }
        std::fs::write(&go, b"go").expect("start signal");
        let mut winners = Vec::new();
        let mut conflicts = Vec::new();
        for (mut process, mut stdout) in racers {
            let mut line = String::new();
            stdout.read_line(&mut line).expect("result line");
            assert!(
                process.wait().expect("racer ends").success(),
                "racer failed: {line}"
            );
            match line.trim().split_once(' ') {
                Some(("won", won)) => winners.push(won.to_owned()),
                Some(("conflict", current)) => conflicts.push(current.to_owned()),
                _ => panic!("round {round}: unexpected racer answer {line:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one winner");
        assert_eq!(conflicts.len() as u64, RACERS - 1);
        assert!(
            conflicts.iter().all(|current| *current == winners[0]),
            "losers see the winner"
        );
        revision = Revision::new(winners[0].clone()).expect("revision");
    }
    let store = SqliteStore::open(&path).expect("store");
    assert_eq!(
        store.reader().history(&target).expect("history").len() as u64,
        rounds + 1
    );
    store.reader().check_consistency().expect("consistent");
}

fn child_racer() -> i32 {
    let (path, seed) = child_env();
    let go = PathBuf::from(std::env::var_os("MEMORY_SQLITE_RACE_GO").expect("go path"));
    let expected = Revision::new(std::env::var("MEMORY_SQLITE_RACE_EXPECTED").expect("revision"))
        .expect("revision");
    let store = SqliteStore::open(&path).expect("racer opens the store");
    println!("ready");
    std::io::stdout().flush().expect("stdout");
    for _ in 0..10_000 {
        if go.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let write = put(
        &key("a", "contested"),
        &format!("racer-{seed}"),
        Some(&expected),
        MemoryContent::text(format!("racer {seed}")),
        &["s"],
    );
    match store.apply_blocking(write) {
        Ok(outcome) => println!("won {}", outcome.receipt.document.revision),
        Err(MemoryError::Conflict {
            current: Some(current),
        }) => println!("conflict {current}"),
        Err(error) => println!("error {} {error}", error.kind().as_str()),
    }
    0
}

// ---------------------------------------------------------------------------------------------------
// Reader beside a writer process

const STEADY_WRITES: u64 = 80;

fn reader_test() {
    let path = fresh_path();
    drop(SqliteStore::open(&path).expect("create the store"));
    let reader = SqliteReader::open(&path).expect("reader opens");
    let mut writer = child("steady-writer", &path, 7)
        .spawn()
        .expect("spawn writer");
    let stdout = BufReader::new(writer.stdout.take().expect("piped"));
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        // Keeps a read going all the time, so a reader that blocked the writer would make it fail.
        let hammer = scope.spawn(|| {
            let reader = SqliteReader::open(&path).expect("second reader opens");
            let access = access("a", "s");
            let mut reads = 0_u64;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                reader
                    .search_blocking(&access, "steady", 20)
                    .expect("search");
                reader
                    .changes_since_blocking(memory_core::ChangeSequence::ZERO, 50)
                    .expect("changes");
                reader.check_consistency().expect("consistent snapshot");
                reads += 1;
            }
            reads
        });
        let mut seen = 0_u64;
        for line in stdout.lines() {
            let line = line.expect("writer output");
            let Some(json) = line.strip_prefix("ACK ") else {
                panic!("writer failed: {line}");
            };
            let ack: Ack = serde_json::from_str(json).expect("ack parses");
            let document = reader
                .read_blocking(&ack.receipt.document.key)
                .expect("read")
                .expect("an acknowledged write is visible to a reader");
            assert_eq!(document, ack.receipt.document);
            seen += 1;
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(hammer.join().expect("hammer thread") > 0);
        assert_eq!(seen, STEADY_WRITES);
    });
    assert!(writer.wait().expect("writer ends").success());
}

fn child_steady_writer() -> i32 {
    let (path, _) = child_env();
    // No busy wait at all: any lock a reader took would surface as an error here.
    let store = SqliteStore::builder()
        .busy_timeout(Duration::ZERO)
        .busy_retries(0)
        .open(&path)
        .expect("writer opens the store");
    for index in 0..STEADY_WRITES {
        let write = put(
            &key("a", &format!("doc-{index}")),
            &format!("steady-{index}"),
            None,
            MemoryContent::text(format!("steady write number {index}")),
            &["s"],
        );
        match store.apply_blocking(write.clone()) {
            Ok(outcome) => {
                let ack = Ack {
                    write,
                    receipt: outcome.receipt,
                };
                println!("ACK {}", serde_json::to_string(&ack).expect("encodes"));
            }
            Err(error) => {
                println!("ERROR {} {error}", error.kind().as_str());
                return 1;
            }
        }
    }
    0
}
