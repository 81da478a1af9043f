//! Post-decode validator: reads a model output in a chosen envelope, checks each call's tool name
//! against the tool set and its arguments against the tool's schema (with the `jsonschema`
//! crate), and produces the one-line feedback that goes back to the model (seed 001).
//!
//! Arguments are checked against [`Tool::arguments_schema`] (objects closed, as in the grammar),
//! with format assertions on (`date`, `email`, … are checked, as the grammar constrains them;
//! `email` with [`toolrail_schema::formats::is_valid_email`], the grammar's own language).
//! The validator accepts arguments in any order and any JSON/Python whitespace: it judges meaning,
//! the grammar judges text. Everything the grammar accepts, the validator accepts.
//!
//! Feedback lines (one per problem, joined with `"; "` by [`Report::feedback`]):
//!
//! * `missing required args ['title', 'dialog'] for tool 'get_inputs'` (seed 001's exact format;
//!   names in the schema's `required` order)
//! * `unknown tool 'x'; available tools: ['a', 'b']`
//! * `unexpected args ['x'] for tool 'a'`
//! * `missing required keys ['var'] at /dialog/0 for tool 'get_inputs'` (nested objects)
//! * `unexpected keys ['x'] at /dialog/0 for tool 'get_inputs'`
//! * `invalid arg 'kind' for tool 'get_inputs' at /dialog/0/schema/kind: "banana" is not one of …`
//! * `arguments for tool 'a' must be an object, got a string`
//! * `could not parse a tool call in the hermes format at byte 12: expected '</tool_call>'`
//! * `no tool call found (expected a tool call in the openai format)`
//! * `expected a single tool call, found 2`

use crate::call::ToolCall;
use crate::envelope::{self, Format, ParseError, Parsed, RawCall};
use crate::toolset::{Tool, ToolSet};
use serde_json::Value;
use std::collections::HashMap;
use toolrail_schema::JsonPointer;

/// A tool's schema could not be compiled by the `jsonschema` crate.
#[derive(Debug, thiserror::Error)]
#[error("tool '{tool}': invalid arguments schema: {message}")]
pub struct SchemaCompileError {
    /// The tool whose schema failed.
    pub tool: String,
    /// The crate's message.
    pub message: String,
}

/// How outputs are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ValidateOptions {
    /// Accept several calls (a JSON list, or repeated envelopes); otherwise exactly one.
    pub parallel: bool,
    /// Accept plain text that does not start like a call.
    pub auto: bool,
    /// Check the tools as a lenient grammar reads them ([`Validator::with_readings`]); read
    /// where the validator is built.
    pub lenient: bool,
}

/// One schema violation inside a call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// JSON pointer into the arguments (`""` for the arguments object itself).
    pub pointer: String,
    /// The JSON Schema keyword that failed (`required`, `type`, `enum`, …), or `tool` / `arguments`.
    pub keyword: String,
    /// Human-readable message.
    pub message: String,
}

/// The verdict on one call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallCheck {
    /// Position of the call in the output (0-based).
    pub index: usize,
    /// The tool name as written.
    pub name: String,
    /// The arguments as written.
    pub arguments: Value,
    /// Every problem found, in the order the schema reports them.
    pub issues: Vec<Issue>,
    /// One-line feedback messages, one per problem (grouped: all missing args in one line).
    pub feedback: Vec<String>,
}

impl CallCheck {
    /// True when the call names a known tool and its arguments satisfy the schema.
    pub fn is_valid(&self) -> bool {
        self.issues.is_empty()
    }

    /// The call as the shared [`ToolCall`] type (`None` when the arguments are not an object).
    pub fn to_tool_call(&self) -> Option<ToolCall> {
        match &self.arguments {
            Value::Object(m) => Some(ToolCall::new(self.name.clone(), m.clone())),
            _ => None,
        }
    }
}

/// The verdict on a whole output.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The envelope the output was read in.
    pub format: Format,
    /// The output could not be read as calls.
    pub parse_error: Option<ParseError>,
    /// The output is plain text (not a call).
    pub text: bool,
    /// Problems with the output as a whole (text where a call was required, too many calls).
    pub output_issues: Vec<String>,
    /// Each call's verdict.
    pub calls: Vec<CallCheck>,
}

impl Report {
    /// True when the output is acceptable: every call valid (or plain text in `auto` mode).
    pub fn is_valid(&self) -> bool {
        self.parse_error.is_none()
            && self.output_issues.is_empty()
            && self.calls.iter().all(CallCheck::is_valid)
    }

    /// True when the output holds at least one call and is valid.
    pub fn is_valid_call(&self) -> bool {
        self.is_valid() && !self.calls.is_empty()
    }

