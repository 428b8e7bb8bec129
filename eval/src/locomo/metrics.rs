//! LoCoMo's retrieval figures: hit@k (some evidence turn among the top k) and evidence share@k (the
//! share of a question's evidence turns among the top k, averaged over questions: the paper's R@k).

use serde::{Deserialize, Serialize};

/// The figures of a set of questions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RetrievalFigures {
    /// Questions counted.
    pub questions: usize,
    /// Share of questions with some evidence turn first.
    #[serde(rename = "hit@1")]
    pub hit_at_1: f64,
    /// Share of questions with some evidence turn in the top 5.
    #[serde(rename = "hit@5")]
    pub hit_at_5: f64,
    /// Share of questions with some evidence turn in the top 10.
    #[serde(rename = "hit@10")]
    pub hit_at_10: f64,
    /// Mean share of a question's evidence turns in the top 5.
    #[serde(rename = "evidence share@5")]
    pub share_at_5: f64,
    /// Mean share of a question's evidence turns in the top 10.
    #[serde(rename = "evidence share@10")]
    pub share_at_10: f64,
}

/// One question's scores: hit@1, hit@5, hit@10 (0 or 1), share@5, share@10, with `ranked` the
/// recalled turn ids (one per document, as the direct import writes them).
pub fn question_scores(evidence: &[String], ranked: &[String]) -> [f64; 5] {
    scores(evidence, |k, id| {
        ranked.iter().take(k).any(|ranked| ranked == id)
    })
}

/// One question's scores when a recalled document may stand for several turns (`ranked`: per
/// document in citation order, the turns it is attributed to): the top k are the first k documents,
/// and a document counts as each of its turns. With one turn per document this is
/// [`question_scores`].
pub fn document_scores(evidence: &[String], ranked: &[Vec<String>]) -> [f64; 5] {
    scores(evidence, |k, id| {
        ranked
            .iter()
            .take(k)
            .any(|turns| turns.iter().any(|turn| turn == id))
    })
}

fn scores(evidence: &[String], within: impl Fn(usize, &str) -> bool) -> [f64; 5] {
    let found_within = |k: usize| evidence.iter().filter(|id| within(k, id)).count();
    let hit = |k: usize| if found_within(k) > 0 { 1.0 } else { 0.0 };
    let share = |k: usize| {
        if evidence.is_empty() {
            0.0
        } else {
            found_within(k) as f64 / evidence.len() as f64
        }
    };
    [hit(1), hit(5), hit(10), share(5), share(10)]
}

/// The figures over `(evidence, ranked)` pairs.
pub fn figures<'a>(
    answers: impl IntoIterator<Item = (&'a [String], &'a [String])>,
) -> RetrievalFigures {
    mean_figures(
        answers
            .into_iter()
            .map(|(evidence, ranked)| question_scores(evidence, ranked)),
    )
}

/// The figures over `(evidence, ranked documents' turns)` pairs (see [`document_scores`]).
pub fn document_figures<'a>(
    answers: impl IntoIterator<Item = (&'a [String], &'a [Vec<String>])>,
) -> RetrievalFigures {
    mean_figures(
        answers
            .into_iter()
            .map(|(evidence, ranked)| document_scores(evidence, ranked)),
    )
}

fn mean_figures(scores: impl IntoIterator<Item = [f64; 5]>) -> RetrievalFigures {
    let mut sums = [0.0; 5];
    let mut questions = 0usize;
    for question in scores {
        questions += 1;
        for (sum, score) in sums.iter_mut().zip(question) {
            *sum += score;
        }
    }
    let mean = |sum: f64| {
        if questions == 0 {
            0.0
        } else {
            sum / questions as f64
        }
    };
    RetrievalFigures {
        questions,
        hit_at_1: mean(sums[0]),
        hit_at_5: mean(sums[1]),
        hit_at_10: mean(sums[2]),
        share_at_5: mean(sums[3]),
        share_at_10: mean(sums[4]),
    }
}

/// Warm latency percentiles, milliseconds (nearest rank).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    /// Samples measured.
    pub samples: usize,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// Nearest-rank percentiles of `samples` (milliseconds).
pub fn latency(samples: &[f64]) -> LatencyMs {
    let figures = crate::metrics::percentiles(samples);
    LatencyMs {
        samples: figures.samples,
        p50: figures.p50_ms,
        p95: figures.p95_ms,
        p99: figures.p99_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(values: &[&str]) -> Vec<String> {
        values.iter().map(|value| (*value).to_owned()).collect()
    }

    #[test]
    fn scores_match_a_hand_computed_case() {
        // Evidence a, b, c; a at rank 3, c at rank 7, b absent.
        let evidence = ids(&["a", "b", "c"]);
        let ranked = ids(&["x", "y", "a", "z", "w", "v", "c", "u"]);
        assert_eq!(
            question_scores(&evidence, &ranked),
            [0.0, 1.0, 1.0, 1.0 / 3.0, 2.0 / 3.0]
        );
        let first = ids(&["b"]);
        let ranked_first = ids(&["b", "q"]);
        let all = figures([
            (evidence.as_slice(), ranked.as_slice()),
            (first.as_slice(), ranked_first.as_slice()),
        ]);
        assert_eq!(all.questions, 2);
        assert!((all.hit_at_1 - 0.5).abs() < 1e-12);
        assert!((all.hit_at_10 - 1.0).abs() < 1e-12);
        assert!((all.share_at_5 - (1.0 / 3.0 + 1.0) / 2.0).abs() < 1e-12);
        assert!((all.share_at_10 - (2.0 / 3.0 + 1.0) / 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_document_counts_as_each_of_its_turns() {
        let evidence = ids(&["a", "b", "c"]);
        // Singletons score as turn ids do.
        let ranked = ids(&["x", "y", "a", "z", "w", "v", "c", "u"]);
        let singletons: Vec<Vec<String>> = ranked.iter().map(|id| vec![id.clone()]).collect();
        assert_eq!(
            document_scores(&evidence, &singletons),
            question_scores(&evidence, &ranked)
        );
        // The first document stands for b and c, the third for a: all of the evidence in the top 5.
        let restated = vec![ids(&["b", "c"]), ids(&["x"]), ids(&["a"])];
        assert_eq!(
            document_scores(&evidence, &restated),
            [1.0, 1.0, 1.0, 1.0, 1.0]
        );
        let sixth = vec![
            ids(&["x"]),
            ids(&["y"]),
            ids(&["z"]),
            ids(&["w"]),
            ids(&["v"]),
            ids(&["a", "b"]),
        ];
        assert_eq!(
            document_scores(&evidence, &sixth),
            [0.0, 0.0, 1.0, 0.0, 2.0 / 3.0]
        );
    }

    #[test]
    fn report_field_names_are_the_issues() {
        let json = serde_json::to_value(RetrievalFigures::default()).expect("json");
        for name in [
            "hit@1",
            "hit@5",
            "hit@10",
            "evidence share@5",
            "evidence share@10",
        ] {
            assert!(json.get(name).is_some(), "{name} missing from {json}");
        }
        let json = serde_json::to_value(LatencyMs::default()).expect("json");
        for name in ["p50", "p95", "p99"] {
            assert!(json.get(name).is_some(), "{name} missing from {json}");
        }
    }
}
