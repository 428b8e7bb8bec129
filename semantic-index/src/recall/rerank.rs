//! The rerank stage of hybrid recall: a learned linear score over signals recall already has and a
//! local cross-encoder's reading of each passage with the question, applied to the revalidated
//! passages (never to an indexed chunk: a corrected document's old text lends nothing to its new
//! one), after fusion and revalidation and before the near-tie and correction ordering.
//!
//! Each passage's [`RerankSignals`] are
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
//!   matches on its speaker and its neighbours but rarely answers anything;
//! - `cross`: where the process loads the cross-encoder ([`crate::cross_encoder`]: ms-marco-MiniLM-L-12-v2,
//!   int8, from a PyPI package), the rank of the passage among the ones it read
//!   ([`cross_rank_signals`]: 1, 1/2, 1/3...; 0 for the rest). The model reads the passage's text after
//!   its speaker's name ([`cross_encoder_text`]), and only the first [`CROSS_ENCODER_DEPTH`] documents in
//!   the order the stage gives them without it ([`cross_encoder_choice`]): each passage costs it about
//!   3 to 5 ms on the two-core machine of these measurements (about 15 ms on another without
//!   AVX-512), so reading all twenty a ten-item recall keeps would cost 65 ms there.
//!
//! and its score is `weights · signals` ([`RerankWeights::score`]): [`DEFAULT_RERANK_WEIGHTS`]
//! without the model, [`DEFAULT_CROSS_RERANK_WEIGHTS`] with it. Both are chosen by `memory-eval
//! locomo-tune` on LoCoMo's first five conversations (coordinate ascent over a grid, the fused weight
//! fixed at 1, the signals of relevance kept at 0 or above; the model's weight chosen after the
//! others, over the turns they rank first) and reported on the other five; `eval/locomo-tuned.json`
//! records them and a test checks the constants against it. Without the model: the speaker named in
//! the question (+0.3) and brevity (-0.5) on top of the fused score. With it: the model's rank
//! (+1.5), brevity (-0.5) and the embedding score (+0.1); the speaker's name then adds nothing,
//! since the model reads it.
//!
//! Measured in the tuning's simulation (2026-12-06, 1,536 questions; hit@1 / hit@5 / hit@10 /
//! evidence share@10): on the held-out conversations 6-10, without the stage 0.363 / 0.695 / 0.781
//! / 0.708, with it and no model 0.455 / 0.729 / 0.804 / 0.728, with the model 0.532 / 0.750 /
//! 0.811 / 0.736. The model fed the passage without its speaker's name earned a weight of 0.1 and
//! held-out hit@1 0.478; its logistic score, its logit and their min-max share each ranked below its
//! rank. Reading the first 8 or 10 documents instead of 12 lost hit@10 and share@10 (0.813-0.818,
//! 0.743-0.748 on all ten, below the 0.82 and 0.75); reading all 20 gained 0.006 hit@10 for
//! 65% more of the model's time. The depth is then 14, chosen through the product (`memory-eval locomo`,
//! 2026-12-07, the weights above) on conversations 1-5: hit@1 / hit@5 / hit@10 / share@10 0.534 /
//! 0.771 / 0.830 / 0.766 against 0.528 / 0.771 / 0.828 / 0.765 reading 12; held out (6-10) 0.530 /
//! 0.750 / 0.821 / 0.742 against 0.524 / 0.750 / 0.812 / 0.735. Through the product, see
//! `docs/benchmarks.md`.
//!
//! Tried and left out (same tuning, 2026-12-06): the share of the query's adjacent word pairs a
//! passage holds adjacent took weight 0; a signal for a question asking "when" answered by a
//! passage naming a time (a month, a weekday, "last week", a year) took 0.1 and moved held-out
//! hit@1 from 0.455 to 0.456 and hit@5 from 0.729 to 0.735 in the tuning's simulation, less than
//! the noise of 776 questions, for a rule about one kind of question.
//!
//! The stage is on by default for hybrid recall in every door (`rerank: false` turns it off, model
//! included); the model is loaded by every process but the one-shot hook (`--rerank-model`, see
//! memory-service's `RerankModel`).

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
    /// The cross-encoder's relevance of the passage's text to the query, in `(0, 1)`; 0 when no
    /// cross-encoder scored it ([`crate::cross_encoder`]).
    pub cross: f64,
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
    /// Weight of [`RerankSignals::cross`] (absent from weights written before the cross-encoder:
    /// 0).
    #[serde(default)]
    pub cross: f64,
}

/// The weights `memory-eval locomo-tune` chose (see the module docs).
pub const DEFAULT_RERANK_WEIGHTS: RerankWeights = RerankWeights {
    fused: 1.0,
    lexical: 0.0,
    embedding: 0.0,
    coverage: 0.0,
    speaker: 0.3,
    brevity: -0.5,
    cross: 0.0,
};

