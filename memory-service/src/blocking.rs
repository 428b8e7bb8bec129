//! Where a store call leaves the async workers: the one rule, and the only way memory-cli follows it.
//!
//! **Rule.** Store ports may block their thread: memory-sqlite's async ports answer synchronously
//! inside their futures (an `fsync` per commit, a pause while another process holds the lock), and the
//! activity ports (thread log, progress, remembering store) are synchronous on every backend. So async
//! code never calls a port, of either kind, on an async worker: the call (or a group of calls that
//! belong together, such as a read and its suppression check) runs on tokio's blocking pool through
//! [`on_blocking_pool`] (a future) or [`blocking`] (a synchronous closure), at the service that makes
//! it. Opening a store, loading the model and reading local files follow the same rule.
//!
//! Both wrap memory-core's [`memory_core::blocking::on_blocking_pool`], the one place in the
//! workspace that writes `spawn_blocking` and `Handle::block_on`, beside the ports: the workspace's `clippy.toml` refuses
//! both everywhere else (`disallowed-methods`), and `tests/blocking_boundary.rs` runs every service over
//! a store that records any port call made on an async worker.
//!
//! A caller that stops waiting (a deadline) leaves the call to finish on its thread; its answer is
//! dropped. A blocking task that panics is refused as `storage`.

use std::future::Future;

use crate::refusal::Refusal;

/// Runs `work` (a future driving store calls) on the blocking pool and waits for it without blocking
/// the calling task.
pub async fn on_blocking_pool<T: Send + 'static>(
    work: impl Future<Output = T> + Send + 'static,
) -> Result<T, Refusal> {
    memory_core::blocking::on_blocking_pool(work)
        .await
        .map_err(Refusal::from)
}

/// Runs the synchronous `work` (activity store calls, opening a store, file I/O) on the blocking pool.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Refusal> {
    on_blocking_pool(async move { work() }).await
}

/// [`on_blocking_pool`] for port implementations, which answer [`memory_core::MemoryError`]s (a change feed over
/// the store): a failed blocking task is a storage error.
pub use memory_core::blocking::store_call;

#[cfg(test)]
mod tests {
    use memory_core::{ErrorKind, MemoryError};

    use super::*;

    #[tokio::test]
    async fn a_call_runs_off_the_calling_thread_and_a_panic_is_a_storage_refusal() {
        let caller = std::thread::current().id();
        let ran_on = blocking(|| std::thread::current().id()).await.expect("ran");
        assert_ne!(ran_on, caller, "the call left the async worker");
        let refusal = blocking::<()>(|| panic!("a store call panicked"))
            .await
            .expect_err("refused");
        assert_eq!(refusal.kind(), ErrorKind::Storage);
        let error = store_call(panicking_read()).await.expect_err("failed");
        assert_eq!(error.kind(), ErrorKind::Storage);
    }

    async fn panicking_read() -> Result<(), MemoryError> {
        panic!("a feed read panicked")
    }
}
