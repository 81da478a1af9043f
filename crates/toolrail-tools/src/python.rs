//! Tools from Python function definitions: the source is *read*, never run (no Python needed).
//!
//! Every top-level `def` (or `async def`) becomes a tool: its name, its docstring's description,
//! and an object schema of its parameters made from their type hints. Decorators are skipped;
//! `self`/`cls` are not special (a method is not a tool). Other top-level statements (imports,
//! assignments, classes) are skipped with a note naming their line.
//!
//! | type hint | JSON Schema |
//! | --- | --- |
//! | `str`, `int`, `float`, `bool`, `None` | `string`, `integer`, `number`, `boolean`, `null` |
//! | `Optional[X]`, `X \| None`, `Union[X, Y]`, `X \| Y` | `anyOf` of the members (`null` for `None`) |
//! | `Literal["a", 1, True]` | `enum` of the values |
//! | `list[X]`, `List[X]`, `Sequence[X]`, bare `list` | `array` of `X` (of anything) |
//! | `dict[str, X]`, `Dict[str, X]`, `Mapping[str, X]`, bare `dict` | `object` whose values are `X` |
//! | `tuple[X, Y]`, `Tuple[X, Y]` | `array` with `prefixItems` `X`, `Y` (no more items) |
//! | `tuple[X, ...]` | `array` of `X` |
//!
//! `typing.`-qualified names work too. Any other annotation (a class, `Any`, a string forward
//! reference, `dict` with non-`str` keys) is an error naming the function, the parameter and
//! the line:column. A parameter without a type hint is an error too; `*args` and `**kwargs`
//! cannot become keyword arguments and are errors. A default makes the parameter optional; a
//! literal default (strings, numbers, `True`/`False`/`None`, lists, tuples and dicts of those) is
//! kept as the schema's `default`, any other default is noted and not kept. `/` and `*` markers
//! are accepted (calls name every argument).
//!
//! Docstrings in Google (`Args:`), NumPy (`Parameters` over a `----------` line) and reST
//! (`:param name:`, `:param type name:`) styles give per-argument descriptions; the text before the
//! first section is the tool's description. A `Grammar:` section (Google style, or NumPy style
//! over a dashed line) holds GBNF that replaces the tool's generated argument rules (see
//! [`crate::custom_grammar`]); its errors name the function and the Python line:column.
//!
//! Warnings and notes of a Python tool set carry `line:column` where JSON tool sets carry a JSON
//! pointer ([`crate::shape::ToolSetWarning::pointer`]).

use serde_json::{Map, Value, json};

use crate::custom_grammar::CustomGrammar;
use crate::shape::{ToolSetShape, ToolSetWarning, WarningKind};
use crate::toolset::{Tool, ToolSet};

pub use crate::toolset::PythonError;

/// True when `text` looks like Python function definitions rather than JSON: it does not start
/// with `{` or `[` and some line starts with `def ` or `async def ` (after indentation or
/// decorators).
pub fn looks_like_python(text: &str) -> bool {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return false;
    }
    text.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("def ") || l.starts_with("async def ")
    })
}

/// The most functions one source may define (a bound on work and memory).
pub const MAX_FUNCTIONS: usize = 1000;
/// The deepest nesting of brackets in an annotation or default that is read.
const MAX_NESTING: usize = 64;

/// Reads every top-level function of `source` as a tool (see the module docs).
pub fn tools_from_python(source: &str) -> Result<ToolSet, PythonError> {
    let tokens = tokenize(source)?;
    let lines = logical_lines(&tokens);
    let mut tools = Vec::new();
    let mut warnings = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let first = &tokens[line.start];
        // the statement's block: following lines indented deeper
        let mut end = i + 1;
        while end < lines.len() && tokens[lines[end].start].column > first.column {
            end += 1;
        }
        let is_def = first.is_name("def")
            || (first.is_name("async")
                && tokens.get(line.start + 1).is_some_and(|t| t.is_name("def")));
        if first.is_op("@") {
            // a decorator: skipped, the `def` follows
        } else if is_def && first.column == 1 {
            if tools.len() >= MAX_FUNCTIONS {
                return Err(at(
                    first,
                    None,
                    None,
                    format!("more than {MAX_FUNCTIONS} functions"),
                ));
            }
            let def_start = if first.is_name("async") {
                line.start + 1
            } else {
                line.start
            };
            let function = read_function(source, &tokens, def_start, line.end, &lines[i + 1..end])?;
            if tools.iter().any(|t: &Tool| t.name == function.tool.name) {
                return Err(at(
                    first,
                    Some(&function.tool.name),
                    None,
                    "defined twice (a tool set needs unique names)".into(),
                ));
            }
            warnings.extend(function.warnings);
            tools.push(function.tool);
        } else if first.column == 1 && !(line.end - line.start == 1 && first.kind == Kind::Str) {
            let what = match first.kind {
                Kind::Name => format!("`{}` statement", first.text),
                _ => "statement".to_owned(),
            };
            warnings.push(note(
                WarningKind::IgnoredKey,
                None,
                first,
                format!("{what} skipped: only `def` statements become tools"),
            ));
        }
        i = end;
    }
    if tools.is_empty() {
        return Err(PythonError {
            line: 1,
            column: 1,
            function: None,
            parameter: None,
            message: "no top-level `def` statement: no tool to read".into(),
        });
    }
    // the module docstring, when the source starts with one, describes the set
    let description = lines
        .first()
        .filter(|l| l.end - l.start == 1 && tokens[l.start].kind == Kind::Str)
        .map(|l| {
            paragraphs(
                &tokens[l.start]
                    .text
                    .lines()
                    .map(|l| l.trim().to_owned())
                    .collect::<Vec<_>>(),
            )
        })
        .filter(|d| !d.is_empty());
    ToolSet::from_parts(description, tools, ToolSetShape::PythonFunctions, warnings).map_err(|e| {
        PythonError {
            line: 1,
            column: 1,
            function: None,
            parameter: None,
            message: e.to_string(),
        }
    })
}

