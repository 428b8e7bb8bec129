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
        quick: true,
        lag_samples: 2,
        progress: Progress::hidden(),
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
