//! Tool sets: loading tool definitions and normalising them to plain JSON Schema.
//!
//! [`ToolSet::from_value`] reads tool definitions in every shape people paste (OpenAI `tools` and
//! legacy `functions`, MCP `tools/list` results and JSON-RPC responses, Anthropic `input_schema`,
//! Gemini `functionDeclarations`, BFCL function lists, a single tool): the shape is found from
//! the document, reported as [`ToolSet::shape`], and every key not read is in
//! [`ToolSet::warnings`] (see [`crate::shape`]).
//!
//! Parameter schemas are normalised to proper JSON Schema: BFCL's Python- and Java-flavoured type
//! names (`dict`, `float`, `tuple`, `any`, `String`, `HashMap`, `ArrayList`, `long`, …) become
//! JSON Schema types (see [`json_type_for`]), BFCL's non-standard `"optional"` key (`true`,
//! `"True"` or a list of names) is dropped (a
//! property is optional exactly when it is not in `required`), and a missing top-level `type` on a
//! schema with `properties` becomes `"object"`. Gemini's OpenAPI schemas are mapped first
//! ([`crate::shape::gemini_to_json_schema`]). A top-level object schema with no way to name
//! members (no `properties`, `additionalProperties`, `patternProperties`, `$ref` or combinator)
//! gets `"properties": {}`: the tool takes no arguments. Nested objects without `properties`
//! (BFCL's free-form `dict`s) stay open. Every error names the tool and the JSON pointer into
//! the loaded document.
//!
//! Tool arguments *close* their objects: [`Tool::arguments_schema`] adds `"additionalProperties":
//! false` to every object schema that declares `properties` and says nothing about extra ones. The
//! grammar builder and the validator both use that schema, so they agree on what is accepted.

use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use toolrail_schema::JsonPointer;

use crate::custom_grammar::CustomGrammar;
use crate::sent::{ReadingDifference, SentParameters};
use crate::shape::{
    ANTHROPIC_KNOWN, GEMINI_BUILT_IN, GEMINI_KNOWN, MCP_KNOWN, Notes, OPENAI_KNOWN, ToolSetShape,
    ToolSetWarning, ToolShape, WRAPPER_KNOWN, WarningKind, gemini_to_json_schema, has_openapi_type,
};
pub use crate::source::ToolSource;

/// Why a tool set could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ToolSetError {
    /// The text is not JSON at all.
    #[error("tool set is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The document does not have one of the accepted shapes.
    #[error("{pointer}: {message}")]
    Shape {
        /// JSON pointer into the loaded document.
        pointer: String,
        /// What is wrong there.
        message: String,
    },
    /// One tool's definition is wrong.
    #[error("tool '{tool}', {pointer}: {message}")]
    Tool {
        /// Name of the tool (or `#<index>` when the name itself is missing).
        tool: String,
        /// JSON pointer into the loaded document.
        pointer: String,
        /// What is wrong there.
        message: String,
    },
    /// Python source could not be read as functions (see [`crate::python`]).
    #[error("Python source, {0}")]
    Python(PythonError),
    /// Two tools share a name.
    #[error("duplicate tool name '{name}' at {pointer} (first defined at {first})")]
    Duplicate {
        /// The repeated name.
        name: String,
        /// Pointer of the second definition.
        pointer: String,
        /// Pointer of the first definition.
        first: String,
    },
}

/// Why Python source could not become a tool set: what, in which function and parameter, where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {}{message}", context(.function, .parameter))]
pub struct PythonError {
    /// 1-based line in the source.
    pub line: u32,
    /// 1-based column (characters) in the source.
    pub column: u32,
    /// The function, when inside one.
    pub function: Option<String>,
    /// The parameter, when about one.
    pub parameter: Option<String>,
    /// What is wrong.
    pub message: String,
}

fn context(function: &Option<String>, parameter: &Option<String>) -> String {
    match (function, parameter) {
        (Some(f), Some(p)) => format!("function `{f}`, parameter `{p}`: "),
        (Some(f), None) => format!("function `{f}`: "),
        _ => String::new(),
    }
}

/// One callable tool, normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The name the model must emit.
    pub name: String,
    /// Human-readable description (empty when the definition had none).
    pub description: String,
    /// The arguments' JSON Schema (always an object schema), normalised but not closed.
    pub parameters: Value,
    /// A grammar of its own for the arguments (a Python docstring's `Grammar:` section), used
    /// by the grammar builder instead of the one generated from [`Tool::parameters`].
    pub custom_grammar: Option<CustomGrammar>,
    /// What a client sends as the parameters (the document as written): the prompt shows it,
    /// while the grammar and the validator use [`Tool::parameters`] (see [`crate::sent`]).
    pub sent: SentParameters,
    /// The schema the validator checks the arguments against when it is stricter than the
    /// grammar's: a projected tool's original parameters ([`ORIGINAL_PARAMETERS_KEY`], written
    /// by `toolrail budget --project --keep-validation`), normalised like the parameters. None:
    /// the validator checks [`Tool::parameters`].
    pub validation: Option<Value>,
}

/// The key of an OpenAI function that keeps the tool's original parameters when its
/// `parameters` were relaxed to fit llama.cpp's grammar limits: the grammar uses the relaxed
/// ones, the validator these.
pub const ORIGINAL_PARAMETERS_KEY: &str = "x-toolrail-original-parameters";

impl Tool {
    /// The OpenAI `tools` entry a client sends for this tool, its parameters as its document
    /// wrote them (see [`crate::sent`]).
    pub fn client_definition(&self) -> Value {
        crate::sent::client_definition(&self.name, &self.description, &self.parameters, &self.sent)
    }

    /// Where toolrail's reading of the parameters differs from what a client sends, in
    /// document order (none when the reading is what is sent).
    pub fn reading_differences(&self) -> Vec<ReadingDifference> {
        crate::sent::reading_differences(&self.name, &self.parameters, &self.sent)
    }

