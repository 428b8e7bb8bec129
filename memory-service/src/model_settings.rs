//! The optional language model's settings, read in one place for every door that may ask it (the
//! `remembering-worker` binary's flags, the Python package's keyword arguments, the eval), each a
//! flag or an argument first and its variable otherwise, as [`crate::settings`] reads the others.
//!
//! Decisions:
//! - **Both or neither.** A URL without a model name (or the reverse) is refused, not guessed; with
//!   neither, no model is asked and the statement extractor runs.
//! - **The key is a file.** A key on the command line is readable by every user of the host (`ps`),
//!   so there is no flag for the key itself: `--model-key-file PATH` / `MEMORY_MODEL_KEY_FILE` names
//!   a file holding it. Its text is read when the model is opened and never shown again (not in
//!   logs, status, errors or `Debug`).
//! - **Fallback is explicit.** Nothing is handed to the statement extractor when the model fails
//!   unless `--fallback statements` / `MEMORY_MODEL_FALLBACK=statements` says so.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use memory_model::{ApiKey, ChatModel, HttpChatModel, ModelEndpoint};
use serde::{Deserialize, Serialize};

use crate::refusal::Refusal;

/// The endpoint's base URL (`--model-url`), e.g. `http://127.0.0.1:8080/v1`.
pub const MODEL_URL_ENV: &str = "MEMORY_MODEL_URL";
/// The model's name at the endpoint (`--model`).
pub const MODEL_ENV: &str = "MEMORY_MODEL";
/// A file holding the endpoint's key (`--model-key-file`).
pub const MODEL_KEY_FILE_ENV: &str = "MEMORY_MODEL_KEY_FILE";
/// What the worker does when the model fails (`--fallback`).
pub const MODEL_FALLBACK_ENV: &str = "MEMORY_MODEL_FALLBACK";
/// The limit of one attempt of one call, in milliseconds (`--model-timeout-ms`).
pub const MODEL_TIMEOUT_ENV: &str = "MEMORY_MODEL_TIMEOUT_MS";

/// What the worker does with a record when the model fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Fallback {
    /// Defer the thread (a transient failure) or park it (one a retry would repeat): the default.
    #[default]
    None,
    /// Extract the record with the statement extractor instead, counted as a fallback.
    Statements,
}

impl TryFrom<String> for Fallback {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        parse_fallback(&value)
    }
}

impl From<Fallback> for String {
    fn from(fallback: Fallback) -> Self {
        match fallback {
            Fallback::None => "none",
            Fallback::Statements => "statements",
        }
        .to_owned()
    }
}

/// The one reading of a fallback setting (`--fallback`, `MEMORY_MODEL_FALLBACK`, Python's
/// `model_fallback=`): `none` or `statements`.
pub fn parse_fallback(value: &str) -> Result<Fallback, String> {
    match value {
        "none" => Ok(Fallback::None),
        "statements" => Ok(Fallback::Statements),
        other => Err(format!("must be none or statements, not {other:?}")),
    }
}

/// The model settings a caller gives; each missing one is read from its variable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelValues {
    /// `--model-url` / `MEMORY_MODEL_URL`.
    #[serde(default)]
    pub url: Option<String>,
    /// `--model` / `MEMORY_MODEL`.
    #[serde(default)]
    pub model: Option<String>,
    /// `--model-key-file` / `MEMORY_MODEL_KEY_FILE`.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// `--fallback` / `MEMORY_MODEL_FALLBACK`.
    #[serde(default)]
    pub fallback: Option<Fallback>,
    /// `--model-timeout-ms` / `MEMORY_MODEL_TIMEOUT_MS`.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// A model to ask, checked (nothing is connected to or read until [`ModelSettings::open`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSettings {
    /// The endpoint's base URL.
    pub url: String,
    /// The model's name.
    pub model: String,
    /// The key's file.
    pub key_file: Option<PathBuf>,
    /// What the worker does when the model fails.
    pub fallback: Fallback,
    /// The limit of one attempt.
    pub timeout: Duration,
}

impl ModelSettings {
    /// The settings from given values: `None` when neither a URL nor a model is named; refused when
    /// only one is, or a value is out of range.
    pub fn new(values: ModelValues) -> Result<Option<Self>, Refusal> {
        let (url, model) = match (values.url, values.model) {
            (None, None) => return Ok(None),
            (Some(url), Some(model)) => (url, model),
            (Some(_), None) => {
                return Err(Refusal::invalid_input(format!(
                    "--model-url / {MODEL_URL_ENV} needs --model / {MODEL_ENV}: the model's name at the endpoint"
                )));
            }
            (None, Some(_)) => {
                return Err(Refusal::invalid_input(format!(
                    "--model / {MODEL_ENV} needs --model-url / {MODEL_URL_ENV}: the endpoint's base URL"
                )));
            }
        };
        if model.trim().is_empty() {
            return Err(Refusal::invalid_input("--model must name a model"));
        }
        let timeout = match values.timeout_ms {
            None => memory_model::DEFAULT_TIMEOUT,
            Some(0) => {
                return Err(Refusal::invalid_input(
                    "--model-timeout-ms must be at least 1",
                ));
            }
            Some(millis) => Duration::from_millis(millis),
        };
        let settings = Self {
            url,
            model,
            key_file: values.key_file,
            fallback: values.fallback.unwrap_or_default(),
            timeout,
        };
        // The URL's checks run now, before anything is opened.
        HttpChatModel::new(settings.endpoint(None)).map_err(refusal)?;
        Ok(Some(settings))
    }

