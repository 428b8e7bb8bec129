//! Quality and warm latency of every mode over the corpus's queries.

use std::time::Instant;

use semantic_index::Embedder;
use serde::Serialize;

use crate::corpus::{EvalQuery, document_id};
use crate::metrics::{AnswerKey, LatencyFigures, QualityFigures, RankedAnswer, percentiles, score};
use crate::modes::{Mode, Recaller};
use crate::progress::Progress;

/// Queries per mode run before timing, so caches, the model session and SQLite pages are warm.
pub const WARMUP_QUERIES: usize = 10;

/// The answer key of a query.
pub fn answer_key(query: &EvalQuery) -> AnswerKey {
    let subject = document_id(&query.person, &query.topic);
    AnswerKey {
        expected_document: query.expected_document.clone(),
        forbidden_documents: if query.expected_document.is_none() {
            vec![subject.clone()]
        } else {
            Vec::new()
        },
        forbidden_values: query.forbidden_values.clone(),
        subject_document: subject,
    }
}

/// Quality and latency of one mode.
#[derive(Debug, Clone, Serialize)]
pub struct ModeFigures {
    /// The mode.
    pub mode: Mode,
    /// hit@k, MRR, misses, contradictory.
    pub quality: QualityFigures,
    /// Warm added recall latency (the whole `recall` call, query embedding included).
    pub latency: LatencyFigures,
    /// Recalls that failed (any error): must be zero.
    pub errors: usize,
}

/// Runs every query in `mode`; answers the figures and the ranked answers.
pub async fn run_mode<E: Embedder>(
    recaller: &Recaller<'_, E>,
    mode: Mode,
    queries: &[EvalQuery],
    progress: &Progress,
) -> (ModeFigures, Vec<RankedAnswer>) {
    for query in queries.iter().take(WARMUP_QUERIES) {
        let _ = recaller.recall(mode, query).await;
    }
    let bar = progress.bar(mode.as_str(), queries.len() as u64);
    let mut answers = Vec::with_capacity(queries.len());
    let mut samples = Vec::with_capacity(queries.len());
    let mut errors = 0;
    for query in queries {
        let started = Instant::now();
        let result = recaller.recall(mode, query).await;
        samples.push(started.elapsed().as_secs_f64() * 1_000.0);
        match result {
            Ok(answer) => answers.push(answer),
            Err(error) => {
                tracing::warn!(
                    mode = mode.as_str(),
                    kind = error.kind().as_str(),
                    "recall failed"
                );
                errors += 1;
                answers.push(RankedAnswer { ranked: Vec::new() });
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let keys: Vec<AnswerKey> = queries.iter().map(answer_key).collect();
    let figures = ModeFigures {
        mode,
        quality: score(&keys, &answers),
        latency: percentiles(&samples),
        errors,
    };
    (figures, answers)
}
