//! llama.cpp's own schema test vectors (../shared/corpus/llama-cpp-tests/).
//!
//! - grammar-integration.json, `kind == "schema"`: converted in `llama_compat` mode (as the
//!   linked llama.cpp converts them), our grammar accepts every passing string and rejects every
//!   failing one. The only exception is the one the folder's README lists, where the linked
//!   llama.cpp itself disagrees with the vector ("empty schema (object)"): JSON Schema semantics
//!   decide there, so that case runs in the default (standard JSON Schema) mode.
//! - json-schema-to-grammar.json: every SUCCESS schema converts into a grammar that parses, every
//!   FAILURE schema is an error; exceptions are listed by name with the reason.

use std::sync::Arc;

use serde_json::Value;
use toolrail_gbnf::Grammar;
use toolrail_schema::{ConvertOptions, schema_to_gbnf};

/// One file of `../shared/corpus/llama-cpp-tests/`; missing: a failure under `CI=true`,
/// otherwise None (a skip).
fn corpus(file: &str) -> Option<Value> {
    let p = toolrail_testkit::corpus(&format!("llama-cpp-tests/{file}"))?;
    Some(
        serde_json::from_str(
            &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        )
        .unwrap(),
    )
}

/// Where the vendored llama.cpp disagrees with the vector (README, "Check against the vendored
/// build"; the only such case): JSON Schema semantics decide, so the case is converted in the
/// default mode and these strings are judged by JSON Schema: (description, string, valid).
const README_EXCEPTION: &str = "empty schema (object)";
const README_VERDICTS: &[(&str, bool)] =
    &[("[]", true), ("null", true), ("\"\"", true), ("true", true)];

/// Whether serde_json keeps object members in document order (feature `preserve_order`).
fn preserves_order() -> bool {
    let v: Value = serde_json::from_str(r#"{"b":0,"a":0}"#).unwrap();
    v.as_object()
        .and_then(|o| o.keys().next())
        .is_some_and(|k| k == "b")
}

/// Whether some `properties` in the schema is not in sorted order (order then lost without
/// `preserve_order`).
fn has_unsorted_properties(text: &str) -> bool {
    // read the text with an order-preserving scan: compare the member order of every
    // `properties` object as written with its sorted order
    let mut found = false;
    let mut rest = text;
    while let Some(i) = rest.find("\"properties\"") {
        rest = &rest[i + 12..];
        let Some(open) = rest.find('{') else { break };
        let body = &rest[open + 1..];
        let (mut depth, mut keys, mut j) = (0i32, Vec::new(), 0usize);
        let bytes = body.as_bytes();
        while j < bytes.len() {
            match bytes[j] {
                b'{' | b'[' => depth += 1,
                b'}' | b']' if depth == 0 => break,
                b'}' | b']' => depth -= 1,
                b'"' => {
                    let end = body[j + 1..].find('"').map_or(bytes.len(), |e| j + 1 + e);
                    if depth == 0 && body[end + 1..].trim_start().starts_with(':') {
                        keys.push(body[j + 1..end].to_string());
                    }
                    j = end;
                }
                _ => {}
            }
            j += 1;
        }
        let mut sorted = keys.clone();
        sorted.sort();
        found |= sorted != keys;
    }
    found
}

#[test]
fn grammar_integration_schema_cases() {
    let Some(entries) = corpus("grammar-integration.json") else {
        return;
    };
    let ordered = preserves_order();
    let compat = ConvertOptions {
        llama_compat: true,
        ..ConvertOptions::default()
    };
    let (mut cases, mut checked, mut agree, mut by_readme, mut skipped) = (0, 0, 0, 0, 0);
    let mut failures = Vec::new();
    for e in entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "schema")
    {
        let desc = e["description"].as_str().unwrap_or("");
        let text = e["schema_text"].as_str().unwrap();
        let schema: Value = serde_json::from_str(text).unwrap();
        if !ordered && has_unsorted_properties(text) {
            println!(
                "skip {desc:?}: property order is lost without serde_json's preserve_order feature"
            );
            skipped += 1;
            continue;
        }
        cases += 1;
        let readme = desc == README_EXCEPTION;
        let opts = if readme {
            println!(
                "{desc:?}: the README's one disagreement (llama.cpp accepts any JSON value); \
                 judged by JSON Schema semantics, converted in the default mode"
            );
            ConvertOptions::default()
        } else {
            compat.clone()
        };
        let conv = match schema_to_gbnf(&schema, &opts) {
            Ok(c) => c,
            Err(err) => {
                failures.push(format!("{desc}: does not convert: {err}"));
                continue;
            }
        };
        for w in &conv.warnings {
            println!("{desc:?}: {w}");
        }
        let grammar = match Grammar::parse(&conv.gbnf) {
            Ok(g) => Arc::new(g),
            Err(err) => {
                failures.push(format!(
                    "{desc}: grammar does not parse: {err}\n{}",
                    conv.gbnf
                ));
                continue;
            }
        };
        for (list, expected) in [("passing", true), ("failing", false)] {
            for s in e[list].as_array().unwrap() {
                let s = s.as_str().unwrap();
                let mut expected = expected;
                if readme && let Some((_, v)) = README_VERDICTS.iter().find(|(x, _)| *x == s) {
                    expected = *v;
                    by_readme += 1;
                }
                checked += 1;
                let got = toolrail_engine::check(&grammar, s.as_bytes()).is_accepted();
                if got == expected {
                    agree += 1;
                } else {
                    failures.push(format!(
                        "{desc}: {s:?} should be {}\n{}",
                        if expected { "accepted" } else { "rejected" },
                        conv.gbnf
                    ));
                }
            }
        }
    }
    println!(
        "grammar-integration schema cases (llama_compat): {cases} cases, {skipped} skipped, \
         {checked} strings checked, {agree} agree ({by_readme} judged by JSON Schema per the \
         README), {} failures",
        failures.len()
    );
    for f in &failures {
        println!("FAIL {f}\n");
    }
    assert!(failures.is_empty(), "{} failures", failures.len());
}

