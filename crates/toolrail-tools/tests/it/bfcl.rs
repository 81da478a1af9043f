//! BFCL v4 conformance ("Must show" of issue 3): every tool set in `../shared/corpus/bfcl/`
//! converts into a tool-call grammar in every envelope; every ground-truth call is accepted by the
//! grammar (engine `check`) and by the validator, except exactly the five calls that break their own
//! schema, which both reject; a call with one tool's name and another tool's arguments is rejected
//! by both.
//!
//! Ground truth format: `{tool: {param: [allowed values...]}}`. A call is built from the first
//! allowed value that is not `""` (the parameter is omitted when `""` is the only one). Values that
//! are objects hold allowed-value lists themselves and are unwrapped the same way; arrays are taken
//! literally (which is exactly how `simple_python_96` ends up passing lists where strings are
//! declared).

use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use toolrail_tools::envelope::{self, Format, Spacing};
use toolrail_tools::grammar::{GrammarOptions, tool_call_grammar};
use toolrail_tools::toolset::ToolSet;
use toolrail_tools::validate::{ValidateOptions, Validator};

const FILES: [&str; 3] = [
    "BFCL_v4_simple_python",
    "BFCL_v4_multiple",
    "BFCL_v4_parallel",
];

/// The calls whose ground truth breaks its own schema (id#index).
const EXPECTED_REJECTED: [&str; 5] = [
    "multiple_119#0",
    "parallel_152#0",
    "parallel_152#1",
    "simple_python_307#0",
    "simple_python_96#0",
];

struct Case {
    id: String,
    tools: ToolSet,
    calls: Vec<(String, Value)>,
}

fn read_lines(path: &PathBuf) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn first_allowed(allowed: &Value) -> Option<Value> {
    let list = allowed.as_array().expect("allowed values are a list");
    let v = list.iter().find(|v| *v != &Value::String(String::new()))?;
    Some(unwrap_value(v))
}

