//! PostgreSQL implementation of the memory ports (SPEC §3, §5): documents, receipts, predecessor links,
//! the change sequence, full-text lexical search, the thread log, activity progress, the remembering
//! store and stored chunk vectors, in one database that any number of processes on any number of hosts
//! share.
//!
//! # Connecting
//! [`PostgresStore::builder`] takes a URL (`postgres://user:password@host:port/database`) and options
//! (schema, pool size, retries, clock); [`PostgresStoreBuilder::connect`] opens a
//! [deadpool](deadpool_postgres) pool of [tokio-postgres](tokio_postgres) connections and applies the
//! versioned migrations of [`schema`] (recorded in `memory_schema_version`). The other stores share the
//! pool: [`PostgresStore::thread_log`], [`PostgresStore::progress`], [`PostgresStore::remembering`],
//! [`PostgresStore::vectors`]. TLS is not supported yet: connect over loopback, a private network or a
//! local proxy.
//!
//! # Writes and concurrency (SPEC §2.2)
//! Every write goes through [`memory_core::PreparedWrite`]: prepared (size limits, field checks) before
//! any connection is taken, planned inside the transaction against what the database holds. A write
//! transaction first locks the single change-head row, which serializes writers across processes the
//! way SQLite's write lock does, so plans always see the latest commit and change sequences follow
//! commit order with no gaps; inside it the document row is changed by a conditional `UPDATE ... WHERE
//! revision = <expected>` that must change exactly one row, and receipts are unique per
//! `(namespace, operation id)` by primary key. Activity progress and intent leases are fenced by single
//! `UPDATE`s conditional on the fencing epoch that must change exactly one row, or are refused.
//!
//! The price of that order is that write transactions of one database commit one at a time, each
//! waiting for its own WAL flush, so write throughput does not grow with more writers (see
//! `benches/store.rs`); [`PostgresStore::apply_batch`] commits many writes in one transaction. Reads,
//! searches and the activity stores do not take the write lock and run in parallel.
//!
//! Serialization failures and deadlocks are retried; so is a lost connection (see [`error`]) when the
//! attempt had not sent `COMMIT`, and for memory writes even when it had: a write whose commit did land
//! is then answered from its receipt as a replay, never applied twice. After [`DEFAULT_RETRIES`] the
//! caller gets [`memory_core::StoreFault::Busy`] (kind `unavailable`), which it may retry.
//!
//! # Durability
//! A write is acknowledged after PostgreSQL acknowledged `COMMIT`, so it is as durable as the server's
//! settings make it (`synchronous_commit = on` and `fsync = on`, the defaults, survive a server crash).
//!
//! # Change notifications
//! Every committed write transaction also sends `NOTIFY memory_changes` ([`CHANGE_CHANNEL`]) with the
//! store's schema and its new head (`<schema>:<head>`). [`PostgresStore::follow_changes`] starts a
//! [`ChangeFollower`] that `LISTEN`s on it to wake up, keeps the change sequence as the source of truth,
//! polls the head as a fallback for missed notifications and reconnects after a lost connection; it is
//! a [`memory_core::ChangeFeed`] whose `changes_since` waits for the next change instead of answering
//! empty at once, so a generic feed follower (semantic-index's `Indexer`) given it wakes on the
//! notification. That is how a write on one host becomes recallable on another (see [`follower`]).
//!
//! # Differences from memory-sqlite
//! - Lexical scores are `ts_rank` values, not BM25 (see [`lexical`]); only the order is comparable.
//! - The full-text vector covers the first [`MAX_INDEXED_TEXT_BYTES`] of a document's text (PostgreSQL
//!   caps a `tsvector` at 1 MiB); the document itself is stored whole.
//! - A locator holding U+0000, which PostgreSQL text cannot store, is refused as invalid input.
//!
//! # Tests
//! The integration tests need a server: `scripts/postgres-setup.sh` starts a local one (installing
//! Debian's package if needed, loopback only) and prints the URL to put in `MEMORY_TEST_POSTGRES_URL`;
//! `scripts/test.sh` and `.ci/run` do this. Each test works in a fresh schema that it drops afterwards, so
//! tests run in parallel. Without `MEMORY_TEST_POSTGRES_URL` every test fails with a message naming the
//! script, unless `MEMORY_SKIP_POSTGRES=1` is set, in which case each test prints a loud `SKIPPED` line
//! and passes without touching a database.
//!
//! `tests/restart.rs` restarts a server (`pg_ctl restart -m immediate`) under concurrent writes, so it
//! starts a private one instead of disturbing the shared cluster: `initdb` into a temporary directory and
//! `pg_ctl start` on a free loopback port, with the binaries under `/usr/lib/postgresql/*/bin` (as the
//! `postgres` user when run as root). It needs no URL; missing binaries fail it, naming the script.

mod consistency;
mod corrections;
mod db;
pub mod error;
pub mod follower;
pub mod lexical;
mod listing;
pub mod progress;
pub mod remembering_store;
mod retry;
mod rows;
pub mod schema;
mod store;
pub mod thread_log;
pub mod vectors;
mod write;

pub use db::SchemaName;
pub use error::{PostgresFailure, postgres_failure};
pub use follower::{ChangeFollower, FollowerOptions};
pub use retry::DEFAULT_RETRIES;
pub use rows::MAX_INDEXED_TEXT_BYTES;
pub use schema::SCHEMA_VERSION;
pub use store::{
    CHANGE_CHANNEL, ConsistencyReport, MAX_BATCH_WRITES, MAX_CHANGES_PER_CALL, MAX_READ_MANY_KEYS,
    PostgresStore, PostgresStoreBuilder, RevisionLink,
};

/// The URL schemes that select PostgreSQL where a database is named by one string (`--db`).
pub const URL_SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];

/// Whether `db` names a PostgreSQL database: it starts with one of [`URL_SCHEMES`], in any case.
/// Anything else is a SQLite path. Every program that takes a `--db` asks this, so a URL means the
/// same backend to each of them.
pub fn is_postgres_url(db: &str) -> bool {
    URL_SCHEMES.iter().any(|scheme| {
        db.get(..scheme.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(scheme))
    })
}

#[cfg(test)]
mod url_tests {
    use super::is_postgres_url;

    #[test]
    fn postgres_urls_are_told_from_paths_in_any_case() {
        for url in ["postgres://u@h/db", "POSTGRESQL://h/db", "PostgreS://"] {
            assert!(is_postgres_url(url), "{url}");
        }
        for path in [
            "memory.db",
            "postgres:/x",
            "./postgres://x",
            "",
            "pg://h",
            "é",
        ] {
            assert!(!is_postgres_url(path), "{path}");
        }
    }
}
