//! Lint: every finding about a grammar, with a stable code, severity, span and hint.
//!
//! Codes (see `docs/lint.md`): GB001–GB013 come from the parser (syntax, limits, NUL, empty
//! classes), GB101–GB104 from building (undefined rules, missing root, left recursion, hidden
//! left recursion), GB105 from the parser (max over 2000), and GB106–GB113 from the analyses here.

use super::diagnostic::{Code, Diagnostic, Severity};
use super::element::ElementKind;
use super::grammar::{DEFAULT_ROOT, Grammar};
use super::parser::{self, ParsedGrammar, SymbolKind};
use super::source::{LineIndex, Span};
use crate::charset::class_chars;

/// Every finding about `source` with start rule `root`, sorted by position.
pub fn lint(source: &str, root: &str) -> Vec<Diagnostic> {
    let mut findings = match parser::parse(source) {
        Err(e) => e.diagnostics,
        Ok(parsed) => {
            let index = LineIndex::new(parsed.source.as_bytes());
            let mut findings = parsed.notes.clone();
            findings.extend(duplicate_definitions(&parsed, &index));
            match Grammar::build(parsed.clone(), root) {
                Err(e) => {
                    findings.extend(e.diagnostics);
                    findings.extend(unused_rules(&parsed, parsed.symbol_id(root), &index));
                }
                Ok(grammar) => findings.extend(analyse(&grammar, &index)),
            }
            findings.extend(optional_chains(&parsed, &index));
            findings.extend(ambiguous_repetitions(&parsed, &index));
            findings
        }
    };
    findings.sort_by_key(|d| (d.span.start, d.code));
    findings.dedup();
    findings
}

/// Lint with the default start rule `root`.
pub fn lint_default(source: &str) -> Vec<Diagnostic> {
    lint(source, DEFAULT_ROOT)
}

fn src(parsed: &ParsedGrammar) -> &[u8] {
    parsed.source.as_bytes()
}

/// Where each symbol is defined for findings: the name of its last definition, else the
/// symbol's own span (one pass over the definitions).
fn definition_spans(parsed: &ParsedGrammar) -> Vec<Span> {
    let mut spans: Vec<Span> = parsed.symbols.iter().map(|s| s.span).collect();
    for d in &parsed.definitions {
        if let Some(span) = spans.get_mut(d.symbol as usize) {
            *span = d.name_span;
        }
    }
    spans
}

fn duplicate_definitions(parsed: &ParsedGrammar, index: &LineIndex) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    // The index of each symbol's last definition: every earlier one is a duplicate.
    let mut last = vec![usize::MAX; parsed.symbols.len()];
    for (i, d) in parsed.definitions.iter().enumerate() {
        if let Some(slot) = last.get_mut(d.symbol as usize) {
            *slot = i;
        }
    }
    for (i, d) in parsed.definitions.iter().enumerate() {
        if last.get(d.symbol as usize).is_some_and(|&l| l != i) {
            let name = &parsed.symbols[d.symbol as usize].name;
            out.push(
                Diagnostic::new_indexed(
                    Code::DuplicateRule,
                    src(parsed),
                    index,
                    d.name_span,
                    format!("rule '{name}' is defined again later; llama.cpp silently keeps only the last definition"),
                )
                .with_hint("merge the definitions with '|'"),
            );
        }
    }
    out
}

fn reachable(parsed: &ParsedGrammar, root: u32) -> Vec<bool> {
    let mut seen = vec![false; parsed.rules.len()];
    let mut todo = vec![root as usize];
    while let Some(r) = todo.pop() {
        if r >= seen.len() || std::mem::replace(&mut seen[r], true) {
            continue;
        }
        todo.extend(
            parsed.rules[r]
                .iter()
                .filter(|e| e.kind == ElementKind::RuleRef)
                .map(|e| e.value as usize),
        );
    }
    seen
}

