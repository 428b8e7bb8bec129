//! What semantic and hybrid recall add to revalidation (SPEC §2.4 and §4), which is
//! [`memory_core::revalidate::revalidate_each`]'s for every mode (one read per key in groups, the
//! visibility rule, attribution and authority from the current document, one citation per passage,
//! the `max_input_bytes` bound). What is this crate's own is the judgement of its candidates:
//! - a document candidate (a lexical hit) cites the whole current document, or, when it is longer
//!   than one chunk and excerpt rules are given, its chunks that match the query best
//!   ([`super::excerpt_texts`]);
//! - a chunk candidate holds only if the document is still at the embedded revision and holds the
//!   exact excerpt at the embedded byte range ([`crate::engine::current_excerpt`]): a stale chunk
//!   never lends its score to new text;
//! - each passage keeps the score of the candidate it came from (the first, best-ranked one when
//!   several candidates give the same passage);
//! - the reads run on tokio's blocking pool ([`memory_core::blocking::store_call`]), so a synchronous store
//!   (SQLite) cannot hold the recall's deadline timer up.

use std::sync::Arc;

use memory_core::recall::PassageId;
use memory_core::revalidate::{CitedText, Judge, Judgement, revalidate_each};
use memory_core::{
    MemoryAccess, MemoryDocument, MemoryError, MemoryKey, MemoryPassage, MemoryReader, RecallError,
    RevalidationLimits,
};

use super::{ExcerptRules, excerpt_texts};
use crate::engine::current_excerpt;
use crate::index::ChunkMeta;
use crate::profile::ProfileDigest;

/// One candidate to revalidate.
#[derive(Debug, Clone)]
pub(crate) enum Candidate {
    /// A whole document (a lexical hit).
    Document(MemoryKey),
    /// One embedded chunk.
    Chunk(ChunkMeta),
}

/// A candidate and the score its ranking gave it (cosine similarity, or a fused rank score).
#[derive(Debug, Clone)]
pub(crate) struct ScoredCandidate {
    pub(crate) candidate: Candidate,
    pub(crate) score: f64,
}

impl Candidate {
    fn key(&self) -> &MemoryKey {
        match self {
            Self::Document(key) => key,
            Self::Chunk(chunk) => &chunk.source.key,
        }
    }
}

/// Counts of what revalidation dropped, for logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Exclusions {
    pub(crate) stale: usize,
    pub(crate) unauthorized: usize,
}

/// The passage id of chunk `ordinal` under `profile` (`chunk:<profile digest hex>:<ordinal>`), unique
/// within its source and revision. About 80 ASCII bytes, so always valid; the error is only typed.
pub fn chunk_passage_id(profile: ProfileDigest, ordinal: u32) -> Result<PassageId, MemoryError> {
    PassageId::new(format!("chunk:{}:{ordinal}", profile.to_hex()))
}

/// Reads through `R` on tokio's blocking pool.
struct OnBlockingPool<R>(Arc<R>);

impl<R: MemoryReader + 'static> MemoryReader for OnBlockingPool<R> {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        let reader = Arc::clone(&self.0);
        let key = key.clone();
        memory_core::blocking::store_call(async move { reader.read(&key).await }).await
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        let reader = Arc::clone(&self.0);
        let keys = keys.to_vec();
        memory_core::blocking::store_call(async move { reader.read_many(&keys).await }).await
    }
}

/// The judgement of semantic and hybrid candidates.
struct Chunks<'r> {
    profile: ProfileDigest,
    excerpts: Option<&'r ExcerptRules<'r>>,
}

impl Judge<ScoredCandidate> for Chunks<'_> {
    fn key<'c>(&self, scored: &'c ScoredCandidate) -> &'c MemoryKey {
        scored.candidate.key()
    }

    fn judge(
        &self,
        scored: &ScoredCandidate,
        document: &MemoryDocument,
    ) -> Result<Judgement, RecallError> {
        let text = &document.content.text;
        Ok(match &scored.candidate {
            Candidate::Document(_) => Judgement::Cite(
                self.excerpts
                    .and_then(|rules| excerpt_texts(text, rules))
                    .unwrap_or_else(|| {
                        vec![CitedText {
                            passage_id: PassageId::from(&document.key.id),
                            text: text.clone(),
                        }]
                    }),
            ),
            Candidate::Chunk(chunk) => match current_excerpt(document, chunk) {
                Some(excerpt) => Judgement::Cite(vec![CitedText {
                    passage_id: chunk_passage_id(self.profile, chunk.ordinal)?,
                    text: excerpt.to_owned(),
                }]),
                None => Judgement::Stale,
            },
        })
    }
}

/// Revalidates `candidates` (in rank order) for `access` against `reader`, its reads run on the
/// blocking pool; the passages keep the candidates' order and scores, and a passage equal to an
/// earlier one is left out.
pub(crate) async fn revalidate_candidates<R: MemoryReader + 'static>(
    reader: &Arc<R>,
    access: &MemoryAccess,
    profile: ProfileDigest,
    candidates: &[ScoredCandidate],
    limits: &RevalidationLimits,
    excerpts: Option<&ExcerptRules<'_>>,
) -> Result<(Vec<(MemoryPassage, f64)>, Exclusions), RecallError> {
    let judge = Chunks { profile, excerpts };
    let revalidated = revalidate_each(
        candidates,
        &judge,
        access,
        &OnBlockingPool(Arc::clone(reader)),
        limits,
    )
    .await?;
    let exclusions = Exclusions {
        stale: revalidated.excluded_stale,
        unauthorized: revalidated.excluded_unauthorized,
    };
    let passages = revalidated
        .passages
        .into_iter()
        .map(|(passage, index)| (passage, candidates[index].score))
        .collect();
    Ok((passages, exclusions))
}
