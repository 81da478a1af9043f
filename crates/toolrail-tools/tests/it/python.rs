//! Tools from Python function definitions: type hints, defaults, docstrings (Google, NumPy,
//! reST), custom `Grammar:` sections (namespaced per tool), and errors with their positions.

use serde_json::json;
use std::sync::Arc;
use toolrail_gbnf::Grammar;
use toolrail_tools::envelope::Format;
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::python::tools_from_python;
use toolrail_tools::shape::ToolSetShape;
use toolrail_tools::toolset::{ToolSet, ToolSetError};
use toolrail_tools::validate::{ValidateOptions, Validator};

fn sample() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../sample_schemas/python_functions.py"
    );
    std::fs::read_to_string(path).unwrap()
}

fn compile(tools: &ToolSet, format: Format) -> Arc<Grammar> {
    let options = GrammarOptions {
        format,
        ..GrammarOptions::default()
    };
    let g = tool_call_grammar(tools, &options).unwrap_or_else(|e| panic!("{e}"));
    Arc::new(Grammar::parse(&g.text).unwrap_or_else(|e| panic!("{e}\n{}", g.text)))
}

fn accepts(g: &Arc<Grammar>, text: &str) -> bool {
    toolrail_engine::check(g, text.as_bytes()).is_accepted()
}

fn valid(tools: &ToolSet, format: Format, text: &str) -> bool {
    Validator::new(tools)
        .unwrap()
        .validate_output(format, text, ValidateOptions::default())
        .is_valid_call()
}

fn error(source: &str) -> String {
    match ToolSet::from_text(source) {
        Err(ToolSetError::Python(e)) => e.to_string(),
        other => panic!("expected a Python error, got {other:?}"),
    }
}

#[test]
fn the_sample_is_detected_and_read_as_three_tools() {
    let tools = ToolSet::from_text(&sample()).unwrap();
    assert_eq!(tools.shape(), Some(ToolSetShape::PythonFunctions));
    assert_eq!(
        tools.names(),
        ["tool_function", "get_weather", "set_alarm"],
        "decorated functions count, imports do not"
    );
    assert!(
        tools
            .description
            .as_deref()
            .is_some_and(|d| d.starts_with("Tools written as Python functions")),
        "{:?}",
        tools.description
    );
    // the import and the `Returns:` section are named, not dropped
    let notes: Vec<String> = tools.warnings().iter().map(|w| w.to_string()).collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("3:1") && n.contains("`from` statement skipped")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("tool_function") && n.contains("`Returns`")),
        "{notes:?}"
    );
}

#[test]
fn the_interface_example_becomes_a_tool_with_its_own_grammar() {
    let tools = ToolSet::from_text(&sample()).unwrap();
    let tool = tools.get("tool_function").unwrap();
    assert_eq!(tool.description, "Tool description for LLM prompting.");
    assert_eq!(
        tool.parameters,
        json!({"type": "object",
               "properties": {
                   "param1": {"type": "string", "description": "Parameter description"},
                   "param2": {"type": "string", "description": "Optional parameter description",
                              "default": "value1"}},
               "required": ["param1"]})
    );
    let custom = tool.custom_grammar.as_ref().unwrap();
    assert_eq!(custom.root(), "root");
    let g = compile(&tools, Format::Pythonic);
    for call in [
        r#"tool_function(param1="hello")"#,
        r#"tool_function(param1="hello", param2="value2")"#,
    ] {
        assert!(accepts(&g, call), "{call}");
        assert!(valid(&tools, Format::Pythonic, call), "{call}");
    }
    // the type hint (str) allows any string; the custom grammar forbids it
    let forbidden = r#"tool_function(param1="hello", param2="value3")"#;
    assert!(valid(&tools, Format::Pythonic, forbidden));
    assert!(!accepts(&g, forbidden));
    assert!(!accepts(
        &g,
        r#"tool_function(param2="value1", param1="x")"#
    ));
}

#[test]
fn literal_and_optional_hints_constrain_the_arguments() {
    let tools = ToolSet::from_text(&sample()).unwrap();
    let tool = tools.get("get_weather").unwrap();
    assert_eq!(
        tool.parameters["properties"]["unit"],
        json!({"enum": ["celsius", "fahrenheit"], "description": "Temperature unit.",
               "default": "celsius"})
    );
    assert_eq!(
        tool.parameters["properties"]["days"]["anyOf"],
        json!([{"type": "integer"}, {"type": "null"}])
    );
    assert_eq!(tool.required_names(), ["city"]);
    assert!(tool.custom_grammar.is_none());
    for format in [Format::OpenAi, Format::Pythonic] {
        let g = compile(&tools, format);
        let (ok, bad, none) = match format {
            Format::Pythonic => (
                r#"get_weather(city="Paris", unit="fahrenheit", days=3)"#,
                r#"get_weather(city="Paris", unit="kelvin")"#,
                r#"get_weather(city="Paris", days=None)"#,
            ),
            _ => (
                r#"{"name": "get_weather", "arguments": {"city": "Paris", "unit": "fahrenheit", "days": 3}}"#,
                r#"{"name": "get_weather", "arguments": {"city": "Paris", "unit": "kelvin"}}"#,
                r#"{"name": "get_weather", "arguments": {"city": "Paris", "days": null}}"#,
            ),
        };
        assert!(accepts(&g, ok), "{format}: {ok}");
        assert!(valid(&tools, format, ok), "{format}: {ok}");
        assert!(accepts(&g, none), "{format}: {none}");
        assert!(!accepts(&g, bad), "{format}: {bad}");
        assert!(!valid(&tools, format, bad), "{format}: {bad}");
    }
}