fn at(
    token: &Token,
    function: Option<&str>,
    parameter: Option<&str>,
    message: String,
) -> PythonError {
    PythonError {
        line: token.line,
        column: token.column,
        function: function.map(str::to_owned),
        parameter: parameter.map(str::to_owned),
        message,
    }
}

fn note(kind: WarningKind, tool: Option<&str>, token: &Token, message: String) -> ToolSetWarning {
    ToolSetWarning {
        kind,
        tool: tool.map(str::to_owned),
        pointer: format!("{}:{}", token.line, token.column),
        key: None,
        message,
    }
}

// ---------------------------------------------------------------------------------------------
// Tokens

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Name,
    Number,
    /// A string literal; `text` is its value.
    Str,
    Op,
    /// The end of a logical line.
    Newline,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    text: String,
    line: u32,
    column: u32,
    /// Byte offset of the token (strings: of their contents, after the quotes).
    body: usize,
}

impl Token {
    fn is_name(&self, s: &str) -> bool {
        self.kind == Kind::Name && self.text == s
    }
    fn is_op(&self, s: &str) -> bool {
        self.kind == Kind::Op && self.text == s
    }
}

/// One logical line: tokens `start..end` (the `Newline` excluded).
struct Line {
    start: usize,
    end: usize,
}

fn logical_lines(tokens: &[Token]) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (i, t) in tokens.iter().enumerate() {
        if t.kind == Kind::Newline {
            if i > start {
                lines.push(Line { start, end: i });
            }
            start = i + 1;
        }
    }
    if start < tokens.len() {
        lines.push(Line {
            start,
            end: tokens.len(),
        });
    }
    lines
}

/// Python's tokens, enough for signatures, literals and docstrings: names, numbers, strings
/// (with their prefixes and escapes), operators; comments dropped; newlines inside brackets and
/// after `\` joined.
fn tokenize(source: &str) -> Result<Vec<Token>, PythonError> {
    let chars: Vec<(usize, char)> = source.char_indices().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut line = 1u32;
    let mut line_start = 0usize; // char index of the line's start
    let mut depth = 0usize;
    let err = |line: u32, column: u32, message: &str| PythonError {
        line,
        column,
        function: None,
        parameter: None,
        message: message.to_owned(),
    };
    while i < chars.len() {
        let (offset, c) = chars[i];
        let column = (i - line_start) as u32 + 1;
        match c {
            '\n' => {
                if depth == 0
                    && tokens
                        .last()
                        .is_some_and(|t: &Token| t.kind != Kind::Newline)
                {
                    tokens.push(Token {
                        kind: Kind::Newline,
                        text: String::new(),
                        line,
                        column,
                        body: offset,
                    });
                }
                i += 1;
                line += 1;
                line_start = i;
            }
            '#' => {
                while i < chars.len() && chars[i].1 != '\n' {
                    i += 1;
                }
            }
            '\\' if chars.get(i + 1).is_some_and(|&(_, n)| n == '\n') => {
                i += 2;
                line += 1;
                line_start = i;
            }
            c if c.is_whitespace() => i += 1,
            c if c.is_alphabetic() || c == '_' => {
                let mut j = i;
                while j < chars.len() && (chars[j].1.is_alphanumeric() || chars[j].1 == '_') {
                    j += 1;
                }
                let word: String = chars[i..j].iter().map(|&(_, c)| c).collect();
                let quote = chars
                    .get(j)
                    .map(|&(_, c)| c)
                    .filter(|&q| q == '"' || q == '\'');
                let is_prefix = word.len() <= 2
                    && word
                        .chars()
                        .all(|c| matches!(c.to_ascii_lowercase(), 'r' | 'b' | 'u' | 'f'));
                if let (Some(_), true) = (quote, is_prefix) {
                    let raw = word.to_ascii_lowercase().contains('r');
                    let (token, next, lines, last_start) =
                        read_string(source, &chars, j, raw, line, column)
                            .map_err(|(l, c, m)| err(l, c, m))?;
                    tokens.push(token);
                    i = next;
                    if lines > 0 {
                        line += lines;
                        line_start = last_start;
                    }
                } else {
                    tokens.push(Token {
                        kind: Kind::Name,
                        text: word,
                        line,
                        column,
                        body: offset,
                    });
                    i = j;
                }
            }
            '"' | '\'' => {
                let (token, next, lines, last_start) =
                    read_string(source, &chars, i, false, line, column)
                        .map_err(|(l, c, m)| err(l, c, m))?;
                tokens.push(token);
                i = next;
                if lines > 0 {
                    line += lines;
                    line_start = last_start;
                }
            }
            c if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(|&(_, n)| n.is_ascii_digit())) =>
            {
                let mut j = i;
                while j < chars.len() {
                    let d = chars[j].1;
                    let prev = if j > i { chars[j - 1].1 } else { ' ' };
                    if d.is_ascii_alphanumeric()
                        || d == '_'
                        || d == '.'
                        || ((d == '-' || d == '+') && matches!(prev, 'e' | 'E'))
                    {
                        j += 1;
                    } else {
                        break;
                    }
                }
                let text: String = chars[i..j].iter().map(|&(_, c)| c).collect();
                tokens.push(Token {
                    kind: Kind::Number,
                    text,
                    line,
                    column,
                    body: offset,
                });
                i = j;
            }
            _ => {
                let next = chars.get(i + 1).map(|&(_, c)| c);
                let next2 = chars.get(i + 2).map(|&(_, c)| c);
                let len = match (c, next, next2) {
                    ('.', Some('.'), Some('.')) => 3,
                    ('-', Some('>'), _) | ('*', Some('*'), _) => 2,
                    _ => 1,
                };
                match c {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                let text: String = chars[i..i + len].iter().map(|&(_, c)| c).collect();
                tokens.push(Token {
                    kind: Kind::Op,
                    text,
                    line,
                    column,
                    body: offset,
                });
                i += len;
            }
        }
    }
    Ok(tokens)
}