    /// The first problem's category (seed 002's error categories), or `None` when valid:
    /// `parse` (not readable in the envelope), `no_call` (plain text where a call was required),
    /// `call_count` (several calls without `parallel`), `unknown_tool`, `arguments` (schema).
    pub fn category(&self) -> Option<&'static str> {
        if self.parse_error.is_some() {
            return Some("parse");
        }
        if !self.output_issues.is_empty() {
            return Some(if self.text { "no_call" } else { "call_count" });
        }
        self.calls
            .iter()
            .flat_map(|c| c.issues.first())
            .next()
            .map(|i| {
                if i.keyword == "tool" {
                    "unknown_tool"
                } else {
                    "arguments"
                }
            })
    }

    /// The valid calls as [`ToolCall`]s, in order (empty unless the whole output is valid).
    pub fn tool_calls(&self) -> Vec<ToolCall> {
        if !self.is_valid() {
            return Vec::new();
        }
        self.calls
            .iter()
            .filter_map(CallCheck::to_tool_call)
            .collect()
    }

    /// All feedback lines, in order.
    pub fn messages(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = &self.parse_error {
            out.push(format!(
                "could not parse a tool call in the {} format at byte {}: {}",
                self.format, e.offset, e.message
            ));
        }
        out.extend(self.output_issues.iter().cloned());
        for c in &self.calls {
            out.extend(c.feedback.iter().cloned());
        }
        out
    }

    /// The one-line feedback for the model, or `None` when the output is valid.
    pub fn feedback(&self) -> Option<String> {
        let m = self.messages();
        if m.is_empty() {
            None
        } else {
            Some(m.join("; "))
        }
    }
}

/// Validates outputs against one tool set; schemas are compiled once.
pub struct Validator {
    tools: ToolSet,
    compiled: HashMap<String, jsonschema::Validator>,
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validator")
            .field("tools", &self.tools.names())
            .finish()
    }
}

impl Validator {
    /// Compiles every tool's arguments schema, as written (what a strict grammar enforces).
    pub fn new(tools: &ToolSet) -> Result<Self, SchemaCompileError> {
        Self::with_readings(tools, false)
    }

    /// Compiles every tool's arguments schema; `lenient`: as a lenient grammar reads it
    /// ([`toolrail_schema::read_leniently`]), so that a call the lenient grammar admits by a
    /// reading (`type: integer` with `enum: ["1", "2"]` read as the integers) is not then
    /// refused by the schema as written. Dropped constraints are still checked.
    pub fn with_readings(tools: &ToolSet, lenient: bool) -> Result<Self, SchemaCompileError> {
        let mut compiled = HashMap::new();
        for tool in tools.tools() {
            compiled.insert(tool.name.clone(), compile(tool, lenient)?);
        }
        Ok(Self {
            tools: tools.clone(),
            compiled,
        })
    }

