//! Python literal syntax ([`LiteralSyntax::Python`]) and keyword arguments
//! ([`SchemaConverter::add_arguments`]): the converter's one walk, spelled as Python.

use std::sync::Arc;

use serde_json::{Value, json};
use toolrail_gbnf::Grammar;
use toolrail_schema::{ConvertOptions, Expr, LiteralSyntax, SchemaConverter};

/// The grammar of `schema` as a Python value (`as_arguments`: as `f(<keyword arguments>)`).
fn python_grammar(schema: &Value, as_arguments: bool) -> (String, Arc<Grammar>) {
    let mut c = SchemaConverter::with_syntax(ConvertOptions::default(), LiteralSyntax::Python);
    let root = if as_arguments {
        let args = c.add_arguments("args", schema).unwrap();
        Expr::seq([Expr::literal("f("), args, Expr::literal(")")])
    } else {
        c.add_schema("value", schema).unwrap()
    };
    let text = c.finish(&root);
    let g = Grammar::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (text, Arc::new(g))
}

fn check(schema: &Value, as_arguments: bool, ok: &[&str], bad: &[&str]) {
    let (text, g) = python_grammar(schema, as_arguments);
    for t in ok {
        assert!(
            toolrail_engine::check(&g, t.as_bytes()).is_accepted(),
            "rejects {t}\n{text}"
        );
    }
    for t in bad {
        assert!(
            !toolrail_engine::check(&g, t.as_bytes()).is_accepted(),
            "accepts {t}\n{text}"
        );
    }
}

#[test]
fn literals_are_python() {
    check(
        &json!({"enum": [null, true, false, "x", 1.5, {"a": [null]}]}),
        false,
        &[
            "None",
            "True",
            "False",
            "\"x\"",
            "1.5",
            "1.50",
            "{\"a\": [None]}",
        ],
        &["null", "true", "'x'", "{\"a\": [null]}"],
    );
    check(
        &json!({"type": ["boolean", "null", "array"], "items": {"type": "number"}}),
        false,
        &["True", "None", "[1, 2.5e3]", "[]"],
        &["true", "null", "[True]"],
    );
    // any value: Python literals all the way down
    check(
        &json!(true),
        false,
        &[
            "{\"a\": [True, None, {\"b\": \"c\"}], \"d\": -0.5}",
            "\"\\u00e9\"",
        ],
        &["{\"a\": true}", "[null]", "\"\\/\""],
    );
    let (text, _) = python_grammar(&json!({}), false);
    assert!(
        text.contains("py-value ::= py-dict | py-list | py-string | number | py-boolean | py-none"),
        "{text}"
    );
    assert!(
        !text.contains("\nvalue ::=") && !text.contains("\nstring ::="),
        "{text}"
    );
}

#[test]
fn keyword_arguments_follow_the_object_rules() {
    let schema = json!({"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string", "format": "date"}},
        "required": ["a"], "additionalProperties": {"type": "boolean"}});
    check(
        &schema,
        true,
        &[
            "f(a=1)",
            "f(b=\"2024-01-31\", a=1)",
            "f(a=1, flag=True)",
            "f(on=False, a=1, ab=True)",
        ],
        &[
            "f()",
            "f(a=1, a=2)",
            "f(a=1, b=\"2024-13-01\")",
            "f(a=1, flag=1)",
            "f(a=1, if=True)",
            "f(\"a\"=1)",
            "f({\"a\": 1})",
        ],
    );
    // the empty arguments object, and `true`: anything, as keyword arguments
    check(
        &json!({"type": "object", "additionalProperties": false}),
        true,
        &["f()"],
        &["f(a=1)"],
    );
    check(
        &json!(true),
        true,
        &["f()", "f(x=[None], y={})"],
        &["f(1)", "f(x=null)"],
    );
    // not an object
    let mut c = SchemaConverter::with_syntax(ConvertOptions::default(), LiteralSyntax::Python);
    let err = c
        .add_arguments("args", &json!({"type": "string"}))
        .unwrap_err();
    assert_eq!((err.keyword.as_str(), err.pointer.as_str()), ("type", "#"));
    assert!(err.message.contains("only objects"), "{err}");
    // a branch admitting no object matches no call
    check(
        &json!({"anyOf": [{"type": "null"}, {"type": "object",
            "properties": {"a": {"type": "integer"}}, "additionalProperties": false}]}),
        true,
        &["f()", "f(a=1)"],
        &["f(None)", "f(a=None)"],
    );
    let err = c
        .add_arguments(
            "args",
            &json!({"properties": {"x": {"type": "object", "properties": {"ok": {}}}, "a b": {}}}),
        )
        .unwrap_err();
    assert_eq!(
        (err.keyword.as_str(), err.pointer.as_str()),
        ("properties", "#")
    );
}

