//! `toolrail bench-calls`'s logic, a convergence bench on BFCL questions: grammar versus prompt
//! plus retries ([`BenchMode`]). For each question the model answers greedily
//!
//! - under the tool set's grammar (`toolrail` engine): one answer;
//! - free (`none` engine), prompt only (optionally with a few-shot example call): the first
//!   call [`extract_calls`] finds in the text is checked by the validator; a blocked call (none
//!   found, unknown tool, arguments against the schema) is not run, the validator's feedback
//!   line with its JSON pointers goes back as a `role=tool` turn ([`tool_feedback_turn`]) and
//!   the model answers again, until a valid call or `max_blocked` consecutive blocked calls.
//!
//! Each is scored: *valid call* (with the grammar, the whole output validates as one call in the
//! envelope; without, the extracted call validates against the tool set), *first-tool match*
//! (that call names the tool of BFCL's first ground-truth call), attempts, tokens and wall time.
//!
//! Cases come from BFCL v4 files (`X.json`: one `{id, question, function}` a line; the ground
//! truth in `X.answers.json` beside it: `{id, ground_truth: [{tool: {...}}]}`).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::bench::{GreedyRun, RunEnd};
use super::worker::EngineKind;
use super::{LlmError, Model, SessionOptions};
use std::time::Instant;
use toolrail_engine::MaskEngine;
use toolrail_tools::envelope::{Format, Spacing, render_call};
use toolrail_tools::extract::extract_calls;
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::prompt::{PromptFamily, build_prompt, tool_feedback_turn};
use toolrail_tools::toolset::ToolSet;
use toolrail_tools::validate::{CallCheck, ValidateOptions, Validator};

/// Why the bench could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchCallsError {
    /// A cases file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line of a cases file is not what BFCL writes.
    #[error("{}:{line}: {message}", .path.display())]
    Case {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A case's tools could not become a grammar, a prompt or a validator.
    #[error("case {id}: {message}")]
    Tools {
        /// The BFCL id.
        id: String,
        /// What failed.
        message: String,
    },
    /// The model failed.
    #[error(transparent)]
    Model(#[from] LlmError),
    /// The llama-server failed (its message, or why it could not be reached).
    #[error("{0}")]
    Server(String),
}

/// One BFCL question.
#[derive(Clone, Debug)]
pub struct BfclCase {
    /// BFCL's id (`multiple_0`, ...).
    pub id: String,
    /// The user's turns of the first conversation, joined by newlines.
    pub question: String,
    /// The tool definitions (BFCL's `function` array).
    pub functions: Value,
    /// The tool of the first ground-truth call, if the answers file was there.
    pub expected_tool: Option<String>,
}

/// The answers file beside a cases file: `X.json` -> `X.answers.json`.
pub fn answers_path(cases: &Path) -> PathBuf {
    let stem = cases
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    cases.with_file_name(format!("{stem}.answers.json"))
}

fn read_lines(path: &Path) -> Result<Vec<(usize, Value)>, BenchCallsError> {
    let text = crate::files::read_regular_to_string(path, crate::files::MAX_TEXT_FILE_BYTES)
        .map_err(|e| BenchCallsError::Read {
            path: path.to_owned(),
            source: e.into_io(),
        })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value = serde_json::from_str(line).map_err(|e| BenchCallsError::Case {
            path: path.to_owned(),
            line: i + 1,
            message: format!("not JSON: {e}"),
        })?;
        out.push((i + 1, value));
    }
    Ok(out)
}

