//! Expected sets at the level a person reads: where the live stacks sit inside a rule whose
//! language is a small finite set of literals (an enum, a constant, a keyword), the literals
//! they can still complete (`"name" | "size" | "mtime"`) instead of the characters that may come
//! next (`[m-n], 's'`); characters for the other stacks.
//!
//! Built on typed data only: the compiled grammar's elements and the stacks of a state.

use std::collections::HashMap;

use super::recognizer::{Engine, Expected, State};
use toolrail_gbnf::element::ElementKind;
use toolrail_gbnf::parser::SymbolKind;

/// At most this many literals in a rule's language for it to be shown as literals.
pub const MAX_LITERALS: usize = 32;
/// At most this many bytes in one literal.
pub const MAX_LITERAL_BYTES: usize = 128;

/// The literals one rule's stacks can still complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiteralGroup {
    /// The rule (named by the grammar's author or the converter) whose language they are.
    pub rule_name: String,
    /// The literals, whole (the part already read included), in the rule's order.
    pub literals: Vec<String>,
}

/// What may come next, grouped as a person reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadableExpected {
    /// Literal alternatives, one group per rule.
    pub groups: Vec<LiteralGroup>,
    /// Characters (and tokens, end of input) the remaining stacks expect.
    pub rest: Expected,
}

impl ReadableExpected {
    /// One description per alternative: `"name" | "size" at /arguments/sortBy`, then the
    /// characters. `locate` gives the place a rule stands for (a JSON pointer), if known; a
    /// group without one names its rule.
    pub fn describe(&self, locate: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
        let mut out: Vec<String> = self
            .groups
            .iter()
            .map(|g| {
                let literals = g
                    .literals
                    .iter()
                    .map(|l| quote_literal(l))
                    .collect::<Vec<_>>()
                    .join(" | ");
                match locate(&g.rule_name) {
                    Some(place) => format!("{literals} at {place}"),
                    None => format!("{literals} (rule {})", g.rule_name),
                }
            })
            .collect();
        out.extend(self.rest.describe());
        out
    }
}

/// A literal as it is read: JSON-looking literals as they are (`"name"`, `true`), others quoted.
fn quote_literal(literal: &str) -> String {
    let json_like = literal.len() >= 2 && literal.starts_with('"') && literal.ends_with('"');
    if json_like || literal.chars().all(|c| c.is_ascii_alphanumeric()) {
        literal.to_owned()
    } else {
        format!("{literal:?}")
    }
}

/// Finite languages of rules and alternative tails, computed on demand.
struct Languages<'a> {
    engine: &'a Engine,
    rules: HashMap<u32, Option<Vec<String>>>,
    in_progress: Vec<u32>,
}

impl<'a> Languages<'a> {
    fn new(engine: &'a Engine) -> Self {
        Self {
            engine,
            rules: HashMap::new(),
            in_progress: Vec::new(),
        }
    }

    /// The language of rule `id` if it is finite and small (`None` otherwise).
    fn rule(&mut self, id: u32) -> Option<Vec<String>> {
        if let Some(known) = self.rules.get(&id) {
            return known.clone();
        }
        if self.in_progress.contains(&id) {
            return None;
        }
        self.in_progress.push(id);
        let grammar = std::sync::Arc::clone(self.engine.grammar());
        let mut language: Option<Vec<String>> = Some(Vec::new());
        for start in grammar.alternatives(id) {
            let tail = self.tail(start);
            language = match (language, tail) {
                (Some(mut all), Some(tail)) => {
                    for s in tail {
                        if !all.contains(&s) {
                            all.push(s);
                        }
                    }
                    (all.len() <= MAX_LITERALS).then_some(all)
                }
                _ => None,
            };
            if language.is_none() {
                break;
            }
        }
        self.in_progress.retain(|&r| r != id);
        self.rules.insert(id, language.clone());
        language
    }

    /// The language of the sequence from element `pos` to the end of its alternative.
    fn tail(&mut self, mut pos: u32) -> Option<Vec<String>> {
        let grammar = std::sync::Arc::clone(self.engine.grammar());
        let mut out = vec![String::new()];
        while !grammar.is_end_of_sequence(pos) {
            let element = grammar.element(pos);
            let (piece, next) = match element.kind {
                ElementKind::RuleRef => (self.rule(element.value)?, pos + 1),
                ElementKind::Char => {
                    let after = grammar.element(pos + 1).kind;
                    if matches!(after, ElementKind::CharAlt | ElementKind::CharRngUpper) {
                        return None;
                    }
                    (vec![char::from_u32(element.value)?.to_string()], pos + 1)
                }
                _ => return None,
            };
            let mut joined = Vec::with_capacity(out.len() * piece.len());
            for a in &out {
                for b in &piece {
                    if a.len() + b.len() > MAX_LITERAL_BYTES {
                        return None;
                    }
                    joined.push(format!("{a}{b}"));
                }
            }
            if joined.len() > MAX_LITERALS {
                return None;
            }
            out = joined;
            pos = next;
        }
        Some(out)
    }
}

