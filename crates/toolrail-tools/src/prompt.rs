//! Prompt builders per model family: pure functions from tool definitions, a user query and
//! an optional system text to the prompt string the model is run on.
//!
//! Tool definitions are OpenAI-style function objects, `{"name", "description", "parameters"}`,
//! optionally wrapped as `{"type": "function", "function": {...}}`. The prompts carry no
//! beginning-of-text token: tokenize them with `add_special = true` (llama.cpp adds BOS for the
//! models that want one) and `parse_special = true` (so the turn markers become tokens).
//!
//! | family | shape |
//! | --- | --- |
//! | [`PromptFamily::Llama31`] | seed 004: `Environment: ipython`, Meta's JSON tool instruction, `{"name": ..., "parameters": ...}` answers, header tokens |
//! | [`PromptFamily::Hermes`] | Hermes/Qwen: tools as JSON lines inside `<tools>` in the system turn, answers inside `<tool_call>` (ChatML turns) |
//! | [`PromptFamily::Gemma`] | Gemma turns (`<start_of_turn>user` ... `<start_of_turn>model`; the system text goes into the user turn, Gemma has no system role), answers as `call:name{...}` |
//! | [`PromptFamily::Generic`] | plain text: a signature list, a JSON answer format, `User:` / `Assistant:` |
//!
//! The family gives the turns and the way tools are listed; the envelope the grammar enforces
//! gives the answer format. Each family's own answer format ([`PromptFamily::native_format`]) is
//! written in the family's own words; any other envelope is asked for with
//! [`answer_instruction`], so the prompt never asks for a syntax the grammar forbids.
//!
//! JSON in prompts is rendered deterministically: schema keywords in a readable order (`type`,
//! `function`, `name`, `description`, `enum`, `properties`, `items`, `required`, then the rest),
//! and the properties of an object schema with its required ones first (in `required` order),
//! then the others in the order the schema lists them (serde_json is built with `preserve_order`).

use std::fmt::Write as _;
use std::str::FromStr;

use serde_json::{Map, Value};

use crate::envelope::{CallSyntax, Format, Spacing, render_call};

/// A model family with its own prompt format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PromptFamily {
    /// Llama 3.1 JSON tool calling (seed 004).
    Llama31,
    /// Hermes / Qwen: `<tools>` and `<tool_call>` in ChatML.
    Hermes,
    /// Gemma turns with `call:name{...}` answers.
    Gemma,
    /// Plain text for base models and anything else.
    Generic,
}

impl PromptFamily {
    /// Every family, in a stable order.
    pub const ALL: [PromptFamily; 4] = [Self::Llama31, Self::Hermes, Self::Gemma, Self::Generic];

    /// The family's name as used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Llama31 => "llama3",
            Self::Hermes => "hermes",
            Self::Gemma => "gemma",
            Self::Generic => "generic",
        }
    }

    /// The answer format the family's own prompt asks for (and its models are trained on).
    pub fn native_format(self) -> Format {
        match self {
            Self::Llama31 => Format::Llama3,
            Self::Hermes => Format::Hermes,
            Self::Gemma => Format::Gemma,
            Self::Generic => Format::OpenAi,
        }
    }
}

impl FromStr for PromptFamily {
    type Err = PromptError;

    /// Accepts `llama3`, `llama3.1`, `llama31`, `hermes`, `qwen`, `gemma`, `generic`, `plain`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "llama3" | "llama3.1" | "llama31" | "llama" => Ok(Self::Llama31),
            "hermes" | "qwen" | "chatml" => Ok(Self::Hermes),
            "gemma" => Ok(Self::Gemma),
            "generic" | "plain" | "text" => Ok(Self::Generic),
            other => Err(PromptError::UnknownFamily(other.to_owned())),
        }
    }
}

/// Why a prompt could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    /// A tool definition is not usable.
    #[error("tool #{index}: {message}")]
    BadTool {
        /// Position of the tool in the input (0-based).
        index: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The family name is not known.
    #[error("unknown prompt family `{0}` (expected llama3, hermes, gemma or generic)")]
    UnknownFamily(String),
}