#[test]
fn a_numpy_docstring_with_a_grammar_section_and_keyword_only_arguments() {
    let tools = ToolSet::from_text(&sample()).unwrap();
    let tool = tools.get("set_alarm").unwrap();
    assert_eq!(tool.description, "Set an alarm at a time of day.");
    assert_eq!(
        tool.parameters["properties"]["time"]["description"],
        "Time of day, 24-hour HH:MM."
    );
    assert_eq!(
        tool.parameters["properties"]["label"]["description"],
        "Shown when it rings."
    );
    assert_eq!(tool.parameters["properties"]["days"]["default"], json!([]));
    let g = compile(&tools, Format::Pythonic);
    let ok = r#"set_alarm(time="07:30", days=["mon", "fri"], label="Run")"#;
    assert!(accepts(&g, ok));
    assert!(valid(&tools, Format::Pythonic, ok));
    assert!(accepts(&g, r#"set_alarm(time="23:59")"#));
    // valid by the type hints, forbidden by the custom grammar
    for forbidden in [
        r#"set_alarm(time="24:00")"#,
        r#"set_alarm(time="7:30")"#,
        r#"set_alarm(time="07:30", days=[])"#,
    ] {
        assert!(valid(&tools, Format::Pythonic, forbidden), "{forbidden}");
        assert!(!accepts(&g, forbidden), "{forbidden}");
    }
}

#[test]
fn custom_rule_names_are_namespaced_per_tool() {
    let source = r#"
def a(x: str):
    r"""First.

    Grammar:
        root ::= "x=" value
        value ::= "\"a\""
    """

def b(x: str):
    r"""Second.

    Grammar:
        root ::= "x=" value
        value ::= "\"b\""
    """
"#;
    let tools = tools_from_python(source).unwrap();
    let g = compile(&tools, Format::Pythonic);
    assert!(accepts(&g, r#"a(x="a")"#));
    assert!(accepts(&g, r#"b(x="b")"#));
    assert!(!accepts(&g, r#"a(x="b")"#));
    assert!(!accepts(&g, r#"b(x="a")"#));
    // in a JSON envelope the custom start rule stands for the arguments object
    let source = r#"
def c(n: int):
    r"""Count.

    Grammar:
        root ::= "{\"n\": " [1-3] "}"
    """
"#;
    let tools = tools_from_python(source).unwrap();
    let g = compile(&tools, Format::OpenAi);
    let ok = r#"{"name": "c", "arguments": {"n": 2}}"#;
    assert!(accepts(&g, ok));
    assert!(valid(&tools, Format::OpenAi, ok));
    assert!(!accepts(&g, r#"{"name": "c", "arguments": {"n": 4}}"#));
}

#[test]
fn google_and_rest_docstrings_and_every_supported_hint() {
    let source = r#"
import typing

async def search(
    query: str,
    tags: typing.List[str],
    weights: dict[str, float] = {"a": 1.5},
    point: tuple[int, int] = (0, -1),
    mode: typing.Union[int, str, None] = None,
    flags: list[bool] | None = None,
    extra: typing.Optional[typing.Dict[str, list[int]]] = None,
    /,
):
    """
    Search the notes.

    Finds them by text.

    :param query: Words to look for,
        in any order.
    :param list tags: Tags to filter on.
    :type tags: list
    :returns: the matches
    """
"#;
    let tools = ToolSet::from_text(source).unwrap();
    let tool = tools.get("search").unwrap();
    assert_eq!(tool.description, "Search the notes.\n\nFinds them by text.");
    let p = &tool.parameters["properties"];
    assert_eq!(
        p["query"]["description"],
        "Words to look for, in any order."
    );
    assert_eq!(
        p["tags"],
        json!({"type": "array", "items": {"type": "string"}, "description": "Tags to filter on."})
    );
    assert_eq!(
        p["weights"],
        json!({"type": "object", "additionalProperties": {"type": "number"}, "default": {"a": 1.5}})
    );
    assert_eq!(
        p["point"],
        json!({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}], "items": false, "default": [0, -1]})
    );
    assert_eq!(
        p["mode"]["anyOf"],
        json!([{"type": "integer"}, {"type": "string"}, {"type": "null"}])
    );
    assert_eq!(
        p["flags"]["anyOf"][0],
        json!({"type": "array", "items": {"type": "boolean"}})
    );
    assert_eq!(
        p["extra"]["anyOf"][0]["additionalProperties"],
        json!({"type": "array", "items": {"type": "integer"}})
    );
    assert_eq!(tool.required_names(), ["query", "tags"]);
    for format in Format::ALL {
        let g = compile(&tools, format);
        let arguments = json!({"query": "x", "tags": ["a"], "point": [1, 2], "mode": null});
        let call = toolrail_tools::envelope::render_call(
            format,
            "search",
            &arguments,
            toolrail_tools::envelope::Spacing::Spaced,
        );
        assert!(accepts(&g, &call), "{format}: {call}");
        assert!(valid(&tools, format, &call), "{format}: {call}");
    }
}

#[test]
fn unsupported_annotations_name_function_parameter_and_position() {
    let e = error("def f(a: int, b: MyClass = None):\n    pass\n");
    assert!(
        e.starts_with("1:18: function `f`, parameter `b`: unsupported type hint `MyClass`"),
        "{e}"
    );
    let e = error("def f(\n    a: dict[int, str],\n):\n    pass\n");
    assert!(
        e.starts_with("2:13: function `f`, parameter `a`: dictionary keys must be `str`"),
        "{e}"
    );
    let e = error("def f(a: 'Foo'):\n    pass\n");
    assert!(
        e.starts_with("1:10: function `f`, parameter `a`: unsupported type hint a string"),
        "{e}"
    );
    let e = error("def f(a, b: int):\n    pass\n");
    assert!(
        e.starts_with("1:7: function `f`, parameter `a`: no type hint"),
        "{e}"
    );
    let e = error("def f(a: int, **kwargs: str):\n    pass\n");
    assert!(
        e.starts_with("1:15: function `f`, parameter `kwargs`: `**kwargs`"),
        "{e}"
    );
    let e = error("def f(a: Literal[len]):\n    pass\n");
    assert!(
        e.starts_with("1:18: function `f`, parameter `a`: `Literal` values must be"),
        "{e}"
    );
    let e = error("def f(a: int):\n    pass\ndef f(b: int):\n    pass\n");
    assert!(e.starts_with("3:1: function `f`: defined twice"), "{e}");
    let e = error("def f(a: str = 'x):\n    pass\n");
    assert!(e.starts_with("1:16: unterminated string literal"), "{e}");
}

#[test]
fn grammar_section_errors_point_into_the_python_source() {
    // a GBNF syntax error: line 6 of the source, column of the bad character
    let e = error(
        "def f(a: str):\n    \"\"\"Doc.\n\n    Grammar:\n        root ::= \"a=\" value\n        value ::= [a-z\n    \"\"\"\n",
    );
    assert!(e.starts_with("6:"), "{e}");
    assert!(
        e.contains("function `f`: in its `Grammar:` section: GB"),
        "{e}"
    );
    // an undefined rule, at its reference
    let e = error(
        "def f(a: str):\n    \"\"\"Doc.\n\n    Grammar:\n        root ::= \"a=\" missing\n    \"\"\"\n",
    );
    assert!(
        e.starts_with(
            "5:23: function `f`: in its `Grammar:` section: GB101: rule 'missing' is used but never defined"
        ),
        "{e}"
    );
    // a lint error (left recursion) fails too
    let e = error(
        "def f(a: str):\n    \"\"\"Doc.\n\n    Grammar:\n        root ::= root \"a\"\n    \"\"\"\n",
    );
    assert!(e.contains("in its `Grammar:` section: GB103"), "{e}");
}

#[test]
fn json_still_loads_and_plain_text_is_not_python() {
    let tools = ToolSet::from_text(r#"[{"name": "f", "description": "def x"}]"#).unwrap();
    assert_eq!(tools.names(), ["f"]);
    assert!(matches!(
        ToolSet::from_text("not json"),
        Err(ToolSetError::Json(_))
    ));
    let e = error("x = 1\ndef \n");
    assert!(e.contains("`def` without a function name"), "{e}");
}

#[test]
fn a_union_of_a_hundred_thousand_literals_keeps_each_member_once_in_order() {
    // Duplicates are found through a set, not by comparing each member with every kept one:
    // 100,000 members finish in a linear pass.
    let n = 100_000;
    let mut members: Vec<String> = (0..n).map(|i| format!("Literal[\"a{i}\"]")).collect();
    members.push("Literal[\"a0\"]".to_owned());
    members.push("typing.Literal[\"a7\"]".to_owned());
    let source = format!(
        "def f(x: Union[{}]):\n    \"\"\"Pick one.\"\"\"\n    ...\n",
        members.join(", ")
    );
    let tools = tools_from_python(&source).unwrap();
    let tool = tools.get("f").unwrap();
    let any = tool.parameters["properties"]["x"]["anyOf"]
        .as_array()
        .unwrap();
    assert_eq!(any.len(), n);
    assert_eq!(any[0], json!({"enum": ["a0"]}));
    assert_eq!(any[n - 1], json!({"enum": [format!("a{}", n - 1)]}));
}
