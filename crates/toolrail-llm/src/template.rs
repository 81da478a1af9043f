//! llama.cpp's own tool calling: what llama-server builds from a chat template when a client sends
//! `tools` (the prompt, the tool-call grammar, whether it is lazy, its triggers, the preserved
//! tokens, the generation prompt, the extra stops, the format and its parser), and llama.cpp's
//! parse of a model's output back into content, reasoning and tool calls.
//!
//! Exact by construction: a small C++ shim (`cpp/toolrail_chat.cpp`) calls llama.cpp's
//! `common_chat_templates_apply` and `common_chat_parse` from the `common` library llama-cpp-sys-2
//! already builds. The shim mirrors what llama-server does around them (its request defaults, the
//! word→token trigger conversion, the sampler's trigger regexes); see
//! `docs/design/template-grammars.md`. Every C++ exception becomes a [`TemplateError`].

// The C++ shim over llama.cpp's chat code is called through `extern "C"` functions
// exchanging C strings.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use toolrail_tools::toolset::ToolSet;

use crate::lazy_gate::GateSetup;

mod choices;
mod error;
pub mod isolate;
mod native;
mod syntax;

pub use choices::{ReasoningFormat, ServerSwitch, ToolChoice, UnknownReasoningFormat};
pub use error::{SAMPLER_PREFIX, SAMPLER_REFUSAL, TemplateError};
use native::{
    Native, Opening, c_string, native_grammar_loads, native_parse, native_trigger_search,
};

/// Where llama.cpp's code for a template should run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Where the program said ([`isolate::run_templates_in`]), else in this process.
    Program,
    /// In this process, whatever the program said.
    InProcess,
    /// In a worker started with this command.
    Worker(isolate::WorkerCommand),
}

/// Where a template's llama.cpp code runs.
#[derive(Debug)]
enum Backend {
    /// In this process.
    InProcess(Native),
    /// In a worker process ([`isolate`]).
    Isolated(isolate::Worker),
}

/// A loaded chat template: from a GGUF (its `tokenizer.chat_template`, and its vocabulary for the
/// server's token conversions) or from template text alone (as llama.cpp's tests use it).
///
/// llama.cpp's template code runs in this process, or, when the program named a worker
/// ([`isolate::run_templates_in`]; toolrail's binary does), in a process of its own, where a
/// template that crashes it or runs without end is an error ([`isolate::IsolationError`]).
#[derive(Debug)]
pub struct ChatTemplates {
    backend: Backend,
    has_vocabulary: bool,
}

impl ChatTemplates {
    /// A template from its text, with no model: BOS/EOS texts given (may be empty). Word
    /// triggers stay words (no vocabulary to turn them into tokens).
    pub fn from_source(source: &str, bos: &str, eos: &str) -> Result<ChatTemplates, TemplateError> {
        Self::from_source_placed(source, bos, eos, Placement::Program)
    }

    /// [`ChatTemplates::from_source`], with llama.cpp's template code run where `placement`
    /// says.
    pub fn from_source_placed(
        source: &str,
        bos: &str,
        eos: &str,
        placement: Placement,
    ) -> Result<ChatTemplates, TemplateError> {
        c_string(source, "the chat template")?;
        c_string(bos, "the BOS text")?;
        c_string(eos, "the EOS text")?;
        let opening = Opening::Source {
            source: source.to_owned(),
            bos: bos.to_owned(),
            eos: eos.to_owned(),
        };
        Ok(ChatTemplates {
            backend: Self::open(opening, placement)?,
            has_vocabulary: false,
        })
    }

    /// The templates of a GGUF model (or `template_override` instead of its own), with its
    /// vocabulary loaded alone (no weights) for the server's token conversions, as llama-server
    /// has them.
    pub fn from_gguf(
        model: &Path,
        template_override: Option<&str>,
    ) -> Result<ChatTemplates, TemplateError> {
        Self::from_gguf_placed(model, template_override, Placement::Program)
    }

    /// [`ChatTemplates::from_gguf`], with llama.cpp's template code run where `placement` says.
    pub fn from_gguf_placed(
        model: &Path,
        template_override: Option<&str>,
        placement: Placement,
    ) -> Result<ChatTemplates, TemplateError> {
        let model = model.to_string_lossy().into_owned();
        c_string(&model, "the model path")?;
        c_string(template_override.unwrap_or(""), "the chat template")?;
        let opening = Opening::Gguf {
            model,
            template: template_override.map(str::to_owned),
        };
        Ok(ChatTemplates {
            backend: Self::open(opening, placement)?,
            has_vocabulary: true,
        })
    }

