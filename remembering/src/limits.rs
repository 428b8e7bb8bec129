//! Pass limits (SPEC §5): how much one finite pass may do.

use memory_core::activity::thread::MAX_PAGE_RECORDS;

use crate::error::RememberingError;

/// Limits of one committed-activity pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassLimits {
    /// Most records processed in one pass.
    pub max_records: usize,
    /// Most records read per page (at most [`MAX_PAGE_RECORDS`]).
    pub page_size: usize,
    /// The pass starts no record after this many milliseconds.
    pub timeout_ms: u64,
    /// The lease's length; must exceed `timeout_ms` so a pass ends before its lease does.
    pub lease_ms: u64,
}

impl Default for PassLimits {
    fn default() -> Self {
        Self {
            max_records: 1_000,
            page_size: 100,
            timeout_ms: 10_000,
            lease_ms: 30_000,
        }
    }
}

impl PassLimits {
    /// Checks every limit; called before a pass claims anything.
    pub fn validate(&self) -> Result<(), RememberingError> {
        let invalid = |field, reason| Err(RememberingError::InvalidLimits { field, reason });
        if self.max_records == 0 {
            return invalid("max_records", "must be positive");
        }
        if self.page_size == 0 || self.page_size > MAX_PAGE_RECORDS {
            return invalid("page_size", "must be between 1 and 10,000");
        }
        if self.timeout_ms == 0 {
            return invalid("timeout_ms", "must be positive");
        }
        if self.lease_ms <= self.timeout_ms {
            return invalid("lease_ms", "must exceed timeout_ms");
        }
        if i64::try_from(self.lease_ms).is_err() {
            return invalid("lease_ms", "must fit in 63 bits");
        }
        Ok(())
    }
}
