//! A grammar ready to run: llama.cpp's rules flattened into one element array, checked the way
//! `llama_grammar_init_impl` checks them (root present, no left recursion), plus one check
//! llama.cpp lacks: left recursion hidden behind rules that only *derive* the empty string, on
//! which llama.cpp's stack expansion never terminates.

use super::diagnostic::{Code, Diagnostic, GrammarError};
use super::element::{Element, ElementKind};
use super::parser::{self, ParsedGrammar, Symbol, SymbolKind, TokenVocabulary};
use super::source::Span;

/// Where an element sits: rule, alternative and index within the alternative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Position {
    /// Rule id.
    pub rule: u32,
    /// 0-based alternative of the rule.
    pub alternative: u32,
    /// 0-based index of the element within its alternative.
    pub index: u32,
}

/// A compiled grammar: immutable, cheap to share (`Arc<Grammar>`) between threads.
#[derive(Clone, Debug)]
pub struct Grammar {
    parsed: ParsedGrammar,
    elements: Vec<Element>,
    element_spans: Vec<Span>,
    positions: Vec<Position>,
    rule_starts: Vec<u32>,
    root: u32,
}

/// The start rule llama.cpp uses unless told otherwise.
pub const DEFAULT_ROOT: &str = "root";

impl Grammar {
    /// Parses and builds `source` with start rule `root` and no vocabulary.
    pub fn parse(source: &str) -> Result<Grammar, GrammarError> {
        Self::build(parser::parse(source)?, DEFAULT_ROOT)
    }

    /// Parses and builds `source` with start rule `root`, resolving `<text>` tokens with `vocab`.
    pub fn parse_with(
        source: &str,
        root: &str,
        vocab: Option<&dyn TokenVocabulary>,
    ) -> Result<Grammar, GrammarError> {
        Self::build(parser::parse_with_vocab(source, vocab)?, root)
    }

    /// Builds a parsed grammar with start rule `root`: llama.cpp's init checks.
    pub fn build(parsed: ParsedGrammar, root: &str) -> Result<Grammar, GrammarError> {
        let src = parsed.source.as_bytes();
        let Some(root_id) = parsed.symbol_id(root) else {
            let span = Span::new(0, src.iter().position(|b| *b == b'\n').unwrap_or(src.len()));
            return Err(GrammarError::single(
                Diagnostic::new(
                    Code::MissingRoot,
                    src,
                    span,
                    format!("the grammar has no '{root}' rule, where llama.cpp starts"),
                )
                .with_hint(format!("add: {root} ::= ...")),
            ));
        };
        let grammar = Self::assemble(parsed, root_id);
        grammar.check_left_recursion()?;
        Ok(grammar)
    }

    /// Builds a grammar from rules written directly in llama.cpp's encoding (as llama.cpp's own
    /// tests do), with a name per rule. No source text: spans are empty.
    pub fn from_rules(
        rules: Vec<Vec<Element>>,
        names: Vec<String>,
        root: u32,
    ) -> Result<Grammar, GrammarError> {
        let symbols = names
            .into_iter()
            .map(|name| Symbol {
                name,
                kind: SymbolKind::Named,
                span: Span::default(),
                parent: None,
            })
            .collect::<Vec<_>>();
        let bad = |message: String| {
            GrammarError::single(Diagnostic::new(
                Code::NoRules,
                b"",
                Span::default(),
                message,
            ))
        };
        if symbols.len() != rules.len() || root as usize >= rules.len() {
            return Err(bad(
                "rules and names disagree, or the root is out of range".into()
            ));
        }
        for (i, rule) in rules.iter().enumerate() {
            if rule.last().map(|e| e.kind) != Some(ElementKind::End) {
                return Err(bad(format!("rule {i} does not end with END")));
            }
            if let Some(e) = rule
                .iter()
                .find(|e| e.kind == ElementKind::RuleRef && e.value as usize >= rules.len())
            {
                return Err(bad(format!(
                    "rule {i} references undefined rule {}",
                    e.value
                )));
            }
        }
        let spans = rules
            .iter()
            .map(|r| vec![Span::default(); r.len()])
            .collect();
        let parsed = ParsedGrammar {
            source: String::new(),
            symbols,
            rules,
            spans,
            definitions: Vec::new(),
            references: Vec::new(),
            sequences: Vec::new(),
            notes: Vec::new(),
        };
        let grammar = Self::assemble(parsed, root);
        grammar.check_left_recursion()?;
        Ok(grammar)
    }