type StringRead = (Token, usize, u32, usize);

/// Reads a string literal whose quote is at char index `q`; returns the token, the char index
/// after it, the number of newlines inside and the char index where the last line inside starts.
fn read_string(
    source: &str,
    chars: &[(usize, char)],
    q: usize,
    raw: bool,
    line: u32,
    column: u32,
) -> Result<StringRead, (u32, u32, &'static str)> {
    let quote = chars[q].1;
    let triple = chars.get(q + 1).is_some_and(|&(_, c)| c == quote)
        && chars.get(q + 2).is_some_and(|&(_, c)| c == quote);
    let open = if triple { 3 } else { 1 };
    let mut i = q + open;
    let body = chars.get(i).map_or(source.len(), |&(o, _)| o);
    let mut value = String::new();
    let mut lines = 0u32;
    let mut last_start = 0usize;
    loop {
        let Some(&(_, c)) = chars.get(i) else {
            return Err((line, column, "unterminated string literal"));
        };
        if c == quote
            && (!triple
                || (chars.get(i + 1).is_some_and(|&(_, c)| c == quote)
                    && chars.get(i + 2).is_some_and(|&(_, c)| c == quote)))
        {
            i += open;
            break;
        }
        if c == '\n' {
            if !triple {
                return Err((line, column, "unterminated string literal"));
            }
            lines += 1;
            last_start = i + 1;
            value.push('\n');
            i += 1;
            continue;
        }
        if c == '\\' {
            let Some(&(_, n)) = chars.get(i + 1) else {
                return Err((line, column, "unterminated string literal"));
            };
            if n == '\n' {
                lines += 1;
                last_start = i + 2;
                if raw {
                    value.push_str("\\\n");
                }
                i += 2;
                continue;
            }
            if raw {
                value.push('\\');
                value.push(n);
            } else {
                match n {
                    'n' => value.push('\n'),
                    't' => value.push('\t'),
                    'r' => value.push('\r'),
                    '0' => value.push('\0'),
                    '\\' | '\'' | '"' => value.push(n),
                    other => {
                        value.push('\\');
                        value.push(other);
                    }
                }
            }
            i += 2;
            continue;
        }
        value.push(c);
        i += 1;
    }
    Ok((
        Token {
            kind: Kind::Str,
            text: value,
            line,
            column,
            body,
        },
        i,
        lines,
        last_start,
    ))
}

// ---------------------------------------------------------------------------------------------
// Functions

struct Function {
    tool: Tool,
    warnings: Vec<ToolSetWarning>,
}

/// One parameter as written.
struct Param<'t> {
    name: &'t Token,
    annotation: &'t [Token],
    default: Option<&'t [Token]>,
}

