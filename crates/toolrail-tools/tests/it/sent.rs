//! The tools as a client sends them: each schema as written, and where toolrail's reading
//! differs (`toolrail_tools::sent`).

use serde_json::json;
use toolrail_tools::toolset::ToolSet;

#[test]
fn a_bfcl_list_is_sent_as_written_and_each_reading_difference_is_named() {
    let doc = json!([{
        "name": "area",
        "description": "Area of a circle.",
        "parameters": {
            "type": "dict",
            "properties": {"radius": {"type": "float"}, "unit": {"type": "string"}},
            "required": ["radius"],
            "optional": []
        }
    }]);
    let set = ToolSet::from_value(&doc).unwrap();
    let sent = set.client_tools();
    assert_eq!(sent[0]["function"]["parameters"], doc[0]["parameters"]);
    assert_eq!(sent[0]["function"]["description"], "Area of a circle.");
    let differences = set.reading_differences();
    let lines: Vec<String> = differences.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "tool `area`, parameters/type: the client sends \"dict\", toolrail reads it as \"object\"",
            "tool `area`, parameters/properties/radius/type: the client sends \"float\", toolrail reads it as \"number\"",
            "tool `area`, parameters/optional: the client sends [], toolrail's reading drops it",
        ],
        "{lines:#?}"
    );
}

#[test]
fn a_missing_schema_is_sent_as_none_and_a_missing_type_is_a_difference() {
    let doc = json!({"tools": [
        {"name": "ping", "inputSchema": {"properties": {"host": {"type": "string"}}}},
        {"type": "function", "function": {"name": "now"}}
    ]});
    let set = ToolSet::from_value(&doc).unwrap();
    let sent = set.client_tools();
    assert_eq!(
        sent[0]["function"]["parameters"],
        json!({"properties": {"host": {"type": "string"}}})
    );
    assert!(sent[1]["function"].get("parameters").is_none(), "{sent:?}");
    let differences = set.reading_differences();
    assert_eq!(differences[0].pointer, "/type");
    assert_eq!(differences[0].sent, None);
    assert_eq!(differences[0].read, Some(json!("object")));
    assert!(
        differences.iter().any(|d| d.tool == "now"),
        "{differences:?}"
    );
}

#[test]
fn a_clean_openai_list_is_sent_unchanged_with_no_differences() {
    let doc = json!([{"type": "function", "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    }}]);
    let set = ToolSet::from_value(&doc).unwrap();
    assert_eq!(set.client_tools(), doc.as_array().unwrap().clone());
    assert!(set.reading_differences().is_empty());
}

#[test]
fn a_gemini_schema_is_sent_as_toolrail_converts_it_and_says_so() {
    let doc = json!([{"functionDeclarations": [{
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "required": ["city"]}
    }]}]);
    let set = ToolSet::from_value(&doc).unwrap();
    let sent = set.client_tools();
    assert_eq!(
        sent[0]["function"]["parameters"]["properties"]["city"]["type"],
        "string"
    );
    let lines: Vec<String> = set
        .reading_differences()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        lines,
        [
            "tool `get_weather`, parameters: written as a Gemini OpenAPI schema, which a client converts before sending; the prompt shows toolrail's conversion, and a client's may differ"
        ],
        "{lines:#?}"
    );
}
