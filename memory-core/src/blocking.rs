//! Where a store call leaves the async workers: the workspace's one async/blocking bridge.
//!
//! The store ports may block their thread (memory-sqlite's async ports answer synchronously inside
//! their futures: an `fsync` per commit, a pause while another process holds the lock; the activity
//! ports are synchronous on every backend). So async code never calls a port on an async worker: the
//! call, or a group of calls that belong together, runs on tokio's blocking pool through
//! [`on_blocking_pool`]. It lives here, beside the ports whose nature it answers, so every crate above
//! (semantic-index's recall and engine, memory-service's services and feeds) crosses by the same
//! function; the workspace's `clippy.toml` refuses `spawn_blocking` and `Handle::block_on` everywhere
//! else.

use std::future::Future;

use crate::error::MemoryError;
use crate::recall::RecallError;

/// Runs `work` on tokio's blocking pool and waits for it without blocking the calling task. `work`
/// drives synchronous store or index calls (their futures complete without yielding); off the async
/// workers they overlap with each other and cannot hold a deadline timer up. If the caller stops
/// waiting (a deadline), `work` still runs to its end on its thread and its answer is dropped. A task
/// that panics is a storage error.
///
/// Must be called inside a tokio runtime (any flavour).
#[allow(
    clippy::disallowed_methods,
    reason = "the one place that writes the boundary: every other store call comes through here"
)]
pub async fn on_blocking_pool<T: Send + 'static>(
    work: impl Future<Output = T> + Send + 'static,
) -> Result<T, RecallError> {
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || handle.block_on(work))
        .await
        .map_err(|error| RecallError::Source(MemoryError::storage("blocking store task", error)))
}

/// [`on_blocking_pool`] for a store call answering a [`MemoryError`] (a port implementation): a
/// failed blocking task is a storage error too.
pub async fn store_call<T: Send + 'static>(
    work: impl Future<Output = Result<T, MemoryError>> + Send + 'static,
) -> Result<T, MemoryError> {
    match on_blocking_pool(work).await {
        Ok(answer) => answer,
        Err(RecallError::Source(error)) => Err(error),
        Err(other) => Err(MemoryError::storage("blocking store task", other)),
    }
}
