//! The shapes tool definitions are pasted in, found without being told, and what loading them
//! noticed on the way.
//!
//! Every ecosystem wraps the same three things (a name, a description, a JSON Schema of the
//! arguments) differently:
//!
//! | shape | what it looks like |
//! | --- | --- |
//! | OpenAI tools | `[{"type": "function", "function": {name, description, parameters}}]`, also under `"tools"`, also flat (`{"type": "function", name, parameters}`) |
//! | OpenAI legacy functions | `{"functions": [{name, description, parameters}]}` |
//! | function list | `[{name, description, parameters}]` (BFCL), also under `"tools"` |
//! | MCP `tools/list` result | `{"tools": [{name, description, inputSchema}]}` (+ `nextCursor`, `_meta`, server info) |
//! | MCP JSON-RPC response | `{"jsonrpc": "2.0", "id": …, "result": {"tools": [...]}}` |
//! | Anthropic tools | `[{name, description, input_schema}]` |
//! | Gemini function declarations | `{"functionDeclarations": [{name, description, parameters}]}` |
//! | Gemini tools | `[{"functionDeclarations": [...]}, …]` (also under `"tools"`) |
//! | a single tool | any one tool object of the shapes above |
//!
//! Every key of a tool definition or of its wrapper is either read, known and harmless (a
//! [`Severity::Note`] saying why it does not matter), or unknown (a [`Severity::Warning`]
//! naming it): nothing is dropped without a word. Gemini's `parameters` are OpenAPI schemas
//! (upper-case type names, `nullable`, `format` on numbers, `propertyOrdering`, `example`); they
//! are mapped to JSON Schema here (see [`gemini_to_json_schema`]).

use std::fmt;

use serde_json::{Map, Value};

use toolrail_schema::JsonPointer;

/// The shape a tool set was written in, as found by [`crate::toolset::ToolSet::from_value`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolSetShape {
    /// OpenAI `tools`: `[{"type": "function", "function": {...}}]` (bare or under `"tools"`).
    OpenAiTools,
    /// OpenAI's legacy `{"functions": [...]}`.
    OpenAiFunctions,
    /// A list of bare function objects `{name, description, parameters}` (BFCL and many
    /// servers), bare or under `"tools"`.
    FunctionList,
    /// An MCP `tools/list` result: `{"tools": [{name, description, inputSchema}]}`.
    McpToolsList,
    /// An MCP `tools/list` JSON-RPC response: `{"jsonrpc", "id", "result": {"tools": [...]}}`.
    McpJsonRpcResponse,
    /// Anthropic Messages API `tools`: `[{name, description, input_schema}]`.
    AnthropicTools,
    /// Gemini `{"functionDeclarations": [...]}`.
    GeminiFunctionDeclarations,
    /// Gemini `tools`: a list of `{"functionDeclarations": [...]}` objects.
    GeminiTools,
    /// One tool object on its own, in the given shape.
    SingleTool(ToolShape),
    /// A list whose tools are written in different shapes.
    Mixed,
    /// Python function definitions (see [`crate::python`]).
    PythonFunctions,
}

