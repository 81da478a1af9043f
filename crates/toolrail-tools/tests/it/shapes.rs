//! Tool definitions in every shape people paste: the real sets in `../shared/corpus/tool-sets/`
//! (MCP, Anthropic, Gemini, OpenAI) load in their own shape to the same grammar as the same tools
//! rewritten by hand into OpenAI's shape, and no key of a tool definition or its wrapper is
//! dropped without a warning or note; then one test per shape and per kind of warning.

use std::path::PathBuf;

use serde_json::{Map, Value, json};
use toolrail_tools::envelope::Format;
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::shape::{Severity, ToolSetShape, ToolShape, WarningKind};
use toolrail_tools::toolset::{ToolSet, ToolSetError};

/// `../shared/corpus/tool-sets/`; missing: a failure under `CI=true`, otherwise None (a skip).
fn corpus() -> Option<PathBuf> {
    toolrail_testkit::corpus("tool-sets")
}

/// The corpus files (every `.json` but the manifest), sorted; None: see [`corpus`].
fn corpus_files() -> Option<Vec<PathBuf>> {
    let corpus = corpus()?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap_or_else(|e| panic!("{}: {e}", corpus.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| p.file_name().is_some_and(|n| n != "manifest.json"))
        .collect();
    files.sort();
    Some(files)
}

/// The ecosystem a corpus file comes from (its file-name prefix).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Source {
    Mcp,
    Anthropic,
    Gemini,
    OpenAi,
}

fn source_of(path: &std::path::Path) -> Source {
    let name = path.file_name().unwrap().to_string_lossy();
    match name.split("__").next().unwrap() {
        "mcp" => Source::Mcp,
        "anthropic" => Source::Anthropic,
        "gemini" => Source::Gemini,
        "openai" => Source::OpenAi,
        other => panic!("{name}: unknown prefix {other}"),
    }
}

/// Gemini's OpenAPI type names in lower case, written here independently of the loader.
fn lower_types(schema: &Value) -> Value {
    match schema {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("type", Value::String(t)) => Value::String(t.to_lowercase()),
                        // property names are not schemas: keep the keys, map the values
                        ("properties", Value::Object(props)) => Value::Object(
                            props
                                .iter()
                                .map(|(p, s)| (p.clone(), lower_types(s)))
                                .collect(),
                        ),
                        ("items", s) => lower_types(s),
                        _ => v.clone(),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The raw tool definitions of a corpus file, each with its JSON pointer, the keys the loader
/// reads in it, and the same tool in OpenAI's shape.
struct RawTool {
    pointer: String,
    object: Map<String, Value>,
    read: &'static [&'static str],
    openai: Value,
}

fn raw_tools(source: Source, doc: &Value) -> Vec<RawTool> {
    let (list, base) = match source {
        Source::Mcp => (&doc["tools"], "/tools"),
        Source::Gemini => (&doc["functionDeclarations"], "/functionDeclarations"),
        Source::Anthropic | Source::OpenAi => (doc, ""),
    };
    let mut out = Vec::new();
    for (i, t) in list.as_array().unwrap().iter().enumerate() {
        let pointer = format!("{base}/{i}");
        let object = t.as_object().unwrap().clone();
        let (function, schema, read): (&Value, Option<Value>, &'static [&'static str]) =
            match source {
                Source::Mcp => (
                    t,
                    t.get("inputSchema").cloned(),
                    &["name", "description", "inputSchema"],
                ),
                Source::Anthropic => (
                    t,
                    t.get("input_schema").cloned(),
                    &["name", "description", "input_schema"],
                ),
                Source::Gemini => (
                    t,
                    t.get("parameters").map(lower_types),
                    &["name", "description", "parameters"],
                ),
                Source::OpenAi => (
                    &t["function"],
                    t["function"].get("parameters").cloned(),
                    &["type", "function"],
                ),
            };
        let mut f = Map::new();
        f.insert("name".into(), function["name"].clone());
        if let Some(d) = function.get("description") {
            f.insert("description".into(), d.clone());
        }
        if let Some(s) = schema {
            f.insert("parameters".into(), s);
        }
        out.push(RawTool {
            pointer,
            object,
            read,
            openai: json!({"type": "function", "function": Value::Object(f)}),
        });
    }
    out
}

