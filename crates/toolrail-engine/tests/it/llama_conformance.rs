//! Agreement with llama.cpp's own grammar test vectors (../shared/corpus/llama-cpp-tests/):
//! parser cases (symbol ids and elements), integration cases (build success or failure,
//! passing and failing strings, token cases) and the golden initial stacks and rejects.
//! Every disagreement is named; the tests fail if there is any.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use toolrail_engine::utf8::PartialUtf8;
use toolrail_engine::{Engine, check};
use toolrail_gbnf::{Element, ElementKind, Grammar};

/// One file of the vectors; missing: a failure under `CI=true`, otherwise a skip (None).
#[track_caller]
fn load(name: &str) -> Option<Value> {
    let path = toolrail_testkit::corpus(&format!("llama-cpp-tests/{name}"))?;
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn element(v: &Value) -> Element {
    let kind = ElementKind::from_llama_name(v[0].as_str().unwrap()).unwrap();
    Element::new(kind, v[1].as_u64().unwrap() as u32)
}

fn rules_of(v: &Value) -> Vec<Vec<Element>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(element).collect())
        .collect()
}

fn report(disagreements: &[String], total: usize, what: &str) {
    println!("{what}: {} of {total} agree", total - disagreements.len());
    for d in disagreements {
        println!("  DISAGREES: {d}");
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreement(s) with llama.cpp in {what}",
        disagreements.len()
    );
}

#[test]
fn parser_vectors_agree() {
    let Some(cases) = load("grammar-parser.json") else {
        return;
    };
    let cases = cases.as_array().unwrap();
    let mut bad = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let text = case["grammar"].as_str().unwrap();
        let expect_success = case["expect_success"].as_bool().unwrap();
        match (toolrail_gbnf::parse(text), expect_success) {
            (Ok(_), false) => bad.push(format!("case {i}: parsed, llama.cpp fails: {text:?}")),
            (Err(e), true) => bad.push(format!(
                "case {i}: failed ({e}), llama.cpp parses: {text:?}"
            )),
            (Err(_), false) => {}
            (Ok(parsed), true) => {
                let ours: BTreeMap<String, u64> = parsed
                    .symbols
                    .iter()
                    .enumerate()
                    .map(|(id, s)| (s.name.clone(), id as u64))
                    .collect();
                let theirs: BTreeMap<String, u64> = case["expected_symbol_ids"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
                    .collect();
                if ours != theirs {
                    bad.push(format!("case {i}: symbol ids {ours:?} != {theirs:?}"));
                }
                let expected = rules_of(&case["expected_rules"]);
                if parsed.rules != expected {
                    bad.push(format!(
                        "case {i}: rules differ:\n ours   {:?}\n theirs {:?}",
                        parsed.rules, expected
                    ));
                }
            }
        }
    }
    report(&bad, cases.len(), "grammar-parser.json");
}

/// Feeds a token case as llama.cpp's test does: `<[N]>` pieces for tokens, one code point
/// per token 0 for text. None where llama.cpp would throw.
fn run_token_case(engine: &mut Engine, segments: &Value) -> bool {
    let mut state = engine.initial();
    for seg in segments.as_array().unwrap() {
        if let Some(token) = seg.get("token").and_then(Value::as_u64) {
            let piece = format!("<[{token}]>");
            match engine.accept_token(state, token as u32, piece.as_bytes()) {
                Some(s) => state = s,
                None => return false,
            }
        } else {
            for c in seg["text"].as_str().unwrap().chars() {
                let mut buf = [0u8; 4];
                match engine.accept_token(state, 0, c.encode_utf8(&mut buf).as_bytes()) {
                    Some(s) => state = s,
                    None => return false,
                }
            }
        }
    }
    engine.can_end(state)
}