/// A tool definition normalised from its OpenAI form.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The function's name.
    pub name: String,
    /// Its description, if any.
    pub description: Option<String>,
    /// Its parameters schema (`{"type": "object", "properties": {}}` when absent).
    pub parameters: Value,
}

impl ToolSpec {
    /// The function object `{"name", "description"?, "parameters"}`.
    pub fn function_json(&self) -> Value {
        let mut function = Map::new();
        function.insert("name".to_owned(), Value::String(self.name.clone()));
        if let Some(description) = &self.description {
            function.insert("description".to_owned(), Value::String(description.clone()));
        }
        function.insert("parameters".to_owned(), self.parameters.clone());
        Value::Object(function)
    }

    /// The wrapped form `{"type": "function", "function": {...}}`.
    pub fn openai_json(&self) -> Value {
        let mut wrapper = Map::new();
        wrapper.insert("type".to_owned(), Value::String("function".to_owned()));
        wrapper.insert("function".to_owned(), self.function_json());
        Value::Object(wrapper)
    }
}

/// Normalises tool definitions (bare function objects or `{"type": "function", "function": ...}`).
pub fn tool_specs(tools: &[Value]) -> Result<Vec<ToolSpec>, PromptError> {
    tools
        .iter()
        .enumerate()
        .map(|(index, tool)| {
            let bad = |message: &str| PromptError::BadTool {
                index,
                message: message.to_owned(),
            };
            let object = tool.as_object().ok_or_else(|| bad("not a JSON object"))?;
            let function = match object.get("function") {
                Some(Value::Object(inner)) => inner,
                Some(_) => return Err(bad("`function` is not an object")),
                None => object,
            };
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| bad("missing `name`"))?;
            let description = match function.get("description") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return Err(bad("`description` is not a string")),
            };
            let parameters = match function.get("parameters") {
                None | Some(Value::Null) => serde_json::json!({"type": "object", "properties": {}}),
                Some(p @ Value::Object(_)) => p.clone(),
                Some(_) => return Err(bad("`parameters` is not an object")),
            };
            Ok(ToolSpec {
                name: name.to_owned(),
                description,
                parameters,
            })
        })
        .collect()
}

/// Builds the prompt for `family`, asking for calls in `answer` (the envelope the grammar
/// enforces). With the family's own format ([`PromptFamily::native_format`]) this is exactly the
/// family's prompt; with another, the family's answer instruction is replaced by
/// [`answer_instruction`] for `answer`.
pub fn build_prompt(
    family: PromptFamily,
    answer: Format,
    tools: &[Value],
    query: &str,
    system: Option<&str>,
) -> Result<String, PromptError> {
    match family {
        PromptFamily::Llama31 => llama31_prompt(answer, tools, query, system),
        PromptFamily::Hermes => hermes_prompt(answer, tools, query, system),
        PromptFamily::Gemma => gemma_prompt(answer, tools, query, system),
        PromptFamily::Generic => generic_prompt(answer, tools, query, system),
    }
}

/// The sentence and example that ask for one call in `format`, ending with a newline: what a
/// prompt says when its family's own answer format is not the envelope the grammar enforces.
pub fn answer_instruction(format: Format) -> String {
    let spec = format.spec();
    let shape = match spec.call {
        CallSyntax::JsonObject { arguments_key } => format!(
            "{}{{\"name\": tool name, \"{arguments_key}\": {{argument name: value}}}}{}",
            spec.open, spec.close
        ),
        CallSyntax::NameThenJson => format!(
            "{}NAME{{ARGUMENTS}}{}, where NAME is the tool's name and ARGUMENTS is a JSON object of its arguments",
            spec.open, spec.close
        ),
        CallSyntax::PythonCall => {
            "a Python call NAME(argument=value, ...), where NAME is the tool's name and each value is a Python literal".to_owned()
        }
    };
    let example = render_call(
        format,
        "tool_name",
        &serde_json::json!({"argument": "value"}),
        Spacing::Spaced,
    );
    format!("To call a tool, reply with only {shape}, for example:\n{example}\n")
}