/// Corpus sets whose schemas no grammar can honour as written, in any shape: `print_summary`
/// and `wolfram_alpha` require a property they do not declare (closed objects: no valid
/// arguments). Strictly refused naming `required` and `additionalProperties`; leniently the
/// required name is admitted with any value, with a `read:` warning. (`batch_tool` in
/// `parallel-tools` writes `types` for `type`: the Python-literal envelope refuses it strictly,
/// and leniently warns.)
const BROKEN_SETS: [&str; 2] = [
    "anthropic__anthropics__anthropic-cookbook__extracting-structured-json.json",
    "anthropic__anthropics__anthropic-cookbook__wolfram-alpha.json",
];

#[test]
fn every_corpus_set_gives_the_grammar_of_its_openai_rewrite() {
    let Some(files) = corpus_files() else {
        return;
    };
    assert!(files.len() >= 20, "only {} corpus files", files.len());
    let mut refused = std::collections::BTreeSet::new();
    let mut lenient_refused = std::collections::BTreeSet::new();
    let (mut strict_ok, mut lenient_ok) = (0usize, 0usize);
    let total = files.len();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let source = source_of(&path);
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let set = ToolSet::from_value(&doc).unwrap_or_else(|e| panic!("{file}: {e}"));
        let expected_shape = match source {
            Source::Mcp => ToolSetShape::McpToolsList,
            Source::Anthropic => ToolSetShape::AnthropicTools,
            Source::Gemini => ToolSetShape::GeminiFunctionDeclarations,
            Source::OpenAi => ToolSetShape::OpenAiTools,
        };
        assert_eq!(set.shape(), Some(expected_shape), "{file}");
        let raw = raw_tools(source, &doc);
        assert_eq!(set.len(), raw.len(), "{file}");
        let rewritten: Vec<Value> = raw.iter().map(|t| t.openai.clone()).collect();
        let openai = ToolSet::from_value(&Value::Array(rewritten))
            .unwrap_or_else(|e| panic!("{file} (OpenAI rewrite): {e}"));
        assert_eq!(openai.shape(), Some(ToolSetShape::OpenAiTools));
        // the bug this guards against: arguments silently gone
        for (tool, r) in set.tools().iter().zip(&raw) {
            let declared = r.openai["function"]["parameters"]["properties"]
                .as_object()
                .map_or(0, Map::len);
            assert_eq!(
                tool.property_names().len(),
                declared,
                "{file}: {}",
                tool.name
            );
        }
        for (format, lenient) in Format::ALL
            .into_iter()
            .flat_map(|f| [(f, false), (f, true)])
        {
            let options = GrammarOptions {
                format,
                lenient,
                ..GrammarOptions::default()
            };
            let ours = tool_call_grammar(&set, &options).map(|g| g.text);
            let theirs = tool_call_grammar(&openai, &options).map(|g| g.text);
            match (ours, theirs) {
                (Ok(ours), Ok(theirs)) => {
                    assert_eq!(ours, theirs, "{file} ({format:?})");
                    if format == Format::OpenAi {
                        if lenient {
                            lenient_ok += 1;
                        } else {
                            strict_ok += 1;
                        }
                    }
                }
                (Err(ours), Err(theirs)) => {
                    let (ours, theirs) = (ours.to_string(), theirs.to_string());
                    assert_eq!(ours, theirs, "{file} ({format:?})");
                    if lenient {
                        lenient_refused.insert(file.clone());
                    } else if format == Format::OpenAi {
                        // refused strictly: the clashing keywords named, at a pointer
                        assert!(
                            ours.contains("required at #") && ours.contains("additionalProperties"),
                            "{file}: {ours}"
                        );
                        refused.insert(file.clone());
                    }
                }
                (ours, theirs) => panic!("{file} ({format:?}): {ours:?} but {theirs:?}"),
            }
        }
        // no key dropped without a word: every key of a tool definition (and of OpenAI's inner
        // function object, and of the wrapper) is read or named by a warning or note at its place
        let named = |pointer: &str, key: &str| {
            set.warnings()
                .iter()
                .any(|w| w.pointer == pointer && w.key.as_deref() == Some(key))
        };
        for r in &raw {
            for key in r.object.keys() {
                let at = format!("{}/{key}", r.pointer);
                assert!(
                    r.read.contains(&key.as_str()) || named(&at, key),
                    "{file}: {at} neither read nor warned: {:?}",
                    set.warnings()
                );
            }
            if let Some(Value::Object(function)) = r.object.get("function") {
                for key in function.keys() {
                    let at = format!("{}/function/{key}", r.pointer);
                    let read = ["name", "description", "parameters"].contains(&key.as_str());
                    assert!(
                        read || named(&at, key),
                        "{file}: {at} neither read nor warned"
                    );
                }
            }
        }
        if let Value::Object(wrapper) = &doc {
            for key in wrapper.keys() {
                let read = ["tools", "functionDeclarations"].contains(&key.as_str());
                assert!(
                    read || named(&format!("/{key}"), key),
                    "{file}: /{key} neither read nor warned"
                );
            }
        }
    }
    // The sets whose own schemas are broken: refused the same way in both shapes, strictly;
    // every set converts leniently.
    println!(
        "tool-sets: {total} sets, strict ok {strict_ok}, strict refused with reason {}, \
         lenient ok {lenient_ok}",
        refused.len()
    );
    let refused: Vec<String> = refused.into_iter().collect();
    assert_eq!(refused, BROKEN_SETS);
    assert!(lenient_refused.is_empty(), "{lenient_refused:?}");
    assert_eq!(lenient_ok, total);
    assert_eq!(strict_ok + refused.len(), total);
}

