//! The database `--db` names, and every store opened in it, for `memory` (its commands and `serve`),
//! `memory hook` and `remembering-worker`.
//!
//! - [`Database::select`] decides once which backend a `--db` string (and `--schema`) names: a
//!   PostgreSQL URL ([`memory_postgres::is_postgres_url`]) or else a SQLite path.
//! - [`Database::open`] opens the memory store ([`Opened`]); a bad path or an unreachable server is
//!   one [`Refusal`] whoever opens it ([`Refusal::connecting`] for PostgreSQL). [`with_store!`] runs code
//!   generic over [`Store`] on whichever backend was opened.
//! - [`Store`] opens the rest of the database from its memory store: the vectors, the thread log,
//!   activity progress, the remembering store and the feed the server's indexer follows. For SQLite
//!   each is one more connection to the same file; for PostgreSQL a handle on the store's pool.
//!
//! Opening is a blocking call (a file, or a connection and the schema's migration): async callers
//! open on the blocking pool ([`Database::open_async`], [`crate::blocking`]).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memory_core::activity::{ProgressStore, RememberingStore, ThreadLog};
use memory_core::vectors::VectorStore;
use memory_core::{
    ChangeFeed, CorrectionIndex, LexicalSearch, MemoryLister, MemoryReader, MemoryWriter,
    RevisionHistory, RevisionRetention,
};
use memory_postgres::vectors::PostgresVectorStore;
use memory_postgres::{PostgresStore, SchemaName};
use memory_sqlite::SqliteStore;
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use memory_sqlite::vectors::SqliteVectorStore;

use crate::blocking::blocking;
use crate::feed::{CommitSignal, WakingFeed};
use crate::refusal::Refusal;

/// Which backend holds the memory.
#[derive(Clone, PartialEq, Eq)]
pub enum Database {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres {
        /// The connection URL; it may hold a password and is never printed.
        url: String,
        /// The schema holding the tables, when given.
        schema: Option<SchemaName>,
    },
}

impl std::fmt::Debug for Database {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => formatter.debug_tuple("Sqlite").field(path).finish(),
            // The URL may carry a password: it is never printed.
            Self::Postgres { schema, .. } => formatter
                .debug_struct("Postgres")
                .field("schema", schema)
                .finish_non_exhaustive(),
        }
    }
}

/// Who opens a database: the `application_name` its PostgreSQL connections show in
/// `pg_stat_activity`, and how many connections it pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client {
    application_name: &'static str,
    pool_size: Option<usize>,
}

impl Client {
    /// The `memory` command and `memory serve`, with the store's default pool.
    pub const MEMORY: Self = Self {
        application_name: "memory",
        pool_size: None,
    };
    /// `memory hook`.
    pub const HOOK: Self = Self {
        application_name: "memory-hook",
        pool_size: None,
    };
    /// `remembering-worker`: a worker runs one pass at a time, and a pass holds at most one
    /// connection per call, so a few cover the store calls and the pool's replacements.
    pub const WORKER: Self = Self {
        application_name: "remembering-worker",
        pool_size: Some(4),
    };
}

impl Database {
    /// A `postgres://` or `postgresql://` URL (scheme in any case) selects PostgreSQL; anything else
    /// is a SQLite path. A schema without a URL is refused (`invalid-input`) rather than ignored, so a
    /// mistyped URL does not silently fall back to a local file.
    pub fn select(db: &Path, schema: Option<&str>) -> Result<Self, Refusal> {
        // A path that is not UTF-8 cannot be a URL; it stays a (SQLite) path.
        let url = db
            .to_str()
            .filter(|text| memory_postgres::is_postgres_url(text));
        match (url, schema) {
            (Some(url), schema) => {
                let schema = schema
                    .map(SchemaName::new)
                    .transpose()
                    .map_err(|error| Refusal::invalid_input(format!("--schema: {error}")))?;
                Ok(Self::Postgres {
                    url: url.to_owned(),
                    schema,
                })
            }
            (None, Some(_)) => Err(Refusal::invalid_input(
                "--schema needs a PostgreSQL --db URL (postgres://...)",
            )),
            (None, None) => Ok(Self::Sqlite(db.to_owned())),
        }
    }

