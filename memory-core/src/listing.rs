//! The listing read: the current documents of one namespace, newest first, one page at a time.
//!
//! "Newest" is the order of the change sequence: a document stands where its current revision was
//! committed, so a replaced document moves to the front. A page ends at a [`ListCursor`] naming the
//! position of its last document; the next page holds the documents committed before it. Pages taken
//! while nothing is written hold every listed document exactly once; a document replaced between two
//! pages moves ahead of the cursor and is not seen again by that walk (its new revision heads the next
//! walk), and one withdrawn in between simply drops out.
//!
//! Withdrawn documents are never listed. Listing reads the store's own state: read-time suppression of
//! forgotten sources ([`crate::activity::suppression`]) is the caller's to apply, as for
//! [`MemoryReader`](crate::MemoryReader).

use std::future::Future;

use crate::document::MemoryDocument;
use crate::error::MemoryError;
use crate::namespace::NamespaceAddress;

/// The most documents one page may hold.
pub const MAX_LIST_LIMIT: usize = 1000;

/// Where a page ended; the next page starts after it. Its text form ([`Self::encode`]) is opaque to
/// callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListCursor(u64);

/// The text prefix of an encoded cursor, so a cursor of another layout is refused rather than misread.
const CURSOR_PREFIX: &str = "v1.";

impl ListCursor {
    /// The cursor after the document whose current revision committed at change `position`.
    pub fn after_position(position: u64) -> Self {
        Self(position)
    }

    /// The change position the next page starts before.
    pub fn position(self) -> u64 {
        self.0
    }

    /// The cursor's opaque text form.
    pub fn encode(self) -> String {
        format!("{CURSOR_PREFIX}{}", self.0)
    }

    /// Decodes [`Self::encode`]'s text; anything else is `invalid-input`.
    pub fn decode(text: &str) -> Result<Self, MemoryError> {
        text.strip_prefix(CURSOR_PREFIX)
            .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<u64>().ok())
            .map(Self)
            .ok_or_else(|| MemoryError::invalid("cursor", "not a cursor this server returned"))
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage {
    /// The documents, newest first.
    pub documents: Vec<MemoryDocument>,
    /// Where the next page starts; `None` when no older document was left at the time of the read.
    pub next: Option<ListCursor>,
}

/// Checks a page size: 1 to [`MAX_LIST_LIMIT`]. Stores call it before any read.
pub fn check_list_limit(limit: usize) -> Result<(), MemoryError> {
    if limit == 0 {
        return Err(MemoryError::invalid("limit", "must be at least 1"));
    }
    if limit > MAX_LIST_LIMIT {
        return Err(MemoryError::TooLarge {
            limit: "limit",
            max: MAX_LIST_LIMIT as u64,
            actual: limit as u64,
        });
    }
    Ok(())
}

/// Lists the current documents of a namespace (the listing read of the read port).
pub trait MemoryLister: Send + Sync {
    /// At most `limit` current, not withdrawn documents of `namespace` committed before `after`
    /// (every one when `None`), newest first. `limit` outside 1 to [`MAX_LIST_LIMIT`] is refused before
    /// anything is read.
    fn list(
        &self,
        namespace: &NamespaceAddress,
        after: Option<ListCursor>,
        limit: usize,
    ) -> impl Future<Output = Result<ListPage, MemoryError>> + Send;
}

/// Builds a page from up to `limit + 1` documents read newest first, each with its change position:
/// the extra one only says that more follow. Shared by the stores so they cut pages alike.
pub fn page_of(mut rows: Vec<(u64, MemoryDocument)>, limit: usize) -> ListPage {
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next = if more {
        rows.last()
            .map(|(position, _)| ListCursor::after_position(*position))
    } else {
        None
    };
    ListPage {
        documents: rows.into_iter().map(|(_, document)| document).collect(),
        next,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn cursors_round_trip_and_foreign_text_is_refused() {
        let cursor = ListCursor::after_position(42);
        assert_eq!(ListCursor::decode(&cursor.encode()).ok(), Some(cursor));
        for text in [
            "",
            "42",
            "v1.",
            "v1.-3",
            "v1.4x",
            "v2.4",
            "v1.99999999999999999999999",
        ] {
            assert_eq!(
                ListCursor::decode(text).map_err(|error| error.kind()),
                Err(ErrorKind::InvalidInput),
                "{text}"
            );
        }
    }

    #[test]
    fn limits_are_checked_at_both_ends() {
        assert_eq!(
            check_list_limit(0).map_err(|error| error.kind()),
            Err(ErrorKind::InvalidInput)
        );
        assert!(check_list_limit(1).is_ok());
        assert!(check_list_limit(MAX_LIST_LIMIT).is_ok());
        assert_eq!(
            check_list_limit(MAX_LIST_LIMIT + 1).map_err(|error| error.kind()),
            Err(ErrorKind::TooLarge)
        );
    }
}
