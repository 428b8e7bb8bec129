//! The worker schedule: a panic in a pass poisons the worker (no further pass runs), and a shutdown
//! signal lets the pass in flight finish, then stops.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use remembering::RememberingError;
use remembering::schedule::{Schedule, run_schedule};

const SCHEDULE: Schedule = Schedule {
    interval: Duration::from_millis(1),
    once: false,
};

/// Completes once `passes` has reached `count`: a schedule that kept running would get there.
async fn after_passes(passes: Arc<AtomicU64>, count: u64) {
    while passes.load(Ordering::SeqCst) < count {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_pass_poisons_the_worker_and_no_further_pass_runs() {
    let started = Arc::new(AtomicU64::new(0));
    let counter = started.clone();
    let result = run_schedule(
        SCHEDULE,
        move || {
            let number = counter.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                // The second pass panics, standing in for a bug that leaves state unknown.
                assert!(number != 2, "injected panic in pass {number}");
            }
        },
        after_passes(started.clone(), 4),
    )
    .await;
    assert!(
        matches!(result, Err(RememberingError::Poisoned)),
        "{result:?}"
    );
    assert_eq!(
        started.load(Ordering::SeqCst),
        2,
        "no pass ran after the panic"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_during_a_pass_lets_it_finish_then_stops() {
    let started = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let release = Arc::new(tokio::sync::Notify::new());
    let (counter, done, gate) = (started.clone(), finished.clone(), release.clone());
    let signal_started = started.clone();
    let signal_release = release.clone();
    let result = run_schedule(
        SCHEDULE,
        move || {
            counter.fetch_add(1, Ordering::SeqCst);
            let (done, gate) = (done.clone(), gate.clone());
            async move {
                gate.notified().await;
                done.store(true, Ordering::SeqCst);
            }
        },
        async move {
            after_passes(signal_started, 1).await;
            // The signal arrives while the pass waits; only then may the pass finish.
            signal_release.notify_one();
        },
    )
    .await;
    assert_eq!(result.unwrap(), 1);
    assert!(
        finished.load(Ordering::SeqCst),
        "the pass in flight finished"
    );
    assert_eq!(started.load(Ordering::SeqCst), 1);
}
