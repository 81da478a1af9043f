//! Extraction of tool calls from unconstrained model text.
//!
//! When a model runs without a grammar it still tries to call tools, in whatever shape its
//! training favoured. [`extract_calls`] finds those calls, says which pattern matched each and
//! where, keeps the prose outside them, and reports candidates that looked like calls but were
//! malformed (with the byte offset of the problem).
//!
//! Patterns are tried in this order (seed 003's order, plus Llama and pythonic calls); a
//! candidate overlapping a span claimed by an earlier pattern is skipped, so nested JSON inside
//! one call is never reported as a second call:
//!
//! 1. [`CallPattern::ToolCallTag`] `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
//!    (the body may also be an array of envelopes, several JSON objects, a `<function=...>`
//!    block or a pythonic call).
//! 2. [`CallPattern::FunctionTag`] `<function=name>{...}</function>`, or with
//!    `<parameter=key>value</parameter>` children.
//! 3. [`CallPattern::FunctionParen`] `<function=name(k="v", ...)>` (also with `</function>`).
//! 4. [`CallPattern::ToolCode`] `<tool_code>...</tool_code>` holding a JSON envelope or a
//!    pythonic call (an enclosing `print(...)` is looked through).
//! 5. [`CallPattern::GemmaCall`] `call:verb{args}`: the sentinel rule (start of text, whitespace
//!    or one of `, ; : ( [ { } ) ] > _` before `call:`), namespaced verbs (`call:ns:verb` names
//!    the tool `verb`), relaxed-JSON arguments, and the `_call:` tokenizer artifact (the
//!    underscore is removed with the call).
//! 6. [`CallPattern::LlamaDotCall`] Llama 3.1 built-in tools: `brave_search.call(query="...")`.
//! 7. [`CallPattern::BareJson`] `{"name": ..., "arguments": {...}}`, `{"name": ...,
//!    "parameters": {...}}`, `{"function": {...}}` and arrays of them, anywhere in the text.
//! 8. [`CallPattern::Pythonic`] `name(arg=value, ...)` and `[a(x=1), b(y=2)]`; arguments must
//!    be Python literals (read safely, never evaluated, see `pylit`).
//!
//! Two guards refine the order: `call:` and `.call(` written inside a JSON string of a bare
//! envelope are not calls (the envelopes are located before patterns 5 and 6 run, and only
//! positions strictly inside them are skipped, so `call:outer{"name": "inner", ...}` is still
//! one call named `outer`); and JSON tool *definitions* (`{"name", "description",
//! "parameters"}`, `{"name", "input_schema"}`, `{"type": "function", "function": {...,
//! "parameters"}}`, lists of them) are not calls, and nothing inside one is taken for a call.
//!
//! The prose is the text with the accepted calls cut out, along with adjacent wrapper tokens
//! (`<|python_tag|>`, `[TOOL_CALLS]`, Gemma's `<|tool_call>`/`<tool_call|>`, a `print(...)`
//! around a pythonic call) and Markdown code fences left empty; malformed candidates stay in
//! the prose. Everything runs in time roughly linear in the text for ordinary output; the
//! bracket sweeps read each opener's outcome from a table built once per text (`scan::Brackets`),
//! so thousands of unclosed brackets stay linear too (1 MB of `{`). Known remaining
//! non-linear case: overlapping string literals seen from different openers.

mod pylit;
mod relaxed;
mod scan;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::call::ToolCall;
use crate::envelope::Format;
use pylit::PyArg;
use relaxed::{offset_of, parse_relaxed};
use scan::{Brackets, Quotes, ScanEnd, balanced_end};

/// The text shape a call was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallPattern {
    /// `<tool_call>...</tool_call>` (Hermes, Qwen).
    ToolCallTag,
    /// `<function=name>...</function>` (Llama 3.1 custom tools, Qwen3-Coder parameters).
    FunctionTag,
    /// `<function=name(k="v")>`: function-signature style.
    FunctionParen,
    /// `<tool_code>...</tool_code>` (Gemini/Gemma style code blocks).
    ToolCode,
    /// `call:verb{...}` as Gemma emits it.
    GemmaCall,
    /// `name.call(k="v")`: Llama 3.1 built-in tools.
    LlamaDotCall,
    /// A bare JSON envelope or an array of them.
    BareJson,
    /// `name(k=v, ...)` in Python syntax.
    Pythonic,
}

impl CallPattern {
    /// A short human name for the pattern, as shown in the CLI and the UI.
    pub fn label(self) -> &'static str {
        match self {
            Self::ToolCallTag => "<tool_call>",
            Self::FunctionTag => "<function=name>",
            Self::FunctionParen => "<function=name(args)>",
            Self::ToolCode => "<tool_code>",
            Self::GemmaCall => "call:verb{...}",
            Self::LlamaDotCall => "name.call(...)",
            Self::BareJson => "bare JSON",
            Self::Pythonic => "pythonic",
        }
    }
}

impl std::fmt::Display for CallPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// One call found in the text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractedCall {
    /// The call.
    pub call: ToolCall,
    /// The pattern that matched.
    pub pattern: CallPattern,
    /// Byte span of the call's text (for several calls in one tag or array: the whole block).
    pub span: Range<usize>,
}

/// A candidate that looked like a call but was not taken (or was taken with a caveat).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// The pattern whose candidate this is.
    pub pattern: CallPattern,
    /// Byte span of the candidate.
    pub span: Range<usize>,
    /// Byte offset of the problem itself, inside `span`.
    pub at: usize,
    /// What was wrong, in one line.
    pub message: String,
}

/// Everything [`extract_calls`] found.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Extraction {
    /// The calls, in text order.
    pub calls: Vec<ExtractedCall>,
    /// Malformed or rejected candidates, in text order.
    pub diagnostics: Vec<Diagnostic>,
    /// The text with the calls removed (and trimmed): what the model said besides calling tools.
    pub prose: String,
}

impl Extraction {
    /// The calls without their positions.
    pub fn tool_calls(&self) -> Vec<ToolCall> {
        self.calls.iter().map(|c| c.call.clone()).collect()
    }
}

/// Options for [`extract_calls_with`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtractOptions {
    /// When set, calls of tools not in this list are dropped (and reported as diagnostics).
    pub allowed_tools: Option<Vec<String>>,
}