    /// The tool set this validator checks against.
    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }

    /// Reads `text` in `format` and checks every call.
    pub fn validate_output(&self, format: Format, text: &str, opts: ValidateOptions) -> Report {
        let mut report = Report {
            format,
            parse_error: None,
            text: false,
            output_issues: Vec::new(),
            calls: Vec::new(),
        };
        match envelope::parse_calls(format, text) {
            Err(e) => report.parse_error = Some(e),
            Ok(Parsed::Text) => {
                report.text = true;
                if !opts.auto {
                    report.output_issues.push(format!(
                        "no tool call found (expected a tool call in the {format} format)"
                    ));
                }
            }
            Ok(Parsed::Calls { calls, list }) => {
                if !opts.parallel && (list || calls.len() != 1) {
                    report.output_issues.push(if list {
                        format!(
                            "expected a single tool call, found a list of {}",
                            calls.len()
                        )
                    } else {
                        format!("expected a single tool call, found {}", calls.len())
                    });
                }
                report.calls = calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| self.check_raw(i, c))
                    .collect();
            }
        }
        report
    }

    fn check_raw(&self, index: usize, call: &RawCall) -> CallCheck {
        let mut check = self.check_call(&call.name, &call.arguments);
        check.index = index;
        check
    }

    /// Checks one call given as a name and an arguments value.
    pub fn check_call(&self, name: &str, arguments: &Value) -> CallCheck {
        let mut check = CallCheck {
            index: 0,
            name: name.to_owned(),
            arguments: arguments.clone(),
            issues: Vec::new(),
            feedback: Vec::new(),
        };
        let (Some(tool), Some(compiled)) = (self.tools.get(name), self.compiled.get(name)) else {
            let names: Vec<&str> = self.tools.names();
            check.issues.push(Issue {
                pointer: String::new(),
                keyword: "tool".into(),
                message: format!("unknown tool '{name}'"),
            });
            check.feedback.push(format!(
                "unknown tool {}; available tools: {}",
                py_str(name),
                py_list(&names)
            ));
            return check;
        };
        if !arguments.is_object() {
            check.issues.push(Issue {
                pointer: String::new(),
                keyword: "arguments".into(),
                message: format!("arguments must be an object, got {}", kind_of(arguments)),
            });
            check.feedback.push(format!(
                "arguments for tool {} must be an object, got {}",
                py_str(name),
                kind_of(arguments)
            ));
            return check;
        }
        // Group missing / unexpected properties per location, keep everything else as is.
        let mut missing: Vec<(String, Vec<String>)> = Vec::new();
        let mut unexpected: Vec<(String, Vec<String>)> = Vec::new();
        let mut others: Vec<String> = Vec::new();
        for err in compiled.iter_errors(arguments) {
            let pointer = err.instance_path().as_str().to_owned();
            let keyword = err.kind().keyword().to_owned();
            let message = err.to_string();
            match err.kind() {
                jsonschema::error::ValidationErrorKind::Required { property } => {
                    let prop = property
                        .as_str()
                        .map_or_else(|| property.to_string(), str::to_owned);
                    push_grouped(&mut missing, &pointer, prop);
                }
                jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected: u } => {
                    for p in u {
                        push_grouped(&mut unexpected, &pointer, p.clone());
                    }
                }
                _ => {
                    let arg = first_segment(&pointer);
                    others.push(match arg {
                        Some(a) => format!(
                            "invalid arg {} for tool {} at {}: {}",
                            py_str(&a),
                            py_str(name),
                            pointer,
                            message
                        ),
                        None => format!("invalid arguments for tool {}: {}", py_str(name), message),
                    });
                }
            }
            check.issues.push(Issue {
                pointer,
                keyword,
                message,
            });
        }
        let required = tool.required_names();
        for (pointer, mut names) in missing {
            if pointer.is_empty() {
                names.sort_by_key(|n| required.iter().position(|r| r == n).unwrap_or(usize::MAX));
                check.feedback.push(format!(
                    "missing required args {} for tool {}",
                    py_list(&names),
                    py_str(name)
                ));
            } else {
                check.feedback.push(format!(
                    "missing required keys {} at {} for tool {}",
                    py_list(&names),
                    pointer,
                    py_str(name)
                ));
            }
        }
        for (pointer, names) in unexpected {
            if pointer.is_empty() {
                check.feedback.push(format!(
                    "unexpected args {} for tool {}",
                    py_list(&names),
                    py_str(name)
                ));
            } else {
                check.feedback.push(format!(
                    "unexpected keys {} at {} for tool {}",
                    py_list(&names),
                    pointer,
                    py_str(name)
                ));
            }
        }
        check.feedback.extend(others);
        check
    }
}

fn compile(tool: &Tool, lenient: bool) -> Result<jsonschema::Validator, SchemaCompileError> {
    let written = tool.validation_schema();
    // the reading the grammar took; a schema lenient mode still refuses is checked as written
    let options = toolrail_schema::ConvertOptions {
        close_objects: true,
        ..toolrail_schema::ConvertOptions::default()
    };
    let schema = match lenient {
        true => toolrail_schema::read_leniently(&written, &options)
            .map(|(read, _)| read)
            .unwrap_or(written),
        false => written,
    };
    jsonschema::options()
        .should_validate_formats(true)
        // the grammar's email language (the crate's own check differs; see schema::formats)
        .with_format("email", toolrail_schema::formats::is_valid_email)
        .build(&schema)
        .map_err(|e| SchemaCompileError {
            tool: tool.name.clone(),
            message: e.to_string(),
        })
}

