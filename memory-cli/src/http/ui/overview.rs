//! The overview page: the store, the semantic index, the worker's view of the thread log, the hook's
//! recent errors, and writes and recall latency over time, charted from the server's minute-by-minute
//! history ([`crate::metrics::history`]).
//!
//! It names every destination's namespace, so it follows `/metrics`' rule ([`Grant::reads_metrics`]):
//! the server's own grant and a grant to everything see it; any other grant is told so, with a way
//! back. The charts are inline SVG drawn here (no script, no external asset), each with a table of the
//! same figures for readers who cannot see it.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;

use super::{Inspector, page, pages, redirect, signed_in};
use crate::database::Store;
use crate::grants::Grant;
use crate::hook::state::{HookErrors, read_errors};
use crate::metrics::IndexSnapshot;
use crate::metrics::history::Minute;
use memory_service::blocking::blocking;
use memory_service::status::ThreadStatus;

/// The windows a chart may span, in hours.
pub const WINDOWS: [u64; 3] = [1, 6, 24];
/// Bars a chart draws: each covers `hours` minutes.
const BARS: usize = 60;

/// What the overview shows.
pub struct OverviewView<'a> {
    /// The grant signed in.
    pub grant: &'a str,
    /// The store's head and the loaded index, `None` when the store could not be read.
    pub index: Option<IndexSnapshot>,
    /// The thread log as the worker sees it, or why it could not be read.
    pub threads: Result<ThreadStatus, String>,
    /// The hook's recent errors.
    pub hooks: HookErrors,
    /// The charts' span.
    pub hours: u64,
    /// One merged minute per bar, oldest first.
    pub bars: Vec<Minute>,
}

#[derive(Deserialize)]
pub(super) struct OverviewQuery {
    #[serde(default)]
    hours: Option<u64>,
}

pub(super) async fn overview<S: Store>(
    State(inspector): State<Arc<Inspector<S>>>,
    headers: HeaderMap,
    Query(query): Query<OverviewQuery>,
) -> Response {
    let grant: Arc<Grant> = match signed_in(&inspector, &headers) {
        Ok(signed) => signed,
        Err(to) => return redirect(to),
    };
    if !grant.reads_metrics() {
        return page(
            StatusCode::FORBIDDEN,
            pages::problem(
                "Not allowed",
                "The overview names every namespace of the server, so only the server's own token \
                 or a grant to everything sees it (as with /metrics). Your memories and threads are \
                 on the other pages.",
            ),
        );
    }
    let hours = query
        .hours
        .filter(|hours| WINDOWS.contains(hours))
        .unwrap_or(WINDOWS[0]);
    let state = &inspector.state;
    let index = state.index_snapshot().await;
    let store = Arc::clone(state.store());
    let threads = match blocking(move || ThreadStatus::read(&*store)).await {
        Ok(Ok(threads)) => Ok(threads),
        Ok(Err(refusal)) => Err(refusal.message().to_owned()),
        Err(refusal) => Err(refusal.message().to_owned()),
    };
    let hook_dir = state.hook_dir().to_owned();
    let hooks = match blocking(move || read_errors(&hook_dir)).await {
        Ok(hooks) => hooks,
        Err(refusal) => HookErrors {
            unreadable: Some(refusal.message().to_owned()),
            ..HookErrors::default()
        },
    };
    let minutes = state
        .server_metrics()
        .history()
        .last(usize::try_from(hours * 60).unwrap_or(usize::MAX));
    page(
        StatusCode::OK,
        render(OverviewView {
            grant: grant.name(),
            index,
            threads,
            hooks,
            hours,
            bars: merged(&minutes, BARS),
        }),
    )
}

/// `minutes` merged into `bars` bars of equal span (the last bar ends with the current minute).
pub fn merged(minutes: &[Minute], bars: usize) -> Vec<Minute> {
    let per_bar = minutes.len().div_ceil(bars.max(1)).max(1);
    minutes
        .chunks(per_bar)
        .map(|chunk| {
            let mut bar = chunk[0];
            for minute in &chunk[1..] {
                bar.absorb(minute);
            }
            bar
        })
        .collect()
}

