//! The connection pool and the background runtime every call runs on (the retry rule is
//! [`crate::retry`]'s).
//!
//! Why a runtime of its own: the activity ports ([`memory_core::activity`]) are synchronous and are
//! called from inside async tasks, where blocking on the caller's runtime would panic or starve it; and a
//! pooled tokio-postgres connection is driven by a task on the runtime that opened it. So every store of
//! one [`crate::PostgresStore`] shares one small multi-threaded runtime that owns the pool: async ports
//! spawn onto it and await the result, sync ports spawn onto it and wait on a channel. The store therefore
//! works from any executor, or none, and a caller whose future is dropped never leaves a transaction
//! half-run (the spawned call finishes or rolls back on its own).

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use memory_core::StoreFault;
use memory_core::{Clock, MemoryError};
use tokio::task::JoinHandle;
use tokio_postgres::NoTls;

use crate::error::{PortError, PostgresFailure};

/// A PostgreSQL schema name: 1 to 63 bytes of lowercase ASCII letters, digits and `_`, not starting with a
/// digit, so it never needs quoting and can never inject SQL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SchemaName(String);

impl SchemaName {
    /// Validates a schema name.
    pub fn new(name: impl Into<String>) -> Result<Self, MemoryError> {
        let name = name.into();
        let valid = (1..=63).contains(&name.len())
            && name
                .bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_')
            && !name.as_bytes()[0].is_ascii_digit()
            && !name.starts_with("pg_");
        if valid {
            Ok(Self(name))
        } else {
            Err(MemoryError::invalid(
                "schema name",
                "must be 1 to 63 bytes of [a-z0-9_], not starting with a digit or pg_",
            ))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What every call needs: the pool and the retry bound.
pub(crate) struct Database {
    pub(crate) pool: Pool,
    pub(crate) retries: u32,
    pub(crate) clock: Arc<dyn Clock>,
    /// The pool's connection settings (search path and timeouts included), for the dedicated
    /// `LISTEN` connection of a [`crate::ChangeFollower`], which cannot be a pooled one.
    pub(crate) config: tokio_postgres::Config,
}

/// Owns the runtime; shuts it down without blocking, so a store may be dropped inside async code.
struct RuntimeGuard(Option<tokio::runtime::Runtime>);

impl Drop for RuntimeGuard {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// A cloneable handle shared by the stores of one connection: the database and the runtime it runs on.
#[derive(Clone)]
pub(crate) struct Handle {
    pub(crate) db: Arc<Database>,
    runtime: tokio::runtime::Handle,
    _guard: Arc<RuntimeGuard>,
}

/// Connection settings, resolved.
pub(crate) struct ConnectSettings {
    pub(crate) url: String,
    pub(crate) schema: Option<SchemaName>,
    pub(crate) pool_size: usize,
    pub(crate) retries: u32,
    pub(crate) connect_timeout: Duration,
    pub(crate) wait_timeout: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) application_name: String,
}

impl Handle {
    /// Builds the runtime and the pool; connects nothing yet.
    pub(crate) fn new(settings: &ConnectSettings) -> Result<Self, MemoryError> {
        let mut config = tokio_postgres::Config::from_str(&settings.url)
            .map_err(|error| MemoryError::storage("connect", PostgresFailure::InvalidUrl(error)))?;
        config.connect_timeout(settings.connect_timeout);
        // TCP's default (two hours idle before the first probe) would let a silently dropped
        // connection look alive far longer than any lease or poll interval.
        config.keepalives_idle(std::time::Duration::from_secs(60));
        config.application_name(&settings.application_name);
        if let Some(schema) = &settings.schema {
            // Validated above: the name needs no quoting.
            config.options(format!("-c search_path={}", schema.as_str()));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("memory-postgres")
            .enable_all()
            .build()
            .map_err(|error| MemoryError::storage("connect", error))?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                // `Fast` checks only that the connection is open; a connection that broke since is
                // found by the next statement, and that call is retried on a fresh one.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(settings.wait_timeout))
            .create_timeout(Some(settings.connect_timeout))
            .build()
            .map_err(|error| {
                MemoryError::storage("connect", PostgresFailure::Pool(error.to_string()))
            })?;
        Ok(Self {
            db: Arc::new(Database {
                pool,
                retries: settings.retries,
                clock: settings.clock.clone(),
                config,
            }),
            runtime: runtime.handle().clone(),
            _guard: Arc::new(RuntimeGuard(Some(runtime))),
        })
    }

    /// Runs `work` on the store's runtime and awaits it from any executor.
    pub(crate) async fn run<T, E, F>(&self, work: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: PortError,
        F: Future<Output = Result<T, E>> + Send + 'static,
    {
        match self.runtime.spawn(work).await {
            Ok(result) => result,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => Err(Stopped.into_port()),
        }
    }

    /// Starts a background task on the store's runtime.
    pub(crate) fn spawn<F>(&self, work: F) -> JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.runtime.spawn(work)
    }

    /// Runs `work` on the store's runtime and blocks the calling thread until it is done. Safe inside an
    /// async task of another runtime (it blocks that worker for one database round trip, as a
    /// synchronous SQLite call would).
    pub(crate) fn block<T, E, F>(&self, work: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: PortError,
        F: Future<Output = Result<T, E>> + Send + 'static,
    {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        drop(self.runtime.spawn(async move {
            // The receiver only goes away when the caller did; nothing is left to tell.
            let _ = sender.send(work.await);
        }));
        // No answer means the task ended without one: it panicked, or the runtime is shutting down.
        receiver.recv().unwrap_or_else(|_| Err(Stopped.into_port()))
    }
}

/// The runtime stopped before a call finished.
#[derive(Debug)]
pub(crate) struct Stopped;

impl Stopped {
    /// The port's error for it.
    pub(crate) fn into_port<E: PortError>(self) -> E {
        E::from_fault(StoreFault::storage("call", PostgresFailure::RuntimeStopped))
    }
}

/// A read-only `REPEATABLE READ` transaction: statements that see one snapshot.
pub(crate) async fn snapshot(
    client: &mut deadpool_postgres::Object,
) -> Result<deadpool_postgres::Transaction<'_>, tokio_postgres::Error> {
    client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
}