    /// [`ModelSettings::new`] with each missing value read from its variable.
    pub fn resolve(given: ModelValues) -> Result<Option<Self>, Refusal> {
        Self::resolve_with(given, |name| std::env::var_os(name))
    }

    /// [`ModelSettings::resolve`] over any lookup of variables (tests).
    pub fn resolve_with(
        given: ModelValues,
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Option<Self>, Refusal> {
        let text = |name: &str| -> Result<Option<String>, Refusal> {
            lookup(name)
                .filter(|value| !value.is_empty())
                .map(|value| {
                    value
                        .into_string()
                        .map_err(|_| Refusal::invalid_input(format!("{name} is not UTF-8")))
                })
                .transpose()
        };
        let fallback = match given.fallback {
            Some(fallback) => Some(fallback),
            None => text(MODEL_FALLBACK_ENV)?
                .map(|value| {
                    parse_fallback(&value).map_err(|message| {
                        Refusal::invalid_input(format!("{MODEL_FALLBACK_ENV} {message}"))
                    })
                })
                .transpose()?,
        };
        let timeout_ms = match given.timeout_ms {
            Some(millis) => Some(millis),
            None => text(MODEL_TIMEOUT_ENV)?
                .map(|value| {
                    value.parse::<u64>().map_err(|_| {
                        Refusal::invalid_input(format!(
                            "{MODEL_TIMEOUT_ENV} must be a whole number, not {value:?}"
                        ))
                    })
                })
                .transpose()?,
        };
        Self::new(ModelValues {
            url: given
                .url
                .map_or_else(|| text(MODEL_URL_ENV), |url| Ok(Some(url)))?,
            model: given
                .model
                .map_or_else(|| text(MODEL_ENV), |model| Ok(Some(model)))?,
            key_file: match given.key_file {
                Some(path) => Some(path),
                None => lookup(MODEL_KEY_FILE_ENV)
                    .filter(|value| !value.is_empty())
                    .map(PathBuf::from),
            },
            fallback,
            timeout_ms,
        })
    }

    fn endpoint(&self, key: Option<ApiKey>) -> ModelEndpoint {
        ModelEndpoint {
            key,
            timeout: self.timeout,
            ..ModelEndpoint::new(self.url.clone(), self.model.clone())
        }
    }

    /// The model over HTTP, its key read from its file (a blocking read); refused as
    /// `invalid-input` when the key file cannot be read (its text is never shown).
    pub fn open(&self) -> Result<Arc<dyn ChatModel>, Refusal> {
        let key = self
            .key_file
            .as_deref()
            .map(ApiKey::from_file)
            .transpose()
            .map_err(refusal)?;
        Ok(Arc::new(
            HttpChatModel::new(self.endpoint(key)).map_err(refusal)?,
        ))
    }
}

fn refusal(error: memory_model::ModelError) -> Refusal {
    Refusal::invalid_input(format!("the model endpoint: {error}"))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use memory_core::ErrorKind;

    use super::*;

    fn resolve(
        given: ModelValues,
        pairs: &[(&str, &str)],
    ) -> Result<Option<ModelSettings>, Refusal> {
        let variables: HashMap<String, OsString> = pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), OsString::from(value)))
            .collect();
        ModelSettings::resolve_with(given, |name| variables.get(name).cloned())
    }

    #[test]
    fn a_model_needs_both_its_url_and_its_name_and_arguments_win_over_variables() {
        assert_eq!(resolve(ModelValues::default(), &[]).ok(), Some(None));
        for pairs in [
            &[(MODEL_URL_ENV, "http://127.0.0.1:1/v1")][..],
            &[(MODEL_ENV, "tiny")][..],
        ] {
            let refused = resolve(ModelValues::default(), pairs).err();
            assert_eq!(
                refused.map(|refusal| refusal.kind()),
                Some(ErrorKind::InvalidInput)
            );
        }
        let settings = resolve(
            ModelValues {
                model: Some("given".to_owned()),
                ..ModelValues::default()
            },
            &[
                (MODEL_URL_ENV, "http://127.0.0.1:1/v1"),
                (MODEL_ENV, "from-env"),
                (MODEL_FALLBACK_ENV, "statements"),
                (MODEL_TIMEOUT_ENV, "250"),
            ],
        )
        .ok()
        .flatten();
        let settings = settings.as_ref();
        assert_eq!(settings.map(|s| s.model.as_str()), Some("given"));
        assert_eq!(settings.map(|s| s.fallback), Some(Fallback::Statements));
        assert_eq!(
            settings.map(|s| s.timeout),
            Some(Duration::from_millis(250))
        );
        for (name, value) in [
            (MODEL_FALLBACK_ENV, "maybe"),
            (MODEL_TIMEOUT_ENV, "soon"),
            (MODEL_TIMEOUT_ENV, "0"),
        ] {
            let refused = resolve(
                ModelValues::default(),
                &[
                    (MODEL_URL_ENV, "http://127.0.0.1:1/v1"),
                    (MODEL_ENV, "m"),
                    (name, value),
                ],
            )
            .err();
            assert_eq!(
                refused.map(|refusal| refusal.kind()),
                Some(ErrorKind::InvalidInput),
                "{name}={value}"
            );
        }
    }

    #[test]
    fn a_bad_url_is_refused_before_anything_is_opened() {
        for url in ["ftp://host/v1", "not a url", ""] {
            let refused = resolve(
                ModelValues {
                    url: Some(url.to_owned()),
                    model: Some("m".to_owned()),
                    ..ModelValues::default()
                },
                &[],
            )
            .err();
            assert_eq!(
                refused.map(|refusal| refusal.kind()),
                Some(ErrorKind::InvalidInput),
                "{url:?}"
            );
        }
    }
}
