//! Hostile sizes and contradictions: huge size keywords and pattern counts, deep nesting and
//! unsatisfiable bounds are errors naming the keyword and the JSON pointer, never a crash, a
//! huge grammar or a grammar silently matching nothing.

use std::sync::Arc;

use serde_json::{Value, json};
use toolrail_gbnf::Grammar;
use toolrail_schema::{ConvertOptions, MAX_REPEAT_TOTAL, SchemaError, schema_to_gbnf};

fn grammar(gbnf: &str) -> Arc<Grammar> {
    Arc::new(Grammar::parse(gbnf).unwrap_or_else(|e| panic!("{e}\n{gbnf}")))
}

fn err(schema: &Value) -> SchemaError {
    schema_to_gbnf(schema, &ConvertOptions::default()).unwrap_err()
}

fn lenient() -> ConvertOptions {
    ConvertOptions {
        lenient: true,
        ..Default::default()
    }
}

#[test]
fn huge_size_keywords_are_errors_naming_keyword_pointer_and_limit() {
    for (keyword, schema) in [
        (
            "maxLength",
            json!({"type": "string", "maxLength": 1_000_000_000u64}),
        ),
        (
            "minLength",
            json!({"type": "string", "minLength": 100_000_000u64}),
        ),
        (
            "minItems",
            json!({"type": "array", "minItems": 100_000_000u64}),
        ),
        (
            "maxItems",
            json!({"type": "array", "maxItems": 100_000_000u64}),
        ),
        (
            "minProperties",
            json!({"type": "object", "minProperties": 100_000_000u64}),
        ),
        (
            "maxProperties",
            json!({"type": "object", "maxProperties": 100_000_000u64}),
        ),
    ] {
        let wrapped = json!({"type": "object", "properties": {"a": schema}});
        let e = err(&wrapped);
        assert_eq!(e.keyword, keyword, "{e}");
        assert_eq!(e.pointer, "#/properties/a", "{e}");
        assert!(e.message.contains(&MAX_REPEAT_TOTAL.to_string()), "{e}");
    }
}

#[test]
fn the_reproducer_schema_is_refused() {
    let Some(path) = toolrail_testkit::shared("reliability/F1-maxlength-1e9.schema.json") else {
        return;
    };
    let text = std::fs::read_to_string(path).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let e = err(&schema);
    assert_eq!((e.keyword.as_str(), e.pointer.as_str()), ("maxLength", "#"));
}

#[test]
fn sizes_at_the_limit_convert_and_stay_exact() {
    let n = MAX_REPEAT_TOTAL;
    let c = schema_to_gbnf(
        &json!({"type": "string", "minLength": 3, "maxLength": n}),
        &ConvertOptions::default(),
    )
    .unwrap();
    // chunks of at most 2000 (llama.cpp's limit per repetition)
    assert!(
        !c.gbnf.contains("{0,2001}") && c.gbnf.contains("char{2000}"),
        "{}",
        c.gbnf
    );
    let g = grammar(&c.gbnf);
    assert!(toolrail_engine::check(&g, b"\"abc\"").is_accepted());
    assert!(!toolrail_engine::check(&g, b"\"ab\"").is_accepted());
    for k in ["minItems", "maxItems"] {
        assert!(
            schema_to_gbnf(&json!({"type": "array", k: n}), &ConvertOptions::default()).is_ok()
        );
    }
}

#[test]
fn a_huge_max_items_capped_by_the_items_themselves_is_exact() {
    let schema = json!({"type": "array", "prefixItems": [{"type": "integer"}], "items": false, "maxItems": 1_000_000_000u64});
    let c = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
    let g = grammar(&c.gbnf);
    assert!(toolrail_engine::check(&g, b"[1]").is_accepted());
    assert!(!toolrail_engine::check(&g, b"[1,2]").is_accepted());
}

#[test]
fn lenient_mode_drops_huge_bounds_and_only_widens() {
    let schema = json!({"type": "string", "minLength": 2, "maxLength": 1_000_000_000u64});
    let c = schema_to_gbnf(&schema, &lenient()).unwrap();
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert_eq!(c.warnings[0].keyword, "maxLength");
    let g = grammar(&c.gbnf);
    assert!(toolrail_engine::check(&g, b"\"abcdef\"").is_accepted());
    assert!(!toolrail_engine::check(&g, b"\"a\"").is_accepted());
    // a dropped minimum accepts every valid string (and more)
    let c = schema_to_gbnf(
        &json!({"type": "string", "minLength": 1_000_000_000u64}),
        &lenient(),
    )
    .unwrap();
    assert_eq!(c.warnings[0].keyword, "minLength");
    let g = grammar(&c.gbnf);
    assert!(toolrail_engine::check(&g, b"\"a\"").is_accepted());
}

