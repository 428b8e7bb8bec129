//! `memory-eval locomo-tune`: chooses the lexical rules, the embedded text and the hybrid fusion on
//! LoCoMo's first conversations (five, in file order) and reports every setting tried on them, with the
//! held-out conversations' figures beside it, never used to choose.
//!
//! How it chooses (deterministic: no randomness, every tie broken by the order settings are listed):
//! - The objective is the mean of hit@5, hit@10 and evidence share@10 on the tuning conversations (the
//!   goal's figures; hit@1 alone is too noisy on a few hundred questions).
//! - Each lever is chosen in turn, the earlier ones fixed: lexical rules (stop words, speaker weight),
//!   then BM25's `k1` and `b` (smoothed over their grid), then RM3 feedback on top of them, then the
//!   embedded text, then the fusion and its depths, then the context weight, then the rerank
//!   stage's weights ([`super::rerank`]; objective there the mean of hit@1, hit@5, hit@10 and
//!   share@10, since the stage is there for the first places). The stage is on by default only
//!   if it raised hit@1 and hit@5 on both the tuning and the held-out conversations.
//! - A lever's challenger replaces the product's current setting only when it wins by at least
//!   [`MARGIN`]: a change must buy something, not a hair that another corpus would not confirm.
//! - The fusion is chosen among both of the product's methods: reciprocal rank fusion over `k`,
//!   lexical weight and both depths, and normalized score fusion over its weights and both depths.
//!   Each setting is scored by its smoothed objective, the mean over the setting and its grid
//!   neighbours (`k` and weight for RRF, the weights for score fusion), so the choice sits on a
//!   plateau rather than a spike. Within each method, among the settings within [`MARGIN`] of its
//!   best smoothed objective, the least extreme one wins: weights closest to equal, then the largest
//!   `k`, then the deepest candidate lists (see `least_extreme` for why). Between the two methods the
//!   product's current one stays unless the other's smoothed objective beats it by [`MARGIN`].
//! - Then the context on top of the chosen fusion ([`CONTEXT_REACHES`] x [`CONTEXT_WEIGHTS`],
//!   each reach's objective smoothed over neighbouring weights): the least extreme setting within [`MARGIN`] of the best
//!   (smallest reach, then smallest weight) challenges the product's current one, which stays
//!   unless beaten by [`MARGIN`].

use std::collections::HashMap;

use memory_sqlite::SqliteStore;
use memory_sqlite::lexical::{FTS5_B, FTS5_K1, LexicalRules};
use semantic_index::{
    CrossEncoder, Embedder, Fused, FusionMethod, HybridParams, Preprocessing, RerankWeights,
    SemanticProfile,
};
use serde::{Deserialize, Serialize};

use super::data::Conversation;
use super::levers::{
    EmbeddedText, Fusion, Ranking, Scored, embed_cached, embedding_rankings, expanded_query, fuse,
    fuse_in_context, lexical_rankings, scored_questions, turn_ids, written_neighbours,
};
use super::metrics::{RetrievalFigures, figures};
use super::rerank;
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
/// twice the items a recall may cite (`memory_service::recall_service::MIN_SEARCH_HITS` and more), so a
/// shallower default would never take effect.
pub const DEPTHS: [usize; 3] = [20, 40, 100];
/// Weights (lexical, embedding) tried for normalized score fusion: shares of the fused score.
pub const SCORE_WEIGHTS: [(f64, f64); 5] =
    [(0.3, 0.7), (0.4, 0.6), (0.5, 0.5), (0.6, 0.4), (0.7, 0.3)];