/// Reads `def name(params) -> ret:` (tokens `start..end` of its logical line) and its body lines.
fn read_function(
    source: &str,
    tokens: &[Token],
    start: usize,
    end: usize,
    body: &[Line],
) -> Result<Function, PythonError> {
    let def = &tokens[start];
    let Some(name_token) = tokens
        .get(start + 1)
        .filter(|t| t.kind == Kind::Name && start + 1 < end)
    else {
        return Err(at(def, None, None, "`def` without a function name".into()));
    };
    let fname = name_token.text.as_str();
    let here = |t: &Token, m: &str| at(t, Some(fname), None, m.to_owned());
    let open = start + 2;
    if !tokens.get(open).is_some_and(|t| t.is_op("(")) || open >= end {
        return Err(here(name_token, "expected `(` after the function name"));
    }
    // the matching `)`
    let mut depth = 0usize;
    let mut close = None;
    for (k, t) in tokens.iter().enumerate().take(end).skip(open) {
        if t.kind == Kind::Op && matches!(t.text.as_str(), "(" | "[" | "{") {
            depth += 1;
        } else if t.kind == Kind::Op && matches!(t.text.as_str(), ")" | "]" | "}") {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                close = Some(k);
                break;
            }
        }
    }
    let Some(close) = close else {
        return Err(here(&tokens[open], "unclosed `(` of the parameter list"));
    };
    // `-> annotation` and the `:`, with a body possibly on the same line
    let colon = (close + 1..end)
        .find(|&k| tokens[k].is_op(":") && bracket_depth(&tokens[close + 1..k]) == 0);
    let Some(colon) = colon else {
        return Err(here(
            &tokens[close],
            "expected `:` after the parameter list",
        ));
    };
    let docstring_token = if colon + 1 < end {
        tokens.get(colon + 1).filter(|t| t.kind == Kind::Str)
    } else {
        body.first()
            .filter(|l| l.end - l.start == 1)
            .map(|l| &tokens[l.start])
            .filter(|t| t.kind == Kind::Str)
    };
    let doc = match docstring_token {
        Some(t) => Docstring::read(source, t),
        None => Docstring::default(),
    };
    let mut warnings = Vec::new();
    let mut properties = Map::new();
    let mut required = Vec::new();
    for param in split_params(&tokens[open + 1..close], fname)? {
        let pname = param.name.text.as_str();
        let perr = |t: &Token, m: String| at(t, Some(fname), Some(pname), m);
        if param.annotation.is_empty() {
            return Err(perr(
                param.name,
                "no type hint: the argument's type cannot be known".into(),
            ));
        }
        let mut schema = annotation_schema(param.annotation, 0).map_err(|(t, m)| perr(t, m))?;
        if let Some(desc) = doc
            .args
            .iter()
            .find(|a| a.name == pname)
            .map(|a| a.description.clone())
            && !desc.is_empty()
        {
            schema.insert("description".into(), Value::String(desc));
        }
        match param.default {
            None => required.push(Value::String(pname.to_owned())),
            Some(default) => match literal(default, 0) {
                Some(value) => {
                    schema.insert("default".into(), value);
                }
                None => warnings.push(note(
                    WarningKind::IgnoredKey,
                    Some(fname),
                    &default[0],
                    format!("the default of `{pname}` is not a literal: the argument is optional, its default is not recorded"),
                )),
            },
        }
        properties.insert(pname.to_owned(), Value::Object(schema));
    }
    for arg in &doc.args {
        if !properties.contains_key(&arg.name) {
            let token = docstring_token.unwrap_or(name_token);
            warnings.push(note(
                WarningKind::UnknownKey,
                Some(fname),
                token,
                format!(
                    "the docstring describes `{}`, which is not a parameter",
                    arg.name
                ),
            ));
        }
    }
    for (section, line) in &doc.skipped_sections {
        let token = docstring_token.unwrap_or(name_token);
        warnings.push(ToolSetWarning {
            kind: WarningKind::IgnoredKey,
            tool: Some(fname.to_owned()),
            pointer: format!("{}:1", token.line + line),
            key: Some(section.clone()),
            message: format!(
                "docstring section `{section}` does not change the arguments: not read"
            ),
        });
    }
    let custom_grammar = match &doc.grammar {
        None => None,
        Some(section) => {
            let g = CustomGrammar::parse(&section.text).map_err(|e| {
                let (line, column) = section.place(e.line, e.column);
                PythonError {
                    line,
                    column,
                    function: Some(fname.to_owned()),
                    parameter: None,
                    message: format!("in its `Grammar:` section: {}", e.message),
                }
            })?;
            for w in g.warnings() {
                let (line, column) = section.place(w.line, w.column);
                warnings.push(ToolSetWarning {
                    kind: WarningKind::UnknownKey,
                    tool: Some(fname.to_owned()),
                    pointer: format!("{line}:{column}"),
                    key: None,
                    message: format!("in its `Grammar:` section: {}", w.message),
                });
            }
            Some(g)
        }
    };
    let mut parameters = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        parameters["required"] = Value::Array(required);
    }
    Ok(Function {
        tool: Tool {
            name: fname.to_owned(),
            description: doc.description,
            parameters,
            custom_grammar,
            validation: None,
            // a Python source has no JSON of its own: a client sends this reading
            sent: crate::sent::SentParameters::Reading,
        },
        warnings,
    })
}

fn bracket_depth(tokens: &[Token]) -> i64 {
    tokens.iter().fold(0, |d, t| match t.text.as_str() {
        "(" | "[" | "{" if t.kind == Kind::Op => d + 1,
        ")" | "]" | "}" if t.kind == Kind::Op => d - 1,
        _ => d,
    })
}

/// Splits the tokens between the parentheses into parameters.
fn split_params<'t>(tokens: &'t [Token], fname: &str) -> Result<Vec<Param<'t>>, PythonError> {
    let mut params = Vec::new();
    let mut depth = 0i64;
    let mut start = 0;
    let mut pieces = Vec::new();
    for (k, t) in tokens.iter().enumerate() {
        if t.kind == Kind::Op {
            match t.text.as_str() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                "," if depth == 0 => {
                    pieces.push(&tokens[start..k]);
                    start = k + 1;
                }
                _ => {}
            }
        }
    }
    pieces.push(&tokens[start..]);
    for piece in pieces {
        let Some(first) = piece.first() else { continue };
        if first.is_op("/") || (first.is_op("*") && piece.len() == 1) {
            continue;
        }
        if first.is_op("*") || first.is_op("**") {
            let name = piece.get(1).map_or("?", |t| t.text.as_str());
            return Err(at(
                first,
                Some(fname),
                Some(name),
                format!(
                    "`{}{name}` takes any number of arguments: it cannot become a tool's named arguments",
                    first.text
                ),
            ));
        }
        if first.kind != Kind::Name {
            return Err(at(
                first,
                Some(fname),
                None,
                format!("expected a parameter name, found `{}`", first.text),
            ));
        }
        let eq = piece.iter().position(|t| t.is_op("="));
        let before_default = &piece[..eq.unwrap_or(piece.len())];
        let annotation = match before_default.get(1) {
            Some(t) if t.is_op(":") => &before_default[2..],
            Some(t) => {
                return Err(at(
                    t,
                    Some(fname),
                    Some(&first.text),
                    format!("unexpected `{}` after the parameter name", t.text),
                ));
            }
            None => &before_default[1..],
        };
        let default = eq.map(|e| &piece[e + 1..]);
        if default.is_some_and(<[Token]>::is_empty) {
            return Err(at(
                first,
                Some(fname),
                Some(&first.text),
                "`=` without a default value".into(),
            ));
        }
        params.push(Param {
            name: first,
            annotation,
            default,
        });
    }
    Ok(params)
}

