//! Fusion of a lexical and an embedding ranking into one document ranking, by one of two methods
//! ([`FusionMethod`]):
//!
//! - **Normalized score fusion** (the default): each list's scores are min-max normalized over the
//!   list (its best item 1, its last 0; a list whose scores are all equal gives each item 1), and an
//!   item's fused score is `(w_lex * lexical + w_emb * embedding) / (w_lex + w_emb)`, 0 for a list
//!   that does not hold it. The fused score lies in `[0, 1]`. Min-max is invariant under any positive
//!   affine change of a side's scores, so BM25's corpus-dependent scale and the cosine's never need
//!   calibrating against each other; what the fusion keeps, and rank fusion throws away, is how far
//!   apart a list's items are: a BM25 first place far above the rest outweighs an embedding list
//!   whose top cosines are all alike.
//! - **Reciprocal rank fusion** (Cormack, Clarke and Büttcher, 2009): an item at 1-based rank `r` of
//!   a list with weight `w` scores `w / (k + r)`, summed over the lists that rank it. Only ranks
//!   matter.
//!
//! Then, **context** ([`borrow_from_neighbours`]): each fused document borrows from the fused
//! scores of the documents written just before and after it in its namespace (the store's
//! [`memory_core::LexicalSearch::written_neighbours`], in the caller's scope), `context_weight`
//! for the nearest on each side, half that for the next, up to `context_reach` on each side. On a
//! conversation every turn is a document and a reply rarely repeats its question: "They're called
//! Peruvian lilies" answers "what flowers do you grow?" with none of its words and little of its
//! meaning, and the question turn just before it is what both rankings find. Only documents already
//! fused move (no neighbour is added without evidence of its own), and the scores are divided by
//! the total weight, so they stay in `[0, 1]`. Written order is the store's: each key's place is
//! its first write (a replacement keeps it), which is conversation order for turns written as they
//! are said, or imported in order. Measured through the product on LoCoMo (`memory-eval locomo`,
//! all ten conversations; then the held-out 6-10): without context hybrid hit@10 0.737 and share@10
//! 0.661 (0.729 / 0.644); the nearest neighbour alone at weight 0.3, 0.775 / 0.703 (0.762 /
//! 0.682); reach 2 (weights 0.3 and 0.15, the default), 0.792 / 0.722 (0.781 / 0.708), hit@5
//! 0.661 to 0.705, hit@1 0.396 to 0.391, warm p95 11.7 ms against 12.7 without. What it costs:
//! one store read of the fused documents' neighbours per hybrid recall (two index range reads a
//! document in SQLite, one statement in PostgreSQL). The lexical and embedding modes alone do not
//! use it (their figures are unchanged): in a throwaway harness over the same rankings, context
//! added to raw scores raised lexical hit@10 from 0.684 to 0.721 (weight 0.2 on each side) and
//! embedding from 0.518 to 0.546 (0.2, next turn only), less than it adds to the fused ranking;
//! those modes have no fusion stage to hold it, so it is left for a change of their own.
//!
//! The defaults are tuned, not the paper's: `memory-eval locomo-tune` chose them on LoCoMo's first five
//! conversations (real long chats, one document per turn) and `eval/locomo-tuned.json` records the
//! choice, which a test checks against these constants. Measured there (hit@10 / evidence share@10 on
//! conversations 1-5, then on the held-out 6-10; the eval crate's `locomo` module has the whole table):
//! - Method: normalized score fusion, 0.745 / 0.679, then 0.729 / 0.644 held out, against the best
//!   rank fusion's 0.733 / 0.664, then 0.697 / 0.617 (RRF k = 2, 1:1, same depths), and hit@1 0.413
//!   against 0.350 (0.379 against 0.291 held out): rank fusion cannot tell a lexical first place far
//!   ahead of the rest from one level with it, and on conversations a clear BM25 winner is usually
//!   the evidence.
//! - Weights: 0.6 lexical, 0.4 embedding, on a plateau: 0.5 and 0.7 lexical are 0.743 and 0.739;
//!   0.4 and 0.3 fall to 0.713 and 0.679 (the embedding side alone is the weaker ranking).
//! - Depths: 100 lexical hits and 100 embedding chunks. Both depths 20: 0.734 / 0.665, then 0.705 /
//!   0.623 held out; 40: 0.743 / 0.674; 100: 0.745 / 0.679. The product asks each side for at least
//!   twice the items a recall may cite, so these are floors.
//! - RRF's `k` (used only when [`FusionMethod::ReciprocalRank`] is chosen): small is much better.
//!   With one list weak (MiniLM alone finds the evidence in the top 10 about half the time), a large
//!   `k` flattens ranks so far that two mediocre ranks outvote one first place: k = 60 0.661 / 0.593,
//!   k = 2 0.733 / 0.664 at depths 100/100; k = 1 to 5 are level, from 10 up it falls. Its tuned
//!   weights are 1:1, not the score fusion's 0.6:0.4 defaults.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

