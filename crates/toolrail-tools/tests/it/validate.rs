//! Validator: focused cases per envelope, parallel, auto, pythonic, and the feedback lines that go
//! back to the model.

use serde_json::json;
use std::path::PathBuf;
use toolrail_tools::envelope::Format;
use toolrail_tools::toolset::ToolSet;
use toolrail_tools::validate::{ValidateOptions, Validator};

fn sample(name: &str) -> ToolSet {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("sample_schemas")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    ToolSet::from_json_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn planner() -> Validator {
    Validator::new(&sample("planner_get_inputs.json")).unwrap()
}

const SINGLE: ValidateOptions = ValidateOptions {
    parallel: false,
    auto: false,
    lenient: false,
};
const PARALLEL: ValidateOptions = ValidateOptions {
    parallel: true,
    auto: false,
    lenient: false,
};
const AUTO: ValidateOptions = ValidateOptions {
    parallel: false,
    auto: true,
    lenient: false,
};

#[test]
fn every_sample_loads_with_a_description_and_compiles() {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("sample_schemas");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let set = ToolSet::from_json_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        assert!(
            set.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{path:?}: no description"
        );
        assert!(!set.is_empty());
        Validator::new(&set).unwrap();
        n += 1;
    }
    assert!(n >= 6, "{n} samples");
}

#[test]
fn seed_001_missing_required_args_message() {
    let r = planner().validate_output(
        Format::OpenAi,
        r#"{"name": "get_inputs", "arguments": {"display_template": "x"}}"#,
        SINGLE,
    );
    assert!(!r.is_valid());
    assert_eq!(
        r.feedback().as_deref(),
        Some("missing required args ['title', 'dialog'] for tool 'get_inputs'")
    );
    let pointers: Vec<_> = r.calls[0].issues.iter().map(|i| &i.keyword).collect();
    assert!(pointers.iter().all(|k| *k == "required"), "{pointers:?}");
}

#[test]
fn seed_001_name_of_one_tool_arguments_of_another() {
    // The live bug of seed 001: get_inputs' name with send_messages' arguments.
    let r = planner().validate_output(
        Format::OpenAi,
        r#"{"name": "get_inputs", "arguments": {"recipients": ["a"], "body": "hi"}}"#,
        SINGLE,
    );
    let fb = r.feedback().unwrap();
    assert!(
        fb.contains("missing required args ['title', 'dialog'] for tool 'get_inputs'"),
        "{fb}"
    );
    assert!(
        fb.contains("unexpected args ['recipients', 'body'] for tool 'get_inputs'"),
        "{fb}"
    );
}

#[test]
fn nested_enum_error_has_its_pointer() {
    let r = planner().validate_output(
        Format::OpenAi,
        r#"{"name": "get_inputs", "arguments": {"title": "t", "dialog": [
            {"var": "a", "prompt": "p", "schema": {"kind": "banana"}}]}}"#,
        SINGLE,
    );
    assert!(!r.is_valid());
    let issue = &r.calls[0].issues[0];
    assert_eq!(issue.pointer, "/dialog/0/schema/kind");
    assert_eq!(issue.keyword, "enum");
    let fb = r.feedback().unwrap();
    assert!(
        fb.starts_with("invalid arg 'dialog' for tool 'get_inputs' at /dialog/0/schema/kind:"),
        "{fb}"
    );
    assert!(fb.contains("banana"), "{fb}");
}

#[test]
fn openai_and_llama3_keys() {
    let v = Validator::new(&sample("memory_llama31.json")).unwrap();
    let llama = r#"{"name": "search_memory", "parameters": {"query": "x", "max_results": "5"}}"#;
    assert!(
        v.validate_output(Format::Llama3, llama, SINGLE)
            .is_valid_call()
    );
    let r = v.validate_output(Format::OpenAi, llama, SINGLE);
    assert!(!r.is_valid());
    assert!(r.feedback().unwrap().contains("missing \"arguments\""));
    // max_results is declared as a string (as in seed 004): a number is a type error.
    let r = v.validate_output(
        Format::Llama3,
        r#"{"name": "search_memory", "parameters": {"query": "x", "max_results": 5}}"#,
        SINGLE,
    );
    assert_eq!(
        r.feedback().unwrap(),
        "invalid arg 'max_results' for tool 'search_memory' at /max_results: 5 is not of type \
         \"string\""
    );
}

