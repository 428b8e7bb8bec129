//! The rankings the tuning combines, one lever at a time: the product's lexical search under given
//! [`LexicalRules`] (optionally with RM3-style feedback), embedding rankings of several embedded-text
//! variants, and the fusion of the two by the product's [`fuse_rankings`] (either of its methods).
//!
//! Rankings are per question, within the question's conversation, best first, each id once.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;

use memory_core::{DynamicNamespace, MemoryAccess, MemoryScope};
use memory_sqlite::SqliteStore;
use memory_sqlite::lexical::{LexicalRules, is_stop_word};
use semantic_index::{
    Embedder, Fused, FusionMethod, HybridParams, borrow_from_neighbours, fuse_rankings,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::data::{Conversation, Question, Session, Turn};
use super::run::{SCOPE, namespace};

/// A ranking: turn ids with their scores, best first.
pub type Ranking = Vec<(String, f64)>;

/// Deepest ranking kept of either side: the deepest candidate depth tried.
pub const MAX_DEPTH: usize = 100;

/// A scored question: its conversation's index and the question.
#[derive(Debug, Clone, Copy)]
pub struct Scored<'a> {
    /// Conversation index in file order.
    pub conversation: usize,
    /// The question.
    pub question: &'a Question,
}

/// Every scored question of `conversations`, in order.
pub fn scored_questions(conversations: &[Conversation]) -> Vec<Scored<'_>> {
    conversations
        .iter()
        .enumerate()
        .flat_map(|(conversation, data)| {
            data.scored_questions().map(move |question| Scored {
                conversation,
                question,
            })
        })
        .collect()
}

/// The access a conversation's questions are recalled with.
pub fn access(conversation: &Conversation) -> anyhow::Result<MemoryAccess> {
    let namespace: DynamicNamespace = serde_json::from_value(namespace(conversation))?;
    Ok(MemoryAccess {
        namespace: namespace.address()?,
        scope: MemoryScope::new(SCOPE)?,
    })
}

/// The product's lexical search of every question under `rules`, `MAX_DEPTH` deep.
pub fn lexical_rankings(
    store: &SqliteStore,
    conversations: &[Conversation],
    questions: &[Scored<'_>],
    rules: &LexicalRules,
    query_of: &dyn Fn(&Scored<'_>) -> String,
) -> anyhow::Result<Vec<Ranking>> {
    let accesses = conversations
        .iter()
        .map(access)
        .collect::<anyhow::Result<Vec<_>>>()?;
    questions
        .iter()
        .map(|scored| {
            let hits = store.search_with_rules(
                &accesses[scored.conversation],
                &query_of(scored),
                MAX_DEPTH,
                rules,
            )?;
            Ok(hits
                .into_iter()
                .map(|hit| (hit.key.id.as_str().to_owned(), hit.score))
                .collect())
        })
        .collect()
}

fn content_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|character: char| !character.is_alphanumeric())
        .filter(|word| word.chars().count() >= 3 && !is_stop_word(word))
        .map(str::to_lowercase)
}

/// RM3-style expansion: the `terms` content words that weigh most in the top `documents` of `first`
/// (each document's term frequencies over its length, weighted by its share of the top scores), not
/// already in the question, appended to it. Ties go to the word seen first.
pub fn expanded_query(
    question: &str,
    first: &Ranking,
    texts: &HashMap<&str, &str>,
    documents: usize,
    terms: usize,
) -> String {
    let asked: Vec<String> = content_words(question).collect();
    let total: f64 = first
        .iter()
        .take(documents)
        .map(|(_, score)| score.max(0.0))
        .sum();
    let mut weights: Vec<(String, f64)> = Vec::new();
    for (id, score) in first.iter().take(documents) {
        let Some(text) = texts.get(id.as_str()) else {
            continue;
        };
        let words: Vec<String> = content_words(text).collect();
        if words.is_empty() {
            continue;
        }
        let document_weight = if total > 0.0 {
            score.max(0.0) / total
        } else {
            1.0
        };
        for word in &words {
            if asked.contains(word) {
                continue;
            }
            let add = document_weight / words.len() as f64;
            match weights.iter_mut().find(|(seen, _)| seen == word) {
                Some((_, weight)) => *weight += add,
                None => weights.push((word.clone(), add)),
            }
        }
    }
    // Stable: equal weights keep first-seen order.
    weights.sort_by(|left, right| right.1.total_cmp(&left.1));
    let mut query = question.to_owned();
    for (word, _) in weights.into_iter().take(terms) {
        query.push(' ');
        query.push_str(&word);
    }
    query
}

/// What is embedded for a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EmbeddedText {
    /// The text alone.
    Text,
    /// `Speaker: text` (the product's `SpeakerThenText`).
    SpeakerThenText,
    /// `8 May 2023, Speaker: text`.
    DateSpeakerThenText,
    /// The previous turn of the session (`Speaker: text`), a line break, then `Speaker: text`.
    PreviousTurnThenSpeakerText,
}

impl EmbeddedText {
    /// Every variant, in report order.
    pub const ALL: [Self; 4] = [
        Self::Text,
        Self::SpeakerThenText,
        Self::DateSpeakerThenText,
        Self::PreviousTurnThenSpeakerText,
    ];

