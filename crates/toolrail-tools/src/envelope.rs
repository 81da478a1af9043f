//! Tool-call envelopes: how a call is written in model output, per model family.
//!
//! | format | one call | parallel calls |
//! | --- | --- | --- |
//! | `openai` | `{"name": "f", "arguments": {...}}` | a JSON list of calls |
//! | `llama3` | `{"name": "f", "parameters": {...}}` | a JSON list of calls |
//! | `hermes` | `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>` | blocks separated by `\n` |
//! | `gemma` | `call:f{...}` (arguments as a JSON object) | calls separated by `\n` |
//! | `pythonic` | `f(a=1, b="x")` | calls separated by `\n` |
//!
//! The `pythonic` dialect uses Python literals: strings in double or single quotes, integers and
//! floats, `True`/`False`/`None`, lists (tuples are read as lists) and dicts with string keys.
//! Only keyword arguments are accepted. An output is a pythonic call when it starts with
//! `[A-Za-z_][A-Za-z0-9_.-]*(`; anything else is plain text. String escapes are JSON's (`\n`, `\t`, `\"`, `\\`, `\/`,
//! `\uXXXX`) plus Python's `\'`, `\xHH`, `\UXXXXXXXX` and `\0`; the grammar only ever produces
//! double-quoted strings with the escapes that mean the same thing in both languages (not `\/`
//! nor surrogate pairs, see `toolrail_schema::syntax`).
//!
//! This module parses outputs ([`parse_calls`]) and renders calls ([`render_call`],
//! [`render_calls`]); the grammar builder ([`crate::grammar`]) produces exactly the texts
//! the renderer writes (members in the map's order), and the validator
//! ([`crate::validate`]) parses with this module.

use serde_json::{Map, Number, Value};
use std::fmt;
use std::str::FromStr;

/// A tool-call envelope. Stored (workspace files) by its command-line name, e.g. `"openai"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum Format {
    /// `{"name": ..., "arguments": {...}}`.
    OpenAi,
    /// `{"name": ..., "parameters": {...}}` (Llama 3.1 JSON tool calling).
    Llama3,
    /// `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` (Hermes, Qwen).
    Hermes,
    /// `call:name{...}` as Gemma emits it, arguments as a JSON object.
    Gemma,
    /// `name(arg=value, ...)` with Python literals.
    Pythonic,
}

/// How the name and the arguments of one call are written in an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallSyntax {
    /// A JSON object `{"name": ..., "<arguments_key>": {...}}`.
    JsonObject {
        /// The key holding the arguments (`arguments`, or Llama 3.1's `parameters`).
        arguments_key: &'static str,
    },
    /// The name, then the arguments as a JSON object right after it (`f{...}`).
    NameThenJson,
    /// A Python call with keyword arguments, `f(a=1, b="x")`, values as Python literals.
    PythonCall,
}

/// How several calls in one output are written (the `parallel` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallel {
    /// A JSON list of calls, `[call, call]`.
    JsonList,
    /// One call after the other, separated by a newline.
    Lines,
}

/// What an envelope is, in one place: the grammar builder ([`crate::grammar`]), the parser and
/// renderer here, the extractor ([`crate::extract`]) and the prompt builder ([`crate::prompt`])
/// all read it, so that a new envelope is a new row here plus whatever is genuinely new about
/// it (a new [`CallSyntax`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeSpec {
    /// The envelope.
    pub format: Format,
    /// Its name on the command line and in workspace files.
    pub name: &'static str,
    /// How one call's name and arguments are written.
    pub call: CallSyntax,
    /// The text written before each call (`<tool_call>\n`, `call:`), or empty.
    pub open: &'static str,
    /// The text written after each call (`\n</tool_call>`), or empty.
    pub close: &'static str,
    /// What an output that holds calls starts with (what the `auto` option's plain text may not
    /// start with); empty where a call starts with its name.
    pub starts: &'static [&'static str],
    /// How parallel calls are written.
    pub parallel: Parallel,
}

