//! Conversations: a run as a sequence of messages (system, user, assistant, tool) instead of one
//! isolated completion, so an agent's step 3 can be looked at in the light of steps 1 and 2.
//!
//! The whole conversation is rendered with the model family's prompt builder
//! ([`build_prompt`], then [`user_turn`] and [`tool_feedback_turn`] for each later turn). Each
//! assistant turn has its own tool pool — the pool filter applied to the latest user message —
//! and, when calls are constrained, its own grammar built from that pool. The model's answer is
//! checked by the validator (under the grammar: the whole output in the envelope; prompt only:
//! the first call [`extract_calls`] finds in the free text):
//!
//! - a valid call waits for the tool's result, typed by the user or picked from the tool's
//!   canned `x-toolrail-result` examples, which goes back as a `role=tool` message;
//! - an invalid call is not run: the validator's feedback line (with the JSON pointers of its
//!   problems) goes back as a `role=tool` message and the model answers again, until
//!   [`ConversationSettings::max_blocked`] consecutive blocked calls stop the loop.
//!
//! Every attempt stays in the conversation. A [`Conversation`] is a state machine: it says what
//! it needs next ([`Next`]), builds the model's request ([`Conversation::request`]) and takes
//! answers from anywhere ([`Conversation::accept`]: the in-process model, a llama-server, the
//! app's worker, or an answer forced by hand). Saved as versioned JSON, it replays turn by turn
//! ([`Conversation::replay`]) and exports as Markdown that reads as a conversation.

mod markdown;
mod session;

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use toolrail_engine::check::check;
use toolrail_gbnf::Grammar;
use toolrail_llm::bench_calls::{Answer, BenchCallsError, example_value};
use toolrail_tools::envelope::{Format, Spacing, render_call};
use toolrail_tools::extract::extract_calls;
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::pool::{PoolRules, filter_pool, kept_names};
use toolrail_tools::prompt::{PromptFamily, build_prompt, tool_feedback_turn, user_turn};
use toolrail_tools::toolset::{Tool, ToolSet};
use toolrail_tools::validate::{CallCheck, Report, ValidateOptions, Validator};

pub use markdown::to_markdown;
pub use session::ConversationSession;

/// The conversation file format version this build writes and reads.
pub const CONVERSATION_VERSION: u32 = 1;

/// The largest conversation file read (far above any real conversation; bounded so reading one
/// never exhausts memory).
pub const MAX_CONVERSATION_BYTES: u64 = 64 << 20;

/// The most turns a conversation file may hold.
pub const MAX_TURNS: usize = 10_000;

/// The key of a tool definition holding a canned result (one JSON value, or a list of them) the
/// app offers as that tool's answer.
pub const RESULT_KEY: &str = "x-toolrail-result";

/// The key a saved conversation keeps a tool's own argument grammar under (a Python tool's
/// docstring `Grammar:` section), so a reopened conversation builds the same grammars.
pub const GRAMMAR_KEY: &str = "x-toolrail-grammar";

/// Why a conversation action failed.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    /// The tool set cannot be used (bad definitions, a grammar that cannot be built).
    #[error("tools: {0}")]
    Tools(String),
    /// The action does not fit what the conversation waits for.
    #[error("the conversation waits for {expected}, not {got}")]
    OutOfTurn {
        /// What it waits for.
        expected: &'static str,
        /// What was given.
        got: &'static str,
    },
    /// The model (or the server) failed to answer.
    #[error(transparent)]
    Answer(#[from] BenchCallsError),
    /// A file could not be read or written.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// How the model's calls are obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallMode {
    /// Under the turn's grammar (built from the turn's pool).
    Grammar,
    /// Prompt only: the first call found in the free text.
    PromptOnly,
}

/// The settings of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationSettings {
    /// The prompt builder (stored by its name: `gemma`, `hermes`, `llama3`, `generic`).
    #[serde(with = "family_name")]
    pub family: PromptFamily,
    /// The envelope calls are written in.
    pub format: Format,
    /// Grammar or prompt only.
    pub mode: CallMode,
    /// Add an example call of the first tool to the system text.
    pub few_shot: bool,
    /// Stop after this many consecutive blocked calls (at least 1).
    pub max_blocked: u32,
    /// Apply the pool filter to each user message (escape-hatch tools leave the pool unless the
    /// message asks for them).
    pub pool_filter: bool,
    /// System text (empty: none).
    pub system: String,
}

impl Default for ConversationSettings {
    fn default() -> Self {
        ConversationSettings {
            family: PromptFamily::Gemma,
            format: Format::Gemma,
            mode: CallMode::Grammar,
            few_shot: false,
            max_blocked: 3,
            pool_filter: true,
            system: String::new(),
        }
    }
}

