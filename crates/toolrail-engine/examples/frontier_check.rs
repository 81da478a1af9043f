//! Checks string-body frontiers on a real vocabulary: replays a MaskBench dump (see
//! `mask_replay`) with two mask engines, one reading string bodies off their frontier at once
//! (at the root and below it) and one that always walks, and counts the positions where their
//! masks differ.
//! `cargo run --release -p toolrail-engine --example frontier_check DUMP`

use std::sync::Arc;

use serde_json::Value;
use toolrail_engine::gbnf::Grammar;
use toolrail_engine::{Engine, MaskEngine, TokenTable};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: frontier_check DUMP")?;
    let dump: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let pieces: Vec<Vec<u8>> = serde_json::from_value(dump["pieces"].clone())?;
    let eog: Vec<u32> = serde_json::from_value(dump["eog"].clone())?;
    let table = Arc::new(TokenTable::new(pieces, eog));
    let mut frontier = MaskEngine::new(Arc::clone(&table)).with_frontier_after(1);
    let mut walk = MaskEngine::new(Arc::clone(&table)).with_frontier_after(u32::MAX);
    let (mut positions, mut differing) = (0usize, 0usize);
    for schema in dump["schemas"].as_array().into_iter().flatten() {
        let name = schema["name"].as_str().unwrap_or("?");
        let Ok(grammar) = Grammar::parse(schema["gbnf"].as_str().unwrap_or("")) else {
            continue;
        };
        frontier.clear_cache();
        walk.clear_cache();
        let mut engine = Engine::new(Arc::new(grammar));
        for tokens in schema["instances"].as_array().into_iter().flatten() {
            let tokens: Vec<u32> = serde_json::from_value(tokens.clone())?;
            let mut state = engine.initial();
            for (position, &token) in tokens.iter().enumerate() {
                let (Ok(a), Ok(b)) = (
                    frontier.mask(&mut engine, state),
                    walk.mask(&mut engine, state),
                ) else {
                    break;
                };
                positions += 1;
                if a != b {
                    differing += 1;
                    eprintln!(
                        "{name} @{position}: {} tokens differ",
                        a.difference_count(&b)
                    );
                }
                match engine.accept_token(state, token, table.piece(token)) {
                    Some(next) => state = next,
                    None => break,
                }
            }
        }
    }
    println!(
        "{positions} positions, {differing} with differing masks, {} masks started at a frontier, \
         {} subtrees below the root read off one",
        frontier.frontier_starts(),
        frontier.frontier_descents()
    );
    Ok(())
}
