//! One activity pass of a worker: every processor over the threads the log marks pending, never
//! over every thread (the `remembering-worker` binary runs exactly this each pass).
//!
//! The thread log marks a thread pending with its tail on every append (and on a rebind), in the
//! append's transaction ([`ThreadLog::pending_threads`]). A pass visits those threads only, runs each
//! processor over each, and settles (unmarks) a thread once every processor reached the tail it was
//! marked with and found nothing beyond it. An append racing the pass moves the thread's pending
//! tail, so [`ThreadLog::settle`] leaves it pending for the next pass; a failed, held or timed-out
//! processor pass leaves it pending too. A database with years of idle threads therefore costs a
//! pass nothing for them, and an idle pass writes nothing at all.

use std::sync::Arc;

use memory_core::MemoryReader;
use memory_core::MemoryWriter;
use memory_core::activity::{ThreadId, ThreadLog};

use crate::activity::{ActivityProcessor, PassStop};
use crate::error::RememberingError;
use crate::extract::ThreadExtractor;

/// Pending threads listed per page.
pub const PENDING_PAGE: usize = 256;

/// What one pending pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingReport {
    /// Pending threads visited.
    pub threads: usize,
    /// Records advanced past, over every processor.
    pub processed: usize,
    /// Threads settled (nothing left for any processor).
    pub settled: usize,
    /// Threads a processor parked.
    pub parked: usize,
    /// Processor passes that failed (logged; the thread stays pending).
    pub failed: usize,
}

/// The processors of one worker over one thread log.
pub struct PendingPass<W, E> {
    log: Arc<dyn ThreadLog>,
    processors: Vec<ActivityProcessor<W, E>>,
}

impl<W, E> std::fmt::Debug for PendingPass<W, E> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PendingPass")
            .field("processors", &self.processors.len())
            .finish_non_exhaustive()
    }
}

impl<W: MemoryReader + MemoryWriter, E: ThreadExtractor> PendingPass<W, E> {
    /// `processors` over `log`'s pending threads.
    pub fn new(log: Arc<dyn ThreadLog>, processors: Vec<ActivityProcessor<W, E>>) -> Self {
        Self { log, processors }
    }

    /// Runs every processor over every pending thread once. Only listing the pending threads fails
    /// the pass; a thread's failure is logged and counted, and the thread stays pending.
    pub async fn run(&self) -> Result<PendingReport, RememberingError> {
        let mut report = PendingReport::default();
        let mut after: Option<ThreadId> = None;
        loop {
            let pending = self.log.pending_threads(after.as_ref(), PENDING_PAGE)?;
            let Some(last) = pending.last().map(|pending| pending.thread.clone()) else {
                break;
            };
            for thread in &pending {
                report.threads += 1;
                let mut done = true;
                for processor in &self.processors {
                    match processor.run_pass(&thread.thread).await {
                        Ok(pass) => {
                            report.processed += pass.processed;
                            if pass.stop == PassStop::Parked {
                                report.parked += 1;
                            }
                            done &= pass.stop == PassStop::ReachedTail
                                && !pass.pending_beyond_tail
                                && pass.cursor >= thread.tail;
                        }
                        Err(error) => {
                            done = false;
                            report.failed += 1;
                            tracing::warn!(%error, "thread pass failed");
                        }
                    }
                }
                if done {
                    match self.log.settle(&thread.thread, thread.tail) {
                        Ok(true) => report.settled += 1,
                        Ok(false) => {}
                        Err(error) => tracing::warn!(%error, "settling a thread failed"),
                    }
                }
            }
            after = Some(last);
        }
        Ok(report)
    }
}
