//! Recall and sync plumbing: which search backs each recall mode, and what `memory_sync` waits for.
//!
//! Kept in one module so wiring a new index touches nothing else:
//! - `lexical`: the store's full-text (BM25) index. It is updated in the same transaction as every write,
//!   so a committed write is recallable at once. It needs no model.
//! - `exact`, `hnsw`: semantic-index's embedding source ([`SemanticRecall`]) over the semantic index
//!   ([`crate::semantic`]): the query is embedded, the exact scan or the HNSW graph ranks chunks, and
//!   each chunk is revalidated against its current document into an excerpt passage with the chunk
//!   passage id ([`semantic_index::recall::chunk_passage_id`]). Each passage's score is its chunk's
//!   cosine similarity, as the source computed it.
//! - `hybrid` (the default): semantic-index's hybrid source ([`HybridRecall`], HNSW side): the lexical
//!   and embedding rankings of documents fused by normalized score fusion with its default parameters
//!   (see [`semantic_index::recall::HybridParams`]); a document found lexically becomes a whole-document
//!   passage, one found only by embedding its chunks. Each passage is scored by its document's fused
//!   score, as the source computed it.
//! - Long documents: in `lexical` and `hybrid`, a lexical hit longer than one chunk of the profile
//!   (1,024 bytes by default) is cited by its best-matching chunks
//!   ([`semantic_index::recall::excerpt_passages`]), exact excerpts of the current text named by the
//!   index's chunk passage ids, so it fits a `max_bytes` smaller than the document and the same chunk
//!   found by embedding shares its citation. Without a semantic index the default profile's chunking
//!   and digest name them.
//! - Every mode revalidates each candidate once, with one grouped read (memory-core's revalidation for
//!   `lexical`, semantic-index's for the others, which follows the same rules), and composes through
//!   memory-core's recall, so withdrawn, revoked and stale documents are never recalled and the limits
//!   hold in every mode. Every read goes through `RecallStore`, which hides documents whose current
//!   revision a forgotten (suppressed) thread record contributed: a forget is effective for every mode
//!   the moment it is acknowledged, before the worker's cleanup withdraws the document.
//! - Limits map one to one to memory-core's [`RecallLimits`]: `max_sources` (distinct cited documents)
//!   defaults to `max_items`. Semantic results carry `answered_by`, the index that ranked the
//!   embedding candidates as the search reported it (`exact` for an `hnsw` recall while no graph is
//!   ready).
//! - Without a semantic index ([`RecallService::lexical_only`]) or when the model cannot be loaded or
//!   fails, the semantic modes are refused as `unavailable`; never a lexical answer in disguise.
//! - `memory_sync` answers the change-feed head once the semantic index reflects it (see
//!   [`crate::semantic::SemanticBackend::sync`]); without a semantic index, the transactional lexical
//!   index already does.
//!
//! Decisions: the store's source is declared optional, so a recall answers the best passages that fit
//! the limits rather than failing when more match than fit. Every store, lexical-index and vector call
//! of a recall runs on tokio's blocking pool (memory-sqlite answers synchronously), so `timeout_ms`
//! really bounds the search, revalidation and composition: when it passes the recall is refused as
//! `deadline` at once. The deadline starts when the recall does, so loading the model and a one-shot
//! command's catch-up indexing (or, in the server, the wait for its indexer to pass the store's head)
//! count against it too: a recall that cannot get the index up to date in time is refused as
//! `unavailable`, saying how many changes the index is behind and that `memory sync` catches up (the
//! batches indexed meanwhile stay indexed). Semantic results say what the index held
//! (`index_position`) against the store's head when the recall began (`store_head`). Token counts use
//! memory-core's approximate counter in every mode: the counter should be the consuming agent's model's,
//! which is not the embedding model, and one limit should mean the same thing whatever the mode.
//!
//! Fault injection (tests only): with the cargo feature `fault-injection`, the environment variable
//! [`STALL_RECALL_ENV`] (milliseconds) makes each store call of a recall block its thread that long, as a
//! stuck disk would, so the end-to-end tests can receive `deadline` deterministically. Without the
//! feature the variable is not read at all.

