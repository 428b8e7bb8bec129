//! `memory sync` against the embedder alone, on the same texts: the import file the comparison
//! script feeds to the `memory` binary, and the exact texts a sync of it embeds.
//!
//! The script (`eval/compare/compare.py`) imports [`import_lines`] with `memory import`, times
//! `memory sync` as a child process (wall time and peak RSS), then times `memory-eval bench-embed`
//! on [`embedded_texts`] of the same file: every chunk under the product's profile, with its
//! speaker prefix, which is what the sync hands the model. Timing the embedder on the documents
//! instead would compare unlike work: a pasted page past the chunk size is one truncated text for
//! the model but several chunks for the sync.

use std::path::Path;

use anyhow::Context;
use memory_core::MemoryWrite;
use semantic_index::SemanticProfile;

/// The namespace, scope and speaker of every document of the import file.
const NAMESPACE: &str = "notes";
const SCOPE: &str = "assistant";
const SPEAKER: &str = "user";
/// 2026-01-01T00:00:00Z: every message's time (the sync does not read it).
const ACTIVITY_AT_MS: u64 = 1_767_225_600_000;

/// One `memory import` line per text: each text a chat message said by one speaker, in one
/// namespace, as an agent's conversation log is imported.
pub fn import_lines(texts: &[String]) -> Vec<String> {
    texts
        .iter()
        .enumerate()
        .map(|(index, text)| {
            serde_json::json!({
                "namespace": {"name": NAMESPACE, "version": 1, "identity": {"user": "u1"}},
                "id": format!("m{index}"),
                "operation_id": format!("op-m{index}"),
                "expected_revision": null,
                "locator": format!("chat:m{index}"),
                "scopes": [SCOPE],
                "content": {
                    "text": text,
                    "attributions": [{
                        "origin_id": format!("msg-{index}"),
                        "speaker": SPEAKER,
                        "observers": [SCOPE],
                        "locator": format!("chat:m{index}#1"),
                        "activity_at": ACTIVITY_AT_MS,
                        "interpretation": "stated",
                    }],
                    "metadata": {},
                    "recorded_at": ACTIVITY_AT_MS,
                    "extracted_at": ACTIVITY_AT_MS,
                },
            })
            .to_string()
        })
        .collect()
}

/// The texts a sync of the import file at `import` embeds under `profile`, in file order, each on
/// one line: line breaks inside a text become spaces, which the model's tokenizer reads alike (both
/// are whitespace to it), so `bench-embed`'s one-text-per-line input holds the same tokens. A line
/// the import would refuse is an error here too, naming the line.
pub fn embedded_texts(import: &Path, profile: &SemanticProfile) -> anyhow::Result<Vec<String>> {
    let file = std::fs::read(import).with_context(|| format!("reading {}", import.display()))?;
    let mut texts = Vec::new();
    for (index, line) in file.split(|byte| *byte == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let write = memory_service::import::decode_put(line).map_err(|refusal| {
            anyhow::anyhow!(
                "{} line {}: {}",
                import.display(),
                index + 1,
                refusal.message()
            )
        })?;
        let MemoryWrite::Put { content, .. } = write else {
            anyhow::bail!("{} line {}: not a put", import.display(), index + 1);
        };
        texts.extend(
            profile
                .embedded_texts(&content)
                .into_iter()
                .map(|text| text.replace(['\n', '\r'], " ")),
        );
    }
    Ok(texts)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_embedded_texts_are_every_chunk_with_its_speaker() {
        let profile = SemanticProfile::minilm_l6_v2();
        let page = "word ".repeat(profile.chunking.max_chunk_bytes / 5 * 2 + 10);
        let texts = vec![
            "I moved to Lisbon in May.".to_owned(),
            "two\nlines".to_owned(),
            page.clone(),
        ];
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("import.jsonl");
        std::fs::write(&path, import_lines(&texts).join("\n") + "\n\n").unwrap();
        let embedded = embedded_texts(&path, &profile).unwrap();
        assert_eq!(embedded[0], "user: I moved to Lisbon in May.");
        assert_eq!(embedded[1], "user: two lines");
        // The page is longer than two chunks: each is embedded, each with the speaker.
        assert!(embedded.len() >= 5, "{embedded:?}");
        assert!(embedded[2..].iter().all(|text| text.starts_with("user: ")));
        let words: usize = embedded[2..]
            .iter()
            .map(|text| text["user: ".len()..].split_whitespace().count())
            .sum();
        assert_eq!(words, page.split_whitespace().count());
    }

    #[test]
    fn a_line_the_import_refuses_is_an_error_naming_it() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("import.jsonl");
        let mut lines = import_lines(&["fine".to_owned()]);
        lines.push("{\"id\": 3}".to_owned());
        std::fs::write(&path, lines.join("\n")).unwrap();
        let error = embedded_texts(&path, &SemanticProfile::minilm_l6_v2()).unwrap_err();
        assert!(error.to_string().contains("line 2"), "{error}");
    }
}
