//! The inspector's pages, rendered on the server (maud escapes every value it interpolates, so memory
//! text, thread records and tool output are shown as text, never run). No page loads a script.

use maud::{DOCTYPE, Markup, html};
use serde_json::Value;

use crate::list::ListResult;
use crate::wire::{RecallResult, WireDocument, WireRevision};

/// The recall modes the search offers.
pub const MODES: [&str; 5] = ["hybrid", "lexical", "exact", "hnsw", "recent"];

/// A page: its title, who is signed in (with a sign-out button), and its content.
pub fn layout(title: &str, signed_in: Option<&str>, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · memory inspector" }
                link rel="stylesheet" href="/ui/style.css";
            }
            body {
                header {
                    nav aria-label="Inspector" {
                        a href="/ui/overview" { "Overview" }
                        a href="/ui/memories" { "Memories" }
                        a href="/ui/threads" { "Threads" }
                    }
                    @if let Some(grant) = signed_in {
                        form.inline method="post" action="/ui/logout" {
                            span { "Signed in as grant " strong { (grant) } " " }
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main { h1 { (title) } (content) }
            }
        }
    }
}

/// The sign-in page, with a message when there is one (a wrong token, an expired session).
pub fn sign_in(message: Option<&str>) -> Markup {
    layout(
        "Sign in",
        None,
        html! {
            @if let Some(message) = message {
                p.notice.error role="alert" { (message) }
            }
            p { "Enter the server's token, or the token of your grant. It is exchanged for a session here and never shown again." }
            form method="post" action="/ui/login" {
                label for="token" { "Token" }
                input id="token" name="token" type="password" autocomplete="off" required;
                " "
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// `name=value`, encoded for a URL's query.
fn query_of(name: &str, value: &str) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair(name, value)
        .finish()
}

/// A memory's revisions, newest first: each one's text while the store keeps its words, who said it,
/// and a withdrawal's reason and author.
pub fn revisions(grant: &str, id: &str, revisions: &[WireRevision]) -> Markup {
    layout(
        "Revisions",
        Some(grant),
        html! {
            p { "Memory " code { (id) } ", newest revision first. " a href="/ui/memories" { "Back to the memories" } }
            ol.memories {
                @for revision in revisions {
                    li {
                        @match (&revision.content, &revision.withdrawn) {
                            (_, Some(withdrawal)) => p { strong { "Forgotten" } ": " (withdrawal.reason)
                                @if let Some(by) = &withdrawal.by { " (by " (by) ")" } },
                            (Some(content), None) => p.text { (content.text) },
                            (None, None) => p { em { "Its words are no longer kept." } },
                        }
                        dl.provenance {
                            dt { "Revision" } dd { (revision.revision) }
                            dt { "Replaced" } dd { (revision.predecessor.as_deref().unwrap_or("nothing: the first")) }
                            dt { "Written" } dd { (revision.modified_at) " (epoch ms)" }
                            dt { "Locator" } dd { (revision.locator) }
                            @if let Some(content) = &revision.content {
                                (attributions(content))
                            }
                        }
                    }
                }
            }
        },
    )
}

/// A search's limits, as `memory_recall` takes them.
pub struct SearchLimits {
    /// Most passages (`max_items`).
    pub items: u64,
    /// Most bytes of the cited text (`max_bytes`).
    pub bytes: u64,
    /// Most tokens of it (`max_tokens`).
    pub tokens: u64,
    /// Most milliseconds (`timeout_ms`).
    pub timeout_ms: u64,
}

/// What the memories page shows.
pub struct MemoriesView<'a> {
    /// The grant signed in.
    pub grant: &'a str,
    /// What it reaches, in words: `(namespace rules, read scopes, write scopes, operations)`.
    pub reach: (Vec<String>, String, String, Vec<&'static str>),
    /// The search's limits.
    pub limits: SearchLimits,
    /// The namespace's canonical address.
    pub namespace: &'a str,
    /// The scope searched.
    pub scope: &'a str,
    /// The search, when one was asked.
    pub query: Option<&'a str>,
    /// Its mode.
    pub mode: &'a str,
    /// What the search found.
    pub found: Option<RecallResult>,
    /// The newest documents, without a search.
    pub listed: Option<ListResult>,
    /// A notice (a forget done) or an error.
    pub notice: Option<(bool, String)>,
}

fn attributions(content: &memory_core::MemoryContent) -> Markup {
    html! {
        @for attribution in &content.attributions {
            dt { "Said by" } dd { (attribution.speaker) }
            dt { "Record" } dd { (attribution.origin_id) " at " (attribution.locator) }
            @if let Some(at) = attribution.activity_at {
                dt { "When" } dd { (at) " (epoch ms)" }
            }
            dt { "Taken as" } dd { (attribution.interpretation) }
        }
    }
}

fn forget_form(id: &str) -> Markup {
    html! {
        form method="post" action="/ui/forget" {
            input type="hidden" name="id" value=(id);
            label for={"reason-" (id)} { "Why forget it" }
            input id={"reason-" (id)} name="reason" type="text" required;
            " "
            button type="submit" { "Forget" }
        }
    }
}

/// A person's correction: the text to replace, sent with the revision shown (a memory changed since
/// is refused, not overwritten).
fn edit_form(id: &str, revision: &str, text: &str) -> Markup {
    html! {
        details {
            summary { "Correct it" }
            form method="post" action="/ui/edit" {
                input type="hidden" name="id" value=(id);
                input type="hidden" name="expected_revision" value=(revision);
                label for={"text-" (id)} { "Corrected text" }
                textarea id={"text-" (id)} name="text" rows="3" required { (text) }
                " "
                button type="submit" { "Save the correction" }
            }
        }
    }
}

fn document_item(document: &WireDocument) -> Markup {
    html! {
        li {
            p.text { (document.content.text) }
            dl.provenance {
                dt { "Id" } dd { (document.id) }
                dt { "Revision" } dd { (document.revision) }
                dt { "Written" } dd { (document.modified_at) " (epoch ms)" }
                dt { "Locator" } dd { (document.locator) }
                (attributions(&document.content))
            }
            p { a href={"/ui/revisions?" (query_of("id", &document.id))} { "Every revision of " (document.id) } }
            (edit_form(&document.id, &document.revision, &document.content.text))
            (forget_form(&document.id))
        }
    }
}

/// A score as a person reads it: three decimals.
fn score(value: f64) -> String {
    format!("{value:.3}")
}

/// A ranking's score, or that the ranking did not find the document.
fn ranking(value: Option<f64>) -> String {
    value.map_or_else(|| "not found by it".to_owned(), score)
}

/// The memories of the grant's namespace: a search, or the newest documents.
pub fn memories(view: MemoriesView<'_>) -> Markup {
    layout(
        "Memories",
        Some(view.grant),
        html! {
            p { "Namespace " code { (view.namespace) } ", scope " code { (view.scope) } " (your grant's defaults)." }
            details {
                summary { "What your grant reaches" }
                dl.provenance {
                    dt { "Namespaces" } dd { ul { @for rule in &view.reach.0 { li { (rule) } } } }
                    dt { "Reads through" } dd { (view.reach.1) }
                    dt { "Writes to" } dd { (view.reach.2) }
                    dt { "Operations" } dd { (view.reach.3.join(", ")) }
                }
            }
            @if let Some((error, message)) = &view.notice {
                @if *error {
                    p.notice.error role="alert" { (message) }
                } @else {
                    p.notice role="status" { (message) }
                }
            }
            form method="get" action="/ui/memories" role="search" {
                label for="q" { "Search" }
                input id="q" name="q" type="search" value=(view.query.unwrap_or(""));
                label for="mode" { "Mode" }
                select id="mode" name="mode" {
                    @for mode in MODES {
                        option value=(mode) selected[mode == view.mode] { (mode) }
                    }
                }
                details {
                    summary { "Limits" }
                    label for="limit" { "Most passages" }
                    input id="limit" name="limit" type="number" min="1" value=(view.limits.items);
                    label for="max_bytes" { "Most bytes" }
                    input id="max_bytes" name="max_bytes" type="number" min="1" value=(view.limits.bytes);
                    label for="max_tokens" { "Most tokens" }
                    input id="max_tokens" name="max_tokens" type="number" min="1" value=(view.limits.tokens);
                    label for="timeout_ms" { "Time limit (ms)" }
                    input id="timeout_ms" name="timeout_ms" type="number" min="1" value=(view.limits.timeout_ms);
                }
                " "
                button type="submit" { "Search" }
            }
            @if let Some(found) = &view.found {
                h2 { "Found for “" (view.query.unwrap_or("")) "”" }
                @if found.passages.is_empty() {
                    p { "Nothing found." }
                }
                ol.memories {
                    @for passage in &found.passages {
                        li {
                            p.text { (passage.content.text) }
                            dl.provenance {
                                dt { "Citation" } dd { (passage.citation) }
                                @match &passage.rankings {
                                    Some(rankings) => {
                                        dt { "Lexical (BM25)" } dd { (ranking(rankings.lexical)) }
                                        dt { "Embedding (cosine)" } dd { (ranking(rankings.embedding)) }
                                        dt { "Fused" } dd { (score(passage.score)) }
                                    }
                                    None => { dt { "Score (" (view.mode) ")" } dd { (score(passage.score)) } }
                                }
                                dt { "Document" } dd { (passage.source.id) }
                                dt { "Revision" } dd { (passage.source.revision.as_deref().unwrap_or("unknown")) }
                                dt { "Locator" } dd { (passage.source.locator) }
                                @if let Some(correction) = &passage.corrected_by {
                                    dt { "Corrected by" } dd { (correction) }
                                }
                                (attributions(&passage.content))
                            }
                            (forget_form(&passage.source.id))
                        }
                    }
                }
            }
            @if let Some(listed) = &view.listed {
                h2 { "Newest memories" }
                @if listed.documents.is_empty() {
                    p { "No memories yet." }
                }
                ol.memories {
                    @for document in &listed.documents {
                        (document_item(document))
                    }
                }
            }
        },
    )
}

/// A page that says what went wrong, with a way back.
pub fn problem(title: &str, message: &str) -> Markup {
    layout(
        title,
        None,
        html! {
            p.notice.error role="alert" { (message) }
            p { a href="/ui" { "Back to the inspector" } }
        },
    )
}

/// Characters of a record's or a message's text a page shows (the rest is counted, not shown).
pub const SHOWN_CHARS: usize = 2_000;

/// `text` cut to [`SHOWN_CHARS`], with how many characters were left out.
fn shown(text: &str) -> (String, usize) {
    let total = text.chars().count();
    (
        text.chars().take(SHOWN_CHARS).collect(),
        total.saturating_sub(SHOWN_CHARS),
    )
}

fn shown_text(text: &str) -> Markup {
    let (text, left) = shown(text);
    html! {
        p.text { (text) }
        @if left > 0 { p { small { "… " (left) " more characters (memory_history_read shows them all)" } } }
    }
}

/// What the threads page shows.
pub struct ThreadView<'a> {
    /// The grant signed in.
    pub grant: &'a str,
    /// The thread asked for, if any.
    pub thread: Option<&'a str>,
    /// The preview's budget.
    pub budget: u64,
    /// Without a thread: the grant's threads, a page of them.
    pub listed: Option<crate::thread::ThreadsPage>,
    /// `memory_history_read`'s page (records of every kind).
    pub history: Option<Value>,
    /// `memory_context`'s preview (no memory recalled, no rollover).
    pub preview: Option<Value>,
    /// Why the thread could not be read.
    pub error: Option<String>,
}

/// A thread's records, and the context a budget would assemble from them.
pub fn thread(view: ThreadView<'_>) -> Markup {
    layout(
        "Threads",
        Some(view.grant),
        html! {
            form method="get" action="/ui/threads" {
                label for="thread" { "Thread" }
                input id="thread" name="thread" type="text" required value=(view.thread.unwrap_or(""));
                label for="budget" { "Budget (tokens) of the context preview" }
                input id="budget" name="budget" type="number" min="1" value=(view.budget);
                " "
                button type="submit" { "Show" }
            }
            @if let Some(error) = &view.error {
                p.notice.error role="alert" { (error) }
            }
            @if let Some(listed) = &view.listed {
                h2 { "Your threads" }
                @if listed.threads.is_empty() {
                    p { "No thread of yours among the " (listed.scanned) " read." }
                }
                ul {
                    @for thread in &listed.threads {
                        li { a href={"/ui/threads?" (query_of("thread", thread))} { (thread) } }
                    }
                }
                @if let Some(next) = &listed.next_after {
                    p { a href={"/ui/threads?" (query_of("threads_after", next))} { "More threads" } }
                }
            }
            @if let Some(preview) = &view.preview {
                h2 { "Context preview" }
                p {
                    "A preview: it recalls no memory, fills no cache and writes nothing. "
                    (preview["tokens"]) " tokens of " (preview["budget"])
                    @if preview["over_budget"] == Value::Bool(true) { ", over budget" }
                    "; window " (preview["view"]["window"]["number"])
                    "; " (preview["view"]["dropped"].as_array().map_or(0, Vec::len)) " segments dropped, "
                    (preview["view"]["elided"].as_array().map_or(0, Vec::len)) " with elided tool output."
                }
                ol.memories {
                    @for message in preview["messages"].as_array().into_iter().flatten() {
                        li {
                            p { strong { (message["role"].as_str().unwrap_or("")) }
                                @if let Some(calls) = message["tool_calls"].as_array() {
                                    @for call in calls {
                                        " calls " code { (call["function"]["name"].as_str().unwrap_or("")) }
                                    }
                                }
                                @if let Some(answered) = message["tool_call_id"].as_str() {
                                    " answers " code { (answered) }
                                }
                            }
                            (shown_text(message["content"].as_str().unwrap_or("")))
                        }
                    }
                }
            }
            @if let Some(history) = &view.history {
                h2 { "Records" }
                ol.memories {
                    @for record in history["records"].as_array().into_iter().flatten() {
                        li {
                            p {
                                strong { "#" (record["sequence"]) " " (record["kind"].as_str().unwrap_or("")) }
                                " by " (record["speaker"].as_str().unwrap_or(""))
                                @if let Some(call) = record["call_id"].as_str() { ", call " code { (call) } }
                                ", window " (record["window"])
                                @if record["folded"] == Value::Bool(true) { ", folded by a compaction" }
                                @if record["forgotten"] == Value::Bool(true) { ", forgotten" }
                            }
                            (shown_text(record["text"].as_str().unwrap_or("")))
                        }
                    }
                }
                @if let (Some(thread), Some(next)) = (view.thread, history["next_after"].as_u64()) {
                    p { a href={"/ui/threads?" (later(thread, view.budget, next))} { "Later records" } }
                }
            }
        },
    )
}

/// The query of the threads page's next page.
fn later(thread: &str, budget: u64, after: u64) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("thread", thread)
        .append_pair("budget", &budget.to_string())
        .append_pair("after", &after.to_string())
        .finish()
}
