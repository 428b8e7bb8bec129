//! The rerank stage's tuning inputs: each question's fused turns (what hybrid recall keeps,
//! `HybridParams::max_documents` of them) with the signals the product's stage reads, and their
//! order under given weights, by the product's own [`RerankQuery`] and [`order_by_rerank`].
//!
//! A LoCoMo turn is one chunk, so its passage is its whole text and the stage sees what it sees here.

use std::collections::HashMap;

use semantic_index::{
    CROSS_ENCODER_DEPTH, CrossEncoder, EmbedError, Fused, RerankQuery, RerankSignals,
    RerankWeights, cross_encoder_choice, cross_encoder_text, cross_rank_signals, order_by_rerank,
};

use super::data::Conversation;
use super::levers::Scored;

/// One question's candidates: the kept turns with their signals, in fused order, and the fused
/// turns past the kept ones (which recall never returns; kept here so the figures past the kept
/// depth are those without the stage).
#[derive(Debug, Clone)]
pub struct Candidates {
    kept: Vec<(String, RerankSignals)>,
    /// What the cross-encoder reads of each kept turn ([`cross_encoder_text`]).
    texts: Vec<String>,
    question: String,
    rest: Vec<String>,
}

/// Each question's [`Candidates`] from its fused turns (`fused[i]` for `questions[i]`, after the
/// neighbours' share), keeping the first `kept` (hybrid recall's `max_documents`); their `cross`
/// signals stay 0 until [`read_by_cross`].
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
            let mut texts = Vec::with_capacity(fused.len());
            let kept = fused
                .into_iter()
                .map(|item| {
                    let (text, speaker) =
                        turns.get(item.item.as_str()).copied().unwrap_or(("", ""));
                    texts.push(cross_encoder_text(text, Some(speaker)));
                    let signals = RerankSignals::of_fused(&item)
                        .with_text(query.text_signals(text, Some(speaker)));
                    (item.item, signals)
                })
                .collect();
            Candidates {
                kept,
                texts,
                question: scored.question.text.clone(),
                rest,
            }
        })
        .collect()
}

/// Sets each question's `cross` signals as the product's stage does: the first
/// [`CROSS_ENCODER_DEPTH`] kept turns in the order `weights` (the stage's weights without the
/// model) give them are read by `cross` with the question, one call per question, and take their
/// rank among its scores ([`cross_rank_signals`]); `done` is told after each question.
pub fn read_by_cross(
    candidates: &mut [Candidates],
    cross: &dyn CrossEncoder,
    weights: &RerankWeights,
    done: impl Fn(),
) -> Result<(), EmbedError> {
    for question in candidates {
        let indexed: Vec<(usize, RerankSignals)> = question
            .kept
            .iter()
            .enumerate()
            .map(|(index, (_, signals))| (index, *signals))
            .collect();
        let chosen = cross_encoder_choice(&indexed, weights, CROSS_ENCODER_DEPTH);
        let read: Vec<&str> = chosen
            .iter()
            .map(|index| question.texts[*index].as_str())
            .collect();
        let scores = cross.score(&question.question, &read)?;
        for (index, signal) in chosen.into_iter().zip(cross_rank_signals(&scores)) {
            question.kept[index].1.cross = signal;
        }
        done();
    }
    Ok(())
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

/// The values the `cross` weight is tried at: 0 and up (a signal of relevance), and past 1, since
/// a rank signal of 1, 1/2, 1/3... may need to outweigh the fused score's spread.
pub const CROSS_WEIGHT_GRID: [f64; 11] = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0];

/// Whether the weight named `name` is a signal of relevance, kept at 0 or above (every signal but
/// `brevity`; `fused` is not searched).
fn is_relevance(name: &str) -> bool {
    name != "brevity"
}

/// Passes of coordinate ascent over the weights.
pub const PASSES: usize = 5;

/// Coordinate ascent from the plain fused order (`fused` 1, the rest 0): each weight `searched`
/// names in turn takes the grid value of highest `objective`, the others fixed, ties kept by the
/// current value (then the smallest magnitude), for [`PASSES`] passes or until a pass changes
/// nothing. A weight not searched stays 0.
pub fn coordinate_ascent(
    objective: impl Fn(&RerankWeights) -> f64,
    searched: impl Fn(&str) -> bool,
) -> (RerankWeights, f64) {
    let mut weights = RerankWeights {
        fused: 1.0,
        lexical: 0.0,
        embedding: 0.0,
        coverage: 0.0,
        speaker: 0.0,
        brevity: 0.0,
        cross: 0.0,
    };
    let mut best = objective(&weights);
    // Field 0 is `fused`, fixed at 1.
    let fields = weights.named().len();
    for _ in 0..PASSES {
        let mut changed = false;
        for field in 1..fields {
            let (name, current) = weights.named()[field];
            if !searched(name) {
                continue;
            }
            let mut choice = current;
            let grid: &[f64] = if name == "cross" {
                &CROSS_WEIGHT_GRID
            } else {
                &WEIGHT_GRID
            };
            for value in grid
                .iter()
                .copied()
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