use serde::{Deserialize, Serialize};

use super::rerank::{
    DEFAULT_CROSS_RERANK_WEIGHTS, DEFAULT_RERANK_WEIGHTS, MAX_RERANK_WEIGHT, RerankWeights,
};
use crate::error::SemanticError;

/// How hybrid recall combines its two rankings (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FusionMethod {
    /// Min-max normalized scores, weighted; the default, as tuned.
    NormalizedScores,
    /// Weighted reciprocal rank fusion with [`HybridParams::k`].
    ReciprocalRank,
}

/// The fusion method, as tuned.
pub const DEFAULT_FUSION: FusionMethod = FusionMethod::NormalizedScores;
/// The rank damping constant of reciprocal rank fusion, tuned (the paper's 60 lost 0.03 of hit@10).
pub const DEFAULT_RRF_K: f64 = 2.0;
/// Default weight of the lexical ranking, as tuned (its share of a normalized score).
pub const DEFAULT_LEXICAL_WEIGHT: f64 = 0.6;
/// Default weight of the embedding ranking, as tuned.
pub const DEFAULT_EMBEDDING_WEIGHT: f64 = 0.4;
/// Default number of lexical hits asked for, as tuned.
pub const DEFAULT_LEXICAL_CANDIDATES: usize = 100;
/// Default number of embedding chunks asked for, as tuned.
pub const DEFAULT_EMBEDDING_CANDIDATES: usize = 100;
/// Default weight of a fused document's nearest written-order neighbours' fused scores in its own,
/// as tuned (see the module docs: a conversation turn borrows from the turns around it).
pub const DEFAULT_CONTEXT_WEIGHT: f64 = 0.3;
/// Default number of written-order neighbours read on each side, as tuned.
pub const DEFAULT_CONTEXT_REACH: usize = 2;
/// Default number of fused documents kept (and so read once each by revalidation).
pub const DEFAULT_MAX_DOCUMENTS: usize = 16;
/// Largest accepted `lexical_candidates` and `max_documents`: revalidation reads every kept document in
/// one grouped read, so this bounds that read.
pub const MAX_HYBRID_DOCUMENTS: usize = 1_024;
/// Largest accepted `k` and weight; beyond this the fused scores lose precision without changing order.
pub const MAX_RRF_PARAMETER: f64 = 1e6;

