//! Schemas as users paste them where a reading exists (issue 25): an array whose items allow no
//! value is `[]`; `type: array` with an enum of strings is refused strictly with the clashing
//! keywords, and read leniently as the items' enum with a warning; a `format` with length bounds
//! every (or no) string of the format meets is exact without a product of automata, and a
//! combination that cannot be written names itself; `type: integer` with an enum of strings
//! that spell integers (BFCL's live tools) is refused strictly naming both keywords, and read
//! leniently as the integers.

use std::sync::Arc;

use serde_json::{Value, json};
use toolrail_gbnf::Grammar;
use toolrail_schema::{ConvertOptions, schema_to_gbnf};

fn options(lenient: bool) -> ConvertOptions {
    ConvertOptions {
        lenient,
        ..ConvertOptions::default()
    }
}

fn grammar(schema: &Value, lenient: bool) -> Arc<Grammar> {
    let gbnf = schema_to_gbnf(schema, &options(lenient))
        .unwrap_or_else(|e| panic!("{schema}: {e}"))
        .gbnf;
    Arc::new(Grammar::parse(&gbnf).unwrap_or_else(|e| panic!("{e}\n{gbnf}")))
}

fn accepts(g: &Arc<Grammar>, text: &str) -> bool {
    toolrail_engine::check(g, text.as_bytes()).is_accepted()
}

fn error(schema: &Value, lenient: bool) -> String {
    schema_to_gbnf(schema, &options(lenient))
        .map(|c| c.gbnf)
        .expect_err("refused")
        .to_string()
}