/// Finds the tool calls in `text` with every pattern and no tool filter.
pub fn extract_calls(text: &str) -> Extraction {
    extract_calls_with(text, &ExtractOptions::default())
}

/// Finds the tool calls in `text`, applying `options`.
pub fn extract_calls_with(text: &str, options: &ExtractOptions) -> Extraction {
    let mut ex = Extractor {
        text,
        options,
        claimed: Spans::default(),
        removed: Vec::new(),
        calls: Vec::new(),
        diagnostics: Vec::new(),
        json: Brackets::new(text, Quotes::Json),
        relaxed: Brackets::new(text, Quotes::Relaxed),
        python: Brackets::new(text, Quotes::Python),
    };
    ex.tool_call_tags();
    ex.function_tags();
    ex.tool_code_blocks();
    let inside_envelopes = envelope_spans(text, &ex.claimed, &ex.json);
    ex.gemma_calls(&inside_envelopes);
    ex.llama_dot_calls(&inside_envelopes);
    ex.bare_json();
    ex.pythonic();
    ex.finish()
}

/// Working state: what has been claimed by earlier patterns and what has been found.
struct Extractor<'a> {
    text: &'a str,
    options: &'a ExtractOptions,
    /// Spans no later pattern may look into (calls, and malformed candidates of a known shape).
    claimed: Spans,
    /// Spans cut out of the prose (accepted calls, with their wrappers).
    removed: Vec<Range<usize>>,
    calls: Vec<ExtractedCall>,
    diagnostics: Vec<Diagnostic>,
    /// Where the bracket at each position closes, per quoting style (the sweeps try every
    /// opener; the tables keep that linear, see [`Brackets`]).
    json: Brackets,
    relaxed: Brackets,
    python: Brackets,
}

/// A call parsed from a candidate, before the tool filter.
type Parsed = Result<Vec<ToolCall>, (usize, String)>;