/// Speaker-column weights tried.
pub const SPEAKER_WEIGHTS: [f64; 5] = [0.0, 0.25, 0.5, 1.0, 2.0];
/// BM25 `k1` values tried.
pub const BM25_K1: [f64; 5] = [0.5, 0.9, 1.2, 1.6, 2.0];
/// BM25 `b` values tried.
pub const BM25_B: [f64; 8] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.6, 0.75, 0.9];
/// RM3 feedback settings tried: (feedback documents, expansion terms).
pub const RM3: [(usize, usize); 4] = [(3, 5), (5, 5), (5, 10), (10, 10)];
/// Context weights tried: how much a fused turn borrows from its nearest written-order neighbours
/// (halved at each further step).
pub const CONTEXT_WEIGHTS: [f64; 7] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75];
/// Context reaches tried: written-order neighbours read on each side.
pub const CONTEXT_REACHES: [usize; 3] = [1, 2, 3];

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
    /// BM25's `k1`.
    pub lexical_k1: f64,
    /// BM25's `b`.
    pub lexical_b: f64,
    /// RM3 feedback `(documents, terms)`, or `None` when it did not help.
    pub lexical_rm3: Option<(usize, usize)>,
    /// What is embedded for a turn.
    pub embedded_text: EmbeddedText,
    /// The fusion method.
    pub fusion: FusionMethod,
    /// Reciprocal rank fusion's `k` (kept for that method when normalized scores are chosen).
    pub rrf_k: f64,
    /// Weight of the lexical ranking.
    pub lexical_weight: f64,
    /// Weight of the embedding ranking.
    pub embedding_weight: f64,
    /// Lexical candidates fused.
    pub lexical_candidates: usize,
    /// Embedding candidates fused.
    pub embedding_candidates: usize,
    /// Weight a fused turn gives its nearest written-order neighbours' fused scores.
    pub context_weight: f64,
    /// Written-order neighbours read on each side.
    pub context_reach: usize,
    /// Whether hybrid recall reranks by default: the stage raised hit@1 and hit@5 on both the tuning
    /// and the held-out conversations.
    pub rerank: bool,
    /// The rerank stage's weights without a cross-encoder (its weight held at 0), chosen on the
    /// tuning conversations.
    pub rerank_weights: RerankWeights,
    /// Whether the stage scores with the cross-encoder where one is loaded: its weights raised
    /// hit@1 and hit@5 over `rerank_weights` on both the tuning and the held-out conversations.
    #[serde(default)]
    pub cross_rerank: bool,
    /// The rerank stage's weights with the cross-encoder's score among the signals, chosen on the
    /// tuning conversations.
    #[serde(default)]
    pub cross_rerank_weights: RerankWeights,
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
    cross: Option<&dyn CrossEncoder>,
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
                ..current_rules
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
    let Some((_, mut rules, mut lexical)) = best else {
        anyhow::bail!("no lexical setting was measured");
    };

    // BM25's k1 and b on top of them, smoothed over the grid; the current setting is kept unless the
    // challenger beats it by the margin.
    let bar = progress.bar("BM25 k1 and b", (BM25_K1.len() * BM25_B.len()) as u64);
    let mut grid = vec![vec![0.0; BM25_B.len()]; BM25_K1.len()];
    let mut bm25_rows = Vec::new();
    let mut bm25_rankings = Vec::new();
    for (ki, k1) in BM25_K1.iter().enumerate() {
        for (bi, b) in BM25_B.iter().enumerate() {
            let candidate = LexicalRules {
                k1: *k1,
                b: *b,
                ..rules
            };
            let rankings = lexical_rankings(store, conversations, questions, &candidate, &plain)?;
            let row = split.row("lexical BM25", format!("k1 {k1}, b {b}"), &ids(&rankings));
            grid[ki][bi] = row.objective;
            bm25_rows.push(row);
            bm25_rankings.push((candidate, rankings));
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let smoothed =
        |index: usize| neighbourhood_mean(&grid, index / BM25_B.len(), index % BM25_B.len());
    let current = bm25_rankings
        .iter()
        .position(|(candidate, _)| candidate.k1 == rules.k1 && candidate.b == rules.b);
    // The challenger: among the settings within the margin of the best smoothed objective, the
    // closest to FTS5's own (b first, then k1), the way the fusion's least extreme setting is chosen.
    let best_smoothed = (0..bm25_rankings.len())
        .map(smoothed)
        .fold(f64::MIN, f64::max);
    let distance = |index: usize| {
        let (candidate, _) = &bm25_rankings[index];
        (
            (candidate.b - FTS5_B).abs(),
            (candidate.k1 / FTS5_K1).ln().abs(),
        )
    };
    let challenger = (0..bm25_rankings.len())
        .filter(|index| smoothed(*index) >= best_smoothed - MARGIN)
        .min_by(|left, right| {
            let (left, right) = (distance(*left), distance(*right));
            left.0.total_cmp(&right.0).then(left.1.total_cmp(&right.1))
        })
        .unwrap_or(0);
    let chosen_bm25 = match current {
        Some(current) if smoothed(challenger) < smoothed(current) + MARGIN => current,
        _ => challenger,
    };
    for (index, mut row) in bm25_rows.into_iter().enumerate() {
        row.objective = smoothed(index);
        if index == chosen_bm25 {
            row.setting.push_str(" (chosen)");
        }
        rows.push(row);
    }
    let (chosen_rules, chosen_rankings) = bm25_rankings.swap_remove(chosen_bm25);
    if chosen_rules != rules {
        rules = chosen_rules;
        lexical = chosen_rankings;
    }
    let lexical_objective = objective(&split.figures(&ids(&lexical), |conversation| {
        conversation < TUNING_CONVERSATIONS
    }));

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

    // Fusion: both of the product's methods over their parameters and both depths.
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
    let mut rrf_settings: Vec<FusionSetting> = Vec::new();
    let mut score_settings: Vec<FusionSetting> = Vec::new();
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
                    rrf_settings.push(FusionSetting {
                        smoothed: neighbourhood_mean(&grid, ki, wi),
                        fusion: Fusion::Rrf {
                            k: *k,
                            lexical_weight: *lexical_weight,
                        },
                        lexical_depth,
                        embedding_depth,
                    });
                }
            }
            let shares: Vec<f64> = SCORE_WEIGHTS
                .iter()
                .map(|(lexical_weight, embedding_weight)| {
                    let fusion = Fusion::NormalizedScores {
                        lexical_weight: *lexical_weight,
                        embedding_weight: *embedding_weight,
                    };
                    tuning_only(&fused_all(fusion, lexical_depth, embedding_depth))
                })
                .collect();
            let grid = vec![shares];
            for (wi, (lexical_weight, embedding_weight)) in SCORE_WEIGHTS.iter().enumerate() {
                score_settings.push(FusionSetting {
                    smoothed: neighbourhood_mean(&grid, 0, wi),
                    fusion: Fusion::NormalizedScores {
                        lexical_weight: *lexical_weight,
                        embedding_weight: *embedding_weight,
                    },
                    lexical_depth,
                    embedding_depth,
                });
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let (Some(best_rrf), Some(best_scores)) =
        (least_extreme(&rrf_settings), least_extreme(&score_settings))
    else {
        anyhow::bail!("no fusion was measured");
    };
    // The product's current method defends its place: the other must win by the margin.
    let (incumbent, challenger) = match defaults.method {
        FusionMethod::ReciprocalRank => (best_rrf, best_scores),
        FusionMethod::NormalizedScores => (best_scores, best_rrf),
    };
    let chosen = if challenger.smoothed >= incumbent.smoothed + MARGIN {
        challenger
    } else {
        incumbent
    };
    let current = Fusion::of(&defaults);
    rows.push(split.row(
        "fusion",
        format!(
            "product's current default: {}, depths {}/{}",
            current.describe(),
            defaults.lexical_candidates,
            defaults.embedding_candidates
        ),
        &fused_all(
            current,
            defaults.lexical_candidates,
            defaults.embedding_candidates,
        ),
    ));
    for (label, setting) in [
        ("best RRF", best_rrf),
        ("best normalized score fusion", best_scores),
        ("chosen", chosen),
    ] {
        let mut row = split.row(
            "fusion",
            format!(
                "{label}: {}, depths {}/{} (objective smoothed over neighbouring settings)",
                setting.fusion.describe(),
                setting.lexical_depth,
                setting.embedding_depth
            ),
            &fused_all(
                setting.fusion,
                setting.lexical_depth,
                setting.embedding_depth,
            ),
        );
        row.objective = setting.smoothed;
        rows.push(row);
    }
    let rrf_weight = match best_rrf.fusion {
        Fusion::Rrf { lexical_weight, .. } => lexical_weight,
        Fusion::NormalizedScores { .. } => 1.0,
    };
    let rrf_k = match best_rrf.fusion {
        Fusion::Rrf { k, .. } => k,
        Fusion::NormalizedScores { .. } => defaults.k,
    };
    for other_k in RRF_K {
        rows.push(split.row(
            "fusion RRF k",
            format!("RRF k={other_k}, best RRF's weight and depths"),
            &fused_all(
                Fusion::Rrf {
                    k: other_k,
                    lexical_weight: rrf_weight,
                },
                best_rrf.lexical_depth,
                best_rrf.embedding_depth,
            ),
        ));
    }
    for weight in LEXICAL_WEIGHTS {
        rows.push(split.row(
            "fusion RRF weight",
            format!("RRF lexical weight {weight}, best RRF's k and depths"),
            &fused_all(
                Fusion::Rrf {
                    k: rrf_k,
                    lexical_weight: weight,
                },
                best_rrf.lexical_depth,
                best_rrf.embedding_depth,
            ),
        ));
    }
    for (lexical_weight, embedding_weight) in SCORE_WEIGHTS {
        rows.push(split.row(
            "fusion score weights",
            format!(
                "normalized score fusion, weights {lexical_weight}:{embedding_weight}, best score \
                 fusion's depths"
            ),
            &fused_all(
                Fusion::NormalizedScores {
                    lexical_weight,
                    embedding_weight,
                },
                best_scores.lexical_depth,
                best_scores.embedding_depth,
            ),
        ));
    }
    for depth in DEPTHS {
        rows.push(split.row(
            "fusion depth",
            format!("chosen fusion, both depths {depth}"),
            &fused_all(chosen.fusion, depth, depth),
        ));
    }

    // Context on top of the chosen fusion: each fused turn borrows from the turns written just
    // before and after it (the product's neighbour read and `borrow_from_neighbours`), over a grid
    // of reach x weight. The challenger is the least extreme setting
    // within the margin of the best (smallest reach, then smallest weight); the product's current
    // setting stays unless it loses by the margin.
    let farthest = CONTEXT_REACHES.iter().copied().max().unwrap_or(1);
    let neighbours = written_neighbours(store, conversations, farthest)?;
    let in_context_scored = |weight: f64, reach: usize| -> Vec<Vec<Fused<String>>> {
        questions
            .iter()
            .zip(lexical.iter().zip(&embedding))
            .map(|(scored, (lexical, embedding))| {
                fuse_in_context(
                    chosen.fusion,
                    weight,
                    reach,
                    &neighbours[scored.conversation],
                    lexical,
                    embedding,
                    chosen.lexical_depth,
                    chosen.embedding_depth,
                )
            })
            .collect()
    };
    let in_context = |weight: f64, reach: usize| -> Vec<Vec<String>> {
        in_context_scored(weight, reach)
            .into_iter()
            .map(turn_ids)
            .collect()
    };
    let bar = progress.bar(
        "context",
        (CONTEXT_REACHES.len() * CONTEXT_WEIGHTS.len()) as u64,
    );
    let mut context_rows = Vec::new();
    let mut context_grid = vec![vec![0.0; CONTEXT_WEIGHTS.len()]; CONTEXT_REACHES.len()];
    for (ri, reach) in CONTEXT_REACHES.iter().enumerate() {
        for (wi, weight) in CONTEXT_WEIGHTS.iter().enumerate() {
            let row = split.row(
                "context",
                format!("chosen fusion, context reach {reach}, weight {weight}"),
                &in_context(*weight, *reach),
            );
            context_grid[ri][wi] = row.objective;
            context_rows.push(row);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    // Smoothed along the weight only: a reach is a structure, not a point on a scale, and smoothing
    // across reaches favoured the grid's last row (averaged with one neighbour row, not two).
    let context_smoothed = |index: usize| {
        let row = &context_grid[index / CONTEXT_WEIGHTS.len()];
        neighbourhood_mean(std::slice::from_ref(row), 0, index % CONTEXT_WEIGHTS.len())
    };
    let settings = CONTEXT_REACHES.len() * CONTEXT_WEIGHTS.len();
    let best_context = (0..settings).map(context_smoothed).fold(f64::MIN, f64::max);
    // Row-major over (reach, weight), both ascending: the first within the margin is the least
    // extreme.
    let challenger = (0..settings)
        .find(|index| context_smoothed(*index) >= best_context - MARGIN)
        .unwrap_or(0);
    let current = CONTEXT_REACHES
        .iter()
        .position(|reach| *reach == defaults.context_reach)
        .zip(
            CONTEXT_WEIGHTS
                .iter()
                .position(|weight| *weight == defaults.context_weight),
        )
        .map(|(ri, wi)| ri * CONTEXT_WEIGHTS.len() + wi);
    let chosen_context = match current {
        Some(current) if context_smoothed(challenger) < context_smoothed(current) + MARGIN => {
            current
        }
        _ => challenger,
    };
    for (index, mut row) in context_rows.into_iter().enumerate() {
        row.objective = context_smoothed(index);
        if index == chosen_context {
            row.setting.push_str(" (chosen)");
        }
        rows.push(row);
    }
    let context_reach = CONTEXT_REACHES[chosen_context / CONTEXT_WEIGHTS.len()];
    let context_weight = CONTEXT_WEIGHTS[chosen_context % CONTEXT_WEIGHTS.len()];
    let fused = in_context_scored(context_weight, context_reach);
    let chosen_ranked: Vec<Vec<String>> = fused
        .iter()
        .map(|question| question.iter().map(|item| item.item.clone()).collect())
        .collect();
    let params = chosen.fusion.params();

    // The rerank stage over the chosen fusion and context: its weights by coordinate ascent on the
    // tuning conversations (objective: mean of hit@1, hit@5, hit@10 and share@10, since the stage
    // is there for the first places); on by default only if it raises hit@1 and hit@5 on both
    // halves.
    // As many fused turns as the product's hybrid recall keeps, and so reranks, for the eval's
    // recalls of `MAX_ITEMS` passages.
    let kept = memory_service::recall_service::search_depth_for(super::run::MAX_ITEMS);
    let mut candidates = rerank::candidates(conversations, questions, fused, kept);
    let rerank_objective = |figures: &RetrievalFigures| {
        (figures.hit_at_1 + figures.hit_at_5 + figures.hit_at_10 + figures.share_at_10) / 4.0
    };
    let tuning_objective = |candidates: &[rerank::Candidates], weights: &RerankWeights| {
        rerank_objective(
            &split.figures(&rerank::ranked(candidates, Some(weights)), |conversation| {
                conversation < TUNING_CONVERSATIONS
            }),
        )
    };
    // Without the cross-encoder (what a process that does not load it ranks by); then the model
    // reads the turns those weights put first, and the weights are chosen again with its signal.
    let bar = progress.bar("rerank weights", 1);
    let (rerank_weights, _) = rerank::coordinate_ascent(
        |weights| tuning_objective(&candidates, weights),
        |name| name != "cross",
    );
    bar.finish_and_clear();
    if let Some(cross) = cross {
        let bar = progress.bar("cross-encoder reads", questions.len() as u64);
        rerank::read_by_cross(&mut candidates, cross, &rerank_weights, || bar.inc(1))?;
        bar.finish_and_clear();
    }
    let bar = progress.bar("rerank weights with the cross-encoder", 1);
    let (cross_rerank_weights, _) =
        rerank::coordinate_ascent(|weights| tuning_objective(&candidates, weights), |_| true);
    bar.finish_and_clear();
    let plain = split.row(
        "rerank",
        "without the stage".to_owned(),
        &rerank::ranked(&candidates, None),
    );
    let reranked = split.row(
        "rerank",
        format!("with weights {:?}", rerank_weights.named()),
        &rerank::ranked(&candidates, Some(&rerank_weights)),
    );
    let cross_reranked = split.row(
        "rerank",
        format!(
            "with the cross-encoder, weights {:?}",
            cross_rerank_weights.named()
        ),
        &rerank::ranked(&candidates, Some(&cross_rerank_weights)),
    );
    let raises = |with: &RetrievalFigures, without: &RetrievalFigures| {
        with.hit_at_1 > without.hit_at_1 && with.hit_at_5 > without.hit_at_5
    };
    let rerank =
        raises(&reranked.tuning, &plain.tuning) && raises(&reranked.held_out, &plain.held_out);
    let cross_rerank = rerank
        && raises(&cross_reranked.tuning, &reranked.tuning)
        && raises(&cross_reranked.held_out, &reranked.held_out);
    for mut row in [plain, reranked, cross_reranked] {
        row.objective = rerank_objective(&row.tuning);
        rows.push(row);
    }
    let chosen_all = if cross_rerank {
        split.figures(
            &rerank::ranked(&candidates, Some(&cross_rerank_weights)),
            |_| true,
        )
    } else if rerank {
        split.figures(&rerank::ranked(&candidates, Some(&rerank_weights)), |_| {
            true
        })
    } else {
        split.figures(&chosen_ranked, |_| true)
    };
    Ok(TuneReport {
        tuned: Tuned {
            tuned_on: format!(
                "LoCoMo conversations 1-{TUNING_CONVERSATIONS} (file order), categories 1-4"
            ),
            lexical_stop_words: rules.stop_words,
            lexical_text_weight: rules.text_weight,
            lexical_speaker_weight: rules.speaker_weight,
            lexical_k1: rules.k1,
            lexical_b: rules.b,
            lexical_rm3,
            embedded_text,
            fusion: params.method,
            rrf_k,
            lexical_weight: params.lexical_weight,
            embedding_weight: params.embedding_weight,
            lexical_candidates: chosen.lexical_depth,
            embedding_candidates: chosen.embedding_depth,
            context_weight,
            context_reach,
            rerank,
            rerank_weights,
            cross_rerank,
            cross_rerank_weights,
        },
        rows,
        chosen_all,
    })
}

/// One fusion setting of the grid and its smoothed objective on the tuning conversations.
#[derive(Debug, Clone, Copy)]
struct FusionSetting {
    smoothed: f64,
    fusion: Fusion,
    lexical_depth: usize,
    embedding_depth: usize,
}

/// Among `settings` within [`MARGIN`] of the best smoothed objective, the least extreme: weights
/// closest to equal, then the largest `k`, then the deepest lists, then the first listed.
///
/// Deepest, not cheapest: normalized score fusion maps each list's last score to 0, so the shallower
/// the list the more its normalization depends on where it was cut (at depth 20 the 20th lexical hit
/// counts for nothing, however close its BM25 score is to the first's); rank fusion only gains
/// candidates. A deeper list costs little: the lexical search scores every matching row whatever its
/// limit, and the embedding search's candidate list (HNSW `ef_search`, 128 by default) is already
/// past 100.
fn least_extreme(settings: &[FusionSetting]) -> Option<FusionSetting> {
    let best = settings
        .iter()
        .map(|setting| setting.smoothed)
        .fold(f64::MIN, f64::max);
    let skew = |setting: &FusionSetting| match setting.fusion {
        Fusion::Rrf { lexical_weight, .. } => lexical_weight.ln().abs(),
        Fusion::NormalizedScores {
            lexical_weight,
            embedding_weight,
        } => (lexical_weight / embedding_weight).ln().abs(),
    };
    let k = |setting: &FusionSetting| match setting.fusion {
        Fusion::Rrf { k, .. } => k,
        Fusion::NormalizedScores { .. } => 0.0,
    };
    settings
        .iter()
        .filter(|setting| setting.smoothed >= best - MARGIN)
        .min_by(|left, right| {
            skew(left)
                .total_cmp(&skew(right))
                .then(k(right).total_cmp(&k(left)))
                .then(
                    (right.lexical_depth + right.embedding_depth)
                        .cmp(&(left.lexical_depth + left.embedding_depth)),
                )
        })
        .copied()
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
