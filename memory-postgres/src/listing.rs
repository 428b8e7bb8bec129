//! The listing read ([`MemoryLister`]): a namespace's current documents, newest first.
//!
//! Walks `memory_revisions` backwards by its unique (indexed) sequence and keeps the revisions that are
//! still their document's current, not withdrawn row, so a page costs about its own size when one
//! namespace fills the store.

use deadpool_postgres::{GenericClient, Object};
use memory_core::StoreFault;
use memory_core::listing::{ListCursor, ListPage, MemoryLister, check_list_limit, page_of};
use memory_core::{MemoryError, NamespaceAddress};

use crate::error::{Attempt, Fail};
use crate::retry::Idempotent;
use crate::rows::decode_document;
use crate::store::PostgresStore;

const LIST_SQL: &str = "\
SELECT d.namespace, d.id, d.revision, d.withdrawn, d.locator, d.body, r.sequence \
FROM memory_revisions r JOIN memory_documents d \
  ON d.namespace = r.namespace AND d.id = r.id AND d.revision = r.revision \
WHERE r.namespace = $1 AND r.sequence < $2 AND NOT d.withdrawn \
ORDER BY r.sequence DESC LIMIT $3";

struct ListDocuments {
    namespace: String,
    before: i64,
    fetch: i64,
}

impl ListDocuments {
    async fn run(&self, client: Object) -> Attempt<Vec<(u64, memory_core::MemoryDocument)>> {
        let statement = client.prepare_cached(LIST_SQL).await?;
        let rows = client
            .query(&statement, &[&self.namespace, &self.before, &self.fetch])
            .await?;
        let mut documents = Vec::with_capacity(rows.len());
        for row in rows {
            let sequence: i64 = row.try_get(6)?;
            let position = u64::try_from(sequence).map_err(|_| {
                Fail::Model(MemoryError::Store(StoreFault::Corrupt {
                    what: "a revision has a negative sequence".to_owned(),
                }))
            })?;
            documents.push((position, decode_document(&row).map_err(Fail::Model)?));
        }
        Ok(documents)
    }
}

impl MemoryLister for PostgresStore {
    async fn list(
        &self,
        namespace: &NamespaceAddress,
        after: Option<ListCursor>,
        limit: usize,
    ) -> Result<ListPage, MemoryError> {
        check_list_limit(limit)?;
        let work = ListDocuments {
            namespace: namespace.as_str().to_owned(),
            before: after.map_or(i64::MAX, |cursor| {
                i64::try_from(cursor.position()).unwrap_or(i64::MAX)
            }),
            // One more row than asked says whether another page follows.
            fetch: i64::try_from(limit + 1).unwrap_or(i64::MAX),
        };
        let rows = self
            .handle
            .call("list documents", Idempotent::Yes, work, |work, client| {
                Box::pin(work.run(client))
            })
            .await?;
        Ok(page_of(rows, limit))
    }
}