impl EnvelopeSpec {
    /// The literal syntax of the arguments' values.
    pub fn literals(&self) -> toolrail_schema::LiteralSyntax {
        match self.call {
            CallSyntax::PythonCall => toolrail_schema::LiteralSyntax::Python,
            CallSyntax::JsonObject { .. } | CallSyntax::NameThenJson => {
                toolrail_schema::LiteralSyntax::Json
            }
        }
    }
}

/// The special token Llama 3.1 writes before a call in its `ipython` environment.
pub const LLAMA3_PYTHON_TAG: &str = "<|python_tag|>";
/// The special tokens that end a Llama 3.1 turn after a call (`<|eom_id|>`: a tool will answer).
pub const LLAMA3_END_TAGS: [&str; 2] = ["<|eom_id|>", "<|eot_id|>"];

/// Every envelope, in documentation order (the order of [`Format::ALL`]).
pub const ENVELOPES: [EnvelopeSpec; 5] = [
    EnvelopeSpec {
        format: Format::OpenAi,
        name: "openai",
        call: CallSyntax::JsonObject {
            arguments_key: "arguments",
        },
        open: "",
        close: "",
        // both, whatever `parallel` says: the parser reads `[` as a list of calls
        starts: &["{", "["],
        parallel: Parallel::JsonList,
    },
    EnvelopeSpec {
        format: Format::Llama3,
        name: "llama3",
        call: CallSyntax::JsonObject {
            arguments_key: "parameters",
        },
        open: "",
        close: "",
        starts: &["{", "["],
        parallel: Parallel::JsonList,
    },
    EnvelopeSpec {
        format: Format::Hermes,
        name: "hermes",
        call: CallSyntax::JsonObject {
            arguments_key: "arguments",
        },
        open: "<tool_call>\n",
        close: "\n</tool_call>",
        starts: &["<tool_call>"],
        parallel: Parallel::Lines,
    },
    EnvelopeSpec {
        format: Format::Gemma,
        name: "gemma",
        call: CallSyntax::NameThenJson,
        open: "call:",
        close: "",
        starts: &["call:"],
        parallel: Parallel::Lines,
    },
    EnvelopeSpec {
        format: Format::Pythonic,
        name: "pythonic",
        call: CallSyntax::PythonCall,
        open: "",
        close: "",
        starts: &[],
        parallel: Parallel::Lines,
    },
];

impl Format {
    /// The envelope's row of [`ENVELOPES`].
    pub fn spec(self) -> &'static EnvelopeSpec {
        match self {
            Format::OpenAi => &ENVELOPES[0],
            Format::Llama3 => &ENVELOPES[1],
            Format::Hermes => &ENVELOPES[2],
            Format::Gemma => &ENVELOPES[3],
            Format::Pythonic => &ENVELOPES[4],
        }
    }

    /// Every format, in documentation order.
    pub const ALL: [Format; 5] = [
        Format::OpenAi,
        Format::Llama3,
        Format::Hermes,
        Format::Gemma,
        Format::Pythonic,
    ];

    /// The format's name as used on the command line.
    pub fn as_str(self) -> &'static str {
        self.spec().name
    }

    /// Whether one call is a bare JSON object (parallel calls are then a JSON list).
    pub fn is_json(self) -> bool {
        self.spec().parallel == Parallel::JsonList
    }

    /// The key holding the arguments in JSON-shaped envelopes.
    pub fn arguments_key(self) -> &'static str {
        match self.spec().call {
            CallSyntax::JsonObject { arguments_key } => arguments_key,
            CallSyntax::NameThenJson | CallSyntax::PythonCall => "arguments",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown format name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format '{0}' (expected openai, llama3, hermes, gemma or pythonic)")]
pub struct UnknownFormat(pub String);

impl From<Format> for &'static str {
    fn from(f: Format) -> Self {
        f.as_str()
    }
}

impl TryFrom<String> for Format {
    type Error = UnknownFormat;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownFormat(s.to_owned()))
    }
}

/// One call as read from model output, before any check against the tool set.
#[derive(Debug, Clone, PartialEq)]
pub struct RawCall {
    /// The tool name as written.
    pub name: String,
    /// The arguments as written (normally an object; anything else is reported by the validator).
    pub arguments: Value,
    /// Byte offset of the call in the output text.
    pub offset: usize,
}