    /// Opens `opening` where `placement` says.
    fn open(opening: Opening, placement: Placement) -> Result<Backend, TemplateError> {
        let command = match placement {
            Placement::InProcess => None,
            Placement::Worker(command) => Some(command),
            Placement::Program => isolate::worker().cloned(),
        };
        let opened = match command {
            Some(command) => isolate::Worker::open(command, opening.clone()).map(Backend::Isolated),
            None => Native::open(&opening).map(Backend::InProcess),
        };
        opened.map_err(|e| located(e, &opening))
    }

    /// Whether a vocabulary is loaded (word triggers can become token triggers).
    pub fn has_vocabulary(&self) -> bool {
        self.has_vocabulary
    }

    /// Whether llama.cpp's template code runs in a process of its own.
    pub fn is_isolated(&self) -> bool {
        matches!(self.backend, Backend::Isolated(_))
    }

    /// What llama-server builds for `request`, refused as llama-server refuses it: an error
    /// from llama.cpp's chat code, or a grammar llama.cpp's loader refuses
    /// ([`TemplateError::SamplerRefused`]; llama-server answers HTTP 400 when it sets up the
    /// sampler). A result is a request llama-server runs.
    pub fn apply(&self, request: &TemplateRequest) -> Result<TemplateResult, TemplateError> {
        let result = self.build(request)?;
        if result.grammar.is_empty() {
            return Ok(result);
        }
        // toolrail's parser first (it agrees with llama.cpp's, which prints a refused grammar
        // whole on stderr): a grammar it refuses never reaches llama.cpp
        if let Err(e) = toolrail_gbnf::Grammar::parse(&result.grammar) {
            return Err(TemplateError::SamplerRefused {
                what: "failed to parse grammar".to_owned(),
                detail: format!("llama.cpp's grammar loader refuses the tool-call grammar: {e}"),
            });
        }
        // with a vocabulary, the sampler set up as the server does; without one, the grammar's
        // loading is what can be checked
        let what = match &result.sampler {
            Some(sampler) => self.sampler_refusal(&result, sampler)?,
            None => (!llama_grammar_loads(&result.grammar)?)
                .then(|| "failed to parse grammar".to_owned()),
        };
        let Some(what) = what else {
            return Ok(result);
        };
        let detail = if what == "failed to parse grammar" {
            "llama.cpp's grammar loader refuses the tool-call grammar".to_owned()
        } else if result.grammar_lazy {
            format!("llama.cpp cannot set up the lazy grammar's triggers: {what}")
        } else {
            format!(
                "the tool-call grammar is not lazy, and it refuses the generation prompt {:?} \
                 that the template ends the prompt with (llama.cpp feeds its tokens to the \
                 grammar before generating: {what})",
                result.generation_prompt
            )
        };
        Err(TemplateError::SamplerRefused { what, detail })
    }

    /// Sets llama-server's sampler up for `result` (`common_sampler_init`'s steps, with this
    /// vocabulary): `None` when it can be, else the end of the server's HTTP 400 message.
    fn sampler_refusal(
        &self,
        result: &TemplateResult,
        sampler: &SamplerSetup,
    ) -> Result<Option<String>, TemplateError> {
        let setup = json!({
            "grammar": result.grammar,
            "lazy": result.grammar_lazy,
            "patterns": sampler.patterns,
            "tokens": sampler.tokens,
            "prefill": sampler.prefill_tokens,
        })
        .to_string();
        c_string(&setup, "the sampler setup")?;
        let refusal = match &self.backend {
            Backend::InProcess(native) => native.sampler_check_json(&setup)?,
            Backend::Isolated(worker) => {
                text_reply(worker.call(isolate::Request::SamplerCheck { setup })?)?
            }
        };
        Ok((!refusal.is_empty()).then_some(refusal))
    }

    /// What llama.cpp's chat code builds for `request`, without loading its grammar: the
    /// grammar may be one llama.cpp refuses (see [`ChatTemplates::apply`]).
    pub fn build(&self, request: &TemplateRequest) -> Result<TemplateResult, TemplateError> {
        let body = request.to_json().to_string();
        c_string(&body, "the request")?;
        let text = match &self.backend {
            Backend::InProcess(native) => native.build_json(&body)?,
            Backend::Isolated(worker) => {
                text_reply(worker.call(isolate::Request::Build { request: body })?)?
            }
        };
        serde_json::from_str(&text).map_err(|e| TemplateError::Protocol(e.to_string()))
    }
}