    /// Opens the memory store (a blocking call): the SQLite file, created when missing, or a
    /// connection to PostgreSQL, migrating the schema on first use.
    pub fn open(&self, client: Client) -> Result<Opened, Refusal> {
        Ok(match self {
            Self::Sqlite(path) => Opened::Sqlite(Arc::new(
                SqliteStore::builder()
                    .retention(revision_retention()?)
                    .open(path)?,
            )),
            Self::Postgres { url, schema } => {
                Opened::Postgres(Arc::new(connect(url, schema.as_ref(), client)?))
            }
        })
    }

    /// [`Self::open`] on the blocking pool, for async callers.
    pub async fn open_async(&self, client: Client) -> Result<Opened, Refusal> {
        let database = self.clone();
        blocking(move || database.open(client)).await?
    }

    /// Opens the thread log alone (a blocking call): for SQLite one connection to the log's tables,
    /// without opening the memory store.
    pub fn open_thread_log(&self, client: Client) -> Result<Arc<dyn ThreadLog>, Refusal> {
        match self {
            Self::Sqlite(path) => Ok(sqlite_thread_log(path)?),
            Self::Postgres { url, schema } => {
                connect(url, schema.as_ref(), client)?.open_thread_log()
            }
        }
    }
}

/// Connects to PostgreSQL (migrating the schema on first use); see [`Refusal::connecting`].
fn connect(
    url: &str,
    schema: Option<&SchemaName>,
    client: Client,
) -> Result<PostgresStore, Refusal> {
    let mut builder = PostgresStore::builder(url)
        .application_name(client.application_name)
        .retention(revision_retention()?);
    if let Some(size) = client.pool_size {
        builder = builder.pool_size(size);
    }
    if let Some(schema) = schema {
        builder = builder.schema(schema.clone());
    }
    builder.connect_blocking().map_err(Refusal::connecting)
}

fn sqlite_thread_log(path: &Path) -> Result<Arc<dyn ThreadLog>, Refusal> {
    Ok(Arc::new(SqliteThreadLog::open(path)?))
}

/// An opened memory store, of whichever backend the database is; [`with_store!`] runs code generic
/// over [`Store`] on it.
#[derive(Clone)]
pub enum Opened {
    /// A SQLite file's store.
    Sqlite(Arc<SqliteStore>),
    /// A PostgreSQL database's store.
    Postgres(Arc<PostgresStore>),
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            Self::Sqlite(_) => "Opened::Sqlite",
            Self::Postgres(_) => "Opened::Postgres",
        })
    }
}

/// `with_store!(opened, store => body)`: evaluates `body` with `store` bound to the opened store's
/// `Arc<S>` (`S: Store`), whichever backend [`Opened`] holds; `body` is usually a call of a function
/// generic over [`Store`].
#[macro_export]
macro_rules! with_store {
    ($opened:expr, $store:ident => $body:expr) => {
        match $opened {
            $crate::database::Opened::Sqlite($store) => $body,
            $crate::database::Opened::Postgres($store) => $body,
        }
    };
}

pub use crate::with_store;

/// The environment variable that bounds how many of each document's newest revisions keep their
/// words (default [`memory_core::revisions::DEFAULT_MAX_REVISIONS`], 1 to
/// [`memory_core::revisions::MAX_MAX_REVISIONS`]); older revisions stay in the history without
/// their words (`memory_core::revisions`).
///
/// It is read from the environment when a database is opened rather than taken from a flag, so one
/// setting reaches every process that writes documents: `memory` and `memory serve`, the
/// `remembering-worker`, the hook and the Python package. A value that is not a number in range is
/// refused (`invalid-input`) before the database is opened.
pub const MAX_REVISIONS_ENV: &str = "MEMORY_MAX_REVISIONS";

/// The bound [`MAX_REVISIONS_ENV`] sets, or the default without it.
pub fn revision_retention() -> Result<RevisionRetention, Refusal> {
    match std::env::var(MAX_REVISIONS_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(RevisionRetention::default()),
        Err(std::env::VarError::NotUnicode(_)) => Err(Refusal::invalid_input(format!(
            "{MAX_REVISIONS_ENV} must be a whole number from 1"
        ))),
        Ok(text) => RevisionRetention::parse(&text)
            .map_err(|error| Refusal::invalid_input(format!("{MAX_REVISIONS_ENV}: {error}"))),
    }
}

