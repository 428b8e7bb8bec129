//! The context layer through the built binaries, on a long real conversation: LoCoMo's longest
//! conversation (by turns) made into one thread, one record per turn (the speaker of the last turn as
//! the user, the other as the assistant, stamped with the session dates), a system message first, and
//! deterministic tool steps: after every 7th turn the assistant calls a `lookup` tool whose result (a
//! few KiB) follows at once or, for every third call, after the next turn; one call near the end gets
//! no result. The thread is appended through one `memory serve` (stdio MCP, `memory_thread_append`).
//!
//! - `memory context` (one-shot) keeps a budget far below the thread's size: the system message first,
//!   the current prompt last, every tool call followed by its tool message; bad arguments are refused.
//! - `memory_compact` over MCP: refused without measured tokens, a plan without a summary, a summary
//!   not smaller refused and recorded, a smaller one folds; the view then shows the frame and the
//!   summary, the folded records stay readable and searchable, and the log is never edited.
//! - The memory block of a turn: recalled from the thread's destination, last in the messages, reused
//!   by a retried turn, never written into the log.
//! - `memory hook prompt --format json --context-budget` prints the assembled context and appends the
//!   prompt.
//!
//! The dataset is read from `../shared/data/locomo10.zip` beside the repository (where CI has it).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use integration_tests::hook::run_hook;
use integration_tests::product::{Fixture, McpClient, Outcome};
use serde_json::{Value, json};

const THREAD: &str = "locomo-longest";
/// The user whose per-user namespace the thread is bound to (the first append's destination).
const OWNER: &str = "locomo-owner";
const SYSTEM: &str = "You are a friendly conversation partner. Keep answers short and warm.";
/// Turns between two `lookup` calls.
const CALL_EVERY: usize = 7;
/// Budget of the one-shot view: far below the thread's size.
const BUDGET: u64 = 30_000;
/// A budget the whole thread fits in.
const WHOLE: u64 = 100_000_000;

fn archive() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/locomo10.zip");
    assert!(
        path.is_file(),
        "{} is missing: the context product test reads LoCoMo from `../shared/data/locomo10.zip` \
         beside the repository",
        path.display()
    );
    path
}

/// The thread as appended: every record's arguments, and what the tests look for in it.
#[derive(Debug)]
struct Thread {
    /// The user's display name (the speaker of the conversation's last turn).
    user: String,
    /// The text of the last record, the current prompt.
    last_prompt: String,
    /// Records appended.
    records: u64,
    /// Sequences and texts of the conversation's turns.
    turns: Vec<(u64, String)>,
    /// The call left without a result.
    dangling_call: String,
    /// Calls whose result arrived after another record.
    delayed_calls: Vec<String>,
}

fn lookup_output(call: usize, topic: &str) -> String {
    let mut output = format!("lookup #{call} for {topic:?}:\n");
    let mut line = 0;
    while output.len() < 3_000 {
        output.push_str(&format!(
            "result {call}.{line}: archived note {line} about the topic, ranked {rank} of 40, \
             source shelf {shelf}\n",
            rank = (call * 7 + line * 3) % 40 + 1,
            shelf = (call + line) % 13,
        ));
        line += 1;
    }
    output
}

