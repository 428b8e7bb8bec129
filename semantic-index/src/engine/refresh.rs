//! Refresh and withdrawal (SPEC §4): read, chunk, check every limit before the embedder is called,
//! embed off the async workers, then under one apply lock re-check fencing, persist the source's new
//! chunks in one store call and swap them into both indexes.

use std::sync::Arc;

use memory_core::vectors::{
    ReplaceOutcome, SourceGeneration, StoredChunk, StoredSource, StoredSourceState, VectorStore,
};
use memory_core::{MemoryDocument, MemoryKey, MemoryReader, Revision};

use super::query::read_documents;
use super::state::{IndexState, SourceRecord, identity_bytes};
use super::{
    EmbeddingUsage, RefreshOutcome, RefreshResults, SemanticIndex, excerpt_digest, vector_call,
};
use crate::chunk::chunk_text;
use crate::embed::{Embedder, checked_embeddings};
use crate::error::SemanticError;
use crate::index::{ChunkMeta, SourceVersion, VectorIndex};

/// [`Embedder::embed`] or [`Embedder::embed_query`].
type EmbedCall<E> = fn(&E, &[&str]) -> Result<Vec<Vec<f32>>, crate::error::EmbedError>;

/// A source read, chunked and checked, waiting for its vectors.
struct PreparedSource {
    /// Its position in the caller's list.
    slot: usize,
    key: MemoryKey,
    generation: SourceGeneration,
    document: MemoryDocument,
    chunks: Vec<crate::chunk::Chunk>,
    /// What the embedder is given, one per chunk; callers move it out (`std::mem::take`) to embed, so
    /// its size is kept apart in `usage`.
    texts: Vec<String>,
    usage: EmbeddingUsage,
}

/// Whether a change at `generation` may apply over `record`.
enum Admission {
    Proceed,
    Replay,
}

fn admit(
    record: Option<&SourceRecord>,
    generation: SourceGeneration,
    revision: Option<&Revision>,
) -> Result<Admission, SemanticError> {
    let Some(record) = record else {
        return Ok(Admission::Proceed);
    };
    if record.revision.is_none() {
        return Err(SemanticError::Withdrawn);
    }
    if generation < record.generation {
        return Err(SemanticError::Fenced {
            current: record.generation,
            attempted: generation,
        });
    }
    if generation == record.generation {
        return match revision {
            Some(revision) if record.revision.as_ref() == Some(revision) => Ok(Admission::Replay),
            Some(_) => Err(SemanticError::Divergent { generation }),
            None => Ok(Admission::Proceed),
        };
    }
    Ok(Admission::Proceed)
}