/// Reads `n` cases of a BFCL file after its first `skip` ones (so questions tuned on can be
/// kept apart from held-out ones), with the ground truth's first tool when the answers file
/// exists beside it.
pub fn load_cases(path: &Path, skip: usize, n: usize) -> Result<Vec<BfclCase>, BenchCallsError> {
    let answers_file = answers_path(path);
    let mut expected = std::collections::HashMap::new();
    if answers_file.is_file() {
        for (_, answer) in read_lines(&answers_file)? {
            let id = answer["id"].as_str().unwrap_or_default().to_owned();
            let tool = answer["ground_truth"]
                .get(0)
                .and_then(Value::as_object)
                .and_then(|call| call.keys().next().cloned());
            expected.insert(id, tool);
        }
    }
    let mut cases = Vec::new();
    for (line, value) in read_lines(path)?.into_iter().skip(skip).take(n) {
        let bad = |message: &str| BenchCallsError::Case {
            path: path.to_owned(),
            line,
            message: message.to_owned(),
        };
        let id = value["id"]
            .as_str()
            .ok_or_else(|| bad("no string `id`"))?
            .to_owned();
        let turns = value["question"]
            .get(0)
            .and_then(Value::as_array)
            .ok_or_else(|| bad("`question` is not a list of conversations"))?;
        let question = turns
            .iter()
            .filter(|t| t["role"] == "user")
            .filter_map(|t| t["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        if question.is_empty() {
            return Err(bad("the first conversation has no user turn"));
        }
        let functions = value
            .get("function")
            .filter(|f| f.is_array())
            .cloned()
            .ok_or_else(|| bad("`function` is not a list"))?;
        cases.push(BfclCase {
            expected_tool: expected.get(&id).cloned().flatten(),
            id,
            question,
            functions,
        });
    }
    Ok(cases)
}

/// Which ways of getting a call `bench-calls` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BenchMode {
    /// The tool set's grammar: one answer, valid by construction unless cut off.
    Grammar,
    /// Prompt only: the call extracted from free text, the validator's error sent back as a
    /// `role=tool` message and the model asked again, up to the blocked-call limit.
    Retry,
    /// Both, side by side.
    Both,
}

impl BenchMode {
    /// Whether the grammar is measured.
    pub fn grammar(self) -> bool {
        matches!(self, BenchMode::Grammar | BenchMode::Both)
    }

    /// Whether prompt + retries is measured.
    pub fn retry(self) -> bool {
        matches!(self, BenchMode::Retry | BenchMode::Both)
    }
}

/// How one answer scored.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Attempt {
    /// The answer is a valid call (see the module docs).
    pub valid: bool,
    /// The tool of the (first) call found, if any.
    pub tool: Option<String>,
    /// That tool is the ground truth's first tool.
    pub tool_match: bool,
    /// Tokens generated.
    pub tokens: u32,
    /// Why generation stopped.
    pub end: Option<RunEnd>,
    /// Steps where the budget guard replaced the model's choice.
    pub budget_replaced: u32,
    /// The text generated.
    pub output: String,
    /// The validator's feedback sent back to the model after this answer (retry mode, when the
    /// call was blocked and another attempt followed or the limit was reached).
    pub feedback: Option<String>,
    /// The call repeats the few-shot example in the prompt, placeholder values and all: the
    /// model copied the prompt, so it does not count as valid.
    pub echo: bool,
    /// The call is the same (tool and arguments) as an earlier attempt's on this question.
    pub repeated: bool,
}

/// One way of answering one question: its attempts and what they came to.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ModeResult {
    /// The last attempt is a valid call.
    pub valid: bool,
    /// The tool of the last attempt's call, if any.
    pub tool: Option<String>,
    /// That tool is the ground truth's first tool.
    pub tool_match: bool,
    /// Every attempt, in order (one under the grammar).
    pub attempts: Vec<Attempt>,
    /// Tokens generated over all attempts.
    pub tokens: u32,
    /// Wall time over all attempts (prompt processing included), in milliseconds.
    pub wall_ms: f64,
}

impl ModeResult {
    fn of(attempts: Vec<Attempt>, wall_ms: f64) -> ModeResult {
        let last = attempts.last();
        ModeResult {
            valid: last.is_some_and(|a| a.valid),
            tool: last.and_then(|a| a.tool.clone()),
            tool_match: last.is_some_and(|a| a.tool_match),
            tokens: attempts.iter().map(|a| a.tokens).sum(),
            attempts,
            wall_ms,
        }
    }
}