/// llama.cpp's refusal of a template, with the place it is about (line:column) when its message
/// has none: the template's text is scanned for it.
fn located(error: TemplateError, opening: &Opening) -> TemplateError {
    let TemplateError::Llama {
        message,
        http_status,
    } = error
    else {
        return error;
    };
    let text = match opening {
        Opening::Source { source, .. } => Some(source.clone()),
        Opening::Gguf {
            template: Some(template),
            ..
        } => Some(template.clone()),
        Opening::Gguf {
            model,
            template: None,
        } => crate::gguf::GgufHeader::read(Path::new(model))
            .ok()
            .and_then(|header| header.string("tokenizer.chat_template").map(str::to_owned)),
    };
    let place = text.and_then(|text| syntax::locate_refusal(&text, &message));
    TemplateError::Llama {
        message: match place {
            Some(place) => format!("{message} ({place})"),
            None => message,
        },
        http_status,
    }
}

/// The text of a worker's reply (any other reply is a protocol error).
fn text_reply(reply: isolate::Reply) -> Result<String, TemplateError> {
    match reply {
        isolate::Reply::Text(text) => Ok(text),
        other => Err(TemplateError::Protocol(format!(
            "the template process answered {other:?} where a text was expected"
        ))),
    }
}

/// Whether llama.cpp's grammar loader builds `grammar` (start rule `root`, no vocabulary): the
/// check llama.cpp's own chat tests make on every template grammar.
pub fn llama_grammar_loads(grammar: &str) -> Result<bool, TemplateError> {
    c_string(grammar, "the grammar")?;
    match isolate::shared() {
        None => native_grammar_loads(grammar),
        Some(worker) => match worker.call(isolate::Request::GrammarLoads {
            grammar: grammar.to_owned(),
        })? {
            isolate::Reply::Flag(loads) => Ok(loads),
            other => Err(TemplateError::Protocol(format!(
                "the template process answered {other:?} where yes or no was expected"
            ))),
        },
    }
}

/// Text that no tool-call trigger matches (plain prose: no brackets, tags or special tokens),
/// repeated to make the sleeping grammar's output in [`measure_trigger_search`].
pub const TRIGGER_SEARCH_PROSE: &str = "The committee met on a grey morning and went through the \
     figures line by line, asking why the numbers for the northern sites had drifted since the \
     spring and whether the new sensors explained it. Nobody was sure, so they agreed to compare \
     the two months again next week and write down what changed. ";

/// What one search of the trigger patterns costs at one output length.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TriggerSearchPoint {
    /// The output's length in bytes.
    pub chars: usize,
    /// One search of every pattern over it, in nanoseconds (the best of a few).
    pub ns: f64,
}

/// llama.cpp's trigger search timed on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriggerSearchTiming {
    /// The patterns the sampler searches (token triggers are matched on the token instead).
    pub patterns: Vec<String>,
    /// The time of one search at each length.
    pub points: Vec<TriggerSearchPoint>,
}

impl TriggerSearchTiming {
    /// Nanoseconds per character of output for one search of every pattern: the slope between
    /// the shortest and the longest length measured (0 without patterns).
    pub fn ns_per_char(&self) -> f64 {
        match (self.points.first(), self.points.last()) {
            (Some(a), Some(b)) if b.chars > a.chars => {
                ((b.ns - a.ns) / (b.chars - a.chars) as f64).max(0.0)
            }
            (_, Some(b)) if b.chars > 0 => b.ns / b.chars as f64,
            _ => 0.0,
        }
    }

    /// The predicted time of one search of every pattern once the output holds `chars` bytes,
    /// in nanoseconds: the line through the measured points (its fixed part is the patterns'
    /// per-search cost, its slope [`TriggerSearchTiming::ns_per_char`]).
    pub fn ns_at(&self, chars: usize) -> f64 {
        let Some(first) = self.points.first() else {
            return 0.0;
        };
        let slope = self.ns_per_char();
        let fixed = (first.ns - slope * first.chars as f64).max(0.0);
        fixed + slope * chars as f64
    }
}

