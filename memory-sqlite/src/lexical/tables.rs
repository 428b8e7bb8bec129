//! The index's tables and the encoding of a document's term list. The tables are created by the
//! crate's schema (`crate::schema`, migration 2); entries are `memory_documents.entry`.
//!
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

use memory_core::MemoryError;

use crate::error::corrupt;

/// Bytes of one term id in a document's term list.
pub(super) const TERM_ID_BYTES: usize = 8;

pub(super) fn decode_term_ids(bytes: &[u8]) -> Result<Vec<i64>, MemoryError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
