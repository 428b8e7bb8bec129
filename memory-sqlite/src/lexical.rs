//! Lexical search over current, non-withdrawn documents: BM25 over the text and the attributions'
//! speakers, with FTS5's `porter unicode61` tokens, computed from each namespace's own statistics.
//!
//! # Layout: the namespace leads every key
//! The index is an inverted index in ordinary tables whose keys start with the namespace, so a query
//! reads only its namespace's rows and its cost follows that namespace's matches, whatever the rest of
//! the file holds. (An FTS5 table with a namespace column filtered in the match does not: FTS5's
//! `bm25()` counts every row of the table that holds each query term, and its doclists interleave all
//! namespaces. Measured with SQLite 3.40 at 1,000,000 rows in 10,000 namespaces, `bm25()` took
//! 14-18 ms a query against 12 us for the namespace alone, and the match without ranking 0.5-1.5 ms
//! when namespaces interleave. An FTS5 table per namespace does not scale either: creating 10,000 of
//! them had not finished after eleven minutes.)
//! - `memory_lexical_namespaces`: per namespace, its live indexed documents and their tokens (BM25's
//!   document count and average length).
//! - `memory_lexical_terms`: every term (an FTS5 token) ever indexed, with a small integer id, so
//!   postings hold integers.
//! - `memory_lexical_postings`: `(namespace, term, entry)` with the term's count in each column and the
//!   document's length, one row per distinct term of a document; a term's range in a namespace is what
//!   a query reads.
//! - `memory_lexical_documents`: per indexed document, its namespace, length and the ids of its terms,
//!   so a replacement or withdrawal deletes exactly its postings by key.
//!
//! # Tokens and scores
//! - Tokens are FTS5's own: text is tokenized by an FTS5 table with `porter unicode61` in a private
//!   in-memory database (one per thread) and read back through `fts5vocab`, so stemming, case and
//!   diacritic folding are exactly SQLite's, for documents and queries alike.
//! - The score is FTS5's `bm25()` formula (its IDF floor and column weights) with the rules' `k1` and
//!   `b`, computed in the same order of operations, over the caller's namespace: its documents (all
//!   scopes), their average length and each term's document count there. With FTS5's own `k1` = 1.2
//!   and `b` = 0.75 ([`FTS5_K1`], [`FTS5_B`]), a namespace alone in a file scores exactly as FTS5's
//!   `bm25()` did (a test compares them); other namespaces' documents never change a namespace's
//!   scores or ranking, so a score tells a tenant nothing about another.
//! - The default `b` is 0.1, not 0.75 (`memory-eval locomo-tune`, the eval crate's `locomo` module
//!   has the figures): on conversations a turn's length measures how talkative its speaker was, not
//!   how many topics it covers, and full length normalization buries the longer, informative turns
//!   under one-line replies that share a word with the question. `k1` hardly matters there and stays
//!   FTS5's.
//!
//! # Queries
//! - Query text is words, never syntax: it is cut at every character that is not alphanumeric; each
//!   word is one term of an `OR` (no operator, quote or column filter survives the cut, so no query can
//!   fail or reach past the filters). A query with no word returns no hit.
//! - Words are compared after FTS5's tokenizer folds case and stems them, so `Ada` and `ada`, `runs`
//!   and `running` are one term. A word the tokenizer splits (characters that Rust calls alphanumeric
//!   and `unicode61` does not) matches a document holding all of its tokens, its count the smallest of
//!   theirs (FTS5's phrase also wanted them adjacent; no positions are stored).
//! - English stop words ([`STOP_WORDS`]) are dropped from the query, unless every word is one (then they
//!   are all kept, so "who is she" still searches). An `OR` over "what", "did", "the" matches nearly
//!   every document: it lets function words outvote the content words in BM25's sum and scores most of
//!   the namespace, so dropping them is both the better ranking and the faster search.
//! - BM25 weighs the two columns apart ([`LexicalRules`]): a question names the speaker of half the
//!   conversation's turns, so the speaker column is a tie-breaker among turns that match the content
//!   words, not a match on its own.
//! - At most [`MAX_QUERY_TERMS`] distinct words are used (the first ones); longer queries are refused
//!   above [`MAX_QUERY_BYTES`] before any work.
//! - Scope and withdrawal are checked for the best-scored matches only, in score order, until the limit
//!   is met; a hit outside the caller's scope is never returned. Ties are broken by insertion order.
//!
//! The defaults are the ones `memory-eval locomo-tune` chose on LoCoMo's first five conversations (see
//! the eval crate's `locomo` module for each lever's measured effect); `eval/locomo-tuned.json` records
//! the choice and a test checks that these defaults match it.