impl ToolSetShape {
    /// The human name shown in the CLI and the app ("MCP tools/list result", …).
    pub fn name(self) -> &'static str {
        match self {
            Self::OpenAiTools => "OpenAI tools",
            Self::OpenAiFunctions => "OpenAI legacy functions",
            Self::FunctionList => "function list (BFCL style)",
            Self::McpToolsList => "MCP tools/list result",
            Self::McpJsonRpcResponse => "MCP tools/list JSON-RPC response",
            Self::AnthropicTools => "Anthropic tools",
            Self::GeminiFunctionDeclarations => "Gemini functionDeclarations",
            Self::GeminiTools => "Gemini tools",
            Self::SingleTool(ToolShape::OpenAi) => "a single OpenAI tool",
            Self::SingleTool(ToolShape::Function) => "a single function",
            Self::SingleTool(ToolShape::Mcp) => "a single MCP tool",
            Self::SingleTool(ToolShape::Anthropic) => "a single Anthropic tool",
            Self::SingleTool(ToolShape::Gemini) => "a single Gemini function declaration",
            Self::Mixed => "a list mixing tool shapes",
            Self::PythonFunctions => "Python functions",
        }
    }

    /// A short machine name for JSON output (`"mcp-tools-list"`, …).
    pub fn id(self) -> &'static str {
        match self {
            Self::OpenAiTools => "openai-tools",
            Self::OpenAiFunctions => "openai-functions",
            Self::FunctionList => "function-list",
            Self::McpToolsList => "mcp-tools-list",
            Self::McpJsonRpcResponse => "mcp-jsonrpc-response",
            Self::AnthropicTools => "anthropic-tools",
            Self::GeminiFunctionDeclarations => "gemini-function-declarations",
            Self::GeminiTools => "gemini-tools",
            Self::SingleTool(ToolShape::OpenAi) => "single-openai-tool",
            Self::SingleTool(ToolShape::Function) => "single-function",
            Self::SingleTool(ToolShape::Mcp) => "single-mcp-tool",
            Self::SingleTool(ToolShape::Anthropic) => "single-anthropic-tool",
            Self::SingleTool(ToolShape::Gemini) => "single-gemini-function-declaration",
            Self::Mixed => "mixed",
            Self::PythonFunctions => "python-functions",
        }
    }
}

impl fmt::Display for ToolSetShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The shape of one tool definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolShape {
    /// `{"type": "function", "function": {...}}`, or OpenAI's flat `{"type": "function", name,
    /// parameters}`.
    OpenAi,
    /// A bare function object `{name, description, parameters}`.
    Function,
    /// An MCP tool `{name, description, inputSchema}`.
    Mcp,
    /// An Anthropic tool `{name, description, input_schema}` (or a server tool with a `type`).
    Anthropic,
    /// A Gemini function declaration (inside `functionDeclarations`, or with
    /// `parametersJsonSchema` or OpenAPI upper-case type names).
    Gemini,
}

/// How much a [`ToolSetWarning`] matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Known and harmless: said once so that nothing is dropped silently.
    Note,
    /// Something the user should look at: an unknown key, a tool left out, a tool without a
    /// parameter schema.
    Warning,
}

impl Severity {
    /// The word printed before the message: `"note"` or `"warning"`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Note => "note",
            Self::Warning => "warning",
        }
    }
}

/// What a [`ToolSetWarning`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WarningKind {
    /// A key toolrail does not know; it is not read.
    UnknownKey,
    /// A key toolrail knows and does not need (it does not change the arguments).
    IgnoredKey,
    /// A key whose meaning was mapped to JSON Schema (Gemini's OpenAPI schema fields).
    MappedKey,
    /// A tool without any parameter schema: it takes no arguments.
    NoSchema,
    /// A provider's built-in tool (no schema in the file): left out of the set.
    BuiltInTool,
    /// A `type` that names no JSON Schema type but reads as one (`"str, optional"`): the
    /// set holds the reading; strict grammars refuse it, lenient ones use it with a warning.
    TypeReading,
    /// The text started with a UTF-8 byte order mark (U+FEFF), skipped: JSON does not use one
    /// (RFC 8259 lets a reader ignore it), and an editor's BOM would otherwise be a puzzling
    /// "expected value at line 1 column 1".
    ByteOrderMark,
}

impl WarningKind {
    /// A short machine name for JSON output (`"unknown-key"`, …).
    pub fn id(self) -> &'static str {
        match self {
            Self::UnknownKey => "unknown-key",
            Self::IgnoredKey => "ignored-key",
            Self::MappedKey => "mapped-key",
            Self::NoSchema => "no-schema",
            Self::BuiltInTool => "built-in-tool",
            Self::TypeReading => "type-reading",
            Self::ByteOrderMark => "byte-order-mark",
        }
    }

    /// The severity of this kind.
    pub fn severity(self) -> Severity {
        match self {
            Self::IgnoredKey | Self::MappedKey | Self::ByteOrderMark => Severity::Note,
            Self::UnknownKey | Self::NoSchema | Self::BuiltInTool | Self::TypeReading => {
                Severity::Warning
            }
        }
    }
}

