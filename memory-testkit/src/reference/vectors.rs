//! The in-memory vector store.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use memory_core::StoreFault;
use memory_core::document::MemoryKey;
use memory_core::error::MemoryError;
use memory_core::ports::ChangeSequence;
use memory_core::vectors::{
    ChunkVectorRef, GraphSnapshot, ProfileDigest, ReplaceOutcome, SourceGeneration, StoredSource,
    StoredSourceState, UnindexedReason, UnindexedSource, VectorLoadLimits, VectorStore,
    check_chunk_vectors_request,
};

/// Sources are kept in (namespace, document id) text order, as the SQL stores load them.
type Slot = (String, String);

fn slot(key: &MemoryKey) -> Slot {
    (
        key.namespace.as_str().to_owned(),
        key.id.as_str().to_owned(),
    )
}

#[derive(Debug, Default)]
struct Profile {
    sources: BTreeMap<Slot, StoredSource>,
    position: ChangeSequence,
    unindexed: BTreeMap<Slot, UnindexedSource>,
    graph: Option<GraphSnapshot>,
}

/// Chunk vectors, positions, unindexed sources and graphs in process memory. Clones share one state.
#[derive(Debug, Clone, Default)]
pub struct InMemoryVectorStore {
    profiles: Arc<Mutex<HashMap<ProfileDigest, Profile>>>,
}

impl InMemoryVectorStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ProfileDigest, Profile>> {
        // Every operation checks before it changes anything, so a panic cannot leave half a change.
        self.profiles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether the stored state fences `new` out (see [`VectorStore::replace_source`]).
fn fenced(stored: &StoredSource, new: &StoredSource) -> bool {
    match (&stored.state, &new.state) {
        (StoredSourceState::Withdrawn, _) => true,
        _ if new.generation > stored.generation => false,
        _ if new.generation < stored.generation => true,
        (_, StoredSourceState::Withdrawn) => false,
        (
            StoredSourceState::Indexed {
                revision: stored, ..
            },
            StoredSourceState::Indexed { revision: new, .. },
        ) => stored != new,
    }
}

impl VectorStore for InMemoryVectorStore {
    async fn load_sources(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
    ) -> Result<Vec<StoredSource>, MemoryError> {
        let profiles = self.lock();
        let Some(stored) = profiles.get(profile) else {
            return Ok(Vec::new());
        };
        if stored.sources.len() > limits.max_sources {
            return Err(MemoryError::TooLarge {
                limit: "stored sources",
                max: limits.max_sources as u64,
                actual: stored.sources.len() as u64,
            });
        }
        let mut chunks = 0usize;
        for source in stored.sources.values() {
            if let StoredSourceState::Indexed { chunks: stored, .. } = &source.state {
                chunks += stored.len();
                if chunks > limits.max_chunks {
                    return Err(MemoryError::TooLarge {
                        limit: "stored chunks",
                        max: limits.max_chunks as u64,
                        actual: chunks as u64,
                    });
                }
                if stored
                    .iter()
                    .any(|chunk| chunk.vector.len() != limits.dimensions)
                {
                    return Err(MemoryError::Store(StoreFault::Corrupt {
                        what: "stored vector of another length than the profile's dimensions"
                            .to_owned(),
                    }));
                }
            }
        }
        Ok(stored.sources.values().cloned().collect())
    }

    async fn replace_source(
        &self,
        profile: &ProfileDigest,
        source: &StoredSource,
    ) -> Result<ReplaceOutcome, MemoryError> {
        let mut profiles = self.lock();
        let stored = profiles.entry(*profile).or_default();
        let slot = slot(&source.key);
        if let Some(current) = stored.sources.get(&slot)
            && fenced(current, source)
        {
            return Ok(ReplaceOutcome::Stale {
                current: current.generation,
                withdrawn: current.state == StoredSourceState::Withdrawn,
            });
        }
        stored.unindexed.remove(&slot);
        stored.sources.insert(slot, source.clone());
        Ok(ReplaceOutcome::Replaced)
    }

    async fn indexed_position(
        &self,
        profile: &ProfileDigest,
    ) -> Result<ChangeSequence, MemoryError> {
        Ok(self
            .lock()
            .get(profile)
            .map_or(ChangeSequence::ZERO, |stored| stored.position))
    }

    async fn set_indexed_position(
        &self,
        profile: &ProfileDigest,
        position: ChangeSequence,
    ) -> Result<(), MemoryError> {
        let mut profiles = self.lock();
        let stored = profiles.entry(*profile).or_default();
        stored.position = stored.position.max(position);
        Ok(())
    }

