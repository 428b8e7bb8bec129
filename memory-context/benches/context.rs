//! The context layer over a real SQLite thread log: a cold fold against an incremental one, and a
//! ~100,000-token thread assembled into a 30,000-token budget.
//!
//! `cargo bench -p memory-context --bench context` runs the full scale (a 10,000-record thread) and
//! prints one JSON object on stdout (`fold_cold_ms`, `fold_incremental_ms`, `fold_incremental_ratio`,
//! `assemble_100k_into_30k_cold_ms`, `assemble_100k_into_30k_warm_ms`, `records`, `thread_tokens`,
//! and for a 100,000-record run of tool calls whose window rolls over by itself:
//! `checkpoint_records`, `cold_replay_ms` (a fresh process without checkpoints, folding from record 1:
//! the code before checkpoints), `cold_checkpoint_ms` (a fresh process starting from the thread's
//! checkpoint), `warm_tail_ms` (the cached state after the same ten new records),
//! `cold_checkpoint_over_warm`, `cold_replay_over_warm`), then readable lines on stderr. With `--test` among the arguments, or without `--bench` (as
//! `cargo test --benches` runs it), it runs at a tiny scale, as a smoke test. `CONTEXT_BENCH_RECORDS`
//! overrides the record count.
//!
//! The SQLite file lives in `/dev/shm` when there is one, so building the thread does not wait on
//! thousands of `fsync`s (the log syncs every append); the reads measured are served from memory
//! either way.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memory_context::{Context, TurnOptions};
use memory_core::activity::{NewRecord, RecordBody, ThreadId, ThreadLog};
use memory_sqlite::thread_log::SqliteThreadLog;
use serde_json::json;

const BUDGET: u64 = 30_000;
const ASSEMBLE_THREAD_TOKENS: u64 = 100_000;

struct Scale {
    records: usize,
    checkpoint_records: usize,
    assemble_tokens: u64,
    cold_reps: usize,
    incremental_reps: usize,
    assemble_reps: usize,
}

impl Scale {
    fn from_args() -> Self {
        let args: Vec<String> = std::env::args().collect();
        let quick =
            args.iter().any(|arg| arg == "--test") || !args.iter().any(|arg| arg == "--bench");
        let mut scale = if quick {
            Self {
                records: 300,
                checkpoint_records: 3_000,
                assemble_tokens: 5_000,
                cold_reps: 3,
                incremental_reps: 5,
                assemble_reps: 3,
            }
        } else {
            Self {
                records: 10_000,
                checkpoint_records: 100_000,
                assemble_tokens: ASSEMBLE_THREAD_TOKENS,
                cold_reps: 15,
                incremental_reps: 51,
                assemble_reps: 21,
            }
        };
        if let Some(records) = std::env::var("CONTEXT_BENCH_RECORDS")
            .ok()
            .and_then(|value| value.parse().ok())
        {
            scale.records = records;
        }
        scale
    }
}

/// A small deterministic generator (xorshift), so every run builds the same thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn between(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() % (high - low) as u64) as usize
    }
}

fn new_record(speaker: &str, body: RecordBody) -> NewRecord {
    NewRecord {
        occurred_at: Some(1_700_000_000_000),
        speaker: speaker.to_owned(),
        observers: Vec::new(),
        body,
        opaque_cursor: None,
    }
}

const WORDS: &[&str] = &[
    "flight",
    "lisbon",
    "booking",
    "confirmed",
    "seat",
    "window",
    "hotel",
    "the",
    "of",
    "and",
    "price",
    "euro",
    "departure",
    "arrival",
    "gate",
    "terminal",
    "luggage",
    "reference",
];

fn words(rng: &mut Rng, bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 16);
    while text.len() < bytes {
        text.push_str(WORDS[rng.next() as usize % WORDS.len()]);
        text.push(' ');
    }
    text
}

