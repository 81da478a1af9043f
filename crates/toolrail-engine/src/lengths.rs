//! Shortest completions of a grammar under a per-element cost: the least total cost of any way
//! to finish each rule, and from each element position to the end of its alternative.
//!
//! The random sampler counts characters (token elements cannot be sampled as text); the
//! budget guard counts tokens (one per byte, one per token element). Both share this fixpoint.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use toolrail_gbnf::{ElementKind, Grammar};

/// Stands for "cannot be completed" (kept well below `u64::MAX` so that sums saturate safely).
pub(crate) const INFINITE: u64 = u64::MAX / 4;

/// Least completion costs of one grammar.
#[derive(Clone, Debug)]
pub(crate) struct MinLengths {
    /// Least cost of each rule.
    pub rule_min: Vec<u64>,
    /// Least cost from each element position to the end of its alternative.
    pub rest_min: Vec<u64>,
}

impl MinLengths {
    /// Costs for `grammar`, where `terminal_cost(pos)` prices the terminal (a character class
    /// start or a token element) at element position `pos`.
    pub fn new(grammar: &Grammar, terminal_cost: impl Fn(u32) -> u64) -> Self {
        let n = grammar.rule_count();
        let elements = grammar.elements();
        let element_cost = |rule_min: &[u64], pos: u32| -> u64 {
            match grammar.element(pos).kind {
                ElementKind::RuleRef => rule_min[grammar.element(pos).value as usize],
                ElementKind::End | ElementKind::Alt => 0,
                _ => terminal_cost(pos),
            }
        };
        // Knuth's generalisation of Dijkstra's algorithm: an alternative's cost is known once
        // every rule it references is; rules are settled cheapest first, so each rule and each
        // reference is handled once (O(size · log rules)), and the result is the same least
        // cost the plain fixpoint reaches.
        struct Alt {
            rule: u32,
            cost: u64,
            unknown: usize,
        }
        let mut alts: Vec<Alt> = Vec::new();
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
        for r in 0..n as u32 {
            for start in grammar.alternatives(r) {
                let index = alts.len();
                let mut alt = Alt {
                    rule: r,
                    cost: 0,
                    unknown: 0,
                };
                let mut pos = start;
                while !grammar.is_end_of_sequence(pos) {
                    let e = grammar.element(pos);
                    if e.kind == ElementKind::RuleRef {
                        alt.unknown += 1;
                        users[e.value as usize].push(index);
                    } else {
                        alt.cost = alt.cost.saturating_add(terminal_cost(pos)).min(INFINITE);
                    }
                    pos = next_element(grammar, pos);
                }
                alts.push(alt);
            }
        }
        let mut rule_min = vec![INFINITE; n];
        let mut settled = vec![false; n];
        let mut queue: BinaryHeap<Reverse<(u64, u32)>> = alts
            .iter()
            .filter(|a| a.unknown == 0 && a.cost < INFINITE)
            .map(|a| Reverse((a.cost, a.rule)))
            .collect();
        while let Some(Reverse((cost, r))) = queue.pop() {
            if std::mem::replace(&mut settled[r as usize], true) {
                continue;
            }
            rule_min[r as usize] = cost;
            for &index in &users[r as usize] {
                let alt = &mut alts[index];
                alt.cost = alt.cost.saturating_add(cost).min(INFINITE);
                alt.unknown -= 1;
                if alt.unknown == 0 && alt.cost < INFINITE && !settled[alt.rule as usize] {
                    queue.push(Reverse((alt.cost, alt.rule)));
                }
            }
        }
        let mut rest_min = vec![0; elements.len()];
        for pos in (0..elements.len()).rev() {
            rest_min[pos] = match elements[pos].kind {
                ElementKind::End | ElementKind::Alt => 0,
                _ => {
                    let after = next_element(grammar, pos as u32);
                    element_cost(&rule_min, pos as u32)
                        .saturating_add(rest_min[after as usize])
                        .min(INFINITE)
                }
            };
        }
        MinLengths { rule_min, rest_min }
    }
}

/// The position after the element at `pos` (after a whole class for class starts).
pub(crate) fn next_element(grammar: &Grammar, pos: u32) -> u32 {
    let elements = grammar.elements();
    let kind = elements[pos as usize].kind;
    if !kind.starts_char_class() {
        return pos + 1;
    }
    let mut p = pos as usize + 1;
    while matches!(
        elements[p].kind,
        ElementKind::CharAlt | ElementKind::CharRngUpper
    ) {
        p += 1;
    }
    p as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain fixpoint the settling order replaced: sweep all rules until nothing changes.
    fn rule_min_by_sweeps(grammar: &Grammar, terminal_cost: impl Fn(u32) -> u64) -> Vec<u64> {
        let mut rule_min = vec![INFINITE; grammar.rule_count()];
        let mut changed = true;
        while changed {
            changed = false;
            for r in 0..grammar.rule_count() as u32 {
                let best = grammar
                    .alternatives(r)
                    .into_iter()
                    .map(|start| {
                        let mut total: u64 = 0;
                        let mut pos = start;
                        while !grammar.is_end_of_sequence(pos) {
                            let e = grammar.element(pos);
                            let cost = match e.kind {
                                ElementKind::RuleRef => rule_min[e.value as usize],
                                _ => terminal_cost(pos),
                            };
                            total = total.saturating_add(cost).min(INFINITE);
                            pos = next_element(grammar, pos);
                        }
                        total
                    })
                    .min()
                    .unwrap_or(INFINITE);
                if best < rule_min[r as usize] {
                    rule_min[r as usize] = best;
                    changed = true;
                }
            }
        }
        rule_min
    }

    #[test]
    fn least_costs_match_the_plain_fixpoint() {
        for text in [
            "root ::= a b a\na ::= b | \"xy\" | [a-c]{2}\nb ::= \"q\" b | c\nc ::= \"\" | <[7]>",
            "root ::= x\nx ::= \"a\" x \"b\" | y y\ny ::= \"z\"* \"w\"? \"v\"",
            "root ::= e | \"abc\" e\ne ::= \"x\" e",
            "root ::= (\"é\" | [a-z]+ \"€\")* [^x] loop\nloop ::= \"a\" loop | \"b\"",
        ] {
            let grammar = Grammar::parse(text).expect("test grammar parses");
            // Uneven terminal costs, so that the cheapest way differs from the shortest.
            let cost = |pos: u32| u64::from(pos % 5) + 1;
            let lengths = MinLengths::new(&grammar, cost);
            assert_eq!(
                lengths.rule_min,
                rule_min_by_sweeps(&grammar, cost),
                "{text}"
            );
        }
    }
}
