//! Converter speed: an 8-tool set's argument schemas (goal < 1 ms), every BFCL tool set in
//! ../shared/corpus/bfcl (goal < 1 s for all of them), and every MaskBench schema in
//! ../shared/corpus/maskbench/data one at a time (goal: p50 ≤ 0.5 ms, p99 ≤ 5 ms per schema;
//! printed with p90, the maximum and the slowest schemas, the ones to profile).
//!
//! `CARGO_TARGET_DIR=... cargo bench --bench schema_convert`

use std::hint::black_box;

use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolrail_schema::{ConvertOptions, Expr, SchemaConverter};

/// Eight realistic tool argument schemas: nested objects, enums, arrays, bounds, formats.
fn eight_tools() -> Vec<(&'static str, Value)> {
    vec![
        (
            "get_weather",
            json!({"type": "object", "properties": {
                "location": {"type": "string", "description": "City and country"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 14}
            }, "required": ["location"]}),
        ),
        (
            "get_inputs",
            json!({"type": "object", "properties": {
                "title": {"type": "string"},
                "dialog": {"type": "object", "properties": {
                    "fields": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
                        "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"},
                        "kind": {"type": "string", "enum": ["text", "number", "date", "time", "email", "url", "select", "checkbox", "radio", "textarea"]},
                        "label": {"type": "string", "maxLength": 80},
                        "required": {"type": "boolean"},
                        "options": {"type": "array", "items": {"type": "string"}}
                    }, "required": ["name", "kind", "label"]}},
                    "submit_label": {"type": "string"}
                }, "required": ["fields"]}
            }, "required": ["title", "dialog"]}),
        ),
        (
            "send_messages",
            json!({"type": "object", "properties": {
                "messages": {"type": "array", "items": {"type": "object", "properties": {
                    "to": {"type": "string", "format": "email"},
                    "subject": {"type": "string"},
                    "body": {"type": "string"},
                    "priority": {"enum": ["low", "normal", "high"]}
                }, "required": ["to", "body"]}, "maxItems": 10}
            }, "required": ["messages"]}),
        ),
        (
            "calculate",
            json!({"type": "object", "properties": {
                "expression": {"type": "string"},
                "precision": {"type": "integer", "minimum": 0, "maximum": 20}
            }, "required": ["expression"]}),
        ),
        (
            "search_memory",
            json!({"type": "object", "properties": {
                "query": {"type": "string", "minLength": 1},
                "limit": {"type": "integer", "exclusiveMinimum": 0, "maximum": 100},
                "since": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "string"}}
            }, "required": ["query"]}),
        ),
        (
            "get_fact",
            json!({"type": "object", "properties": {
                "key": {"type": "string"},
                "namespace": {"anyOf": [{"type": "string"}, {"type": "null"}]}
            }, "required": ["key"]}),
        ),
        (
            "set_fact",
            json!({"type": "object", "properties": {
                "key": {"type": "string"},
                "value": {"type": ["string", "number", "boolean", "null"]},
                "ttl_seconds": {"type": "number", "minimum": 0}
            }, "required": ["key", "value"]}),
        ),
        (
            "book_meeting",
            json!({"type": "object", "$defs": {
                "person": {"type": "object", "properties": {
                    "name": {"type": "string"}, "id": {"type": "string", "format": "uuid"}
                }, "required": ["name"]}
            }, "properties": {
                "organizer": {"$ref": "#/$defs/person"},
                "attendees": {"type": "array", "items": {"$ref": "#/$defs/person"}, "minItems": 1},
                "date": {"type": "string", "format": "date"},
                "duration_minutes": {"type": "integer", "enum": [15, 30, 45, 60, 90]},
                "room": {"type": "object", "properties": {
                    "building": {"type": "string"}, "floor": {"type": "integer", "minimum": -2, "maximum": 40}
                }}
            }, "required": ["organizer", "attendees", "date"]}),
        ),
    ]
}

fn tool_options() -> ConvertOptions {
    ConvertOptions {
        close_objects: true,
        ..ConvertOptions::default()
    }
}

/// Converts a tool set into one grammar (a plain union of argument rules; the tool-call work
/// builds the real envelopes).
fn convert_set(tools: &[(String, Value)], options: &ConvertOptions) -> Result<String, String> {
    let mut c = SchemaConverter::new(options.clone());
    let mut names = Vec::new();
    for (name, schema) in tools {
        let rule = c
            .add_schema(&format!("{name}-args"), schema)
            .map_err(|e| format!("{name}: {e}"))?;
        names.push(rule);
    }
    Ok(c.finish(&Expr::alt(names).unwrap_or(Expr::Empty)))
}

