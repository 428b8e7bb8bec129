//! HNSW against exact search on 10,000 real-model vectors: recall@10 must be at least 0.95 with the
//! shipped default parameters. A quality threshold, not a timing one. Needs the assets of
//! `scripts/fetch-assets.sh` (embedding 10,000 short sentences takes a few minutes on two cores).
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use memory_core::vectors::SourceGeneration;
use memory_core::{DocumentId, MemoryKey, NamespaceAddress, Revision};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use semantic_index::index::{ChunkMeta, SourceVersion};
use semantic_index::{
    Embedder, ExactIndex, FastembedEmbedder, HnswIndex, HnswParams, IndexBounds, ModelAssets,
    SearchRequest, SemanticProfile, VectorIndex,
};

const CORPUS: usize = 10_000;
const QUERIES: usize = 200;
const K: usize = 10;

const SUBJECTS: [&str; 24] = [
    "My sister",
    "The old fisherman",
    "Our neighbour",
    "A young doctor",
    "The project manager",
    "My grandfather",
    "The new intern",
    "A street musician",
    "The librarian",
    "Our landlord",
    "The pilot",
    "A tired student",
    "The chef",
    "My best friend",
    "The mayor",
    "A retired teacher",
    "The gardener",
    "Our dentist",
    "The bus driver",
    "A famous painter",
    "The night nurse",
    "My cousin",
    "The shop owner",
    "A software engineer",
];
const VERBS: [&str; 20] = [
    "bought",
    "repaired",
    "painted",
    "lost",
    "found",
    "sold",
    "borrowed",
    "cleaned",
    "photographed",
    "described",
    "forgot",
    "ordered",
    "returned",
    "measured",
    "hid",
    "carried",
    "delivered",
    "tested",
    "built",
    "ignored",
];
const OBJECTS: [&str; 24] = [
    "a red bicycle",
    "the kitchen table",
    "an old violin",
    "a box of letters",
    "the garden fence",
    "a pair of boots",
    "the broken laptop",
    "a bag of apples",
    "the wedding cake",
    "a wooden boat",
    "the office printer",
    "a winter coat",
    "the train tickets",
    "a stack of invoices",
    "the family car",
    "a blue umbrella",
    "the spare keys",
    "a jar of honey",
    "the ceiling lamp",
    "a set of maps",
    "the birthday present",
    "a chess board",
    "the water heater",
    "a leather wallet",
];
const PLACES: [&str; 16] = [
    "at the market",
    "near the harbour",
    "in the basement",
    "behind the station",
    "at the airport",
    "in the city centre",
    "by the river",
    "at the hospital",
    "in a small village",
    "at school",
    "in the mountains",
    "at the beach",
    "in the garage",
    "at the library",
    "on the rooftop",
    "in the park",
];
const TIMES: [&str; 12] = [
    "yesterday",
    "last winter",
    "this morning",
    "on Sunday",
    "two weeks ago",
    "after lunch",
    "during the storm",
    "before the holidays",
    "late at night",
    "in early spring",
    "last year",
    "at dawn",
];

fn sentence(rng: &mut ChaCha8Rng) -> String {
    let pick =
        |rng: &mut ChaCha8Rng, list: &[&str]| list[rng.random_range(0..list.len())].to_owned();
    let subject = pick(rng, &SUBJECTS);
    let verb = pick(rng, &VERBS);
    let object = pick(rng, &OBJECTS);
    let place = pick(rng, &PLACES);
    let time = pick(rng, &TIMES);
    match rng.random_range(0..3) {
        0 => format!("{subject} {verb} {object} {place} {time}."),
        1 => format!("{time}, {subject} {verb} {object} {place}."),
        _ => format!("{subject} {verb} {object} {time}, {place}."),
    }
}

fn sentences(count: usize, seed: u64, exclude: &HashSet<String>) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seen = exclude.clone();
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let text = sentence(&mut rng);
        if seen.insert(text.clone()) {
            out.push(text);
        }
    }
    out
}

fn meta(position: usize) -> (MemoryKey, ChunkMeta) {
    let key = MemoryKey {
        namespace: NamespaceAddress::parse(r#"[1,"recall",1,{"corpus":"synthetic"}]"#).unwrap(),
        id: DocumentId::new(format!("s{position:05}")).unwrap(),
    };
    let chunk = ChunkMeta {
        source: Arc::new(SourceVersion {
            key: key.clone(),
            revision: Revision::new("r").unwrap(),
            generation: SourceGeneration(1),
        }),
        ordinal: 0,
        start: 0,
        end: 0,
        excerpt_digest: [0; 32],
    };
    (key, chunk)
}

#[test]
fn hnsw_recall_at_10_is_at_least_095_on_10k_real_vectors() {
    let embedder =
        FastembedEmbedder::load(&ModelAssets::from_env(), &SemanticProfile::minilm_l6_v2())
            .unwrap_or_else(|error| panic!("{error}"));
    let corpus = sentences(CORPUS, 7, &HashSet::new());
    let queries = sentences(QUERIES, 8, &corpus.iter().cloned().collect());
    let refs: Vec<&str> = corpus.iter().map(String::as_str).collect();
    let vectors =
        semantic_index::checked_embeddings(embedder.embed(&refs).unwrap(), CORPUS, 384).unwrap();
    let query_refs: Vec<&str> = queries.iter().map(String::as_str).collect();
    let query_vectors =
        semantic_index::checked_embeddings(embedder.embed(&query_refs).unwrap(), QUERIES, 384)
            .unwrap();

    let bounds = IndexBounds::for_dimensions(384);
    let mut exact = ExactIndex::new(384, bounds).unwrap();
    let mut hnsw = HnswIndex::new(384, bounds, HnswParams::default()).unwrap();
    for (position, vector) in vectors.into_iter().enumerate() {
        let (key, chunk) = meta(position);
        exact
            .replace_source(&key, vec![(chunk.clone(), vector.clone())])
            .unwrap();
        hnsw.replace_source(&key, vec![(chunk, vector)]).unwrap();
    }
    let request = SearchRequest {
        limit: K,
        min_score: -1.0,
        max_scanned_chunks: CORPUS,
    };
    let mut found = 0usize;
    for query in &query_vectors {
        let truth: BTreeSet<MemoryKey> = exact
            .search(query, request)
            .unwrap()
            .hits
            .into_iter()
            .map(|hit| hit.chunk.source.key.clone())
            .collect();
        let approximate = hnsw.search(query, request).unwrap().hits;
        found += approximate
            .iter()
            .filter(|hit| truth.contains(&hit.chunk.source.key))
            .count();
    }
    let recall = found as f64 / (QUERIES * K) as f64;
    println!("hnsw recall@{K} over {QUERIES} queries on {CORPUS} vectors: {recall:.4}");
    assert!(recall >= 0.95, "recall@{K} = {recall:.4}");
}
