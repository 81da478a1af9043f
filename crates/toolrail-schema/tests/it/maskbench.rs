//! MaskBench: 1,467 real JSON Schemas (GitHub, Kubernetes, Schema Store, function calling...)
//! with valid and invalid instances, scored the way `scores.json` scores llguidance and
//! llama.cpp on the same files.
//!
//! For every file the schema is converted with the default options (exact mode), the grammar is
//! parsed and every instance is checked in two spellings: as stored (the `data` value with its
//! members in the file's order, pretty-printed) and compact. An instance is accepted only where
//! the grammar can end. A schema *passes* when it converts, every valid instance is accepted and
//! every invalid one rejected, in both spellings.
//!
//! The test fails on any false accept (a grammar accepting an instance its schema rejects is a
//! converter bug) and when passing drops below [`PASSING_FLOOR`].
//! Run with `cargo test -p toolrail-schema --test it maskbench -- --nocapture` for the table
//! (with `MASKBENCH_ERRORS=1` also every conversion error).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use toolrail_engine::Engine;
use toolrail_gbnf::Grammar;
use toolrail_schema::{ConvertOptions, schema_to_gbnf};

/// The measured number of passing schemas: a drop is a regression.
const PASSING_FLOOR: usize = 1350;

/// Checking one spelling of an instance stops after this long (the engine is unoptimised in the
/// test profile, and a long string under a large `maxLength` is slow to follow): the instance is
/// then left out (counted and listed) and the schema scored on its other instances, so that the
/// test stays in seconds.
const INSTANCE_TIME_BOUND: Duration = Duration::from_secs(2);

/// `--lenient` only ever drops constraints: on a schema exact mode refuses, the lenient
/// grammar must accept every valid instance. The valid instances it rejects (their first
/// spelling rejected), except where checking ran out of time.
fn lenient_false_rejects(name: &str, file: &Value) -> Vec<String> {
    let options = ConvertOptions {
        lenient: true,
        ..Default::default()
    };
    let conversion = match schema_to_gbnf(&file["schema"], &options) {
        Ok(c) => c,
        Err(e) => return vec![format!("{name}: lenient conversion failed: {e}")],
    };
    let grammar = match Grammar::parse(&conversion.gbnf) {
        Ok(g) => Arc::new(g),
        Err(e) => return vec![format!("{name}: lenient grammar does not parse: {e}")],
    };
    let mut engine = Engine::new(grammar);
    let mut out = Vec::new();
    for (i, case) in file["tests"].as_array().into_iter().flatten().enumerate() {
        if case["valid"] != Value::Bool(true) {
            continue;
        }
        let data = &case["data"];
        for text in [
            serde_json::to_string_pretty(data),
            serde_json::to_string(data),
        ] {
            let text = text.unwrap();
            if accepts(&mut engine, text.as_bytes()) == Some(false) {
                out.push(format!("{name} #{i}"));
                break;
            }
        }
    }
    out
}

/// What the engine says of one text: `None` when it ran out of time.
fn accepts(engine: &mut Engine, text: &[u8]) -> Option<bool> {
    let started = Instant::now();
    let mut state = engine.initial();
    for chunk in text.chunks(64) {
        match engine.feed(state, chunk) {
            Ok(next) => state = next,
            Err(_) => return Some(false),
        }
        if started.elapsed() > INSTANCE_TIME_BOUND {
            return None;
        }
    }
    Some(engine.can_end(state))
}

/// `Github_easy---o123.json` → `Github_easy`; `BFCL_java_1.json` → `BFCL_java`.
fn source_of(file: &str) -> String {
    let stem = file.strip_suffix(".json").unwrap_or(file);
    if let Some((src, _)) = stem.split_once("---") {
        return src.to_string();
    }
    match stem.rsplit_once('_') {
        Some((src, n)) if n.chars().all(|c| c.is_ascii_digit()) => src.to_string(),
        _ => stem.to_string(),
    }
}

#[derive(Default, Clone, Copy)]
struct Tally {
    schemas: usize,
    compiled: usize,
    passing: usize,
    false_accepts: usize,
    false_rejects: usize,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

/// The converter recurses per schema level, and debug-build frames are large: test threads get
/// 2 MB of stack, the main thread of a program 8 MB; the corpus runs on a thread with the
/// latter.
#[test]
fn maskbench() {
    let Some(dir) = toolrail_testkit::corpus("maskbench") else {
        return;
    };
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || run(&dir))
        .unwrap()
        .join()
        .unwrap();
}

