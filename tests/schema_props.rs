//! Property test: random schemas (from the supported keywords) and random instances; whenever a
//! schema converts, the grammar accepts an instance iff the `jsonschema` crate says it is valid.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use toolrail::engine;
use toolrail::gbnf::Grammar;
use toolrail::schema::{ConvertOptions, Whitespace, schema_to_gbnf};

const KEYS: &[&str] = &["a", "b", "c"];

fn leaf_schema() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({})),
        Just(json!(true)),
        Just(json!(false)),
        prop_oneof![
            Just("null"),
            Just("boolean"),
            Just("integer"),
            Just("number"),
            Just("string")
        ]
        .prop_map(|t| json!({ "type": t })),
        (-20i64..20, 0i64..30, any::<bool>(), any::<bool>()).prop_map(|(lo, span, lx, int)| {
            let mut m = Map::new();
            m.insert("type".into(), json!(if int { "integer" } else { "number" }));
            m.insert(
                if lx { "exclusiveMinimum" } else { "minimum" }.into(),
                json!(lo as f64 / 2.0),
            );
            m.insert("maximum".into(), json!((lo + span) as f64 / 2.0));
            Value::Object(m)
        }),
        (0u64..3, 0u64..4)
            .prop_map(|(a, b)| json!({"type": "string", "minLength": a, "maxLength": a + b})),
        prop_oneof![
            Just("^a+$"),
            Just("b"),
            Just("^[0-9]{2}"),
            Just("x$"),
            Just("^(ab|c)?$")
        ]
        .prop_map(|p| json!({"type": "string", "pattern": p})),
        prop::collection::vec(instance_leaf(), 1..4).prop_map(|v| json!({ "enum": v })),
        instance_leaf().prop_map(|v| json!({ "const": v })),
        (1u64..4).prop_map(|m| json!({"type": "integer", "multipleOf": m})),
        prop::sample::subsequence(
            vec![
                "null", "boolean", "integer", "number", "string", "array", "object"
            ],
            1..3
        )
        .prop_map(|t| json!({ "type": t })),
        prop::sample::subsequence(
            vec!["null", "boolean", "integer", "number", "string", "array", "object"],
            1..3
        )
        .prop_map(|t| json!({ "not": { "type": t } })),
        (0u64..2, prop::option::of(0u64..3), any::<bool>()).prop_map(|(min, max, names)| {
            let mut m = Map::new();
            m.insert("type".into(), json!("object"));
            m.insert("minProperties".into(), json!(min));
            if let Some(x) = max {
                m.insert("maxProperties".into(), json!(min + x));
            }
            if names {
                m.insert("propertyNames".into(), json!({"enum": ["a", "d"]}));
            }
            Value::Object(m)
        }),
        instance().prop_map(|v| json!({ "const": v })),
        (prop::collection::vec(instance_leaf(), 1..4), 0u64..2).prop_map(
            |(v, min)| json!({"type": "array", "items": {"enum": v}, "uniqueItems": true, "minItems": min})
        ),
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    leaf_schema().prop_recursive(3, 24, 3, |inner| {
        prop_oneof![
            (
                prop::collection::btree_map(prop::sample::select(KEYS), inner.clone(), 0..3),
                prop::collection::vec(prop::sample::select(KEYS), 0..3),
                prop_oneof![
                    Just(None),
                    Just(Some(json!(false))),
                    inner.clone().prop_map(Some)
                ],
            )
                .prop_map(|(props, req, add)| {
                    let mut m = Map::new();
                    m.insert("type".into(), json!("object"));
                    m.insert("properties".into(), json!(props));
                    let mut req: Vec<&str> = req;
                    req.sort();
                    req.dedup();
                    m.insert("required".into(), json!(req));
                    if let Some(a) = add {
                        m.insert("additionalProperties".into(), a);
                    }
                    Value::Object(m)
                }),
            (
                inner.clone(),
                prop::collection::vec(inner.clone(), 0..3),
                0u64..3,
                prop::option::of(0u64..4)
            )
                .prop_map(|(items, prefix, min, max)| {
                    let mut m = Map::new();
                    m.insert("type".into(), json!("array"));
                    m.insert("items".into(), items);
                    if !prefix.is_empty() {
                        m.insert("prefixItems".into(), json!(prefix));
                    }
                    m.insert("minItems".into(), json!(min));
                    if let Some(x) = max {
                        m.insert("maxItems".into(), json!(min + x));
                    }
                    Value::Object(m)
                }),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({ "anyOf": v })),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({ "allOf": v })),
            prop::collection::vec(inner, 1..3).prop_map(|v| json!({ "oneOf": v })),
        ]
    })
}

fn instance_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-25i64..25).prop_map(|i| json!(i)),
        (-50i64..50).prop_map(|i| json!(i as f64 / 4.0)),
        "[abx0-9\"\\\\ é]{0,4}".prop_map(Value::String),
    ]
}

fn instance() -> impl Strategy<Value = Value> {
    instance_leaf().prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(&["a", "b", "c", "d"][..]),
                inner,
                0..4
            )
            .prop_map(|m| json!(m)),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn grammar_agrees_with_jsonschema(
        s in schema().prop_flat_map(|s| prop_oneof![Just(s.clone()), Just(json!({"$defs": {"x": s}, "$ref": "#/$defs/x"}))]),
        instances in prop::collection::vec(instance(), 1..8),
        compact in any::<bool>(),
    ) {
        let opts = ConvertOptions {
            whitespace: if compact { Whitespace::Compact } else { Whitespace::Spaced },
            ..ConvertOptions::default()
        };
        let Ok(conv) = schema_to_gbnf(&s, &opts) else { return Ok(()) };
        let grammar = Arc::new(Grammar::parse(&conv.gbnf).map_err(|e| TestCaseError::fail(format!("{e}\n{}", conv.gbnf)))?);
        for inst in &instances {
            let want = jsonschema::is_valid(&s, inst);
            let mut texts = vec![serde_json::to_string(inst).unwrap()];
            if !compact {
                texts.push(serde_json::to_string_pretty(inst).unwrap());
            }
            for t in texts {
                let got = engine::check(&grammar, t.as_bytes()).is_accepted();
                prop_assert_eq!(got, want, "schema {}\ninstance {}\n{}", s, t, conv.gbnf);
            }
        }
    }
}
