//! A transcript's `validation`: the verdict on a run's output as the app shows it and as
//! `toolrail generate` writes it, typed. Its JSON is the one transcripts always had (every
//! field that was written is read back and written again the same way, `null`s included).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// The validation of a run's output. Which fields are present says what was judged:
/// `feedback` for the output read in the run's envelope, `calls` for llama.cpp's parse of a
/// template run, `server_calls` for the calls a llama-server parsed, `extracted` and `prose`
/// for calls found in an unconstrained run's free text.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    /// Whether the output is valid (absent when only extraction ran: no tools to read it with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid: Option<bool>,
    /// What is wrong, one sentence each (empty when valid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<String>>,
    /// The validator's feedback for the model (`Some(None)`: recorded as `null`, nothing wrong).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub feedback: Option<Option<String>>,
    /// A template run: each call llama.cpp's parser read, checked (`Some(None)`: recorded as
    /// `null`, the parser refused the output).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub calls: Option<Option<Vec<CheckedCall>>>,
    /// A `tools` request on a llama-server: each call the server parsed, checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_calls: Option<Vec<CheckedCall>>,
    /// Why the output could not be validated (a tool schema the validator cannot compile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Calls found in an unconstrained run's free text, each checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extracted: Option<Vec<ExtractedCall>>,
    /// The free text around the extracted calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prose: Option<String>,
}

/// A call a parser read (llama.cpp's for a template run, a llama-server's for a `tools`
/// request), with the validator's verdict.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckedCall {
    /// The tool's name.
    pub name: String,
    /// The arguments' JSON text, as the parser returned it.
    pub arguments: String,
    /// Whether the call is valid for its tool (absent in transcripts that recorded the calls
    /// unchecked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid: Option<bool>,
    /// The validator's feedback (server calls), or why the arguments could not be checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Vec<String>>,
    /// Anything else the parser returned with the call (a call `id`), kept as recorded.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A call found in free text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExtractedCall {
    /// The tool's name.
    pub name: String,
    /// The arguments (a JSON object).
    pub arguments: Value,
    /// The pattern it was found by, in words.
    pub pattern: String,
    /// Its byte range in the output.
    pub span: [usize; 2],
    /// Whether it is valid for its tool (`null` without a tool set).
    pub valid: Option<bool>,
    /// The validator's feedback (`null` without a tool set).
    pub feedback: Option<Vec<String>>,
}

impl Validation {
    /// True unless the validation says the output is invalid (no verdict counts as valid).
    pub fn is_valid(&self) -> bool {
        self.valid.unwrap_or(true)
    }

    /// The sentences saying what is wrong: the messages, else the feedback, else each
    /// invalid call's feedback.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self.messages.clone().unwrap_or_default();
        if out.is_empty()
            && let Some(Some(feedback)) = &self.feedback
        {
            out.push(feedback.clone());
        }
        for (i, call) in self.server_calls.iter().flatten().enumerate() {
            if call.valid == Some(false) {
                let feedback = call.feedback.clone().unwrap_or_default().join("; ");
                out.push(format!("call {i} ({}): {feedback}", call.name));
            }
        }
        out
    }
}

/// Reads a field that is present (`null` included) as `Some`, so that `null` is written back.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(value: Value) {
        let typed: Validation = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(serde_json::to_value(&typed).unwrap(), value);
        assert_eq!(
            serde_json::to_string(&typed).unwrap(),
            serde_json::to_string(&value).unwrap(),
            "same keys in the same order"
        );
    }

    #[test]
    fn every_shape_written_reads_back_and_writes_the_same() {
        round_trip(json!({"valid": true, "messages": [], "feedback": null}));
        round_trip(json!({"valid": false, "messages": ["m"], "feedback": "fix it"}));
        round_trip(
            json!({"valid": true, "messages": [], "feedback": null, "error": "e",
            "extracted": [{"name": "f", "arguments": {"a": 1}, "pattern": "json object",
                           "span": [0, 9], "valid": null, "feedback": null}],
            "prose": "hi"}),
        );
        round_trip(json!({"extracted": [], "prose": "just text"}));
        round_trip(json!({"valid": true, "messages": [],
            "calls": [{"name": "get_weather", "arguments": "{}", "valid": true}]}));
        round_trip(json!({"valid": false, "messages": ["refused"], "calls": null}));
        round_trip(json!({"valid": true, "messages": [],
            "calls": [{"name": "f", "arguments": "{}", "id": "call_1"}]}));
        round_trip(json!({"valid": false, "messages": [],
            "server_calls": [{"name": "f", "arguments": "{}", "valid": false,
                              "feedback": ["missing city"]}]}));
        round_trip(json!({"valid": true, "messages": [],
            "server_calls": [{"name": "f", "arguments": "{}", "id": "x"}]}));
    }

    #[test]
    fn problems_say_what_is_wrong() {
        let v: Validation = serde_json::from_value(json!({"valid": false, "messages": [],
            "server_calls": [{"name": "f", "arguments": "{}", "valid": false,
                              "feedback": ["missing city"]}]}))
        .unwrap();
        assert_eq!(v.problems(), ["call 0 (f): missing city"]);
        assert!(!v.is_valid());
        let v: Validation =
            serde_json::from_value(json!({"valid": false, "messages": [], "feedback": "no"}))
                .unwrap();
        assert_eq!(v.problems(), ["no"]);
        assert!(Validation::default().is_valid());
    }
}