/// Everything the operations need from a store, and the rest of its database: the semantic index's
/// vectors, the activity stores and the feed the server's indexer follows. Every `open_*` is a
/// blocking call.
pub trait Store:
    MemoryReader
    + MemoryWriter
    + ChangeFeed
    + LexicalSearch
    + CorrectionIndex
    + MemoryLister
    + RevisionHistory
    + 'static
{
    /// Where the semantic index's chunk vectors and indexed position are kept.
    type Vectors: VectorStore + 'static;
    /// What the server's background indexer follows: a change feed that reads the documents too.
    type Feed: ChangeFeed + MemoryReader + 'static;
    /// Whether [`Self::Feed`]'s `changes_since` waits a while for a new change instead of answering
    /// empty at once (so the indexer need not sleep between empty rounds).
    const FEED_WAITS: bool;

    /// Opens the vector store kept in the same database.
    fn open_vectors(&self) -> Result<Arc<Self::Vectors>, Refusal>;

    /// Opens the thread log kept in the same database.
    fn open_thread_log(&self) -> Result<Arc<dyn ThreadLog>, Refusal>;

    /// Opens the remembering store kept in the same database: suppression, intents and
    /// source-to-target references.
    fn open_remembering(&self) -> Result<Arc<dyn RememberingStore>, Refusal>;

    /// Opens the activity progress store kept in the same database.
    fn open_progress(&self) -> Result<Arc<dyn ProgressStore>, Refusal>;

    /// The feed the server's indexer follows, and the signal the server's commits give it (`None`
    /// when the feed wakes by itself).
    fn follow(
        store: Arc<Self>,
    ) -> impl Future<Output = Result<Following<Self::Feed>, Refusal>> + Send;
}

/// What a server's indexer follows.
pub struct Following<F> {
    /// The feed.
    pub feed: Arc<F>,
    /// Signalled after each of the server's commits, when the feed waits for it.
    pub commits: Option<CommitSignal>,
}

impl<F> std::fmt::Debug for Following<F> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Following")
            .field("commits", &self.commits.is_some())
            .finish_non_exhaustive()
    }
}

/// A SQLite file: every store is one more connection to the same file. Only processes on this
/// machine write to it, so the server's indexer follows the store itself, woken by the server's
/// commits ([`WakingFeed`]; other processes' writes are picked up by its fallback read).
impl Store for SqliteStore {
    type Vectors = SqliteVectorStore;
    type Feed = WakingFeed<SqliteStore>;
    const FEED_WAITS: bool = true;

    fn open_vectors(&self) -> Result<Arc<Self::Vectors>, Refusal> {
        Ok(Arc::new(SqliteVectorStore::open(self.path())?))
    }

    fn open_thread_log(&self) -> Result<Arc<dyn ThreadLog>, Refusal> {
        sqlite_thread_log(self.path())
    }

    fn open_remembering(&self) -> Result<Arc<dyn RememberingStore>, Refusal> {
        Ok(Arc::new(SqliteRememberingStore::open(self.path())?))
    }

    fn open_progress(&self) -> Result<Arc<dyn ProgressStore>, Refusal> {
        Ok(Arc::new(SqliteProgressStore::open(self.path())?))
    }

    async fn follow(store: Arc<Self>) -> Result<Following<Self::Feed>, Refusal> {
        let commits = CommitSignal::new();
        Ok(Following {
            feed: Arc::new(WakingFeed::new(store, commits.clone())),
            commits: Some(commits),
        })
    }
}

/// A shared PostgreSQL database: every store shares the memory store's connection pool. Other
/// servers and hosts write to it too, so the server's indexer follows a
/// [`memory_postgres::ChangeFollower`], which wakes on `NOTIFY` when any process on any host commits,
/// with the change sequence as the source of truth.
impl Store for PostgresStore {
    type Vectors = PostgresVectorStore;
    type Feed = memory_postgres::ChangeFollower;
    const FEED_WAITS: bool = true;

    fn open_vectors(&self) -> Result<Arc<Self::Vectors>, Refusal> {
        Ok(Arc::new(self.vectors()))
    }

    fn open_thread_log(&self) -> Result<Arc<dyn ThreadLog>, Refusal> {
        Ok(Arc::new(self.thread_log()))
    }

