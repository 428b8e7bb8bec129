//! The one retry rule of every store call, and the one way a call reaches the store's runtime.
//!
//! Every method of every store (documents, vectors, thread log, progress, remembering) runs its
//! database work through [`Handle::call`] (async ports) or [`Handle::call_blocking`] (the synchronous
//! activity ports), which run [`retry`] on the store's runtime. Each attempt takes a pooled
//! connection; a failed attempt is tried again by this rule:
//!
//! - a conflict between transactions (serialization failure, deadlock: PostgreSQL rolled the attempt
//!   back) is retried;
//! - a lost or refused connection, or a server shutting down or full ([`FailureClass::Unavailable`]),
//!   is retried, except in a call that is not idempotent ([`Idempotent::No`]) when the attempt failed
//!   in `COMMIT` (sent through [`commit`]): whether it committed is unknown, so it is not repeated and
//!   surfaces as [`crate::PostgresFailure::CommitOutcomeUnknown`];
//! - no free pooled connection within the pool's wait timeout is not retried (the whole wait was
//!   already spent; waiting again would only multiply it);
//! - anything else (the model's refusals, corrupt data, ordinary SQL errors) is returned at once.
//!
//! At most `retries` retries ([`DEFAULT_RETRIES`] unless the builder says otherwise), retry `n`
//! (0-based) after [`backoff`]`(n)`: 5 ms doubling to at most 400 ms, no jitter. After a lost
//! connection the pool's idle connections are dropped too: a restarted server has broken them all, and
//! the pool cannot tell until one is used.
//!
//! An attempt is a closure that gets the call's inputs (`state`, lent to every attempt) and an owned
//! connection, and returns a boxed `Send` future borrowing the inputs. Stable Rust cannot say that an
//! async closure's future is `Send` (it cannot be spawned), and a plain closure's future cannot borrow
//! the closure's own captures, so inputs that are not `Copy` travel in `state` instead of being
//! cloned for every attempt. One allocation per attempt is nothing beside a database round trip.
//!
//! The pause and the connections come through [`Connections`], so the rule is tested without a
//! server or a clock.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use deadpool_postgres::{Object, PoolError};
use tokio_postgres::types::ToSql;

use crate::db::{Database, Handle};
use crate::error::{Attempt, Fail, FailureClass, PortError, classify};

/// How many times a call is retried after a serialization failure or a lost connection.
pub const DEFAULT_RETRIES: u32 = 8;

/// Whether a call may run again after its `COMMIT` may have landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Idempotent {
    /// Running it twice leaves what running it once does (reads, upserts, fenced claims, and memory
    /// writes, whose receipt answers a repeated write as a replay): retried even after `COMMIT`.
    Yes,
    /// It must not run twice (a thread-log append, a fenced advance): not retried once `COMMIT` was
    /// sent; a connection lost then is [`crate::PostgresFailure::CommitOutcomeUnknown`].
    No,
}

/// What an attempt returns: a boxed future that may borrow the call's inputs for `'a`.
pub(crate) type AttemptFuture<'a, T, E> = Pin<Box<dyn Future<Output = Attempt<T, E>> + Send + 'a>>;

/// Where attempts get their connections and how they wait between them: the pool and tokio's timer
/// for a store, a script in the tests.
pub(crate) trait Connections: Sync {
    type Client: Send;

    /// A connection for one attempt.
    fn get(&self) -> impl Future<Output = Result<Self::Client, PoolError>> + Send;

    /// Drops the idle connections, after one was found lost.
    fn forget_idle(&self);

    /// Waits `delay` before the next attempt.
    fn pause(&self, delay: Duration) -> impl Future<Output = ()> + Send;
}

impl Connections for Database {
    type Client = Object;

    fn get(&self) -> impl Future<Output = Result<Object, PoolError>> + Send {
        self.pool.get()
    }

    fn forget_idle(&self) {
        drop(self.pool.retain(|_, _| false));
    }

    fn pause(&self, delay: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(delay)
    }
}

