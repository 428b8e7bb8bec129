//! `memory status`: memory-service's status of the store and its index ([`memory_service::status`]),
//! with the last errors of `memory hook` by kind (`hooks.errors`), from the hook state folder's log.

use serde::Serialize;

use crate::database::Database;
use crate::hook::state::{HookErrors, dir_for, read_errors};
pub use memory_service::status::{
    ChunkStatus, DestinationStatus, GraphStatus, StatusResult, ThreadStatus, UnindexedStatus,
    status,
};

/// What `memory status` prints: the store's status and what `memory hook` recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandStatus {
    /// The store, its semantic index and its threads.
    #[serde(flatten)]
    pub store: StatusResult,
    /// The hooks' recent failures (`memory hook`), read from the hook state folder's error log (see
    /// [`crate::hook::state`]): `{total, by_kind: {KIND: {count, last: {at, hook, kind, message}}},
    /// unreadable}`.
    pub hooks: HookStatus,
}

/// What `memory hook` recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HookStatus {
    /// The last hook errors, by kind.
    pub errors: HookErrors,
}

impl CommandStatus {
    /// `store` with the hook errors logged for `database`.
    pub fn with_hooks(store: StatusResult, database: &Database) -> Self {
        Self {
            store,
            hooks: HookStatus {
                errors: read_errors(&dir_for(database)),
            },
        }
    }
}
