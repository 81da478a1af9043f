//! Extraction of tool calls from unconstrained text: every unit case of seed 003 (named after
//! the seed's list), the `_call:` follow-up cases, and the other patterns.

use serde_json::{Value, json};
use toolrail_tools::call::ToolCall;
use toolrail_tools::extract::{CallPattern, ExtractOptions, extract_calls, extract_calls_with};

fn call(name: &str, args: Value) -> ToolCall {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    ToolCall::new(name, map)
}

fn calls_of(text: &str) -> Vec<ToolCall> {
    extract_calls(text).tool_calls()
}

fn patterns_of(text: &str) -> Vec<CallPattern> {
    extract_calls(text)
        .calls
        .iter()
        .map(|c| c.pattern)
        .collect()
}

// ---- seed 003: the 14 unit cases -------------------------------------------------------------

#[test]
fn seed003_single_bare_call() {
    let text = r#"call:get_country_info{country: "France"}"#;
    let ex = extract_calls(text);
    assert_eq!(
        ex.tool_calls(),
        vec![call("get_country_info", json!({"country": "France"}))]
    );
    assert_eq!(ex.calls[0].pattern, CallPattern::GemmaCall);
    assert_eq!(ex.calls[0].span, 0..text.len());
    assert!(ex.diagnostics.is_empty());
}

#[test]
fn seed003_back_to_back_calls() {
    assert_eq!(
        calls_of(
            r#"call:get_country_info{country: "France"}call:get_country_info{country: "Spain"}"#
        ),
        vec![
            call("get_country_info", json!({"country": "France"})),
            call("get_country_info", json!({"country": "Spain"})),
        ]
    );
}

