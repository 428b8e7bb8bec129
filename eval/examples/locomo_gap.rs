//! Scratch analysis (not part of the deliverable): where the via-worker hybrid loses against direct.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use eval::locomo::{data, run, worker};
use memory_cli::service::{Operation, RawArguments};
use memory_core::activity::{RecordBody, Sequence, ThreadLog};
use memory_sqlite::thread_log::SqliteThreadLog;
use remembering::extract::record_origin_id;
use remembering::statements::{SentenceKind, segment};
use serde_json::{Value, json};

fn args(conversation: &data::Conversation, question: &str, items: u32) -> Value {
    json!({
        "namespace": run::namespace(conversation),
        "scope": run::SCOPE,
        "query": question,
        "mode": "hybrid",
        "limits": {"max_items": items, "max_bytes": run::MAX_BYTES, "max_tokens": run::MAX_TOKENS, "timeout_ms": run::TIMEOUT_MS},
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let conversations = data::load(Path::new("../shared/data/locomo10.zip"))?;
    let dir = Path::new("eval-report/locomo");
    let (_d, direct) = run::open_service(&dir.join("locomo.sqlite"), true)?;
    let wpath = dir.join("locomo-via-worker.sqlite");
    let (_w, via) = run::open_service(&wpath, true)?;
    let log = SqliteThreadLog::open(&wpath)?;
    let mut origin: HashMap<String, (usize, String)> = HashMap::new();
    // Per turn: (kept sentences, dropped sentences) by the extractor's segmentation.
    let mut partial: HashMap<(usize, String), (usize, usize)> = HashMap::new();
    for (ci, c) in conversations.iter().enumerate() {
        for s in &c.sessions {
            let t = worker::thread_of(c, s.number)?;
            let records = log.read_page(&t, Sequence::ZERO, 10_000)?;
            assert_eq!(records.len(), s.turns.len());
            for (r, turn) in records.iter().zip(&s.turns) {
                origin.insert(record_origin_id(&r.digest), (ci, turn.dia_id.clone()));
                if let RecordBody::UserInput { text } = &r.record.body {
                    let sentences = segment(text);
                    let kept = sentences
                        .iter()
                        .filter(|s| s.kind == SentenceKind::Statement)
                        .count();
                    partial.insert((ci, turn.dia_id.clone()), (kept, sentences.len() - kept));
                }
            }
        }
    }
    let turns_of = |ci: usize, passage: &Value| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for a in passage["content"]["attributions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some((c, d)) = a["origin_id"].as_str().and_then(|o| origin.get(o))
                && *c == ci
                && !out.contains(d)
            {
                out.push(d.clone());
            }
        }
        out
    };
    let mut counts: BTreeMap<&str, f64> = BTreeMap::new();
    let mut n = 0.0;
    let mut examples: Vec<String> = Vec::new();
    for (ci, c) in conversations.iter().enumerate() {
        for q in c.scored_questions() {
            n += 1.0;
            let d = direct
                .execute(Operation::Recall, RawArguments::Json(args(c, &q.text, 10)))
                .await
                .map_err(|r| anyhow::anyhow!("{}", r.message()))?;
            let (dranked, _) = run::ranked_documents(&d, ci, &run::direct_turns);
            let w = via
                .execute(Operation::Recall, RawArguments::Json(args(c, &q.text, 30)))
                .await
                .map_err(|r| anyhow::anyhow!("{}", r.message()))?;
            let (_, wturns) = run::ranked_documents(&w, ci, &turns_of);
            let hit = |ids: &[String]| q.evidence.iter().any(|e| ids.contains(e));
            let dhit = hit(&dranked[..dranked.len().min(10)]);
            let top10: Vec<String> = wturns.iter().take(10).flatten().cloned().collect();
            let whit = hit(&top10);
            let mut distinct: Vec<String> = Vec::new();
            for t in wturns.iter().flatten() {
                if !distinct.contains(t) {
                    distinct.push(t.clone());
                }
            }
            let mut distinct10 = distinct.clone();
            distinct10.truncate(10);
            let top10_distinct = {
                let mut v = top10.clone();
                v.sort();
                v.dedup();
                v.len()
            };
            *counts
                .entry("distinct turns in top-10 docs (sum)")
                .or_default() += top10_distinct as f64;
            *counts.entry("direct hit@10").or_default() += f64::from(u8::from(dhit));
            *counts.entry("worker hit@10 (docs)").or_default() += f64::from(u8::from(whit));
            let whit_turns = hit(&distinct10);
            *counts
                .entry("worker hit@10 (first 10 distinct turns of 30 docs)")
                .or_default() += f64::from(u8::from(whit_turns));
            let all30: Vec<String> = wturns.iter().flatten().cloned().collect();
            let lost_all = q
                .evidence
                .iter()
                .all(|e| partial.get(&(ci, e.clone())).is_none_or(|p| p.0 == 0));
            let ev_partial = q.evidence.iter().any(|e| {
                partial
                    .get(&(ci, e.clone()))
                    .is_some_and(|p| p.0 > 0 && p.1 > 0)
            });
            if dhit && !whit {
                *counts.entry("direct hit, worker miss").or_default() += 1.0;
                if lost_all {
                    *counts.entry("  of which: all evidence lost").or_default() += 1.0;
                } else if hit(&all30) {
                    *counts
                        .entry("  of which: evidence at docs 11-30")
                        .or_default() += 1.0;
                    if whit_turns {
                        *counts
                            .entry("    ... and within the first 10 distinct turns")
                            .or_default() += 1.0;
                    }
                } else {
                    *counts
                        .entry("  of which: evidence not in top 30 docs")
                        .or_default() += 1.0;
                }
                if ev_partial {
                    *counts
                        .entry("  (evidence turn partly dropped)")
                        .or_default() += 1.0;
                }
                if examples.len() < 25 && !lost_all && !hit(&all30) {
                    examples.push(format!(
                        "{} {:?} | {} | top: {:?}",
                        c.id,
                        q.evidence,
                        q.text,
                        &wturns[..wturns.len().min(5)]
                    ));
                }
            }
            if !dhit && whit {
                *counts.entry("direct miss, worker hit").or_default() += 1.0;
            }
        }
    }
    for (k, v) in &counts {
        if k.starts_with("direct hit@") || k.starts_with("worker hit@") || k.starts_with("distinct")
        {
            println!("{k}: {:.3}", v / n);
        } else {
            println!("{k}: {v}");
        }
    }
    for e in examples {
        println!("{e}");
    }
    Ok(())
}
