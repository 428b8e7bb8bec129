//! Queries: embed the text, search one index (HNSW only while its graph is ready; the exact index
//! otherwise, and the answer says which), then revalidate every candidate against the current
//! document (SPEC §4). An index holding compact vectors answers with candidates scored by their
//! codes; their f32 vectors are then read from the store, for those candidates only, and rescored
//! ([`crate::index::rescore`]) before anything else sees them.

use std::collections::HashMap;
use std::time::Duration;

use memory_core::revalidate::{Current, read_current, visible};
use memory_core::vectors::{ChunkVectorRef, VectorStore};
use memory_core::{MemoryAccess, MemoryDocument, MemoryKey, MemoryReader, NamespaceAddress};

use super::{EmbeddingUsage, SemanticHit, SemanticIndex, SemanticQueryResult, excerpt_digest};
use crate::embed::Embedder;
use crate::error::SemanticError;
use crate::index::{ChunkMeta, IndexKind, SearchHit, SearchRequest, SourceFilter, VectorIndex};
use crate::limits::QueryLimits;

impl<E: Embedder, S: VectorStore + 'static> SemanticIndex<E, S> {
    /// Answers `query` for `access` within `limits`; see the module docs.
    pub async fn query<R: MemoryReader>(
        &self,
        reader: &R,
        access: &MemoryAccess,
        query: &str,
        limits: QueryLimits,
    ) -> Result<SemanticQueryResult, SemanticError> {
        check_query_limits(query, &limits)?;
        within_deadline(limits.timeout_ms, async {
            let candidates = self
                .candidates_within(query, Some(&access.namespace), &limits)
                .await?;
            let revalidated = revalidate(reader, access, candidates.hits, &limits).await?;
            tracing::debug!(
                scanned = candidates.scanned_chunks,
                hits = revalidated.hits.len(),
                stale = revalidated.excluded_stale,
                unauthorized = revalidated.excluded_unauthorized,
                "semantic query answered"
            );
            Ok(SemanticQueryResult {
                hits: revalidated.hits,
                scanned_chunks: candidates.scanned_chunks,
                excluded_stale: revalidated.excluded_stale,
                excluded_unauthorized: revalidated.excluded_unauthorized,
                embedding: candidates.embedding,
                answered_by: candidates.answered_by,
            })
        })
        .await
    }

    /// Embeds `query` and searches the chunks of `namespace`, WITHOUT revalidation: the candidates
    /// may be stale or withdrawn, or in a scope the caller may not read, so they must go through a
    /// revalidation (as [`SemanticIndex::query`] and the recall sources of [`crate::recall`] do)
    /// before anything reaches a model. The namespace filter applies while searching, so
    /// `max_candidates` counts only that namespace's chunks. The same limits apply as for a query,
    /// except the byte budgets of revalidation.
    pub async fn search_candidates(
        &self,
        query: &str,
        namespace: &NamespaceAddress,
        limits: QueryLimits,
    ) -> Result<SemanticCandidates, SemanticError> {
        check_query_limits(query, &limits)?;
        within_deadline(
            limits.timeout_ms,
            self.candidates_within(query, Some(namespace), &limits),
        )
        .await
    }

    /// As [`SemanticIndex::search_candidates`], over the chunks of every namespace: for tools and
    /// benchmarks that measure the whole index. Its candidates belong to any tenant, so the long name
    /// is on purpose: nothing that answers a caller should use it.
    pub async fn search_candidates_in_every_namespace(
        &self,
        query: &str,
        limits: QueryLimits,
    ) -> Result<SemanticCandidates, SemanticError> {
        check_query_limits(query, &limits)?;
        within_deadline(
            limits.timeout_ms,
            self.candidates_within(query, None, &limits),
        )
        .await
    }

    async fn candidates_within(
        &self,
        query: &str,
        namespace: Option<&NamespaceAddress>,
        limits: &QueryLimits,
    ) -> Result<SemanticCandidates, SemanticError> {
        let embedding = EmbeddingUsage {
            texts: 1,
            bytes: query.len(),
        };
        let vector = self
            .embed_query(vec![query.to_owned()])
            .await?
            .pop()
            .ok_or(SemanticError::Task { what: "embedding" })?;
        let request = SearchRequest {
            limit: limits.max_candidates,
            min_score: limits.min_score,
            max_scanned_chunks: limits.max_scanned_chunks,
        };
        let filter = namespace.map_or(SourceFilter::All, SourceFilter::Namespace);
        let (outcome, answered_by) = {
            let state = self.read_state();
            match (limits.index, state.graph.current()) {
                (IndexKind::Hnsw, Some(hnsw)) => {
                    (hnsw.search_in(&vector, request, filter)?, IndexKind::Hnsw)
                }
                // No graph yet: the exact index answers, under the same scan budget.
                (IndexKind::Hnsw, None) | (IndexKind::Exact, _) => (
                    state.exact.search_in(&vector, request, filter)?,
                    IndexKind::Exact,
                ),
            }
        };
        let outcome = if outcome.rescore {
            // After the state lock is released: the read is the store's, and no refresh waits on it.
            let wanted: Vec<ChunkVectorRef> = outcome
                .hits
                .iter()
                .map(|hit| ChunkVectorRef {
                    key: hit.chunk.source.key.clone(),
                    revision: hit.chunk.source.revision.clone(),
                    ordinal: hit.chunk.ordinal,
                })
                .collect();
            let (digest, dimensions) = (self.digest, self.profile.dimensions);
            let exact = super::vector_call(&self.store, move |store| async move {
                store.load_chunk_vectors(&digest, &wanted, dimensions).await
            })
            .await?;
            crate::index::rescore(&vector, outcome, &request, exact)?
        } else {
            outcome
        };
        Ok(SemanticCandidates {
            hits: outcome.hits,
            scanned_chunks: outcome.scanned_chunks,
            embedding,
            answered_by,
        })
    }
}