/// Parameters of hybrid recall. The defaults are the values `memory-eval locomo-tune` chose (see the
/// module docs for what each did).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HybridParams {
    /// How the rankings are combined.
    pub method: FusionMethod,
    /// The rank damping constant of [`FusionMethod::ReciprocalRank`], finite and in `[0, 1e6]`;
    /// normalized score fusion does not use it.
    pub k: f64,
    /// Weight of the lexical ranking, finite and in `[0, 1e6]`.
    pub lexical_weight: f64,
    /// Weight of the embedding ranking, finite and in `[0, 1e6]`; the two weights may not both be 0.
    pub embedding_weight: f64,
    /// Lexical hits asked for, 1 to [`MAX_HYBRID_DOCUMENTS`].
    pub lexical_candidates: usize,
    /// Embedding chunks asked for, 1 to [`MAX_HYBRID_DOCUMENTS`]; the search asks for at least the
    /// query limits' `max_candidates`.
    pub embedding_candidates: usize,
    /// Fused documents kept, 1 to [`MAX_HYBRID_DOCUMENTS`].
    pub max_documents: usize,
    /// How much a fused document borrows from its nearest written-order neighbours' fused scores
    /// ([`borrow_from_neighbours`]; each further step halves it), finite and in `[0, 1e6]`; 0
    /// turns it off (and skips the store's neighbour read).
    pub context_weight: f64,
    /// Written-order neighbours read on each side, 0 to
    /// [`memory_core::storage::MAX_NEIGHBOUR_REACH`]; 0 turns context off.
    pub context_reach: usize,
    /// Whether the revalidated passages are reordered by the rerank stage
    /// ([`super::RerankWeights`], see the `rerank` module); off by default unless
    /// [`DEFAULT_RERANK`] says otherwise.
    pub rerank: bool,
    /// The rerank stage's weights, each finite and at most [`super::MAX_RERANK_WEIGHT`] in
    /// magnitude, where no cross-encoder scores the passages.
    pub rerank_weights: RerankWeights,
    /// The rerank stage's weights where a cross-encoder scores the passages, checked alike.
    pub cross_rerank_weights: RerankWeights,
}

/// Whether hybrid recall reranks by default: only if the stage raised hit@1 and hit@5 on both
/// halves of LoCoMo (the `rerank` module's docs give the figures).
pub const DEFAULT_RERANK: bool = true;

impl Default for HybridParams {
    fn default() -> Self {
        Self {
            method: DEFAULT_FUSION,
            k: DEFAULT_RRF_K,
            lexical_weight: DEFAULT_LEXICAL_WEIGHT,
            embedding_weight: DEFAULT_EMBEDDING_WEIGHT,
            lexical_candidates: DEFAULT_LEXICAL_CANDIDATES,
            embedding_candidates: DEFAULT_EMBEDDING_CANDIDATES,
            max_documents: DEFAULT_MAX_DOCUMENTS,
            context_weight: DEFAULT_CONTEXT_WEIGHT,
            context_reach: DEFAULT_CONTEXT_REACH,
            rerank: DEFAULT_RERANK,
            rerank_weights: DEFAULT_RERANK_WEIGHTS,
            cross_rerank_weights: DEFAULT_CROSS_RERANK_WEIGHTS,
        }
    }
}

impl HybridParams {
    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), SemanticError> {
        for (field, value) in [
            ("hybrid.k", self.k),
            ("hybrid.lexical_weight", self.lexical_weight),
            ("hybrid.embedding_weight", self.embedding_weight),
            ("hybrid.context_weight", self.context_weight),
        ] {
            if !(0.0..=MAX_RRF_PARAMETER).contains(&value) {
                return Err(SemanticError::invalid(
                    field,
                    format!("must be finite and in [0, {MAX_RRF_PARAMETER}]"),
                ));
            }
        }
        if self.lexical_weight == 0.0 && self.embedding_weight == 0.0 {
            return Err(SemanticError::invalid(
                "hybrid weights",
                "lexical_weight and embedding_weight may not both be 0",
            ));
        }
        for (field, value) in [
            ("hybrid.lexical_candidates", self.lexical_candidates),
            ("hybrid.embedding_candidates", self.embedding_candidates),
            ("hybrid.max_documents", self.max_documents),
        ] {
            if !(1..=MAX_HYBRID_DOCUMENTS).contains(&value) {
                return Err(SemanticError::invalid(
                    field,
                    format!("must be 1 to {MAX_HYBRID_DOCUMENTS}"),
                ));
            }
        }
        for (field, weights) in [
            ("hybrid.rerank_weights", &self.rerank_weights),
            ("hybrid.cross_rerank_weights", &self.cross_rerank_weights),
        ] {
            if !weights.is_valid() {
                return Err(SemanticError::invalid(
                    field,
                    format!("must be finite and at most {MAX_RERANK_WEIGHT} in magnitude"),
                ));
            }
        }
        if self.context_reach > memory_core::storage::MAX_NEIGHBOUR_REACH {
            return Err(SemanticError::invalid(
                "hybrid.context_reach",
                format!("must be 0 to {}", memory_core::storage::MAX_NEIGHBOUR_REACH),
            ));
        }
        Ok(())
    }

    /// Whether fused documents borrow from their neighbours (a weight and a reach above 0).
    pub fn uses_context(&self) -> bool {
        self.context_weight > 0.0 && self.context_reach > 0
    }
}

