//! Grammars 100,000 levels deep (nested groups, chains of rules, stacked operators) go through
//! the parser, the build checks, lint and the printer on a test thread's default stack: a
//! result, or an error naming what and where, never a crash.

use toolrail_gbnf::lint::lint_default;
use toolrail_gbnf::parser::MAX_NESTING;
use toolrail_gbnf::printer::print_compiled;
use toolrail_gbnf::{Code, Grammar};

const DEEP: usize = 100_000;

/// `head`, then one line per `rule(i)` for i in 0..DEEP, then `last`.
fn rules(head: &str, rule: impl Fn(usize) -> String, last: &str) -> String {
    let mut text = format!("{head}\n");
    for i in 0..DEEP {
        text.push_str(&rule(i));
        text.push('\n');
    }
    text.push_str(last);
    text.push('\n');
    text
}

#[test]
fn groups_nested_100000_deep_are_refused_where_the_limit_is_crossed() {
    let text = format!("root ::= {}\"a\"{}\n", "(".repeat(DEEP), ")".repeat(DEEP));
    let error = Grammar::parse(&text).unwrap_err();
    assert_eq!(error.code(), Code::TooDeep);
    let at = &error.diagnostics[0];
    // The group opened one past the limit, after `root ::= `.
    assert_eq!(
        (at.position.line, at.position.column),
        (1, 10 + MAX_NESTING as u32)
    );
    let findings = lint_default(&text);
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].code, Code::TooDeep);
    assert_eq!(findings[0].position, at.position);
    // The deepest nesting allowed, each group repeated: one generated rule per level.
    let text = format!(
        "root ::= {}\"a\"{}\n",
        "(".repeat(MAX_NESTING),
        ")?".repeat(MAX_NESTING)
    );
    let grammar = Grammar::parse(&text).unwrap();
    assert_eq!(grammar.rule_count(), 1 + 2 * MAX_NESTING);
    assert!(lint_default(&text).is_empty());
    assert_eq!(
        print_compiled(&grammar).lines().count(),
        1 + 2 * MAX_NESTING
    );
}

#[test]
fn a_chain_of_100000_rules_builds_lints_and_prints() {
    let text = rules(
        "root ::= r0",
        |i| format!("r{i} ::= \"a\" r{}", i + 1),
        &format!("r{DEEP} ::= \"a\""),
    );
    let grammar = Grammar::parse(&text).unwrap();
    assert_eq!(grammar.rule_count(), DEEP + 2);
    assert!(lint_default(&text).is_empty());
    let printed = print_compiled(&grammar);
    assert_eq!(printed.lines().count(), DEEP + 2);
    assert_eq!(printed.lines().last(), Some("r100000 ::= [a] "));
}

#[test]
fn left_recursion_through_100000_rules_is_refused_naming_the_rule() {
    // Each rule starts with the next; the last one with the first.
    let text = rules(
        "root ::= r0",
        |i| format!("r{i} ::= r{} \"a\"", i + 1),
        &format!("r{DEEP} ::= r0 \"a\" | \"b\""),
    );
    let error = Grammar::parse(&text).unwrap_err();
    assert_eq!(error.code(), Code::LeftRecursion);
    assert!(error.diagnostics[0].message.contains("'r"));
    assert!(
        lint_default(&text)
            .iter()
            .any(|d| d.code == Code::LeftRecursion)
    );
    // The same behind 100,000 rules that derive the empty string only.
    let text = rules(
        "root ::= r0\nempty ::= \"\"",
        |i| format!("r{i} ::= empty r{}", i + 1),
        &format!("r{DEEP} ::= empty r0 \"a\" | \"b\""),
    );
    let error = Grammar::parse(&text).unwrap_err();
    assert_eq!(error.code(), Code::LeftRecursion);
}

#[test]
fn rules_that_never_finish_at_the_end_of_a_chain_of_100000_are_found() {
    let text = rules(
        "root ::= r0",
        |i| format!("r{i} ::= \"a\" r{}", i + 1),
        &format!("r{DEEP} ::= \"a\" r{DEEP}"),
    );
    let findings = lint_default(&text);
    let never: Vec<_> = findings
        .iter()
        .filter(|d| d.code == Code::NeverFinishes)
        .collect();
    assert_eq!(never.len(), DEEP + 1);
    assert_eq!(never[DEEP].position.line as usize, DEEP + 2);
}

#[test]
fn an_operator_stacked_100000_times_nests_100000_generated_rules() {
    let text = format!("root ::= \"a\"{}\n", "?".repeat(DEEP));
    let grammar = Grammar::parse(&text).unwrap();
    assert_eq!(grammar.rule_count(), DEEP + 1);
    assert!(lint_default(&text).is_empty());
    assert_eq!(print_compiled(&grammar).lines().count(), DEEP + 1);
}

#[test]
fn a_byte_order_mark_before_a_grammar_is_named() {
    let err = toolrail_gbnf::Grammar::parse("\u{feff}root ::= \"a\"\n").unwrap_err();
    let shown = err.to_string();
    assert!(shown.contains("byte order mark"), "{shown}");
}

#[test]
fn plus_stacked_100000_times_is_refused_before_its_copies_grow_quadratically() {
    // each stacked '+' repeats everything the one before built: llama.cpp would build about
    // 5 * 10^9 elements
    let text = format!("root ::= \"a\"{}\n", "+".repeat(DEEP));
    let err = Grammar::parse(&text).unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.contains("repetitions now copy more than 4000000 elements"),
        "{shown}"
    );
    // a hundred stacked still build, as in llama.cpp
    let text = format!("root ::= \"a\"{}\n", "+".repeat(100));
    Grammar::parse(&text).unwrap();
}