/// What an output contains.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// The output does not start like a call (plain text, allowed in `auto` mode).
    Text,
    /// One or more calls. `list` is true when a JSON envelope wrote them as a list.
    Calls {
        /// The calls, in order.
        calls: Vec<RawCall>,
        /// Whether the calls were written as a JSON list (JSON envelopes only).
        list: bool,
    },
}

/// Why an output could not be read as calls in the chosen envelope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte {offset}: {message}")]
pub struct ParseError {
    /// Byte offset in the output where reading failed.
    pub offset: usize,
    /// What was expected or found.
    pub message: String,
}

fn perr(offset: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        offset,
        message: message.into(),
    }
}

/// The text a call in this envelope starts with, or for `pythonic` `None` (a name, then `(`).
pub fn call_prefix(format: Format) -> Option<&'static str> {
    format.spec().starts.first().copied()
}

/// Parses a model output written in `format`. Leading and trailing whitespace is ignored. An
/// output that does not start like a call is [`Parsed::Text`].
pub fn parse_calls(format: Format, text: &str) -> Result<Parsed, ParseError> {
    let mut start = text.len() - text.trim_start().len();
    let mut body = text.trim();
    if format == Format::Llama3 {
        // Llama 3.1 may open a call with `<|python_tag|>` and end it with `<|eom_id|>` (or
        // `<|eot_id|>`) when those are printed as text: the call is what lies between.
        if let Some(rest) = body.strip_prefix(LLAMA3_PYTHON_TAG) {
            let inner = rest.trim_start();
            start += body.len() - inner.len();
            body = inner;
        }
        if let Some(inner) = LLAMA3_END_TAGS
            .iter()
            .find_map(|tag| body.strip_suffix(tag))
        {
            body = inner.trim_end();
        }
    }
    let mut cur = Cursor {
        text,
        pos: start,
        end: start + body.len(),
    };
    let spec = format.spec();
    // the tags around a call, whitespace around them read leniently
    let (open, close) = (spec.open.trim(), spec.close.trim());
    match spec.call {
        CallSyntax::JsonObject { .. } if open.is_empty() => parse_json_envelope(format, &mut cur),
        CallSyntax::JsonObject { .. } => {
            if !body.starts_with(open) {
                return Ok(Parsed::Text);
            }
            parse_repeated(&mut cur, |c| {
                c.expect(open)?;
                c.skip_ws();
                let offset = c.pos;
                let v = c.json_value()?;
                let call = json_call(format, v, offset)?;
                c.skip_ws();
                c.expect(close)?;
                Ok(call)
            })
        }
        CallSyntax::NameThenJson => {
            if !body.starts_with(open) {
                return Ok(Parsed::Text);
            }
            parse_repeated(&mut cur, |c| {
                let offset = c.pos;
                c.expect(open)?;
                let name_start = c.pos;
                while c.pos < c.end && !c.rest().starts_with('{') {
                    let ch = c.rest().chars().next().unwrap_or('{');
                    if ch.is_whitespace() {
                        break;
                    }
                    c.pos += ch.len_utf8();
                }
                let name = c.text[name_start..c.pos].to_owned();
                if name.is_empty() {
                    return Err(perr(c.pos, format!("expected a tool name after '{open}'")));
                }
                let arguments = c.json_value()?;
                Ok(RawCall {
                    name,
                    arguments,
                    offset,
                })
            })
        }
        CallSyntax::PythonCall => {
            // A call starts with `[A-Za-z_][A-Za-z0-9_.-]*(`; anything else is text.
            let ident_len = body
                .find(|ch: char| !is_name_char(ch))
                .unwrap_or(body.len());
            let starts_ok = body
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
            if !starts_ok || !body[ident_len..].starts_with('(') {
                return Ok(Parsed::Text);
            }
            parse_repeated(&mut cur, |c| c.python_call())
        }
    }
}

/// Characters of pythonic tool names and keyword names: ASCII letters, digits, `_`, `.`, `-`.
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