/// One fused item.
#[derive(Debug, Clone, PartialEq)]
pub struct Fused<K> {
    /// The item.
    pub item: K,
    /// Its fused score.
    pub score: f64,
    /// Its 1-based rank in the lexical list, if there.
    pub lexical_rank: Option<usize>,
    /// Its 1-based rank in the embedding list, if there.
    pub embedding_rank: Option<usize>,
    /// Its lexical score min-max normalized over the list (as normalized score fusion weighs it),
    /// 0 when the lexical list does not hold it; kept under either method for the rerank stage.
    pub lexical_score: f64,
    /// Its embedding score normalized the same way, 0 when the embedding list does not hold it.
    pub embedding_score: f64,
}

impl<K> Fused<K> {
    fn best_rank(&self) -> usize {
        self.lexical_rank
            .into_iter()
            .chain(self.embedding_rank)
            .min()
            .unwrap_or(usize::MAX)
    }
}

/// Fuses two rankings (best first, each item with its score, higher better; repeats after an item's
/// first occurrence are ignored) by `params`' method and weights. The result is ordered by fused score,
/// then by best rank in either list, then by the items' own order, so equal inputs always fuse the
/// same way. Weight 0 keeps a list's items without letting them score. Reciprocal rank fusion ignores
/// the scores; normalized score fusion takes a score that is not a number as the list's lowest.
pub fn fuse_rankings<K: Clone + Eq + Hash + Ord>(
    params: &HybridParams,
    lexical: &[(K, f64)],
    embedding: &[(K, f64)],
) -> Vec<Fused<K>> {
    let mut fused: Vec<Fused<K>> = Vec::with_capacity(lexical.len() + embedding.len());
    let mut position: HashMap<&K, usize> = HashMap::with_capacity(fused.capacity());
    let total_weight = params.lexical_weight + params.embedding_weight;
    for (is_lexical, list) in [(true, lexical), (false, embedding)] {
        let weight = if is_lexical {
            params.lexical_weight
        } else {
            params.embedding_weight
        };
        // The range of the list's first occurrences: a repeat neither ranks nor stretches it.
        let mut first = HashSet::with_capacity(list.len());
        let (low, high) = list
            .iter()
            .filter(|(item, _)| first.insert(item))
            .map(|(_, score)| *score)
            .filter(|score| score.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), score| {
                (low.min(score), high.max(score))
            });
        let mut rank = 0usize;
        for (item, score) in list {
            let slot = match position.get(item) {
                Some(&slot) => slot,
                None => {
                    position.insert(item, fused.len());
                    fused.push(Fused {
                        item: item.clone(),
                        score: 0.0,
                        lexical_rank: None,
                        embedding_rank: None,
                        lexical_score: 0.0,
                        embedding_score: 0.0,
                    });
                    fused.len() - 1
                }
            };
            let entry = &mut fused[slot];
            let seen = if is_lexical {
                &mut entry.lexical_rank
            } else {
                &mut entry.embedding_rank
            };
            if seen.is_some() {
                continue;
            }
            rank += 1;
            *seen = Some(rank);
            let share = normalized(*score, low, high);
            if is_lexical {
                entry.lexical_score = share;
            } else {
                entry.embedding_score = share;
            }
            entry.score += match params.method {
                FusionMethod::ReciprocalRank => weight / (params.k + rank as f64),
                FusionMethod::NormalizedScores => weight / total_weight * share,
            };
        }
    }
    sort_fused(&mut fused);
    fused
}

/// Orders fused items by score, then by best rank in either list, then by the items' own order.
fn sort_fused<K: Ord>(fused: &mut [Fused<K>]) {
    fused.sort_by(|left, right| {
        right
            .score
            .total_cmp(&left.score)
            .then_with(|| left.best_rank().cmp(&right.best_rank()))
            .then_with(|| left.item.cmp(&right.item))
    });
}

