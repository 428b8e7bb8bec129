//! Working notes: one memory document per thread that the model reads and rewrites whole
//! (`memory_read_notes`, `memory_write_notes`), shown in every assembled context of the thread.
//!
//! The host binds the notes, never the model: the document lives in the thread's destination (its
//! binding's namespace and first scope; an unbound thread's come from the caller's defaults, as its
//! memory does), its id is `notes/<thread>` unless the operator sets another (`--notes-id`, where
//! `{thread}` stands for the thread's id; an id without it makes one notes document shared by every
//! thread of a destination), its locator is `thread:<thread>#notes`, and its one attribution names
//! the speaker `notes` with the interpretation `working-notes`. The model passes only the text and
//! the revision it read.
//!
//! A write is a full replacement with the expected revision (`null` for the first): a stale one is a
//! `conflict` whose message says to read the notes again and merge. Its operation id is derived from
//! the thread, the expected revision and the text, so a retried write is answered as the first
//! (`replayed`). The notes are a memory document, so they survive restarts with the store; recall may
//! find them like any memory of the destination. The remembering worker reads thread records only,
//! never notes.

use std::sync::Arc;

use memory_context::TurnNotes;
use memory_core::activity::ThreadId;
use memory_core::{Clock, ErrorKind};
use memory_core::{
    DocumentId, MemoryAttribution, MemoryContent, MemoryKey, MemoryWrite, OperationId, Revision,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::MemorySource;
use crate::database::Store;
use crate::refusal::Refusal;
use crate::service::MemoryService;
use crate::wire::{WriteResult, address_of};

/// Most characters of a thread's notes.
pub const MAX_NOTES_CHARS: usize = 20_000;
/// The notes document's id unless the operator sets another; `{thread}` is the thread's id.
pub const DEFAULT_NOTES_ID: &str = "notes/{thread}";
/// The speaker of the notes' attribution.
pub const NOTES_SPEAKER: &str = "notes";

/// Arguments of `memory_read_notes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadNotesArguments {
    /// The thread.
    pub thread: String,
}

/// Arguments of `memory_write_notes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteNotesArguments {
    /// The thread.
    pub thread: String,
    /// The whole new notes (at most 20,000 characters): they replace the old ones.
    pub text: String,
    /// The revision `memory_read_notes` answered (`null` when there were no notes yet).
    #[serde(default)]
    pub expected_revision: Option<String>,
}

/// The answer of `memory_read_notes` and `memory_write_notes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NotesAnswer {
    /// The thread.
    pub thread: String,
    /// The notes document's id.
    pub id: String,
    /// The current revision; `null` when there are no notes yet (pass it back to write).
    pub revision: Option<String>,
    /// The notes ("" when there are none).
    pub text: String,
    /// When they were last written, epoch milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_at: Option<i64>,
    /// For a write: whether it was a retry answered as the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed: Option<bool>,
}

/// Where a server keeps each thread's notes: the id template (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotesBinding {
    template: String,
}

impl Default for NotesBinding {
    fn default() -> Self {
        Self {
            template: DEFAULT_NOTES_ID.to_owned(),
        }
    }
}

impl NotesBinding {
    /// Notes at ids made from `template` (`{thread}`: the thread's id), checked as a document id.
    pub fn new(template: impl Into<String>) -> Result<Self, Refusal> {
        let binding = Self {
            template: template.into(),
        };
        DocumentId::new(binding.id(&ThreadId::new("t")?))
            .map_err(|error| Refusal::invalid_input(format!("--notes-id: {error}")))?;
        Ok(binding)
    }

    fn id(&self, thread: &ThreadId) -> String {
        self.template.replace("{thread}", thread.as_str())
    }

    /// The notes document of `thread`, whose memory comes from `source`.
    pub fn key(&self, thread: &ThreadId, source: &MemorySource) -> Result<MemoryKey, Refusal> {
        Ok(MemoryKey {
            namespace: address_of(&source.namespace)?,
            id: DocumentId::new(self.id(thread))?,
        })
    }
}

