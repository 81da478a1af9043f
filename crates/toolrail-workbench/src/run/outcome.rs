//! What a finished run produced, judged: the validator's report on the output (for the tools
//! and envelope of the run) and, for an unconstrained run, the calls extraction finds in the
//! free text, each checked against its tool's schema.

use serde_json::{Value, json};

use super::setup::RunInputs;
use crate::transcript::{CheckedCall, ExtractedCall, TemplateRun, Validation};
use toolrail_llm::record::Stop;
use toolrail_llm::template::{ParsedMessage, ToolChoice};
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
    /// The calls a llama-server parsed from the output (`tools` requests), each checked
    /// against its tool; None for runs that were not `tools` requests.
    pub server_calls: Option<Vec<ServerCallCheck>>,
    /// llama.cpp's parse of a template run's output and toolrail's check of each parsed call;
    /// None for runs under the other grammar sources.
    pub template: Option<TemplateParse>,
    /// Why the run failed before its end (an error, a dead end; see [`Stop::failure`]): the
    /// run is then invalid whatever its output holds, and this is said first.
    pub failure: Option<String>,
}

/// A template run's output as llama.cpp's parser read it (`common_chat_parse`, as
/// llama-server returns a response), each call checked against its tool's schema.
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateParse {
    /// The content, reasoning and calls llama.cpp parsed, or why its parser refused the output.
    pub parsed: Result<ParsedMessage, String>,
    /// Each parsed call checked by toolrail's validator.
    pub calls: Vec<ServerCallCheck>,
    /// Where llama.cpp's parse and toolrail's schema check disagree (or what makes the answer
    /// unusable), one sentence each; empty when they agree.
    pub disagreements: Vec<String>,
}

/// A call a llama-server parsed, checked against its tool.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerCallCheck {
    /// The tool's name as the server parsed it.
    pub name: String,
    /// The arguments' JSON text as the server sent it.
    pub arguments: String,
    /// The validator's check, or why the arguments could not be checked (not JSON).
    pub check: Result<CallCheck, String>,
}

impl ServerCallCheck {
    /// True when the call names a tool and its arguments are valid for it.
    pub fn is_valid(&self) -> bool {
        self.check.as_ref().is_ok_and(CallCheck::is_valid)
    }
}

impl Outcome {
    /// Judges `output`; `constrained` says whether a grammar shaped it.
    pub fn judge(output: &str, constrained: bool, inputs: &RunInputs) -> Outcome {
        let mut outcome = Outcome::default();
        let validator = match inputs
            .tools
            .as_ref()
            .map(|t| Validator::with_readings(t, inputs.validate.lenient))
        {
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

    /// Judges the calls a llama-server parsed (`name`, `arguments` as JSON text) against the
    /// run's tools: the server read the output in its own chat format, so its calls are what
    /// is validated, not the text.
    pub fn judge_server_calls(calls: &[Value], inputs: &RunInputs) -> Outcome {
        let mut outcome = Outcome::default();
        let validator = match inputs
            .tools
            .as_ref()
            .map(|t| Validator::with_readings(t, inputs.validate.lenient))
        {
            Some(Ok(v)) => Some(v),
            Some(Err(e)) => {
                outcome.error = Some(e.to_string());
                None
            }
            None => None,
        };
        let checks = calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                let name = call["name"].as_str().unwrap_or_default().to_owned();
                let arguments = call["arguments"].as_str().unwrap_or_default().to_owned();
                let check = match (&validator, serde_json::from_str::<Value>(&arguments)) {
                    (_, Err(e)) => Err(format!("the arguments are not JSON: {e}")),
                    (None, Ok(_)) => Err("no tool set to check it against".into()),
                    (Some(v), Ok(args)) => {
                        let mut check = v.check_call(&name, &args);
                        check.index = i;
                        Ok(check)
                    }
                };
                ServerCallCheck {
                    name,
                    arguments,
                    check,
                }
            })
            .collect();
        outcome.server_calls = Some(checks);
        outcome
    }

