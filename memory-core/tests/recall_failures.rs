//! Deadline and failure behaviour of recall. Time is paused (tokio test-util), so nothing waits for real.
#![allow(clippy::unwrap_used)]

use crate::recall_support;

use std::time::Duration;

use memory_core::StoreFault;
use memory_core::recall::{MemoryLookup, RecallSource, SourceStatus};
use memory_core::{ErrorKind, MemoryError, RecallError};
use recall_support::*;

fn sleeping(id: &str, essential: bool, millis: u64) -> RecallSource<'static> {
    RecallSource::new(source_id(id), essential, async move {
        tokio::time::sleep(Duration::from_millis(millis)).await;
        Ok(MemoryLookup::Found {
            passages: vec![passage("a", "p", Some("1"), "late")],
        })
    })
}

#[tokio::test(start_paused = true)]
async fn a_source_sleeping_past_the_deadline_gives_a_deadline_error() {
    // limits(..) has a 1,000 ms deadline.
    let error = recall_with(vec![sleeping("slow", false, 1_001)], &limits(4))
        .await
        .unwrap_err();
    assert!(
        matches!(error, RecallError::Deadline { timeout_ms: 1_000 }),
        "{error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::Deadline);
}

#[tokio::test(start_paused = true)]
async fn sources_are_read_concurrently_under_one_deadline() {
    // Sequential reads would take 1,200 ms and miss the 1,000 ms deadline.
    let recalled = recall_with(
        vec![
            sleeping("first", false, 600),
            sleeping("second", false, 600),
        ],
        &limits(4),
    )
    .await
    .unwrap();
    assert!(
        recalled
            .outcomes
            .iter()
            .all(|outcome| outcome.status == SourceStatus::Found)
    );
}

#[tokio::test(start_paused = true)]
async fn a_source_error_propagates_with_its_type_even_from_an_optional_source() {
    let failing = RecallSource::optional(source_id("flaky"), async {
        Err(MemoryError::Store(StoreFault::Busy {
            operation: "search",
        })
        .into())
    });
    let error = recall_with(vec![sleeping("slow", false, 10), failing], &limits(4))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            RecallError::Source(MemoryError::Store(StoreFault::Busy {
                operation: "search"
            }))
        ),
        "{error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::Unavailable);
}

async fn flaky_search() -> Result<MemoryLookup, MemoryError> {
    Err(MemoryError::Store(StoreFault::Busy {
        operation: "search",
    }))
}

#[tokio::test(start_paused = true)]
async fn a_reader_that_maps_its_failure_to_unavailable_degrades_gracefully() {
    let degrading = RecallSource::optional(source_id("flaky"), async {
        Ok(match flaky_search().await {
            Ok(lookup) => lookup,
            Err(error) => MemoryLookup::Unavailable {
                reason: error.kind().as_str().to_owned(),
            },
        })
    });
    let recalled = recall_with(vec![degrading, sleeping("ok", false, 10)], &limits(4))
        .await
        .unwrap();
    assert_eq!(
        recalled.outcomes[0].status,
        SourceStatus::Unavailable {
            reason: "unavailable".to_owned()
        }
    );
    assert_eq!(recalled.passages.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_unavailable_essential_source_fails_and_an_unavailable_optional_one_is_reported() {
    let unavailable = || MemoryLookup::Unavailable {
        reason: "offline".to_owned(),
    };
    let error = recall_with(
        vec![
            answering("needed", true, unavailable()),
            sleeping("ok", false, 10),
        ],
        &limits(4),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, RecallError::EssentialUnavailable { .. }),
        "{error:?}"
    );

    let recalled = recall_with(
        vec![
            answering("extra", false, unavailable()),
            sleeping("ok", true, 10),
        ],
        &limits(4),
    )
    .await
    .unwrap();
    assert_eq!(
        recalled.outcomes[0].status,
        SourceStatus::Unavailable {
            reason: "offline".to_owned()
        }
    );
    assert_eq!(recalled.outcomes[1].selected, 1);
}