fn push_grouped(groups: &mut Vec<(String, Vec<String>)>, pointer: &str, name: String) {
    match groups.iter_mut().find(|(p, _)| p == pointer) {
        Some((_, names)) => {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        None => groups.push((pointer.to_owned(), vec![name])),
    }
}

/// The first segment of `pointer`, unescaped (the argument an error is about).
fn first_segment(pointer: &str) -> Option<String> {
    JsonPointer::parse(pointer).ok()?.segments().next()
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Python `repr` of a string: single quotes unless the text contains one and no double quote.
pub fn py_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python `repr` of a list of strings, e.g. `['title', 'dialog']`.
pub fn py_list<S: AsRef<str>>(items: &[S]) -> String {
    let parts: Vec<String> = items.iter().map(|s| py_str(s.as_ref())).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set() -> ToolSet {
        ToolSet::from_value(&json!([
            {"name": "get_inputs", "parameters": {"type": "object", "properties": {
                "title": {"type": "string"}, "display_template": {"type": "string"},
                "dialog": {"type": "array", "items": {"type": "object", "properties": {
                    "var": {"type": "string"}, "kind": {"enum": ["text", "choice"]}},
                    "required": ["var"]}}},
             "required": ["title", "dialog"]}},
            {"name": "get_now"}
        ]))
        .unwrap()
    }

    #[test]
    fn seed_001_message() {
        let v = Validator::new(&set()).unwrap();
        let r = v.validate_output(
            Format::OpenAi,
            r#"{"name": "get_inputs", "arguments": {"display_template": "x"}}"#,
            ValidateOptions::default(),
        );
        assert!(!r.is_valid());
        assert_eq!(
            r.feedback().unwrap(),
            "missing required args ['title', 'dialog'] for tool 'get_inputs'"
        );
    }

    #[test]
    fn a_key_written_twice_is_refused_at_its_place() {
        let v = Validator::new(&set()).unwrap();
        let r = v.validate_output(
            Format::OpenAi,
            r#"{"name": "get_inputs", "arguments": {"title": "a", "title": "b", "dialog": []}}"#,
            ValidateOptions::default(),
        );
        assert!(!r.is_valid());
        let fb = r.feedback().unwrap();
        assert!(
            fb.contains("the key \"title\" appears twice in one object"),
            "{fb}"
        );
        // the same keys in two objects are fine
        let r = v.validate_output(
            Format::OpenAi,
            r#"{"name": "get_inputs", "arguments": {"title": "a", "dialog": [{"var": "x"}, {"var": "y"}]}}"#,
            ValidateOptions::default(),
        );
        assert!(r.is_valid(), "{:?}", r.feedback());
    }

    #[test]
    fn unknown_tool_lists_names() {
        let v = Validator::new(&set()).unwrap();
        let r = v.validate_output(Format::Pythonic, "get_then()", ValidateOptions::default());
        assert_eq!(
            r.feedback().unwrap(),
            "unknown tool 'get_then'; available tools: ['get_inputs', 'get_now']"
        );
    }

    #[test]
    fn nested_errors_have_pointers() {
        let v = Validator::new(&set()).unwrap();
        let r = v.validate_output(
            Format::Gemma,
            r#"call:get_inputs{"title": "t", "dialog": [{"kind": "banana", "x": 1}]}"#,
            ValidateOptions::default(),
        );
        let fb = r.feedback().unwrap();
        assert!(
            fb.contains("missing required keys ['var'] at /dialog/0"),
            "{fb}"
        );
        assert!(fb.contains("unexpected keys ['x'] at /dialog/0"), "{fb}");
        assert!(
            fb.contains("invalid arg 'dialog' for tool 'get_inputs' at /dialog/0/kind"),
            "{fb}"
        );
        let pointers: Vec<&str> = r.calls[0]
            .issues
            .iter()
            .map(|i| i.pointer.as_str())
            .collect();
        assert!(pointers.contains(&"/dialog/0/kind"), "{pointers:?}");
    }

    #[test]
    fn single_versus_parallel_and_auto() {
        let v = Validator::new(&set()).unwrap();
        let two = "get_now()\nget_now()";
        assert!(
            !v.validate_output(Format::Pythonic, two, ValidateOptions::default())
                .is_valid()
        );
        let par = ValidateOptions {
            parallel: true,
            auto: false,
            lenient: false,
        };
        assert!(
            v.validate_output(Format::Pythonic, two, par)
                .is_valid_call()
        );
        let text = "It is noon.";
        assert!(!v.validate_output(Format::Hermes, text, par).is_valid());
        let auto = ValidateOptions {
            parallel: false,
            auto: true,
            lenient: false,
        };
        let r = v.validate_output(Format::Hermes, text, auto);
        assert!(r.is_valid() && !r.is_valid_call() && r.text);
    }

    #[test]
    fn categories() {
        let v = Validator::new(&set()).unwrap();
        let cat = |f, t: &str| {
            v.validate_output(f, t, ValidateOptions::default())
                .category()
        };
        assert_eq!(cat(Format::OpenAi, "{\"name\": 1"), Some("parse"));
        assert_eq!(cat(Format::OpenAi, "hello"), Some("no_call"));
        assert_eq!(
            cat(Format::Pythonic, "get_now()\nget_now()"),
            Some("call_count")
        );
        assert_eq!(cat(Format::Pythonic, "nope()"), Some("unknown_tool"));
        assert_eq!(cat(Format::Pythonic, "get_now(x=1)"), Some("arguments"));
        assert_eq!(cat(Format::Pythonic, "get_now()"), None);
    }

    #[test]
    fn python_repr() {
        assert_eq!(py_str("it's"), "\"it's\"");
        assert_eq!(py_list(&["a", "b"]), "['a', 'b']");
    }
}
