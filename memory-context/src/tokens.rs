//! The token counter a view counts with: memory-core's approximate counter unless the caller names a
//! real tokenizer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memory_core::{ApproximateTokenCounter, TokenCounter};

use crate::segment::Message;

/// Tokens charged per message for its role and framing, as chat APIs bill them (about four).
pub const MESSAGE_OVERHEAD_TOKENS: usize = 4;

static NEXT_COUNTER: AtomicU64 = AtomicU64::new(1);

/// A token counter with an identity, so a segment caches its count for the counter that counted it
/// and never hands that count to another.
#[derive(Clone)]
pub struct Counter {
    id: u64,
    inner: Arc<dyn TokenCounter>,
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Counter")
            .field("id", &self.id)
            .finish()
    }
}

impl Default for Counter {
    /// The approximate counter ([`ApproximateTokenCounter`]): no tokenizer, leans high.
    fn default() -> Self {
        Self::new(Arc::new(ApproximateTokenCounter))
    }
}

impl Counter {
    /// Wraps a counter (for example a model's tokenizer).
    pub fn new(inner: Arc<dyn TokenCounter>) -> Self {
        Self {
            id: NEXT_COUNTER.fetch_add(1, Ordering::Relaxed),
            inner,
        }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Tokens of a text.
    pub fn count(&self, text: &str) -> usize {
        self.inner.count(text)
    }

    /// Tokens of messages: each one's content, calls and names, plus [`MESSAGE_OVERHEAD_TOKENS`].
    pub fn count_messages(&self, messages: &[Message]) -> usize {
        messages
            .iter()
            .map(|message| {
                MESSAGE_OVERHEAD_TOKENS
                    + self.count(&message.content)
                    + message.name.as_deref().map_or(0, |name| self.count(name))
                    + message
                        .tool_calls
                        .iter()
                        .map(|call| {
                            self.count(&call.function.name) + self.count(&call.function.arguments)
                        })
                        .sum::<usize>()
            })
            .sum()
    }
}