    fn assemble(parsed: ParsedGrammar, root: u32) -> Grammar {
        let mut elements = Vec::new();
        let mut element_spans = Vec::new();
        let mut positions = Vec::new();
        let mut rule_starts = Vec::with_capacity(parsed.rules.len());
        for (rule_id, (rule, spans)) in parsed.rules.iter().zip(&parsed.spans).enumerate() {
            rule_starts.push(elements.len() as u32);
            let (mut alternative, mut index) = (0, 0);
            for (element, span) in rule.iter().zip(spans) {
                elements.push(*element);
                element_spans.push(*span);
                positions.push(Position {
                    rule: rule_id as u32,
                    alternative,
                    index,
                });
                if element.kind == ElementKind::Alt {
                    alternative += 1;
                    index = 0;
                } else {
                    index += 1;
                }
            }
        }
        Grammar {
            parsed,
            elements,
            element_spans,
            positions,
            rule_starts,
            root,
        }
    }

    /// The parse result: source, symbols, definitions, references.
    pub fn parsed(&self) -> &ParsedGrammar {
        &self.parsed
    }

    /// The grammar text.
    pub fn source(&self) -> &str {
        &self.parsed.source
    }

    /// The start rule's id.
    pub fn root(&self) -> u32 {
        self.root
    }

    /// Number of rules (named and synthesised).
    pub fn rule_count(&self) -> usize {
        self.rule_starts.len()
    }

    /// The elements of rule `id` in llama.cpp's encoding, ending with `End`.
    pub fn rule(&self, id: u32) -> &[Element] {
        &self.parsed.rules[id as usize]
    }

    /// The name llama.cpp gives rule `id`.
    pub fn rule_name(&self, id: u32) -> &str {
        &self.parsed.symbols[id as usize].name
    }

    /// The symbol behind rule `id`.
    pub fn symbol(&self, id: u32) -> &Symbol {
        &self.parsed.symbols[id as usize]
    }

    /// All elements of all rules, flattened; an element position indexes this array.
    pub fn elements(&self) -> &[Element] {
        &self.elements
    }

    /// The element at flattened position `pos`.
    #[inline]
    pub fn element(&self, pos: u32) -> Element {
        self.elements[pos as usize]
    }

    /// The source span of the element at `pos`.
    pub fn span(&self, pos: u32) -> Span {
        self.element_spans[pos as usize]
    }

    /// Rule, alternative and index of the element at `pos`.
    pub fn position(&self, pos: u32) -> Position {
        self.positions[pos as usize]
    }

    /// The flattened position of the first element of rule `id`.
    #[inline]
    pub fn rule_start(&self, id: u32) -> u32 {
        self.rule_starts[id as usize]
    }

    /// True if `pos` ends an alternative (`End` or `Alt`).
    #[inline]
    pub fn is_end_of_sequence(&self, pos: u32) -> bool {
        self.elements[pos as usize].kind.is_end_of_sequence()
    }

    /// Starts of each alternative of rule `id` (flattened positions).
    pub fn alternatives(&self, id: u32) -> Vec<u32> {
        let mut pos = self.rule_start(id);
        let mut starts = vec![pos];
        loop {
            let kind = self.elements[pos as usize].kind;
            if kind == ElementKind::End {
                return starts;
            }
            pos += 1;
            if kind == ElementKind::Alt {
                starts.push(pos);
            }
        }
    }

