//! The decisions of the activity stores, once for every backend (SPEC §5).
//!
//! The same shape as documents' [`crate::write::PreparedWrite`]: a backend checks and encodes the call
//! before its transaction, reads what the rules need inside it, asks a pure function here what to do,
//! and persists that. So the SQL backends keep only their statements, locks and transactions; a rule
//! fixed here is fixed in every store.
//!
//! - [`progress`]: lease claims and their epochs, why a fenced write changed nothing, pending output
//!   and cursor moves, and the codec of a progress row.
//! - [`intents`]: admission (capacity, cleanup reopening), intent claims, saved commands, and the
//!   codecs of intent, reference and outbox rows.
//!
//! Rows are described by their columns in the types both SQL engines store (`i64`, text, nullable),
//! so a backend maps its driver row to one of the `*Columns` structs and never decodes by itself.

pub mod intents;
pub mod progress;

use std::time::Duration;

use serde::de::DeserializeOwned;

use super::{ActivityError, FencingEpoch};
use crate::StoreFault;
use crate::document::EpochMillis;

/// Most rows one page of references or outbox entries may hold (and most references or documents one
/// call may pass).
pub const MAX_PAGE_ROWS: usize = 10_000;
/// Most rows one `inspect_all` of progress returns.
pub const MAX_INSPECT_ROWS: usize = 10_000;
/// How long a `release` waits for the store before leaving the lease to expire.
pub const RELEASE_WAIT: Duration = Duration::from_millis(500);

/// A stored row that does not parse or contradicts itself.
pub fn corrupt(what: impl Into<String>) -> ActivityError {
    ActivityError::Store(StoreFault::Corrupt { what: what.into() })
}

/// A stored integer as an unsigned number; a negative one is corrupt (`negative {what}`).
pub fn stored_u64(value: i64, what: &'static str) -> Result<u64, ActivityError> {
    u64::try_from(value).map_err(|_| corrupt(format!("negative {what}")))
}

/// A sequence, epoch or row number as the SQL engines' 64-bit integer, refusing what they cannot hold.
pub fn column_i64(value: u64, field: &'static str) -> Result<i64, ActivityError> {
    i64::try_from(value).map_err(|_| ActivityError::TooLarge {
        limit: field,
        max: i64::MAX as u64,
        actual: value,
    })
}

/// When a lease of `lease_ms` taken at `now` expires; a lease must last at least a millisecond.
pub fn lease_expiry(lease_ms: u64, now: EpochMillis) -> Result<EpochMillis, ActivityError> {
    if lease_ms == 0 {
        return Err(ActivityError::invalid("lease_ms", "must be positive"));
    }
    Ok(now.saturating_add(column_i64(lease_ms, "lease_ms")?))
}

/// The epoch of the next claim: strictly larger than every epoch handed out before (`current`, when
/// any was), so a re-claim by the same owner fences its older handle too.
pub fn next_epoch(current: Option<FencingEpoch>) -> Result<FencingEpoch, ActivityError> {
    let next = current
        .map_or(0, |epoch| epoch.get())
        .checked_add(1)
        .ok_or(ActivityError::TooLarge {
            limit: "fencing epoch",
            max: u64::MAX,
            actual: u64::MAX,
        })?;
    // Checked here rather than at bind time, so no backend persists an epoch it cannot read back.
    column_i64(next, "fencing epoch")?;
    Ok(FencingEpoch::new(next))
}

/// A page size between 1 and [`MAX_PAGE_ROWS`] (or [`MAX_INSPECT_ROWS`]), checked before any read.
pub fn check_page(limit: usize, max: usize, field: &'static str) -> Result<(), ActivityError> {
    if limit == 0 || limit > max {
        return Err(ActivityError::invalid(
            field,
            format!("must be between 1 and {max}"),
        ));
    }
    Ok(())
}

/// At most [`MAX_PAGE_ROWS`] items in one call, checked before any work.
pub fn check_batch(len: usize, limit: &'static str) -> Result<(), ActivityError> {
    if len > MAX_PAGE_ROWS {
        return Err(ActivityError::TooLarge {
            limit,
            max: MAX_PAGE_ROWS as u64,
            actual: len as u64,
        });
    }
    Ok(())
}

/// Parses stored JSON; a value that does not parse is corrupt (`{what} does not parse: ...`).
pub fn parse_stored<T: DeserializeOwned>(json: &str, what: &str) -> Result<T, ActivityError> {
    serde_json::from_str(json).map_err(|error| corrupt(format!("{what} does not parse: {error}")))
}

/// [`parse_stored`] for a nullable column.
pub fn parse_optional<T: DeserializeOwned>(
    json: Option<&str>,
    what: &str,
) -> Result<Option<T>, ActivityError> {
    json.map(|json| parse_stored(json, what)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_must_last_and_epochs_only_grow() {
        assert!(matches!(
            lease_expiry(0, 10),
            Err(ActivityError::InvalidInput {
                field: "lease_ms",
                ..
            })
        ));
        assert_eq!(lease_expiry(5, 10).expect("valid"), 15);
        assert_eq!(lease_expiry(5, i64::MAX).expect("saturates"), i64::MAX);
        assert!(lease_expiry(u64::MAX, 0).is_err());
        assert_eq!(next_epoch(None).expect("first"), FencingEpoch::new(1));
        assert_eq!(
            next_epoch(Some(FencingEpoch::new(7))).expect("next"),
            FencingEpoch::new(8)
        );
        assert!(next_epoch(Some(FencingEpoch::new(i64::MAX as u64))).is_err());
    }

    #[test]
    fn stored_integers_and_pages_are_bounded() {
        assert_eq!(stored_u64(3, "cursor").expect("valid"), 3);
        assert!(matches!(
            stored_u64(-1, "cursor"),
            Err(ActivityError::Store(StoreFault::Corrupt { what })) if what == "negative cursor"
        ));
        assert!(column_i64(u64::MAX, "cursor").is_err());
        assert!(check_page(0, MAX_PAGE_ROWS, "page").is_err());
        assert!(check_page(MAX_PAGE_ROWS + 1, MAX_PAGE_ROWS, "page").is_err());
        assert!(check_page(MAX_PAGE_ROWS, MAX_PAGE_ROWS, "page").is_ok());
        assert!(check_batch(MAX_PAGE_ROWS, "refs").is_ok());
        assert!(matches!(
            check_batch(MAX_PAGE_ROWS + 1, "refs"),
            Err(ActivityError::TooLarge { limit: "refs", .. })
        ));
    }
}