/// The records of the thread, in order: LoCoMo's longest conversation and the synthetic tool steps.
fn records() -> (Vec<Value>, String, String, usize) {
    let conversations = eval::locomo::data::load(&archive()).expect("LoCoMo loads");
    let conversation = conversations
        .iter()
        .max_by_key(|conversation| conversation.turns().count())
        .expect("a conversation");
    let turns: Vec<_> = conversation.turns().collect();
    let count = turns.len();
    assert!(count > 600, "the longest conversation has {count} turns");
    let user = turns.last().expect("a last turn").1.speaker.clone();
    let body = |text: &str, speaker: &str| {
        if speaker == user {
            json!({"kind": "user_input", "text": text})
        } else {
            json!({"kind": "assistant_message", "text": text})
        }
    };
    let mut out =
        vec![json!({"speaker": "host", "body": {"kind": "system_message", "text": SYSTEM}})];
    let mut pending: Option<Value> = None;
    let mut calls = 0usize;
    let mut index_in_session = 0i64;
    let mut session_number = 0;
    for (index, (session, turn)) in turns.iter().enumerate() {
        if session.number != session_number {
            session_number = session.number;
            index_in_session = 0;
        }
        let at = session.activity_at.map(|at| at + index_in_session * 60_000);
        index_in_session += 1;
        out.push(json!({
            "occurred_at": at,
            "speaker": turn.speaker,
            "body": body(&turn.text, &turn.speaker),
        }));
        if let Some(result) = pending.take() {
            out.push(result);
        }
        if index % CALL_EVERY == CALL_EVERY - 1 && index + 8 < count {
            let call_id = format!("call-{calls}");
            let topic: String = turn
                .text
                .split_whitespace()
                .take(4)
                .collect::<Vec<_>>()
                .join(" ");
            out.push(json!({
                "occurred_at": at,
                "speaker": "assistant",
                "body": {"kind": "tool_call", "call_id": call_id, "name": "lookup",
                         "arguments": {"query": topic, "call": calls}},
            }));
            let result = json!({
                "occurred_at": at,
                "speaker": "lookup",
                "body": {"kind": "tool_result", "call_id": call_id,
                         "output": lookup_output(calls, &topic), "is_error": false},
            });
            if calls % 3 == 1 {
                pending = Some(result);
            } else {
                out.push(result);
            }
            calls += 1;
        }
        if index + 4 == count {
            out.push(json!({
                "occurred_at": at,
                "speaker": "assistant",
                "body": {"kind": "tool_call", "call_id": "call-dangling", "name": "lookup",
                         "arguments": {"query": "still waiting"}},
            }));
        }
    }
    assert!(pending.is_none());
    let last = turns.last().expect("a last turn").1.text.clone();
    (out, user, last, count)
}

/// Appends the thread through `client` (one server, one call per record).
async fn append_thread(client: &McpClient) -> Thread {
    let (records, user, last_prompt, _) = records();
    let mut turns = Vec::new();
    let mut delayed_calls = Vec::new();
    let mut previous_kind = String::new();
    for (index, record) in records.iter().enumerate() {
        let answer = client
            .success(
                "memory_thread_append",
                json!({"thread": THREAD, "record": record, "user": OWNER}),
            )
            .await;
        let sequence = answer["sequence"].as_u64().expect("a sequence");
        assert_eq!(sequence, index as u64 + 1);
        let kind = record["body"]["kind"].as_str().expect("a kind").to_owned();
        if kind == "user_input" || kind == "assistant_message" {
            turns.push((
                sequence,
                record["body"]["text"].as_str().expect("text").to_owned(),
            ));
        }
        if kind == "tool_result" && previous_kind != "tool_call" {
            delayed_calls.push(record["body"]["call_id"].as_str().expect("id").to_owned());
        }
        previous_kind = kind;
    }
    assert!(!delayed_calls.is_empty());
    Thread {
        user,
        last_prompt,
        records: records.len() as u64,
        turns,
        dangling_call: "call-dangling".to_owned(),
        delayed_calls,
    }
}

/// A fixture holding the whole thread, appended through one `memory serve`; answers the server.
async fn fixture_with_thread() -> (Fixture, McpClient, Thread) {
    let fixture = Fixture::new();
    let client = fixture.serve().await;
    let thread = append_thread(&client).await;
    (fixture, client, thread)
}

/// Asserts the chat-message invariants of a view: the system message first, every assistant message's
/// tool calls each followed by its tool message (in call order), and no tool message elsewhere.
fn assert_calls_never_split(messages: &[Value]) {
    assert_eq!(messages[0]["role"], "system", "{:#}", messages[0]);
    assert_eq!(messages[0]["content"], SYSTEM);
    let mut index = 0;
    while index < messages.len() {
        let message = &messages[index];
        let calls = message["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_ne!(
            message["role"], "tool",
            "a tool message without its call at {index}: {message:#}"
        );
        if !calls.is_empty() {
            assert_eq!(message["role"], "assistant");
            for (offset, call) in calls.iter().enumerate() {
                let answer = &messages[index + 1 + offset];
                assert_eq!(
                    answer["role"], "tool",
                    "call {call:#} split from its result"
                );
                assert_eq!(answer["tool_call_id"], call["id"], "{answer:#}");
            }
            index += calls.len();
        }
        index += 1;
    }
}