/// Appends one turn (a prompt, one or two tool steps with outputs of a few hundred bytes to a few KiB,
/// an answer) and answers the records it appended.
fn append_turn(log: &dyn ThreadLog, thread: &ThreadId, rng: &mut Rng, turn: usize) -> usize {
    let append = |record| {
        log.append(thread, record).expect("append");
    };
    let prompt = {
        let bytes = rng.between(40, 300);
        words(rng, bytes)
    };
    append(new_record(
        "ana",
        RecordBody::UserInput {
            text: format!("turn {turn}: {prompt}"),
        },
    ));
    let steps = rng.between(1, 3);
    for step in 0..steps {
        let call_id = format!("call-{turn}-{step}");
        append(new_record(
            "assistant",
            RecordBody::ToolCall {
                call_id: call_id.clone(),
                name: "search".to_owned(),
                arguments: json!({ "query": words(rng, 40) }),
            },
        ));
        let output = {
            let bytes = rng.between(300, 4_000);
            words(rng, bytes)
        };
        append(new_record(
            "tool",
            RecordBody::ToolResult {
                call_id,
                output: json!(output),
                is_error: false,
            },
        ));
    }
    let answer = {
        let bytes = rng.between(100, 800);
        words(rng, bytes)
    };
    append(new_record(
        "assistant",
        RecordBody::AssistantMessage { text: answer },
    ));
    2 + 2 * steps
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort_unstable();
    samples[samples.len() / 2].as_secs_f64() * 1_000.0
}

fn time<T>(run: impl FnOnce() -> T) -> (Duration, T) {
    let started = Instant::now();
    let answer = run();
    (started.elapsed(), answer)
}

fn open_log(directory: &Path) -> Arc<SqliteThreadLog> {
    Arc::new(SqliteThreadLog::open(&directory.join("context.sqlite")).expect("open the thread log"))
}

