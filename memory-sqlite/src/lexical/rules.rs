//! The rules of a search ([`LexicalRules`]): whether stop words are dropped, the columns' weights and
//! BM25's `k1` and `b`, with their defaults and ranges.
//!
//! - BM25 weighs the two columns apart: a question names the speaker of half the conversation's
//!   turns, so the speaker column is a tie-breaker among turns that match the content words, not a
//!   match on its own.
//! - The default `b` is 0.1, not FTS5's 0.75 (`memory-eval locomo-tune`, the eval crate's `locomo`
//!   module has the figures): on conversations a turn's length measures how talkative its speaker was,
//!   not how many topics it covers, and full length normalization buries the longer, informative
//!   turns under one-line replies that share a word with the question. `k1` hardly matters there and
//!   stays FTS5's.

use memory_core::MemoryError;

/// Whether [`LexicalRules::default`] drops stop words.
pub const DEFAULT_STOP_WORDS: bool = true;
/// BM25 weight of the text column in [`LexicalRules::default`].
pub const DEFAULT_TEXT_WEIGHT: f64 = 1.0;
/// BM25 weight of the speaker column in [`LexicalRules::default`].
pub const DEFAULT_SPEAKER_WEIGHT: f64 = 1.0;
/// Largest accepted column weight.
pub const MAX_COLUMN_WEIGHT: f64 = 1_000.0;
/// FTS5's `bm25()` term-frequency saturation `k1`.
pub const FTS5_K1: f64 = 1.2;
/// FTS5's `bm25()` length normalization `b`.
pub const FTS5_B: f64 = 0.75;
/// BM25's `k1` in [`LexicalRules::default`]: FTS5's, which tuning kept.
pub const DEFAULT_K1: f64 = FTS5_K1;
/// BM25's `b` in [`LexicalRules::default`], tuned (see the module docs).
pub const DEFAULT_B: f64 = 0.1;
/// Largest accepted `k1`.
pub const MAX_K1: f64 = 10.0;

/// How a query becomes terms and how its hits are ranked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LexicalRules {
    /// Drop [`memory_core::query::STOP_WORDS`] from the query (a query of stop words only then has no words).
    pub stop_words: bool,
    /// BM25 weight of the text column, finite, in `(0, MAX_COLUMN_WEIGHT]`.
    pub text_weight: f64,
    /// BM25 weight of the speaker column, finite, in `[0, MAX_COLUMN_WEIGHT]`.
    pub speaker_weight: f64,
    /// BM25's term-frequency saturation, finite, in `(0, MAX_K1]`.
    pub k1: f64,
    /// BM25's length normalization, in `[0, 1]`: 0 ignores a document's length, 1 divides its term
    /// frequencies by its length relative to the namespace's average.
    pub b: f64,
}

impl Default for LexicalRules {
    fn default() -> Self {
        Self {
            stop_words: DEFAULT_STOP_WORDS,
            text_weight: DEFAULT_TEXT_WEIGHT,
            speaker_weight: DEFAULT_SPEAKER_WEIGHT,
            k1: DEFAULT_K1,
            b: DEFAULT_B,
        }
    }
}

impl LexicalRules {
    /// Checks the weights' ranges.
    pub fn validate(&self) -> Result<(), MemoryError> {
        let in_range = |value: f64, low_open: bool| {
            value.is_finite()
                && value <= MAX_COLUMN_WEIGHT
                && if low_open { value > 0.0 } else { value >= 0.0 }
        };
        if !in_range(self.text_weight, true) {
            return Err(MemoryError::InvalidInput {
                field: "lexical text_weight",
                reason: format!("must be finite and in (0, {MAX_COLUMN_WEIGHT}]"),
            });
        }
        if !in_range(self.speaker_weight, false) {
            return Err(MemoryError::InvalidInput {
                field: "lexical speaker_weight",
                reason: format!("must be finite and in [0, {MAX_COLUMN_WEIGHT}]"),
            });
        }
        if !(self.k1 > 0.0 && self.k1 <= MAX_K1) {
            return Err(MemoryError::InvalidInput {
                field: "lexical k1",
                reason: format!("must be finite and in (0, {MAX_K1}]"),
            });
        }
        if !(0.0..=1.0).contains(&self.b) {
            return Err(MemoryError::InvalidInput {
                field: "lexical b",
                reason: "must be in [0, 1]".to_owned(),
            });
        }
        Ok(())
    }
}