// ---------------------------------------------------------------------------------------------
// Annotations

type AnnotationError<'t> = (&'t Token, String);

/// The schema of an annotation (see the table in the module docs).
fn annotation_schema(
    tokens: &[Token],
    depth: usize,
) -> Result<Map<String, Value>, AnnotationError<'_>> {
    let first = &tokens[0];
    if depth > MAX_NESTING {
        return Err((
            first,
            format!("type hint nested deeper than {MAX_NESTING} levels"),
        ));
    }
    // `A | B | ...` at this level
    let members = split_top(tokens, "|");
    if members.len() > 1 {
        let mut any = Vec::new();
        for m in members {
            if m.is_empty() {
                return Err((first, "`|` without a type on one side".into()));
            }
            any.push(Value::Object(annotation_schema(m, depth + 1)?));
        }
        return Ok(union(any));
    }
    // `name(.name)*` then optional `[args]`
    let mut k = 1;
    let mut name = first.text.clone();
    if first.kind != Kind::Name {
        let what = if first.kind == Kind::Str {
            "a string (forward reference)"
        } else {
            first.text.as_str()
        };
        return Err((
            first,
            format!(
                "unsupported type hint {what}: use str, int, float, bool, None, Optional, Union, Literal, list, dict or tuple"
            ),
        ));
    }
    while tokens.get(k).is_some_and(|t| t.is_op("."))
        && tokens.get(k + 1).is_some_and(|t| t.kind == Kind::Name)
    {
        name = tokens[k + 1].text.clone();
        k += 2;
    }
    if k > 1 {
        let qualifier = &first.text;
        if !matches!(
            qualifier.as_str(),
            "typing" | "t" | "builtins" | "collections" | "abc" | "typing_extensions"
        ) {
            return Err((
                first,
                format!(
                    "unsupported type hint `{}`: only typing's and the built-in types are known",
                    annotation_text(tokens)
                ),
            ));
        }
    }
    let args: Option<&[Token]> = match tokens.get(k) {
        None => None,
        Some(t) if t.is_op("[") => {
            let last = tokens.len() - 1;
            if !tokens[last].is_op("]") || bracket_depth(&tokens[k..]) != 0 {
                return Err((
                    t,
                    format!("unsupported type hint `{}`", annotation_text(tokens)),
                ));
            }
            Some(&tokens[k + 1..last])
        }
        Some(t) => return Err((t, format!("unexpected `{}` in the type hint", t.text))),
    };
    let unsupported = || {
        (
            first,
            format!(
                "unsupported type hint `{}`: use str, int, float, bool, None, Optional, Union, Literal, list, dict or tuple",
                annotation_text(tokens)
            ),
        )
    };
    let simple = |ty: &str| -> Result<Map<String, Value>, AnnotationError<'_>> {
        if args.is_some() {
            return Err((first, format!("`{name}` takes no type arguments")));
        }
        Ok(obj(json!({ "type": ty })))
    };
    match name.as_str() {
        "str" => simple("string"),
        "int" => simple("integer"),
        "float" => simple("number"),
        "bool" => simple("boolean"),
        "None" | "NoneType" => simple("null"),
        "Optional" => {
            let inner = args
                .filter(|a| !a.is_empty() && split_top(a, ",").len() == 1)
                .ok_or_else(|| (first, "`Optional` takes exactly one type".to_owned()))?;
            Ok(union(vec![
                Value::Object(annotation_schema(inner, depth + 1)?),
                json!({"type": "null"}),
            ]))
        }
        "Union" => {
            let inner = args
                .filter(|a| !a.is_empty())
                .ok_or_else(|| (first, "`Union` needs its member types".to_owned()))?;
            let mut any = Vec::new();
            for m in split_top(inner, ",") {
                if m.is_empty() {
                    continue;
                }
                any.push(Value::Object(annotation_schema(m, depth + 1)?));
            }
            Ok(union(any))
        }
        "Literal" => {
            let inner = args
                .filter(|a| !a.is_empty())
                .ok_or_else(|| (first, "`Literal` needs its values".to_owned()))?;
            let mut values = Vec::new();
            for m in split_top(inner, ",") {
                if m.is_empty() {
                    continue;
                }
                let v = literal(m, depth + 1).filter(|v| !v.is_array() && !v.is_object()).ok_or_else(|| {
                    (&m[0], format!("`Literal` values must be strings, numbers, True, False or None; found `{}`", annotation_text(m)))
                })?;
                values.push(v);
            }
            Ok(obj(json!({ "enum": values })))
        }
        "list" | "List" | "Sequence" | "Iterable" | "set" | "Set" | "frozenset" | "FrozenSet" => {
            match args {
                None => Ok(obj(json!({"type": "array"}))),
                Some(a) if split_top(a, ",").len() == 1 && !a.is_empty() => Ok(obj(
                    json!({"type": "array", "items": Value::Object(annotation_schema(a, depth + 1)?)}),
                )),
                Some(_) => Err((first, format!("`{name}` takes one item type"))),
            }
        }
        "dict" | "Dict" | "Mapping" => match args {
            None => Ok(obj(json!({"type": "object"}))),
            Some(a) => {
                let parts = split_top(a, ",");
                if parts.len() != 2 || parts[0].is_empty() || parts[1].is_empty() {
                    return Err((first, format!("`{name}` takes a key type and a value type")));
                }
                let key = annotation_schema(parts[0], depth + 1)?;
                if key.get("type") != Some(&json!("string")) {
                    return Err((
                        &parts[0][0],
                        "dictionary keys must be `str` (JSON object keys are strings)".into(),
                    ));
                }
                Ok(obj(
                    json!({"type": "object", "additionalProperties": Value::Object(annotation_schema(parts[1], depth + 1)?)}),
                ))
            }
        },
        "tuple" | "Tuple" => match args {
            None => Ok(obj(json!({"type": "array"}))),
            Some(a) => {
                let parts = split_top(a, ",");
                if parts.len() == 2 && parts[1].len() == 1 && parts[1][0].is_op("...") {
                    return Ok(obj(
                        json!({"type": "array", "items": Value::Object(annotation_schema(parts[0], depth + 1)?)}),
                    ));
                }
                let mut items = Vec::new();
                for p in parts {
                    if p.is_empty() {
                        continue;
                    }
                    items.push(Value::Object(annotation_schema(p, depth + 1)?));
                }
                Ok(obj(
                    json!({"type": "array", "prefixItems": items, "items": false}),
                ))
            }
        },
        _ => Err(unsupported()),
    }
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// `anyOf` of the members, flattened; one member stands for itself.
fn union(members: Vec<Value>) -> Map<String, Value> {
    let mut flat = Vec::new();
    for m in members {
        match m.get("anyOf").and_then(Value::as_array) {
            Some(inner) if m.as_object().is_some_and(|o| o.len() == 1) => {
                flat.extend(inner.iter().cloned())
            }
            _ => flat.push(m),
        }
    }
    // Duplicates found through a set of canonical texts: a `Union` of many members stays
    // linear (comparing each member with every kept one was quadratic).
    let mut seen = std::collections::HashSet::new();
    let mut unique: Vec<Value> = Vec::new();
    for m in flat {
        let mut key = String::new();
        canonical_text(&m, &mut key);
        if seen.insert(key) {
            unique.push(m);
        }
    }
    if unique.len() == 1 {
        return obj(unique.remove(0));
    }
    obj(json!({ "anyOf": unique }))
}

