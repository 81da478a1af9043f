//! The tools as a client sends them: llama-server hands a request's `tools` JSON to the chat
//! template as written (only `name`, `description` and `parameters` of each function are read,
//! and `parameters` is passed on verbatim), so the prompt a model sees shows the document as
//! pasted, not toolrail's normalised reading of it ([`crate::toolset`]).
//!
//! Each [`Tool`] keeps what its definition wrote ([`SentParameters`]); [`Tool::client_definition`]
//! gives the OpenAI `tools` entry a client would send, and [`Tool::reading_differences`] says where
//! toolrail's reading (used for its own grammar and validation) differs from it: a BFCL
//! `"optional": []` dropped, a missing top-level `"type": "object"` added, `float` read as
//! `number`.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use toolrail_schema::JsonPointer;

use crate::toolset::{Tool, ToolSet};

/// What a client sends as a tool's `parameters`.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum SentParameters {
    /// There is no JSON document of its own to send (a Python function, a tool built in code, a
    /// Gemini OpenAPI schema a client must convert first): toolrail's reading is sent.
    #[default]
    Reading,
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
}

impl fmt::Display for ReadingDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "parameters".to_owned()
        } else {
            format!("parameters{}", self.pointer)
        };
        write!(f, "tool `{}`, {at}: ", self.tool)?;
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

impl Tool {
    /// The OpenAI `tools` entry a client sends for this tool: `{"type": "function", "function":
    /// {"name", "description"?, "parameters"?}}` with the parameters as its document wrote them.
    pub fn client_definition(&self) -> Value {
        let mut function = Map::new();
        function.insert("name".into(), json!(self.name));
        if !self.description.is_empty() {
            function.insert("description".into(), json!(self.description));
        }
        match &self.sent {
            SentParameters::Reading => {
                function.insert("parameters".into(), self.parameters.clone());
            }
            SentParameters::Absent => {}
            SentParameters::Verbatim(schema) => {
                function.insert("parameters".into(), schema.clone());
            }
        }
        json!({"type": "function", "function": function})
    }

    /// Where toolrail's reading of the parameters differs from what a client sends, in document
    /// order (none when the reading is what is sent).
    pub fn reading_differences(&self) -> Vec<ReadingDifference> {
        let sent = match &self.sent {
            SentParameters::Reading => return Vec::new(),
            // llama-server gives the template `{}` for a tool with no parameters
            SentParameters::Absent => &Value::Object(Map::new()),
            SentParameters::Verbatim(schema) => schema,
        };
        let mut out = Vec::new();
        // iterative: schemas may be deep (their depth is bounded when loaded)
        let mut pending = vec![(JsonPointer::root(), Some(sent), Some(&self.parameters))];
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
                    tool: self.name.clone(),
                    pointer: at.to_string(),
                    sent: a.cloned(),
                    read: b.cloned(),
                }),
            }
        }
        out
    }
}

impl ToolSet {
    /// The request's `tools` as a client sends them (see [`Tool::client_definition`]).
    pub fn client_tools(&self) -> Vec<Value> {
        self.tools().iter().map(Tool::client_definition).collect()
    }

    /// Every tool's [`Tool::reading_differences`], in tool order.
    pub fn reading_differences(&self) -> Vec<ReadingDifference> {
        self.tools()
            .iter()
            .flat_map(Tool::reading_differences)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bfcl_list_is_sent_as_written_and_each_reading_difference_is_named() {
        let doc = json!([{
            "name": "area",
            "description": "Area of a circle.",
            "parameters": {
                "type": "dict",
                "properties": {"radius": {"type": "float"}, "unit": {"type": "string"}},
                "required": ["radius"],
                "optional": []
            }
        }]);
        let set = ToolSet::from_value(&doc).unwrap();
        let sent = set.client_tools();
        assert_eq!(sent[0]["function"]["parameters"], doc[0]["parameters"]);
        assert_eq!(sent[0]["function"]["description"], "Area of a circle.");
        let differences = set.reading_differences();
        let lines: Vec<String> = differences.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "tool `area`, parameters/type: the client sends \"dict\", toolrail reads it as \"object\"",
                "tool `area`, parameters/properties/radius/type: the client sends \"float\", toolrail reads it as \"number\"",
                "tool `area`, parameters/optional: the client sends [], toolrail's reading drops it",
            ],
            "{lines:#?}"
        );
    }

    #[test]
    fn a_missing_schema_is_sent_as_none_and_a_missing_type_is_a_difference() {
        let doc = json!({"tools": [
            {"name": "ping", "inputSchema": {"properties": {"host": {"type": "string"}}}},
            {"type": "function", "function": {"name": "now"}}
        ]});
        let set = ToolSet::from_value(&doc).unwrap();
        let sent = set.client_tools();
        assert_eq!(
            sent[0]["function"]["parameters"],
            json!({"properties": {"host": {"type": "string"}}})
        );
        assert!(sent[1]["function"].get("parameters").is_none(), "{sent:?}");
        let differences = set.reading_differences();
        assert_eq!(differences[0].pointer, "/type");
        assert_eq!(differences[0].sent, None);
        assert_eq!(differences[0].read, Some(json!("object")));
        assert!(
            differences.iter().any(|d| d.tool == "now"),
            "{differences:?}"
        );
    }

    #[test]
    fn a_clean_openai_list_is_sent_unchanged_with_no_differences() {
        let doc = json!([{"type": "function", "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        }}]);
        let set = ToolSet::from_value(&doc).unwrap();
        assert_eq!(set.client_tools(), doc.as_array().unwrap().clone());
        assert!(set.reading_differences().is_empty());
    }
}
