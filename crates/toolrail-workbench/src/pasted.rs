//! A model output pasted into the Validator pane, checked the way a run's output is: the call
//! validator in the envelope and the calls extraction finds in free text (tool-set mode), or,
//! for a pasted llama-server chat response, the calls it holds; and where the grammar in force
//! would have stopped the model, with what it expected there as a person reads it (literals and
//! JSON pointer).

use serde_json::{Value, json};
use toolrail_engine::{Engine, VerdictKind, check_with};

use crate::analysis::{Analysis, readable_expected};
use crate::run::{Outcome, RunState};
use crate::workspace::SchemaMode;

/// The verdicts on one pasted output.
#[derive(Debug, Clone)]
pub struct PastedCheck {
    /// The verdict as on a run's output (tool-set mode, when the tool set loads): the report in
    /// the envelope and the calls found in free text, each checked; for a chat response, the
    /// calls it holds, each checked.
    pub outcome: Option<Outcome>,
    /// The pasted text read as a chat completion response (llama-server's, OpenAI's): its
    /// message's text content; `None` when the text is not one.
    pub response_content: Option<String>,
    /// What the grammar in force says: accepted, or where it stops and what it expected.
    pub grammar: String,
    /// True when the grammar accepts the whole text.
    pub grammar_accepts: bool,
}

/// The message of a chat completion response (`{"choices": [{"message": …}]}`) or a bare
/// assistant message (`{"role": "assistant", …}`): its text content and its tool calls as
/// `{"name", "arguments"}` with the arguments as JSON text (as a server sends them).
fn chat_response(text: &str) -> Option<(String, Vec<Value>)> {
    let value: Value = serde_json::from_str(text.trim()).ok()?;
    let message = match value.pointer("/choices/0/message") {
        Some(message) => message,
        None if value.get("role").and_then(Value::as_str) == Some("assistant") => &value,
        None => return None,
    };
    let content = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|call| {
                    let function = call.get("function").unwrap_or(call);
                    let arguments = match function.get("arguments") {
                        Some(Value::String(text)) => text.clone(),
                        Some(other) => other.to_string(),
                        None => String::new(),
                    };
                    json!({"name": function.get("name").cloned().unwrap_or(Value::Null),
                           "arguments": arguments})
                })
                .collect()
        })
        .unwrap_or_default();
    Some((content, calls))
}

/// Checks `text` against the analysis's tool set and grammar.
pub fn check_pasted(analysis: &Analysis, text: &str) -> PastedCheck {
    let tool_set_mode = analysis.input.schema.mode == SchemaMode::ToolSet;
    let inputs = RunState::inputs(analysis);
    let response = chat_response(text);
    let outcome = (tool_set_mode && inputs.tools.is_some()).then(|| match &response {
        Some((_, calls)) => Outcome::judge_server_calls(calls, &inputs),
        // Read as an unconstrained run's output: the envelope, then free-text extraction.
        None => Outcome::judge(text, false, &inputs),
    });
    let response_content = response.map(|(content, _)| content);
    if response_content.is_some() {
        return PastedCheck {
            outcome,
            response_content,
            grammar: "a chat response: the server read the calls out of the model's text; the \
                      grammar checks model text, so paste that to check it"
                .to_owned(),
            grammar_accepts: false,
        };
    }
    let Some(grammar) = &analysis.grammar else {
        return PastedCheck {
            outcome,
            response_content,
            grammar: "no grammar in force".to_owned(),
            grammar_accepts: false,
        };
    };
    let mut engine = Engine::new(std::sync::Arc::clone(grammar));
    let verdict = check_with(&mut engine, text.as_bytes());
    let consumed = &text.as_bytes()[..verdict.offset.unwrap_or(text.len())];
    let expected = readable_expected(&engine, &verdict, consumed, &analysis.places).join(", ");
    let words = match verdict.kind {
        VerdictKind::Accepted => "the grammar accepts the whole text".to_owned(),
        VerdictKind::Incomplete => format!(
            "the grammar needs more at {}: next may be {expected}",
            verdict.position
        ),
        VerdictKind::Rejected => format!(
            "the grammar stops it at {} (byte {}): expected {expected}",
            verdict.position,
            verdict.offset.unwrap_or(0)
        ),
        VerdictKind::TooAmbiguous => format!(
            "the grammar is too ambiguous to follow at {}",
            verdict.position
        ),
    };
    PastedCheck {
        outcome,
        response_content,
        grammar: words,
        grammar_accepts: verdict.kind == VerdictKind::Accepted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{AnalysisInput, Computer};
    use crate::workspace::Workspace;

    /// The default workspace's analysis: the weather sample, envelope openai.
    fn weather() -> Analysis {
        let ws = Workspace::default();
        Computer::default().compute(&AnalysisInput::from_workspace(&ws, 0))
    }

    #[test]
    fn a_call_after_a_line_of_prose_is_found_and_checked() {
        let text = "Let me look that up.\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}";
        let check = check_pasted(&weather(), text);
        let outcome = check.outcome.expect("tool-set mode");
        assert!(!outcome.report.as_ref().unwrap().is_valid_call());
        let extraction = outcome.extraction.as_ref().unwrap();
        assert_eq!(extraction.calls.len(), 1);
        assert_eq!(extraction.calls[0].call.name, "get_weather");
        assert!(outcome.extracted_checks[0].is_valid());
        assert!(!check.grammar_accepts);
    }

    #[test]
    fn a_pasted_chat_response_is_read_for_its_calls() {
        let response = r#"{"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "id": "x", "function": {
                "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}}]}"#;
        let check = check_pasted(&weather(), response);
        assert_eq!(check.response_content.as_deref(), Some(""));
        let outcome = check.outcome.unwrap();
        let calls = outcome.server_calls.as_ref().unwrap();
        assert_eq!(calls.len(), 1);
        assert!(calls[0].is_valid(), "{calls:?}");
        assert!(outcome.is_valid_call());
        // The same response with an argument of the wrong type: invalid, with its pointer.
        let bad = response.replace(r#"\"Oslo\""#, "5");
        let outcome = check_pasted(&weather(), &bad).outcome.unwrap();
        assert!(!outcome.is_valid_call());
        let feedback = &outcome.server_calls.unwrap()[0];
        assert!(
            feedback
                .check
                .as_ref()
                .unwrap()
                .feedback
                .join(" ")
                .contains("/city"),
            "{feedback:?}"
        );
        // Ordinary JSON that is not a response is read as model text.
        let call = r#"{"name": "get_weather", "arguments": {"city": "Oslo"}}"#;
        let check = check_pasted(&weather(), call);
        assert!(check.response_content.is_none());
        assert!(check.outcome.unwrap().report.unwrap().is_valid_call());
        assert!(check.grammar_accepts, "{}", check.grammar);
    }
}
