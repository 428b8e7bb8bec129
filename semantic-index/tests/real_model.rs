//! The real all-MiniLM-L6-v2 model on small data. Needs the assets from `scripts/fetch-assets.sh`; without
//! them these tests fail with the missing-asset error, which names that script.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use common::{FeedStore, access, key};
use memory_core::vectors::SourceGeneration;
use memory_sqlite::vectors::SqliteVectorStore;
use semantic_index::{
    EmbedError, Embedder, FastembedEmbedder, IndexKind, ModelAssets, QueryLimits, SemanticIndex,
    SemanticIndexConfig, SemanticProfile,
};

fn embedder() -> FastembedEmbedder {
    FastembedEmbedder::load(&ModelAssets::from_env(), &SemanticProfile::minilm_l6_v2())
        .unwrap_or_else(|error| panic!("{error}"))
}

fn cosine(left: &[f32], right: &[f32]) -> f32 {
    left.iter().zip(right).map(|(l, r)| l * r).sum()
}

const PAIRS: [(&str, &str, &str); 6] = [
    (
        "The cat is sleeping on the sofa.",
        "A kitten naps on the couch.",
        "Interest rates rose by half a percent.",
    ),
    (
        "How do I reset my password?",
        "I forgot my login credentials and need to change them.",
        "The recipe needs two cups of flour.",
    ),
    (
        "She moved to Berlin last spring.",
        "Last April she relocated to Germany's capital.",
        "The match ended in a goalless draw.",
    ),
    (
        "The meeting was postponed until Friday.",
        "We pushed the meeting back to the end of the week.",
        "Penguins live in the southern hemisphere.",
    ),
    (
        "My favourite food is spicy ramen.",
        "I love eating hot noodle soup more than anything.",
        "The server rack needs new cooling fans.",
    ),
    (
        "The car would not start this morning.",
        "This morning my vehicle's engine failed to turn over.",
        "He painted the fence a bright shade of blue.",
    ),
];

#[test]
fn vectors_are_normalized_with_the_profile_dimensions() {
    let embedder = embedder();
    let vectors = embedder
        .embed(&["hello world", "a much longer sentence about memory"])
        .unwrap();
    assert_eq!(vectors.len(), 2);
    for vector in &vectors {
        assert_eq!(vector.len(), 384);
        let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-3, "norm {norm}");
    }
}

#[test]
fn paraphrases_score_above_unrelated_text() {
    let embedder = embedder();
    for (text, paraphrase, unrelated) in PAIRS {
        let vectors = embedder.embed(&[text, paraphrase, unrelated]).unwrap();
        let close = cosine(&vectors[0], &vectors[1]);
        let far = cosine(&vectors[0], &vectors[2]);
        assert!(
            close > far + 0.1,
            "{text:?}: paraphrase {close} vs unrelated {far}"
        );
    }
}

#[test]
fn missing_assets_are_a_typed_error_naming_the_fetch_script() {
    let error = FastembedEmbedder::load(
        &ModelAssets::at("/nonexistent/semantic-assets"),
        &SemanticProfile::minilm_l6_v2(),
    )
    .unwrap_err();
    assert!(matches!(error, EmbedError::MissingAsset { .. }));
    assert!(
        error.to_string().contains("scripts/fetch-assets.sh"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paraphrase_queries_recall_their_document() {
    let directory = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap());
    let documents = FeedStore::default();
    let index = SemanticIndex::open(
        SemanticIndexConfig::new(SemanticProfile::minilm_l6_v2()),
        Arc::new(embedder()),
        store,
    )
    .await
    .unwrap();
    for (position, (text, _, unrelated)) in PAIRS.iter().enumerate() {
        for (suffix, body) in [("doc", text), ("noise", unrelated)] {
            let id = format!("{suffix}-{position}");
            documents.put(&id, body).await;
            index
                .refresh(
                    &documents,
                    &key(&id),
                    SourceGeneration::new(position as u64 * 2 + 1),
                )
                .await
                .unwrap();
        }
    }
    for kind in [IndexKind::Exact, IndexKind::Hnsw] {
        for (position, (_, paraphrase, _)) in PAIRS.iter().enumerate() {
            let result = index
                .query(
                    &documents,
                    &access(),
                    paraphrase,
                    QueryLimits::new(1_024, 3, 1_000, 0.0, 10_000, kind),
                )
                .await
                .unwrap();
            assert_eq!(
                result.hits[0].key.id.as_str(),
                format!("doc-{position}"),
                "{kind:?} {paraphrase:?}"
            );
        }
    }
}

#[test]
fn tokenizer_counter_counts_wordpiece_tokens_exactly() {
    use memory_core::tokens::TokenCounter;
    let counter = semantic_index::TokenizerCounter::from_assets(&ModelAssets::from_env())
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(counter.count(""), 0);
    assert_eq!(counter.count("hello world"), 2);
    let long = "memory ".repeat(600);
    assert_eq!(
        counter.count(&long),
        600,
        "no truncation at the model's input length"
    );
}
