//! Fuzz target over the parser, the builder, lint, the recognizer (bytes and tokens),
//! snapshots and sampling. Input: a grammar, a 0xFF byte, then the text to feed.
//! Nothing here may panic, abort, overflow the stack or hang.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use toolrail_engine::sample::{Sampler, SplitMix64};
use toolrail_engine::{Engine, check_with};
use toolrail_engine::gbnf::{Grammar, lint::lint_default};

fuzz_target!(|data: &[u8]| {
    let (grammar_bytes, input) = match data.iter().position(|&b| b == 0xFF) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let Ok(text) = std::str::from_utf8(grammar_bytes) else { return };
    let _ = lint_default(text);
    let Ok(grammar) = Grammar::parse(text) else { return };
    let grammar = Arc::new(grammar);
    let mut engine = Engine::new(Arc::clone(&grammar));
    let verdict = check_with(&mut engine, input);
    let _ = engine.snapshot(verdict.state);
    let _ = verdict.expected.describe();
    // The same bytes as tokens: every 3 bytes a piece, the byte value as the token id.
    let mut state = engine.initial();
    for chunk in input.chunks(3) {
        match engine.accept_token(state, u32::from(chunk[0]), chunk) {
            Some(next) if !next.is_exploded() => state = next,
            _ => break,
        }
    }
    let _ = toolrail_engine::gbnf::printer::print_compiled(&grammar);
    let sampler = Sampler::new(&grammar);
    let mut rng = SplitMix64::new(input.len() as u64);
    if let Ok(s) = sampler.sample(&mut rng, 64) {
        let v = check_with(&mut engine, s.as_bytes());
        assert!(v.is_accepted() || v.kind == toolrail_engine::VerdictKind::TooAmbiguous, "sample {s:?} rejected");
    }
});