/// Times llama.cpp's lazy-grammar trigger search for `triggers` on this machine: the patterns
/// the sampler builds from them, compiled and searched by llama.cpp's own code
/// (`llama_grammar_trigger_pattern::find`, run over the whole output after every token while
/// the grammar sleeps) over [`TRIGGER_SEARCH_PROSE`] repeated to each of `lengths` bytes.
pub fn measure_trigger_search(
    triggers: &[Trigger],
    lengths: &[usize],
) -> Result<TriggerSearchTiming, TemplateError> {
    let request = serde_json::json!({
        "triggers": triggers,
        "text": TRIGGER_SEARCH_PROSE,
        "lengths": lengths,
        "repeats": 3,
    })
    .to_string();
    let answer = match isolate::shared() {
        None => native_trigger_search(&request)?,
        Some(worker) => text_reply(worker.call(isolate::Request::TriggerSearch { request })?)?,
    };
    serde_json::from_str(&answer).map_err(|e| TemplateError::Protocol(e.to_string()))
}

/// Which defaults fill what the request leaves out (`server` or `struct` in a result's inputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestDefaults {
    /// llama-server's (parallel calls when the template supports them, reasoning format
    /// `deepseek`, thinking when the template supports it, `preserve_reasoning`).
    #[default]
    Server,
    /// The bare `common_chat_templates_inputs` defaults, as llama.cpp's own tests use them.
    Struct,
}

impl RequestDefaults {
    /// `server` or `struct`, as the shim reads it.
    pub fn name(self) -> &'static str {
        match self {
            RequestDefaults::Server => "server",
            RequestDefaults::Struct => "struct",
        }
    }
}

impl std::fmt::Display for RequestDefaults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An OpenAI-style chat request, the part of it that shapes the template's output.
#[derive(Debug, Clone, Default)]
pub struct TemplateRequest {
    /// The messages so far, OpenAI JSON (`{"role", "content", "tool_calls"?, …}`).
    pub messages: Vec<Value>,
    /// The tools, OpenAI JSON (`{"type": "function", "function": {…}}`).
    pub tools: Vec<Value>,
    /// `tool_choice`.
    pub tool_choice: ToolChoice,
    /// `parallel_tool_calls`; `ServerDefault` leaves it to the request's defaults.
    pub parallel_tool_calls: ServerSwitch,
    /// `add_generation_prompt`; `None` is true (false when continuing an assistant message).
    pub add_generation_prompt: Option<bool>,
    /// `reasoning_format`; `ServerDefault` leaves it to the request's defaults.
    pub reasoning_format: ReasoningFormat,
    /// Thinking on or off; `ServerDefault` is the server's rule (on when the template supports it).
    pub enable_thinking: ServerSwitch,
    /// Extra template variables (`chat_template_kwargs`), e.g. a pinned `date_string`.
    pub chat_template_kwargs: Map<String, Value>,
    /// `response_format`'s JSON Schema, as text.
    pub json_schema: Option<String>,
    /// A custom grammar (llama-server refuses it together with tools).
    pub grammar: Option<String>,
    /// Which defaults apply.
    pub defaults: RequestDefaults,
}

impl TemplateRequest {
    /// A request for `tools` (in any shape toolrail reads) with one user message. The tools go
    /// as a client sends them ([`ToolSet::client_tools`]: each parameter schema as its document
    /// wrote it), so the prompt is the one llama-server renders; toolrail's normalised reading
    /// stays with its own grammar and validation.
    pub fn for_tools(tools: &ToolSet, user: &str) -> TemplateRequest {
        TemplateRequest {
            messages: vec![json!({"role": "user", "content": user})],
            tools: tools.client_tools(),
            ..TemplateRequest::default()
        }
    }

    fn to_json(&self) -> Value {
        let mut body = Map::new();
        body.insert("messages".into(), Value::Array(self.messages.clone()));
        body.insert("tools".into(), Value::Array(self.tools.clone()));
        body.insert("tool_choice".into(), self.tool_choice.to_openai());
        let optional = [
            (
                "parallel_tool_calls",
                self.parallel_tool_calls.to_request().map(Value::Bool),
            ),
            (
                "add_generation_prompt",
                self.add_generation_prompt.map(Value::Bool),
            ),
            (
                "reasoning_format",
                self.reasoning_format.name().map(|name| json!(name)),
            ),
            (
                "enable_thinking",
                self.enable_thinking.to_request().map(Value::Bool),
            ),
            ("json_schema", self.json_schema.clone().map(Value::String)),
            ("grammar", self.grammar.clone().map(Value::String)),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                body.insert(key.into(), value);
            }
        }
        body.insert(
            "chat_template_kwargs".into(),
            Value::Object(self.chat_template_kwargs.clone()),
        );
        body.insert("defaults".into(), json!(self.defaults.name()));
        Value::Object(body)
    }
}