/// One question's answers.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CaseResult {
    /// BFCL's id.
    pub id: String,
    /// The ground truth's first tool.
    pub expected_tool: Option<String>,
    /// Under the grammar (modes `grammar` and `both`).
    pub grammar: Option<ModeResult>,
    /// Prompt only, extraction and validator-feedback retries (modes `retry` and `both`).
    pub retry: Option<ModeResult>,
}

/// Options of [`run_case`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallsOptions {
    /// The envelope of the grammar and of the validation with the grammar.
    pub format: Format,
    /// The prompt builder.
    pub family: PromptFamily,
    /// Tokens per answer at most.
    pub max_tokens: u32,
    /// Decoding threads.
    pub threads: Option<u32>,
    /// Repetition penalty for every run (1.0: off; see [`GreedyRun::with_repeat_penalty`]).
    pub repeat_penalty: f32,
    /// Keep the run under the grammar able to finish within `max_tokens`
    /// (see [`GreedyRun::with_budget_guard`]).
    pub budget_guard: bool,
    /// What to measure.
    pub mode: BenchMode,
    /// Retry mode: stop after this many consecutive blocked calls (at least 1).
    pub max_blocked: u32,
    /// Retry mode: add an example call of the question's first tool to the prompt.
    pub few_shot: bool,
}

impl Default for CallsOptions {
    fn default() -> Self {
        CallsOptions {
            format: Format::OpenAi,
            family: PromptFamily::Generic,
            max_tokens: 128,
            threads: None,
            repeat_penalty: 1.0,
            budget_guard: true,
            mode: BenchMode::Both,
            max_blocked: 3,
            few_shot: false,
        }
    }
}

/// Produces one answer from (prompt text, grammar): in-process or on a llama-server.
pub type AnswerFn<'a> = dyn FnMut(&str, Option<&str>) -> Result<Answer, BenchCallsError> + 'a;

/// One greedy answer, however it was produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The text generated.
    pub output: String,
    /// Tokens generated.
    pub tokens: u32,
    /// Why generation stopped (when known).
    pub end: Option<RunEnd>,
    /// Steps where the budget guard replaced the model's choice.
    pub budget_replaced: u32,
}

impl Answer {
    /// This answer as an attempt not scored yet (`valid` false, no tool, no feedback).
    fn unscored(self) -> Attempt {
        Attempt {
            valid: false,
            tool: None,
            tool_match: false,
            tokens: self.tokens,
            end: self.end,
            budget_replaced: self.budget_replaced,
            output: self.output,
            feedback: None,
            echo: false,
            repeated: false,
        }
    }
}

/// One greedy answer in-process: `grammar` under toolrail's engine (with the budget guard when
/// `options.budget_guard`), none free.
pub fn local_answer(
    model: &Model,
    masks: &mut MaskEngine,
    prompt: &str,
    grammar: Option<&str>,
    options: &CallsOptions,
) -> Result<Answer, BenchCallsError> {
    let prompt = model.tokenize(prompt, true, true);
    let session = SessionOptions {
        context: Some((prompt.len() as u32).saturating_add(options.max_tokens) + 8),
        threads: options.threads,
        compute: Default::default(),
        beside_window: false,
    };
    let kind = if grammar.is_some() {
        EngineKind::Toolrail
    } else {
        EngineKind::None
    };
    let mut run = GreedyRun::new(model, kind, grammar, &prompt, options.max_tokens, session)?
        .with_repeat_penalty(options.repeat_penalty);
    if options.budget_guard && grammar.is_some() {
        run = run.with_budget_guard();
    }
    let end = run.run_to_end(masks)?;
    Ok(Answer {
        output: String::from_utf8_lossy(run.output()).into_owned(),
        tokens: run.tokens().len() as u32,
        end: Some(end),
        budget_replaced: run.budget_replaced(),
    })
}

