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
            largest_repetition: 1,
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
        self.rules_deriving(|_| false)
    }

    /// The rules with an alternative whose terminals all pass `terminal_ok` (called with the
    /// position of a class start or token element) and whose referenced rules are all such
    /// rules themselves: the least fixpoint, found in one pass over the grammar and one visit
    /// per reference (each rule is settled once, then wakes the alternatives that use it).
    pub(crate) fn rules_deriving(&self, terminal_ok: impl Fn(u32) -> bool) -> Vec<bool> {
        let n = self.rule_count();
        // Per alternative: its rule and how many of its references are not yet known to derive.
        let mut alts: Vec<(u32, usize)> = Vec::new();
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut derives = vec![false; n];
        let mut settled: Vec<u32> = Vec::new();
        for r in 0..n as u32 {
            for start in self.alternatives(r) {
                let index = alts.len();
                let mut unknown = 0;
                let mut possible = true;
                let mut pos = start;
                while !self.is_end_of_sequence(pos) {
                    let e = self.element(pos);
                    match e.kind {
                        ElementKind::RuleRef => {
                            unknown += 1;
                            users[e.value as usize].push(index);
                        }
                        ElementKind::CharAlt | ElementKind::CharRngUpper => {}
                        _ => possible &= terminal_ok(pos),
                    }
                    pos += 1;
                }
                // An impossible alternative never reaches zero unknowns.
                alts.push((r, if possible { unknown } else { usize::MAX }));
                if possible && unknown == 0 && !derives[r as usize] {
                    derives[r as usize] = true;
                    settled.push(r);
                }
            }
        }
        while let Some(r) = settled.pop() {
            for &index in &users[r as usize] {
                let (rule, unknown) = &mut alts[index];
                if *unknown == usize::MAX {
                    continue;
                }
                *unknown -= 1;
                if *unknown == 0 && !derives[*rule as usize] {
                    derives[*rule as usize] = true;
                    settled.push(*rule);
                }
            }
        }
        derives
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
        // A growing edge u -> v lies on a cycle iff v reaches u, i.e. iff u and v are in the
        // same strongly connected component (found once for the whole graph, in linear time).
        let component = strong_components(&edges);
        growing
            .into_iter()
            .find(|&(from, to)| component[from] == component[to])
            .map(|(from, _)| from)
    }
}

/// The strongly connected component of every node of `edges` (Tarjan's algorithm, iterative so
/// that long rule chains cannot overflow the call stack); nodes share a number iff each
/// reaches the other.
fn strong_components(edges: &[Vec<usize>]) -> Vec<usize> {
    const NONE: usize = usize::MAX;
    let n = edges.len();
    let mut index = vec![NONE; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut component = vec![NONE; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut next_index = 0;
    let mut next_component = 0;
    // (node, next edge to look at)
    let mut calls: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        calls.push((root, 0));
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut next)) = calls.last_mut() {
            if let Some(&w) = edges[v].get(*next) {
                *next += 1;
                if index[w] == NONE {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    calls.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component[w] = next_component;
                    if w == v {
                        break;
                    }
                }
                next_component += 1;
            }
        }
    }
    component
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

    /// The plain fixpoint `rules_deriving` replaced: sweep all rules until nothing changes.
    fn nullable_by_sweeps(g: &Grammar) -> Vec<bool> {
        let mut nullable = vec![false; g.rule_count()];
        let mut changed = true;
        while changed {
            changed = false;
            for r in 0..g.rule_count() as u32 {
                let ok = !nullable[r as usize]
                    && g.alternatives(r).into_iter().any(|start| {
                        let mut pos = start;
                        while !g.is_end_of_sequence(pos) {
                            let e = g.element(pos);
                            let fine = match e.kind {
                                ElementKind::RuleRef => nullable[e.value as usize],
                                ElementKind::CharAlt | ElementKind::CharRngUpper => true,
                                _ => false,
                            };
                            if !fine {
                                return false;
                            }
                            pos += 1;
                        }
                        true
                    });
                if ok {
                    nullable[r as usize] = true;
                    changed = true;
                }
            }
        }
        nullable
    }

    #[test]
    fn nullable_rules_match_the_plain_fixpoint() {
        for text in [
            "root ::= a b\na ::= b | \"x\"\nb ::= c c\nc ::= \"\" | [a-z] c",
            "root ::= (\"a\"? [b-c]*)* d d\nd ::= e | \"\"\ne ::= \"q\" d",
            "root ::= x\nx ::= y z\ny ::= z | \"b\" x \"a\"\nz ::= [^a] | ",
            "root ::= [a]{0,3} \"b\"{2} <[5]>?",
        ] {
            let g = Grammar::parse(text).unwrap();
            assert_eq!(g.nullable_rules(), nullable_by_sweeps(&g), "{text}");
        }
    }

    #[test]
    fn left_recursion_is_found_through_long_chains() {
        // A cycle closed only at the end of a 20,000-rule chain, where every edge is a candidate
        // (a search per candidate was quadratic; the components are found once).
        let n = 20_000;
        let mut text = String::from("root ::= r0 \"x\"\n");
        for i in 0..n {
            text.push_str(&format!("r{i} ::= e r{} \"a\" | \"b\"\n", i + 1));
        }
        text.push_str("e ::= f\nf ::= \"\"\n");
        let open = format!("{text}r{n} ::= \"c\"\n");
        assert!(Grammar::parse(&open).is_ok());
        let closed = format!("{text}r{n} ::= r0 \"c\"\n");
        let e = Grammar::parse(&closed).unwrap_err();
        assert_eq!(e.code(), "GB104");
        assert!(e.to_string().contains("'r0'"), "{e}");
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
