//! The settings a process takes from its flags or its environment, read in one place, so every door
//! (the `memory` binary and its server, the hook, the Python package, the eval) builds its services
//! with the same ones (issue 41: the Python package used to ignore `MEMORY_MAX_CHUNKS`,
//! `MEMORY_COMPACT_VECTORS`, `MEMORY_HNSW_EF_SEARCH` and `MEMORY_MAX_TOOL_OUTPUT_BYTES`).
//!
//! Decisions:
//! - **One parse of each value.** The binary's flags read the same variables (clap's `env`, named by
//!   the constants here) and hand their values to [`Settings::new`]; an in-process host calls
//!   [`Settings::resolve`] with the values its caller gave ([`SettingValues`], the Python package's
//!   keyword arguments), each missing one read from its variable, and the result goes through the
//!   same constructor. So a value is checked by one rule whichever door reads it, an argument wins
//!   over the environment as a flag does, and a bad value is refused (`invalid-input` or
//!   `too-large`) before any store or model is opened.
//! - **Booleans.** `MEMORY_COMPACT_VECTORS` is on for `1`, `true`, `yes`, `on`, `y`, `t` and off for
//!   `0`, `false`, `no`, `off`, `n`, `f` or an empty value (any letter case), as the binary's flag
//!   reads it; anything else is refused rather than guessed.
//! - `MEMORY_CORRECTIONS` is the worker's (`remembering-worker --corrections`, the Python package's
//!   `remember_once`, both through [`parse_corrections`]); the `memory` binary, which runs no
//!   worker, leaves it at its default.
//! - `MEMORY_MAX_REVISIONS` is not here: it is read where a database is opened
//!   ([`crate::database::revision_retention`]), which every process that writes already passes
//!   through.

use std::ffi::OsString;

use memory_core::activity::ToolOutputBound;
use serde::{Deserialize, Serialize};

use crate::refusal::Refusal;
use crate::semantic::{IndexOptions, RerankModel};

/// Most chunks the semantic index holds (`--max-chunks`).
pub const MAX_CHUNKS_ENV: &str = "MEMORY_MAX_CHUNKS";
/// Hold the index's vectors as int8 codes (`--compact-vectors`).
pub const COMPACT_VECTORS_ENV: &str = "MEMORY_COMPACT_VECTORS";
/// The HNSW search width (`--hnsw-ef-search`).
pub const HNSW_EF_SEARCH_ENV: &str = "MEMORY_HNSW_EF_SEARCH";
/// Most bytes of a tool result's output a thread append stores (`--max-tool-output-bytes`).
pub const MAX_TOOL_OUTPUT_BYTES_ENV: &str = "MEMORY_MAX_TOOL_OUTPUT_BYTES";
/// How the remembering worker links corrections (`remembering-worker --corrections`).
pub const CORRECTIONS_ENV: &str = "MEMORY_CORRECTIONS";
/// The variable of `--rerank-model` (`on` or `off`).
pub const RERANK_MODEL_ENV: &str = "MEMORY_RERANK_MODEL";
/// The budget `memory_context_remaining` measures against when a call names none
/// (`memory serve --context-budget`).
pub const CONTEXT_BUDGET_ENV: &str = "MEMORY_CONTEXT_BUDGET";
/// The model's context capacity `memory_context_remaining` reports (`--context-capacity`).
pub const CONTEXT_CAPACITY_ENV: &str = "MEMORY_CONTEXT_CAPACITY";
/// The id of each thread's notes document (`--notes-id`; `{thread}` is the thread's id).
pub const NOTES_ID_ENV: &str = "MEMORY_NOTES_ID";

/// The context tools' settings: the budget `memory_context_remaining` measures against when a call
/// names none, the model's capacity it reports, and where each thread's notes live.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextSettings {
    /// `--context-budget`: tokens (1 to 2^40).
    pub budget: Option<u64>,
    /// `--context-capacity`: tokens (1 to 2^40).
    pub capacity: Option<u64>,
    /// `--notes-id`.
    pub notes: crate::notes::NotesBinding,
}

impl ContextSettings {
    /// The settings from their values, each checked: a budget or capacity between 1 and 2^40 tokens,
    /// a notes id that makes a document id.
    pub fn new(
        budget: Option<u64>,
        capacity: Option<u64>,
        notes_id: Option<String>,
    ) -> Result<Self, Refusal> {
        let tokens = |value: Option<u64>, flag: &str| {
            value
                .map(|value| {
                    memory_context::view::check_budget(value)
                        .map_err(|error| Refusal::invalid_input(format!("{flag}: {error}")))
                })
                .transpose()
        };
        Ok(Self {
            budget: tokens(budget, "--context-budget")?,
            capacity: tokens(capacity, "--context-capacity")?,
            notes: match notes_id {
                Some(id) => crate::notes::NotesBinding::new(id)?,
                None => crate::notes::NotesBinding::default(),
            },
        })
    }
}

