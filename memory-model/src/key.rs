//! The API key: checked when built, shown to nobody.

use std::fmt;
use std::io::Read;
use std::path::Path;

use crate::ModelError;

/// Most bytes of a key. Real keys are far shorter; a longer one is a file read by mistake.
const MAX_KEY_BYTES: usize = 4096;
/// Most bytes read from a key file: a key with generous surrounding whitespace, never a whole
/// file pointed at by mistake.
const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// A bearer key. Its text leaves this crate only in the `Authorization` header: `Debug` and
/// `Display` print `ApiKey(<redacted>)`, and no error names it.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key from its text: refused when empty, longer than 4096 bytes, or holding whitespace or a
    /// control character (which no key has, and which could not travel in a header).
    pub fn new(text: String) -> Result<Self, ModelError> {
        check(&text).map_err(|why| ModelError::Config {
            detail: format!("API key {why}"),
        })?;
        Ok(Self(text))
    }

    /// The key in the file at `path`, surrounding whitespace (a trailing newline) trimmed. Errors
    /// name the path, never the file's content.
    pub fn from_file(path: &Path) -> Result<Self, ModelError> {
        let config = |why: &str| ModelError::Config {
            detail: format!("API key file {}: {why}", path.display()),
        };
        let file = std::fs::File::open(path).map_err(|e| config(&e.to_string()))?;
        let mut bytes = Vec::new();
        // Read one byte past the bound so an oversized file is told apart from one at the bound.
        file.take(MAX_KEY_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| config(&e.to_string()))?;
        if bytes.len() as u64 > MAX_KEY_FILE_BYTES {
            return Err(config(&format!("longer than {MAX_KEY_FILE_BYTES} bytes")));
        }
        let text = String::from_utf8(bytes).map_err(|_| config("not UTF-8"))?;
        let key = text.trim();
        check(key).map_err(config)?;
        Ok(Self(key.to_owned()))
    }

    /// The key's text, for the `Authorization` header and for redacting it from server answers.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

/// Why `text` cannot be a key (the reason never quotes it).
fn check(text: &str) -> Result<(), &'static str> {
    if text.is_empty() {
        return Err("is empty");
    }
    if text.len() > MAX_KEY_BYTES {
        return Err("is longer than 4096 bytes");
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("holds whitespace or a control character");
    }
    Ok(())
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const SECRET: &str = "sk-test-0123456789abcdef";

    fn key_file(content: &str) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut file, content.as_bytes()).unwrap();
        file
    }

    #[test]
    fn from_file_trims_surrounding_whitespace() {
        let file = key_file(&format!("  {SECRET}\n\n"));
        let key = ApiKey::from_file(file.path()).unwrap();
        assert_eq!(key.expose(), SECRET);
    }

    #[test]
    fn from_file_refuses_an_empty_file_naming_the_path() {
        let file = key_file(" \n\t\n");
        let error = ApiKey::from_file(file.path()).unwrap_err();
        assert_eq!(error.kind(), "config");
        assert!(
            error
                .to_string()
                .contains(&file.path().display().to_string())
        );
    }

    #[test]
    fn from_file_errors_never_quote_the_content() {
        // Inner whitespace makes it no key; the error must still not repeat what the file held.
        let file = key_file(&format!("{SECRET} {SECRET}\n"));
        let error = ApiKey::from_file(file.path()).unwrap_err();
        assert_eq!(error.kind(), "config");
        assert!(!error.to_string().contains(SECRET));
        assert!(!format!("{error:?}").contains(SECRET));
    }

    #[test]
    fn from_file_names_a_missing_path() {
        let path = std::env::temp_dir().join("memory-model-no-such-key-file");
        let error = ApiKey::from_file(&path).unwrap_err();
        assert!(error.to_string().contains("memory-model-no-such-key-file"));
    }

    #[test]
    fn new_refuses_empty_long_and_spaced_keys() {
        assert!(ApiKey::new(String::new()).is_err());
        assert!(ApiKey::new("a".repeat(MAX_KEY_BYTES + 1)).is_err());
        assert!(ApiKey::new("a".repeat(MAX_KEY_BYTES)).is_ok());
        assert!(ApiKey::new("two words".to_owned()).is_err());
        assert!(ApiKey::new("tab\tbed".to_owned()).is_err());
        assert!(ApiKey::new("nul\0".to_owned()).is_err());
        assert!(ApiKey::new(format!(" {SECRET}")).is_err());
        let error = ApiKey::new(format!("{SECRET} x")).unwrap_err();
        assert!(!error.to_string().contains(SECRET));
    }

    #[test]
    fn debug_and_display_are_redacted() {
        let key = ApiKey::new(SECRET.to_owned()).unwrap();
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        assert_eq!(format!("{key}"), "ApiKey(<redacted>)");
        assert!(!format!("{:#?}", Some(key.clone())).contains(SECRET));
    }
}
