//! Untrusted input: reading it within a size cap and decoding it into wire types.
//!
//! Every interface passes its bytes through here, so the same input gets the same refusal everywhere:
//! more than [`MAX_INPUT_BYTES`] is `too-large` before the rest is read; malformed JSON, a wrong type, a
//! missing or unknown field is `invalid-input` naming the field, line and column serde reports.

use std::io::Read;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::refusal::Refusal;

/// Most bytes of one request (an inline argument, standard input, one import line or one MCP tool call's
/// arguments). Larger than any valid command (16 Mi UTF-16 units of canonical JSON, plus escapes and
/// whitespace a caller may add), so only hopeless input is cut off here; memory-core checks the exact
/// limits afterwards.
pub const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// Why input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadFailure {
    /// The input itself is refused (too large).
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Reading failed; not the caller's fault.
    #[error("could not read input")]
    Io(#[from] std::io::Error),
}

/// Reads all of `reader`, refusing as soon as more than `max_bytes` arrive (it never buffers more than
/// `max_bytes + 1` bytes).
pub fn read_bounded(reader: impl Read, max_bytes: u64) -> Result<Vec<u8>, ReadFailure> {
    let mut bytes = Vec::new();
    reader
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    check_size("input bytes", bytes.len(), max_bytes)?;
    Ok(bytes)
}

/// Refuses `len` bytes above `max_bytes`.
pub fn check_size(limit: &str, len: usize, max_bytes: u64) -> Result<(), Refusal> {
    let len = u64::try_from(len).unwrap_or(u64::MAX);
    if len > max_bytes {
        return Err(Refusal::too_large(limit, max_bytes, len));
    }
    Ok(())
}

/// Decodes JSON text into `T` (trailing text is refused).
pub fn decode_bytes<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Refusal> {
    check_size("input bytes", bytes.len(), MAX_INPUT_BYTES)?;
    serde_json::from_slice(bytes).map_err(describe)
}

/// Decodes an already parsed JSON value (MCP tool arguments) into `T`.
pub fn decode_value<T: DeserializeOwned>(value: Value) -> Result<T, Refusal> {
    serde_json::from_value(value).map_err(describe)
}

fn describe(error: serde_json::Error) -> Refusal {
    Refusal::invalid_input(format!("arguments: {error}"))
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;

    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Sample {
        count: u32,
    }

    #[test]
    fn reading_stops_one_byte_past_the_cap() {
        let refused = read_bounded(&[b'x'; 11][..], 10).expect_err("over the cap");
        let ReadFailure::Refused(refusal) = refused else {
            panic!("expected a refusal, got {refused:?}");
        };
        assert_eq!(refusal.kind(), ErrorKind::TooLarge);
        assert_eq!(
            read_bounded(&[b'x'; 10][..], 10).expect("at the cap").len(),
            10
        );
    }

    #[test]
    fn malformed_wrong_typed_unknown_and_trailing_input_is_invalid() {
        for text in [
            "{",
            r#"{"count": "3"}"#,
            r#"{"count": 3, "extra": 1}"#,
            r#"{"count": 3} {}"#,
            r#"{}"#,
            r#"{"count": -1}"#,
        ] {
            let refusal = decode_bytes::<Sample>(text.as_bytes()).expect_err(text);
            assert_eq!(refusal.kind(), ErrorKind::InvalidInput, "{text}");
        }
        assert_eq!(
            decode_bytes::<Sample>(br#"{"count": 3}"#)
                .expect("valid")
                .count,
            3
        );
    }
}
