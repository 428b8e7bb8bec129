//! The server's recent metrics, minute by minute, kept in memory for the inspector's charts: writes and
//! recalls (with their refusals) and recall latency, for the last 24 hours at most.
//!
//! Bounded by construction: one [`Minute`] per minute that saw traffic, at most [`MINUTES`] of them,
//! each a fixed size (latency is counted in the same 16 doubling buckets as `/metrics`' histogram,
//! so a minute's percentiles are bucket bounds, not exact). Nothing survives a restart: the history is
//! a view of this process, and `/metrics` is what a monitoring system keeps. The clock is injected, so
//! tests step through minutes without waiting.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use memory_core::{Clock, SystemClock};

/// Minutes kept: 24 hours.
pub const MINUTES: usize = 24 * 60;
/// Latency buckets: upper bounds 1 ms, 2 ms, ... 32,768 ms, then one for anything slower.
const BUCKETS: usize = 17;

/// What one minute saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Minute {
    /// Minutes since the Unix epoch.
    pub at: i64,
    /// Writes answered (written or replayed).
    pub writes: u64,
    /// Writes refused.
    pub refused_writes: u64,
    /// Recalls answered.
    pub recalls: u64,
    /// Recalls refused (a limit, a deadline, a grant).
    pub refused_recalls: u64,
    /// Recalls (answered or refused) per latency bucket.
    latency: [u64; BUCKETS],
}

impl Minute {
    fn empty(at: i64) -> Self {
        Self {
            at,
            ..Self::default()
        }
    }

    /// Adds `other`'s counts to this minute's (a bar of a chart spans several minutes).
    pub fn absorb(&mut self, other: &Minute) {
        self.writes += other.writes;
        self.refused_writes += other.refused_writes;
        self.recalls += other.recalls;
        self.refused_recalls += other.refused_recalls;
        for (mine, theirs) in self.latency.iter_mut().zip(other.latency) {
            *mine += theirs;
        }
    }

    /// The latency under which a `quantile` (0 to 1) of this minute's recalls finished, as the upper
    /// bound of its bucket in milliseconds (`None` without recalls; `u64::MAX` past the last bound).
    pub fn latency_ms(&self, quantile: f64) -> Option<u64> {
        let total: u64 = self.latency.iter().sum();
        if total == 0 {
            return None;
        }
        // The rank of the quantile, at least the first recall: ceil(q * total) in integers.
        let wanted = ((quantile.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, count) in self.latency.iter().enumerate() {
            seen += count;
            if seen >= wanted {
                return Some(bound_ms(bucket));
            }
        }
        Some(u64::MAX)
    }
}

fn bound_ms(bucket: usize) -> u64 {
    if bucket + 1 >= BUCKETS {
        u64::MAX
    } else {
        1 << bucket
    }
}

fn bucket_of(elapsed: Duration) -> usize {
    let millis = elapsed.as_millis();
    (0..BUCKETS - 1)
        .find(|bucket| millis <= u128::from(bound_ms(*bucket)))
        .unwrap_or(BUCKETS - 1)
}

/// The history; cheap to share.
pub struct MetricsHistory {
    clock: Arc<dyn Clock>,
    minutes: Mutex<VecDeque<Minute>>,
}

impl std::fmt::Debug for MetricsHistory {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MetricsHistory")
            .finish_non_exhaustive()
    }
}

impl Default for MetricsHistory {
    fn default() -> Self {
        Self::new(Arc::new(SystemClock))
    }
}