/// Something loading a tool set noticed: a key not read, a tool without a schema, a built-in tool
/// left out. Names the tool (when inside one), the JSON pointer and the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSetWarning {
    /// What it is about (and so its severity).
    pub kind: WarningKind,
    /// The tool it belongs to (`None` for the wrapper around the tools).
    pub tool: Option<String>,
    /// JSON pointer into the loaded document (of the key itself, when there is one).
    pub pointer: String,
    /// The key it is about, when there is one.
    pub key: Option<String>,
    /// What happened, in words.
    pub message: String,
}

impl ToolSetWarning {
    /// [`Severity::Note`] or [`Severity::Warning`].
    pub fn severity(&self) -> Severity {
        self.kind.severity()
    }
}

impl fmt::Display for ToolSetWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "(top level)"
        } else {
            self.pointer.as_str()
        };
        match &self.tool {
            // messages that name their tool themselves ("tool `x` has no parameter schema…")
            Some(tool) if !self.message.starts_with(&format!("tool `{tool}`")) => {
                write!(f, "tool `{tool}`, {at}: {}", self.message)
            }
            _ => write!(f, "{at}: {}", self.message),
        }
    }
}

/// Collects warnings while loading.
#[derive(Debug, Default)]
pub(crate) struct Notes {
    pub(crate) list: Vec<ToolSetWarning>,
}

impl Notes {
    pub(crate) fn push(
        &mut self,
        kind: WarningKind,
        tool: Option<&str>,
        pointer: String,
        key: Option<&str>,
        message: String,
    ) {
        self.list.push(ToolSetWarning {
            kind,
            tool: tool.map(str::to_owned),
            pointer,
            key: key.map(str::to_owned),
            message,
        });
    }

    /// Classifies every key of `obj` that is not in `read`: a note when `known` explains it, a
    /// warning otherwise. `what` names the object ("MCP tool", "tools/list result", …).
    pub(crate) fn keys(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &JsonPointer,
        tool: Option<&str>,
        what: &str,
        read: &[&str],
        known: &[(&str, &str)],
    ) {
        for key in obj.keys() {
            if read.contains(&key.as_str()) {
                continue;
            }
            let kptr = ptr.with_key(key).to_string();
            match known.iter().find(|(k, _)| k == key) {
                Some((_, why)) => self.push(
                    WarningKind::IgnoredKey,
                    tool,
                    kptr,
                    Some(key),
                    format!("`{key}` not used: {why}"),
                ),
                None => self.push(
                    WarningKind::UnknownKey,
                    tool,
                    kptr,
                    Some(key),
                    format!("unknown key `{key}` in {what}: not read"),
                ),
            }
        }
    }
}

/// Keys of a wrapper object (`{"tools": [...]}` and the like) that are known and not needed.
pub(crate) const WRAPPER_KNOWN: &[(&str, &str)] = &[
    (
        "nextCursor",
        "MCP pagination cursor; only the tools on this page are loaded",
    ),
    ("_meta", "MCP metadata"),
    (
        "server_info",
        "information about the server, not about the tools",
    ),
    (
        "serverInfo",
        "information about the server, not about the tools",
    ),
];

/// Keys of an MCP tool that are known and not needed.
pub(crate) const MCP_KNOWN: &[(&str, &str)] = &[
    ("title", "a display name for people; calls use `name`"),
    (
        "annotations",
        "behaviour hints for clients; they do not change the arguments",
    ),
    (
        "outputSchema",
        "describes the tool's result, not its arguments",
    ),
    ("_meta", "MCP metadata"),
    ("execution", "how the server runs the tool"),
    ("icons", "icons for clients"),
    (
        "x-toolrail-result",
        "by the grammar; conversations offer it as the tool's canned result",
    ),
];

/// Keys of an Anthropic tool that are known and not needed.
pub(crate) const ANTHROPIC_KNOWN: &[(&str, &str)] = &[
    (
        "cache_control",
        "prompt caching; no effect on the arguments",
    ),
    (
        "strict",
        "toolrail's grammar always holds the arguments to the schema",
    ),
    (
        "defer_loading",
        "tool search loading; no effect on the arguments",
    ),
    (
        "input_examples",
        "examples for the model; they do not change the schema",
    ),
    (
        "x-toolrail-result",
        "by the grammar; conversations offer it as the tool's canned result",
    ),
];