#[test]
fn the_mcp_corpus_notes_its_known_keys_and_warns_about_the_rest() {
    let Some(corpus) = corpus() else {
        return;
    };
    let text = std::fs::read_to_string(corpus.join("mcp__server-filesystem.json")).unwrap();
    let set = ToolSet::from_json_str(&text).unwrap();
    let annotations = set
        .warnings()
        .iter()
        .find(|w| w.pointer == "/tools/0/annotations")
        .expect("annotations noted");
    assert_eq!(annotations.kind, WarningKind::IgnoredKey);
    assert_eq!(annotations.severity(), Severity::Note);
    assert_eq!(annotations.tool.as_deref(), Some("read_file"));
    let text = std::fs::read_to_string(corpus.join("mcp__cloudflare-docs.json")).unwrap();
    let set = ToolSet::from_json_str(&text).unwrap();
    let transport = set
        .warnings()
        .iter()
        .find(|w| w.key.as_deref() == Some("transport"))
        .expect("transport warned");
    assert_eq!(transport.kind, WarningKind::UnknownKey);
    assert_eq!(transport.pointer, "/transport");
    assert!(transport.tool.is_none());
}

fn weather_schema() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
}

#[test]
fn a_json_rpc_tools_list_response_loads_its_result() {
    let set = ToolSet::from_value(&json!({"jsonrpc": "2.0", "id": 1, "result": {
        "tools": [{"name": "get_weather", "inputSchema": weather_schema()}],
        "nextCursor": "page-2"}}))
    .unwrap();
    assert_eq!(set.shape(), Some(ToolSetShape::McpJsonRpcResponse));
    assert_eq!(set.tools()[0].property_names(), vec!["city"]);
    let cursor = &set.warnings()[0];
    assert_eq!(cursor.pointer, "/result/nextCursor");
    assert_eq!(cursor.kind, WarningKind::IgnoredKey);
    assert_eq!(set.warnings().len(), 1, "{:?}", set.warnings());
}

#[test]
fn a_json_rpc_error_response_is_an_error_saying_so() {
    let err = ToolSet::from_value(&json!({"jsonrpc": "2.0", "id": 1,
        "error": {"code": -32601, "message": "Method not found"}}))
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("/error") && msg.contains("Method not found"),
        "{msg}"
    );
}