/// Where `family`'s own answer format differs from the envelope `answer`, a note saying the
/// prompt asks for the envelope instead (shown beside the prompt, so a reader of a Gemma prompt
/// that asks for JSON knows why).
pub fn answer_note(family: PromptFamily, answer: Format) -> Option<String> {
    let native = family.native_format();
    (native != answer).then(|| {
        format!(
            "the {} prompt asks for the {answer} envelope the grammar enforces, not its own {native} format",
            family.name()
        )
    })
}

/// Llama 3.1 JSON tool calling, as seed 004 describes it: the system turn starts with
/// `Environment: ipython`, then the optional system text, then Meta's instructions and each
/// tool as a pretty-printed `{"type": "function", "function": {...}}` block; the model answers
/// `{"name": ..., "parameters": {...}}`.
/// `answer` is the envelope the prompt asks for: the family's own format in the family's
/// words, any other in [`answer_instruction`]'s (see [`build_prompt`]).
pub fn llama31_prompt(
    answer: Format,
    tools: &[Value],
    query: &str,
    system: Option<&str>,
) -> Result<String, PromptError> {
    let specs = tool_specs(tools)?;
    let mut out = String::from("<|start_header_id|>system<|end_header_id|>\n\n");
    out.push_str("Environment: ipython\n\n");
    if let Some(system) = non_empty(system) {
        out.push_str(system);
        out.push_str("\n\n");
    }
    out.push_str(
        "When you receive a tool call response, use the output to format an answer to the original user question.\n\n",
    );
    if answer == Format::Llama3 {
        out.push_str(
            "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n",
        );
        out.push_str(
            "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}. Do not use variables.",
        );
    } else {
        out.push_str(
            "Given the following functions, call the one that best answers the given prompt.\n\n",
        );
        out.push_str(answer_instruction(answer).trim_end());
    }
    for spec in &specs {
        out.push_str("\n\n");
        out.push_str(&pretty_json(&spec.openai_json()));
    }
    out.push_str("<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n");
    out.push_str(query);
    out.push_str("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    Ok(out)
}

/// Hermes/Qwen (ChatML): the system turn holds the optional system text, then `# Tools` with
/// one JSON line per tool inside `<tools></tools>` and the `<tool_call>` answer format.
/// `answer` is the envelope the prompt asks for: the family's own format in the family's
/// words, any other in [`answer_instruction`]'s (see [`build_prompt`]).
pub fn hermes_prompt(
    answer: Format,
    tools: &[Value],
    query: &str,
    system: Option<&str>,
) -> Result<String, PromptError> {
    let specs = tool_specs(tools)?;
    let mut out = String::from("<|im_start|>system\n");
    if let Some(system) = non_empty(system) {
        out.push_str(system);
        out.push_str("\n\n");
    }
    out.push_str(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n",
    );
    out.push_str(
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
    );
    for spec in &specs {
        out.push('\n');
        out.push_str(&inline_json(&spec.openai_json()));
    }
    out.push_str("\n</tools>\n\n");
    if answer == Format::Hermes {
        let hermes = Format::Hermes.spec();
        // writing into a String cannot fail
        let _ = writeln!(
            out,
            "For each function call, return a json object with function name and arguments within {}{} XML tags:",
            hermes.open.trim(),
            hermes.close.trim()
        );
        let _ = writeln!(
            out,
            "{}{{\"name\": <function-name>, \"arguments\": <args-json-object>}}{}<|im_end|>",
            hermes.open, hermes.close
        );
    } else {
        out.push_str(answer_instruction(answer).trim_end());
        out.push_str("<|im_end|>\n");
    }
    out.push_str("<|im_start|>user\n");
    out.push_str(query);
    out.push_str("<|im_end|>\n<|im_start|>assistant\n");
    Ok(out)
}

/// Gemma: one user turn holding the optional system text, the tools (one JSON line each) and
/// the `call:name{...}` answer format, then the query; the model turn is left open.
/// `answer` is the envelope the prompt asks for: the family's own format in the family's
/// words, any other in [`answer_instruction`]'s (see [`build_prompt`]).
pub fn gemma_prompt(
    answer: Format,
    tools: &[Value],
    query: &str,
    system: Option<&str>,
) -> Result<String, PromptError> {
    let specs = tool_specs(tools)?;
    let mut out = String::from("<start_of_turn>user\n");
    if let Some(system) = non_empty(system) {
        out.push_str(system);
        out.push_str("\n\n");
    }
    out.push_str("You have access to the following tools:\n");
    for spec in &specs {
        out.push('\n');
        out.push_str(&inline_json(&spec.function_json()));
    }
    out.push_str("\n\n");
    out.push_str(&answer_instruction(answer));
    out.push('\n');
    out.push_str(query);
    out.push_str("<end_of_turn>\n<start_of_turn>model\n");
    Ok(out)
}

/// Plain text for base models: optional system text, one signature line per tool
/// (`- name(param: type, optional?: type, with_default: type = 5): description`, required
/// parameters first), the JSON
/// answer format, then `User:` and `Assistant:`.
/// `answer` is the envelope the prompt asks for: the family's own format in the family's
/// words, any other in [`answer_instruction`]'s (see [`build_prompt`]).
pub fn generic_prompt(
    answer: Format,
    tools: &[Value],
    query: &str,
    system: Option<&str>,
) -> Result<String, PromptError> {
    let specs = tool_specs(tools)?;
    let mut out = String::new();
    if let Some(system) = non_empty(system) {
        out.push_str(system);
        out.push_str("\n\n");
    }
    out.push_str("You can call the following tools:\n");
    for spec in &specs {
        out.push_str("- ");
        out.push_str(&signature(spec));
        if let Some(description) = &spec.description {
            out.push_str(": ");
            out.push_str(description);
        }
        out.push('\n');
    }
    if answer == Format::OpenAi {
        out.push_str(
            "\nTo call a tool, reply with only a JSON object {\"name\": tool name, \"arguments\": {argument name: value}}.\n\n",
        );
    } else {
        out.push('\n');
        out.push_str(&answer_instruction(answer));
        out.push('\n');
    }
    out.push_str("User: ");
    out.push_str(query);
    out.push_str("\nAssistant:");
    Ok(out)
}

/// The text that shows a prompt asks for calls in `format`: its distinctive opener, or for the
/// JSON envelopes the key holding the arguments; `None` for the Pythonic envelope (a call is
/// just a name and parentheses).
fn answer_marker(format: Format) -> Option<&'static str> {
    match format {
        Format::OpenAi => Some("\"arguments\""),
        Format::Llama3 => Some("\"parameters\""),
        Format::Hermes => Some("<tool_call>"),
        Format::Gemma => Some("call:"),
        Format::Pythonic => None,
    }
}