/// BFCL's Python-flavoured type names mapped to JSON Schema (for this bench only).
fn bfcl_to_json_schema(s: &Value) -> Value {
    let Value::Object(m) = s else {
        return s.clone();
    };
    let mut out = serde_json::Map::new();
    for (k, v) in m {
        match k.as_str() {
            "type" => match v.as_str() {
                Some("dict") => {
                    out.insert(k.clone(), json!("object"));
                }
                Some("float") => {
                    out.insert(k.clone(), json!("number"));
                }
                Some("tuple") => {
                    out.insert(k.clone(), json!("array"));
                }
                Some("any") => {}
                _ => {
                    out.insert(k.clone(), v.clone());
                }
            },
            "properties" => {
                let props = v
                    .as_object()
                    .map(|p| {
                        p.iter()
                            .map(|(n, x)| (n.clone(), bfcl_to_json_schema(x)))
                            .collect()
                    })
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" => {
                out.insert(k.clone(), bfcl_to_json_schema(v));
            }
            "optional" => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

fn bfcl_sets() -> Vec<Vec<(String, Value)>> {
    let mut sets = Vec::new();
    // Missing: a failure under CI=true, otherwise said on stderr and left out.
    let Some(dir) = toolrail_testkit::corpus("bfcl") else {
        return sets;
    };
    let rd = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files: Vec<_> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && !p.to_string_lossy().ends_with(".answers.json")
        })
        .collect();
    files.sort();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(case) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let tools: Vec<(String, Value)> = case["function"]
                .as_array()
                .map(|fs| {
                    fs.iter()
                        .map(|f| {
                            (
                                f["name"].as_str().unwrap_or("tool").to_string(),
                                bfcl_to_json_schema(&f["parameters"]),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            sets.push(tools);
        }
    }
    sets
}

/// The MaskBench schemas (file name, schema).
fn maskbench_schemas() -> Vec<(String, Value)> {
    // Missing: a failure under CI=true, otherwise said on stderr and left out.
    let Some(dir) = toolrail_testkit::corpus("maskbench/data") else {
        return Vec::new();
    };
    let rd = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    files.sort();
    files
        .iter()
        .filter_map(|f| {
            let doc: Value = serde_json::from_str(&std::fs::read_to_string(f).ok()?).ok()?;
            let name = f.file_name()?.to_string_lossy().into_owned();
            Some((name, doc.get("schema")?.clone()))
        })
        .collect()
}

/// The `q` quantile (0..=1) of sorted durations, in milliseconds.
fn quantile_ms(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// Converts each MaskBench schema alone (as `toolrail grammar --schema` does), five times,
/// keeping each schema's median; prints the distribution over schemas against the goals.
fn maskbench_distribution(schemas: &[(String, Value)]) {
    let opts = ConvertOptions::default();
    let mut per_schema = Vec::with_capacity(schemas.len());
    let mut converted = 0;
    let mut by_schema: Vec<(f64, &str)> = Vec::with_capacity(schemas.len());
    for (name, schema) in schemas {
        let mut runs = [0.0f64; 5];
        let mut ok = false;
        for run in &mut runs {
            let start = Instant::now();
            ok = toolrail_schema::schema_to_gbnf(black_box(schema), &opts).is_ok();
            *run = start.elapsed().as_secs_f64() * 1e3;
        }
        runs.sort_by(f64::total_cmp);
        converted += usize::from(ok);
        by_schema.push((runs[2], name));
        per_schema.push(runs[2]);
    }
    by_schema.sort_by(|a, b| b.0.total_cmp(&a.0));
    let slowest = by_schema.first().copied().unwrap_or((0.0, ""));
    per_schema.sort_by(f64::total_cmp);
    let (p50, p90, p99) = (
        quantile_ms(&per_schema, 0.5),
        quantile_ms(&per_schema, 0.9),
        quantile_ms(&per_schema, 0.99),
    );
    println!(
        "MaskBench: {} schemas ({converted} converted), per-schema conversion p50 {p50:.3} ms \
         (goal ≤ 0.5), p90 {p90:.3} ms, p99 {p99:.3} ms (goal ≤ 5), max {:.3} ms ({})",
        schemas.len(),
        slowest.0,
        slowest.1
    );
    // the schemas that decide p99, to profile
    println!(
        "  slowest: {}",
        by_schema
            .iter()
            .take(SLOWEST_SHOWN)
            .map(|(ms, name)| format!("{name} {ms:.1} ms"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// How many of the slowest MaskBench schemas the distribution names (p99 is the 15th slowest
/// of 1,467).
const SLOWEST_SHOWN: usize = 15;

fn bench(c: &mut Criterion) {
    let opts = tool_options();
    let eight: Vec<(String, Value)> = eight_tools()
        .into_iter()
        .map(|(n, s)| (n.to_string(), s))
        .collect();
    let grammar = convert_set(&eight, &opts).unwrap_or_else(|e| panic!("8-tool set: {e}"));
    println!(
        "8-tool set: grammar of {} bytes, {} rules",
        grammar.len(),
        grammar.lines().filter(|l| l.contains("::=")).count()
    );
    c.bench_function("schema_convert/8-tool set", |b| {
        b.iter(|| convert_set(black_box(&eight), &opts))
    });

    let sets = bfcl_sets();
    let n_tools: usize = sets.iter().map(Vec::len).sum();
    let start = Instant::now();
    let mut failed = Vec::new();
    for s in &sets {
        if let Err(e) = convert_set(s, &opts) {
            failed.push(e);
        }
    }
    println!(
        "BFCL: {} tool sets ({} tools) converted once in {:.1} ms; {} failed{}",
        sets.len(),
        n_tools,
        start.elapsed().as_secs_f64() * 1e3,
        failed.len(),
        failed
            .iter()
            .take(5)
            .map(|e| format!("\n  {e}"))
            .collect::<String>()
    );
    let mut group = c.benchmark_group("schema_convert");
    group.sample_size(10);
    group.bench_function("all BFCL tool sets", |b| {
        b.iter(|| {
            for s in &sets {
                let _ = black_box(convert_set(s, &opts));
            }
        })
    });
    group.finish();

    let schemas = maskbench_schemas();
    maskbench_distribution(&schemas);
    let mut group = c.benchmark_group("schema_convert");
    group.sample_size(10);
    let opts = ConvertOptions::default();
    group.bench_function("all MaskBench schemas, one at a time", |b| {
        b.iter(|| {
            for (_, s) in &schemas {
                let _ = black_box(toolrail_schema::schema_to_gbnf(s, &opts));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