mod family_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use toolrail_tools::prompt::PromptFamily;

    pub fn serialize<S: Serializer>(family: &PromptFamily, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(family.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PromptFamily, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// Why generation stopped, as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ending {
    /// The model ended its turn (or the grammar was complete).
    EndOfGeneration,
    /// The token limit.
    MaxTokens,
    /// Not known (e.g. a forced answer).
    Unknown,
}

/// A call the model made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MadeCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as written.
    pub arguments: Value,
}

/// One answer of the model (one attempt).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssistantTurn {
    /// The tools of this turn's pool, in order.
    pub pool: Vec<String>,
    /// The grammar this turn ran under (built from `pool`), or none (prompt only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
    /// The text generated.
    pub output: String,
    /// Tokens generated.
    pub tokens: u32,
    /// Why generation stopped.
    pub ending: Ending,
    /// The answer was given by hand instead of by the model.
    #[serde(default)]
    pub forced: bool,
    /// The call read from the answer, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<MadeCall>,
    /// The call is valid (known tool of the pool, arguments satisfy its schema).
    pub valid: bool,
    /// When blocked: the validator's feedback line (sent back as a tool message unless the
    /// blocked-call limit was reached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// Consecutive blocked calls up to and including this one (0 when valid).
    pub blocked: u32,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case", deny_unknown_fields)]
pub enum Turn {
    /// The user's message.
    User {
        /// Its text.
        content: String,
    },
    /// The model's answer.
    Assistant(AssistantTurn),
    /// A `role=tool` message: the tool's result, or the validator's feedback on a blocked call.
    Tool {
        /// Its text.
        content: String,
        /// The tool that answered; `None` for validator feedback.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
    },
}

/// What a conversation waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// A user message (at the start, or after the blocked-call limit stopped the model).
    User,
    /// The model's answer to [`Conversation::request`].
    Model,
    /// The result of this valid call (or a new user message).
    ToolResult {
        /// The tool called.
        tool: String,
    },
}

/// What the model is asked for one assistant turn.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnRequest {
    /// The whole conversation rendered, ending with an open assistant turn.
    pub prompt: String,
    /// The turn's grammar (grammar mode).
    pub grammar: Option<String>,
    /// The turn's pool.
    pub pool: Vec<String>,
}

/// A conversation: tools, settings and turns. See the module docs.
#[derive(Clone, Debug)]
pub struct Conversation {
    settings: ConversationSettings,
    tools: ToolSet,
    /// The tool definitions as stored (OpenAI-style function objects, with canned results).
    tool_values: Vec<Value>,
    turns: Vec<Turn>,
}

/// The file form of a conversation.
#[derive(Serialize, Deserialize)]
struct ConversationFile {
    version: u32,
    kind: String,
    toolrail_version: String,
    settings: ConversationSettings,
    tools: Vec<Value>,
    turns: Vec<Turn>,
}

const FILE_KIND: &str = "conversation";