impl Extractor<'_> {
    /// [`json_value_end`] over the whole text, from the table.
    fn json_value_end(&self, start: usize) -> Option<usize> {
        match self.text.as_bytes().get(start) {
            Some(b'{' | b'[') => match self.json.end(self.text, start) {
                ScanEnd::Closed(end) => Some(end),
                _ => None,
            },
            _ => None,
        }
    }

    fn is_claimed(&self, pos: usize) -> bool {
        self.claimed.contains(pos)
    }

    fn overlaps_claimed(&self, span: &Range<usize>) -> bool {
        self.claimed.overlaps(span)
    }

    fn diagnose(&mut self, pattern: CallPattern, span: Range<usize>, at: usize, message: String) {
        self.diagnostics.push(Diagnostic {
            pattern,
            span,
            at,
            message,
        });
    }

    /// Records the outcome of one candidate: its calls (filtered) or its diagnostic.
    fn accept(
        &mut self,
        pattern: CallPattern,
        span: Range<usize>,
        removal: Range<usize>,
        parsed: Parsed,
    ) {
        self.claimed
            .insert(span.start.min(removal.start)..span.end.max(removal.end));
        match parsed {
            Err((at, message)) => self.diagnose(pattern, span, at, message),
            Ok(calls) => {
                let mut kept = 0;
                for call in calls {
                    if let Some(allowed) = &self.options.allowed_tools
                        && !allowed.contains(&call.name)
                    {
                        self.diagnose(
                            pattern,
                            span.clone(),
                            span.start,
                            format!(
                                "tool `{}` is not among the allowed tools; call dropped",
                                call.name
                            ),
                        );
                        continue;
                    }
                    kept += 1;
                    self.calls.push(ExtractedCall {
                        call,
                        pattern,
                        span: span.clone(),
                    });
                }
                if kept > 0 {
                    self.removed.push(removal);
                }
            }
        }
    }

    /// Pattern 1: `<tool_call>...</tool_call>`.
    fn tool_call_tags(&mut self) {
        let hermes = Format::Hermes.spec();
        let (open_tag, close_tag) = (hermes.open.trim(), hermes.close.trim());
        let text = self.text;
        let mut from = 0;
        while let Some(rel) = text[from..].find(open_tag) {
            let start = from + rel;
            let body_start = start + open_tag.len();
            // A close tag only counts if no other `<tool_call>` opens before it.
            let close = text[body_start..].find(close_tag).filter(|close_rel| {
                text[body_start..]
                    .find(open_tag)
                    .is_none_or(|open_rel| open_rel > *close_rel)
            });
            match close {
                Some(close_rel) => {
                    let body_end = body_start + close_rel;
                    let end = body_end + close_tag.len();
                    let parsed = self.parse_block_body(body_start..body_end);
                    self.accept(CallPattern::ToolCallTag, start..end, start..end, parsed);
                    from = end;
                }
                None => {
                    // No closing tag (generation stopped early): take the JSON that follows.
                    let json_start = skip_ws(text, body_start);
                    match self.json_value_end(json_start) {
                        Some(end) => {
                            let parsed = self.parse_block_body(json_start..end);
                            let noted = parsed.is_ok();
                            self.accept(CallPattern::ToolCallTag, start..end, start..end, parsed);
                            if noted {
                                self.diagnose(
                                    CallPattern::ToolCallTag,
                                    start..end,
                                    end,
                                    "no closing </tool_call>; call taken from the JSON after the tag".to_owned(),
                                );
                            }
                            from = end;
                        }
                        None => {
                            let end = text.len();
                            self.claimed.insert(start..end);
                            self.diagnose(
                                CallPattern::ToolCallTag,
                                start..end,
                                json_start,
                                "<tool_call> without a closing tag or a complete JSON value after it".to_owned(),
                            );
                            from = end;
                        }
                    }
                }
            }
        }
    }

    /// The body of a `<tool_call>` (or `<tool_code>`): JSON envelope(s), a `<function=...>`
    /// block, or a pythonic call.
    fn parse_block_body(&self, body: Range<usize>) -> Parsed {
        let text = self.text;
        let start = skip_ws(text, body.start);
        let end = trim_end_index(text, start, body.end);
        let inner = &text[start..end];
        if inner.is_empty() {
            return Err((body.start, "empty tag".to_owned()));
        }
        if inner.starts_with('{') || inner.starts_with('[') {
            return parse_envelopes_strict(inner, start, false);
        }
        if inner.starts_with("call:") || inner.starts_with("_call:") {
            let at = start + usize::from(inner.starts_with('_'));
            return match gemma_call_at(text, at, &self.relaxed) {
                GemmaCandidate::Call { span, parsed } if span.end == end => parsed,
                GemmaCandidate::Call { span, .. } => {
                    Err((span.end, "unexpected text after the call".to_owned()))
                }
                GemmaCandidate::Unclosed { at, message, .. } => Err((at, message)),
                GemmaCandidate::NotACall { .. } => {
                    Err((start, "malformed call:verb{...}".to_owned()))
                }
            };
        }
        if inner.starts_with("<function=") {
            return match function_tag_at(text, start, end) {
                Some((_, _, parsed)) => parsed,
                None => Err((start, "malformed <function=...> block".to_owned())),
            };
        }
        parse_python_block(inner, start)
    }

    /// Patterns 2 and 3: `<function=name>...</function>` and `<function=name(args)>`.
    fn function_tags(&mut self) {
        const OPEN: &str = "<function=";
        let text = self.text;
        let mut from = 0;
        while let Some(rel) = text[from..].find(OPEN) {
            let start = from + rel;
            if self.is_claimed(start) {
                from = start + OPEN.len();
                continue;
            }
            match function_tag_at(text, start, text.len()) {
                Some((pattern, end, parsed)) => {
                    self.accept(pattern, start..end, start..end, parsed);
                    from = end;
                }
                None => from = start + OPEN.len(),
            }
        }
    }

    /// Pattern 4: `<tool_code>...</tool_code>`.
    fn tool_code_blocks(&mut self) {
        const OPEN: &str = "<tool_code>";
        const CLOSE: &str = "</tool_code>";
        let text = self.text;
        let mut from = 0;
        while let Some(rel) = text[from..].find(OPEN) {
            let start = from + rel;
            let body_start = start + OPEN.len();
            if self.is_claimed(start) {
                from = body_start;
                continue;
            }
            let Some(close_rel) = text[body_start..].find(CLOSE) else {
                self.diagnose(
                    CallPattern::ToolCode,
                    start..text.len(),
                    body_start,
                    "<tool_code> without </tool_code>".to_owned(),
                );
                break;
            };
            let body_end = body_start + close_rel;
            let end = body_end + CLOSE.len();
            let (inner_start, inner_end) = strip_code_fence(text, body_start, body_end);
            let parsed = self.parse_block_body(inner_start..inner_end);
            self.accept(CallPattern::ToolCode, start..end, start..end, parsed);
            from = end;
        }
    }

    /// Pattern 5: `call:verb{...}` with the sentinel rule and the `_call:` artifact.
    fn gemma_calls(&mut self, inside_envelopes: &[Range<usize>]) {
        let keyword = Format::Gemma.spec().open;
        let text = self.text;
        let bytes = text.as_bytes();
        let mut from = 0;
        while let Some(rel) = text[from..].find(keyword) {
            let start = from + rel;
            from = start + keyword.len();
            if self.is_claimed(start) || strictly_inside(inside_envelopes, start) {
                continue;
            }
            let sentinel_ok = match start.checked_sub(1).map(|i| bytes[i]) {
                None => true,
                Some(c) => c.is_ascii_whitespace() || b",;:([{})]>_".contains(&c),
            };
            if !sentinel_ok {
                continue;
            }
            match gemma_call_at(text, start, &self.relaxed) {
                GemmaCandidate::NotACall { skip_to } => from = from.max(skip_to),
                GemmaCandidate::Unclosed { span, at, message } => {
                    self.diagnose(CallPattern::GemmaCall, span, at, message);
                }
                GemmaCandidate::Call { span, parsed } => {
                    let removal = with_wrappers(text, span.clone());
                    from = span.end;
                    self.accept(CallPattern::GemmaCall, span, removal, parsed);
                }
            }
        }
    }

    /// Pattern 6: `name.call(k="v")`.
    fn llama_dot_calls(&mut self, inside_envelopes: &[Range<usize>]) {
        const DOT_CALL: &str = ".call(";
        let text = self.text;
        let bytes = text.as_bytes();
        let mut from = 0;
        while let Some(rel) = text[from..].find(DOT_CALL) {
            let dot = from + rel;
            from = dot + DOT_CALL.len();
            let name_start = identifier_start_before(bytes, dot);
            if name_start == dot
                || self.is_claimed(name_start)
                || strictly_inside(inside_envelopes, name_start)
            {
                continue;
            }
            if name_start > 0 && bytes[name_start - 1] == b'.' {
                continue;
            }
            let open = dot + DOT_CALL.len() - 1;
            let ScanEnd::Closed(end) = self.python.end(text, open) else {
                continue;
            };
            let name = &text[name_start..dot];
            let parsed = keyword_call(name, &text[open + 1..end - 1], open + 1);
            let removal = with_wrappers(text, name_start..end);
            self.accept(CallPattern::LlamaDotCall, name_start..end, removal, parsed);
            from = end;
        }
    }

    /// Pattern 7: bare JSON envelopes and arrays of them.
    fn bare_json(&mut self) {
        let text = self.text;
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if (c != b'{' && c != b'[') || self.is_claimed(i) {
                i += 1;
                continue;
            }
            let end = match self.json.end(text, i) {
                ScanEnd::Closed(end) => end,
                unbalanced => {
                    if c == b'{' && looks_like_envelope(&text[i..]) {
                        let (span, at, message) = match unbalanced {
                            ScanEnd::Mismatched(at) => {
                                (i..at + 1, at, "JSON tool call has a mismatched bracket")
                            }
                            _ => (
                                i..text.len(),
                                i,
                                "JSON tool call never closes (unbalanced `{`)",
                            ),
                        };
                        self.diagnose(CallPattern::BareJson, span, at, message.to_owned());
                    }
                    i += 1;
                    continue;
                }
            };
            if self.overlaps_claimed(&(i..end)) {
                i += 1;
                continue;
            }
            let candidate = &text[i..end];
            match serde_json::from_str::<Value>(candidate) {
                Ok(value) => {
                    if let Some(calls) = envelopes_in(&value, true) {
                        let removal = with_wrappers(text, i..end);
                        let calls = calls.map_err(|(_, message)| (i, message));
                        self.accept(CallPattern::BareJson, i..end, removal, calls);
                        i = end;
                        continue;
                    }
                    if is_definition_value(&value) {
                        // A tool definition (or a list of them) stays prose, and nothing inside
                        // it is a call: its `function` object is not a call echo.
                        self.claimed.insert(i..end);
                        i = end;
                        continue;
                    }
                }
                Err(err) => {
                    if c == b'{' && looks_like_envelope(candidate) {
                        let at = i + offset_of(candidate, err.line(), err.column());
                        self.accept(
                            CallPattern::BareJson,
                            i..end,
                            i..end,
                            Err((at, format!("JSON tool call does not parse: {err}"))),
                        );
                        i = end;
                        continue;
                    }
                }
            }
            i += 1;
        }
    }

    /// Pattern 8: `name(k=v, ...)` and `[a(...), b(...)]`.
    fn pythonic(&mut self) {
        let text = self.text;
        let bytes = text.as_bytes();
        // Bracketed lists first, so their brackets leave the prose with them.
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'[' || self.is_claimed(i) {
                i += 1;
                continue;
            }
            let ScanEnd::Closed(end) = self.python.end(text, i) else {
                i += 1;
                continue;
            };
            if !self.overlaps_claimed(&(i..end))
                && let Some(calls) = python_call_list(text, i + 1, end - 1)
            {
                for (span, call) in calls {
                    self.accept(CallPattern::Pythonic, span, i..end, Ok(vec![call]));
                }
                self.claimed.insert(i..end);
                i = end;
                continue;
            }
            i += 1;
        }
        // Then single calls.
        let mut i = 0;
        while i < bytes.len() {
            if !text.is_char_boundary(i) {
                i += 1;
                continue;
            }
            let len = dotted_identifier_len(&text[i..]);
            let boundary =
                i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || b"_.".contains(&bytes[i - 1]));
            if len == 0 || !boundary || self.is_claimed(i) {
                i += 1;
                continue;
            }
            let open = i + len;
            if bytes.get(open) != Some(&b'(') {
                i += len;
                continue;
            }
            let ScanEnd::Closed(end) = self.python.end(text, open) else {
                i += len;
                continue;
            };
            if self.overlaps_claimed(&(i..end)) {
                i += len;
                continue;
            }
            let full_name = &text[i..open];
            let name = full_name.rsplit('.').next().unwrap_or(full_name);
            let standalone = is_standalone(text, i, end);
            match keyword_call(name, &text[open + 1..end - 1], open + 1) {
                Ok(calls) => {
                    let has_arguments = calls.iter().any(|c| !c.arguments.is_empty());
                    if has_arguments || (standalone && !is_python_keyword(name)) {
                        let removal = with_print_wrapper(text, i, end);
                        self.accept(CallPattern::Pythonic, i..end, removal, Ok(calls));
                        i = end;
                    } else {
                        i += len;
                    }
                }
                Err(problem) if standalone && !is_python_keyword(name) => {
                    self.accept(CallPattern::Pythonic, i..end, i..end, Err(problem));
                    i = end;
                }
                Err(_) => i += len,
            }
        }
    }

    fn finish(mut self) -> Extraction {
        self.calls.sort_by_key(|c| c.span.start);
        self.diagnostics.sort_by_key(|d| d.span.start);
        let prose = prose_outside(self.text, &mut self.removed);
        Extraction {
            calls: self.calls,
            diagnostics: self.diagnostics,
            prose,
        }
    }
}

