//! Shared by the benchmarks: centroids, synthetic unit vectors around them, synthetic chunk rows and
//! percentiles.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use memory_core::vectors::SourceGeneration;
use memory_core::{DocumentId, MemoryKey, NamespaceAddress, Revision};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use semantic_index::index::{ChunkMeta, SourceChunks, SourceVersion};
use semantic_index::{
    Embedder, FastembedEmbedder, ModelAssets, SemanticProfile, checked_embeddings,
};

/// all-MiniLM-L6-v2's dimensions.
pub const DIMENSIONS: usize = 384;
/// Spread of synthetic vectors around their centroid (per component, before normalising).
pub const NOISE: f32 = 0.045;
/// Centroids drawn when the model assets are missing.
pub const RANDOM_CENTROIDS: usize = 64;

pub const SEEDS: [&str; 8] = [
    "The meeting moved to Thursday afternoon",
    "My daughter loves painting horses",
    "The server crashed after the update",
    "We booked a flight to Lisbon",
    "He is allergic to peanuts and shellfish",
    "The invoice was paid late again",
    "Our team prefers tabs over spaces",
    "She runs ten kilometres every morning",
];
pub const SUFFIXES: [&str; 8] = [
    "",
    " according to the notes",
    " last week",
    " as far as I remember",
    " in the report",
    " during the call",
    " which surprised everyone",
    " again",
];

/// The 64 seed sentences the real-model centroids are computed from.
pub fn seed_texts() -> Vec<String> {
    SEEDS
        .iter()
        .flat_map(|seed| {
            SUFFIXES
                .iter()
                .map(move |suffix| format!("{seed}{suffix}."))
        })
        .collect()
}

/// The real model, or `None` (with the reason printed) when its assets are missing.
pub fn try_embedder() -> Option<FastembedEmbedder> {
    match FastembedEmbedder::load(&ModelAssets::from_env(), &SemanticProfile::minilm_l6_v2()) {
        Ok(embedder) => Some(embedder),
        Err(error) => {
            println!("real model unavailable ({error}); using deterministic random centroids");
            None
        }
    }
}

/// Centroids from the real model when given, else deterministic random ones; and their label.
pub fn centroids(embedder: Option<&FastembedEmbedder>) -> (Vec<Vec<f32>>, &'static str) {
    match embedder {
        Some(embedder) => {
            let texts = seed_texts();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors =
                checked_embeddings(embedder.embed(&refs).unwrap(), refs.len(), DIMENSIONS).unwrap();
            (vectors, "synthetic around real-model centroids")
        }
        None => {
            let mut rng = ChaCha8Rng::seed_from_u64(7);
            let vectors = (0..RANDOM_CENTROIDS)
                .map(|_| {
                    unit(
                        (0..DIMENSIONS)
                            .map(|_| rng.random_range(-1.0..1.0))
                            .collect(),
                    )
                })
                .collect();
            (
                vectors,
                "synthetic around RANDOM centroids (model assets missing)",
            )
        }
    }
}

pub fn unit(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    vector.iter_mut().for_each(|v| *v /= norm);
    vector
}

/// A unit vector near a random centroid.
pub fn around(centroids: &[Vec<f32>], rng: &mut ChaCha8Rng) -> Vec<f32> {
    let centroid = &centroids[rng.random_range(0..centroids.len())];
    unit(
        centroid
            .iter()
            .map(|value| {
                // Sum of uniforms: cheap and close enough to Gaussian noise for spreading points.
                let noise: f32 = (0..4).map(|_| rng.random_range(-1.0f32..1.0)).sum::<f32>() * 0.5;
                value + noise * NOISE
            })
            .collect(),
    )
}

/// The key of synthetic document `position`.
pub fn synthetic_key(position: usize) -> MemoryKey {
    MemoryKey {
        namespace: NamespaceAddress::parse(r#"[1,"bench",1,{"corpus":"synthetic"}]"#).unwrap(),
        id: DocumentId::new(format!("d{position:07}")).unwrap(),
    }
}

/// `size` one-chunk synthetic sources with vectors around `centroids`.
pub fn synthetic_sources(size: usize, centroids: &[Vec<f32>], seed: u64) -> Vec<SourceChunks> {
    keyed_sources(size, centroids, seed, synthetic_key)
}

/// [`synthetic_sources`] with source `position` keyed by `key_of(position)`.
pub fn keyed_sources(
    size: usize,
    centroids: &[Vec<f32>],
    seed: u64,
    key_of: impl Fn(usize) -> MemoryKey,
) -> Vec<SourceChunks> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let revision = Revision::new("r").unwrap();
    (0..size)
        .map(|position| {
            let key = key_of(position);
            let meta = ChunkMeta {
                source: Arc::new(SourceVersion {
                    key: key.clone(),
                    revision: revision.clone(),
                    generation: SourceGeneration::new(1),
                }),
                ordinal: 0,
                start: 0,
                end: 0,
                excerpt_digest: [0; 32],
            };
            (key, vec![(meta, around(centroids, &mut rng))])
        })
        .collect()
}

pub fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let position = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[position]
}

/// p50 and p99 of `latencies`, in milliseconds.
pub fn p50_p99(mut latencies: Vec<Duration>) -> (f64, f64) {
    latencies.sort();
    (
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
    )
}

/// The count in environment variable `variable`, or `default` when it is unset or not a number.
pub fn chunks_from(variable: &str, default: usize) -> usize {
    std::env::var(variable)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(default)
}