fn parse_json_envelope(format: Format, cur: &mut Cursor<'_>) -> Result<Parsed, ParseError> {
    let rest = cur.rest();
    if !(rest.starts_with('{') || rest.starts_with('[')) {
        return Ok(Parsed::Text);
    }
    let offset = cur.pos;
    let value = cur.json_value()?;
    cur.skip_ws();
    if cur.pos < cur.end {
        return Err(perr(cur.pos, "unexpected text after the call"));
    }
    match value {
        Value::Array(items) => {
            let mut calls = Vec::with_capacity(items.len());
            for item in items {
                calls.push(json_call(format, item, offset)?);
            }
            if calls.is_empty() {
                return Err(perr(offset, "empty list of calls"));
            }
            Ok(Parsed::Calls { calls, list: true })
        }
        other => Ok(Parsed::Calls {
            calls: vec![json_call(format, other, offset)?],
            list: false,
        }),
    }
}

fn json_call(format: Format, value: Value, offset: usize) -> Result<RawCall, ParseError> {
    let key = format.arguments_key();
    let Value::Object(mut obj) = value else {
        return Err(perr(offset, "a call must be a JSON object"));
    };
    let name = match obj.remove("name") {
        Some(Value::String(s)) => s,
        Some(_) => return Err(perr(offset, "\"name\" must be a string")),
        None => return Err(perr(offset, "missing \"name\"")),
    };
    let arguments = match obj.remove(key) {
        Some(v) => v,
        None => return Err(perr(offset, format!("missing \"{key}\""))),
    };
    if let Some(extra) = obj.keys().next() {
        return Err(perr(
            offset,
            format!("unexpected key \"{extra}\" in the call (expected \"name\" and \"{key}\")"),
        ));
    }
    Ok(RawCall {
        name,
        arguments,
        offset,
    })
}

fn parse_repeated(
    cur: &mut Cursor<'_>,
    mut one: impl FnMut(&mut Cursor<'_>) -> Result<RawCall, ParseError>,
) -> Result<Parsed, ParseError> {
    let mut calls = Vec::new();
    loop {
        calls.push(one(cur)?);
        cur.skip_ws();
        if cur.pos >= cur.end {
            break;
        }
    }
    Ok(Parsed::Calls { calls, list: false })
}

/// A JSON value read with a repeated object key refused: serde_json would keep the last one
/// silently, so `{"city": "Paris", "city": "Rome"}` would validate as Rome, while no grammar
/// toolrail emits lets a model write a key twice (and readers disagree on which one counts).
struct NoDuplicateKeys(Value);

impl<'de> serde::Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(NoDuplicateKeysVisitor)
            .map(NoDuplicateKeys)
    }
}

struct NoDuplicateKeysVisitor;

impl<'de> serde::de::Visitor<'de> for NoDuplicateKeysVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(NoDuplicateKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "the key \"{key}\" appears twice in one object"
                )));
            }
            let NoDuplicateKeys(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

struct Cursor<'a> {
    text: &'a str,
    pos: usize,
    end: usize,
}