mod suppression;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use memory_core::recall::{
    MemoryLookup, RecallError, RecallLimits, RecallSource, RecalledMemory, SourceId, SourceOutcome,
    SourceStatus, recall,
};
use memory_core::{
    ApproximateTokenCounter, ErrorKind, LexicalSearch, MemoryAccess, RecallCandidate,
    RevalidationLimits, revalidate,
};
use semantic_index::recall::{
    ExcerptRules, HybridParams, RankingScores, ScoredLookup, ScoredPassage, excerpt_passages,
};
use semantic_index::{ChunkingConfig, Embedder, ProfileDigest, SemanticIndex, SemanticProfile};
use semantic_index::{CrossEncoder, HybridRecall, IndexKind, QueryLimits, SemanticRecall};

use crate::blocking::blocking;
use crate::database::{Following, Store};
use crate::recall_corrections::{place_corrections, place_corrections_here};
pub use crate::recall_query::{MAX_QUERY_BYTES, RecallQuery, query_tail};
use crate::refusal::Refusal;
use crate::semantic::SemanticBackend;
use crate::settings::Settings;
use crate::wire::{
    AnsweredBy, RecallMode, RecallResult, SyncResult, WireOutcome, WirePassage, WirePassageSource,
    WireRankings,
};
use memory_core::blocking::on_blocking_pool;
pub use suppression::STALL_RECALL_ENV;
use suppression::{RecallStore, Suppression};

/// Fewest search hits asked for, so revalidation has spares when some hits turn out stale.
pub const MIN_SEARCH_HITS: usize = 16;
/// Most search hits asked for, whatever `max_items` says.
pub const MAX_SEARCH_HITS: usize = 256;
/// The declaration id of the store's own source in outcomes.
pub const STORE_SOURCE_ID: &str = "memory";
/// Semantic hits whose cosine similarity with the query is below this are dropped. all-MiniLM-L6-v2
/// scores unrelated English sentences around 0 to 0.15 and paraphrases well above 0.3, so the floor
/// keeps an unrelated query from filling the answer with whatever happens to rank first.
pub const MIN_SEMANTIC_SCORE: f32 = 0.2;

/// The recall modes and sync over one store.
pub struct RecallService<S: Store> {
    store: Arc<S>,
    semantic: Option<Arc<SemanticBackend<S>>>,
    /// Where forgotten sources are recorded; every recall read hides their contributions.
    suppression: Suppression,
}

impl<S: Store> std::fmt::Debug for RecallService<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RecallService")
            .field("semantic", &self.semantic.is_some())
            .finish_non_exhaustive()
    }
}

/// Passage scores (and a hybrid recall's ranking scores) by (document id, passage id), as the
/// answering source computed them.
#[derive(Debug, Default)]
struct Scores {
    by_passage: HashMap<(String, String), (f64, Option<RankingScores>)>,
}

/// Records `lookup`'s scores in `scores` and hands on its passages.
fn take_scores(scores: &Mutex<Scores>, lookup: ScoredLookup) -> Result<MemoryLookup, RecallError> {
    Ok(scores
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take(lookup))
}

impl Scores {
    /// Records a score; the first (best-ranked) one of a passage wins.
    fn record(
        &mut self,
        document: &str,
        passage: &str,
        score: f64,
        rankings: Option<RankingScores>,
    ) {
        self.by_passage
            .entry((document.to_owned(), passage.to_owned()))
            .or_insert((score, rankings));
    }

    fn of(&self, document: &str, passage: &str) -> (f64, Option<WireRankings>) {
        self.by_passage
            .get(&(document.to_owned(), passage.to_owned()))
            .map_or((0.0, None), |(score, rankings)| {
                (
                    *score,
                    rankings.map(|rankings| WireRankings {
                        lexical: rankings.lexical,
                        embedding: rankings.embedding,
                    }),
                )
            })
    }

