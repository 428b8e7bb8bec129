//! `turn-end`'s reading of a Claude Code transcript (JSON Lines): a bounded read from the offset the
//! last appended message recorded, and the assistant messages in it.
//!
//! Where the read starts is kept in the thread log itself: every assistant record `turn-end` appends
//! carries a [`TranscriptCursor`] in its `opaque_cursor` (the transcript's path digest, the offset just
//! past the record's line, and that line's length and digest). The offset is therefore committed in the
//! same transaction as the message: a hook killed between two appends resumes after the last one, and
//! no message is appended twice. The line digest anchors the offset to the content: a transcript that
//! is shorter than the offset (truncated) or holds another line there (replaced, rotated) is an error,
//! never a reason to re-read from the start.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;

use serde_json::Value;

use crate::hook::input::hex_digest;

/// The `opaque_cursor` prefix of records appended by `turn-end` from a transcript.
pub const CURSOR_PREFIX: &str = "memory-hook/v1 transcript ";

/// Where one appended message's line ended in its transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptCursor {
    /// First 16 hex digits of SHA-256 over the transcript's path.
    pub path: String,
    /// The offset just past the line (where the next read starts).
    pub offset: u64,
    /// The line's length in bytes, newline included.
    pub line_len: u64,
    /// First 16 hex digits of SHA-256 over the line.
    pub line_digest: String,
}

impl TranscriptCursor {
    /// The `opaque_cursor` text.
    pub fn encode(&self) -> String {
        format!(
            "{CURSOR_PREFIX}{} {} {} {}",
            self.path, self.offset, self.line_len, self.line_digest
        )
    }

    /// Reads a cursor written by [`Self::encode`]; `None` for any other cursor.
    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.strip_prefix(CURSOR_PREFIX)?.split(' ');
        let cursor = Self {
            path: parts.next()?.to_owned(),
            offset: parts.next()?.parse().ok()?,
            line_len: parts.next()?.parse().ok()?,
            line_digest: parts.next()?.to_owned(),
        };
        (parts.next().is_none() && cursor.line_len <= cursor.offset).then_some(cursor)
    }
}

/// The path digest a cursor names.
pub fn path_digest(path: &str) -> String {
    hex_digest(path.as_bytes())[..16].to_owned()
}

/// Why the transcript cannot be read on.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// The file could not be opened or read.
    #[error("the transcript could not be read: {0}")]
    Io(#[from] std::io::Error),
    /// It is shorter than what was already read.
    #[error(
        "the transcript is truncated: {length} bytes, but {offset} were already read; nothing is \
         appended from it (start a new session to record again)"
    )]
    Truncated {
        /// Its length now.
        length: u64,
        /// What was read before.
        offset: u64,
    },
    /// It holds other content where the last read ended, or is another file.
    #[error(
        "the transcript was rotated or rewritten: {what}; nothing is appended from it (start a new \
         session to record again)"
    )]
    Rotated {
        /// What differs.
        what: &'static str,
    },
    /// One line is longer than a whole read may be.
    #[error("a transcript line is longer than --max-transcript-bytes ({max}); raise it to read on")]
    LineTooLong {
        /// The bound.
        max: u64,
    },
}

/// One assistant message found in the transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistantMessage {
    /// Its text blocks, joined by blank lines.
    pub text: String,
    /// Where its line ended.
    pub cursor: TranscriptCursor,
}

/// What one bounded read found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TranscriptRead {
    /// The assistant messages with text, in order.
    pub messages: Vec<AssistantMessage>,
    /// Complete lines read.
    pub lines: u64,
    /// Lines that were not JSON (reported, never appended).
    pub malformed: u64,
}

/// Reads the complete lines of `path` after `last` (from the start when `None`), at most `max_bytes`.
pub fn read_new(
    path: &str,
    last: Option<&TranscriptCursor>,
    max_bytes: u64,
) -> Result<TranscriptRead, TranscriptError> {
    let digest = path_digest(path);
    let mut file = std::fs::File::open(Path::new(path))?;
    let length = file.metadata()?.len();
    let start = match last {
        None => 0,
        Some(cursor) => {
            if cursor.path != digest {
                return Err(TranscriptError::Rotated {
                    what: "the session's transcript is another file than before",
                });
            }
            if length < cursor.offset {
                return Err(TranscriptError::Truncated {
                    length,
                    offset: cursor.offset,
                });
            }
            // A line the last read accepted fits one read; a bigger one means the bound shrank.
            if cursor.line_len > max_bytes {
                return Err(TranscriptError::LineTooLong { max: max_bytes });
            }
            let mut line = vec![0; usize::try_from(cursor.line_len).unwrap_or(0)];
            file.seek(SeekFrom::Start(cursor.offset - cursor.line_len))?;
            file.read_exact(&mut line)?;
            if hex_digest(&line)[..16] != cursor.line_digest {
                return Err(TranscriptError::Rotated {
                    what: "the line the last read ended with is not there any more",
                });
            }
            cursor.offset
        }
    };
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(max_bytes).read_to_end(&mut bytes)?;
    let complete = bytes
        .iter()
        .rposition(|byte| *byte == b'\n')
        .map_or(0, |last| last + 1);
    if complete == 0 && bytes.len() as u64 == max_bytes && max_bytes > 0 {
        return Err(TranscriptError::LineTooLong { max: max_bytes });
    }
    let mut read = TranscriptRead::default();
    let mut offset = start;
    for line in bytes[..complete].split_inclusive(|byte| *byte == b'\n') {
        offset += line.len() as u64;
        read.lines += 1;
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            read.malformed += 1;
            continue;
        };
        if let Some(text) = assistant_text(&value) {
            read.messages.push(AssistantMessage {
                text,
                cursor: TranscriptCursor {
                    path: digest.clone(),
                    offset,
                    line_len: line.len() as u64,
                    line_digest: hex_digest(line)[..16].to_owned(),
                },
            });
        }
    }
    Ok(read)
}

/// The text an assistant line says: its `text` content blocks (tool calls, tool results and thinking
/// are not the assistant's words to the user), or `None` when there is none.
fn assistant_text(line: &Value) -> Option<String> {
    if line.get("type").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    let message = line.get("message")?;
    if message.get("role").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    let text = match message.get("content")? {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .filter(|text| !text.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_other_cursors_are_not_ours() {
        let cursor = TranscriptCursor {
            path: "0123456789abcdef".to_owned(),
            offset: 120,
            line_len: 40,
            line_digest: "fedcba9876543210".to_owned(),
        };
        assert_eq!(TranscriptCursor::decode(&cursor.encode()), Some(cursor));
        for other in [
            "resp_1",
            "memory-hook/v1 transcript a 1",
            "memory-hook/v1 transcript a 1 5 b",
        ] {
            assert_eq!(TranscriptCursor::decode(other), None, "{other}");
        }
    }

    #[test]
    fn only_text_blocks_of_assistant_lines_are_messages() {
        let line = serde_json::json!({"type": "assistant", "message": {"role": "assistant",
            "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "Done."},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}});
        assert_eq!(assistant_text(&line).as_deref(), Some("Done."));
        let tool_only = serde_json::json!({"type": "assistant", "message": {"role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}});
        assert_eq!(assistant_text(&tool_only), None);
        let user =
            serde_json::json!({"type": "user", "message": {"role": "user", "content": "hi"}});
        assert_eq!(assistant_text(&user), None);
    }
}
