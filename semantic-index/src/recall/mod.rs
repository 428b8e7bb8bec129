//! Recall sources over a [`SemanticIndex`] for [`memory_core::recall()`]: the embedding source
//! ([`SemanticRecall`]) and hybrid recall ([`HybridRecall`]), next to memory-core's
//! [`memory_core::recall::LexicalRecall`].
//!
//! - The embedding source searches the index (the same embedding, search and limits as
//!   [`SemanticIndex::query`]) and revalidates the chunk candidates into excerpt passages: the chunk's
//!   exact current text, the source revision, and a passage id from the chunk id
//!   ([`chunk_passage_id`]; a chunk that is the whole text takes the document id instead).
//! - Hybrid recall asks the lexical search and the embedding index, fuses their document rankings by
//!   [`fuse_rankings`] (normalized score fusion by default; an embedding ranking ranks and scores
//!   each document by its best chunk), lets each fused document borrow from its written-order
//!   neighbours' fused scores ([`borrow_from_neighbours`], one store read of the neighbours:
//!   [`LexicalSearch::written_neighbours`]), keeps
//!   [`HybridParams::max_documents`] documents and revalidates them ONCE: one grouped read of all the
//!   kept documents. A document the lexical search found becomes its whole current text when it fits
//!   one chunk, else its chunks that match the query best ([`excerpt_passages`]: the lexical match may
//!   lie anywhere in it); a document only the embedding found becomes its surviving chunks, best first.
//!
//! Revalidation (SPEC §2.4 and §4 together), one grouped read per lookup:
//! - candidates whose key lies outside the access's namespace are dropped without a read; every other
//!   distinct key is read once, all in one `read_many` call (bounded by `max_candidates` and
//!   [`HybridParams::max_documents`]);
//! - missing, withdrawn and access-revoked documents are dropped;
//! - a lexical document becomes the whole current document, or its best-matching chunks when it is
//!   longer than one chunk; a chunk survives only if its document is
//!   still at the embedded revision and holds the exact excerpt at the embedded byte range (a stale
//!   chunk never lends its score to new text);
//! - attribution, metadata, times, locator and revision come from the current document, and every
//!   passage's authority is the access's namespace;
//! - the aggregate compact JSON of the passages is bounded by `max_input_bytes`
//!   ([`RevalidationLimits`]).
//!
//! Every store, lexical and vector call of a lookup runs on tokio's blocking pool
//! ([`on_blocking_pool`]): memory-sqlite's ports answer synchronously inside their futures, so run
//! inline they would block the task, keep the two sides of a hybrid lookup from overlapping, and keep
//! the deadline timer from firing until they return. On the blocking pool the lexical search and the
//! query embedding + vector search of a hybrid lookup run at the same time, and `timeout_ms` bounds the
//! lookup: when it passes, the lookup answers [`RecallError::Deadline`] at once and the abandoned
//! blocking call finishes (and is discarded) on its own. This is why the sources hold their index and
//! store by [`Arc`]: a blocking task may outlive the lookup that started it.
//!
//! Each passage keeps the score its ranking gave it ([`ScoredLookup`], [`SemanticRecall::lookup_scored`],
//! [`HybridRecall::lookup_scored`]): the chunk's cosine similarity with the query for the embedding
//! source, the document's fused score for hybrid recall (all of a document's passages
//! share it). [`RecallSource`](memory_core::recall::RecallSource)s carry no scores; callers that report them use `lookup_scored`.
//!
//! Which index ranked the embedding candidates (`Exact` for an HNSW lookup while no graph is ready)
//! is kept too: [`AnsweredLookup`], from [`SemanticRecall::lookup_answered`] and
//! [`HybridRecall::lookup_answered`].
//!
//! Failures keep their type as [`RecallError`]s,
//! except embedder failures, which answer [`MemoryLookup::Unavailable`] so that an optional embedding
//! source degrades instead of failing the recall (an essential one still fails it).

mod excerpts;
mod fusion;
mod passages;
mod rerank;
mod sources;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use memory_core::recall::ties::{activity_time, near, newer_first_among};
use memory_core::vectors::VectorStore;
use memory_core::{
    DocumentId, LexicalSearch, MemoryAccess, MemoryError, MemoryKey, MemoryLookup, MemoryPassage,
    MemoryReader, NamespaceAddress, RecallError, RevalidationLimits,
};

