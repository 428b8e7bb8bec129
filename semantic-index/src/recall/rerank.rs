//! The rerank stage of hybrid recall: a learned linear score over signals recall already has, applied
//! to the revalidated passages (never to an indexed chunk: a corrected document's old text lends
//! nothing to its new one), after fusion and revalidation and before the near-tie and correction
//! ordering.
//!
//! Why not a cross-encoder: no package registry this project may fetch from ships cross-encoder
//! weights (searched 2026-12: PyPI's `flashrank` and `sentence-transformers` fetch theirs from a
//! model hub at run time; no `ms-marco` or `bge-reranker` package carries ONNX files on PyPI, npm,
//! crates.io or Debian), and `scripts/fetch-assets.sh` fetches only from registries. So the stage
//! is the fallback, a learned fusion: each passage's [`RerankSignals`] are
//!
//! - `fused`: the document's fused score after its neighbours' share (what ranks without the stage);
//! - `lexical` and `embedding`: its normalized score in each ranking (0 where that ranking missed
//!   it), so the stage may weigh their agreement differently from the fusion's fixed shares;
//! - `coverage`: the share of the query's words (the one query parser's, stop words dropped) that
//!   the passage's current text holds, compared by their Snowball English stems: BM25 saturates each
//!   word's count but barely rewards holding every word, which a question's evidence often does;
//! - `speaker`: 1 when a word of the passage's first speaker's name is one of the query's words (a
//!   question about what someone said or did names them);
//! - `brevity`: `1 / (1 + words / 8)` of the passage's text: a one-line reply ("Yes, totally!")
//!   matches on its speaker and its neighbours but rarely answers anything.
//!
//! and its score is `weights · signals` ([`RerankWeights::score`]). The weights are chosen by
//! `memory-eval locomo-tune` on LoCoMo's first five conversations (coordinate ascent over a grid,
//! the fused weight fixed at 1, the signals of relevance kept at 0 or above) and reported on the
//! other five; `eval/locomo-tuned.json` records them and a test checks [`DEFAULT_RERANK_WEIGHTS`]
//! against it. The choice: the speaker named in the question (+0.3) and brevity (-0.5) on top of the
//! fused score; lexical, embedding and coverage took 0 (what they add, fusion already holds).
//!
//! Measured 2026-12-06 through the product (`memory-eval locomo`, all ten conversations, every turn
//! a document, 1,536 questions): hybrid hit@1 / hit@5 / hit@10 / evidence share@10 from 0.389 /
//! 0.702 / 0.789 / 0.719 without the stage to 0.462 / 0.742 / 0.811 / 0.741 with it; on the held-out
//! conversations 6-10, from 0.357 / 0.693 / 0.778 / 0.705 to 0.451 / 0.732 / 0.804 / 0.729; every
//! category's hit@1 rose (multi-hop 0.280 to 0.379, temporal 0.480 to 0.551, open-domain 0.141 to
//! 0.185, single-hop 0.417 to 0.486). Warm p50 / p95 5.18 / 11.65 ms with it, 4.99 / 10.89 without
//! (in process); through `memory serve` and an MCP client the difference was within the machine's
//! noise. It raised hit@1 and hit@5 on both halves, so hybrid recall reranks by default
//! ([`super::DEFAULT_RERANK`]) in every door: the tools, `memory_search`, the hook (one-shot and
//! served) and the assembled context. It loads nothing (no weights file, no model beyond the
//! embedder hybrid recall already runs) and scores a few dozen passages' words, so the one-shot
//! hook's path costs what it did. `rerank: false` on a recall turns it off.
//!
//! Tried and left out (same tuning, 2026-12-06): the share of the query's adjacent word pairs a
//! passage holds adjacent took weight 0; a signal for a question asking "when" answered by a
//! passage naming a time (a month, a weekday, "last week", a year) took 0.1 and moved held-out
//! hit@1 from 0.455 to 0.456 and hit@5 from 0.729 to 0.735 in the tuning's simulation, less than
//! the noise of 776 questions, for a rule about one kind of question. Reordering more fused
//! documents than recall keeps does not pay either (measured before the relevance weights were
//! held at 0 and up): over 24 and 32 documents the simulated hit@1 on all ten conversations was
//! 0.462 against 0.472 over 16, hit@10 0.819 and 0.823 against 0.816.

use std::collections::HashSet;