/// Keys of an OpenAI function that are known and not needed.
pub(crate) const OPENAI_KNOWN: &[(&str, &str)] = &[
    (
        "strict",
        "toolrail's grammar always holds the arguments to the schema",
    ),
    (
        "x-toolrail-result",
        "by the grammar; conversations offer it as the tool's canned result",
    ),
];

/// Keys of a Gemini function declaration that are known and not needed.
pub(crate) const GEMINI_KNOWN: &[(&str, &str)] = &[
    (
        "response",
        "describes the function's result, not its arguments",
    ),
    (
        "responseJsonSchema",
        "describes the function's result, not its arguments",
    ),
    (
        "behavior",
        "Live API scheduling (blocking or not); no effect on the arguments",
    ),
    (
        "x-toolrail-result",
        "by the grammar; conversations offer it as the tool's canned result",
    ),
];

/// Keys of a Gemini `tools` entry that are built-in tools (no declaration in the file).
pub(crate) const GEMINI_BUILT_IN: &[&str] = &[
    "googleSearch",
    "google_search",
    "googleSearchRetrieval",
    "google_search_retrieval",
    "codeExecution",
    "code_execution",
    "urlContext",
    "url_context",
    "retrieval",
    "googleMaps",
    "google_maps",
    "computerUse",
    "computer_use",
    "fileSearch",
    "file_search",
    "enterpriseWebSearch",
    "enterprise_web_search",
];

/// Fields of Gemini's (OpenAPI-subset) `Schema` that mean the same in JSON Schema.
const GEMINI_SAME: &[&str] = &[
    "title",
    "description",
    "enum",
    "required",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "minProperties",
    "maxProperties",
    "default",
];

/// True when `schema`'s top-level `type` is an OpenAPI upper-case name (`"OBJECT"`), the mark of
/// a Gemini schema outside a `functionDeclarations` list.
pub(crate) fn has_openapi_type(schema: &Value) -> bool {
    schema
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| openapi_type(t).is_some())
}

/// The JSON Schema type of an OpenAPI upper-case type name.
fn openapi_type(name: &str) -> Option<&'static str> {
    Some(match name {
        "STRING" => "string",
        "NUMBER" => "number",
        "INTEGER" => "integer",
        "BOOLEAN" => "boolean",
        "ARRAY" => "array",
        "OBJECT" => "object",
        "NULL" => "null",
        _ => return None,
    })
}

/// Maps a Gemini (OpenAPI-subset) schema to JSON Schema: upper-case type names become JSON
/// Schema's, `nullable: true` adds `"null"` to the type (and to `enum`), `example` becomes
/// `examples`, `propertyOrdering` orders `properties` (the order the grammar writes them in),
/// `format` on numbers and the `"enum"` string format are storage hints and are dropped with a
/// note. Fields outside Gemini's `Schema` are kept for the JSON Schema converter and warned
/// about. The caller has checked the nesting depth (this recurses). Errors are `(pointer,
/// message)`.
pub fn gemini_to_json_schema(
    schema: &Value,
    ptr: &JsonPointer,
    tool: &str,
    notes: &mut Vec<ToolSetWarning>,
) -> Result<Value, (String, String)> {
    let mut collected = Notes::default();
    let out = gemini_inner(schema, ptr, tool, &mut collected)?;
    notes.extend(collected.list);
    Ok(out)
}

