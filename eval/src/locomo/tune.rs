//! `memory-eval locomo-tune`: chooses the lexical rules, the embedded text and the hybrid fusion on
//! LoCoMo's first conversations (five, in file order) and reports every setting tried on them, with the
//! held-out conversations' figures beside it, never used to choose.
//!
//! How it chooses (deterministic: no randomness, every tie broken by the order settings are listed):
//! - The objective is the mean of hit@5, hit@10 and evidence share@10 on the tuning conversations (the
//!   goal's figures; hit@1 alone is too noisy on a few hundred questions).
//! - Each lever is chosen in turn, the earlier ones fixed: lexical rules (stop words, speaker weight),
//!   then RM3 feedback on top of them, then the embedded text, then the fusion and its depths.
//! - A lever's challenger replaces the product's current setting only when it wins by at least
//!   [`MARGIN`]: a change must buy something, not a hair that another corpus would not confirm.
//! - The fusion's `k` and lexical weight are scored by their smoothed objective, the mean over the
//!   setting and its grid neighbours, so the choice sits on a plateau rather than a spike. Among the
//!   settings within [`MARGIN`] of the best smoothed objective, the least extreme one wins: weights
//!   closest to 1:1, then the largest `k`, then the smallest candidate depths (the cheapest search).

use std::collections::HashMap;

use memory_sqlite::SqliteStore;
use memory_sqlite::lexical::LexicalRules;
use semantic_index::{Embedder, HybridParams, Preprocessing, SemanticProfile};
use serde::{Deserialize, Serialize};

use super::data::Conversation;
use super::levers::{
    EmbeddedText, Fusion, Ranking, Scored, embed_cached, embedding_rankings, expanded_query, fuse,
    lexical_rankings, scored_questions,
};
use super::metrics::{RetrievalFigures, figures};
use crate::progress::Progress;

/// Conversations (in file order) the parameters are chosen on.
pub const TUNING_CONVERSATIONS: usize = 5;
/// Smallest objective gain that replaces the product's current setting of a lever.
pub const MARGIN: f64 = 0.005;
/// `k` values tried for reciprocal rank fusion.
pub const RRF_K: [f64; 7] = [1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0];
/// Lexical weights tried (the embedding ranking weighs 1).
pub const LEXICAL_WEIGHTS: [f64; 6] = [0.5, 0.75, 1.0, 1.25, 1.5, 2.0];
/// Candidate depths tried for each side. None is below 20: the product asks each side for at least
/// twice the items a recall may cite (`memory_cli::recall_service::MIN_SEARCH_HITS` and more), so a
/// shallower default would never take effect.
pub const DEPTHS: [usize; 3] = [20, 40, 100];
/// Lexical shares tried for normalized score fusion.
pub const SCORE_SHARES: [f64; 5] = [0.3, 0.4, 0.5, 0.6, 0.7];
/// Speaker-column weights tried.
pub const SPEAKER_WEIGHTS: [f64; 5] = [0.0, 0.25, 0.5, 1.0, 2.0];
/// RM3 feedback settings tried: (feedback documents, expansion terms).
pub const RM3: [(usize, usize); 4] = [(3, 5), (5, 5), (5, 10), (10, 10)];

/// The choice, as `eval/locomo-tuned.json` records it; the product's defaults must equal it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tuned {
    /// What it was tuned on.
    pub tuned_on: String,
    /// Drop stop words from lexical queries.
    pub lexical_stop_words: bool,
    /// BM25 weight of the text column.
    pub lexical_text_weight: f64,
    /// BM25 weight of the speaker column.
    pub lexical_speaker_weight: f64,
    /// RM3 feedback `(documents, terms)`, or `None` when it did not help.
    pub lexical_rm3: Option<(usize, usize)>,
    /// What is embedded for a turn.
    pub embedded_text: EmbeddedText,
    /// The fusion's `k`.
    pub rrf_k: f64,
    /// Weight of the lexical ranking.
    pub rrf_lexical_weight: f64,
    /// Weight of the embedding ranking.
    pub rrf_embedding_weight: f64,
    /// Lexical candidates fused.
    pub lexical_candidates: usize,
    /// Embedding candidates fused.
    pub embedding_candidates: usize,
}

