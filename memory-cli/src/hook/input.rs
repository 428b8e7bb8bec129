//! The hook's input: Claude Code's hook JSON or the generic JSON form, decoded leniently (hosts add
//! fields, so unknown ones are ignored) but bounded: the whole input is capped before it is parsed, and
//! every field that reaches the store is checked by the thread log's and recall's own limits.

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::hook::args::{HookEvent, HookFormat};
use crate::refusal::Refusal;

/// Most bytes of one hook input (a prompt with pasted text included).
pub const MAX_HOOK_INPUT_BYTES: usize = 4 * 1024 * 1024;

/// Most assistant messages the generic form's `turn-end` takes in one call.
pub const MAX_MESSAGES: usize = 1_000;

/// Claude Code's hook input (the fields this hook reads; every other field is ignored).
#[derive(Debug, Deserialize)]
struct ClaudeCodeInput {
    session_id: String,
    #[serde(default)]
    transcript_path: Option<String>,
    #[serde(default)]
    hook_event_name: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
}

/// The generic form's input.
#[derive(Debug, Deserialize)]
struct GenericInput {
    #[serde(default)]
    event: Option<String>,
    session: String,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    prompt_id: Option<String>,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    transcript_path: Option<String>,
    #[serde(default)]
    messages: Option<Vec<GenericMessage>>,
    #[serde(default)]
    speaker: Option<String>,
}

/// One assistant message of the generic form's `turn-end`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GenericMessage {
    /// The host's id of the message: the same id is appended once.
    pub id: String,
    /// What the assistant said.
    pub text: String,
    /// When, epoch milliseconds.
    #[serde(default)]
    pub occurred_at: Option<i64>,
}

/// A decoded hook call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookInput {
    /// The event.
    pub event: HookEvent,
    /// The session, which is the thread id.
    pub session: String,
    /// `prompt`: the user's words.
    pub prompt: Option<String>,
    /// `prompt`: the host's id of this prompt, when it gives one.
    pub prompt_id: Option<String>,
    /// `session-start`: what to recall for.
    pub query: Option<String>,
    /// The transcript (JSON Lines), when the host keeps one.
    pub transcript_path: Option<String>,
    /// `turn-end` in the generic form: the new assistant messages.
    pub messages: Option<Vec<GenericMessage>>,
    /// Who speaks, when the input says.
    pub speaker: Option<String>,
}

impl HookInput {
    /// Decodes `bytes` in `format`; `event` (the subcommand) wins over the input's own event name.
    pub fn decode(
        bytes: &[u8],
        format: HookFormat,
        event: Option<HookEvent>,
    ) -> Result<Self, Refusal> {
        if bytes.len() > MAX_HOOK_INPUT_BYTES {
            return Err(Refusal::too_large(
                "hook input bytes",
                MAX_HOOK_INPUT_BYTES as u64,
                bytes.len() as u64,
            ));
        }
        let decoded = match format {
            HookFormat::ClaudeCode => {
                let input: ClaudeCodeInput = parse(bytes)?;
                Self {
                    event: choose_event(
                        event,
                        input.hook_event_name.as_deref(),
                        "hook_event_name",
                    )?,
                    session: input.session_id,
                    prompt: input.prompt,
                    prompt_id: None,
                    query: None,
                    transcript_path: input.transcript_path,
                    messages: None,
                    speaker: None,
                }
            }
            HookFormat::Json => {
                let input: GenericInput = parse(bytes)?;
                if input
                    .messages
                    .as_ref()
                    .is_some_and(|messages| messages.len() > MAX_MESSAGES)
                {
                    return Err(Refusal::too_large(
                        "messages",
                        MAX_MESSAGES as u64,
                        input.messages.as_ref().map_or(0, Vec::len) as u64,
                    ));
                }
                Self {
                    event: choose_event(event, input.event.as_deref(), "event")?,
                    session: input.session,
                    prompt: input.prompt,
                    prompt_id: input.prompt_id,
                    query: input.query,
                    transcript_path: input.transcript_path,
                    messages: input.messages,
                    speaker: input.speaker,
                }
            }
        };
        if decoded.event == HookEvent::Prompt && decoded.prompt.is_none() {
            return Err(Refusal::invalid_input("prompt: missing"));
        }
        Ok(decoded)
    }