/// Lets each fused item borrow from its written-order neighbours: `neighbours[i]` names the items
/// written before and after `fused[i]`, nearest first (a store's
/// [`memory_core::LexicalSearch::written_neighbours`]). A neighbour `d` steps away weighs
/// `weight / 2^(d-1)`, and an item's score becomes its own plus each neighbour's weighted fused
/// score (0 for a neighbour that is not itself fused), divided by one plus the weights of every
/// step on both sides up to the longest side given, so scores stay in `[0, 1]` under normalized
/// score fusion. Then the list is sorted again as [`fuse_rankings`] sorts it. Only fused items
/// move: a neighbour is never added, so every item still has its own lexical or embedding
/// evidence.
///
/// A weight of 0 changes nothing; `neighbours` shorter than `fused` leaves the rest without
/// neighbours.
pub fn borrow_from_neighbours<K: Clone + Eq + Hash + Ord>(
    fused: &mut [Fused<K>],
    neighbours: &[(Vec<K>, Vec<K>)],
    weight: f64,
) {
    let reach = neighbours
        .iter()
        .map(|(before, after)| before.len().max(after.len()))
        .max()
        .unwrap_or(0);
    if weight == 0.0 || reach == 0 || fused.is_empty() {
        return;
    }
    // Halved at each further step: `weight`, `weight / 2`, `weight / 4`, ...
    let step = |distance: usize| weight * 0.5_f64.powi(distance.min(64) as i32 - 1);
    let total = 1.0 + 2.0 * (1..=reach).map(step).sum::<f64>();
    let own: HashMap<K, f64> = fused
        .iter()
        .map(|item| (item.item.clone(), item.score))
        .collect();
    let borrowed = |side: &[K]| -> f64 {
        side.iter()
            .enumerate()
            .map(|(index, item)| step(index + 1) * own.get(item).copied().unwrap_or(0.0))
            .sum()
    };
    for (index, item) in fused.iter_mut().enumerate() {
        let context = neighbours
            .get(index)
            .map_or(0.0, |(before, after)| borrowed(before) + borrowed(after));
        item.score = (item.score + context) / total;
    }
    sort_fused(fused);
}

