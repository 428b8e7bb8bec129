//! Reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009) of a lexical and an embedding ranking.
//!
//! An item at 1-based rank `r` of a list with weight `w` scores `w / (k + r)`; an item's fused score is
//! the sum over the lists that rank it. Only ranks matter, so BM25 scores and cosine similarities, which
//! live on unrelated scales, never need calibrating against each other.
//!
//! The defaults are tuned, not the paper's: `memory-eval locomo-tune` chose them on LoCoMo's first five
//! conversations (real long chats, one document per turn) and `eval/locomo-tuned.json` records the
//! choice, which a test checks against these constants. Measured there (hit@10 / evidence share@10 on
//! conversations 1-5, then on the held-out 6-10):
//! - `k`: small is much better. With one candidate list shallow and the other weak (MiniLM alone finds
//!   the evidence in the top 10 about half the time), a large `k` flattens ranks so far that two
//!   mediocre ranks outvote one first place: k = 60 0.691 / 0.621, then 0.659 / 0.584 held out;
//!   k = 1 0.720 / 0.651, then 0.702 / 0.619. k = 1 and 2 are level; from 5 up it falls steadily.
//! - Weights: equal. The lexical ranking is the better one on conversations, but weighting it 1.25-2
//!   trades hit@5 for hit@1 and leaves hit@10 where it is; 0.5-0.75 loses everywhere.
//! - Depths: 20 lexical hits and 40 embedding chunks. Deeper embedding lists add a little (the
//!   embedding side's evidence often ranks 20-40); 100 adds nothing. The product asks each side for at
//!   least twice the items a recall may cite, so these are floors.
//! - Normalized score fusion (min-max scores, 0.6 lexical) won 0.008 of the objective on the tuning
//!   half and nothing on the held-out half; it depends on the score scales of both sides (BM25 values
//!   change with corpus and query length), so rank fusion stays.

use std::collections::HashMap;
use std::hash::Hash;

use crate::error::SemanticError;

/// The rank damping constant, tuned (see the module docs; the paper's 60 lost 0.03 of hit@10).
pub const DEFAULT_RRF_K: f64 = 1.0;
/// Default weight of each ranking: equal, as tuned (SPEC §4).
pub const DEFAULT_RANKING_WEIGHT: f64 = 1.0;
/// Default number of lexical hits asked for, as tuned.
pub const DEFAULT_LEXICAL_CANDIDATES: usize = 20;
/// Default number of embedding chunks asked for, as tuned.
pub const DEFAULT_EMBEDDING_CANDIDATES: usize = 40;
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
    /// The rank damping constant, finite and in `[0, 1e6]`.
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
}

impl Default for HybridParams {
    fn default() -> Self {
        Self {
            k: DEFAULT_RRF_K,
            lexical_weight: DEFAULT_RANKING_WEIGHT,
            embedding_weight: DEFAULT_RANKING_WEIGHT,
            lexical_candidates: DEFAULT_LEXICAL_CANDIDATES,
            embedding_candidates: DEFAULT_EMBEDDING_CANDIDATES,
            max_documents: DEFAULT_MAX_DOCUMENTS,
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
        Ok(())
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

/// Fuses two rankings (best first; repeats after an item's first occurrence are ignored) with `params`'
/// `k` and weights. The result is ordered by fused score, then by best rank in either list, then by the
/// items' own order, so equal inputs always fuse the same way. Weight 0 keeps a list's items without
/// letting them score.
pub fn reciprocal_rank_fusion<K: Clone + Eq + Hash + Ord>(
    params: &HybridParams,
    lexical: &[K],
    embedding: &[K],
) -> Vec<Fused<K>> {
    let mut fused: Vec<Fused<K>> = Vec::with_capacity(lexical.len() + embedding.len());
    let mut position: HashMap<&K, usize> = HashMap::with_capacity(fused.capacity());
    for (is_lexical, list) in [(true, lexical), (false, embedding)] {
        let weight = if is_lexical {
            params.lexical_weight
        } else {
            params.embedding_weight
        };
        let mut rank = 0usize;
        for item in list {
            let slot = match position.get(item) {
                Some(&slot) => slot,
                None => {
                    position.insert(item, fused.len());
                    fused.push(Fused {
                        item: item.clone(),
                        score: 0.0,
                        lexical_rank: None,
                        embedding_rank: None,
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
            entry.score += weight / (params.k + rank as f64);
        }
    }
    fused.sort_by(|left, right| {
        right
            .score
            .total_cmp(&left.score)
            .then_with(|| left.best_rank().cmp(&right.best_rank()))
            .then_with(|| left.item.cmp(&right.item))
    });
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(left: f64, right: f64) -> bool {
        (left - right).abs() < 1e-12
    }

    #[test]
    fn fusion_matches_a_hand_computed_case() {
        // k = 1, lexical weight 2, embedding weight 1.
        // lexical  : a(1) b(2) c(3)        -> a 2/2 = 1, b 2/3, c 2/4 = 0.5
        // embedding: c(1) d(2) a(3) c(dup) -> c 1/2, d 1/3, a 1/4
        // fused    : a 1.25, c 1.0, b 0.6667, d 0.3333
        let params = HybridParams {
            k: 1.0,
            lexical_weight: 2.0,
            embedding_weight: 1.0,
            ..HybridParams::default()
        };
        let fused = reciprocal_rank_fusion(&params, &["a", "b", "c"], &["c", "d", "a", "c"]);
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
    fn ties_break_by_best_rank_then_item() {
        let params = HybridParams::default();
        // x: lexical 1 and embedding 2; y: lexical 2 and embedding 1: equal scores, equal best rank.
        let fused = reciprocal_rank_fusion(&params, &["y", "x", "z"], &["x", "y"]);
        let order: Vec<&str> = fused.iter().map(|item| item.item).collect();
        assert_eq!(order, ["x", "y", "z"]);
        let zero_lexical = HybridParams {
            lexical_weight: 0.0,
            ..params
        };
        let fused = reciprocal_rank_fusion(&zero_lexical, &["b", "a"], &["c"]);
        let order: Vec<&str> = fused.iter().map(|item| item.item).collect();
        assert_eq!(
            order,
            ["c", "b", "a"],
            "zero-weight items rank by their own rank"
        );
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
        ] {
            assert!(params.validate().is_err(), "{params:?}");
        }
    }
}