/// Runs one question in the modes `options.mode` names, in-process.
pub fn run_case(
    model: &Model,
    masks: &mut MaskEngine,
    case: &BfclCase,
    options: CallsOptions,
) -> Result<CaseResult, BenchCallsError> {
    masks.clear_cache();
    run_case_with(case, options, &mut |prompt, grammar| {
        local_answer(model, masks, prompt, grammar, &options)
    })
}

/// Runs one question in the modes `options.mode` names, each answer from `answer(prompt text,
/// grammar)` (e.g. a llama-server's): the same prompts, grammar, retries and scoring as
/// [`run_case`].
pub fn run_case_with(
    case: &BfclCase,
    options: CallsOptions,
    answer: &mut AnswerFn<'_>,
) -> Result<CaseResult, BenchCallsError> {
    let tools_error = |message: String| BenchCallsError::Tools {
        id: case.id.clone(),
        message,
    };
    let tools = ToolSet::from_value(&case.functions).map_err(|e| tools_error(e.to_string()))?;
    let validator = Validator::new(&tools).map_err(|e| tools_error(e.to_string()))?;
    let tool_values: Vec<Value> = tools
        .tools()
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    let base_prompt = build_prompt(
        options.family,
        options.format,
        &tool_values,
        &case.question,
        None,
    )
    .map_err(|e| tools_error(e.to_string()))?;
    let matches = |tool: &Option<String>| tool.is_some() && *tool == case.expected_tool;

    let grammar = if options.mode.grammar() {
        let grammar = tool_call_grammar(
            &tools,
            &GrammarOptions {
                format: options.format,
                ..GrammarOptions::default()
            },
        )
        .map_err(|e| tools_error(e.to_string()))?;
        let started = Instant::now();
        let run = answer(&base_prompt, Some(&grammar.text))?;
        let report =
            validator.validate_output(options.format, &run.output, ValidateOptions::default());
        let tool = report.calls.first().map(|c| c.name.clone());
        let attempt = Attempt {
            valid: report.is_valid_call(),
            tool_match: matches(&tool),
            tool,
            ..run.unscored()
        };
        Some(ModeResult::of(
            vec![attempt],
            started.elapsed().as_secs_f64() * 1000.0,
        ))
    } else {
        None
    };

    let retry = if options.mode.retry() {
        let system = options
            .few_shot
            .then(|| few_shot_text(&tools, options.format));
        let example = options.few_shot.then(|| few_shot_call(&tools)).flatten();
        let mut earlier_calls: Vec<(String, Value)> = Vec::new();
        let mut prompt = build_prompt(
            options.family,
            options.format,
            &tool_values,
            &case.question,
            system.as_deref(),
        )
        .map_err(|e| tools_error(e.to_string()))?;
        let started = Instant::now();
        let mut attempts = Vec::new();
        let limit = options.max_blocked.max(1);
        for blocked in 1..=limit {
            let mut run = answer(&prompt, None)?.unscored();
            let first = extract_calls(&run.output).calls.into_iter().next();
            let (check, tool) = match &first {
                Some(found) => (
                    Some(validator.check_call(
                        &found.call.name,
                        &Value::Object(found.call.arguments.clone()),
                    )),
                    Some(found.call.name.clone()),
                ),
                None => (None, None),
            };
            let call = first
                .as_ref()
                .map(|f| (f.call.name.clone(), Value::Object(f.call.arguments.clone())));
            run.echo = call.is_some() && call == example;
            run.repeated = call.as_ref().is_some_and(|c| earlier_calls.contains(c));
            earlier_calls.extend(call);
            run.valid = !run.echo && check.as_ref().is_some_and(|c| c.is_valid());
            run.tool_match = matches(&tool);
            run.tool = tool;
            if run.valid {
                attempts.push(run);
                break;
            }
            let feedback = if run.echo {
                "error: the call was not run: it repeats the example in the instructions with its placeholder values; call the tool the question needs with the values the question gives".to_owned()
            } else {
                feedback_line(check.as_ref(), options.format)
            };
            if blocked < limit {
                prompt.push_str(&tool_feedback_turn(options.family, &run.output, &feedback));
            }
            run.feedback = Some(feedback);
            attempts.push(run);
        }
        Some(ModeResult::of(
            attempts,
            started.elapsed().as_secs_f64() * 1000.0,
        ))
    } else {
        None
    };
    Ok(CaseResult {
        id: case.id.clone(),
        expected_tool: case.expected_tool.clone(),
        grammar,
        retry,
    })
}