/// Llama 3.1 prints `<|python_tag|>` before a call and `<|eom_id|>` after it when its special
/// tokens are rendered as text: the call between them is what is validated.
#[test]
fn llama3_calls_inside_python_tag_and_eom_id_are_read() {
    let v = Validator::new(&sample("memory_llama31.json")).unwrap();
    let call = r#"{"name": "search_memory", "parameters": {"query": "x"}}"#;
    for text in [
        format!("<|python_tag|>{call}"),
        format!("<|python_tag|>{call}<|eom_id|>"),
        format!("<|python_tag|> {call} <|eot_id|>"),
        format!("{call}<|eom_id|>"),
    ] {
        let report = v.validate_output(Format::Llama3, &text, SINGLE);
        assert!(report.is_valid_call(), "{text}: {:?}", report.messages());
        assert_eq!(report.calls[0].name, "search_memory");
    }
    // Anything else around the call is still refused.
    let report = v.validate_output(
        Format::Llama3,
        &format!("<|python_tag|>{call} and more"),
        SINGLE,
    );
    assert!(!report.is_valid(), "{:?}", report.messages());
}

#[test]
fn hermes_blocks() {
    let v = Validator::new(&sample("weather.json")).unwrap();
    let one = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    assert!(
        v.validate_output(Format::Hermes, one, SINGLE)
            .is_valid_call()
    );
    let r = v.validate_output(
        Format::Hermes,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
        SINGLE,
    );
    assert!(r.parse_error.is_some());
    assert!(r.feedback().unwrap().contains("expected '</tool_call>'"));
    let two = format!("{one}\n{one}");
    assert!(!v.validate_output(Format::Hermes, &two, SINGLE).is_valid());
    assert_eq!(
        v.validate_output(Format::Hermes, &two, PARALLEL)
            .tool_calls()
            .len(),
        2
    );
}