    /// The schema the tool's arguments are checked against: [`Tool::parameters`] with every object
    /// that declares `properties` closed (see [`close_objects`]).
    pub fn arguments_schema(&self) -> Value {
        close_objects(&self.parameters)
    }

    /// The schema the validator checks the arguments against: [`Tool::validation`] where a
    /// projection kept the original, else [`Tool::arguments_schema`].
    pub fn validation_schema(&self) -> Value {
        match &self.validation {
            Some(original) => close_objects(original),
            None => self.arguments_schema(),
        }
    }

    /// Names of the declared properties, in the schema's order.
    pub fn property_names(&self) -> Vec<String> {
        self.parameters
            .get("properties")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Names listed in the top-level `required`, in their declared order.
    pub fn required_names(&self) -> Vec<String> {
        self.parameters
            .get("required")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// An ordered set of tools with unique names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSet {
    /// Description of the whole set (top-level `"description"` next to `"tools"`), if any.
    pub description: Option<String>,
    tools: Vec<Tool>,
    shape: Option<ToolSetShape>,
    warnings: Vec<ToolSetWarning>,
    /// For each tool, the JSON pointer of its parameter schema in the loaded document.
    schema_pointers: Vec<String>,
}

impl ToolSet {
    /// Builds a set from already normalised tools; fails on duplicate names and on parameters
    /// nested deeper than [`toolrail_schema::MAX_DOCUMENT_DEPTH`] (the schema walks recurse).
    pub fn new(tools: Vec<Tool>) -> Result<Self, ToolSetError> {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, t) in tools.iter().enumerate() {
            if let Err(e) = toolrail_schema::check_depth(&t.parameters) {
                return Err(ToolSetError::Tool {
                    tool: t.name.clone(),
                    pointer: format!("/{i}/parameters{}", e.pointer.trim_start_matches('#')),
                    message: e.message,
                });
            }
            if let Some(first) = seen.insert(t.name.as_str(), i) {
                return Err(ToolSetError::Duplicate {
                    name: t.name.clone(),
                    pointer: format!("/{i}"),
                    first: format!("/{first}"),
                });
            }
        }
        Ok(Self {
            description: None,
            tools,
            shape: None,
            warnings: Vec::new(),
            schema_pointers: Vec::new(),
        })
    }

    /// A set read from another source than JSON (Python functions): its tools, shape and notes.
    pub(crate) fn from_parts(
        description: Option<String>,
        tools: Vec<Tool>,
        shape: ToolSetShape,
        warnings: Vec<ToolSetWarning>,
    ) -> Result<Self, ToolSetError> {
        let count = tools.len();
        let mut set = Self::new(tools)?;
        set.description = description;
        set.shape = Some(shape);
        set.warnings = warnings;
        set.schema_pointers = vec![String::new(); count];
        Ok(set)
    }

    /// The request's `tools` as a client sends them (see [`Tool::client_definition`]).
    pub fn client_tools(&self) -> Vec<Value> {
        self.tools.iter().map(Tool::client_definition).collect()
    }

    /// Every tool's [`Tool::reading_differences`], in tool order.
    pub fn reading_differences(&self) -> Vec<ReadingDifference> {
        self.tools
            .iter()
            .flat_map(Tool::reading_differences)
            .collect()
    }

    /// Parses and normalises a tool set from JSON text.
    pub fn from_json_str(text: &str) -> Result<Self, ToolSetError> {
        let value: Value = serde_json::from_str(text)?;
        Self::from_value(&value)
    }

    /// Normalises a tool set from a parsed JSON document, in any of the accepted shapes (see
    /// [`crate::shape`]): the shape found is [`ToolSet::shape`], and every key not read, tool
    /// without a schema or built-in tool left out is in [`ToolSet::warnings`].
    pub fn from_value(doc: &Value) -> Result<Self, ToolSetError> {
        let mut loader = Loader::default();
        let (shape, description) = loader.document(doc)?;
        Ok(ToolSet {
            description,
            tools: loader.tools,
            shape: Some(shape),
            warnings: loader.notes.list,
            schema_pointers: loader.schema_pointers,
        })
    }

    /// The JSON pointer of tool `name`'s parameter schema in the loaded document (where its
    /// `parameters`, `inputSchema` or `input_schema` is, or would be); `None` for an unknown
    /// name or a set built with [`ToolSet::new`].
    pub fn schema_pointer(&self, name: &str) -> Option<&str> {
        let index = self.tools.iter().position(|t| t.name == name)?;
        self.schema_pointers.get(index).map(String::as_str)
    }

    /// The shape the set was loaded from (`None` when built with [`ToolSet::new`]).
    pub fn shape(&self) -> Option<ToolSetShape> {
        self.shape
    }

    /// What loading noticed: keys not read (warnings) or known and not needed (notes), tools
    /// without a parameter schema, built-in tools left out. Empty for [`ToolSet::new`].
    pub fn warnings(&self) -> &[ToolSetWarning] {
        &self.warnings
    }

    /// Adds what reading the text around the definitions noticed (a byte order mark).
    pub(crate) fn warn(&mut self, warning: ToolSetWarning) {
        self.warnings.insert(0, warning);
    }

    /// The tools, in definition order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The tool with this name, if any.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// All tool names, in definition order.
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name.as_str()).collect()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when the set has no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// The keys that say "this object is a Gemini `tools` entry", not a tool.
const GEMINI_DECLARATIONS: [&str; 2] = ["functionDeclarations", "function_declarations"];

/// Reads a document of any accepted shape, collecting tools, their shapes and notes.
#[derive(Debug, Default)]
struct Loader {
    tools: Vec<Tool>,
    schema_pointers: Vec<String>,
    /// The shapes of the tools that show one (see [`Loader::list_shape`]).
    shapes: Vec<ToolShape>,
    first_at: HashMap<String, String>,
    gemini_entries: bool,
    notes: Notes,
}

impl Loader {
    /// Reads the whole document; returns its shape and the set's description.
    fn document(&mut self, doc: &Value) -> Result<(ToolSetShape, Option<String>), ToolSetError> {
        let accepted = "expected tool definitions: an OpenAI `tools` array, {\"tools\": [...]} \
                        (OpenAI, MCP, Anthropic), {\"functions\": [...]}, \
                        {\"functionDeclarations\": [...]}, an MCP JSON-RPC response, a function \
                        list or a single tool object";
        match doc {
            Value::Array(items) => {
                self.list(items, &JsonPointer::root(), false)?;
                Ok((self.list_shape(), None))
            }
            Value::Object(obj) => {
                if obj.contains_key("jsonrpc") || obj.contains_key("result") {
                    self.json_rpc(obj)?;
                    Ok((ToolSetShape::McpJsonRpcResponse, None))
                } else if let Some(tools) = obj.get("tools") {
                    let description = self.wrapper(obj, "tools", &[])?;
                    let at = JsonPointer::root().with_key("tools");
                    self.list(array_at(tools, &at)?, &at, false)?;
                    Ok((self.list_shape(), description))
                } else if let Some(functions) = obj.get("functions") {
                    let known = [(
                        "function_call",
                        "the request's choice of function; the grammar allows every function",
                    )];
                    let description = self.wrapper(obj, "functions", &known)?;
                    let at = JsonPointer::root().with_key("functions");
                    self.list(array_at(functions, &at)?, &at, false)?;
                    Ok((ToolSetShape::OpenAiFunctions, description))
                } else if GEMINI_DECLARATIONS.iter().any(|k| obj.contains_key(*k))
                    && !obj.contains_key("name")
                {
                    self.gemini_entry(obj, &JsonPointer::root())?;
                    Ok((ToolSetShape::GeminiFunctionDeclarations, None))
                } else if obj.contains_key("function") || obj.contains_key("name") {
                    let shape = self.tool(doc, &JsonPointer::root(), 0, false)?;
                    Ok((ToolSetShape::SingleTool(shape), None))
                } else {
                    Err(ToolSetError::Shape {
                        pointer: String::new(),
                        message: accepted.into(),
                    })
                }
            }
            _ => Err(ToolSetError::Shape {
                pointer: String::new(),
                message: accepted.into(),
            }),
        }
    }

