//! The rerank stage's tuning inputs: each question's fused turns (what hybrid recall keeps,
//! `HybridParams::max_documents` of them) with the signals the product's stage reads, and their
//! order under given weights, by the product's own [`RerankQuery`] and [`order_by_rerank`].
//!
//! A LoCoMo turn is one chunk, so its passage is its whole text and the stage sees what it sees here.

use std::collections::HashMap;

use semantic_index::{Fused, RerankQuery, RerankSignals, RerankWeights, order_by_rerank};

use super::data::Conversation;
use super::levers::Scored;

/// One question's candidates: the kept turns with their signals, in fused order, and the fused
/// turns past the kept ones (which recall never returns; kept here so the figures past the kept
/// depth are those without the stage).
#[derive(Debug, Clone)]
pub struct Candidates {
    kept: Vec<(String, RerankSignals)>,
    rest: Vec<String>,
}

/// Each question's [`Candidates`] from its fused turns (`fused[i]` for `questions[i]`, after the
/// neighbours' share), keeping the first `kept` (hybrid recall's `max_documents`).
pub fn candidates(
    conversations: &[Conversation],
    questions: &[Scored<'_>],
    fused: Vec<Vec<Fused<String>>>,
    kept: usize,
) -> Vec<Candidates> {
    let turns: Vec<HashMap<&str, (&str, &str)>> = conversations
        .iter()
        .map(|conversation| {
            conversation
                .turns()
                .map(|(_, turn)| {
                    (
                        turn.dia_id.as_str(),
                        (turn.text.as_str(), turn.speaker.as_str()),
                    )
                })
                .collect()
        })
        .collect();
    questions
        .iter()
        .zip(fused)
        .map(|(scored, mut fused)| {
            let query = RerankQuery::new(&scored.question.text);
            let turns = &turns[scored.conversation];
            let rest = fused
                .split_off(fused.len().min(kept))
                .into_iter()
                .map(|item| item.item)
                .collect();
            let kept = fused
                .into_iter()
                .map(|item| {
                    let (text, speaker) =
                        turns.get(item.item.as_str()).copied().unwrap_or(("", ""));
                    let signals = RerankSignals::of_fused(&item)
                        .with_text(query.text_signals(text, Some(speaker)));
                    (item.item, signals)
                })
                .collect();
            Candidates { kept, rest }
        })
        .collect()
}

/// Every question's turns ranked by the stage under `weights` (the kept turns reordered, the rest
/// after them as fused), or as fused when `weights` is `None`.
pub fn ranked(candidates: &[Candidates], weights: Option<&RerankWeights>) -> Vec<Vec<String>> {
    candidates
        .iter()
        .map(|question| {
            let kept: Vec<String> = match weights {
                Some(weights) => order_by_rerank(question.kept.clone(), weights)
                    .into_iter()
                    .map(|(id, _)| id)
                    .collect(),
                None => question.kept.iter().map(|(id, _)| id.clone()).collect(),
            };
            kept.into_iter()
                .chain(question.rest.iter().cloned())
                .collect()
        })
        .collect()
}

/// The values each weight but `fused` (fixed at 1: only the ratios order) is tried at, in turn.
/// The signals of relevance (`lexical`, `embedding`, `coverage`, `speaker`) take only the values
/// of 0 and up: a passage holding more of the query must never rank lower for it, whatever one
/// corpus rewards (on LoCoMo the unconstrained choice, coverage -0.2, scored 0.001 more on the
/// tuning objective, and cited a long document's matching excerpt after its others). `brevity`
/// may take either sign.
pub const WEIGHT_GRID: [f64; 13] = [
    -1.0, -0.5, -0.3, -0.2, -0.1, -0.05, 0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0,
];

/// Whether the weight named `name` is a signal of relevance, kept at 0 or above (every signal but
/// `brevity`; `fused` is not searched).
fn is_relevance(name: &str) -> bool {
    name != "brevity"
}

/// Passes of coordinate ascent over the weights.
pub const PASSES: usize = 5;

/// Coordinate ascent from the plain fused order (`fused` 1, the rest 0): each weight in turn takes
/// the grid value of highest `objective`, the others fixed, ties kept by the current value (then the
/// smallest magnitude), for [`PASSES`] passes or until a pass changes nothing.
pub fn coordinate_ascent(objective: impl Fn(&RerankWeights) -> f64) -> (RerankWeights, f64) {
    let mut weights = RerankWeights {
        fused: 1.0,
        lexical: 0.0,
        embedding: 0.0,
        coverage: 0.0,
        speaker: 0.0,
        brevity: 0.0,
    };
    let mut best = objective(&weights);
    // Field 0 is `fused`, fixed at 1.
    let fields = weights.named().len();
    for _ in 0..PASSES {
        let mut changed = false;
        for field in 1..fields {
            let (name, current) = weights.named()[field];
            let mut choice = current;
            for value in WEIGHT_GRID
                .into_iter()
                .filter(|value| *value >= 0.0 || !is_relevance(name))
            {
                let mut trial = weights;
                *trial.named_mut()[field].1 = value;
                let score = objective(&trial);
                let better = score > best + 1e-12
                    || ((score - best).abs() <= 1e-12 && value.abs() < choice.abs());
                if better {
                    best = score;
                    choice = value;
                }
            }
            if choice != current {
                *weights.named_mut()[field].1 = choice;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    (weights, best)
}