/// What `call:` at a position turned out to be.
enum GemmaCandidate {
    /// Not `call:verb{` at all. No `call:` starting before `skip_to` can be one either (they
    /// lie inside the same verb run, which ends at the same place): the scan resumes there, so
    /// text like `call:call:call:…` costs linear time.
    NotACall { skip_to: usize },
    /// `call:verb{` whose arguments never close.
    Unclosed {
        span: Range<usize>,
        at: usize,
        message: String,
    },
    /// A complete candidate (its arguments may still be malformed).
    Call { span: Range<usize>, parsed: Parsed },
}

/// Reads `call:verb{args}` starting at `start` (the `c` of `call:`; a `_` just before it is
/// the tokenizer artifact and joins the span). The sentinel rule is the caller's business.
fn gemma_call_at(text: &str, start: usize, relaxed: &Brackets) -> GemmaCandidate {
    let keyword = Format::Gemma.spec().open;
    let bytes = text.as_bytes();
    if !text[start..].starts_with(keyword) {
        return GemmaCandidate::NotACall { skip_to: start + 1 };
    }
    let verb_start = start + keyword.len();
    let verb_len = bytes[verb_start..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || b"_.:-".contains(c))
        .count();
    if verb_len == 0 {
        return GemmaCandidate::NotACall {
            skip_to: verb_start,
        };
    }
    let verb = &text[verb_start..verb_start + verb_len];
    let open = skip_ws(text, verb_start + verb_len);
    if bytes.get(open) != Some(&b'{') {
        return GemmaCandidate::NotACall {
            skip_to: verb_start + verb_len,
        };
    }
    let span_start = if start > 0 && bytes[start - 1] == b'_' {
        start - 1
    } else {
        start
    };
    let end = match relaxed.end(text, open) {
        ScanEnd::Closed(end) => end,
        ScanEnd::Mismatched(at) => {
            return GemmaCandidate::Unclosed {
                span: span_start..at + 1,
                at,
                message: format!("call:{verb}: mismatched bracket in the arguments; call dropped"),
            };
        }
        ScanEnd::Unterminated => {
            return GemmaCandidate::Unclosed {
                span: span_start..open + 1,
                at: open,
                message: format!(
                    "call:{verb}: arguments never close (unbalanced `{{`); call dropped"
                ),
            };
        }
    };
    let name = verb.rsplit(':').next().unwrap_or(verb);
    let parsed = if name.is_empty() {
        Err((
            verb_start,
            format!("call:{verb}: empty tool name after the namespace"),
        ))
    } else {
        match parse_relaxed(&text[open..end]) {
            Ok(Value::Object(arguments)) => Ok(vec![ToolCall::new(name, arguments)]),
            Ok(other) => Err((
                open,
                format!("call:{verb}: arguments are {}, not an object", kind(&other)),
            )),
            Err(err) => Err((
                open + err.offset,
                format!(
                    "call:{verb}: arguments are not JSON even after relaxing: {}",
                    err.relaxed
                ),
            )),
        }
    };
    GemmaCandidate::Call {
        span: span_start..end,
        parsed,
    }
}

