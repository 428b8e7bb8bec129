//! What one [`HttpChatModel`](crate::HttpChatModel) has done, in plain atomics: each model owns its
//! meter (no global registry), and whoever exports metrics reads a snapshot.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::KINDS;
use crate::{ModelError, TokenUsage};

/// A reading of a model's meter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeterSnapshot {
    /// Calls of `complete` that answered.
    pub calls: u64,
    /// Calls of `complete` that failed, by [`ModelError::kind`] of their final failure (kinds that
    /// never happened are absent).
    pub failures: BTreeMap<&'static str, u64>,
    /// Attempts made again after a transient failure (the structured-output fallback is none).
    pub retries: u64,
    /// Prompt tokens the endpoint reported, over every attempt it answered (a cut answer included:
    /// it was paid for).
    pub prompt_tokens: u64,
    /// Completion tokens, likewise.
    pub completion_tokens: u64,
    /// Milliseconds of the answered calls, first attempt to answer, summed.
    pub latency_ms_total: u64,
}

/// The live counters behind a [`MeterSnapshot`]. Relaxed ordering: each counter is read on its
/// own, and a snapshot taken during a call may see some of its counts and not others.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    calls: AtomicU64,
    failures: [AtomicU64; KINDS.len()],
    retries: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    latency_ms_total: AtomicU64,
}

impl Meter {
    pub(crate) fn answered(&self, latency_ms: u64) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.latency_ms_total
            .fetch_add(latency_ms, Ordering::Relaxed);
    }

    pub(crate) fn failed(&self, error: &ModelError) {
        self.failures[error.slot()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn tokens(&self, usage: TokenUsage) {
        self.prompt_tokens
            .fetch_add(usage.prompt, Ordering::Relaxed);
        self.completion_tokens
            .fetch_add(usage.completion, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> MeterSnapshot {
        let failures = KINDS
            .iter()
            .zip(&self.failures)
            .map(|(kind, count)| (*kind, count.load(Ordering::Relaxed)))
            .filter(|(_, count)| *count > 0)
            .collect();
        MeterSnapshot {
            calls: self.calls.load(Ordering::Relaxed),
            failures,
            retries: self.retries.load(Ordering::Relaxed),
            prompt_tokens: self.prompt_tokens.load(Ordering::Relaxed),
            completion_tokens: self.completion_tokens.load(Ordering::Relaxed),
            latency_ms_total: self.latency_ms_total.load(Ordering::Relaxed),
        }
    }
}
