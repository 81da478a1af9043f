//! Recognizer throughput on a 1 MB compact JSON document against the corpus json.gbnf
//! (goal: >= 10 MB/s on a 2-core machine), and compile time of each corpus grammar.
//!
//! Run: `cargo bench --bench recognizer`. Criterion prints the throughput in MiB/s.

// A bench fails by panicking, as a test does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use toolrail_engine::{Engine, check_with};
use toolrail_gbnf::Grammar;

/// A deterministic ~1 MB compact JSON object: records with strings (escapes, non-ASCII),
/// integers, floats, booleans, nulls and nested arrays/objects.
fn json_document(target_len: usize) -> String {
    let mut out = String::from("{\"records\":[");
    let mut i: u64 = 0;
    while out.len() < target_len {
        if i > 0 {
            out.push(',');
        }
        let x = i.wrapping_mul(2654435761) % 100_000;
        out.push_str(&format!(
            "{{\"id\":{i},\"name\":\"user-{x}\",\"note\":\"caf\\u00e9 d\u{e9}j\u{e0} vu \\\"{x}\\\" \\n\",\"score\":{}.{:02},\"ratio\":-{}e-3,\"active\":{},\"tags\":[\"a{}\",\"b\",{{\"k\":null}}],\"geo\":{{\"lat\":{}.5,\"lon\":-{}.25}}}}",
            x % 1000,
            x % 100,
            x % 977,
            if x.is_multiple_of(2) { "true" } else { "false" },
            x % 13,
            x % 90,
            x % 180
        ));
        i += 1;
    }
    out.push_str("]}");
    out
}

fn recognizer_throughput(c: &mut Criterion) {
    // Missing: a failure under CI=true, otherwise said on stderr and not measured.
    let Some(path) = toolrail_testkit::corpus("gbnf/json.gbnf") else {
        return;
    };
    let text = std::fs::read_to_string(path).expect("corpus json.gbnf");
    let grammar = Arc::new(Grammar::parse(&text).expect("json.gbnf builds"));
    let doc = json_document(1 << 20);
    let mut group = c.benchmark_group("recognizer");
    group.throughput(Throughput::Bytes(doc.len() as u64));
    group.sample_size(20);
    // Warm engine: the steady state of a debugger checking text as the user types.
    let mut engine = Engine::new(Arc::clone(&grammar));
    assert!(check_with(&mut engine, doc.as_bytes()).is_accepted());
    group.bench_function("json_1MB_warm", |b| {
        b.iter(|| check_with(&mut engine, doc.as_bytes()))
    });
    // Cold engine: caches built while reading.
    group.bench_function("json_1MB_cold", |b| {
        b.iter(|| {
            let mut engine = Engine::new(Arc::clone(&grammar));
            check_with(&mut engine, doc.as_bytes())
        })
    });
    group.finish();
}

fn compile_times(c: &mut Criterion) {
    let Some(corpus) = toolrail_testkit::corpus("gbnf") else {
        return;
    };
    let mut group = c.benchmark_group("compile");
    let mut names: Vec<_> = std::fs::read_dir(corpus)
        .expect("corpus gbnf folder")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "gbnf"))
        .collect();
    names.sort();
    for path in names {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&path).expect("read grammar");
        group.bench_with_input(BenchmarkId::from_parameter(&name), &text, |b, text| {
            b.iter(|| {
                let g = Arc::new(Grammar::parse(text).expect("builds"));
                Engine::new(g)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, recognizer_throughput, compile_times);
criterion_main!(benches);