    /// Records the scores of `passages` and answers them as a lookup.
    fn take(&mut self, lookup: ScoredLookup) -> MemoryLookup {
        match lookup {
            ScoredLookup::Found(passages) => {
                let passages = passages
                    .into_iter()
                    .map(|scored| {
                        self.record(
                            scored.passage.source.id.as_str(),
                            scored.passage.passage_id.as_str(),
                            scored.score,
                            scored.rankings,
                        );
                        scored.passage
                    })
                    .collect();
                MemoryLookup::Found { passages }
            }
            ScoredLookup::NoMatch => MemoryLookup::NoMatch,
            ScoredLookup::Unavailable { reason } => MemoryLookup::Unavailable { reason },
        }
    }
}

/// Which semantic index a process's services have, and how it is kept up to date with the store.
pub enum Indexing<F> {
    /// None: the `lexical` and `recent` modes only, and no vector table is opened (a write, a
    /// listing, a history, a lexical recall).
    None,
    /// Caught up by this process before each semantic recall or sync ([`crate::semantic::Freshness::CatchUp`]: the
    /// one-shot commands, the hook, the Python package, the eval).
    CatchUp,
    /// Followed by a background indexer over the store's feed ([`crate::semantic::Freshness::Background`]: the
    /// server); its commits wake the feed.
    Following(Following<F>),
}

impl<F> std::fmt::Debug for Indexing<F> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            Self::None => "None",
            Self::CatchUp => "CatchUp",
            Self::Following(_) => "Following",
        })
    }
}

impl<S: Store> RecallService<S> {
    /// The one builder of the recall modes every door runs (the command line, its server, the hook,
    /// the Python package, the eval): the semantic index, when `indexing` asks for one, over the
    /// vectors in the store's own database, configured by the settings' `index`, with the real model
    /// found by the assets lookup. A blocking call (it opens the vector store): run it before a
    /// runtime starts or through [`crate::blocking::blocking`].
    pub fn open(
        store: Arc<S>,
        settings: &Settings,
        indexing: Indexing<S::Feed>,
    ) -> Result<Self, Refusal> {
        let semantic = match indexing {
            Indexing::None => return Ok(Self::lexical_only(store)),
            Indexing::CatchUp => {
                SemanticBackend::catching_up(Arc::clone(&store), store.open_vectors()?)?
            }
            Indexing::Following(following) => SemanticBackend::following(
                Arc::clone(&store),
                store.open_vectors()?,
                following.feed,
            )?
            .waking(following.commits),
        };
        let semantic = semantic.with_index_options(settings.index)?;
        Ok(Self::with_semantic(store, Arc::new(semantic)))
    }

    /// Recall over `store` with its lexical index only; the semantic modes are refused as
    /// `unavailable`.
    pub fn lexical_only(store: Arc<S>) -> Self {
        Self {
            store,
            semantic: None,
            suppression: Suppression::default(),
        }
    }

    /// Recall over `store` with its lexical index and `semantic`.
    pub fn with_semantic(store: Arc<S>, semantic: Arc<SemanticBackend<S>>) -> Self {
        Self {
            store,
            semantic: Some(semantic),
            suppression: Suppression::default(),
        }
    }

    /// The semantic index, when one is configured.
    pub fn semantic(&self) -> Option<&Arc<SemanticBackend<S>>> {
        self.semantic.as_ref()
    }

    /// The chunking and profile digest that cut lexical hits on long documents into excerpts: the
    /// semantic index's, else the default profile's, so a lexical excerpt and the embedding index's
    /// chunk of the same text always share a passage id.
    fn excerpt_profile(&self) -> Result<(ChunkingConfig, ProfileDigest), Refusal> {
        match &self.semantic {
            Some(semantic) => {
                let (profile, digest) = semantic.profile();
                Ok((profile.chunking, digest))
            }
            None => (*DEFAULT_EXCERPTS)
                .ok_or_else(|| Refusal::unavailable("the default semantic profile has no digest")),
        }
    }