use std::cell::RefCell;
use std::collections::HashMap;

use memory_core::{LexicalHit, MemoryAccess, MemoryError};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::{corrupt, sqlite};
use crate::rows::{decode_key, decode_revision};
use crate::transaction::TxError;

pub use memory_core::storage::{MAX_QUERY_BYTES, MAX_QUERY_TERMS, MAX_SEARCH_HITS};

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

/// How a query becomes terms and how its hits are ranked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LexicalRules {
    /// Drop [`STOP_WORDS`] from the query (all are kept when nothing else is left).
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

/// The words a user query searches under the default rules, in order, lower case and distinct;
/// empty when it holds no word.
pub fn query_words(query: &str) -> Result<Vec<String>, MemoryError> {
    query_words_with(query, &LexicalRules::default())
}

/// The words a user query searches under `rules`, in order, lower case and distinct; empty when it
/// holds no word.
pub fn query_words_with(query: &str, rules: &LexicalRules) -> Result<Vec<String>, MemoryError> {
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
    Ok(terms)
}

/// The lexical index's tables (see the module documentation), created with the store's other tables.
/// Entries are `memory_documents.entry`.
pub(crate) const CREATE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS memory_lexical_namespaces (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL UNIQUE,
    documents INTEGER NOT NULL CHECK (documents >= 0),
    tokens INTEGER NOT NULL CHECK (tokens >= 0)
) STRICT;
CREATE TABLE IF NOT EXISTS memory_lexical_terms (
    id INTEGER PRIMARY KEY,
    term TEXT NOT NULL UNIQUE
) STRICT;
CREATE TABLE IF NOT EXISTS memory_lexical_postings (
    namespace_id INTEGER NOT NULL,
    term_id INTEGER NOT NULL,
    entry INTEGER NOT NULL,
    text_count INTEGER NOT NULL,
    speakers_count INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (namespace_id, term_id, entry)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memory_lexical_documents (
    entry INTEGER PRIMARY KEY,
    namespace_id INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    terms BLOB NOT NULL
) STRICT;
";

/// The tables of [`CREATE_TABLES`], for the schema check of a reader.
pub(crate) const TABLES: [&str; 4] = [
    "memory_lexical_namespaces",
    "memory_lexical_terms",
    "memory_lexical_postings",
    "memory_lexical_documents",
];

/// FTS5's floor for an IDF that would be zero or negative (a term in half the documents or more).
const IDF_FLOOR: f64 = 1e-6;
/// Bytes of one term id in a document's term list.
const TERM_ID_BYTES: usize = 8;

/// The tokenizer's tables: an empty FTS5 table with the store's columns and tokenizer, and its
/// `instance` vocabulary (one row per token: term, row, column, offset).
const TOKENIZER_SCHEMA: &str = "
CREATE VIRTUAL TABLE tokens USING fts5(text, speakers, content = '', tokenize = 'porter unicode61');
CREATE VIRTUAL TABLE tokens_instances USING fts5vocab(tokens, instance);
";

thread_local! {
    /// This thread's tokenizer database, opened on first use (readers' connections are `query_only`,
    /// so the tokenizer cannot live in the store's file or a temporary table of theirs).
    static TOKENIZER: RefCell<Option<Connection>> = const { RefCell::new(None) };
}

/// Runs `work` on this thread's tokenizer inside a transaction that is always rolled back, so the
/// tokenizer's table is empty before every call whatever the last one did. A tokenizer that failed
/// is closed and the next call opens a fresh one.
fn with_tokenizer<T>(work: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    TOKENIZER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let connection = match slot.take() {
            Some(connection) => connection,
            None => {
                let connection = Connection::open_in_memory()?;
                connection.execute_batch(TOKENIZER_SCHEMA)?;
                connection
            }
        };
        let result = (|| {
            let transaction =
                rusqlite::Transaction::new_unchecked(&connection, TransactionBehavior::Deferred)?;
            let value = work(&transaction);
            transaction.rollback()?;
            value
        })();
        if result.is_ok() {
            *slot = Some(connection);
        }
        result
    })
}

