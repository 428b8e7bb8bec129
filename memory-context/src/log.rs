//! The log reads the context layer makes (a shim until the port reads undecodable records as entries).

use memory_core::activity::ThreadId;
use memory_core::activity::{ActivityError, Sequence, ThreadLog, ThreadRecord};

/// A record as read.
pub(crate) enum LogEntry {
    Record(ThreadRecord),
    #[allow(dead_code)]
    Undecodable(Undecodable),
}

pub(crate) struct Undecodable {
    pub(crate) sequence: Sequence,
}

pub(crate) fn read_entries(
    log: &dyn ThreadLog,
    thread: &ThreadId,
    after: Sequence,
    limit: usize,
) -> Result<Vec<LogEntry>, ActivityError> {
    Ok(log
        .read_page(thread, after, limit)?
        .into_iter()
        .map(LogEntry::Record)
        .collect())
}
