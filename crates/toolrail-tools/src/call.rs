//! The tool call shared by the extractor, the validator and the UI: a tool name and its
//! arguments as a JSON object.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One call of one tool: the tool's name and its arguments (a JSON object, possibly empty).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool's name as the model wrote it (namespaces such as `default_api:` already removed
    /// by the extractor where the pattern calls for it).
    pub name: String,
    /// The arguments, keyed by parameter name.
    pub arguments: Map<String, Value>,
}

impl ToolCall {
    /// A call with the given name and arguments.
    pub fn new(name: impl Into<String>, arguments: Map<String, Value>) -> Self {
        Self {
            name: name.into(),
            arguments,
        }
    }

    /// A call with the given name and no arguments.
    pub fn without_arguments(name: impl Into<String>) -> Self {
        Self::new(name, Map::new())
    }

    /// The call in the OpenAI envelope: `{"name": ..., "arguments": {...}}`.
    pub fn to_openai_json(&self) -> Value {
        let mut envelope = Map::new();
        envelope.insert("name".to_owned(), Value::String(self.name.clone()));
        envelope.insert(
            "arguments".to_owned(),
            Value::Object(self.arguments.clone()),
        );
        Value::Object(envelope)
    }

    /// The call in the Llama 3.1 envelope: `{"name": ..., "parameters": {...}}`.
    pub fn to_llama3_json(&self) -> Value {
        let mut envelope = Map::new();
        envelope.insert("name".to_owned(), Value::String(self.name.clone()));
        envelope.insert(
            "parameters".to_owned(),
            Value::Object(self.arguments.clone()),
        );
        Value::Object(envelope)
    }
}

impl std::fmt::Display for ToolCall {
    /// Compact form: `name {"arg": value}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let args = Value::Object(self.arguments.clone());
        write!(f, "{} {}", self.name, args)
    }
}
