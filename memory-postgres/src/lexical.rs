//! Lexical search over current, non-withdrawn documents: PostgreSQL full-text search with the `english`
//! configuration (stemming and stop words) over the text and the attributions' speakers, ranked by
//! `ts_rank`.
//!
//! - Query text is words, never query syntax: it is cut at every character that is not alphanumeric;
//!   each word becomes its own `plainto_tsquery` (which parses no operators) and the words are OR-ed with
//!   the `memory_tsquery_or` aggregate. A query with no word, or only stop words, returns no hit.
//! - At most [`MAX_QUERY_TERMS`] distinct words are used (the first ones); queries over
//!   [`MAX_QUERY_BYTES`] are refused before any work.
//! - The namespace is part of the index key: the GIN index `memory_documents_lexical` holds each
//!   document's lexemes prefixed with its namespace's digest (migration 3 in the schema module), and
//!   the statement looks up its words' lexemes under the caller's digest, so it reads only the
//!   namespace's matching documents and its cost follows them, not the store's. The match itself is
//!   still `search @@ query` and the namespace column is still compared, so a digest collision could
//!   only cost time, never change or leak a row.
//! - Scope and withdrawal are filtered in the same statement, so a hit outside the caller's namespace or
//!   scope is never produced.
//! - The score is `ts_rank` over the document's own vector (higher is better), which no other document
//!   changes; ties are broken by insertion order. Scores are not comparable with SQLite's BM25 scores;
//!   only the order within one answer means something.

use memory_core::MemoryError;

pub use memory_core::storage::{MAX_QUERY_BYTES, MAX_QUERY_TERMS, MAX_SEARCH_HITS};

/// The distinct words of a user query, at most [`MAX_QUERY_TERMS`].
pub fn query_words(query: &str) -> Result<Vec<String>, MemoryError> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(MemoryError::TooLarge {
            limit: "lexical query bytes",
            max: MAX_QUERY_BYTES as u64,
            actual: query.len() as u64,
        });
    }
    let mut terms: Vec<String> = Vec::new();
    for word in query
        .split(|character: char| !character.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        if terms.len() == MAX_QUERY_TERMS {
            break;
        }
        if !terms.iter().any(|term| term == word) {
            terms.push(word.to_owned());
        }
    }
    Ok(terms)
}

/// The search statement: `$1` words, `$2` namespace, `$3` scope, `$4` limit.
///
/// `q.keys` are the words' lexemes (from the same `english` configuration as `plainto_tsquery`) under
/// the namespace's digest, as `memory_lexical_keys` writes them; the overlap `&&` with the indexed
/// expression (written exactly as the index's, or the planner could not use it) finds every document
/// of the namespace holding one of them, and `search @@ q.query` keeps the ones the words match. A
/// query of stop words only has no key and finds nothing.
///
/// The scope check is a semi-join on the scope table's primary key `(entry, scope)`, not a join on
/// `(namespace, scope)`: for a namespace the statistics have not seen yet (a new tenant, before
/// autovacuum's next `ANALYZE`), the planner estimated one row for the latter and chose a nested loop
/// that rescanned the namespace's scope rows once per document, quadratic in the namespace's size
/// (2,000 documents took over half a second, `benches/store.rs`). The entry already fixes the
/// namespace (`d.namespace = $2`), so the result is the same.
pub(crate) const SEARCH_SQL: &str = "
    SELECT d.namespace, d.id, d.revision, d.locator, ts_rank(d.search, q.query)::float8 AS score
    FROM (
        SELECT
            (SELECT memory_tsquery_or(plainto_tsquery('english'::regconfig, word))
             FROM unnest($1::text[]) AS word) AS query,
            ARRAY(SELECT left(md5($2::text), 16) || ':' || lexemes.lexeme
                  FROM unnest($1::text[]) AS word,
                      unnest(to_tsvector('english'::regconfig, word)) AS lexemes) AS keys
    ) AS q
    JOIN memory_documents AS d ON memory_lexical_keys(d.namespace, d.search) && q.keys
    WHERE d.search @@ q.query AND d.namespace = $2 AND NOT d.withdrawn
        AND EXISTS (
            SELECT 1 FROM memory_document_scopes AS s WHERE s.entry = d.entry AND s.scope = $3
        )
    ORDER BY score DESC, d.entry
    LIMIT $4";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_syntax_becomes_plain_words() {
        assert_eq!(
            query_words(r#"alice NEAR("x" y) col:* ^start & !no | <->"#).expect("small query"),
            ["alice", "NEAR", "x", "y", "col", "start", "no"]
        );
        assert!(query_words(" \"*^:() ").expect("small query").is_empty());
        assert!(query_words("").expect("small query").is_empty());
    }

    #[test]
    fn repeated_words_are_searched_once_and_terms_are_capped() {
        let query = (0..200)
            .map(|n| format!("w{n} w{n}"))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(
            query_words(&query).expect("small query").len(),
            MAX_QUERY_TERMS
        );
    }

    #[test]
    fn oversized_queries_are_refused_before_work() {
        assert!(matches!(
            query_words(&"a".repeat(MAX_QUERY_BYTES + 1)),
            Err(MemoryError::TooLarge { .. })
        ));
    }
}
