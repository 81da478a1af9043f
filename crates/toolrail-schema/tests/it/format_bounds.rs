//! `format` together with `pattern` and `minLength`/`maxLength`: expressed exactly (the format's
//! language intersected with the others), refused with keyword and pointer when too large, and
//! in lenient mode only ever widened.

use std::sync::Arc;

use serde_json::{Value, json};
use toolrail_gbnf::Grammar;
use toolrail_schema::{ConvertOptions, schema_to_gbnf};

fn accepts(schema: &Value, options: &ConvertOptions, text: &str) -> bool {
    let gbnf = schema_to_gbnf(schema, options)
        .unwrap_or_else(|e| panic!("{schema}: {e}"))
        .gbnf;
    let grammar = Arc::new(Grammar::parse(&gbnf).unwrap_or_else(|e| panic!("{e}\n{gbnf}")));
    let json = serde_json::to_string(text).unwrap();
    toolrail_engine::check(&grammar, json.as_bytes()).is_accepted()
}

/// What the schema allows, decided without a grammar: the jsonschema crate for `pattern`
/// and the lengths, toolrail's own email check for `format: email` (the grammar's language).
fn valid(schema: &Value, text: &str) -> bool {
    let mut rest = schema.clone();
    let format = rest
        .as_object_mut()
        .and_then(|o| o.remove("format"))
        .and_then(|f| f.as_str().map(str::to_string));
    let others = jsonschema::validator_for(&rest).unwrap();
    let format_ok = match format.as_deref() {
        Some("email") => toolrail_schema::formats::is_valid_email(text),
        Some(f) => {
            let only = json!({"type": "string", "format": f});
            jsonschema::options()
                .should_validate_formats(true)
                .build(&only)
                .unwrap()
                .is_valid(&json!(text))
        }
        None => true,
    };
    format_ok && others.is_valid(&json!(text))
}

const EMAILS: &[&str] = &[
    "",
    "a@b",
    "a@b.c",
    "a.b@c.d",
    "abcdefg@b.co",
    "abcdefgh@b.co",
    "abcdefghi@b.co",
    "\"a b\"@x.y",
    "\"a\\\"b\"@x.y",
    "a\"b@c",
    "a@[1.2.3.4]",
    "a@[1.2.3.45]",
    "ab@[1.2.3.45]",
    "a@[IPv6:::1]",
    "a@-b.c",
    "a..b@c",
    "x@y.z ",
];

/// Every candidate is accepted exactly when it is valid, for email with each bound.
#[test]
fn email_with_length_bounds_is_exact() {
    let options = ConvertOptions::default();
    for schema in [
        json!({"type": "string", "format": "email", "maxLength": 12}),
        json!({"type": "string", "format": "email", "minLength": 8}),
        json!({"type": "string", "format": "email", "minLength": 5, "maxLength": 11}),
        json!({"type": "string", "format": "email", "pattern": "^[a-z]+@", "maxLength": 13}),
    ] {
        for text in EMAILS {
            assert_eq!(
                accepts(&schema, &options, text),
                valid(&schema, text),
                "{schema} on {text:?}"
            );
        }
    }
}

#[test]
fn uri_with_a_pattern_is_exact() {
    let options = ConvertOptions::default();
    let schema = json!({"type": "string", "format": "uri", "pattern": "^https?://"});
    let merged = json!({"type": "string", "allOf": [{"format": "uri"}, {"pattern": "^https?://"}]});
    let suffixed = json!({"type": "string", "format": "uri", "pattern": "\\.(gif|jpg)$"});
    for text in [
        "https://x.y/z",
        "http://a",
        "https://a b",
        "ftp://x.y",
        "https:x",
        "https://x.y/a.gif",
        "x:a.jpg",
        "a.jpg",
        "https://[::1]/p?q#f.gif",
        "",
    ] {
        for s in [&schema, &suffixed] {
            assert_eq!(
                accepts(s, &options, text),
                valid(s, text),
                "{s} on {text:?}"
            );
        }
        assert_eq!(
            accepts(&merged, &options, text),
            accepts(&schema, &options, text),
            "{text:?}"
        );
    }
}