    /// llama.cpp's left-recursion check, then the stricter one through derived-empty rules.
    fn check_left_recursion(&self) -> Result<(), GrammarError> {
        let n = self.rule_count();
        let mut visited = vec![false; n];
        let mut in_progress = vec![false; n];
        let mut may_be_empty = vec![false; n];
        for i in 0..n {
            if visited[i] {
                continue;
            }
            if let Some(culprit) = self.llama_detect_left_recursion(
                i,
                &mut visited,
                &mut in_progress,
                &mut may_be_empty,
            ) {
                return Err(self.left_recursion_error(culprit, false));
            }
        }
        let nullable = self.nullable_rules();
        if let Some(culprit) = self.find_left_cycle(&nullable) {
            return Err(self.left_recursion_error(culprit, true));
        }
        Ok(())
    }

    fn left_recursion_error(&self, rule: usize, hidden: bool) -> GrammarError {
        let symbol = &self.parsed.symbols[rule];
        let named = symbol.parent.unwrap_or(rule as u32);
        let name = &self.parsed.symbols[named as usize].name;
        let span = self
            .parsed
            .definitions
            .iter()
            .rev()
            .find(|d| d.symbol == named)
            .map_or(symbol.span, |d| d.name_span);
        let (code, message, hint) = if hidden {
            (
                Code::HiddenLeftRecursion,
                format!(
                    "rule '{name}' is left-recursive through rules that can match the empty string; llama.cpp does not detect this and loops for ever expanding it"
                ),
                "make the recursive reference follow something that always consumes text",
            )
        } else {
            (
                Code::LeftRecursion,
                format!("rule '{name}' is left-recursive, which llama.cpp refuses"),
                "rewrite `x ::= x a | b` as `x ::= b a*`",
            )
        };
        GrammarError::single(
            Diagnostic::new(code, self.parsed.source.as_bytes(), span, message).with_hint(hint),
        )
    }

    /// `llama_grammar_detect_left_recursion`, returning the rule found in progress again.
    /// Iterative (deep rule chains cannot overflow the call stack) and skipping rules already
    /// visited, which gives llama.cpp's answer: a visited rule's leftmost descendants were all
    /// explored from it, so a cycle through it would already have been found.
    fn llama_detect_left_recursion(
        &self,
        start: usize,
        visited: &mut [bool],
        in_progress: &mut [bool],
        may_be_empty: &mut [bool],
    ) -> Option<usize> {
        struct Frame {
            rule: usize,
            next: usize,
            recurse: bool,
        }
        let enter = |rule: usize, in_progress: &mut [bool], may_be_empty: &mut [bool]| {
            in_progress[rule] = true;
            let mut at_rule_start = true;
            for e in &self.parsed.rules[rule] {
                if e.kind.is_end_of_sequence() {
                    if at_rule_start {
                        may_be_empty[rule] = true;
                        break;
                    }
                    at_rule_start = true;
                } else {
                    at_rule_start = false;
                }
            }
            Frame {
                rule,
                next: 0,
                recurse: true,
            }
        };
        let mut stack = vec![enter(start, in_progress, may_be_empty)];
        while let Some(frame) = stack.last_mut() {
            let rule = &self.parsed.rules[frame.rule];
            let Some(e) = rule.get(frame.next) else {
                in_progress[frame.rule] = false;
                visited[frame.rule] = true;
                stack.pop();
                if let Some(parent) = stack.last_mut() {
                    let target = self.parsed.rules[parent.rule][parent.next].value as usize;
                    if !may_be_empty[target] {
                        parent.recurse = false;
                    }
                    parent.next += 1;
                }
                continue;
            };
            if e.kind == ElementKind::RuleRef && frame.recurse {
                let target = e.value as usize;
                if in_progress[target] {
                    return Some(target);
                }
                if visited[target] {
                    if !may_be_empty[target] {
                        frame.recurse = false;
                    }
                    frame.next += 1;
                } else {
                    let child = enter(target, in_progress, may_be_empty);
                    stack.push(child);
                }
            } else {
                frame.recurse = e.kind.is_end_of_sequence();
                frame.next += 1;
            }
        }
        None
    }

