//! Forgotten thread records: which records of a thread are forgotten, and what every read shows in
//! their place.
//!
//! `memory thread forget` suppresses a record's source ([`SourceId::thread_record`]); the log stays
//! append-only (SPEC §5), so forgetting is suppression on every read, not erasure. Every read of a
//! thread (the context layer's folds, views and compaction plans, the history tools, and through them
//! every door: CLI, MCP, hook, Python) asks the store once for the thread's suppressions
//! ([`ForgottenRecords::read`]) and shows a forgotten record as its placeholder
//! ([`forgotten_placeholder`]): the record keeps its kind, sequence, speaker and what pairs a tool call
//! with its result (the call id), and nothing of its text, arguments or output. Its content is the
//! JSON `{"forgotten": true, "sequence": N, "forgotten_at": MS}`.
//!
//! A suppression of every revision forgets the record; one naming a revision forgets it only when that
//! revision is the record's digest (the only content an append-only record ever has). Edit, delete and
//! revoke events suppress the same way, so each of them forgets the record here too.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::rules::intents::ALL_REVISIONS;
use super::{
    ActivityError, CompactionRecord, RecordBody, RecordSuppression, RememberingStore, Sequence,
    SourceId, SourceRevision, ThreadId, ThreadRecord, ThreadSuppressions,
};
use crate::document::EpochMillis;

/// The tool name a forgotten tool call shows.
pub const FORGOTTEN_TOOL_NAME: &str = "forgotten";

/// A stored suppression row (`source`, `revision` column, `suppressed_at`) as a suppression of one of
/// `thread`'s records; `None` when the row names another source or another thread. The store's one
/// rule for [`RememberingStore::thread_suppressions`]: the source must be exactly
/// [`SourceId::thread_record`] of this thread.
pub fn record_suppression(
    thread: &ThreadId,
    source: &str,
    revision: &str,
    suppressed_at: EpochMillis,
) -> Option<RecordSuppression> {
    let (of, sequence) = SourceId::new(source).ok()?.as_thread_record()?;
    if &of != thread {
        return None;
    }
    let revision = if revision == ALL_REVISIONS {
        None
    } else {
        Some(SourceRevision::new(revision).ok()?)
    };
    Some(RecordSuppression {
        sequence,
        revision,
        suppressed_at,
    })
}

/// The forgotten records of one thread, as read at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForgottenRecords {
    records: BTreeMap<Sequence, Vec<(Option<SourceRevision>, EpochMillis)>>,
    generation: u64,
}

impl ForgottenRecords {
    /// Nothing forgotten (a reader with no suppression store).
    pub fn none() -> Self {
        Self::default()
    }

    /// The thread's forgotten records, in one store call.
    pub fn read(store: &dyn RememberingStore, thread: &ThreadId) -> Result<Self, ActivityError> {
        Ok(Self::from(store.thread_suppressions(thread)?))
    }

    /// The store's suppression generation when this was read (see [`ThreadSuppressions::generation`]).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether no record of the thread has a suppression.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Whether the same suppressions name the thread's records (the generation aside).
    pub fn same_records(&self, other: &Self) -> bool {
        self.records == other.records
    }

    /// A fingerprint of the suppressions naming the thread's records: equal exactly when
    /// [`ForgottenRecords::same_records`] holds (what a persisted fold checkpoint was folded with).
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        for (sequence, revisions) in &self.records {
            hasher.update(sequence.get().to_be_bytes());
            hasher.update((revisions.len() as u64).to_be_bytes());
            for (revision, at) in revisions {
                let revision = revision.as_ref().map_or("", |revision| revision.as_str());
                hasher.update((revision.len() as u64).to_be_bytes());
                hasher.update(revision.as_bytes());
                hasher.update(at.to_be_bytes());
            }
        }
        crate::ids::lower_hex(&hasher.finalize())
    }

    /// When `record` was forgotten (the earliest suppression that covers it), or `None`.
    pub fn forgotten_at(&self, record: &ThreadRecord) -> Option<EpochMillis> {
        let digest = SourceRevision::of_record(&record.digest);
        self.records
            .get(&record.sequence)?
            .iter()
            .filter(|(revision, _)| revision.as_ref().is_none_or(|revision| *revision == digest))
            .map(|(_, at)| *at)
            .min()
    }

    /// The record as a read shows it: its placeholder when it is forgotten, else itself.
    pub fn shown(&self, record: ThreadRecord) -> (ThreadRecord, Option<EpochMillis>) {
        match self.forgotten_at(&record) {
            Some(at) => (forgotten_placeholder(&record, at), Some(at)),
            None => (record, None),
        }
    }
}

impl From<ThreadSuppressions> for ForgottenRecords {
    fn from(suppressions: ThreadSuppressions) -> Self {
        let mut records: BTreeMap<Sequence, Vec<(Option<SourceRevision>, EpochMillis)>> =
            BTreeMap::new();
        for suppression in suppressions.records {
            let revisions = records.entry(suppression.sequence).or_default();
            revisions.push((suppression.revision, suppression.suppressed_at));
            revisions.sort();
        }
        Self {
            records,
            generation: suppressions.generation,
        }
    }
}

/// The placeholder content of a forgotten record: `{"forgotten": true, "sequence": N, "forgotten_at":
/// MS}`.
pub fn placeholder_content(sequence: Sequence, forgotten_at: EpochMillis) -> Value {
    json!({"forgotten": true, "sequence": sequence.get(), "forgotten_at": forgotten_at})
}

