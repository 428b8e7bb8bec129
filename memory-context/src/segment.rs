//! Segments: the atomic units of a conversation's model input, and how each renders as chat messages.
//!
//! A segment is never split: a view keeps or drops it whole, and a model step always carries the results
//! of its tool calls, so no chat API ever sees a call without its answer. Segments are immutable; a
//! result attaching to a step makes a new step, so a segment's token count and its elided form are
//! computed once and cached in it.

use std::sync::{Arc, OnceLock};

use memory_core::activity::Sequence;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tokens::Counter;

/// What kind of unit a segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SegmentKind {
    /// Instructions from a system record: pinned at the head of every view, never folded.
    System,
    /// A user's prompt: it opens a turn.
    Prompt,
    /// A model step: the assistant's text with its tool calls, and their results.
    Step,
    /// An assistant message without tool calls.
    Answer,
}

/// A tool call of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepCall {
    /// The call's id.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as given.
    pub arguments: Value,
    /// The record of the call.
    pub sequence: Sequence,
}

/// A tool result attached to its step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// The call it answers.
    pub call_id: String,
    /// The output, as rendered text (a string output as it is, anything else as compact JSON).
    pub output: String,
    /// Whether the tool reported failure.
    pub is_error: bool,
    /// The record of the result.
    pub sequence: Sequence,
    /// Characters cut from `output` by a view's elision (0 when shown whole).
    pub elided_chars: usize,
}

/// What a segment holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SegmentData {
    /// Instructions.
    System {
        /// Their text.
        text: String,
    },
    /// A prompt.
    Prompt {
        /// Who typed it.
        speaker: String,
        /// What they typed.
        text: String,
    },
    /// A model step.
    Step {
        /// The assistant's text before its calls (often empty).
        text: String,
        /// Its calls, in order.
        calls: Vec<StepCall>,
        /// The results that arrived, in arrival order.
        results: Vec<StepResult>,
    },
    /// An assistant message.
    Answer {
        /// Its text.
        text: String,
    },
}

/// One atomic unit of the conversation.
#[derive(Debug)]
pub struct Segment {
    id: String,
    kind: SegmentKind,
    records: Vec<Sequence>,
    data: SegmentData,
    tokens: OnceLock<(u64, usize)>,
    elided: OnceLock<(usize, Arc<Segment>)>,
}

impl Clone for Segment {
    fn clone(&self) -> Self {
        Self::new(
            self.id.clone(),
            self.kind,
            self.records.clone(),
            self.data.clone(),
        )
    }
}

impl PartialEq for Segment {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.records == other.records && self.data == other.data
    }
}

impl Segment {
    pub(crate) fn new(
        id: String,
        kind: SegmentKind,
        records: Vec<Sequence>,
        data: SegmentData,
    ) -> Self {
        Self {
            id,
            kind,
            records,
            data,
            tokens: OnceLock::new(),
            elided: OnceLock::new(),
        }
    }

    /// Its id, unique in its thread (`prompt:12`, `step:13`, `answer:20`, `system:1`: the kind and
    /// the sequence of the record that opened it).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its kind.
    pub fn kind(&self) -> SegmentKind {
        self.kind
    }

    /// The records it was built from, in log order (the opening record first).
    pub fn records(&self) -> &[Sequence] {
        &self.records
    }

    /// The record that opened it.
    pub fn first(&self) -> Sequence {
        self.records.first().copied().unwrap_or(Sequence::ZERO)
    }

    /// Its newest record.
    pub fn last(&self) -> Sequence {
        self.records.iter().copied().max().unwrap_or(Sequence::ZERO)
    }

    /// What it holds.
    pub fn data(&self) -> &SegmentData {
        &self.data
    }

    /// Whether it is a step with a call that has no result yet.
    pub fn has_unresolved_call(&self) -> bool {
        match &self.data {
            SegmentData::Step { calls, results, .. } => calls
                .iter()
                .any(|call| !results.iter().any(|result| result.call_id == call.call_id)),
            _ => false,
        }
    }

    /// Its tokens as `counter` counts its messages (cached for the counter it was first counted with).
    pub fn tokens(&self, counter: &Counter) -> usize {
        let (id, tokens) = *self
            .tokens
            .get_or_init(|| (counter.id(), counter.count_messages(&self.messages())));
        if id == counter.id() {
            tokens
        } else {
            counter.count_messages(&self.messages())
        }
    }