pub use excerpts::{
    ExcerptRules, FOLD_CHARS, MAX_EXCERPTS_PER_DOCUMENT, excerpt_passages, excerpt_texts,
    matching_chunks,
};
pub use fusion::{
    DEFAULT_CONTEXT_REACH, DEFAULT_CONTEXT_WEIGHT, DEFAULT_EMBEDDING_CANDIDATES,
    DEFAULT_EMBEDDING_WEIGHT, DEFAULT_FUSION, DEFAULT_LEXICAL_CANDIDATES, DEFAULT_LEXICAL_WEIGHT,
    DEFAULT_MAX_DOCUMENTS, DEFAULT_RERANK, DEFAULT_RRF_K, Fused, FusionMethod, HybridParams,
    MAX_HYBRID_DOCUMENTS, MAX_RRF_PARAMETER, borrow_from_neighbours, fuse_rankings,
};
pub use passages::chunk_passage_id;
pub use rerank::{
    CROSS_ENCODER_DEPTH, DEFAULT_CROSS_RERANK_WEIGHTS, DEFAULT_RERANK_WEIGHTS, MAX_RERANK_WEIGHT,
    RerankQuery, RerankSignals, RerankWeights, cross_encoder_choice, cross_encoder_text,
    cross_rank_signals, order_by_rerank, passage_cross_encoder_text,
};
pub use sources::{HybridRecall, SemanticRecall};

use crate::cross_encoder::CrossEncoder;
use crate::embed::Embedder;
use crate::engine::SemanticIndex;
use crate::error::SemanticError;
use crate::index::{IndexKind, SearchHit};
use crate::limits::QueryLimits;
use passages::{Candidate, ScoredCandidate, revalidate_candidates};

/// What the recall sources answer when the embedder fails: words safe to log.
pub const EMBEDDER_UNAVAILABLE: &str = "embedding model unavailable";

/// Maps a semantic failure to a recall answer: embedder failures become
/// [`MemoryLookup::Unavailable`], everything else a [`RecallError`] of the same kind (a withdrawn
/// source stays `withdrawn`, a fenced or divergent refresh `conflict`). The match names every variant,
/// so a new one needs its own decision here.
pub fn lookup_failure(error: SemanticError) -> Result<MemoryLookup, RecallError> {
    Err(match error {
        SemanticError::Embed(_) | SemanticError::Task { .. } => {
            return Ok(MemoryLookup::Unavailable {
                reason: EMBEDDER_UNAVAILABLE.to_owned(),
            });
        }
        SemanticError::Store(error) => RecallError::Source(error),
        SemanticError::Budget { limit, max, actual } => RecallError::Budget { limit, max, actual },
        SemanticError::Deadline { timeout_ms } => RecallError::Deadline { timeout_ms },
        SemanticError::TooLarge { limit, max, actual } => {
            RecallError::Source(MemoryError::TooLarge { limit, max, actual })
        }
        SemanticError::InvalidInput { field, reason } => {
            RecallError::Source(MemoryError::InvalidInput { field, reason })
        }
        SemanticError::Withdrawn => RecallError::Source(MemoryError::Withdrawn),
        SemanticError::Fenced { .. } | SemanticError::Divergent { .. } => {
            RecallError::Source(MemoryError::Conflict { current: None })
        }
    })
}

fn scored_failure(error: SemanticError) -> Result<ScoredLookup, RecallError> {
    lookup_failure(error).map(ScoredLookup::from_unscored)
}

/// One revalidated passage and the score its ranking gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredPassage {
    /// The passage, built from the current document.
    pub passage: MemoryPassage,
    /// Cosine similarity with the query (embedding source) or the document's fused score (hybrid
    /// recall, see [`fuse_rankings`]); higher is better.
    pub score: f64,
    /// Hybrid recall: what each ranking gave the passage's document before fusion.
    pub rankings: Option<RankingScores>,
}

