//! Property tests: random schemas (from the supported keywords) and random instances; whenever a
//! schema converts, the grammar accepts an instance iff the `jsonschema` crate says it is valid.
//! Formats: leap seconds against the `jsonschema` crate, `email` against
//! `toolrail_schema::formats::is_valid_email` (the validator's email check).

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use toolrail_gbnf::Grammar;
use toolrail_schema::{ConvertOptions, Whitespace, schema_to_gbnf};

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
                let got = toolrail_engine::check(&grammar, t.as_bytes()).is_accepted();
                prop_assert_eq!(got, want, "schema {}\ninstance {}\n{}", s, t, conv.gbnf);
            }
        }
    }
}

/// A grammar for one schema, parsed once per test binary.
fn format_grammar(format: &str) -> Arc<Grammar> {
    let schema = json!({"type": "string", "format": format});
    let conv = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap();
    Arc::new(Grammar::parse(&conv.gbnf).unwrap())
}

static TIME: std::sync::LazyLock<Arc<Grammar>> =
    std::sync::LazyLock::new(|| format_grammar("time"));
static DATE_TIME: std::sync::LazyLock<Arc<Grammar>> =
    std::sync::LazyLock::new(|| format_grammar("date-time"));
static EMAIL: std::sync::LazyLock<Arc<Grammar>> =
    std::sync::LazyLock::new(|| format_grammar("email"));

static DURATION: std::sync::LazyLock<Arc<Grammar>> =
    std::sync::LazyLock::new(|| format_grammar("duration"));

/// `format: duration` (RFC 3339 appendix A) agrees with the `jsonschema` crate's check on
/// every string of up to six characters over the letters durations use, a digit and a
/// stranger: units out of order, repeated, weeks mixed with other units, a `T` with nothing
/// after it, a `Y` and a `D` without the `M` between them.
#[test]
fn duration_agrees_with_jsonschema_exhaustively() {
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&json!({"format": "duration"}))
        .unwrap();
    let alphabet = ['P', 'T', 'Y', 'M', 'W', 'D', 'H', 'S', '1', 'x'];
    let mut strings = vec![String::new()];
    let mut frontier = vec![String::new()];
    for _ in 0..6 {
        let mut next = Vec::new();
        for s in &frontier {
            // every valid duration starts with P: only short strings need other starts
            if !s.is_empty() && !s.starts_with('P') && s.len() >= 2 {
                continue;
            }
            for c in alphabet {
                next.push(format!("{s}{c}"));
            }
        }
        strings.extend(next.iter().cloned());
        frontier = next;
    }
    let mut valid = 0;
    for s in &strings {
        let want = validator.is_valid(&json!(s));
        valid += usize::from(want);
        assert_eq!(grammar_accepts_string(&DURATION, s), want, "duration {s:?}");
    }
    // the enumeration reaches the interesting cases
    assert!(valid > 30, "{valid} valid durations");
    for s in ["P1Y1M1D", "PT1H1M1S", "P1W", "P1DT1S", "P12Y", "PT36H"] {
        assert!(
            validator.is_valid(&json!(s)) && grammar_accepts_string(&DURATION, s),
            "{s}"
        );
    }
}

fn grammar_accepts_string(g: &Arc<Grammar>, s: &str) -> bool {
    toolrail_engine::check(g, serde_json::to_string(s).unwrap().as_bytes()).is_accepted()
}