#[test]
fn gemma_calls_and_unknown_tools() {
    let v = Validator::new(&sample("memory_llama31.json")).unwrap();
    let r = v.validate_output(
        Format::Gemma,
        r#"call:set_fact{"key": "k", "value": "v"}"#,
        SINGLE,
    );
    assert!(r.is_valid_call());
    let r = v.validate_output(Format::Gemma, r#"call:forget_fact{"key": "k"}"#, SINGLE);
    assert_eq!(
        r.feedback().unwrap(),
        "unknown tool 'forget_fact'; available tools: ['search_memory', 'get_fact', 'set_fact']"
    );
}

#[test]
fn bounds_and_enums() {
    let v = Validator::new(&sample("weather.json")).unwrap();
    let ok =
        r#"{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius", "days": 3}}"#;
    assert!(
        v.validate_output(Format::OpenAi, ok, SINGLE)
            .is_valid_call()
    );
    let r = v.validate_output(
        Format::OpenAi,
        r#"{"name": "get_weather", "arguments": {"city": "Oslo", "days": 9}}"#,
        SINGLE,
    );
    let fb = r.feedback().unwrap();
    assert!(fb.contains("at /days"), "{fb}");
    assert_eq!(r.calls[0].issues[0].keyword, "maximum");
}

#[test]
fn pythonic_calls() {
    let v = planner();
    let ok = r#"get_inputs(title='Slots', dialog=[{"var": "slot", "prompt": "Pick one", "schema": {"kind": "choice", "options": ["9:00", "10:00"]}}], from_step=1)"#;
    let r = v.validate_output(Format::Pythonic, ok, SINGLE);
    assert!(r.is_valid_call(), "{:?}", r.feedback());
    assert_eq!(r.tool_calls()[0].arguments["from_step"], json!(1));
    // Keyword order does not matter to the validator.
    let r = v.validate_output(
        Format::Pythonic,
        r#"send_messages(recipients=["me"], body="hi", channel="email")"#,
        SINGLE,
    );
    assert!(r.is_valid_call(), "{:?}", r.feedback());
    let r = v.validate_output(Format::Pythonic, r#"send_messages("me", "hi")"#, SINGLE);
    assert!(r.feedback().unwrap().contains("positional"));
    let r = v.validate_output(
        Format::Pythonic,
        r#"send_messages(recipients=["me"], body=open("x"))"#,
        SINGLE,
    );
    assert!(r.feedback().unwrap().contains("not a Python literal"));
    let r = v.validate_output(
        Format::Pythonic,
        "send_messages(recipients=[], body=None)",
        SINGLE,
    );
    let fb = r.feedback().unwrap();
    assert!(
        fb.contains("at /body: null is not of type \"string\""),
        "{fb}"
    );
    assert!(fb.contains("at /recipients"), "{fb}");
}

#[test]
fn auto_accepts_plain_text_only_when_asked() {
    let v = planner();
    let text = "I need more details before I can plan this.";
    let r = v.validate_output(Format::OpenAi, text, SINGLE);
    assert!(!r.is_valid());
    assert_eq!(
        r.feedback().unwrap(),
        "no tool call found (expected a tool call in the openai format)"
    );
    let r = v.validate_output(Format::OpenAi, text, AUTO);
    assert!(r.is_valid() && !r.is_valid_call());
}

#[test]
fn parallel_json_list() {
    let v = Validator::new(&sample("memory_llama31.json")).unwrap();
    let text = r#"[{"name": "get_fact", "arguments": {"key": "a"}}, {"name": "set_fact", "arguments": {"key": "b"}}]"#;
    let r = v.validate_output(Format::OpenAi, text, PARALLEL);
    assert!(!r.is_valid());
    assert_eq!(
        r.feedback().unwrap(),
        "missing required args ['value'] for tool 'set_fact'"
    );
    assert!(r.calls[0].is_valid());
    let r = v.validate_output(Format::OpenAi, text, SINGLE);
    assert!(
        r.output_issues[0].contains("expected a single tool call, found a list of 2"),
        "{:?}",
        r.output_issues
    );
}

#[test]
fn recursive_ref_arguments() {
    let v = Validator::new(&sample("outline_recursive.json")).unwrap();
    let ok = r#"{"name": "create_outline", "arguments": {"document": "d", "root": {"title": "A", "children": [{"title": "B", "children": [{"title": "C"}]}]}}}"#;
    assert!(
        v.validate_output(Format::OpenAi, ok, SINGLE)
            .is_valid_call()
    );
    let bad = r#"{"name": "create_outline", "arguments": {"document": "d", "root": {"title": "A", "children": [{"children": []}]}}}"#;
    let r = v.validate_output(Format::OpenAi, bad, SINGLE);
    assert_eq!(
        r.feedback().unwrap(),
        "missing required keys ['title'] at /root/children/0 for tool 'create_outline'"
    );
}

#[test]
fn formats_are_asserted() {
    let v = Validator::new(&sample("bfcl_excerpt.json")).unwrap();
    let ok = r#"{"name": "weather.get_by_coordinates_date", "arguments": {"coordinates": [46.6, 1.9], "date": "2019-12-13"}}"#;
    assert!(
        v.validate_output(Format::OpenAi, ok, SINGLE)
            .is_valid_call()
    );
    let bad = ok.replace("2019-12-13", "13/12/2019");
    let r = v.validate_output(Format::OpenAi, &bad, SINGLE);
    assert_eq!(r.calls[0].issues[0].keyword, "format");
}