/// A forgotten record's stand-in: the same thread, sequence, digest, speaker and time, a body of the
/// same kind whose text (a call's arguments, a result's output) is [`placeholder_content`], and
/// whatever pairs calls with results kept (a tool call's and a tool result's call id). Observers and
/// the provider cursor are dropped. A forgotten compaction keeps its ranges, and its summary becomes
/// the placeholder (the context layer withdraws it).
pub fn forgotten_placeholder(record: &ThreadRecord, forgotten_at: EpochMillis) -> ThreadRecord {
    let content = placeholder_content(record.sequence, forgotten_at);
    let text = content.to_string();
    let body = match &record.record.body {
        RecordBody::UserInput { .. } => RecordBody::UserInput { text },
        RecordBody::AssistantMessage { .. } => RecordBody::AssistantMessage { text },
        RecordBody::SystemMessage { .. } => RecordBody::SystemMessage { text },
        RecordBody::RunCompleted { .. } => RecordBody::RunCompleted { outcome: text },
        RecordBody::ToolCall { call_id, .. } => RecordBody::ToolCall {
            call_id: call_id.clone(),
            name: FORGOTTEN_TOOL_NAME.to_owned(),
            arguments: content,
        },
        RecordBody::ToolResult { call_id, .. } => RecordBody::ToolResult {
            call_id: call_id.clone(),
            output: content,
            is_error: false,
        },
        // The structure stays (what it folded, what it replaced), so the fold can withdraw it and
        // every compaction that replaced it; the summary's text does not.
        RecordBody::Compaction(compaction) => RecordBody::Compaction(CompactionRecord {
            summary: compaction.summary.as_ref().map(|_| text),
            summarizer: None,
            ..compaction.clone()
        }),
        // The boundary stays (the window still starts there); what the model wrote and what was
        // copied from the covered records do not.
        RecordBody::Rollover(rollover) => RecordBody::Rollover(super::RolloverRecord {
            handoff: rollover.handoff.as_ref().map(|_| text),
            excerpts: None,
            ..rollover.clone()
        }),
    };
    let mut shown = record.clone();
    shown.record.body = body;
    shown.record.observers = Vec::new();
    shown.record.opaque_cursor = None;
    shown
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::{NewRecord, RecordDigest};

    fn thread(id: &str) -> ThreadId {
        ThreadId::new(id).expect("valid")
    }

    fn record(sequence: u64, body: RecordBody) -> ThreadRecord {
        let record = NewRecord {
            occurred_at: Some(5),
            speaker: "ana".to_owned(),
            observers: vec!["bo".to_owned()],
            body,
            opaque_cursor: Some("cursor".to_owned()),
        };
        ThreadRecord {
            thread: thread("t1"),
            sequence: Sequence::new(sequence),
            digest: RecordDigest::of(&thread("t1"), Sequence::new(sequence), &record),
            record,
        }
    }

    #[test]
    fn only_the_exact_thread_record_source_is_read() {
        let t1 = thread("t1");
        let at = |source: &str| record_suppression(&t1, source, "", 7);
        assert_eq!(
            at("thread-record/3/t1"),
            Some(RecordSuppression {
                sequence: Sequence::new(3),
                revision: None,
                suppressed_at: 7
            })
        );
        for other in [
            "thread-record/3/xt1",
            "thread-record/3/x/t1",
            "thread-record/03/t1",
            "thread-record/3/t10",
            "note/t1",
        ] {
            assert_eq!(at(other), None, "{other}");
        }
    }

    #[test]
    fn a_placeholder_keeps_pairing_and_nothing_of_the_text() {
        let call = record(
            4,
            RecordBody::ToolCall {
                call_id: "c1".to_owned(),
                name: "pin_lookup".to_owned(),
                arguments: json!({"pin": "4417"}),
            },
        );
        let shown = forgotten_placeholder(&call, 99);
        let text = serde_json::to_string(&shown.record).expect("serializes");
        assert!(
            !text.contains("4417") && !text.contains("pin_lookup"),
            "{text}"
        );
        assert!(shown.record.observers.is_empty() && shown.record.opaque_cursor.is_none());
        assert_eq!(
            shown.record.body,
            RecordBody::ToolCall {
                call_id: "c1".to_owned(),
                name: FORGOTTEN_TOOL_NAME.to_owned(),
                arguments: json!({"forgotten": true, "sequence": 4, "forgotten_at": 99}),
            }
        );
        let said = record(
            1,
            RecordBody::UserInput {
                text: "My bank PIN is 4417".to_owned(),
            },
        );
        let RecordBody::UserInput { text } = forgotten_placeholder(&said, 99).record.body else {
            panic!("a user input stays one");
        };
        assert_eq!(
            serde_json::from_str::<Value>(&text).expect("json"),
            json!({"forgotten": true, "sequence": 1, "forgotten_at": 99})
        );
    }

    #[test]
    fn a_revision_suppression_forgets_only_that_digest() {
        let said = record(
            2,
            RecordBody::UserInput {
                text: "hello".to_owned(),
            },
        );
        let of = |revision: Option<&str>, at| ThreadSuppressions {
            records: vec![RecordSuppression {
                sequence: Sequence::new(2),
                revision: revision.map(|revision| SourceRevision::new(revision).expect("valid")),
                suppressed_at: at,
            }],
            generation: 1,
        };
        let digest = SourceRevision::of_record(&said.digest);
        assert_eq!(
            ForgottenRecords::from(of(Some("other"), 3)).forgotten_at(&said),
            None
        );
        assert_eq!(
            ForgottenRecords::from(of(Some(digest.as_str()), 3)).forgotten_at(&said),
            Some(3)
        );
        assert_eq!(
            ForgottenRecords::from(of(None, 4)).forgotten_at(&said),
            Some(4)
        );
        assert_eq!(ForgottenRecords::none().forgotten_at(&said), None);
    }
}