    /// The variant's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::SpeakerThenText => "speaker-then-text",
            Self::DateSpeakerThenText => "date-speaker-then-text",
            Self::PreviousTurnThenSpeakerText => "previous-turn-then-speaker-text",
        }
    }

    /// The text embedded for the turn at `index` of `session`.
    pub fn of(self, session: &Session, index: usize) -> String {
        let turn: &Turn = &session.turns[index];
        let spoken = |turn: &Turn| format!("{}: {}", turn.speaker, turn.text);
        match self {
            Self::Text => turn.text.clone(),
            Self::SpeakerThenText => spoken(turn),
            Self::DateSpeakerThenText => {
                let date = session
                    .date_time
                    .split_once(" on ")
                    .map_or(session.date_time.as_str(), |(_, date)| date)
                    .replace(',', "");
                format!("{date}, {}", spoken(turn))
            }
            Self::PreviousTurnThenSpeakerText => match index.checked_sub(1) {
                Some(previous) => format!("{}\n{}", spoken(&session.turns[previous]), spoken(turn)),
                None => spoken(turn),
            },
        }
    }
}

/// Embeds `texts` with `embedder`, or reads the vectors a previous run cached at `cache` for exactly
/// these texts (the file holds the texts' sha256), so each variant costs the model once.
pub fn embed_cached<E: Embedder>(
    embedder: &E,
    texts: &[String],
    cache: Option<&Path>,
    progress: &indicatif::ProgressBar,
) -> anyhow::Result<Vec<Vec<f32>>> {
    let mut hasher = Sha256::new();
    hasher.update(embedder.dimensions().to_le_bytes());
    for text in texts {
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    }
    let digest: [u8; 32] = hasher.finalize().into();
    let dimensions = embedder.dimensions();
    if let Some(path) = cache
        && let Ok(mut file) = std::fs::File::open(path)
    {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        if bytes.len() == 32 + texts.len() * dimensions * 4 && bytes[..32] == digest {
            progress.inc(texts.len() as u64);
            return Ok(bytes[32..]
                .chunks_exact(dimensions * 4)
                .map(|row| {
                    row.chunks_exact(4)
                        .map(|value| f32::from_le_bytes([value[0], value[1], value[2], value[3]]))
                        .collect()
                })
                .collect());
        }
    }
    let mut vectors = Vec::with_capacity(texts.len());
    for batch in texts.chunks(64) {
        let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
        vectors.extend(semantic_index::checked_embeddings(
            embedder.embed(&refs)?,
            refs.len(),
            dimensions,
        )?);
        progress.inc(batch.len() as u64);
    }
    if let Some(path) = cache {
        let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
        file.write_all(&digest)?;
        for vector in &vectors {
            for value in vector {
                file.write_all(&value.to_le_bytes())?;
            }
        }
        file.flush()?;
    }
    Ok(vectors)
}