/// Unrevalidated search candidates; see [`SemanticIndex::search_candidates`].
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticCandidates {
    /// Chunk hits in rank order, at most `max_candidates`, each scoring at least `min_score`.
    pub hits: Vec<SearchHit>,
    /// Chunks the index scored.
    pub scanned_chunks: usize,
    /// Embedder work for the query text.
    pub embedding: EmbeddingUsage,
    /// The index that answered: `Exact` for an HNSW search while the graph is not ready.
    pub answered_by: IndexKind,
}

/// Reads `keys` through memory-core's one checked read ([`memory_core::revalidate::read_current`]).
pub(super) async fn read_documents<R: MemoryReader>(
    reader: &R,
    keys: &[MemoryKey],
) -> Result<Vec<Option<MemoryDocument>>, SemanticError> {
    Ok(read_current(reader, keys).await?)
}

fn check_query_limits(query: &str, limits: &QueryLimits) -> Result<(), SemanticError> {
    limits.validate()?;
    if query.len() > limits.max_query_bytes {
        return Err(SemanticError::TooLarge {
            limit: "max_query_bytes",
            max: limits.max_query_bytes as u64,
            actual: query.len() as u64,
        });
    }
    Ok(())
}

/// Runs `work` under the query deadline.
pub(crate) async fn within_deadline<T>(
    timeout_ms: u64,
    work: impl std::future::Future<Output = Result<T, SemanticError>>,
) -> Result<T, SemanticError> {
    tokio::time::timeout(Duration::from_millis(timeout_ms), work)
        .await
        .map_err(|_| SemanticError::Deadline { timeout_ms })?
}

/// The chunk's exact text in `document` (current and visible to the caller: memory-core's
/// [`visible`] decides that), or `None` when the document is at another revision or no longer holds
/// the embedded excerpt at the embedded byte range.
pub(crate) fn current_excerpt<'d>(
    document: &'d MemoryDocument,
    chunk: &ChunkMeta,
) -> Option<&'d str> {
    if document.key != chunk.source.key || document.revision != chunk.source.revision {
        return None;
    }
    document
        .content
        .text
        .get(chunk.start..chunk.end)
        .filter(|excerpt| excerpt_digest(excerpt) == chunk.excerpt_digest)
}

struct Revalidated {
    hits: Vec<SemanticHit>,
    excluded_stale: usize,
    excluded_unauthorized: usize,
}