/// Writes `value` as JSON with every object's keys sorted, so two values are equal (as
/// `serde_json` compares them, key order aside) exactly when their texts are.
fn canonical_text(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical_text(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_text(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Splits at `sep` outside brackets.
fn split_top<'t>(tokens: &'t [Token], sep: &str) -> Vec<&'t [Token]> {
    let mut parts = Vec::new();
    let mut depth = 0i64;
    let mut start = 0;
    for (k, t) in tokens.iter().enumerate() {
        if t.kind != Kind::Op {
            continue;
        }
        match t.text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            s if s == sep && depth == 0 => {
                parts.push(&tokens[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    // a trailing comma leaves an empty last part
    if parts.len() > 1 && parts.last().is_some_and(|p| p.is_empty()) && sep == "," {
        parts.pop();
    }
    parts
}

fn annotation_text(tokens: &[Token]) -> String {
    let mut s = String::new();
    for t in tokens {
        match t.kind {
            Kind::Str => s.push_str(&format!("{:?}", t.text)),
            _ => {
                if t.is_op(",") {
                    s.push_str(", ");
                } else if t.is_op("|") {
                    s.push_str(" | ");
                } else {
                    s.push_str(&t.text);
                }
            }
        }
    }
    s
}

/// The value of a literal expression (strings, numbers, `True`/`False`/`None`, lists, tuples and
/// dicts of those), or `None` when it is not one.
fn literal(tokens: &[Token], depth: usize) -> Option<Value> {
    if depth > MAX_NESTING {
        return None;
    }
    let first = tokens.first()?;
    if tokens.len() == 1 {
        return match first.kind {
            Kind::Str => Some(Value::String(first.text.clone())),
            Kind::Number => number(&first.text, false),
            Kind::Name => match first.text.as_str() {
                "True" => Some(Value::Bool(true)),
                "False" => Some(Value::Bool(false)),
                "None" => Some(Value::Null),
                _ => None,
            },
            _ => None,
        };
    }
    if tokens.len() == 2 && first.is_op("-") && tokens[1].kind == Kind::Number {
        return number(&tokens[1].text, true);
    }
    // adjacent string literals concatenate
    if tokens.iter().all(|t| t.kind == Kind::Str) {
        return Some(Value::String(
            tokens.iter().map(|t| t.text.as_str()).collect(),
        ));
    }
    let last = tokens.last()?;
    let inner = &tokens[1..tokens.len() - 1];
    let items = || -> Option<Vec<Value>> {
        split_top(inner, ",")
            .into_iter()
            .filter(|p| !p.is_empty())
            .map(|p| literal(p, depth + 1))
            .collect()
    };
    match (first.text.as_str(), last.text.as_str()) {
        ("[", "]") | ("(", ")") if first.kind == Kind::Op => {
            if first.is_op("(") && !inner.iter().any(|t| t.is_op(",")) {
                return literal(inner, depth + 1);
            }
            items().map(Value::Array)
        }
        ("{", "}") if first.kind == Kind::Op => {
            let mut map = Map::new();
            for p in split_top(inner, ",").into_iter().filter(|p| !p.is_empty()) {
                let parts = split_top(p, ":");
                if parts.len() != 2 {
                    return None;
                }
                let Value::String(key) = literal(parts[0], depth + 1)? else {
                    return None;
                };
                map.insert(key, literal(parts[1], depth + 1)?);
            }
            Some(Value::Object(map))
        }
        _ => None,
    }
}

fn number(text: &str, negative: bool) -> Option<Value> {
    let clean: String = text.chars().filter(|&c| c != '_').collect();
    let sign = if negative { "-" } else { "" };
    if let Ok(i) = format!("{sign}{clean}").parse::<i64>() {
        return Some(json!(i));
    }
    let f: f64 = format!("{sign}{clean}").parse().ok()?;
    serde_json::Number::from_f64(f).map(Value::Number)
}

// ---------------------------------------------------------------------------------------------
// Docstrings

/// A docstring's parts.
#[derive(Default)]
struct Docstring {
    description: String,
    args: Vec<ArgDoc>,
    grammar: Option<GrammarSection>,
    /// Sections not read (`Returns`, `Raises`, …) and their line within the docstring (0-based).
    skipped_sections: Vec<(String, u32)>,
}

struct ArgDoc {
    name: String,
    description: String,
}

/// The `Grammar:` section's text, dedented, with where each of its lines is in the source.
struct GrammarSection {
    text: String,
    /// Per line of `text`: its 1-based source line and the source column of its first character.
    places: Vec<(u32, u32)>,
}

impl GrammarSection {
    /// The source line:column of `line:column` in the section's text.
    fn place(&self, line: u32, column: u32) -> (u32, u32) {
        match self.places.get(line.saturating_sub(1) as usize) {
            Some(&(l, c)) => (l, c + column.saturating_sub(1)),
            None => self.places.last().map_or((1, 1), |&(l, c)| (l, c)),
        }
    }
}

/// Section headers of Google-style docstrings (`Name:` alone on its line).
const ARG_SECTIONS: &[&str] = &[
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "other parameters",
];
const OTHER_SECTIONS: &[&str] = &[
    "returns",
    "return",
    "yields",
    "yield",
    "raises",
    "raise",
    "examples",
    "example",
    "notes",
    "note",
    "attributes",
    "see also",
    "todo",
    "warning",
    "warnings",
    "references",
];

impl Docstring {
    fn read(source: &str, token: &Token) -> Docstring {
        // lines with their source line and the column of their first character
        let raw_lines: Vec<&str> = token.text.split('\n').collect();
        let first_column = {
            let line_start = source[..token.body.min(source.len())]
                .rfind('\n')
                .map_or(0, |p| p + 1);
            source[line_start..token.body.min(source.len())]
                .chars()
                .count() as u32
                + 1
        };
        let indent = raw_lines
            .iter()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.len() - l.trim_start().len())
            .min()
            .unwrap_or(0);
        // (text, source line, source column of text's first char)
        let lines: Vec<(String, u32, u32)> = raw_lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i == 0 {
                    let lead = l.len() - l.trim_start().len();
                    (l.trim().to_owned(), token.line, first_column + lead as u32)
                } else {
                    let cut = indent.min(l.len() - l.trim_start().len());
                    (
                        l[cut..].trim_end().to_owned(),
                        token.line + i as u32,
                        cut as u32 + 1,
                    )
                }
            })
            .collect();
        let mut doc = Docstring::default();
        let mut description = Vec::new();
        let mut k = 0;
        let mut in_description = true;
        while k < lines.len() {
            let text = lines[k].0.as_str();
            let trimmed = text.trim();
            let level = text.len() - text.trim_start().len();
            // reST field
            if let Some(rest) = trimmed.strip_prefix(':') {
                in_description = false;
                let (field, desc) = rest.split_once(':').unwrap_or((rest, ""));
                let words: Vec<&str> = field.split_whitespace().collect();
                let mut description = desc.trim().to_owned();
                let mut j = k + 1;
                while j < lines.len()
                    && !lines[j].0.trim().is_empty()
                    && indent_of(&lines[j].0) > level
                    && !lines[j].0.trim().starts_with(':')
                {
                    description.push(' ');
                    description.push_str(lines[j].0.trim());
                    j += 1;
                }
                match words.as_slice() {
                    [
                        "param" | "parameter" | "arg" | "argument" | "key" | "keyword",
                        ..,
                        name,
                    ] => doc.args.push(ArgDoc {
                        name: (*name).to_owned(),
                        description,
                    }),
                    [kind, ..] if *kind == "type" || *kind == "rtype" => {}
                    [kind, ..] => doc.skipped_sections.push(((*kind).to_owned(), k as u32)),
                    [] => {}
                }
                k = j;
                continue;
            }
            // NumPy section: a word over a dashed line
            let numpy = lines.get(k + 1).is_some_and(|(n, _, _)| {
                let n = n.trim();
                n.len() >= 3 && n.chars().all(|c| c == '-')
            }) && !trimmed.is_empty();
            let google = trimmed.ends_with(':') && !trimmed[..trimmed.len() - 1].contains(':') && {
                let head = trimmed[..trimmed.len() - 1].trim().to_ascii_lowercase();
                head == "grammar"
                    || ARG_SECTIONS.contains(&head.as_str())
                    || OTHER_SECTIONS.contains(&head.as_str())
            };
            if numpy || google {
                in_description = false;
                let head = trimmed.trim_end_matches(':').trim().to_owned();
                let lower = head.to_ascii_lowercase();
                let body_start = if numpy { k + 2 } else { k + 1 };
                // the section's lines: more indented than the header (Google), or up to the next
                // NumPy header (a line over a dashed line) for NumPy
                let mut j = body_start;
                while j < lines.len() {
                    let (l, _, _) = &lines[j];
                    if numpy {
                        let next_is_rule = lines.get(j + 1).is_some_and(|(n, _, _)| {
                            let n = n.trim();
                            n.len() >= 3 && n.chars().all(|c| c == '-')
                        });
                        if next_is_rule && !l.trim().is_empty() {
                            break;
                        }
                    } else if !l.trim().is_empty() && indent_of(l) <= level {
                        break;
                    }
                    j += 1;
                }
                let section = &lines[body_start..j];
                if lower == "grammar" {
                    doc.grammar = Some(grammar_section(section));
                } else if ARG_SECTIONS.contains(&lower.as_str()) {
                    doc.args.extend(if numpy {
                        numpy_args(section)
                    } else {
                        google_args(section)
                    });
                } else {
                    doc.skipped_sections.push((head, k as u32));
                }
                k = j;
                continue;
            }
            if in_description {
                description.push(trimmed.to_owned());
            }
            k += 1;
        }
        doc.description = paragraphs(&description);
        doc
    }
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Lines joined into paragraphs: lines of one paragraph by a space, paragraphs by a blank line.
fn paragraphs(lines: &[String]) -> String {
    let mut out = String::new();
    let mut blank = false;
    for l in lines {
        if l.is_empty() {
            blank = true;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank { "\n\n" } else { " " });
        }
        blank = false;
        out.push_str(l);
    }
    out
}

/// `name (type, optional): description` entries, continued on deeper-indented lines.
fn google_args(section: &[(String, u32, u32)]) -> Vec<ArgDoc> {
    let base = section
        .iter()
        .filter(|(l, _, _)| !l.trim().is_empty())
        .map(|(l, _, _)| indent_of(l))
        .min()
        .unwrap_or(0);
    let mut args: Vec<ArgDoc> = Vec::new();
    for (l, _, _) in section {
        if l.trim().is_empty() {
            continue;
        }
        if indent_of(l) == base {
            let t = l.trim();
            let (head, desc) = t.split_once(':').unwrap_or((t, ""));
            let name = head
                .split(['(', ' '])
                .next()
                .unwrap_or("")
                .trim()
                .trim_start_matches('*');
            args.push(ArgDoc {
                name: name.to_owned(),
                description: desc.trim().to_owned(),
            });
        } else if let Some(last) = args.last_mut() {
            if !last.description.is_empty() {
                last.description.push(' ');
            }
            last.description.push_str(l.trim());
        }
    }
    args
}

/// `name : type` lines, each followed by indented description lines.
fn numpy_args(section: &[(String, u32, u32)]) -> Vec<ArgDoc> {
    let base = section
        .iter()
        .filter(|(l, _, _)| !l.trim().is_empty())
        .map(|(l, _, _)| indent_of(l))
        .min()
        .unwrap_or(0);
    let mut args: Vec<ArgDoc> = Vec::new();
    for (l, _, _) in section {
        if l.trim().is_empty() {
            continue;
        }
        if indent_of(l) == base {
            let name = l.trim().split(':').next().unwrap_or("").trim();
            for n in name.split(',') {
                args.push(ArgDoc {
                    name: n.trim().trim_start_matches('*').to_owned(),
                    description: String::new(),
                });
            }
        } else if let Some(last) = args.last_mut() {
            if !last.description.is_empty() {
                last.description.push(' ');
            }
            last.description.push_str(l.trim());
        }
    }
    args
}

fn grammar_section(section: &[(String, u32, u32)]) -> GrammarSection {
    let base = section
        .iter()
        .filter(|(l, _, _)| !l.trim().is_empty())
        .map(|(l, _, _)| indent_of(l))
        .min()
        .unwrap_or(0);
    let mut text = String::new();
    let mut places = Vec::new();
    // trailing blank lines are not part of the grammar
    let last = section
        .iter()
        .rposition(|(l, _, _)| !l.trim().is_empty())
        .map_or(0, |p| p + 1);
    for (l, line, column) in &section[..last] {
        let cut = base.min(indent_of(l));
        text.push_str(&l[cut..]);
        text.push('\n');
        places.push((*line, column + cut as u32));
    }
    GrammarSection { text, places }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection() {
        assert!(looks_like_python("import os\n\ndef f(x: int):\n    pass\n"));
        assert!(!looks_like_python("[{\"name\": \"def \"}]"));
    }

    #[test]
    fn literals() {
        let toks = tokenize("[1, -2.5, 'a', {\"k\": (True, None)}]").unwrap();
        let toks: Vec<Token> = toks
            .into_iter()
            .filter(|t| t.kind != Kind::Newline)
            .collect();
        assert_eq!(
            literal(&toks, 0),
            Some(json!([1, -2.5, "a", {"k": [true, null]}]))
        );
    }
}