    /// `memory_recall`: brings the semantic index up to the store's head (a semantic mode only), then
    /// answers through the mode table ([`Self::recall_over`]'s).
    pub async fn recall(&self, query: RecallQuery) -> Result<RecallResult, Refusal> {
        // `timeout_ms` bounds everything the caller waits for: loading the model and a one-shot
        // command's catch-up indexing count against it, not just the search.
        let deadline = tokio::time::Instant::now() + query.limits.timeout();
        let index = match query.mode {
            RecallMode::Lexical | RecallMode::Recent => None,
            RecallMode::Exact | RecallMode::Hnsw | RecallMode::Hybrid => {
                let Some(semantic) = &self.semantic else {
                    return Err(Refusal::unavailable(format!(
                        "recall mode {} is not available: no semantic index is configured",
                        query.mode.as_str()
                    )));
                };
                Some(semantic.index_for_query(deadline).await?)
            }
        };
        let (index, indexed_at) = index.unzip();
        // The rerank stage's model, only where the stage runs; a model this process was asked to
        // load and could not is a refusal here, never a silently different ranking.
        let cross = match (&self.semantic, query.mode, query.rerank) {
            (Some(semantic), RecallMode::Hybrid, true) => semantic.cross_encoder().await?,
            _ => None,
        };
        let mut result = self.answer(query, index.as_ref(), cross, deadline).await?;
        result.index_position = indexed_at.map(|at| at.indexed.get());
        result.store_head = indexed_at.map(|at| at.head.get());
        Ok(result)
    }

    /// The recall-mode table over `index`, an index the caller keeps up to date itself: the same
    /// search, fusion, score floor, revalidation, suppression and composition as [`Self::recall`],
    /// which is this once its semantic backend has brought its index to the store's head. For an
    /// in-process host that runs its own [`semantic_index::Indexer`] and its own embedder (the eval
    /// harness measures the product's modes through it; its tests use a deterministic embedder).
    /// The answer names no `index_position`: the caller knows what its index reflects. `cross` is
    /// the rerank stage's cross-encoder, as a process loads it with `--rerank-model on` (`None`:
    /// as with `off`).
    pub async fn recall_over<E: Embedder>(
        &self,
        index: &Arc<SemanticIndex<E, S::Vectors>>,
        cross: Option<Arc<dyn CrossEncoder>>,
        query: RecallQuery,
    ) -> Result<RecallResult, Refusal> {
        let deadline = tokio::time::Instant::now() + query.limits.timeout();
        self.answer(query, Some(index), cross, deadline).await
    }