/// `score` min-max normalized into `[0, 1]` over a list whose finite scores span `low..=high`: 1 for
/// every item of a list without spread, 0 for a score that is not a number.
fn normalized(score: f64, low: f64, high: f64) -> f64 {
    if score.is_nan() {
        0.0
    } else if high > low {
        ((score - low) / (high - low)).clamp(0.0, 1.0)
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(left: f64, right: f64) -> bool {
        (left - right).abs() < 1e-12
    }

    fn rrf(lexical_weight: f64, embedding_weight: f64) -> HybridParams {
        HybridParams {
            method: FusionMethod::ReciprocalRank,
            k: 1.0,
            lexical_weight,
            embedding_weight,
            ..HybridParams::default()
        }
    }

    /// A ranking of `items` with descending, evenly spaced scores (rank fusion ignores them).
    fn ranked<'a>(items: &[&'a str]) -> Vec<(&'a str, f64)> {
        items
            .iter()
            .enumerate()
            .map(|(index, item)| (*item, -(index as f64)))
            .collect()
    }

    #[test]
    fn rank_fusion_matches_a_hand_computed_case() {
        // k = 1, lexical weight 2, embedding weight 1.
        // lexical  : a(1) b(2) c(3)        -> a 2/2 = 1, b 2/3, c 2/4 = 0.5
        // embedding: c(1) d(2) a(3) c(dup) -> c 1/2, d 1/3, a 1/4
        // fused    : a 1.25, c 1.0, b 0.6667, d 0.3333
        let fused = fuse_rankings(
            &rrf(2.0, 1.0),
            &ranked(&["a", "b", "c"]),
            &ranked(&["c", "d", "a", "c"]),
        );
        let order: Vec<&str> = fused.iter().map(|item| item.item).collect();
        assert_eq!(order, ["a", "c", "b", "d"]);
        let scores: Vec<f64> = fused.iter().map(|item| item.score).collect();
        for (actual, expected) in scores.iter().zip([1.25, 1.0, 2.0 / 3.0, 1.0 / 3.0]) {
            assert!(close(*actual, expected), "{scores:?}");
        }
        assert_eq!(fused[1].lexical_rank, Some(3));
        assert_eq!(fused[1].embedding_rank, Some(1));
        assert_eq!(fused[3].lexical_rank, None);
    }

    #[test]
    fn score_fusion_matches_a_hand_computed_case() {
        // Weights 0.6 / 0.4 (shares, as they sum to 1).
        // lexical BM25  : a 12, b 4, c 2        -> normalized a 1, b 0.2, c 0
        // embedding cos : c 0.9, d 0.8, a 0.4   -> normalized c 1, d 0.8, a 0
        // fused         : a 0.6, c 0.4, d 0.32, b 0.12
        let params = HybridParams {
            method: FusionMethod::NormalizedScores,
            lexical_weight: 0.6,
            embedding_weight: 0.4,
            ..HybridParams::default()
        };
        let fused = fuse_rankings(
            &params,
            &[("a", 12.0), ("b", 4.0), ("c", 2.0)],
            &[("c", 0.9), ("d", 0.8), ("a", 0.4), ("c", 0.1)],
        );
        let order: Vec<&str> = fused.iter().map(|item| item.item).collect();
        assert_eq!(order, ["a", "c", "d", "b"]);
        let scores: Vec<f64> = fused.iter().map(|item| item.score).collect();
        for (actual, expected) in scores.iter().zip([0.6, 0.4, 0.32, 0.12]) {
            assert!((actual - expected).abs() < 1e-9, "{scores:?}");
        }
        // Any positive affine change of one side's scores fuses the same way.
        let rescaled = fuse_rankings(
            &params,
            &[("a", 120.0 + 7.0), ("b", 40.0 + 7.0), ("c", 20.0 + 7.0)],
            &[("c", 0.9), ("d", 0.8), ("a", 0.4)],
        );
        assert_eq!(
            rescaled.iter().map(|item| item.item).collect::<Vec<_>>(),
            order
        );
        // Doubling both weights changes nothing: they are shares.
        let doubled = HybridParams {
            lexical_weight: 1.2,
            embedding_weight: 0.8,
            ..params
        };
        let again = fuse_rankings(&doubled, &[("a", 12.0), ("b", 4.0)], &[("b", 0.5)]);
        assert!(
            close(again[0].score, 0.6) && close(again[1].score, 0.4),
            "{again:?}"
        );
    }

    #[test]
    fn a_list_without_spread_or_with_a_nan_score_still_fuses() {
        let params = HybridParams::default();
        // One lexical hit: it normalizes to 1; a NaN embedding score counts as the list's lowest.
        let fused = fuse_rankings(
            &params,
            &[("a", 3.0)],
            &[("b", f64::NAN), ("c", 0.5), ("d", 0.2)],
        );
        let order: Vec<&str> = fused.iter().map(|item| item.item).collect();
        assert_eq!(order, ["a", "c", "b", "d"]);
        assert!(fused.iter().all(|item| (0.0..=1.0).contains(&item.score)));
    }

    #[test]
    fn ties_break_by_best_rank_then_item() {
        let params = rrf(1.0, 1.0);
        // x: lexical 1 and embedding 2; y: lexical 2 and embedding 1: equal scores, equal best rank.
        let fused = fuse_rankings(&params, &ranked(&["y", "x", "z"]), &ranked(&["x", "y"]));
        let order: Vec<&str> = fused.iter().map(|item| item.item).collect();
        assert_eq!(order, ["x", "y", "z"]);
        for method in [FusionMethod::ReciprocalRank, FusionMethod::NormalizedScores] {
            let zero_lexical = HybridParams {
                method,
                lexical_weight: 0.0,
                ..params
            };
            let fused = fuse_rankings(&zero_lexical, &ranked(&["b", "a"]), &ranked(&["c"]));
            let order: Vec<&str> = fused.iter().map(|item| item.item).collect();
            assert_eq!(
                order,
                ["c", "b", "a"],
                "zero-weight items rank by their own rank ({method:?})"
            );
        }
    }

    #[test]
    fn neighbours_lend_their_fused_scores_by_distance() {
        // Fused: a 0.9, b 0.5, c 0.4, d 0.1; written order x a c b d (x not fused).
        // weight 0.4: one step 0.4, two steps 0.2; total 1 + 2 * (0.4 + 0.2) = 2.2.
        // a: (0.9 + 0.4*0 [x] + 0.4*0.4 [c] + 0.2*0.5 [b]) / 2.2 = 1.16 / 2.2
        // c: (0.4 + 0.4*0.9 + 0.4*0.5 + 0.2*0.1 [d]) / 2.2 = 0.98 / 2.2 (x is two before: 0)
        // b: (0.5 + 0.4*0.4 + 0.2*0.9 + 0.4*0.1) / 2.2 = 0.88 / 2.2
        // d: (0.1 + 0.4*0.5 + 0.2*0.4) / 2.2 = 0.38 / 2.2
        let items = [("a", 0.9), ("b", 0.5), ("c", 0.4), ("d", 0.1)];
        let mut fused: Vec<Fused<&str>> = items
            .iter()
            .enumerate()
            .map(|(rank, (item, score))| Fused {
                item: *item,
                score: *score,
                lexical_rank: Some(rank + 1),
                embedding_rank: None,
                lexical_score: 0.0,
                embedding_score: 0.0,
            })
            .collect();
        let neighbours = vec![
            (vec!["x"], vec!["c", "b"]),
            (vec!["c", "a"], vec!["d"]),
            (vec!["a", "x"], vec!["b", "d"]),
            (vec!["b", "c"], vec![]),
        ];
        borrow_from_neighbours(&mut fused, &neighbours, 0.4);
        let order: Vec<&str> = fused.iter().map(|item| item.item).collect();
        assert_eq!(order, ["a", "c", "b", "d"]);
        for (item, expected) in fused.iter().zip([1.16, 0.98, 0.88, 0.38]) {
            assert!(close(item.score, expected / 2.2), "{fused:?}");
        }
        // The one-line answer right after a strong match overtakes a weak match of its own.
        let mut fused = vec![
            Fused {
                item: "question",
                score: 1.0,
                lexical_rank: Some(1),
                embedding_rank: None,
                lexical_score: 0.0,
                embedding_score: 0.0,
            },
            Fused {
                item: "elsewhere",
                score: 0.5,
                lexical_rank: Some(2),
                embedding_rank: None,
                lexical_score: 0.0,
                embedding_score: 0.0,
            },
            Fused {
                item: "answer",
                score: 0.3,
                lexical_rank: None,
                embedding_rank: Some(1),
                lexical_score: 0.0,
                embedding_score: 0.0,
            },
        ];
        let neighbours = vec![
            (vec![], vec!["answer"]),
            (vec![], vec![]),
            (vec!["question"], vec![]),
        ];
        let before = fused.clone();
        borrow_from_neighbours(&mut fused, &neighbours, 0.0);
        assert_eq!(fused, before, "a weight of 0 changes nothing");
        borrow_from_neighbours(&mut fused, &neighbours, 0.5);
        let order: Vec<&str> = fused.iter().map(|item| item.item).collect();
        assert_eq!(order, ["question", "answer", "elsewhere"]);
        assert!(fused.iter().all(|item| (0.0..=1.0).contains(&item.score)));
    }

    #[test]
    fn parameters_are_validated() {
        assert!(HybridParams::default().validate().is_ok());
        for params in [
            HybridParams {
                k: f64::NAN,
                ..HybridParams::default()
            },
            HybridParams {
                lexical_weight: -1.0,
                ..HybridParams::default()
            },
            HybridParams {
                lexical_weight: 0.0,
                embedding_weight: 0.0,
                ..HybridParams::default()
            },
            HybridParams {
                embedding_weight: f64::INFINITY,
                ..HybridParams::default()
            },
            HybridParams {
                lexical_candidates: 0,
                ..HybridParams::default()
            },
            HybridParams {
                max_documents: MAX_HYBRID_DOCUMENTS + 1,
                ..HybridParams::default()
            },
            HybridParams {
                context_weight: -0.1,
                ..HybridParams::default()
            },
            HybridParams {
                context_reach: memory_core::storage::MAX_NEIGHBOUR_REACH + 1,
                ..HybridParams::default()
            },
        ] {
            assert!(params.validate().is_err(), "{params:?}");
        }
    }
}