/// What the two rankings of a hybrid recall gave a document, in their own scales: a person reading
/// why a passage was recalled sees which side found it and how strongly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankingScores {
    /// Its lexical (BM25) score; `None` when the lexical ranking did not hold it.
    pub lexical: Option<f64>,
    /// Its best chunk's cosine similarity with the query; `None` when the embedding ranking did
    /// not hold it.
    pub embedding: Option<f64>,
}

impl ScoredPassage {
    /// A passage with its score and no ranking scores (every mode but hybrid).
    pub fn new(passage: MemoryPassage, score: f64) -> Self {
        Self {
            passage,
            score,
            rankings: None,
        }
    }
}

/// A lookup's answer with each passage's score; [`ScoredLookup::into_lookup`] drops the scores.
#[derive(Debug, Clone, PartialEq)]
pub enum ScoredLookup {
    /// Matching passages, best first.
    Found(Vec<ScoredPassage>),
    /// Nothing matched.
    NoMatch,
    /// The source could not answer (the embedder failed); words safe to log.
    Unavailable {
        /// Why.
        reason: String,
    },
}

impl ScoredLookup {
    fn from_passages(passages: Vec<(MemoryPassage, f64)>) -> Self {
        Self::ranked(
            passages
                .into_iter()
                .map(|(passage, score)| ScoredPassage::new(passage, score))
                .collect(),
        )
    }

    /// The answer of ranked passages (best first): `NoMatch` when there are none, else `Found` with
    /// memory-core's tie rule applied ([`memory_core::recall::ties`]: among near-equal scores the
    /// newer passage first). Every ranked mode answers through here.
    pub fn ranked(passages: Vec<ScoredPassage>) -> Self {
        Self::ranked_with(passages, |head, item| near(head.score, item.score))
    }

    /// [`ScoredLookup::ranked`] with the caller's test of near-equal relevance (see
    /// [`memory_core::recall::ties::newer_first_among`]).
    pub fn ranked_with(
        mut passages: Vec<ScoredPassage>,
        ties: impl Fn(&ScoredPassage, &ScoredPassage) -> bool,
    ) -> Self {
        if passages.is_empty() {
            return Self::NoMatch;
        }
        newer_first_among(&mut passages, ties, |scored| {
            activity_time(&scored.passage.content)
        });
        Self::Found(passages)
    }

    /// An answer without passages (the only kinds [`lookup_failure`] gives).
    fn from_unscored(lookup: MemoryLookup) -> Self {
        match lookup {
            MemoryLookup::Unavailable { reason } => Self::Unavailable { reason },
            // Not produced by these sources; an unscored answer carries nothing to score.
            _ => Self::NoMatch,
        }
    }

    /// The answer as a recall source gives it.
    pub fn into_lookup(self) -> MemoryLookup {
        match self {
            Self::Found(passages) => MemoryLookup::Found {
                passages: passages.into_iter().map(|scored| scored.passage).collect(),
            },
            Self::NoMatch => MemoryLookup::NoMatch,
            Self::Unavailable { reason } => MemoryLookup::Unavailable { reason },
        }
    }
}

/// A lookup's answer and the index that ranked its embedding candidates: `Exact` for an HNSW
/// lookup answered while no graph was ready, `None` when no index answered (the embedder failed).
/// What a recall result's top-level `answered_by` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct AnsweredLookup {
    /// The answer.
    pub lookup: ScoredLookup,
    /// The index that ranked the embedding candidates.
    pub answered_by: Option<IndexKind>,
}

impl AnsweredLookup {
    fn unranked(lookup: ScoredLookup) -> Self {
        Self {
            lookup,
            answered_by: None,
        }
    }
}

use memory_core::blocking::on_blocking_pool;

/// Embeds `query` and searches `index` on the blocking pool, among `namespace`'s chunks only, so
/// other tenants' chunks never take up the candidate limit.
async fn embedding_candidates<E, S>(
    index: &Arc<SemanticIndex<E, S>>,
    namespace: &NamespaceAddress,
    query: &str,
    limits: QueryLimits,
) -> Result<Result<crate::engine::SemanticCandidates, SemanticError>, RecallError>
where
    E: Embedder,
    S: VectorStore + 'static,
{
    let index = Arc::clone(index);
    let namespace = namespace.clone();
    let query = query.to_owned();
    on_blocking_pool(async move { index.search_candidates(&query, &namespace, limits).await }).await
}

