//! Opening the vector store's connection (its pragmas, and the file's schema through
//! `crate::schema`) and taking its lock.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use memory_core::MemoryError;
use rusqlite::Connection;

use super::SqliteVectorStore;
use crate::error::memory_error as storage;
use crate::schema;

/// The most of the file the vector store's connection maps (SQLite caps it at its compile-time
/// maximum); address space, not memory.
const MMAP_BYTES: i64 = 1 << 34;

/// How long a connection waits for another writer before reporting busy.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl SqliteVectorStore {
    /// Opens the vector store in the SQLite file at `path` (creating or migrating the file's schema,
    /// every store's tables, see [`crate::SCHEMA_VERSION`]), in WAL mode with
    /// `synchronous = FULL` so an acknowledged replacement survives a process crash.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, MemoryError> {
        let connection = Connection::open(path).map_err(storage("open vector store"))?;
        connection
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(storage("open vector store"))?;
        connection
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(storage("open vector store"))?;
        connection
            .pragma_update(None, "synchronous", "FULL")
            .map_err(storage("open vector store"))?;
        // A load reads every stored vector: through a memory map, SQLite reads its pages in place
        // instead of copying each into its page cache with a system call (at 100,000 chunks the scan
        // takes about half the time). The store never shrinks the file (no VACUUM), the hazard of
        // a mapped file.
        connection
            .pragma_update(None, "mmap_size", MMAP_BYTES)
            .map_err(storage("open vector store"))?;
        let mut connection = connection;
        schema::migrate(&mut connection).map_err(|error| MemoryError::from(error.into_fault()))?;
        Ok(Self {
            connection: Mutex::new(connection),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Connection> {
        // Every statement runs inside a transaction that rolls back on drop, so a panic while holding the
        // lock leaves no half-written state behind.
        self.connection
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