/// One document's terms: each distinct token with its count in the text and speakers columns, and
/// the document's length in tokens (both columns), as FTS5 counts them.
struct DocumentTerms {
    terms: Vec<(String, i64, i64)>,
    tokens: i64,
}

fn tokenize_document(text: &str, speakers: &str) -> rusqlite::Result<DocumentTerms> {
    with_tokenizer(|connection| {
        connection
            .prepare_cached("INSERT INTO tokens (rowid, text, speakers) VALUES (1, ?1, ?2)")?
            .execute([text, speakers])?;
        let mut statement = connection.prepare_cached(
            "SELECT term, col = 'speakers', count(*) FROM tokens_instances GROUP BY term, col",
        )?;
        let rows = statement.query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, bool>(1)?,
                row.get::<_, i64>(2)?,
            ))
        })?;
        let mut terms: Vec<(String, i64, i64)> = Vec::new();
        let mut tokens = 0;
        for row in rows {
            let (term, in_speakers, count) = row?;
            tokens += count;
            // Rows come grouped by term, so a term's two columns are neighbours.
            let same_term = terms.last().is_some_and(|(last, _, _)| *last == term);
            if !same_term {
                terms.push((term, 0, 0));
            }
            if let Some((_, text_count, speakers_count)) = terms.last_mut() {
                if in_speakers {
                    *speakers_count += count;
                } else {
                    *text_count += count;
                }
            }
        }
        Ok(DocumentTerms { terms, tokens })
    })
}

/// The tokens of each query word, in the word's order (empty for a word the tokenizer drops).
fn tokenize_words(words: &[String]) -> rusqlite::Result<Vec<Vec<String>>> {
    with_tokenizer(|connection| {
        let mut insert =
            connection.prepare_cached("INSERT INTO tokens (rowid, text) VALUES (?1, ?2)")?;
        for (index, word) in (1_i64..).zip(words) {
            insert.execute(rusqlite::params![index, word])?;
        }
        let mut statement =
            connection.prepare_cached("SELECT doc, \"offset\", term FROM tokens_instances")?;
        let mut tokens: Vec<(i64, i64, String)> = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
            .collect::<Result<_, _>>()?;
        tokens.sort();
        let mut phrases = vec![Vec::new(); words.len()];
        for (row, _, term) in tokens {
            let slot = usize::try_from(row - 1)
                .ok()
                .and_then(|index| phrases.get_mut(index));
            if let Some(phrase) = slot {
                phrase.push(term);
            }
        }
        Ok(phrases)
    })
}

/// A failure while writing the index: SQLite's (the write transaction classifies it) or a stored row
/// that does not decode.
#[derive(Debug)]
pub(crate) enum IndexError {
    Sqlite(rusqlite::Error),
    Corrupt(MemoryError),
}

impl From<rusqlite::Error> for IndexError {
    fn from(error: rusqlite::Error) -> Self {
        Self::Sqlite(error)
    }
}

impl From<IndexError> for TxError {
    fn from(error: IndexError) -> Self {
        match error {
            IndexError::Sqlite(error) => Self::Sqlite(error),
            IndexError::Corrupt(error) => Self::Memory(error),
        }
    }
}

impl IndexError {
    pub(crate) fn into_memory_error(self, operation: &'static str) -> MemoryError {
        match self {
            Self::Sqlite(error) => sqlite(operation)(error),
            Self::Corrupt(error) => error,
        }
    }
}