/// `date-time` is too large for one product automaton (its leap seconds), so a pattern is
/// walked through its rules instead: still exact, on every candidate.
#[test]
fn date_time_with_a_pattern_is_exact() {
    let options = ConvertOptions::default();
    let texts = [
        "2026-01-02T03:04:05Z",
        "2026-01-02T03:04:05z",
        "2026-01-02t03:04:05Z",
        "2025-01-02T03:04:05Z",
        "2026-02-29T00:00:00Z",
        "2024-02-29T00:00:00Z",
        "2026-06-30T23:59:60Z",
        "2026-06-30T23:59:60+00:00",
        "2026-06-30T23:59:60.5-05:00",
        "2026-06-30T18:59:60-05:00",
        "2026-01-02T03:04:05.123Z",
        "2026-01-02T03:04:05.Z",
        "2026-01-02T03:04:05+01:00",
        "1999-12-31T23:59:59-05:00",
        "1999-12-31T23:59:59Z",
        "1900-02-29T00:00:00+00:00",
        "2026-",
        "",
    ];
    for pattern in [
        "^2026-",
        "Z$",
        "^19[0-9]{2}-.*[+-][0-9]{2}:[0-9]{2}$",
        "\\.[0-9]+",
        "T0[0-3]:",
        "^(2024|1999)-[0-9]{2}-(29|31)T",
    ] {
        let schema = json!({"type": "string", "format": "date-time", "pattern": pattern});
        let gbnf = schema_to_gbnf(&schema, &options)
            .unwrap_or_else(|e| panic!("{schema}: {e}"))
            .gbnf;
        assert!(gbnf.lines().count() < 200, "{pattern}: {gbnf}");
        let mut accepted = 0;
        for text in texts {
            let yes = accepts(&schema, &options, text);
            assert_eq!(yes, valid(&schema, text), "{schema} on {text:?}");
            accepted += usize::from(yes);
        }
        // each pattern keeps some candidates and refuses others
        assert!(
            0 < accepted && accepted < texts.len(),
            "{pattern}: {accepted}"
        );
    }
    // a pattern no date-time meets is an error naming both
    let e = schema_to_gbnf(
        &json!({"type": "string", "format": "date-time", "pattern": "^abc"}),
        &options,
    )
    .unwrap_err();
    assert!(
        e.message
            .contains("no string of format \"date-time\" meets pattern"),
        "{e}"
    );
}

#[test]
fn impossible_and_too_large_intersections_are_errors_naming_the_pointer() {
    // no date has 9 characters or fewer
    let e = schema_to_gbnf(
        &json!({"properties": {"d": {"type": "string", "format": "date", "maxLength": 9}}}),
        &ConvertOptions::default(),
    )
    .unwrap_err();
    assert_eq!(
        (e.keyword.as_str(), e.pointer.as_str()),
        ("format", "#/properties/d")
    );
    assert!(e.message.contains("no string"), "{e}");
    // an email of up to 1024 characters would need a rule per length for each state
    let schema =
        json!({"properties": {"e": {"type": "string", "format": "email", "maxLength": 1024}}});
    let e = schema_to_gbnf(&schema, &ConvertOptions::default()).unwrap_err();
    assert_eq!(
        (e.keyword.as_str(), e.pointer.as_str()),
        ("format", "#/properties/e")
    );
    assert!(e.message.contains("rules"), "{e}");
    // lenient: the bound is dropped, which only widens the grammar
    let lenient = ConvertOptions {
        lenient: true,
        ..Default::default()
    };
    let c = schema_to_gbnf(&schema, &lenient).unwrap();
    assert!(
        c.warnings.iter().any(|w| w.keyword == "format"),
        "{:?}",
        c.warnings
    );
    let inner = json!({"type": "string", "format": "email", "maxLength": 1024});
    for text in EMAILS {
        if valid(&inner, text) {
            assert!(accepts(&inner, &lenient, text), "{text:?}");
        }
    }
}