/// Leap seconds and offsets: half the times are 23:59 UTC written with the offset (the valid
/// leap seconds), the others nearby; the grammar agrees with the `jsonschema` crate's `time`
/// and `date-time` checks.
fn leap_time() -> impl Strategy<Value = String> {
    (
        0u32..1440,
        any::<bool>(),
        prop_oneof![
            Just(0i32),
            Just(0),
            Just(1),
            Just(-1),
            Just(60),
            Just(-60),
            -1440i32..1440
        ],
        prop_oneof![Just(60u32), Just(60), Just(59)],
        prop_oneof![Just(""), Just(".5"), Just(".123")],
        prop::sample::select(vec!["", "Z", "z"]),
    )
        .prop_map(|(off, plus, shift, sec, frac, z)| {
            // the local time that is 23:59 UTC under this offset, shifted by `shift` minutes
            let utc = 1439i32;
            let signed = if plus { off as i32 } else { -(off as i32) };
            let local = (utc + signed + shift).rem_euclid(1440);
            let (h, m) = (local / 60, local % 60);
            if z.is_empty() {
                let sign = if plus { '+' } else { '-' };
                format!(
                    "{h:02}:{m:02}:{sec:02}{frac}{sign}{:02}:{:02}",
                    off / 60,
                    off % 60
                )
            } else {
                format!("{h:02}:{m:02}:{sec:02}{frac}{z}")
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn leap_seconds_agree_with_jsonschema(t in leap_time()) {
        let check = |format: &str, s: &str| {
            jsonschema::options()
                .should_validate_formats(true)
                .build(&json!({"format": format}))
                .unwrap()
                .is_valid(&json!(s))
        };
        prop_assert_eq!(grammar_accepts_string(&TIME, &t), check("time", &t), "time {}", t);
        let dt = format!("2016-12-31T{t}");
        prop_assert_eq!(grammar_accepts_string(&DATE_TIME, &dt), check("date-time", &dt), "date-time {}", dt);
    }

    /// The email rule and `formats::is_valid_email` (what the tool-call validator checks) accept
    /// the same strings: random strings near the edges of RFC 5321's `Mailbox`.
    #[test]
    fn email_grammar_agrees_with_checker(
        s in prop_oneof![
            "(\"([a-z @.,\\[\\]\t]|\\\\[ -~\t])*\"|[a-z.~!]{0,4}|[a-z]+( [a-z<]+)?)@([a-z0-9.-]{0,8}|\\[[0-9a-fA-F:.IiPpVv6]{0,14}\\]|[a-z0-9.-]{0,3}>)",
            "[ -~]{0,12}",
            "[a-z]{1,3}@\\[(IPv6|ipv6|IPV6):[0-9a-f:.]{2,12}\\]",
            "[a-z]{1,3}@\\[[0-9.]{7,15}\\]",
            "[a-z]{1,3}@[a-z0-9-]{60,66}(\\.[a-z]{1,3})?",
        ]
    ) {
        prop_assert_eq!(
            grammar_accepts_string(&EMAIL, &s),
            toolrail_schema::formats::is_valid_email(&s),
            "{:?}", s
        );
    }
}

/// Known email cases, checked against both the grammar and `formats::is_valid_email`
/// (`"\ "@host` is RFC 5321's quoted-pair with a space; display names are not a mailbox).
#[test]
fn email_cases() {
    let valid = [
        "joe.bloggs@example.com",
        "\"\\ \"@host",
        "\"\"@host",
        "\"joe bloggs\"@example.com",
        "\"a\\\"b\\\\c@d\"@x.org",
        "a@[127.0.0.1]",
        "a@[IPv6:::1]",
        "a@[ipv6:1:2:3:4:5:6:1.2.3.4]",
        "a@localhost",
    ];
    let invalid = [
        "Joe <a@b.c>",
        " <a@b.c>",
        "\"a\tb\"@host",
        "\"\\\t\"@host",
        "\"a\"b\"@host",
        "a..b@host",
        "a@-host",
        "a@host-",
        "a@[127.0.0.01]",
        "a@[IPv6:1:2:3:4:5:6:7::1.2.3.4]",
        "a@[IPv6:1.2.3.4::]",
        "a@",
        "@b",
        "a@b@c",
    ];
    for (cases, want) in [(&valid[..], true), (&invalid[..], false)] {
        for s in cases {
            assert_eq!(grammar_accepts_string(&EMAIL, s), want, "grammar: {s:?}");
            assert_eq!(
                toolrail_schema::formats::is_valid_email(s),
                want,
                "checker: {s:?}"
            );
        }
    }
}
