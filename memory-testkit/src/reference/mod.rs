//! In-memory reference implementations of the activity ports and the vector port.
//!
//! They keep the rules of [`memory_core::activity`] and [`memory_core::vectors`] with plain maps behind one mutex, so
//! the port suites have a store to be checked against that involves no database, and the broken stores
//! of the suites' own tests have something correct to break. Like a database file, the state is shared
//! by every clone of a handle: a clone is "another connection" to the same storage.
//!
//! Saved values (records, outputs, proposals, commands, intents) go through their canonical JSON and
//! back, exactly as the SQL stores keep them, so a number written `5.0` reads back as `5` here too.

mod activity;
mod intents;
mod vectors;

pub use activity::InMemoryActivity;
pub use vectors::InMemoryVectorStore;

use memory_core::StoreFault;
use serde::Serialize;
use serde::de::DeserializeOwned;

use memory_core::activity::{ActivityError, canonical_progress_json};

/// The value as a SQL store reads it back: canonical JSON (size-checked under `limit`), parsed again.
fn stored<T: Serialize + DeserializeOwned>(
    limit: &'static str,
    value: &T,
) -> Result<T, ActivityError> {
    let json = canonical_progress_json(limit, value)?;
    serde_json::from_str(&json).map_err(|error| {
        ActivityError::Store(StoreFault::Corrupt {
            what: format!("{limit} does not parse back: {error}"),
        })
    })
}
