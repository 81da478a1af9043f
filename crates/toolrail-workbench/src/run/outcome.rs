//! What a finished run produced, judged: the validator's report on the output (for the tools
//! and envelope of the run) and, for an unconstrained run, the calls extraction finds in the
//! free text, each checked against its tool's schema.

use serde_json::{Value, json};

use super::setup::RunInputs;
use toolrail_tools::extract::{Extraction, extract_calls};
use toolrail_tools::validate::{CallCheck, Report, Validator};

/// The verdict on one run's output.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// The validator's report on the output read in the run's envelope (when tools were given).
    pub report: Option<Report>,
    /// Calls found in free text (unconstrained runs only).
    pub extraction: Option<Extraction>,
    /// Each extracted call checked against its tool (same order as `extraction.calls`).
    pub extracted_checks: Vec<CallCheck>,
    /// Why the output could not be validated (a tool schema the validator cannot compile).
    pub error: Option<String>,
}

impl Outcome {
    /// Judges `output`; `constrained` says whether a grammar shaped it.
    pub fn judge(output: &str, constrained: bool, inputs: &RunInputs) -> Outcome {
        let mut outcome = Outcome::default();
        let validator = match inputs.tools.as_ref().map(Validator::new) {
            Some(Ok(v)) => Some(v),
            Some(Err(e)) => {
                outcome.error = Some(e.to_string());
                None
            }
            None => None,
        };
        if let Some(validator) = &validator {
            outcome.report =
                Some(validator.validate_output(inputs.format, output, inputs.validate));
        }
        if !constrained {
            let extraction = extract_calls(output);
            if let Some(validator) = &validator {
                outcome.extracted_checks = extraction
                    .calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let mut check = validator
                            .check_call(&c.call.name, &Value::Object(c.call.arguments.clone()));
                        check.index = i;
                        check
                    })
                    .collect();
            }
            outcome.extraction = Some(extraction);
        }
        outcome
    }

    /// True when the output read in the envelope is a valid call (or calls).
    pub fn is_valid_call(&self) -> bool {
        self.report.as_ref().is_some_and(Report::is_valid_call)
    }

    /// The outcome as the transcript's `validation` value: `valid`, `messages`, `feedback`
    /// (as `toolrail generate` writes them), plus `extracted` calls for unconstrained runs.
    pub fn to_json(&self) -> Option<Value> {
        if self.report.is_none() && self.extraction.is_none() && self.error.is_none() {
            return None;
        }
        let mut value = match &self.report {
            Some(report) => json!({
                "valid": report.is_valid(),
                "messages": report.messages(),
                "feedback": report.feedback(),
            }),
            None => json!({}),
        };
        if let Some(error) = &self.error {
            value["error"] = json!(error);
        }
        if let Some(extraction) = &self.extraction {
            let calls: Vec<Value> = extraction
                .calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let check = self.extracted_checks.get(i);
                    json!({
                        "name": c.call.name,
                        "arguments": c.call.arguments,
                        "pattern": c.pattern.label(),
                        "span": [c.span.start, c.span.end],
                        "valid": check.map(CallCheck::is_valid),
                        "feedback": check.map(|c| c.feedback.clone()),
                    })
                })
                .collect();
            value["extracted"] = json!(calls);
            value["prose"] = json!(extraction.prose);
        }
        Some(value)
    }
}