/// `HH:MM` (UTC) of a minute since the epoch.
fn clock_time(minute: i64) -> String {
    let of_day = minute.rem_euclid(24 * 60);
    format!("{:02}:{:02}", of_day / 60, of_day % 60)
}

fn latency(ms: Option<u64>) -> String {
    match ms {
        None => "–".to_owned(),
        Some(u64::MAX) => "over 32 s".to_owned(),
        Some(ms) if ms >= 1_000 => format!("≤ {} s", ms / 1_000),
        Some(ms) => format!("≤ {ms} ms"),
    }
}

/// Chart geometry (SVG user units).
const WIDTH: u64 = 600;
const HEIGHT: u64 = 120;

/// A bar chart of `values`, scaled to the largest, with its accessible name.
fn bars(label: &str, values: &[u64], axis: &str) -> Markup {
    let top = values.iter().copied().max().unwrap_or(0).max(1);
    let slot = WIDTH / (values.len().max(1) as u64);
    html! {
        figure {
            svg viewBox={"0 0 " (WIDTH) " " (HEIGHT + 2)} width="100%" role="img" aria-label=(label) {
                title { (label) }
                line.axis x1="0" y1=(HEIGHT) x2=(WIDTH) y2=(HEIGHT) {}
                @for (at, value) in values.iter().enumerate() {
                    @if *value > 0 {
                        @let height = (value * HEIGHT).div_ceil(top);
                        rect.bar x=((at as u64) * slot) y=(HEIGHT - height)
                            width=(slot.saturating_sub(1).max(1)) height=(height) {}
                    }
                }
            }
            figcaption { (label) " (" (axis) ", highest " (top) ")" }
        }
    }
}

