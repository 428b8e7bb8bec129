//! Retrieval quality and latency figures.

use serde::Serialize;

/// What one recall returned for one query: the document ids in rank order, with the text each carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankedAnswer {
    /// `(document id, text)` best first.
    pub ranked: Vec<(String, String)>,
}

/// Quality of one mode over a query set.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QualityFigures {
    /// Queries that have an expected document.
    pub answerable: usize,
    /// Fraction of answerable queries whose document ranks first.
    pub hit_at_1: f64,
    /// ... within the first five.
    pub hit_at_5: f64,
    /// ... within the first ten.
    pub hit_at_10: f64,
    /// Mean reciprocal rank (0 for a miss), over answerable queries.
    pub mrr: f64,
    /// Answerable queries whose document was not returned at all.
    pub misses: usize,
    /// Results that carried a superseded or withdrawn value, or a withdrawn document: must be zero.
    pub contradictory: usize,
}

/// One query's key, as the metrics need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerKey {
    /// The document that must be recalled, if any.
    pub expected_document: Option<String>,
    /// The document ids that must never be returned (withdrawn ones).
    pub forbidden_documents: Vec<String>,
    /// Values that must never appear in a returned text of this query's document.
    pub forbidden_values: Vec<String>,
    /// The document the forbidden values belong to.
    pub subject_document: String,
}

/// Scores answers against their keys. `answers[i]` answers `keys[i]`.
pub fn score(keys: &[AnswerKey], answers: &[RankedAnswer]) -> QualityFigures {
    let mut figures = QualityFigures::default();
    let (mut hit1, mut hit5, mut hit10, mut reciprocal) = (0usize, 0usize, 0usize, 0.0f64);
    for (key, answer) in keys.iter().zip(answers) {
        for (document, text) in &answer.ranked {
            let forbidden_document = key.forbidden_documents.iter().any(|d| d == document);
            let stale_value = *document == key.subject_document
                && key
                    .forbidden_values
                    .iter()
                    .any(|value| text.contains(value.as_str()));
            if forbidden_document || stale_value {
                figures.contradictory += 1;
            }
        }
        let Some(expected) = &key.expected_document else {
            continue;
        };
        figures.answerable += 1;
        match answer
            .ranked
            .iter()
            .position(|(document, _)| document == expected)
        {
            Some(rank) => {
                hit1 += usize::from(rank < 1);
                hit5 += usize::from(rank < 5);
                hit10 += usize::from(rank < 10);
                reciprocal += 1.0 / (rank as f64 + 1.0);
            }
            None => figures.misses += 1,
        }
    }
    if figures.answerable > 0 {
        let total = figures.answerable as f64;
        figures.hit_at_1 = hit1 as f64 / total;
        figures.hit_at_5 = hit5 as f64 / total;
        figures.hit_at_10 = hit10 as f64 / total;
        figures.mrr = reciprocal / total;
    }
    figures
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LatencyFigures {
    /// Samples measured.
    pub samples: usize,
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
}

/// Nearest-rank percentiles of the samples (milliseconds).
pub fn percentiles(samples_ms: &[f64]) -> LatencyFigures {
    if samples_ms.is_empty() {
        return LatencyFigures::default();
    }
    let mut sorted = samples_ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = |fraction: f64| {
        let index = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
        sorted[index]
    };
    LatencyFigures {
        samples: sorted.len(),
        p50_ms: rank(0.50),
        p95_ms: rank(0.95),
        p99_ms: rank(0.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(ids: &[(&str, &str)]) -> RankedAnswer {
        RankedAnswer {
            ranked: ids
                .iter()
                .map(|(id, text)| ((*id).to_owned(), (*text).to_owned()))
                .collect(),
        }
    }

    fn key(expected: Option<&str>, subject: &str, forbidden_values: &[&str]) -> AnswerKey {
        AnswerKey {
            expected_document: expected.map(str::to_owned),
            forbidden_documents: if expected.is_none() {
                vec![subject.to_owned()]
            } else {
                Vec::new()
            },
            forbidden_values: forbidden_values.iter().map(|v| (*v).to_owned()).collect(),
            subject_document: subject.to_owned(),
        }
    }

    /// Hand-checked: ranks 1, 3 and a miss give hit@1 = 1/3, hit@5 = 2/3, MRR = (1 + 1/3 + 0) / 3.
    #[test]
    fn hand_checked_small_case() {
        let keys = vec![
            key(Some("a"), "a", &[]),
            key(Some("b"), "b", &["Lisbon"]),
            key(Some("c"), "c", &[]),
            key(None, "d", &[]),
        ];
        let answers = vec![
            answer(&[("a", "x")]),
            answer(&[("z", "x"), ("y", "x"), ("b", "moved to Lisbon")]),
            answer(&[("q", "x")]),
            answer(&[("d", "forgotten")]),
        ];
        let figures = score(&keys, &answers);
        assert_eq!(figures.answerable, 3);
        assert!((figures.hit_at_1 - 1.0 / 3.0).abs() < 1e-12);
        assert!((figures.hit_at_5 - 2.0 / 3.0).abs() < 1e-12);
        assert!((figures.hit_at_10 - 2.0 / 3.0).abs() < 1e-12);
        assert!((figures.mrr - (1.0 + 1.0 / 3.0) / 3.0).abs() < 1e-12);
        assert_eq!(figures.misses, 1);
        // The stale "Lisbon" in b and the withdrawn d are both contradictory.
        assert_eq!(figures.contradictory, 2);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let figures = percentiles(&samples);
        assert_eq!(
            (figures.p50_ms, figures.p95_ms, figures.p99_ms),
            (50.0, 95.0, 99.0)
        );
        assert_eq!(percentiles(&[]).samples, 0);
    }
}
