//! Lexical search over current, non-withdrawn documents: FTS5 with the `porter unicode61` tokenizer over
//! the text and the attributions' speakers, ranked by BM25.
//!
//! - Query text is words, never FTS5 syntax: it is cut at every character that is not alphanumeric, and
//!   each remaining word becomes a double-quoted phrase; the phrases are joined with `OR`. Quotes,
//!   operators (`NEAR`, `AND`, `NOT`, `*`, `^`, `:`, parentheses) cannot survive the cut, so no query can
//!   fail to parse or reach past the filters. A query with no word returns no hit.
//! - Words are compared without case (FTS5's `unicode61` folds case), so `Ada` and `ada` are one term.
//! - English stop words ([`STOP_WORDS`]) are dropped from the query, unless every word is one (then they
//!   are all kept, so "who is she" still searches). An `OR` over "what", "did", "the" matches nearly
//!   every document: it lets function words outvote the content words in BM25's sum and makes FTS5 score
//!   most of the corpus, so dropping them is both the better ranking and the faster search.
//! - BM25 weighs the two columns apart ([`LexicalRules`]): a question names the speaker of half the
//!   conversation's turns, so the speaker column is a tie-breaker among turns that match the content
//!   words, not a match on its own.
//! - At most [`MAX_QUERY_TERMS`] distinct words are used (the first ones); longer queries are refused
//!   above [`MAX_QUERY_BYTES`] before any work.
//! - Namespace, scope and withdrawal are filtered inside the SQL statement, joined to the match, so a hit
//!   outside the caller's namespace or scope is never produced, let alone dropped afterwards.
//! - The score is the negated `bm25()` value: higher is better. Ties are broken by insertion order.
//!
//! The defaults are the ones `memory-eval locomo-tune` chose on LoCoMo's first five conversations (see
//! the eval crate's `locomo` module for each lever's measured effect); `eval/locomo-tuned.json` records
//! the choice and a test checks that these defaults match it.

use memory_core::{LexicalHit, MemoryAccess, MemoryError};
use rusqlite::Connection;

use crate::error::sqlite;
use crate::rows::{decode_key, decode_revision};

pub use memory_core::storage::{MAX_QUERY_BYTES, MAX_QUERY_TERMS, MAX_SEARCH_HITS};

/// Whether [`LexicalRules::default`] drops stop words.
pub const DEFAULT_STOP_WORDS: bool = true;
/// BM25 weight of the text column in [`LexicalRules::default`].
pub const DEFAULT_TEXT_WEIGHT: f64 = 1.0;
/// BM25 weight of the speaker column in [`LexicalRules::default`].
pub const DEFAULT_SPEAKER_WEIGHT: f64 = 1.0;
/// Largest accepted column weight.
pub const MAX_COLUMN_WEIGHT: f64 = 1_000.0;

/// English function words dropped from queries (sorted, lower case): the classic list of pronouns,
/// articles, auxiliaries, prepositions, conjunctions and question words, plus the fragments that
/// cutting contractions at the apostrophe leaves (`didn`, `t`, `s`, ...). Content words, months and
/// numbers are never in it.
pub const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "couldn",
    "d",
    "did",
    "didn",
    "do",
    "does",
    "doesn",
    "doing",
    "don",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn",
    "has",
    "hasn",
    "have",
    "haven",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "isn",
    "it",
    "its",
    "itself",
    "just",
    "ll",
    "m",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "she",
    "should",
    "shouldn",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "was",
    "wasn",
    "we",
    "were",
    "weren",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "won",
    "would",
    "wouldn",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Whether `word` (any case) is one of [`STOP_WORDS`].
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS
        .binary_search(&word.to_lowercase().as_str())
        .is_ok()
}

/// How a query becomes an FTS5 match and how its hits are ranked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LexicalRules {
    /// Drop [`STOP_WORDS`] from the query (all are kept when nothing else is left).
    pub stop_words: bool,
    /// BM25 weight of the text column, finite, in `(0, MAX_COLUMN_WEIGHT]`.
    pub text_weight: f64,
    /// BM25 weight of the speaker column, finite, in `[0, MAX_COLUMN_WEIGHT]`.
    pub speaker_weight: f64,
}

