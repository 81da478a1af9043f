//! Tool-call grammars: focused cases per envelope, the discriminated union, parallel, auto,
//! pythonic, and agreement with the validator.

use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use toolrail_gbnf::Grammar;
use toolrail_tools::envelope::{Format, Spacing, render_call, render_calls};
use toolrail_tools::grammar::{GrammarError, GrammarOptions, schema_grammar, tool_call_grammar};
use toolrail_tools::toolset::ToolSet;
use toolrail_tools::validate::{ValidateOptions, Validator};

fn sample(name: &str) -> ToolSet {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("sample_schemas")
        .join(name);
    ToolSet::from_json_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn opts(format: Format) -> GrammarOptions {
    GrammarOptions {
        format,
        ..GrammarOptions::default()
    }
}

fn compile(tools: &ToolSet, o: &GrammarOptions) -> (String, Arc<Grammar>) {
    let g = tool_call_grammar(tools, o).unwrap_or_else(|e| panic!("{e}"));
    let parsed = Grammar::parse(&g.text).unwrap_or_else(|e| panic!("{e}\n{}", g.text));
    (g.text, Arc::new(parsed))
}

fn accepts(g: &Arc<Grammar>, text: &str) -> bool {
    toolrail_engine::check(g, text.as_bytes()).is_accepted()
}

fn dialog_args(kind: &str) -> Value {
    // Keys in the grammar's (declared) order.
    json!({"title": "Slots",
           "dialog": [{"var": "slot", "prompt": "Which slot?",
                       "schema": {"kind": kind, "options": ["9:00", "10:00"]}}],
           "from_step": 1})
}

#[test]
fn every_sample_in_every_envelope_parses_with_comments_and_no_underscores() {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("sample_schemas");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let tools = ToolSet::from_json_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for format in Format::ALL {
            for (parallel, auto, compact) in [
                (false, false, false),
                (true, false, false),
                (false, true, false),
                (true, true, true),
            ] {
                let o = GrammarOptions {
                    format,
                    parallel,
                    auto,
                    compact,
                    lenient: false,
                };
                let (text, _) = compile(&tools, &o);
                assert!(text.starts_with("root ::= "), "{path:?}");
                let findings = toolrail_gbnf::lint::lint_default(&text);
                let errors: Vec<String> = findings
                    .iter()
                    .filter(|d| d.severity == toolrail_gbnf::Severity::Error)
                    .map(|d| d.to_string())
                    .collect();
                assert!(errors.is_empty(), "{path:?} {format}: {errors:?}\n{text}");
                for tool in tools.tools() {
                    assert!(
                        text.contains(&format!("# tool '{}'", tool.name)),
                        "{path:?} {format}: no comment naming {}",
                        tool.name
                    );
                }
                for line in text.lines() {
                    if let Some((name, _)) = line.split_once(" ::= ") {
                        assert!(!name.contains('_'), "{path:?} {format}: rule {name}");
                    }
                }
            }
        }
    }
}

#[test]
fn discriminated_union_in_every_envelope() {
    let tools = sample("planner_get_inputs.json");
    let validator = Validator::new(&tools).unwrap();
    let send = json!({"recipients": ["me"], "body": "hi"});
    for format in Format::ALL {
        let (_, g) = compile(&tools, &opts(format));
        let good = render_call(
            format,
            "get_inputs",
            &dialog_args("choice"),
            Spacing::Spaced,
        );
        assert!(accepts(&g, &good), "{format}: {good}");
        assert!(
            validator
                .validate_output(format, &good, ValidateOptions::default())
                .is_valid_call()
        );
        let good = render_call(format, "send_messages", &send, Spacing::Spaced);
        assert!(accepts(&g, &good), "{format}: {good}");
        // Seed 001's bug: one tool's name, another tool's arguments.
        let mixed = render_call(format, "get_inputs", &send, Spacing::Spaced);
        assert!(!accepts(&g, &mixed), "{format}: {mixed}");
        assert!(
            !validator
                .validate_output(format, &mixed, ValidateOptions::default())
                .is_valid()
        );
        // The 10-value enum: kind "banana" cannot be written.
        let banana = render_call(
            format,
            "get_inputs",
            &dialog_args("banana"),
            Spacing::Spaced,
        );
        assert!(!accepts(&g, &banana), "{format}: {banana}");
        // Unknown tools cannot be written.
        let unknown = render_call(format, "get_then", &json!({}), Spacing::Spaced);
        assert!(!accepts(&g, &unknown), "{format}: {unknown}");
        let now = render_call(format, "get_now", &json!({}), Spacing::Spaced);
        assert!(accepts(&g, &now), "{format}: {now}");
    }
}