impl Cursor<'_> {
    fn rest(&self) -> &str {
        &self.text[self.pos..self.end]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn skip_ws(&mut self) {
        let r = self.rest();
        self.pos += r.len() - r.trim_start().len();
    }

    fn expect(&mut self, lit: &str) -> Result<(), ParseError> {
        if self.rest().starts_with(lit) {
            self.pos += lit.len();
            Ok(())
        } else {
            Err(perr(self.pos, format!("expected '{lit}'")))
        }
    }

    fn json_value(&mut self) -> Result<Value, ParseError> {
        let mut stream =
            serde_json::Deserializer::from_str(self.rest()).into_iter::<NoDuplicateKeys>();
        match stream.next() {
            Some(Ok(NoDuplicateKeys(v))) => {
                self.pos += stream.byte_offset();
                Ok(v)
            }
            Some(Err(e)) => Err(perr(self.pos, format!("invalid JSON: {e}"))),
            None => Err(perr(self.pos, "expected a JSON value")),
        }
    }

    fn python_call(&mut self) -> Result<RawCall, ParseError> {
        let offset = self.pos;
        let name = self.python_name();
        if name.is_empty() {
            return Err(perr(self.pos, "expected a tool name"));
        }
        self.expect("(")?;
        let mut args = Map::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(')') {
                self.pos += 1;
                break;
            }
            let key_at = self.pos;
            let key = self.python_name();
            self.skip_ws();
            if key.is_empty() || self.peek() != Some('=') {
                return Err(perr(
                    key_at,
                    "expected a keyword argument 'name=value' (positional arguments are not \
                     supported)",
                ));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.python_value(0)?;
            if args.contains_key(&key) {
                return Err(perr(key_at, format!("duplicate argument '{key}'")));
            }
            args.insert(key, value);
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(')') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(perr(self.pos, "expected ',' or ')'")),
            }
        }
        Ok(RawCall {
            name,
            arguments: Value::Object(args),
            offset,
        })
    }

    fn python_name(&mut self) -> String {
        let r = self.rest();
        let len = r.find(|ch: char| !is_name_char(ch)).unwrap_or(r.len());
        let name = r[..len].to_owned();
        self.pos += len;
        name
    }

    fn python_value(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > 128 {
            return Err(perr(self.pos, "value nested too deeply"));
        }
        self.skip_ws();
        let at = self.pos;
        match self.peek() {
            Some('"') | Some('\'') => self.python_string().map(Value::String),
            Some('[') | Some('(') => {
                let close = if self.peek() == Some('[') { ']' } else { ')' };
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_ws();
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        break;
                    }
                    items.push(self.python_value(depth + 1)?);
                    self.skip_ws();
                    match self.peek() {
                        Some(',') => self.pos += 1,
                        Some(c) if c == close => {
                            self.pos += 1;
                            break;
                        }
                        _ => return Err(perr(self.pos, format!("expected ',' or '{close}'"))),
                    }
                }
                Ok(Value::Array(items))
            }
            Some('{') => {
                self.pos += 1;
                let mut map = Map::new();
                loop {
                    self.skip_ws();
                    if self.peek() == Some('}') {
                        self.pos += 1;
                        break;
                    }
                    let key_at = self.pos;
                    let key = match self.python_value(depth + 1)? {
                        Value::String(s) => s,
                        _ => return Err(perr(key_at, "dict keys must be strings")),
                    };
                    self.skip_ws();
                    self.expect(":")?;
                    let v = self.python_value(depth + 1)?;
                    map.insert(key, v);
                    self.skip_ws();
                    match self.peek() {
                        Some(',') => self.pos += 1,
                        Some('}') => {
                            self.pos += 1;
                            break;
                        }
                        _ => return Err(perr(self.pos, "expected ',' or '}'")),
                    }
                }
                Ok(Value::Object(map))
            }
            Some(c) if c == '-' || c == '+' || c == '.' || c.is_ascii_digit() => {
                self.python_number()
            }
            Some(_) => {
                let word = self.python_name();
                match word.as_str() {
                    "True" => Ok(Value::Bool(true)),
                    "False" => Ok(Value::Bool(false)),
                    "None" => Ok(Value::Null),
                    "" => Err(perr(at, "expected a Python literal")),
                    w => Err(perr(
                        at,
                        format!("'{w}' is not a Python literal (expressions are not allowed)"),
                    )),
                }
            }
            None => Err(perr(at, "expected a value, found end of output")),
        }
    }

    fn python_number(&mut self) -> Result<Value, ParseError> {
        let at = self.pos;
        let r = self.rest();
        let len = r
            .char_indices()
            .find(|&(i, ch)| {
                !(ch.is_ascii_digit()
                    || ch == '.'
                    || ch == 'e'
                    || ch == 'E'
                    || ch == '_'
                    || ((ch == '-' || ch == '+')
                        && (i == 0 || matches!(r.as_bytes()[i - 1], b'e' | b'E'))))
            })
            .map_or(r.len(), |(i, _)| i);
        let lit: String = r[..len].chars().filter(|&c| c != '_').collect();
        self.pos += len;
        let lit = lit.strip_prefix('+').unwrap_or(&lit);
        if !lit.contains(['.', 'e', 'E']) {
            if let Ok(i) = lit.parse::<i64>() {
                return Ok(Value::Number(i.into()));
            }
            if let Ok(u) = lit.parse::<u64>() {
                return Ok(Value::Number(u.into()));
            }
        }
        lit.parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| perr(at, format!("invalid number '{lit}'")))
    }

    fn python_string(&mut self) -> Result<String, ParseError> {
        let at = self.pos;
        let quote = self.peek().unwrap_or('"');
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(ch) = self.peek() else {
                return Err(perr(at, "unterminated string"));
            };
            self.pos += ch.len_utf8();
            if ch == quote {
                return Ok(out);
            }
            if ch == '\n' {
                return Err(perr(at, "newline inside a string"));
            }
            if ch != '\\' {
                out.push(ch);
                continue;
            }
            let esc_at = self.pos - 1;
            let Some(e) = self.peek() else {
                return Err(perr(at, "unterminated string"));
            };
            self.pos += e.len_utf8();
            match e {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                '0' => out.push('\0'),
                '\\' | '\'' | '"' | '/' => out.push(e),
                'x' | 'u' | 'U' => {
                    let n = match e {
                        'x' => 2,
                        'u' => 4,
                        _ => 8,
                    };
                    let mut code = self.hex(n, esc_at)?;
                    if e == 'u'
                        && (0xD800..0xDC00).contains(&code)
                        && self.rest().starts_with("\\u")
                    {
                        self.pos += 2;
                        let low = self.hex(4, esc_at)?;
                        if (0xDC00..0xE000).contains(&low) {
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                        } else {
                            return Err(perr(esc_at, "invalid surrogate pair"));
                        }
                    }
                    let c = char::from_u32(code)
                        .ok_or_else(|| perr(esc_at, "escape is not a valid character"))?;
                    out.push(c);
                }
                other => return Err(perr(esc_at, format!("unknown escape '\\{other}'"))),
            }
        }
    }

    fn hex(&mut self, n: usize, at: usize) -> Result<u32, ParseError> {
        let r = self.rest();
        let digits = r
            .get(..n)
            .filter(|d| d.chars().all(|c| c.is_ascii_hexdigit()));
        let Some(d) = digits else {
            return Err(perr(at, format!("expected {n} hex digits")));
        };
        let code = u32::from_str_radix(d, 16).map_err(|_| perr(at, "bad hex escape"))?;
        self.pos += n;
        Ok(code)
    }
}

