//! `lookup_failure` keeps the kind of every semantic failure it translates into a recall answer.

use memory_core::StoreFault;
use memory_core::vectors::SourceGeneration;
use memory_core::{ErrorKind, MemoryError, MemoryLookup};
use semantic_index::recall::lookup_failure;
use semantic_index::{EmbedError, SemanticError};

fn failures() -> Vec<SemanticError> {
    vec![
        SemanticError::InvalidInput {
            field: "query",
            reason: "empty".to_owned(),
        },
        SemanticError::TooLarge {
            limit: "query bytes",
            max: 1,
            actual: 2,
        },
        SemanticError::Budget {
            limit: "candidates",
            max: 1,
            actual: 2,
        },
        SemanticError::Deadline { timeout_ms: 5 },
        SemanticError::Withdrawn,
        SemanticError::Fenced {
            current: SourceGeneration::new(2),
            attempted: SourceGeneration::new(1),
        },
        SemanticError::Divergent {
            generation: SourceGeneration::new(2),
        },
        SemanticError::Store(MemoryError::Store(StoreFault::Busy { operation: "read" })),
        SemanticError::Store(MemoryError::Store(StoreFault::Corrupt {
            what: "row".to_owned(),
        })),
    ]
}

#[test]
fn every_store_or_query_failure_keeps_its_kind() {
    for failure in failures() {
        let kind = failure.kind();
        let described = failure.to_string();
        match lookup_failure(failure) {
            Err(error) => assert_eq!(error.kind(), kind, "{described}"),
            Ok(lookup) => panic!("{described} became the answer {lookup:?}"),
        }
    }
}

#[test]
fn embedder_and_task_failures_are_an_unavailable_source_not_an_error() {
    for failure in [
        SemanticError::Embed(EmbedError::ModelMismatch),
        SemanticError::Task { what: "refresh" },
    ] {
        assert_eq!(failure.kind(), ErrorKind::Unavailable);
        assert!(matches!(
            lookup_failure(failure),
            Ok(MemoryLookup::Unavailable { .. })
        ));
    }
}
