//! Scratch analysis (not part of the deliverable): LoCoMo hybrid recall with documents cut as the
//! extractor cuts them, written through `memory import`'s code in turn order, to separate the cost
//! of sentence granularity from the cost of dropped sentences.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;

use eval::locomo::{data, run};
use memory_cli::import::{ImportObserver, LineRefusal, import};
use memory_cli::service::{Operation, RawArguments};
use remembering::statements::{SentenceKind, segment};
use serde_json::{Value, json};

struct Quiet;
impl ImportObserver for Quiet {
    fn advanced(&mut self, _bytes: u64) {}
    fn refused(&mut self, _refusal: LineRefusal) {
        panic!("refused");
    }
}

#[derive(Clone, Copy, Debug)]
enum Variant {
    SentencesAll,
    TurnsKeptOnly,
    SentencesKeptOnly,
}

fn lines(conversations: &[data::Conversation], variant: Variant) -> Vec<u8> {
    let mut out = Vec::new();
    for c in conversations {
        let namespace = run::namespace(c);
        for (session, turn) in c.turns() {
            let sentences = segment(&turn.text);
            let pieces: Vec<String> = match variant {
                Variant::SentencesAll => sentences
                    .iter()
                    .map(|s| s.text(&turn.text).to_owned())
                    .collect(),
                Variant::SentencesKeptOnly => sentences
                    .iter()
                    .filter(|s| s.kind == SentenceKind::Statement)
                    .map(|s| s.text(&turn.text).to_owned())
                    .collect(),
                Variant::TurnsKeptOnly => {
                    let kept: Vec<&str> = sentences
                        .iter()
                        .filter(|s| s.kind == SentenceKind::Statement)
                        .map(|s| s.text(&turn.text))
                        .collect();
                    if kept.is_empty() {
                        Vec::new()
                    } else {
                        vec![kept.join(" ")]
                    }
                }
            };
            for (k, text) in pieces.iter().enumerate() {
                let id = format!("{}|{k}", turn.dia_id);
                let put = json!({
                    "namespace": namespace,
                    "id": id,
                    "operation_id": format!("abl-{}-{id}", c.id),
                    "expected_revision": null,
                    "locator": id,
                    "scopes": [run::SCOPE],
                    "content": {
                        "text": text,
                        "attributions": [{
                            "origin_id": id, "speaker": turn.speaker, "observers": [],
                            "locator": id, "activity_at": session.activity_at,
                            "interpretation": "stated",
                        }],
                        "metadata": {},
                        "recorded_at": session.activity_at.unwrap_or(0),
                        "extracted_at": session.activity_at.unwrap_or(0),
                    },
                });
                serde_json::to_writer(&mut out, &put).unwrap();
                out.push(b'\n');
            }
        }
    }
    out
}

fn turn_of(_c: usize, passage: &Value) -> Vec<String> {
    passage["source"]["id"]
        .as_str()
        .and_then(|id| id.split('|').next())
        .map(|id| vec![id.to_owned()])
        .unwrap_or_default()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let conversations = data::load(Path::new("../shared/data/locomo10.zip"))?;
    for variant in [
        Variant::SentencesAll,
        Variant::TurnsKeptOnly,
        Variant::SentencesKeptOnly,
    ] {
        let path = std::path::PathBuf::from(format!("/tmp/ablation-{variant:?}.sqlite"));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let (store, service) = run::open_service(&path, true)?;
        let summary = import(
            lines(&conversations, variant).as_slice(),
            store.as_ref(),
            &mut Quiet,
        )
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        service
            .execute(Operation::Sync, RawArguments::Json(json!({})))
            .await
            .map_err(|r| anyhow::anyhow!("{}", r.message()))?;
        let progress = eval::progress::Progress::hidden();
        let answers = run::recall_all_judged(
            &service,
            &conversations,
            &["lexical", "hybrid"],
            &progress,
            &turn_of,
        )
        .await?;
        for (mode, answers) in answers {
            let report = eval::locomo::report::mode_report(mode, &answers);
            println!(
                "{variant:?} docs={} {mode}: hit@5 {:.3} hit@10 {:.3} share@10 {:.3}",
                summary.written, report.all.hit_at_5, report.all.hit_at_10, report.all.share_at_10
            );
        }
    }
    Ok(())
}