/// Runs `attempt` with the call's `state` until it succeeds or the rule (see the module
/// documentation) says to stop, at most `retries + 1` times.
pub(crate) async fn retry<C, S, T, E, F>(
    connections: &C,
    retries: u32,
    idempotent: Idempotent,
    state: &S,
    mut attempt: F,
) -> Attempt<T, E>
where
    C: Connections,
    F: for<'a> FnMut(&'a S, C::Client) -> AttemptFuture<'a, T, E>,
{
    let mut retried = 0;
    loop {
        let result = match connections.get().await {
            Ok(client) => attempt(state, client).await,
            Err(error) => Err(Fail::Pool(error)),
        };
        let error = match result {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if error.class() == FailureClass::Unavailable {
            connections.forget_idle();
        }
        if retried < retries && is_transient(&error, idempotent) {
            tracing::debug!(attempt = retried, "retrying a PostgreSQL call");
            connections.pause(backoff(retried)).await;
            retried += 1;
        } else {
            return Err(settled(error, idempotent));
        }
    }
}

/// Whether a failed attempt may be tried again (the rule, less the bound).
fn is_transient<E>(error: &Fail<E>, idempotent: Idempotent) -> bool {
    if matches!(error, Fail::Pool(PoolError::Timeout(_))) {
        return false;
    }
    match error.class() {
        FailureClass::Retry => true,
        FailureClass::Unavailable => {
            idempotent == Idempotent::Yes || !matches!(error, Fail::AtCommit(_))
        }
        FailureClass::Corrupt | FailureClass::Plain => false,
    }
}

/// The failure a caller sees: a connection lost in `COMMIT` of a call that is not idempotent is an
/// unknown outcome; any other failure in `COMMIT` is the driver's error.
fn settled<E>(error: Fail<E>, idempotent: Idempotent) -> Fail<E> {
    match error {
        Fail::AtCommit(error)
            if idempotent == Idempotent::No && classify(&error) == FailureClass::Unavailable =>
        {
            Fail::CommitUnknown(error)
        }
        Fail::AtCommit(error) => Fail::Db(error),
        other => other,
    }
}

/// The pause before retry `attempt` (0-based): 5 ms doubling to at most 400 ms, so eight retries ride
/// out a server restart of about two seconds.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(5u64.saturating_mul(1 << attempt.min(7)).min(400))
}

/// Commits an attempt's transaction. A failure here came after `COMMIT` was sent, which the rule
/// must know: every transaction of the crate commits through this.
pub(crate) async fn commit<E>(
    transaction: deadpool_postgres::Transaction<'_>,
) -> Result<(), Fail<E>> {
    transaction.commit().await.map_err(Fail::AtCommit)
}

/// A statement's parameters, owned by the call so that every attempt can lend them.
pub(crate) type Params = Vec<Box<dyn ToSql + Send + Sync>>;

/// The attempt of a call that runs one statement, `sql`, with the call's [`Params`] and answers how
/// many rows it changed.
pub(crate) fn execute<E: Send + 'static>(
    sql: &'static str,
) -> impl for<'a> FnMut(&'a Params, Object) -> AttemptFuture<'a, u64, E> + Send + 'static {
    move |params, client| {
        Box::pin(async move {
            let statement = client.prepare_cached(sql).await?;
            let params: Vec<&(dyn ToSql + Sync)> = params
                .iter()
                .map(|param| &**param as &(dyn ToSql + Sync))
                .collect();
            Ok(client.execute(&statement, &params).await?)
        })
    }
}