/// Whitespace style used when rendering JSON (mirrors the grammar's whitespace options).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Spacing {
    /// One space after `:` and `,` (`{"a": 1, "b": 2}`).
    #[default]
    Spaced,
    /// No whitespace at all.
    Compact,
}

/// Writes `value` as JSON with the given spacing, keys in map order.
pub fn write_json(value: &Value, spacing: Spacing, out: &mut String) {
    let (colon, comma) = match spacing {
        Spacing::Spaced => (": ", ", "),
        Spacing::Compact => (":", ","),
    };
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(comma);
                }
                write_json(v, spacing, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(comma);
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(colon);
                write_json(v, spacing, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Writes `value` as a Python literal (double-quoted strings with JSON escapes,
/// `True`/`False`/`None`), with the given spacing.
pub fn write_python(value: &Value, spacing: Spacing, out: &mut String) {
    let (colon, comma) = match spacing {
        Spacing::Spaced => (": ", ", "),
        Spacing::Compact => (":", ","),
    };
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(comma);
                }
                write_python(v, spacing, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(comma);
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(colon);
                write_python(v, spacing, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Renders one call in `format`. Arguments are written in the map's order (so a caller can match
/// the grammar's declared property order by building the map in that order).
pub fn render_call(format: Format, name: &str, arguments: &Value, spacing: Spacing) -> String {
    let mut out = String::new();
    let (colon, comma) = match spacing {
        Spacing::Spaced => (": ", ", "),
        Spacing::Compact => (":", ","),
    };
    let json_call = |out: &mut String, key: &str| {
        out.push_str("{\"name\"");
        out.push_str(colon);
        out.push_str(&Value::String(name.to_owned()).to_string());
        out.push_str(comma);
        out.push('"');
        out.push_str(key);
        out.push('"');
        out.push_str(colon);
        write_json(arguments, spacing, out);
        out.push('}');
    };
    let spec = format.spec();
    out.push_str(spec.open);
    match spec.call {
        CallSyntax::JsonObject { arguments_key } => json_call(&mut out, arguments_key),
        CallSyntax::NameThenJson => {
            out.push_str(name);
            write_json(arguments, spacing, &mut out);
        }
        CallSyntax::PythonCall => {
            out.push_str(name);
            out.push('(');
            if let Value::Object(map) = arguments {
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push_str(comma);
                    }
                    out.push_str(k);
                    out.push('=');
                    write_python(v, spacing, &mut out);
                }
            }
            out.push(')');
        }
    }
    out.push_str(spec.close);
    out
}

/// Renders several calls as the `parallel` option writes them: a JSON list for JSON envelopes,
/// otherwise one call per line.
pub fn render_calls(format: Format, calls: &[(String, Value)], spacing: Spacing) -> String {
    let parts: Vec<String> = calls
        .iter()
        .map(|(n, a)| render_call(format, n, a, spacing))
        .collect();
    if format.is_json() {
        let sep = match spacing {
            Spacing::Spaced => ", ",
            Spacing::Compact => ",",
        };
        format!("[{}]", parts.join(sep))
    } else {
        parts.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(format: Format, text: &str) -> RawCall {
        match parse_calls(format, text).unwrap() {
            Parsed::Calls { mut calls, .. } => calls.remove(0),
            Parsed::Text => panic!("text"),
        }
    }

    #[test]
    fn round_trips_every_format() {
        let args = json!({"a": [1, 2.5, "x\"y"], "b": {"c": null, "d": true}, "e": "/"});
        for format in Format::ALL {
            for spacing in [Spacing::Spaced, Spacing::Compact] {
                let text = render_call(format, "ns.f", &args, spacing);
                let call = one(format, &text);
                assert_eq!(call.name, "ns.f", "{text}");
                assert_eq!(call.arguments, args, "{text}");
                let two = render_calls(
                    format,
                    &[("a".into(), json!({})), ("b".into(), args.clone())],
                    spacing,
                );
                match parse_calls(format, &two).unwrap() {
                    Parsed::Calls { calls, list } => {
                        assert_eq!(calls.len(), 2, "{two}");
                        assert_eq!(list, format.is_json());
                        assert_eq!(calls[1].arguments, args);
                    }
                    Parsed::Text => panic!("{two}"),
                }
            }
        }
    }

    #[test]
    fn plain_text_is_text() {
        for format in Format::ALL {
            assert_eq!(
                parse_calls(format, "The weather is nice.").unwrap(),
                Parsed::Text
            );
        }
    }

    #[test]
    fn python_literals() {
        let err = parse_calls(Format::Pythonic, "f(1)").unwrap_err();
        assert!(err.message.contains("positional"), "{err}");
        let err = parse_calls(Format::Pythonic, "f(a=x)").unwrap_err();
        assert!(err.message.contains("not a Python literal"), "{err}");
        let c = one(
            Format::Pythonic,
            "f(a='it\\'s', b=(1, -2e3), c={'k': None}, d=False)",
        );
        assert_eq!(
            c.arguments,
            json!({"a": "it's", "b": [1, -2000.0], "c": {"k": null}, "d": false})
        );
    }

    #[test]
    fn json_envelope_errors() {
        let e = parse_calls(Format::OpenAi, r#"{"name": "f", "parameters": {}}"#).unwrap_err();
        assert!(e.message.contains("\"arguments\""), "{e}");
        let e = parse_calls(Format::OpenAi, r#"{"name": "f", "arguments": {}} x"#).unwrap_err();
        assert!(e.message.contains("after"), "{e}");
    }
}
