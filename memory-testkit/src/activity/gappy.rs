//! A thread log double whose pages have a hole, for the rules that must notice one (a worker's pass
//! stops before the gap; a history page read backward fails instead of answering with a hole).

use memory_core::activity::{
    ActivityError, FoldCheckpoint, LogEntry, NewRecord, PendingThread, Sequence, ThreadBinding,
    ThreadDestination, ThreadId, ThreadLog, ThreadOverview, ThreadRecord,
};

/// A log whose pages skip one record, as a damaged or misbehaving log would: every other call goes to
/// the log it wraps.
#[derive(Debug)]
pub struct GappyLog<L> {
    inner: L,
    missing: Sequence,
}

impl<L: ThreadLog> GappyLog<L> {
    /// `inner`, whose pages never show record `missing`.
    pub fn new(inner: L, missing: Sequence) -> Self {
        Self { inner, missing }
    }
}

impl<L: ThreadLog> ThreadLog for GappyLog<L> {
    fn append_to(
        &self,
        thread: &ThreadId,
        destination: Option<&ThreadDestination>,
        record: NewRecord,
    ) -> Result<ThreadRecord, ActivityError> {
        self.inner.append_to(thread, destination, record)
    }

    fn inspect_tail(&self, thread: &ThreadId) -> Result<Sequence, ActivityError> {
        self.inner.inspect_tail(thread)
    }

    fn read_entries(
        &self,
        thread: &ThreadId,
        after: Sequence,
        limit: usize,
    ) -> Result<Vec<LogEntry>, ActivityError> {
        let mut page = self.inner.read_entries(thread, after, limit + 1)?;
        page.retain(|entry| entry.sequence() != self.missing);
        page.truncate(limit);
        Ok(page)
    }

    fn binding(&self, thread: &ThreadId) -> Result<Option<ThreadBinding>, ActivityError> {
        self.inner.binding(thread)
    }

    fn rebind(
        &self,
        thread: &ThreadId,
        destination: &ThreadDestination,
    ) -> Result<ThreadBinding, ActivityError> {
        self.inner.rebind(thread, destination)
    }

    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadId>, ActivityError> {
        self.inner.threads(after, limit)
    }

    fn pending_threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<PendingThread>, ActivityError> {
        self.inner.pending_threads(after, limit)
    }

    fn mark_all_pending(&self) -> Result<u64, ActivityError> {
        self.inner.mark_all_pending()
    }

    fn settle(&self, thread: &ThreadId, tail: Sequence) -> Result<bool, ActivityError> {
        self.inner.settle(thread, tail)
    }

    fn park(&self, thread: &ThreadId, sequence: Sequence, kind: &str) -> Result<(), ActivityError> {
        self.inner.park(thread, sequence, kind)
    }

    fn overview(&self) -> Result<ThreadOverview, ActivityError> {
        self.inner.overview()
    }

    fn load_checkpoint(
        &self,
        thread: &ThreadId,
        fold: &str,
        version: u32,
    ) -> Result<Option<FoldCheckpoint>, ActivityError> {
        self.inner.load_checkpoint(thread, fold, version)
    }

    fn save_checkpoint(
        &self,
        thread: &ThreadId,
        fold: &str,
        version: u32,
        checkpoint: &FoldCheckpoint,
    ) -> Result<(), ActivityError> {
        self.inner
            .save_checkpoint(thread, fold, version, checkpoint)
    }
}