    /// Notes on the keys of a wrapper object around the list under `list_key`; returns its
    /// `description`.
    fn wrapper(
        &mut self,
        obj: &Map<String, Value>,
        list_key: &str,
        extra_known: &[(&str, &str)],
    ) -> Result<Option<String>, ToolSetError> {
        let description = match obj.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(ToolSetError::Shape {
                    pointer: "/description".into(),
                    message: "the tool set's description must be a string".into(),
                });
            }
        };
        let mut known: Vec<(&str, &str)> = WRAPPER_KNOWN.to_vec();
        known.extend_from_slice(extra_known);
        self.notes.keys(
            obj,
            &JsonPointer::root(),
            None,
            "the tool set",
            &[list_key, "description"],
            &known,
        );
        Ok(description)
    }

    /// An MCP JSON-RPC response: `{"jsonrpc", "id", "result": {"tools": [...]}}`.
    fn json_rpc(&mut self, obj: &Map<String, Value>) -> Result<(), ToolSetError> {
        if let Some(error) = obj.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)");
            return Err(ToolSetError::Shape {
                pointer: "/error".into(),
                message: format!("a JSON-RPC error response, not a tools/list result: {message}"),
            });
        }
        let Some(Value::Object(result)) = obj.get("result") else {
            return Err(ToolSetError::Shape {
                pointer: "/result".into(),
                message: "a JSON-RPC response needs a \"result\" object holding \"tools\"".into(),
            });
        };
        let Some(tools) = result.get("tools") else {
            return Err(ToolSetError::Shape {
                pointer: "/result".into(),
                message: "no \"tools\" in the JSON-RPC result: not a tools/list response".into(),
            });
        };
        self.notes.keys(
            obj,
            &JsonPointer::root(),
            None,
            "the JSON-RPC response",
            &["jsonrpc", "id", "result"],
            &[],
        );
        let result_at = JsonPointer::root().with_key("result");
        self.notes.keys(
            result,
            &result_at,
            None,
            "the tools/list result",
            &["tools"],
            WRAPPER_KNOWN,
        );
        let at = result_at.with_key("tools");
        self.list(array_at(tools, &at)?, &at, false)
    }

    /// A list of tools (or of Gemini `tools` entries) at `base`.
    fn list(
        &mut self,
        items: &[Value],
        base: &JsonPointer,
        gemini: bool,
    ) -> Result<(), ToolSetError> {
        for (i, item) in items.iter().enumerate() {
            let ptr = base.with_index(i);
            match item {
                Value::Object(obj) if is_gemini_entry(obj) => self.gemini_entry(obj, &ptr)?,
                _ => {
                    self.tool(item, &ptr, i, gemini)?;
                }
            }
        }
        Ok(())
    }

    /// A Gemini `tools` entry: `{"functionDeclarations": [...]}`, or a built-in tool.
    fn gemini_entry(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &JsonPointer,
    ) -> Result<(), ToolSetError> {
        self.gemini_entries = true;
        for (key, value) in obj {
            let kptr = ptr.with_key(key);
            if GEMINI_DECLARATIONS.contains(&key.as_str()) {
                self.list(array_at(value, &kptr)?, &kptr, true)?;
            } else if GEMINI_BUILT_IN.contains(&key.as_str()) {
                self.notes.push(
                    WarningKind::BuiltInTool,
                    None,
                    kptr.to_string(),
                    Some(key),
                    format!(
                        "Gemini built-in tool `{key}` has no declaration in the file: left out \
                         of the grammar"
                    ),
                );
            } else {
                self.notes.push(
                    WarningKind::UnknownKey,
                    None,
                    kptr.to_string(),
                    Some(key),
                    format!("unknown key `{key}` in a Gemini tools entry: not read"),
                );
            }
        }
        Ok(())
    }

    /// The set's shape, from the shapes of its tools.
    fn list_shape(&self) -> ToolSetShape {
        if self.gemini_entries {
            return ToolSetShape::GeminiTools;
        }
        // no tool shows a shape (an empty list, or only `{name, description}`)
        let Some(first) = self.shapes.first() else {
            return ToolSetShape::FunctionList;
        };
        if self.shapes.iter().any(|s| s != first) {
            return ToolSetShape::Mixed;
        }
        match first {
            ToolShape::OpenAi => ToolSetShape::OpenAiTools,
            ToolShape::Function => ToolSetShape::FunctionList,
            ToolShape::Mcp => ToolSetShape::McpToolsList,
            ToolShape::Anthropic => ToolSetShape::AnthropicTools,
            ToolShape::Gemini => ToolSetShape::GeminiFunctionDeclarations,
        }
    }

    /// One tool definition at `ptr`; adds it to the set (built-in tools are left out with a
    /// warning) and returns its shape.
    fn tool(
        &mut self,
        item: &Value,
        ptr: &JsonPointer,
        index: usize,
        in_gemini: bool,
    ) -> Result<ToolShape, ToolSetError> {
        let anon = format!("#{index}");
        let Value::Object(obj) = item else {
            return Err(ToolSetError::Tool {
                tool: anon,
                pointer: ptr.to_string(),
                message: "expected a tool object".into(),
            });
        };
        let type_name = obj.get("type").and_then(Value::as_str);
        let has_schema_key = ["parameters", "parametersJsonSchema"]
            .iter()
            .any(|k| obj.contains_key(*k));
        // Which keys hold what, by shape.
        let (shape, func, fptr, schema_key) = if let Some(function) = obj.get("function") {
            if let Some(t) = obj.get("type")
                && t != "function"
            {
                return Err(ToolSetError::Tool {
                    tool: anon,
                    pointer: ptr.with_key("type").to_string(),
                    message: format!("unsupported tool type {t}; only \"function\" is supported"),
                });
            }
            let Value::Object(f) = function else {
                return Err(ToolSetError::Tool {
                    tool: anon,
                    pointer: ptr.with_key("function").to_string(),
                    message: "expected an object".into(),
                });
            };
            (ToolShape::OpenAi, f, ptr.with_key("function"), "parameters")
        } else if obj.contains_key("inputSchema") {
            (ToolShape::Mcp, obj, ptr.clone(), "inputSchema")
        } else if obj.contains_key("input_schema") || type_name == Some("custom") {
            (ToolShape::Anthropic, obj, ptr.clone(), "input_schema")
        } else if let Some(t) = type_name
            && t != "function"
            && !has_schema_key
        {
            // A provider's own tool (Anthropic's `web_search_…`, `bash_…`, OpenAI's
            // `web_search`): its schema is not in the file.
            let name = obj.get("name").and_then(Value::as_str).unwrap_or(t);
            self.notes.push(
                WarningKind::BuiltInTool,
                Some(name),
                ptr.to_string(),
                Some("type"),
                format!(
                    "tool `{name}` is a built-in tool of type `{t}`: its schema is not in the \
                     file, so it is left out of the grammar"
                ),
            );
            let shape = if obj.contains_key("name") {
                ToolShape::Anthropic
            } else {
                ToolShape::OpenAi
            };
            return Ok(shape);
        } else if type_name == Some("function") {
            (ToolShape::OpenAi, obj, ptr.clone(), "parameters")
        } else {
            let gemini = in_gemini
                || obj.contains_key("parametersJsonSchema")
                || obj.get("parameters").is_some_and(has_openapi_type);
            let shape = if gemini {
                ToolShape::Gemini
            } else {
                ToolShape::Function
            };
            let key = if obj.contains_key("parametersJsonSchema") {
                "parametersJsonSchema"
            } else {
                "parameters"
            };
            (shape, obj, ptr.clone(), key)
        };
        let name = tool_name(func, &fptr, anon)?;
        let description = match func.get("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                return Err(ToolSetError::Tool {
                    tool: name,
                    pointer: fptr.with_key("description").to_string(),
                    message: "description must be a string".into(),
                });
            }
        };
        if shape == ToolShape::Gemini
            && obj.contains_key("parameters")
            && obj.contains_key("parametersJsonSchema")
        {
            return Err(ToolSetError::Tool {
                tool: name,
                pointer: ptr.with_key("parametersJsonSchema").to_string(),
                message: "both \"parameters\" and \"parametersJsonSchema\": give only one".into(),
            });
        }
        self.key_notes(shape, obj, func, ptr, &fptr, &name);
        let pptr = fptr.with_key(schema_key);
        let parameters = match func.get(schema_key) {
            None | Some(Value::Null) => {
                self.notes.push(
                    WarningKind::NoSchema,
                    Some(&name),
                    fptr.to_string(),
                    None,
                    format!("tool `{name}` has no parameter schema: it takes no arguments"),
                );
                serde_json::json!({"type": "object", "properties": {}})
            }
            Some(p) => {
                let at = |(pointer, message): (String, String)| ToolSetError::Tool {
                    tool: name.clone(),
                    pointer,
                    message,
                };
                let p = if shape == ToolShape::Gemini && schema_key == "parameters" {
                    toolrail_schema::check_depth(p).map_err(|e| {
                        at((
                            format!("{pptr}{}", e.pointer.trim_start_matches('#')),
                            e.message,
                        ))
                    })?;
                    let mut found = Vec::new();
                    let mapped = gemini_to_json_schema(p, &pptr, &name, &mut found).map_err(at)?;
                    self.notes.list.extend(found);
                    Cow::Owned(mapped)
                } else {
                    // borrowed: cloning would recurse before the depth check
                    Cow::Borrowed(p)
                };
                let (schema, readings) = normalise_parameters(&p, &pptr).map_err(at)?;
                for r in readings {
                    let message = r.to_string();
                    self.notes.push(
                        WarningKind::TypeReading,
                        Some(&name),
                        r.pointer,
                        Some("type"),
                        message,
                    );
                }
                schema
            }
        };
        // after the reading: it checked the depth (cloning a value recurses)
        let sent = match func.get(schema_key) {
            None | Some(Value::Null) => SentParameters::Absent,
            // Gemini's OpenAPI schema: a client converts it before sending
            Some(_) if shape == ToolShape::Gemini && schema_key == "parameters" => {
                SentParameters::Converted("a Gemini OpenAPI schema".to_owned())
            }
            Some(p) => SentParameters::Verbatim(p.clone()),
        };
        if let Some(first) = self.first_at.get(&name) {
            return Err(ToolSetError::Duplicate {
                name,
                pointer: ptr.to_string(),
                first: first.clone(),
            });
        }
        self.first_at.insert(name.clone(), ptr.to_string());
        // a projected tool's original parameters, read like the parameters
        let validation = match func
            .get(ORIGINAL_PARAMETERS_KEY)
            .filter(|_| shape == ToolShape::OpenAi)
        {
            None => None,
            Some(original) => {
                let optr = fptr.with_key(ORIGINAL_PARAMETERS_KEY);
                let (schema, _) =
                    normalise_parameters(original, &optr).map_err(|(pointer, message)| {
                        ToolSetError::Tool {
                            tool: name.clone(),
                            pointer,
                            message,
                        }
                    })?;
                Some(schema)
            }
        };
        self.tools.push(Tool {
            name,
            description,
            parameters,
            custom_grammar: None,
            sent,
            validation,
        });
        // a bare `{name, description}` shows no shape: it does not make a list mixed
        let shows_shape = shape != ToolShape::Function || func.contains_key(schema_key);
        if shows_shape {
            self.shapes.push(shape);
        }
        self.schema_pointers.push(pptr.to_string());
        Ok(shape)
    }

    /// Notes on the keys of one tool definition that are not read.
    fn key_notes(
        &mut self,
        shape: ToolShape,
        obj: &Map<String, Value>,
        func: &Map<String, Value>,
        ptr: &JsonPointer,
        fptr: &JsonPointer,
        name: &str,
    ) {
        let tool = Some(name);
        let custom = obj.get("type").is_some_and(|t| t == "custom");
        match shape {
            ToolShape::OpenAi if obj.contains_key("function") => {
                self.notes.keys(
                    obj,
                    ptr,
                    tool,
                    "the OpenAI tool",
                    &["type", "function"],
                    &[],
                );
                self.notes.keys(
                    func,
                    fptr,
                    tool,
                    "the OpenAI function",
                    &["name", "description", "parameters", ORIGINAL_PARAMETERS_KEY],
                    OPENAI_KNOWN,
                );
            }
            ToolShape::OpenAi => self.notes.keys(
                obj,
                ptr,
                tool,
                "the OpenAI tool",
                &[
                    "type",
                    "name",
                    "description",
                    "parameters",
                    ORIGINAL_PARAMETERS_KEY,
                ],
                OPENAI_KNOWN,
            ),
            ToolShape::Mcp => self.notes.keys(
                obj,
                ptr,
                tool,
                "the MCP tool",
                &["name", "description", "inputSchema"],
                MCP_KNOWN,
            ),
            ToolShape::Anthropic => {
                let read: &[&str] = if custom {
                    &["type", "name", "description", "input_schema"]
                } else {
                    &["name", "description", "input_schema"]
                };
                self.notes
                    .keys(obj, ptr, tool, "the Anthropic tool", read, ANTHROPIC_KNOWN);
            }
            ToolShape::Gemini => self.notes.keys(
                obj,
                ptr,
                tool,
                "the Gemini function declaration",
                &["name", "description", "parameters", "parametersJsonSchema"],
                GEMINI_KNOWN,
            ),
            ToolShape::Function => {
                let mut known = OPENAI_KNOWN.to_vec();
                known.extend_from_slice(GEMINI_KNOWN);
                self.notes.keys(
                    obj,
                    ptr,
                    tool,
                    "the function",
                    &["name", "description", "parameters"],
                    &known,
                );
            }
        }
    }
}