/// A greedy answer from a llama-server: the prompt as `model`'s token ids, `grammar` sent as
/// GBNF, no candidates; the server's repetition penalty over the same window as toolrail's.
pub fn server_answer(
    client: &crate::server::ServerClient,
    model: &Model,
    prompt: &str,
    grammar: Option<&str>,
    max_tokens: u32,
    repeat_penalty: f32,
) -> Result<Answer, BenchCallsError> {
    use crate::server::{CompletionRequest, Prompt, SamplingFields, StreamEnd};
    let request = CompletionRequest {
        prompt: Prompt::Tokens(model.tokenize(prompt, true, true)),
        grammar: grammar.map(str::to_owned),
        json_schema: None,
        n_predict: max_tokens,
        post_sampling_probs: false,
        chat: None,
        sampling: SamplingFields {
            temperature: 0.0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            seed: 0,
            repeat_penalty,
            repeat_last_n: crate::record::PENALTY_WINDOW as u32,
            samplers: CompletionRequest::SAMPLERS.to_vec(),
            n_probs: 0,
            stream: true,
            cache_prompt: false,
            timings_per_token: false,
            sse_ping_interval: 1,
        },
    };
    let mut output = String::new();
    let end = client
        .stream_completion(&request, |chunk| {
            output.push_str(&chunk.content);
            std::ops::ControlFlow::Continue(())
        })
        .map_err(|e| BenchCallsError::Server(e.to_string()))?;
    let StreamEnd::Final(last) = end else {
        return Err(BenchCallsError::Server("the stream was cancelled".into()));
    };
    Ok(Answer {
        output,
        tokens: last.tokens_predicted.unwrap_or(0) as u32,
        end: match last.stop_type.as_deref() {
            Some("eos") | Some("word") => Some(RunEnd::EndOfGeneration),
            Some("limit") => Some(RunEnd::MaxTokens),
            _ => None,
        },
        budget_replaced: 0,
    })
}

/// The message sent back for a blocked call: the validator's feedback with the JSON pointers of
/// its issues, or that no call was found and how one is written.
pub fn feedback_line(check: Option<&CallCheck>, format: Format) -> String {
    match check {
        Some(check) => {
            let pointers: Vec<String> = check
                .issues
                .iter()
                .map(|i| {
                    if i.pointer.is_empty() {
                        "/".to_owned()
                    } else {
                        i.pointer.clone()
                    }
                })
                .collect();
            format!(
                "error: the call was not run: {} (at {}). Reply with the corrected call only.",
                check.feedback.join("; "),
                pointers.join(", ")
            )
        }
        None => format!(
            "error: no tool call found in the answer. Reply with only the call, written like {}.",
            render_call(
                format,
                "tool_name",
                &json!({"argument": "value"}),
                Spacing::Spaced
            )
        ),
    }
}

/// The few-shot text: an example call of the set's first tool, its required arguments filled
/// with placeholder values of their types, in the envelope's syntax.
pub fn few_shot_text(tools: &ToolSet, format: Format) -> String {
    let Some((name, arguments)) = few_shot_call(tools) else {
        return String::new();
    };
    format!(
        "Answer with one tool call and nothing else. For example, a call of {name} looks like:\n{}",
        render_call(format, &name, &arguments, Spacing::Spaced)
    )
}

