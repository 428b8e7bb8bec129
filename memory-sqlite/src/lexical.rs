//! Lexical search over current, non-withdrawn documents: FTS5 with the `porter unicode61` tokenizer over
//! the text and the attributions' speakers, ranked by BM25.
//!
//! - Query text is words, never FTS5 syntax: it is cut at every character that is not alphanumeric, and
//!   each remaining word becomes a double-quoted phrase; the phrases are joined with `OR`. Quotes,
//!   operators (`NEAR`, `AND`, `NOT`, `*`, `^`, `:`, parentheses) cannot survive the cut, so no query can
//!   fail to parse or reach past the filters. A query with no word returns no hit.
//! - At most [`MAX_QUERY_TERMS`] distinct words are used (the first ones); longer queries are refused
//!   above [`MAX_QUERY_BYTES`] before any work.
//! - Namespace, scope and withdrawal are filtered inside the SQL statement, joined to the match, so a hit
//!   outside the caller's namespace or scope is never produced, let alone dropped afterwards.
//! - The score is the negated `bm25()` value: higher is better. Ties are broken by insertion order.

use memory_core::{LexicalHit, MemoryAccess, MemoryError};
use rusqlite::Connection;

use crate::error::sqlite;
use crate::rows::{decode_key, decode_revision};

/// Most UTF-8 bytes in a lexical query.
pub const MAX_QUERY_BYTES: usize = 65_536;
/// Most distinct words of a query that are searched for.
pub const MAX_QUERY_TERMS: usize = 64;
/// Most hits one search returns; larger limits are clamped.
pub const MAX_SEARCH_HITS: usize = 1_000;

/// The FTS5 match expression for a user query, or `None` when it holds no word.
pub fn match_expression(query: &str) -> Result<Option<String>, MemoryError> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(MemoryError::TooLarge {
            limit: "lexical query bytes",
            max: MAX_QUERY_BYTES as u64,
            actual: query.len() as u64,
        });
    }
    let mut terms: Vec<&str> = Vec::new();
    for word in query
        .split(|character: char| !character.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        if terms.len() == MAX_QUERY_TERMS {
            break;
        }
        if !terms.contains(&word) {
            terms.push(word);
        }
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
) -> Result<Vec<LexicalHit>, MemoryError> {
    let mut statement = connection
        .prepare_cached(
            // The inner query ranks and filters (namespace, scope; withdrawn documents have no scope
            // rows) before its LIMIT; the outer one reads document columns for the hits only.
            "SELECT d.namespace, d.id, d.revision, d.locator, hits.rank \
             FROM ( \
                 SELECT memory_fts.rowid AS entry, bm25(memory_fts) AS rank \
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
                limit as i64
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

    #[test]
    fn query_syntax_becomes_quoted_words() {
        assert_eq!(
            match_expression(r#"alice NEAR("x" y) col:* ^start"#).expect("small query"),
            Some(r#""alice" OR "NEAR" OR "x" OR "y" OR "col" OR "start""#.to_owned())
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
    fn oversized_queries_are_refused_before_work() {
        let query = "a".repeat(MAX_QUERY_BYTES + 1);
        assert!(matches!(
            match_expression(&query),
            Err(MemoryError::TooLarge { .. })
        ));
    }
}