/// Spans of the bare JSON envelopes and tool definitions in `text` outside `claimed` (what the
/// bare-JSON sweep would take or pass over). Patterns that run before that sweep ignore
/// candidates strictly inside them, so `call:` or `.call(` written inside a JSON string value
/// (a call's argument, a definition's description) is not a call.
fn envelope_spans(text: &str, claimed: &Spans, json: &Brackets) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if (c != b'{' && c != b'[') || claimed.contains(i) {
            i += 1;
            continue;
        }
        if let ScanEnd::Closed(end) = json.end(text, i)
            && let Ok(value) = serde_json::from_str::<Value>(&text[i..end])
            && (matches!(envelopes_in(&value, true), Some(Ok(_))) || is_definition_value(&value))
        {
            spans.push(i..end);
            i = end;
            continue;
        }
        i += 1;
    }
    spans
}

/// Whether `pos` is strictly inside one of `spans` (sorted and disjoint, as
/// [`envelope_spans`] returns them).
fn strictly_inside(spans: &[Range<usize>], pos: usize) -> bool {
    let k = spans.partition_point(|r| r.start < pos);
    k > 0 && spans.get(k - 1).is_some_and(|r| pos < r.end)
}

/// The union of claimed spans, as disjoint ranges by start (overlapping ones merged; touching
/// ones kept apart, so that "strictly overlaps" answers stay the same as over the list).
#[derive(Default)]
struct Spans {
    by_start: BTreeMap<usize, usize>,
    /// Empty spans `p..p`: they contain nothing but overlap spans strictly around `p`.
    empty: BTreeSet<usize>,
}

impl Spans {
    fn insert(&mut self, r: Range<usize>) {
        if r.start >= r.end {
            self.empty.insert(r.start);
            return;
        }
        let (mut start, mut end) = (r.start, r.end);
        // disjoint and sorted by start, so also sorted by end: walk back while they overlap
        let overlapping: Vec<usize> = self
            .by_start
            .range(..end)
            .rev()
            .take_while(|(_, e)| **e > start)
            .map(|(s, _)| *s)
            .collect();
        for s in overlapping {
            if let Some(e) = self.by_start.remove(&s) {
                start = start.min(s);
                end = end.max(e);
            }
        }
        self.by_start.insert(start, end);
    }

    fn contains(&self, pos: usize) -> bool {
        self.by_start
            .range(..=pos)
            .next_back()
            .is_some_and(|(_, e)| pos < *e)
    }

    /// Some span `r` has `r.start < span.end && span.start < r.end`.
    fn overlaps(&self, span: &Range<usize>) -> bool {
        self.by_start
            .range(..span.end)
            .next_back()
            .is_some_and(|(_, e)| *e > span.start)
            || (span.start < span.end
                && self.empty.range(span.start + 1..span.end).next().is_some())
    }
}

/// Parses `<function=...` at `start` (not past `limit`): returns the pattern, the end of the
/// block and the parse result, or `None` when this is not a function tag at all.
fn function_tag_at(text: &str, start: usize, limit: usize) -> Option<(CallPattern, usize, Parsed)> {
    const OPEN: &str = "<function=";
    const CLOSE: &str = "</function>";
    let bytes = &text.as_bytes()[..limit];
    let name_start = start + OPEN.len();
    let name_len = bytes
        .get(name_start..)?
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || b"_.-".contains(c))
        .count();
    if name_len == 0 {
        return None;
    }
    let name = &text[name_start..name_start + name_len];
    let after_name = name_start + name_len;
    match bytes.get(after_name) {
        Some(b'(') => {
            let ScanEnd::Closed(close) = balanced_end(&text[..limit], after_name, Quotes::Python)
            else {
                return Some((
                    CallPattern::FunctionParen,
                    limit,
                    Err((
                        after_name,
                        format!("<function={name}(: arguments never close"),
                    )),
                ));
            };
            let mut end = close;
            if bytes.get(end) == Some(&b'>') {
                end += 1;
            }
            let after = skip_ws(&text[..limit], end);
            if text[after..limit].starts_with(CLOSE) {
                end = after + CLOSE.len();
            }
            let args = &text[after_name + 1..close - 1];
            let trimmed = args.trim_start();
            let parsed = if trimmed.starts_with('{') {
                let offset = after_name + 1 + (args.len() - trimmed.len());
                parse_json_arguments(trimmed.trim_end(), offset)
                    .map(|a| vec![ToolCall::new(name, a)])
            } else {
                keyword_call(name, args, after_name + 1)
            };
            Some((CallPattern::FunctionParen, end, parsed))
        }
        Some(b'>') => {
            let body_start = after_name + 1;
            let (body_end, end) = match text[body_start..limit].find(CLOSE) {
                Some(rel) => (body_start + rel, body_start + rel + CLOSE.len()),
                None => {
                    // No closing tag: accept a JSON object right after the tag.
                    let json_start = skip_ws(text, body_start);
                    match json_value_end(&text[..limit], json_start) {
                        Some(end) => (end, end),
                        None => {
                            return Some((
                                CallPattern::FunctionTag,
                                limit,
                                Err((body_start, format!("<function={name}> without </function>"))),
                            ));
                        }
                    }
                }
            };
            let body_trim_start = skip_ws(text, body_start);
            let body_trim_end = trim_end_index(text, body_trim_start, body_end);
            let body = &text[body_trim_start..body_trim_end];
            let parsed = if body.is_empty() {
                Ok(vec![ToolCall::without_arguments(name)])
            } else if body.starts_with('{') {
                parse_json_arguments(body, body_trim_start).map(|a| vec![ToolCall::new(name, a)])
            } else if body.contains("<parameter=") {
                parse_xml_parameters(body, body_trim_start).map(|a| vec![ToolCall::new(name, a)])
            } else {
                Err((
                    body_trim_start,
                    format!("<function={name}>: body is neither JSON nor <parameter=...> tags"),
                ))
            };
            Some((CallPattern::FunctionTag, end, parsed))
        }
        _ => None,
    }
}