/// True when `obj` is a Gemini `tools` entry (declarations or a built-in tool), not a tool.
fn is_gemini_entry(obj: &Map<String, Value>) -> bool {
    !obj.contains_key("name")
        && !obj.contains_key("function")
        && obj.keys().any(|k| {
            GEMINI_DECLARATIONS.contains(&k.as_str()) || GEMINI_BUILT_IN.contains(&k.as_str())
        })
}

/// The array at `pointer`, or a shape error naming it.
fn array_at<'a>(value: &'a Value, pointer: &JsonPointer) -> Result<&'a [Value], ToolSetError> {
    match value {
        Value::Array(items) => Ok(items),
        _ => Err(ToolSetError::Shape {
            pointer: pointer.to_string(),
            message: "expected an array of tools".into(),
        }),
    }
}

/// The tool's `name`: a non-empty string without quotes or control characters.
fn tool_name(
    func: &Map<String, Value>,
    fptr: &JsonPointer,
    anon: String,
) -> Result<String, ToolSetError> {
    let name = match func.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) => {
            return Err(ToolSetError::Tool {
                tool: anon,
                pointer: fptr.with_key("name").to_string(),
                message: "empty tool name".into(),
            });
        }
        Some(_) => {
            return Err(ToolSetError::Tool {
                tool: anon,
                pointer: fptr.with_key("name").to_string(),
                message: "tool name must be a string".into(),
            });
        }
        None => {
            return Err(ToolSetError::Tool {
                tool: anon,
                pointer: fptr.to_string(),
                message: "missing \"name\"".into(),
            });
        }
    };
    if name.chars().any(|c| c.is_control() || c == '"') {
        return Err(ToolSetError::Tool {
            tool: name,
            pointer: fptr.with_key("name").to_string(),
            message: "tool name contains a quote or control character".into(),
        });
    }
    Ok(name)
}