/// The example call of [`few_shot_text`]: the first tool with a placeholder for each required
/// argument (what an answer that copies the prompt repeats).
pub fn few_shot_call(tools: &ToolSet) -> Option<(String, Value)> {
    let tool = tools.tools().first()?;
    let mut arguments = serde_json::Map::new();
    for name in tool.required_names() {
        let schema = &tool.parameters["properties"][&name];
        arguments.insert(name, example_value(schema));
    }
    Some((tool.name.clone(), Value::Object(arguments)))
}

/// A placeholder value of a schema's type (its first enum value when it has one), for example
/// calls in few-shot prompts.
pub fn example_value(schema: &Value) -> Value {
    if let Some(first) = schema.get("enum").and_then(|e| e.get(0)) {
        return first.clone();
    }
    let ty = match schema.get("type") {
        Some(Value::Array(types)) => types.first().and_then(Value::as_str),
        Some(t) => t.as_str(),
        None => None,
    };
    match ty {
        Some("integer") => json!(1),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some("object") => json!({}),
        Some("null") => Value::Null,
        _ => json!("example"),
    }
}

/// Rates of one mode over a set of results.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ModeSummary {
    /// Questions answered in this mode.
    pub cases: usize,
    /// Valid calls (at the last attempt).
    pub valid: usize,
    /// First-tool matches.
    pub matched: usize,
    /// Valid at the first attempt.
    pub valid_first: usize,
    /// Attempts over all questions.
    pub attempts: usize,
    /// Tokens generated over all questions.
    pub tokens: u64,
    /// Wall time over all questions, in milliseconds.
    pub wall_ms: f64,
    /// Questions whose answer at some attempt echoed the prompt's example call (not valid).
    pub echoes: usize,
    /// Questions where an attempt repeated an earlier attempt's call.
    pub repeats: usize,
}

impl ModeSummary {
    fn of<'r>(results: impl Iterator<Item = &'r ModeResult>) -> ModeSummary {
        let mut s = ModeSummary::default();
        for r in results {
            s.cases += 1;
            s.valid += usize::from(r.valid);
            s.matched += usize::from(r.tool_match);
            s.valid_first += usize::from(r.attempts.first().is_some_and(|a| a.valid));
            s.attempts += r.attempts.len();
            s.tokens += u64::from(r.tokens);
            s.wall_ms += r.wall_ms;
            s.echoes += usize::from(r.attempts.iter().any(|a| a.echo));
            s.repeats += usize::from(r.attempts.iter().any(|a| a.repeated));
        }
        s
    }

    /// `count` as a percentage of the questions.
    pub fn percent(&self, count: usize) -> f64 {
        if self.cases == 0 {
            0.0
        } else {
            count as f64 * 100.0 / self.cases as f64
        }
    }

    /// `total` per question.
    pub fn mean(&self, total: f64) -> f64 {
        if self.cases == 0 {
            0.0
        } else {
            total / self.cases as f64
        }
    }
}

/// Rates over a set of results, per mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct CallsSummary {
    /// Questions run.
    pub cases: usize,
    /// Under the grammar (`None` when not measured).
    pub grammar: Option<ModeSummary>,
    /// Prompt only with retries (`None` when not measured).
    pub retry: Option<ModeSummary>,
}