impl MetricsHistory {
    /// An empty history on `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            minutes: Mutex::new(VecDeque::new()),
        }
    }

    fn now(&self) -> i64 {
        self.clock.now_millis().div_euclid(60_000)
    }

    /// Applies `change` to the current minute, dropping minutes older than [`MINUTES`].
    fn record(&self, change: impl FnOnce(&mut Minute)) {
        let now = self.now();
        let mut minutes = self.minutes.lock().unwrap_or_else(PoisonError::into_inner);
        // A clock that stepped back counts into the newest minute rather than reordering the past.
        if minutes.back().is_none_or(|last| last.at < now) {
            minutes.push_back(Minute::empty(now));
        }
        while minutes.len() > MINUTES
            || minutes
                .front()
                .is_some_and(|first| first.at <= now - MINUTES as i64)
        {
            minutes.pop_front();
        }
        if let Some(current) = minutes.back_mut() {
            change(current);
        }
    }

    /// Counts one write: answered (`true`) or refused.
    pub fn record_write(&self, answered: bool) {
        self.record(|minute| {
            if answered {
                minute.writes += 1;
            } else {
                minute.refused_writes += 1;
            }
        });
    }

    /// Counts one recall and its latency: answered (`true`) or refused.
    pub fn record_recall(&self, answered: bool, elapsed: Duration) {
        let bucket = bucket_of(elapsed);
        self.record(|minute| {
            if answered {
                minute.recalls += 1;
            } else {
                minute.refused_recalls += 1;
            }
            minute.latency[bucket] += 1;
        });
    }

    /// The last `count` minutes (at most [`MINUTES`]) through the current one, oldest first, a minute
    /// without traffic as an empty one.
    pub fn last(&self, count: usize) -> Vec<Minute> {
        let count = count.clamp(1, MINUTES);
        let now = self.now();
        let first = now - count as i64 + 1;
        let minutes = self.minutes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut kept = minutes
            .iter()
            .filter(|minute| minute.at >= first)
            .peekable();
        (first..=now)
            .map(|at| {
                kept.next_if(|minute| minute.at == at)
                    .copied()
                    .unwrap_or(Minute::empty(at))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::ManualClock;

    const MINUTE: i64 = 60_000;

    fn history() -> (Arc<ManualClock>, MetricsHistory) {
        let clock = Arc::new(ManualClock::new(1_000 * MINUTE));
        (Arc::clone(&clock), MetricsHistory::new(clock))
    }

    #[test]
    fn each_minute_counts_its_own_traffic_and_quiet_minutes_are_empty() {
        let (clock, history) = history();
        history.record_write(true);
        history.record_write(false);
        history.record_recall(true, Duration::from_millis(3));
        clock.advance(2 * MINUTE);
        history.record_recall(false, Duration::from_millis(40));
        let minutes = history.last(3);
        assert_eq!(
            minutes.iter().map(|minute| minute.at).collect::<Vec<_>>(),
            [1_000, 1_001, 1_002]
        );
        assert_eq!(
            (
                minutes[0].writes,
                minutes[0].refused_writes,
                minutes[0].recalls
            ),
            (1, 1, 1)
        );
        assert_eq!(minutes[1], Minute::empty(1_001));
        assert_eq!(minutes[2].refused_recalls, 1);
        assert_eq!(minutes[0].latency_ms(0.5), Some(4));
        assert_eq!(minutes[2].latency_ms(0.95), Some(64));
        assert_eq!(minutes[1].latency_ms(0.5), None);
    }

    #[test]
    fn percentiles_are_bucket_bounds() {
        let (_, history) = history();
        for millis in [1, 1, 1, 1, 1, 1, 1, 1, 1, 900] {
            history.record_recall(true, Duration::from_millis(millis));
        }
        history.record_recall(true, Duration::from_secs(3_600));
        let minute = history.last(1)[0];
        assert_eq!(minute.latency_ms(0.5), Some(1));
        assert_eq!(minute.latency_ms(0.9), Some(1024));
        assert_eq!(minute.latency_ms(1.0), Some(u64::MAX));
    }

    #[test]
    fn a_day_is_kept_and_no_more() {
        let (clock, history) = history();
        for _ in 0..MINUTES + 10 {
            history.record_write(true);
            clock.advance(MINUTE);
        }
        history.record_write(true);
        let kept = history.minutes.lock().expect("the lock").len();
        assert_eq!(kept, MINUTES);
        let day = history.last(usize::MAX);
        assert_eq!(day.len(), MINUTES);
        assert!(day.iter().all(|minute| minute.writes == 1));
    }

    #[test]
    fn a_clock_that_steps_back_counts_into_the_newest_minute() {
        let (clock, history) = history();
        history.record_write(true);
        clock.advance(-3 * MINUTE);
        history.record_write(true);
        let kept: Vec<Minute> = history
            .minutes
            .lock()
            .expect("the lock")
            .iter()
            .copied()
            .collect();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].writes, 2);
    }
}