/// A `type` value that names no JSON Schema type but reads as one, as an agent framework's demo
/// tools write them (`"str, optional"`): Python's names (`str`, `int`, `float`, `bool`,
/// `dict`, `list`, and every name [`json_type_for`] knows) and an `optional` part, meaning
/// the property is not required. The loaded schema holds the reading; a strict grammar refuses
/// the tool (naming keyword, value and pointer), a lenient one warns with this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeReading {
    /// JSON pointer of the `type` keyword in the loaded document.
    pub pointer: String,
    /// The `type` value as written.
    pub written: String,
    /// The JSON Schema type it is read as (`None`: any value, for `any`).
    pub read_as: Option<&'static str>,
    /// The property is read as not required (the value said `optional`).
    pub optional: bool,
}

/// What separates a [`TypeReading`]'s message from the reading it names.
pub const READ_AS: &str = "; read as ";

impl fmt::Display for TypeReading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "type {:?} is not a JSON Schema type{READ_AS}{}",
            self.written,
            match self.read_as {
                Some(t) => format!("{t:?}"),
                None => "any value".to_string(),
            }
        )?;
        if self.optional {
            f.write_str(", the property not required")?;
        }
        Ok(())
    }
}

/// Reads a `type` name [`json_type_for`] does not know the way a person would: parts split at
/// commas and spaces, `optional` (any case) marking the property optional, exactly one other
/// part naming a type. `None`: no reading.
pub fn read_loose_type(name: &str) -> Option<(Option<&'static str>, bool)> {
    let mut optional = false;
    let mut names = Vec::new();
    for part in name
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
    {
        if part.eq_ignore_ascii_case("optional") {
            optional = true;
        } else {
            names.push(part);
        }
    }
    match names.as_slice() {
        [one] => json_type_for(one).map(|t| (t, optional)),
        _ => None,
    }
}

