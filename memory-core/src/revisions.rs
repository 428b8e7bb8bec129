//! A document's history: what the store keeps of each revision, and when its words go (issue 42).
//!
//! Every committed write leaves a receipt holding the document as that write left it (SPEC §2.2), so
//! the receipts of a key are its history: each revision's text, attribution (who said it) and time
//! (`modified_at`), in commit order. Nothing else copies the words; a store reads the history
//! through [`crate::ports::RevisionHistory`], joining its revision links with their receipts.
//!
//! Decisions written down here:
//! - **A bound.** A store keeps the words of the newest [`RevisionRetention::max_revisions`]
//!   revisions of each document ([`DEFAULT_MAX_REVISIONS`] unless configured). When a write makes
//!   a document's revision count pass it, the oldest revisions that still hold words are
//!   [`redact`]ed in the same transaction: their receipts keep the revision, its predecessor, the
//!   time, the locator and the scopes, and lose the content (text, attributions, metadata). A
//!   history read still lists them, marked `words_kept: false`, so no revision ever names a
//!   predecessor the history cannot show. Lowering the bound drops words at each document's next
//!   write; raising it brings none back.
//! - **Withdrawal leaves only the tombstone.** A withdrawal redacts every earlier receipt of its
//!   key in its own transaction (the tombstone itself holds no words: who withdrew it, when and
//!   why). A forget is a withdrawal made by cleanup, and read-time suppression hides a forgotten
//!   source's revisions until then (memory-cli's history read).
//! - **Replays stay replays.** Retrying a command whose receipt was redacted returns that redacted
//!   receipt (`replayed: true`): the same revision, without the words. The receipt keeps the
//!   command's digest, so a retry is still recognised, and an operation id is never reused.

use crate::document::{MemoryContent, MemoryDocument};
use crate::error::MemoryError;
use crate::ports::ChangeSequence;
use crate::write::MemoryReceipt;

/// The revisions of a document whose words a store keeps when nothing else is configured.
pub const DEFAULT_MAX_REVISIONS: usize = 100;
/// The largest bound a store accepts.
pub const MAX_MAX_REVISIONS: usize = 1_000_000;
/// Most revisions one history read answers; larger limits are clamped.
pub const MAX_REVISIONS_PER_READ: usize = 1_000;

/// How many revisions of each document keep their words: the newest `max_revisions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RevisionRetention(usize);

impl RevisionRetention {
    /// Keeps the words of the newest `max_revisions` revisions (1 to [`MAX_MAX_REVISIONS`]).
    pub fn new(max_revisions: usize) -> Result<Self, MemoryError> {
        if max_revisions == 0 {
            return Err(MemoryError::invalid(
                "max_revisions",
                "must be at least 1 (the current revision always keeps its words)",
            ));
        }
        if max_revisions > MAX_MAX_REVISIONS {
            return Err(MemoryError::TooLarge {
                limit: "max_revisions",
                max: MAX_MAX_REVISIONS as u64,
                actual: max_revisions as u64,
            });
        }
        Ok(Self(max_revisions))
    }

    /// Parses a configured bound (an environment variable or a flag's text).
    pub fn parse(text: &str) -> Result<Self, MemoryError> {
        let value = text
            .trim()
            .parse::<usize>()
            .map_err(|_| MemoryError::invalid("max_revisions", "must be a whole number from 1"))?;
        Self::new(value)
    }

    /// The number of newest revisions that keep their words.
    pub fn max_revisions(self) -> usize {
        self.0
    }

    /// Which earlier receipts of its key a committed write leaves without words, given the document
    /// it committed: all of them for a withdrawal, else those past the newest `max_revisions`
    /// (the committed one counted).
    pub fn words_to_drop(self, committed: &MemoryDocument) -> WordsToDrop {
        if committed.withdrawn.is_some() {
            WordsToDrop::AllEarlier
        } else {
            WordsToDrop::BeyondNewest(self.0)
        }
    }
}

impl Default for RevisionRetention {
    fn default() -> Self {
        Self(DEFAULT_MAX_REVISIONS)
    }
}

/// What a committed write redacts of its key's receipts ([`RevisionRetention::words_to_drop`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WordsToDrop {
    /// Every receipt of the key but the committed one (a withdrawal).
    AllEarlier,
    /// Every receipt older than the newest `n` revisions of the key, the committed one counted.
    BeyondNewest(usize),
}

impl WordsToDrop {
    /// How many of the newest receipts (the committed one first) keep their words.
    pub fn kept(self) -> usize {
        match self {
            Self::AllEarlier => 1,
            Self::BeyondNewest(newest) => newest,
        }
    }
}

/// The receipt without its words: content emptied (as a withdrawal tombstone's), `redacted` set.
/// Redacting a redacted receipt changes nothing.
pub fn redact(mut receipt: MemoryReceipt) -> MemoryReceipt {
    receipt.document.content = MemoryContent::tombstone();
    receipt.redacted = true;
    receipt
}

/// One committed revision as a history read answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRevision {
    /// The document as the write left it: its content is empty when its words are gone, and a
    /// withdrawal is its tombstone (the reason and time).
    pub document: MemoryDocument,
    /// Whether the revision still holds its words (false past the bound or after a withdrawal; a
    /// tombstone holds none to begin with and reads as kept).
    pub words_kept: bool,
    /// The change sequence it was committed at.
    pub sequence: ChangeSequence,
}

impl StoredRevision {
    /// The revision its stored receipt records, committed at `sequence`.
    pub fn from_receipt(receipt: MemoryReceipt, sequence: ChangeSequence) -> Self {
        Self {
            words_kept: !receipt.redacted,
            document: receipt.document,
            sequence,
        }
    }
}

/// Checks a stored receipt against its row's `redacted` column: they agree, and a redacted receipt
/// holds no words. Every store's consistency check calls it; a disagreement is corrupt.
pub fn check_stored_redaction(receipt: &MemoryReceipt, column: bool) -> Result<(), MemoryError> {
    if receipt.redacted != column {
        return Err(crate::storage::corrupt(
            "a receipt's redaction disagrees with its row",
        ));
    }
    if receipt.redacted && receipt.document.content != MemoryContent::tombstone() {
        return Err(crate::storage::corrupt(
            "a redacted receipt still holds words",
        ));
    }
    Ok(())
}

/// The limit of a history read, clamped to [`MAX_REVISIONS_PER_READ`].
pub fn clamp_revisions_limit(limit: usize) -> usize {
    limit.min(MAX_REVISIONS_PER_READ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_is_one_to_the_maximum() {
        assert!(RevisionRetention::new(0).is_err());
        assert!(RevisionRetention::new(MAX_MAX_REVISIONS + 1).is_err());
        assert_eq!(
            RevisionRetention::parse(" 3 ")
                .expect("valid")
                .max_revisions(),
            3
        );
        assert!(RevisionRetention::parse("three").is_err());
        assert_eq!(
            RevisionRetention::default().max_revisions(),
            DEFAULT_MAX_REVISIONS
        );
    }
}