    /// Judges a template run: llama.cpp's parse of the output (already in `run`) and each call
    /// it parsed checked against the run's tools; says where the two disagree.
    pub fn judge_template(run: &TemplateRun, inputs: &RunInputs) -> Outcome {
        let parsed = match (&run.parsed, &run.parse_error) {
            (Some(message), _) => Ok(message.clone()),
            (None, error) => Err(error
                .clone()
                .unwrap_or_else(|| "the output was not parsed".to_owned())),
        };
        let values: Vec<Value> = parsed
            .as_ref()
            .map(|m| {
                m.tool_calls
                    .iter()
                    .map(|c| json!({"name": c.name, "arguments": c.arguments}))
                    .collect()
            })
            .unwrap_or_default();
        let mut outcome = Outcome::judge_server_calls(&values, inputs);
        let calls = outcome.server_calls.take().unwrap_or_default();
        let mut disagreements = Vec::new();
        match &parsed {
            Err(e) => disagreements.push(format!("llama.cpp's parser refused the output: {e}")),
            Ok(m)
                if m.tool_calls.is_empty()
                    && run.result.inputs.tool_choice == ToolChoice::Required =>
            {
                disagreements
                    .push("tool_choice is required but llama.cpp parsed no tool call".to_owned());
            }
            Ok(_) => {}
        }
        for (i, call) in calls.iter().enumerate() {
            match &call.check {
                Ok(check) if !check.is_valid() => disagreements.push(format!(
                    "call {i} ({}): llama.cpp returns it as a call, but the schema rejects it: {}",
                    call.name,
                    check.feedback.join("; ")
                )),
                Ok(_) => {}
                Err(e) => disagreements.push(format!(
                    "call {i} ({}): llama.cpp returns it as a call, but {e}",
                    call.name
                )),
            }
        }
        outcome.template = Some(TemplateParse {
            parsed,
            calls,
            disagreements,
        });
        outcome
    }

    /// Marks the outcome of a run that ended with `stop`: a failure (see [`Stop::failure`]) makes
    /// it invalid, and a template run's parse no longer "agrees" (the failure is its first
    /// disagreement).
    pub fn ended_with(mut self, stop: &Stop) -> Outcome {
        self.failure = stop.failure();
        if let (Some(failure), Some(template)) = (&self.failure, &mut self.template) {
            template.disagreements.insert(0, failure.clone());
        }
        self
    }

    /// True when the output read in the envelope is a valid call (or calls), or, for a `tools`
    /// request, when the server parsed at least one call and every one is valid; never for a
    /// failed run.
    pub fn is_valid_call(&self) -> bool {
        if self.failure.is_some() {
            return false;
        }
        if let Some(t) = &self.template {
            return t.parsed.is_ok() && !t.calls.is_empty() && t.disagreements.is_empty();
        }
        match &self.server_calls {
            Some(calls) => !calls.is_empty() && calls.iter().all(ServerCallCheck::is_valid),
            None => self.report.as_ref().is_some_and(Report::is_valid_call),
        }
    }

    /// The outcome as the transcript's `validation`: `valid`, `messages`, `feedback` for the
    /// output read in the envelope, plus `extracted` calls for unconstrained runs; `calls` for a
    /// template run, `server_calls` for a `tools` request. `None` when nothing was judged. A
    /// failed run is `valid: false` with its failure the first message.
    pub fn to_json(&self) -> Option<Validation> {
        let judged = self.judged_json();
        let Some(failure) = &self.failure else {
            return judged;
        };
        let mut validation = judged.unwrap_or_default();
        validation.valid = Some(false);
        let messages = validation.messages.get_or_insert_with(Vec::new);
        if !messages.contains(failure) {
            messages.insert(0, failure.clone());
        }
        Some(validation)
    }