fn unwrap_value(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, allowed) in m {
                if let Some(x) = first_allowed(allowed) {
                    out.insert(k.clone(), x);
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// Every case of `../shared/corpus/bfcl/`; missing: a failure under `CI=true`, otherwise None
/// (a skip).
fn load_cases() -> Option<Vec<Case>> {
    let corpus = toolrail_testkit::corpus("bfcl")?;
    let mut cases = Vec::new();
    for file in FILES {
        let defs = read_lines(&corpus.join(format!("{file}.json")));
        let answers = read_lines(&corpus.join(format!("{file}.answers.json")));
        assert_eq!(defs.len(), answers.len(), "{file}");
        for (d, a) in defs.iter().zip(&answers) {
            let id = d["id"].as_str().unwrap().to_owned();
            assert_eq!(a["id"], d["id"]);
            let tools = ToolSet::from_value(&d["function"])
                .unwrap_or_else(|e| panic!("{id}: tool set does not load: {e}"));
            let mut calls = Vec::new();
            for call in a["ground_truth"].as_array().unwrap() {
                let (name, params) = call.as_object().unwrap().iter().next().unwrap();
                let mut args = Map::new();
                for (k, allowed) in params.as_object().unwrap() {
                    if let Some(v) = first_allowed(allowed) {
                        args.insert(k.clone(), v);
                    }
                }
                calls.push((name.clone(), Value::Object(args)));
            }
            cases.push(Case { id, tools, calls });
        }
    }
    Some(cases)
}

fn grammar_for(tools: &ToolSet, format: Format, parallel: bool) -> Arc<toolrail_gbnf::Grammar> {
    let opts = GrammarOptions {
        format,
        parallel,
        ..GrammarOptions::default()
    };
    let g = tool_call_grammar(tools, &opts).unwrap_or_else(|e| panic!("{e}"));
    Arc::new(
        toolrail_gbnf::Grammar::parse(&g.text)
            .unwrap_or_else(|e| panic!("generated grammar does not parse: {e}\n{}", g.text)),
    )
}

fn accepted(g: &Arc<toolrail_gbnf::Grammar>, text: &str) -> bool {
    toolrail_engine::check(g, text.as_bytes()).is_accepted()
}

#[test]
fn bfcl_ground_truth_in_every_envelope() {
    let Some(cases) = load_cases() else {
        return;
    };
    let total_calls: usize = cases.iter().map(|c| c.calls.len()).sum();
    assert_eq!(total_calls, 1140);
    // every set converts strictly (a refusal would have to name its clashing keywords) and
    // leniently
    let (mut strict_ok, mut lenient_ok) = (0usize, 0usize);
    for case in &cases {
        for lenient in [false, true] {
            let opts = GrammarOptions {
                lenient,
                ..GrammarOptions::default()
            };
            match tool_call_grammar(&case.tools, &opts) {
                Ok(_) if lenient => lenient_ok += 1,
                Ok(_) => strict_ok += 1,
                Err(e) => panic!("{} (lenient {lenient}): {e}", case.id),
            }
        }
    }
    println!(
        "bfcl: {} sets, strict ok {strict_ok}, strict refused 0, lenient ok {lenient_ok}",
        cases.len()
    );
    let single = ValidateOptions::default();
    let parallel = ValidateOptions {
        parallel: true,
        auto: false,
        lenient: false,
    };
    let mut mixed_checked = 0usize;
    for format in Format::ALL {
        let mut grammar_rejected = BTreeSet::new();
        let mut validator_rejected = BTreeSet::new();
        let mut checked = 0usize;
        let mut parallel_checked = 0usize;
        for case in &cases {
            let g = grammar_for(&case.tools, format, false);
            let validator = Validator::new(&case.tools).unwrap();
            let mut all_ok = true;
            for (i, (name, args)) in case.calls.iter().enumerate() {
                let key = format!("{}#{i}", case.id);
                let tool = case.tools.get(name).unwrap();
                let ordered = order_like_grammar(&tool.arguments_schema(), args);
                let text = envelope::render_call(format, name, &ordered, Spacing::Spaced);
                checked += 1;
                let g_ok = accepted(&g, &text);
                let report = validator.validate_output(format, &text, single);
                if !g_ok {
                    grammar_rejected.insert(key.clone());
                }
                if !report.is_valid_call() {
                    let fb = report.feedback().unwrap_or_default();
                    assert!(!fb.is_empty(), "{key}: rejected without a message");
                    if format == Format::OpenAi {
                        println!("rejected {key}: {fb}");
                    }
                    validator_rejected.insert(key);
                    all_ok = false;
                }
                let compact = envelope::render_call(format, name, &ordered, Spacing::Compact);
                assert_eq!(accepted(&g, &compact), g_ok, "compact {compact}");
            }
            // Parallel cases: the whole output as one parallel text.
            if case.calls.len() > 1 && all_ok {
                let gp = grammar_for(&case.tools, format, true);
                let calls: Vec<(String, Value)> = case
                    .calls
                    .iter()
                    .map(|(n, a)| {
                        let t = case.tools.get(n).unwrap();
                        (n.clone(), order_like_grammar(&t.arguments_schema(), a))
                    })
                    .collect();
                let text = envelope::render_calls(format, &calls, Spacing::Spaced);
                assert!(accepted(&gp, &text), "{} parallel:\n{text}", case.id);
                assert!(
                    validator
                        .validate_output(format, &text, parallel)
                        .is_valid_call(),
                    "{} parallel",
                    case.id
                );
                parallel_checked += 1;
            }
            // Mixed calls: one tool's name with another tool's arguments.
            mixed_checked += check_mixed(case, format, &g, &validator);
        }
        let expected: BTreeSet<String> =
            EXPECTED_REJECTED.iter().map(|s| (*s).to_owned()).collect();
        println!(
            "{format}: {checked} calls checked, grammar accepted {}, validator accepted {}, \
             rejected by both: {:?}; {parallel_checked} parallel outputs accepted",
            checked - grammar_rejected.len(),
            checked - validator_rejected.len(),
            validator_rejected
        );
        assert_eq!(validator_rejected, expected, "{format}: validator");
        assert_eq!(grammar_rejected, expected, "{format}: grammar");
    }
    println!("mixed name/arguments calls rejected by both (all envelopes): {mixed_checked}");
    assert!(mixed_checked > 100);
}

/// Orders argument objects like the grammar writes them (declared property order, recursively).
fn order_like_grammar(schema: &Value, value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let mut out = Map::new();
            if let Some(props) = props {
                for (k, sub) in props {
                    if let Some(v) = m.get(k) {
                        out.insert(k.clone(), order_like_grammar(sub, v));
                    }
                }
            }
            for (k, v) in m {
                if !out.contains_key(k) {
                    out.insert(k.clone(), v.clone());
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let sub = schema.get("items").cloned().unwrap_or(Value::Bool(true));
            Value::Array(items.iter().map(|v| order_like_grammar(&sub, v)).collect())
        }
        other => other.clone(),
    }
}

fn check_mixed(
    case: &Case,
    format: Format,
    g: &Arc<toolrail_gbnf::Grammar>,
    validator: &Validator,
) -> usize {
    let mut n = 0;
    let tools = case.tools.tools();
    if tools.len() < 2 {
        return 0;
    }
    for (name, args) in &case.calls {
        for other in tools.iter().filter(|t| &t.name != name) {
            // Only where the other tool's schema really rejects these arguments.
            let schema = other.arguments_schema();
            if jsonschema::is_valid(&schema, args) {
                continue;
            }
            let ordered = order_like_grammar(&schema, args);
            let text = envelope::render_call(format, &other.name, &ordered, Spacing::Spaced);
            assert!(
                !accepted(g, &text),
                "{}: grammar accepted mixed {text}",
                case.id
            );
            let report = validator.validate_output(format, &text, ValidateOptions::default());
            assert!(
                !report.is_valid(),
                "{}: validator accepted mixed {text}",
                case.id
            );
            n += 1;
        }
    }
    n
}

/// Everything a BFCL tool-call grammar accepts, the validator accepts: random strings of every
/// case's grammar, in every envelope.
#[test]
fn bfcl_sampled_grammar_strings_validate() {
    use toolrail_engine::sample::{Sampler, SplitMix64};
    let Some(cases) = load_cases() else {
        return;
    };
    let mut checked = 0usize;
    let mut out_of_range = 0usize;
    for format in Format::ALL {
        for (n, case) in cases.iter().enumerate() {
            let parallel = n % 2 == 1;
            let g = grammar_for(&case.tools, format, parallel);
            let validator = Validator::new(&case.tools).unwrap();
            let sampler = Sampler::new(&g);
            let mut rng = SplitMix64::new(n as u64);
            for _ in 0..2 {
                let s = sampler.sample(&mut rng, 400).unwrap();
                let report = validator.validate_output(
                    format,
                    &s,
                    ValidateOptions {
                        parallel,
                        auto: false,
                        lenient: false,
                    },
                );
                // Numbers beyond f64 (`1e400`) are grammatical JSON but unreadable as numbers;
                // a key written twice in a free-form object is grammatical (no context-free
                // grammar can keep keys unique), but ambiguous, and the validator refuses it.
                if report.parse_error.as_ref().is_some_and(|e| {
                    e.message.contains("number out of range")
                        || e.message.contains("invalid number")
                        || e.message.contains("appears twice in one object")
                }) {
                    out_of_range += 1;
                    continue;
                }
                assert!(
                    report.is_valid_call(),
                    "{} {format}: grammar accepts {s:?}, validator says {:?}",
                    case.id,
                    report.feedback()
                );
                checked += 1;
            }
        }
    }
    println!(
        "{checked} sampled calls validated, {out_of_range} skipped (numbers beyond f64, keys written twice)"
    );
    assert!(out_of_range * 20 < checked);
}
