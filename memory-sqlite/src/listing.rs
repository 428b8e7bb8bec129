//! The listing read ([`MemoryLister`]): a namespace's current documents, newest first.
//!
//! The walk goes backwards through `memory_revisions` by its (unique, indexed) sequence and keeps the
//! revisions that are still their document's current, not withdrawn row, so a page of a store holding
//! one namespace costs about its own size; revisions of other namespaces and replaced revisions are
//! skipped on the way.

use memory_core::StoreFault;
use memory_core::listing::{ListCursor, ListPage, MemoryLister, check_list_limit, page_of};
use memory_core::{MemoryError, NamespaceAddress};

use crate::error::sqlite;
use crate::reader::SqliteReader;
use crate::rows::DocumentRow;
use crate::store::SqliteStore;

const LIST_SQL: &str = "\
SELECT d.namespace, d.id, d.revision, d.withdrawn, d.locator, d.body, r.sequence \
FROM memory_revisions r CROSS JOIN memory_documents d \
WHERE r.sequence < ?2 AND r.namespace = ?1 \
  AND d.namespace = r.namespace AND d.id = r.id AND d.revision = r.revision AND d.withdrawn = 0 \
ORDER BY r.sequence DESC LIMIT ?3";

impl SqliteReader {
    /// [`MemoryLister::list`], on the calling thread.
    pub fn list_blocking(
        &self,
        namespace: &NamespaceAddress,
        after: Option<ListCursor>,
        limit: usize,
    ) -> Result<ListPage, MemoryError> {
        check_list_limit(limit)?;
        let before = after.map_or(i64::MAX, |cursor| {
            i64::try_from(cursor.position()).unwrap_or(i64::MAX)
        });
        // One more row than asked says whether another page follows.
        let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
        let rows = self.with_connection("list documents", |connection| {
            let mut statement = connection
                .prepare_cached(LIST_SQL)
                .map_err(sqlite("list documents"))?;
            let rows = statement
                .query_map(
                    rusqlite::params![namespace.as_str(), before, fetch],
                    |row| {
                        Ok((
                            row.get::<_, i64>(6)?,
                            DocumentRow {
                                namespace: row.get(0)?,
                                id: row.get(1)?,
                                revision: row.get(2)?,
                                withdrawn: row.get(3)?,
                                locator: row.get(4)?,
                                body: row.get(5)?,
                            },
                        ))
                    },
                )
                .map_err(sqlite("list documents"))?;
            let mut documents = Vec::new();
            for row in rows {
                let (sequence, row) = row.map_err(sqlite("list documents"))?;
                let position = u64::try_from(sequence).map_err(|_| {
                    MemoryError::Store(StoreFault::Corrupt {
                        what: "a revision has a negative sequence".to_owned(),
                    })
                })?;
                documents.push((position, row.decode()?));
            }
            Ok(documents)
        })?;
        Ok(page_of(rows, limit))
    }
}

impl MemoryLister for SqliteReader {
    async fn list(
        &self,
        namespace: &NamespaceAddress,
        after: Option<ListCursor>,
        limit: usize,
    ) -> Result<ListPage, MemoryError> {
        self.list_blocking(namespace, after, limit)
    }
}

impl MemoryLister for SqliteStore {
    async fn list(
        &self,
        namespace: &NamespaceAddress,
        after: Option<ListCursor>,
        limit: usize,
    ) -> Result<ListPage, MemoryError> {
        self.reader().list_blocking(namespace, after, limit)
    }
}