impl<E: Embedder, S: VectorStore + 'static> SemanticIndex<E, S> {
    /// Checks that recording `key` keeps the source bounds, without changing anything.
    fn check_source_bounds(
        &self,
        state: &IndexState,
        key: &MemoryKey,
    ) -> Result<(), SemanticError> {
        if state.sources.contains_key(key) {
            return Ok(());
        }
        if state.sources.len() + 1 > self.bounds.max_sources {
            return Err(SemanticError::TooLarge {
                limit: "max_sources",
                max: self.bounds.max_sources as u64,
                actual: (state.sources.len() + 1) as u64,
            });
        }
        let identity = state.identity_bytes + identity_bytes(key);
        if identity > self.bounds.max_source_identity_bytes {
            return Err(SemanticError::TooLarge {
                limit: "max_source_identity_bytes",
                max: self.bounds.max_source_identity_bytes as u64,
                actual: identity as u64,
            });
        }
        Ok(())
    }

    fn record(&self, state: &mut IndexState, key: &MemoryKey, record: SourceRecord) {
        if state.sources.insert(key.clone(), record).is_none() {
            state.identity_bytes += identity_bytes(key);
        }
    }

    /// Embeds `texts` on a blocking thread and checks the vectors.
    pub(super) async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, SemanticError> {
        self.embed_with(texts, Embedder::embed).await
    }

    /// Embeds query `texts` ([`Embedder::embed_query`]: never behind an indexing batch).
    pub(super) async fn embed_query(
        &self,
        texts: Vec<String>,
    ) -> Result<Vec<Vec<f32>>, SemanticError> {
        self.embed_with(texts, Embedder::embed_query).await
    }

    async fn embed_with(
        &self,
        texts: Vec<String>,
        call: EmbedCall<E>,
    ) -> Result<Vec<Vec<f32>>, SemanticError> {
        let embedder = self.embedder.clone();
        let count = texts.len();
        #[allow(
            clippy::disallowed_methods,
            reason = "CPU-bound embedding, no store call: the embedder's own thread, not the store boundary"
        )]
        let vectors = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            call(&embedder, &refs)
        })
        .await
        .map_err(|_| SemanticError::Task { what: "embedding" })??;
        Ok(checked_embeddings(vectors, count, self.profile.dimensions)?)
    }

    /// Re-embeds `key` from `reader` at `generation` and replaces its chunks atomically.
    pub async fn refresh<R: MemoryReader>(
        &self,
        reader: &R,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> Result<RefreshOutcome, SemanticError> {
        {
            let state = self.read_state();
            admit(state.sources.get(key), generation, None)?;
            self.check_source_bounds(&state, key)?;
        }
        let Some(document) = reader.read(key).await? else {
            return self.withdraw(key, generation).await;
        };
        let Some(mut prepared) = self.prepare_source(0, key, generation, document)? else {
            return Ok(RefreshOutcome::Unchanged);
        };
        let texts = std::mem::take(&mut prepared.texts);
        let vectors = if texts.is_empty() {
            Vec::new()
        } else {
            self.embed(texts).await?
        };
        self.apply_prepared(prepared, vectors).await
    }

    /// Refreshes several distinct sources, each as [`Self::refresh`] would, but with one grouped read
    /// of all of them and embedder calls shared between sources: consecutive sources are embedded
    /// together while their chunks fit `max_batch_texts` (a source is never split across calls, so one
    /// with more chunks than that gets a call of its own).
    ///
    /// Every source keeps refresh's guarantees: fencing is checked before the read and again under the
    /// apply lock, and its chunks are replaced atomically (the store first, then both indexes), so a
    /// source is either fully at its new revision or still at its previous chunks.
    ///
    /// `Ok` holds one answer per source, in order: what settles that source alone (`Fenced`,
    /// `Divergent`, `Withdrawn`, a size limit, a failed store write...). `Err` means the call stopped
    /// (the grouped read or an embedder call failed): sources of earlier embedder calls stay applied,
    /// the others keep their previous chunks, and retrying the same list is safe (applied sources
    /// replay as [`RefreshOutcome::Unchanged`]). The same key twice, or `max_batch_texts == 0`, is
    /// `InvalidInput`.
    pub async fn refresh_many<R: MemoryReader>(
        &self,
        reader: &R,
        sources: &[(MemoryKey, SourceGeneration)],
        max_batch_texts: usize,
    ) -> Result<RefreshResults, SemanticError> {
        if max_batch_texts == 0 {
            return Err(SemanticError::invalid(
                "max_batch_texts",
                "must be positive",
            ));
        }
        let mut distinct = std::collections::HashSet::with_capacity(sources.len());
        if !sources.iter().all(|(key, _)| distinct.insert(key)) {
            return Err(SemanticError::invalid(
                "sources",
                "a key may appear only once per batched refresh",
            ));
        }
        let mut results: Vec<Option<Result<RefreshOutcome, SemanticError>>> =
            (0..sources.len()).map(|_| None).collect();
        let mut to_read: Vec<usize> = Vec::with_capacity(sources.len());
        for (slot, (key, generation)) in sources.iter().enumerate() {
            let state = self.read_state();
            match admit(state.sources.get(key), *generation, None)
                .and_then(|_| self.check_source_bounds(&state, key))
            {
                Ok(()) => to_read.push(slot),
                Err(error) => results[slot] = Some(Err(error)),
            }
        }
        let keys: Vec<MemoryKey> = to_read
            .iter()
            .map(|&slot| sources[slot].0.clone())
            .collect();
        let documents = read_documents(reader, &keys).await?;
        let mut prepared = Vec::with_capacity(to_read.len());
        for (slot, document) in to_read.into_iter().zip(documents) {
            let (key, generation) = &sources[slot];
            let Some(document) = document else {
                results[slot] = Some(self.withdraw(key, *generation).await);
                continue;
            };
            match self.prepare_source(slot, key, *generation, document) {
                Ok(Some(source)) => prepared.push(source),
                Ok(None) => results[slot] = Some(Ok(RefreshOutcome::Unchanged)),
                Err(error) => results[slot] = Some(Err(error)),
            }
        }
        let mut pending = prepared.into_iter().peekable();
        while pending.peek().is_some() {
            let mut batch = Vec::new();
            let mut batch_texts = 0usize;
            while let Some(next) = pending.peek() {
                if !batch.is_empty() && batch_texts + next.texts.len() > max_batch_texts {
                    break;
                }
                batch_texts += next.texts.len();
                if let Some(source) = pending.next() {
                    batch.push(source);
                }
            }
            let texts: Vec<String> = batch
                .iter_mut()
                .flat_map(|source| std::mem::take(&mut source.texts))
                .collect();
            let mut vectors = if texts.is_empty() {
                Vec::new()
            } else {
                self.embed(texts).await?
            }
            .into_iter();
            for source in batch {
                let own: Vec<Vec<f32>> = vectors.by_ref().take(source.usage.texts).collect();
                let slot = source.slot;
                results[slot] = Some(self.apply_prepared(source, own).await);
            }
        }
        Ok(results
            .into_iter()
            .map(|result| {
                result.unwrap_or(Err(SemanticError::Task {
                    what: "batched refresh",
                }))
            })
            .collect())
    }

    /// The half of [`Self::refresh`] before the embedder call: checks, bounds and chunks a read source;
    /// `None` when it replays what is indexed. `slot` is the caller's position for it (`refresh_many`).
    fn prepare_source(
        &self,
        slot: usize,
        key: &MemoryKey,
        generation: SourceGeneration,
        document: MemoryDocument,
    ) -> Result<Option<PreparedSource>, SemanticError> {
        {
            let state = self.read_state();
            if let Admission::Replay =
                admit(state.sources.get(key), generation, Some(&document.revision))?
            {
                return Ok(None);
            }
        }
        let text = &document.content.text;
        if text.len() > self.refresh_limits.max_source_bytes {
            return Err(SemanticError::TooLarge {
                limit: "max_source_bytes",
                max: self.refresh_limits.max_source_bytes as u64,
                actual: text.len() as u64,
            });
        }
        let chunks = chunk_text(text, self.profile.chunking);
        if chunks.len() > self.refresh_limits.max_chunks_per_source {
            return Err(SemanticError::TooLarge {
                limit: "max_chunks_per_source",
                max: self.refresh_limits.max_chunks_per_source as u64,
                actual: chunks.len() as u64,
            });
        }
        self.check_chunk_capacity(key, chunks.len())?;
        let texts: Vec<String> = chunks
            .iter()
            .map(|chunk| {
                self.profile
                    .embedded_text(&document.content, chunk.text(text))
            })
            .collect();
        let usage = EmbeddingUsage {
            texts: texts.len(),
            bytes: texts.iter().map(String::len).sum(),
        };
        Ok(Some(PreparedSource {
            slot,
            key: key.clone(),
            generation,
            document,
            chunks,
            texts,
            usage,
        }))
    }

    /// The half of [`Self::refresh`] after the embedder call: replaces one prepared source's chunks
    /// with `vectors` (one per chunk), fenced again under the apply lock.
    async fn apply_prepared(
        &self,
        source: PreparedSource,
        vectors: Vec<Vec<f32>>,
    ) -> Result<RefreshOutcome, SemanticError> {
        let PreparedSource {
            key,
            generation,
            document,
            chunks,
            usage,
            ..
        } = source;
        if vectors.len() != chunks.len() {
            return Err(SemanticError::Embed(crate::error::EmbedError::Count {
                expected: chunks.len(),
                actual: vectors.len(),
            }));
        }
        let apply = self.apply.lock().await;
        {
            let state = self.read_state();
            if let Admission::Replay = admit(
                state.sources.get(&key),
                generation,
                Some(&document.revision),
            )? {
                return Ok(RefreshOutcome::Unchanged);
            }
            self.check_source_bounds(&state, &key)?;
        }
        self.check_chunk_capacity(&key, chunks.len())?;
        let text = &document.content.text;
        let version = Arc::new(SourceVersion {
            key: key.clone(),
            revision: document.revision.clone(),
            generation,
        });
        let mut stored_chunks = Vec::with_capacity(chunks.len());
        let mut rows = Vec::with_capacity(chunks.len());
        for (chunk, vector) in chunks.iter().zip(vectors) {
            let digest = excerpt_digest(chunk.text(text));
            stored_chunks.push(StoredChunk {
                ordinal: chunk.ordinal,
                start: chunk.start as u64,
                end: chunk.end as u64,
                excerpt_digest: digest,
                vector: vector.clone(),
            });
            // One copy of the vector for both indexes (the store gets its own above).
            rows.push((
                ChunkMeta {
                    source: version.clone(),
                    ordinal: chunk.ordinal,
                    start: chunk.start,
                    end: chunk.end,
                    excerpt_digest: digest,
                },
                Arc::new(vector),
            ));
        }
        let stored = StoredSource {
            key: key.clone(),
            generation,
            state: StoredSourceState::Indexed {
                revision: document.revision.clone(),
                chunks: stored_chunks,
            },
        };
        let digest = self.digest;
        let replaced = vector_call(&self.store, move |store| async move {
            store.replace_source(&digest, &stored).await
        })
        .await?;
        if let ReplaceOutcome::Stale { current, withdrawn } = replaced {
            // Another writer of the same store got further; this process's view is behind it.
            tracing::debug!(
                ?current,
                withdrawn,
                "stale semantic refresh refused by the store"
            );
            return Err(if withdrawn {
                SemanticError::Withdrawn
            } else {
                SemanticError::Fenced {
                    current,
                    attempted: generation,
                }
            });
        }
        let wants_rebuild = {
            let _no_save = self.save_lock.lock().await;
            let mut state = self.write_state();
            state.exact.replace_shared(&key, rows.clone())?;
            let wants_rebuild = state.graph.replace_source(&key, rows)?;
            self.record(
                &mut state,
                &key,
                SourceRecord {
                    generation,
                    revision: Some(document.revision.clone()),
                },
            );
            wants_rebuild
        };
        self.compact_after_change(&apply).await;
        if wants_rebuild {
            self.start_rebuild();
        }
        tracing::debug!(chunks = chunks.len(), "semantic source refreshed");
        Ok(RefreshOutcome::Indexed {
            revision: document.revision,
            chunks: chunks.len(),
            embedding: usage,
        })
    }

    /// Compacts the exact index if the change just applied passed its tombstone fraction. The
    /// change itself is applied and durable: a failed compaction is logged and retried after the
    /// next change, never reported as the change's failure.
    async fn compact_after_change(&self, apply: &tokio::sync::MutexGuard<'_, ()>) {
        if let Err(error) = self.compact_exact_if_due(apply).await {
            tracing::warn!(%error, "exact index compaction failed; retried after the next change");
        }
    }

    fn check_chunk_capacity(
        &self,
        key: &MemoryKey,
        new_chunks: usize,
    ) -> Result<(), SemanticError> {
        let state = self.read_state();
        // The replaced revision's chunks leave the index, so only the net growth counts.
        let old = state.exact.chunks_of(key);
        let live_after = state.exact.live_chunks() - old + new_chunks;
        if live_after > self.bounds.max_chunks {
            return Err(SemanticError::TooLarge {
                limit: "max_chunks",
                max: self.bounds.max_chunks as u64,
                actual: live_after as u64,
            });
        }
        Ok(())
    }

    /// Withdraws `key` at `generation`: terminal, and replaying it charges nothing twice.
    pub async fn withdraw(
        &self,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> Result<RefreshOutcome, SemanticError> {
        let apply = self.apply.lock().await;
        {
            let state = self.read_state();
            match state.sources.get(key) {
                Some(record) if record.revision.is_none() => {
                    return Ok(RefreshOutcome::AlreadyWithdrawn);
                }
                Some(record) if generation < record.generation => {
                    return Err(SemanticError::Fenced {
                        current: record.generation,
                        attempted: generation,
                    });
                }
                _ => {}
            }
            self.check_source_bounds(&state, key)?;
        }
        let stored = StoredSource {
            key: key.clone(),
            generation,
            state: StoredSourceState::Withdrawn,
        };
        let digest = self.digest;
        let outcome = vector_call(&self.store, move |store| async move {
            store.replace_source(&digest, &stored).await
        })
        .await?;
        // Another writer's withdrawal is terminal: catch up with it below.
        if let ReplaceOutcome::Stale {
            current,
            withdrawn: false,
        } = outcome
        {
            return Err(SemanticError::Fenced {
                current,
                attempted: generation,
            });
        }
        let wants_rebuild = {
            let _no_save = self.save_lock.lock().await;
            let mut state = self.write_state();
            state.exact.remove_source(key);
            let wants_rebuild = state.graph.remove_source(key);
            self.record(
                &mut state,
                key,
                SourceRecord {
                    generation,
                    revision: None,
                },
            );
            wants_rebuild
        };
        self.compact_after_change(&apply).await;
        if wants_rebuild {
            self.start_rebuild();
        }
        tracing::debug!("semantic source withdrawn");
        Ok(RefreshOutcome::Withdrawn)
    }
}