fn unused_rules(parsed: &ParsedGrammar, root: Option<u32>, index: &LineIndex) -> Vec<Diagnostic> {
    let Some(root) = root else { return Vec::new() };
    let def_spans = definition_spans(parsed);
    let seen = reachable(parsed, root);
    parsed
        .symbols
        .iter()
        .enumerate()
        .filter(|(i, s)| s.kind == SymbolKind::Named && !seen.get(*i).copied().unwrap_or(true))
        .map(|(i, s)| {
            Diagnostic::new_indexed(
                Code::UnusedRule,
                src(parsed),
                index,
                def_spans[i],
                format!(
                    "rule '{}' is never used from '{}'",
                    s.name, parsed.symbols[root as usize].name
                ),
            )
            .with_hint("remove it, or reference it")
        })
        .collect()
}

/// Runs of the same optional item (`x? x? x?`): each `?` adds stacks that llama.cpp carries at
/// every step, which makes sampling slow; `x{0,3}` nests them instead.
fn optional_chains(parsed: &ParsedGrammar, index: &LineIndex) -> Vec<Diagnostic> {
    let text = parsed.source.as_bytes();
    let mut out = Vec::new();
    for seq in &parsed.sequences {
        let mut i = 0;
        while i < seq.len() {
            let is_opt = |k: usize| seq[k].repeats == [(0, Some(1))];
            if !is_opt(i) {
                i += 1;
                continue;
            }
            let operand = &text[seq[i].operand.range()];
            let mut j = i + 1;
            while j < seq.len() && is_opt(j) && &text[seq[j].operand.range()] == operand {
                j += 1;
            }
            if j - i >= 2 {
                let op = String::from_utf8_lossy(operand);
                out.push(
                    Diagnostic::new_indexed(
                        Code::OptionalChain,
                        text,
                        index,
                        seq[i].span.join(seq[j - 1].span),
                        format!("{} optional copies of {op} in a row multiply llama.cpp's stacks and slow sampling", j - i),
                    )
                    .with_hint(format!("write {op}{{0,{}}}", j - i)),
                );
            }
            i = j;
        }
    }
    out
}

/// How many more copies a repetition may take beyond its minimum (None: unboundedly many),
/// or Some(0) for a fixed count. Stacked operators (`x{2}{3}`) multiply.
fn variable_copies(repeats: &[(u64, Option<u64>)]) -> Option<u64> {
    let (mut lo, mut hi) = (1u64, Some(1u64));
    for &(min, max) in repeats {
        lo = lo.saturating_mul(min);
        hi = match (hi, max) {
            (Some(h), Some(m)) => Some(h.saturating_mul(m)),
            _ => None,
        };
    }
    hi.map(|h| h.saturating_sub(lo))
}

/// Two variable repetitions of the same item side by side (`x{0,2000} x{0,2000}`, `x* x+`):
/// a run of copies can be split between them in many ways, and llama.cpp keeps a stack for
/// each way at every character, so its sampler slows down as the run grows (the split count is
/// the measure reported). Runs of `x?` are GB109's.
fn ambiguous_repetitions(parsed: &ParsedGrammar, index: &LineIndex) -> Vec<Diagnostic> {
    let text = parsed.source.as_bytes();
    let mut out = Vec::new();
    for seq in &parsed.sequences {
        for pair in seq.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a.repeats.is_empty()
                || b.repeats.is_empty()
                || text[a.operand.range()] != text[b.operand.range()]
                || (a.repeats == [(0, Some(1))] && b.repeats == [(0, Some(1))])
            {
                continue;
            }
            let (va, vb) = (variable_copies(&a.repeats), variable_copies(&b.repeats));
            if va == Some(0) || vb == Some(0) {
                continue;
            }
            let ways = match (va, vb) {
                (Some(x), Some(y)) => format!("up to {} ways", x.min(y).saturating_add(1)),
                (Some(x), None) | (None, Some(x)) => format!("up to {} ways", x.saturating_add(1)),
                (None, None) => "as many ways as it is long".to_string(),
            };
            let op = String::from_utf8_lossy(&text[a.operand.range()]);
            out.push(
                Diagnostic::new_indexed(
                    Code::AmbiguousRepetition,
                    text,
                    index,
                    a.span.join(b.span),
                    format!(
                        "a run of {op} can be split between these two repetitions in {ways}; \
                         llama.cpp keeps a stack for each way at every character, so sampling \
                         slows down as the run grows"
                    ),
                )
                .with_hint(format!(
                    "write one repetition of {op}; over 2000 copies, chain rules that take \
                     either a full chunk or fewer: r ::= {op}{{2000}} rest | {op}{{0,1999}}"
                )),
            );
        }
    }
    out
}

