//! `memory import`: `memory_put` arguments from JSON Lines, written in batches.
//!
//! Decisions:
//! - Lines are read within [`MAX_INPUT_BYTES`] each; a longer line is refused (`too-large`) without being
//!   buffered, and the rest of the file is still imported.
//! - A batch holds at most [`BATCH_LINES`] lines and [`BATCH_BYTES`] bytes of input, so memory stays
//!   bounded whatever the file. Each batch is one store transaction; a refused line (bad JSON, conflict,
//!   too large, ...) changes nothing and never stops or undoes the others.
//! - A failure of a batch transaction itself (storage, a poisoned store) stops the import: the store's
//!   state is not trusted enough to write on. Lines committed by earlier batches stay committed.
//! - Blank lines are skipped and not counted.

use std::io::{self, BufRead};

use memory_core::{MemoryError, MemoryWrite, WriteOutcome};
use serde::{Deserialize, Serialize};

use crate::input::MAX_INPUT_BYTES;
use crate::refusal::Refusal;
use crate::service::{Operation, RawArguments, Request};

/// Most lines in one batch.
pub const BATCH_LINES: usize = 512;
/// Most input bytes in one batch (a single longer line still forms its own batch).
pub const BATCH_BYTES: usize = 16 * 1024 * 1024;

/// Applies many writes in one transaction; each answer is independent, a batch failure fails them all.
pub trait BatchWriter {
    /// Applies `writes` in order, one answer per write.
    fn apply_batch(
        &self,
        writes: Vec<MemoryWrite>,
    ) -> Result<Vec<Result<WriteOutcome, MemoryError>>, MemoryError>;
}

impl BatchWriter for memory_sqlite::SqliteStore {
    fn apply_batch(
        &self,
        writes: Vec<MemoryWrite>,
    ) -> Result<Vec<Result<WriteOutcome, MemoryError>>, MemoryError> {
        memory_sqlite::SqliteStore::apply_batch(self, writes)
    }
}

/// One batch is one PostgreSQL transaction too. The import runs on the command's own thread, outside
/// any executor, which is what the blocking call needs.
impl BatchWriter for memory_postgres::PostgresStore {
    fn apply_batch(
        &self,
        writes: Vec<MemoryWrite>,
    ) -> Result<Vec<Result<WriteOutcome, MemoryError>>, MemoryError> {
        self.apply_batch_blocking(writes)
    }
}

/// The final summary of an import.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportSummary {
    /// Lines whose write committed.
    pub written: u64,
    /// Lines that repeated an earlier identical command (nothing written).
    pub replayed: u64,
    /// Lines refused.
    pub refused: u64,
}

/// One refused line, as reported on standard error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRefusal {
    /// The 1-based line number.
    pub line: u64,
    /// Why.
    pub refusal: Refusal,
}

impl LineRefusal {
    /// `{"line": N, "error": {"kind", "message"}}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = self.refusal.to_json();
        if let Some(object) = value.as_object_mut() {
            object.insert("line".to_owned(), self.line.into());
        }
        value
    }
}

/// Why an import stopped before the end of its input.
#[derive(Debug, thiserror::Error)]
pub enum ImportFailure {
    /// Reading the file failed.
    #[error("could not read the import file")]
    Read(#[from] io::Error),
    /// A batch transaction failed; lines committed before it stay committed.
    #[error("a batch failed after {} lines were written; the import stopped", summary.written)]
    Batch {
        /// What was done before the failure.
        summary: ImportSummary,
        /// The failure.
        refusal: Refusal,
    },
}

/// What the caller observes while an import runs.
pub trait ImportObserver {
    /// `bytes` more of the input were consumed.
    fn advanced(&mut self, bytes: u64);
    /// A line was refused.
    fn refused(&mut self, refusal: LineRefusal);
}

/// Imports every line of `reader` into `writer`.
pub fn import(
    mut reader: impl BufRead,
    writer: &impl BatchWriter,
    observer: &mut impl ImportObserver,
) -> Result<ImportSummary, ImportFailure> {
    let mut summary = ImportSummary::default();
    let mut batch = Batch::default();
    let mut line_number: u64 = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = read_line_bounded(&mut reader, &mut line, MAX_INPUT_BYTES)?;
        let consumed = match read {
            LineRead::End => break,
            LineRead::Line { consumed } | LineRead::TooLong { consumed } => consumed,
        };
        line_number += 1;
        observer.advanced(consumed);
        if let LineRead::TooLong { consumed } = read {
            summary.refused += 1;
            observer.refused(LineRefusal {
                line: line_number,
                refusal: Refusal::too_large("import line bytes", MAX_INPUT_BYTES, consumed),
            });
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match decode_put(&line) {
            Ok(write) => batch.push(line_number, line.len(), write),
            Err(refusal) => {
                summary.refused += 1;
                observer.refused(LineRefusal {
                    line: line_number,
                    refusal,
                });
            }
        }
        if batch.is_full() {
            batch.flush(writer, &mut summary, observer)?;
        }
    }
    batch.flush(writer, &mut summary, observer)?;
    Ok(summary)
}

/// One import line as the write it asks for (a `memory_put` argument object), or why it is refused:
/// what [`import`] applies for each line.
pub fn decode_put(line: &[u8]) -> Result<MemoryWrite, Refusal> {
    match Request::decode(Operation::Put, RawArguments::Text(line))? {
        Request::Write(write) => Ok(write),
        _ => Err(Refusal::invalid_input(
            "import lines are memory_put arguments",
        )),
    }
}

#[derive(Default)]
struct Batch {
    lines: Vec<u64>,
    writes: Vec<MemoryWrite>,
    bytes: usize,
}

impl Batch {
    fn push(&mut self, line: u64, bytes: usize, write: MemoryWrite) {
        self.lines.push(line);
        self.writes.push(write);
        self.bytes = self.bytes.saturating_add(bytes);
    }