    /// The mode table: which search backs each mode, how deep it is asked, and how its passages are
    /// revalidated, scored and composed within the limits left before `deadline`.
    async fn answer<E: Embedder>(
        &self,
        query: RecallQuery,
        index: Option<&Arc<SemanticIndex<E, S::Vectors>>>,
        cross: Option<Arc<dyn CrossEncoder>>,
        deadline: tokio::time::Instant,
    ) -> Result<RecallResult, Refusal> {
        let RecallQuery {
            access,
            text,
            mode,
            limits,
            rerank,
        } = query;
        let limits = remaining_limits(&limits, deadline)?;
        // The index that ranked the embedding candidates, as the search itself reports it (an
        // `hnsw` search is answered exactly while the graph is not ready).
        let answered_by: Mutex<Option<IndexKind>> = Mutex::new(None);
        let depth = search_depth(&limits);
        let store = Arc::new(self.recall_store().await?);
        let revalidation = RevalidationLimits::from(&limits);
        let scores: Mutex<Scores> = Mutex::new(Scores::default());
        let excerpts = match index {
            Some(index) => (index.profile().chunking, index.digest()),
            None => self.excerpt_profile()?,
        };
        let index = index.map(Arc::clone);
        let (placing_store, placing_access) = (Arc::clone(&store), access.clone());
        let lookup = async {
            let scored = match (mode, index) {
                (RecallMode::Exact | RecallMode::Hnsw, Some(index)) => {
                    let kind = if mode == RecallMode::Exact {
                        IndexKind::Exact
                    } else {
                        IndexKind::Hnsw
                    };
                    let query_limits = semantic_limits(&index, depth, limits.timeout_ms(), kind);
                    let answered = SemanticRecall::new(index, store, access, text, query_limits)
                        .revalidation_limits(revalidation)
                        .lookup_answered()
                        .await?;
                    record(&answered_by, answered.answered_by);
                    answered.lookup
                }
                (RecallMode::Hybrid, Some(index)) => {
                    let query_limits =
                        semantic_limits(&index, depth, limits.timeout_ms(), IndexKind::Hnsw);
                    // The tuned candidate depths (semantic-index's defaults), or more when the
                    // recall may cite more; the embedding side takes the larger of its default and
                    // `query_limits`.
                    let defaults = HybridParams::default();
                    let params = HybridParams {
                        lexical_candidates: depth.max(defaults.lexical_candidates),
                        max_documents: depth,
                        rerank,
                        ..defaults
                    };
                    let answered = HybridRecall::new(index, store, access, text, query_limits)
                        .params(params)
                        .cross_encoder(cross)
                        .revalidation_limits(revalidation)
                        .lookup_answered()
                        .await?;
                    record(&answered_by, answered.answered_by);
                    answered.lookup
                }
                (RecallMode::Exact | RecallMode::Hnsw | RecallMode::Hybrid, None) => {
                    ScoredLookup::Unavailable {
                        reason: "no semantic index".to_owned(),
                    }
                }
                // These two search on the blocking pool and place corrections in the same task.
                (RecallMode::Recent, _) => {
                    return take_scores(
                        &scores,
                        recent_lookup(store, access, depth, revalidation, excerpts).await?,
                    );
                }
                (RecallMode::Lexical, _) => {
                    return take_scores(
                        &scores,
                        lexical_lookup(store, access, text, depth, revalidation, excerpts).await?,
                    );
                }
            };
            // Every mode's passages go through the one placing of corrections (lexical and recent
            // inside their own blocking task).
            let scored = place_corrections(
                placing_store,
                placing_access,
                scored,
                revalidation,
                excerpts,
            )
            .await?;
            take_scores(&scores, scored)
        };
        // Optional, so its passages are fitted to the limits like any optional source's; an
        // unavailable answer (the embedder failed) then reaches the outcome, and is refused here:
        // the store is the recall's only source, so there is nothing else to answer with.
        let source = RecallSource::optional(SourceId::new(STORE_SOURCE_ID)?, lookup);
        let recalled = recall(vec![source], &limits, &ApproximateTokenCounter).await?;
        refuse_unavailable(&recalled)?;
        let scores = scores.into_inner().unwrap_or_default();
        let mut result = to_wire(recalled, |document, passage| scores.of(document, passage));
        result.answered_by = answered_by
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .map(|kind| match kind {
                IndexKind::Exact => AnsweredBy::Exact,
                IndexKind::Hnsw => AnsweredBy::Hnsw,
            });
        Ok(result)
    }

    /// `memory_sync`: waits until every write committed before the call is searchable in every
    /// configured mode, and answers the change-sequence position reached.
    pub async fn sync(&self) -> Result<SyncResult, Refusal> {
        let (head, unindexed) = match &self.semantic {
            Some(semantic) => {
                let synced = semantic.sync().await?;
                (synced.head, synced.unindexed)
            }
            None => {
                let store = Arc::clone(&self.store);
                let head =
                    crate::blocking::on_blocking_pool(async move { store.head().await }).await??;
                (head, 0)
            }
        };
        Ok(SyncResult {
            indexed: head.get(),
            unindexed,
        })
    }
}