    /// The identity of this prompt, carried by its thread record so a retried hook appends nothing:
    /// SHA-256 over the session, the prompt and where the transcript stood (its length: a retry sees
    /// the same, the same words typed in a later turn see a longer transcript), or over the host's own
    /// prompt id when it gives one.
    pub fn prompt_identity(&self, transcript_length: Option<u64>) -> String {
        let identity = match &self.prompt_id {
            Some(id) => serde_json::json!(["prompt-id", self.session, id]),
            None => serde_json::json!([
                "prompt",
                self.session,
                self.prompt.as_deref().unwrap_or_default(),
                transcript_length,
            ]),
        };
        hex_digest(identity.to_string().as_bytes())
    }
}

fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Refusal> {
    // The input may hold the user's words: say where it is wrong, never what it says.
    serde_json::from_slice(bytes).map_err(|error| {
        Refusal::invalid_input(format!(
            "hook input is not the expected JSON ({:?} at line {}, column {})",
            error.classify(),
            error.line(),
            error.column()
        ))
    })
}

fn choose_event(
    chosen: Option<HookEvent>,
    named: Option<&str>,
    field: &str,
) -> Result<HookEvent, Refusal> {
    if let Some(event) = chosen {
        return Ok(event);
    }
    let Some(name) = named else {
        return Err(Refusal::invalid_input(format!(
            "no event: give one (prompt, session-start, turn-end) or the input's {field}"
        )));
    };
    HookEvent::parse(name).ok_or_else(|| {
        Refusal::invalid_input(format!(
            "{field}: not a hook event this command handles (prompt, session-start, turn-end, \
             UserPromptSubmit, SessionStart, Stop, SubagentStop, PostToolUse)"
        ))
    })
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn hex_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_input_with_unknown_fields_decodes() {
        let input = br#"{"session_id": "s1", "transcript_path": "/t.jsonl", "cwd": "/w",
            "hook_event_name": "UserPromptSubmit", "prompt": "hi", "permission_mode": "default",
            "future": {"x": 1}}"#;
        let decoded = HookInput::decode(input, HookFormat::ClaudeCode, None).expect("decodes");
        assert_eq!(decoded.event, HookEvent::Prompt);
        assert_eq!(decoded.session, "s1");
        assert_eq!(decoded.prompt.as_deref(), Some("hi"));
    }

    #[test]
    fn the_prompt_identity_changes_with_the_transcript_position_only() {
        let input = HookInput::decode(
            br#"{"session_id": "s1", "prompt": "yes"}"#,
            HookFormat::ClaudeCode,
            Some(HookEvent::Prompt),
        )
        .expect("decodes");
        assert_eq!(
            input.prompt_identity(Some(10)),
            input.prompt_identity(Some(10))
        );
        assert_ne!(
            input.prompt_identity(Some(10)),
            input.prompt_identity(Some(42))
        );
    }

    #[test]
    fn bad_inputs_are_refused() {
        for (input, format) in [
            (&b"not json"[..], HookFormat::ClaudeCode),
            (br#"{"prompt": "no session"}"#, HookFormat::ClaudeCode),
            (
                br#"{"session_id": "s", "hook_event_name": "Notification"}"#,
                HookFormat::ClaudeCode,
            ),
            (br#"{"session": "s", "event": "prompt"}"#, HookFormat::Json),
        ] {
            let refusal = HookInput::decode(input, format, None).expect_err("refused");
            assert_eq!(refusal.kind(), memory_core::ErrorKind::InvalidInput);
        }
    }
}
