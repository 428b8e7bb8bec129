//! `memory hook prompt` wall time as an agent host sees it (process start to exit, the prompt's append
//! and a hybrid recall included), over `HOOK_BENCH_PROMPTS` prompts (default 100) on a store of
//! `HOOK_BENCH_DOCUMENTS` documents (default 10,000): one-shot, and through a running
//! `memory serve --http` found by its discovery file. Prints p50/p95 of each; asserts no time.
//!
//! Run: `cargo build --release -p memory-cli --bin memory && cargo bench -p integration-tests --bench
//! hook`.

#![allow(clippy::unwrap_used, missing_docs)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use integration_tests::hook::{claude_input, run_hook};
use integration_tests::product::{Fixture, memory_binary};
use serde_json::{Value, json};

const WORDS: [&str; 16] = [
    "garden", "river", "coffee", "violin", "mountain", "letter", "market", "winter", "kitchen",
    "bicycle", "library", "harbor", "festival", "lantern", "meadow", "castle",
];

fn sentence(n: usize) -> String {
    let a = WORDS[n % WORDS.len()];
    let b = WORDS[(n / WORDS.len()) % WORDS.len()];
    let c = WORDS[(n / 256) % WORDS.len()];
    format!("Entry {n}: we talked about the {a} near the {b} and a {c} story.")
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let index = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

/// Whose memory the hook recalls (`--user`): the hook and the server both resolve it to the user's own
/// namespace, with the scope `agent`, where the documents are written.
const USER: &str = "bench";

/// A document of the user's own namespace, where the hook recalls from.
fn put(n: usize) -> Value {
    json!({
        "namespace": {"name": "memory.user", "version": 1, "identity": {"user": USER}},
        "id": format!("d{n}"), "operation_id": format!("op-{n}"), "expected_revision": null,
        "locator": format!("bench:{n}"), "scopes": ["agent"],
        "content": {"text": sentence(n), "attributions": [], "metadata": {},
            "recorded_at": 1, "extracted_at": 1}
    })
}

fn measure(fixture: &Fixture, label: &str, prompts: usize, offset: usize) {
    let transcript = fixture.dir.path().join("bench.jsonl");
    let mut samples = Vec::with_capacity(prompts);
    let mut answered = 0;
    for n in 0..prompts {
        let word = WORDS[n % WORDS.len()];
        let text = format!(
            "prompt {}: what about the {word} near the river?",
            n + offset
        );
        let input = claude_input("user-prompt-submit.json", "bench", &transcript, Some(&text));
        let started = Instant::now();
        let outcome = run_hook(
            fixture,
            &["prompt", "--timeout-ms", "30000", "--user", USER],
            &input,
            &[],
        );
        samples.push(started.elapsed().as_secs_f64() * 1_000.0);
        assert_eq!(outcome.code, 0);
        if outcome.stdout.contains("additionalContext") {
            answered += 1;
        } else {
            eprintln!(
                "{label}: prompt {n} answered nothing: {}",
                outcome.stderr.trim()
            );
        }
    }
    // A prompt that recalls nothing is timed without its search: the figure would be of another path.
    assert_eq!(
        answered, prompts,
        "{label}: only {answered} of {prompts} prompts recalled a passage"
    );
    samples.sort_by(f64::total_cmp);
    println!(
        "hook prompt {label}: n={prompts} answered={answered} p50={:.1} ms p95={:.1} ms max={:.1} ms",
        percentile(&samples, 0.50),
        percentile(&samples, 0.95),
        samples[samples.len() - 1]
    );
}

fn start_server(fixture: &Fixture) -> Child {
    let child = Command::new(memory_binary())
        .env_remove("MEMORY_DB")
        .arg("--db")
        .arg(&fixture.db)
        .args(["serve", "--http", "127.0.0.1:0", "--user", USER])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut discovery = fixture.db.as_os_str().to_owned();
    discovery.push(".serve.json");
    let started = Instant::now();
    while !std::path::Path::new(&discovery).exists() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the server never published its address"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn main() {
    let documents = env_number("HOOK_BENCH_DOCUMENTS", 10_000);
    let prompts = env_number("HOOK_BENCH_PROMPTS", 100);
    let fixture = Fixture::new();
    let lines: Vec<Value> = (0..documents).map(put).collect();
    fixture.import(&lines).success();
    let started = Instant::now();
    fixture.call("sync", &json!({})).success();
    eprintln!(
        "{documents} documents synced in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    measure(&fixture, "one-shot", prompts, 0);
    let mut server = start_server(&fixture);
    // Warm the server once (its first recall loads nothing more, but the page cache may).
    measure(&fixture, "warm-up through the server", 3, prompts);
    measure(&fixture, "through the server", prompts, prompts + 3);
    let _ = server.kill();
    let _ = server.wait();
}