#[test]
fn huge_pattern_repetitions_are_errors() {
    for p in [
        "^a{100000000}$",
        "^(ab){1000}(c{1000}){1000}$",
        "x{100001,}",
    ] {
        let e =
            err(&json!({"type": "object", "properties": {"s": {"type": "string", "pattern": p}}}));
        assert_eq!(
            (e.keyword.as_str(), e.pointer.as_str()),
            ("pattern", "#/properties/s"),
            "{e}"
        );
        assert!(e.message.contains("limit"), "{e}");
    }
    assert!(
        schema_to_gbnf(
            &json!({"type": "string", "pattern": "^a{3000}$"}),
            &ConvertOptions::default()
        )
        .is_ok()
    );
}

/// Builds `{"items": {"items": ... {}}}` `depth` levels deep without recursion.
fn nested_items(depth: usize) -> Value {
    let mut v = json!({});
    for _ in 0..depth {
        // not json!: it serializes its arguments, recursively
        let mut m = serde_json::Map::new();
        m.insert("items".to_string(), v);
        v = Value::Object(m);
    }
    v
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

#[test]
fn deep_nesting_names_the_exact_pointer_with_escapes_and_indices() {
    // root (1) > properties (2) > "a/b~" array (3) > element 0 (4) > items... : the container
    // at depth MAX_DOCUMENT_DEPTH + 1 is the one named
    let schema = json!({"properties": {"a/b~": [nested_items(600)]}});
    let e = toolrail_schema::check_depth(&schema).unwrap_err();
    let levels = toolrail_schema::MAX_DOCUMENT_DEPTH + 1 - 4;
    assert_eq!(e.keyword, "items");
    assert_eq!(
        e.pointer,
        format!("#/properties/a~1b~0/0{}", "/items".repeat(levels))
    );
    let shallow = json!({"properties": {"a/b~": [nested_items(20)]}});
    assert!(toolrail_schema::check_depth(&shallow).is_ok());
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let schema = nested_items(100_000);
    let e = schema_to_gbnf(&schema, &ConvertOptions::default()).map(|_| ());
    drop_flat(schema);
    let e = e.unwrap_err();
    assert!(e.message.contains("nested deeper"), "{}", e.message);
    assert_eq!(e.keyword, "items");
    assert!(
        e.pointer.starts_with("#/items/items/"),
        "{}",
        &e.pointer[..40]
    );
    // a few levels are fine
    assert!(schema_to_gbnf(&nested_items(20), &ConvertOptions::default()).is_ok());
}

#[test]
fn contradictory_bounds_are_errors_naming_the_keywords() {
    for (schema, keyword, words) in [
        (
            json!({"type": "string", "minLength": 3, "maxLength": 2}),
            "minLength",
            &["minLength 3", "maxLength 2"][..],
        ),
        (
            json!({"type": "integer", "minimum": 3, "maximum": 2}),
            "minimum",
            &["minimum", "maximum"][..],
        ),
        (
            json!({"type": "number", "minimum": 2, "exclusiveMaximum": 2}),
            "minimum",
            &["exclusiveMaximum"][..],
        ),
        (
            json!({"type": "number", "exclusiveMinimum": 2.5, "maximum": 2.5}),
            "exclusiveMinimum",
            &["maximum"][..],
        ),
        (
            json!({"type": "integer", "minimum": 1.2, "maximum": 1.8}),
            "minimum",
            &["no integer"][..],
        ),
        (
            json!({"type": "array", "minItems": 3, "maxItems": 1}),
            "minItems",
            &["maxItems 1"][..],
        ),
        (
            json!({"type": "object", "minProperties": 3, "maxProperties": 1}),
            "minProperties",
            &["maxProperties 1"][..],
        ),
        (
            json!({"type": "object", "required": ["a", "b"], "maxProperties": 1}),
            "maxProperties",
            &["required"][..],
        ),
        (json!({"enum": []}), "enum", &["empty"][..]),
        (
            json!({"type": "object", "properties": {"a": {}}, "required": ["b"], "additionalProperties": false}),
            "required",
            &["\"b\"", "additionalProperties"][..],
        ),
    ] {
        let wrapped = json!({"type": "object", "properties": {"p": schema}});
        let e = err(&wrapped);
        assert_eq!(e.keyword, keyword, "{schema}: {e}");
        assert_eq!(e.pointer, "#/properties/p", "{schema}: {e}");
        for w in words {
            assert!(e.message.contains(w), "{schema}: {e}");
        }
    }
    // touching bounds leave one value
    assert!(
        schema_to_gbnf(
            &json!({"type": "number", "minimum": 2, "maximum": 2}),
            &ConvertOptions::default()
        )
        .is_ok()
    );
    assert!(
        schema_to_gbnf(
            &json!({"type": "string", "minLength": 2, "maxLength": 2}),
            &ConvertOptions::default()
        )
        .is_ok()
    );
}

#[test]
fn an_enum_of_100k_strings_converts_in_near_linear_time() {
    // 100,000 values: a quadratic dedup (10^10 string comparisons) would take minutes here,
    // near-linear work takes well under a second; no timed assertion, the structure is checked.
    let n = 100_000;
    let values: Vec<Value> = (0..n).map(|i| json!(format!("v{i}"))).collect();
    let mut with_dup = values.clone();
    with_dup.push(json!("v7"));
    let t = std::time::Instant::now();
    let c = schema_to_gbnf(&json!({"enum": with_dup}), &ConvertOptions::default()).unwrap();
    println!("enum of {n} strings: {:?}", t.elapsed());
    // every value once (the duplicate dropped)
    assert_eq!(c.gbnf.matches("\"\\\"v").count(), n, "values");
    assert!(c.gbnf.contains(r#""\"v99999\"""#) && !c.gbnf.contains("v100000"));
    // (the engine is not run on it: 100,000 alternatives exceed its stack-set budget)
    let small: Vec<Value> = values.into_iter().take(1000).collect();
    let c = schema_to_gbnf(&json!({"enum": small}), &ConvertOptions::default()).unwrap();
    let g = grammar(&c.gbnf);
    assert!(toolrail_engine::check(&g, b"\"v999\"").is_accepted());
    assert!(!toolrail_engine::check(&g, b"\"v1000\"").is_accepted());
}

#[test]
fn integers_of_any_length_where_the_schema_allows_them() {
    // F9: the grammar capped integer parts at 16 digits (as llama.cpp), rejecting valid values
    let long = "123456789012345678901234567890";
    for schema in [
        json!({"type": "integer"}),
        json!({"type": "number"}),
        json!({"type": "integer", "minimum": 5}),
        json!({"type": "number", "exclusiveMinimum": 0.5}),
        json!({"type": "integer", "maximum": -5}),
    ] {
        let c = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
        let g = grammar(&c.gbnf);
        let neg = schema.get("maximum").is_some();
        for digits in [&long[..17], long] {
            let text = if neg {
                format!("-{digits}")
            } else {
                digits.to_string()
            };
            assert!(
                toolrail_engine::check(&g, text.as_bytes()).is_accepted(),
                "{schema} {text}\n{}",
                c.gbnf
            );
        }
        assert!(
            !toolrail_engine::check(&g, b"0123").is_accepted(),
            "{schema}"
        );
    }
    // bounded ranges stay exact
    let c = schema_to_gbnf(
        &json!({"type": "integer", "minimum": -7, "maximum": 100}),
        &ConvertOptions::default(),
    )
    .unwrap();
    let g = grammar(&c.gbnf);
    for (text, ok) in [
        ("100", true),
        ("-7", true),
        ("101", false),
        ("-8", false),
        (&long[..17], false),
    ] {
        assert_eq!(
            toolrail_engine::check(&g, text.as_bytes()).is_accepted(),
            ok,
            "{text}"
        );
    }
    // llama_compat keeps llama.cpp's 16 digits
    let compat = ConvertOptions {
        llama_compat: true,
        ..Default::default()
    };
    for schema in [
        json!({"type": "integer"}),
        json!({"type": "integer", "minimum": 5}),
    ] {
        let c = schema_to_gbnf(&schema, &compat).unwrap();
        let g = grammar(&c.gbnf);
        assert!(
            toolrail_engine::check(&g, &long.as_bytes()[..16]).is_accepted(),
            "{schema}"
        );
        assert!(
            !toolrail_engine::check(&g, &long.as_bytes()[..17]).is_accepted(),
            "{schema}"
        );
    }
}

/// The most stacks alive at any byte of `text`, or None when it is rejected.
fn max_live_stacks(gbnf: &str, text: &[u8]) -> Option<usize> {
    let mut engine = toolrail_engine::Engine::new(grammar(gbnf));
    let mut state = engine.initial();
    let mut most = engine.stacks(state).len();
    for &b in text {
        state = engine.accept_byte(state, b)?;
        most = most.max(engine.stacks(state).len());
    }
    engine.can_end(state).then_some(most)
}

#[test]
fn long_strings_have_one_parse_per_length() {
    // chained `char{0,2000} char{0,2000} ...` kept one stack per way of splitting the run
    // (thousands of stacks; llama.cpp's sampler crawled); the chain keeps a handful.
    for max in [2001u64, 4500, 10_000] {
        let c = schema_to_gbnf(
            &json!({"type": "string", "maxLength": max}),
            &ConvertOptions::default(),
        )
        .unwrap();
        for len in [0, 1999, 2000, 2001, max as usize] {
            let text = format!("\"{}\"", "x".repeat(len));
            let most = max_live_stacks(&c.gbnf, text.as_bytes())
                .unwrap_or_else(|| panic!("{len} chars rejected under maxLength {max}"));
            assert!(most <= 8, "{most} live stacks for {len} chars:\n{}", c.gbnf);
        }
        let over = format!("\"{}\"", "x".repeat(max as usize + 1));
        assert!(max_live_stacks(&c.gbnf, over.as_bytes()).is_none());
    }
}

#[test]
fn repeated_groups_stay_within_llama_cpp_limits() {
    // inline, these were refused by llama.cpp (a group holding over 2000 generated rules, or a
    // group's rules times its count over 2000); the grammar must parse with llama.cpp's rules
    for schema in [
        json!({"type": "array", "items": {"type": "string", "maxLength": 1024}}),
        json!({"type": "array", "items": {"type": "string", "maxLength": 1999}, "maxItems": 1500}),
        json!({"type": "string", "pattern": "^(ab{0,100}){0,30}$"}),
        json!({"type": "object", "properties": {"a": {"type": "array",
            "items": {"type": "string", "minLength": 2500, "maxLength": 7000}}}}),
    ] {
        let c = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
        toolrail_gbnf::Grammar::parse(&c.gbnf)
            .unwrap_or_else(|e| panic!("{schema}: {e:?}\n{}", c.gbnf));
    }
}

#[test]
fn long_property_names_beside_additional_properties_stay_within_llama_cpps_group_depth() {
    // Found by fuzzing: the rule for "any other key" is a trie over the declared names, one
    // nested group per character; a 300-character name nested 300 groups deep, which
    // llama.cpp refuses (more than 128). Deep levels now start rules of their own.
    let long = "q".repeat(300);
    let other = format!("{}r", "q".repeat(150));
    let schema = json!({
        "type": "object",
        "properties": {(long.clone()): {"type": "integer"}, (other.clone()): {"type": "integer"}},
        "additionalProperties": {"type": "string"}
    });
    let conversion = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
    let g = grammar(&conversion.gbnf);
    let accepts = |text: &str| toolrail_engine::check(&g, text.as_bytes()).is_accepted();
    assert!(accepts(&format!("{{\"{long}\": 1}}")));
    assert!(accepts(&format!("{{\"{other}\": 1}}")));
    // A key that is a prefix of a declared name, or runs past one, is an "other" key.
    let prefix = "q".repeat(200);
    assert!(accepts(&format!("{{\"{prefix}\": \"s\"}}")));
    assert!(accepts(&format!("{{\"{long}x\": \"s\"}}")));
    // A declared name cannot take the other keys' schema.
    assert!(!accepts(&format!("{{\"{long}\": \"s\"}}")));
}

#[test]
fn a_property_name_of_any_length_beside_additional_properties_converts_without_deep_recursion() {
    // A 100,000-character name overflowed the stack (the trie was built and dropped
    // recursively, one level per character): now an arena and a work list of rules, so the
    // depth of recursion is bounded whatever the names' length (this runs on a test thread's
    // small stack).
    let long = "a".repeat(100_000);
    let schema = json!({
        "type": "object",
        "properties": {(long.clone()): {"type": "integer"}},
        "additionalProperties": {"type": "string"}
    });
    let conversion = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
    let g = grammar(&conversion.gbnf);
    let accepts = |text: &str| toolrail_engine::check(&g, text.as_bytes()).is_accepted();
    assert!(accepts(&format!("{{\"{long}\": 1}}")));
    assert!(accepts(&format!("{{\"{}\": \"s\"}}", &long[..99_999])));
    assert!(!accepts(&format!("{{\"{long}\": \"s\"}}")));
}