    /// Rules that derive the empty string (fixpoint; tokens and classes consume).
    pub fn nullable_rules(&self) -> Vec<bool> {
        let n = self.rule_count();
        let mut nullable = vec![false; n];
        let mut changed = true;
        while changed {
            changed = false;
            for (r, rule) in self.parsed.rules.iter().enumerate() {
                if nullable[r] {
                    continue;
                }
                let mut alt_ok = true;
                for e in rule {
                    match e.kind {
                        ElementKind::End | ElementKind::Alt => {
                            if alt_ok {
                                nullable[r] = true;
                                changed = true;
                                break;
                            }
                            alt_ok = true;
                        }
                        ElementKind::RuleRef => alt_ok &= nullable[e.value as usize],
                        ElementKind::CharRngUpper | ElementKind::CharAlt => {}
                        _ => alt_ok = false,
                    }
                }
            }
        }
        nullable
    }

    /// A rule on which llama.cpp's stack expansion never terminates: a cycle of references
    /// made leftmost by nullable prefixes, where at least one reference has elements after it
    /// (so every turn of the cycle pushes a frame; tail-only cycles end in llama.cpp's `seen` set).
    fn find_left_cycle(&self, nullable: &[bool]) -> Option<usize> {
        let n = self.rule_count();
        let mut edges: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut growing: Vec<(usize, usize)> = Vec::new();
        for (r, rule) in self.parsed.rules.iter().enumerate() {
            let mut leftmost = true;
            for (i, e) in rule.iter().enumerate() {
                match e.kind {
                    ElementKind::End | ElementKind::Alt => leftmost = true,
                    ElementKind::RuleRef => {
                        let target = e.value as usize;
                        if leftmost {
                            edges[r].push(target);
                            if !rule[i + 1].kind.is_end_of_sequence() {
                                growing.push((r, target));
                            }
                        }
                        leftmost &= nullable[target];
                    }
                    ElementKind::CharRngUpper | ElementKind::CharAlt => {}
                    _ => leftmost = false,
                }
            }
        }
        // A growing edge u -> v lies on a cycle iff v reaches u.
        for (from, to) in growing {
            let mut seen = vec![false; n];
            let mut todo = vec![to];
            while let Some(r) = todo.pop() {
                if r == from {
                    return Some(from);
                }
                if !std::mem::replace(&mut seen[r], true) {
                    todo.extend(edges[r].iter().copied());
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growing_left_recursion_behind_nullable_rules_is_refused() {
        // llama.cpp's check misses this (e is not *syntactically* empty) and then expands for ever.
        let e = Grammar::parse("root ::= a \"x\"\na ::= e a \"y\" | \"z\"\ne ::= f\nf ::= ")
            .unwrap_err();
        assert_eq!(e.code(), "GB104");
    }

    #[test]
    fn tail_cycles_through_nullable_rules_are_fine() {
        // llama.cpp terminates on these: the cycle pushes nothing.
        assert!(Grammar::parse("root ::= ( [x]* )*").is_ok());
    }

    #[test]
    fn llama_left_recursion_is_refused() {
        assert_eq!(
            Grammar::parse("root ::= \"a\" | root \"a\"")
                .unwrap_err()
                .code(),
            "GB103"
        );
    }

    #[test]
    fn missing_root_is_named() {
        let e = Grammar::parse("rot ::= \"a\"").unwrap_err();
        assert_eq!(e.code(), "GB102");
        assert!(e.to_string().contains("'root'"));
    }
}
