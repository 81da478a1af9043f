//! Public API behaviour: grammars for typical tool schemas parse, read well and accept what
//! they should (checked with the engine).

use std::sync::Arc;

use serde_json::{Value, json};
use toolrail_gbnf::Grammar;
use toolrail_schema::{
    ANY_ORDER_MAX_MEMBERS, ConvertOptions, Expr, MemberOrder, SchemaConverter, Whitespace,
    gbnf_literal, schema_to_gbnf,
};

fn grammar(gbnf: &str) -> Arc<Grammar> {
    Arc::new(Grammar::parse(gbnf).unwrap_or_else(|e| panic!("{e}\n{gbnf}")))
}

fn accepts(schema: &Value, opts: &ConvertOptions, text: &str) -> bool {
    let c = schema_to_gbnf(schema, opts).unwrap();
    toolrail_engine::check(&grammar(&c.gbnf), text.as_bytes()).is_accepted()
}

#[test]
fn show_tool_grammar() {
    let schema = json!({"type": "object", "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"enum": ["celsius", "fahrenheit"]}
    }, "required": ["city"]});
    let opts = ConvertOptions {
        close_objects: true,
        ..Default::default()
    };
    let g = schema_to_gbnf(&schema, &opts).unwrap().gbnf;
    println!("{g}");
    assert!(!g.contains('_'), "{g}");
    assert!(
        g.contains("# #/properties/days") || g.contains("days-kv"),
        "{g}"
    );
    let gr = grammar(&g);
    for ok in [
        r#"{"city":"Paris"}"#,
        r#"{"city": "Paris", "days": 14, "unit": "celsius"}"#,
        "{\n  \"city\": \"Paris\",\n  \"days\": 3\n}",
        r#"{"days":3,"city":"Paris"}"#,
        r#"{"unit": "celsius", "city": "Paris", "days": 1}"#,
    ] {
        assert!(
            toolrail_engine::check(&gr, ok.as_bytes()).is_accepted(),
            "{ok}\n{g}"
        );
    }
    for bad in [
        r#"{}"#,
        r#"{"city":"Paris","days":15}"#,
        r#"{"city":"Paris","x":1}"#,
        r#"{"days":3}"#,
        r#"{"days":3,"unit":"celsius"}"#,
        r#"{"days":3,"city":"Paris","days":3}"#,
        r#"{"city":"Paris","city":"Paris"}"#,
    ] {
        assert!(
            !toolrail_engine::check(&gr, bad.as_bytes()).is_accepted(),
            "{bad}\n{g}"
        );
    }
    // declared order on request: a smaller grammar, one order
    let declared = ConvertOptions {
        member_order: MemberOrder::Declared,
        ..opts
    };
    let d = schema_to_gbnf(&schema, &declared).unwrap().gbnf;
    assert!(!d.contains("-rest-"), "{d}");
    assert!(accepts(&schema, &declared, r#"{"city":"Paris","days":3}"#));
    assert!(!accepts(&schema, &declared, r#"{"days":3,"city":"Paris"}"#));
}

/// Member order is free up to the limit, declared beyond it; the grammar stays small.
#[test]
fn any_member_order_up_to_the_limit() {
    for n in 2..=ANY_ORDER_MAX_MEMBERS + 1 {
        let names: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
        let props: serde_json::Map<String, Value> = names
            .iter()
            .map(|k| (k.clone(), json!({"type": "integer"})))
            .collect();
        // the first and the last are required
        let schema = json!({"type": "object", "properties": props,
            "required": [names[0].clone(), names[n - 1].clone()], "additionalProperties": false});
        let c = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
        let g = grammar(&c.gbnf);
        assert!(
            c.gbnf.len() < 20_000,
            "{} bytes for {n} members",
            c.gbnf.len()
        );
        let text = |order: &[usize]| {
            let members: Vec<String> = order.iter().map(|i| format!("\"p{i}\": {i}")).collect();
            format!("{{{}}}", members.join(", "))
        };
        let forward: Vec<usize> = (0..n).collect();
        let backward: Vec<usize> = (0..n).rev().collect();
        assert!(toolrail_engine::check(&g, text(&forward).as_bytes()).is_accepted());
        assert_eq!(
            toolrail_engine::check(&g, text(&backward).as_bytes()).is_accepted(),
            n <= ANY_ORDER_MAX_MEMBERS,
            "{n} members\n{}",
            c.gbnf
        );
        // required ones in any order, optional ones left out
        assert_eq!(
            toolrail_engine::check(&g, text(&[n - 1, 0]).as_bytes()).is_accepted(),
            n <= ANY_ORDER_MAX_MEMBERS
        );
        assert!(!toolrail_engine::check(&g, text(&[0]).as_bytes()).is_accepted());
        assert!(!toolrail_engine::check(&g, text(&[0, 0, n - 1]).as_bytes()).is_accepted());
    }
    // const objects: any order too
    let schema = json!({"const": {"a": 1, "b": [true], "c": {"d": null, "e": "x"}}});
    for ok in [
        r#"{"a":1,"b":[true],"c":{"d":null,"e":"x"}}"#,
        r#"{"c": {"e": "x", "d": null}, "a": 1.0, "b": [true]}"#,
    ] {
        assert!(accepts(&schema, &ConvertOptions::default(), ok), "{ok}");
    }
    for bad in [
        r#"{"a":1,"b":[true]}"#,
        r#"{"a":1,"b":[true],"c":{"d":null,"e":"x"},"a":1}"#,
    ] {
        assert!(!accepts(&schema, &ConvertOptions::default(), bad), "{bad}");
    }
}

#[test]
fn compact_allows_no_whitespace() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}});
    let compact = ConvertOptions {
        whitespace: Whitespace::Compact,
        ..Default::default()
    };
    assert!(accepts(&schema, &compact, r#"{"a":[1,2]}"#));
    assert!(!accepts(&schema, &compact, r#"{"a": [1, 2]}"#));
    assert!(accepts(
        &schema,
        &ConvertOptions::default(),
        r#"{"a": [1, 2]}"#
    ));
    assert!(accepts(
        &schema,
        &ConvertOptions::default(),
        "{\n  \"a\": [\n    1,\n    2\n  ]\n}"
    ));
}

#[test]
fn recursive_refs() {
    let schema = json!({"$defs": {"node": {"type": "object", "properties": {
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
        "value": {"type": "integer"}
    }, "required": ["value"], "additionalProperties": false}}, "$ref": "#/$defs/node"});
    let opts = ConvertOptions::default();
    println!("{}", schema_to_gbnf(&schema, &opts).unwrap().gbnf);
    assert!(accepts(
        &schema,
        &opts,
        r#"{"children":[{"children":[],"value":2},{"value":3}],"value":1}"#
    ));
    assert!(!accepts(
        &schema,
        &opts,
        r#"{"children":[{"children":[]}],"value":1}"#
    ));
    let root = json!({"properties": {"next": {"$ref": "#"}}, "type": "object", "additionalProperties": false});
    assert!(accepts(&root, &opts, r#"{"next":{"next":{}}}"#));
    let left = json!({"$ref": "#"});
    assert!(schema_to_gbnf(&left, &opts).is_err());
}

#[test]
fn errors_name_keyword_and_pointer() {
    let schema = json!({"properties": {"a": {"type": "array", "uniqueItems": true}}});
    let e = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap_err();
    assert_eq!(
        (e.keyword.as_str(), e.pointer.as_str()),
        ("uniqueItems", "#/properties/a")
    );
    assert!(
        e.to_string()
            .starts_with("unsupported: uniqueItems at #/properties/a"),
        "{e}"
    );
    let lenient = ConvertOptions {
        lenient: true,
        ..Default::default()
    };
    let c = schema_to_gbnf(&schema, &lenient).unwrap();
    assert_eq!(c.warnings.len(), 1);
    grammar(&c.gbnf);
    for kw in [
        json!({"not": {"minimum": 3}}),
        json!({"multipleOf": 3, "minimum": 1}),
        json!({"if": {}, "then": {}}),
        json!({"patternProperties": {"^(?!a)": {"type": "integer"}}}),
        json!({"type": "string", "format": "hostname"}),
    ] {
        assert!(
            schema_to_gbnf(&kw, &ConvertOptions::default()).is_err(),
            "{kw}"
        );
    }
}

#[test]
fn converter_api_shares_rules() {
    let mut c = SchemaConverter::new(ConvertOptions {
        close_objects: true,
        ..Default::default()
    });
    let a = c
        .add_schema(
            "get-weather-args",
            &json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        )
        .unwrap();
    let b = c
        .add_schema(
            "get-time-args",
            &json!({"type": "object", "properties": {"tz": {"type": "string"}}}),
        )
        .unwrap();
    let sp = Expr::rule(&c.space_rule());
    let pair = |name: &str, args: Expr| {
        Expr::seq([
            Expr::literal(format!("\"{name}\"")),
            sp.clone(),
            Expr::literal(","),
            sp.clone(),
            Expr::literal("\"arguments\""),
            Expr::literal(":"),
            sp.clone(),
            args,
        ])
    };
    let body = Expr::seq([
        Expr::literal("{"),
        sp.clone(),
        Expr::literal("\"name\""),
        Expr::literal(":"),
        sp.clone(),
        Expr::alt([pair("get_weather", a), pair("get_time", b)]).unwrap(),
        sp.clone(),
        Expr::literal("}"),
    ]);
    let call = c.add_rule("call", body);
    assert!(c.warnings().is_empty());
    let g = c.finish(&Expr::rule(&call));
    println!("{g}");
    let gr = grammar(&g);
    assert!(
        toolrail_engine::check(
            &gr,
            br#"{"name": "get_weather", "arguments": {"city": "Oslo"}}"#
        )
        .is_accepted()
    );
    assert!(
        !toolrail_engine::check(
            &gr,
            br#"{"name": "get_weather", "arguments": {"tz": "UTC"}}"#
        )
        .is_accepted()
    );
    assert!(g.starts_with("root ::= call\n"), "{g}");
}

#[test]
fn gbnf_literal_escapes() {
    assert_eq!(gbnf_literal("a\"b\\\n"), r#""a\"b\\\n""#);
}

#[test]
fn multiple_of_brute_force() {
    // (multipleOf, integer?) against every value k/100 for k in -400..400 written canonically
    for (m, m_hundredths, integer) in [
        ("2", 200, false),
        ("1.5", 150, false),
        ("0.25", 25, false),
        ("3", 300, true),
        ("0.5", 50, true),
        ("7", 700, false),
    ] {
        let ty = if integer { "integer" } else { "number" };
        let schema: Value =
            serde_json::from_str(&format!(r#"{{"type": "{ty}", "multipleOf": {m}}}"#)).unwrap();
        let c = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
        let g = grammar(&c.gbnf);
        for k in -400i64..400 {
            let text = if k % 100 == 0 {
                format!("{}", k / 100)
            } else {
                format!("{}", k as f64 / 100.0)
            };
            let is_int = k % 100 == 0;
            let want = k % m_hundredths == 0 && (!integer || is_int);
            let got = toolrail_engine::check(&g, text.as_bytes()).is_accepted();
            assert_eq!(got, want, "multipleOf {m} ({ty}) {text}\n{}", c.gbnf);
        }
        assert_eq!(
            toolrail_engine::check(&g, b"4.50").is_accepted(),
            m == "1.5" || m == "0.25" || m == "0.5" && !integer
        );
    }
}

#[test]
fn many_optional_properties_with_extras() {
    let props: serde_json::Map<String, Value> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .map(|k| (k.to_string(), json!({"type": "string"})))
        .collect();
    let schema = json!({"type": "object", "properties": props, "required": ["d"], "additionalProperties": {"type": "integer"}});
    let c = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
    assert!(c.gbnf.contains("-rest-"), "{}", c.gbnf);
    let g = grammar(&c.gbnf);
    for ok in [
        r#"{"d":"x"}"#,
        r#"{"x":1,"d":"x"}"#,
        r#"{"a":"1","x":2,"c":"3","d":"","y":5,"f":"z"}"#,
        r#"{"d":"","aa":3}"#,
        r#"{"c":"1","a":"2","d":""}"#,
        r#"{"f":"1","x":7,"e":"2","d":"","c":"","b":"","a":"","y":8}"#,
    ] {
        assert!(
            toolrail_engine::check(&g, ok.as_bytes()).is_accepted(),
            "{ok}\n{}",
            c.gbnf
        );
    }
    for bad in [
        r#"{}"#,
        r#"{"x":1}"#,
        r#"{"c":"1","a":"2"}"#,
        r#"{"c":"1","d":"","c":"2"}"#,
        r#"{"a":1,"d":""}"#,
        r#"{"x":"s","d":""}"#,
        r#"{"d":"","d":""}"#,
    ] {
        assert!(
            !toolrail_engine::check(&g, bad.as_bytes()).is_accepted(),
            "{bad}\n{}",
            c.gbnf
        );
    }
}

#[test]
fn unsatisfiable_schemas_are_an_error_not_a_grammar_matching_nothing() {
    for schema in [
        json!(false),
        json!({"not": {}}),
        json!({"allOf": [{"type": "string"}, {"type": "null"}]}),
    ] {
        let err = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap_err();
        assert!(err.to_string().contains("no value"), "{schema}: {err}");
    }
}

#[test]
fn output_is_deterministic() {
    let schema = json!({"type": "object", "properties": {"x": {"anyOf": [{"type": "string", "format": "date"}, {"type": "array", "items": {"$ref": "#"}}]}}});
    let a = schema_to_gbnf(&schema, &ConvertOptions::default())
        .unwrap()
        .gbnf;
    for _ in 0..5 {
        assert_eq!(
            schema_to_gbnf(&schema, &ConvertOptions::default())
                .unwrap()
                .gbnf,
            a
        );
    }
    assert!(
        a.lines().filter(|l| !l.starts_with('#')).all(|l| !l
            .split("::=")
            .next()
            .unwrap_or("")
            .contains('_')),
        "{a}"
    );
}

#[test]
fn unique_items_over_small_enums() {
    let schema = json!({"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": true, "minItems": 1});
    let c = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
    let g = grammar(&c.gbnf);
    for ok in [r#"["a"]"#, r#"["c","a"]"#, r#"["b", "c", "a"]"#] {
        assert!(
            toolrail_engine::check(&g, ok.as_bytes()).is_accepted(),
            "{ok}\n{}",
            c.gbnf
        );
    }
    for bad in ["[]", r#"["a","a"]"#, r#"["a","b","c","a"]"#, r#"["d"]"#] {
        assert!(
            !toolrail_engine::check(&g, bad.as_bytes()).is_accepted(),
            "{bad}\n{}",
            c.gbnf
        );
    }
    let open = json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true});
    assert_eq!(
        schema_to_gbnf(&open, &ConvertOptions::default())
            .unwrap_err()
            .keyword,
        "uniqueItems"
    );
}

#[test]
fn close_objects_closes_declared_objects_only() {
    let opts = ConvertOptions {
        close_objects: true,
        ..Default::default()
    };
    let schema = json!({"type": "object", "properties": {
        "meta": {"type": "object"},
        "tag": {"type": "string"}
    }, "required": ["id"]});
    let c = schema_to_gbnf(&schema, &opts).unwrap();
    let g = grammar(&c.gbnf);
    for ok in [r#"{"id":1}"#, r#"{"id":[1],"meta":{"x":[1,2]},"tag":"t"}"#] {
        assert!(
            toolrail_engine::check(&g, ok.as_bytes()).is_accepted(),
            "{ok}\n{}",
            c.gbnf
        );
    }
    for bad in [r#"{}"#, r#"{"id":1,"other":2}"#] {
        assert!(
            !toolrail_engine::check(&g, bad.as_bytes()).is_accepted(),
            "{bad}\n{}",
            c.gbnf
        );
    }
    // standard semantics: open
    assert!(accepts(
        &schema,
        &ConvertOptions::default(),
        r#"{"id":1,"other":2}"#
    ));
}

#[test]
fn uri_reference_format() {
    let schema = json!({"type": "string", "format": "uri-reference"});
    let c = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
    let g = grammar(&c.gbnf);
    for ok in [
        "\"/abc\"",
        "\"abc\"",
        "\"//foo.bar/?baz=qux#quux\"",
        "\"http://a.b/c\"",
        "\"\"",
        "\"#frag\"",
    ] {
        assert!(
            toolrail_engine::check(&g, ok.as_bytes()).is_accepted(),
            "{ok}"
        );
    }
    for bad in ["\"a b\"", "\"%zz\"", "\"http://[x]/\""] {
        assert!(
            !toolrail_engine::check(&g, bad.as_bytes()).is_accepted(),
            "{bad}"
        );
    }
}

/// `llama_compat` options (optionally lenient).
fn compat() -> ConvertOptions {
    ConvertOptions {
        llama_compat: true,
        ..ConvertOptions::default()
    }
}

/// Converts in llama_compat mode; returns the grammar and the ignored keywords as
/// `keyword@pointer`.
fn compat_grammar(schema: &Value) -> (Arc<Grammar>, Vec<String>, String) {
    let c = schema_to_gbnf(schema, &compat()).unwrap_or_else(|e| panic!("{e}\n{schema}"));
    let warnings = c
        .warnings
        .iter()
        .map(|w| format!("{}@{}", w.keyword, w.pointer))
        .collect();
    (grammar(&c.gbnf), warnings, c.gbnf)
}

fn check_texts(schema: &Value, ok: &[&str], bad: &[&str]) -> Vec<String> {
    let (g, warnings, text) = compat_grammar(schema);
    for s in ok {
        assert!(
            toolrail_engine::check(&g, s.as_bytes()).is_accepted(),
            "{schema}: {s} should be accepted\n{text}"
        );
    }
    for s in bad {
        assert!(
            !toolrail_engine::check(&g, s.as_bytes()).is_accepted(),
            "{schema}: {s} should be rejected\n{text}"
        );
    }
    warnings
}

#[test]
fn llama_compat_infers_types_as_llama_cpp() {
    // items → array (the default mode accepts any non-array)
    let s = json!({"items": {"type": "integer"}, "minItems": 1, "maxItems": 2});
    assert!(accepts(&s, &ConvertOptions::default(), "1"));
    check_texts(
        &s,
        &["[1]", "[1, 2]"],
        &["1", "\"a\"", "[]", "[1,2,3]", "null"],
    );
    // prefixItems → array, a tuple of exactly that length
    let s = json!({"prefixItems": [{"type": "integer"}, {"type": "string"}]});
    assert!(accepts(&s, &ConvertOptions::default(), "[1]"));
    check_texts(&s, &["[1, \"a\"]"], &["[1]", "[]", "[1, \"a\", 2]", "1"]);
    // properties → a closed object
    let s = json!({"properties": {"a": {"type": "integer"}}});
    check_texts(
        &s,
        &["{}", "{\"a\": 1}"],
        &["1", "[]", "{\"a\": 1, \"b\": 2}"],
    );
    // additionalProperties other than true → object
    let s = json!({"additionalProperties": {"type": "integer"}});
    check_texts(&s, &["{}", "{\"k\": 1}"], &["\"x\"", "{\"k\": \"v\"}"]);
    let s = json!({"additionalProperties": true});
    check_texts(&s, &["1", "\"x\"", "{\"k\": \"v\"}"], &[]);
    // string keywords → string
    for s in [
        json!({"pattern": "^a+$"}),
        json!({"minLength": 1}),
        json!({"maxLength": 3}),
        json!({"format": "date"}),
    ] {
        check_texts(&s, &[], &["1", "null", "[]"]);
    }
    check_texts(&json!({"pattern": "^a+$"}), &["\"aa\""], &["\"b\""]);
    // keywords llama.cpp infers nothing from: any value, and the keyword is ignored
    for (s, kw) in [
        (json!({"minItems": 2}), "minItems"),
        (json!({"minimum": 3}), "minimum"),
        (json!({"format": "email"}), "format"),
        (json!({"required": ["a"]}), "required"),
    ] {
        let w = check_texts(&s, &["1", "[]", "\"x\"", "{}", "null"], &[]);
        assert_eq!(w, vec![format!("{kw}@#")], "{s}");
    }
    // a type list: each type reads its own keywords
    let s = json!({"type": ["integer", "null"], "minimum": 1, "multipleOf": 2});
    let w = check_texts(&s, &["3", "null"], &["0", "\"3\""]);
    assert_eq!(w, vec!["multipleOf@#"]);
}

#[test]
fn llama_compat_closes_objects_in_llama_cpp_order() {
    let props = json!({"a": {"type": "integer"}, "b": {"type": "integer"}});
    // closed unless additionalProperties says otherwise
    let s = json!({"type": "object", "properties": props});
    assert!(accepts(
        &s,
        &ConvertOptions::default(),
        r#"{"a": 1, "x": 2}"#
    ));
    check_texts(&s, &["{}", r#"{"a": 1, "b": 2}"#], &[r#"{"a": 1, "x": 2}"#]);
    // free-form without properties
    check_texts(&json!({"type": "object"}), &[r#"{"x": [1]}"#], &["1"]);
    // additional members: allowed when said so, after the declared ones (as llama.cpp writes)
    let s = json!({"type": "object", "properties": props, "additionalProperties": true});
    check_texts(
        &s,
        &[
            r#"{"a": 1, "x": 2}"#,
            r#"{"x": 2}"#,
            r#"{"b": 1, "x": 2, "y": 3}"#,
        ],
        &[r#"{"x": 2, "a": 1}"#, r#"{"a": "s"}"#],
    );
    // required members first, then the optional ones, each in schema order
    let s = json!({"type": "object", "properties": props, "required": ["b"]});
    check_texts(
        &s,
        &[r#"{"b": 1, "a": 2}"#, r#"{"b": 1}"#],
        &[r#"{"a": 2, "b": 1}"#, "{}"],
    );
    // a required name missing from properties is neither required nor admitted
    let s =
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "z"]});
    let w = check_texts(&s, &[r#"{"a": 1}"#], &[r#"{"a": 1, "z": 2}"#]);
    assert_eq!(w, vec!["required@#"]);
}

#[test]
fn llama_compat_ignored_keywords_are_warnings() {
    // refused by the default mode, converted with a warning naming keyword and pointer
    for (s, ok, kw) in [
        (
            json!({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}}}),
            r#"{"tags": ["a", "a"]}"#,
            "uniqueItems@#/properties/tags",
        ),
        (
            json!({"oneOf": [{"type": "integer"}, {"type": "number"}]}),
            "1",
            "oneOf@#",
        ),
        (
            json!({"type": "integer", "not": {"enum": [3, 4]}}),
            "3",
            "not@#",
        ),
        (
            json!({"type": "string", "format": "date", "maxLength": 3}),
            r#""2024-01-01""#,
            "maxLength@#",
        ),
        (
            json!({"type": "object", "patternProperties": {"^x": {"type": "integer"}}}),
            r#"{"x": "s"}"#,
            "patternProperties@#",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2}),
            "{}",
            "minProperties@#",
        ),
        (
            json!({"type": "string", "pattern": "^ab+$", "minLength": 4}),
            r#""ab""#,
            "minLength@#",
        ),
        (
            json!({"if": {"type": "integer"}, "then": {"minimum": 3}}),
            "1",
            "if@#",
        ),
    ] {
        assert!(
            schema_to_gbnf(&s, &ConvertOptions::default()).is_err(),
            "{s}"
        );
        let w = check_texts(&s, &[ok], &[]);
        assert!(w.contains(&kw.to_string()), "{s}: {w:?}");
    }
    // enforced by the default mode, ignored by llama.cpp
    for (s, ok, kws) in [
        (
            json!({"type": "number", "minimum": 0}),
            "-1",
            vec!["minimum@#"],
        ),
        (
            json!({"type": "integer", "minimum": 0, "exclusiveMinimum": 5}),
            "1",
            vec!["exclusiveMinimum@#"],
        ),
        (
            json!({"type": "integer", "multipleOf": 2}),
            "3",
            vec!["multipleOf@#"],
        ),
        (
            json!({"type": "string", "format": "email"}),
            r#""x""#,
            vec!["format@#"],
        ),
        (
            json!({"$ref": "#/$defs/s", "maxLength": 2, "$defs": {"s": {"type": "string"}}}),
            r#""abc""#,
            vec!["maxLength@#"],
        ),
        (
            json!({"type": "string", "enum": ["a", 1]}),
            "1",
            vec!["type@#"],
        ),
        (
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}], "minLength": 2}),
            r#""a""#,
            vec!["minLength@#"],
        ),
    ] {
        assert!(!accepts(&s, &ConvertOptions::default(), ok), "{s}");
        let w = check_texts(&s, &[ok], &[]);
        assert_eq!(w, kws, "{s}");
    }
    // oneOf is anyOf; each ignored keyword is reported once, at its own pointer
    let s = json!({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]});
    let w = check_texts(&s, &["1", "-1.5"], &["\"1\""]);
    assert_eq!(w, vec!["minimum@#/oneOf/1", "oneOf@#"]);
    let s = json!({"oneOf": [{"type": "string"}, {}]});
    assert!(!accepts(&s, &ConvertOptions::default(), "\"x\""));
    check_texts(&s, &["\"x\"", "1"], &[]);
    // a tuple: its length is exact, whatever minItems and additionalItems say
    let s = json!({"items": [{"type": "integer"}], "minItems": 0, "additionalItems": true});
    assert!(accepts(&s, &ConvertOptions::default(), "[1, 2]"));
    let w = check_texts(&s, &["[1]"], &["[]", "[1, 2]"]);
    assert_eq!(w, vec!["minItems@#", "additionalItems@#"]);
    // patterns llama.cpp does not translate: any string
    for p in [
        "ab", "^a$b$", "^(?=a)a$", "^\\d+$", "^[\\w]$", "^a{,x}$", "^\\/$",
    ] {
        let s = json!({"pattern": p, "minLength": 5});
        let w = check_texts(&s, &[r#""x""#], &["1"]);
        assert_eq!(w, vec!["pattern@#", "minLength@#"], "{s}");
    }
    check_texts(
        &json!({"pattern": "^[$^]a\\$\\x41[\\-a]{2,}$"}),
        &[r#""$a$A-a""#],
        &[r#""x""#, r#""$a$A-""#],
    );
    // allOf as llama.cpp reads it: members' properties, all required, closed
    let s = json!({"allOf": [
        {"properties": {"a": {"type": "integer"}}},
        {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
        {"anyOf": [{"properties": {"c": {"type": "integer"}}}, {"type": "string"}]},
        {"minProperties": 1}
    ]});
    let w = check_texts(
        &s,
        &[r#"{"a": 1, "b": 2}"#, r#"{"a": 1, "b": 2, "c": 3}"#],
        &[r#"{"b": 2}"#, r#"{"a": 1, "b": 2, "x": 3}"#, r#""s""#],
    );
    assert_eq!(w, vec!["allOf@#/allOf/3", "allOf@#"]);
    let s = json!({"allOf": [{"enum": [1, 2, 3]}, {"enum": [2, 3, 4]}]});
    check_texts(&s, &["2", "3"], &["1", "4"]);
    // what the default mode does stays as it was
    let s = json!({"type": "integer", "minimum": 1, "maximum": 3});
    check_texts(&s, &["1", "3", "2.0"], &["0", "4"]);
    // what llama.cpp refuses too is still an error
    let s = json!({"type": "string", "pattern": "^(a$"});
    assert!(schema_to_gbnf(&s, &compat()).is_err());
}

/// Comments name schema pointers; a property name with a line break stays on the comment line.
#[test]
fn property_names_with_line_breaks_keep_the_grammar_valid() {
    let schema = json!({"type": "object", "properties": {"a\nb": {"type": "object",
        "properties": {"x": {"type": "integer"}, "y\r": {"type": "string"}}}}});
    let c = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
    let g = grammar(&c.gbnf);
    for ok in [r#"{"a\nb": {"y\r": "s", "x": 1}}"#, r#"{"a\nb": {}}"#] {
        assert!(
            toolrail_engine::check(&g, ok.as_bytes()).is_accepted(),
            "{ok}\n{}",
            c.gbnf
        );
    }
}

#[test]
fn unknown_keywords_and_annotations_are_ignored_with_notes() {
    let o = ConvertOptions::default();
    // beside enum/const/$ref, annotation and unknown keywords do not stop the conversion
    let schema = json!({
        "$defs": {"n": {"type": "integer", "maximum": 5}},
        "type": "object",
        "properties": {
            "a": {"enum": [1, 2], "readonly": true, "id": "x", "example": 1},
            "b": {"const": "k", "x-vendor": {"anything": 1}},
            "c": {"$ref": "#/$defs/n", "readonly": true, "description": "d"}
        }
    });
    let c = schema_to_gbnf(&schema, &o).unwrap();
    let noted: Vec<(&str, &str)> = c
        .notes
        .iter()
        .map(|n| (n.keyword.as_str(), n.pointer.as_str()))
        .collect();
    assert!(noted.contains(&("readonly", "#/properties/a")), "{noted:?}");
    assert!(noted.contains(&("x-vendor", "#/properties/b")), "{noted:?}");
    assert!(!noted.iter().any(|(k, _)| *k == "description" || *k == "id"));
    assert!(c.warnings.is_empty());
    assert!(accepts(&schema, &o, r#"{"a": 2, "b": "k", "c": 5}"#));
    assert!(!accepts(&schema, &o, r#"{"a": 3}"#));
    assert!(!accepts(&schema, &o, r#"{"b": "j"}"#));
    assert!(!accepts(&schema, &o, r#"{"c": 6}"#));
    // unknown keywords on both sides of an allOf do not conflict
    let both = json!({"allOf": [{"type": "string", "x-a": 1}, {"maxLength": 2, "x-a": 2}]});
    assert!(accepts(&both, &o, r#""ab""#));
    assert!(!accepts(&both, &o, r#""abc""#));
}

#[test]
fn pattern_properties_are_exact() {
    let o = ConvertOptions::default();
    // closed: pattern names only, declared names keep their schema
    let closed = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "patternProperties": {"^x-": {"type": "integer"}},
        "additionalProperties": false
    });
    assert!(accepts(&closed, &o, r#"{"a": "s", "x-b": 1}"#));
    assert!(accepts(&closed, &o, r#"{"x-b": 1, "x-c": 2}"#));
    assert!(!accepts(&closed, &o, r#"{"x-b": "s"}"#));
    assert!(!accepts(&closed, &o, r#"{"c": 1}"#));
    assert!(!accepts(&closed, &o, r#"{"a": 1}"#));
    // open: names matching the pattern take its schema, the others anything
    let open = json!({"type": "object", "patternProperties": {"^[a-z]+$": {"type": "integer"}}});
    assert!(accepts(&open, &o, r#"{"ab": 1, "A": "x", "": null}"#));
    assert!(!accepts(&open, &o, r#"{"ab": "x"}"#));
    assert!(!accepts(&open, &o, r#"{"A": 1, "b": false}"#));
    // a pattern matching every name also applies to the declared ones
    let every = json!({
        "properties": {"a": {"type": "integer"}},
        "patternProperties": {".*": {"minimum": 0}}
    });
    assert!(accepts(&every, &o, r#"{"a": 1, "b": "x"}"#));
    assert!(!accepts(&every, &o, r#"{"a": -1}"#));
    assert!(!accepts(&every, &o, r#"{"b": -1}"#));
    // two patterns that cannot match one name
    let two = json!({
        "patternProperties": {"^c_": {"type": "array"}, "^u_": {"type": "string"}},
        "additionalProperties": false
    });
    assert!(accepts(&two, &o, r#"{"c_1": [], "u_1": "s"}"#));
    assert!(!accepts(&two, &o, r#"{"c_1": "s"}"#));
    // what cannot be told apart is an error naming keyword and pointer
    let look = json!({"patternProperties": {"^(?!x)": {"type": "integer"}}, "additionalProperties": false});
    let e = schema_to_gbnf(&look, &o).unwrap_err();
    assert_eq!(e.keyword, "patternProperties");
    // lenient never narrows: pattern names stay allowed beside additionalProperties: false
    let lenient = ConvertOptions {
        lenient: true,
        ..Default::default()
    };
    let c = schema_to_gbnf(&look, &lenient).unwrap();
    assert!(c.warnings.iter().any(|w| w.keyword == "patternProperties"));
    assert!(accepts(&look, &lenient, r#"{"y": 1}"#));
}

#[test]
fn formats_json_schema_does_not_define_are_ignored_with_a_note() {
    let o = ConvertOptions::default();
    for f in ["path", "byte", "color"] {
        let schema = json!({"type": "string", "format": f});
        let c = schema_to_gbnf(&schema, &o).unwrap();
        assert!(c.notes.iter().any(|n| n.keyword == "format"), "{f}");
        assert!(accepts(&schema, &o, r#""not base64, not a colour""#));
    }
    // a format validators check but the converter cannot express stays an error
    let e = schema_to_gbnf(&json!({"type": "string", "format": "hostname"}), &o).unwrap_err();
    assert_eq!((e.keyword.as_str(), e.pointer.as_str()), ("format", "#"));
}

#[test]
fn one_of_exactly_one_required_and_closed_branches() {
    let o = ConvertOptions::default();
    // exactly one of the required sets
    let area = json!({
        "type": "object",
        "properties": {"radius": {"type": "number"}, "length": {"type": "number"}, "width": {"type": "number"}},
        "oneOf": [{"required": ["radius"]}, {"required": ["length", "width"]}]
    });
    assert!(accepts(&area, &o, r#"{"radius": 1}"#));
    assert!(accepts(&area, &o, r#"{"length": 1, "width": 2}"#));
    assert!(accepts(&area, &o, r#"{"radius": 1, "width": 2}"#));
    assert!(!accepts(
        &area,
        &o,
        r#"{"radius": 1, "length": 1, "width": 2}"#
    ));
    assert!(!accepts(&area, &o, r#"{"width": 2}"#));
    // without a type, values that are not objects match every branch: never exactly one
    let bare = json!({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
    assert!(accepts(&bare, &o, r#"{"a": 1}"#));
    assert!(!accepts(&bare, &o, r#"{"a": 1, "b": 2}"#));
    assert!(!accepts(&bare, &o, "1"));
    // a branch implying another is never the only one
    let nested = json!({"oneOf": [{"required": ["a"]}, {"required": ["a", "b"]}]});
    assert!(accepts(&nested, &o, r#"{"a": 1}"#));
    assert!(!accepts(&nested, &o, r#"{"a": 1, "b": 2}"#));
    // closed branches requiring different names are disjoint
    let closed = json!({"oneOf": [
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false},
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false}
    ]});
    assert!(accepts(&closed, &o, r#"{"name": "a"}"#));
    assert!(accepts(&closed, &o, r#"{"path": "a"}"#));
    assert!(!accepts(&closed, &o, r#"{"name": "a", "path": "b"}"#));
}

#[test]
fn dependencies_are_exact() {
    let o = ConvertOptions::default();
    for key in ["dependencies", "dependentRequired"] {
        let schema = json!({
            "type": "object",
            "properties": {"card": {"type": "string"}, "billing": {"type": "string"}},
            key: {"card": ["billing"]}
        });
        assert!(accepts(&schema, &o, r#"{"card": "1", "billing": "x"}"#));
        assert!(accepts(&schema, &o, r#"{"billing": "x"}"#));
        assert!(accepts(&schema, &o, "{}"));
        assert!(!accepts(&schema, &o, r#"{"card": "1"}"#), "{key}");
    }
    let schemas = json!({
        "type": "object",
        "dependentSchemas": {"a": {"required": ["b"], "properties": {"b": {"type": "integer"}}}}
    });
    assert!(accepts(&schemas, &o, r#"{"a": 0, "b": 1}"#));
    assert!(accepts(&schemas, &o, r#"{"b": "x"}"#));
    assert!(!accepts(&schemas, &o, r#"{"a": 0, "b": "x"}"#));
    assert!(!accepts(&schemas, &o, r#"{"a": 0}"#));
}

#[test]
fn pattern_with_length_bounds() {
    let o = ConvertOptions::default();
    // bounds implied by the pattern
    let implied =
        json!({"type": "string", "pattern": "^[\\+\\w-]{5,96}$", "minLength": 5, "maxLength": 96});
    assert!(accepts(&implied, &o, r#""abcde""#));
    assert!(!accepts(&implied, &o, r#""abcd""#));
    // one repeated class: the bounds intersected
    let hex = json!({"type": "string", "pattern": "^[0-9a-f]*$", "minLength": 4, "maxLength": 4});
    assert!(accepts(&hex, &o, r#""00ff""#));
    assert!(!accepts(&hex, &o, r#""0ff""#));
    assert!(!accepts(&hex, &o, r#""00ff0""#));
    assert!(!accepts(&hex, &o, r#""00fg""#));
    // an unanchored pattern under maxLength stays unsupported
    let e = schema_to_gbnf(
        &json!({"type": "string", "pattern": "^a", "maxLength": 3}),
        &o,
    )
    .unwrap_err();
    assert_eq!((e.keyword.as_str(), e.pointer.as_str()), ("pattern", "#"));
}

#[test]
fn an_any_of_branch_no_object_satisfies_is_left_out() {
    let o = ConvertOptions::default();
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": false,
        "anyOf": [{"required": ["b"]}, {"required": ["a"]}]
    });
    assert!(accepts(&schema, &o, r#"{"a": 1}"#));
    assert!(!accepts(&schema, &o, "{}"));
    assert!(!accepts(&schema, &o, r#"{"b": 1}"#));
    // when no branch is left, the schema is refused, naming why
    let none = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": false,
        "anyOf": [{"required": ["b"]}, {"required": ["c"]}]
    });
    assert_eq!(schema_to_gbnf(&none, &o).unwrap_err().keyword, "required");
    // a branch holding a schema no object satisfies is not itself empty (`{}` matches the
    // first branch below): refused, naming the inner schema, never left out
    let inner = json!({"anyOf": [
        {"type": "object", "additionalProperties":
            {"type": "object", "required": ["a"], "additionalProperties": false}},
        {"type": "integer", "multipleOf": 3}
    ]});
    let e = schema_to_gbnf(&inner, &o).unwrap_err();
    assert_eq!(
        (e.keyword.as_str(), e.pointer.as_str()),
        ("required", "#/anyOf/0/additionalProperties")
    );
}

#[test]
fn min_properties_one_without_required_members() {
    let o = ConvertOptions::default();
    for n in [2, 8] {
        // any order (2 members) and declared order (8 members)
        let props: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect();
        let schema = json!({"type": "object", "properties": props, "minProperties": 1});
        assert!(accepts(&schema, &o, r#"{"p1": 1}"#), "{n}");
        assert!(accepts(&schema, &o, r#"{"x": "y"}"#), "{n}");
        assert!(!accepts(&schema, &o, "{}"), "{n}");
        assert!(!accepts(&schema, &o, r#"{"p1": "y"}"#), "{n}");
    }
}

#[test]
fn one_of_by_lengths() {
    let o = ConvertOptions::default();
    let schema = json!({"type": "string", "oneOf": [{"maxLength": 0}, {"minLength": 1, "pattern": "^[a-z]+$"}]});
    assert!(accepts(&schema, &o, r#""""#));
    assert!(accepts(&schema, &o, r#""ab""#));
    assert!(!accepts(&schema, &o, r#""A""#));
    let arrays =
        json!({"oneOf": [{"type": "array", "maxItems": 1}, {"type": "array", "minItems": 1}]});
    assert_eq!(schema_to_gbnf(&arrays, &o).unwrap_err().keyword, "oneOf");
}

/// Envelope rules and converter rules share one namespace: a name reserved by the caller is
/// never given to a schema rule, and built-in names are never handed to the caller.
#[test]
fn reserved_rule_names_never_clash() {
    let mut c = SchemaConverter::new(ConvertOptions::default());
    assert_eq!(c.reserve_rule_name("string").as_str(), "string-2");
    assert_eq!(c.reserve_rule_name("space").as_str(), "space-2");
    let call = c.reserve_rule_name("call");
    assert_eq!(call.as_str(), "call");
    let schema = json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}});
    let args = c.add_schema("call", &schema).unwrap();
    assert_ne!(args, Expr::rule(&call));
    let g = c.finish(&Expr::alt([args, Expr::rule(&call)]).unwrap());
    // the reserved name is not defined by the converter: the caller writes it
    assert!(!g.lines().any(|l| l.starts_with("call ::=")), "{g}");
    let names: Vec<&str> = g
        .lines()
        .filter_map(|l| l.split_once(" ::= "))
        .map(|(n, _)| n)
        .collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(names.len(), unique.len(), "{g}");
}

#[test]
fn a_schema_no_value_satisfies_is_an_error_naming_its_keywords() {
    // These gave a grammar that matches nothing, with exit status 0 and no warning.
    for (schema, says) in [
        (
            json!({"allOf": [{"type": "string"}, {"type": "integer"}]}),
            "unsupported: allOf at #: no value satisfies `allOf`",
        ),
        (
            json!({"type": "string", "const": 5}),
            "no value satisfies `type`, `const` together",
        ),
        (
            json!({"not": {}}),
            "unsupported: not at #: no value satisfies `not`",
        ),
        (
            json!(false),
            "unsupported: false at #: the schema is `false`",
        ),
    ] {
        let err = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap_err();
        assert!(err.to_string().contains(says), "{schema}: {err}");
    }
    // A schema that matches something is unchanged.
    assert!(schema_to_gbnf(&json!({"type": "string"}), &ConvertOptions::default()).is_ok());
}

#[test]
fn a_converted_enum_records_its_location() {
    let schema = json!({
        "type": "object",
        "properties": {"sortBy": {"enum": ["name", "size", "mtime"]}}
    });
    let mut conv = toolrail_schema::SchemaConverter::new(ConvertOptions::default());
    conv.add_schema("args-ls", &schema).expect("converts");
    let found = conv
        .rule_locations()
        .into_iter()
        .find(|(_, l)| l.pointer == "/properties/sortBy")
        .expect("the enum's rule has a location");
    assert_eq!(found.1.document, "args-ls");
    assert!(found.0.starts_with("args-ls"), "{found:?}");
}

#[test]
fn an_optional_property_whose_schema_admits_no_value_is_left_out_with_a_warning() {
    let o = ConvertOptions::default();
    let conflict = json!({"type": "object", "properties": {
        "x": {"type": "string", "enum": [1]},
        "y": {"type": "integer"}
    }});
    let c = schema_to_gbnf(&conflict, &o).unwrap();
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert_eq!(
        (
            c.warnings[0].keyword.as_str(),
            c.warnings[0].pointer.as_str()
        ),
        ("properties", "#/properties/x")
    );
    assert!(c.warnings[0].message.contains("can never be present"));
    assert!(accepts(&conflict, &o, r#"{"y": 1}"#));
    assert!(!accepts(&conflict, &o, r#"{"x": "a"}"#));
    // `false` says so on purpose: no warning
    let forbidden = json!({"type": "object", "properties": {"x": false}});
    assert!(schema_to_gbnf(&forbidden, &o).unwrap().warnings.is_empty());
}