    fn open_remembering(&self) -> Result<Arc<dyn RememberingStore>, Refusal> {
        Ok(Arc::new(self.remembering()))
    }

    fn open_progress(&self) -> Result<Arc<dyn ProgressStore>, Refusal> {
        Ok(Arc::new(self.progress()))
    }

    async fn follow(store: Arc<Self>) -> Result<Following<Self::Feed>, Refusal> {
        // The follower's dedicated LISTEN connection is a connection like the store's.
        let follower = store.follow_changes().await.map_err(Refusal::connecting)?;
        Ok(Following {
            feed: Arc::new(follower),
            commits: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;

    use super::*;

    /// The refusal of a call that must be refused.
    fn refused<T>(result: Result<T, Refusal>) -> Refusal {
        match result {
            Ok(_) => panic!("expected a refusal"),
            Err(refusal) => refusal,
        }
    }

    #[test]
    fn a_postgres_url_selects_postgresql_and_anything_else_a_sqlite_file() {
        for url in [
            "postgres://u:p@127.0.0.1:5432/db",
            "postgresql://u@host/db",
            "POSTGRES://u@host/db",
        ] {
            let selected = Database::select(url.as_ref(), None).expect("a URL");
            assert_eq!(
                selected,
                Database::Postgres {
                    url: url.to_owned(),
                    schema: None
                }
            );
            assert!(!format!("{selected:?}").contains("u@"), "{selected:?}");
        }
        assert!(matches!(
            Database::select("postgres://u@host/db".as_ref(), Some("team_a")),
            Ok(Database::Postgres { schema: Some(schema), .. }) if schema.as_str() == "team_a"
        ));
        for path in ["memory.sqlite", "./postgres/memory.sqlite"] {
            assert_eq!(
                Database::select(path.as_ref(), None),
                Ok(Database::Sqlite(path.into()))
            );
        }
    }

    #[test]
    fn a_schema_needs_a_url_and_a_valid_name() {
        for (db, schema) in [
            ("memory.sqlite", "team_a"),
            ("postgres://u@host/db", "no; drop"),
        ] {
            let refusal = Database::select(db.as_ref(), Some(schema)).expect_err("refused");
            assert_eq!(refusal.kind(), ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn a_url_that_does_not_parse_is_invalid_input_for_every_client_and_never_shown() {
        let database = Database::select(
            "postgres://memory:not-a-real-secret@host:not-a-port/db".as_ref(),
            None,
        )
        .expect("a URL");
        for client in [Client::MEMORY, Client::HOOK, Client::WORKER] {
            for refusal in [
                database.open(client).expect_err("refused"),
                refused(database.open_thread_log(client)),
            ] {
                assert_eq!(refusal.kind(), ErrorKind::InvalidInput, "{refusal}");
                assert!(refusal.message().starts_with("--db: "), "{refusal}");
                assert!(
                    !refusal.message().contains("not-a-real-secret"),
                    "{refusal}"
                );
            }
        }
    }

    #[test]
    fn a_sqlite_path_that_cannot_be_opened_is_refused_with_the_stores_kind() {
        let directory = tempfile::tempdir().expect("temporary directory");
        // A directory is no database file.
        let database = Database::Sqlite(directory.path().to_owned());
        let refusal = database.open(Client::MEMORY).expect_err("refused");
        assert_eq!(refusal.kind(), ErrorKind::Storage, "{refusal}");
        let refusal = refused(database.open_thread_log(Client::HOOK));
        assert_eq!(refusal.kind(), ErrorKind::Storage, "{refusal}");
    }

    #[test]
    fn every_store_of_a_sqlite_file_opens_from_its_memory_store() {
        let directory = tempfile::tempdir().expect("temporary directory");
        let database = Database::Sqlite(directory.path().join("memory.sqlite"));
        let opened = database.open(Client::MEMORY).expect("opened");
        let Opened::Sqlite(store) = opened else {
            panic!("a path opens SQLite");
        };
        store.open_vectors().expect("vectors");
        store.open_remembering().expect("remembering");
        store.open_progress().expect("progress");
        let log = store.open_thread_log().expect("thread log");
        assert_eq!(log.overview().expect("overview").pending, 0);
        database
            .open_thread_log(Client::HOOK)
            .expect("the log alone");
    }
}
