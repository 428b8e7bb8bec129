//! Admission (SPEC §5): `admit` returns `Queued` only after the intent is durable; at capacity it refuses
//! with a typed error and evicts nothing. `submit` is the foreground path: when admission fails it parks
//! the intent in a durable outbox and still returns, so a full queue never fails the user's request;
//! [`Admission::retry_outbox`] admits parked intents later.

use std::sync::Arc;

use memory_core::Clock;
use memory_core::StoreFault;
use memory_core::activity::{ActivityError, Intent, IntentId, RememberingStore};

/// Default most open remember intents.
pub const DEFAULT_CAPACITY: u64 = 100_000;
/// Default most parked intents.
pub const DEFAULT_OUTBOX_CAPACITY: u64 = 100_000;

/// A durable admission: the intent is recorded and will be processed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// The intent's id.
    pub id: IntentId,
    /// True when the same intent was already recorded.
    pub already_admitted: bool,
}

/// What the foreground path got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submission {
    /// Admitted durably.
    Queued(Queued),
    /// Admission failed; the intent is parked in the outbox for a later retry.
    Parked {
        /// The admission error's kind (`at-capacity`, `busy`, `storage`).
        reason: &'static str,
    },
    /// Neither admission nor the outbox took it; the caller may log and move on.
    Dropped {
        /// The outbox error's kind.
        reason: &'static str,
    },
}

/// What a retry of the outbox did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutboxReport {
    /// Parked intents now admitted.
    pub admitted: usize,
    /// Parked intents still waiting (capacity or a failure stopped the retry).
    pub still_parked: bool,
}

/// Admits intents into a remembering store.
pub struct Admission {
    store: Arc<dyn RememberingStore>,
    clock: Arc<dyn Clock>,
    capacity: u64,
    outbox_capacity: u64,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Admission")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

fn reason(error: &ActivityError) -> &'static str {
    match error {
        ActivityError::AtCapacity { .. } => "at-capacity",
        ActivityError::Store(StoreFault::Busy { .. }) => "busy",
        ActivityError::TooLarge { .. } => "too-large",
        ActivityError::InvalidInput { .. } => "invalid-input",
        _ => "storage",
    }
}

impl Admission {
    /// An admission with the default capacities.
    pub fn new(store: Arc<dyn RememberingStore>, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            clock,
            capacity: DEFAULT_CAPACITY,
            outbox_capacity: DEFAULT_OUTBOX_CAPACITY,
        }
    }

    /// Sets the most open remember intents.
    pub fn with_capacity(mut self, capacity: u64) -> Self {
        self.capacity = capacity;
        self
    }

    /// Sets the most parked intents.
    pub fn with_outbox_capacity(mut self, capacity: u64) -> Self {
        self.outbox_capacity = capacity;
        self
    }

    /// Records `intent` durably and returns `Queued` after it is persisted.
    pub fn admit(&self, intent: &Intent) -> Result<Queued, ActivityError> {
        let admitted = self
            .store
            .admit(intent, self.capacity, self.clock.now_millis())?;
        Ok(Queued {
            id: admitted.id,
            already_admitted: admitted.already_admitted,
        })
    }

    /// The foreground path: admit, or park in the outbox when admission fails; never an error.
    pub fn submit(&self, intent: &Intent) -> Submission {
        match self.admit(intent) {
            Ok(queued) => Submission::Queued(queued),
            // A malformed or oversized intent will never be admitted; parking it would only retry forever.
            Err(error @ (ActivityError::TooLarge { .. } | ActivityError::InvalidInput { .. })) => {
                Submission::Dropped {
                    reason: reason(&error),
                }
            }
            Err(admission_error) => {
                match self
                    .store
                    .outbox_put(intent, self.outbox_capacity, self.clock.now_millis())
                {
                    Ok(()) => {
                        tracing::info!(
                            reason = reason(&admission_error),
                            "intent parked in outbox"
                        );
                        Submission::Parked {
                            reason: reason(&admission_error),
                        }
                    }
                    Err(outbox_error) => {
                        tracing::warn!(reason = reason(&outbox_error), "intent dropped");
                        Submission::Dropped {
                            reason: reason(&outbox_error),
                        }
                    }
                }
            }
        }
    }

    /// Admits up to `limit` parked intents, oldest first; stops at the first refusal.
    pub fn retry_outbox(&self, limit: usize) -> Result<OutboxReport, ActivityError> {
        let mut report = OutboxReport::default();
        let parked = self.store.outbox_peek(limit)?;
        let total = parked.len();
        for (row, _intent) in parked {
            match self
                .store
                .outbox_admit(row, self.capacity, self.clock.now_millis())
            {
                Ok(_) => report.admitted += 1,
                Err(ActivityError::AtCapacity { .. }) => {
                    report.still_parked = true;
                    return Ok(report);
                }
                Err(error) => return Err(error),
            }
        }
        report.still_parked = total == limit;
        Ok(report)
    }
}
