//! Replays a MaskBench dump (see toolrail-llm's `maskbench_dump` example) through toolrail's
//! mask engine alone, as `bench masks` does (one recognizer and one memo per schema), and
//! prints the mask-time quantiles and the slowest positions: for profiling the engine without
//! a model. `cargo run --release -p toolrail-engine --example mask_replay DUMP [SLOWEST]`

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use toolrail_engine::gbnf::Grammar;
use toolrail_engine::{Engine, MaskEngine, TokenTable};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: mask_replay DUMP [SLOWEST]")?;
    let slowest: usize = args.get(2).map_or(Ok(15), |s| s.parse())?;
    let only: Option<&str> = args.get(3).map(String::as_str);
    let dump: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let pieces: Vec<Vec<u8>> = serde_json::from_value(dump["pieces"].clone())?;
    let eog: Vec<u32> = serde_json::from_value(dump["eog"].clone())?;
    let table = Arc::new(TokenTable::new(pieces, eog));
    let started = Instant::now();
    let mut masks = MaskEngine::new(Arc::clone(&table));
    eprintln!("set-up {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
    let mut compile = Vec::new();
    let mut times: Vec<f64> = Vec::new();
    let mut slow: Vec<(f64, String, usize, String, usize)> = Vec::new();
    let total = Instant::now();
    for schema in dump["schemas"].as_array().into_iter().flatten() {
        let name = schema["name"].as_str().unwrap_or("?").to_string();
        if only.is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let started = Instant::now();
        let Ok(grammar) = Grammar::parse(schema["gbnf"].as_str().unwrap_or("")) else {
            continue;
        };
        masks.clear_cache();
        let mut engine = Engine::new(Arc::new(grammar));
        let initial = engine.initial();
        if masks.mask(&mut engine, initial).is_err() {
            continue;
        }
        compile.push(started.elapsed().as_secs_f64() * 1e3);
        for tokens in schema["instances"].as_array().into_iter().flatten() {
            let tokens: Vec<u32> = serde_json::from_value(tokens.clone())?;
            let mut state = engine.initial();
            let mut text = Vec::new();
            for (position, &token) in tokens.iter().enumerate() {
                let started = Instant::now();
                let sets_before = engine.arena().sizes().1;
                let trans_before = engine.cache_sizes().0;
                if masks.mask(&mut engine, state).is_err() {
                    break;
                }
                let took = started.elapsed().as_secs_f64() * 1e3;
                times.push(took);
                if took > 1.0 {
                    let tail = String::from_utf8_lossy(&text[text.len().saturating_sub(60)..]);
                    let info = format!(
                        "stacks {} new sets {} new transitions {}",
                        engine.stacks(state).len(),
                        engine.arena().sizes().1 - sets_before,
                        engine.cache_sizes().0 - trans_before
                    );
                    slow.push((took, name.clone(), position, format!("{tail:?} {info}"), 0));
                }
                let piece = table.piece(token);
                text.extend_from_slice(piece);
                match engine.accept_token(state, token, piece) {
                    Some(next) => state = next,
                    None => break,
                }
            }
        }
    }
    let wall = total.elapsed().as_secs_f64();
    let q = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            0.0
        } else {
            v[((v.len() - 1) as f64 * p).round() as usize]
        }
    };
    println!(
        "{} schemas, {} positions, {:.1} s; compile p50 {:.3} p90 {:.3} p99 {:.3} ms; mask p50 {:.4} p90 {:.3} p99 {:.3} max {:.1} ms; over 1 ms: {}",
        compile.len(),
        times.len(),
        wall,
        q(&mut compile, 0.5),
        q(&mut compile, 0.9),
        q(&mut compile, 0.99),
        q(&mut times, 0.5),
        q(&mut times, 0.9),
        q(&mut times, 0.99),
        q(&mut times, 1.0),
        slow.len()
    );
    slow.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (took, name, position, context, _) in slow.iter().take(slowest) {
        println!("{took:8.2} ms  {name} @{position}  {context}");
    }
    Ok(())
}
