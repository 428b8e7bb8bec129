//! Runs the sources' lookups concurrently on the caller's task, without spawning (lookups may borrow).

use std::future::poll_fn;
use std::task::Poll;

use crate::recall::error::RecallError;
use crate::recall::lookup::{LookupFuture, MemoryLookup};

/// Polls every lookup until all have answered, in declaration order; returns the first error as soon as
/// it appears.
pub(crate) async fn try_join_all(
    reads: Vec<LookupFuture<'_>>,
) -> Result<Vec<MemoryLookup>, RecallError> {
    let mut pending: Vec<Option<LookupFuture<'_>>> = reads.into_iter().map(Some).collect();
    let mut answers: Vec<Option<MemoryLookup>> = pending.iter().map(|_| None).collect();
    poll_fn(|context| {
        let mut all_done = true;
        for (slot, answer) in pending.iter_mut().zip(answers.iter_mut()) {
            let Some(read) = slot else { continue };
            match read.as_mut().poll(context) {
                Poll::Pending => all_done = false,
                Poll::Ready(Ok(lookup)) => {
                    *answer = Some(lookup);
                    *slot = None;
                }
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
            }
        }
        if all_done {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    })
    .await?;
    Ok(answers.into_iter().flatten().collect())
}
