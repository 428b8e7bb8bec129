//! Text into FTS5's tokens, for documents and queries alike.
//!
//! Tokens are FTS5's own: text is tokenized by an FTS5 table with `porter unicode61` in a private
//! in-memory database (one per thread) and read back through `fts5vocab`, so stemming, case and
//! diacritic folding are exactly SQLite's. So `Ada` and `ada`, `runs` and `running` are one term.

use std::cell::RefCell;

use rusqlite::{Connection, TransactionBehavior};

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
pub(super) struct DocumentTerms {
    pub(super) terms: Vec<(String, i64, i64)>,
    pub(super) tokens: i64,
}

pub(super) fn tokenize_document(text: &str, speakers: &str) -> rusqlite::Result<DocumentTerms> {
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
pub(super) fn tokenize_words(words: &[String]) -> rusqlite::Result<Vec<Vec<String>>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|word| (*word).to_owned()).collect()
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
}
