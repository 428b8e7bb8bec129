//! A small pool of read-only WAL connections, so concurrent reads (a recall, the indexer's feed, a
//! get) each run on a connection of their own instead of queueing behind one mutex.
//!
//! Connections are opened lazily, up to the pool's size: a one-shot command that reads once opens one,
//! a server under concurrent recalls opens as many as it has readers in flight. In WAL mode readers
//! never block the writer or each other; each call sees every transaction committed before it started.
//! When every connection is busy a caller waits for one to come back (a read is one short statement or
//! snapshot), never opening more than the configured size.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use memory_core::MemoryError;
use rusqlite::{Connection, OpenFlags};

use crate::error::sqlite;

/// Default number of read connections of a store or reader.
pub const DEFAULT_READ_CONNECTIONS: usize = 4;
/// Most read connections a pool may be configured with.
pub const MAX_READ_CONNECTIONS: usize = 64;

struct Slots {
    idle: Vec<Connection>,
    /// Connections opened and not closed, idle or checked out.
    opened: usize,
}

/// Read-only connections to one file.
pub(crate) struct ReadPool {
    path: PathBuf,
    busy_timeout: Duration,
    size: usize,
    slots: Mutex<Slots>,
    returned: Condvar,
}

impl ReadPool {
    /// A pool of at most `size` (clamped to 1..=[`MAX_READ_CONNECTIONS`]) connections to `path`, with
    /// `first` already open (it checked the schema).
    pub(crate) fn new(path: &Path, busy_timeout: Duration, size: usize, first: Connection) -> Self {
        Self {
            path: path.to_owned(),
            busy_timeout,
            size: size.clamp(1, MAX_READ_CONNECTIONS),
            slots: Mutex::new(Slots {
                idle: vec![first],
                opened: 1,
            }),
            returned: Condvar::new(),
        }
    }

    /// Opens one read-only, `query_only` connection to `path`.
    pub(crate) fn open_connection(
        path: &Path,
        busy_timeout: Duration,
    ) -> Result<Connection, MemoryError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let connection = Connection::open_with_flags(path, flags).map_err(sqlite("open reader"))?;
        connection
            .busy_timeout(busy_timeout)
            .map_err(sqlite("open reader"))?;
        connection
            .pragma_update(None, "query_only", true)
            .map_err(sqlite("open reader"))?;
        Ok(connection)
    }

    fn slots(&self) -> MutexGuard<'_, Slots> {
        // The slots hold only idle connections and a count; a panic cannot leave them half-changed.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle connection, a newly opened one while the pool is below its size, or the next one
    /// returned.
    pub(crate) fn get(&self) -> Result<PooledConnection<'_>, MemoryError> {
        let mut slots = self.slots();
        loop {
            if let Some(connection) = slots.idle.pop() {
                return Ok(PooledConnection {
                    pool: self,
                    connection: Some(connection),
                });
            }
            if slots.opened < self.size {
                slots.opened += 1;
                drop(slots);
                return match Self::open_connection(&self.path, self.busy_timeout) {
                    Ok(connection) => Ok(PooledConnection {
                        pool: self,
                        connection: Some(connection),
                    }),
                    Err(error) => {
                        self.slots().opened -= 1;
                        self.returned.notify_one();
                        Err(error)
                    }
                };
            }
            slots = self
                .returned
                .wait(slots)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn put_back(&self, connection: Connection) {
        self.slots().idle.push(connection);
        self.returned.notify_one();
    }

    /// Connections currently open (tests).
    #[cfg(test)]
    fn opened(&self) -> usize {
        self.slots().opened
    }
}

/// A connection checked out of a [`ReadPool`]; it goes back when dropped.
pub(crate) struct PooledConnection<'a> {
    pool: &'a ReadPool,
    connection: Option<Connection>,
}

impl Deref for PooledConnection<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        // Present from checkout until drop.
        self.connection.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl DerefMut for PooledConnection<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.connection.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for PooledConnection<'_> {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            self.pool.put_back(connection);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};

    use super::*;

    fn pool(size: usize) -> (tempfile::TempDir, ReadPool) {
        let directory = tempfile::tempdir().expect("temporary directory");
        let path = directory.path().join("pool.sqlite");
        Connection::open(&path)
            .and_then(|connection| {
                connection.pragma_update(None, "journal_mode", "WAL")?;
                connection.execute_batch("CREATE TABLE t (x INTEGER)")
            })
            .expect("database");
        let first = ReadPool::open_connection(&path, Duration::from_secs(1)).expect("first");
        let pool = ReadPool::new(&path, Duration::from_secs(1), size, first);
        (directory, pool)
    }

    #[test]
    fn concurrent_readers_get_connections_of_their_own_up_to_the_size() {
        let (_directory, pool) = pool(3);
        let pool = Arc::new(pool);
        let holding = Arc::new(Barrier::new(4));
        let release = Arc::new(Barrier::new(4));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (pool, holding, release) = (
                    Arc::clone(&pool),
                    Arc::clone(&holding),
                    Arc::clone(&release),
                );
                std::thread::spawn(move || {
                    let connection = pool.get().expect("connection");
                    holding.wait();
                    release.wait();
                    drop(connection);
                })
            })
            .collect();
        holding.wait();
        // Three readers hold three distinct connections at once: none waited for another.
        assert_eq!(pool.opened(), 3);
        release.wait();
        for thread in threads {
            thread.join().expect("reader thread");
        }
        let _again = pool.get().expect("a returned connection is reused");
        assert_eq!(pool.opened(), 3, "no connection past the size is opened");
    }

    #[test]
    fn a_caller_past_the_size_waits_for_a_returned_connection() {
        let (_directory, pool) = pool(1);
        let pool = Arc::new(pool);
        let held = pool.get().expect("the only connection");
        let waiter = {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || {
                let connection = pool.get().expect("connection after the wait");
                connection
                    .query_row("SELECT count(*) FROM t", [], |row| row.get::<_, i64>(0))
                    .expect("query")
            })
        };
        drop(held);
        assert_eq!(waiter.join().expect("waiter"), 0);
        assert_eq!(pool.opened(), 1);
    }
}