/// Normalises a tool's `parameters` schema; `ptr` is its JSON pointer in the loaded document.
/// Returns the schema and the `type` values read loosely ([`TypeReading`], already applied to
/// the schema: the caller reports them). Errors are `(pointer, message)`.
pub fn normalise_parameters(
    schema: &Value,
    ptr: &JsonPointer,
) -> Result<(Value, Vec<TypeReading>), (String, String)> {
    let Value::Object(_) = schema else {
        return Err((
            ptr.to_string(),
            "parameters must be a JSON Schema object".into(),
        ));
    };
    // the normalisation below recurses: refuse absurd nesting first (no recursion there)
    toolrail_schema::check_depth(schema).map_err(|e| {
        (
            format!("{ptr}{}", e.pointer.trim_start_matches('#')),
            e.message,
        )
    })?;
    let mut readings = Vec::new();
    let mut out = normalise_schema(schema, ptr, Normalise::ToolParameters, &mut readings)?;
    if let Value::Object(m) = &mut out {
        match m.get("type") {
            None => {
                if m.contains_key("properties") || m.is_empty() {
                    m.insert("type".into(), Value::String("object".into()));
                }
            }
            Some(Value::String(t)) if t == "object" => {}
            Some(t) => {
                return Err((
                    ptr.with_key("type").to_string(),
                    format!("tool arguments must be an object, found type {t}"),
                ));
            }
        }
        if !m.contains_key("properties") && m.get("type").is_some_and(|t| t == "object") {
            let open = m.contains_key("additionalProperties")
                || m.contains_key("patternProperties")
                || m.contains_key("$ref")
                || m.contains_key("anyOf")
                || m.contains_key("oneOf")
                || m.contains_key("allOf");
            if !open {
                m.insert("properties".into(), Value::Object(Map::new()));
            }
        }
    }
    Ok((out, readings))
}

/// Maps a type name as found in tool definitions (JSON Schema's, or BFCL's Python/Java-flavoured
/// ones, case-insensitively) to a JSON Schema type. `Some(None)` means "any value" (`any`);
/// `None` means the name is unknown.
pub fn json_type_for(name: &str) -> Option<Option<&'static str>> {
    let t = match name.to_ascii_lowercase().as_str() {
        "object" | "dict" | "hashmap" | "map" | "mapping" => "object",
        "number" | "float" | "double" | "decimal" => "number",
        "integer" | "int" | "long" | "short" | "byte" | "bigint" => "integer",
        "string" | "str" | "char" | "character" => "string",
        "boolean" | "bool" => "boolean",
        "array" | "tuple" | "list" | "arraylist" | "set" | "sequence" => "array",
        "null" | "none" | "nonetype" => "null",
        "any" => return Some(None),
        _ => return None,
    };
    Some(Some(t))
}

/// The type names JSON Schema defines.
const JSON_TYPES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Keywords whose value is one subschema.
const SUB_ONE: &[&str] = &[
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
];
/// Keywords whose value is a list of subschemas.
const SUB_LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value is a map of subschemas.
const SUB_MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// What [`normalise_schema`] changes besides loosely written `type` values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Normalise {
    /// A tool's parameters: BFCL's `optional` flags dropped, `type: object` added where
    /// `properties` imply it (what tool definitions mean).
    ToolParameters,
    /// A plain JSON Schema: only `type` values read ([`read_loose_types`]); everything else
    /// means what JSON Schema says.
    TypesOnly,
}

