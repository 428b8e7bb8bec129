//! The typed failures this crate puts inside a [`StoreFault::Storage`], and how PostgreSQL errors
//! are classified into the [`StoreFault`] that a `MemoryError` or an `ActivityError` embeds.
//!
//! | what PostgreSQL or the pool reported | class | surfaces as |
//! | --- | --- | --- |
//! | serialization failure (`40001`), deadlock (`40P01`) | [`FailureClass::Retry`] | retried; then `Busy` (kind `unavailable`) |
//! | connection lost or refused, server shutting down (`08*`, `57P01`-`57P03`), too many connections (`53300`) | [`FailureClass::Unavailable`] | retried; then `Busy` (kind `unavailable`) |
//! | connection lost after `COMMIT` was sent, in a call that is not idempotent | [`FailureClass::Plain`] | `Storage` with [`PostgresFailure::CommitOutcomeUnknown`] |
//! | no pooled connection free within the pool's wait timeout | [`FailureClass::Unavailable`] | `Busy` at once (the wait was already spent) |
//! | data or index corruption (`XX001`, `XX002`) | [`FailureClass::Corrupt`] | `Corrupt` (kind `corrupt`) |
//! | anything else | [`FailureClass::Plain`] | `Storage` (kind `storage`), with a [`PostgresFailure`] as source |
//!
//! Retrying after a lost connection is safe even when the lost statement was `COMMIT`: a write that
//! did commit is found by its receipt on the retry and answered as a replay, never applied twice.

use memory_core::MemoryError;
use memory_core::StoreFault;
use memory_core::activity::ActivityError;
use tokio_postgres::error::SqlState;

/// What went wrong below the memory model. It is the `source` of a [`StoreFault::Storage`]; callers
/// that need the detail downcast to it (see [`postgres_failure`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PostgresFailure {
    /// The connection URL does not parse.
    #[error("invalid PostgreSQL connection URL: {0}")]
    InvalidUrl(#[source] tokio_postgres::Error),
    /// The database holds a schema version newer than this build knows; it is not touched.
    #[error("schema version {found} is newer than the supported version {supported}")]
    SchemaTooNew {
        /// The highest version recorded in `memory_schema_version`.
        found: i64,
        /// The newest version this build migrates to.
        supported: i64,
    },
    /// The connection pool could not be built or failed outside PostgreSQL.
    #[error("connection pool: {0}")]
    Pool(String),
    /// The connection was lost after `COMMIT` was sent, so whether the transaction committed is unknown.
    /// Only calls that are not idempotent report this (a thread-log append, a fenced progress write):
    /// inspect the store before repeating them. Memory writes never do: their retry is answered from
    /// the receipt.
    #[error("the connection was lost during COMMIT; whether it committed is unknown")]
    CommitOutcomeUnknown(#[source] tokio_postgres::Error),
    /// The store's background runtime is gone (the store is being dropped) or its task panicked.
    #[error("the store's runtime stopped before the call finished")]
    RuntimeStopped,
    /// An error reported by PostgreSQL or the driver.
    #[error(transparent)]
    Postgres(#[from] tokio_postgres::Error),
}

/// The [`PostgresFailure`] inside a [`StoreFault::Storage`], if that is what the error carries.
pub fn postgres_failure(error: &MemoryError) -> Option<&PostgresFailure> {
    match error {
        MemoryError::Store(StoreFault::Storage { source, .. }) => {
            source.downcast_ref::<PostgresFailure>()
        }
        _ => None,
    }
}

/// How a failure is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// A conflict between concurrent transactions; the whole transaction may be retried at once.
    Retry,
    /// The server or connection is (temporarily) unavailable; retry on a fresh connection.
    Unavailable,
    /// PostgreSQL reports corrupt data.
    Corrupt,
    /// An ordinary failure; the transaction rolled back and left the database as it was.
    Plain,
}

/// Classifies a driver error.
pub fn classify(error: &tokio_postgres::Error) -> FailureClass {
    if error.is_closed() {
        return FailureClass::Unavailable;
    }
    let Some(code) = error.code() else {
        // No SQLSTATE: an I/O or protocol error of the connection itself.
        return FailureClass::Unavailable;
    };
    if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED {
        FailureClass::Retry
    } else if code.code().starts_with("08")
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
        || *code == SqlState::TOO_MANY_CONNECTIONS
    {
        FailureClass::Unavailable
    } else if *code == SqlState::DATA_CORRUPTED || *code == SqlState::INDEX_CORRUPTED {
        FailureClass::Corrupt
    } else {
        FailureClass::Plain
    }
}

/// What one attempt at a database call returns: the model's error type is `E`.
pub(crate) type Attempt<T, E = MemoryError> = Result<T, Fail<E>>;

/// A failure of one attempt at a database call: the database's, or the model's (`E`), which is never
/// retried.
#[derive(Debug)]
pub(crate) enum Fail<E> {
    /// The driver or PostgreSQL failed.
    Db(tokio_postgres::Error),
    /// No connection could be had from the pool.
    Pool(deadpool_postgres::PoolError),
    /// The model refused or a row did not decode.
    Model(E),
    /// `COMMIT` failed (see [`crate::retry::commit`]); what that means is the retry rule's to say.
    AtCommit(tokio_postgres::Error),
    /// The connection was lost after `COMMIT` was sent by a call that must not be repeated blindly.
    CommitUnknown(tokio_postgres::Error),
}

impl<E> From<tokio_postgres::Error> for Fail<E> {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Db(error)
    }
}

