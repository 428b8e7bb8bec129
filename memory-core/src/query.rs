//! Query text into the words a lexical search looks for: the one parser every store backend
//! (SQLite, PostgreSQL) and the excerpting of long documents use, so one query means the same words
//! everywhere.
//!
//! - Query text is words, never syntax: it is cut at every character that is not alphanumeric
//!   ([`split_words`]); no operator, quote or column filter survives the cut, so no query can fail or
//!   reach past a backend's filters.
//! - Words are lower-cased and each is searched once, in the order first typed; at most
//!   [`MAX_QUERY_TERMS`] are kept (the first ones), and a query over [`MAX_QUERY_BYTES`] is refused
//!   before any work.
//! - Stop words ([`STOP_WORDS`]) are dropped (unless a caller turns that off, as SQLite's tuning
//!   lever does). A query that holds no other word has **no words and finds nothing**: function words
//!   alone ("who is she") match nearly every document, so a lexical answer to them would be noise,
//!   and PostgreSQL's `english` index does not hold them at all. The list contains PostgreSQL's
//!   `english.stop` (a test of memory-postgres checks), so both backends drop the same words.

use crate::error::MemoryError;
use crate::storage::{MAX_QUERY_BYTES, MAX_QUERY_TERMS};

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

/// Whether a query drops [`STOP_WORDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopWords {
    /// Dropped: the product's rule.
    Drop,
    /// Kept: every word is searched (a tuning lever).
    Keep,
}

/// The words `query` searches, in order, lower case and distinct; empty when it holds none.
pub fn query_words(query: &str, stop_words: StopWords) -> Result<Vec<String>, MemoryError> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(MemoryError::TooLarge {
            limit: "lexical query bytes",
            max: MAX_QUERY_BYTES as u64,
            actual: query.len() as u64,
        });
    }
    let mut terms: Vec<String> = Vec::new();
    for word in split_words(query) {
        if terms.len() == MAX_QUERY_TERMS {
            break;
        }
        let word = word.to_lowercase();
        if stop_words == StopWords::Drop && is_stop_word(&word) {
            continue;
        }
        if !terms.contains(&word) {
            terms.push(word);
        }
    }
    Ok(terms)
}

/// Cuts text into its words, in order and as typed: the runs of alphanumeric characters. Everything
/// else (operators, quotes, column filters, punctuation, apostrophes) only separates words.
pub fn split_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|character: char| !character.is_alphanumeric())
        .filter(|word| !word.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn stop_words_are_sorted_and_lower_case() {
        assert!(STOP_WORDS.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(STOP_WORDS.iter().all(|word| word.to_lowercase() == *word));
        assert!(is_stop_word("The") && !is_stop_word("budget"));
    }

    #[test]
    fn query_syntax_becomes_plain_words() {
        assert_eq!(
            query_words(
                r#"alice NEAR("x" y) col:* ^start & !no | <->"#,
                StopWords::Keep
            )
            .expect("small query"),
            words(&["alice", "near", "x", "y", "col", "start", "no"])
        );
        assert!(
            query_words(" \"*^:() ", StopWords::Drop)
                .expect("small query")
                .is_empty()
        );
        assert!(
            query_words("", StopWords::Drop)
                .expect("small query")
                .is_empty()
        );
    }

    #[test]
    fn stop_words_are_dropped_and_a_query_of_them_alone_has_no_words() {
        assert_eq!(
            query_words(
                "When did Caroline go to the LGBTQ support group?",
                StopWords::Drop
            )
            .expect("small query"),
            words(&["caroline", "go", "lgbtq", "support", "group"])
        );
        assert!(
            query_words("What didn't she do?", StopWords::Drop)
                .expect("small query")
                .is_empty()
        );
        assert_eq!(
            query_words("What didn't she do?", StopWords::Keep).expect("small query"),
            words(&["what", "didn", "t", "she", "do"])
        );
        assert_eq!(
            query_words("Ada ada ADA", StopWords::Drop).expect("small query"),
            words(&["ada"]),
            "case-folded duplicates are one term"
        );
    }

    #[test]
    fn repeated_words_are_searched_once_and_terms_are_capped() {
        let query = (0..200)
            .map(|n| format!("w{n} w{n}"))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(
            query_words(&query, StopWords::Drop)
                .expect("small query")
                .len(),
            MAX_QUERY_TERMS
        );
    }

    #[test]
    fn oversized_queries_are_refused_before_work() {
        let query = "a".repeat(MAX_QUERY_BYTES + 1);
        assert!(matches!(
            query_words(&query, StopWords::Drop),
            Err(MemoryError::TooLarge { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn any_query_is_words_or_a_typed_refusal(query in ".{0,300}") {
            let terms = query_words(&query, StopWords::Drop).expect("small query");
            proptest::prop_assert!(terms.len() <= MAX_QUERY_TERMS);
            for term in &terms {
                proptest::prop_assert!(!term.is_empty());
                proptest::prop_assert!(
                    !term.chars().any(|c| c.is_whitespace() || c.is_ascii_punctuation())
                );
                proptest::prop_assert!(!is_stop_word(term));
            }
        }
    }
}