/// Cosine rankings (vectors are unit length) of each question among its conversation's turns, best
/// first, ties by turn order, `MAX_DEPTH` deep, dropping turns below `min_score` as the product does.
pub fn embedding_rankings(
    conversations: &[Conversation],
    turn_vectors: &[Vec<f32>],
    questions: &[Scored<'_>],
    question_vectors: &[Vec<f32>],
    min_score: f32,
) -> Vec<Ranking> {
    let mut starts = Vec::with_capacity(conversations.len());
    let mut next = 0usize;
    for conversation in conversations {
        starts.push(next);
        next += conversation.turns().count();
    }
    questions
        .iter()
        .zip(question_vectors)
        .map(|(scored, query)| {
            let conversation = &conversations[scored.conversation];
            let start = starts[scored.conversation];
            let mut scored_turns: Vec<(usize, f32, &str)> = conversation
                .turns()
                .enumerate()
                .map(|(offset, (_, turn))| {
                    let vector = &turn_vectors[start + offset];
                    let cosine: f32 = vector.iter().zip(query).map(|(a, b)| a * b).sum();
                    (offset, cosine, turn.dia_id.as_str())
                })
                .filter(|(_, cosine, _)| *cosine >= min_score)
                .collect();
            scored_turns
                .sort_by(|left, right| right.1.total_cmp(&left.1).then(left.0.cmp(&right.0)));
            scored_turns
                .into_iter()
                .take(MAX_DEPTH)
                .map(|(_, cosine, id)| (id.to_owned(), f64::from(cosine)))
                .collect()
        })
        .collect()
}

/// How the two rankings are combined: one of the product's fusion methods with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "fusion", rename_all = "kebab-case")]
pub enum Fusion {
    /// The product's weighted reciprocal rank fusion.
    Rrf {
        /// Rank damping.
        k: f64,
        /// Weight of the lexical ranking (the embedding ranking weighs 1).
        lexical_weight: f64,
    },
    /// The product's normalized score fusion.
    NormalizedScores {
        /// Weight (share) of the lexical score.
        lexical_weight: f64,
        /// Weight (share) of the embedding score.
        embedding_weight: f64,
    },
}

impl Fusion {
    /// The fusion `params` select.
    pub fn of(params: &HybridParams) -> Self {
        match params.method {
            FusionMethod::ReciprocalRank => Self::Rrf {
                k: params.k,
                lexical_weight: params.lexical_weight / params.embedding_weight,
            },
            FusionMethod::NormalizedScores => Self::NormalizedScores {
                lexical_weight: params.lexical_weight,
                embedding_weight: params.embedding_weight,
            },
        }
    }

    /// The product's parameters for this fusion (depths and the rest at their defaults).
    pub fn params(self) -> HybridParams {
        let defaults = HybridParams::default();
        match self {
            Self::Rrf { k, lexical_weight } => HybridParams {
                method: FusionMethod::ReciprocalRank,
                k,
                lexical_weight,
                embedding_weight: 1.0,
                ..defaults
            },
            Self::NormalizedScores {
                lexical_weight,
                embedding_weight,
            } => HybridParams {
                method: FusionMethod::NormalizedScores,
                lexical_weight,
                embedding_weight,
                ..defaults
            },
        }
    }

    /// A label for reports.
    pub fn describe(self) -> String {
        match self {
            Self::Rrf { k, lexical_weight } => {
                format!("RRF k={k}, lexical weight {lexical_weight}")
            }
            Self::NormalizedScores {
                lexical_weight,
                embedding_weight,
            } => format!("normalized score fusion, weights {lexical_weight}:{embedding_weight}"),
        }
    }
}

/// Each turn's written-order neighbours (before, after, nearest first) in its conversation, by
/// turn id.
pub type Neighbours = HashMap<String, (Vec<String>, Vec<String>)>;

/// The product's written-order neighbours of every turn of every conversation, `reach` on each
/// side ([`SqliteStore::written_neighbours_blocking`], the read hybrid recall makes), one map per
/// conversation. An id's answer does not depend on the other ids asked with it, so reading a whole
/// conversation once gives what each recall's own read would.
pub fn written_neighbours(
    store: &SqliteStore,
    conversations: &[Conversation],
    reach: usize,
) -> anyhow::Result<Vec<Neighbours>> {
    conversations
        .iter()
        .map(|conversation| {
            let access = access(conversation)?;
            let ids = conversation
                .turns()
                .map(|(_, turn)| memory_core::DocumentId::new(turn.dia_id.as_str()))
                .collect::<Result<Vec<_>, _>>()?;
            let mut neighbours = Neighbours::with_capacity(ids.len());
            for batch in ids.chunks(memory_core::storage::MAX_NEIGHBOUR_IDS) {
                let answers = store.written_neighbours_blocking(&access, batch, reach)?;
                for (id, answer) in batch.iter().zip(answers) {
                    let names = |ids: Vec<memory_core::DocumentId>| -> Vec<String> {
                        ids.into_iter().map(|id| id.to_string()).collect()
                    };
                    neighbours.insert(id.to_string(), (names(answer.before), names(answer.after)));
                }
            }
            Ok(neighbours)
        })
        .collect()
}

/// [`fuse`], then each fused turn borrows from its written-order neighbours up to `reach` steps
/// away (`context_weight` for the nearest, halved at each further step) through the product's
/// [`borrow_from_neighbours`], as hybrid recall does; each fused turn with its scores (what the
/// rerank stage reads).
#[allow(clippy::too_many_arguments)]
pub fn fuse_in_context(
    fusion: Fusion,
    context_weight: f64,
    reach: usize,
    neighbours: &Neighbours,
    lexical: &Ranking,
    embedding: &Ranking,
    lexical_depth: usize,
    embedding_depth: usize,
) -> Vec<Fused<String>> {
    let lexical = &lexical[..lexical.len().min(lexical_depth)];
    let embedding = &embedding[..embedding.len().min(embedding_depth)];
    let mut fused = fuse_rankings(&fusion.params(), lexical, embedding);
    let near = |side: &[String]| side.iter().take(reach).cloned().collect::<Vec<_>>();
    let around: Vec<(Vec<String>, Vec<String>)> = fused
        .iter()
        .map(|item| {
            neighbours
                .get(&item.item)
                .map(|(before, after)| (near(before), near(after)))
                .unwrap_or_default()
        })
        .collect();
    borrow_from_neighbours(&mut fused, &around, context_weight);
    fused
}

/// Fuses the top `lexical_depth` and `embedding_depth` of two rankings into turn ids, best first, by
/// the product's [`fuse_rankings`] (no neighbours: [`fuse_in_context`] adds them).
pub fn fuse(
    fusion: Fusion,
    lexical: &Ranking,
    embedding: &Ranking,
    lexical_depth: usize,
    embedding_depth: usize,
) -> Vec<String> {
    turn_ids(fuse_in_context(
        fusion,
        0.0,
        0,
        &Neighbours::new(),
        lexical,
        embedding,
        lexical_depth,
        embedding_depth,
    ))
}

/// The turn ids of a fused ranking, best first.
pub fn turn_ids(fused: Vec<Fused<String>>) -> Vec<String> {
    fused.into_iter().map(|fused| fused.item).collect()
}
