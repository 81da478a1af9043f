//! Grammars as deep as a user can write them: chains of 100,000 rules and stacks 100,000 frames
//! deep go through every walk of the engine (check, streamed check, expected literals, snapshot,
//! compaction, masks and their reference, the budget guard, random strings) on a test thread's
//! default stack, with the result a short grammar of the same shape gets.

use std::sync::Arc;

use toolrail_engine::sample::{Sampler, SplitMix64};
use toolrail_engine::{
    BudgetGuard, Engine, MaskEngine, TokenTable, VerdictKind, check, check_reader, check_with,
};
use toolrail_gbnf::Grammar;

const DEEP: usize = 100_000;

/// `root ::= r0`, `r{i} ::= "a" r{i+1}`, `r{n} ::= "a"`: n + 1 characters, one rule each.
fn chain(n: usize) -> Arc<Grammar> {
    let mut text = String::from("root ::= r0\n");
    for i in 0..n {
        text.push_str(&format!("r{i} ::= \"a\" r{}\n", i + 1));
    }
    text.push_str(&format!("r{n} ::= \"a\"\n"));
    Arc::new(Grammar::parse(&text).unwrap())
}

/// What `toolrail check` says is expected after `text`, literals where a rule has few.
fn expected_after(grammar: &Arc<Grammar>, text: &[u8]) -> (VerdictKind, Vec<String>) {
    let mut engine = Engine::new(Arc::clone(grammar));
    let verdict = check_with(&mut engine, text);
    let consumed = &text[..verdict.offset.unwrap_or(text.len())];
    let expected = engine
        .readable_expected(verdict.state, consumed, &|_| false)
        .describe(&|_| None);
    (verdict.kind, expected)
}

#[test]
fn a_chain_of_20000_rules_says_what_it_expects_when_the_input_is_not_accepted() {
    // A short chain: the rest of the chain is one literal, named by its rule.
    let short = chain(10);
    assert_eq!(
        expected_after(&short, b"aaaa"),
        (
            VerdictKind::Incomplete,
            vec!["aaaaaaa (rule r4)".to_owned()]
        )
    );
    // 20,000 rules: the rest is far longer than a literal is shown, so its next character.
    let long = chain(20_000);
    assert_eq!(
        expected_after(&long, b"aaaa"),
        (VerdictKind::Incomplete, vec!["'a'".to_owned()])
    );
    assert_eq!(
        expected_after(&long, b"aab"),
        (VerdictKind::Rejected, vec!["'a'".to_owned()])
    );
    assert_eq!(
        expected_after(&long, b""),
        (VerdictKind::Incomplete, vec!["'a'".to_owned()])
    );
    // Near the end of the chain the rest is a literal again.
    let near_end = "a".repeat(20_000 - 4);
    assert_eq!(
        expected_after(&long, near_end.as_bytes()),
        (
            VerdictKind::Incomplete,
            vec!["aaaaa (rule r19996)".to_owned()]
        )
    );
    // Streamed, as the command line reads its input.
    let mut engine = Engine::new(Arc::clone(&long));
    let streamed = check_reader(&mut engine, &mut &b"aaaa"[..]).unwrap();
    assert_eq!(streamed.verdict.kind, VerdictKind::Incomplete);
    let expected = engine
        .readable_expected(streamed.verdict.state, &streamed.window, &|_| false)
        .describe(&|_| None);
    assert_eq!(expected, vec!["'a'"]);
}

#[test]
fn a_literal_reached_through_100000_rules_is_shown_as_literals() {
    let mut text = String::from("root ::= \"<\" word \">\"\nword ::= \"x\" r0\n");
    for i in 0..DEEP {
        text.push_str(&format!("r{i} ::= r{}\n", i + 1));
    }
    text.push_str(&format!("r{DEEP} ::= \"1\" | \"2\"\n"));
    let grammar = Arc::new(Grammar::parse(&text).unwrap());
    assert_eq!(
        expected_after(&grammar, b"<y"),
        (
            VerdictKind::Rejected,
            vec!["x1 | x2 (rule word)".to_owned()]
        )
    );
    // Inside the innermost rule with literals, its own.
    assert_eq!(
        expected_after(&grammar, b"<x"),
        (
            VerdictKind::Incomplete,
            vec!["1 | 2 (rule r100000)".to_owned()]
        )
    );
    assert!(check(&grammar, b"<x2>").is_accepted());
}

/// `r{i} ::= "a" r{i+1} "b"`: after n `a`s, a stack n frames deep.
fn nested(n: usize) -> Arc<Grammar> {
    let mut text = String::from("root ::= r0\n");
    for i in 0..n {
        text.push_str(&format!("r{i} ::= \"a\" r{} \"b\"\n", i + 1));
    }
    text.push_str(&format!("r{n} ::= \"c\"\n"));
    Arc::new(Grammar::parse(&text).unwrap())
}