/// How the remembering worker judges what a correcting statement corrects
/// ([`remembering::corrections`]): `words` (the default: shared words, no model), `model` (the
/// embedding model's cosine; the worker loads the model) or `off` (no links).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum Corrections {
    /// No links.
    Off,
    /// By shared words.
    #[default]
    Words,
    /// By the embedding model.
    Model,
}

impl TryFrom<String> for Corrections {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        parse_corrections(&value)
    }
}

/// The one reading of a corrections setting (`MEMORY_CORRECTIONS`, the worker's `--corrections`
/// value parser and the Python package's keyword argument alike): `words`, `model` or `off`, any
/// letter case.
pub fn parse_corrections(value: &str) -> Result<Corrections, String> {
    match value.to_ascii_lowercase().as_str() {
        "words" => Ok(Corrections::Words),
        "model" => Ok(Corrections::Model),
        "off" => Ok(Corrections::Off),
        _ => Err(format!("must be words, model or off, not {value:?}")),
    }
}

/// The settings a caller gives in code (every field optional; a missing one is read from its
/// variable by [`Settings::resolve`]). The Python package's `Memory` keyword arguments, as JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingValues {
    /// `--max-chunks` / `MEMORY_MAX_CHUNKS`.
    #[serde(default)]
    pub max_chunks: Option<usize>,
    /// `--compact-vectors` / `MEMORY_COMPACT_VECTORS`.
    #[serde(default)]
    pub compact_vectors: Option<bool>,
    /// `--hnsw-ef-search` / `MEMORY_HNSW_EF_SEARCH`.
    #[serde(default)]
    pub hnsw_ef_search: Option<usize>,
    /// `--max-tool-output-bytes` / `MEMORY_MAX_TOOL_OUTPUT_BYTES`.
    #[serde(default)]
    pub max_tool_output_bytes: Option<usize>,
    /// `--rerank-model` / `MEMORY_RERANK_MODEL` (`"on"` or `"off"`).
    #[serde(default)]
    pub rerank_model: Option<RerankModel>,
    /// `remembering-worker --corrections` / `MEMORY_CORRECTIONS`.
    #[serde(default)]
    pub corrections: Option<Corrections>,
    /// `memory serve --context-budget` / `MEMORY_CONTEXT_BUDGET`.
    #[serde(default)]
    pub context_budget: Option<u64>,
    /// `memory serve --context-capacity` / `MEMORY_CONTEXT_CAPACITY`.
    #[serde(default)]
    pub context_capacity: Option<u64>,
    /// `memory serve --notes-id` / `MEMORY_NOTES_ID`.
    #[serde(default)]
    pub notes_id: Option<String>,
}

/// What a process's services are built with, checked.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The semantic index's capacity, encoding and search width.
    pub index: IndexOptions,
    /// The bound on a tool result's stored output.
    pub tool_output: ToolOutputBound,
    /// How the worker links corrections (a process that runs no worker carries the default).
    pub corrections: Corrections,
    /// The context tools' budget, capacity and notes.
    pub context: ContextSettings,
}

impl Settings {
    /// The settings from their values (a flag's or a variable's); `None` leaves the default. Refused
    /// when a value is out of range (the search width and the index's capacity are checked here,
    /// before anything is opened).
    pub fn new(
        max_chunks: Option<usize>,
        compact_vectors: bool,
        hnsw_ef_search: Option<usize>,
        max_tool_output_bytes: Option<usize>,
    ) -> Result<Self, Refusal> {
        let index = IndexOptions {
            max_chunks,
            compact_vectors,
            hnsw_ef_search,
            rerank_model: RerankModel::default(),
        };
        index.check()?;
        let tool_output = match max_tool_output_bytes {
            None => ToolOutputBound::default(),
            Some(bytes) => ToolOutputBound::new(bytes).map_err(|error| {
                Refusal::invalid_input(format!(
                    "--max-tool-output-bytes / {MAX_TOOL_OUTPUT_BYTES_ENV}: {error}"
                ))
            })?,
        };
        Ok(Self {
            index,
            tool_output,
            corrections: Corrections::default(),
            context: ContextSettings::default(),
        })
    }

