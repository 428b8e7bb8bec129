//! Recall with an injected slow source (answering after the deadline) and a failing one, each declared
//! essential and optional, next to the healthy `direct` source (memory-core's composition of several
//! sources, which a host composing its own sources relies on; the product's recall has one source).

use std::time::{Duration, Instant};

use memory_core::recall::{
    MemoryLookup, RecallError, RecallLimits, RecallSource, SourceId, SourceStatus, recall,
};
use memory_core::{ApproximateTokenCounter, MemoryError};
use semantic_index::Embedder;
use serde::Serialize;

use crate::corpus::EvalQuery;
use crate::modes::Recaller;

/// The deadline of the fault recalls.
pub const FAULT_TIMEOUT_MS: u64 = 250;
/// How long the slow source takes: well past the deadline.
pub const SLOW_SOURCE_MS: u64 = 2_000;

/// How the injected source misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// Answers `NoMatch` after [`SLOW_SOURCE_MS`].
    Slow,
    /// The same slow source behind its own timeout of half the recall deadline, which answers
    /// `Unavailable` instead: how a caller gets a best-effort recall from a slow optional source, since
    /// recall's deadline covers the whole call and fails it without a partial result.
    SlowWithSourceTimeout,
    /// Answers `Unavailable` at once.
    Unavailable,
    /// Returns a storage error at once.
    Error,
}

/// What one fault recall did.
#[derive(Debug, Clone, Serialize)]
pub struct FaultCase {
    /// The injected fault.
    pub fault: Fault,
    /// Whether the injected source was declared essential.
    pub essential: bool,
    /// `ok` or `error`.
    pub result: String,
    /// The error kind when the recall failed.
    pub error_kind: Option<String>,
    /// The injected source's reported status when the recall succeeded.
    pub injected_status: Option<String>,
    /// Passages the healthy source still contributed.
    pub passages: usize,
    /// How long the recall took.
    pub elapsed_ms: f64,
}

fn injected(fault: Fault, essential: bool) -> Result<RecallSource<'static>, RecallError> {
    let id = SourceId::new("injected")?;
    let read = async move {
        match fault {
            Fault::Slow => {
                tokio::time::sleep(Duration::from_millis(SLOW_SOURCE_MS)).await;
                Ok(MemoryLookup::NoMatch)
            }
            Fault::SlowWithSourceTimeout => {
                let slow = tokio::time::sleep(Duration::from_millis(SLOW_SOURCE_MS));
                match tokio::time::timeout(Duration::from_millis(FAULT_TIMEOUT_MS / 2), slow).await
                {
                    Ok(()) => Ok(MemoryLookup::NoMatch),
                    Err(_) => Ok(MemoryLookup::Unavailable {
                        reason: "source timeout".to_owned(),
                    }),
                }
            }
            Fault::Unavailable => Ok(MemoryLookup::Unavailable {
                reason: "injected outage".to_owned(),
            }),
            Fault::Error => Err(RecallError::Source(MemoryError::storage(
                "injected source",
                "injected failure",
            ))),
        }
    };
    Ok(RecallSource::new(id, essential, read))
}

fn status_name(status: &SourceStatus) -> String {
    match status {
        SourceStatus::Found => "found",
        SourceStatus::NoMatch => "no-match",
        SourceStatus::Unavailable { .. } => "unavailable",
        SourceStatus::InsufficientFreshness => "insufficient-freshness",
    }
    .to_owned()
}

/// Runs every fault, essential and optional, beside the `direct` source for `query`.
pub async fn run_faults<E: Embedder>(
    recaller: &Recaller<'_, E>,
    query: &EvalQuery,
) -> anyhow::Result<Vec<FaultCase>> {
    let limits = RecallLimits::builder()
        .max_sources(recaller.limits().max_sources())
        .max_items(recaller.limits().max_items())
        .max_bytes(recaller.limits().max_bytes())
        .max_tokens(recaller.limits().max_tokens())
        .timeout_ms(FAULT_TIMEOUT_MS)
        .build()?;
    let mut cases = Vec::new();
    for fault in [
        Fault::Slow,
        Fault::SlowWithSourceTimeout,
        Fault::Unavailable,
        Fault::Error,
    ] {
        for essential in [true, false] {
            let sources = vec![
                recaller.direct_source(query, false)?,
                injected(fault, essential)?,
            ];
            let started = Instant::now();
            let result = recall(sources, &limits, &ApproximateTokenCounter).await;
            let elapsed_ms = started.elapsed().as_secs_f64() * 1_000.0;
            cases.push(match result {
                Ok(recalled) => FaultCase {
                    fault,
                    essential,
                    result: "ok".to_owned(),
                    error_kind: None,
                    injected_status: recalled
                        .outcomes
                        .iter()
                        .find(|outcome| outcome.id.as_str() == "injected")
                        .map(|outcome| status_name(&outcome.status)),
                    passages: recalled.passages.len(),
                    elapsed_ms,
                },
                Err(error) => FaultCase {
                    fault,
                    essential,
                    result: "error".to_owned(),
                    error_kind: Some(error.kind().as_str().to_owned()),
                    injected_status: None,
                    passages: 0,
                    elapsed_ms,
                },
            });
        }
    }
    Ok(cases)
}
