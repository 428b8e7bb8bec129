//! Lexical search over current, non-withdrawn documents: PostgreSQL full-text search with the `english`
//! configuration (stemming and stop words) over the text and the attributions' speakers, ranked by
//! `ts_rank`.
//!
//! - Query text becomes words through memory-core's one parser ([`memory_core::query`], as on
//!   SQLite): words, never syntax, lower case, distinct, stop words dropped, at most
//!   [`MAX_QUERY_TERMS`], queries over [`MAX_QUERY_BYTES`] refused before any work. Each word becomes
//!   its own `plainto_tsquery` (which parses no operators) and the words are OR-ed with the
//!   `memory_tsquery_or` aggregate. A query with no word left (none, or only stop words) returns no
//!   hit. The parser's stop words contain the `english` configuration's, so no word reaches the
//!   server that its index would not hold.
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

use deadpool_postgres::Object;
use memory_core::query::StopWords;
use memory_core::storage::decode_document_id;
use memory_core::{LexicalHit, MemoryError, WrittenNeighbours};

use crate::error::{Attempt, Fail, corrupt};
use crate::rows::{decode_key, decode_revision};

pub use memory_core::storage::{MAX_QUERY_BYTES, MAX_QUERY_TERMS, MAX_SEARCH_HITS};

/// The words a user query searches (memory-core's [`memory_core::query::query_words`], stop
/// words dropped).
pub fn query_words(query: &str) -> Result<Vec<String>, MemoryError> {
    memory_core::query::query_words(query, StopWords::Drop)
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
const SEARCH_SQL: &str = "
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

/// One lexical search's arguments ([`SEARCH_SQL`]).
pub(crate) struct Search {
    pub(crate) words: Vec<String>,
    pub(crate) namespace: String,
    pub(crate) scope: String,
    pub(crate) limit: i64,
}

impl Search {
    pub(crate) async fn run(&self, client: Object) -> Attempt<Vec<LexicalHit>> {
        let statement = client.prepare_cached(SEARCH_SQL).await?;
        let rows = client
            .query(
                &statement,
                &[&self.words, &self.namespace, &self.scope, &self.limit],
            )
            .await?;
        let mut hits = Vec::with_capacity(rows.len());
        for row in rows {
            let namespace: String = row.try_get(0)?;
            let id: String = row.try_get(1)?;
            let revision: String = row.try_get(2)?;
            hits.push(LexicalHit {
                key: decode_key(&namespace, &id).map_err(Fail::Model)?,
                revision: decode_revision(&revision).map_err(Fail::Model)?,
                locator: row.try_get(3)?,
                score: row.try_get(4)?,
            });
        }
        tracing::debug!(hits = hits.len(), "lexical search");
        Ok(hits)
    }
}

/// [`LexicalSearch::written_neighbours`] in one statement (one snapshot): each id's entry in the
/// caller's scope, then the nearest `reach` entries below and above it there, one range read each
/// in `memory_document_scopes_by_scope`. A document's entry is assigned by its key's first write and
/// kept by replacements (they update the row), so entries order a namespace by first write.
pub(crate) struct Neighbours {
    pub(crate) ids: Vec<String>,
    pub(crate) reach: i64,
    pub(crate) namespace: String,
    pub(crate) scope: String,
}

const NEIGHBOURS_SQL: &str = "\
SELECT c.ord, \
  ARRAY(SELECT n.id FROM memory_document_scopes AS p JOIN memory_documents AS n ON n.entry = p.entry \
    WHERE p.namespace = $1 AND p.scope = $2 AND p.entry < s.entry ORDER BY p.entry DESC LIMIT $4), \
  ARRAY(SELECT n.id FROM memory_document_scopes AS p JOIN memory_documents AS n ON n.entry = p.entry \
    WHERE p.namespace = $1 AND p.scope = $2 AND p.entry > s.entry ORDER BY p.entry ASC LIMIT $4) \
FROM unnest($3::text[]) WITH ORDINALITY AS c(id, ord) \
JOIN memory_documents AS d ON d.namespace = $1 AND d.id = c.id AND NOT d.withdrawn \
JOIN memory_document_scopes AS s ON s.entry = d.entry AND s.scope = $2";

impl Neighbours {
    pub(crate) async fn run(&self, client: Object) -> Attempt<Vec<WrittenNeighbours>> {
        let statement = client.prepare_cached(NEIGHBOURS_SQL).await?;
        let rows = client
            .query(
                &statement,
                &[&self.namespace, &self.scope, &self.ids, &self.reach],
            )
            .await?;
        let mut answers = vec![WrittenNeighbours::default(); self.ids.len()];
        for row in rows {
            let ordinal: i64 = row.try_get(0)?;
            let slot = usize::try_from(ordinal - 1)
                .ok()
                .and_then(|index| answers.get_mut(index))
                .ok_or_else(|| Fail::Model(corrupt("neighbour row outside the ids asked for")))?;
            let decode = |ids: Vec<String>| {
                ids.iter()
                    .map(|id| decode_document_id(id))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(Fail::Model)
            };
            slot.before = decode(row.try_get(1)?)?;
            slot.after = decode(row.try_get(2)?)?;
        }
        Ok(answers)
    }
}

#[cfg(test)]
mod tests {

    /// The parser's stop words hold every word of the server's `english` stop list (read from the
    /// installed PostgreSQL's share folder, which the test server's setup installs), so a word the
    /// server's index drops is never searched on one backend and not the other.
    #[test]
    fn the_parser_drops_every_english_stop_word_of_the_server() {
        let found = std::fs::read_dir("/usr/share/postgresql")
            .ok()
            .and_then(|versions| {
                versions
                    .flatten()
                    .map(|version| version.path().join("tsearch_data/english.stop"))
                    .find(|path| path.is_file())
            });
        let Some(path) = found else {
            assert!(
                std::env::var("MEMORY_TEST_POSTGRES_URL").is_err(),
                "a PostgreSQL test server is configured but its english.stop was not found"
            );
            eprintln!("SKIPPED: no PostgreSQL installed, so no english.stop to compare");
            return;
        };
        let list = std::fs::read_to_string(&path).expect("english.stop is readable");
        let missing: Vec<&str> = list
            .lines()
            .map(str::trim)
            .filter(|word| !word.is_empty() && !memory_core::query::is_stop_word(word))
            .collect();
        assert!(
            missing.is_empty(),
            "{path:?}: not stop words here: {missing:?}"
        );
    }
}
