//! `memory-eval corrections` on a small corpus: the corpus goes through the thread log and the
//! worker, once without links and once with the model's, and the figures say what recall cited.

use eval::corpus::{CorpusShape, generate};
use eval::corrections::{MODES, cases, measure};
use eval::progress::Progress;
use memory_service::worker::CorrectionLinking;
use semantic_index::{FastembedEmbedder, ModelAssets, SemanticProfile};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_links_worded_corrections_and_recall_cites_them_first() {
    let corpus = generate(CorpusShape {
        people: 12,
        ..CorpusShape::default()
    });
    let cases = cases(&corpus);
    assert!(!cases.is_empty());
    let directory = tempfile::tempdir().expect("temporary directory");
    let unlinked = measure(
        &directory.path().join("unlinked.sqlite"),
        &corpus,
        &cases,
        CorrectionLinking::Off,
        &Progress::hidden(),
    )
    .await
    .expect("the unlinked run");
    let model = FastembedEmbedder::load(&ModelAssets::from_env(), &SemanticProfile::minilm_l6_v2())
        .expect("the model (scripts/fetch-assets.sh)");
    let linked = measure(
        &directory.path().join("model.sqlite"),
        &corpus,
        &cases,
        CorrectionLinking::Model(std::sync::Arc::new(model)),
        &Progress::hidden(),
    )
    .await
    .expect("the linked run");
    assert_eq!((unlinked.linked, unlinked.refused), (0, 0));
    assert!(linked.linked > 0, "{linked:?}");
    assert_eq!(linked.wrong_links, 0, "{linked:?}");
    for mode in MODES {
        let total: usize = linked.cited[mode].values().map(|cited| cited.cases).sum();
        assert_eq!(total, cases.len(), "every case is recalled in {mode}");
        assert_eq!(linked.contradictory.get(mode).copied().unwrap_or(0), 0);
        // Links only ever move a correction ahead: never fewer cases cited first.
        let first = |figures: &eval::corrections::VariantFigures| -> usize {
            figures.cited[mode].values().map(|cited| cited.first).sum()
        };
        assert!(
            first(&linked) >= first(&unlinked),
            "{mode}: {linked:?} {unlinked:?}"
        );
    }
}