/// Qwen3-Coder style `<parameter=key>value</parameter>` children. Values that parse as JSON
/// (numbers, booleans, objects, arrays, quoted strings) become that JSON; others are strings.
fn parse_xml_parameters(body: &str, offset: usize) -> Result<Map<String, Value>, (usize, String)> {
    const OPEN: &str = "<parameter=";
    const CLOSE: &str = "</parameter>";
    let mut arguments = Map::new();
    let mut from = 0;
    while let Some(rel) = body[from..].find(OPEN) {
        let key_start = from + rel + OPEN.len();
        let Some(gt) = body[key_start..].find('>') else {
            return Err((offset + key_start, "<parameter= without `>`".to_owned()));
        };
        let key = body[key_start..key_start + gt].trim().to_owned();
        let value_start = key_start + gt + 1;
        let value_end = [
            body[value_start..].find(CLOSE),
            body[value_start..].find(OPEN),
        ]
        .into_iter()
        .flatten()
        .min()
        .map_or(body.len(), |r| value_start + r);
        let raw = &body[value_start..value_end];
        let raw = raw.strip_prefix('\n').unwrap_or(raw);
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        let value =
            serde_json::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
        arguments.insert(key, value);
        from = if body[value_end..].starts_with(CLOSE) {
            value_end + CLOSE.len()
        } else {
            value_end
        };
    }
    Ok(arguments)
}

/// Strict JSON arguments that must be an object.
fn parse_json_arguments(src: &str, offset: usize) -> Result<Map<String, Value>, (usize, String)> {
    match serde_json::from_str::<Value>(src) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err((
            offset,
            format!("arguments are {}, not an object", kind(&other)),
        )),
        Err(err) => Err((
            offset + offset_of(src, err.line(), err.column()),
            format!("arguments are not valid JSON: {err}"),
        )),
    }
}

/// One or more JSON values (objects or arrays of envelopes) in a tag body, strictly parsed.
fn parse_envelopes_strict(src: &str, offset: usize, require_arguments: bool) -> Parsed {
    let mut calls = Vec::new();
    let stream = serde_json::Deserializer::from_str(src).into_iter::<Value>();
    for item in stream {
        match item {
            Ok(value) => match envelopes_in(&value, require_arguments) {
                Some(Ok(found)) => calls.extend(found),
                Some(Err((_, message))) => return Err((offset, message)),
                None => {
                    return Err((
                        offset,
                        r#"JSON is not a tool call: expected {"name": ..., "arguments": {...}}"#
                            .to_owned(),
                    ));
                }
            },
            Err(err) => {
                return Err((
                    offset + offset_of(src, err.line(), err.column()),
                    format!("JSON does not parse: {err}"),
                ));
            }
        }
    }
    Ok(calls)
}

/// If `value` is an envelope or a non-empty array of envelopes, its calls (or the reason an
/// envelope-shaped value is wrong); `None` when it is not envelope-shaped at all.
fn envelopes_in(value: &Value, require_arguments: bool) -> Option<Parsed> {
    match value {
        Value::Object(_) => envelope(value, require_arguments).map(|r| r.map(|c| vec![c])),
        Value::Array(items) if !items.is_empty() => {
            let mut calls = Vec::new();
            for item in items {
                match envelope(item, require_arguments)? {
                    Ok(call) => calls.push(call),
                    Err(e) => return Some(Err(e)),
                }
            }
            Some(Ok(calls))
        }
        _ => None,
    }
}

/// `{"name", "arguments"|"parameters"}` or `{"function": {...}}` (OpenAI's echo form).
fn envelope(value: &Value, require_arguments: bool) -> Option<Result<ToolCall, (usize, String)>> {
    let object = value.as_object()?;
    if is_tool_definition(object) {
        return None;
    }
    if let Some(function) = object.get("function").and_then(Value::as_object)
        && !object.contains_key("name")
    {
        // OpenAI's call echo.
        if require_arguments && !function.contains_key("arguments") {
            return None;
        }
        return envelope(&Value::Object(function.clone()), require_arguments);
    }
    let name = object.get("name")?.as_str()?;
    let arguments = object.get("arguments").or_else(|| object.get("parameters"));
    let arguments = match arguments {
        None if require_arguments => return None,
        None => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        // OpenAI's wire form: the arguments as a JSON string.
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(map)) => map,
            _ => {
                return Some(Err((
                    0,
                    format!("tool `{name}`: arguments string is not a JSON object"),
                )));
            }
        },
        Some(other) => {
            return Some(Err((
                0,
                format!(
                    "tool `{name}`: arguments are {}, not an object",
                    kind(other)
                ),
            )));
        }
    };
    Some(Ok(ToolCall::new(name, arguments)))
}

/// Whether `object` is a tool *definition* rather than a call: it has no `arguments`, and
/// either wraps a definition in `function` (`{"type": "function", "function": {..., "parameters"}}`,
/// with or without a description) or names a tool with a `description`, an `input_schema`
/// (Anthropic) or `parameters` that read as an object schema. A Llama 3 call's `parameters`
/// hold argument values, so `{"name", "parameters": {"x": 3}}` stays a call.
fn is_tool_definition(object: &Map<String, Value>) -> bool {
    if object.contains_key("arguments") {
        return false;
    }
    if let Some(function) = object.get("function").and_then(Value::as_object)
        && !object.contains_key("name")
    {
        return !function.contains_key("arguments")
            && (function.contains_key("parameters") || is_tool_definition(function));
    }
    object.get("name").is_some_and(Value::is_string)
        && (object.contains_key("description")
            || object.contains_key("input_schema")
            || object.get("parameters").is_some_and(is_object_schema))
}

/// Whether a bare JSON value is one tool definition or an array of them (a pasted tool list),
/// which extraction passes over whole: nothing inside a definition is a call.
fn is_definition_value(value: &Value) -> bool {
    match value {
        Value::Object(object) => is_tool_definition(object),
        Value::Array(items) => {
            !items.is_empty()
                && items
                    .iter()
                    .all(|item| item.as_object().is_some_and(is_tool_definition))
        }
        _ => false,
    }
}

