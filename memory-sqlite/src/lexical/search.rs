//! BM25 over one namespace's postings.
//!
//! - The score is FTS5's `bm25()` formula (its IDF floor and column weights) with the rules' `k1` and
//!   `b`, computed in the same order of operations, over the caller's namespace: its documents (all
//!   scopes), their average length and each term's document count there. With FTS5's own `k1` and `b`
//!   ([`super::FTS5_K1`], [`super::FTS5_B`]), a namespace alone in a file scores exactly as FTS5's
//!   `bm25()` did (a test compares them); other namespaces' documents never change a namespace's
//!   scores or ranking, so a score tells a tenant nothing about another.
//! - A word the tokenizer splits (characters that Rust calls alphanumeric and `unicode61` does not)
//!   matches a document holding all of its tokens, its count the smallest of theirs (FTS5's phrase
//!   also wanted them adjacent; no positions are stored).
//! - Scope and withdrawal are checked for the best-scored matches only, in score order, until the limit
//!   is met; a hit outside the caller's scope is never returned. Ties are broken by insertion order.

use std::collections::HashMap;

use memory_core::{LexicalHit, MemoryAccess, MemoryError};
use rusqlite::{Connection, OptionalExtension};

use super::LexicalRules;
use super::tokenizer::tokenize_words;
use crate::error::sqlite;
use crate::rows::{decode_key, decode_revision};

/// FTS5's floor for an IDF that would be zero or negative (a term in half the documents or more).
const IDF_FLOOR: f64 = 1e-6;

/// One document holding a query word: the word's count in each column and the document's length.
struct Posting {
    entry: i64,
    text_count: i64,
    speakers_count: i64,
    tokens: i64,
}