impl Default for LexicalRules {
    fn default() -> Self {
        Self {
            stop_words: DEFAULT_STOP_WORDS,
            text_weight: DEFAULT_TEXT_WEIGHT,
            speaker_weight: DEFAULT_SPEAKER_WEIGHT,
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
        Ok(())
    }
}

/// The FTS5 match expression for a user query under the default rules, or `None` when it holds no
/// word.
pub fn match_expression(query: &str) -> Result<Option<String>, MemoryError> {
    match_expression_with(query, &LexicalRules::default())
}

/// The FTS5 match expression for a user query under `rules`, or `None` when it holds no word.
pub fn match_expression_with(
    query: &str,
    rules: &LexicalRules,
) -> Result<Option<String>, MemoryError> {
    rules.validate()?;
    if query.len() > MAX_QUERY_BYTES {
        return Err(MemoryError::TooLarge {
            limit: "lexical query bytes",
            max: MAX_QUERY_BYTES as u64,
            actual: query.len() as u64,
        });
    }
    let words = query
        .split(|character: char| !character.is_alphanumeric())
        .filter(|word| !word.is_empty());
    let mut terms: Vec<String> = Vec::new();
    let mut stopped: Vec<String> = Vec::new();
    for word in words {
        if terms.len() == MAX_QUERY_TERMS {
            break;
        }
        let word = word.to_lowercase();
        let list = if rules.stop_words && is_stop_word(&word) {
            &mut stopped
        } else {
            &mut terms
        };
        if !list.contains(&word) {
            list.push(word);
        }
    }
    if terms.is_empty() {
        // Only stop words: search them rather than nothing.
        stopped.truncate(MAX_QUERY_TERMS);
        terms = stopped;
    }
    if terms.is_empty() {
        return Ok(None);
    }
    let mut expression = String::with_capacity(query.len() + terms.len() * 6);
    for (index, term) in terms.iter().enumerate() {
        if index > 0 {
            expression.push_str(" OR ");
        }
        expression.push('"');
        expression.push_str(term);
        expression.push('"');
    }
    Ok(Some(expression))
}

/// Runs a prepared match expression, filtered by namespace and scope in the statement.
pub(crate) fn search(
    connection: &Connection,
    access: &MemoryAccess,
    expression: &str,
    limit: usize,
    rules: &LexicalRules,
) -> Result<Vec<LexicalHit>, MemoryError> {
    rules.validate()?;
    let mut statement = connection
        .prepare_cached(
            // The inner query ranks and filters (namespace, scope; withdrawn documents have no scope
            // rows) before its LIMIT; the outer one reads document columns for the hits only.
            "SELECT d.namespace, d.id, d.revision, d.locator, hits.rank \
             FROM ( \
                 SELECT memory_fts.rowid AS entry, bm25(memory_fts, ?5, ?6) AS rank \
                 FROM memory_fts \
                 JOIN memory_document_scopes AS s \
                     ON s.entry = memory_fts.rowid AND s.scope = ?3 AND s.namespace = ?2 \
                 WHERE memory_fts MATCH ?1 \
                 ORDER BY rank, entry \
                 LIMIT ?4 \
             ) AS hits \
             JOIN memory_documents AS d ON d.entry = hits.entry \
             WHERE d.namespace = ?2 AND d.withdrawn = 0 \
             ORDER BY hits.rank, hits.entry",
        )
        .map_err(sqlite("lexical search"))?;
    let rows = statement
        .query_map(
            rusqlite::params![
                expression,
                access.namespace.as_str(),
                access.scope.as_str(),
                limit as i64,
                rules.text_weight,
                rules.speaker_weight
            ],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, f64>(4)?,
                ))
            },
        )
        .map_err(sqlite("lexical search"))?;
    let mut hits = Vec::with_capacity(limit.min(64));
    for row in rows {
        let (namespace, id, revision, locator, rank) = row.map_err(sqlite("lexical search"))?;
        hits.push(LexicalHit {
            key: decode_key(&namespace, &id)?,
            revision: decode_revision(&revision)?,
            locator,
            score: -rank,
        });
    }
    tracing::debug!(hits = hits.len(), "lexical search");
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_WORDS: LexicalRules = LexicalRules {
        stop_words: false,
        text_weight: 1.0,
        speaker_weight: 1.0,
    };

    #[test]
    fn query_syntax_becomes_quoted_words() {
        assert_eq!(
            match_expression_with(r#"alice NEAR("x" y) col:* ^start"#, &ALL_WORDS)
                .expect("small query"),
            Some(r#""alice" OR "near" OR "x" OR "y" OR "col" OR "start""#.to_owned())
        );
        assert_eq!(match_expression(" \"*^:() ").expect("small query"), None);
        assert_eq!(match_expression("").expect("small query"), None);
    }

    #[test]
    fn repeated_words_are_searched_once_and_terms_are_capped() {
        let query = (0..200)
            .map(|n| format!("w{n} w{n}"))
            .collect::<Vec<_>>()
            .join(" ");
        let expression = match_expression(&query)
            .expect("small query")
            .expect("words");
        assert_eq!(expression.matches(" OR ").count(), MAX_QUERY_TERMS - 1);
    }

    #[test]
    fn stop_words_are_dropped_unless_nothing_else_is_left() {
        let rules = LexicalRules {
            stop_words: true,
            ..ALL_WORDS
        };
        assert_eq!(
            match_expression_with("When did Caroline go to the LGBTQ support group?", &rules)
                .expect("small query"),
            Some(r#""caroline" OR "go" OR "lgbtq" OR "support" OR "group""#.to_owned())
        );
        assert_eq!(
            match_expression_with("What didn't she do?", &rules).expect("small query"),
            Some(r#""what" OR "didn" OR "t" OR "she" OR "do""#.to_owned()),
            "a query of stop words only searches them"
        );
        assert_eq!(
            match_expression_with("Ada ada ADA", &rules).expect("small query"),
            Some(r#""ada""#.to_owned()),
            "case-folded duplicates are one term"
        );
    }

    #[test]
    fn the_stop_word_list_is_sorted_lower_case_and_found() {
        assert!(STOP_WORDS.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(STOP_WORDS.iter().all(|word| word.to_lowercase() == *word));
        assert!(is_stop_word("The") && is_stop_word("didn") && !is_stop_word("May"));
    }

    #[test]
    fn column_weights_are_validated() {
        assert!(LexicalRules::default().validate().is_ok());
        for rules in [
            LexicalRules {
                text_weight: 0.0,
                ..ALL_WORDS
            },
            LexicalRules {
                speaker_weight: -1.0,
                ..ALL_WORDS
            },
            LexicalRules {
                speaker_weight: f64::NAN,
                ..ALL_WORDS
            },
        ] {
            assert!(match_expression_with("words", &rules).is_err(), "{rules:?}");
        }
    }

    #[test]
    fn oversized_queries_are_refused_before_work() {
        let query = "a".repeat(MAX_QUERY_BYTES + 1);
        assert!(matches!(
            match_expression(&query),
            Err(MemoryError::TooLarge { .. })
        ));
    }
}
