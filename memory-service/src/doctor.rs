//! `memory doctor`: which model assets the lookup finds (see `semantic_index::assets`), which files
//! are missing, whether the rerank model in the folder used is the pinned one, and the command that
//! fetches them. Loads no model and opens no database.

use semantic_index::{CROSS_ENCODER_SHA256, FETCH_ASSETS_COMMAND, ModelAssets};
use serde::Serialize;

/// The answer of `memory doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DoctorReport {
    /// The folder the binary uses.
    pub assets: ChosenAssets,
    /// Every folder looked at, in lookup order.
    pub candidates: Vec<CandidateReport>,
    /// The command that fills the folder used; `null` when nothing is missing.
    pub fix: Option<String>,
}

/// The folder the binary uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChosenAssets {
    /// Its path.
    pub dir: String,
    /// `env`, `beside_binary`, `user_data` or `workspace`; `null` when none could be named.
    pub source: Option<&'static str>,
    /// Whether every required file is there (semantic recall works).
    pub complete: bool,
    /// The rerank stage's cross-encoder in this folder.
    pub rerank_model: RerankModelReport,
}

/// The rerank stage's cross-encoder files in the folder used (`reranker/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RerankModelReport {
    /// Its files that are absent (the runtime library among them when it is).
    pub missing: Vec<&'static str>,
    /// The sha256 its model file must have.
    pub sha256: &'static str,
    /// Whether the model file is there with that sha256 (and so every file is there).
    pub verified: bool,
}

/// One folder the lookup considered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CandidateReport {
    /// Where it comes from.
    pub source: &'static str,
    /// Its path.
    pub dir: String,
    /// The required files present.
    pub found: Vec<&'static str>,
    /// The required files absent.
    pub missing: Vec<&'static str>,
}

/// Runs the lookup and describes it.
pub fn doctor() -> DoctorReport {
    let located = ModelAssets::locate();
    let dir = located.assets.root().display().to_string();
    let candidates = located
        .candidates
        .iter()
        .map(|candidate| {
            let missing = ModelAssets::at(candidate.root.clone()).missing();
            CandidateReport {
                source: candidate.source.as_str(),
                dir: candidate.root.display().to_string(),
                found: ModelAssets::required_files()
                    .into_iter()
                    .filter(|file| !missing.contains(file))
                    .collect(),
                missing,
            }
        })
        .collect();
    let rerank_missing = located.assets.cross_encoder_missing();
    let verified = located.assets.cross_encoder_is_pinned();
    let fix = (!located.complete || !verified).then(|| {
        format!(
            "bash {FETCH_ASSETS_COMMAND} {} (from the agent-memory source tree; or set \
             MEMORY_ASSETS_DIR to a complete folder)",
            shell_quoted(&dir)
        )
    });
    DoctorReport {
        assets: ChosenAssets {
            dir,
            source: located.source.map(|source| source.as_str()),
            complete: located.complete,
            rerank_model: RerankModelReport {
                missing: rerank_missing,
                sha256: CROSS_ENCODER_SHA256,
                verified,
            },
        },
        candidates,
        fix,
    }
}

/// `text` quoted for a POSIX shell when it needs it.
fn shell_quoted(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-~+".contains(c))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_quoted_only_when_needed() {
        assert_eq!(
            shell_quoted("/home/u/.local/share/memory/assets"),
            "/home/u/.local/share/memory/assets"
        );
        assert_eq!(shell_quoted("/tmp/my assets"), "'/tmp/my assets'");
        assert_eq!(shell_quoted("/tmp/it's"), r"'/tmp/it'\''s'");
    }
}