/// One setting's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The lever.
    pub lever: String,
    /// The setting.
    pub setting: String,
    /// The objective on the tuning conversations (smoothed for the fusion grid).
    pub objective: f64,
    /// Conversations 1-5.
    pub tuning: RetrievalFigures,
    /// Conversations 6-10, never used to choose.
    pub held_out: RetrievalFigures,
}

/// The tuning's report.
#[derive(Debug, Clone, Serialize)]
pub struct TuneReport {
    /// The choice.
    pub tuned: Tuned,
    /// Every lever's settings, in the order tried.
    pub rows: Vec<Row>,
    /// The simulated hybrid of the choice on all conversations.
    pub chosen_all: RetrievalFigures,
}

/// The objective: mean of hit@5, hit@10 and evidence share@10.
pub fn objective(figures: &RetrievalFigures) -> f64 {
    (figures.hit_at_5 + figures.hit_at_10 + figures.share_at_10) / 3.0
}

struct Split<'a> {
    questions: Vec<Scored<'a>>,
}

impl Split<'_> {
    fn figures(&self, ranked: &[Vec<String>], keep: impl Fn(usize) -> bool) -> RetrievalFigures {
        figures(
            self.questions
                .iter()
                .zip(ranked)
                .filter(|(scored, _)| keep(scored.conversation))
                .map(|(scored, ranked)| (scored.question.evidence.as_slice(), ranked.as_slice())),
        )
    }

    fn row(&self, lever: &str, setting: String, ranked: &[Vec<String>]) -> Row {
        let tuning = self.figures(ranked, |conversation| conversation < TUNING_CONVERSATIONS);
        Row {
            lever: lever.to_owned(),
            setting,
            objective: objective(&tuning),
            tuning,
            held_out: self.figures(ranked, |conversation| conversation >= TUNING_CONVERSATIONS),
        }
    }
}

fn ids(rankings: &[Ranking]) -> Vec<Vec<String>> {
    rankings
        .iter()
        .map(|ranking| ranking.iter().map(|(id, _)| id.clone()).collect())
        .collect()
}

fn rules_name(rules: &LexicalRules) -> String {
    format!(
        "stop words {}, speaker weight {}",
        if rules.stop_words { "out" } else { "kept" },
        rules.speaker_weight
    )
}