/// Searches `index` for `query` and revalidates the chunk candidates against `reader` as `access`:
/// `Found` (in the index's rank order, each passage scored by its chunk's cosine similarity) or
/// `NoMatch`. The search and the grouped read run on the blocking pool; the whole lookup runs under
/// `limits.timeout_ms`.
pub async fn semantic_lookup<E, S, R>(
    index: &Arc<SemanticIndex<E, S>>,
    reader: &Arc<R>,
    access: &MemoryAccess,
    query: &str,
    limits: QueryLimits,
    revalidation: &RevalidationLimits,
) -> Result<ScoredLookup, RecallError>
where
    E: Embedder,
    S: VectorStore + 'static,
    R: MemoryReader + 'static,
{
    semantic_lookup_answered(index, reader, access, query, limits, revalidation)
        .await
        .map(|answered| answered.lookup)
}

/// [`semantic_lookup`], saying which index ranked the candidates.
pub async fn semantic_lookup_answered<E, S, R>(
    index: &Arc<SemanticIndex<E, S>>,
    reader: &Arc<R>,
    access: &MemoryAccess,
    query: &str,
    limits: QueryLimits,
    revalidation: &RevalidationLimits,
) -> Result<AnsweredLookup, RecallError>
where
    E: Embedder,
    S: VectorStore + 'static,
    R: MemoryReader + 'static,
{
    let work = async {
        let candidates = match embedding_candidates(index, &access.namespace, query, limits).await?
        {
            Ok(candidates) => candidates,
            Err(error) => return scored_failure(error).map(AnsweredLookup::unranked),
        };
        let answered_by = candidates.answered_by;
        let candidates: Vec<ScoredCandidate> = candidates
            .hits
            .into_iter()
            .map(|hit| ScoredCandidate {
                score: f64::from(hit.score),
                candidate: Candidate::Chunk(hit.chunk),
            })
            .collect();
        let (passages, excluded) = revalidate_candidates(
            reader,
            access,
            index.digest(),
            &candidates,
            revalidation,
            None,
        )
        .await?;
        tracing::debug!(
            candidates = candidates.len(),
            passages = passages.len(),
            stale = excluded.stale,
            unauthorized = excluded.unauthorized,
            "semantic recall answered"
        );
        Ok(AnsweredLookup {
            lookup: ScoredLookup::from_passages(passages),
            answered_by: Some(answered_by),
        })
    };
    deadline(limits.timeout_ms, work).await
}

async fn deadline<T>(
    timeout_ms: u64,
    work: impl Future<Output = Result<T, RecallError>>,
) -> Result<T, RecallError> {
    tokio::time::timeout(std::time::Duration::from_millis(timeout_ms), work)
        .await
        .map_err(|_| RecallError::Deadline { timeout_ms })?
}

/// An embedding search's documents: their ranking (each scored by its best chunk's similarity) and
/// each document's chunks, best first.
type DocumentsByBestChunk = (
    Vec<(MemoryKey, f64)>,
    std::collections::HashMap<MemoryKey, Vec<Candidate>>,
);

/// The documents of `hits` in the order of their best chunk, each scored by that chunk's similarity,
/// with each document's chunks best first.
fn documents_by_best_chunk(hits: Vec<SearchHit>, access: &MemoryAccess) -> DocumentsByBestChunk {
    let mut order = Vec::new();
    let mut chunks: std::collections::HashMap<MemoryKey, Vec<Candidate>> =
        std::collections::HashMap::new();
    for hit in hits {
        let key = &hit.chunk.source.key;
        // Another namespace's chunks could never survive revalidation; they must not take a rank.
        if key.namespace != access.namespace {
            continue;
        }
        if !chunks.contains_key(key) {
            order.push((key.clone(), f64::from(hit.score)));
        }
        chunks
            .entry(key.clone())
            .or_default()
            .push(Candidate::Chunk(hit.chunk));
    }
    (order, chunks)
}