impl Handle {
    /// Runs `attempt` under the retry rule on the store's runtime and awaits it from any executor;
    /// a failure becomes the port's error, named by `operation`.
    pub(crate) async fn call<S, T, E, F>(
        &self,
        operation: &'static str,
        idempotent: Idempotent,
        state: S,
        attempt: F,
    ) -> Result<T, E>
    where
        S: Send + Sync + 'static,
        T: Send + 'static,
        E: PortError,
        F: for<'a> FnMut(&'a S, Object) -> AttemptFuture<'a, T, E> + Send + 'static,
    {
        self.run(self.attempts(operation, idempotent, state, attempt))
            .await
    }

    /// [`Self::call`] for the synchronous ports: blocks the calling thread until it is done (see
    /// [`Handle::block`]).
    pub(crate) fn call_blocking<S, T, E, F>(
        &self,
        operation: &'static str,
        idempotent: Idempotent,
        state: S,
        attempt: F,
    ) -> Result<T, E>
    where
        S: Send + Sync + 'static,
        T: Send + 'static,
        E: PortError,
        F: for<'a> FnMut(&'a S, Object) -> AttemptFuture<'a, T, E> + Send + 'static,
    {
        self.block(self.attempts(operation, idempotent, state, attempt))
    }

    fn attempts<S, T, E, F>(
        &self,
        operation: &'static str,
        idempotent: Idempotent,
        state: S,
        attempt: F,
    ) -> impl Future<Output = Result<T, E>> + Send + 'static
    where
        S: Send + Sync + 'static,
        T: Send + 'static,
        E: PortError,
        F: for<'a> FnMut(&'a S, Object) -> AttemptFuture<'a, T, E> + Send + 'static,
    {
        let db = self.db.clone();
        async move {
            retry(&*db, db.retries, idempotent, &state, attempt)
                .await
                .map_err(|error| error.into_port(operation))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use memory_core::{ErrorKind, MemoryError};

    use super::*;
    use crate::error::PostgresFailure;

    /// Connections that are always there, and pauses and purges that are only counted.
    #[derive(Default)]
    struct Script {
        pauses: Mutex<Vec<Duration>>,
        purges: Mutex<usize>,
    }

    impl Connections for Script {
        type Client = ();

        fn get(&self) -> impl Future<Output = Result<(), PoolError>> + Send {
            std::future::ready(Ok(()))
        }

        fn forget_idle(&self) {
            *self.purges.lock().expect("not poisoned") += 1;
        }

        fn pause(&self, delay: Duration) -> impl Future<Output = ()> + Send {
            self.pauses.lock().expect("not poisoned").push(delay);
            std::future::ready(())
        }
    }

    type Outcome = Attempt<u32>;

    /// What one call did.
    struct Ran {
        result: Outcome,
        attempts: usize,
        pauses: Vec<Duration>,
        purges: usize,
    }

    /// Runs [`retry`] over attempts that answer `outcomes` in order.
    fn run(retries: u32, idempotent: Idempotent, outcomes: Vec<Outcome>) -> Ran {
        let script = Script::default();
        let state = (Mutex::new(outcomes.into_iter()), Mutex::new(0_usize));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let result = runtime.block_on(retry(
            &script,
            retries,
            idempotent,
            &state,
            |(outcomes, attempts), ()| {
                *attempts.lock().expect("not poisoned") += 1;
                let outcome = outcomes
                    .lock()
                    .expect("not poisoned")
                    .next()
                    .expect("an attempt past the expected ones");
                Box::pin(std::future::ready(outcome))
            },
        ));
        Ran {
            result,
            attempts: *state.1.lock().expect("not poisoned"),
            pauses: script.pauses.into_inner().expect("not poisoned"),
            purges: script.purges.into_inner().expect("not poisoned"),
        }
    }

    /// A real driver error: a server that closed the connection during the handshake.
    fn lost_connection() -> Fail<MemoryError> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let server = std::thread::spawn(move || drop(listener.accept()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let connected = runtime.block_on(tokio_postgres::connect(
            &format!("host=127.0.0.1 port={port} user=retry connect_timeout=5"),
            tokio_postgres::NoTls,
        ));
        server.join().expect("the server thread");
        let Err(error) = connected else {
            panic!("a closed socket answered a PostgreSQL handshake");
        };
        assert_eq!(classify(&error), FailureClass::Unavailable, "{error}");
        Fail::Db(error)
    }

    fn lost_in_commit() -> Fail<MemoryError> {
        let Fail::Db(error) = lost_connection() else {
            unreachable!("lost_connection answers a driver error")
        };
        Fail::AtCommit(error)
    }

    fn lost_connections(count: u32) -> Vec<Outcome> {
        (0..count).map(|_| Err(lost_connection())).collect()
    }

    #[test]
    fn a_transient_failure_is_retried_up_to_the_bound_with_growing_pauses() {
        let ran = run(3, Idempotent::Yes, lost_connections(4));
        let error = ran.result.expect_err("still failing");
        assert_eq!(error.class(), FailureClass::Unavailable);
        assert_eq!(ran.attempts, 4, "the first attempt and three retries");
        assert_eq!(ran.pauses, [backoff(0), backoff(1), backoff(2)]);
        assert_eq!(ran.purges, 4, "each lost connection drops the idle ones");
        assert_eq!(
            (0..10).map(backoff).collect::<Vec<_>>(),
            [5, 10, 20, 40, 80, 160, 320, 400, 400, 400].map(Duration::from_millis)
        );

        let mut outcomes = lost_connections(2);
        outcomes.push(Ok(7));
        let ran = run(3, Idempotent::No, outcomes);
        assert_eq!(ran.result.expect("the third attempt succeeds"), 7);
        assert_eq!(ran.attempts, 3);

        let ran = run(0, Idempotent::Yes, lost_connections(1));
        assert!(ran.result.is_err());
        assert_eq!(
            (ran.attempts, ran.pauses.len()),
            (1, 0),
            "no retries asked for"
        );
    }

    #[test]
    fn a_failure_that_is_not_transient_is_returned_at_once() {
        let pool_wait = Fail::Pool(PoolError::Timeout(deadpool_postgres::TimeoutType::Wait));
        let refusal = Fail::Model(MemoryError::NotFound);
        for (failure, kind) in [
            (refusal, ErrorKind::NotFound),
            (pool_wait, ErrorKind::Unavailable),
        ] {
            let ran = run(8, Idempotent::Yes, vec![Err(failure)]);
            let error = ran.result.expect_err("it failed").into_port("read");
            assert_eq!(error.kind(), kind);
            assert_eq!((ran.attempts, ran.pauses.len()), (1, 0));
        }
    }

    #[test]
    fn a_connection_lost_in_commit_is_retried_only_when_idempotent() {
        let ran = run(8, Idempotent::No, vec![Err(lost_in_commit())]);
        assert_eq!(ran.attempts, 1);
        let error = ran.result.expect_err("not repeated").into_port("append");
        assert!(matches!(
            crate::postgres_failure(&error),
            Some(PostgresFailure::CommitOutcomeUnknown(_))
        ));

        let ran = run(8, Idempotent::Yes, vec![Err(lost_in_commit()), Ok(1)]);
        assert_eq!((ran.result.expect("repeated"), ran.attempts), (1, 2));
    }
}
