//! Query text into the words a search looks for, under the lexical rules: memory-core's one parser
//! ([`memory_core::query`]), with stop words dropped unless the rules keep them (a tuning lever).
//! A query with no word left (none at all, or only stop words) returns no hit.

use memory_core::MemoryError;
use memory_core::query::StopWords;

use super::LexicalRules;

/// The words a user query searches under the default rules, in order, lower case and distinct;
/// empty when it holds no word.
pub fn query_words(query: &str) -> Result<Vec<String>, MemoryError> {
    query_words_with(query, &LexicalRules::default())
}

/// The words a user query searches under `rules`, in order, lower case and distinct; empty when it
/// holds no word.
pub fn query_words_with(query: &str, rules: &LexicalRules) -> Result<Vec<String>, MemoryError> {
    rules.validate()?;
    let stop_words = if rules.stop_words {
        StopWords::Drop
    } else {
        StopWords::Keep
    };
    memory_core::query::query_words(query, stop_words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexical::rules::{FTS5_B, FTS5_K1, MAX_K1};

    const ALL_WORDS: LexicalRules = LexicalRules {
        stop_words: false,
        text_weight: 1.0,
        speaker_weight: 1.0,
        k1: FTS5_K1,
        b: FTS5_B,
    };

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn stop_words_are_dropped_by_default() {
        let rules = LexicalRules {
            stop_words: true,
            ..ALL_WORDS
        };
        assert_eq!(
            query_words_with("When did Caroline go to the LGBTQ support group?", &rules)
                .expect("small query"),
            words(&["caroline", "go", "lgbtq", "support", "group"])
        );
        assert!(
            query_words_with("What didn't she do?", &rules)
                .expect("small query")
                .is_empty(),
            "a query of stop words only has no words"
        );
        assert_eq!(
            query_words_with("Ada ada ADA", &rules).expect("small query"),
            words(&["ada"]),
            "case-folded duplicates are one term"
        );
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
            LexicalRules {
                k1: 0.0,
                ..ALL_WORDS
            },
            LexicalRules {
                k1: f64::NAN,
                ..ALL_WORDS
            },
            LexicalRules {
                k1: MAX_K1 * 2.0,
                ..ALL_WORDS
            },
            LexicalRules {
                b: -0.1,
                ..ALL_WORDS
            },
            LexicalRules {
                b: 1.5,
                ..ALL_WORDS
            },
            LexicalRules {
                b: f64::NAN,
                ..ALL_WORDS
            },
        ] {
            assert!(query_words_with("words", &rules).is_err(), "{rules:?}");
        }
    }
}
