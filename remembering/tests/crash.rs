//! Crash at every failpoint of a committed-activity pass, in a child process that exits on the spot
//! (no destructors, no rollback courtesy), then restart: each record lands exactly once (one revision
//! per statement, never replaced) and the cursor never moves back. Everything is durable in one SQLite
//! file, memory documents included. (Statements are attestations, which absorb a second extraction of
//! a landed record; that a saved output wins over re-extraction is checked by `activity_pass`'s
//! lost-acknowledgement tests, which compare the commands sent.)
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use memory_core::activity::{
    NewRecord, ProcessorId, ProcessorVersion, ProgressKey, ProgressStore, Sequence,
    ThreadDestination, ThreadId, ThreadLog, WorkerId,
};
use memory_core::{ManualClock, MemoryKey, MemoryReader, MemoryScope};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use remembering::extract::statement_document_id;
use remembering::hooks::HookFuture;
use remembering::{
    ActivityProcessor, ActivityProcessorParts, PassHooks, PassLimits, PassPoint,
    StatementExtractor, UnboundThreads,
};

const CHILD: &str = "REMEMBERING_CRASH_CHILD";
const CRASH_EXIT: i32 = 86;

struct ExitAt {
    point: Option<PassPoint>,
    occurrence: usize,
    seen: std::sync::Mutex<usize>,
}

impl PassHooks for ExitAt {
    fn at(&self, point: PassPoint) -> HookFuture<'_> {
        if Some(point) == self.point {
            let mut seen = self.seen.lock().unwrap();
            *seen += 1;
            if *seen == self.occurrence {
                std::process::exit(CRASH_EXIT);
            }
        }
        Box::pin(std::future::ready(()))
    }
}

fn thread() -> ThreadId {
    ThreadId::new("t").unwrap()
}

fn key() -> ProgressKey {
    ProgressKey {
        processor: ProcessorId::new("statements").unwrap(),
        version: ProcessorVersion::new(1),
        thread: thread(),
    }
}

/// Child: one pass with a crash point; the run index moves the clock, so a re-extraction would differ.
fn child(spec: &str) {
    let mut parts = spec.split(',');
    let path = parts.next().unwrap().to_owned();
    let point = PassPoint::from_name(parts.next().unwrap());
    let occurrence: usize = parts.next().unwrap().parse().unwrap();
    let run: i64 = parts.next().unwrap().parse().unwrap();
    let path = Path::new(&path);
    let clock = Arc::new(ManualClock::new(1_000 + run * 100_000));
    let processor = ActivityProcessor::new(ActivityProcessorParts {
        log: Arc::new(SqliteThreadLog::open(path).unwrap()),
        progress: Arc::new(SqliteProgressStore::open(path).unwrap()),
        references: Arc::new(SqliteRememberingStore::open(path).unwrap()),
        writer: Arc::new(memory_sqlite::SqliteStore::open(path).unwrap()),
        extractor: StatementExtractor::new(),
        clock,
        processor: key().processor,
        version: key().version,
        owner: WorkerId::new(format!("run-{run}")).unwrap(),
        limits: PassLimits {
            max_records: 100,
            page_size: 2,
            timeout_ms: 10_000,
            lease_ms: 20_000,
        },
        unbound: UnboundThreads::PerThread {
            scopes: vec![MemoryScope::new("agent").unwrap()],
        },
    })
    .unwrap()
    .with_hooks(Arc::new(ExitAt {
        point,
        occurrence,
        seen: std::sync::Mutex::new(0),
    }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    match runtime.block_on(processor.run_pass(&thread())) {
        Ok(_) => std::process::exit(0),
        Err(error) => {
            eprintln!("pass failed: {error}");
            std::process::exit(1);
        }
    }
}

fn run_child(path: &Path, point: Option<PassPoint>, occurrence: usize, run: i64) -> i32 {
    let spec = format!(
        "{},{},{occurrence},{run}",
        path.display(),
        point.map_or("none", PassPoint::name)
    );
    let status = Command::new(std::env::current_exe().unwrap())
        .env(CHILD, spec)
        .status()
        .unwrap();
    status.code().unwrap_or(-1)
}

fn case(point: PassPoint, occurrence: usize) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let log = SqliteThreadLog::open(&path).unwrap();
    let statements = [1_u64, 2, 4, 5];
    for sequence in 1..=5_u64 {
        let record = if statements.contains(&sequence) {
            NewRecord::user("ana", format!("fact {sequence}"), sequence as i64)
        } else {
            NewRecord::assistant("noted", sequence as i64)
        };
        log.append(&thread(), record).unwrap();
    }
    let progress = SqliteProgressStore::open(&path).unwrap();
    let mut last_cursor = Sequence::ZERO;
    let code = run_child(&path, Some(point), occurrence, 0);
    assert!(
        code == CRASH_EXIT || code == 0,
        "{point:?}/{occurrence}: child exited {code}"
    );
    let after_crash = progress.inspect(&key()).unwrap().unwrap();
    assert!(after_crash.cursor >= last_cursor);
    last_cursor = after_crash.cursor;
    // Restart (the crashed lease must expire: the next run's clock is far ahead), crash again later once.
    let code = run_child(&path, Some(point), occurrence + 1, 1);
    assert!(
        code == CRASH_EXIT || code == 0,
        "{point:?}/{occurrence}: restart exited {code}"
    );
    let view = progress.inspect(&key()).unwrap().unwrap();
    assert!(
        view.cursor >= last_cursor,
        "{point:?}/{occurrence}: cursor moved back"
    );
    assert_eq!(
        run_child(&path, None, 0, 2),
        0,
        "{point:?}/{occurrence}: final run failed"
    );
    let view = progress.inspect(&key()).unwrap().unwrap();
    assert_eq!(view.cursor, Sequence::new(5));
    assert_eq!(view.pending, None);
    let namespace =
        ThreadDestination::legacy_thread(&thread(), vec![MemoryScope::new("agent").unwrap()])
            .unwrap()
            .namespace()
            .clone();
    let reader = memory_sqlite::SqliteReader::open(&path).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for sequence in 1..=5_u64 {
        let id = statement_document_id("ana", &format!("fact {sequence}")).unwrap();
        let document = runtime
            .block_on(reader.read(&MemoryKey {
                namespace: namespace.clone(),
                id,
            }))
            .unwrap();
        assert_eq!(
            document.is_some(),
            statements.contains(&sequence),
            "{point:?}/{occurrence}: record {sequence}"
        );
        if let Some(document) = document {
            assert_eq!(document.predecessor, None, "applied once, never replaced");
        }
    }
}

fn main() {
    if let Ok(spec) = std::env::var(CHILD) {
        child(&spec);
        return;
    }
    let occurrences: &[usize] = match std::env::var("MEMORY_TEST_SCALE").as_deref() {
        Ok("large") => &[1, 2, 3, 4],
        _ => &[1, 3],
    };
    let mut cases = 0;
    for point in PassPoint::ACTIVITY {
        for &occurrence in occurrences {
            case(point, occurrence);
            cases += 1;
        }
    }
    println!("test crash_at_every_failpoint_then_restart ... ok ({cases} cases)");
}
