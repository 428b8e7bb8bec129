//! What `memory serve --http` reports at `GET /metrics`, in the OpenMetrics text format (which
//! Prometheus scrapes), through `prometheus-client`.
//!
//! - `memory_recall_duration_seconds{mode, outcome}`: histogram of recall latency (`memory_recall` and
//!   `memory_search`), `mode` one of `lexical`, `exact`, `hnsw`, `hybrid`, `outcome` `ok` or the
//!   refusal kind.
//! - `memory_writes_total{result}`: writes (`memory_put`, `memory_withdraw`, `memory_remember`,
//!   `memory_forget`) by `written`, `replayed` or the refusal kind.
//! - `memory_change_head`, `memory_indexed_position`, `memory_index_lag` (head minus indexed),
//!   `memory_chunks` and `memory_chunk_capacity`, `memory_unindexed_documents{reason}`,
//!   `memory_index_compact_vectors` (1 when the loaded index holds int8 codes, `--compact-vectors`),
//!   `memory_hnsw_ef_search` (the loaded index's HNSW search width, `--hnsw-ef-search`),
//!   `memory_hnsw_state{state}` (1 for the current state, 0 for the others), `memory_model_loaded`:
//!   read at each scrape; the index gauges are absent until the model is loaded.
//!
//! - `memory_forbidden_total{grant, tool}`: calls refused outside the caller's grant.
//! - `memory_http_refused_total{reason}`: requests answered before the MCP layer: `unauthorized`
//!   (`401`), `in_flight` (`429`, the token's requests in flight are at `--max-in-flight`),
//!   `sessions` (`503`, `--max-sessions` are open).
//! - `memory_http_limit{limit}`: each bound in force (`max_body_bytes`, `max_sessions`,
//!   `max_in_flight`, `header_timeout_seconds`, `body_timeout_seconds`,
//!   `session_idle_timeout_seconds`); `memory_mcp_sessions` and `memory_http_in_flight` beside them.
//! - `memory_grants` (grants in force) and `memory_grants_reloads_total{outcome}` (`ok`, `failed`).
//!
//! The same writes and recalls are also kept minute by minute for the last day ([`history`]), which
//! the inspector's overview charts.
//!
//! Every label value comes from a fixed set or the operator's grants file (grant names); no
//! namespace, identity, id, query or text is ever a label.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use memory_core::ErrorKind;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::wire::RecallMode;

pub mod history;

use history::MetricsHistory;

/// The content type of [`ServerMetrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The HNSW states reported, as semantic-index names them.
const HNSW_STATES: [&str; 4] = ["ready", "building", "not_started", "failed"];
/// The unindexed reasons always reported (0 when none), as semantic-index names them.
const UNINDEXED_REASONS: [&str; 4] = ["too_large", "too_many_chunks", "capacity", "invalid"];

type Labels = [(&'static str, &'static str); 2];
type Label = [(&'static str, &'static str); 1];

fn recall_histogram() -> Histogram {
    // 1 ms to about 33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// What the index looked like at one scrape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexSnapshot {
    /// The store's latest change.
    pub head: u64,
    /// The loaded index's state; `None` before the model is loaded.
    pub index: Option<LoadedIndex>,
}

/// The loaded index's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedIndex {
    /// The change through which every change is indexed or recorded unindexed.
    pub indexed: u64,
    /// Searchable chunks.
    pub chunks: u64,
    /// Most chunks.
    pub capacity: u64,
    /// Unindexed documents per reason.
    pub unindexed: Vec<(String, u64)>,
    /// The HNSW state's name.
    pub hnsw: &'static str,
    /// Whether the index holds int8 codes.
    pub compact_vectors: bool,
    /// The HNSW search width.
    pub ef_search: u64,
}

