//! The tools as a client sends them: llama-server hands a request's `tools` JSON to the chat
//! template as written (only `name`, `description` and `parameters` of each function are read,
//! and `parameters` is passed on verbatim), so the prompt a model sees shows the document as
//! pasted, not toolrail's normalised reading of it ([`crate::toolset`]).
//!
//! Each [`crate::toolset::Tool`] keeps what its definition wrote ([`SentParameters`]); its
//! `client_definition` gives the OpenAI `tools` entry a client would send, and its
//! `reading_differences` says where
//! toolrail's reading (used for its own grammar and validation) differs from it: a BFCL
//! `"optional": []` dropped, a missing top-level `"type": "object"` added, `float` read as
//! `number`.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use toolrail_schema::JsonPointer;

/// What a client sends as a tool's `parameters`.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum SentParameters {
    /// There is no JSON document of its own to send (a Python function, a tool built in code):
    /// toolrail's reading is sent.
    #[default]
    Reading,
    /// The document's schema is in a shape a client converts before sending (a Gemini OpenAPI
    /// schema, named here): toolrail's conversion is sent, and a client's may differ.
    Converted(String),
    /// The definition has no parameter schema: the client sends none (llama-server then gives
    /// the template `{}`).
    Absent,
    /// The parameter schema exactly as the loaded document writes it.
    Verbatim(Value),
}

/// One place where toolrail's reading of a tool's parameters differs from what a client sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadingDifference {
    /// The tool.
    pub tool: String,
    /// Where, as a JSON pointer into the tool's `parameters` (empty: the whole schema).
    pub pointer: String,
    /// The value the client sends there (`None`: the client sends nothing there).
    pub sent: Option<Value>,
    /// toolrail's reading there (`None`: toolrail's reading drops it).
    pub read: Option<Value>,
    /// The shape the whole schema is written in when a client converts it before sending (a
    /// Gemini OpenAPI schema): then this is one note for the tool, not a place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converted_from: Option<String>,
}

impl fmt::Display for ReadingDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "parameters".to_owned()
        } else {
            format!("parameters{}", self.pointer)
        };
        write!(f, "tool `{}`, {at}: ", self.tool)?;
        if let Some(shape) = &self.converted_from {
            return write!(
                f,
                "written as {shape}, which a client converts before sending; the prompt shows \
                 toolrail's conversion, and a client's may differ"
            );
        }
        match (&self.sent, &self.read) {
            (Some(sent), Some(read)) => write!(
                f,
                "the client sends {}, toolrail reads it as {}",
                short(sent),
                short(read)
            ),
            (Some(sent), None) => write!(
                f,
                "the client sends {}, toolrail's reading drops it",
                short(sent)
            ),
            (None, Some(read)) => write!(
                f,
                "the client sends nothing, toolrail's reading adds {}",
                short(read)
            ),
            (None, None) => f.write_str("no difference"),
        }
    }
}

/// A value in one line, cut after 80 characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The OpenAI `tools` entry a client sends for a tool: `{"type": "function", "function":
/// {"name", "description"?, "parameters"?}}`, the parameters as `sent` says (`read`, toolrail's
/// reading, when there is nothing else to send).
pub fn client_definition(
    name: &str,
    description: &str,
    read: &Value,
    sent: &SentParameters,
) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), json!(name));
    if !description.is_empty() {
        function.insert("description".into(), json!(description));
    }
    match sent {
        SentParameters::Reading | SentParameters::Converted(_) => {
            function.insert("parameters".into(), read.clone());
        }
        SentParameters::Absent => {}
        SentParameters::Verbatim(schema) => {
            function.insert("parameters".into(), schema.clone());
        }
    }
    json!({"type": "function", "function": function})
}

/// Where toolrail's reading (`read`) of tool `tool`'s parameters differs from what a client
/// sends (`sent`), in document order; none when the reading is what is sent.
pub fn reading_differences(
    tool: &str,
    read: &Value,
    sent: &SentParameters,
) -> Vec<ReadingDifference> {
    let sent = match sent {
        SentParameters::Reading => return Vec::new(),
        SentParameters::Converted(shape) => {
            return vec![ReadingDifference {
                tool: tool.to_owned(),
                pointer: String::new(),
                sent: None,
                read: None,
                converted_from: Some(shape.clone()),
            }];
        }
        // llama-server gives the template `{}` for a tool with no parameters
        SentParameters::Absent => &Value::Object(Map::new()),
        SentParameters::Verbatim(schema) => schema,
    };
    let mut out = Vec::new();
    // iterative: schemas may be deep (their depth is bounded when loaded)
    let mut pending = vec![(JsonPointer::root(), Some(sent), Some(read))];
    while let Some((at, sent, read)) = pending.pop() {
        match (sent, read) {
            (Some(Value::Object(a)), Some(Value::Object(b))) => {
                let mut children = Vec::new();
                for (key, value) in a {
                    children.push((at.with_key(key), Some(value), b.get(key)));
                }
                for (key, value) in b {
                    if !a.contains_key(key) {
                        children.push((at.with_key(key), None, Some(value)));
                    }
                }
                pending.extend(children.into_iter().rev());
            }
            (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
                let children: Vec<_> = (a.iter().zip(b).enumerate())
                    .map(|(i, (x, y))| (at.with_index(i), Some(x), Some(y)))
                    .collect();
                pending.extend(children.into_iter().rev());
            }
            (a, b) if a == b => {}
            (a, b) => out.push(ReadingDifference {
                converted_from: None,
                tool: tool.to_owned(),
                pointer: at.to_string(),
                sent: a.cloned(),
                read: b.cloned(),
            }),
        }
    }
    out
}
