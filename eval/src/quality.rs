//! Quality and warm latency of every mode over the corpus's queries, and the tuning of the hybrid
//! weights.

use std::collections::BTreeMap;
use std::time::Instant;

use semantic_index::Embedder;
use serde::Serialize;

use crate::corpus::{EvalQuery, document_id};
use crate::metrics::{AnswerKey, LatencyFigures, QualityFigures, RankedAnswer, percentiles, score};
use crate::modes::{HybridWeights, Mode, Recaller, fuse, ranked};
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
            Ok(recalled) => answers.push(ranked(&recalled)),
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

/// The hybrid tuning: which weights were tried and which won.
#[derive(Debug, Clone, Serialize)]
pub struct HybridTuning {
    /// The chosen weights.
    pub chosen: HybridWeights,
    /// MRR of every tried setting on the tuning half: `(lexical weight, k, MRR)`.
    pub tried: Vec<(f64, f64, f64)>,
    /// Queries the weights were tuned on (every other query; the report scores all of them).
    pub tuning_queries: usize,
}

/// Tunes the RRF weights on the even-numbered queries, fusing the lexical and HNSW rankings already
/// recalled (fusion is rank-only, so this needs no further searches).
pub fn tune_hybrid(
    queries: &[EvalQuery],
    lexical: &[RankedAnswer],
    semantic: &[RankedAnswer],
) -> HybridTuning {
    let ids = |answer: &RankedAnswer| -> Vec<String> {
        answer.ranked.iter().map(|(id, _)| id.clone()).collect()
    };
    let mut tried = Vec::new();
    let mut best = (HybridWeights::default(), f64::MIN);
    let tuning: Vec<usize> = (0..queries.len()).step_by(2).collect();
    let keys: Vec<AnswerKey> = tuning
        .iter()
        .map(|&index| answer_key(&queries[index]))
        .collect();
    for k in [5.0, 20.0, 60.0] {
        for step in 0..=10 {
            let weights = HybridWeights {
                lexical_weight: f64::from(step) / 10.0,
                k,
            };
            let answers: Vec<RankedAnswer> = tuning
                .iter()
                .map(|&index| {
                    let texts: BTreeMap<&str, &str> = lexical[index]
                        .ranked
                        .iter()
                        .chain(&semantic[index].ranked)
                        .map(|(id, text)| (id.as_str(), text.as_str()))
                        .collect();
                    let fused = fuse(&ids(&lexical[index]), &ids(&semantic[index]), weights);
                    RankedAnswer {
                        ranked: fused
                            .into_iter()
                            .take(10)
                            .map(|id| {
                                let text = texts
                                    .get(id.as_str())
                                    .copied()
                                    .unwrap_or_default()
                                    .to_owned();
                                (id, text)
                            })
                            .collect(),
                    }
                })
                .collect();
            let mrr = score(&keys, &answers).mrr;
            tried.push((weights.lexical_weight, k, mrr));
            if mrr > best.1 + 1e-12 {
                best = (weights, mrr);
            }
        }
    }
    HybridTuning {
        chosen: best.0,
        tried,
        tuning_queries: tuning.len(),
    }
}