/// The kind of a lazy-grammar trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    /// One token id: the grammar starts with that token.
    Token,
    /// A literal text: the grammar starts at the word.
    Word,
    /// A regex searched in the generated text: the grammar starts at its first non-empty group.
    Pattern,
    /// A regex that must match the whole generated text (anchored `^…$`).
    PatternFull,
}

impl std::fmt::Display for TriggerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TriggerKind::Token => "token",
            TriggerKind::Word => "word",
            TriggerKind::Pattern => "pattern",
            TriggerKind::PatternFull => "full pattern",
        })
    }
}

/// One trigger of a lazy grammar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trigger {
    /// Its kind.
    #[serde(rename = "type")]
    pub kind: TriggerKind,
    /// The word or pattern (for a token trigger, the token's text).
    pub value: String,
    /// The token id, for a token trigger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<i32>,
}

/// What the sampler is built from once llama-server has converted the triggers (only with a
/// model's vocabulary).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplerSetup {
    /// The triggers after the server's conversion: a word that is one (preserved) token becomes
    /// a token trigger.
    pub triggers: Vec<Trigger>,
    /// The regexes the lazy grammar searches, in order (words escaped, full patterns anchored).
    pub patterns: Vec<String>,
    /// The token ids that trigger the grammar.
    pub tokens: Vec<i32>,
    /// The preserved tokens that are one token in this vocabulary.
    pub preserved_token_ids: Vec<i32>,
    /// The generation prompt's tokens fed to a non-lazy grammar before generation.
    pub prefill_tokens: Vec<i32>,
}

/// The request values llama.cpp was actually given, after the defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedInputs {
    /// Which defaults filled what the request left out.
    pub defaults: RequestDefaults,
    /// `auto`, `required` or `none` (a named tool is read as `auto`).
    pub tool_choice: ToolChoice,
    /// Parallel tool calls allowed.
    pub parallel_tool_calls: bool,
    /// A generation prompt appended.
    pub add_generation_prompt: bool,
    /// The final assistant message continued.
    pub continue_final_message: bool,
    /// The reasoning format (never the server's default: the defaults have chosen one).
    pub reasoning_format: ReasoningFormat,
    /// Thinking enabled.
    pub enable_thinking: bool,
    /// The template variables passed (values as JSON text).
    pub chat_template_kwargs: BTreeMap<String, String>,
}

/// What llama-server builds from a template, tools and messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplateResult {
    /// The format's name (`Content-only`, `peg-native`, …).
    pub format: String,
    /// The format's number in llama.cpp (needed to parse).
    pub format_id: i32,
    /// The prompt text.
    pub prompt: String,
    /// The text the template puts after the prompt for the assistant (already in the prompt).
    pub generation_prompt: String,
    /// The tool-call grammar (GBNF; empty when none).
    pub grammar: String,
    /// Whether the grammar waits for a trigger.
    pub grammar_lazy: bool,
    /// The triggers as the template code gives them.
    pub grammar_triggers: Vec<Trigger>,
    /// Texts that must stay special tokens.
    pub preserved_tokens: Vec<String>,
    /// Stop strings added to the request's.
    pub additional_stops: Vec<String>,
    /// Whether the template thinks.
    pub supports_thinking: bool,
    /// The tag that opens thinking.
    pub thinking_start_tag: String,
    /// The tags that close thinking.
    pub thinking_end_tags: Vec<String>,
    /// llama.cpp's serialized output parser for this format.
    pub parser: String,
    /// The template's capabilities as llama.cpp detects them.
    pub caps: BTreeMap<String, bool>,
    /// The sampler's setup (only when a vocabulary is loaded and there is a grammar).
    pub sampler: Option<SamplerSetup>,
    /// The request values actually used.
    pub inputs: ResolvedInputs,
    /// Things llama-server does silently that the user should know.
    pub warnings: Vec<String>,
}

/// One tool call as llama.cpp's parser returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParsedToolCall {
    /// The tool's name.
    pub name: String,
    /// The arguments, JSON text.
    pub arguments: String,
    /// The call id when the format carries one (the server makes one up otherwise).
    pub id: String,
}

/// A model output parsed by llama.cpp's parser for its format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParsedMessage {
    /// Always `assistant`.
    pub role: String,
    /// The text content.
    pub content: String,
    /// The reasoning (thinking) text.
    pub reasoning_content: String,
    /// The tool calls.
    pub tool_calls: Vec<ParsedToolCall>,
}

