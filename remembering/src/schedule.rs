//! The worker schedule: run a pass, wait, run the next, until a shutdown signal or a panic.
//!
//! - Each pass runs as its own tokio task, so a panic inside it is caught at the join and not unwound
//!   through the schedule. The schedule then stops with [`RememberingError::Poisoned`] and runs no
//!   further pass: after a panic, the in-memory state of the pass (and of anything it shared) is
//!   unknown, and durable state is only safe to resume from a fresh process.
//! - A shutdown signal that arrives during a pass lets that pass finish (passes are finite and bounded
//!   by their limits), then the schedule returns; during the wait it returns at once.

use std::future::Future;
use std::time::Duration;

use crate::error::RememberingError;

/// When passes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// The wait between the end of one pass and the start of the next.
    pub interval: Duration,
    /// Run one pass and return.
    pub once: bool,
}

/// Runs `pass` on `schedule` until `shutdown` completes; returns how many passes finished.
pub async fn run_schedule<P, F>(
    schedule: Schedule,
    mut pass: P,
    shutdown: impl Future<Output = ()>,
) -> Result<u64, RememberingError>
where
    P: FnMut() -> F,
    F: Future<Output = ()> + Send + 'static,
{
    tokio::pin!(shutdown);
    let mut passes = 0_u64;
    loop {
        let mut handle = tokio::spawn(pass());
        let mut stopping = false;
        let joined = tokio::select! {
            joined = &mut handle => joined,
            () = &mut shutdown => {
                tracing::info!("signal received; finishing the pass in flight");
                stopping = true;
                handle.await
            }
        };
        if let Err(error) = joined {
            // A cancelled pass (the runtime shutting down) leaves state as unknown as a panic does.
            tracing::error!(
                panicked = error.is_panic(),
                "a pass did not finish; worker poisoned"
            );
            return Err(RememberingError::Poisoned);
        }
        passes = passes.saturating_add(1);
        if stopping || schedule.once {
            return Ok(passes);
        }
        tokio::select! {
            () = tokio::time::sleep(schedule.interval) => {}
            () = &mut shutdown => {
                tracing::info!("signal received; stopping");
                return Ok(passes);
            }
        }
    }
}
