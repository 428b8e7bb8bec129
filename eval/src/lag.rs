//! Source-commit-to-recallable lag, measured while other writes keep arriving.
//!
//! Two figures, each over single-record commits:
//! - thread record: from the acknowledged append of one user statement to a thread (the source
//!   commit): run the committed-activity
//!   pass a worker woken by the append would run, then wait until the indexer has indexed every change
//!   committed by then; the statement is then recallable in every mode;
//! - memory write: from one acknowledged document write, wait until it is indexed (lexical search is updated
//!   in the write's own transaction, so its lag is zero by construction).
//!
//! A background task keeps writing filler documents, so the indexer is never idle. Its rate is a quarter
//! of the indexing throughput measured earlier in the run ([`filler_interval`]): a fixed rate near the
//! indexer's capacity would let the backlog, and so every lag, grow without bound on a slower or busier
//! machine, which measures the machine rather than the pipeline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use memory_core::activity::{NewRecord, ThreadId, ThreadLog};
use memory_core::{
    ChangeFeed, DocumentId, MemoryAccess, MemoryContent, MemoryKey, MemoryWrite, MemoryWriter,
    OperationId,
};
use memory_sqlite::SqliteStore;
use semantic_index::Embedder;
use serde::Serialize;

use crate::metrics::{LatencyFigures, percentiles};
use crate::pipeline::{Semantic, Stores, drain_thread, processor};
use crate::progress::Progress;

/// Shortest pause between background filler writes.
pub const MIN_FILLER_INTERVAL: Duration = Duration::from_millis(15);
/// Share of the measured indexing throughput (changes per second) the filler writes take.
pub const FILLER_SHARE: f64 = 0.25;
/// Pause used when no indexing throughput was measured.
const FALLBACK_FILLER_INTERVAL: Duration = Duration::from_millis(100);

/// Pause between filler writes for an indexer measured at `changes_per_second`.
pub fn filler_interval(changes_per_second: f64) -> Duration {
    if !(changes_per_second.is_finite() && changes_per_second > 0.0) {
        return FALLBACK_FILLER_INTERVAL;
    }
    Duration::from_secs_f64(1.0 / (changes_per_second * FILLER_SHARE)).max(MIN_FILLER_INTERVAL)
}

/// Lag figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LagFigures {
    /// Thread record appended -> recallable through the embedding indexes.
    pub thread_record: LatencyFigures,
    /// Memory document committed -> recallable through the embedding indexes.
    pub memory_write: LatencyFigures,
    /// Filler writes committed meanwhile by the background writer.
    pub background_writes: usize,
    /// Pause between filler writes, in milliseconds.
    pub filler_interval_ms: f64,
}

fn spawn_filler(
    store: Arc<SqliteStore>,
    access: MemoryAccess,
    stop: Arc<AtomicBool>,
    interval: Duration,
) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut written = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let write = DocumentId::new(format!("filler/{written}")).and_then(|id| {
                Ok(MemoryWrite::Put {
                    key: MemoryKey {
                        namespace: access.namespace.clone(),
                        id,
                    },
                    operation_id: OperationId::new(format!("filler-{written}"))?,
                    expected_revision: None,
                    locator: "eval:filler".to_owned(),
                    content: MemoryContent::text(format!(
                        "Background note number {written} about the quarterly planning board."
                    )),
                    scopes: vec![access.scope.clone()],
                })
            });
            if let Ok(write) = write
                && store.apply(write).await.is_ok()
            {
                written += 1;
            }
            tokio::time::sleep(interval).await;
        }
        written
    })
}

/// Measures both lags over `samples` commits each, with filler writes every `filler_interval`.
pub async fn measure<E: Embedder>(
    stores: &Stores,
    semantic: &Semantic<E>,
    access: &MemoryAccess,
    seed: u64,
    samples: usize,
    filler_interval: Duration,
    progress: &Progress,
) -> anyhow::Result<LagFigures> {
    let stop = Arc::new(AtomicBool::new(false));
    let filler = spawn_filler(
        stores.memory.clone(),
        access.clone(),
        stop.clone(),
        filler_interval,
    );
    let processor = processor(stores, seed)?;
    let thread = ThreadId::new("lag-probe-thread")?;
    let bar = progress.bar("lag", (samples * 2) as u64);
    let (mut thread_lags, mut write_lags) = (Vec::new(), Vec::new());
    let result: anyhow::Result<()> = async {
        for sample in 0..samples {
            // Cycling through cities keeps every statement one the extractor recognises.
            let cities = ["Lisbon", "Osaka", "Tallinn", "Montreal", "Nairobi"];
            let text = format!("I live in {} now.", cities[sample % cities.len()]);
            let record = NewRecord::user(format!("Probe Person {sample}"), text, 0);
            stores.log.append(&thread, record)?;
            let started = Instant::now();
            drain_thread(&processor, &thread).await?;
            let head = stores.memory.head().await?;
            semantic.indexer.wait_until_indexed(head).await?;
            thread_lags.push(started.elapsed().as_secs_f64() * 1_000.0);
            bar.inc(1);

            let write = MemoryWrite::Put {
                key: MemoryKey {
                    namespace: access.namespace.clone(),
                    id: DocumentId::new(format!("probe/{sample}"))?,
                },
                operation_id: OperationId::new(format!("probe-{sample}"))?,
                expected_revision: None,
                locator: "eval:probe".to_owned(),
                content: MemoryContent::text(format!(
                    "Probe {sample} prefers window seats on trains."
                )),
                scopes: vec![access.scope.clone()],
            };
            stores.memory.apply(write).await?;
            let started = Instant::now();
            let head = stores.memory.head().await?;
            semantic.indexer.wait_until_indexed(head).await?;
            write_lags.push(started.elapsed().as_secs_f64() * 1_000.0);
            bar.inc(1);
        }
        Ok(())
    }
    .await;
    bar.finish_and_clear();
    stop.store(true, Ordering::Relaxed);
    let background_writes = filler.await.unwrap_or(0);
    result?;
    Ok(LagFigures {
        thread_record: percentiles(&thread_lags),
        memory_write: percentiles(&write_lags),
        background_writes,
        filler_interval_ms: filler_interval.as_secs_f64() * 1_000.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filler_takes_a_quarter_of_the_indexing_rate() {
        // 40 changes/s -> 10 filler writes/s -> one every 100 ms.
        assert_eq!(filler_interval(40.0), Duration::from_millis(100));
        assert_eq!(filler_interval(10_000.0), MIN_FILLER_INTERVAL);
        assert_eq!(filler_interval(0.0), FALLBACK_FILLER_INTERVAL);
        assert_eq!(filler_interval(f64::NAN), FALLBACK_FILLER_INTERVAL);
    }
}