    /// The same settings with the context tools' settings.
    #[must_use]
    pub fn with_context(mut self, context: ContextSettings) -> Self {
        self.context = context;
        self
    }

    /// The same settings with the rerank model loaded or not (`--rerank-model`).
    #[must_use]
    pub fn with_rerank_model(mut self, rerank_model: RerankModel) -> Self {
        self.index.rerank_model = rerank_model;
        self
    }

    /// The same settings with the worker's corrections setting.
    #[must_use]
    pub fn with_corrections(mut self, corrections: Corrections) -> Self {
        self.corrections = corrections;
        self
    }

    /// The settings the process's environment gives, as the `memory` binary reads them without its
    /// flags: what an in-process host (the eval) builds its services with.
    pub fn from_env() -> Result<Self, Refusal> {
        Self::resolve(SettingValues::default())
    }

    /// The settings `given` names, each missing one from its variable, as a flag wins over its
    /// variable: what an in-process host whose caller passes settings (the Python package) uses.
    pub fn resolve(given: SettingValues) -> Result<Self, Refusal> {
        Self::resolve_with(given, |name| std::env::var_os(name))
    }

    /// [`Settings::resolve`] over any lookup of variables (tests).
    pub fn resolve_with(
        given: SettingValues,
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Self, Refusal> {
        let text = |name: &str| -> Result<Option<String>, Refusal> {
            lookup(name)
                .map(|value| {
                    value
                        .into_string()
                        .map_err(|_| Refusal::invalid_input(format!("{name} is not UTF-8")))
                })
                .transpose()
        };
        let number = |name: &str| -> Result<Option<usize>, Refusal> {
            text(name)?
                .map(|value| {
                    value.parse::<usize>().map_err(|_| {
                        Refusal::invalid_input(format!(
                            "{name} must be a whole number, not {value:?}"
                        ))
                    })
                })
                .transpose()
        };
        let compact_vectors = match given.compact_vectors {
            Some(given) => given,
            None => match text(COMPACT_VECTORS_ENV)? {
                None => false,
                Some(value) => parse_switch(&value).map_err(|message| {
                    Refusal::invalid_input(format!("{COMPACT_VECTORS_ENV} {message}"))
                })?,
            },
        };
        let or_env = |given: Option<usize>, name: &str| match given {
            Some(given) => Ok(Some(given)),
            None => number(name),
        };
        let corrections = match given.corrections {
            Some(given) => given,
            None => match text(CORRECTIONS_ENV)? {
                None => Corrections::default(),
                Some(value) => parse_corrections(&value).map_err(|message| {
                    Refusal::invalid_input(format!("{CORRECTIONS_ENV} {message}"))
                })?,
            },
        };
        let tokens = |given: Option<u64>, name: &str| -> Result<Option<u64>, Refusal> {
            match given {
                Some(given) => Ok(Some(given)),
                None => Ok(number(name)?.map(|value| value as u64)),
            }
        };
        let context = ContextSettings::new(
            tokens(given.context_budget, CONTEXT_BUDGET_ENV)?,
            tokens(given.context_capacity, CONTEXT_CAPACITY_ENV)?,
            match given.notes_id {
                Some(id) => Some(id),
                None => text(NOTES_ID_ENV)?,
            },
        )?;
        Ok(Self::new(
            or_env(given.max_chunks, MAX_CHUNKS_ENV)?,
            compact_vectors,
            or_env(given.hnsw_ef_search, HNSW_EF_SEARCH_ENV)?,
            or_env(given.max_tool_output_bytes, MAX_TOOL_OUTPUT_BYTES_ENV)?,
        )?
        .with_corrections(corrections)
        .with_context(context)
        .with_rerank_model(match given.rerank_model {
            Some(given) => given,
            None => match text(RERANK_MODEL_ENV)? {
                None => RerankModel::default(),
                Some(value) => RerankModel::parse(&value)?,
            },
        }))
    }
}

/// The one reading of an on/off setting (`MEMORY_COMPACT_VECTORS`, the binary's `--compact-vectors`
/// value parser and the Python package's variable alike): see the module's docs.
pub fn parse_switch(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "y" | "t" => Ok(true),
        "" | "0" | "false" | "no" | "off" | "n" | "f" => Ok(false),
        _ => Err(format!(
            "must be true or false (1/0, yes/no, on/off), not {value:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use memory_core::ErrorKind;

    use super::*;

    fn given(given: SettingValues, pairs: &[(&str, &str)]) -> Result<Settings, Refusal> {
        let variables: HashMap<String, OsString> = pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), OsString::from(value)))
            .collect();
        Settings::resolve_with(given, |name| variables.get(name).cloned())
    }

