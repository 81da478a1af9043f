//! `toolrail bench-calls`'s logic, seed 001's convergence bench on BFCL questions: for each
//! question, the model answers greedily twice — under the tool set's grammar (`toolrail`
//! engine) and free (`none`) — and each answer is scored:
//!
//! - *valid call*: with the grammar, the whole output validates as one call in the envelope;
//!   without, the first call [`extract_calls`] finds in the free text validates against the
//!   tool set (name known, arguments satisfy the schema);
//! - *first-tool match*: that call names the tool of BFCL's first ground-truth call.
//!
//! Cases come from BFCL v4 files (`X.json`: one `{id, question, function}` a line; the ground
//! truth in `X.answers.json` beside it: `{id, ground_truth: [{tool: {...}}]}`).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::bench::{GreedyRun, RunEnd};
use super::worker::EngineKind;
use super::{LlmError, Model, SessionOptions};
use toolrail_engine::MaskEngine;
use toolrail_tools::envelope::Format;
use toolrail_tools::extract::extract_calls;
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::prompt::{PromptFamily, build_prompt};
use toolrail_tools::toolset::ToolSet;
use toolrail_tools::validate::{ValidateOptions, Validator};

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
    let text = std::fs::read_to_string(path).map_err(|source| BenchCallsError::Read {
        path: path.to_owned(),
        source,
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
}

/// One question's two answers.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CaseResult {
    /// BFCL's id.
    pub id: String,
    /// The ground truth's first tool.
    pub expected_tool: Option<String>,
    /// Under the grammar.
    pub with_grammar: Attempt,
    /// Free, scored by extraction.
    pub without_grammar: Attempt,
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
    /// Repetition penalty for both runs (1.0: off; see [`GreedyRun::with_repeat_penalty`]).
    pub repeat_penalty: f32,
    /// Keep the run under the grammar able to finish within `max_tokens`
    /// (see [`GreedyRun::with_budget_guard`]).
    pub budget_guard: bool,
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

/// Runs one question with and without the grammar, in-process.
pub fn run_case(
    model: &Model,
    masks: &mut MaskEngine,
    case: &BfclCase,
    options: CallsOptions,
) -> Result<CaseResult, BenchCallsError> {
    masks.clear_cache();
    run_case_with(case, options, &mut |prompt, grammar| {
        let prompt = model.tokenize(prompt, true, true);
        let session = SessionOptions {
            context: Some((prompt.len() as u32).saturating_add(options.max_tokens) + 8),
            threads: options.threads,
        };
        let kind = if grammar.is_some() {
            EngineKind::Toolrail
        } else {
            EngineKind::None
        };
        let mut run = GreedyRun::new(model, kind, grammar, &prompt, options.max_tokens, session)
            .map_err(BenchCallsError::Model)?
            .with_repeat_penalty(options.repeat_penalty);
        if options.budget_guard {
            run = run.with_budget_guard();
        }
        let end = run.run_to_end(masks).map_err(BenchCallsError::Model)?;
        Ok(Answer {
            output: String::from_utf8_lossy(run.output()).into_owned(),
            tokens: run.tokens().len() as u32,
            end: Some(end),
            budget_replaced: run.budget_replaced(),
        })
    })
}

/// Runs one question with and without the grammar, each answer from `answer(prompt text,
/// grammar)` (e.g. a llama-server's): the same prompt, grammar and scoring as [`run_case`].
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
    let grammar = tool_call_grammar(
        &tools,
        &GrammarOptions {
            format: options.format,
            ..GrammarOptions::default()
        },
    )
    .map_err(|e| tools_error(e.to_string()))?;
    let validator = Validator::new(&tools).map_err(|e| tools_error(e.to_string()))?;
    let tool_values: Vec<Value> = tools
        .tools()
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    let prompt = build_prompt(options.family, &tool_values, &case.question, None)
        .map_err(|e| tools_error(e.to_string()))?;

    // One greedy answer, scored by `score` (valid, and the tool of the first call found).
    let mut attempt = |grammar: Option<&str>, score: &dyn Fn(&str) -> (bool, Option<String>)| {
        let a = answer(&prompt, grammar)?;
        let (valid, tool) = score(&a.output);
        Ok::<_, BenchCallsError>(Attempt {
            valid,
            tool_match: tool.is_some() && tool == case.expected_tool,
            tool,
            tokens: a.tokens,
            end: a.end,
            budget_replaced: a.budget_replaced,
            output: a.output,
        })
    };
    let with_grammar = attempt(Some(&grammar.text), &|output| {
        let report = validator.validate_output(options.format, output, ValidateOptions::default());
        (
            report.is_valid_call(),
            report.calls.first().map(|c| c.name.clone()),
        )
    })?;
    let without_grammar = attempt(None, &|output| {
        let first = extract_calls(output).calls.into_iter().next();
        let valid = first.as_ref().is_some_and(|c| {
            validator
                .check_call(&c.call.name, &Value::Object(c.call.arguments.clone()))
                .is_valid()
        });
        (valid, first.map(|c| c.call.name))
    })?;
    Ok(CaseResult {
        id: case.id.clone(),
        expected_tool: case.expected_tool.clone(),
        with_grammar,
        without_grammar,
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
    use crate::server::{CompletionRequest, Prompt, StreamEnd};
    let request = CompletionRequest {
        prompt: Prompt::Tokens(model.tokenize(prompt, true, true)),
        grammar: grammar.map(str::to_owned),
        json_schema: None,
        n_predict: max_tokens,
        temperature: 0.0,
        top_k: 40,
        top_p: 0.95,
        min_p: 0.05,
        seed: 0,
        repeat_penalty,
        repeat_last_n: crate::record::PENALTY_WINDOW as u32,
        samplers: CompletionRequest::SAMPLERS.to_vec(),
        n_probs: 0,
        post_sampling_probs: false,
        stream: true,
        cache_prompt: false,
        timings_per_token: false,
        sse_ping_interval: 1,
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

/// Rates over a set of results.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct CallsSummary {
    /// Questions run.
    pub cases: usize,
    /// Valid calls under the grammar.
    pub valid_with_grammar: usize,
    /// Valid calls without the grammar (by extraction).
    pub valid_without_grammar: usize,
    /// First-tool matches under the grammar.
    pub match_with_grammar: usize,
    /// First-tool matches without the grammar.
    pub match_without_grammar: usize,
}

impl CallsSummary {
    /// Counts `results`.
    pub fn of(results: &[CaseResult]) -> CallsSummary {
        let count = |f: &dyn Fn(&CaseResult) -> bool| results.iter().filter(|r| f(r)).count();
        CallsSummary {
            cases: results.len(),
            valid_with_grammar: count(&|r| r.with_grammar.valid),
            valid_without_grammar: count(&|r| r.without_grammar.valid),
            match_with_grammar: count(&|r| r.with_grammar.tool_match),
            match_without_grammar: count(&|r| r.without_grammar.tool_match),
        }
    }

    /// `count` as a percentage of the cases.
    pub fn percent(&self, count: usize) -> f64 {
        if self.cases == 0 {
            0.0
        } else {
            count as f64 * 100.0 / self.cases as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