    /// [`Outcome::to_json`] before a failure is applied.
    fn judged_json(&self) -> Option<Validation> {
        if let Some(t) = &self.template {
            let calls = t
                .calls
                .iter()
                .map(|c| CheckedCall {
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                    valid: Some(c.is_valid()),
                    ..CheckedCall::default()
                })
                .collect();
            return Some(Validation {
                valid: Some(t.parsed.is_ok() && t.disagreements.is_empty()),
                messages: Some(t.disagreements.clone()),
                calls: Some(Some(calls)),
                ..Validation::default()
            });
        }
        if let Some(calls) = &self.server_calls {
            let list = calls
                .iter()
                .map(|c| CheckedCall {
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                    valid: Some(c.is_valid()),
                    feedback: Some(match &c.check {
                        Ok(check) => check.feedback.clone(),
                        Err(e) => vec![e.clone()],
                    }),
                    other: serde_json::Map::new(),
                })
                .collect();
            let mut messages: Vec<String> = Vec::new();
            if calls.is_empty() {
                messages.push("the server parsed no tool call from the output".into());
            }
            return Some(Validation {
                valid: Some(self.is_valid_call()),
                messages: Some(messages),
                server_calls: Some(list),
                ..Validation::default()
            });
        }
        if self.report.is_none() && self.extraction.is_none() && self.error.is_none() {
            return None;
        }
        let mut validation = match &self.report {
            Some(report) => Validation {
                valid: Some(report.is_valid()),
                messages: Some(report.messages()),
                feedback: Some(report.feedback()),
                ..Validation::default()
            },
            None => Validation::default(),
        };
        validation.error.clone_from(&self.error);
        if let Some(extraction) = &self.extraction {
            let calls = extraction
                .calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let check = self.extracted_checks.get(i);
                    ExtractedCall {
                        name: c.call.name.clone(),
                        arguments: Value::Object(c.call.arguments.clone()),
                        pattern: c.pattern.label().to_string(),
                        span: [c.span.start, c.span.end],
                        valid: check.map(CallCheck::is_valid),
                        feedback: check.map(|c| c.feedback.clone()),
                    }
                })
                .collect();
            validation.extracted = Some(calls);
            validation.prose = Some(extraction.prose.clone());
        }
        Some(validation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolrail_llm::template::ParsedMessage;
    use toolrail_tools::toolset::ToolSet;

    fn weather_inputs() -> RunInputs {
        let sample = crate::samples::SAMPLES[0];
        RunInputs {
            tools: Some(ToolSet::from_text(sample.text).unwrap()),
            format: sample.format,
            validate: toolrail_tools::validate::ValidateOptions {
                parallel: false,
                auto: true,
                lenient: false,
            },
            ..RunInputs::default()
        }
    }

    /// An empty output that `auto` accepts as "no call" is valid after a clean end and invalid,
    /// failure first, after a dead end: the same verdict, red instead of green.
    #[test]
    fn a_failed_run_is_invalid_whatever_its_output_holds() {
        let inputs = weather_inputs();
        let clean = Outcome::judge("", true, &inputs).ended_with(&Stop::EndOfGeneration);
        assert_eq!(clean.to_json().unwrap().valid, Some(true));
        let dead = Outcome::judge("", true, &inputs).ended_with(&Stop::DeadEnd {
            offset: 0,
            expected: vec!["'{'".into()],
        });
        let json = dead.to_json().unwrap();
        assert_eq!(json.valid, Some(false));
        assert_eq!(
            json.messages.unwrap()[0],
            "the run reached a dead end at output byte 0: no token could continue the grammar (it expected '{')"
        );
        assert!(!dead.is_valid_call());
    }

    /// A template run whose parse "agrees" (nothing parsed, nothing to disagree with) but that
    /// stopped on an error: the failure is its first disagreement, so the app shows no "agree".
    #[test]
    fn a_template_run_that_stopped_on_an_error_does_not_agree() {
        let parse = |disagreements| TemplateParse {
            parsed: Ok(ParsedMessage {
                role: "assistant".into(),
                content: String::new(),
                reasoning_content: String::new(),
                tool_calls: Vec::new(),
            }),
            calls: Vec::new(),
            disagreements,
        };
        let agreeing = Outcome {
            template: Some(parse(Vec::new())),
            ..Outcome::default()
        };
        assert_eq!(agreeing.to_json().unwrap().valid, Some(true));
        let stop = Stop::Error {
            message: "token 6 (\"><\"): the grammar refused '<'".into(),
        };
        let failed = agreeing.ended_with(&stop);
        let failure = stop.failure().unwrap();
        assert_eq!(failed.template, Some(parse(vec![failure.clone()])));
        let json = failed.to_json().unwrap();
        assert_eq!(json.valid, Some(false));
        assert_eq!(json.messages, Some(vec![failure]));
    }
}