/// Checks notes text: at most [`MAX_NOTES_CHARS`] characters (empty clears them).
pub fn check_notes(text: &str) -> Result<(), Refusal> {
    if text.chars().nth(MAX_NOTES_CHARS).is_some() {
        return Err(Refusal::new(
            ErrorKind::TooLarge,
            format!("text: notes are at most {MAX_NOTES_CHARS} characters"),
        ));
    }
    Ok(())
}

/// The notes at `key` in `store` (none when never written, or withdrawn).
pub async fn read_notes<S: Store>(
    store: &Arc<S>,
    thread: &ThreadId,
    key: &MemoryKey,
) -> Result<NotesAnswer, Refusal> {
    let current = crate::service::read_current(store, key)
        .await?
        .filter(|document| document.withdrawn.is_none());
    Ok(NotesAnswer {
        thread: thread.as_str().to_owned(),
        id: key.id.as_str().to_owned(),
        revision: current
            .as_ref()
            .map(|document| document.revision.as_str().to_owned()),
        modified_at: current.as_ref().map(|document| document.modified_at),
        text: current
            .map(|document| document.content.text)
            .unwrap_or_default(),
        replayed: None,
    })
}

/// The notes a turn of `thread` shows: none when there are none, or they are empty.
pub async fn turn_notes<S: Store>(
    store: &Arc<S>,
    binding: &NotesBinding,
    thread: &ThreadId,
    source: &MemorySource,
) -> Result<Option<TurnNotes>, Refusal> {
    let key = binding.key(thread, source)?;
    let notes = read_notes(store, thread, &key).await?;
    Ok(match notes.revision {
        Some(revision) if !notes.text.trim().is_empty() => Some(TurnNotes {
            id: notes.id,
            revision,
            text: notes.text,
        }),
        _ => None,
    })
}

/// Replaces the notes at `key` (scoped to `source`'s scope) with `text`, expecting `expected`.
pub async fn write_notes<S: Store>(
    service: &MemoryService<S>,
    thread: &ThreadId,
    key: MemoryKey,
    source: &MemorySource,
    text: String,
    expected: Option<String>,
) -> Result<NotesAnswer, Refusal> {
    check_notes(&text)?;
    let digest = crate::simple::hex_digest(&[
        key.namespace.as_str().as_bytes(),
        key.id.as_str().as_bytes(),
        expected.as_deref().unwrap_or("").as_bytes(),
        text.as_bytes(),
    ]);
    let operation_id = OperationId::new(format!("notes-{}", &digest[..32]))?;
    let locator = format!("thread:{}#notes", thread.as_str());
    let now = memory_core::SystemClock.now_millis();
    let write = MemoryWrite::Put {
        key: key.clone(),
        operation_id: operation_id.clone(),
        expected_revision: expected.map(Revision::new).transpose()?,
        locator: locator.clone(),
        content: MemoryContent {
            text,
            attributions: vec![MemoryAttribution {
                origin_id: operation_id.as_str().to_owned(),
                speaker: NOTES_SPEAKER.to_owned(),
                observers: Vec::new(),
                locator,
                activity_at: None,
                interpretation: "working-notes".to_owned(),
            }],
            metadata: serde_json::Map::new(),
            recorded_at: now,
            extracted_at: now,
        },
        scopes: vec![source.scope.clone()],
    };
    let written: WriteResult = service.write(write).await.map_err(|refusal| {
        if refusal.kind() == ErrorKind::Conflict {
            Refusal::new(
                ErrorKind::Conflict,
                "the notes changed since the revision given: read them again (memory_read_notes), \
                 merge your changes into what they say now, and write with the revision read",
            )
        } else {
            refusal
        }
    })?;
    Ok(NotesAnswer {
        thread: thread.as_str().to_owned(),
        id: key.id.as_str().to_owned(),
        revision: Some(written.revision),
        text: written.document.content.text,
        modified_at: Some(written.document.modified_at),
        replayed: Some(written.replayed),
    })
}