    async fn record_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
        reason: UnindexedReason,
    ) -> Result<(), MemoryError> {
        let mut profiles = self.lock();
        let stored = profiles.entry(*profile).or_default();
        let slot = slot(key);
        if stored
            .unindexed
            .get(&slot)
            .is_some_and(|recorded| recorded.generation > generation)
        {
            return Ok(());
        }
        stored.unindexed.insert(
            slot,
            UnindexedSource {
                key: key.clone(),
                generation,
                reason,
            },
        );
        Ok(())
    }

    async fn clear_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> Result<(), MemoryError> {
        let mut profiles = self.lock();
        if let Some(stored) = profiles.get_mut(profile) {
            let slot = slot(key);
            if stored
                .unindexed
                .get(&slot)
                .is_some_and(|recorded| recorded.generation <= generation)
            {
                stored.unindexed.remove(&slot);
            }
        }
        Ok(())
    }

    async fn unindexed_sources(
        &self,
        profile: &ProfileDigest,
        reason: UnindexedReason,
        after: Option<&MemoryKey>,
        limit: usize,
    ) -> Result<Vec<UnindexedSource>, MemoryError> {
        let profiles = self.lock();
        let Some(stored) = profiles.get(profile) else {
            return Ok(Vec::new());
        };
        let after = after.map(slot);
        Ok(stored
            .unindexed
            .iter()
            .filter(|(slot, recorded)| {
                recorded.reason == reason && after.as_ref().is_none_or(|after| *slot > after)
            })
            .take(limit)
            .map(|(_, recorded)| recorded.clone())
            .collect())
    }

    async fn stored_chunks(&self, profile: &ProfileDigest) -> Result<u64, MemoryError> {
        let profiles = self.lock();
        Ok(profiles.get(profile).map_or(0, |stored| {
            stored
                .sources
                .values()
                .map(|source| match &source.state {
                    StoredSourceState::Indexed { chunks, .. } => chunks.len() as u64,
                    StoredSourceState::Withdrawn => 0,
                })
                .sum()
        }))
    }

    async fn unindexed_counts(
        &self,
        profile: &ProfileDigest,
    ) -> Result<Vec<(UnindexedReason, u64)>, MemoryError> {
        let profiles = self.lock();
        let mut counts: BTreeMap<UnindexedReason, u64> = BTreeMap::new();
        if let Some(stored) = profiles.get(profile) {
            for recorded in stored.unindexed.values() {
                *counts.entry(recorded.reason).or_default() += 1;
            }
        }
        Ok(counts.into_iter().collect())
    }

    async fn save_graph(
        &self,
        profile: &ProfileDigest,
        graph: &GraphSnapshot,
    ) -> Result<(), MemoryError> {
        self.lock().entry(*profile).or_default().graph = Some(graph.clone());
        Ok(())
    }

    async fn load_chunk_vectors(
        &self,
        profile: &ProfileDigest,
        chunks: &[ChunkVectorRef],
        dimensions: usize,
    ) -> Result<Vec<Option<Vec<f32>>>, MemoryError> {
        check_chunk_vectors_request(chunks)?;
        let profiles = self.lock();
        let sources = profiles.get(profile).map(|stored| &stored.sources);
        let mut vectors = Vec::with_capacity(chunks.len());
        for wanted in chunks {
            let found = sources
                .and_then(|sources| sources.get(&slot(&wanted.key)))
                .and_then(|source| match &source.state {
                    StoredSourceState::Indexed { revision, chunks }
                        if *revision == wanted.revision =>
                    {
                        chunks.iter().find(|chunk| chunk.ordinal == wanted.ordinal)
                    }
                    _ => None,
                });
            if let Some(chunk) = found
                && chunk.vector.len() != dimensions
            {
                return Err(MemoryError::Store(StoreFault::Corrupt {
                    what: format!(
                        "stored vector has {} dimensions, expected {dimensions}",
                        chunk.vector.len()
                    ),
                }));
            }
            vectors.push(found.map(|chunk| chunk.vector.clone()));
        }
        Ok(vectors)
    }

    async fn load_graph(
        &self,
        profile: &ProfileDigest,
        max_bytes: usize,
    ) -> Result<Option<GraphSnapshot>, MemoryError> {
        let profiles = self.lock();
        let Some(graph) = profiles
            .get(profile)
            .and_then(|stored| stored.graph.as_ref())
        else {
            return Ok(None);
        };
        if graph.bytes.len() > max_bytes {
            return Err(MemoryError::TooLarge {
                limit: "stored graph bytes",
                max: max_bytes as u64,
                actual: graph.bytes.len() as u64,
            });
        }
        Ok(Some(graph.clone()))
    }
}
