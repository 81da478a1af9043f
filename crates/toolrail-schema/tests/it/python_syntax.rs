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