impl TemplateResult {
    /// How a run gates its grammar for this result, as llama-server sets up its sampler: lazy
    /// or not, the trigger regexes and tokens, the prefill of a grammar that is not lazy, and
    /// the additional stops. Needs the sampler setup a vocabulary gives; without a grammar the
    /// stops alone apply.
    /// The reasoning budget is left out (it needs the model's tokens): see
    /// [`TemplateResult::gate_setup_with_budget`].
    pub fn gate_setup(&self) -> Result<GateSetup, TemplateError> {
        let ids = |list: &[i32], what: &str| -> Result<Vec<u32>, TemplateError> {
            list.iter()
                .map(|&id| {
                    u32::try_from(id).map_err(|_| {
                        TemplateError::Protocol(format!("{what} holds the negative token id {id}"))
                    })
                })
                .collect()
        };
        let mut setup = GateSetup {
            stops: self.additional_stops.clone(),
            ..GateSetup::default()
        };
        if self.grammar.is_empty() {
            return Ok(setup);
        }
        let sampler = self.sampler.as_ref().ok_or(TemplateError::NoVocabulary)?;
        setup.lazy = self.grammar_lazy;
        if self.grammar_lazy {
            setup.patterns = sampler.patterns.clone();
            setup.tokens = ids(&sampler.tokens, "the trigger tokens")?;
        } else {
            setup.prefill = ids(&sampler.prefill_tokens, "the prefill tokens")?;
        }
        Ok(setup)
    }

    /// [`TemplateResult::gate_setup`] with llama-server's reasoning budget
    /// ([`TemplateResult::reasoning_spec`]): how a run is gated, in full. `budget` `None` is no
    /// limit (the server's default, `--reasoning-budget -1`). The worker turns the thinking tags
    /// into its model's tokens.
    pub fn gate_setup_with_budget(
        &self,
        budget: Option<u32>,
        message: &str,
    ) -> Result<GateSetup, TemplateError> {
        let mut setup = self.gate_setup()?;
        setup.reasoning = self.reasoning_spec(budget, message);
        Ok(setup)
    }

    /// llama-server's reasoning budget for this result, as text (the tags, the forced message,
    /// the generation prompt) with `budget` tokens (`None`: no limit, `--reasoning-budget -1`).
    /// As the server builds it: only when the template has thinking tags, and either a budget
    /// is set or the grammar is lazy (the machine then keeps the lazy grammar out of the
    /// thinking block).
    pub fn reasoning_spec(
        &self,
        budget: Option<u32>,
        message: &str,
    ) -> Option<crate::reasoning_budget::ReasoningSpec> {
        let ends: Vec<String> = (self.thinking_end_tags.iter())
            .filter(|tag| !tag.is_empty())
            .cloned()
            .collect();
        if self.thinking_start_tag.is_empty()
            || ends.is_empty()
            || !(self.grammar_lazy || budget.is_some())
        {
            return None;
        }
        Some(crate::reasoning_budget::ReasoningSpec {
            start_tag: self.thinking_start_tag.clone(),
            end_tags: ends,
            message: message.to_owned(),
            budget,
            generation_prompt: self.generation_prompt.clone(),
        })
    }

    /// [`TemplateResult::reasoning_spec`] in `model`'s tokens.
    pub fn reasoning_setup(
        &self,
        model: &crate::Model,
        budget: Option<u32>,
        message: &str,
    ) -> Option<crate::reasoning_budget::ReasoningSetup> {
        self.reasoning_spec(budget, message)
            .and_then(|spec| spec.resolve(model))
    }

    /// Parses `text`, the model's output after the prompt, with llama.cpp's parser for this
    /// format (as llama-server does; `partial` while streaming).
    pub fn parse(&self, text: &str, partial: bool) -> Result<ParsedMessage, TemplateError> {
        let mut params = json!({
            "format_id": self.format_id,
            "generation_prompt": self.generation_prompt,
            "parser": self.parser,
            "parse_tool_calls": true,
        });
        if let Some(name) = self.inputs.reasoning_format.name() {
            params["reasoning_format"] = json!(name);
        }
        let params = params.to_string();
        let answer = match isolate::shared() {
            None => native_parse(&params, text, partial)?,
            Some(worker) => text_reply(worker.call(isolate::Request::Parse {
                params,
                text: text.to_owned(),
                partial,
            })?)?,
        };
        serde_json::from_str(&answer).map_err(|e| TemplateError::Protocol(e.to_string()))
    }
}