/// Productivity, reachability and dead ends on a built grammar.
fn analyse(grammar: &Grammar, index: &LineIndex) -> Vec<Diagnostic> {
    let parsed = grammar.parsed();
    let def_spans = definition_spans(parsed);
    let text = parsed.source.as_bytes();
    let n = grammar.rule_count();
    let mut out = unused_rules(parsed, Some(grammar.root()), index);

    // A class that matches no character can never be passed.
    let class_ok = |pos: u32| !class_chars(grammar, pos).is_empty();
    // productive[r]: rule r derives at least one finite string (of characters or tokens).
    let productive = grammar.rules_deriving(|pos| match grammar.element(pos).kind {
        ElementKind::Token | ElementKind::TokenNot => true,
        _ => class_ok(pos),
    });

    let root = grammar.root();
    if !productive[root as usize] {
        out.push(
            Diagnostic::new_indexed(
                Code::EmptyLanguage,
                text,
                index,
                def_spans[root as usize],
                "the grammar matches no string at all: every way through it loops for ever or hits a class that matches nothing",
            )
            .with_hint("give each recursive rule an alternative that ends"),
        );
    }

    // Rules entered after a viable prefix, and the first element at which each alternative gets
    // stuck (a dead end: input can continue but the grammar can never end).
    let mut viable = vec![false; n];
    viable[root as usize] = true;
    let mut todo = vec![root];
    let mut dead_ends: Vec<(u32, u32)> = Vec::new(); // (position, rule it is in)
    while let Some(r) = todo.pop() {
        for start in grammar.alternatives(r) {
            let mut pos = start;
            let mut consumed_before = false;
            while !grammar.is_end_of_sequence(pos) {
                let e = grammar.element(pos);
                let (fine, enters) = match e.kind {
                    ElementKind::RuleRef => (productive[e.value as usize], Some(e.value)),
                    ElementKind::CharAlt | ElementKind::CharRngUpper => {
                        pos += 1;
                        continue;
                    }
                    ElementKind::Token | ElementKind::TokenNot => (true, None),
                    _ => (class_ok(pos), None),
                };
                if let Some(target) = enters
                    && !viable[target as usize]
                {
                    viable[target as usize] = true;
                    todo.push(target);
                }
                if !fine {
                    if consumed_before || enters.is_some() {
                        dead_ends.push((pos, r));
                    }
                    break;
                }
                consumed_before = true;
                pos += 1;
            }
        }
    }

    for r in 0..n as u32 {
        let symbol = grammar.symbol(r);
        if symbol.kind == SymbolKind::Named && !productive[r as usize] && r != root {
            out.push(
                Diagnostic::new_indexed(
                    Code::NeverFinishes,
                    text,
                    index,
                    def_spans[r as usize],
                    format!("rule '{}' can never finish: every alternative loops for ever or hits a class that matches nothing", symbol.name),
                )
                .with_severity(if viable[r as usize] { Severity::Error } else { Severity::Warning })
                .with_hint("add an alternative that ends, e.g. `| \"\"` or a non-recursive one"),
            );
        }
    }

    for (pos, _rule) in dead_ends {
        let e = grammar.element(pos);
        let what = match e.kind {
            ElementKind::RuleRef => format!("'{}' never finishes", grammar.rule_name(e.value)),
            _ => "this character class matches nothing".to_string(),
        };
        out.push(
            Diagnostic::new_indexed(
                Code::DeadEnd,
                text,
                index,
                grammar.span(pos),
                format!("dead end: once generation gets here the grammar can never be completed ({what}); the model can never stop, and an end-of-generation token here aborts llama.cpp"),
            )
            .with_hint("make sure every path can reach the end of 'root'"),
        );
    }

    // Character ranges written backwards match nothing.
    let elements = grammar.elements();
    for pos in 1..elements.len() {
        let e = elements[pos];
        if e.kind == ElementKind::CharRngUpper && elements[pos - 1].value > e.value {
            out.push(
                Diagnostic::new_indexed(
                    Code::BackwardsRange,
                    text,
                    index,
                    grammar.span(pos as u32 - 1).join(grammar.span(pos as u32)),
                    "this range is written backwards and matches no character",
                )
                .with_hint("put the lower bound first"),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(src: &str) -> Vec<&'static str> {
        lint_default(src)
            .into_iter()
            .map(|d| d.code.as_str())
            .collect()
    }

    #[test]
    fn clean_grammar_has_no_findings() {
        assert!(codes("root ::= \"a\" b\nb ::= [0-9]+").is_empty());
    }

    #[test]
    fn finds_unused_and_duplicates() {
        let c = codes("root ::= \"a\"\nb ::= \"b\"\nroot ::= \"c\"");
        assert!(c.contains(&"GB106") && c.contains(&"GB111"), "{c:?}");
    }

    #[test]
    fn finds_dead_ends_and_unfinishable_rules() {
        let findings = lint_default("root ::= \"a\" x\nx ::= \"b\" x");
        let c: Vec<_> = findings.iter().map(|d| d.code.as_str()).collect();
        assert!(
            c.contains(&"GB107") && c.contains(&"GB110") && c.contains(&"GB108"),
            "{c:?}"
        );
        let dead = findings.iter().find(|d| d.code == "GB110").unwrap();
        assert_eq!((dead.position.line, dead.position.column), (1, 14));
    }

    #[test]
    fn finds_ambiguous_repetitions() {
        let findings =
            lint_default("root ::= \"a\" char{0,2000} char{0,500} \"b\"\nchar ::= [a-z]\n");
        let f = findings.iter().find(|d| d.code == "GB113").unwrap();
        assert!(f.message.contains("up to 501 ways"), "{}", f.message);
        assert!(
            lint_default("root ::= x* x+\nx ::= \"x\"\n")
                .iter()
                .any(|d| d.code == "GB113")
        );
        // fixed counts, different items and the converter's unambiguous chain are fine
        for ok in [
            "root ::= x{2000} x{0,1999}\nx ::= \"x\"\n",
            "root ::= x* y*\nx ::= \"x\"\ny ::= \"y\"\n",
            "root ::= x{2000} r | x{0,1999}\nr ::= x{0,10}\nx ::= \"x\"\n",
            "root ::= x? x?\nx ::= \"x\"\n",
        ] {
            assert!(!lint_default(ok).iter().any(|d| d.code == "GB113"), "{ok}");
        }
    }

    #[test]
    fn finds_optional_chains() {
        let findings = lint_default("root ::= [0-9]? [0-9]? [0-9]? \"x\"");
        let chain = findings.iter().find(|d| d.code == "GB109").unwrap();
        assert_eq!(chain.hint.as_deref(), Some("write [0-9]{0,3}"));
    }

    #[test]
    fn parse_errors_and_limits_are_findings() {
        assert_eq!(codes("root ::= \"a\"{0,5000}"), vec!["GB105"]);
        assert_eq!(codes("root ::= x"), vec!["GB101"]);
        assert_eq!(codes("root ::= [z-a] | \"b\""), vec!["GB112"]);
    }

    /// Sizes chosen so that a return to quadratic work shows as a hang, not as a timing: each
    /// of these took 20 s to minutes in a release build when a pass was quadratic (a fixpoint
    /// over all rules per rule, a search of all definitions per rule, a line count over the
    /// whole source per finding, every defined name tried per undefined one), and takes
    /// milliseconds when every pass is linear. No time is asserted.
    const BIG: usize = 20_000;

    fn big(rule: impl Fn(usize) -> String, head: &str) -> String {
        let mut text = String::from(head);
        for i in 0..BIG {
            text.push_str(&rule(i));
            text.push('\n');
        }
        text
    }

    #[test]
    fn long_rule_chains_lint_cleanly() {
        // Productivity has to travel back from the last rule to the first.
        let chain = big(|i| format!("r{i} ::= \"a\" r{}", i + 1), "root ::= r0\n")
            + &format!("r{BIG} ::= \"a\"\n");
        assert!(lint_default(&chain).is_empty());
        // Each rule starts with the next one: a left-recursion candidate at every step.
        let left = big(|i| format!("r{i} ::= r{} \"a\"", i + 1), "root ::= r0\n")
            + &format!("r{BIG} ::= \"a\"\n");
        assert!(lint_default(&left).is_empty());
        // Nullable all the way down, defined last rule first.
        let mut nullable = String::from("root ::= r0 \"x\"\n");
        nullable.push_str(&format!("r{BIG} ::= \"\"\n"));
        for i in (0..BIG).rev() {
            nullable.push_str(&format!("r{i} ::= r{} | \"a\"\n", i + 1));
        }
        assert!(lint_default(&nullable).is_empty());
        // ... and one that never ends, found at the far end of the chain.
        let endless = big(|i| format!("r{i} ::= \"a\" r{}", i + 1), "root ::= r0\n")
            + &format!("r{BIG} ::= \"a\" r{BIG}\n");
        let findings = lint_default(&endless);
        assert_eq!(
            findings
                .iter()
                .filter(|d| d.code == Code::NeverFinishes)
                .count(),
            BIG + 1
        );
        let last = findings
            .iter()
            .rev()
            .find(|d| d.code == Code::NeverFinishes)
            .unwrap();
        assert_eq!(last.position.line as usize, BIG + 2);
    }

    #[test]
    fn many_findings_and_many_rules_lint_in_one_pass() {
        // Unused rules, each defined twice: 2 findings per rule, positions on every line.
        let unused = big(
            |i| format!("u{i} ::= \"a\"\nu{i} ::= \"b\""),
            "root ::= \"x\"\n",
        );
        let findings = lint_default(&unused);
        assert_eq!(
            findings
                .iter()
                .filter(|d| d.code == Code::UnusedRule)
                .count(),
            BIG
        );
        assert_eq!(
            findings
                .iter()
                .filter(|d| d.code == Code::DuplicateRule)
                .count(),
            BIG
        );
        assert_eq!(findings.last().unwrap().position.line as usize, 2 * BIG + 1);
        // Undefined references, each with a defined name one edit away.
        let mut undefined = String::from("root ::=");
        for i in 0..BIG {
            undefined.push_str(&format!(" u{i}"));
        }
        undefined.push('\n');
        undefined.push_str(&big(|i| format!("d{i} ::= \"a\""), ""));
        let findings = lint_default(&undefined);
        assert_eq!(findings.len(), BIG);
        assert_eq!(findings[0].hint.as_deref(), Some("did you mean 'd0'?"));
        assert_eq!(
            findings[BIG - 1].position.column as usize,
            undefined.rfind(&format!(" u{}", BIG - 1)).unwrap() + 2
        );
        // A long alternation.
        let mut alternatives = String::from("root ::= \"v0\"");
        for i in 1..BIG {
            alternatives.push_str(&format!(" | \"v{i}\""));
        }
        assert!(lint_default(&alternatives).is_empty());
    }
}