fn record(slot: &Mutex<Option<IndexKind>>, kind: Option<IndexKind>) {
    *slot
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = kind;
}

/// `limits` with the time left before `deadline` as their timeout; a recall with no time left is
/// refused as `deadline` before it searches.
fn remaining_limits(
    limits: &RecallLimits,
    deadline: tokio::time::Instant,
) -> Result<RecallLimits, Refusal> {
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let left_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
    if left_ms == 0 {
        return Err(Refusal::new(
            ErrorKind::Deadline,
            format!(
                "recall did not finish within timeout_ms ({} ms)",
                limits.timeout_ms()
            ),
        ));
    }
    Ok(RecallLimits::builder()
        .max_sources(limits.max_sources())
        .max_items(limits.max_items())
        .max_bytes(limits.max_bytes())
        .max_tokens(limits.max_tokens())
        .max_input_bytes(limits.max_input_bytes())
        .timeout_ms(left_ms)
        .build()?)
}

/// Search hits asked of each index: twice the items, within bounds.
fn search_depth(limits: &RecallLimits) -> usize {
    search_depth_for(limits.max_items())
}

/// How deep each search of a recall citing at most `max_items` passages is asked, and how many
/// fused documents hybrid recall revalidates (and so reranks): twice the items, within
/// [`MIN_SEARCH_HITS`] and [`MAX_SEARCH_HITS`]. The eval's tuning reranks as many.
pub fn search_depth_for(max_items: u32) -> usize {
    usize::try_from(max_items)
        .unwrap_or(usize::MAX)
        .saturating_mul(2)
        .clamp(MIN_SEARCH_HITS, MAX_SEARCH_HITS)
}

/// The semantic index's query limits for a recall.
fn semantic_limits<E: Embedder, V: memory_core::vectors::VectorStore + 'static>(
    index: &SemanticIndex<E, V>,
    depth: usize,
    timeout_ms: u64,
    kind: IndexKind,
) -> QueryLimits {
    let bounds = index.bounds();
    QueryLimits::new(
        MAX_QUERY_BYTES,
        depth,
        // Scan every chunk rather than rank a prefix; the index's own bounds cap the count.
        bounds.max_chunks,
        MIN_SEMANTIC_SCORE,
        timeout_ms,
        kind,
    )
}

/// The default profile's chunking and digest, computed once: they name lexical excerpts when no
/// semantic index is configured.
static DEFAULT_EXCERPTS: LazyLock<Option<(ChunkingConfig, ProfileDigest)>> = LazyLock::new(|| {
    let profile = SemanticProfile::minilm_l6_v2();
    profile
        .digest()
        .ok()
        .map(|digest| (profile.chunking, digest))
});

/// The lexical mode: the store's full-text search and memory-core's revalidation, both on the
/// blocking pool; each passage (a whole document, or the best-matching chunks of a document longer
/// than one chunk: [`excerpt_passages`]) is scored by its document's BM25 relevance.
async fn lexical_lookup<S: Store>(
    store: Arc<RecallStore<S>>,
    access: MemoryAccess,
    text: String,
    depth: usize,
    revalidation: RevalidationLimits,
    (chunking, profile): (ChunkingConfig, ProfileDigest),
) -> Result<ScoredLookup, RecallError> {
    on_blocking_pool(async move {
        let hits = store.search(&access, &text, depth).await?;
        // Lexical hits are in the access's namespace, so a document id names one hit.
        let mut score_of: HashMap<String, f64> = HashMap::with_capacity(hits.len());
        let mut candidates = Vec::with_capacity(hits.len());
        for hit in hits {
            score_of
                .entry(hit.key.id.as_str().to_owned())
                .or_insert(hit.score);
            candidates.push(RecallCandidate::document(hit.key, Some(hit.revision)));
        }
        let rules = ExcerptRules {
            query: &text,
            chunking,
            profile,
        };
        let passages: Vec<_> = revalidate(&candidates, &access, &*store, &revalidation)
            .await?
            .into_iter()
            .flat_map(|passage| excerpt_passages(passage, &rules))
            .collect();
        let ranked = ScoredLookup::ranked(
            passages
                .into_iter()
                .map(|passage| {
                    let score = score_of
                        .get(passage.source.id.as_str())
                        .copied()
                        .unwrap_or(0.0);
                    ScoredPassage::new(passage, score)
                })
                .collect(),
        );
        place_corrections_here(&*store, &access, ranked, &revalidation, (chunking, profile)).await
    })
    .await?
}