fn run(dir: &Path) {
    let files = crate::maskbench_files(&dir.join("data"));
    let scores: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("scores.json")).unwrap()).unwrap();

    let mut total = Tally::default();
    let mut by_source: BTreeMap<String, Tally> = BTreeMap::new();
    let mut unsupported: BTreeMap<String, usize> = BTreeMap::new();
    let mut false_accepts: Vec<String> = Vec::new();
    let mut false_rejects: Vec<String> = Vec::new();
    let mut not_parsed: Vec<String> = Vec::new();
    let mut timed_out: Vec<String> = Vec::new();
    let mut lenient_rejects: Vec<String> = Vec::new();
    let mut times: Vec<Duration> = Vec::new();
    let started = Instant::now();
    // MASKBENCH_ERRORS=1: print every schema's conversion error
    let show_errors = std::env::var_os("MASKBENCH_ERRORS").is_some();

    for path in &files {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let source = by_source.entry(source_of(name)).or_default();
        total.schemas += 1;
        source.schemas += 1;
        let t0 = Instant::now();
        let converted = schema_to_gbnf(&file["schema"], &ConvertOptions::default());
        times.push(t0.elapsed());
        let gbnf = match converted {
            Ok(c) => c.gbnf,
            Err(e) => {
                assert!(e.to_string().starts_with("unsupported: "), "{name}: {e}");
                *unsupported.entry(e.keyword.clone()).or_default() += 1;
                if show_errors {
                    println!("UNSUPPORTED {name}: {e}");
                }
                lenient_rejects.extend(lenient_false_rejects(name, &file));
                continue;
            }
        };
        let grammar = match Grammar::parse(&gbnf) {
            Ok(g) => Arc::new(g),
            Err(e) => {
                not_parsed.push(format!("{name}: {e}"));
                continue;
            }
        };
        total.compiled += 1;
        source.compiled += 1;
        let mut engine = Engine::new(grammar);
        let mut passes = true;
        for (i, case) in file["tests"].as_array().into_iter().flatten().enumerate() {
            let valid = case["valid"].as_bool().unwrap();
            let data = &case["data"];
            let pretty = serde_json::to_string_pretty(data).unwrap();
            let compact = serde_json::to_string(data).unwrap();
            for text in [&pretty, &compact] {
                let Some(accepted) = accepts(&mut engine, text.as_bytes()) else {
                    timed_out.push(format!("{name} #{i}"));
                    break;
                };
                if accepted == valid {
                    continue;
                }
                passes = false;
                let excerpt: String = text.chars().take(200).collect();
                if valid {
                    total.false_rejects += 1;
                    source.false_rejects += 1;
                    false_rejects.push(format!("{name} #{i}: {excerpt}"));
                } else {
                    total.false_accepts += 1;
                    source.false_accepts += 1;
                    false_accepts.push(format!("{name} #{i}: {excerpt}"));
                }
                break;
            }
        }
        if passes {
            total.passing += 1;
            source.passing += 1;
        }
    }

    let theirs = |engine: &str, key: &str| scores[engine][key].as_u64().unwrap_or(0);
    println!(
        "MaskBench, {} schemas ({:.1?})",
        files.len(),
        started.elapsed()
    );
    println!(
        "{:<24} {:>9} {:>10} {:>9}",
        "", "toolrail", "llguidance", "llama.cpp"
    );
    for (label, ours, key) in [
        ("compiled", total.compiled, "compiled"),
        ("passing", total.passing, "passing"),
        ("false accepts", total.false_accepts, "false_accepts"),
        ("false rejects", total.false_rejects, "false_rejects"),
    ] {
        println!(
            "{label:<24} {ours:>9} {:>10} {:>9}",
            theirs("llguidance", key),
            theirs("llama.cpp", key)
        );
    }
    println!(
        "(false accepts / rejects: instances; toolrail counts one spelling per instance)\n\nby source:"
    );
    println!(
        "{:<24} {:>7} {:>8} {:>8} {:>6} {:>6} {:>10} {:>9}",
        "source", "schemas", "compiled", "passing", "f.acc", "f.rej", "llguidance", "llama.cpp"
    );
    for (src, t) in &by_source {
        let pass_of = |engine: &str| {
            scores[engine]["passing_by_source"][src]
                .as_u64()
                .unwrap_or(0)
        };
        println!(
            "{src:<24} {:>7} {:>8} {:>8} {:>6} {:>6} {:>10} {:>9}",
            t.schemas,
            t.compiled,
            t.passing,
            t.false_accepts,
            t.false_rejects,
            pass_of("llguidance"),
            pass_of("llama.cpp")
        );
    }
    let mut by_count: Vec<(&String, &usize)> = unsupported.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    println!(
        "\nunsupported: {} schemas; by keyword (top 20):",
        unsupported.values().sum::<usize>()
    );
    for (k, n) in by_count.iter().take(20) {
        println!("  {n:>5}  {k}");
    }
    times.sort();
    println!(
        "\nconversion time per schema: p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times.last().copied().unwrap_or_default()
    );
    if !timed_out.is_empty() {
        println!(
            "not checked (over {INSTANCE_TIME_BOUND:?}): {}",
            timed_out.join(", ")
        );
    }
    println!(
        "lenient mode on the schemas exact mode refuses: {} valid instances rejected",
        lenient_rejects.len()
    );
    for f in lenient_rejects.iter().take(20) {
        println!("LENIENT REJECTS {f}");
    }
    for f in not_parsed.iter().take(10) {
        println!("GRAMMAR DOES NOT PARSE {f}");
    }
    for f in false_accepts.iter().take(20) {
        println!("FALSE ACCEPT {f}");
    }
    for f in false_rejects.iter().take(20) {
        println!("FALSE REJECT {f}");
    }
    assert!(
        not_parsed.is_empty(),
        "{} grammars do not parse",
        not_parsed.len()
    );
    assert_eq!(
        total.false_accepts, 0,
        "grammars accept invalid instances (see output with --nocapture)"
    );
    assert!(
        total.passing >= PASSING_FLOOR,
        "passing dropped to {} (floor {PASSING_FLOOR})",
        total.passing
    );
}