/// Every record of the thread, paged through `memory_history_read` with `next_after`.
async fn history(client: &McpClient) -> Vec<Value> {
    let mut records = Vec::new();
    let mut after = 0;
    let mut pages = 0;
    loop {
        let page = client
            .success(
                "memory_history_read",
                json!({
                    "thread": THREAD,
                    "after": after,
                    "limit": 200,
                    "include": ["system", "operational"],
                }),
            )
            .await;
        records.extend(page["records"].as_array().expect("records").iter().cloned());
        pages += 1;
        match page["next_after"].as_u64() {
            Some(next) => after = next,
            None => break,
        }
    }
    assert!(pages > 1, "a long thread takes several pages");
    records
}

fn segment_first(id: &str) -> u64 {
    id.rsplit(':')
        .next()
        .and_then(|sequence| sequence.parse().ok())
        .unwrap_or_else(|| panic!("a segment id names its first record: {id}"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .expect("a list")
        .iter()
        .map(|item| item.as_str().expect("text").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_one_shot_context_of_a_long_conversation_keeps_its_budget_and_never_splits_a_call() {
    let (fixture, client, thread) = fixture_with_thread().await;
    client.close().await;

    // The whole thread is far larger than the budget.
    let whole = fixture.run(&[
        "context",
        THREAD,
        "--budget",
        &WHOLE.to_string(),
        "--no-memory",
    ]);
    let whole = whole.success();
    assert_eq!(whole["view"]["fits"], true, "{:#}", whole["view"]);
    let whole_tokens = whole["view"]["tokens"].as_u64().expect("tokens");
    assert!(
        whole_tokens > 2 * BUDGET,
        "the thread is {whole_tokens} tokens: not far larger than the budget"
    );
    assert_eq!(whole["through"], thread.records);

    let outcome = fixture.run(&[
        "context",
        THREAD,
        "--budget",
        &BUDGET.to_string(),
        "--no-memory",
    ]);
    let context = outcome.success();
    assert_eq!(context["thread"], THREAD);
    assert!(
        context.get("memory").is_none(),
        "--no-memory recalls nothing"
    );
    let view = &context["view"];
    let tokens = view["tokens"].as_u64().expect("tokens");
    assert!(
        tokens <= BUDGET,
        "{tokens} tokens over a budget of {BUDGET}"
    );
    assert!(context["tokens"].as_u64().expect("tokens") <= BUDGET);
    assert_eq!(context["budget"], BUDGET);
    assert_eq!(context["over_budget"], false);
    assert_eq!(view["over_budget"], false);
    assert_eq!(view["fits"], false, "the thread does not fit: {view:#}");
    let dropped = strings(&view["dropped"]);
    assert!(!dropped.is_empty());
    assert!(
        !strings(&view["elided"]).is_empty(),
        "old lookup outputs are elided"
    );
    // The oldest turns go first; the system message stays.
    assert!(dropped.iter().all(|id| !id.starts_with("system:")));
    assert!(
        dropped
            .iter()
            .any(|id| segment_first(id) == thread.turns[0].0),
        "the first turn goes first"
    );

    let messages = context["messages"].as_array().expect("messages");
    assert_calls_never_split(messages);
    let last = messages.last().expect("a last message");
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"], thread.last_prompt.as_str());
    assert_eq!(last["name"], thread.user.as_str());
    // The dangling call is shown with a placeholder result, never alone; the delayed results follow
    // their calls wherever they arrived in the log.
    let answer_of = |call: &str| {
        messages
            .iter()
            .find(|message| message["tool_call_id"] == call)
            .map(|message| message["content"].as_str().expect("content").to_owned())
    };
    let dangling = answer_of(&thread.dangling_call).expect("the dangling call is in the view");
    assert!(dangling.contains("no result yet"), "{dangling}");
    let newest_delayed = thread.delayed_calls.last().expect("a delayed call");
    assert!(
        answer_of(newest_delayed).is_some_and(|output| output.starts_with("lookup #")),
        "the newest delayed result is in the view"
    );
    // Nothing dropped is shown.
    let shown_first_turn = messages
        .iter()
        .any(|message| message["content"] == thread.turns[0].1.as_str());
    assert!(!shown_first_turn, "the first turn was dropped");

    // Refusals: exit status 2 with a typed error, before anything is read.
    fixture
        .run(&["context", THREAD, "--budget", "0", "--no-memory"])
        .refused("invalid-input");
    fixture
        .run(&["context", THREAD, "--budget", "100", "--no-such-flag"])
        .refused("invalid-input");
    fixture
        .run(&["context", THREAD, "--no-memory"])
        .refused("invalid-input");
}

async fn context(client: &McpClient, budget: u64) -> Value {
    client
        .success(
            "memory_context",
            json!({"thread": THREAD, "budget": budget, "memory": false}),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_folds_the_window_never_the_log_and_folded_turns_stay_readable() {
    let (_fixture, client, thread) = fixture_with_thread().await;
    let before = history(&client).await;
    assert_eq!(before.len() as u64, thread.records);
    assert!(before.iter().all(|record| record["folded"] == false));

    // Unknown arguments and a missing measurement are refused, and write nothing.
    client
        .refused(
            "memory_context",
            json!({"thread": THREAD, "budget": BUDGET, "memory": false, "window": 3}),
            "invalid-input",
        )
        .await;
    client
        .refused("memory_compact", json!({"thread": THREAD}), "invalid-input")
        .await;
    client
        .refused(
            "memory_compact",
            json!({"thread": THREAD, "summary": "short", "through": 10}),
            "invalid-input",
        )
        .await;
    assert_eq!(history(&client).await, before, "a refusal appends nothing");

    let whole = context(&client, WHOLE).await;
    let measured = whole["tokens"].as_u64().expect("tokens");
    let windowed = context(&client, BUDGET).await;
    assert_eq!(windowed["view"]["fits"], false);

    // The plan: what to summarize, appending nothing.
    let planned = client
        .success(
            "memory_compact",
            json!({"thread": THREAD, "measured_input_tokens": measured}),
        )
        .await;
    assert_eq!(planned["thread"], THREAD);
    assert!(planned.get("sequence").is_none());
    let plan = &planned["plan"];
    let through = plan["through"].as_u64().expect("the plan folds something");
    let ranges: Vec<(u64, u64)> = plan["folded"]
        .as_array()
        .expect("folded ranges")
        .iter()
        .map(|range| {
            (
                range["first"].as_u64().expect("first"),
                range["last"].as_u64().expect("last"),
            )
        })
        .collect();
    assert!(!ranges.is_empty());
    assert!(
        ranges
            .iter()
            .all(|&(first, last)| first <= last && last <= through)
    );
    let folded: BTreeSet<u64> = ranges
        .iter()
        .flat_map(|&(first, last)| first..=last)
        .collect();
    assert!(!folded.contains(&1), "the system message never folds");
    assert!(
        !folded.contains(&thread.records),
        "the current turn never folds"
    );
    let replaced_chars = plan["replaced_chars"].as_u64().expect("replaced_chars");
    let plan_messages = plan["messages"].as_array().expect("plan messages");
    assert!(!plan_messages.is_empty());
    // The transcript to summarize holds the folded turns with the tool outputs in full.
    let (_, first_text) = thread
        .turns
        .iter()
        .find(|(sequence, _)| folded.contains(sequence))
        .cloned()
        .expect("a folded turn");
    assert!(
        plan_messages
            .iter()
            .any(|message| message["content"] == first_text.as_str())
    );
    assert!(plan_messages.iter().any(|message| {
        message["role"] == "tool"
            && message["content"]
                .as_str()
                .is_some_and(|content| content.len() >= 3_000)
    }));
    // The dangling call (in the kept newest turns) is named among the refusals.
    assert!(
        plan["refusals"]
            .as_array()
            .expect("refusals")
            .iter()
            .any(|refusal| refusal["reason"] == "kept")
    );
    assert_eq!(history(&client).await, before, "a plan appends nothing");

    // A summary over 65,536 characters is refused before anything is written.
    client
        .refused(
            "memory_compact",
            json!({"thread": THREAD, "measured_input_tokens": measured,
                   "summary": "x".repeat(65_537), "through": through}),
            "invalid-input",
        )
        .await;
    assert_eq!(history(&client).await, before, "a refusal appends nothing");

    // A summary that is not smaller is refused, and recorded; the window does not change. The whole
    // plan replaces more than a summary may hold, so this asks a plan that keeps all but the oldest
    // few thousand tokens.
    let keep_most = measured.saturating_sub(3_000);
    let small = client
        .success(
            "memory_compact",
            json!({"thread": THREAD, "measured_input_tokens": measured, "keep_tokens": keep_most}),
        )
        .await;
    let small_through = small["plan"]["through"]
        .as_u64()
        .expect("the small plan folds something");
    let small_replaced = small["plan"]["replaced_chars"]
        .as_u64()
        .expect("replaced_chars");
    assert!(small_replaced <= 65_536, "{small_replaced}");
    let long_summary = "x".repeat(small_replaced as usize);
    let refused = client
        .success(
            "memory_compact",
            json!({"thread": THREAD, "measured_input_tokens": measured, "keep_tokens": keep_most,
                   "summary": long_summary, "through": small_through}),
        )
        .await;
    assert_eq!(
        refused["compaction"]["outcome"], "not_smaller",
        "{refused:#}"
    );
    assert_eq!(refused["sequence"], thread.records + 1);
    assert_eq!(refused["compaction"]["folded"], json!([]));
    let unchanged = context(&client, BUDGET).await;
    assert_eq!(unchanged["messages"], windowed["messages"]);
    assert_eq!(unchanged["view"], windowed["view"]);

    // A smaller summary folds.
    let summary = "James and John caught up over many months: games, dogs, travel and family. \
                   They encouraged each other's projects.";
    assert!((summary.chars().count() as u64) < replaced_chars);
    let committed = client
        .success(
            "memory_compact",
            json!({"thread": THREAD, "measured_input_tokens": measured,
                   "summary": summary, "through": through, "summarizer": "test-summarizer"}),
        )
        .await;
    assert_eq!(committed["sequence"], thread.records + 2, "{committed:#}");
    let compaction = &committed["compaction"];
    assert_eq!(compaction["outcome"], "folded");
    assert_eq!(compaction["summary"], summary);
    assert_eq!(compaction["measured_input_tokens"], measured);
    assert_eq!(compaction["folded"], plan["folded"]);

    // The window: the system message, then the frame with the summary, then only unfolded turns.
    let compacted = context(&client, BUDGET).await;
    let messages = compacted["messages"].as_array().expect("messages");
    assert_calls_never_split(messages);
    assert_eq!(messages[1]["role"], "system");
    let frame = messages[1]["content"].as_str().expect("frame");
    assert!(frame.starts_with("[compacted history:"), "{frame}");
    assert!(frame.ends_with(summary), "{frame}");
    assert!(frame.contains("'test-summarizer'"), "{frame}");
    assert_eq!(
        messages.last().expect("a message")["content"],
        thread.last_prompt.as_str()
    );
    assert!(
        !messages
            .iter()
            .any(|message| message["content"] == first_text.as_str()),
        "a folded turn is not in the window"
    );
    for id in strings(&compacted["view"]["dropped"])
        .iter()
        .chain(strings(&compacted["view"]["elided"]).iter())
    {
        assert!(!folded.contains(&segment_first(id)), "{id} was folded");
    }
    assert!(compacted["tokens"].as_u64().expect("tokens") <= BUDGET);
    assert_eq!(compacted["through"], thread.records + 2);
    let after_whole = context(&client, WHOLE).await;
    assert!(
        after_whole["tokens"].as_u64().expect("tokens") < measured,
        "the folded window is smaller"
    );

    // The log: every earlier record unchanged, the folded ones marked, then the two compactions.
    let after = history(&client).await;
    assert_eq!(after.len() as u64, thread.records + 2);
    for (old, new) in before.iter().zip(&after) {
        let sequence = old["sequence"].as_u64().expect("sequence");
        let mut unmarked = new.clone();
        unmarked["folded"] = json!(false);
        assert_eq!(&unmarked, old, "record {sequence} was edited");
        assert_eq!(
            new["folded"],
            folded.contains(&sequence),
            "record {sequence}"
        );
    }
    let seen: BTreeSet<u64> = after
        .iter()
        .filter(|record| record["folded"] == true)
        .map(|record| record["sequence"].as_u64().expect("sequence"))
        .collect();
    assert_eq!(seen, folded, "every folded record is returned, marked");
    assert_eq!(after[after.len() - 2]["kind"], "compaction");
    assert_eq!(after[after.len() - 1]["kind"], "compaction");
    assert_eq!(after[after.len() - 1]["text"], summary);

    // A distinctive phrase of a folded LoCoMo turn is found, literally and in any case.
    let (sequence, text) = thread
        .turns
        .iter()
        .filter(|(sequence, _)| folded.contains(sequence))
        .find(|(_, text)| text.chars().count() > 80)
        .cloned()
        .expect("a long folded turn");
    let phrase: String = text.chars().skip(20).take(40).collect();
    let found = client
        .success(
            "memory_history_search",
            json!({"thread": THREAD, "text": phrase.to_uppercase()}),
        )
        .await;
    let matched = found["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .find(|record| record["sequence"] == sequence)
        .unwrap_or_else(|| panic!("{phrase:?} of record {sequence} not found: {found:#}"));
    assert_eq!(matched["folded"], true);
    assert!(
        matched["text"]
            .as_str()
            .is_some_and(|snippet| snippet.contains(&phrase)),
        "{matched:#}"
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_of_a_turn_comes_last_is_reused_by_a_retry_and_never_enters_the_log() {
    let (_fixture, client, thread) = fixture_with_thread().await;
    // A fact in the thread's destination (the first append bound it to OWNER's namespace, scope
    // agent).
    let fact = "The spare key to the lake cabin hangs behind the barometer in the boathouse.";
    client
        .success(
            "memory_put",
            json!({
                "namespace": {"name": "memory.user", "version": 1, "identity": {"user": OWNER}},
                "id": "cabin-key",
                "operation_id": "op-cabin-key",
                "expected_revision": null,
                "locator": "note:cabin-key",
                "scopes": ["agent"],
                "content": {
                    "text": fact,
                    "attributions": [{
                        "origin_id": "note-1", "speaker": thread.user, "observers": [],
                        "locator": "note:cabin-key#1", "activity_at": 1767225600000_i64,
                        "interpretation": "stated"
                    }],
                    "metadata": {},
                    "recorded_at": 1767225600000_i64,
                    "extracted_at": 1767225600000_i64
                }
            }),
        )
        .await;
    client.success("memory_sync", json!({})).await;

    let ask = json!({
        "thread": THREAD, "budget": WHOLE, "query": "where is the spare key to the lake cabin"
    });
    let first = client.success("memory_context", ask.clone()).await;
    let messages = first["messages"].as_array().expect("messages");
    let block = messages.last().expect("a message");
    assert_eq!(block["role"], "user");
    let text = block["content"].as_str().expect("content");
    assert!(text.contains(fact), "{text}");
    let memory = &first["memory"];
    assert_eq!(memory["reused"], false, "{memory:#}");
    assert!(memory["passages"].as_u64().expect("passages") >= 1);
    assert_eq!(
        memory["turn"], thread.records,
        "the turn is the current prompt"
    );
    assert_eq!(
        messages[messages.len() - 2]["content"],
        thread.last_prompt.as_str(),
        "the history comes before the memory"
    );
    assert!(first["tokens"].as_u64().expect("tokens") <= WHOLE);

    // The same turn again: the same snapshot, not a fresh recall.
    let retried = client.success("memory_context", ask).await;
    assert_eq!(retried["messages"], first["messages"]);
    assert_eq!(retried["memory"]["reused"], true);
    assert_eq!(retried["memory"]["passages"], memory["passages"]);

    // The memory is never written into the thread.
    let records = history(&client).await;
    assert_eq!(records.len() as u64, thread.records);
    assert!(records.iter().all(|record| {
        !record["text"]
            .as_str()
            .unwrap_or_default()
            .contains("barometer")
    }));
    let found = client
        .success(
            "memory_history_search",
            json!({"thread": THREAD, "text": "barometer"}),
        )
        .await;
    assert_eq!(found["matches"], json!([]), "{found:#}");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_hook_with_a_context_budget_prints_the_turn_and_appends_the_prompt() {
    let (fixture, client, thread) = fixture_with_thread().await;
    client.close().await;
    let prompt = "Do you remember which board game we played at the convention?";
    let input = json!({"session": THREAD, "prompt": prompt, "prompt_id": "p-1"}).to_string();
    let hook = |budget: &str| -> Outcome {
        run_hook(
            &fixture,
            &[
                "prompt",
                "--format",
                "json",
                "--context-budget",
                budget,
                "--user",
                OWNER,
                "--speaker",
                &thread.user,
                "--timeout-ms",
                "60000",
            ],
            &input,
            &[],
        )
    };
    let outcome = hook("4000");
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    assert!(outcome.stderr.trim().is_empty(), "{outcome:#?}");
    let answer = &outcome.json;
    assert_eq!(answer["event"], "prompt", "{outcome:#?}");
    assert_eq!(answer["appended"], json!([thread.records + 1]));
    assert_eq!(answer["budget"], 4000);
    assert!(answer["tokens"].as_u64().expect("tokens") <= 4000);
    assert_eq!(answer["view"]["fits"], false);
    assert_eq!(answer["through"], thread.records + 1);
    let messages = answer["messages"].as_array().expect("messages");
    assert_calls_never_split(messages);
    // The prompt just appended is the current turn (the memory block, if any, after it).
    let position = messages
        .iter()
        .rposition(|message| message["role"] == "user" && message["content"] == prompt)
        .expect("the prompt is in the context");
    assert!(position + 2 >= messages.len(), "{messages:#?}");
    assert_eq!(messages[position]["name"], thread.user.as_str());

    // The prompt is in the log once, after the thread's records; a retried hook appends nothing.
    let again = hook("4000");
    assert_eq!(again.code, 0, "{again:#?}");
    assert_eq!(again.json["appended"], json!([]), "{again:#?}");
    assert_eq!(again.json["already_recorded"], 1);
    let client = fixture.serve().await;
    let records = history(&client).await;
    assert_eq!(records.len() as u64, thread.records + 1);
    let last = records.last().expect("a record");
    assert_eq!(last["kind"], "user_input");
    assert_eq!(last["text"], prompt);
    assert_eq!(last["speaker"], thread.user.as_str());
    client.close().await;
}

/// The compaction ledger's rules over MCP, on a small thread: a measured count of 0 is no
/// measurement; a summary over 65,536 characters is refused; a host's summarizer failure is recorded
/// as a refusal (and nothing folds); a late tool result of a folded step gets one answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compaction_ledger_refuses_unmeasured_calls_caps_summaries_and_records_failures() {
    let fixture = Fixture::new();
    let client = fixture.serve().await;
    let thread = "ledger";
    let long = "an old question about the harbour and its boats ".repeat(40);
    let records = [
        json!({"speaker": "ana", "body": {"kind": "user_input", "text": long}}),
        json!({"speaker": "assistant", "body": {"kind": "tool_call", "call_id": "c1",
               "name": "lookup", "arguments": {"query": "boats"}}}),
        json!({"speaker": "ana", "body": {"kind": "user_input", "text": "and now?"}}),
        json!({"speaker": "lookup", "body": {"kind": "tool_result", "call_id": "c1",
               "output": "boats ".repeat(300), "is_error": false}}),
        json!({"speaker": "assistant", "body": {"kind": "assistant_message", "text": "Here."}}),
    ];
    for record in &records {
        client
            .success(
                "memory_thread_append",
                json!({"thread": thread, "record": record, "user": OWNER}),
            )
            .await;
    }
    let tail = || async {
        client
            .success(
                "memory_history_read",
                json!({"thread": thread, "limit": 500}),
            )
            .await["records"]
            .as_array()
            .expect("records")
            .len()
    };
    assert_eq!(tail().await, records.len());

    // 0 measured tokens is what a provider that reports no usage says: refused, nothing appended.
    client
        .refused(
            "memory_compact",
            json!({"thread": thread, "measured_input_tokens": 0}),
            "invalid-input",
        )
        .await;
    let planned = client
        .success(
            "memory_compact",
            json!({"thread": thread, "measured_input_tokens": 9_000, "keep_tokens": 0}),
        )
        .await;
    let plan = &planned["plan"];
    let through = plan["through"].as_u64().expect("the plan folds something");
    // Every record has one answer: the late result (4) folds with its step, the kept turn is 3 and 5.
    let mut answered = BTreeSet::new();
    for range in plan["folded"].as_array().expect("folded").iter().chain(
        plan["refusals"]
            .as_array()
            .expect("refusals")
            .iter()
            .map(|refusal| &refusal["range"]),
    ) {
        for sequence in
            range["first"].as_u64().expect("first")..=range["last"].as_u64().expect("last")
        {
            assert!(
                answered.insert(sequence),
                "record {sequence} twice: {plan:#}"
            );
        }
    }
    assert_eq!(answered, (1..=5).collect::<BTreeSet<u64>>(), "{plan:#}");

    // A failure needs the plan's `through`, and is not also a summary.
    for arguments in [
        json!({"thread": thread, "measured_input_tokens": 9_000, "summarizer_failed": "timeout"}),
        json!({"thread": thread, "measured_input_tokens": 9_000, "summarizer_failed": "timeout",
               "summary": "s", "through": through}),
        json!({"thread": thread, "measured_input_tokens": 9_000, "summarizer_failed": " ",
               "through": through}),
    ] {
        client
            .refused("memory_compact", arguments, "invalid-input")
            .await;
    }
    // A summary over the cap is refused before anything is written.
    client
        .refused(
            "memory_compact",
            json!({"thread": thread, "measured_input_tokens": 9_000, "keep_tokens": 0,
                   "summary": "s".repeat(65_537), "through": through}),
            "invalid-input",
        )
        .await;
    assert_eq!(tail().await, records.len(), "refusals append nothing");

    let failed = client
        .success(
            "memory_compact",
            json!({"thread": thread, "measured_input_tokens": 9_000, "keep_tokens": 0,
                   "summarizer_failed": "the endpoint answered 503", "through": through,
                   "summarizer": "cheap-model"}),
        )
        .await;
    let compaction = &failed["compaction"];
    assert_eq!(compaction["outcome"], "summarizer_failed", "{failed:#}");
    assert_eq!(compaction["failure"], "the endpoint answered 503");
    assert_eq!(compaction["folded"], json!([]));
    assert!(
        compaction["refusals"]
            .as_array()
            .expect("refusals")
            .iter()
            .any(|refusal| refusal["reason"] == "summarizer_failed"),
        "{compaction:#}"
    );
    let window = client
        .success(
            "memory_context",
            json!({"thread": thread, "budget": 100_000, "memory": false}),
        )
        .await;
    assert!(
        window["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .any(|message| message["content"] == long.as_str()),
        "nothing folded: the old turn is still in the window"
    );
    client.close().await;
}