/// Whether `value` reads as a JSON Schema for an object, as tool definitions' `parameters` are:
/// `"type": "object"` with `properties` mapping each name to a schema, or `"type": "object"`
/// with nothing but object-schema keywords beside it (`{"type": "object"}`,
/// `{"type": "object", "required": []}`); an argument value that merely has a `type` key
/// among others (`{"x": 3, "type": "object"}`) is not one.
fn is_object_schema(value: &Value) -> bool {
    let Some(schema) = value.as_object() else {
        return false;
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return false;
    }
    let properties_are_schemas = |v: &Value| {
        v.as_object()
            .is_some_and(|props| props.values().all(Value::is_object))
    };
    schema.get("properties").is_some_and(properties_are_schemas)
        || schema.iter().all(|(key, v)| match key.as_str() {
            "type" => true,
            "properties" => properties_are_schemas(v),
            "required" => v
                .as_array()
                .is_some_and(|names| names.iter().all(Value::is_string)),
            "additionalProperties" => v.is_boolean() || v.is_object(),
            "$schema" => v.is_string(),
            _ => false,
        })
}

/// A pythonic block (`<tool_code>`/`<tool_call>` body): `name(k=v)`, `[a(), b()]`, possibly
/// wrapped in `print(...)`, possibly with a dotted name.
fn parse_python_block(inner: &str, offset: usize) -> Parsed {
    if inner.starts_with('[')
        && inner.ends_with(']')
        && let Some(calls) = python_call_list(inner, 1, inner.len() - 1)
    {
        return Ok(calls.into_iter().map(|(_, c)| c).collect());
    }
    let mut src = inner;
    let mut base = offset;
    if let Some(rest) = src.strip_prefix("print(")
        && let Some(unwrapped) = rest.trim_end().strip_suffix(')')
    {
        base += "print(".len();
        src = unwrapped.trim_end();
    }
    let len = dotted_identifier_len(src);
    if len == 0 || src.as_bytes().get(len) != Some(&b'(') || !src.ends_with(')') {
        return Err((
            base,
            "neither JSON nor a call `name(arg=value, ...)`".to_owned(),
        ));
    }
    if !matches!(balanced_end(src, len, Quotes::Python), ScanEnd::Closed(e) if e == src.len()) {
        return Err((base + len, "unbalanced parentheses".to_owned()));
    }
    let full_name = &src[..len];
    let name = full_name.rsplit('.').next().unwrap_or(full_name);
    keyword_call(name, &src[len + 1..src.len() - 1], base + len + 1)
}

/// Comma-separated pythonic calls between `start` and `end` (inside brackets); `None` unless
/// every element is a well-formed keyword call.
fn python_call_list(text: &str, start: usize, end: usize) -> Option<Vec<(Range<usize>, ToolCall)>> {
    let bytes = text.as_bytes();
    let mut calls = Vec::new();
    let mut i = skip_ws(&text[..end], start);
    while i < end {
        let len = dotted_identifier_len(&text[i..end]);
        if len == 0 || bytes.get(i + len) != Some(&b'(') {
            return None;
        }
        let ScanEnd::Closed(close) = balanced_end(&text[..end], i + len, Quotes::Python) else {
            return None;
        };
        let full_name = &text[i..i + len];
        let name = full_name.rsplit('.').next().unwrap_or(full_name);
        let call = keyword_call(name, &text[i + len + 1..close - 1], i + len + 1).ok()?;
        calls.extend(call.into_iter().map(|c| (i..close, c)));
        i = skip_ws(&text[..end], close);
        if i < end {
            if bytes[i] != b',' {
                return None;
            }
            i = skip_ws(&text[..end], i + 1);
        }
    }
    if calls.is_empty() { None } else { Some(calls) }
}

/// A call whose arguments must all be keywords.
fn keyword_call(name: &str, args: &str, offset: usize) -> Parsed {
    let parsed = pylit::parse_call_args(args)
        .map_err(|e| (offset + e.offset, format!("{name}(...): {}", e.message)))?;
    let mut arguments = Map::new();
    for arg in parsed {
        match arg {
            PyArg::Keyword(key, value) => {
                arguments.insert(key, value);
            }
            PyArg::Positional(at, _) => {
                return Err((
                    offset + at,
                    format!(
                        "{name}(...): positional argument; tool calls need `name=value` arguments"
                    ),
                ));
            }
        }
    }
    Ok(vec![ToolCall::new(name, arguments)])
}

/// Removes `spans` from `text` and trims; at each cut, whitespace that would double up is dropped.
fn prose_outside(text: &str, spans: &mut [Range<usize>]) -> String {
    spans.sort_by_key(|r| r.start);
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for span in spans.iter() {
        if span.start < pos {
            pos = pos.max(span.end);
            continue;
        }
        push_piece(&mut out, &text[pos..span.start]);
        pos = span.end;
    }
    push_piece(&mut out, &text[pos..]);
    if !spans.is_empty() {
        out = drop_empty_fences(&out);
    }
    out.trim().to_owned()
}

/// Removes Markdown code fences left empty once their calls were cut out.
fn drop_empty_fences(prose: &str) -> String {
    let mut out = String::with_capacity(prose.len());
    let mut rest = prose;
    while let Some(open) = rest.find("```") {
        let after_open = &rest[open + 3..];
        let info_len = after_open
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
            .count();
        let body = &after_open[info_len..];
        if let Some(after_close) = body.trim_start().strip_prefix("```") {
            out.push_str(rest[..open].trim_end_matches([' ', '\t']));
            rest = after_close;
            if out.ends_with('\n') || out.is_empty() {
                rest = rest.strip_prefix('\n').unwrap_or(rest);
            }
            continue;
        }
        // Not empty: keep this fence and look for the next one after its closing fence.
        let keep_to = open + 3 + after_open.find("```").map_or(after_open.len(), |n| n + 3);
        out.push_str(&rest[..keep_to]);
        rest = &rest[keep_to..];
    }
    out.push_str(rest);
    out
}