/// Indexes a current, non-withdrawn document under its namespace, inside the caller's write
/// transaction. The entry must not be indexed already ([`remove_document`] first).
pub(crate) fn index_document(
    connection: &Connection,
    entry: i64,
    namespace: &str,
    text: &str,
    speakers: &str,
) -> Result<(), IndexError> {
    let terms = tokenize_document(text, speakers)?;
    let namespace_id: i64 = connection
        .prepare_cached(
            "INSERT INTO memory_lexical_namespaces (namespace, documents, tokens) VALUES (?1, 1, ?2) \
             ON CONFLICT (namespace) DO UPDATE SET documents = documents + 1, \
             tokens = tokens + excluded.tokens \
             RETURNING id",
        )?
        .query_row(rusqlite::params![namespace, terms.tokens], |row| row.get(0))?;
    let mut find_term =
        connection.prepare_cached("SELECT id FROM memory_lexical_terms WHERE term = ?1")?;
    let mut add_term = connection
        .prepare_cached("INSERT INTO memory_lexical_terms (term) VALUES (?1) RETURNING id")?;
    let mut add_posting = connection.prepare_cached(
        "INSERT INTO memory_lexical_postings \
         (namespace_id, term_id, entry, text_count, speakers_count, tokens) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let mut term_ids = Vec::with_capacity(terms.terms.len() * TERM_ID_BYTES);
    for (term, text_count, speakers_count) in &terms.terms {
        let term_id: i64 = match find_term.query_row([term], |row| row.get(0)).optional()? {
            Some(id) => id,
            None => add_term.query_row([term], |row| row.get(0))?,
        };
        add_posting.execute(rusqlite::params![
            namespace_id,
            term_id,
            entry,
            text_count,
            speakers_count,
            terms.tokens
        ])?;
        term_ids.extend_from_slice(&term_id.to_le_bytes());
    }
    connection
        .prepare_cached(
            "INSERT INTO memory_lexical_documents (entry, namespace_id, tokens, terms) \
             VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(rusqlite::params![
            entry,
            namespace_id,
            terms.tokens,
            term_ids
        ])?;
    Ok(())
}

