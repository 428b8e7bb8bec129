//! Corrections in every recall mode ([`memory_core::recall::corrections`]): after a mode's search
//! and revalidation, the corrections of what it found are brought into the candidates, read through
//! the same suppressing, scope-checked reads as every candidate, and the list is ordered by
//! memory-core's one rule (`order_by_corrections`): a correction just ahead of what it corrects, the
//! newest claim of a chain first. The corrected passage names its correction (`corrected_by`), which
//! the rendering labels.
//!
//! A correction that the search itself did not find scores 0 in the answer (`score` says what the
//! finding index reported, and it reported nothing for it); its place comes from the link alone.

use std::collections::HashSet;
use std::sync::Arc;

use memory_core::blocking::on_blocking_pool;
use memory_core::recall::corrections::{
    CorrectionIndex, CorrectionLink, Linked, MAX_CORRECTION_DEPTH, MAX_CORRECTION_IDS,
    order_by_corrections,
};
use memory_core::recall::ties::activity_time;
use memory_core::recall::{RecallError, SourceId};
use memory_core::{
    DocumentId, MemoryAccess, MemoryKey, MemoryReader, RecallCandidate, RevalidationLimits,
    revalidate,
};
use semantic_index::recall::{ExcerptRules, ScoredLookup, ScoredPassage, excerpt_passages};
use semantic_index::{ChunkingConfig, ProfileDigest};

/// `lookup` with the corrections of its passages brought in and placed, on the blocking pool (the
/// store's reads block): for a mode whose search ran elsewhere (the semantic index's). `store` is the
/// recall's store (its reads hide forgotten sources).
pub(crate) async fn place_corrections<R>(
    store: Arc<R>,
    access: MemoryAccess,
    lookup: ScoredLookup,
    revalidation: RevalidationLimits,
    excerpts: (ChunkingConfig, ProfileDigest),
) -> Result<ScoredLookup, RecallError>
where
    R: MemoryReader + CorrectionIndex + 'static,
{
    if !matches!(lookup, ScoredLookup::Found(_)) {
        return Ok(lookup);
    }
    on_blocking_pool(async move {
        place_corrections_here(&*store, &access, lookup, &revalidation, excerpts).await
    })
    .await?
}

/// [`place_corrections`] where the caller already is: a mode whose search runs on the blocking pool
/// (lexical, recent) places its corrections in the same task, with no second hop.
pub(crate) async fn place_corrections_here<R: MemoryReader + CorrectionIndex>(
    store: &R,
    access: &MemoryAccess,
    lookup: ScoredLookup,
    revalidation: &RevalidationLimits,
    excerpts: (ChunkingConfig, ProfileDigest),
) -> Result<ScoredLookup, RecallError> {
    let ScoredLookup::Found(passages) = lookup else {
        return Ok(lookup);
    };
    place(store, access, passages, revalidation, excerpts).await
}

async fn place<R: MemoryReader + CorrectionIndex>(
    store: &R,
    access: &MemoryAccess,
    mut passages: Vec<ScoredPassage>,
    revalidation: &RevalidationLimits,
    (chunking, profile): (ChunkingConfig, ProfileDigest),
) -> Result<ScoredLookup, RecallError> {
    let mut present: HashSet<DocumentId> = HashSet::with_capacity(passages.len());
    let mut frontier = Vec::new();
    for scored in &passages {
        let id = document_of(&scored.passage.source.id)?;
        if present.insert(id.clone()) {
            frontier.push(id);
        }
    }
    let rules = ExcerptRules {
        query: "",
        chunking,
        profile,
    };
    // Breadth first, one link of every chain per round: a chain longer than the rounds is cut
    // there, its older corrections keeping their ranking.
    for _ in 0..MAX_CORRECTION_DEPTH {
        frontier.truncate(MAX_CORRECTION_IDS);
        if frontier.is_empty() {
            break;
        }
        let found = store.corrections_of(access, &frontier).await?;
        let candidates: Vec<RecallCandidate> = found
            .into_iter()
            .flatten()
            .filter(|id| present.insert(id.clone()))
            .map(|id| {
                RecallCandidate::document(
                    MemoryKey {
                        namespace: access.namespace.clone(),
                        id,
                    },
                    None,
                )
            })
            .collect();
        if candidates.is_empty() {
            break;
        }
        let brought = revalidate(&candidates, access, store, revalidation).await?;
        frontier = Vec::with_capacity(brought.len());
        for passage in brought {
            frontier.push(document_of(&passage.source.id)?);
            passages.extend(
                excerpt_passages(passage, &rules)
                    .into_iter()
                    .take(1)
                    .map(|passage| ScoredPassage::new(passage, 0.0)),
            );
        }
    }
    let linked = passages
        .iter()
        .map(|scored| {
            Ok(Linked {
                document: document_of(&scored.passage.source.id)?,
                corrects: CorrectionLink::of(&scored.passage.content).map(|link| link.id),
                activity: activity_time(&scored.passage.content),
            })
        })
        .collect::<Result<Vec<_>, RecallError>>()?;
    let (order, corrected_by) = order_by_corrections(&linked);
    let mut slots: Vec<Option<ScoredPassage>> = passages.into_iter().map(Some).collect();
    let placed = order
        .into_iter()
        .filter_map(|index| {
            let mut scored = slots[index].take()?;
            scored.passage.corrected_by = corrected_by[index].as_ref().map(SourceId::from);
            Some(scored)
        })
        .collect();
    Ok(ScoredLookup::Found(placed))
}

/// The document a store passage cites (its source id is the document id).
fn document_of(source: &SourceId) -> Result<DocumentId, RecallError> {
    DocumentId::new(source.as_str()).map_err(RecallError::from)
}