#[test]
fn items_with_an_empty_enum_allow_exactly_the_empty_array() {
    let schema =
        json!({"type": "object", "properties": {"x": {"type": "array", "items": {"enum": []}}}});
    for lenient in [false, true] {
        let g = grammar(&schema, lenient);
        assert!(accepts(&g, r#"{"x": []}"#));
        assert!(accepts(&g, "{}"));
        assert!(!accepts(&g, r#"{"x": [1]}"#));
        assert!(!accepts(&g, r#"{"x": [null]}"#));
    }
    let g = grammar(&json!({"type": "array", "items": false}), false);
    assert!(accepts(&g, "[]") && !accepts(&g, "[1]"));
}

#[test]
fn items_with_an_empty_enum_and_min_items_say_why_no_array_is_valid() {
    let schema = json!({"type": "object", "properties": {"x": {"type": "array", "items": {"enum": []}, "minItems": 2}}});
    for lenient in [false, true] {
        assert_eq!(
            error(&schema, lenient),
            "unsupported: minItems at #/properties/x: items at /properties/x/items allows no \
             value (enum is empty) and minItems is 2: no array is valid"
        );
    }
    let tuple = json!({"prefixItems": [{"type": "integer"}], "items": {"enum": []}, "minItems": 2});
    assert!(error(&tuple, false).contains("(at most the 1 prefixItems items)"));
    let g = grammar(
        &json!({"prefixItems": [{"type": "integer"}], "items": {"enum": []}, "minItems": 1}),
        false,
    );
    assert!(accepts(&g, "[3]") && !accepts(&g, "[]") && !accepts(&g, "[3, 4]"));
}

#[test]
fn an_array_with_an_enum_of_strings_is_refused_strictly_and_read_as_the_items_enum() {
    let schema = json!({"type": "object", "properties": {"unit": {"type": "array", "enum": ["celsius", "fahrenheit"]}}});
    let e = error(
        &json!({"type": "array", "enum": ["celsius", "fahrenheit"]}),
        false,
    );
    assert_eq!(
        e,
        "unsupported: type at #: no value satisfies `type`, `enum` together: they conflict, \
         and the grammar would match nothing"
    );
    let c = schema_to_gbnf(&schema, &options(true)).unwrap();
    let w: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(c.warnings[0].reading);
    assert_eq!(c.warnings[0].pointer, "#/properties/unit");
    assert!(
        w[0].starts_with("read: enum at #/properties/unit: type is \"array\" but enum lists only strings")
            && w[0].contains(r#"read as the enum of the items: items at /properties/unit/items is {"type":"string","enum":["celsius","fahrenheit"]}"#),
        "{w:?}"
    );
    let g = grammar(&schema, true);
    for ok in [
        r#"{"unit": []}"#,
        r#"{"unit": ["celsius"]}"#,
        r#"{"unit": ["fahrenheit", "celsius"]}"#,
    ] {
        assert!(accepts(&g, ok), "{ok}");
    }
    for bad in [
        r#"{"unit": "celsius"}"#,
        r#"{"unit": ["kelvin"]}"#,
        r#"{"unit": [1]}"#,
    ] {
        assert!(!accepts(&g, bad), "{bad}");
    }
    // the array's own items still hold
    let g = grammar(
        &json!({"type": "array", "enum": [1, 2, 3], "items": {"minimum": 2}}),
        true,
    );
    assert!(accepts(&g, "[2, 3]") && !accepts(&g, "[1]"));
}

#[test]
fn a_format_with_bounds_it_always_or_never_meets_is_exact() {
    let g = grammar(
        &json!({"type": "string", "format": "date-time", "minLength": 5}),
        false,
    );
    assert!(accepts(&g, r#""2024-01-02T03:04:05Z""#));
    assert!(!accepts(&g, r#""2024-01-02""#));
    let g = grammar(
        &json!({"type": "string", "format": "uuid", "minLength": 36, "maxLength": 36}),
        false,
    );
    assert!(accepts(&g, r#""123e4567-e89b-12d3-a456-426614174000""#));
    assert!(!accepts(&g, r#""123e4567""#));
    for lenient in [false, true] {
        assert_eq!(
            error(
                &json!({"type": "string", "format": "date", "maxLength": 5}),
                lenient
            ),
            "unsupported: format at #: format \"date\" strings have exactly 10 characters, which \
             maxLength 5 rules out: no string is valid"
        );
    }
}

#[test]
fn a_format_combination_that_cannot_be_written_names_itself() {
    let schema =
        json!({"properties": {"to": {"type": "string", "format": "email", "maxLength": 64}}});
    assert_eq!(
        error(&schema, false),
        "unsupported: format at #/properties/to: format \"email\" combined with maxLength 64 is \
         not supported: the intersection needs more than 3000 rules (lenient mode keeps format \
         \"email\" alone and leaves maxLength 64 to validation)"
    );
    let lenient = schema_to_gbnf(&schema, &options(true)).expect("lenient converts");
    let warnings: Vec<String> = lenient.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(
        warnings,
        [
            "dropped: format at #/properties/to: format \"email\" combined with \
         maxLength 64 is not supported: the intersection needs more than 3000 rules; the grammar \
         keeps format \"email\" alone (wider), and validation still checks maxLength 64"
        ]
    );
    let e = error(
        &json!({"type": "string", "format": "date", "pattern": "^1999-02-3"}),
        false,
    );
    assert_eq!(
        e,
        "unsupported: format at #: no string of format \"date\" meets pattern \"^1999-02-3\""
    );
}

#[test]
fn a_schema_whose_every_value_holds_another_without_end_is_refused_at_its_pointer() {
    let endless = [
        // an object that requires a child of its own type (the reliability reproducer)
        json!({"type": "object", "properties": {"child": {"$ref": "#"}}, "required": ["child"]}),
        // a list that must hold at least one list like it
        json!({"type": "array", "minItems": 1, "items": {"$ref": "#"}}),
        // through $defs, two schemas requiring each other
        json!({
            "$defs": {
                "a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}}, "required": ["b"]},
                "b": {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "required": ["a"]}
            },
            "type": "object",
            "properties": {"start": {"$ref": "#/$defs/a"}},
            "required": ["start"]
        }),
    ];
    for schema in &endless {
        for lenient in [false, true] {
            let options = ConvertOptions {
                lenient,
                ..ConvertOptions::default()
            };
            let err = schema_to_gbnf(schema, &options).unwrap_err();
            assert_eq!(err.keyword, "$ref", "{err}");
            assert!(err.pointer.starts_with('#'), "{err}");
            assert!(err.message.contains("no finite JSON value"), "{err}");
        }
    }
    // recursion with a way out converts
    let finite = [
        json!({"type": "object", "properties": {"child": {"$ref": "#"}}}),
        json!({"type": "array", "items": {"$ref": "#"}}),
        json!({"anyOf": [{"type": "null"}, {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}]}),
    ];
    for schema in &finite {
        schema_to_gbnf(schema, &ConvertOptions::default()).unwrap();
    }
}

#[test]
fn an_integer_with_an_enum_of_digit_strings_is_refused_strictly_and_read_leniently() {
    let schema = json!({"type": "object", "required": ["number_of_tickets"], "properties": {
        "number_of_tickets": {"type": "integer", "enum": ["1", "2", "3"]}}});
    assert_eq!(
        error(&schema, false),
        "unsupported: required at #: required property \"number_of_tickets\" can never be \
         present: its schema at #/properties/number_of_tickets admits no value (type \"integer\" \
         and an enum of strings clash); no object is valid"
    );
    let c = schema_to_gbnf(&schema, &options(true)).unwrap();
    let warnings: Vec<String> = c.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(
        warnings,
        [
            "read: enum at #/properties/number_of_tickets: type is \"integer\" but enum lists only \
          strings: the keywords clash, no value is valid; read as the enum's strings as integers: \
          [1,2,3]"
        ]
    );
    let g = grammar(&schema, true);
    assert!(accepts(&g, r#"{"number_of_tickets": 2}"#));
    assert!(!accepts(&g, r#"{"number_of_tickets": "2"}"#));
    assert!(!accepts(&g, r#"{"number_of_tickets": 4}"#));
    // strings that spell no integer have no reading: refused in both modes
    let words = json!({"type": "integer", "enum": ["one", "2"]});
    for lenient in [false, true] {
        assert!(
            schema_to_gbnf(&words, &options(lenient)).is_err(),
            "{lenient}"
        );
    }
    // a number's enum of number strings, a boolean's of "true"/"false"
    let g = grammar(&json!({"type": "number", "enum": ["0.5", "2"]}), true);
    assert!(accepts(&g, "0.5") && accepts(&g, "2") && !accepts(&g, "1"));
    let g = grammar(&json!({"type": "boolean", "enum": ["true"]}), true);
    assert!(accepts(&g, "true") && !accepts(&g, "false"));
}