/// The server's metrics.
pub struct ServerMetrics {
    registry: Registry,
    recall_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    writes: Family<Label, Counter>,
    head: Gauge,
    indexed: Gauge,
    lag: Gauge,
    chunks: Gauge,
    capacity: Gauge,
    compact_vectors: Gauge,
    ef_search: Gauge,
    unindexed: Family<[(&'static str, String); 1], Gauge>,
    hnsw: Family<Label, Gauge>,
    model_loaded: Gauge,
    forbidden: Family<[(&'static str, String); 2], Counter>,
    http_refused: Family<Label, Counter>,
    limits: Family<Label, Gauge>,
    sessions: Gauge,
    in_flight: Gauge,
    grants: Gauge,
    grant_reloads: Family<Label, Counter>,
    compactions: Family<Label, Counter>,
    /// The model memory_compact asks, whose client keeps its own count (read at a scrape).
    model: OnceLock<Arc<dyn memory_model::ChatModel>>,
    model_calls: Gauge,
    model_retries: Gauge,
    model_tokens: Family<Label, Gauge>,
    model_latency: Gauge,
    model_failures: Family<Label, Gauge>,
    /// What reads the context layer's fold cache (set once the server is built).
    folds: OnceLock<FoldWatch>,
    fold_cache: Family<Label, Gauge>,
    history: MetricsHistory,
}

/// Reads the context layer's fold cache counts at a scrape (`None` before the first context call).
pub type FoldWatch = Arc<dyn Fn() -> Option<memory_context::fold::FoldStats> + Send + Sync>;

impl std::fmt::Debug for ServerMetrics {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ServerMetrics")
            .finish_non_exhaustive()
    }
}

impl Default for ServerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerMetrics {
    /// Empty metrics, registered.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let recall_seconds =
            Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(recall_histogram);
        registry.register(
            "memory_recall_duration_seconds",
            "Recall latency by mode and outcome",
            recall_seconds.clone(),
        );
        let writes = Family::<Label, Counter>::default();
        registry.register("memory_writes", "Writes by result", writes.clone());
        let gauge = |registry: &mut Registry, name: &str, help: &str| -> Gauge {
            let gauge = Gauge::default();
            registry.register(name, help, gauge.clone());
            gauge
        };
        let head = gauge(
            &mut registry,
            "memory_change_head",
            "The store's latest change",
        );
        let indexed = gauge(
            &mut registry,
            "memory_indexed_position",
            "The change through which the semantic index is up to date",
        );
        let lag = gauge(
            &mut registry,
            "memory_index_lag",
            "Changes not yet indexed (head minus indexed position)",
        );
        let chunks = gauge(&mut registry, "memory_chunks", "Searchable chunks");
        let capacity = gauge(
            &mut registry,
            "memory_chunk_capacity",
            "Most chunks the semantic index holds",
        );
        let compact_vectors = gauge(
            &mut registry,
            "memory_index_compact_vectors",
            "1 when the semantic index holds its vectors as int8 codes",
        );
        let ef_search = gauge(
            &mut registry,
            "memory_hnsw_ef_search",
            "The search width of the semantic index's HNSW queries",
        );
        let unindexed = Family::<[(&'static str, String); 1], Gauge>::default();
        registry.register(
            "memory_unindexed_documents",
            "Documents the semantic index could not hold, by reason",
            unindexed.clone(),
        );
        let hnsw = Family::<Label, Gauge>::default();
        registry.register(
            "memory_hnsw_state",
            "The HNSW graph's state (1 for the current one)",
            hnsw.clone(),
        );
        let model_loaded = gauge(
            &mut registry,
            "memory_model_loaded",
            "1 once the embedding model and the index are loaded",
        );
        let forbidden = Family::<[(&'static str, String); 2], Counter>::default();
        registry.register(
            "memory_forbidden",
            "Calls refused outside the caller's grant, by grant and tool",
            forbidden.clone(),
        );
        let http_refused = Family::<Label, Counter>::default();
        registry.register(
            "memory_http_refused",
            "Requests refused before the MCP layer, by reason",
            http_refused.clone(),
        );
        let limits = Family::<Label, Gauge>::default();
        registry.register(
            "memory_http_limit",
            "The HTTP server's bounds",
            limits.clone(),
        );
        let sessions = gauge(&mut registry, "memory_mcp_sessions", "Open MCP sessions");
        let in_flight = gauge(
            &mut registry,
            "memory_http_in_flight",
            "MCP requests being answered",
        );
        let grants = gauge(&mut registry, "memory_grants", "Grants in force");
        let grant_reloads = Family::<Label, Counter>::default();
        registry.register(
            "memory_grants_reloads",
            "Re-reads of the grants file, by outcome",
            grant_reloads.clone(),
        );
        let compactions = Family::<Label, Counter>::default();
        registry.register(
            "memory_compactions",
            "memory_compact calls that appended a compaction record, by its outcome, and those \
             refused as unmeasured",
            compactions.clone(),
        );
        let model_calls = gauge(
            &mut registry,
            "memory_model_calls",
            "Calls the model endpoint answered (memory_compact's summaries), since start",
        );
        let model_retries = gauge(
            &mut registry,
            "memory_model_retries",
            "Attempts of model calls tried again after a transient failure, since start",
        );
        let model_latency = gauge(
            &mut registry,
            "memory_model_latency_milliseconds",
            "Milliseconds from each answered model call's first attempt to its answer, summed",
        );
        let model_tokens = Family::<Label, Gauge>::default();
        registry.register(
            "memory_model_tokens",
            "Tokens the model endpoint reported, by kind (prompt, completion), since start",
            model_tokens.clone(),
        );
        let model_failures = Family::<Label, Gauge>::default();
        registry.register(
            "memory_model_failures",
            "Model calls that failed for good, by kind (unreachable, timeout, rate_limited, server, \
             refused, malformed, too_large, config), since start",
            model_failures.clone(),
        );
        let fold_cache = Family::<Label, Gauge>::default();
        registry.register(
            "memory_fold_cache",
            "The context layer's fold cache since start, by event: hits (warm reads), misses (cold \
             reads), rebuilds (a forget since), evictions (bound or idle expiry), checkpoint_restores, \
             checkpoints_ignored, checkpoint_saves, checkpoints_unsaved; and cached (threads held now)",
            fold_cache.clone(),
        );
        Self {
            registry,
            recall_seconds,
            writes,
            head,
            indexed,
            lag,
            chunks,
            capacity,
            compact_vectors,
            ef_search,
            unindexed,
            hnsw,
            model_loaded,
            forbidden,
            http_refused,
            limits,
            sessions,
            in_flight,
            grants,
            grant_reloads,
            compactions,
            model: OnceLock::new(),
            model_calls,
            model_retries,
            model_tokens,
            model_latency,
            model_failures,
            folds: OnceLock::new(),
            fold_cache,
            history: MetricsHistory::default(),
        }
    }

    /// Shows the fold cache's counts `watch` reads at every scrape.
    pub fn watch_folds(&self, watch: FoldWatch) {
        let _ = self.folds.set(watch);
    }

    /// Sets the fold cache gauges (at a scrape).
    fn set_folds(&self) {
        let Some(stats) = self.folds.get().and_then(|watch| watch()) else {
            return;
        };
        for (event, value) in [
            ("hits", stats.hits),
            ("misses", stats.misses),
            ("rebuilds", stats.rebuilds),
            ("evictions", stats.evictions),
            ("checkpoint_restores", stats.checkpoint_restores),
            ("checkpoints_ignored", stats.checkpoints_ignored),
            ("checkpoint_saves", stats.checkpoint_saves),
            ("checkpoints_unsaved", stats.checkpoints_unsaved),
            ("cached", stats.cached),
        ] {
            self.fold_cache
                .get_or_create(&[("event", event)])
                .set(clamp(value));
        }
    }

    /// Shows `model`'s own count at every scrape (the server's summarizer).
    pub fn watch_model(&self, model: Arc<dyn memory_model::ChatModel>) {
        let _ = self.model.set(model);
    }

    /// Sets the model gauges from its client's count (at a scrape).
    fn set_model(&self) {
        let Some(meter) = self.model.get().and_then(|model| model.meter()) else {
            return;
        };
        self.model_calls.set(clamp(meter.calls));
        self.model_retries.set(clamp(meter.retries));
        self.model_latency.set(clamp(meter.latency_ms_total));
        self.model_tokens
            .get_or_create(&[("kind", "prompt")])
            .set(clamp(meter.prompt_tokens));
        self.model_tokens
            .get_or_create(&[("kind", "completion")])
            .set(clamp(meter.completion_tokens));
        for (kind, count) in meter.failures {
            self.model_failures
                .get_or_create(&[("kind", kind)])
                .set(clamp(count));
        }
    }

    /// Counts one compaction by outcome (`folded`, `nothing_to_fold`, `not_smaller`,
    /// `summarizer_failed`, or `unmeasured` for a call refused without a measured token count).
    pub fn count_compaction(&self, outcome: &'static str) {
        self.compactions
            .get_or_create(&[("outcome", outcome)])
            .inc();
    }

    /// Counts one call refused outside `grant`.
    pub fn count_forbidden(&self, grant: &str, tool: &'static str) {
        self.forbidden
            .get_or_create(&[("grant", grant.to_owned()), ("tool", tool.to_owned())])
            .inc();
    }

    /// Counts one request refused before the MCP layer (`unauthorized`, `in_flight`, `sessions`).
    pub fn count_http_refused(&self, reason: &'static str) {
        self.http_refused.get_or_create(&[("reason", reason)]).inc();
    }

    /// Shows one bound in force.
    pub fn set_limit(&self, limit: &'static str, value: u64) {
        self.limits
            .get_or_create(&[("limit", limit)])
            .set(clamp(value));
    }

    /// Sets the open sessions (at a scrape).
    pub fn set_sessions(&self, sessions: usize) {
        self.sessions.set(clamp(sessions as u64));
    }

    /// The in-flight gauge, raised while a request is answered.
    pub fn in_flight(&self) -> &Gauge {
        &self.in_flight
    }

    /// Records a load or re-read of the grants file: the grants now in force, and the outcome.
    pub fn grants_loaded(&self, result: Result<usize, ()>) {
        match result {
            Ok(count) => {
                self.grants.set(clamp(count as u64));
                self.grant_reloads.get_or_create(&[("outcome", "ok")]).inc();
            }
            Err(()) => {
                self.grant_reloads
                    .get_or_create(&[("outcome", "failed")])
                    .inc();
            }
        }
    }

    /// Sets the grants in force at start (not a reload).
    pub fn set_grants(&self, count: usize) {
        self.grants.set(clamp(count as u64));
    }

    /// Records one recall.
    pub fn observe_recall(&self, mode: RecallMode, outcome: Option<ErrorKind>, elapsed: Duration) {
        let outcome = outcome.map_or("ok", ErrorKind::as_str);
        self.recall_seconds
            .get_or_create(&[("mode", mode.as_str()), ("outcome", outcome)])
            .observe(elapsed.as_secs_f64());
        self.history.record_recall(outcome == "ok", elapsed);
    }

    /// Counts one write by its result: `Ok(replayed)` or the refusal's kind.
    pub fn count_write(&self, result: Result<bool, ErrorKind>) {
        self.history.record_write(result.is_ok());
        let result = match result {
            Ok(false) => "written",
            Ok(true) => "replayed",
            Err(kind) => kind.as_str(),
        };
        self.writes.get_or_create(&[("result", result)]).inc();
    }

    /// Sets the gauges read at a scrape.
    pub fn set_index(&self, snapshot: &IndexSnapshot) {
        self.set_model();
        self.set_folds();
        self.head.set(clamp(snapshot.head));
        self.model_loaded.set(i64::from(snapshot.index.is_some()));
        let Some(index) = &snapshot.index else {
            return;
        };
        self.indexed.set(clamp(index.indexed));
        self.lag
            .set(clamp(snapshot.head.saturating_sub(index.indexed)));
        self.chunks.set(clamp(index.chunks));
        self.capacity.set(clamp(index.capacity));
        self.compact_vectors.set(i64::from(index.compact_vectors));
        self.ef_search.set(clamp(index.ef_search));
        for reason in UNINDEXED_REASONS {
            let count = index
                .unindexed
                .iter()
                .filter(|(name, _)| name == reason)
                .map(|(_, count)| *count)
                .sum();
            self.unindexed
                .get_or_create(&[("reason", reason.to_owned())])
                .set(clamp(count));
        }
        for (reason, count) in &index.unindexed {
            if !UNINDEXED_REASONS.contains(&reason.as_str()) {
                self.unindexed
                    .get_or_create(&[("reason", reason.clone())])
                    .set(clamp(*count));
            }
        }
        for state in HNSW_STATES {
            self.hnsw
                .get_or_create(&[("state", state)])
                .set(i64::from(state == index.hnsw));
        }
    }

    /// The writes and recalls of the last day, minute by minute.
    pub fn history(&self) -> &MetricsHistory {
        &self.history
    }

    /// The metrics as OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}

fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_encoded_with_bounded_labels() {
        let metrics = ServerMetrics::new();
        metrics.observe_recall(RecallMode::Hybrid, None, Duration::from_millis(12));
        metrics.observe_recall(
            RecallMode::Lexical,
            Some(ErrorKind::Deadline),
            Duration::from_millis(3),
        );
        metrics.count_write(Ok(false));
        metrics.count_write(Ok(true));
        metrics.count_write(Err(ErrorKind::Conflict));
        metrics.set_index(&IndexSnapshot {
            head: 10,
            index: Some(LoadedIndex {
                indexed: 7,
                chunks: 4,
                capacity: 100,
                unindexed: vec![("too_large".to_owned(), 1)],
                hnsw: "ready",
                compact_vectors: true,
                ef_search: 40,
            }),
        });
        let text = metrics.encode();
        for line in [
            "memory_recall_duration_seconds_count{mode=\"hybrid\",outcome=\"ok\"} 1",
            "memory_recall_duration_seconds_count{mode=\"lexical\",outcome=\"deadline\"} 1",
            "memory_writes_total{result=\"written\"} 1",
            "memory_writes_total{result=\"replayed\"} 1",
            "memory_writes_total{result=\"conflict\"} 1",
            "memory_index_lag 3",
            "memory_chunks 4",
            "memory_index_compact_vectors 1",
            "memory_hnsw_ef_search 40",
            "memory_unindexed_documents{reason=\"too_large\"} 1",
            "memory_unindexed_documents{reason=\"capacity\"} 0",
            "memory_hnsw_state{state=\"ready\"} 1",
            "memory_hnsw_state{state=\"building\"} 0",
            "memory_model_loaded 1",
            "# EOF",
        ] {
            assert!(
                text.lines().any(|candidate| candidate == line),
                "{line} in\n{text}"
            );
        }
    }
}
