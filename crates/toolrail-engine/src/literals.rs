//! Expected sets at the level a person reads: where the live stacks sit inside a rule whose
//! language is a small finite set of literals (an enum, a constant, a keyword), the literals
//! they can still complete (`"name" | "size" | "mtime"`) instead of the characters that may come
//! next (`[m-n], 's'`); characters for the other stacks.
//!
//! Built on typed data only: the compiled grammar's elements and the stacks of a state.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::recognizer::{Engine, Expected, State};
use toolrail_gbnf::Grammar;
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
///
/// A rule's language is built from the languages of the rules its alternatives reference, to
/// any depth (a chain of 100,000 rules each referencing the next): the walk keeps its own
/// stack of frames ([`Frame`]) instead of recursing, so no grammar can overflow the thread's
/// stack. It visits rules in the order a recursive walk would, with the same results.
struct Languages<'a> {
    engine: &'a Engine,
    rules: HashMap<u32, Option<Vec<String>>>,
    /// Rules whose language is being computed (a reference back to one is not finite here).
    in_progress: HashSet<u32>,
}

/// One suspended step of [`Languages`]' walk.
enum Frame {
    /// The language of rule `id`: the alternatives starting at `alternatives[next..]` are still
    /// to be read; `language` holds the literals of those before.
    Rule {
        id: u32,
        alternatives: Vec<u32>,
        next: usize,
        language: Vec<String>,
    },
    /// The language of the sequence from element `pos` to the end of its alternative; `out`
    /// holds the literals of the elements before `pos`.
    Tail { pos: u32, out: Vec<String> },
}

/// What a frame asks of the walk when it resumes.
enum Step {
    /// The language of this rule (it resumes with it).
    Rule(u32),
    /// The language of the tail starting at this element (it resumes with it).
    Tail(u32),
    /// The frame is done: its language (None: infinite, too large or not only literals).
    Done(Option<Vec<String>>),
}

/// Every string of `out` followed by every string of `piece`, or None past the limits.
fn concatenate(out: &[String], piece: &[String]) -> Option<Vec<String>> {
    let mut joined = Vec::with_capacity(out.len() * piece.len());
    for a in out {
        for b in piece {
            if a.len() + b.len() > MAX_LITERAL_BYTES {
                return None;
            }
            joined.push(format!("{a}{b}"));
        }
    }
    (joined.len() <= MAX_LITERALS).then_some(joined)
}

impl Frame {
    /// Resumes the frame with the language of the last rule or tail it asked for (`None` on
    /// its first step); says what it needs next, or its language.
    fn resume(&mut self, grammar: &Grammar, answer: Option<Option<Vec<String>>>) -> Step {
        match self {
            Frame::Rule {
                alternatives,
                next,
                language,
                ..
            } => {
                if let Some(tail) = answer {
                    let Some(tail) = tail else {
                        return Step::Done(None);
                    };
                    for s in tail {
                        if !language.contains(&s) {
                            language.push(s);
                        }
                    }
                    if language.len() > MAX_LITERALS {
                        return Step::Done(None);
                    }
                }
                match alternatives.get(*next) {
                    Some(&start) => {
                        *next += 1;
                        Step::Tail(start)
                    }
                    None => Step::Done(Some(std::mem::take(language))),
                }
            }
            Frame::Tail { pos, out } => {
                if let Some(piece) = answer {
                    // The rule referenced at `pos`.
                    let Some(joined) = piece.and_then(|piece| concatenate(out, &piece)) else {
                        return Step::Done(None);
                    };
                    *out = joined;
                    *pos += 1;
                }
                while !grammar.is_end_of_sequence(*pos) {
                    let element = grammar.element(*pos);
                    match element.kind {
                        ElementKind::RuleRef => return Step::Rule(element.value),
                        ElementKind::Char => {
                            let after = grammar.element(*pos + 1).kind;
                            if matches!(after, ElementKind::CharAlt | ElementKind::CharRngUpper) {
                                return Step::Done(None);
                            }
                            let Some(c) = char::from_u32(element.value) else {
                                return Step::Done(None);
                            };
                            let Some(joined) = concatenate(out, &[c.to_string()]) else {
                                return Step::Done(None);
                            };
                            *out = joined;
                            *pos += 1;
                        }
                        _ => return Step::Done(None),
                    }
                }
                Step::Done(Some(std::mem::take(out)))
            }
        }
    }
}

impl<'a> Languages<'a> {
    fn new(engine: &'a Engine) -> Self {
        Self {
            engine,
            rules: HashMap::new(),
            in_progress: HashSet::new(),
        }
    }

    /// The language of rule `id` if it is finite and small (`None` otherwise).
    fn rule(&mut self, id: u32) -> Option<Vec<String>> {
        match self.enter_rule(id) {
            Ok(known) => known,
            Err(frame) => self.walk(frame),
        }
    }

    /// The language of the sequence from element `pos` to the end of its alternative.
    fn tail(&mut self, pos: u32) -> Option<Vec<String>> {
        self.walk(Frame::Tail {
            pos,
            out: vec![String::new()],
        })
    }

    /// The language of rule `id` where it is known (computed, or in progress: not finite
    /// here), else the frame that computes it (the rule is then in progress).
    fn enter_rule(&mut self, id: u32) -> Result<Option<Vec<String>>, Frame> {
        if let Some(known) = self.rules.get(&id) {
            return Ok(known.clone());
        }
        if self.in_progress.contains(&id) {
            return Ok(None);
        }
        self.in_progress.insert(id);
        Err(Frame::Rule {
            id,
            alternatives: self.engine.grammar().alternatives(id),
            next: 0,
            language: Vec::new(),
        })
    }

    /// Runs `first` and every frame it needs on an explicit stack; returns its language.
    fn walk(&mut self, first: Frame) -> Option<Vec<String>> {
        let grammar = Arc::clone(self.engine.grammar());
        let mut stack = vec![first];
        let mut answer = None;
        while let Some(frame) = stack.last_mut() {
            match frame.resume(&grammar, answer.take()) {
                Step::Rule(id) => match self.enter_rule(id) {
                    Ok(known) => answer = Some(known),
                    Err(frame) => stack.push(frame),
                },
                Step::Tail(pos) => stack.push(Frame::Tail {
                    pos,
                    out: vec![String::new()],
                }),
                Step::Done(language) => {
                    if let Some(Frame::Rule { id, .. }) = stack.pop() {
                        self.in_progress.remove(&id);
                        self.rules.insert(id, language.clone());
                    }
                    if stack.is_empty() {
                        return language;
                    }
                    answer = Some(language);
                }
            }
        }
        None
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