/// Removes a document's postings and takes it out of its namespace's counts, inside the caller's write
/// transaction; nothing to do when it is not indexed.
pub(crate) fn remove_document(connection: &Connection, entry: i64) -> Result<(), IndexError> {
    let indexed: Option<(i64, i64, Vec<u8>)> = connection
        .prepare_cached(
            "SELECT namespace_id, tokens, terms FROM memory_lexical_documents WHERE entry = ?1",
        )?
        .query_row([entry], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .optional()?;
    let Some((namespace_id, tokens, term_ids)) = indexed else {
        return Ok(());
    };
    let term_ids = decode_term_ids(&term_ids).map_err(IndexError::Corrupt)?;
    let mut delete = connection.prepare_cached(
        "DELETE FROM memory_lexical_postings \
         WHERE namespace_id = ?1 AND term_id = ?2 AND entry = ?3",
    )?;
    for term_id in term_ids {
        delete.execute([namespace_id, term_id, entry])?;
    }
    connection
        .prepare_cached("DELETE FROM memory_lexical_documents WHERE entry = ?1")?
        .execute([entry])?;
    connection
        .prepare_cached(
            "UPDATE memory_lexical_namespaces SET documents = documents - 1, tokens = tokens - ?2 \
             WHERE id = ?1",
        )?
        .execute([namespace_id, tokens])?;
    Ok(())
}

fn decode_term_ids(bytes: &[u8]) -> Result<Vec<i64>, MemoryError> {
    if !bytes.len().is_multiple_of(TERM_ID_BYTES) {
        return Err(corrupt("a lexical document's term list is not whole ids"));
    }
    Ok(bytes
        .chunks_exact(TERM_ID_BYTES)
        .map(|chunk| {
            let mut id = [0_u8; TERM_ID_BYTES];
            id.copy_from_slice(chunk);
            i64::from_le_bytes(id)
        })
        .collect())
}

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

/// Searches `words` (from [`query_words_with`]) in the caller's namespace and returns the best `limit`
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

/// Checks the index against the current documents: exactly the live ones are indexed, each under its
/// own namespace, every posting belongs to its document, and each namespace's counts are the sums of
/// its documents'. Any disagreement is [`memory_core::StoreFault::Corrupt`].
pub(crate) fn check(connection: &Connection) -> Result<(), MemoryError> {
    const OPERATION: &str = "check consistency";
    let count = |sql: &str| -> Result<i64, MemoryError> {
        connection
            .query_row(sql, [], |row| row.get::<_, i64>(0))
            .map_err(sqlite(OPERATION))
    };
    let misindexed = count(
        "SELECT count(*) FROM memory_documents AS d \
         LEFT JOIN memory_lexical_documents AS l ON l.entry = d.entry \
         LEFT JOIN memory_lexical_namespaces AS n ON n.id = l.namespace_id \
         WHERE (d.withdrawn = 0) != (l.entry IS NOT NULL) \
            OR (l.entry IS NOT NULL AND (n.namespace IS NULL OR n.namespace != d.namespace))",
    )? + count(
        "SELECT count(*) FROM memory_lexical_documents AS l \
         LEFT JOIN memory_documents AS d ON d.entry = l.entry WHERE d.entry IS NULL",
    )?;
    if misindexed != 0 {
        return Err(corrupt(
            "the search index disagrees with the current documents",
        ));
    }
    let stray_postings = count(
        "SELECT count(*) FROM memory_lexical_postings AS p \
         LEFT JOIN memory_lexical_documents AS l ON l.entry = p.entry \
         WHERE l.entry IS NULL OR l.namespace_id != p.namespace_id OR l.tokens != p.tokens",
    )?;
    let listed = count(&format!(
        "SELECT coalesce(sum(length(terms) / {TERM_ID_BYTES}), 0) FROM memory_lexical_documents"
    ))?;
    if stray_postings != 0 || listed != count("SELECT count(*) FROM memory_lexical_postings")? {
        return Err(corrupt(
            "the search index's postings disagree with its documents",
        ));
    }
    let miscounted = count(
        "SELECT count(*) FROM memory_lexical_namespaces AS n \
         LEFT JOIN (SELECT namespace_id, count(*) AS documents, sum(tokens) AS tokens \
                    FROM memory_lexical_documents GROUP BY namespace_id) AS g \
             ON g.namespace_id = n.id \
         WHERE coalesce(g.documents, 0) != n.documents OR coalesce(g.tokens, 0) != n.tokens",
    )?;
    if miscounted != 0 {
        return Err(corrupt(
            "the search index's namespace counts disagree with its documents",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn query_syntax_becomes_plain_words() {
        assert_eq!(
            query_words_with(r#"alice NEAR("x" y) col:* ^start"#, &ALL_WORDS).expect("small query"),
            words(&["alice", "near", "x", "y", "col", "start"])
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
    fn stop_words_are_dropped_unless_nothing_else_is_left() {
        let rules = LexicalRules {
            stop_words: true,
            ..ALL_WORDS
        };
        assert_eq!(
            query_words_with("When did Caroline go to the LGBTQ support group?", &rules)
                .expect("small query"),
            words(&["caroline", "go", "lgbtq", "support", "group"])
        );
        assert_eq!(
            query_words_with("What didn't she do?", &rules).expect("small query"),
            words(&["what", "didn", "t", "she", "do"]),
            "a query of stop words only searches them"
        );
        assert_eq!(
            query_words_with("Ada ada ADA", &rules).expect("small query"),
            words(&["ada"]),
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

    #[test]
    fn oversized_queries_are_refused_before_work() {
        let query = "a".repeat(MAX_QUERY_BYTES + 1);
        assert!(matches!(
            query_words(&query),
            Err(MemoryError::TooLarge { .. })
        ));
    }

    #[test]
    fn documents_are_tokenized_as_fts5_does_and_counted_per_column() {
        let terms = tokenize_document("Running runs the RUN; naïve e-mail", "Bob\nrunner")
            .expect("tokenize");
        assert_eq!(terms.tokens, 9, "every token of both columns counts");
        let find = |term: &str| {
            terms
                .terms
                .iter()
                .find(|(found, _, _)| found == term)
                .map(|(_, text, speakers)| (*text, *speakers))
        };
        assert_eq!(find("run"), Some((3, 0)), "stemmed and case-folded");
        assert_eq!(
            find("naiv"),
            Some((1, 0)),
            "diacritics folded, then stemmed"
        );
        assert_eq!(find("bob"), Some((0, 1)));
        assert_eq!(find("runner"), Some((0, 1)));
        assert_eq!(find("Running"), None);
        // The tokenizer is empty again after each call: a second document sees only its own tokens.
        let again = tokenize_document("alpha", "").expect("tokenize");
        assert_eq!(again.tokens, 1);
        assert_eq!(again.terms, vec![("alpha".to_owned(), 1, 0)]);
    }

    #[test]
    fn query_words_become_their_tokens_in_order() {
        let phrases =
            tokenize_words(&words(&["running", "x\u{301}y", "\u{301}", "Zebras"])).expect("tokens");
        assert_eq!(phrases.len(), 4);
        assert_eq!(phrases[0], ["run"]);
        assert_eq!(phrases[3], ["zebra"]);
        assert!(phrases[2].is_empty(), "a lone combining mark is no token");
    }

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

    #[test]
    fn malformed_term_lists_are_corrupt() {
        assert_eq!(
            decode_term_ids(&[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]).expect("ids"),
            [1, 2]
        );
        assert!(matches!(
            decode_term_ids(&[1, 2, 3]),
            Err(MemoryError::Store(memory_core::StoreFault::Corrupt { .. }))
        ));
    }
}