/// Hybrid recall of `query` for `access`: lexical hits from `store` and embedding candidates from
/// `index`, fused by `params` ([`fuse_rankings`]), revalidated with one grouped read of `store`. `Found` (in
/// fused order, each passage scored by its document's fused score) or `NoMatch`. The lexical search
/// and the query embedding + vector search run concurrently on the blocking pool; the whole lookup
/// runs under `limits.timeout_ms`.
pub async fn hybrid_lookup<E, S, R>(
    index: &Arc<SemanticIndex<E, S>>,
    store: &Arc<R>,
    access: &MemoryAccess,
    query: &str,
    limits: QueryLimits,
    params: &HybridParams,
    revalidation: &RevalidationLimits,
) -> Result<ScoredLookup, RecallError>
where
    E: Embedder,
    S: VectorStore + 'static,
    R: LexicalSearch + MemoryReader + 'static,
{
    hybrid_lookup_answered(
        index,
        store,
        access,
        query,
        limits,
        params,
        revalidation,
        None,
    )
    .await
    .map(|answered| answered.lookup)
}

/// [`hybrid_lookup`], saying which index ranked the embedding candidates; with `cross`, the rerank
/// stage (when `params.rerank`) has that cross-encoder read its first documents' revalidated
/// passages and orders by `params.cross_rerank_weights` (see `rerank`). A cross-encoder that fails answers
/// `Unavailable`, as a failed embedder does: the recall is never silently ranked without it.
#[allow(clippy::too_many_arguments)]
pub async fn hybrid_lookup_answered<E, S, R>(
    index: &Arc<SemanticIndex<E, S>>,
    store: &Arc<R>,
    access: &MemoryAccess,
    query: &str,
    limits: QueryLimits,
    params: &HybridParams,
    revalidation: &RevalidationLimits,
    cross: Option<Arc<dyn CrossEncoder>>,
) -> Result<AnsweredLookup, RecallError>
where
    E: Embedder,
    S: VectorStore + 'static,
    R: LexicalSearch + MemoryReader + 'static,
{
    if let Err(error) = params.validate() {
        return scored_failure(error).map(AnsweredLookup::unranked);
    }
    let work = async {
        let lexical = {
            let store = Arc::clone(store);
            let access = access.clone();
            let query = query.to_owned();
            let wanted = params.lexical_candidates;
            on_blocking_pool(async move { store.search(&access, &query, wanted).await })
        };
        let embedding_limits = QueryLimits {
            max_candidates: limits.max_candidates.max(params.embedding_candidates),
            ..limits
        };
        let (lexical, embedding) = tokio::join!(
            lexical,
            embedding_candidates(index, &access.namespace, query, embedding_limits)
        );
        let lexical = lexical??;
        let embedding = match embedding? {
            Ok(candidates) => candidates,
            Err(error) => return scored_failure(error).map(AnsweredLookup::unranked),
        };
        let answered_by = embedding.answered_by;
        let mut lexical_keys: Vec<(MemoryKey, f64)> = Vec::with_capacity(lexical.len());
        for hit in lexical {
            // Another namespace's hit could never survive revalidation; it must not take a rank
            // (nor set the lexical scores' range).
            if hit.key.namespace == access.namespace {
                lexical_keys.push((hit.key, hit.score));
            }
        }
        let (embedding_keys, mut chunks) = documents_by_best_chunk(embedding.hits, access);
        let mut fused = fuse_rankings(params, &lexical_keys, &embedding_keys);
        if params.uses_context() && !fused.is_empty() {
            let neighbours =
                written_neighbours(store, access, &fused, params.context_reach).await??;
            borrow_from_neighbours(&mut fused, &neighbours, params.context_weight);
        }
        fused.truncate(params.max_documents);
        // The rerank stage reads each document's fusion signals by id once its passages are
        // revalidated.
        let mut signals: HashMap<String, RerankSignals> = HashMap::new();
        let mut candidates = Vec::with_capacity(fused.len());
        for item in fused {
            let score = item.score;
            if params.rerank {
                signals.insert(
                    item.item.id.as_str().to_owned(),
                    RerankSignals::of_fused(&item),
                );
            }
            let document_chunks = chunks.remove(&item.item);
            if item.lexical_rank.is_some() {
                candidates.push(ScoredCandidate {
                    candidate: Candidate::Document(item.item),
                    score,
                });
            }
            // A document found both ways is cited by its matching chunks and then the chunks the
            // embedding found (a short document's chunk is the document and shares its passage).
            if let Some(document_chunks) = document_chunks {
                candidates.extend(
                    document_chunks
                        .into_iter()
                        .map(|candidate| ScoredCandidate { candidate, score }),
                );
            }
        }
        let excerpts = ExcerptRules {
            query,
            chunking: index.profile().chunking,
            profile: index.digest(),
        };
        let (passages, excluded) = revalidate_candidates(
            store,
            access,
            index.digest(),
            &candidates,
            revalidation,
            Some(&excerpts),
        )
        .await?;
        tracing::debug!(
            lexical = lexical_keys.len(),
            embedding = embedding_keys.len(),
            passages = passages.len(),
            stale = excluded.stale,
            unauthorized = excluded.unauthorized,
            "hybrid recall answered"
        );
        let passages = if params.rerank {
            match rerank(query, params, &signals, passages, cross).await? {
                Ok(passages) => passages,
                Err(error) => {
                    return scored_failure(SemanticError::Embed(error))
                        .map(AnsweredLookup::unranked);
                }
            }
        } else {
            passages
        };
        // Near-equal relevance is judged on the lists' own scores: min-max normalization spreads
        // two statements that differ in one word far apart in the fused score.
        let raw: HashMap<&str, (Option<f64>, Option<f64>)> =
            fused_raw_scores(&lexical_keys, &embedding_keys);
        let same = |left: Option<f64>, right: Option<f64>| match (left, right) {
            (None, None) => true,
            (Some(left), Some(right)) => near(left, right),
            _ => false,
        };
        let lookup = ScoredLookup::ranked_with(
            passages
                .into_iter()
                .map(|(passage, score)| {
                    let rankings =
                        raw.get(passage.source.id.as_str())
                            .map(|(lexical, embedding)| RankingScores {
                                lexical: *lexical,
                                embedding: *embedding,
                            });
                    ScoredPassage {
                        passage,
                        score,
                        rankings,
                    }
                })
                .collect(),
            |head, item| {
                if near(head.score, item.score) {
                    return true;
                }
                let of =
                    |scored: &ScoredPassage| raw.get(scored.passage.source.id.as_str()).copied();
                match (of(head), of(item)) {
                    (Some((head_lexical, head_embedding)), Some((lexical, embedding))) => {
                        same(head_lexical, lexical) && same(head_embedding, embedding)
                    }
                    _ => false,
                }
            },
        );
        Ok(AnsweredLookup {
            lookup,
            answered_by: Some(answered_by),
        })
    };
    deadline(limits.timeout_ms, work).await
}