/// Rereads each candidate's source once, drops what is stale or unauthorized, keeps rank order and
/// enforces the byte budgets.
async fn revalidate<R: MemoryReader>(
    reader: &R,
    access: &MemoryAccess,
    candidates: Vec<SearchHit>,
    limits: &QueryLimits,
) -> Result<Revalidated, SemanticError> {
    let mut keys: Vec<MemoryKey> = Vec::new();
    let mut slot_of: HashMap<MemoryKey, usize> = HashMap::new();
    for candidate in &candidates {
        let key = &candidate.chunk.source.key;
        if !slot_of.contains_key(key) {
            slot_of.insert(key.clone(), keys.len());
            keys.push(key.clone());
        }
    }
    let documents = read_documents(reader, &keys).await?;
    let mut result = Revalidated {
        hits: Vec::new(),
        excluded_stale: 0,
        excluded_unauthorized: 0,
    };
    let mut source_bytes = 0usize;
    let mut charged = vec![false; keys.len()];
    let mut output_bytes = 2usize;
    for candidate in candidates {
        let chunk = &candidate.chunk;
        let slot = slot_of[&chunk.source.key];
        let document = match visible(documents[slot].as_ref(), access) {
            Current::Visible(document) => document,
            Current::Missing => {
                result.excluded_stale += 1;
                continue;
            }
            Current::Hidden => {
                result.excluded_unauthorized += 1;
                continue;
            }
        };
        let Some(excerpt) = current_excerpt(document, chunk) else {
            result.excluded_stale += 1;
            continue;
        };
        if !charged[slot] {
            charged[slot] = true;
            source_bytes = source_bytes.saturating_add(
                serde_json::to_vec(document)
                    .map(|json| json.len())
                    .unwrap_or(usize::MAX),
            );
            if source_bytes > limits.max_source_bytes {
                return Err(SemanticError::Budget {
                    limit: "max_source_bytes",
                    max: limits.max_source_bytes as u64,
                    actual: source_bytes as u64,
                });
            }
        }
        let hit = SemanticHit {
            key: document.key.clone(),
            revision: document.revision.clone(),
            generation: chunk.source.generation,
            ordinal: chunk.ordinal,
            start: chunk.start,
            end: chunk.end,
            score: candidate.score,
            excerpt: excerpt.to_owned(),
            locator: document.locator.clone(),
            attributions: document.content.attributions.clone(),
        };
        output_bytes = output_bytes.saturating_add(
            serde_json::to_vec(&hit)
                .map(|json| json.len() + 1)
                .unwrap_or(usize::MAX),
        );
        if output_bytes > limits.max_output_bytes {
            return Err(SemanticError::Budget {
                limit: "max_output_bytes",
                max: limits.max_output_bytes as u64,
                actual: output_bytes as u64,
            });
        }
        result.hits.push(hit);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use memory_core::InMemoryStore;
    use memory_core::vectors::SourceGeneration;
    use memory_sqlite::vectors::SqliteVectorStore;

    use crate::engine::test_support::{access, key, profile, put};
    use crate::engine::{HnswStartup, SemanticIndex, SemanticIndexConfig};
    use crate::error::EmbedError;
    use crate::index::IndexKind;
    use crate::limits::QueryLimits;
    use crate::{DeterministicEmbedder, Embedder};

    /// Bulk calls wait at a gate the test opens; query calls never do.
    struct GatedBulk {
        inner: DeterministicEmbedder,
        entered: Mutex<mpsc::Sender<()>>,
        gate: Mutex<mpsc::Receiver<()>>,
    }

    impl Embedder for GatedBulk {
        fn dimensions(&self) -> usize {
            self.inner.dimensions()
        }

        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            let _ = self.entered.lock().unwrap().send(());
            let _ = self.gate.lock().unwrap().recv();
            self.inner.embed(texts)
        }

        fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.inner.embed(texts)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[allow(
        clippy::disallowed_methods,
        reason = "The test waits for the embedder's signal off the runtime; no store call is involved"
    )]
    async fn a_query_embeds_on_the_query_path_while_an_indexing_batch_is_embedding() {
        let directory = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap());
        let profile = profile();
        let (entered, on_entered) = mpsc::channel();
        let (open, gate) = mpsc::channel();
        let embedder = GatedBulk {
            inner: DeterministicEmbedder::new(16),
            entered: Mutex::new(entered),
            gate: Mutex::new(gate),
        };
        let config = SemanticIndexConfig::new(profile).with_hnsw_startup(HnswStartup::OnDemand);
        let index = Arc::new(
            SemanticIndex::open(config, Arc::new(embedder), store)
                .await
                .unwrap(),
        );
        let documents = Arc::new(InMemoryStore::default());
        for (n, id) in ["first", "second"].into_iter().enumerate() {
            put(&documents, id, &format!("the {id} garden note"), n).await;
        }
        let refresh = |id: &'static str, generation: u64| {
            let (index, documents) = (Arc::clone(&index), Arc::clone(&documents));
            tokio::spawn(async move {
                index
                    .refresh(&*documents, &key(id), SourceGeneration::new(generation))
                    .await
            })
        };
        let _ = open.send(());
        refresh("first", 1).await.unwrap().unwrap();
        on_entered.recv().unwrap();
        // An indexing batch is now inside the embedder, held at its gate.
        let held = refresh("second", 2);
        tokio::task::spawn_blocking(move || on_entered.recv_timeout(Duration::from_secs(60)))
            .await
            .unwrap()
            .expect("the second refresh reached the embedder");
        let access = access();
        let limits = QueryLimits::new(1_024, 5, 10_000, -1.0, 10_000, IndexKind::Exact);
        let answer = index
            .query(&*documents, &access, "garden note", limits)
            .await
            .expect("a query answers while the batch is held");
        assert_eq!(answer.hits.len(), 1, "the held document is not indexed yet");
        assert!(!held.is_finished(), "the batch is still held");
        let _ = open.send(());
        held.await.unwrap().unwrap();
    }
}