use memory_core::MemoryPassage;
use memory_core::query::{StopWords, query_words, split_words};
use rust_stemmers::{Algorithm, Stemmer};
use serde::{Deserialize, Serialize};

use super::fusion::Fused;

/// What the stage reads of one passage (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RerankSignals {
    /// The document's fused score, after its neighbours' share.
    pub fused: f64,
    /// Its normalized lexical score, 0 when the lexical ranking missed it.
    pub lexical: f64,
    /// Its normalized embedding score, 0 when the embedding ranking missed it.
    pub embedding: f64,
    /// Share of the query's words in the passage's text, in `[0, 1]`.
    pub coverage: f64,
    /// 1 when the passage's speaker is named in the query, else 0.
    pub speaker: f64,
    /// `1 / (1 + words / 8)` of the passage's text, in `(0, 1]`.
    pub brevity: f64,
}

impl RerankSignals {
    /// A fused document's signals from fusion (its fused, lexical and embedding scores), the
    /// text signals left at 0 for [`Self::with_text`].
    pub fn of_fused<K>(item: &Fused<K>) -> Self {
        Self {
            fused: item.score,
            lexical: item.lexical_score,
            embedding: item.embedding_score,
            ..Self::default()
        }
    }

    /// These fusion signals with the text signals of `text` ([`RerankQuery::text_signals`]).
    pub fn with_text(self, text: RerankSignals) -> Self {
        Self {
            coverage: text.coverage,
            speaker: text.speaker,
            brevity: text.brevity,
            ..self
        }
    }
}

/// The stage's weights, one per signal.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RerankWeights {
    /// Weight of [`RerankSignals::fused`].
    pub fused: f64,
    /// Weight of [`RerankSignals::lexical`].
    pub lexical: f64,
    /// Weight of [`RerankSignals::embedding`].
    pub embedding: f64,
    /// Weight of [`RerankSignals::coverage`].
    pub coverage: f64,
    /// Weight of [`RerankSignals::speaker`].
    pub speaker: f64,
    /// Weight of [`RerankSignals::brevity`].
    pub brevity: f64,
}

/// The weights `memory-eval locomo-tune` chose (see the module docs).
pub const DEFAULT_RERANK_WEIGHTS: RerankWeights = RerankWeights {
    fused: 1.0,
    lexical: 0.0,
    embedding: 0.0,
    coverage: 0.0,
    speaker: 0.3,
    brevity: -0.5,
};

/// Largest accepted weight magnitude.
pub const MAX_RERANK_WEIGHT: f64 = 1e3;

impl Default for RerankWeights {
    fn default() -> Self {
        DEFAULT_RERANK_WEIGHTS
    }
}