/// The overview page.
pub fn render(view: OverviewView<'_>) -> Markup {
    let writes: Vec<u64> = view
        .bars
        .iter()
        .map(|bar| bar.writes + bar.refused_writes)
        .collect();
    // Latency on a doubling scale: a bar's height is its p95 bucket's index (1 ms = 1).
    let p95: Vec<u64> = view
        .bars
        .iter()
        .map(|bar| {
            bar.latency_ms(0.95)
                .map_or(0, |ms| u64::from(ms.max(1).ilog2()) + 1)
        })
        .collect();
    let per_bar = view.hours;
    pages::layout(
        "Overview",
        Some(view.grant),
        html! {
            h2 { "Store and index" }
            @match &view.index {
                None => p.notice.error role="alert" { "The store could not be read." },
                Some(snapshot) => dl.provenance {
                    dt { "Latest change" } dd { (snapshot.head) }
                    @match &snapshot.index {
                        None => { dt { "Semantic index" } dd { "not loaded yet (the model is loading, or failed to: see /healthz)" } }
                        Some(index) => {
                            dt { "Indexed through" } dd { (index.indexed) " (" (snapshot.head.saturating_sub(index.indexed)) " behind)" }
                            dt { "Chunks" } dd { (index.chunks) " of " (index.capacity) }
                            dt { "HNSW graph" } dd { (index.hnsw) ", search width " (index.ef_search) }
                            dt { "Vectors" } dd { @if index.compact_vectors { "int8 codes" } @else { "f32" } }
                            dt { "Unindexed documents" } dd {
                                @let total: u64 = index.unindexed.iter().map(|(_, count)| count).sum();
                                (total)
                                @for (reason, count) in &index.unindexed { " · " (reason) " " (count) }
                            }
                        }
                    }
                },
            }
            h2 { "Worker" }
            @match &view.threads {
                Err(message) => p.notice.error role="alert" { "The thread log could not be read: " (message) },
                Ok(threads) => dl.provenance {
                    dt { "Threads pending" } dd { (threads.pending) }
                    dt { "Threads parked" } dd {
                        @let parked: u64 = threads.parked.values().sum();
                        (parked)
                        @for (kind, count) in &threads.parked { " · " (kind) " " (count) }
                    }
                    dt { "Unbound, unreadable" } dd { (threads.unbound) ", " (threads.unreadable) }
                    dt { "Records read" } dd { (threads.extraction.records) }
                    dt { "Kept" } dd { (threads.extraction.kept) }
                    dt { "Dropped" } dd {
                        @let dropped: u64 = threads.extraction.dropped.values().sum();
                        (dropped)
                        @for (reason, count) in &threads.extraction.dropped { " · " (reason) " " (count) }
                    }
                    dt { "Destinations" } dd {
                        @if threads.destinations.is_empty() { "none" }
                        ul {
                            @for destination in &threads.destinations {
                                li { code { (destination.namespace) } " (" (destination.scopes.join(", ")) "): " (destination.threads) " threads" }
                            }
                        }
                    }
                },
            }
            h2 { "Hooks" }
            @if let Some(unreadable) = &view.hooks.unreadable {
                p.notice.error role="alert" { (unreadable) }
            }
            @if view.hooks.total == 0 {
                p { "No hook errors logged." }
            } @else {
                p { (view.hooks.total) " hook errors logged, the latest of each kind:" }
                ul {
                    @for (kind, errors) in &view.hooks.by_kind {
                        li { strong { (kind) } " × " (errors.count) ": " (errors.last.hook) ", " (errors.last.message) }
                    }
                }
            }
            h2 { "Over time" }
            form method="get" action="/ui/overview" {
                label for="hours" { "Span" }
                select id="hours" name="hours" {
                    @for hours in WINDOWS {
                        option value=(hours) selected[hours == view.hours] { "last " (hours) " h" }
                    }
                }
                " "
                button type="submit" { "Show" }
            }
            p { "Since this server started, kept in memory for a day. Each bar is " (per_bar) " minute" @if per_bar > 1 { "s" } "; times are UTC." }
            (bars("Writes per bar", &writes, "answered and refused"))
            (bars("Recall latency, 95th percentile", &p95, "doubling scale: 1 is 1 ms, 11 is 1 s"))
            details {
                summary { "The same figures as a table" }
                table {
                    thead { tr { th scope="col" { "From (UTC)" } th scope="col" { "Writes" } th scope="col" { "Refused writes" } th scope="col" { "Recalls" } th scope="col" { "Refused recalls" } th scope="col" { "Recall p50" } th scope="col" { "Recall p95" } } }
                    tbody {
                        @for bar in view.bars.iter().filter(|bar| bar.writes + bar.refused_writes + bar.recalls + bar.refused_recalls > 0) {
                            tr {
                                td { (clock_time(bar.at)) }
                                td { (bar.writes) } td { (bar.refused_writes) }
                                td { (bar.recalls) } td { (bar.refused_recalls) }
                                td { (latency(bar.latency_ms(0.5))) } td { (latency(bar.latency_ms(0.95))) }
                            }
                        }
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::history::MetricsHistory;
    use memory_core::ManualClock;
    use std::time::Duration;

    #[test]
    fn bars_merge_minutes_and_the_page_escapes_what_it_shows() {
        let clock = Arc::new(ManualClock::new(600 * 60_000));
        let history = MetricsHistory::new(Arc::clone(&clock) as Arc<dyn memory_core::Clock>);
        history.record_write(true);
        history.record_recall(true, Duration::from_millis(5));
        clock.advance(60_000);
        history.record_write(false);
        let day = history.last(24 * 60);
        let merged = merged(&day, BARS);
        assert_eq!(merged.len(), BARS);
        let last = merged.last().expect("a bar");
        assert_eq!((last.writes, last.refused_writes, last.recalls), (1, 1, 1));
        let html = render(OverviewView {
            grant: "<b>root</b>",
            index: None,
            threads: Err("<script>".to_owned()),
            hooks: HookErrors::default(),
            hours: 24,
            bars: merged,
        })
        .into_string();
        assert!(html.contains("&lt;b&gt;root&lt;/b&gt;"));
        assert!(!html.contains("<script>"));
        assert!(html.contains("<rect class=\"bar\""), "{html}");
        assert!(
            html.contains("<td>10:00</td>") || html.contains("<td>09:"),
            "{html}"
        );
    }
}