#[test]
fn legacy_functions_load() {
    let set = ToolSet::from_value(&json!({"functions": [
        {"name": "get_weather", "description": "d", "parameters": weather_schema()}],
        "function_call": "auto"}))
    .unwrap();
    assert_eq!(set.shape(), Some(ToolSetShape::OpenAiFunctions));
    assert_eq!(set.tools()[0].required_names(), vec!["city"]);
    assert_eq!(set.warnings().len(), 1);
    assert_eq!(set.warnings()[0].key.as_deref(), Some("function_call"));
    assert_eq!(set.warnings()[0].severity(), Severity::Note);
}

#[test]
fn a_single_tool_of_each_shape_loads() {
    let cases = [
        (
            json!({"type": "function", "function": {"name": "w", "parameters": weather_schema()}}),
            ToolShape::OpenAi,
        ),
        (
            json!({"type": "function", "name": "w", "parameters": weather_schema(), "strict": true}),
            ToolShape::OpenAi,
        ),
        (
            json!({"name": "w", "inputSchema": weather_schema()}),
            ToolShape::Mcp,
        ),
        (
            json!({"name": "w", "input_schema": weather_schema(), "cache_control": {"type": "ephemeral"}}),
            ToolShape::Anthropic,
        ),
        (
            json!({"name": "w", "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "required": ["city"]}}),
            ToolShape::Gemini,
        ),
        (
            json!({"name": "w", "parametersJsonSchema": weather_schema()}),
            ToolShape::Gemini,
        ),
        (
            json!({"name": "w", "parameters": weather_schema()}),
            ToolShape::Function,
        ),
    ];
    let reference = ToolSet::from_value(&json!([{"name": "w", "parameters": weather_schema()}]))
        .unwrap()
        .tools()[0]
        .clone();
    for (doc, shape) in cases {
        let set = ToolSet::from_value(&doc).unwrap_or_else(|e| panic!("{doc}: {e}"));
        assert_eq!(set.shape(), Some(ToolSetShape::SingleTool(shape)), "{doc}");
        // the same reading (what a client sends differs: each schema as written)
        let tool = &set.tools()[0];
        assert_eq!(set.tools().len(), 1, "{doc}");
        assert_eq!(
            (
                &tool.name,
                &tool.description,
                &tool.parameters,
                &tool.custom_grammar
            ),
            (
                &reference.name,
                &reference.description,
                &reference.parameters,
                &reference.custom_grammar
            ),
            "{doc}"
        );
        assert!(
            set.warnings()
                .iter()
                .all(|w| w.severity() == Severity::Note),
            "{doc}: {:?}",
            set.warnings()
        );
    }
    // errors in a single tool point into it, with no list index
    let err = ToolSet::from_value(&json!({"name": "w", "inputSchema": {"type": "object",
        "properties": {"x": {"type": "flaot"}}}}))
    .unwrap_err();
    assert!(
        err.to_string().contains("/inputSchema/properties/x/type"),
        "{err}"
    );
}

#[test]
fn gemini_openapi_schemas_become_json_schema() {
    let set = ToolSet::from_value(
        &json!({"functionDeclarations": [{"name": "f", "parameters": {
        "type": "OBJECT",
        "propertyOrdering": ["b", "a"],
        "properties": {
            "a": {"type": "INTEGER", "format": "int32", "example": 3},
            "b": {"type": "STRING", "nullable": true, "enum": ["x", "y"], "format": "enum"},
            "c": {"type": "ARRAY", "items": {"type": "NUMBER", "format": "double"}},
            "d": {"type": "BOOLEAN"}
        },
        "required": ["a"]}}]}),
    )
    .unwrap();
    assert_eq!(set.shape(), Some(ToolSetShape::GeminiFunctionDeclarations));
    let p = &set.tools()[0].parameters;
    assert_eq!(
        p,
        &json!({"type": "object", "properties": {
            "b": {"type": ["string", "null"], "enum": ["x", "y", null]},
            "a": {"type": "integer", "examples": [3]},
            "c": {"type": "array", "items": {"type": "number"}},
            "d": {"type": "boolean"},
        }, "required": ["a"]})
    );
    // the dropped formats are said, each at its place
    let formats: Vec<&str> = set
        .warnings()
        .iter()
        .filter(|w| w.key.as_deref() == Some("format"))
        .map(|w| w.pointer.as_str())
        .collect();
    assert_eq!(
        formats,
        vec![
            "/functionDeclarations/0/parameters/properties/a/format",
            "/functionDeclarations/0/parameters/properties/b/format",
            "/functionDeclarations/0/parameters/properties/c/items/format",
        ]
    );
    // the properties come out in propertyOrdering's order in the grammar too
    let g = tool_call_grammar(&set, &GrammarOptions::default()).unwrap();
    let (b, a) = (
        g.text.find("\\\"b\\\"").unwrap(),
        g.text.find("\\\"a\\\"").unwrap(),
    );
    assert!(b < a, "{}", g.text);
}

#[test]
fn gemini_tools_lists_warn_about_built_in_tools() {
    let set = ToolSet::from_value(&json!([
        {"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT",
            "properties": {"q": {"type": "STRING"}}}}]},
        {"googleSearch": {}}
    ]))
    .unwrap();
    assert_eq!(set.shape(), Some(ToolSetShape::GeminiTools));
    assert_eq!(set.names(), vec!["f"]);
    let w = &set.warnings()[0];
    assert_eq!(w.kind, WarningKind::BuiltInTool);
    assert_eq!(w.pointer, "/1/googleSearch");
    assert!(w.to_string().contains("googleSearch"), "{w}");
    // a Gemini request body's `tools` too
    let set = ToolSet::from_value(&json!({"tools": [{"function_declarations": [
        {"name": "f", "parameters": {"type": "OBJECT"}}]}]}))
    .unwrap();
    assert_eq!(set.shape(), Some(ToolSetShape::GeminiTools));
}