fn push_piece(out: &mut String, piece: &str) {
    if out.ends_with(char::is_whitespace) || out.is_empty() {
        let trimmed = piece.trim_start();
        // Keep a line break if the removed call sat on its own line.
        if out.ends_with(' ')
            && piece.len() > trimmed.len()
            && piece[..piece.len() - trimmed.len()].contains('\n')
        {
            while out.ends_with(' ') {
                out.pop();
            }
            out.push('\n');
        }
        out.push_str(trimmed);
    } else {
        out.push_str(piece);
    }
}

fn skip_ws(text: &str, mut i: usize) -> usize {
    let bytes = text.as_bytes();
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn trim_end_index(text: &str, start: usize, mut end: usize) -> usize {
    let bytes = text.as_bytes();
    while end > start && bytes[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    end
}

/// End of the JSON object or array starting at `start`, if it closes.
fn json_value_end(text: &str, start: usize) -> Option<usize> {
    match text.as_bytes().get(start) {
        Some(b'{' | b'[') => match balanced_end(text, start, Quotes::Json) {
            ScanEnd::Closed(end) => Some(end),
            _ => None,
        },
        _ => None,
    }
}

/// Whether the object text starts with a `"name"` key (worth a diagnostic when it is broken).
fn looks_like_envelope(object: &str) -> bool {
    object
        .strip_prefix('{')
        .map(str::trim_start)
        .is_some_and(|rest| rest.starts_with("\"name\"") || rest.starts_with("\"function\""))
}

/// Strips a Markdown code fence (```` ```python ... ``` ````) around a block body.
fn strip_code_fence(text: &str, start: usize, end: usize) -> (usize, usize) {
    let s = skip_ws(text, start);
    let e = trim_end_index(text, s, end);
    let inner = &text[s..e];
    if inner.starts_with("```") && inner.len() >= 6 && inner.ends_with("```") {
        let first_line_end = inner.find('\n').map_or(3, |n| n + 1);
        let body_start = s + first_line_end.min(inner.len() - 3);
        return (body_start, e - 3);
    }
    (s, e)
}

fn identifier_start_before(bytes: &[u8], end: usize) -> usize {
    let mut start = end;
    while start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
        start -= 1;
    }
    if start < end && bytes[start].is_ascii_digit() {
        // Identifiers do not start with a digit.
        while start < end && bytes[start].is_ascii_digit() {
            start += 1;
        }
    }
    start
}

/// Length of `a.b.c` (Python identifiers joined by dots) at the start of `s`.
fn dotted_identifier_len(s: &str) -> usize {
    let mut len = pylit::identifier_len(s);
    if len == 0 {
        return 0;
    }
    while s.as_bytes().get(len) == Some(&b'.') {
        let next = pylit::identifier_len(&s[len + 1..]);
        if next == 0 {
            break;
        }
        len += 1 + next;
    }
    len
}

/// Special-token openers removed from the prose together with the call that follows them.
const OPENERS: [&str; 3] = ["<|python_tag|>", "[TOOL_CALLS]", "<|tool_call>"];
/// Special-token closers removed from the prose together with the call that precedes them
/// (Gemma's `<tool_call|>`, Llama 3.1's end of message and end of turn).
const CLOSERS: [&str; 3] = ["<tool_call|>", "<|eom_id|>", "<|eot_id|>"];

/// Extends a removal over adjacent wrapper tokens (`<|python_tag|>` ... `<|eom_id|>`,
/// `[TOOL_CALLS]`, Gemma's `<|tool_call>` ... `<tool_call|>`), whitespace between them allowed.
fn with_wrappers(text: &str, span: Range<usize>) -> Range<usize> {
    let mut start = span.start;
    let before = text[..start].trim_end();
    if let Some(opener) = OPENERS.iter().find(|o| before.ends_with(*o)) {
        start = before.len() - opener.len();
    }
    let mut end = span.end;
    let after_ws = skip_ws(text, end);
    if let Some(closer) = CLOSERS.iter().find(|c| text[after_ws..].starts_with(*c)) {
        end = after_ws + closer.len();
    }
    start..end
}

/// Extends a removal over an enclosing `print(` ... `)`.
fn with_print_wrapper(text: &str, start: usize, end: usize) -> Range<usize> {
    if text[..start].ends_with("print(") && text[end..].starts_with(')') {
        (start - "print(".len())..(end + 1)
    } else {
        start..end
    }
}

/// Whether the call at `start..end` is alone on its line (apart from list punctuation).
fn is_standalone(text: &str, start: usize, end: usize) -> bool {
    let line_start = text[..start].rfind('\n').map_or(0, |n| n + 1);
    let line_end = text[end..].find('\n').map_or(text.len(), |n| end + n);
    let punctuation = |s: &str| s.chars().all(|c| c.is_whitespace() || "[],".contains(c));
    let before = &text[line_start..start];
    let before = before.strip_suffix("print(").unwrap_or(before);
    let after = &text[end..line_end];
    let after = after
        .strip_prefix(')')
        .filter(|_| text[..start].ends_with("print("))
        .unwrap_or(after);
    punctuation(before) && punctuation(after)
}

fn is_python_keyword(name: &str) -> bool {
    matches!(
        name,
        "if" | "elif"
            | "while"
            | "for"
            | "return"
            | "print"
            | "not"
            | "and"
            | "or"
            | "in"
            | "assert"
            | "del"
            | "lambda"
            | "yield"
            | "with"
            | "except"
    )
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod spans_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The span set answers as the plain list of spans did.
        #[test]
        fn spans_agree_with_a_list(
            spans in proptest::collection::vec((0usize..40, 0usize..8), 0..12),
            queries in proptest::collection::vec((0usize..50, 0usize..8), 0..20),
        ) {
            let mut set = Spans::default();
            let mut list: Vec<Range<usize>> = Vec::new();
            for (s, l) in spans {
                set.insert(s..s + l);
                list.push(s..s + l);
            }
            for (s, l) in queries {
                let q = s..s + l;
                prop_assert_eq!(set.contains(s), list.iter().any(|r| r.contains(&s)));
                prop_assert_eq!(
                    set.overlaps(&q),
                    list.iter().any(|r| r.start < q.end && q.start < r.end),
                    "{:?} {:?}", list, q
                );
            }
        }
    }
}