#[test]
fn integration_vectors_agree() {
    let Some(cases) = load("grammar-integration.json") else {
        return;
    };
    let cases = cases.as_array().unwrap();
    let mut bad = Vec::new();
    let mut total = 0;
    for case in cases.iter().filter(|c| c["kind"] != "schema") {
        let desc = case["description"].as_str().unwrap_or("");
        let text = case["grammar"].as_str().unwrap();
        total += 1;
        if case["must_fail_to_build"].as_bool() == Some(true) {
            let kind = case["failure_kind"].as_str().unwrap();
            let parsed = toolrail_gbnf::parse(text);
            let outcome = match &parsed {
                Err(e) => e.code().as_str(),
                Ok(p) => match Grammar::build(p.clone(), "root") {
                    Err(e) => e.code().as_str(),
                    Ok(_) => "built",
                },
            };
            let want = match kind {
                "missing_root" => "GB102",
                "undefined_rule" => "GB101",
                "left_recursion" => "GB103",
                other => panic!("unknown failure kind {other}"),
            };
            if outcome != want {
                bad.push(format!("{desc}: expected {kind} ({want}), got {outcome}"));
            }
            continue;
        }
        let grammar = match Grammar::parse(text) {
            Ok(g) => Arc::new(g),
            Err(e) => {
                bad.push(format!("{desc}: does not build: {e}"));
                continue;
            }
        };
        for s in case["passing"].as_array().unwrap() {
            let s = s.as_str().unwrap();
            total += 1;
            let v = check(&grammar, s.as_bytes());
            if !v.is_accepted() {
                bad.push(format!(
                    "{desc}: should accept {s:?}, got {:?} at {:?}",
                    v.kind, v.offset
                ));
            }
        }
        for s in case["failing"].as_array().unwrap() {
            let s = s.as_str().unwrap();
            total += 1;
            if check(&grammar, s.as_bytes()).is_accepted() {
                bad.push(format!("{desc}: should reject {s:?}"));
            }
        }
        if let Some(tc) = case.get("token_cases") {
            let mut engine = Engine::new(Arc::clone(&grammar));
            for (list, want) in [("passing", true), ("failing", false)] {
                for segs in tc[list].as_array().unwrap() {
                    total += 1;
                    if run_token_case(&mut engine, segs) != want {
                        bad.push(format!("{desc}: token case {segs} should be {list}"));
                    }
                }
            }
        }
    }
    report(
        &bad,
        total,
        "grammar-integration.json (grammar and build-failure cases)",
    );
}

#[test]
fn golden_stacks_and_rejects_agree() {
    let Some(data) = load("llama-grammar-stacks.json") else {
        return;
    };
    let rules = rules_of(&data["rules"]);
    let mut names = vec![String::new(); rules.len()];
    for (name, id) in data["symbol_ids"].as_object().unwrap() {
        names[id.as_u64().unwrap() as usize] = name.clone();
    }
    let root = data["root_rule_id"].as_u64().unwrap() as u32;
    let grammar =
        Arc::new(Grammar::from_rules(rules, names, root).expect("hand-built grammar builds"));
    let mut engine = Engine::new(Arc::clone(&grammar));
    let initial = engine.initial();
    let stacks: Vec<Vec<Element>> = engine
        .stacks(initial)
        .iter()
        .map(|&s| {
            engine
                .stack_positions(s)
                .into_iter()
                .map(|p| grammar.element(p))
                .collect()
        })
        .collect();
    let expected: Vec<Vec<Element>> = data["expected_stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_array().unwrap().iter().map(element).collect())
        .collect();
    let mut bad = Vec::new();
    if stacks != expected {
        bad.push(format!(
            "initial stacks:\n ours   {stacks:?}\n theirs {expected:?}"
        ));
    }
    let candidates: Vec<(u64, u32)> = data["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["index"].as_u64().unwrap(),
                c["code_point"].as_u64().unwrap() as u32,
            )
        })
        .collect();
    let stack_ids: Vec<u32> = engine.stacks(initial).to_vec();
    for (k, want) in data["expected_rejects_effective"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let want: Vec<(u64, u32)> = want
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap() as u32))
            .collect();
        let Some(&stack) = stack_ids.get(k) else {
            bad.push(format!("no stack {k}"));
            continue;
        };
        let ours: Vec<(u64, u32)> = candidates
            .iter()
            .copied()
            .filter(|&(_, c)| engine.stack_rejects(stack, &[c], PartialUtf8::default(), 0))
            .collect();
        if ours != want {
            bad.push(format!(
                "rejects of stack {k}:\n ours   {ours:?}\n theirs {want:?}"
            ));
        }
    }
    report(&bad, 1 + stack_ids.len(), "llama-grammar-stacks.json");
}

#[test]
fn every_corpus_grammar_parses_and_builds() {
    let Some(dir) = toolrail_testkit::corpus("gbnf") else {
        return;
    };
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("corpus gbnf folder")
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert!(names.len() >= 7);
    for path in names {
        let text = std::fs::read_to_string(&path).unwrap();
        if let Err(e) = Grammar::parse(&text) {
            panic!("{}: {e}", path.display());
        }
    }
}