    /// Characters of its rendered content (exact: what a compaction's summary must be smaller than).
    pub fn chars(&self) -> usize {
        self.messages().iter().map(Message::chars).sum()
    }

    /// Its form with every tool output cut to `keep_chars` characters, memoized per segment (so a view
    /// elides and counts an old step once); the segment itself when there is nothing to cut.
    pub(crate) fn elided(self: &Arc<Self>, keep_chars: usize) -> Arc<Segment> {
        let SegmentData::Step {
            text,
            calls,
            results,
        } = &self.data
        else {
            return Arc::clone(self);
        };
        if results
            .iter()
            .all(|result| result.output.chars().count() <= keep_chars)
        {
            return Arc::clone(self);
        }
        if let Some((kept, segment)) = self.elided.get()
            && *kept == keep_chars
        {
            return Arc::clone(segment);
        }
        let results = results
            .iter()
            .map(|result| {
                let total = result.output.chars().count();
                if total <= keep_chars {
                    return result.clone();
                }
                let head: String = result.output.chars().take(keep_chars).collect();
                StepResult {
                    output: head,
                    elided_chars: total - keep_chars,
                    ..result.clone()
                }
            })
            .collect();
        let elided = Arc::new(Segment::new(
            self.id.clone(),
            self.kind,
            self.records.clone(),
            SegmentData::Step {
                text: text.clone(),
                calls: calls.clone(),
                results,
            },
        ));
        let _ = self.elided.set((keep_chars, Arc::clone(&elided)));
        elided
    }

    /// The chat messages it renders as (see [`Message`]).
    pub fn messages(&self) -> Vec<Message> {
        match &self.data {
            SegmentData::System { text } => vec![Message::text(Role::System, text.clone())],
            SegmentData::Prompt { speaker, text } => vec![Message {
                name: Some(speaker.clone()).filter(|name| !name.is_empty()),
                ..Message::text(Role::User, text.clone())
            }],
            SegmentData::Answer { text } => vec![Message::text(Role::Assistant, text.clone())],
            SegmentData::Step {
                text,
                calls,
                results,
            } => {
                let mut messages = Vec::with_capacity(1 + calls.len());
                messages.push(Message {
                    tool_calls: calls
                        .iter()
                        .map(|call| ToolCallMessage {
                            id: call.call_id.clone(),
                            kind: "function",
                            function: FunctionCall {
                                name: call.name.clone(),
                                arguments: call.arguments.to_string(),
                            },
                        })
                        .collect(),
                    ..Message::text(Role::Assistant, text.clone())
                });
                for call in calls {
                    let content = match results.iter().find(|result| result.call_id == call.call_id)
                    {
                        Some(result) if result.elided_chars > 0 => format!(
                            "{}… [elided: {} more characters; the whole output is record {} of \
                             this thread (memory_history_read)]",
                            result.output, result.elided_chars, result.sequence
                        ),
                        Some(result) if result.is_error => format!("[error] {}", result.output),
                        Some(result) => result.output.clone(),
                        None => "[no result yet: the tool has not answered]".to_owned(),
                    };
                    messages.push(Message {
                        tool_call_id: Some(call.call_id.clone()),
                        ..Message::text(Role::Tool, content)
                    });
                }
                messages
            }
        }
    }
}

/// A message's role, as chat APIs name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions (and the compaction frame).
    System,
    /// A user's words (and the recalled-memory block).
    User,
    /// The assistant's words and tool calls.
    Assistant,
    /// A tool's result.
    Tool,
}

/// A chat message in the shape the common chat APIs take (`role`, `content`, an assistant's
/// `tool_calls`, a tool message's `tool_call_id`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: String,
    /// The speaker's name, for a user's prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An assistant step's tool calls.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallMessage>,
    /// The call a tool message answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub(crate) fn text(role: Role, content: String) -> Self {
        Self {
            role,
            content,
            name: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// Characters of its content and its calls' names and arguments.
    pub fn chars(&self) -> usize {
        self.content.chars().count()
            + self
                .tool_calls
                .iter()
                .map(|call| call.function.name.chars().count() + call.function.arguments.len())
                .sum::<usize>()
    }
}

/// A tool call in an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ToolCallMessage {
    /// The call's id.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The function called.
    pub function: FunctionCall,
}

/// The function of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

/// A tool output's text: a string as it is, anything else as compact JSON.
pub fn output_text(output: &Value) -> String {
    match output {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
