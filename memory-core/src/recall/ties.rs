//! The tie rule of ranked recall: among passages of near-equal relevance, the newer is cited first.
//!
//! A memory that was corrected later ("Actually I moved to Madrid, not Lisbon") usually scores about
//! as well as what it corrects, since both name the same things; a ranking by relevance alone then
//! cites whichever happens to score a hair higher. So every ranked recall (lexical, semantic and
//! hybrid) runs its scored passages through [`newer_first_among_ties`] after revalidation:
//!
//! - Passages form **tie groups**: walking the ranking best first, a passage joins the current group
//!   while its score is within [`TIE_TOLERANCE`] (relative to the group's first, best score) of it,
//!   else it starts a new group. Groups never reorder with respect to one another, so a clearly better
//!   passage is never pushed down by a newer, weaker one.
//! - Within a group, passages are ordered by their **activity time**, newest first: the latest
//!   `activity_at` among the passage's attributions, else its document's `recorded_at`. Passages of
//!   equal time (the chunks of one document) keep their order.
//! - Time never withdraws anything: the older passage stays in the result, with its own activity time
//!   shown by the rendering, so a reader sees both and which is newer.

use crate::document::{EpochMillis, MemoryContent};

/// How close two relevance scores must be, relative to the better one, to count as a tie: 5% (two
/// statements that differ in one word, a city, score about 4% apart by cosine similarity).
pub const TIE_TOLERANCE: f64 = 0.05;

/// When `content` happened: the latest attribution activity time, else when it was recorded.
pub fn activity_time(content: &MemoryContent) -> EpochMillis {
    content
        .attributions
        .iter()
        .filter_map(|attribution| attribution.activity_at)
        .max()
        .unwrap_or(content.recorded_at)
}

/// Reorders `items` (ranked best first, each with its score, higher better) so that within each tie
/// group the newest comes first (see the module docs). `time` gives an item's activity time.
pub fn newer_first_among_ties<T>(
    items: &mut [T],
    score: impl Fn(&T) -> f64,
    time: impl Fn(&T) -> EpochMillis,
) {
    newer_first_among(items, |head, item| near(score(head), score(item)), time);
}

/// [`newer_first_among_ties`] with a tie test of the caller's: `ties(head, item)` says whether
/// `item`, ranked after the group's first item `head`, is of near-equal relevance. Hybrid recall
/// uses it to compare the lists' own scores, which its min-max normalized fused score spreads apart.
pub fn newer_first_among<T>(
    items: &mut [T],
    ties: impl Fn(&T, &T) -> bool,
    time: impl Fn(&T) -> EpochMillis,
) {
    let mut start = 0;
    while start < items.len() {
        let mut end = start + 1;
        while end < items.len() && ties(&items[start], &items[end]) {
            end += 1;
        }
        // Stable: equal times keep the ranking's order.
        items[start..end].sort_by_key(|item| std::cmp::Reverse(time(item)));
        start = end;
    }
}

/// Whether two scores are within [`TIE_TOLERANCE`] of the larger. Scores that are not numbers never
/// tie.
pub fn near(head: f64, other: f64) -> bool {
    if !head.is_finite() || !other.is_finite() {
        return false;
    }
    (head - other).abs() <= TIE_TOLERANCE * head.abs().max(other.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newer_of_near_equal_passages_comes_first_and_a_clearly_better_one_stays_first() {
        // (name, score, time)
        let mut items = vec![
            ("best", 0.9, 1),
            ("old", 0.50, 10),
            ("new", 0.495, 30),
            ("same-doc", 0.495, 30),
            ("weak-newest", 0.2, 99),
        ];
        newer_first_among_ties(&mut items, |item| item.1, |item| item.2);
        let names: Vec<&str> = items.iter().map(|item| item.0).collect();
        assert_eq!(names, ["best", "new", "same-doc", "old", "weak-newest"]);
    }

    #[test]
    fn scores_that_are_not_numbers_and_empty_lists_are_left_alone() {
        let mut items = vec![("a", f64::NAN, 1), ("b", f64::NAN, 2)];
        newer_first_among_ties(&mut items, |item| item.1, |item| item.2);
        assert_eq!(items[0].0, "a");
        let mut empty: Vec<(&str, f64, i64)> = Vec::new();
        newer_first_among_ties(&mut empty, |item| item.1, |item| item.2);
    }
}
