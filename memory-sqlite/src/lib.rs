//! SQLite implementation of the memory ports (SPEC §3): documents, receipts, the change feed and lexical
//! (BM25 over FTS5 tokens, keyed by namespace) search, in one SQLite file.
//!
//! # Opening
//! [`SqliteStore::open`] opens or creates a store with the default options, and
//! [`SqliteStore::builder`] with others (there is no third way in). Every store of this crate (memory,
//! thread log, progress, remembering, vectors) keeps its tables in one versioned schema
//! ([`SCHEMA_VERSION`]), and whichever opens a file first creates or migrates all of it (and no
//! table the crate does not own); a file of a newer version is refused with
//! [`StoreFailure::SchemaTooNew`]. [`SqliteReader::open`] (or the builder's `open_reader`) opens a
//! read-only view that creates nothing and starts no write transaction; it fails with
//! [`StoreFailure::SchemaMissing`] on a file without the schema and with
//! [`StoreFailure::SchemaTooOld`] on one no store has migrated yet.
//!
//! # Durability
//! The file is in WAL mode with `synchronous=FULL` by default ([`Synchronous`]). Every write is one
//! `BEGIN IMMEDIATE` transaction holding the document, its predecessor link, its receipt, its search
//! row and its change; a write is acknowledged only after `COMMIT` returned, by which time its WAL
//! frames are synced. So:
//! - a process crash (abort, kill) loses no acknowledged write, and a write that was not acknowledged
//!   is either wholly present or wholly absent;
//! - a power loss or operating-system crash loses no acknowledged write either, provided the disk
//!   honours `fsync`. With [`Synchronous::Normal`], the most recent acknowledged writes may be lost on
//!   power loss (never partially); process crashes still lose nothing.
//!
//! After an I/O error or a failed commit inside a write transaction, the store refuses every further
//! write with [`memory_core::StoreFault::Poisoned`] until it is reopened, instead of writing on top of a
//! state it no longer knows. Reads keep working.
//!
//! # Concurrency
//! One writing connection behind a mutex, and a small pool of read-only connections
//! ([`SqliteStoreBuilder::read_connections`], opened as concurrent readers need them), so a read never
//! waits for a write or for another read's statement. rusqlite is
//! synchronous; the async trait methods run their statements inline on the calling task rather than
//! through `spawn_blocking`, which keeps this crate free of any runtime. Reads are short indexed
//! lookups; a write waits for one `fsync`. Callers that cannot afford that on an executor thread call
//! the `*_blocking` methods from their own blocking pool. Several processes may open the same file:
//! writers serialize on SQLite's lock (busy timeout, then bounded retries, see
//! [`SqliteStoreBuilder::busy_retries`]), readers never block writers.
//!
//! # Fault injection
//! With the feature `failpoints`, the points listed in [`fault`] sit before, inside and after every
//! write transaction, plus a lost-acknowledgement point.

mod consistency;
mod corrections;
mod error;
pub mod fault;
pub mod lexical;
mod listing;
mod neighbours;
mod options;
mod read_pool;
mod reader;
mod rows;
mod schema;
mod store;
mod transaction;
pub mod vectors;

pub use error::{StoreFailure, fault_failure, storage_failure};
pub use options::{SqliteStoreBuilder, Synchronous};
pub use read_pool::{DEFAULT_READ_CONNECTIONS, MAX_READ_CONNECTIONS};
pub use reader::{
    ConsistencyReport, MAX_CHANGES_PER_CALL, MAX_READ_MANY_KEYS, RevisionLink, SqliteReader,
};
pub use schema::SCHEMA_VERSION;
pub use store::{MAX_BATCH_WRITES, SqliteStore};

// Other stores of this crate (thread log, progress, remembering) are declared below, one module each.
pub mod progress;
pub mod remembering_store;
pub mod thread_log;