    fn is_full(&self) -> bool {
        self.writes.len() >= BATCH_LINES || self.bytes >= BATCH_BYTES
    }

    fn flush(
        &mut self,
        writer: &impl BatchWriter,
        summary: &mut ImportSummary,
        observer: &mut impl ImportObserver,
    ) -> Result<(), ImportFailure> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let lines = std::mem::take(&mut self.lines);
        let writes = std::mem::take(&mut self.writes);
        self.bytes = 0;
        let answers = writer
            .apply_batch(writes)
            .map_err(|error| ImportFailure::Batch {
                summary: *summary,
                refusal: error.into(),
            })?;
        for (line, answer) in lines.into_iter().zip(answers) {
            match answer {
                Ok(outcome) if outcome.replayed => summary.replayed += 1,
                Ok(_) => summary.written += 1,
                Err(error) => {
                    summary.refused += 1;
                    observer.refused(LineRefusal {
                        line,
                        refusal: error.into(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// What one bounded line read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineRead {
    /// A line (without its newline) is in the buffer; `consumed` bytes were read, newline included.
    Line { consumed: u64 },
    /// The line was longer than the cap; it was skipped, not buffered.
    TooLong { consumed: u64 },
    /// No more input.
    End,
}

/// Reads one `\n`-terminated line into `line`, buffering at most `max_bytes`; a longer line is consumed
/// to its end without being kept.
fn read_line_bounded(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    max_bytes: u64,
) -> io::Result<LineRead> {
    let max = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let mut consumed: u64 = 0;
    let mut too_long = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if available.is_empty() {
            break;
        }
        let (chunk, found_newline) = match available.iter().position(|&byte| byte == b'\n') {
            Some(index) => (&available[..index], true),
            None => (available, false),
        };
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = chunk.len() + usize::from(found_newline);
        reader.consume(used);
        consumed += used as u64;
        if found_newline {
            break;
        }
    }
    Ok(match (consumed, too_long) {
        (0, _) => LineRead::End,
        (consumed, true) => LineRead::TooLong { consumed },
        (consumed, false) => LineRead::Line { consumed },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_lines_skip_what_is_too_long_and_keep_the_rest() {
        let mut reader = io::BufReader::with_capacity(4, &b"abc\n0123456789\nxy"[..]);
        let mut line = Vec::new();
        assert_eq!(
            read_line_bounded(&mut reader, &mut line, 5).expect("read"),
            LineRead::Line { consumed: 4 }
        );
        assert_eq!(line, b"abc");
        line.clear();
        assert_eq!(
            read_line_bounded(&mut reader, &mut line, 5).expect("read"),
            LineRead::TooLong { consumed: 11 }
        );
        assert!(line.is_empty());
        assert_eq!(
            read_line_bounded(&mut reader, &mut line, 5).expect("read"),
            LineRead::Line { consumed: 2 }
        );
        assert_eq!(line, b"xy");
        line.clear();
        assert_eq!(
            read_line_bounded(&mut reader, &mut line, 5).expect("read"),
            LineRead::End
        );
    }
}