impl CallsSummary {
    /// Counts `results`.
    pub fn of(results: &[CaseResult]) -> CallsSummary {
        let summary = |results: Vec<&ModeResult>| {
            (!results.is_empty()).then(|| ModeSummary::of(results.into_iter()))
        };
        CallsSummary {
            cases: results.len(),
            grammar: summary(results.iter().filter_map(|r| r.grammar.as_ref()).collect()),
            retry: summary(results.iter().filter_map(|r| r.retry.as_ref()).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feedback_names_the_problem_and_its_pointer() {
        let tools = ToolSet::from_value(&json!([{"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"},
            "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}]))
        .unwrap();
        let validator = Validator::new(&tools).unwrap();
        let check = validator.check_call("get_weather", &json!({"city": "Oslo", "unit": "k"}));
        let line = feedback_line(Some(&check), Format::Gemma);
        assert!(line.starts_with("error: the call was not run: "), "{line}");
        assert!(line.contains("(at /unit)"), "{line}");
        let none = feedback_line(None, Format::Gemma);
        assert!(none.contains("call:tool_name{"), "{none}");
        let example = few_shot_text(&tools, Format::Gemma);
        assert!(
            example.ends_with("call:get_weather{\"city\": \"example\"}"),
            "{example}"
        );
    }

    /// The scorer on fixed answers (what the model said is not under test here): a copy of the
    /// prompt's example is an echo and not valid, even though it passes the schema; the same
    /// call again is flagged as a repeat; a real call after that is valid.
    #[test]
    fn an_answer_that_echoes_the_few_shot_example_is_not_counted_valid() {
        let case = BfclCase {
            id: "multiple_0".into(),
            question: "Weather in Oslo?".into(),
            functions: json!([{"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]}}]),
            expected_tool: Some("get_weather".into()),
        };
        let echo = r#"{"name": "get_weather", "arguments": {"city": "example"}}"#;
        let real = r#"{"name": "get_weather", "arguments": {"city": "Oslo"}}"#;
        let mut script = vec![echo, echo, real].into_iter();
        let options = CallsOptions {
            mode: BenchMode::Retry,
            few_shot: true,
            max_blocked: 3,
            ..CallsOptions::default()
        };
        let result = run_case_with(&case, options, &mut |_, _| {
            Ok(Answer {
                output: script.next().unwrap_or_default().to_owned(),
                tokens: 1,
                end: None,
                budget_replaced: 0,
            })
        })
        .unwrap();
        let retry = result.retry.unwrap();
        let flags: Vec<(bool, bool, bool)> = retry
            .attempts
            .iter()
            .map(|a| (a.valid, a.echo, a.repeated))
            .collect();
        assert_eq!(
            flags,
            [
                (false, true, false),
                (false, true, true),
                (true, false, false)
            ]
        );
        assert!(
            retry.attempts[0]
                .feedback
                .as_deref()
                .unwrap()
                .contains("repeats the example")
        );
        let summary = ModeSummary::of([&retry].into_iter());
        assert_eq!(
            (
                summary.valid,
                summary.valid_first,
                summary.echoes,
                summary.repeats
            ),
            (1, 0, 1, 1)
        );
    }

    #[test]
    fn answers_file_is_beside_the_cases() {
        assert_eq!(
            answers_path(Path::new("a/b/BFCL_v4_multiple.json")),
            Path::new("a/b/BFCL_v4_multiple.answers.json")
        );
    }

    #[test]
    fn bad_case_lines_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cases.json");
        std::fs::write(
            &path,
            "{\"id\": \"a\", \"question\": [[{\"role\": \"user\", \"content\": \"hi\"}]], \"function\": []}\n{\"id\": \"b\"}\n",
        )
        .unwrap();
        let err = load_cases(&path, 0, 10).unwrap_err().to_string();
        assert!(
            err.ends_with("cases.json:2: `question` is not a list of conversations"),
            "{err}"
        );
        let ok = load_cases(&path, 0, 1).unwrap();
        assert_eq!(ok[0].question, "hi");
        assert_eq!(ok[0].expected_tool, None);
        let err = load_cases(&path, 1, 1).unwrap_err().to_string();
        assert!(
            err.ends_with("cases.json:2: `question` is not a list of conversations"),
            "{err}"
        );
    }
}