fn gemini_inner(
    schema: &Value,
    ptr: &JsonPointer,
    tool: &str,
    notes: &mut Notes,
) -> Result<Value, (String, String)> {
    let Value::Object(obj) = schema else {
        return Err((ptr.to_string(), "expected a schema object".into()));
    };
    let mut out = Map::new();
    let mut nullable = false;
    let mut ordering: Option<Vec<String>> = None;
    for (key, value) in obj {
        let kptr = ptr.with_key(key);
        match key.as_str() {
            "type" => {
                let mapped = match value {
                    Value::String(t) if t == "TYPE_UNSPECIFIED" => {
                        notes.push(
                            WarningKind::MappedKey,
                            Some(tool),
                            kptr.to_string(),
                            Some(key),
                            "`type` TYPE_UNSPECIFIED: any value".into(),
                        );
                        continue;
                    }
                    Value::String(t) => match openapi_type(t) {
                        Some(json) => Value::String(json.into()),
                        None => value.clone(),
                    },
                    _ => value.clone(),
                };
                out.insert(key.clone(), mapped);
            }
            "nullable" => match value {
                Value::Bool(b) => nullable = *b,
                _ => return Err((kptr.to_string(), "`nullable` must be true or false".into())),
            },
            "example" => {
                out.insert("examples".into(), Value::Array(vec![value.clone()]));
            }
            "propertyOrdering" => match value {
                Value::Array(names) => {
                    let mut list = Vec::with_capacity(names.len());
                    for (i, n) in names.iter().enumerate() {
                        let Value::String(n) = n else {
                            return Err((
                                kptr.with_index(i).to_string(),
                                "`propertyOrdering` must list property names".into(),
                            ));
                        };
                        list.push(n.clone());
                    }
                    ordering = Some(list);
                }
                _ => {
                    return Err((
                        kptr.to_string(),
                        "`propertyOrdering` must be an array of names".into(),
                    ));
                }
            },
            "properties" => {
                let Value::Object(props) = value else {
                    return Err((
                        kptr.to_string(),
                        "`properties` must be an object of schemas".into(),
                    ));
                };
                let mut mapped = Map::new();
                for (name, sub) in props {
                    let sptr = kptr.with_key(name);
                    mapped.insert(name.clone(), gemini_inner(sub, &sptr, tool, notes)?);
                }
                out.insert(key.clone(), Value::Object(mapped));
            }
            "items" => {
                out.insert(key.clone(), gemini_inner(value, &kptr, tool, notes)?);
            }
            "anyOf" => {
                let Value::Array(list) = value else {
                    return Err((
                        kptr.to_string(),
                        "`anyOf` must be an array of schemas".into(),
                    ));
                };
                let mapped = list
                    .iter()
                    .enumerate()
                    .map(|(i, s)| gemini_inner(s, &kptr.with_index(i), tool, notes))
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert(key.clone(), Value::Array(mapped));
            }
            "format" => {
                out.insert(key.clone(), value.clone());
            }
            k if GEMINI_SAME.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            _ => {
                notes.push(
                    WarningKind::UnknownKey,
                    Some(tool),
                    kptr.to_string(),
                    Some(key),
                    format!("`{key}` is not a Gemini schema field: read as JSON Schema"),
                );
                out.insert(key.clone(), value.clone());
            }
        }
    }
    // `format` is a storage hint on numbers ("int32", "float", …) and `"enum"` on strings says
    // what `enum` already says: neither constrains further.
    let is_numeric = matches!(
        out.get("type").and_then(Value::as_str),
        Some("number" | "integer")
    );
    if let Some(Value::String(format)) = out.get("format").cloned()
        && (is_numeric || format == "enum")
    {
        out.remove("format");
        notes.push(
            WarningKind::MappedKey,
            Some(tool),
            ptr.with_key("format").to_string(),
            Some("format"),
            format!("`format` {format:?} is a storage hint: not constrained"),
        );
    }
    if nullable {
        match out.get_mut("type") {
            Some(Value::String(t)) => {
                let t = std::mem::take(t);
                out.insert(
                    "type".into(),
                    Value::Array(vec![Value::String(t), Value::String("null".into())]),
                );
            }
            Some(Value::Array(list)) if !list.iter().any(|t| t == "null") => {
                list.push(Value::String("null".into()));
            }
            _ => {}
        }
        if let Some(Value::Array(values)) = out.get_mut("enum")
            && !values.contains(&Value::Null)
        {
            values.push(Value::Null);
        }
    }
    if let Some(order) = ordering
        && let Some(Value::Object(props)) = out.get_mut("properties")
    {
        let mut sorted = Map::new();
        for name in &order {
            if let Some(v) = props.remove(name) {
                sorted.insert(name.clone(), v);
            }
        }
        sorted.append(props);
        *props = sorted;
    }
    Ok(Value::Object(out))
}