/// The rerank stage ([`rerank`](self::rerank) module): each document's signals from its fusion
/// `signals` and the current text of its first revalidated passage (its best excerpt); with a
/// cross-encoder, the first [`CROSS_ENCODER_DEPTH`] documents in the order `params.rerank_weights`
/// give them are read by the model with the query ([`passage_cross_encoder_text`], one call on the
/// blocking pool) and take their rank among its scores as their `cross` signal
/// ([`cross_rank_signals`]), and the documents are scored by `params.cross_rerank_weights`; without
/// one, by `params.rerank_weights`. The passages are then ordered by their document's score (a stable
/// sort: a document's passages stay together and in their order, and equal scores keep the fused
/// order). The score replaces the fused one, so the near-tie rule that follows compares reranked
/// scores. Only passages revalidation kept are here: the stage can reorder them, never admit one. A
/// model that fails is the inner error.
async fn rerank(
    query: &str,
    params: &HybridParams,
    signals: &HashMap<String, RerankSignals>,
    passages: Vec<(MemoryPassage, f64)>,
    cross: Option<Arc<dyn CrossEncoder>>,
) -> Result<Result<Vec<(MemoryPassage, f64)>, crate::EmbedError>, RecallError> {
    let parsed = RerankQuery::new(query);
    // Each document once, in the passages' order, with its signals; and its first passage (its best
    // excerpt), which the model reads if it is chosen: only the chosen ones' texts are made.
    let mut documents: Vec<(usize, RerankSignals)> = Vec::new();
    let mut first_passage: Vec<usize> = Vec::new();
    let mut of_passage: Vec<usize> = Vec::with_capacity(passages.len());
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (index, (passage, fused)) in passages.iter().enumerate() {
        let id = passage.source.id.as_str();
        let document = match seen.get(id) {
            Some(document) => *document,
            None => {
                let own = signals.get(id).copied().unwrap_or(RerankSignals {
                    fused: *fused,
                    ..RerankSignals::default()
                });
                let document = documents.len();
                documents.push((document, own.with_text(parsed.passage_signals(passage))));
                first_passage.push(index);
                seen.insert(id, document);
                document
            }
        };
        of_passage.push(document);
    }
    let weights = match cross {
        None => &params.rerank_weights,
        Some(cross) => {
            let chosen =
                cross_encoder_choice(&documents, &params.rerank_weights, CROSS_ENCODER_DEPTH);
            let read: Vec<String> = chosen
                .iter()
                .map(|document| passage_cross_encoder_text(&passages[first_passage[*document]].0))
                .collect();
            let query = query.to_owned();
            let scored = on_blocking_pool(async move {
                let read: Vec<&str> = read.iter().map(String::as_str).collect();
                cross.score(&query, &read)
            })
            .await?;
            let scores = match scored {
                Ok(scores) if scores.len() == chosen.len() => scores,
                Ok(scores) => {
                    return Ok(Err(crate::EmbedError::Count {
                        expected: chosen.len(),
                        actual: scores.len(),
                    }));
                }
                Err(error) => return Ok(Err(error)),
            };
            for (document, signal) in chosen.into_iter().zip(cross_rank_signals(&scores)) {
                documents[document].1.cross = signal;
            }
            &params.cross_rerank_weights
        }
    };
    let items: Vec<(MemoryPassage, RerankSignals)> = passages
        .into_iter()
        .zip(of_passage)
        .map(|((passage, _), document)| (passage, documents[document].1))
        .collect();
    Ok(Ok(order_by_rerank(items, weights)))
}