#[test]
fn seed003_namespaced_verb() {
    assert_eq!(
        calls_of(r#"call:execute-bead:read-file{path: "/tmp/notes.md"}"#),
        vec![call("read-file", json!({"path": "/tmp/notes.md"}))]
    );
    assert_eq!(
        calls_of(r#"call:default_api:fetch_sales_data{region: "EU"}"#),
        vec![call("fetch_sales_data", json!({"region": "EU"}))]
    );
}

#[test]
fn seed003_mixed_snake_and_kebab_verbs_across_newlines() {
    let text = "I'll look both up.\ncall:get_country_info{country: \"France\"}\ncall:execute-bead:read-file{path: \"a.txt\"}\n";
    assert_eq!(
        calls_of(text),
        vec![
            call("get_country_info", json!({"country": "France"})),
            call("read-file", json!({"path": "a.txt"})),
        ]
    );
}

#[test]
fn seed003_tool_allowed_filter_drops_disallowed_verbs() {
    let options = ExtractOptions {
        allowed_tools: Some(vec!["get_country_info".to_owned()]),
    };
    let ex = extract_calls_with(
        r#"call:get_country_info{country: "France"} call:delete_everything{confirm: true}"#,
        &options,
    );
    assert_eq!(
        ex.tool_calls(),
        vec![call("get_country_info", json!({"country": "France"}))]
    );
    assert_eq!(ex.diagnostics.len(), 1);
    assert!(ex.diagnostics[0].message.contains("delete_everything"));
}

#[test]
fn seed003_mid_prose_narrative_call_rejected() {
    let ex = extract_calls(r#"The method narrative.call:foo{x: 1} is documented elsewhere."#);
    assert!(ex.calls.is_empty());
    assert!(ex.diagnostics.is_empty());
}

#[test]
fn seed003_whitespace_sentinel_accepted() {
    let ex = extract_calls(r#"Sure, I'll call:foo{x: 1}"#);
    assert_eq!(ex.tool_calls(), vec![call("foo", json!({"x": 1}))]);
    assert_eq!(ex.prose, "Sure, I'll");
}

#[test]
fn seed003_malformed_unterminated_brace_no_crash_no_call() {
    let ex = extract_calls(r#"call:foo{x: "1", y: [1, 2"#);
    assert!(ex.calls.is_empty());
    assert_eq!(ex.diagnostics.len(), 1);
    assert_eq!(ex.diagnostics[0].pattern, CallPattern::GemmaCall);
    assert_eq!(ex.diagnostics[0].at, 8, "points at the unclosed brace");
}

#[test]
fn seed003_inner_braces_inside_string_values_do_not_break_the_scanner() {
    let text =
        r#"call:write_file{path: "main.rs", content: "fn main() { println!(\"}\"); }"} and more"#;
    let ex = extract_calls(text);
    assert_eq!(
        ex.tool_calls(),
        vec![call(
            "write_file",
            json!({"path": "main.rs", "content": "fn main() { println!(\"}\"); }"})
        )]
    );
    assert_eq!(ex.prose, "and more");
}

#[test]
fn seed003_strict_json_args_fast_path() {
    assert_eq!(
        calls_of(r#"call:search{"query": "rust", "limit": 5, "tags": [true, null]}"#),
        vec![call(
            "search",
            json!({"query": "rust", "limit": 5, "tags": [true, null]})
        )]
    );
}

#[test]
fn seed003_unquoted_key_args_relaxed_path() {
    assert_eq!(
        calls_of(r#"call:get_weather{city: 'Paris', unit: `celsius`, days: 3}"#),
        vec![call(
            "get_weather",
            json!({"city": "Paris", "unit": "celsius", "days": 3})
        )]
    );
}

#[test]
fn seed003_cleaned_text_scrubbed_of_matched_span() {
    let ex =
        extract_calls(r#"Let me check the weather. call:get_weather{city: "Paris"} One moment."#);
    assert_eq!(ex.calls.len(), 1);
    assert_eq!(ex.prose, "Let me check the weather. One moment.");
    assert!(!ex.prose.contains("call:"));
}

#[test]
fn seed003_outer_call_with_inner_name_arguments_is_one_call() {
    let ex = extract_calls(r#"call:outer{"name": "inner", "arguments": {}}"#);
    assert_eq!(
        ex.tool_calls(),
        vec![call("outer", json!({"name": "inner", "arguments": {}}))]
    );
    assert_eq!(
        patterns_of(r#"call:outer{"name": "inner", "arguments": {}}"#),
        vec![CallPattern::GemmaCall]
    );
}

#[test]
fn seed003_multiline_nested_array_args() {
    let text = r#"Here is the analysis request:
call:default_api:analyze_data{
  data: [
    {month: "January", sales: 1200, regions: ["north", "south"]},
    {month: "February", sales: 1350, regions: ["north"]}
  ],
  metric: "growth"
}
"#;
    let ex = extract_calls(text);
    assert_eq!(
        ex.tool_calls(),
        vec![call(
            "analyze_data",
            json!({
                "data": [
                    {"month": "January", "sales": 1200, "regions": ["north", "south"]},
                    {"month": "February", "sales": 1350, "regions": ["north"]}
                ],
                "metric": "growth"
            })
        )]
    );
    assert_eq!(ex.prose, "Here is the analysis request:");
}

// ---- seed 003 follow-up commit: the `_call:` artifact ----------------------------------------

#[test]
fn seed003_underscore_call_artifact_alone() {
    let ex = extract_calls(r#"_call:get_country_info{country: "France"}"#);
    assert_eq!(
        ex.tool_calls(),
        vec![call("get_country_info", json!({"country": "France"}))]
    );
    assert_eq!(
        ex.calls[0].span.start, 0,
        "the underscore belongs to the call"
    );
    assert_eq!(ex.prose, "");
}

#[test]
fn seed003_underscore_and_bare_back_to_back() {
    assert_eq!(
        calls_of(
            r#"_call:get_country_info{country: "France"}call:get_country_info{country: "Japan"}"#
        ),
        vec![
            call("get_country_info", json!({"country": "France"})),
            call("get_country_info", json!({"country": "Japan"})),
        ]
    );
}

// ---- other seed-003 rules ----------------------------------------------------------------------

#[test]
fn malformed_args_drop_only_that_invocation() {
    let ex = extract_calls(r#"call:a{x: 1} call:b{x: not json at all} call:c{y: 2}"#);
    assert_eq!(
        ex.tool_calls(),
        vec![call("a", json!({"x": 1})), call("c", json!({"y": 2}))]
    );
    assert_eq!(ex.diagnostics.len(), 1);
    assert!(ex.diagnostics[0].message.starts_with("call:b"));
}

#[test]
fn sentinels_other_than_whitespace() {
    for text in [
        "(call:f{a: 1})",
        "[call:f{a: 1}]",
        ">call:f{a: 1}",
        "x;call:f{a: 1}",
        "x,call:f{a: 1}",
        "ns:call:f{a: 1}",
        "<|tool_call>call:f{a: 1}<tool_call|>",
    ] {
        assert_eq!(calls_of(text), vec![call("f", json!({"a": 1}))], "{text}");
    }
    assert!(calls_of("xcall:f{a: 1}").is_empty());
    assert!(calls_of("x.call:f{a: 1}").is_empty());
}

#[test]
fn gemma_quote_token_in_arguments() {
    assert_eq!(
        calls_of(r#"<|tool_call>call:get_weather{location:<|"|>Paris, France<|"|>}<tool_call|>"#),
        vec![call("get_weather", json!({"location": "Paris, France"}))]
    );
}

#[test]
fn trailing_commas_are_not_relaxed() {
    let ex = extract_calls("call:f{a: 1,}");
    assert!(ex.calls.is_empty());
    assert_eq!(ex.diagnostics.len(), 1);
}

#[test]
fn call_inside_a_tool_call_string_is_not_a_second_call() {
    let text =
        r#"<tool_call>{"name": "note", "arguments": {"text": "then call:foo{x: 1}"}}</tool_call>"#;
    assert_eq!(
        calls_of(text),
        vec![call("note", json!({"text": "then call:foo{x: 1}"}))]
    );
}

#[test]
fn gemma_call_inside_a_bare_json_string_is_not_a_call() {
    let text = r#"{"name": "note", "arguments": {"text": "later, call:foo{x: 1}"}}"#;
    let ex = extract_calls(text);
    assert_eq!(
        ex.tool_calls(),
        vec![call("note", json!({"text": "later, call:foo{x: 1}"}))]
    );
    assert_eq!(ex.calls[0].pattern, CallPattern::BareJson);
}

#[test]
fn gemma_call_inside_tool_call_tag() {
    assert_eq!(
        calls_of("<tool_call>call:get_weather{city: \"Oslo\"}</tool_call>"),
        vec![call("get_weather", json!({"city": "Oslo"}))]
    );
}

#[test]
fn gemma_wrapper_tokens_leave_with_the_call() {
    let ex = extract_calls("Checking. <|tool_call>call:f{a: 1}<tool_call|> Done.");
    assert_eq!(ex.tool_calls(), vec![call("f", json!({"a": 1}))]);
    assert_eq!(ex.prose, "Checking. Done.");
}

// ---- <tool_call> -------------------------------------------------------------------------------

#[test]
fn tool_call_tag_with_json() {
    let text = "I'll check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    let ex = extract_calls(text);
    assert_eq!(
        ex.tool_calls(),
        vec![call("get_weather", json!({"city": "Paris"}))]
    );
    assert_eq!(ex.calls[0].pattern, CallPattern::ToolCallTag);
    assert_eq!(ex.calls[0].span, 12..text.len());
    assert_eq!(ex.prose, "I'll check.");
}

#[test]
fn tool_call_tags_several() {
    let text = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", \"parameters\": {\"k\": 1}}</tool_call>";
    assert_eq!(
        calls_of(text),
        vec![call("a", json!({})), call("b", json!({"k": 1}))]
    );
}

#[test]
fn tool_call_tag_with_array_and_stream_of_objects() {
    let text = "<tool_call>[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {}}]</tool_call>";
    assert_eq!(
        calls_of(text),
        vec![call("a", json!({})), call("b", json!({}))]
    );
    let text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>";
    assert_eq!(
        calls_of(text),
        vec![call("a", json!({})), call("b", json!({}))]
    );
}

#[test]
fn tool_call_tag_malformed_json_says_where() {
    let text = "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1,}}</tool_call>";
    let ex = extract_calls(text);
    assert!(ex.calls.is_empty());
    assert_eq!(ex.diagnostics.len(), 1);
    let d = &ex.diagnostics[0];
    assert_eq!(d.pattern, CallPattern::ToolCallTag);
    assert_eq!(d.span, 0..text.len());
    // serde_json reports the position of the offending `}` after the trailing comma.
    assert_eq!(&text[d.at..d.at + 1], "}", "{d:?}");
    assert!(d.message.contains("does not parse"), "{}", d.message);
    // The malformed block stays in the prose and the bare-JSON sweep does not dig into it.
    assert_eq!(ex.prose, text);
}

#[test]
fn tool_call_tag_without_closing_tag() {
    let ex = extract_calls("<tool_call>\n{\"name\": \"a\", \"arguments\": {\"k\": \"v\"}}");
    assert_eq!(ex.tool_calls(), vec![call("a", json!({"k": "v"}))]);
    assert_eq!(ex.diagnostics.len(), 1);
    assert!(ex.diagnostics[0].message.contains("no closing"));
}

#[test]
fn tool_call_tag_unclosed_then_another_tag() {
    let text = "<tool_call>{\"name\": \"a\", \"arguments\": {}}\n<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";
    let ex = extract_calls(text);
    assert_eq!(
        ex.tool_calls(),
        vec![call("a", json!({})), call("b", json!({}))]
    );
    assert_eq!(ex.prose, "");
}

#[test]
fn tool_call_tag_not_an_envelope() {
    let ex = extract_calls("<tool_call>{\"tool\": \"a\"}</tool_call>");
    assert!(ex.calls.is_empty());
    assert!(ex.diagnostics[0].message.contains("not a tool call"));
}

#[test]
fn tool_call_tag_with_qwen_coder_function() {
    let text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
    let ex = extract_calls(text);
    assert_eq!(
        ex.tool_calls(),
        vec![call("get_weather", json!({"city": "Paris", "days": 3}))]
    );
    assert_eq!(ex.calls[0].pattern, CallPattern::ToolCallTag);
}

#[test]
fn tool_call_tag_with_pythonic_body() {
    assert_eq!(
        calls_of("<tool_call>get_weather(city=\"Paris\")</tool_call>"),
        vec![call("get_weather", json!({"city": "Paris"}))]
    );
}

#[test]
fn arguments_as_json_string() {
    assert_eq!(
        calls_of(r#"<tool_call>{"name": "a", "arguments": "{\"k\": 2}"}</tool_call>"#),
        vec![call("a", json!({"k": 2}))]
    );
}

// ---- <function=...> ------------------------------------------------------------------------------

#[test]
fn function_tag_with_json_body() {
    let text = r#"<function=get_weather>{"city": "Paris"}</function>"#;
    let ex = extract_calls(text);
    assert_eq!(
        ex.tool_calls(),
        vec![call("get_weather", json!({"city": "Paris"}))]
    );
    assert_eq!(ex.calls[0].pattern, CallPattern::FunctionTag);
    assert_eq!(ex.calls[0].span, 0..text.len());
}

#[test]
fn function_tag_with_parameters() {
    let text = "<function=run>\n<parameter=cmd>\nls -la\n</parameter>\n</function>";
    assert_eq!(calls_of(text), vec![call("run", json!({"cmd": "ls -la"}))]);
    assert_eq!(patterns_of(text), vec![CallPattern::FunctionTag]);
}

#[test]
fn function_tag_bad_json_body() {
    let ex = extract_calls(r#"<function=a>{"k": }</function>"#);
    assert!(ex.calls.is_empty());
    assert_eq!(ex.diagnostics[0].pattern, CallPattern::FunctionTag);
    assert_eq!(ex.diagnostics[0].at, 18);
}

#[test]
fn function_paren_forms() {
    for text in [
        r#"<function=get_weather(city="Paris", days=2)>"#,
        r#"<function=get_weather(city="Paris", days=2)></function>"#,
        r#"<function=get_weather(city="Paris", days=2)</function>"#,
        r#"<function=get_weather({"city": "Paris", "days": 2})>"#,
    ] {
        let ex = extract_calls(text);
        assert_eq!(
            ex.tool_calls(),
            vec![call("get_weather", json!({"city": "Paris", "days": 2}))],
            "{text}"
        );
        assert_eq!(ex.calls[0].pattern, CallPattern::FunctionParen);
        assert_eq!(ex.calls[0].span, 0..text.len(), "{text}");
    }
}

// ---- <tool_code> ----------------------------------------------------------------------------------

#[test]
fn tool_code_with_json() {
    let text = r#"<tool_code>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_code>"#;
    assert_eq!(calls_of(text), vec![call("get_time", json!({"tz": "UTC"}))]);
    assert_eq!(patterns_of(text), vec![CallPattern::ToolCode]);
}

#[test]
fn tool_code_with_print_and_namespace() {
    let text =
        "```tool_code\n<tool_code>\nprint(default_api.get_weather(city='Paris'))\n</tool_code>";
    let ex = extract_calls(text);
    assert_eq!(
        ex.tool_calls(),
        vec![call("get_weather", json!({"city": "Paris"}))]
    );
    assert_eq!(ex.calls[0].pattern, CallPattern::ToolCode);
}

#[test]
fn tool_code_with_code_fence() {
    let text = "<tool_code>\n```python\nget_weather(city=\"Oslo\")\n```\n</tool_code>";
    assert_eq!(
        calls_of(text),
        vec![call("get_weather", json!({"city": "Oslo"}))]
    );
}

// ---- Llama name.call(...) ---------------------------------------------------------------------------

#[test]
fn llama_builtin_dot_call() {
    let text = r#"<|python_tag|>brave_search.call(query="weather in Menlo Park")"#;
    let ex = extract_calls(text);
    assert_eq!(
        ex.tool_calls(),
        vec![call(
            "brave_search",
            json!({"query": "weather in Menlo Park"})
        )]
    );
    assert_eq!(ex.calls[0].pattern, CallPattern::LlamaDotCall);
    assert_eq!(ex.prose, "");
}

#[test]
fn llama_dot_call_positional_is_diagnosed() {
    let ex = extract_calls(r#"wolfram_alpha.call("2+2")"#);
    assert!(ex.calls.is_empty());
    assert_eq!(ex.diagnostics[0].pattern, CallPattern::LlamaDotCall);
    assert!(ex.diagnostics[0].message.contains("positional"));
}

#[test]
fn llama_dot_call_inside_a_bare_json_string_is_not_a_call() {
    let text = r#"{"name": "log", "arguments": {"line": "ran brave_search.call(query=\"x\")"}}"#;
    assert_eq!(patterns_of(text), vec![CallPattern::BareJson]);
}

// ---- bare JSON ------------------------------------------------------------------------------------

#[test]
fn bare_json_arguments_and_parameters_envelopes() {
    let ex = extract_calls(
        r#"Calling now: {"name": "search_memory", "parameters": {"query": "X", "max_results": "5"}} ok"#,
    );
    assert_eq!(
        ex.tool_calls(),
        vec![call(
            "search_memory",
            json!({"query": "X", "max_results": "5"})
        )]
    );
    assert_eq!(ex.calls[0].pattern, CallPattern::BareJson);
    assert_eq!(ex.prose, "Calling now: ok");
    assert_eq!(
        calls_of(r#"{"name": "a", "arguments": {"b": {"name": "c", "arguments": {}}}}"#),
        vec![call("a", json!({"b": {"name": "c", "arguments": {}}}))],
        "an envelope inside the arguments is not a second call"
    );
}

#[test]
fn bare_json_array_of_envelopes() {
    let text = r#"[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]"#;
    let ex = extract_calls(text);
    assert_eq!(
        ex.tool_calls(),
        vec![call("a", json!({})), call("b", json!({"x": 1}))]
    );
    assert_eq!(ex.prose, "");
}

#[test]
fn bare_json_inside_non_envelope_wrapper_and_fences() {
    let text = "```json\n{\"tool_calls\": [{\"name\": \"a\", \"arguments\": {}}]}\n```";
    assert_eq!(calls_of(text), vec![call("a", json!({}))]);
    assert_eq!(
        calls_of(r#"{"type": "function", "function": {"name": "f", "arguments": "{}"}}"#),
        vec![call("f", json!({}))]
    );
}

#[test]
fn bare_json_without_arguments_is_not_a_call() {
    assert!(calls_of(r#"The user is {"name": "Bob", "age": 3}."#).is_empty());
}

#[test]
fn bare_json_broken_envelope_is_diagnosed() {
    let ex = extract_calls(r#"{"name": "a", "arguments": {"x": 1} "#);
    assert!(ex.calls.is_empty());
    assert_eq!(ex.diagnostics.len(), 1);
    assert_eq!(ex.diagnostics[0].pattern, CallPattern::BareJson);
}

#[test]
fn broken_envelope_does_not_hide_a_later_one() {
    let text = r#"{"name": "a", "arguments": {"x": 1} then {"name": "b", "arguments": {}}"#;
    let ex = extract_calls(text);
    assert_eq!(ex.tool_calls(), vec![call("b", json!({}))]);
    assert_eq!(ex.diagnostics.len(), 1);
    assert_eq!(ex.diagnostics[0].at, 0);
}

#[test]
fn bad_arguments_string_is_diagnosed_where_it_is() {
    let text = r#"Result: {"name": "a", "arguments": "not json"}"#;
    let ex = extract_calls(text);
    assert!(ex.calls.is_empty());
    assert_eq!(ex.diagnostics[0].at, 8);
    assert!(ex.diagnostics[0].message.contains("not a JSON object"));
}

#[test]
fn python_tag_before_bare_json() {
    let ex = extract_calls(r#"<|python_tag|>{"name": "a", "parameters": {}}"#);
    assert_eq!(ex.tool_calls(), vec![call("a", json!({}))]);
    assert_eq!(ex.prose, "");
}

#[test]
fn python_tag_and_eom_id_around_a_call_leave_no_prose() {
    let ex = extract_calls(r#"<|python_tag|>{"name": "a", "parameters": {}}<|eom_id|>"#);
    assert_eq!(ex.tool_calls(), vec![call("a", json!({}))]);
    assert_eq!(ex.prose, "");
}

#[test]
fn tool_definitions_are_not_calls() {
    let text = r#"Tools: {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}} and {"name": "g", "description": "d", "parameters": {"type": "object"}}"#;
    let ex = extract_calls(text);
    assert!(ex.calls.is_empty(), "{:?}", ex.calls);
    assert!(ex.diagnostics.is_empty());
}

#[test]
fn tool_definitions_without_a_description_are_not_calls_either() {
    let text = r#"{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}} {"name": "g", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}"#;
    let ex = extract_calls(text);
    assert!(ex.calls.is_empty(), "{:?}", ex.calls);
    // A Llama 3 call holds argument values under `parameters`: still a call.
    let ex = extract_calls(r#"{"name": "g", "parameters": {"x": 3, "type": "object"}}"#);
    assert_eq!(
        ex.tool_calls(),
        vec![call("g", json!({"x": 3, "type": "object"}))]
    );
    // An OpenAI call echo carries `arguments`: a call.
    let ex = extract_calls(r#"{"type": "function", "function": {"name": "f", "arguments": "{}"}}"#);
    assert_eq!(ex.tool_calls(), vec![call("f", json!({}))]);
}

#[test]
fn a_definition_whose_parameters_are_a_bare_object_schema_is_not_a_call() {
    // The outer object is a definition; its `function` object must not be read as a call
    // either, nor may a `call:` written in a description.
    for text in [
        r#"{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}"#,
        r#"[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]"#,
        r#"{"tools": [{"type":"function","function":{"name":"f","parameters":{"type":"object","required":[]}}}]}"#,
        r#"{"name":"f","parameters":{"type":"object"}}"#,
        r#"{"name":"f","input_schema":{"type":"object"}}"#,
        r#"{"type":"function","function":{"name":"f","description":"then call:g{} or g.call(x=1)","parameters":{}}}"#,
    ] {
        let ex = extract_calls(text);
        assert!(ex.calls.is_empty(), "{text}: {:?}", ex.calls);
        assert!(ex.diagnostics.is_empty(), "{text}: {:?}", ex.diagnostics);
        assert_eq!(ex.prose, text, "a definition stays prose");
    }
    // A call beside a definition is still found.
    let ex = extract_calls(
        r#"{"type":"function","function":{"name":"f","parameters":{"type":"object"}}} {"name": "f", "arguments": {"a": 1}}"#,
    );
    assert_eq!(ex.tool_calls(), vec![call("f", json!({"a": 1}))]);
    // Llama 3 calls whose argument values happen to include `type`.
    let ex = extract_calls(r#"{"name": "g", "parameters": {"type": "object", "x": 1}}"#);
    assert_eq!(
        ex.tool_calls(),
        vec![call("g", json!({"type": "object", "x": 1}))]
    );
}

#[test]
fn mistral_tool_calls_prefix_leaves_with_the_calls() {
    let ex = extract_calls(r#"[TOOL_CALLS][{"name": "a", "arguments": {"k": 1}}]"#);
    assert_eq!(ex.tool_calls(), vec![call("a", json!({"k": 1}))]);
    assert_eq!(ex.prose, "");
}

// ---- pythonic -------------------------------------------------------------------------------------

#[test]
fn pythonic_single_call() {
    let ex = extract_calls(
        r#"get_weather(city="Paris", days=3, metric=True, hours=[6, 12], opts={'a': None})"#,
    );
    assert_eq!(
        ex.tool_calls(),
        vec![call(
            "get_weather",
            json!({"city": "Paris", "days": 3, "metric": true, "hours": [6, 12], "opts": {"a": null}})
        )]
    );
    assert_eq!(ex.calls[0].pattern, CallPattern::Pythonic);
}

#[test]
fn pythonic_list_of_calls() {
    let text = r#"[get_weather(city="Paris"), get_time(tz="CET")]"#;
    let ex = extract_calls(text);
    assert_eq!(
        ex.tool_calls(),
        vec![
            call("get_weather", json!({"city": "Paris"})),
            call("get_time", json!({"tz": "CET"}))
        ]
    );
    assert_eq!(
        &text[ex.calls[0].span.clone()],
        r#"get_weather(city="Paris")"#
    );
    assert_eq!(ex.prose, "");
}

#[test]
fn pythonic_in_prose_with_keywords() {
    let ex = extract_calls("Sure! get_weather(city='Paris', days=(1, 2)) should do it.");
    assert_eq!(
        ex.tool_calls(),
        vec![call(
            "get_weather",
            json!({"city": "Paris", "days": [1, 2]})
        )]
    );
    assert_eq!(ex.prose, "Sure! should do it.");
}

#[test]
fn pythonic_no_arguments_only_when_standalone() {
    assert_eq!(calls_of("get_time()"), vec![call("get_time", json!({}))]);
    assert!(calls_of("First call init() and then go.").is_empty());
}

#[test]
fn pythonic_never_evaluates() {
    let ex = extract_calls(r#"run(cmd=__import__("os").system("rm -rf /"))"#);
    assert!(ex.calls.is_empty());
    assert!(!ex.diagnostics.is_empty());
    let ex = extract_calls("calc(x=1+2)");
    assert!(ex.calls.is_empty());
}

#[test]
fn pythonic_prose_false_positives() {
    assert!(calls_of("In math, f(x) = x^2 and g(1, 2) is positional.").is_empty());
    assert!(extract_calls("In math, f(x) = x^2.").diagnostics.is_empty());
}

#[test]
fn pythonic_in_a_code_fence_leaves_no_empty_fence() {
    let ex = extract_calls("Here you go:\n```python\nget_weather(city='Oslo')\n```\nDone.");
    assert_eq!(
        ex.tool_calls(),
        vec![call("get_weather", json!({"city": "Oslo"}))]
    );
    assert_eq!(ex.prose, "Here you go:\nDone.");
    // Fences with other content stay.
    let ex = extract_calls("```\nls -la\n```\nget_time()");
    assert_eq!(ex.prose, "```\nls -la\n```");
}

#[test]
fn print_of_a_string_is_not_diagnosed() {
    let ex = extract_calls("print(\"hello\")");
    assert!(ex.calls.is_empty());
    assert!(ex.diagnostics.is_empty());
}

#[test]
fn pythonic_positional_standalone_is_diagnosed() {
    let ex = extract_calls(r#"get_weather("Paris")"#);
    assert!(ex.calls.is_empty());
    assert_eq!(ex.diagnostics.len(), 1);
    assert!(ex.diagnostics[0].message.contains("positional"));
}

#[test]
fn pythonic_json_literal_hint() {
    let ex = extract_calls("set_flag(on=true)");
    assert!(ex.calls.is_empty());
    assert!(
        ex.diagnostics[0].message.contains("True"),
        "{:?}",
        ex.diagnostics
    );
}

// ---- ordering and mixtures ----------------------------------------------------------------------

#[test]
fn mixed_patterns_in_text_order() {
    let text = concat!(
        "First <tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>, ",
        "then call:b{x: 1}, then {\"name\": \"c\", \"arguments\": {}} ",
        "and finally d(y=2)."
    );
    let ex = extract_calls(text);
    let names: Vec<&str> = ex.calls.iter().map(|c| c.call.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
    assert_eq!(
        ex.calls.iter().map(|c| c.pattern).collect::<Vec<_>>(),
        [
            CallPattern::ToolCallTag,
            CallPattern::GemmaCall,
            CallPattern::BareJson,
            CallPattern::Pythonic
        ]
    );
    for c in &ex.calls {
        assert!(text.is_char_boundary(c.span.start) && text.is_char_boundary(c.span.end));
    }
}

#[test]
fn no_calls_in_plain_prose() {
    let ex = extract_calls("The capital of France is Paris. Nothing to call here.");
    assert!(ex.calls.is_empty());
    assert!(ex.diagnostics.is_empty());
    assert_eq!(
        ex.prose,
        "The capital of France is Paris. Nothing to call here."
    );
}

#[test]
fn unicode_text_around_calls() {
    let ex = extract_calls("Voilà — call:météo{ville: \"Zürich\"} 🌦 ok");
    // `météo` is not an ASCII verb, so the seed's verb class does not match it.
    assert!(ex.calls.is_empty());
    let ex = extract_calls("Voilà — call:meteo{ville: \"Zürich\"} 🌦 ok");
    assert_eq!(
        ex.tool_calls(),
        vec![call("meteo", json!({"ville": "Zürich"}))]
    );
    assert_eq!(ex.prose, "Voilà — 🌦 ok");
}

#[test]
fn extraction_round_trips_through_serde() {
    let ex = extract_calls("Sure. call:f{a: 1} and <tool_call>{bad</tool_call>");
    let json = serde_json::to_string(&ex).unwrap_or_default();
    let back: toolrail_tools::extract::Extraction = serde_json::from_str(&json).unwrap_or_default();
    assert_eq!(back, ex);
    assert!(json.contains(r#""pattern":"gemma_call""#), "{json}");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn never_panics_and_spans_are_valid(text in "\\PC{0,200}") {
            let ex = extract_calls(&text);
            for c in &ex.calls {
                prop_assert!(c.span.start <= c.span.end && c.span.end <= text.len());
                prop_assert!(text.is_char_boundary(c.span.start) && text.is_char_boundary(c.span.end));
            }
            for d in &ex.diagnostics {
                prop_assert!(d.span.end <= text.len() && d.at <= text.len());
            }
        }

        #[test]
        fn never_panics_on_call_like_soup(text in "[{}\\[\\]()\"'`:,=a-c_ \\n]{0,60}|(call:|<tool_call>|<function=|\\.call\\(|[a-c]+\\(|\\{\"name\": \"a\", \"arguments\": )[{}\\[\\]()\"'`:,=a-c0-9 ]{0,40}") {
            let _ = extract_calls(&text);
        }

        #[test]
        fn every_envelope_round_trips(
            name in "[a-z][a-z0-9_]{0,12}",
            key in "[a-z][a-z0-9_]{0,8}",
            value in "[ -~]{0,20}",
            number in -1000i64..1000,
        ) {
            let args = json!({ key.clone(): value.clone(), "n": number });
            let expected = call(&name, args.clone());
            let args_json = args.to_string();
            let py_value = serde_json::to_string(&value).unwrap_or_default();
            let python_string_ok = !value.contains('\\');
            let texts = vec![
                format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {args_json}}}\n</tool_call>"),
                format!("<function={name}>{args_json}</function>"),
                format!("Sure. call:{name}{args_json}"),
                format!("{{\"name\": \"{name}\", \"parameters\": {args_json}}}"),
            ];
            for text in texts {
                prop_assert_eq!(calls_of(&text), vec![expected.clone()], "{}", text);
            }
            if python_string_ok && key != "n" {
                let text = format!("{name}({key}={py_value}, n={number})");
                prop_assert_eq!(calls_of(&text), vec![expected.clone()], "{}", text);
            }
        }
    }
}

// ---- hostile input (F15) ---------------------------------------------------------------------

#[test]
fn a_megabyte_of_openers_finishes_and_finds_the_call_after_it() {
    // 1 MB of `{` used to take over a minute (every opener rescanned the rest of the text); the
    // bracket tables make it linear. No timed assertion: a quadratic sweep would not finish.
    for opener in ["{", "[", "(", "{\"name\": ", "call:f{", "f("] {
        let mut text = opener.repeat((1 << 20) / opener.len());
        text.push_str(r#" then {"name": "get_weather", "arguments": {"city": "Paris"}}"#);
        let t = std::time::Instant::now();
        let ex = extract_calls(&text);
        println!("1 MB of {opener:?}: {:?}", t.elapsed());
        assert_eq!(
            ex.tool_calls(),
            vec![call("get_weather", json!({"city": "Paris"}))],
            "{opener:?}"
        );
    }
}

#[test]
fn a_megabyte_of_calls_finishes() {
    // claimed spans were searched linearly per candidate: 1 MB of back-to-back envelopes (about
    // 33,000 calls) made that quadratic; they are now an ordered set. No timed assertion.
    let one = r#"{"name": "f", "arguments": {"a": [1]}} "#;
    let n = (1 << 20) / one.len();
    let text = one.repeat(n);
    let t = std::time::Instant::now();
    let ex = extract_calls(&text);
    println!(
        "1 MB of calls: {} calls in {:?}",
        ex.calls.len(),
        t.elapsed()
    );
    assert_eq!(ex.calls.len(), n);
    assert!(ex.calls.iter().all(|c| c.pattern == CallPattern::BareJson));
}
