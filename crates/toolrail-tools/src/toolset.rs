//! Tool sets: loading tool definitions and normalising them to plain JSON Schema.
//!
//! Three input shapes are accepted:
//!
//! * an OpenAI `tools` array: `[{"type": "function", "function": {name, description, parameters}}]`;
//! * a bare function list, as BFCL and many servers write it: `[{name, description, parameters}]`;
//! * an object holding either list under `"tools"` (optionally with a top-level `"description"` of
//!   the whole set, which the app shows), or a single tool object.
//!
//! Parameter schemas are normalised to proper JSON Schema: BFCL's Python- and Java-flavoured type
//! names (`dict`, `float`, `tuple`, `any`, `String`, `HashMap`, `ArrayList`, `long`, …) become
//! JSON Schema types (see [`json_type_for`]), BFCL's non-standard `"optional"` key (`true`,
//! `"True"` or a list of names) is dropped (a
//! property is optional exactly when it is not in `required`), and a missing top-level `type` on a
//! schema with `properties` becomes `"object"`. A top-level object schema with no way to name
//! members (no `properties`, `additionalProperties`, `patternProperties`, `$ref` or combinator)
//! gets `"properties": {}`: the tool takes no arguments. Nested objects without `properties`
//! (BFCL's free-form `dict`s) stay open. Every error names the tool and the JSON pointer into
//! the loaded document.
//!
//! Tool arguments *close* their objects: [`Tool::arguments_schema`] adds `"additionalProperties":
//! false` to every object schema that declares `properties` and says nothing about extra ones. The
//! grammar builder and the validator both use that schema, so they agree on what is accepted.

use serde_json::{Map, Value};
use std::collections::HashMap;

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

/// One callable tool, normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The name the model must emit.
    pub name: String,
    /// Human-readable description (empty when the definition had none).
    pub description: String,
    /// The arguments' JSON Schema (always an object schema), normalised but not closed.
    pub parameters: Value,
}

impl Tool {
    /// The schema the tool's arguments are checked against: [`Tool::parameters`] with every object
    /// that declares `properties` closed (see [`close_objects`]).
    pub fn arguments_schema(&self) -> Value {
        close_objects(&self.parameters)
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
        })
    }

    /// Parses and normalises a tool set from JSON text.
    pub fn from_json_str(text: &str) -> Result<Self, ToolSetError> {
        let value: Value = serde_json::from_str(text)?;
        Self::from_value(&value)
    }

    /// Normalises a tool set from a parsed JSON document (any of the accepted shapes).
    pub fn from_value(doc: &Value) -> Result<Self, ToolSetError> {
        match doc {
            Value::Array(items) => load_list(items, ""),
            Value::Object(obj) => {
                if let Some(tools) = obj.get("tools") {
                    let Value::Array(items) = tools else {
                        return Err(ToolSetError::Shape {
                            pointer: "/tools".into(),
                            message: "expected an array of tools".into(),
                        });
                    };
                    let mut set = load_list(items, "/tools")?;
                    set.description = obj
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    Ok(set)
                } else if obj.contains_key("function") || obj.contains_key("name") {
                    load_list(std::slice::from_ref(doc), "").map_err(|e| match e {
                        ToolSetError::Tool {
                            tool,
                            pointer,
                            message,
                        } => ToolSetError::Tool {
                            tool,
                            pointer: pointer.trim_start_matches("/0").to_owned(),
                            message,
                        },
                        other => other,
                    })
                } else {
                    Err(ToolSetError::Shape {
                        pointer: String::new(),
                        message: "expected a tools array, {\"tools\": [...]} or a single tool \
                                  object"
                            .into(),
                    })
                }
            }
            _ => Err(ToolSetError::Shape {
                pointer: String::new(),
                message: "expected a tools array, {\"tools\": [...]} or a single tool object"
                    .into(),
            }),
        }
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

fn load_list(items: &[Value], base: &str) -> Result<ToolSet, ToolSetError> {
    let mut tools = Vec::with_capacity(items.len());
    let mut first_at: HashMap<String, String> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let ptr = format!("{base}/{i}");
        let tool = load_tool(item, &ptr, i)?;
        if let Some(first) = first_at.get(&tool.name) {
            return Err(ToolSetError::Duplicate {
                name: tool.name,
                pointer: ptr,
                first: first.clone(),
            });
        }
        first_at.insert(tool.name.clone(), ptr);
        tools.push(tool);
    }
    Ok(ToolSet {
        description: None,
        tools,
    })
}