/// A plain JSON Schema with every `type` value that names no JSON Schema type but has a
/// reading ([`read_loose_type`]) replaced by it, and a property read as optional removed from
/// its parent's `required`; with the readings (pointers as `#/...`). None when the schema
/// has no such value or cannot be walked (the converter then names what is wrong).
pub fn read_loose_types(schema: &Value) -> Option<(Value, Vec<TypeReading>)> {
    let mut readings = Vec::new();
    let out = normalise_schema(
        schema,
        &JsonPointer::root(),
        Normalise::TypesOnly,
        &mut readings,
    )
    .ok()?;
    for r in &mut readings {
        r.pointer = format!("#{}", r.pointer);
    }
    (!readings.is_empty()).then_some((out, readings))
}

fn normalise_schema(
    schema: &Value,
    ptr: &JsonPointer,
    mode: Normalise,
    readings: &mut Vec<TypeReading>,
) -> Result<Value, (String, String)> {
    let obj = match schema {
        Value::Object(o) => o,
        Value::Bool(_) => return Ok(schema.clone()),
        _ => {
            return Err((
                ptr.to_string(),
                "expected a schema (object or boolean)".into(),
            ));
        }
    };
    let mut out = Map::new();
    // properties whose `type` was read as optional
    let mut optional: Vec<&str> = Vec::new();
    for (key, value) in obj {
        let kptr = ptr.with_key(key);
        let new = match key.as_str() {
            "type" => match normalise_type(value, &kptr, mode, readings)? {
                Some(t) => t,
                None => continue,
            },
            // BFCL's non-standard flag (`true`, `"True"`, or a list of names); optionality is
            // `required`'s business.
            "optional" if mode == Normalise::ToolParameters => continue,
            "items" => match value {
                Value::Array(list) => Value::Array(normalise_list(list, &kptr, mode, readings)?),
                _ => normalise_schema(value, &kptr, mode, readings)?,
            },
            k if SUB_ONE.contains(&k) => normalise_schema(value, &kptr, mode, readings)?,
            k if SUB_LIST.contains(&k) => match value {
                Value::Array(list) => Value::Array(normalise_list(list, &kptr, mode, readings)?),
                _ => {
                    return Err((
                        kptr.to_string(),
                        format!("\"{k}\" must be an array of schemas"),
                    ));
                }
            },
            k if SUB_MAP.contains(&k) => match value {
                Value::Object(m) => {
                    let mut nm = Map::new();
                    for (pk, pv) in m {
                        let pptr = kptr.with_key(pk);
                        let before = readings.len();
                        nm.insert(pk.clone(), normalise_schema(pv, &pptr, mode, readings)?);
                        // a property's own `type` read as optional (not one deeper down)
                        let own = pptr.with_key("type").to_string();
                        if k == "properties"
                            && readings[before..]
                                .iter()
                                .any(|r| r.optional && r.pointer.starts_with(&own))
                        {
                            optional.push(pk);
                        }
                    }
                    Value::Object(nm)
                }
                _ => {
                    return Err((
                        kptr.to_string(),
                        format!("\"{k}\" must be an object of schemas"),
                    ));
                }
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), new);
    }
    if !optional.is_empty()
        && let Some(Value::Array(required)) = out.get_mut("required")
    {
        required.retain(|r| r.as_str().is_none_or(|name| !optional.contains(&name)));
    }
    if mode == Normalise::ToolParameters
        && !out.contains_key("type")
        && out.contains_key("properties")
        && !has_composition(&out)
    {
        out.insert("type".into(), Value::String("object".into()));
    }
    Ok(Value::Object(out))
}

fn has_composition(m: &Map<String, Value>) -> bool {
    ["anyOf", "oneOf", "allOf", "$ref"]
        .iter()
        .any(|k| m.contains_key(*k))
}

fn normalise_list(
    list: &[Value],
    ptr: &JsonPointer,
    mode: Normalise,
    readings: &mut Vec<TypeReading>,
) -> Result<Vec<Value>, (String, String)> {
    list.iter()
        .enumerate()
        .map(|(i, s)| normalise_schema(s, &ptr.with_index(i), mode, readings))
        .collect()
}

/// Returns the normalised `type` value, or `None` when the type constraint disappears (`any`).
fn normalise_type(
    value: &Value,
    ptr: &JsonPointer,
    mode: Normalise,
    readings: &mut Vec<TypeReading>,
) -> Result<Option<Value>, (String, String)> {
    let mut one = |name: &str, p: &JsonPointer| -> Result<Option<&'static str>, (String, String)> {
        // tool definitions use Python's and Java's names freely; a plain JSON Schema that
        // does is read with a warning
        let own_name = JSON_TYPES.contains(&name);
        if let Some(t) = json_type_for(name)
            && (mode == Normalise::ToolParameters || own_name)
        {
            return Ok(t);
        }
        let (read_as, optional) = read_loose_type(name)
            .ok_or_else(|| (p.to_string(), format!("unknown type name \"{name}\"")))?;
        readings.push(TypeReading {
            pointer: p.to_string(),
            written: name.to_string(),
            read_as,
            optional,
        });
        Ok(read_as)
    };
    match value {
        Value::String(s) => Ok(one(s, ptr)?.map(|t| Value::String(t.into()))),
        Value::Array(list) => {
            let mut out: Vec<Value> = Vec::new();
            for (i, v) in list.iter().enumerate() {
                let p = ptr.with_index(i);
                let Value::String(s) = v else {
                    return Err((p.to_string(), "type names must be strings".into()));
                };
                match one(s, &p)? {
                    None => return Ok(None),
                    Some(t) => {
                        let t = Value::String(t.into());
                        if !out.contains(&t) {
                            out.push(t);
                        }
                    }
                }
            }
            Ok(Some(Value::Array(out)))
        }
        _ => Err((
            ptr.to_string(),
            "\"type\" must be a string or an array of strings".into(),
        )),
    }
}