/// Each document's own scores in the lexical and the embedding ranking (its first occurrence), by
/// document id: hybrid recall's test of near-equal relevance reads them.
fn fused_raw_scores<'a>(
    lexical: &'a [(MemoryKey, f64)],
    embedding: &'a [(MemoryKey, f64)],
) -> HashMap<&'a str, (Option<f64>, Option<f64>)> {
    let mut raw: HashMap<&str, (Option<f64>, Option<f64>)> = HashMap::new();
    for (key, score) in lexical {
        raw.entry(key.id.as_str())
            .or_default()
            .0
            .get_or_insert(*score);
    }
    for (key, score) in embedding {
        raw.entry(key.id.as_str())
            .or_default()
            .1
            .get_or_insert(*score);
    }
    raw
}

/// The written-order neighbours of every fused document (as keys of `access.namespace`), read on
/// the blocking pool in one store call.
async fn written_neighbours<R: LexicalSearch + 'static>(
    store: &Arc<R>,
    access: &MemoryAccess,
    fused: &[Fused<MemoryKey>],
    reach: usize,
) -> Result<Result<Vec<(Vec<MemoryKey>, Vec<MemoryKey>)>, MemoryError>, RecallError> {
    let store = Arc::clone(store);
    let access = access.clone();
    let ids: Vec<DocumentId> = fused.iter().map(|item| item.item.id.clone()).collect();
    on_blocking_pool(async move {
        let answers = store.written_neighbours(&access, &ids, reach).await?;
        let keys = |ids: Vec<DocumentId>| -> Vec<MemoryKey> {
            ids.into_iter()
                .map(|id| MemoryKey {
                    namespace: access.namespace.clone(),
                    id,
                })
                .collect()
        };
        Ok(answers
            .into_iter()
            .map(|answer| (keys(answer.before), keys(answer.after)))
            .collect())
    })
    .await
}