#[test]
fn a_stack_100000_frames_deep_is_followed_shown_and_masked() {
    let grammar = nested(DEEP);
    let opened = "a".repeat(DEEP);
    let closed = "b".repeat(DEEP);
    let whole = format!("{opened}c{closed}");
    let mut engine = Engine::new(Arc::clone(&grammar));
    assert!(check_with(&mut engine, whole.as_bytes()).is_accepted());

    let verdict = check_with(&mut engine, opened.as_bytes());
    assert_eq!(verdict.kind, VerdictKind::Incomplete);
    let state = verdict.state;
    let snapshot = engine.snapshot(state);
    assert_eq!(snapshot.stacks.len(), 1);
    assert_eq!(snapshot.stacks[0].frames.len(), DEEP + 1);
    assert_eq!(snapshot.stacks[0].frames[0].rule_name, "r0");
    assert_eq!(
        engine
            .readable_expected(state, opened.as_bytes(), &|_| false)
            .describe(&|_| None),
        vec!["c (rule r100000)"]
    );
    let state = engine.compact(state);
    assert_eq!(engine.snapshot(state).stacks[0].frames.len(), DEEP + 1);

    // Pieces up to the whole rest of the input, checked by the mask and one by one the way
    // llama.cpp checks a candidate.
    let table = Arc::new(TokenTable::new(
        vec![
            b"a".to_vec(),
            b"b".to_vec(),
            b"c".to_vec(),
            b"cb".to_vec(),
            format!("c{closed}").into_bytes(),
            format!("c{closed}b").into_bytes(),
            Vec::new(),
        ],
        [6],
    ));
    let mut masks = MaskEngine::new(Arc::clone(&table));
    let mask = masks.mask(&mut engine, state).unwrap();
    assert_eq!(mask.iter().collect::<Vec<_>>(), vec![2, 3, 4]);
    for id in 0..table.len() as u32 {
        assert_eq!(
            masks.reference_allowed(&mut engine, state, id),
            mask.contains(id),
            "token {id}"
        );
    }
    let guard = BudgetGuard::new(&grammar, Arc::clone(&table));
    assert_eq!(guard.tokens_needed(&engine, state), Some(DEEP as u64 + 1));

    let sampler = Sampler::new(&grammar);
    assert_eq!(sampler.shortest(), Some(2 * DEEP as u64 + 1));
    let sample = sampler
        .sample(&mut SplitMix64::new(7), 3 * DEEP as u64)
        .unwrap();
    assert_eq!(sample, whole);
}

#[test]
fn a_chain_of_100000_rules_is_checked_and_sampled() {
    let grammar = chain(DEEP);
    let whole = "a".repeat(DEEP + 1);
    assert!(check(&grammar, whole.as_bytes()).is_accepted());
    assert_eq!(
        expected_after(&grammar, &whole.as_bytes()[..DEEP]),
        (VerdictKind::Incomplete, vec!["a (rule r100000)".to_owned()])
    );
    assert_eq!(
        expected_after(&grammar, b"aaaa"),
        (VerdictKind::Incomplete, vec!["'a'".to_owned()])
    );
    let sampler = Sampler::new(&grammar);
    assert_eq!(sampler.sample(&mut SplitMix64::new(1), 10).unwrap(), whole);
}

/// JSON values with arrays nested at will (llama.cpp's `json.gbnf` without whitespace, with
/// any value at the root).
const NESTED_JSON: &str = r#"root ::= value
value ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ( string ":" value ("," string ":" value)* )? "}"
array ::= "[" ( value ("," value)* )? "]"
string ::= "\"" ( [^"\\] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F]) )* "\""
number ::= ("-"? ([0-9] | [1-9] [0-9]*)) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
"#;

#[test]
fn a_streamed_check_of_300000_unclosed_brackets_is_incomplete_with_the_expected_set() {
    // The live stacks grow with the nesting, so the engine is compacted many times on the way;
    // each compaction waits for the memory to double, so the input is not recopied per chunk.
    let grammar = Arc::new(Grammar::parse(NESTED_JSON).unwrap());
    let mut engine = Engine::new(Arc::clone(&grammar));
    let input = vec![b'['; 3 * DEEP];
    let streamed = check_reader(&mut engine, &mut &input[..]).unwrap();
    assert_eq!(streamed.verdict.kind, VerdictKind::Incomplete);
    assert_eq!(
        streamed.verdict.expected.describe(),
        vec![
            "'\"'", "'-'", "[0-9]", "'['", "']'", "'f'", "'n'", "'t'", "'{'"
        ]
    );
}

#[test]
fn a_hundred_thousand_literals_sharing_a_long_prefix_are_followed_not_called_ambiguous() {
    // Each alternative keeps its own stack through the shared prefix, as in llama.cpp: work in
    // proportion to the grammar's size, which the check's budget grows with.
    let n = 100_000;
    let prefix = "p".repeat(30);
    let alternatives: Vec<String> = (0..n).map(|i| format!("\"{prefix}{i}\"")).collect();
    let grammar =
        Arc::new(Grammar::parse(&format!("root ::= {}\n", alternatives.join(" | "))).unwrap());
    let last = format!("{prefix}{}", n - 1);
    let verdict = check(&grammar, last.as_bytes());
    assert_eq!(verdict.kind, VerdictKind::Accepted);
    let verdict = check(&grammar, format!("{prefix}x").as_bytes());
    assert_eq!(verdict.kind, VerdictKind::Rejected);
    assert_eq!(verdict.offset, Some(prefix.len()));
}