impl RerankWeights {
    /// The weights as `(name, value)` pairs, in the signals' order.
    pub fn named(&self) -> [(&'static str, f64); 6] {
        [
            ("fused", self.fused),
            ("lexical", self.lexical),
            ("embedding", self.embedding),
            ("coverage", self.coverage),
            ("speaker", self.speaker),
            ("brevity", self.brevity),
        ]
    }

    /// The weights as `(name, value)` pairs to change, in [`Self::named`]'s order (the tuning
    /// harness's search sets them one at a time).
    pub fn named_mut(&mut self) -> [(&'static str, &mut f64); 6] {
        [
            ("fused", &mut self.fused),
            ("lexical", &mut self.lexical),
            ("embedding", &mut self.embedding),
            ("coverage", &mut self.coverage),
            ("speaker", &mut self.speaker),
            ("brevity", &mut self.brevity),
        ]
    }

    /// A passage's score: the weighted sum of its signals.
    pub fn score(&self, signals: &RerankSignals) -> f64 {
        self.fused * signals.fused
            + self.lexical * signals.lexical
            + self.embedding * signals.embedding
            + self.coverage * signals.coverage
            + self.speaker * signals.speaker
            + self.brevity * signals.brevity
    }

    /// Whether every weight is finite and at most [`MAX_RERANK_WEIGHT`] in magnitude.
    pub fn is_valid(&self) -> bool {
        self.named()
            .iter()
            .all(|(_, weight)| weight.is_finite() && weight.abs() <= MAX_RERANK_WEIGHT)
    }
}

/// Orders `items` by `weights`' score of their signals, best first, each with its score: a stable
/// sort, so items of equal score keep their order (the fused one). Hybrid recall and the tuning
/// harness both order through here.
pub fn order_by_rerank<T>(
    items: Vec<(T, RerankSignals)>,
    weights: &RerankWeights,
) -> Vec<(T, f64)> {
    let mut scored: Vec<(T, f64)> = items
        .into_iter()
        .map(|(item, signals)| (item, weights.score(&signals)))
        .collect();
    scored.sort_by(|left, right| right.1.total_cmp(&left.1));
    scored
}

/// The query side of the stage, parsed once per recall: the query's words and their stems.
#[derive(Debug, Clone)]
pub struct RerankQuery {
    words: HashSet<String>,
    stems: HashSet<String>,
}

fn stemmer() -> Stemmer {
    Stemmer::create(Algorithm::English)
}

impl RerankQuery {
    /// Parses `query` by the one query parser (stop words dropped); a query it refuses holds no
    /// words (its passages then differ only by the other signals).
    pub fn new(query: &str) -> Self {
        let stemmer = stemmer();
        let words: HashSet<String> = query_words(query, StopWords::Drop)
            .unwrap_or_default()
            .into_iter()
            .collect();
        let stems = words
            .iter()
            .map(|word| stemmer.stem(word).into_owned())
            .collect();
        Self { words, stems }
    }

    /// The text signals of a passage of `text` said by `speaker` (`fused`, `lexical` and
    /// `embedding` left at 0 for the caller).
    pub fn text_signals(&self, text: &str, speaker: Option<&str>) -> RerankSignals {
        let stemmer = stemmer();
        let mut found: HashSet<String> = HashSet::new();
        let mut words = 0usize;
        for word in split_words(text) {
            words += 1;
            if found.len() < self.stems.len() {
                let stem = stemmer.stem(&word.to_lowercase()).into_owned();
                if self.stems.contains(&stem) {
                    found.insert(stem);
                }
            }
        }
        let coverage = if self.stems.is_empty() {
            0.0
        } else {
            found.len() as f64 / self.stems.len() as f64
        };
        let speaker = speaker.is_some_and(|speaker| {
            split_words(speaker).any(|word| self.words.contains(&word.to_lowercase()))
        });
        RerankSignals {
            coverage,
            speaker: if speaker { 1.0 } else { 0.0 },
            brevity: 1.0 / (1.0 + words as f64 / 8.0),
            ..RerankSignals::default()
        }
    }

    /// [`Self::text_signals`] of a revalidated passage: its current text and first speaker.
    pub fn passage_signals(&self, passage: &MemoryPassage) -> RerankSignals {
        let speaker = passage
            .content
            .attributions
            .first()
            .map(|attribution| attribution.speaker.as_str());
        self.text_signals(&passage.content.text, speaker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_signals_compare_stems_and_name_the_speaker() {
        let query = RerankQuery::new("What flowers does Melanie grow in her garden?");
        let signals = query.text_signals(
            "I grew lilies; the flower beds are my garden",
            Some("Melanie"),
        );
        // Query words: flowers, melanie, grow, garden (stop words dropped); stems found: flower,
        // grow (grew does not stem to grow), garden.
        assert!((signals.coverage - 2.0 / 4.0).abs() < 1e-12, "{signals:?}");
        assert_eq!(signals.speaker, 1.0);
        let other = query.text_signals("Yes!", Some("Caroline"));
        assert_eq!(other.coverage, 0.0);
        assert_eq!(other.speaker, 0.0);
        assert!(other.brevity > signals.brevity);
        let none = RerankQuery::new("the of and");
        assert_eq!(none.text_signals("the garden", None).coverage, 0.0);
    }

    #[test]
    fn the_score_is_the_weighted_sum_and_weights_are_checked() {
        let signals = RerankSignals {
            fused: 0.5,
            lexical: 1.0,
            embedding: 0.25,
            coverage: 0.5,
            speaker: 1.0,
            brevity: 0.1,
        };
        let weights = RerankWeights {
            fused: 2.0,
            lexical: 1.0,
            embedding: -4.0,
            coverage: 2.0,
            speaker: 0.5,
            brevity: 10.0,
        };
        assert!((weights.score(&signals) - (1.0 + 1.0 - 1.0 + 1.0 + 0.5 + 1.0)).abs() < 1e-12);
        assert!(weights.is_valid());
        assert!(
            !RerankWeights {
                coverage: f64::NAN,
                ..weights
            }
            .is_valid()
        );
        assert!(
            !RerankWeights {
                speaker: 2e3,
                ..weights
            }
            .is_valid()
        );
    }
}