impl<E> From<deadpool_postgres::PoolError> for Fail<E> {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        Self::Pool(error)
    }
}

impl From<ActivityError> for Fail<ActivityError> {
    fn from(error: ActivityError) -> Self {
        Self::Model(error)
    }
}

impl<E> Fail<E> {
    pub(crate) fn class(&self) -> FailureClass {
        match self {
            Self::Db(error) | Self::AtCommit(error) => classify(error),
            Self::Pool(deadpool_postgres::PoolError::Backend(error)) => classify(error),
            Self::Pool(deadpool_postgres::PoolError::Timeout(_)) => FailureClass::Unavailable,
            Self::Pool(_) | Self::Model(_) | Self::CommitUnknown(_) => FailureClass::Plain,
        }
    }

    /// The store fault, or the model's own error unchanged.
    fn into_fault(self, operation: &'static str) -> Result<StoreFault, E> {
        let class = self.class();
        let failure = self.into_failure()?;
        Ok(match class {
            FailureClass::Retry | FailureClass::Unavailable => {
                tracing::warn!(operation, error = %failure, "PostgreSQL unavailable");
                StoreFault::Busy { operation }
            }
            FailureClass::Corrupt => StoreFault::Corrupt {
                what: format!("PostgreSQL reported corruption during {operation}"),
            },
            FailureClass::Plain => StoreFault::storage(operation, failure),
        })
    }

    /// The storage-level failure, for errors that are not the model's.
    fn into_failure(self) -> Result<PostgresFailure, E> {
        match self {
            Self::Db(error) | Self::AtCommit(error) => Ok(PostgresFailure::Postgres(error)),
            Self::Pool(deadpool_postgres::PoolError::Backend(error)) => {
                Ok(PostgresFailure::Postgres(error))
            }
            Self::Pool(error) => Ok(PostgresFailure::Pool(error.to_string())),
            Self::CommitUnknown(error) => Ok(PostgresFailure::CommitOutcomeUnknown(error)),
            Self::Model(error) => Err(error),
        }
    }
}

/// The error type of a port, which embeds a [`StoreFault`]: [`MemoryError`] or [`ActivityError`].
pub(crate) trait PortError: Sized + Send + 'static {
    fn from_fault(fault: StoreFault) -> Self;
}

impl PortError for MemoryError {
    fn from_fault(fault: StoreFault) -> Self {
        Self::Store(fault)
    }
}

impl PortError for ActivityError {
    fn from_fault(fault: StoreFault) -> Self {
        Self::Store(fault)
    }
}

impl<E: PortError> Fail<E> {
    /// The error a caller of the port sees: the store fault, or the model's own error unchanged.
    pub(crate) fn into_port(self, operation: &'static str) -> E {
        self.into_fault(operation)
            .map_or_else(|model| model, E::from_fault)
    }
}

pub(crate) use memory_core::storage::corrupt;

pub(crate) use memory_core::activity::rules::{
    column_i64 as to_i64, corrupt as activity_corrupt, stored_u64 as to_u64,
};

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;

    use super::*;

    fn pool_timeout<E>() -> Fail<E> {
        Fail::Pool(deadpool_postgres::PoolError::Timeout(
            deadpool_postgres::TimeoutType::Wait,
        ))
    }

    /// Each translation keeps the kind: an unavailable server is `unavailable` from the memory and
    /// the activity ports alike, and the model's own refusals pass through unchanged.
    #[test]
    fn kinds_survive_both_translations() {
        assert_eq!(
            pool_timeout::<MemoryError>().into_port("read").kind(),
            ErrorKind::Unavailable
        );
        assert_eq!(
            pool_timeout::<ActivityError>().into_port("append").kind(),
            ErrorKind::Unavailable
        );
        let closed = Fail::<ActivityError>::Pool(deadpool_postgres::PoolError::Closed);
        assert_eq!(closed.into_port("append").kind(), ErrorKind::Storage);
        let model = Fail::Model(ActivityError::AtCapacity { capacity: 1 });
        assert_eq!(model.into_port("admit").kind(), ErrorKind::Unavailable);
        let model = Fail::Model(MemoryError::NotFound);
        assert_eq!(model.into_port("read").kind(), ErrorKind::NotFound);
    }
}
