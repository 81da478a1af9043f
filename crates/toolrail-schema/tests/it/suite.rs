//! JSON-Schema-Test-Suite (draft 2020-12) against the converter and the engine.
//!
//! For every schema that converts (default options), every instance is rendered compactly and
//! pretty-printed, with its object members in the original order and in every other order (up to
//! 120 spellings of one value: JSON objects are unordered); the grammar must accept every
//! spelling iff the instance is `valid`. Schemas that do not convert must fail with an
//! "unsupported" error, never produce a wrong grammar.
//! Run with `cargo test --test schema_suite -- --nocapture` to see the table.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use toolrail_gbnf::Grammar;
use toolrail_schema::{ConvertOptions, schema_to_gbnf};

/// The value with its object members permuted in every way (the original first), up to `cap`
/// variants.
fn reorderings(v: &Value, cap: usize) -> Vec<Value> {
    match v {
        Value::Array(items) => {
            let mut out = vec![Vec::new()];
            for item in items {
                let variants = reorderings(item, cap);
                let mut next = Vec::new();
                for prefix in &out {
                    for var in &variants {
                        if next.len() < cap {
                            let mut p: Vec<Value> = prefix.clone();
                            p.push(var.clone());
                            next.push(p);
                        }
                    }
                }
                out = next;
            }
            out.into_iter().map(Value::Array).collect()
        }
        Value::Object(m) => {
            let members: Vec<(String, Vec<Value>)> = m
                .iter()
                .map(|(k, x)| (k.clone(), reorderings(x, cap)))
                .collect();
            let mut orders: Vec<Vec<usize>> = vec![(0..members.len()).collect()];
            let mut sorted: Vec<usize> = (0..members.len()).collect();
            sorted.sort_by(|a, b| members[*a].0.cmp(&members[*b].0));
            orders.push(sorted);
            permutations(members.len(), &mut Vec::new(), &mut orders, cap);
            let mut out = Vec::new();
            for order in &orders {
                // member values: first variant only beyond the original order, to stay small
                let mut obj = serde_json::Map::new();
                for &i in order {
                    obj.insert(members[i].0.clone(), members[i].1[0].clone());
                }
                out.push(Value::Object(obj));
                if out.len() >= cap {
                    break;
                }
            }
            // nested reorderings under the original member order
            for (i, (_, vars)) in members.iter().enumerate() {
                for var in vars.iter().skip(1) {
                    if out.len() >= cap {
                        break;
                    }
                    let mut obj = serde_json::Map::new();
                    for (j, (k, vs)) in members.iter().enumerate() {
                        obj.insert(k.clone(), if i == j { var.clone() } else { vs[0].clone() });
                    }
                    out.push(Value::Object(obj));
                }
            }
            out
        }
        _ => vec![v.clone()],
    }
}

fn permutations(n: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>, cap: usize) {
    if out.len() >= cap {
        return;
    }
    if cur.len() == n {
        if cur.iter().enumerate().any(|(i, &x)| i != x) {
            out.push(cur.clone());
        }
        return;
    }
    for i in 0..n {
        if !cur.contains(&i) {
            cur.push(i);
            permutations(n, cur, out, cap);
            cur.pop();
        }
    }
}

#[derive(Default)]
struct Tally {
    cases: usize,
    converted: usize,
    agree: usize,
    false_accept: usize,
    false_reject: usize,
    unsupported: usize,
}

#[test]
fn json_schema_test_suite() {
    let Some(dir) = toolrail_testkit::corpus("json-schema-test-suite") else {
        return;
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for d in [dir.clone(), dir.join("format")] {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(!files.is_empty(), "no suite files under {}", dir.display());

    let mut total = Tally::default();
    let mut failures: Vec<String> = Vec::new();
    let mut unsupported: std::collections::BTreeMap<String, usize> = Default::default();
    println!(
        "{:<28} {:>6} {:>9} {:>6} {:>6} {:>6} {:>6}",
        "file", "cases", "converted", "agree", "f.acc", "f.rej", "unsup"
    );
    for path in &files {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        let text = std::fs::read_to_string(path).unwrap();
        let groups: Vec<Value> = serde_json::from_str(&text).unwrap();
        let mut t = Tally::default();
        for g in &groups {
            let schema = &g["schema"];
            let tests = g["tests"].as_array().unwrap();
            t.cases += tests.len();
            let grammar = match schema_to_gbnf(schema, &ConvertOptions::default()) {
                Ok(c) => match Grammar::parse(&c.gbnf) {
                    Ok(gr) => Arc::new(gr),
                    Err(e) => {
                        failures.push(format!(
                            "{name} / {}: grammar does not parse: {e}\n{}",
                            g["description"], c.gbnf
                        ));
                        continue;
                    }
                },
                Err(e) => {
                    assert!(e.to_string().starts_with("unsupported: "), "{e}");
                    t.unsupported += tests.len();
                    *unsupported.entry(e.keyword.clone()).or_default() += tests.len();
                    continue;
                }
            };
            t.converted += tests.len();
            for case in tests {
                let valid = case["valid"].as_bool().unwrap();
                let data = &case["data"];
                let desc = case["description"].as_str().unwrap_or("");
                // the instance as serde_json writes it, compact and pretty
                let accepts = |v: &Value| -> Vec<(bool, String)> {
                    [
                        serde_json::to_string(v).unwrap(),
                        serde_json::to_string_pretty(v).unwrap(),
                    ]
                    .into_iter()
                    .map(|r| {
                        (
                            toolrail_engine::check(&grammar, r.as_bytes()).is_accepted(),
                            r,
                        )
                    })
                    .collect()
                };
                // every spelling: original member order first, then the others
                let wrong: Vec<String> = reorderings(data, 120)
                    .iter()
                    .flat_map(&accepts)
                    .filter(|(acc, _)| *acc != valid)
                    .map(|(_, r)| r)
                    .collect();
                if wrong.is_empty() {
                    t.agree += 1;
                } else {
                    if valid {
                        t.false_reject += 1;
                    } else {
                        t.false_accept += 1;
                    }
                    failures.push(format!(
                        "{name} / {} / {desc}: valid={valid}, grammar disagrees on {} spellings, e.g. {:?}\nschema: {schema}\n{}",
                        g["description"],
                        wrong.len(),
                        wrong.iter().take(3).collect::<Vec<_>>(),
                        schema_to_gbnf(schema, &ConvertOptions::default()).map(|c| c.gbnf).unwrap_or_default()
                    ));
                }
            }
        }
        println!(
            "{:<28} {:>6} {:>9} {:>6} {:>6} {:>6} {:>6}",
            name, t.cases, t.converted, t.agree, t.false_accept, t.false_reject, t.unsupported
        );
        total.cases += t.cases;
        total.converted += t.converted;
        total.agree += t.agree;
        total.false_accept += t.false_accept;
        total.false_reject += t.false_reject;
        total.unsupported += t.unsupported;
    }
    println!(
        "{:<28} {:>6} {:>9} {:>6} {:>6} {:>6} {:>6}",
        "TOTAL",
        total.cases,
        total.converted,
        total.agree,
        total.false_accept,
        total.false_reject,
        total.unsupported
    );
    println!(
        "(a case agrees when every spelling of its instance, compact and pretty, in every member \
         order, is accepted iff the instance is valid)"
    );
    println!("unsupported cases by keyword: {unsupported:?}");
    for f in failures.iter().take(30) {
        println!("FAIL {f}\n");
    }
    assert!(
        failures.is_empty(),
        "{} disagreements (see output with --nocapture)",
        failures.len()
    );
}
