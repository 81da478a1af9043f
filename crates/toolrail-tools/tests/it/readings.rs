//! Tool sets refused where a reading exists (issue 25), through the tool-call grammar: a `type`
//! written `"str, optional"`, a BFCL-style array with its items' enum, items with an empty enum,
//! and a required property the closed arguments object leaves out. Strict grammars refuse
//! naming keyword, value and pointer; lenient ones take the reading with a `read:` warning, and
//! the grammar (checked with the engine) accepts the valid calls and rejects the others. A plain
//! JSON Schema (`grammar --schema`) reads loosely written types the same way.

use std::sync::Arc;

use serde_json::json;
use toolrail_gbnf::Grammar;
use toolrail_tools::envelope::Format;
use toolrail_tools::grammar::{GrammarOptions, schema_grammar, tool_call_grammar};
use toolrail_tools::shape::WarningKind;
use toolrail_tools::toolset::{ToolSet, read_loose_type};
use toolrail_tools::validate::{ValidateOptions, Validator};

fn options(lenient: bool) -> GrammarOptions {
    GrammarOptions {
        lenient,
        ..GrammarOptions::default()
    }
}

fn tool(parameters: serde_json::Value) -> ToolSet {
    ToolSet::from_value(&json!([{"type": "function", "function": {
        "name": "f", "description": "d", "parameters": parameters}}]))
    .unwrap()
}

fn lenient_grammar(set: &ToolSet) -> (Arc<Grammar>, Vec<String>) {
    let g = tool_call_grammar(set, &options(true)).unwrap_or_else(|e| panic!("{e}"));
    let parsed = Grammar::parse(&g.text).unwrap_or_else(|e| panic!("{e}\n{}", g.text));
    (Arc::new(parsed), g.warnings)
}