/// json-schema-to-grammar.json cases whose status we deliberately do not match: (name, reason).
const STATUS_EXCEPTIONS: &[(&str, &str)] = &[];

#[test]
fn json_schema_to_grammar_statuses() {
    let Some(entries) = corpus("json-schema-to-grammar.json") else {
        return;
    };
    let mut failures = Vec::new();
    let (mut ok, mut skipped) = (0, 0);
    for e in entries.as_array().unwrap() {
        let name = e["name"].as_str().unwrap_or("");
        if e.get("dialect").is_some_and(|d| !d.is_null()) {
            println!(
                "skip {name:?}: dialect {} (a different output language, not JSON)",
                e["dialect"]
            );
            skipped += 1;
            continue;
        }
        let expect_success = e["expect"] == "SUCCESS";
        let schema: Result<Value, _> = serde_json::from_str(e["schema"].as_str().unwrap());
        let result = match &schema {
            Ok(s) => schema_to_gbnf(s, &ConvertOptions::default()).map_err(|err| err.to_string()),
            Err(err) => Err(format!("schema is not JSON: {err}")),
        };
        let outcome = match (&result, expect_success) {
            (Ok(c), true) => match Grammar::parse(&c.gbnf) {
                Ok(_) => Ok(()),
                Err(err) => Err(format!("grammar does not parse: {err}\n{}", c.gbnf)),
            },
            (Err(err), true) => Err(format!("expected SUCCESS, got error: {err}")),
            (Ok(_), false) => Err("expected FAILURE, converted".to_string()),
            (Err(_), false) => Ok(()),
        };
        match outcome {
            Ok(()) => ok += 1,
            Err(why) => {
                if let Some((_, reason)) = STATUS_EXCEPTIONS.iter().find(|(n, _)| *n == name) {
                    println!("exception {name:?}: {why} — {reason}");
                    skipped += 1;
                } else {
                    failures.push(format!("{name}: {why}"));
                }
            }
        }
    }
    println!(
        "json-schema-to-grammar: {ok} agree, {skipped} skipped/excepted, {} failures",
        failures.len()
    );
    for f in &failures {
        println!("FAIL {f}\n");
    }
    assert!(failures.is_empty(), "{} failures", failures.len());
}