/// The namespace's documents holding every token of one query word, by entry.
fn word_postings(
    connection: &Connection,
    namespace_id: i64,
    tokens: &[String],
) -> rusqlite::Result<Vec<Posting>> {
    let mut find_term =
        connection.prepare_cached("SELECT id FROM memory_lexical_terms WHERE term = ?1")?;
    let mut postings = connection.prepare_cached(
        "SELECT entry, text_count, speakers_count, tokens FROM memory_lexical_postings \
         WHERE namespace_id = ?1 AND term_id = ?2 ORDER BY entry",
    )?;
    let mut matched: Option<Vec<Posting>> = None;
    for token in tokens {
        let Some(term_id) = find_term
            .query_row([token], |row| row.get::<_, i64>(0))
            .optional()?
        else {
            return Ok(Vec::new());
        };
        let list: Vec<Posting> = postings
            .query_map([namespace_id, term_id], |row| {
                Ok(Posting {
                    entry: row.get(0)?,
                    text_count: row.get(1)?,
                    speakers_count: row.get(2)?,
                    tokens: row.get(3)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        matched = Some(match matched {
            None => list,
            // A word of several tokens: documents holding all of them, each column counting the
            // word as often as its rarest token.
            Some(previous) => intersect(previous, list),
        });
    }
    Ok(matched.unwrap_or_default())
}

fn intersect(left: Vec<Posting>, right: Vec<Posting>) -> Vec<Posting> {
    let mut right = right.into_iter().peekable();
    let mut both = Vec::new();
    for posting in left {
        while right.next_if(|other| other.entry < posting.entry).is_some() {}
        if let Some(other) = right.next_if(|other| other.entry == posting.entry) {
            both.push(Posting {
                text_count: posting.text_count.min(other.text_count),
                speakers_count: posting.speakers_count.min(other.speakers_count),
                ..posting
            });
        }
    }
    both
}

/// A namespace's BM25 statistics: its id, live documents and their tokens.
struct NamespaceStatistics {
    id: i64,
    documents: i64,
    tokens: i64,
}

/// Searches `words` (from [`super::query_words_with`]) in the caller's namespace and returns the best `limit`
/// hits the caller's scope may see.
pub(crate) fn search(
    connection: &Connection,
    access: &MemoryAccess,
    words: &[String],
    limit: usize,
    rules: &LexicalRules,
) -> Result<Vec<LexicalHit>, MemoryError> {
    const OPERATION: &str = "lexical search";
    rules.validate()?;
    // One snapshot for the statistics, the postings and the documents, however writers interleave.
    let snapshot = connection
        .unchecked_transaction()
        .map_err(sqlite(OPERATION))?;
    let statistics = snapshot
        .prepare_cached(
            "SELECT id, documents, tokens FROM memory_lexical_namespaces WHERE namespace = ?1",
        )
        .and_then(|mut statement| {
            statement
                .query_row([access.namespace.as_str()], |row| {
                    Ok(NamespaceStatistics {
                        id: row.get(0)?,
                        documents: row.get(1)?,
                        tokens: row.get(2)?,
                    })
                })
                .optional()
        })
        .map_err(sqlite(OPERATION))?;
    let Some(statistics) = statistics.filter(|statistics| statistics.documents > 0) else {
        return Ok(Vec::new());
    };
    let phrases = tokenize_words(words).map_err(sqlite(OPERATION))?;
    let average_length = statistics.tokens as f64 / statistics.documents as f64;
    // Each word adds its part to its documents' scores in query order, as FTS5's `bm25()` sums its
    // phrases, so a namespace alone scores bit for bit as FTS5 did.
    let mut scores: HashMap<i64, f64> = HashMap::new();
    for phrase in phrases.iter().filter(|phrase| !phrase.is_empty()) {
        let postings =
            word_postings(&snapshot, statistics.id, phrase).map_err(sqlite(OPERATION))?;
        if postings.is_empty() {
            continue;
        }
        let holding = postings.len() as i64;
        let mut idf =
            (((statistics.documents - holding) as f64 + 0.5) / (holding as f64 + 0.5)).ln();
        if idf <= 0.0 {
            idf = IDF_FLOOR;
        }
        for posting in postings {
            // FTS5 adds the column's weight once per occurrence; so does this, for the same sums.
            let mut frequency = 0.0;
            for _ in 0..posting.text_count {
                frequency += rules.text_weight;
            }
            for _ in 0..posting.speakers_count {
                frequency += rules.speaker_weight;
            }
            let length = posting.tokens as f64;
            let part = idf
                * ((frequency * (rules.k1 + 1.0))
                    / (frequency + rules.k1 * (1.0 - rules.b + rules.b * length / average_length)));
            *scores.entry(posting.entry).or_insert(0.0) += part;
        }
    }
    let mut ranked: Vec<(i64, f64)> = scores.into_iter().collect();
    ranked.sort_by(|left, right| right.1.total_cmp(&left.1).then(left.0.cmp(&right.0)));
    let mut visible = snapshot
        .prepare_cached(
            "SELECT d.namespace, d.id, d.revision, d.locator FROM memory_documents AS d \
             WHERE d.entry = ?1 AND d.namespace = ?2 AND d.withdrawn = 0 \
             AND EXISTS (SELECT 1 FROM memory_document_scopes AS s \
                         WHERE s.entry = d.entry AND s.scope = ?3)",
        )
        .map_err(sqlite(OPERATION))?;
    let mut hits = Vec::with_capacity(limit.min(ranked.len()));
    for (entry, score) in ranked {
        if hits.len() == limit {
            break;
        }
        let row = visible
            .query_row(
                rusqlite::params![entry, access.namespace.as_str(), access.scope.as_str()],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                    ))
                },
            )
            .optional()
            .map_err(sqlite(OPERATION))?;
        let Some((namespace, id, revision, locator)) = row else {
            continue;
        };
        hits.push(LexicalHit {
            key: decode_key(&namespace, &id)?,
            revision: decode_revision(&revision)?,
            locator,
            score,
        });
    }
    tracing::debug!(hits = hits.len(), "lexical search");
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_of_several_tokens_needs_them_all_and_counts_the_rarest() {
        let posting = |entry, text_count, speakers_count| Posting {
            entry,
            text_count,
            speakers_count,
            tokens: 10,
        };
        let both = intersect(
            vec![posting(1, 2, 0), posting(3, 1, 1), posting(5, 4, 0)],
            vec![
                posting(2, 1, 0),
                posting(3, 3, 0),
                posting(5, 1, 2),
                posting(6, 1, 0),
            ],
        );
        let found: Vec<(i64, i64, i64)> = both
            .iter()
            .map(|posting| (posting.entry, posting.text_count, posting.speakers_count))
            .collect();
        assert_eq!(found, [(3, 1, 0), (5, 1, 0)]);
    }
}