/// Closes objects: every object schema that declares `properties` and has none of
/// `additionalProperties`, `patternProperties`, `unevaluatedProperties` gets
/// `"additionalProperties": false`. Direct members of `allOf` are left open (closing them would
/// make the conjunction reject the other members' properties).
pub fn close_objects(schema: &Value) -> Value {
    close_inner(schema, false)
}

fn close_inner(schema: &Value, in_all_of: bool) -> Value {
    let Value::Object(obj) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in obj {
        let new = match key.as_str() {
            "items" => match value {
                Value::Array(list) => {
                    Value::Array(list.iter().map(|s| close_inner(s, false)).collect())
                }
                _ => close_inner(value, false),
            },
            "allOf" => match value {
                Value::Array(list) => {
                    Value::Array(list.iter().map(|s| close_inner(s, true)).collect())
                }
                _ => value.clone(),
            },
            k if SUB_ONE.contains(&k) => close_inner(value, false),
            k if SUB_LIST.contains(&k) => match value {
                Value::Array(list) => {
                    Value::Array(list.iter().map(|s| close_inner(s, false)).collect())
                }
                _ => value.clone(),
            },
            k if SUB_MAP.contains(&k) => match value {
                Value::Object(m) => Value::Object(
                    m.iter()
                        .map(|(k, v)| (k.clone(), close_inner(v, false)))
                        .collect(),
                ),
                _ => value.clone(),
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), new);
    }
    let closable = !in_all_of
        && out.contains_key("properties")
        && !out.contains_key("additionalProperties")
        && !out.contains_key("patternProperties")
        && !out.contains_key("unevaluatedProperties");
    if closable {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn loads_openai_tools_array() {
        let set = ToolSet::from_value(&json!([
            {"type": "function", "function": {"name": "get_weather", "description": "d",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]}}}
        ]))
        .unwrap();
        assert_eq!(set.names(), vec!["get_weather"]);
        assert_eq!(set.tools()[0].required_names(), vec!["city"]);
    }

    #[test]
    fn loads_bfcl_list_and_maps_types() {
        let set = ToolSet::from_value(&json!([
            {"name": "f", "parameters": {"type": "dict", "properties": {
                "a": {"type": "float"}, "b": {"type": "tuple", "items": {"type": "float"}},
                "c": {"type": "any"}, "d": {"type": "HashMap"}, "e": {"type": "ArrayList",
                "items": {"type": "String"}}, "g": {"type": "long", "optional": true},
                "h": {"type": ["Boolean", "char"]}}}}
        ]))
        .unwrap();
        let p = &set.tools()[0].parameters;
        assert_eq!(p["type"], "object");
        assert_eq!(p["properties"]["a"]["type"], "number");
        assert_eq!(p["properties"]["b"]["type"], "array");
        assert_eq!(p["properties"]["b"]["items"]["type"], "number");
        assert!(p["properties"]["c"].get("type").is_none());
        assert_eq!(p["properties"]["d"]["type"], "object");
        assert_eq!(p["properties"]["e"]["items"]["type"], "string");
        assert_eq!(p["properties"]["g"], json!({"type": "integer"}));
        assert_eq!(p["properties"]["h"]["type"], json!(["boolean", "string"]));
    }

    #[test]
    fn loads_tools_object_with_description() {
        let set = ToolSet::from_value(&json!({"description": "x", "tools": [
            {"name": "a"}, {"type": "function", "function": {"name": "b"}}]}))
        .unwrap();
        assert_eq!(set.description.as_deref(), Some("x"));
        assert_eq!(set.names(), vec!["a", "b"]);
        assert_eq!(
            set.tools()[0].parameters,
            json!({"type": "object", "properties": {}})
        );
    }

    #[test]
    fn unknown_type_names_tool_and_pointer() {
        let err = ToolSet::from_value(&json!({"tools": [{"name": "ok"}, {"name": "bad",
            "parameters": {"type": "dict", "properties": {"x": {"type": "flaot"}}}}]}))
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("'bad'"), "{msg}");
        assert!(
            msg.contains("/tools/1/parameters/properties/x/type"),
            "{msg}"
        );
        assert!(msg.contains("flaot"), "{msg}");
    }

    #[test]
    fn duplicate_names_are_an_error() {
        let err = ToolSet::from_value(&json!([{"name": "a"}, {"name": "a"}])).unwrap_err();
        assert!(matches!(err, ToolSetError::Duplicate { .. }));
        assert!(err.to_string().contains("/1"), "{err}");
    }

    #[test]
    fn non_object_arguments_are_an_error() {
        let err = ToolSet::from_value(&json!([{"name": "a", "parameters": {"type": "string"}}]))
            .unwrap_err();
        assert!(err.to_string().contains("/0/parameters/type"), "{err}");
    }

    #[test]
    fn closes_objects_with_properties_only() {
        let s = json!({"type": "object", "properties": {"a": {"type": "object",
            "properties": {"x": {}}}, "b": {"type": "object"},
            "c": {"type": "object", "properties": {}, "additionalProperties": true}}});
        let c = close_objects(&s);
        assert_eq!(c["additionalProperties"], false);
        assert_eq!(c["properties"]["a"]["additionalProperties"], false);
        assert!(c["properties"]["b"].get("additionalProperties").is_none());
        assert_eq!(c["properties"]["c"]["additionalProperties"], true);
    }
}