impl Conversation {
    /// A new, empty conversation over `tools`. `document` is the tool set's source JSON when
    /// there is one: canned results (`x-toolrail-result`) are read from it.
    pub fn new(
        tools: ToolSet,
        document: Option<&Value>,
        mut settings: ConversationSettings,
    ) -> Conversation {
        settings.max_blocked = settings.max_blocked.max(1);
        let tool_values = tools
            .tools()
            .iter()
            .map(|t| {
                let mut value = json!({"name": t.name, "description": t.description, "parameters": t.parameters});
                if let Some(result) = document.and_then(|d| find_result(d, &t.name)) {
                    value[RESULT_KEY] = result;
                }
                if let Some(custom) = &t.custom_grammar {
                    value[GRAMMAR_KEY] = Value::String(custom.source().to_owned());
                }
                value
            })
            .collect();
        Conversation {
            settings,
            tools,
            tool_values,
            turns: Vec::new(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &ConversationSettings {
        &self.settings
    }

    /// The tool set.
    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }

    /// The turns so far.
    pub fn turns(&self) -> &[Turn] {
        &self.turns
    }

    /// What the conversation waits for.
    pub fn next(&self) -> Next {
        match self.turns.last() {
            None => Next::User,
            Some(Turn::User { .. }) | Some(Turn::Tool { .. }) => Next::Model,
            Some(Turn::Assistant(a)) => match (&a.call, a.valid) {
                (Some(call), true) => Next::ToolResult {
                    tool: call.name.clone(),
                },
                // Blocked with no feedback turn after it: the limit was reached.
                _ => Next::User,
            },
        }
    }

    /// True when the last answer was blocked and the limit stopped the loop.
    pub fn stopped_at_limit(&self) -> bool {
        matches!(self.turns.last(), Some(Turn::Assistant(a)) if !a.valid && a.blocked >= self.settings.max_blocked)
    }

    /// Adds the user's message.
    pub fn user(&mut self, content: &str) -> Result<(), ConversationError> {
        if self.next() == Next::Model {
            return Err(ConversationError::OutOfTurn {
                expected: "the model's answer",
                got: "a user message",
            });
        }
        self.turns.push(Turn::User {
            content: content.to_owned(),
        });
        Ok(())
    }

    /// Adds the result of the call the conversation waits on, as a `role=tool` message.
    pub fn tool_result(&mut self, content: &str) -> Result<(), ConversationError> {
        let Next::ToolResult { tool } = self.next() else {
            return Err(ConversationError::OutOfTurn {
                expected: self.next_name(),
                got: "a tool result",
            });
        };
        self.turns.push(Turn::Tool {
            content: content.to_owned(),
            tool: Some(tool),
        });
        Ok(())
    }

    fn next_name(&self) -> &'static str {
        match self.next() {
            Next::User => "a user message",
            Next::Model => "the model's answer",
            Next::ToolResult { .. } => "a tool result",
        }
    }

    /// The canned results of `tool` (its `x-toolrail-result`: one value, or each of a list), as
    /// the text sent back.
    pub fn canned_results(&self, tool: &str) -> Vec<String> {
        let Some(value) = self
            .tool_values
            .iter()
            .find(|v| v["name"] == tool)
            .and_then(|v| v.get(RESULT_KEY))
        else {
            return Vec::new();
        };
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match value {
            Value::Array(list) => list.iter().map(text).collect(),
            one => vec![text(one)],
        }
    }

    /// The pool for a message: the tools the pool filter keeps (all when the filter is off).
    pub fn pool_for(&self, message: &str) -> Vec<String> {
        let names = self.tools.names();
        if !self.settings.pool_filter {
            return names.iter().map(|n| (*n).to_owned()).collect();
        }
        let decisions = filter_pool(&PoolRules::default().entries(&names), message);
        kept_names(&decisions)
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// The tool set of a pool.
    fn pool_tools(&self, pool: &[String]) -> Result<ToolSet, ConversationError> {
        let tools: Vec<Tool> = self
            .tools
            .tools()
            .iter()
            .filter(|t| pool.contains(&t.name))
            .cloned()
            .collect();
        ToolSet::new(tools).map_err(|e| ConversationError::Tools(e.to_string()))
    }

    /// The grammar of a pool in the conversation's envelope.
    pub fn grammar_for(&self, pool: &[String]) -> Result<String, ConversationError> {
        let tools = self.pool_tools(pool)?;
        tool_call_grammar(
            &tools,
            &GrammarOptions {
                format: self.settings.format,
                ..GrammarOptions::default()
            },
        )
        .map(|g| g.text)
        .map_err(|e| ConversationError::Tools(e.to_string()))
    }

    /// The system text: the settings' own, then the few-shot example.
    fn system_text(&self) -> String {
        let mut system = self.settings.system.trim().to_owned();
        if self.settings.few_shot
            && let Some(tool) = self.tools.tools().first()
        {
            let mut arguments = serde_json::Map::new();
            for name in tool.required_names() {
                arguments.insert(
                    name.clone(),
                    example_value(&tool.parameters["properties"][&name]),
                );
            }
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str(&format!(
                "Answer with one tool call and nothing else. For example, a call of {} looks like:\n{}",
                tool.name,
                render_call(
                    self.settings.format,
                    &tool.name,
                    &Value::Object(arguments),
                    Spacing::Spaced
                )
            ));
        }
        system
    }

    /// Renders the first `count` turns as the prompt (they must end with a user or tool turn;
    /// the prompt then ends with an open assistant turn).
    pub fn render(&self, count: usize) -> Result<String, ConversationError> {
        let turns = &self.turns[..count.min(self.turns.len())];
        let Some(Turn::User { content: first }) = turns.first() else {
            return Err(ConversationError::OutOfTurn {
                expected: "a user message",
                got: "a conversation that does not start with one",
            });
        };
        let prompt_tools: Vec<Value> = self
            .tool_values
            .iter()
            .map(|v| json!({"name": v["name"], "description": v["description"], "parameters": v["parameters"]}))
            .collect();
        let system = self.system_text();
        let mut prompt = build_prompt(
            self.settings.family,
            self.settings.format,
            &prompt_tools,
            first,
            (!system.is_empty()).then_some(system.as_str()),
        )
        .map_err(|e| ConversationError::Tools(e.to_string()))?;
        let mut pending: Option<&str> = None;
        for turn in &turns[1..] {
            match turn {
                Turn::Assistant(a) => pending = Some(&a.output),
                Turn::Tool { content, .. } => prompt.push_str(&tool_feedback_turn(
                    self.settings.family,
                    pending.take().unwrap_or_default(),
                    content,
                )),
                Turn::User { content } => prompt.push_str(&user_turn(
                    self.settings.family,
                    pending.take().unwrap_or_default(),
                    content,
                )),
            }
        }
        Ok(prompt)
    }

    /// The latest user message among the first `count` turns (the pool filter's query).
    fn latest_user(&self, count: usize) -> &str {
        self.turns[..count.min(self.turns.len())]
            .iter()
            .rev()
            .find_map(|t| match t {
                Turn::User { content } => Some(content.as_str()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The request for the next assistant turn.
    pub fn request(&self) -> Result<TurnRequest, ConversationError> {
        if self.next() != Next::Model {
            return Err(ConversationError::OutOfTurn {
                expected: self.next_name(),
                got: "a request to the model",
            });
        }
        self.request_at(self.turns.len())
    }

    /// The request made after the first `count` turns.
    fn request_at(&self, count: usize) -> Result<TurnRequest, ConversationError> {
        let pool = self.pool_for(self.latest_user(count));
        let grammar = match self.settings.mode {
            CallMode::Grammar => Some(self.grammar_for(&pool)?),
            CallMode::PromptOnly => None,
        };
        Ok(TurnRequest {
            prompt: self.render(count)?,
            grammar,
            pool,
        })
    }

    /// Scores an answer against a pool: the call read, whether it is valid, and the feedback
    /// line when it is not.
    fn score(
        &self,
        pool: &[String],
        output: &str,
    ) -> Result<(Option<MadeCall>, bool, Option<String>), ConversationError> {
        let tools = self.pool_tools(pool)?;
        let validator =
            Validator::new(&tools).map_err(|e| ConversationError::Tools(e.to_string()))?;
        let (call, check, report) = match self.settings.mode {
            CallMode::Grammar => {
                let report = validator.validate_output(
                    self.settings.format,
                    output,
                    ValidateOptions::default(),
                );
                let check = report.calls.first().cloned();
                let call = check.as_ref().map(|c| MadeCall {
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                });
                (call, check, Some(report))
            }
            CallMode::PromptOnly => match extract_calls(output).calls.into_iter().next() {
                Some(found) => {
                    let arguments = Value::Object(found.call.arguments);
                    let check = validator.check_call(&found.call.name, &arguments);
                    (
                        Some(MadeCall {
                            name: found.call.name,
                            arguments,
                        }),
                        Some(check),
                        None,
                    )
                }
                None => (None, None, None),
            },
        };
        let valid = match &report {
            Some(report) => report.is_valid_call(),
            None => check.as_ref().is_some_and(CallCheck::is_valid),
        };
        let feedback =
            (!valid).then(|| feedback_line(check.as_ref(), report.as_ref(), self.settings.format));
        Ok((call, valid, feedback))
    }

    /// Takes the model's answer to [`Conversation::request`] (or one forced by hand, `forced`):
    /// checks it against the turn's pool; a blocked call's feedback goes back as a tool message
    /// unless this is the `max_blocked`-th blocked call in a row.
    pub fn accept(&mut self, answer: Answer, forced: bool) -> Result<(), ConversationError> {
        let request = self.request()?;
        let (call, valid, feedback) = self.score(&request.pool, &answer.output)?;
        let previous_blocked = match self.turns.last() {
            Some(Turn::Tool { tool: None, .. }) => match self.turns.iter().rev().nth(1) {
                Some(Turn::Assistant(a)) => a.blocked,
                _ => 0,
            },
            _ => 0,
        };
        let blocked = if valid { 0 } else { previous_blocked + 1 };
        self.turns.push(Turn::Assistant(AssistantTurn {
            pool: request.pool,
            grammar: request.grammar,
            output: answer.output,
            tokens: answer.tokens,
            ending: match answer.end {
                Some(toolrail_llm::bench::RunEnd::EndOfGeneration) => Ending::EndOfGeneration,
                Some(toolrail_llm::bench::RunEnd::MaxTokens) => Ending::MaxTokens,
                _ => Ending::Unknown,
            },
            forced,
            call,
            valid,
            feedback: feedback.clone(),
            blocked,
        }));
        if let Some(feedback) = feedback
            && blocked < self.settings.max_blocked
        {
            self.turns.push(Turn::Tool {
                content: feedback,
                tool: None,
            });
        }
        Ok(())
    }

    /// Lets the model answer (retrying blocked calls) until a valid call waits for its result or
    /// the blocked-call limit stops it. `answer(prompt, grammar)` produces each answer.
    pub fn run_model(
        &mut self,
        answer: &mut toolrail_llm::bench_calls::AnswerFn<'_>,
    ) -> Result<(), ConversationError> {
        while self.next() == Next::Model {
            let request = self.request()?;
            let reply = answer(&request.prompt, request.grammar.as_deref())?;
            self.accept(reply, false)?;
        }
        Ok(())
    }

    /// Replays the conversation turn by turn: for each assistant turn, the prompt it was asked
    /// with, its pool and grammar regenerated from the turns before it, whether that grammar is
    /// the one recorded, whether the recorded output still matches it and still scores the same.
    pub fn replay(&self) -> Result<Vec<ReplayStep>, ConversationError> {
        let mut steps = Vec::new();
        for (index, turn) in self.turns.iter().enumerate() {
            let Turn::Assistant(recorded) = turn else {
                continue;
            };
            let request = self.request_at(index)?;
            let grammar_matches = request.grammar == recorded.grammar;
            let output_in_grammar = match &request.grammar {
                Some(text) => {
                    let grammar = Grammar::parse(text).map_err(|e| {
                        ConversationError::Tools(format!("turn {index}: grammar: {e}"))
                    })?;
                    Some(check(&Arc::new(grammar), recorded.output.as_bytes()).is_accepted())
                }
                None => None,
            };
            let (call, valid, feedback) = self.score(&request.pool, &recorded.output)?;
            let same_verdict =
                call == recorded.call && valid == recorded.valid && feedback == recorded.feedback;
            steps.push(ReplayStep {
                turn: index,
                prompt: request.prompt,
                pool: request.pool,
                grammar: request.grammar,
                grammar_matches,
                output_in_grammar,
                same_verdict,
            });
        }
        Ok(steps)
    }

    /// The conversation as versioned JSON.
    pub fn to_json(&self) -> Result<String, ConversationError> {
        let file = ConversationFile {
            version: CONVERSATION_VERSION,
            kind: FILE_KIND.to_owned(),
            toolrail_version: env!("CARGO_PKG_VERSION").to_owned(),
            settings: self.settings.clone(),
            tools: self.tool_values.clone(),
            turns: self.turns.clone(),
        };
        serde_json::to_string_pretty(&file).map_err(|e| ConversationError::File {
            path: String::new(),
            message: e.to_string(),
        })
    }

    /// Reads a conversation from JSON text (`name` is used in messages): version and kind
    /// checked first, at most [`MAX_TURNS`] turns.
    pub fn from_json(text: &str, name: &str) -> Result<Conversation, ConversationError> {
        let bad = |message: String| ConversationError::File {
            path: name.to_owned(),
            message,
        };
        // The top level's parts are kept as their text and each read on its own: an error
        // names where it is (an unknown key in the settings, the turn it is in), and no
        // document tree of the whole file is built (for a 64 MB file, about a gigabyte).
        let top: std::collections::BTreeMap<String, &serde_json::value::RawValue> =
            serde_json::from_str(text)
                .map_err(|e| bad(format!("{}:{}: {e}", e.line(), e.column())))?;
        let part = |key: &str| top.get(key).map(|raw| raw.get());
        let version = part("version")
            .and_then(|raw| serde_json::from_str::<u64>(raw).ok())
            .unwrap_or(0);
        if version == 0 || version > u64::from(CONVERSATION_VERSION) {
            return Err(bad(format!(
                "/version: version {version} is not one this build reads (1 to {CONVERSATION_VERSION})"
            )));
        }
        if part("kind").and_then(|raw| serde_json::from_str::<&str>(raw).ok()) != Some(FILE_KIND) {
            return Err(bad(format!(
                "/kind: not a conversation (expected \"{FILE_KIND}\")"
            )));
        }
        let known = [
            "version",
            "kind",
            "toolrail_version",
            "settings",
            "tools",
            "turns",
        ];
        if let Some(key) = top.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(bad(format!("/{key}: unknown key")));
        }
        let settings = part("settings").ok_or_else(|| bad("/settings: missing".to_owned()))?;
        let settings: ConversationSettings =
            serde_json::from_str(settings).map_err(|e| bad(format!("/settings: {e}")))?;
        let tools = part("tools").ok_or_else(|| bad("/tools: missing".to_owned()))?;
        let tools: Vec<Value> =
            serde_json::from_str(tools).map_err(|e| bad(format!("/tools: {e}")))?;
        let turns = part("turns").ok_or_else(|| bad("/turns: missing".to_owned()))?;
        let turns: Vec<&serde_json::value::RawValue> =
            serde_json::from_str(turns).map_err(|_| bad("/turns: not a list".to_owned()))?;
        if turns.len() > MAX_TURNS {
            return Err(bad(format!(
                "/turns: {} turns, more than the {MAX_TURNS} read",
                turns.len()
            )));
        }
        let turns = turns
            .into_iter()
            .enumerate()
            .map(|(i, turn)| {
                serde_json::from_str::<Turn>(turn.get())
                    .map_err(|e| bad(format!("/turns/{i}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let tool_values = tools;
        let tools = saved_tools(&tool_values).map_err(bad)?;
        let mut settings = settings;
        settings.max_blocked = settings.max_blocked.max(1);
        Ok(Conversation {
            settings,
            tools,
            tool_values,
            turns,
        })
    }

    /// Saves as JSON, atomically.
    pub fn save(&self, path: &Path) -> Result<(), ConversationError> {
        let text = self.to_json()?;
        crate::fsutil::write_atomic(path, text.as_bytes()).map_err(|e| ConversationError::File {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Reads a conversation file (its size checked before reading).
    pub fn load(path: &Path) -> Result<Conversation, ConversationError> {
        use std::io::Read as _;
        let shown = path.display().to_string();
        let io = |e: std::io::Error| ConversationError::File {
            path: shown.clone(),
            message: e.to_string(),
        };
        // Only a regular file: a FIFO would block the open for ever.
        let file =
            toolrail_llm::files::open_regular(path, u64::MAX).map_err(|e| io(e.into_io()))?;
        let mut bytes = Vec::new();
        file.take(MAX_CONVERSATION_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > MAX_CONVERSATION_BYTES {
            return Err(ConversationError::File {
                path: shown,
                message: format!("larger than {MAX_CONVERSATION_BYTES} bytes"),
            });
        }
        let text = String::from_utf8(bytes).map_err(|e| ConversationError::File {
            path: shown.clone(),
            message: format!("not UTF-8 (byte offset {})", e.utf8_error().valid_up_to()),
        })?;
        Self::from_json(&text, &shown)
    }

    /// Saves the Markdown rendering, atomically.
    pub fn save_markdown(&self, path: &Path) -> Result<(), ConversationError> {
        crate::fsutil::write_atomic(path, to_markdown(self).as_bytes()).map_err(|e| {
            ConversationError::File {
                path: path.display().to_string(),
                message: e.to_string(),
            }
        })
    }
}

/// The tool set of a saved conversation: its tools as written, each tool's own grammar
/// ([`GRAMMAR_KEY`]) parsed back onto it; errors say where (`/tools/2/x-toolrail-grammar: 3:5: …`).
fn saved_tools(values: &[Value]) -> Result<ToolSet, String> {
    let mut grammars = Vec::with_capacity(values.len());
    let plain: Vec<Value> = values
        .iter()
        .map(|v| {
            let mut v = v.clone();
            grammars.push(v.as_object_mut().and_then(|o| o.remove(GRAMMAR_KEY)));
            v
        })
        .collect();
    let read = ToolSet::from_value(&Value::Array(plain)).map_err(|e| format!("/tools: {e}"))?;
    let mut tools: Vec<Tool> = read.tools().to_vec();
    for (i, (tool, grammar)) in tools.iter_mut().zip(grammars).enumerate() {
        let Some(grammar) = grammar else { continue };
        let at = format!("/tools/{i}/{GRAMMAR_KEY}");
        let text = grammar
            .as_str()
            .ok_or_else(|| format!("{at}: expected the grammar as a string"))?;
        let custom = toolrail_tools::custom_grammar::CustomGrammar::parse(text)
            .map_err(|e| format!("{at}: {}:{}: {}", e.line, e.column, e.message))?;
        tool.custom_grammar = Some(custom);
    }
    ToolSet::new(tools).map_err(|e| format!("/tools: {e}"))
}

/// One assistant turn replayed (see [`Conversation::replay`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayStep {
    /// The turn's index in the conversation.
    pub turn: usize,
    /// The prompt rebuilt from the turns before it.
    pub prompt: String,
    /// The pool rebuilt from the latest user message before it.
    pub pool: Vec<String>,
    /// The grammar regenerated from that pool (grammar mode).
    pub grammar: Option<String>,
    /// The regenerated grammar is the recorded one.
    pub grammar_matches: bool,
    /// The recorded output matches the regenerated grammar (grammar mode; forced answers need
    /// not).
    pub output_in_grammar: Option<bool>,
    /// The recorded call, validity and feedback come out the same again.
    pub same_verdict: bool,
}

/// The feedback line for a blocked answer: the validator's messages with the JSON pointers of
/// their problems; or why the output could not be read; or that no call was found and how one
/// is written.
pub fn feedback_line(check: Option<&CallCheck>, report: Option<&Report>, format: Format) -> String {
    if let Some(report) = report {
        if let Some(error) = &report.parse_error {
            return format!(
                "error: the call was not run: the answer is not a complete call ({error}). Reply with the corrected call only."
            );
        }
        if check.is_none_or(CallCheck::is_valid) && !report.output_issues.is_empty() {
            return format!(
                "error: the call was not run: {}. Reply with one call only.",
                report.output_issues.join("; ")
            );
        }
    }
    // A call with issues, or none: the same words as bench-calls' retries.
    let blocked = check.filter(|c| !c.is_valid());
    toolrail_llm::bench_calls::feedback_line(blocked, format)
}

/// The `x-toolrail-result` of the tool called `name` anywhere in a tool set document (the tool
/// object itself, or its OpenAI `function` object).
fn find_result(document: &Value, name: &str) -> Option<Value> {
    match document {
        Value::Array(items) => items.iter().find_map(|i| find_result(i, name)),
        Value::Object(object) => {
            let own_name = object
                .get("name")
                .or_else(|| object.get("function").and_then(|f| f.get("name")));
            if own_name.and_then(Value::as_str) == Some(name)
                && let Some(result) = object
                    .get(RESULT_KEY)
                    .or_else(|| object.get("function").and_then(|f| f.get(RESULT_KEY)))
            {
                return Some(result.clone());
            }
            ["tools", "functionDeclarations", "functions"]
                .iter()
                .filter_map(|key| object.get(*key))
                .find_map(|v| find_result(v, name))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> Conversation {
        let document = json!([{"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city"]}, "x-toolrail-result": [{"temp": 21}, "sunny"]},
            {"name": "request_location_from_user", "parameters": {"type": "object", "properties": {}}}]);
        let tools = ToolSet::from_value(&document).unwrap();
        Conversation::new(tools, Some(&document), ConversationSettings::default())
    }

    /// A Python tool's own `Grammar:` section survives saving: the reopened conversation builds
    /// the same grammar for the same pool (before, it lost the section and replay said the
    /// grammar differs).
    #[test]
    fn a_tools_own_grammar_is_kept_in_the_saved_conversation() {
        let source = std::fs::read_to_string("../../sample_schemas/python_functions.py").unwrap();
        let tools = toolrail_tools::python::tools_from_python(&source).unwrap();
        let custom = tools.tools().iter().find(|t| t.custom_grammar.is_some());
        let custom = custom.expect("the sample has a tool with a Grammar: section");
        let name = custom.name.clone();
        let c = Conversation::new(tools, None, ConversationSettings::default());
        let pool = vec![name.clone()];
        let before = c.grammar_for(&pool).unwrap();
        let reopened = Conversation::from_json(&c.to_json().unwrap(), "saved").unwrap();
        let tool = reopened
            .tools()
            .tools()
            .iter()
            .find(|t| t.name == name)
            .unwrap();
        assert!(tool.custom_grammar.is_some());
        assert_eq!(reopened.grammar_for(&pool).unwrap(), before);
        // A broken saved grammar is an error naming where.
        let mut value: Value = serde_json::from_str(&c.to_json().unwrap()).unwrap();
        let i = value["tools"]
            .as_array()
            .unwrap()
            .iter()
            .position(|t| t.get(GRAMMAR_KEY).is_some())
            .unwrap();
        value["tools"][i][GRAMMAR_KEY] = json!("root ::= (");
        let err = Conversation::from_json(&value.to_string(), "saved").unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("/tools/{i}/{GRAMMAR_KEY}")),
            "{err}"
        );
    }

    fn forced(text: &str) -> Answer {
        Answer {
            output: text.to_owned(),
            tokens: 0,
            end: None,
            budget_replaced: 0,
        }
    }

    #[test]
    fn a_blocked_call_gets_feedback_until_the_limit() {
        let mut c = weather();
        assert_eq!(c.next(), Next::User);
        c.user("Weather in Oslo?").unwrap();
        let request = c.request().unwrap();
        assert_eq!(
            request.pool,
            ["get_weather"],
            "the escape hatch left the pool"
        );
        assert!(request.grammar.as_deref().unwrap().contains("get_weather"));
        assert!(
            !request
                .grammar
                .as_deref()
                .unwrap()
                .contains("request_location")
        );
        for attempt in 1..=3 {
            c.accept(
                forced(r#"call:get_weather{"city": "Oslo", "unit": "k"}"#),
                true,
            )
            .unwrap();
            let Some(Turn::Assistant(a)) = c
                .turns()
                .iter()
                .rev()
                .find(|t| matches!(t, Turn::Assistant(_)))
            else {
                panic!()
            };
            assert_eq!(a.blocked, attempt);
            assert!(
                a.feedback.as_deref().unwrap().contains("(at /unit)"),
                "{a:?}"
            );
        }
        // Two feedback turns went back; the third blocked call stopped the loop.
        assert_eq!(c.turns().len(), 1 + 3 + 2);
        assert!(c.stopped_at_limit());
        assert_eq!(c.next(), Next::User);
        assert!(c.request().is_err());
    }

    #[test]
    fn a_valid_call_waits_for_its_result_and_the_prompt_continues() {
        let mut c = weather();
        c.user("Weather in Oslo?").unwrap();
        c.accept(forced(r#"call:get_weather{"city": "Oslo"}"#), true)
            .unwrap();
        assert_eq!(
            c.next(),
            Next::ToolResult {
                tool: "get_weather".into()
            }
        );
        assert_eq!(c.canned_results("get_weather"), ["{\"temp\":21}", "sunny"]);
        assert!(c.user("x").is_ok(), "a user message may answer instead");
        let mut c = weather();
        c.user("Weather in Oslo?").unwrap();
        c.accept(forced(r#"call:get_weather{"city": "Oslo"}"#), true)
            .unwrap();
        c.tool_result("21 C").unwrap();
        let prompt = c.request().unwrap().prompt;
        assert!(
            prompt.ends_with("call:get_weather{\"city\": \"Oslo\"}<end_of_turn>\n<start_of_turn>user\n21 C<end_of_turn>\n<start_of_turn>model\n"),
            "{prompt}"
        );
        assert!(c.tool_result("again").is_err());
        let back = Conversation::from_json(&c.to_json().unwrap(), "c.json").unwrap();
        assert_eq!(back.turns(), c.turns());
        let steps = back.replay().unwrap();
        assert_eq!(steps.len(), 1);
        assert!(steps[0].grammar_matches && steps[0].same_verdict);
        assert_eq!(steps[0].output_in_grammar, Some(true));
    }

    #[test]
    fn prompt_only_reads_the_call_from_free_text() {
        let document = json!([{"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}]);
        let tools = ToolSet::from_value(&document).unwrap();
        let settings = ConversationSettings {
            mode: CallMode::PromptOnly,
            few_shot: true,
            ..ConversationSettings::default()
        };
        let mut c = Conversation::new(tools, None, settings);
        c.user("Weather in Oslo?").unwrap();
        let request = c.request().unwrap();
        assert_eq!(request.grammar, None);
        assert!(
            request
                .prompt
                .contains("call:get_weather{\"city\": \"example\"}")
        );
        c.accept(
            forced("Sure! call:get_weather{\"city\": \"Oslo\"} done"),
            false,
        )
        .unwrap();
        assert!(matches!(c.next(), Next::ToolResult { .. }));
        c.user("And in Rome?").unwrap();
        c.accept(forced("I do not know."), false).unwrap();
        let Some(Turn::Tool {
            content,
            tool: None,
        }) = c.turns().last()
        else {
            panic!("{:?}", c.turns())
        };
        assert!(
            content.starts_with("error: no tool call found"),
            "{content}"
        );
    }

    #[test]
    fn bad_files_name_what_is_wrong() {
        let err = Conversation::from_json(r#"{"version": 9, "kind": "conversation"}"#, "c.json")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("c.json: /version"), "{err}");
        let err = Conversation::from_json(r#"{"version": 1, "kind": "run"}"#, "c.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/kind"), "{err}");
        let mut c = weather();
        c.user("hi").unwrap();
        let mut v: Value = serde_json::from_str(&c.to_json().unwrap()).unwrap();
        v["extra"] = json!(1);
        let err = Conversation::from_json(&v.to_string(), "c.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/extra: unknown key"), "{err}");
    }

    #[test]
    fn unknown_keys_below_the_top_level_are_refused_naming_where() {
        let mut c = weather();
        c.user("hi").unwrap();
        c.accept(forced("I do not know."), false).unwrap();
        let saved: Value = serde_json::from_str(&c.to_json().unwrap()).unwrap();
        let read = |edit: &dyn Fn(&mut Value)| {
            let mut v = saved.clone();
            edit(&mut v);
            Conversation::from_json(&v.to_string(), "c.json")
                .unwrap_err()
                .to_string()
        };
        let err = read(&|v| v["settings"]["evil"] = json!("ignored"));
        assert!(
            err.starts_with("c.json: /settings: unknown field `evil`"),
            "{err}"
        );
        let err = read(&|v| v["turns"][1]["evil"] = json!(1));
        assert!(
            err.starts_with("c.json: /turns/1: unknown field `evil`"),
            "{err}"
        );
        let err = read(&|v| v["turns"][0]["evil"] = json!(1));
        assert!(
            err.starts_with("c.json: /turns/0: unknown field `evil`"),
            "{err}"
        );
        let err = read(&|v| v["turns"][1]["max_tokens"] = json!("x"));
        assert!(err.starts_with("c.json: /turns/1: "), "{err}");
        let err = read(&|v| {
            v.as_object_mut().unwrap().remove("settings");
        });
        assert!(err.contains("/settings: missing"), "{err}");
        // the file saved reads back
        let again = Conversation::from_json(&saved.to_string(), "c.json").unwrap();
        assert_eq!(again.turns(), c.turns());
    }

    #[test]
    fn the_reproducers_conversation_with_a_nested_unknown_key_is_refused() {
        let Some(path) =
            toolrail_testkit::shared("reliability/turn3/N15-conversation-nested-unknown-keys.json")
        else {
            return;
        };
        let err = Conversation::load(&path).unwrap_err().to_string();
        assert!(err.contains("/settings: unknown field `evil`"), "{err}");
    }
}