/// `text` (JSON) as a Python literal: `true`/`false`/`null` outside strings become
/// `True`/`False`/`None`; everything else is the same text (serde writes no `\/` and no
/// surrogate escapes, which Python reads differently).
fn python_literal(json_text: &str) -> String {
    let mut out = String::with_capacity(json_text.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = json_text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let word = [("true", "True"), ("false", "False"), ("null", "None")]
            .into_iter()
            .find(|(w, _)| rest.starts_with(w));
        if let Some((w, py)) = word {
            out.push_str(py);
            rest = &rest[w.len()..];
            continue;
        }
        in_string = c == '"';
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The instance as the keyword arguments of a call `f(...)`, when it is an object whose names
/// are identifiers (not reserved words).
fn python_call(data: &Value, sep: &str) -> Option<String> {
    let members = data.as_object()?;
    let mut out = String::from("f(");
    for (i, (k, v)) in members.iter().enumerate() {
        if !toolrail_schema::is_identifier(k)
            || toolrail_schema::syntax::PYTHON_KEYWORDS.contains(&k.as_str())
        {
            return None;
        }
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(k);
        out.push('=');
        out.push_str(&python_literal(&serde_json::to_string(v).ok()?));
    }
    out.push(')');
    Some(out)
}

/// Whether the grammar accepts `text` (None: checking took too long).
fn verdict(engine: &mut toolrail_engine::Engine, text: &str) -> Option<bool> {
    let started = std::time::Instant::now();
    let mut state = engine.initial();
    for chunk in text.as_bytes().chunks(64) {
        match engine.feed(state, chunk) {
            Ok(next) => state = next,
            Err(_) => return Some(false),
        }
        if started.elapsed() > std::time::Duration::from_secs(2) {
            return None;
        }
    }
    Some(engine.can_end(state))
}

/// One walker, one semantics: on every MaskBench schema the converter expresses, the grammar in
/// Python syntax judges every instance written as a Python literal exactly as the JSON grammar
/// judges it written as JSON (stored and compact spellings); and where the schema admits
/// keyword arguments, the call `f(k=v, ...)` of every object instance exactly as the JSON
/// grammar judges the object. Prints the counts.
#[test]
fn maskbench_python_agrees_with_json() {
    let Some(dir) = toolrail_testkit::corpus("maskbench/data") else {
        return;
    };
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || maskbench_agreement(&dir))
        .unwrap()
        .join()
        .unwrap();
}

fn maskbench_agreement(dir: &std::path::Path) {
    use toolrail_engine::Engine;
    use toolrail_schema::schema_to_gbnf;
    let files = crate::maskbench_files(dir);
    let (mut schemas, mut values, mut calls, mut timed_out) = (0, 0, 0, 0);
    let mut argument_schemas = 0;
    let mut disagreements = Vec::new();
    for path in &files {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let schema = &file["schema"];
        let Ok(json) = schema_to_gbnf(schema, &ConvertOptions::default()) else {
            continue;
        };
        let mut c = SchemaConverter::with_syntax(ConvertOptions::default(), LiteralSyntax::Python);
        let value = c
            .add_schema("value", schema)
            .unwrap_or_else(|e| panic!("{name}: JSON converts, Python does not: {e}"));
        let py_text = c.finish(&value);
        let mut c = SchemaConverter::with_syntax(ConvertOptions::default(), LiteralSyntax::Python);
        let call_text = c
            .add_arguments("args", schema)
            .ok()
            .map(|args| c.finish(&Expr::seq([Expr::literal("f("), args, Expr::literal(")")])));
        schemas += 1;
        argument_schemas += usize::from(call_text.is_some());
        let engine = |text: &str| {
            Engine::new(Arc::new(
                Grammar::parse(text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}")),
            ))
        };
        let mut json_engine = engine(&json.gbnf);
        let mut py_engine = engine(&py_text);
        let mut call_engine = call_text.as_deref().map(engine);
        for (i, case) in file["tests"].as_array().into_iter().flatten().enumerate() {
            let data = &case["data"];
            for (pretty, text) in [
                (true, serde_json::to_string_pretty(data).unwrap()),
                (false, serde_json::to_string(data).unwrap()),
            ] {
                let (Some(j), Some(p)) = (
                    verdict(&mut json_engine, &text),
                    verdict(&mut py_engine, &python_literal(&text)),
                ) else {
                    timed_out += 1;
                    continue;
                };
                values += 1;
                if j != p {
                    disagreements.push(format!("{name} #{i} value: JSON {j}, Python {p}"));
                }
                if let (Some(engine), Some(call)) = (
                    call_engine.as_mut(),
                    python_call(data, if pretty { ", " } else { "," }),
                ) {
                    match verdict(engine, &call) {
                        Some(k) if k == j => calls += 1,
                        Some(k) => {
                            calls += 1;
                            disagreements
                                .push(format!("{name} #{i} call: JSON {j}, call {k}: {call}"));
                        }
                        None => timed_out += 1,
                    }
                }
            }
        }
    }
    println!(
        "MaskBench in Python syntax: {schemas} schemas ({argument_schemas} as keyword arguments), \
         {values} values and {calls} calls judged as in JSON, {} disagreements, {timed_out} timed out",
        disagreements.len()
    );
    assert!(disagreements.is_empty(), "{disagreements:#?}");
    assert!(
        schemas > 1300 && values > 9000 && calls > 8000,
        "{schemas} {values} {calls}"
    );
}

/// Lenient: keyword arguments whose undeclared names a pattern constrains become any other
/// identifier with any value (wider, never narrower), with a warning naming the keyword.
#[test]
fn lenient_keyword_arguments_only_widen() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}},
        "patternProperties": {"^x_": {"type": "integer"}}, "additionalProperties": false});
    let mut c = SchemaConverter::with_syntax(ConvertOptions::default(), LiteralSyntax::Python);
    let err = c.add_arguments("args", &schema).unwrap_err();
    assert_eq!(
        (err.keyword.as_str(), err.pointer.as_str()),
        ("patternProperties", "#")
    );
    let lenient = ConvertOptions {
        lenient: true,
        ..Default::default()
    };
    let mut c = SchemaConverter::with_syntax(lenient, LiteralSyntax::Python);
    let args = c.add_arguments("args", &schema).unwrap();
    assert!(
        c.warnings()
            .iter()
            .any(|w| w.keyword == "patternProperties")
    );
    let text = c.finish(&Expr::seq([Expr::literal("f("), args, Expr::literal(")")]));
    let g = Arc::new(Grammar::parse(&text).unwrap());
    for (call, ok) in [
        ("f(a=1, x_b=2)", true),
        ("f(x_b=\"s\", y=None)", true),
        ("f(a=\"1\")", false),
        ("f(a=1, a=1)", false),
    ] {
        assert_eq!(
            toolrail_engine::check(&g, call.as_bytes()).is_accepted(),
            ok,
            "{call}\n{text}"
        );
    }
    // no parameters: nothing between the parentheses, and no rule for it
    let mut c = SchemaConverter::with_syntax(ConvertOptions::default(), LiteralSyntax::Python);
    let closed = json!({"type": "object", "properties": {}, "additionalProperties": false});
    assert_eq!(c.add_arguments("args", &closed).unwrap(), Expr::Empty);
}