#[test]
fn anthropic_server_tools_are_named_and_left_out() {
    let set = ToolSet::from_value(&json!([
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        {"name": "get_weather", "input_schema": weather_schema()}
    ]))
    .unwrap();
    assert_eq!(set.shape(), Some(ToolSetShape::AnthropicTools));
    assert_eq!(set.names(), vec!["get_weather"]);
    let w = &set.warnings()[0];
    assert_eq!(w.kind, WarningKind::BuiltInTool);
    assert_eq!(w.tool.as_deref(), Some("web_search"));
    assert!(
        w.message.contains("web_search_20250305") && w.message.contains("left out"),
        "{w}"
    );
}

#[test]
fn unknown_keys_are_warned_with_tool_pointer_and_key() {
    let set = ToolSet::from_value(&json!({"tools": [
        {"name": "get_weather", "inputSchema": weather_schema(), "inputschema": {},
         "annotations": {"readOnlyHint": true}},
        {"type": "function", "function": {"name": "g", "parameters": {}, "paramaters": {}},
         "extra": 1}
    ], "servers": []}))
    .unwrap();
    let found: Vec<(Option<&str>, &str, Option<&str>, WarningKind)> = set
        .warnings()
        .iter()
        .map(|w| {
            (
                w.tool.as_deref(),
                w.pointer.as_str(),
                w.key.as_deref(),
                w.kind,
            )
        })
        .collect();
    assert_eq!(
        found,
        vec![
            (None, "/servers", Some("servers"), WarningKind::UnknownKey),
            (
                Some("get_weather"),
                "/tools/0/inputschema",
                Some("inputschema"),
                WarningKind::UnknownKey
            ),
            (
                Some("get_weather"),
                "/tools/0/annotations",
                Some("annotations"),
                WarningKind::IgnoredKey
            ),
            (
                Some("g"),
                "/tools/1/extra",
                Some("extra"),
                WarningKind::UnknownKey
            ),
            (
                Some("g"),
                "/tools/1/function/paramaters",
                Some("paramaters"),
                WarningKind::UnknownKey
            ),
        ]
    );
    assert_eq!(set.shape(), Some(ToolSetShape::Mixed));
    let text = set.warnings()[1].to_string();
    assert!(
        text.contains("/tools/0/inputschema") && text.contains("`inputschema`"),
        "{text}"
    );
}