    fn from(pairs: &[(&str, &str)]) -> Result<Settings, Refusal> {
        given(SettingValues::default(), pairs)
    }

    #[test]
    fn a_given_value_wins_over_its_variable() {
        let values = SettingValues {
            max_chunks: Some(7),
            compact_vectors: Some(false),
            hnsw_ef_search: None,
            max_tool_output_bytes: Some(4096),
            corrections: Some(Corrections::Off),
            context_budget: Some(9_000),
            context_capacity: None,
            notes_id: None,
            rerank_model: Some(RerankModel::Off),
        };
        let settings = given(
            values,
            &[
                (RERANK_MODEL_ENV, "on"),
                (MAX_CHUNKS_ENV, "5"),
                (COMPACT_VECTORS_ENV, "1"),
                (HNSW_EF_SEARCH_ENV, "32"),
                (MAX_TOOL_OUTPUT_BYTES_ENV, "not even read"),
                (CORRECTIONS_ENV, "model"),
                (CONTEXT_BUDGET_ENV, "not even read"),
                (CONTEXT_CAPACITY_ENV, "200000"),
                (NOTES_ID_ENV, "scratch/{thread}"),
            ],
        )
        .expect("valid");
        assert_eq!(settings.context.budget, Some(9_000));
        assert_eq!(settings.context.capacity, Some(200_000));
        assert_eq!(
            settings.context.notes,
            crate::notes::NotesBinding::new("scratch/{thread}").expect("valid")
        );
        assert!(from(&[(CONTEXT_CAPACITY_ENV, "0")]).is_err());
        assert!(from(&[(NOTES_ID_ENV, "")]).is_err());
        assert_eq!(settings.index.max_chunks, Some(7));
        assert!(!settings.index.compact_vectors);
        assert_eq!(settings.index.hnsw_ef_search, Some(32));
        assert_eq!(settings.tool_output.get(), 4096);
        assert_eq!(settings.corrections, Corrections::Off);
        assert_eq!(settings.index.rerank_model, RerankModel::Off);
        assert_eq!(
            from(&[(RERANK_MODEL_ENV, "off")])
                .expect("valid")
                .index
                .rerank_model,
            RerankModel::Off
        );
        assert_eq!(
            from(&[]).expect("valid").index.rerank_model,
            RerankModel::On
        );
        assert!(from(&[(RERANK_MODEL_ENV, "maybe")]).is_err());
    }

    #[test]
    fn the_environment_sets_what_the_flags_set() {
        let settings = from(&[
            (MAX_CHUNKS_ENV, "5"),
            (COMPACT_VECTORS_ENV, "yes"),
            (HNSW_EF_SEARCH_ENV, "64"),
            (MAX_TOOL_OUTPUT_BYTES_ENV, "2048"),
            (CORRECTIONS_ENV, "Model"),
        ])
        .expect("valid settings");
        assert_eq!(settings.corrections, Corrections::Model);
        assert_eq!(settings.index.max_chunks, Some(5));
        assert!(settings.index.compact_vectors);
        assert_eq!(settings.index.hnsw_ef_search, Some(64));
        assert_eq!(settings.tool_output.get(), 2048);

        let defaults = from(&[]).expect("defaults");
        assert_eq!(defaults.index.max_chunks, None);
        assert!(!defaults.index.compact_vectors);
        assert_eq!(defaults.tool_output, ToolOutputBound::default());
        assert_eq!(defaults.corrections, Corrections::Words);
        assert!(
            !from(&[(COMPACT_VECTORS_ENV, "off")])
                .expect("off")
                .index
                .compact_vectors
        );
    }

    #[test]
    fn a_bad_value_is_refused_by_the_rule_the_flags_use() {
        for pairs in [
            [(MAX_CHUNKS_ENV, "many")],
            [(COMPACT_VECTORS_ENV, "maybe")],
            [(HNSW_EF_SEARCH_ENV, "0")],
            [(MAX_TOOL_OUTPUT_BYTES_ENV, "10")],
            [(CORRECTIONS_ENV, "sometimes")],
        ] {
            let refusal = from(&pairs).expect_err("refused");
            assert_eq!(
                refusal.kind(),
                ErrorKind::InvalidInput,
                "{pairs:?}: {refusal:?}"
            );
        }
        assert!(Settings::new(None, false, Some(0), None).is_err());
    }
}