impl Engine {
    /// What may come next in `state`, as literals where the stacks sit in a named rule with a
    /// small finite language (the outermost such rule of each stack), as characters otherwise.
    /// `consumed` is the text read before `state` (its last [`MAX_LITERAL_BYTES`] bytes are
    /// enough): it selects the literals whose start matches what was read.
    /// `located` says which rules stand for a known place (a schema location): the innermost
    /// such rule is preferred over an inner rule without one.
    pub fn readable_expected(
        &self,
        state: State,
        consumed: &[u8],
        located: &dyn Fn(&str) -> bool,
    ) -> ReadableExpected {
        let grammar = std::sync::Arc::clone(self.grammar());
        let mut languages = Languages::new(self);
        let mut groups: Vec<(u32, Vec<String>)> = Vec::new();
        let mut rest = Expected::default();
        for &stack in self.stacks(state) {
            let positions = self.stack_positions(stack);
            let Some(found) = literal_frame(&mut languages, &positions, located) else {
                let Some(&top) = positions.last() else {
                    rest.end |= state.partial.is_complete();
                    continue;
                };
                let element = grammar.element(top);
                match element.kind {
                    ElementKind::Token => rest.tokens.push((false, element.value)),
                    ElementKind::TokenNot => rest.tokens.push((true, element.value)),
                    _ => rest.chars.union_with(&self.class_chars(top)),
                }
                continue;
            };
            let (rule, suffixes) = found;
            let whole = languages.rule(rule).unwrap_or_default();
            let matching = whole.into_iter().filter(|literal| {
                suffixes.iter().any(|t| {
                    literal.ends_with(t.as_str())
                        && consumed.ends_with(&literal.as_bytes()[..literal.len() - t.len()])
                })
            });
            let group = match groups.iter_mut().position(|(r, _)| *r == rule) {
                Some(i) => &mut groups[i].1,
                None => {
                    groups.push((rule, Vec::new()));
                    let last = groups.len() - 1;
                    &mut groups[last].1
                }
            };
            for literal in matching {
                if !group.contains(&literal) {
                    group.push(literal);
                }
            }
        }
        rest.tokens.sort_unstable();
        rest.tokens.dedup();
        ReadableExpected {
            groups: groups
                .into_iter()
                .filter(|(_, literals)| !literals.is_empty())
                .map(|(rule, mut literals)| {
                    // In the rule's order (as written), not in the stacks' order.
                    let order = languages.rule(rule).unwrap_or_default();
                    literals.sort_by_key(|l| order.iter().position(|o| o == l));
                    LiteralGroup {
                        rule_name: grammar.rule_name(rule).to_owned(),
                        literals,
                    }
                })
                .collect(),
            rest,
        }
    }
}

/// The named rule with a small finite language that a stack (positions, bottom first) sits in
/// (the innermost one `located`, else the innermost one), with the texts that can still
/// complete it from this stack.
fn literal_frame(
    languages: &mut Languages<'_>,
    positions: &[u32],
    located: &dyn Fn(&str) -> bool,
) -> Option<(u32, Vec<String>)> {
    let grammar = std::sync::Arc::clone(languages.engine.grammar());
    let mut suffixes = vec![String::new()];
    let mut best = None;
    for &pos in positions.iter().rev() {
        let Some(tail) = languages.tail(pos) else {
            return best;
        };
        let mut joined = Vec::new();
        for a in &suffixes {
            for b in &tail {
                if a.len() + b.len() > MAX_LITERAL_BYTES {
                    return best;
                }
                joined.push(format!("{a}{b}"));
            }
        }
        if joined.len() > MAX_LITERALS * MAX_LITERALS {
            return best;
        }
        suffixes = joined;
        let rule = grammar.position(pos).rule;
        let Some(language) = languages.rule(rule) else {
            return best;
        };
        let named = grammar.symbol(rule).kind == SymbolKind::Named;
        if named && !language.is_empty() && !language.iter().any(String::is_empty) {
            if located(grammar.rule_name(rule)) {
                return Some((rule, suffixes));
            }
            if best.is_none() {
                best = Some((rule, suffixes.clone()));
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::Engine;
    use toolrail_gbnf::Grammar;

    fn readable(grammar: &str, text: &str) -> Vec<String> {
        let grammar = Arc::new(Grammar::parse(grammar).expect("grammar"));
        let mut engine = Engine::new(grammar);
        let verdict = crate::check_with(&mut engine, text.as_bytes());
        let consumed = &text.as_bytes()[..verdict.offset.unwrap_or(text.len())];
        engine
            .readable_expected(verdict.state, consumed, &|rule| rule == "sort")
            .describe(&|rule| (rule == "sort").then(|| "/arguments/sortBy".to_owned()))
    }

    const ENUM: &str = r#"root ::= "{\"sortBy\":" space sort "}"
sort ::= "\"name\"" | "\"size\"" | "\"mtime\""
space ::= | " "+
"#;

    #[test]
    fn an_enum_reads_as_its_literals_at_its_pointer() {
        assert_eq!(
            readable(ENUM, r#"{"sortBy": "x"#),
            vec![r#""name" | "size" | "mtime" at /arguments/sortBy"#]
        );
    }

    #[test]
    fn only_literals_still_possible_are_listed() {
        assert_eq!(
            readable(ENUM, r#"{"sortBy": "sz"#),
            vec![r#""size" at /arguments/sortBy"#]
        );
    }

    #[test]
    fn nullable_rules_before_literals_keep_their_characters() {
        assert_eq!(
            readable(ENUM, r#"{"sortBy":x"#),
            vec![
                r#""name" | "size" | "mtime" at /arguments/sortBy"#.to_owned(),
                "' '".to_owned()
            ]
        );
    }

    #[test]
    fn infinite_rules_keep_characters_and_unknown_rules_are_named() {
        let grammar = "root ::= \"a\" [0-9]+ kw\nkw ::= \"true\" | \"false\"\n";
        assert_eq!(readable(grammar, "ax"), vec!["[0-9]"]);
        assert_eq!(
            readable(grammar, "a1x"),
            vec!["true | false (rule kw)", "[0-9]"]
        );
    }
}