fn main() {
    let scale = Scale::from_args();
    let directory = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm")
    } else {
        tempfile::tempdir()
    }
    .expect("a temporary directory");
    let log = open_log(directory.path());
    let dyn_log: Arc<dyn ThreadLog> = log.clone();
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);

    // (a) and (b): a thread of `records` records.
    let fold_thread = ThreadId::new("fold-thread").expect("thread id");
    let (built, ()) = time(|| {
        let mut records = 0;
        let mut turn = 0;
        while records < scale.records {
            records += append_turn(&*log, &fold_thread, &mut rng, turn);
            turn += 1;
        }
    });
    let records = log.inspect_tail(&fold_thread).expect("tail").get();

    let mut cold = Vec::with_capacity(scale.cold_reps);
    let mut cold_view = None;
    for _ in 0..scale.cold_reps {
        // From record 1, as the figure has always been measured; (d) measures checkpoints.
        let context = Context::new(Arc::clone(&dyn_log)).checkpointing(None);
        let (elapsed, view) = time(|| context.view(&fold_thread, BUDGET).expect("view"));
        cold.push(elapsed);
        cold_view = Some(view);
    }
    let cold_view = cold_view.expect("at least one repetition");

    let warm = Context::new(Arc::clone(&dyn_log));
    warm.view(&fold_thread, BUDGET).expect("view");
    let mut incremental = Vec::with_capacity(scale.incremental_reps);
    for rep in 0..scale.incremental_reps {
        let body = if rep.is_multiple_of(2) {
            RecordBody::UserInput {
                text: format!("one more question {rep}"),
            }
        } else {
            RecordBody::AssistantMessage {
                text: format!("one more answer {rep}"),
            }
        };
        log.append(&fold_thread, new_record("ana", body))
            .expect("append");
        let (elapsed, view) = time(|| warm.view(&fold_thread, BUDGET).expect("view"));
        assert!(view.view.tokens <= BUDGET || view.view.over_budget);
        incremental.push(elapsed);
    }
    let fold_cold_ms = median(cold);
    let fold_incremental_ms = median(incremental);

    // (c): a thread of about 100,000 tokens assembled into 30,000.
    let assemble_thread = ThreadId::new("assemble-thread").expect("thread id");
    let counting = Context::new(Arc::clone(&dyn_log));
    let mut turn = 0;
    let thread_tokens = loop {
        append_turn(&*log, &assemble_thread, &mut rng, turn);
        turn += 1;
        let tokens = counting
            .view(&assemble_thread, memory_context::view::MAX_BUDGET_TOKENS)
            .expect("view")
            .view
            .tokens;
        if tokens >= scale.assemble_tokens {
            break tokens;
        }
    };
    let load = |query: &str, remaining: u64| -> Result<(String, u64), String> {
        assert!(remaining > 0);
        Ok((
            format!("[memory:1] Ana prefers window seats. (recalled for: {query:.40})"),
            1,
        ))
    };
    let append_prompt = |rep: usize| {
        log.append(
            &assemble_thread,
            new_record(
                "ana",
                RecordBody::UserInput {
                    text: format!("and what about leg {rep}?"),
                },
            ),
        )
        .expect("append");
    };
    let mut assemble_cold = Vec::with_capacity(scale.assemble_reps);
    let mut assembled = None;
    for rep in 0..scale.assemble_reps {
        append_prompt(rep);
        let context = Context::new(Arc::clone(&dyn_log));
        let (elapsed, answer) = time(|| {
            context
                .assemble(&assemble_thread, BUDGET, None, load)
                .expect("assembled")
        });
        assemble_cold.push(elapsed);
        assembled = Some(answer);
    }
    let assembled = assembled.expect("at least one repetition");
    let warm_assembler = Context::new(Arc::clone(&dyn_log));
    warm_assembler
        .assemble(&assemble_thread, BUDGET, None, load)
        .expect("assembled");
    let mut assemble_warm = Vec::with_capacity(scale.assemble_reps);
    for rep in 0..scale.assemble_reps {
        append_prompt(scale.assemble_reps + rep);
        let (elapsed, answer) = time(|| {
            warm_assembler
                .assemble(&assemble_thread, BUDGET, None, load)
                .expect("assembled")
        });
        assert!(
            answer.memory.as_ref().is_some_and(|memory| !memory.reused),
            "a new turn loads its memory"
        );
        assemble_warm.push(elapsed);
    }
    let assemble_cold_ms = median(assemble_cold);
    let assemble_warm_ms = median(assemble_warm);

    // (d): a 100,000-record run (one prompt per 500 tool calls), assembled every 200 records with the
    // automatic rollover on, as a host does; then cold against warm reads of the same tail.
    let run_thread = ThreadId::new("checkpoint-thread").expect("thread id");
    let writer = Context::new(Arc::clone(&dyn_log));
    let (built_run, ()) = time(|| {
        for index in 0..scale.checkpoint_records / 2 {
            if index % 500 == 0 {
                log.append(
                    &run_thread,
                    new_record(
                        "ana",
                        RecordBody::UserInput {
                            text: format!("run {index}: fix every failing test"),
                        },
                    ),
                )
                .expect("append");
            }
            let call_id = format!("call-{index}");
            log.append(
                &run_thread,
                new_record(
                    "assistant",
                    RecordBody::ToolCall {
                        call_id: call_id.clone(),
                        name: "run_tests".to_owned(),
                        arguments: json!({ "shard": index % 16 }),
                    },
                ),
            )
            .expect("append");
            let output = {
                let bytes = rng.between(200, 2_000);
                words(&mut rng, bytes)
            };
            log.append(
                &run_thread,
                new_record(
                    "tool",
                    RecordBody::ToolResult {
                        call_id,
                        output: json!(output),
                        is_error: false,
                    },
                ),
            )
            .expect("append");
            if index % 100 == 99 {
                writer
                    .prepare_turn_with(
                        &run_thread,
                        BUDGET,
                        TurnOptions {
                            auto_rollover: true,
                            ..TurnOptions::default()
                        },
                    )
                    .expect("turn");
            }
        }
    });
    let run_records = log.inspect_tail(&run_thread).expect("tail").get();
    let append_tail = |rep: usize| {
        for offset in 0..10 {
            log.append(
                &run_thread,
                new_record(
                    "ana",
                    RecordBody::AssistantMessage {
                        text: format!("note {rep}.{offset}"),
                    },
                ),
            )
            .expect("append");
        }
    };
    let (mut cold_replay, mut cold_checkpoint, mut warm_tail) =
        (Vec::new(), Vec::new(), Vec::new());
    writer.view(&run_thread, BUDGET).expect("view");
    for rep in 0..scale.cold_reps {
        append_tail(rep);
        let replaying = Context::new(Arc::clone(&dyn_log)).checkpointing(None);
        let (elapsed, replayed) = time(|| replaying.view(&run_thread, BUDGET).expect("view"));
        cold_replay.push(elapsed);
        let restarted = Context::new(Arc::clone(&dyn_log));
        let (elapsed, restored) = time(|| restarted.view(&run_thread, BUDGET).expect("view"));
        cold_checkpoint.push(elapsed);
        assert_eq!(
            restarted.fold_stats().checkpoint_restores,
            1,
            "a checkpoint was used"
        );
        let (elapsed, warmed) = time(|| writer.view(&run_thread, BUDGET).expect("view"));
        warm_tail.push(elapsed);
        assert_eq!(
            restored.state, replayed.state,
            "the checkpoint is what the log says"
        );
        assert_eq!(warmed.state, replayed.state);
    }
    let cold_replay_ms = median(cold_replay);
    let cold_checkpoint_ms = median(cold_checkpoint);
    let warm_tail_ms = median(warm_tail);
    let windows = writer
        .read(&run_thread)
        .expect("read")
        .state
        .window_number();

    let figures = json!({
        "fold_cold_ms": fold_cold_ms,
        "fold_incremental_ms": fold_incremental_ms,
        "fold_incremental_ratio": fold_incremental_ms / fold_cold_ms,
        "assemble_100k_into_30k_cold_ms": assemble_cold_ms,
        "assemble_100k_into_30k_warm_ms": assemble_warm_ms,
        "records": records,
        "thread_tokens": thread_tokens,
        "checkpoint_records": run_records,
        "cold_replay_ms": cold_replay_ms,
        "cold_checkpoint_ms": cold_checkpoint_ms,
        "warm_tail_ms": warm_tail_ms,
        "cold_checkpoint_over_warm": cold_checkpoint_ms / warm_tail_ms,
        "cold_replay_over_warm": cold_replay_ms / warm_tail_ms,
    });
    println!("{figures}");
    eprintln!(
        "built a {records}-record thread in {:.1} s ({} segments; the {BUDGET}-token view shows {} \
         tokens, {} segments dropped, {} elided)",
        built.as_secs_f64(),
        cold_view.state.segments.len(),
        cold_view.view.tokens,
        cold_view.view.dropped.len(),
        cold_view.view.elided.len(),
    );
    eprintln!(
        "fold + view, cold (fresh context): {fold_cold_ms:.3} ms (median of {})",
        scale.cold_reps
    );
    eprintln!(
        "fold + view after one append (warm): {fold_incremental_ms:.3} ms (median of {}); ratio {:.4}",
        scale.incremental_reps,
        fold_incremental_ms / fold_cold_ms
    );
    eprintln!(
        "assemble a {thread_tokens}-token thread into {BUDGET}: cold {assemble_cold_ms:.3} ms, warm \
         after one append {assemble_warm_ms:.3} ms (p50 of {}; {} tokens assembled, {} messages)",
        scale.assemble_reps,
        assembled.tokens,
        assembled.messages.len(),
    );
    eprintln!(
        "a {run_records}-record run built in {:.1} s ({windows} windows): after ten more records, cold \
         from record 1 {cold_replay_ms:.3} ms, cold from the checkpoint {cold_checkpoint_ms:.3} ms, \
         warm {warm_tail_ms:.3} ms (medians of {}): cold/warm {:.2} with checkpoints, {:.1} without",
        built_run.as_secs_f64(),
        scale.cold_reps,
        cold_checkpoint_ms / warm_tail_ms,
        cold_replay_ms / warm_tail_ms,
    );
}