#[test]
fn a_tool_without_a_schema_says_it_takes_no_arguments() {
    let set =
        ToolSet::from_value(&json!([{"type": "function", "function": {"name": "now"}}])).unwrap();
    let w = &set.warnings()[0];
    assert_eq!(w.kind, WarningKind::NoSchema);
    assert_eq!(w.severity(), Severity::Warning);
    assert_eq!(
        w.message,
        "tool `now` has no parameter schema: it takes no arguments"
    );
    assert_eq!(w.pointer, "/0/function");
    // a tool with nothing but a name shows no shape: the MCP list stays an MCP list
    let set = ToolSet::from_value(&json!({"tools": [{"name": "now"},
        {"name": "get_weather", "inputSchema": weather_schema()}]}))
    .unwrap();
    assert_eq!(set.shape(), Some(ToolSetShape::McpToolsList));
    assert_eq!(set.warnings()[0].kind, WarningKind::NoSchema);
    // a key that looks like a schema but is not one of the shape's is not taken for it
    let set = ToolSet::from_value(&json!([{"type": "function", "function": {"name": "now",
        "input_schema": weather_schema()}}]))
    .unwrap();
    let kinds: Vec<WarningKind> = set.warnings().iter().map(|w| w.kind).collect();
    assert_eq!(kinds, vec![WarningKind::UnknownKey, WarningKind::NoSchema]);
}

#[test]
fn both_gemini_schema_keys_are_an_error() {
    let err = ToolSet::from_value(&json!({"functionDeclarations": [{"name": "f",
        "parameters": {"type": "OBJECT"}, "parametersJsonSchema": {"type": "object"}}]}))
    .unwrap_err();
    assert!(matches!(err, ToolSetError::Tool { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("/functionDeclarations/0/parametersJsonSchema"),
        "{err}"
    );
}

#[test]
fn an_unknown_document_names_the_accepted_shapes() {
    let err = ToolSet::from_value(&json!({"tool": []})).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("functionDeclarations") && msg.contains("JSON-RPC"),
        "{msg}"
    );
}

#[test]
fn a_deeply_nested_gemini_schema_is_an_error_not_a_stack_overflow() {
    // 100,000 nested `items` (built without json!, which serializes recursively)
    let mut v = json!({"type": "STRING"});
    for _ in 0..100_000 {
        let mut m = Map::new();
        m.insert("type".to_string(), json!("ARRAY"));
        m.insert("items".to_string(), v);
        v = Value::Object(m);
    }
    let mut props = Map::new();
    props.insert("a".to_string(), v);
    let mut params = Map::new();
    params.insert("type".to_string(), json!("OBJECT"));
    params.insert("properties".to_string(), Value::Object(props));
    let mut decl = Map::new();
    decl.insert("name".to_string(), json!("f"));
    decl.insert("parameters".to_string(), Value::Object(params));
    let mut doc = Map::new();
    doc.insert(
        "functionDeclarations".to_string(),
        Value::Array(vec![Value::Object(decl)]),
    );
    let doc = Value::Object(doc);
    let result = ToolSet::from_value(&doc).map(|_| ());
    // drop without recursion
    let mut stack = vec![doc];
    while let Some(mut x) = stack.pop() {
        match &mut x {
            Value::Object(m) => stack.extend(std::mem::take(m).into_iter().map(|(_, y)| y)),
            Value::Array(a) => stack.append(a),
            _ => {}
        }
    }
    let err = result.unwrap_err();
    assert!(err.to_string().contains("nested deeper"), "{err}");
    assert!(
        err.to_string()
            .contains("/functionDeclarations/0/parameters"),
        "{err}"
    );
}

#[test]
fn a_byte_order_mark_before_the_tools_is_skipped_and_said() {
    let text = "\u{feff}[{\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}]";
    let tools = ToolSet::from_text(text).unwrap();
    assert_eq!(tools.len(), 1);
    let first = &tools.warnings()[0];
    assert_eq!(first.kind, WarningKind::ByteOrderMark);
    assert_eq!(first.severity(), Severity::Note);
    assert!(first.message.contains("byte order mark"), "{first}");
    // Python sources too
    let tools = ToolSet::from_text("\u{feff}def f(x: int):\n    pass\n").unwrap();
    assert_eq!(tools.warnings()[0].kind, WarningKind::ByteOrderMark);
}