#[test]
fn envelope_shapes() {
    let tools = sample("weather.json");
    let args = json!({"city": "Paris"});
    let cases = [
        (
            Format::OpenAi,
            r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#,
        ),
        (
            Format::Llama3,
            r#"{"name": "get_weather", "parameters": {"city": "Paris"}}"#,
        ),
        (
            Format::Hermes,
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        ),
        (Format::Gemma, r#"call:get_weather{"city": "Paris"}"#),
        (Format::Pythonic, r#"get_weather(city="Paris")"#),
    ];
    for (format, text) in cases {
        assert_eq!(
            render_call(format, "get_weather", &args, Spacing::Spaced),
            text
        );
        let (_, g) = compile(&tools, &opts(format));
        assert!(accepts(&g, text), "{format}: {text}");
        // Other envelopes' shapes are rejected.
        for (other, other_text) in cases {
            if other != format && !(format.is_json() && other.is_json()) {
                assert!(!accepts(&g, other_text), "{format} accepted {other_text}");
            }
        }
    }
    let (_, g) = compile(&tools, &opts(Format::OpenAi));
    assert!(!accepts(
        &g,
        r#"{"name": "get_weather", "parameters": {"city": "Paris"}}"#
    ));
}

#[test]
fn whitespace_styles() {
    let tools = sample("weather.json");
    let args = json!({"city": "Paris", "days": 2});
    for format in Format::ALL {
        let (_, spaced) = compile(&tools, &opts(format));
        let compact_opts = GrammarOptions {
            compact: true,
            ..opts(format)
        };
        let (_, compact) = compile(&tools, &compact_opts);
        let s = render_call(format, "get_weather", &args, Spacing::Spaced);
        let c = render_call(format, "get_weather", &args, Spacing::Compact);
        assert!(accepts(&spaced, &s) && accepts(&spaced, &c), "{format}");
        assert!(accepts(&compact, &c), "{format}: {c}");
        assert!(!accepts(&compact, &s), "{format}: compact accepted {s}");
    }
}

#[test]
fn parallel_calls() {
    let tools = sample("memory_llama31.json");
    let calls = vec![
        ("get_fact".to_owned(), json!({"key": "a"})),
        ("set_fact".to_owned(), json!({"key": "b", "value": "c"})),
    ];
    for format in Format::ALL {
        let (_, single) = compile(&tools, &opts(format));
        let par = GrammarOptions {
            parallel: true,
            ..opts(format)
        };
        let (_, parallel) = compile(&tools, &par);
        let text = render_calls(format, &calls, Spacing::Spaced);
        assert!(accepts(&parallel, &text), "{format}: {text}");
        assert!(!accepts(&single, &text), "{format}: single accepted {text}");
        let one = render_calls(format, &calls[..1], Spacing::Spaced);
        assert!(accepts(&parallel, &one), "{format}: {one}");
        if format.is_json() {
            assert!(one.starts_with('['));
            assert!(!accepts(&parallel, "[]"));
        } else {
            assert!(text.contains('\n'));
        }
        let v = Validator::new(&tools).unwrap();
        let report = v.validate_output(
            format,
            &text,
            ValidateOptions {
                parallel: true,
                auto: false,
                lenient: false,
            },
        );
        assert_eq!(report.tool_calls().len(), 2, "{format}");
    }
}

#[test]
fn auto_allows_text_that_does_not_start_like_a_call() {
    let tools = sample("weather.json");
    for format in Format::ALL {
        let auto = GrammarOptions {
            auto: true,
            ..opts(format)
        };
        let (_, g) = compile(&tools, &auto);
        let (_, strict) = compile(&tools, &opts(format));
        let call = render_call(
            format,
            "get_weather",
            &json!({"city": "Rome"}),
            Spacing::Spaced,
        );
        assert!(accepts(&g, &call), "{format}");
        for text in [
            "It is sunny in Rome today.",
            "",
            "get the weather",
            "call me",
        ] {
            assert!(accepts(&g, text), "{format}: {text:?}");
            assert!(
                !accepts(&strict, text),
                "{format}: strict accepted {text:?}"
            );
        }
        // Text that starts like a call must be a call.
        let broken = &call[..call.len() - 1];
        assert!(!accepts(&g, broken), "{format}: {broken}");
    }
    // The prefixes per envelope.
    let (_, g) = compile(
        &tools,
        &GrammarOptions {
            auto: true,
            ..opts(Format::Pythonic)
        },
    );
    assert!(accepts(&g, "get_weather is a tool"));
    assert!(!accepts(&g, "get_weather(town=\"Rome\")"));
    let (_, g) = compile(
        &tools,
        &GrammarOptions {
            auto: true,
            ..opts(Format::Gemma)
        },
    );
    assert!(accepts(&g, "call me maybe") && accepts(&g, "cal") && !accepts(&g, "call:maybe"));
}

#[test]
fn pythonic_literals_and_member_order() {
    let tools = sample("planner_get_inputs.json");
    let (text, g) = compile(&tools, &opts(Format::Pythonic));
    let ok = render_call(
        Format::Pythonic,
        "get_inputs",
        &dialog_args("yes_no"),
        Spacing::Spaced,
    );
    assert!(ok.contains("from_step=1"), "{ok}");
    assert!(accepts(&g, &ok), "{ok}\n{text}");
    // Keyword arguments come in any order, as a JSON object's members do (small objects), each
    // at most once, required ones always.
    let v = Validator::new(&tools).unwrap();
    for swapped in [
        r#"get_inputs(dialog=[], title="Slots")"#,
        r#"get_inputs(from_step=2, dialog=[], title="Slots")"#,
        r#"get_inputs(title="Slots", dialog=[])"#,
    ] {
        assert!(accepts(&g, swapped), "{swapped}");
        let r = v.validate_output(Format::Pythonic, swapped, ValidateOptions::default());
        assert!(r.is_valid_call(), "{swapped}: {:?}", r.feedback());
    }
    for wrong in [
        r#"get_inputs(dialog=[])"#,
        r#"get_inputs(title="Slots", dialog=[], title="Slots")"#,
        r#"get_inputs(title="Slots", dialog=[], colour="red")"#,
    ] {
        assert!(!accepts(&g, wrong), "{wrong}");
        let r = v.validate_output(Format::Pythonic, wrong, ValidateOptions::default());
        assert!(!r.is_valid_call(), "{wrong}");
    }
    // Python spellings.
    let bfcl = sample("bfcl_excerpt.json");
    let (_, g) = compile(&bfcl, &opts(Format::Pythonic));
    let call =
        r#"triangle_properties.get(side1=5, side2=4, side3=3, get_area=True, get_angles=False)"#;
    assert!(accepts(&g, call), "{call}");
    assert!(!accepts(&g, &call.replace("False", "false")));
    let v = Validator::new(&bfcl).unwrap();
    assert!(
        v.validate_output(Format::Pythonic, call, ValidateOptions::default())
            .is_valid_call()
    );
}

#[test]
fn recursive_ref_tool() {
    let tools = sample("outline_recursive.json");
    let args = json!({"document": "d", "root": {"title": "A", "children": [
                      {"title": "B", "children": []}, {"title": "C"}]}});
    for format in Format::ALL {
        let (_, g) = compile(&tools, &opts(format));
        let text = render_call(format, "create_outline", &args, Spacing::Spaced);
        assert!(accepts(&g, &text), "{format}: {text}");
        let bad = json!({"document": "d", "root": {"title": "A", "children": [{"children": []}]}});
        let text = render_call(format, "create_outline", &bad, Spacing::Spaced);
        assert!(!accepts(&g, &text), "{format}: {text}");
    }
}

#[test]
fn pythonic_unsupported_keywords_are_errors_or_warnings() {
    // the converter's own error, keyword and pointer, as for JSON envelopes
    let tools = ToolSet::from_value(&json!([{"name": "f", "parameters": {"type": "object",
        "properties": {"a": {"type": "array", "contains": {"type": "integer"}}}}}]))
    .unwrap();
    for format in [Format::Pythonic, Format::OpenAi] {
        let err = tool_call_grammar(&tools, &opts(format)).unwrap_err();
        match &err {
            GrammarError::Schema { tool, error } => {
                assert_eq!(tool, "f");
                assert_eq!(error.keyword, "contains");
                assert_eq!(error.pointer, "#/properties/a");
            }
            other => panic!("{other}"),
        }
        let lenient = GrammarOptions {
            lenient: true,
            ..opts(format)
        };
        let g = tool_call_grammar(&tools, &lenient).unwrap();
        assert!(
            g.warnings.iter().any(|w| w.contains("contains")),
            "{format}"
        );
    }
    // Keyword arguments whose undeclared names a pattern constrains cannot be written.
    let tools = ToolSet::from_value(&json!([{"name": "f", "parameters": {"type": "object",
        "patternProperties": {"^x_": {"type": "integer"}}}}]))
    .unwrap();
    let err = tool_call_grammar(&tools, &opts(Format::Pythonic)).unwrap_err();
    assert!(
        matches!(&err, GrammarError::Schema { error, .. } if error.keyword == "patternProperties"),
        "{err}"
    );
}

#[test]
fn plain_schema_grammar() {
    let g = schema_grammar(
        &json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
        &GrammarOptions::default(),
    )
    .unwrap();
    let parsed = Arc::new(Grammar::parse(&g.text).unwrap());
    assert!(accepts(&parsed, r#"{"a": 1}"#));
    assert!(!accepts(&parsed, r#"{"a": "x"}"#));
}

#[test]
fn empty_tool_set_is_an_error() {
    let tools = ToolSet::from_value(&json!([])).unwrap();
    assert!(matches!(
        tool_call_grammar(&tools, &GrammarOptions::default()),
        Err(GrammarError::Empty)
    ));
}

#[test]
fn names_that_cannot_be_written_are_errors() {
    let tools = ToolSet::from_value(&json!([{"name": "f", "parameters": {"type": "object",
        "properties": {"first name": {"type": "string"}}}}]))
    .unwrap();
    let err = tool_call_grammar(&tools, &opts(Format::Pythonic)).unwrap_err();
    assert!(err.to_string().contains("'first name'"), "{err}");
    assert!(tool_call_grammar(&tools, &opts(Format::OpenAi)).is_ok());
    let tools = ToolSet::from_value(&json!([{"name": "get weather"}])).unwrap();
    for format in [Format::Pythonic, Format::Gemma] {
        let err = tool_call_grammar(&tools, &opts(format)).unwrap_err();
        assert!(matches!(err, GrammarError::BadName { .. }), "{err}");
    }
}

/// Everything the grammar accepts, the validator accepts: random strings of each sample's
/// grammar (every envelope, single/parallel/auto, both whitespace styles) all validate.
#[test]
fn sampled_grammar_strings_validate() {
    use toolrail_engine::sample::{Sampler, SplitMix64};
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("sample_schemas");
    let mut checked = 0;
    let mut out_of_range = 0;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect();
    paths.sort();
    for path in paths {
        let tools = ToolSet::from_json_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let validator = Validator::new(&tools).unwrap();
        for format in Format::ALL {
            for (parallel, auto, compact) in [
                (false, false, false),
                (true, false, true),
                (false, true, false),
            ] {
                let o = GrammarOptions {
                    format,
                    parallel,
                    auto,
                    compact,
                    lenient: false,
                };
                let (text, g) = compile(&tools, &o);
                let sampler = Sampler::new(&g);
                let mut rng = SplitMix64::new(7);
                for _ in 0..60 {
                    let s = sampler.sample(&mut rng, 300).unwrap();
                    assert!(accepts(&g, &s), "{path:?} {format}: sampler gave {s:?}");
                    let report = validator.validate_output(
                        format,
                        &s,
                        ValidateOptions {
                            parallel,
                            auto,
                            lenient: false,
                        },
                    );
                    // JSON's number syntax has no bound on exponents; values beyond f64 (e.g.
                    // `1e400`) are grammatical but cannot be read as numbers; a key written twice
                    // in a free-form object is grammatical but ambiguous (the validator refuses
                    // it). Counted, not failed.
                    if report.parse_error.as_ref().is_some_and(|e| {
                        e.message.contains("number out of range")
                            || e.message.contains("invalid number")
                            || e.message.contains("appears twice in one object")
                    }) {
                        out_of_range += 1;
                        continue;
                    }
                    assert!(
                        report.is_valid(),
                        "{path:?} {format} parallel={parallel} auto={auto}: grammar accepts \
                         {s:?} but the validator says {:?}\n{text}",
                        report.feedback()
                    );
                    checked += 1;
                }
            }
        }
    }
    println!("{checked} sampled strings validated, {out_of_range} skipped (numbers beyond f64)");
    assert!(out_of_range * 20 < checked);
}

#[test]
fn pythonic_open_objects_exclude_declared_keys() {
    let tools = ToolSet::from_value(&json!([{"name": "f", "parameters": {"type": "object",
        "properties": {"a": {"type": "integer"}, "m": {"type": "object",
            "properties": {"x": {"type": "integer"}}, "required": ["x", "y"],
            "additionalProperties": {"type": "string"}}},
        "required": ["a"], "additionalProperties": true}}]))
    .unwrap();
    let (text, g) = compile(&tools, &opts(Format::Pythonic));
    let v = Validator::new(&tools).unwrap();
    let cases = [
        (r#"f(a=1)"#, true),
        (r#"f(a=1, zz=True, b=None)"#, true),
        (r#"f(a=1, a=2)"#, false),
        // Python's reserved words are no keyword argument names
        (r#"f(a=1, from=2)"#, false),
        (r#"f(a=1, None=2)"#, false),
        (r#"f(a=1, fromage=2, Nonesuch=3)"#, true),
        (r#"f(a=1, m={"x": 1, "y": "s", "xy": "t", "": "u"})"#, true),
        (r#"f(a=1, m={"x": 1, "y": "s", "x": "t"})"#, false),
        (r#"f(a=1, m={"x": 1, "y": "s", "y": "t"})"#, false),
        (r#"f(a=1, m={"x": 1})"#, false),
        (r#"f(a=1, m={"x": 1, "y": 2})"#, false),
    ];
    for (call, ok) in cases {
        assert_eq!(accepts(&g, call), ok, "{call}\n{text}");
        if ok {
            let r = v.validate_output(Format::Pythonic, call, ValidateOptions::default());
            assert!(r.is_valid_call(), "{call}: {:?}", r.feedback());
        }
    }
    // Duplicate keys are not valid Python calls and collapse in dicts: the validator's view.
    let r = v.validate_output(Format::Pythonic, "f(a=1, a=2)", ValidateOptions::default());
    assert!(r.feedback().unwrap().contains("duplicate argument 'a'"));
    // An undeclared name written twice: no grammar can forbid it; the grammar says so.
    assert!(accepts(&g, "f(a=1, zz=1, zz=2)"));
    let r = v.validate_output(
        Format::Pythonic,
        "f(a=1, zz=1, zz=2)",
        ValidateOptions::default(),
    );
    assert!(r.feedback().unwrap().contains("duplicate argument 'zz'"));
    let warnings = tool_call_grammar(&tools, &opts(Format::Pythonic))
        .unwrap()
        .warnings;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("additionalProperties") && w.contains("repeating")),
        "{warnings:?}"
    );
    assert!(
        tool_call_grammar(&tools, &opts(Format::OpenAi))
            .unwrap()
            .warnings
            .is_empty()
    );
}

/// The converter's `format` rules and the validator's format assertions agree on sampled values
/// (pythonic and JSON envelopes alike).
#[test]
fn sampled_formats_validate() {
    use toolrail_engine::sample::{Sampler, SplitMix64};
    let mut props = serde_json::Map::new();
    for f in ["date", "time", "date-time", "uuid", "ipv4", "ipv6", "email"] {
        props.insert(f.replace('-', "_"), json!({"type": "string", "format": f}));
    }
    let names: Vec<String> = props.keys().cloned().collect();
    let tools = ToolSet::from_value(&json!([{"name": "f", "parameters": {"type": "object",
        "properties": props, "required": names}}]))
    .unwrap();
    let validator = Validator::new(&tools).unwrap();
    for format in [Format::OpenAi, Format::Pythonic] {
        let (_, g) = compile(&tools, &opts(format));
        let sampler = Sampler::new(&g);
        let mut rng = SplitMix64::new(11);
        for _ in 0..300 {
            let s = sampler.sample(&mut rng, 2000).unwrap();
            let r = validator.validate_output(format, &s, ValidateOptions::default());
            assert!(r.is_valid_call(), "{format}: {s}\n{:?}", r.feedback());
        }
    }
}

/// Email: grammar and validator agree on RFC 5321 quoted pairs (`"\ "@host`, which the
/// `jsonschema` crate's own check rejects) and on display names (which it accepts).
#[test]
fn email_grammar_and_validator_agree() {
    let tools = ToolSet::from_value(&json!([{"name": "f", "parameters": {"type": "object",
        "properties": {"to": {"type": "string", "format": "email"}}, "required": ["to"]}}]))
    .unwrap();
    let validator = Validator::new(&tools).unwrap();
    let (text, g) = compile(&tools, &opts(Format::OpenAi));
    for (to, ok) in [
        ("\"\\ \"@host", true),
        ("\"\\\"\"@host", true),
        ("a.b@example.com", true),
        ("Joe <a@b.c>", false),
        ("a b@c", false),
    ] {
        let call = format!(r#"{{"name": "f", "arguments": {{"to": {}}}}}"#, json!(to));
        assert_eq!(accepts(&g, &call), ok, "{call}\n{text}");
        let r = validator.validate_output(Format::OpenAi, &call, ValidateOptions::default());
        assert_eq!(r.is_valid_call(), ok, "{call}: {:?}", r.feedback());
    }
}

// ---- hostile schemas (F1, F12) ---------------------------------------------------------------

/// A reproducer of `../shared/reliability/`, if there (the test carries a copy otherwise).
fn reliability(name: &str) -> Option<String> {
    let path = toolrail_testkit::shared_dir()
        .join("reliability")
        .join(name);
    std::fs::read_to_string(path).ok()
}

#[test]
fn an_unsatisfiable_tool_is_an_error_naming_tool_keyword_and_pointer() {
    // F12: minLength 3 > maxLength 2 used to give a grammar in which tool f matched nothing
    let text = reliability("F12-unsat-tool.json").unwrap_or_else(|| {
        r#"[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string", "minLength": 3, "maxLength": 2}}, "required": ["s"]}}}]"#.to_string()
    });
    let tools = ToolSet::from_json_str(&text).unwrap();
    match tool_call_grammar(&tools, &GrammarOptions::default()) {
        Err(GrammarError::Schema { tool, error }) => {
            assert_eq!(tool, "f");
            assert_eq!(error.keyword, "minLength");
            assert!(error.pointer.ends_with("/properties/s"), "{error}");
            assert!(error.message.contains("maxLength 2"), "{error}");
        }
        other => panic!("expected a schema error, got {other:?}"),
    }
}

#[test]
fn a_huge_max_length_in_a_tool_is_an_error() {
    let tools = ToolSet::from_value(&json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string", "maxLength": 1_000_000_000u64}}}}}])).unwrap();
    match tool_call_grammar(&tools, &GrammarOptions::default()) {
        Err(GrammarError::Schema { tool, error }) => {
            assert_eq!((tool.as_str(), error.keyword.as_str()), ("f", "maxLength"));
        }
        other => panic!("expected a schema error, got {other:?}"),
    }
}

#[test]
fn a_17_digit_integer_call_is_accepted_by_grammar_and_validator() {
    // F9: integer parts were capped at 16 digits, so the grammar rejected what validate accepts
    let tools = ToolSet::from_value(&json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}])).unwrap();
    let call = r#"{"name": "f", "arguments": {"n": 12345678901234567}}"#;
    let (text, g) = compile(&tools, &GrammarOptions::default());
    assert!(accepts(&g, call), "{text}");
    assert!(
        accepts(
            &g,
            &call.replace("12345678901234567", "123456789012345678901234567890")
        ),
        "{text}"
    );
    assert!(
        !accepts(&g, &call.replace("12345678901234567", "012")),
        "{text}"
    );
}

#[test]
fn a_deeply_nested_tool_schema_is_an_error_not_a_stack_overflow() {
    // 100,000 nested `items` (built without json!, which serializes recursively)
    let mut v = json!({});
    for _ in 0..100_000 {
        let mut m = serde_json::Map::new();
        m.insert("items".to_string(), v);
        v = Value::Object(m);
    }
    let mut props = serde_json::Map::new();
    props.insert("a".to_string(), v);
    let mut params = serde_json::Map::new();
    params.insert("type".to_string(), json!("object"));
    params.insert("properties".to_string(), Value::Object(props));
    let mut func = serde_json::Map::new();
    func.insert("name".to_string(), json!("f"));
    func.insert("parameters".to_string(), Value::Object(params));
    let mut tool = serde_json::Map::new();
    tool.insert("type".to_string(), json!("function"));
    tool.insert("function".to_string(), Value::Object(func));
    let doc = Value::Array(vec![Value::Object(tool)]);
    let result = ToolSet::from_value(&doc)
        .map(|tools| tool_call_grammar(&tools, &GrammarOptions::default()).map(|_| ()));
    // drop without recursion
    let mut stack = vec![doc];
    while let Some(mut x) = stack.pop() {
        match &mut x {
            Value::Object(m) => stack.extend(std::mem::take(m).into_iter().map(|(_, y)| y)),
            Value::Array(a) => stack.append(a),
            _ => {}
        }
    }
    match result {
        Err(e) => assert!(e.to_string().contains("nested deeper"), "{e}"),
        Ok(r) => panic!("expected a tool set error, got {r:?}"),
    }
}

#[test]
fn keywords_json_schema_does_not_define_are_named_in_the_warnings() {
    let g = schema_grammar(
        &json!({"type": "object", "properties": {"a": {"enum": ["x"], "readonly": true}}}),
        &GrammarOptions::default(),
    )
    .unwrap();
    assert!(
        g.warnings
            .iter()
            .any(|w| w.starts_with("ignored: readonly at #/properties/a")),
        "{:?}",
        g.warnings
    );
}

/// One walker for JSON and Python calls: keywords the pythonic value builder refused
/// (`patternProperties`, `dependentRequired` and `$ref`/`anyOf` on the arguments, `minProperties`,
/// `uniqueItems`, `not`) convert for pythonic calls as for JSON, with Python literals inside.
/// Handwritten calls are judged alike by grammar and validator, and sampled grammar strings all
/// validate.
#[test]
fn pythonic_calls_get_every_keyword_of_the_converter() {
    use toolrail_engine::sample::{Sampler, SplitMix64};
    let tools = ToolSet::from_value(&json!([
        {"name": "tag", "parameters": {
            "$defs": {
                "Labels": {"type": "object",
                    "patternProperties": {"^x_": {"type": "integer"}},
                    "additionalProperties": false, "minProperties": 1},
                "Base": {"type": "object", "properties": {"id": {"type": "string",
                    "pattern": "^[a-z]+$"}}, "required": ["id"], "additionalProperties": true},
                "Args": {"type": "object", "properties": {
                    "id": {"type": "string"},
                    "labels": {"$ref": "#/$defs/Labels"}}}},
            "$ref": "#/$defs/Args",
            "allOf": [{"$ref": "#/$defs/Base"}]
        }},
        tools_shape()
    ]))
    .unwrap();
    let (text, g) = compile(&tools, &opts(Format::Pythonic));
    let v = Validator::new(&tools).unwrap();
    let cases = [
        (r#"tag(id="abc")"#, true),
        (r#"tag(labels={"x_a": 1}, id="abc")"#, true),
        (r#"tag(id="abc", labels={"x_a": 1, "x_b": -2})"#, true),
        (r#"tag(id="Abc")"#, false),
        (r#"tag(labels={"x_a": 1})"#, false),
        (r#"tag(id="abc", labels={})"#, false),
        (r#"tag(id="abc", labels={"y": 1})"#, false),
        (r#"tag(id="abc", labels={"x_a": "1"})"#, false),
        (r#"shape(s={"kind": "circle", "r": 1.5})"#, true),
        (
            r#"shape(s={"kind": "square", "side": 2}, flags=[True, False])"#,
            true,
        ),
        (r#"shape(s={"kind": "square", "side": 2}, a=1, b=2)"#, true),
        (r#"shape(a=1, s={"r": 2, "kind": "circle"})"#, true),
        (
            r#"shape(s={"kind": "circle", "r": 1}, note="n", meta={"ok": True, "none": None})"#,
            true,
        ),
        (
            r#"shape(s={"kind": "circle", "r": 1}, meta={"none": None, "ok": True})"#,
            true,
        ),
        (r#"shape(s={"kind": "circle", "side": 1})"#, false),
        (r#"shape(s={"kind": "square", "side": 2}, b=2)"#, false),
        (
            r#"shape(s={"kind": "square", "side": 2}, flags=[True, True])"#,
            false,
        ),
        (r#"shape(s={"kind": "circle", "r": 1}, note=None)"#, false),
        (
            r#"shape(s={"kind": "circle", "r": 1}, meta={"ok": true, "none": null})"#,
            false,
        ),
        (r#"shape(s={"kind": "circle", "r": 1}, c=1)"#, false),
    ];
    for (call, ok) in cases {
        assert_eq!(accepts(&g, call), ok, "grammar: {call}\n{text}");
        let r = v.validate_output(Format::Pythonic, call, ValidateOptions::default());
        assert_eq!(
            r.is_valid_call(),
            ok,
            "validator: {call}: {:?}",
            r.feedback()
        );
    }
    let sampler = Sampler::new(&g);
    let mut rng = SplitMix64::new(3);
    let mut checked = 0;
    for _ in 0..300 {
        let s = sampler.sample(&mut rng, 400).unwrap();
        let r = v.validate_output(Format::Pythonic, &s, ValidateOptions::default());
        // numbers beyond f64 (`1e400`) are grammatical but cannot be read (as in
        // `sampled_grammar_strings_validate`)
        if r.parse_error
            .as_ref()
            .is_some_and(|e| e.message.contains("invalid number"))
        {
            continue;
        }
        assert!(r.is_valid_call(), "{s}: {:?}\n{text}", r.feedback());
        checked += 1;
    }
    assert!(checked > 200, "{checked}");
}

fn tools_shape() -> Value {
    json!({"name": "shape", "parameters": {"type": "object",
        "properties": {
            "s": {"oneOf": [
                {"type": "object", "properties": {"kind": {"const": "circle"},
                    "r": {"type": "number"}}, "required": ["kind", "r"],
                    "additionalProperties": false},
                {"type": "object", "properties": {"kind": {"const": "square"},
                    "side": {"type": "integer"}}, "required": ["kind", "side"],
                    "additionalProperties": false}]},
            "flags": {"type": "array", "items": {"type": "boolean"}, "uniqueItems": true},
            "note": {"not": {"type": "null"}, "type": ["string", "null"]},
            "meta": {"const": {"ok": true, "none": null}},
            "a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["s"],
        "dependentRequired": {"b": ["a"]},
        "additionalProperties": false}})
}

/// The arguments document refers to itself: `$ref: "#"` inside is the arguments object as a
/// dict value (a rule of its own), while the call writes it as keyword arguments. A name
/// that is not a Python identifier anywhere in the arguments object is the converter's error
/// with its pointer.
#[test]
fn pythonic_arguments_refer_to_themselves_as_dicts() {
    let tools = ToolSet::from_value(&json!([{"name": "node", "parameters": {"type": "object",
        "properties": {"name": {"type": "string"}, "child": {"$ref": "#"}},
        "required": ["name"]}}]))
    .unwrap();
    let (text, g) = compile(&tools, &opts(Format::Pythonic));
    let v = Validator::new(&tools).unwrap();
    let cases = [
        (r#"node(name="a")"#, true),
        (r#"node(name="a", child={"name": "b"})"#, true),
        (
            r#"node(child={"child": {"name": "c"}, "name": "b"}, name="a")"#,
            true,
        ),
        (r#"node(name="a", child=node(name="b"))"#, false),
        (r#"node(name="a", child={"child": {}, "name": "b"})"#, false),
        (r#"node(name="a", child={"name": "b", "extra": 1})"#, false),
    ];
    for (call, ok) in cases {
        assert_eq!(accepts(&g, call), ok, "grammar: {call}\n{text}");
        let r = v.validate_output(Format::Pythonic, call, ValidateOptions::default());
        assert_eq!(
            r.is_valid_call(),
            ok,
            "validator: {call}: {:?}",
            r.feedback()
        );
    }
    let tools = ToolSet::from_value(&json!([{"name": "f", "parameters": {"anyOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}},
        {"type": "object", "properties": {"b-c": {"type": "string"}}}]}}]))
    .unwrap();
    let err = tool_call_grammar(&tools, &opts(Format::Pythonic)).unwrap_err();
    match &err {
        GrammarError::Schema { tool, error } => {
            assert_eq!(tool, "f");
            assert_eq!(error.keyword, "properties");
            assert_eq!(error.pointer, "#/anyOf/1");
            assert!(error.message.contains("\"b-c\""), "{err}");
        }
        other => panic!("{other}"),
    }
    assert!(tool_call_grammar(&tools, &opts(Format::OpenAi)).is_ok());
}

/// Python strings: the escapes JSON and Python read alike, never `\/` (Python keeps the
/// backslash) or a surrogate pair (Python keeps two lone surrogates); such characters raw.
#[test]
fn pythonic_strings_mean_the_same_in_python() {
    let tools = ToolSet::from_value(&json!([{"name": "say", "parameters": {"type": "object",
        "properties": {"text": {"type": "string"}, "any": {}}, "required": ["text"]}}]))
    .unwrap();
    let (text, g) = compile(&tools, &opts(Format::Pythonic));
    for (call, ok) in [
        (r#"say(text="a\"b\\c\n\t\u00e9 😀 /")"#, true),
        (
            r#"say(text="x", any={"k": [1, "\u0041", None, True]})"#,
            true,
        ),
        (r#"say(text="a\/b")"#, false),
        (r#"say(text="\ud83d\ude00")"#, false),
        (r#"say(text="x", any={"k": "\/"})"#, false),
        (r#"say(text='single')"#, false),
        (r#"say(text="x", any=null)"#, false),
    ] {
        assert_eq!(accepts(&g, call), ok, "{call}\n{text}");
    }
}