/// Runs the tuning over `store` (every turn of `conversations` already written to it) with
/// `embedder`, caching embeddings under `cache`. `min_score` is the product's semantic floor.
pub fn tune<E: Embedder>(
    store: &SqliteStore,
    conversations: &[Conversation],
    embedder: &E,
    cache: Option<&std::path::Path>,
    min_score: f32,
    progress: &Progress,
) -> anyhow::Result<TuneReport> {
    let split = Split {
        questions: scored_questions(conversations),
    };
    let questions = &split.questions;
    let mut rows = Vec::new();
    let plain = |scored: &Scored<'_>| scored.question.text.clone();

    // Lexical rules; the product's current setting is the first one measured against.
    let current_rules = LexicalRules::default();
    let mut candidates = vec![current_rules];
    for stop_words in [false, true] {
        for speaker_weight in SPEAKER_WEIGHTS {
            let rules = LexicalRules {
                stop_words,
                text_weight: 1.0,
                speaker_weight,
            };
            if !candidates.contains(&rules) {
                candidates.push(rules);
            }
        }
    }
    let bar = progress.bar("lexical rules", candidates.len() as u64);
    let mut best: Option<(f64, LexicalRules, Vec<Ranking>)> = None;
    for (index, rules) in candidates.iter().enumerate() {
        let rankings = lexical_rankings(store, conversations, questions, rules, &plain)?;
        let row = split.row("lexical rules", rules_name(rules), &ids(&rankings));
        let needed = if index == 0 { f64::MIN } else { MARGIN };
        if best
            .as_ref()
            .is_none_or(|(score, _, _)| row.objective >= score + needed)
        {
            best = Some((row.objective, *rules, rankings));
        }
        rows.push(row);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let Some((lexical_objective, rules, mut lexical)) = best else {
        anyhow::bail!("no lexical setting was measured");
    };

    // RM3 feedback on top of the chosen rules.
    let mut rm3 = None;
    let mut rm3_objective = lexical_objective;
    let bar = progress.bar("RM3 feedback", RM3.len() as u64);
    for (documents, terms) in RM3 {
        // Turn ids repeat across conversations: expand from the question's own conversation.
        let first = &lexical;
        let expanded = lexical_rankings(store, conversations, questions, &rules, &|scored| {
            let index = questions
                .iter()
                .position(|other| std::ptr::eq(other.question, scored.question))
                .unwrap_or(0);
            let own: HashMap<&str, &str> = conversations[scored.conversation]
                .turns()
                .map(|(_, turn)| (turn.dia_id.as_str(), turn.text.as_str()))
                .collect();
            expanded_query(&scored.question.text, &first[index], &own, documents, terms)
        })?;
        let row = split.row(
            "lexical RM3 feedback",
            format!("{documents} documents, {terms} terms"),
            &ids(&expanded),
        );
        if row.objective >= rm3_objective + MARGIN {
            rm3_objective = row.objective;
            rm3 = Some((documents, terms, expanded));
        }
        rows.push(row);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let lexical_rm3 = rm3
        .as_ref()
        .map(|(documents, terms, _)| (*documents, *terms));
    if let Some((_, _, expanded)) = rm3 {
        lexical = expanded;
    }

    // Embedded text: the product's current preprocessing first.
    let current_text = match SemanticProfile::minilm_l6_v2().preprocessing {
        Preprocessing::TextOnly => EmbeddedText::Text,
        Preprocessing::SpeakerThenText => EmbeddedText::SpeakerThenText,
    };
    let mut variants = vec![current_text];
    variants.extend(
        EmbeddedText::ALL
            .into_iter()
            .filter(|variant| *variant != current_text),
    );
    let turns_total: usize = conversations.iter().map(|c| c.turns().count()).sum();
    let bar = progress.bar(
        "embedding",
        (turns_total * variants.len() + questions.len()) as u64,
    );
    let cache_file = |name: &str| cache.map(|dir| dir.join(format!("{name}.f32")));
    let question_texts: Vec<String> = questions.iter().map(plain).collect();
    let question_vectors = embed_cached(
        embedder,
        &question_texts,
        cache_file("questions").as_deref(),
        &bar,
    )?;
    let mut best_embedding: Option<(f64, EmbeddedText, Vec<Ranking>)> = None;
    for (index, variant) in variants.iter().enumerate() {
        let texts: Vec<String> = conversations
            .iter()
            .flat_map(|conversation| {
                conversation.sessions.iter().flat_map(|session| {
                    (0..session.turns.len()).map(move |turn| variant.of(session, turn))
                })
            })
            .collect();
        let vectors = embed_cached(
            embedder,
            &texts,
            cache_file(variant.as_str()).as_deref(),
            &bar,
        )?;
        let rankings = embedding_rankings(
            conversations,
            &vectors,
            questions,
            &question_vectors,
            min_score,
        );
        let row = split.row(
            "embedded text",
            variant.as_str().to_owned(),
            &ids(&rankings),
        );
        let needed = if index == 0 { f64::MIN } else { MARGIN };
        if best_embedding
            .as_ref()
            .is_none_or(|(score, _, _)| row.objective >= score + needed)
        {
            best_embedding = Some((row.objective, *variant, rankings));
        }
        rows.push(row);
    }
    bar.finish_and_clear();
    let Some((_, embedded_text, embedding)) = best_embedding else {
        anyhow::bail!("no embedding variant was measured");
    };

    // Fusion: the product's RRF over k, lexical weight and both depths; score fusion for comparison.
    let tuning_only = |ranked: &[Vec<String>]| {
        objective(&split.figures(ranked, |conversation| conversation < TUNING_CONVERSATIONS))
    };
    let fused_all =
        |fusion: Fusion, lexical_depth: usize, embedding_depth: usize| -> Vec<Vec<String>> {
            lexical
                .iter()
                .zip(&embedding)
                .map(|(lexical, embedding)| {
                    fuse(fusion, lexical, embedding, lexical_depth, embedding_depth)
                })
                .collect()
        };
    let defaults = HybridParams::default();
    let bar = progress.bar("fusion grid", (DEPTHS.len() * DEPTHS.len()) as u64);
    // (smoothed objective, k, weight, lexical depth, embedding depth) of every RRF setting.
    let mut rrf_settings: Vec<(f64, f64, f64, usize, usize)> = Vec::new();
    let mut best_scores: Option<(f64, f64, usize, usize)> = None;
    for lexical_depth in DEPTHS {
        for embedding_depth in DEPTHS {
            let mut grid = vec![vec![0.0; LEXICAL_WEIGHTS.len()]; RRF_K.len()];
            for (ki, k) in RRF_K.iter().enumerate() {
                for (wi, lexical_weight) in LEXICAL_WEIGHTS.iter().enumerate() {
                    let fusion = Fusion::Rrf {
                        k: *k,
                        lexical_weight: *lexical_weight,
                    };
                    grid[ki][wi] = tuning_only(&fused_all(fusion, lexical_depth, embedding_depth));
                }
            }
            for (ki, k) in RRF_K.iter().enumerate() {
                for (wi, lexical_weight) in LEXICAL_WEIGHTS.iter().enumerate() {
                    rrf_settings.push((
                        neighbourhood_mean(&grid, ki, wi),
                        *k,
                        *lexical_weight,
                        lexical_depth,
                        embedding_depth,
                    ));
                }
            }
            for share in SCORE_SHARES {
                let fusion = Fusion::NormalizedScores {
                    lexical_share: share,
                };
                let score = tuning_only(&fused_all(fusion, lexical_depth, embedding_depth));
                if best_scores
                    .as_ref()
                    .is_none_or(|(best, ..)| score > best + 1e-12)
                {
                    best_scores = Some((score, share, lexical_depth, embedding_depth));
                }
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let best_smoothed = rrf_settings
        .iter()
        .map(|setting| setting.0)
        .fold(f64::MIN, f64::max);
    let best_rrf = rrf_settings
        .iter()
        .filter(|setting| setting.0 >= best_smoothed - MARGIN)
        .min_by(|left, right| {
            left.2
                .ln()
                .abs()
                .total_cmp(&right.2.ln().abs())
                .then(right.1.total_cmp(&left.1))
                .then((left.3 + left.4).cmp(&(right.3 + right.4)))
        })
        .copied();
    let Some((smoothed, k, lexical_weight, lexical_candidates, embedding_candidates)) = best_rrf
    else {
        anyhow::bail!("no fusion was measured");
    };
    let old = Fusion::Rrf {
        k: defaults.k,
        lexical_weight: defaults.lexical_weight / defaults.embedding_weight,
    };
    rows.push(split.row(
        "fusion",
        format!(
            "previous default: RRF k={}, weights 1:1, depths 20/20",
            defaults.k
        ),
        &fused_all(old, 20, 20),
    ));
    let chosen = Fusion::Rrf { k, lexical_weight };
    let chosen_ranked = fused_all(chosen, lexical_candidates, embedding_candidates);
    let mut row = split.row(
        "fusion",
        format!(
            "chosen: RRF k={k}, lexical weight {lexical_weight}, depths {lexical_candidates}/{embedding_candidates}"
        ),
        &chosen_ranked,
    );
    row.objective = smoothed;
    rows.push(row);
    if let Some((_, share, lexical_depth, embedding_depth)) = best_scores {
        rows.push(split.row(
            "fusion",
            format!(
                "best normalized score fusion: lexical share {share}, depths {lexical_depth}/{embedding_depth}"
            ),
            &fused_all(
                Fusion::NormalizedScores {
                    lexical_share: share,
                },
                lexical_depth,
                embedding_depth,
            ),
        ));
    }
    for (label, fusion) in [
        (
            "RRF k=60, chosen weight and depths",
            Fusion::Rrf {
                k: 60.0,
                lexical_weight,
            },
        ),
        (
            "RRF chosen k, weights 1:1, chosen depths",
            Fusion::Rrf {
                k,
                lexical_weight: 1.0,
            },
        ),
    ] {
        rows.push(split.row(
            "fusion",
            label.to_owned(),
            &fused_all(fusion, lexical_candidates, embedding_candidates),
        ));
    }
    for other_k in RRF_K {
        rows.push(split.row(
            "fusion k",
            format!("RRF k={other_k}, chosen weight and depths"),
            &fused_all(
                Fusion::Rrf {
                    k: other_k,
                    lexical_weight,
                },
                lexical_candidates,
                embedding_candidates,
            ),
        ));
    }
    for weight in LEXICAL_WEIGHTS {
        rows.push(split.row(
            "fusion weight",
            format!("RRF lexical weight {weight}, chosen k and depths"),
            &fused_all(
                Fusion::Rrf {
                    k,
                    lexical_weight: weight,
                },
                lexical_candidates,
                embedding_candidates,
            ),
        ));
    }
    for depth in DEPTHS {
        rows.push(split.row(
            "fusion depth",
            format!("chosen RRF, both depths {depth}"),
            &fused_all(chosen, depth, depth),
        ));
    }
    let chosen_all = split.figures(&chosen_ranked, |_| true);
    Ok(TuneReport {
        tuned: Tuned {
            tuned_on: format!(
                "LoCoMo conversations 1-{TUNING_CONVERSATIONS} (file order), categories 1-4"
            ),
            lexical_stop_words: rules.stop_words,
            lexical_text_weight: rules.text_weight,
            lexical_speaker_weight: rules.speaker_weight,
            lexical_rm3,
            embedded_text,
            rrf_k: k,
            rrf_lexical_weight: lexical_weight,
            rrf_embedding_weight: 1.0,
            lexical_candidates,
            embedding_candidates,
        },
        rows,
        chosen_all,
    })
}

/// The mean of `grid[row][column]` and its neighbours (up to one step in each direction).
fn neighbourhood_mean(grid: &[Vec<f64>], row: usize, column: usize) -> f64 {
    let mut sum = 0.0;
    let mut count = 0.0;
    let rows = row.saturating_sub(1)..=(row + 1).min(grid.len().saturating_sub(1));
    for cells in &grid[rows] {
        let columns = column.saturating_sub(1)..=(column + 1).min(cells.len().saturating_sub(1));
        for value in &cells[columns] {
            sum += value;
            count += 1.0;
        }
    }
    if count == 0.0 { 0.0 } else { sum / count }
}

/// The tuning report as Markdown.
pub fn markdown(report: &TuneReport) -> String {
    let mut text = String::from(
        "# LoCoMo tuning\n\nChosen on conversations 1-5; conversations 6-10 are shown beside, never \
         used to choose. Objective: mean of hit@5, hit@10 and evidence share@10 on 1-5.\n\n\
         | lever | setting | objective | hit@1 | hit@5 | hit@10 | share@10 | held-out hit@1 | \
         held-out hit@5 | held-out hit@10 | held-out share@10 |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for row in &report.rows {
        text.push_str(&format!(
            "| {} | {} | {:.4} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |\n",
            row.lever,
            row.setting,
            row.objective,
            row.tuning.hit_at_1,
            row.tuning.hit_at_5,
            row.tuning.hit_at_10,
            row.tuning.share_at_10,
            row.held_out.hit_at_1,
            row.held_out.hit_at_5,
            row.held_out.hit_at_10,
            row.held_out.share_at_10
        ));
    }
    text.push_str(&format!(
        "\nChosen: `{}`\n\nSimulated hybrid of the choice on all conversations: hit@1 {:.3}, hit@5 \
         {:.3}, hit@10 {:.3}, evidence share@10 {:.3}.\n",
        serde_json::to_string(&report.tuned).unwrap_or_default(),
        report.chosen_all.hit_at_1,
        report.chosen_all.hit_at_5,
        report.chosen_all.hit_at_10,
        report.chosen_all.share_at_10
    ));
    text
}
