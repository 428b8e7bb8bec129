//! Revalidation of semantic and hybrid recall candidates into passages, with one grouped read.
//!
//! The rules are SPEC §2.4's and §4's together:
//! - candidates whose key lies outside the access's namespace are dropped without a read;
//! - every other distinct key is read once, all in one `read_many` call (callers bound the count);
//! - missing, withdrawn and access-revoked documents are dropped;
//! - a document candidate (a lexical hit) becomes the whole current document, or, when it is longer
//!   than one chunk, its chunks that match the query best ([`super::excerpt_passages`]);
//! - a chunk candidate survives only if the document is still at the embedded revision and holds the
//!   exact excerpt at the embedded byte range (a stale chunk never lends its score to new text);
//! - attribution, metadata, times, locator and revision come from the current document, and every
//!   passage's authority is the access's namespace;
//! - an excerpt that is the whole text gets the document id as passage id, as a document candidate
//!   would, so the same evidence found lexically and by embedding shares one citation at recall;
//! - the aggregate compact JSON of the passages is bounded by `max_input_bytes`;
//! - each passage keeps the score of the candidate it came from (the first, best-ranked one when
//!   several candidates give the same passage);
//! - the grouped read runs on tokio's blocking pool ([`super::on_blocking_pool`]), so a synchronous
//!   store (SQLite) cannot hold the recall's deadline timer up.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use memory_core::StoreFault;
use memory_core::recall::{Authority, PassageId};
use memory_core::{
    MemoryAccess, MemoryDocument, MemoryError, MemoryKey, MemoryPassage, MemoryReader, RecallError,
    RevalidationLimits,
};

use super::{ExcerptRules, excerpt_passages};
use crate::engine::{ChunkCheck, check_chunk};
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

fn passage(
    document: &MemoryDocument,
    passage_id: PassageId,
    text: String,
    authority: &Authority,
) -> MemoryPassage {
    MemoryPassage::of_current_document(document, passage_id, text, authority)
}

/// Revalidates `candidates` (in rank order) for `access` with one grouped read of `reader`, run on the
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
    let mut keys: Vec<MemoryKey> = Vec::new();
    let mut slot_of: HashMap<&MemoryKey, usize> = HashMap::new();
    let mut exclusions = Exclusions::default();
    for scored in candidates {
        let key = scored.candidate.key();
        if key.namespace == access.namespace && !slot_of.contains_key(key) {
            slot_of.insert(key, keys.len());
            keys.push(key.clone());
        }
    }
    let documents = if keys.is_empty() {
        Vec::new()
    } else {
        let reader = Arc::clone(reader);
        let keys = keys.clone();
        super::on_blocking_pool(async move { reader.read_many(&keys).await }).await??
    };
    if documents.len() != keys.len() {
        return Err(MemoryError::Store(StoreFault::Corrupt {
            what: format!(
                "read_many answered {} documents for {} keys",
                documents.len(),
                keys.len()
            ),
        })
        .into());
    }
    let authority = Authority::from(&access.namespace);
    let mut passages = Vec::new();
    let mut emitted: HashSet<(MemoryKey, PassageId)> = HashSet::new();
    let mut retained_bytes = 0u64;
    for ScoredCandidate { candidate, score } in candidates {
        let Some(&slot) = slot_of.get(candidate.key()) else {
            exclusions.unauthorized += 1;
            continue;
        };
        let document = documents[slot].as_ref();
        let made = match candidate {
            Candidate::Document(key) => match document {
                None => {
                    exclusions.stale += 1;
                    Vec::new()
                }
                Some(document) if document.key != *key || !document.is_visible_to(access) => {
                    exclusions.unauthorized += 1;
                    Vec::new()
                }
                Some(document) => {
                    let whole = passage(
                        document,
                        PassageId::from(&document.key.id),
                        document.content.text.clone(),
                        &authority,
                    );
                    match excerpts {
                        Some(rules) => excerpt_passages(whole, rules),
                        None => vec![whole],
                    }
                }
            },
            Candidate::Chunk(chunk) => match check_chunk(document, chunk, access) {
                ChunkCheck::Current { document, excerpt } => {
                    let passage_id = if excerpt.len() == document.content.text.len() {
                        PassageId::from(&document.key.id)
                    } else {
                        chunk_passage_id(profile, chunk.ordinal)?
                    };
                    vec![passage(
                        document,
                        passage_id,
                        excerpt.to_owned(),
                        &authority,
                    )]
                }
                ChunkCheck::Stale => {
                    exclusions.stale += 1;
                    Vec::new()
                }
                ChunkCheck::Unauthorized => {
                    exclusions.unauthorized += 1;
                    Vec::new()
                }
            },
        };
        for made in made {
            if !emitted.insert((candidate.key().clone(), made.passage_id.clone())) {
                continue;
            }
            let encoded = made.encoded_len().map_err(|_| {
                MemoryError::Store(StoreFault::Corrupt {
                    what: "a stored document cannot be encoded as JSON".to_owned(),
                })
            })?;
            retained_bytes = retained_bytes.saturating_add(encoded);
            if retained_bytes > limits.max_input_bytes() {
                return Err(RecallError::Budget {
                    limit: "max_input_bytes",
                    max: limits.max_input_bytes(),
                    actual: retained_bytes,
                });
            }
            passages.push((made, *score));
        }
    }
    Ok((passages, exclusions))
}