/// Whether `text` holds `marker` as written in a prompt (`call:` only at a word's start, so
/// "recall:" is not Gemma's opener).
fn mentions(text: &str, marker: &str) -> bool {
    text.match_indices(marker).any(|(at, _)| {
        !marker.starts_with(|c: char| c.is_ascii_alphabetic())
            || !text[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// A warning where text the user wrote (`whole_prompt`: a raw prompt sent as it is; otherwise a
/// system text inside a built prompt) disagrees with the envelope `answer` the grammar enforces:
/// it shows another envelope's opener (Hermes's `<tool_call>`, Gemma's `call:`), or, as a whole
/// prompt, never shows `answer`'s own syntax (its opener, or the JSON key of its arguments).
pub fn user_text_conflict(text: &str, answer: Format, whole_prompt: bool) -> Option<String> {
    let own = answer_marker(answer);
    let own_shown = own.is_some_and(|m| mentions(text, m));
    // Only the openers are signs of another envelope: a JSON key is not (OpenAI tool
    // definitions hold `"name"` and `"parameters"` whatever the answer format).
    let other = [Format::Hermes, Format::Gemma]
        .into_iter()
        .find(|&f| f != answer && answer_marker(f).is_some_and(|m| mentions(text, m)));
    if let (Some(other), Some(marker)) = (other, other.and_then(answer_marker)) {
        let whose = if whole_prompt {
            "the prompt"
        } else {
            "the system text"
        };
        return Some(format!(
            "{whose} asks for {other} calls ({marker}) but the grammar enforces the {answer} envelope: the model is told one syntax and allowed another"
        ));
    }
    match own {
        Some(marker) if whole_prompt && !own_shown => Some(format!(
            "the prompt never shows the {answer} envelope the grammar enforces (no {marker}): the model is not told the syntax it is allowed"
        )),
        _ => None,
    }
}

/// Continues a prompt built by [`build_prompt`] after the model's answer `assistant`: closes the
/// assistant turn, adds a `role=tool` turn holding `tool_message` (a tool's result, or the
/// validator's feedback on a blocked call) in the family's own way, and opens the next assistant
/// turn. Llama 3.1 has an `ipython` role; Hermes/Qwen wrap it in `<tool_response>` inside a user
/// turn (as Qwen's template renders tool messages); Gemma has no tool role, so it is a user turn;
/// the generic prompt writes `Tool:`.
pub fn tool_feedback_turn(family: PromptFamily, assistant: &str, tool_message: &str) -> String {
    match family {
        PromptFamily::Llama31 => format!(
            "{assistant}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n{tool_message}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        ),
        PromptFamily::Hermes => format!(
            "{assistant}<|im_end|>\n<|im_start|>user\n<tool_response>\n{tool_message}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
        ),
        PromptFamily::Gemma => format!(
            "{assistant}<end_of_turn>\n<start_of_turn>user\n{tool_message}<end_of_turn>\n<start_of_turn>model\n"
        ),
        PromptFamily::Generic => format!("{assistant}\nTool: {tool_message}\nAssistant:"),
    }
}

/// Continues a prompt built by [`build_prompt`] after the model's answer `assistant` with a new
/// user message: closes the assistant turn, adds the user turn and opens the next assistant turn
/// (the same turn markers as [`build_prompt`]).
pub fn user_turn(family: PromptFamily, assistant: &str, user: &str) -> String {
    match family {
        PromptFamily::Llama31 => format!(
            "{assistant}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        ),
        PromptFamily::Hermes => format!(
            "{assistant}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
        ),
        PromptFamily::Gemma => format!(
            "{assistant}<end_of_turn>\n<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"
        ),
        PromptFamily::Generic => format!("{assistant}\nUser: {user}\nAssistant:"),
    }
}

/// `name(param: type, ...)` from the tool's parameters schema.
pub fn signature(spec: &ToolSpec) -> String {
    let empty = Map::new();
    let properties = spec
        .parameters
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = spec
        .parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut ordered: Vec<(&String, &Value)> = properties
        .iter()
        .filter(|(name, _)| required.contains(&name.as_str()))
        .collect();
    ordered.extend(
        properties
            .iter()
            .filter(|(name, _)| !required.contains(&name.as_str())),
    );
    let params: Vec<String> = ordered
        .into_iter()
        .map(|(name, schema)| {
            let ty = type_label(schema);
            if required.contains(&name.as_str()) {
                format!("{name}: {ty}")
            } else if let Some(default) = schema.get("default") {
                format!("{name}: {ty} = {}", inline_json(default))
            } else {
                format!("{name}?: {ty}")
            }
        })
        .collect();
    format!("{}({})", spec.name, params.join(", "))
}

/// A short type label for a property schema: enum values, a type, `array of T`, or `any`.
fn type_label(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(inline_json)
            .collect::<Vec<_>>()
            .join(" | ");
    }
    if let Some(value) = schema.get("const") {
        return inline_json(value);
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "array" => match schema.get("items") {
            Some(items) => format!("array of {}", type_label(items)),
            None => "array".to_owned(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ => "any".to_owned(),
    }
}

fn non_empty(system: Option<&str>) -> Option<&str> {
    system.filter(|s| !s.trim().is_empty())
}

/// Schema keywords shown first, in this order.
const KEY_ORDER: [&str; 8] = [
    "type",
    "function",
    "name",
    "description",
    "enum",
    "properties",
    "items",
    "required",
];

/// Keys whose object values are maps of user-chosen names (kept in map order).
const NAME_MAPS: [&str; 4] = ["properties", "$defs", "definitions", "patternProperties"];

/// The entries of `map` in display order. Schema objects list [`KEY_ORDER`] keys first; a
/// `properties` map lists its required properties first (in `required` order), then the others.
fn ordered_entries<'a>(
    map: &'a Map<String, Value>,
    schema_keys: bool,
    required_first: &[&str],
) -> Vec<(&'a String, &'a Value)> {
    let first: &[&str] = if schema_keys {
        &KEY_ORDER
    } else {
        required_first
    };
    let mut entries: Vec<(&String, &Value)> = Vec::with_capacity(map.len());
    for key in first {
        if let Some((k, v)) = map.get_key_value(*key)
            && !entries.iter().any(|(seen, _)| *seen == k)
        {
            entries.push((k, v));
        }
    }
    entries.extend(map.iter().filter(|(k, _)| !first.contains(&k.as_str())));
    entries
}

/// The names listed in an object's `required` array.
fn required_names(map: &Map<String, Value>) -> Vec<&str> {
    map.get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Pretty JSON as in seed 004: two-space indent, arrays of scalars on one line.
pub fn pretty_json(value: &Value) -> String {
    let mut out = String::new();
    write_pretty(&mut out, value, 0, true, &[]);
    out
}

fn write_pretty(
    out: &mut String,
    value: &Value,
    indent: usize,
    schema_keys: bool,
    required_first: &[&str],
) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push_str("{\n");
            let required = required_names(map);
            let entries = ordered_entries(map, schema_keys, required_first);
            let last = entries.len().saturating_sub(1);
            for (i, (key, child)) in entries.into_iter().enumerate() {
                push_indent(out, indent + 1);
                out.push_str(&string_json(key));
                out.push_str(": ");
                let child_schema = !(schema_keys && NAME_MAPS.contains(&key.as_str()));
                write_pretty(out, child, indent + 1, child_schema, &required);
                if i != last {
                    out.push(',');
                }
                out.push('\n');
            }
            push_indent(out, indent);
            out.push('}');
        }
        Value::Array(items) if items.iter().any(|v| v.is_object() || v.is_array()) => {
            out.push_str("[\n");
            let last = items.len().saturating_sub(1);
            for (i, item) in items.iter().enumerate() {
                push_indent(out, indent + 1);
                write_pretty(out, item, indent + 1, true, &[]);
                if i != last {
                    out.push(',');
                }
                out.push('\n');
            }
            push_indent(out, indent);
            out.push(']');
        }
        other => out.push_str(&inline_json(other)),
    }
}

fn push_indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

/// One-line JSON with `", "` and `": "` separators (Python's `json.dumps` style).
pub fn inline_json(value: &Value) -> String {
    let mut out = String::new();
    write_inline(&mut out, value, true, &[]);
    out
}

fn write_inline(out: &mut String, value: &Value, schema_keys: bool, required_first: &[&str]) {
    match value {
        Value::Object(map) => {
            out.push('{');
            let required = required_names(map);
            let entries = ordered_entries(map, schema_keys, required_first);
            for (i, (key, child)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&string_json(key));
                out.push_str(": ");
                let child_schema = !(schema_keys && NAME_MAPS.contains(&key.as_str()));
                write_inline(out, child, child_schema, &required);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_inline(out, item, true, &[]);
            }
            out.push(']');
        }
        Value::String(s) => out.push_str(&string_json(s)),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Null => out.push_str("null"),
    }
}

fn string_json(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}
