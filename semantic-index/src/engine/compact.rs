//! Compaction of the exact index off the query path.
//!
//! Replacing or withdrawing a source only tombstones its rows. Once tombstones pass
//! [`crate::index::EXACT_COMPACT_TOMBSTONE_FRACTION`], the change that crossed it compacts before it
//! lets go of the apply lock: it shares the current rows (a reference count, under a read lock),
//! copies the live ones on a blocking thread with no lock held, and takes the write lock only to
//! swap the copy in. Queries keep reading the old rows until then; refreshes wait for the apply
//! lock, so the shared rows cannot change (nor be copied on write) while the copy is made.

use memory_core::vectors::VectorStore;

use super::SemanticIndex;
use crate::embed::Embedder;
use crate::error::SemanticError;

impl<E: Embedder, S: VectorStore + 'static> SemanticIndex<E, S> {
    /// Compacts the exact index if its tombstones passed the fraction. The caller holds the apply
    /// lock (`_apply`, a witness: without it a refresh could change the rows mid-copy).
    pub(super) async fn compact_exact_if_due(
        &self,
        _apply: &tokio::sync::MutexGuard<'_, ()>,
    ) -> Result<(), SemanticError> {
        let shared = {
            let state = self.read_state();
            if !state.exact.needs_compaction() {
                return Ok(());
            }
            state.exact.shared_rows()
        };
        let hook = self
            .compaction_hook
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        #[allow(
            clippy::disallowed_methods,
            reason = "CPU-bound copying of the rows, no store call: off the async workers on a thread of its own"
        )]
        let compacted = tokio::task::spawn_blocking(move || {
            if let Some(hook) = hook {
                hook();
            }
            // `shared` is dropped here, so after the swap the old rows are freed.
            shared.compacted_copy()
        })
        .await
        .map_err(|_| SemanticError::Task {
            what: "exact compaction",
        })?;
        let rows = compacted.rows();
        self.write_state().exact.install_compacted(compacted);
        tracing::debug!(rows, "exact index compacted");
        Ok(())
    }

    /// Holds every later compaction at `hook` (called on the blocking thread, before the copy).
    #[cfg(test)]
    pub(crate) fn set_compaction_hook(&self, hook: super::BuildHook) {
        *self
            .compaction_hook
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(hook);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::{Arc, Mutex, mpsc};
    use std::time::Duration;

    use memory_core::InMemoryStore;
    use memory_core::vectors::SourceGeneration;
    use memory_sqlite::vectors::SqliteVectorStore;

    use crate::DeterministicEmbedder;
    use crate::engine::test_support::{access, key, profile, put};
    use crate::engine::{HnswStartup, SemanticIndex, SemanticIndexConfig};
    use crate::index::IndexKind;
    use crate::limits::QueryLimits;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[allow(
        clippy::disallowed_methods,
        reason = "The test waits for the index's signals off the runtime; no store call is involved"
    )]
    async fn a_query_is_answered_while_the_exact_index_is_compacting() {
        let directory = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap());
        let profile = profile();
        let config = SemanticIndexConfig::new(profile).with_hnsw_startup(HnswStartup::OnDemand);
        let index = Arc::new(
            SemanticIndex::open(config, Arc::new(DeterministicEmbedder::new(16)), store)
                .await
                .unwrap(),
        );
        let documents = Arc::new(InMemoryStore::default());
        let mut sources = Vec::new();
        for n in 0..8usize {
            let id = format!("d{n}");
            put(&documents, &id, &format!("garden note number {n}"), n).await;
            sources.push((key(&id), SourceGeneration::new(1)));
        }
        index.refresh_many(&*documents, &sources, 64).await.unwrap();
        let (started, on_started) = mpsc::channel::<()>();
        let (release, on_release) = mpsc::channel::<()>();
        let on_release = Arc::new(Mutex::new(on_release));
        index.set_compaction_hook(Arc::new(move || {
            let _ = started.send(());
            let _ = on_release.lock().unwrap().recv();
        }));
        // Two of eight rows tombstoned is a quarter, not past it; the third withdrawal compacts.
        for n in 0..2usize {
            index
                .withdraw(&key(&format!("d{n}")), SourceGeneration::new(2))
                .await
                .unwrap();
        }
        assert_eq!(index.stats().tombstones, 2, "no compaction yet");
        let compacting = {
            let index = Arc::clone(&index);
            tokio::spawn(async move { index.withdraw(&key("d2"), SourceGeneration::new(2)).await })
        };
        tokio::task::spawn_blocking(move || on_started.recv_timeout(Duration::from_secs(60)))
            .await
            .unwrap()
            .expect("the third withdrawal started a compaction");
        // Held mid-compaction: a query reads the rows as they were, and answers.
        let access = access();
        let limits = QueryLimits::new(1_024, 10, 10_000, -1.0, 10_000, IndexKind::Exact);
        let (answered, on_answer) = mpsc::channel();
        {
            let (index, documents) = (Arc::clone(&index), Arc::clone(&documents));
            tokio::spawn(async move {
                let answer = index
                    .query(&*documents, &access, "garden note", limits)
                    .await;
                let _ = answered.send(answer);
            });
        }
        // Waited for off the runtime: a query blocked on the index's lock would block a worker,
        // and the runtime's own timers with it.
        let answer =
            tokio::task::spawn_blocking(move || on_answer.recv_timeout(Duration::from_secs(10)))
                .await
                .unwrap()
                .expect("a query does not wait for a compaction")
                .unwrap();
        assert_eq!(answer.hits.len(), 5, "withdrawn sources are not recalled");
        assert_eq!(index.stats().tombstones, 3, "the old rows still answer");
        assert!(!compacting.is_finished());
        release.send(()).unwrap();
        compacting.await.unwrap().unwrap();
        let stats = index.stats();
        assert_eq!(
            (stats.tombstones, stats.live_chunks),
            (0, 5),
            "the compacted rows were swapped in: {stats:?}"
        );
    }
}