/// The `recent` mode: the namespace's newest documents ([`memory_core::MemoryLister`], up to `depth`),
/// revalidated like every other mode's hits, so suppression, withdrawal and the scope apply. A document
/// longer than one chunk is cited by its first chunk (no query word picks another, [`excerpt_passages`]).
/// Scores fall with age: the newest document scores 1, the next 1/2, and so on.
async fn recent_lookup<S: Store>(
    store: Arc<RecallStore<S>>,
    access: MemoryAccess,
    depth: usize,
    revalidation: RevalidationLimits,
    (chunking, profile): (ChunkingConfig, ProfileDigest),
) -> Result<ScoredLookup, RecallError> {
    on_blocking_pool(async move {
        let limit = depth.clamp(1, memory_core::listing::MAX_LIST_LIMIT);
        let page = store.store.list(&access.namespace, None, limit).await?;
        let mut rank_of: HashMap<String, usize> = HashMap::with_capacity(page.documents.len());
        let candidates: Vec<RecallCandidate> = page
            .documents
            .into_iter()
            .enumerate()
            .map(|(rank, document)| {
                rank_of.insert(document.key.id.as_str().to_owned(), rank);
                RecallCandidate::document(document.key, Some(document.revision))
            })
            .collect();
        let rules = ExcerptRules {
            query: "",
            chunking,
            profile,
        };
        let passages: Vec<_> = revalidate(&candidates, &access, &*store, &revalidation)
            .await?
            .into_iter()
            .flat_map(|passage| excerpt_passages(passage, &rules))
            .collect();
        let ranked = if passages.is_empty() {
            ScoredLookup::NoMatch
        } else {
            ScoredLookup::Found(
                passages
                    .into_iter()
                    .map(|passage| {
                        let rank = rank_of
                            .get(passage.source.id.as_str())
                            .copied()
                            .unwrap_or(usize::MAX - 1);
                        ScoredPassage::new(passage, 1.0 / (rank as f64 + 1.0))
                    })
                    .collect(),
            )
        };
        place_corrections_here(&*store, &access, ranked, &revalidation, (chunking, profile)).await
    })
    .await?
}

/// The wire form of a recall result; `score_of` gives the score (and a hybrid recall's ranking
/// scores) of a (document id, passage id).
fn to_wire(
    recalled: RecalledMemory,
    score_of: impl Fn(&str, &str) -> (f64, Option<WireRankings>),
) -> RecallResult {
    let passages = recalled
        .passages
        .into_iter()
        .map(|recalled| {
            let passage = recalled.passage;
            let (score, rankings) =
                score_of(passage.source.id.as_str(), passage.passage_id.as_str());
            WirePassage {
                score,
                rankings,
                source: WirePassageSource {
                    id: passage.source.id.as_str().to_owned(),
                    locator: passage.source.locator,
                    revision: passage
                        .source
                        .revision
                        .map(|revision| revision.as_str().to_owned()),
                },
                passage_id: passage.passage_id.as_str().to_owned(),
                content: passage.content,
                citation: recalled.citation.to_string(),
                corrected_by: recalled.corrected_by.map(|citation| citation.to_string()),
            }
        })
        .collect();
    RecallResult {
        text: recalled.text,
        passages,
        outcomes: recalled.outcomes.into_iter().map(outcome_to_wire).collect(),
        answered_by: None,
        index_position: None,
        store_head: None,
    }
}

