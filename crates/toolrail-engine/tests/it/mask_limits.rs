//! The mask engine's bounds: the work per mask (a near-cap ambiguous grammar stops with an
//! error naming the limit, in bounded work) and the memo tables (walking ever deeper through
//! distinct stack states keeps the recognizer's memory under its limit, evictions counted).

use std::sync::Arc;

use toolrail_engine::mask::MASK_WORK_LIMIT;
use toolrail_engine::stacks::MAX_STEP_WORK;
use toolrail_engine::{Engine, MaskEngine, MaskError, TokenTable};
use toolrail_gbnf::Grammar;

/// `n` rules that each read `a` or `b` and owe a `!` or a `?` for it: `n` live stacks at every
/// byte, and a new stack set for every distinct prefix.
fn ambiguous_grammar(n: usize) -> Arc<Grammar> {
    let mut text = String::from("root ::= ");
    text.push_str(
        &(0..n)
            .map(|i| format!("r{i}"))
            .collect::<Vec<_>>()
            .join(" | "),
    );
    for i in 0..n {
        text.push_str(&format!(
            "\nr{i} ::= \"a\" r{i} \"!\" | \"b\" r{i} \"?\" | \"\""
        ));
    }
    Arc::new(Grammar::parse(&text).unwrap())
}

/// Every string over `a`/`b` of 1 to `max` bytes, plus `!`, `?` and an end-of-generation token.
fn ab_vocabulary(max: usize) -> Arc<TokenTable> {
    let mut pieces: Vec<Vec<u8>> = vec![b"!".to_vec(), b"?".to_vec(), b"<eos>".to_vec()];
    let mut level: Vec<Vec<u8>> = vec![Vec::new()];
    for _ in 0..max {
        level = level
            .iter()
            .flat_map(|p| {
                [b'a', b'b'].map(|c| {
                    let mut q = p.clone();
                    q.push(c);
                    q
                })
            })
            .collect();
        pieces.extend(level.iter().cloned());
    }
    Arc::new(TokenTable::new(pieces, [2]))
}

#[test]
fn a_near_cap_ambiguous_grammar_stops_the_mask_at_its_work_limit() {
    let grammar = ambiguous_grammar(2_000);
    let limit = 1 << 22;
    let mut masks = MaskEngine::new(ab_vocabulary(10)).with_work_limit(limit);
    let mut engine = Engine::new(Arc::clone(&grammar));
    let start = engine.work_done();
    let state = engine.initial();
    match masks.mask(&mut engine, state) {
        Err(MaskError::TooMuchWork { limit: named, .. }) => assert_eq!(named, limit),
        other => panic!("expected the work limit, got {other:?}"),
    }
    // Stopped within one step of the limit.
    let work = engine.work_done() - start;
    assert!(work <= limit + MAX_STEP_WORK as u64, "work {work}");
    // The message names the limit and its value.
    let message = MaskError::TooMuchWork { limit, tokens: 3 }.to_string();
    assert!(message.contains("4194304 stack steps"), "{message}");
    assert!(message.contains("work limit per mask"), "{message}");
}

#[test]
fn the_same_grammar_with_few_rules_gets_its_mask_under_the_default_limit() {
    let grammar = ambiguous_grammar(20);
    let mut masks = MaskEngine::new(ab_vocabulary(6));
    let mut engine = Engine::new(Arc::clone(&grammar));
    let state = engine.initial();
    let mask = masks.mask(&mut engine, state).unwrap();
    // Every a/b string and the end are allowed at the start; `!` and `?` are not.
    assert!(mask.contains(2) && mask.contains(3) && !mask.contains(0));
    assert!(engine.work_done() < MASK_WORK_LIMIT);
}

/// Walks `{[` `depth` times, then `{1}`, then `]}` as many times, through masks, with the
/// mask engine's memory limits; returns the peak of the recognizer's memory, whether the walk
/// ended accepted, and the evictions.
fn nested_walk(
    depth: usize,
    engine_limit: usize,
) -> (usize, bool, toolrail_engine::mask::Evictions) {
    // Nested objects and arrays: every depth is a new stack state.
    let grammar = Arc::new(
        Grammar::parse("root ::= obj\nobj ::= \"{\" (obj | \"1\") \"}\" | \"[\" obj \"]\"")
            .unwrap(),
    );
    let pieces: Vec<Vec<u8>> = ["{", "[", "{[", "}", "]", "1", "<eos>"]
        .iter()
        .map(|p| p.as_bytes().to_vec())
        .collect();
    let table = Arc::new(TokenTable::new(pieces, [6]));
    let mut masks = MaskEngine::new(Arc::clone(&table)).with_memory_limits(64, engine_limit);
    let mut engine = Engine::new(Arc::clone(&grammar));
    let mut state = engine.initial();
    let mut tokens = vec![2; depth];
    tokens.extend([0, 5, 3]);
    for _ in 0..depth {
        tokens.extend([4, 3]);
    }
    let mut peak = 0;
    for token in tokens {
        let mask = masks.mask(&mut engine, state).unwrap();
        assert!(mask.contains(token), "token {token} refused");
        let next = engine
            .accept_token(state, token, table.piece(token))
            .unwrap();
        state = masks.bound_memory(&mut engine, next);
        peak = peak.max(engine.memory_entries());
    }
    (peak, engine.can_end(state), masks.evictions())
}

#[test]
fn memory_stays_bounded_walking_through_distinct_stack_states() {
    let depth = 5_000;
    let (unbounded, accepted, evictions) = nested_walk(depth, usize::MAX);
    assert!(accepted);
    assert_eq!(evictions.engine, 0);
    let limit = 1 << 12;
    let (peak, accepted, evictions) = nested_walk(depth, limit);
    assert!(
        accepted,
        "the input is still accepted after the compactions"
    );
    assert!(evictions.engine > 0, "{evictions:?}");
    // Every state the unbounded walk met stays in its memo; the bounded walk keeps at most twice
    // the larger of the limit and the live state (two stack nodes per level).
    assert!(peak <= 2 * (limit + 4 * depth), "peak {peak}");
    println!("bounded {peak}, unbounded {unbounded}");
    assert!(
        peak * 2 < unbounded,
        "bounded {peak}, unbounded {unbounded}"
    );
}