fn call(g: &Arc<Grammar>, args: &str) -> bool {
    let text = format!(r#"{{"name": "f", "arguments": {args}}}"#);
    toolrail_engine::check(g, text.as_bytes()).is_accepted()
}

#[test]
fn loose_type_names_read_as_json_schema_types() {
    assert_eq!(
        read_loose_type("str, optional"),
        Some((Some("string"), true))
    );
    assert_eq!(
        read_loose_type("Optional int"),
        Some((Some("integer"), true))
    );
    assert_eq!(
        read_loose_type("float,optional"),
        Some((Some("number"), true))
    );
    assert_eq!(
        read_loose_type("bool, optional"),
        Some((Some("boolean"), true))
    );
    assert_eq!(
        read_loose_type("dict, optional"),
        Some((Some("object"), true))
    );
    assert_eq!(
        read_loose_type("list, optional"),
        Some((Some("array"), true))
    );
    assert_eq!(read_loose_type(" str "), Some((Some("string"), false)));
    assert_eq!(read_loose_type("str or int"), None);
    assert_eq!(read_loose_type("optional"), None);
    assert_eq!(read_loose_type("widget, optional"), None);
}

#[test]
fn str_optional_is_refused_strictly_and_read_leniently() {
    let set = tool(json!({"type": "object", "properties": {
        "city": {"type": "str"},
        "days": {"type": "int, optional"}},
        "required": ["city", "days"]}));
    let w: Vec<_> = set
        .warnings()
        .iter()
        .filter(|w| w.kind == WarningKind::TypeReading)
        .collect();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].pointer, "/0/function/parameters/properties/days/type");
    let e = tool_call_grammar(&set, &options(false))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "tool 'f': unsupported: type at /0/function/parameters/properties/days/type: type \
         \"int, optional\" is not a JSON Schema type (lenient mode reads it as \"integer\", the \
         property not required)"
    );
    let (g, warnings) = lenient_grammar(&set);
    assert_eq!(
        warnings,
        [
            "read: type at /0/function/parameters/properties/days/type: type \"int, optional\" is \
          not a JSON Schema type; read as \"integer\", the property not required"
        ]
    );
    assert!(call(&g, r#"{"city": "Paris", "days": 3}"#));
    assert!(call(&g, r#"{"city": "Paris"}"#));
    assert!(!call(&g, r#"{"days": 3}"#));
    assert!(!call(&g, r#"{"city": "Paris", "days": "3"}"#));
    assert!(!call(&g, r#"{"city": 1}"#));
    // an unreadable name is still an error when loading
    let bad = ToolSet::from_value(&json!([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"a": {"type": "widget, optional"}}}}}]));
    assert!(
        bad.unwrap_err()
            .to_string()
            .contains("unknown type name \"widget, optional\"")
    );
}

#[test]
fn a_plain_schema_reads_str_optional_only_leniently() {
    let schema = json!({"type": "object", "properties": {
        "city": {"type": "str"},
        "days": {"type": "int, optional"},
        "tags": {"type": "array", "items": {"anyOf": [{"type": "float"}, {"type": "bool"}]}}},
        "required": ["city", "days"]});
    let e = schema_grammar(&schema, &options(false))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "unsupported: type at #/properties/city/type: type \"str\" is not a JSON Schema type \
         (lenient mode reads it as \"string\")"
    );
    let g = schema_grammar(&schema, &options(true)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        g.warnings,
        [
            "read: type at #/properties/city/type: type \"str\" is not a JSON Schema type; read \
             as \"string\"",
            "read: type at #/properties/days/type: type \"int, optional\" is not a JSON Schema \
             type; read as \"integer\", the property not required",
            "read: type at #/properties/tags/items/anyOf/0/type: type \"float\" is not a JSON \
             Schema type; read as \"number\"",
            "read: type at #/properties/tags/items/anyOf/1/type: type \"bool\" is not a JSON \
             Schema type; read as \"boolean\"",
        ]
    );
    let g = Arc::new(Grammar::parse(&g.text).unwrap_or_else(|e| panic!("{e}\n{}", g.text)));
    let accepts = |text: &str| toolrail_engine::check(&g, text.as_bytes()).is_accepted();
    assert!(accepts(
        r#"{"city": "Paris", "days": 3, "tags": [1.5, true]}"#
    ));
    assert!(accepts(r#"{"city": "Paris"}"#));
    assert!(!accepts(r#"{"days": 3}"#));
    assert!(!accepts(r#"{"city": "Paris", "tags": ["x"]}"#));
    // nothing to read: the schema converts as it is, with no warning
    let plain = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    assert!(
        schema_grammar(&plain, &options(false))
            .unwrap()
            .warnings
            .is_empty()
    );
}

#[test]
fn a_bfcl_array_with_its_items_enum_is_read_leniently() {
    let set = tool(json!({"type": "object", "properties": {
        "units": {"type": "array", "enum": ["celsius", "fahrenheit"]}},
        "required": ["units"]}));
    let e = tool_call_grammar(&set, &options(false))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "tool 'f': unsupported: required at #: required property \"units\" can never be present: \
         its schema at #/properties/units admits no value (type \"array\" and an enum of strings \
         clash); no object is valid"
    );
    let (g, warnings) = lenient_grammar(&set);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "read: enum at #/properties/units: type is \"array\" but enum lists only strings: the \
             keywords clash, no value is valid; read as the enum of the items: items at \
             /properties/units/items is"
        ),
        "{warnings:?}"
    );
    assert!(call(&g, r#"{"units": ["celsius"]}"#));
    assert!(call(&g, r#"{"units": []}"#));
    assert!(!call(&g, r#"{"units": "celsius"}"#));
    assert!(!call(&g, r#"{"units": ["kelvin"]}"#));
}

#[test]
fn items_with_an_empty_enum_are_the_empty_array_in_a_tool() {
    let set = tool(json!({"type": "object", "properties": {
        "tags": {"type": "array", "items": {"enum": []}}}, "required": ["tags"]}));
    for lenient in [false, true] {
        let g = tool_call_grammar(&set, &options(lenient)).unwrap();
        let g = Arc::new(Grammar::parse(&g.text).unwrap());
        assert!(call(&g, r#"{"tags": []}"#));
        assert!(!call(&g, r#"{"tags": ["a"]}"#));
    }
}

#[test]
fn a_required_name_the_closed_object_leaves_out_is_read_leniently() {
    let set = tool(
        json!({"type": "object", "properties": {"search_query": {"type": "string"}},
        "required": ["query"]}),
    );
    let e = tool_call_grammar(&set, &options(false))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "tool 'f': unsupported: required at #: required property \"query\" can never be present: \
         additionalProperties admits no value for it; no object is valid"
    );
    let (g, warnings) = lenient_grammar(&set);
    assert_eq!(
        warnings,
        [
            "read: required at #: required property \"query\" is not under properties and \
          additionalProperties admits no value for it: no object is valid; read as \"query\" \
          admitted with any value"
        ]
    );
    assert!(call(&g, r#"{"query": "x"}"#));
    assert!(call(&g, r#"{"query": 1, "search_query": "x"}"#));
    assert!(!call(&g, r#"{"search_query": "x"}"#));
    assert!(!call(&g, r#"{"query": "x", "other": 1}"#));
    // the lenient validator admits the name too, and nothing else
    let lenient = Validator::with_readings(&set, true).unwrap();
    let valid = |args: &str| {
        let text = format!(r#"{{"name": "f", "arguments": {args}}}"#);
        lenient
            .validate_output(Format::OpenAi, &text, ValidateOptions::default())
            .is_valid()
    };
    assert!(valid(r#"{"query": 1, "search_query": "x"}"#));
    assert!(!valid(r#"{"search_query": "x"}"#));
    assert!(!valid(r#"{"query": "x", "other": 1}"#));
}

/// A lenient grammar and a lenient validator read the schema alike: the call the grammar
/// admits by a reading is valid, what the schema forbids besides is still refused; the strict
/// validator checks the schema as written (no value is valid).
#[test]
fn the_lenient_validator_checks_the_reading_the_lenient_grammar_enforces() {
    let set = tool(
        json!({"type": "object", "required": ["n", "units"], "properties": {
        "n": {"type": "integer", "enum": ["1", "2", "3"]},
        "units": {"type": "array", "items": {"type": "string"}, "enum": ["a", "b"],
                  "maxItems": 1}}}),
    );
    let (g, warnings) = lenient_grammar(&set);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    let lenient = Validator::with_readings(&set, true).unwrap();
    let strict = Validator::new(&set).unwrap();
    let check = |v: &Validator, args: &str| {
        let text = format!(r#"{{"name": "f", "arguments": {args}}}"#);
        v.validate_output(Format::OpenAi, &text, ValidateOptions::default())
            .is_valid()
    };
    let good = r#"{"n": 2, "units": ["a"]}"#;
    assert!(call(&g, good));
    assert!(check(&lenient, good));
    assert!(!check(&strict, good));
    for bad in [
        r#"{"n": "2", "units": ["a"]}"#,
        r#"{"n": 4, "units": ["a"]}"#,
        r#"{"n": 2, "units": ["c"]}"#,
    ] {
        assert!(!call(&g, bad), "{bad}");
        assert!(!check(&lenient, bad), "{bad}");
    }
    // maxItems is the schema's own: the validator checks it as written
    assert!(!check(&lenient, r#"{"n": 2, "units": ["a", "b"]}"#));
}