/// The weights `memory-eval locomo-tune` chose with the cross-encoder's score among the signals
/// (see the module docs); the stage uses them where a cross-encoder is loaded.
pub const DEFAULT_CROSS_RERANK_WEIGHTS: RerankWeights = RerankWeights {
    fused: 1.0,
    lexical: 0.0,
    embedding: 0.1,
    coverage: 0.0,
    speaker: 0.0,
    brevity: -0.5,
    cross: 1.5,
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
    pub fn named(&self) -> [(&'static str, f64); 7] {
        [
            ("fused", self.fused),
            ("lexical", self.lexical),
            ("embedding", self.embedding),
            ("coverage", self.coverage),
            ("speaker", self.speaker),
            ("brevity", self.brevity),
            ("cross", self.cross),
        ]
    }

    /// The weights as `(name, value)` pairs to change, in [`Self::named`]'s order (the tuning
    /// harness's search sets them one at a time).
    pub fn named_mut(&mut self) -> [(&'static str, &mut f64); 7] {
        [
            ("fused", &mut self.fused),
            ("lexical", &mut self.lexical),
            ("embedding", &mut self.embedding),
            ("coverage", &mut self.coverage),
            ("speaker", &mut self.speaker),
            ("brevity", &mut self.brevity),
            ("cross", &mut self.cross),
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
            + self.cross * signals.cross
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

/// How many documents the cross-encoder reads in one recall: the first ones in the order the stage
/// gives them without it ([`cross_encoder_choice`]). On LoCoMo, scoring the first 12 of 20 scored
/// as well as scoring all 20 on hit@1, hit@5 and share@10 (within 0.005) at 60% of the model's time;
/// 14 then beat 12 on the tuning half through the product (see the module docs), for a sixth more of
/// the model's reading.
pub const CROSS_ENCODER_DEPTH: usize = 14;

/// The items the cross-encoder reads: the first `depth` of `items` in the order `weights` give
/// them ([`order_by_rerank`], so ties keep their order), best first.
pub fn cross_encoder_choice<T: Clone>(
    items: &[(T, RerankSignals)],
    weights: &RerankWeights,
    depth: usize,
) -> Vec<T> {
    order_by_rerank(items.to_vec(), weights)
        .into_iter()
        .take(depth)
        .map(|(item, _)| item)
        .collect()
}

/// The cross signals of items the model scored `scores` (in the same order): `1 / (1 + rank)` of
/// each one's place among them by score, best first (ties by position), so the best read gets 1,
/// the next 1/2 and so on; an item the model did not read keeps 0. A rank, not the score itself:
/// the model's logits are calibrated for web passages, and on conversation turns their spread
/// says little beyond the order (measured: the rank beat the logistic of the logit, the logit
/// itself and its min-max share on LoCoMo's tuning half).
pub fn cross_rank_signals(scores: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|left, right| scores[*right].total_cmp(&scores[*left]));
    let mut signals = vec![0.0; scores.len()];
    for (rank, index) in order.into_iter().enumerate() {
        signals[index] = 1.0 / (1.0 + rank as f64);
    }
    signals
}

/// What the cross-encoder reads of a passage: its text after its first speaker's name, as a
/// transcript line (`"Melanie: I painted a sunset"`). A question names who said or did something,
/// and the model can match that name only if it sees it; the embedder reads the same speaker-then-text.
pub fn cross_encoder_text(text: &str, speaker: Option<&str>) -> String {
    match speaker.map(str::trim).filter(|speaker| !speaker.is_empty()) {
        Some(speaker) => format!("{speaker}: {text}"),
        None => text.to_owned(),
    }
}

/// [`cross_encoder_text`] of a revalidated passage: its current text and first speaker.
pub fn passage_cross_encoder_text(passage: &MemoryPassage) -> String {
    cross_encoder_text(
        &passage.content.text,
        passage
            .content
            .attributions
            .first()
            .map(|attribution| attribution.speaker.as_str()),
    )
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
    fn the_cross_signal_is_the_rank_and_the_choice_follows_the_weights() {
        assert_eq!(cross_rank_signals(&[0.2, 0.9, 0.2]), [0.5, 1.0, 1.0 / 3.0]);
        assert!(cross_rank_signals(&[]).is_empty());
        let signal = |fused: f64, brevity: f64| RerankSignals {
            fused,
            brevity,
            ..RerankSignals::default()
        };
        let items = [
            ("a", signal(0.9, 1.0)),
            ("b", signal(0.8, 0.0)),
            ("c", signal(0.1, 0.0)),
        ];
        let weights = RerankWeights {
            brevity: -0.5,
            ..DEFAULT_RERANK_WEIGHTS
        };
        // a scores 0.4, b 0.8, c 0.1: the two best by the weights, not by fusion.
        assert_eq!(cross_encoder_choice(&items, &weights, 2), ["b", "a"]);
        assert_eq!(cross_encoder_choice(&items, &weights, 9).len(), 3);
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
            cross: 0.5,
        };
        let weights = RerankWeights {
            fused: 2.0,
            lexical: 1.0,
            embedding: -4.0,
            coverage: 2.0,
            speaker: 0.5,
            brevity: 10.0,
            cross: 2.0,
        };
        assert!(
            (weights.score(&signals) - (1.0 + 1.0 - 1.0 + 1.0 + 0.5 + 1.0 + 1.0)).abs() < 1e-12
        );
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