fn outcome_to_wire(outcome: SourceOutcome) -> WireOutcome {
    let (status, reason) = match outcome.status {
        SourceStatus::Found => ("found", None),
        SourceStatus::NoMatch => ("no-match", None),
        SourceStatus::Unavailable { reason } => ("unavailable", Some(reason)),
        SourceStatus::InsufficientFreshness => ("insufficient-freshness", None),
    };
    WireOutcome {
        id: outcome.id.as_str().to_owned(),
        essential: outcome.essential,
        status: status.to_owned(),
        reason,
        selected: outcome.selected as u64,
        deduplicated: outcome.deduplicated as u64,
        omitted: outcome.omitted as u64,
    }
}

/// Refuses a recall whose source answered unavailable (its reason in the message): the store is
/// the only source, so an empty answer would pass for "nothing matched".
fn refuse_unavailable(recalled: &RecalledMemory) -> Result<(), Refusal> {
    match recalled
        .outcomes
        .iter()
        .find_map(|outcome| match &outcome.status {
            SourceStatus::Unavailable { reason } => Some(reason),
            _ => None,
        }) {
        Some(reason) => Err(Refusal::unavailable(format!(
            "semantic recall is unavailable: {reason}"
        ))),
        None => Ok(()),
    }
}

/// One-shot recall over `store`, as `memory recall` runs it: the semantic index catches up within the
/// deadline; lexical recalls open no index.
pub async fn one_shot_recall<S: Store>(
    store: Arc<S>,
    settings: Settings,
    query: RecallQuery,
) -> Result<RecallResult, Refusal> {
    let indexing = if matches!(query.mode(), RecallMode::Lexical | RecallMode::Recent) {
        Indexing::None
    } else {
        Indexing::CatchUp
    };
    let recall = blocking(move || RecallService::open(store, &settings, indexing)).await??;
    recall.recall(query).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unavailable_store_source_is_refused_as_unavailable_with_its_reason() {
        let limits = RecallLimits::builder()
            .max_sources(4)
            .max_items(4)
            .max_bytes(4_000)
            .max_tokens(1_000)
            .timeout_ms(1_000)
            .build()
            .expect("limits");
        let answer = |lookup: MemoryLookup| async move {
            let source =
                RecallSource::optional(SourceId::new(STORE_SOURCE_ID).expect("id"), async move {
                    Ok::<_, RecallError>(lookup)
                });
            let recalled = recall(vec![source], &limits, &ApproximateTokenCounter)
                .await
                .expect("an optional source never fails the recall");
            refuse_unavailable(&recalled)
        };
        let refused = answer(MemoryLookup::Unavailable {
            reason: "embedding model unavailable".to_owned(),
        })
        .await
        .expect_err("refused");
        assert_eq!(refused.kind(), ErrorKind::Unavailable);
        assert!(
            refused.message().contains("embedding model unavailable"),
            "{refused}"
        );
        assert!(answer(MemoryLookup::NoMatch).await.is_ok());
    }

    #[test]
    fn scores_are_kept_per_document_and_passage() {
        let mut scores = Scores::default();
        let rankings = RankingScores {
            lexical: Some(3.5),
            embedding: None,
        };
        scores.record("doc", "chunk:0", 0.7, Some(rankings));
        scores.record("doc", "chunk:1", 0.4, None);
        scores.record("doc", "chunk:1", 0.1, Some(rankings));
        scores.record("other", "chunk:0", 0.2, None);
        assert_eq!(
            scores.of("doc", "chunk:0"),
            (
                0.7,
                Some(WireRankings {
                    lexical: Some(3.5),
                    embedding: None
                })
            )
        );
        assert_eq!(
            scores.of("doc", "chunk:1"),
            (0.4, None),
            "the first, best-ranked score wins"
        );
        assert_eq!(
            scores.of("other", "chunk:0"),
            (0.2, None),
            "the same chunk ordinal of another document has its own score"
        );
        assert_eq!(scores.of("missing", "missing"), (0.0, None));
    }
}
