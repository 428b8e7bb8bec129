//! The whole pipeline on a tiny corpus with the deterministic test embedder: every stage runs, no mode
//! returns a superseded or withdrawn fact, and direct recall finds every answerable fact first.

use eval::modes::Mode;
use eval::progress::Progress;
use eval::run::{RunOptions, run};
use semantic_index::DeterministicEmbedder;

#[test]
fn tiny_corpus_end_to_end() {
    let out = tempfile::tempdir().expect("temporary folder");
    let options = RunOptions {
        out: out.path().to_owned(),
        seed: 7,
        people: 6,
        sizes: vec![50, 200],
        tenant_sizes: vec![1_000],
        quick: true,
        lag_samples: 2,
        progress: Progress::hidden(),
        cross_encoder: None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let report = runtime
        .block_on(run(&options, "deterministic test embedder", || {
            Ok(DeterministicEmbedder::new(64))
        }))
        .expect("the pipeline runs");
    eval::report::write(&report, out.path()).expect("report written");

    assert_eq!(report.modes.len(), Mode::ALL.len());
    for mode in &report.modes {
        assert_eq!(mode.quality.contradictory, 0, "{mode:?}");
        assert_eq!(mode.errors, 0, "{mode:?}");
        assert!(mode.quality.answerable > 0, "{mode:?}");
    }
    let direct = &report.modes[0];
    assert_eq!(direct.mode, Mode::Direct);
    assert_eq!(direct.quality.hit_at_1, 1.0, "{direct:?}");
    assert_eq!(direct.quality.misses, 0);
    // Every state, correction and forget became one memory write.
    assert!(report.ingest.writes > 0 && report.ingest.writes < report.ingest.processed);
    assert!(report.corpus.withdrawn_queries + report.corpus.corrected_queries > 0);
    assert_eq!(report.lag.thread_record.samples, 2);
    assert_eq!(report.sweep.len(), 2);
    let [tenants] = report.tenants.as_slice() else {
        panic!("one multi-tenant point: {:?}", report.tenants);
    };
    assert_eq!((tenants.chunks, tenants.namespaces), (1_000, 10));
    for figure in [&tenants.exact, &tenants.hnsw, &tenants.lexical] {
        assert!(
            figure.namespace_isolation_ratio.is_finite() && figure.namespace_isolation_ratio > 0.0,
            "{tenants:?}"
        );
    }
    assert!(tenants.lexical_compared > 0, "{tenants:?}");
    assert!(
        !out.path().join("tenants").exists(),
        "the lexical stores are removed"
    );
    assert_eq!(report.preprocessing.len(), 2);
    for row in &report.preprocessing {
        assert_eq!(row.quality.contradictory, 0, "{row:?}");
    }
    assert_eq!(report.faults.len(), 8);
    for file in [
        "report.md",
        "report.json",
        "latency_vs_size.svg",
        "recall_by_mode.svg",
    ] {
        assert!(out.path().join(file).is_file(), "{file} written");
    }
}
