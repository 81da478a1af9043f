//! Schemas as deep as a user can write them, on a test thread's default stack: text nested
//! 100,000 deep (refused by the JSON parser), the deepest text it reads under every keyword
//! that nests schemas or values, documents built in code 100,000 deep, chains of 100,000
//! `$ref`s (flat text, any length), and patterns nested 100,000 deep. Each converts or is an
//! error naming the keyword and the JSON pointer, in every mode; none overflows the stack.

use serde_json::{Map, Value, json};
use toolrail_schema::{
    ConvertOptions, MAX_DOCUMENT_DEPTH, MAX_SCHEMA_NESTING, SchemaError, schema_to_gbnf,
};

const DEEP: usize = 100_000;

/// The default, lenient and llama.cpp-compatible readings.
fn modes() -> [(&'static str, ConvertOptions); 3] {
    [
        ("strict", ConvertOptions::default()),
        (
            "lenient",
            ConvertOptions {
                lenient: true,
                ..Default::default()
            },
        ),
        (
            "llama_compat",
            ConvertOptions {
                llama_compat: true,
                ..Default::default()
            },
        ),
    ]
}

/// Drops a deeply nested value without recursion (serde_json's drop recurses).
fn drop_flat(v: Value) {
    let mut stack = vec![v];
    while let Some(mut v) = stack.pop() {
        match &mut v {
            Value::Object(m) => stack.extend(std::mem::take(m).into_iter().map(|(_, x)| x)),
            Value::Array(a) => stack.append(a),
            _ => {}
        }
    }
}

/// `open` repeated `n` times around `inner`, closed by `close` repeated.
fn nested_text(open: &str, inner: &str, close: &str, n: usize) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

#[test]
fn a_schema_nested_100000_deep_as_text_is_refused_by_the_parser() {
    let text = nested_text(r#"{"items":"#, "{}", "}", DEEP);
    let error = serde_json::from_str::<Value>(&text).unwrap_err();
    assert!(
        error.to_string().contains("recursion limit exceeded"),
        "{error}"
    );
    assert_eq!(error.line(), 1);
    // The deepest text it reads: within the converter's document bound, so the converter's
    // own nesting bound speaks.
    let text = nested_text(r#"{"items":"#, "{}", "}", 126);
    let schema: Value = serde_json::from_str(&text).unwrap();
    assert!(toolrail_schema::check_depth(&schema).is_ok());
    for (mode, options) in modes() {
        let e = schema_to_gbnf(&schema, &options).unwrap_err();
        assert_eq!(e.keyword, "schema", "{mode}");
        assert_eq!(
            e.pointer,
            format!("#{}", "/items".repeat(MAX_SCHEMA_NESTING)),
            "{mode}"
        );
        assert!(
            e.message
                .contains(&format!("nested more than {MAX_SCHEMA_NESTING} deep")),
            "{mode}: {e}"
        );
    }
    // A schema nested as deep as allowed converts.
    let text = nested_text(
        r#"{"items":"#,
        r#"{"type":"integer"}"#,
        "}",
        MAX_SCHEMA_NESTING - 1,
    );
    let schema: Value = serde_json::from_str(&text).unwrap();
    for (mode, options) in modes() {
        let c = schema_to_gbnf(&schema, &options);
        assert!(c.is_ok(), "{mode}: {:?}", c.err());
    }
}

/// Every keyword that nests schemas or values, at the deepest text the parser reads: a
/// grammar, or an error naming a keyword and a pointer into the schema.
#[test]
fn every_nesting_keyword_at_the_deepest_text_converts_or_names_the_place() {
    let cases: Vec<(&str, String)> = vec![
        ("items", nested_text(r#"{"items":"#, "{}", "}", 126)),
        (
            "properties",
            nested_text(
                r#"{"type":"object","required":["a"],"properties":{"a":"#,
                "{}",
                "}}",
                63,
            ),
        ),
        (
            "additionalProperties",
            nested_text(r#"{"additionalProperties":"#, "{}", "}", 126),
        ),
        (
            "prefixItems",
            nested_text(r#"{"prefixItems":["#, "{}", "]}", 63),
        ),
        (
            "anyOf",
            nested_text(r#"{"anyOf":["#, r#"{"type":"null"}"#, "]}", 63),
        ),
        (
            "allOf",
            nested_text(r#"{"allOf":["#, r#"{"type":"null"}"#, "]}", 63),
        ),
        (
            "oneOf",
            nested_text(
                r#"{"oneOf":[{"type":"null"},"#,
                r#"{"type":"string"}"#,
                "]}",
                63,
            ),
        ),
        (
            "not",
            nested_text(r#"{"not":"#, r#"{"type":"null"}"#, "}", 126),
        ),
        (
            "dependentSchemas",
            nested_text(r#"{"dependentSchemas":{"a":"#, "{}", "}}", 63),
        ),
        (
            "patternProperties",
            nested_text(r#"{"patternProperties":{"^a":"#, "{}", "}}", 63),
        ),
        (
            "const",
            format!(r#"{{"const":{}}}"#, nested_text("[", "1", "]", 126)),
        ),
        (
            "enum",
            format!(
                r#"{{"enum":[{},{}]}}"#,
                nested_text(r#"{"a":"#, "1", "}", 125),
                nested_text("[", "1", "]", 125)
            ),
        ),
        (
            "default",
            format!(
                r#"{{"type":"string","default":{}}}"#,
                nested_text("[", "1", "]", 126)
            ),
        ),
    ];
    for (keyword, text) in cases {
        let schema: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{keyword}: {e}"));
        for (mode, options) in modes() {
            match schema_to_gbnf(&schema, &options) {
                Ok(c) => assert!(c.gbnf.starts_with("root ::= "), "{keyword} {mode}"),
                Err(SchemaError {
                    keyword: k,
                    pointer,
                    message,
                }) => {
                    assert!(pointer.starts_with('#'), "{keyword} {mode}: {pointer}");
                    assert!(!k.is_empty() && !message.is_empty(), "{keyword} {mode}");
                }
            }
        }
    }
    // The deep values themselves convert: a constant 126 arrays deep is one literal.
    let schema: Value = serde_json::from_str(&format!(
        r#"{{"const":{}}}"#,
        nested_text("[", "1", "]", 126)
    ))
    .unwrap();
    let c = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
    assert_eq!(c.gbnf.matches(r#""[""#).count(), 126);
}

/// A document built in code `DEEP` levels deep under `keyword`: refused before any walk.
#[test]
fn documents_built_100000_deep_in_code_are_refused_before_any_walk() {
    for keyword in ["not", "additionalProperties", "const", "default"] {
        let mut v = json!(1);
        for _ in 0..DEEP {
            let mut m = Map::new();
            m.insert(keyword.to_string(), v);
            v = Value::Object(m);
        }
        for (mode, options) in modes() {
            let e = schema_to_gbnf(&v, &options).unwrap_err();
            assert_eq!(e.keyword, keyword, "{mode}");
            assert_eq!(
                e.pointer,
                format!("#{}", format!("/{keyword}").repeat(MAX_DOCUMENT_DEPTH)),
                "{mode}"
            );
            assert!(e.message.contains("nested deeper than 128"), "{mode}: {e}");
        }
        drop_flat(v);
    }
}

/// `{"$defs": {"a0": link(0), ..., "a100000": {"type": "string"}}, "$ref": "#/$defs/a0"}`,
/// as text: flat, whatever the chain's length.
fn ref_chain(link: impl Fn(usize) -> String) -> Value {
    let mut text = String::from(r##"{"$ref":"#/$defs/a0","$defs":{"##);
    for i in 0..DEEP {
        text.push_str(&format!(r#""a{i}":{},"#, link(i + 1)));
    }
    text.push_str(&format!(r#""a{DEEP}":{{"type":"string"}}}}}}"#));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_chain_of_100000_refs_is_an_error_naming_where_it_stops() {
    let chains: Vec<(&str, Value)> = vec![
        (
            "plain",
            ref_chain(|n| format!(r##"{{"$ref":"#/$defs/a{n}"}}"##)),
        ),
        (
            "with a sibling",
            ref_chain(|n| format!(r##"{{"$ref":"#/$defs/a{n}","minLength":1}}"##)),
        ),
        (
            "through properties",
            ref_chain(|n| {
                format!(r##"{{"type":"object","properties":{{"x":{{"$ref":"#/$defs/a{n}"}}}}}}"##)
            }),
        ),
        (
            "through items",
            ref_chain(|n| format!(r##"{{"type":"array","items":{{"$ref":"#/$defs/a{n}"}}}}"##)),
        ),
        (
            "through allOf",
            ref_chain(|n| format!(r##"{{"allOf":[{{"$ref":"#/$defs/a{n}"}}]}}"##)),
        ),
        (
            "through anyOf",
            ref_chain(|n| {
                format!(r##"{{"anyOf":[{{"$ref":"#/$defs/a{n}"}},{{"type":"null"}}]}}"##)
            }),
        ),
        (
            "through oneOf",
            ref_chain(|n| {
                format!(r##"{{"oneOf":[{{"$ref":"#/$defs/a{n}"}},{{"type":"null"}}]}}"##)
            }),
        ),
    ];
    for (name, schema) in chains {
        for (mode, options) in modes() {
            let result = schema_to_gbnf(&schema, &options);
            if name == "through allOf" && mode == "llama_compat" {
                // llama.cpp reads only the object properties of allOf members: nothing here
                let warnings = result.unwrap().warnings;
                assert_eq!(warnings[0].keyword, "allOf");
                continue;
            }
            let e = result.unwrap_err();
            assert!(
                e.pointer.starts_with("#/$defs/a"),
                "{name} {mode}: {}",
                &e.pointer[..e.pointer.len().min(80)]
            );
            assert!(
                e.message
                    .contains(&format!("nested more than {MAX_SCHEMA_NESTING} deep"))
                    // flattening a `$ref` with siblings: the merge's own bound
                    || e.message.contains("cannot be merged")
                    || e.message.contains("may overlap"),
                "{name} {mode}: {e}"
            );
        }
    }
    // A short chain converts.
    let mut defs = Map::new();
    for i in 0..8 {
        defs.insert(
            format!("a{i}"),
            json!({"$ref": format!("#/$defs/a{}", i + 1)}),
        );
    }
    defs.insert("a8".to_string(), json!({"type": "string", "maxLength": 2}));
    let schema = json!({"$defs": defs, "$ref": "#/$defs/a0"});
    for (mode, options) in modes() {
        assert!(schema_to_gbnf(&schema, &options).is_ok(), "{mode}");
    }
}

#[test]
fn a_pattern_nested_100000_deep_is_an_error_naming_it() {
    let pattern = nested_text("(", "a", ")", DEEP);
    let schema = json!({"type": "string", "pattern": pattern});
    let e = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap_err();
    assert_eq!((e.keyword.as_str(), e.pointer.as_str()), ("pattern", "#"));
    assert!(
        e.message.contains("nested"),
        "{}",
        &e.message[e.message.len() - 100..]
    );
    // lenient: the pattern is dropped with a warning, which only widens the grammar
    let lenient = ConvertOptions {
        lenient: true,
        ..Default::default()
    };
    let c = schema_to_gbnf(&schema, &lenient).unwrap();
    assert_eq!(c.warnings.len(), 1);
}

#[test]
fn numbers_with_hundreds_of_digits_convert() {
    // Ranges are written digit by digit, recursively: serde_json reads a number as an f64
    // (at most 17 significant digits) and exponents past 400 are refused, so a bound has a
    // few hundred digits at most.
    let schema = json!({"type": "number", "minimum": 1e-300, "exclusiveMaximum": 3e-300});
    for (mode, options) in modes() {
        assert!(schema_to_gbnf(&schema, &options).is_ok(), "{mode}");
    }
}