fn load_tool(item: &Value, ptr: &str, index: usize) -> Result<Tool, ToolSetError> {
    let anon = format!("#{index}");
    let Value::Object(obj) = item else {
        return Err(ToolSetError::Tool {
            tool: anon,
            pointer: ptr.to_owned(),
            message: "expected a tool object".into(),
        });
    };
    // OpenAI shape: {"type": "function", "function": {...}}.
    let (func, fptr) = match obj.get("function") {
        Some(Value::Object(f)) => {
            if let Some(t) = obj.get("type")
                && t != "function"
            {
                return Err(ToolSetError::Tool {
                    tool: anon,
                    pointer: format!("{ptr}/type"),
                    message: format!("unsupported tool type {t}; only \"function\" is supported"),
                });
            }
            (f, format!("{ptr}/function"))
        }
        Some(_) => {
            return Err(ToolSetError::Tool {
                tool: anon,
                pointer: format!("{ptr}/function"),
                message: "expected an object".into(),
            });
        }
        None => (obj, ptr.to_owned()),
    };
    let name = match func.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) => {
            return Err(ToolSetError::Tool {
                tool: anon,
                pointer: format!("{fptr}/name"),
                message: "empty tool name".into(),
            });
        }
        Some(_) => {
            return Err(ToolSetError::Tool {
                tool: anon,
                pointer: format!("{fptr}/name"),
                message: "tool name must be a string".into(),
            });
        }
        None => {
            return Err(ToolSetError::Tool {
                tool: anon,
                pointer: fptr,
                message: "missing \"name\"".into(),
            });
        }
    };
    if name.chars().any(|c| c.is_control() || c == '"') {
        return Err(ToolSetError::Tool {
            tool: name,
            pointer: format!("{fptr}/name"),
            message: "tool name contains a quote or control character".into(),
        });
    }
    let description = match func.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(ToolSetError::Tool {
                tool: name,
                pointer: format!("{fptr}/description"),
                message: "description must be a string".into(),
            });
        }
    };
    let pptr = format!("{fptr}/parameters");
    let parameters = match func.get("parameters") {
        None | Some(Value::Null) => serde_json::json!({"type": "object", "properties": {}}),
        Some(p) => {
            normalise_parameters(p, &pptr).map_err(|(pointer, message)| ToolSetError::Tool {
                tool: name.clone(),
                pointer,
                message,
            })?
        }
    };
    Ok(Tool {
        name,
        description,
        parameters,
    })
}

/// Normalises a tool's `parameters` schema; `ptr` is its JSON pointer in the loaded document.
/// Errors are `(pointer, message)`.
pub fn normalise_parameters(schema: &Value, ptr: &str) -> Result<Value, (String, String)> {
    let Value::Object(_) = schema else {
        return Err((
            ptr.to_owned(),
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
    let mut out = normalise_schema(schema, ptr)?;
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
                    format!("{ptr}/type"),
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
    Ok(out)
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

fn normalise_schema(schema: &Value, ptr: &str) -> Result<Value, (String, String)> {
    let obj = match schema {
        Value::Object(o) => o,
        Value::Bool(_) => return Ok(schema.clone()),
        _ => {
            return Err((
                ptr.to_owned(),
                "expected a schema (object or boolean)".into(),
            ));
        }
    };
    let mut out = Map::new();
    for (key, value) in obj {
        let kptr = format!("{ptr}/{}", escape_pointer(key));
        let new = match key.as_str() {
            "type" => match normalise_type(value, &kptr)? {
                Some(t) => t,
                None => continue,
            },
            // BFCL's non-standard flag (`true`, `"True"`, or a list of names); optionality is
            // `required`'s business.
            "optional" => continue,
            "items" => match value {
                Value::Array(list) => Value::Array(normalise_list(list, &kptr)?),
                _ => normalise_schema(value, &kptr)?,
            },
            k if SUB_ONE.contains(&k) => normalise_schema(value, &kptr)?,
            k if SUB_LIST.contains(&k) => match value {
                Value::Array(list) => Value::Array(normalise_list(list, &kptr)?),
                _ => return Err((kptr, format!("\"{k}\" must be an array of schemas"))),
            },
            k if SUB_MAP.contains(&k) => match value {
                Value::Object(m) => {
                    let mut nm = Map::new();
                    for (pk, pv) in m {
                        let pptr = format!("{kptr}/{}", escape_pointer(pk));
                        nm.insert(pk.clone(), normalise_schema(pv, &pptr)?);
                    }
                    Value::Object(nm)
                }
                _ => return Err((kptr, format!("\"{k}\" must be an object of schemas"))),
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), new);
    }
    if !out.contains_key("type") && out.contains_key("properties") && !has_composition(&out) {
        out.insert("type".into(), Value::String("object".into()));
    }
    Ok(Value::Object(out))
}

fn has_composition(m: &Map<String, Value>) -> bool {
    ["anyOf", "oneOf", "allOf", "$ref"]
        .iter()
        .any(|k| m.contains_key(*k))
}

fn normalise_list(list: &[Value], ptr: &str) -> Result<Vec<Value>, (String, String)> {
    list.iter()
        .enumerate()
        .map(|(i, s)| normalise_schema(s, &format!("{ptr}/{i}")))
        .collect()
}

/// Returns the normalised `type` value, or `None` when the type constraint disappears (`any`).
fn normalise_type(value: &Value, ptr: &str) -> Result<Option<Value>, (String, String)> {
    let one = |name: &str, p: &str| -> Result<Option<&'static str>, (String, String)> {
        json_type_for(name).ok_or_else(|| (p.to_owned(), format!("unknown type name \"{name}\"")))
    };
    match value {
        Value::String(s) => Ok(one(s, ptr)?.map(|t| Value::String(t.into()))),
        Value::Array(list) => {
            let mut out: Vec<Value> = Vec::new();
            for (i, v) in list.iter().enumerate() {
                let p = format!("{ptr}/{i}");
                let Value::String(s) = v else {
                    return Err((p, "type names must be strings".into()));
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
            ptr.to_owned(),
            "\"type\" must be a string or an array of strings".into(),
        )),
    }
}

/// Escapes a key for use in a JSON pointer (`~` → `~0`, `/` → `~1`).
pub fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
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
