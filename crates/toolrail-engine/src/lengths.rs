//! Shortest completions of a grammar under a per-element cost: the least total cost of any way
//! to finish each rule, and from each element position to the end of its alternative.
//!
//! The random sampler counts characters (token elements cannot be sampled as text); the
//! budget guard counts tokens (one per byte, one per token element). Both share this fixpoint.

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
        let mut rule_min = vec![INFINITE; n];
        let mut changed = true;
        while changed {
            changed = false;
            for r in 0..n as u32 {
                let best = grammar
                    .alternatives(r)
                    .into_iter()
                    .map(|start| {
                        let mut total: u64 = 0;
                        let mut pos = start;
                        while !grammar.is_end_of_sequence(pos) {
                            total = total
                                .saturating_add(element_cost(&rule_min, pos))
                                .min(INFINITE);
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
