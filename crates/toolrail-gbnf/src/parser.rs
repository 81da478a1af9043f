//! GBNF text -> llama.cpp rules, in one pass that mirrors `llama_grammar_parser` exactly:
//! the same symbol ids in the same order, the same repetition rewrite and limits, the same
//! successes and failures. Unlike llama.cpp it keeps the source span of every element and
//! says what is wrong in a sentence, at line:column, with a fix where one exists.

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::diagnostic::{Code, Diagnostic, GrammarError};
use super::element::{Element, ElementKind};
use super::source::{LineIndex, Span, line_col};

/// The most elements repetitions may copy in one grammar. llama.cpp copies the repeated item
/// once per required copy and once per optional rule, and a stacked `+` repeats everything the
/// previous one built (`x+++…`: quadratic); past this toolrail refuses the grammar instead of
/// building gigabytes, where llama.cpp would run out of memory.
pub const MAX_COPIED_ELEMENTS: u64 = 4_000_000;

/// llama.cpp's `MAX_REPETITION_THRESHOLD`.
pub const MAX_REPETITION: u64 = 2000;

/// The deepest nesting of groups toolrail parses. llama.cpp has no limit and recurses once per
/// level, so far deeper grammars would overflow its stack; this keeps toolrail from doing so.
pub const MAX_NESTING: usize = 128;

/// Resolves `<text>` token references: llama.cpp tokenizes the text *with* its angle brackets,
/// special tokens allowed, and requires exactly one token.
pub trait TokenVocabulary {
    /// The token ids of `text` (e.g. `<start_of_turn>`), tokenized with special tokens parsed.
    fn tokenize_special(&self, text: &[u8]) -> Vec<u32>;
}

/// Where a symbol came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SymbolKind {
    /// A rule the user named.
    Named,
    /// A parenthesised group, synthesised as `<rule>_<n>`.
    Group,
    /// A repetition (`* + ? {m,n}`), synthesised as `<rule>_<n>`.
    Repetition,
}

/// A rule name and what it stands for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Symbol {
    /// The name llama.cpp gives it (`value`, `root_3`).
    pub name: String,
    /// Named by the user, or synthesised.
    pub kind: SymbolKind,
    /// For named rules the name where first seen; for synthesised ones the group or repetition.
    pub span: Span,
    /// For synthesised rules, the named rule they belong to.
    pub parent: Option<u32>,
}

/// A place where a rule is defined (`name ::= ...` up to the end of the rule).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Definition {
    /// The rule defined.
    pub symbol: u32,
    /// The name before `::=`.
    pub name_span: Span,
    /// The whole definition.
    pub span: Span,
}

/// A place where a rule name is used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reference {
    /// The rule referred to.
    pub symbol: u32,
    /// The referring rule (named or synthesised) whose body holds the reference.
    pub from: u32,
    /// The name as written.
    pub span: Span,
}

/// One item of a sequence as written (for lint: `x? x? x?` chains and the like).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SequenceItem {
    /// The operand as written, e.g. `"a"`, `[0-9]`, `(x | y)`, `name`.
    pub operand: Span,
    /// The repetition operators applied, e.g. `?` or `{0,3}`, as `(min, max)` (max None = unbounded).
    pub repeats: Vec<(u64, Option<u64>)>,
    /// Operand plus operators.
    pub span: Span,
}

/// The result of parsing: llama.cpp's rules plus everything needed to point back into the text.
#[derive(Clone, Debug)]
pub struct ParsedGrammar {
    /// The grammar text (as llama.cpp sees it: up to a NUL byte, if any).
    pub source: String,
    /// Symbols by id.
    pub symbols: Vec<Symbol>,
    /// Rules by id, in llama.cpp's element encoding (each ends with `End`).
    pub rules: Vec<Vec<Element>>,
    /// The source span of every element of every rule.
    pub spans: Vec<Vec<Span>>,
    /// Every definition, in order (a rule defined twice appears twice; llama.cpp keeps the last).
    pub definitions: Vec<Definition>,
    /// Every reference to a named rule, in order.
    pub references: Vec<Reference>,
    /// Every sequence, as items, for lint.
    pub sequences: Vec<Vec<SequenceItem>>,
    /// Non-fatal findings made while parsing (e.g. `{0,5000}` silently unbounded).
    pub notes: Vec<Diagnostic>,
    /// The largest count llama.cpp's repetition check computed (the rules a repetition's item
    /// holds times its count, nested repetitions multiplied), against its limit of
    /// [`MAX_REPETITION`]: how close the grammar is to "exceeds sane defaults". 1 without
    /// repetitions.
    pub largest_repetition: u64,
}

impl ParsedGrammar {
    /// The id of the rule called `name`.
    pub fn symbol_id(&self, name: &str) -> Option<u32> {
        self.symbols
            .iter()
            .position(|s| s.name == name)
            .map(|i| i as u32)
    }
}

/// Parses `source` as llama.cpp does, without a vocabulary (`<text>` tokens are an error).
pub fn parse(source: &str) -> Result<ParsedGrammar, GrammarError> {
    parse_with_vocab(source, None)
}

/// Parses `source` as llama.cpp does; `<text>` tokens are resolved with `vocab` when given.
pub fn parse_with_vocab(
    source: &str,
    vocab: Option<&dyn TokenVocabulary>,
) -> Result<ParsedGrammar, GrammarError> {
    // llama.cpp reads a C string: it ends at the first NUL byte.
    let visible = match source.find('\0') {
        Some(nul) => &source[..nul],
        None => source,
    };
    let mut parser = Parser {
        src: visible.as_bytes(),
        vocab,
        ids: FxHashMap::default(),
        symbols: Vec::new(),
        rules: Vec::new(),
        definitions: Vec::new(),
        references: Vec::new(),
        sequences: Vec::new(),
        notes: Vec::new(),
        depth: 0,
        copied: 0,
        largest_repetition: 1,
        line_index: std::cell::OnceCell::new(),
    };
    if visible.len() < source.len() {
        let at = Span::new(visible.len(), visible.len() + 1);
        parser.notes.push(
            Diagnostic::new(
                Code::NulByte,
                source.as_bytes(),
                at,
                "llama.cpp stops reading the grammar at this NUL byte; the rest is ignored",
            )
            .with_hint("remove the NUL byte"),
        );
    }
    if let Err(mut e) = parser.parse_all().and_then(|()| parser.validate()) {
        if visible.len() < source.len() {
            // The error is about the text llama.cpp saw, which a NUL byte cut short: say so.
            let nul = line_col(source.as_bytes(), visible.len());
            if let Some(first) = e.diagnostics.first_mut() {
                first.message.push_str(&format!(
                    " (the grammar was cut at a NUL byte at {nul}: llama.cpp reads no further)"
                ));
            }
        }
        return Err(e);
    }
    let Parser {
        symbols,
        rules,
        definitions,
        references,
        sequences,
        notes,
        largest_repetition,
        ..
    } = parser;
    let (rules, spans) = rules
        .into_iter()
        .map(|r| r.unwrap_or_default())
        .map(|r| (r.elements, r.spans))
        .unzip();
    Ok(ParsedGrammar {
        source: visible.to_string(),
        symbols,
        rules,
        spans,
        definitions,
        references,
        sequences,
        notes,
        largest_repetition,
    })
}

#[derive(Clone, Debug, Default)]
struct RuleBuf {
    elements: Vec<Element>,
    spans: Vec<Span>,
}

impl RuleBuf {
    fn push(&mut self, kind: ElementKind, value: u32, span: Span) {
        self.elements.push(Element::new(kind, value));
        self.spans.push(span);
    }
    fn len(&self) -> usize {
        self.elements.len()
    }
    fn truncate(&mut self, len: usize) {
        self.elements.truncate(len);
        self.spans.truncate(len);
    }
}

struct Parser<'s> {
    src: &'s [u8],
    vocab: Option<&'s dyn TokenVocabulary>,
    ids: FxHashMap<String, u32>,
    symbols: Vec<Symbol>,
    rules: Vec<Option<RuleBuf>>,
    definitions: Vec<Definition>,
    references: Vec<Reference>,
    sequences: Vec<Vec<SequenceItem>>,
    notes: Vec<Diagnostic>,
    depth: usize,
    /// Elements copied so far by repetitions (see [`MAX_COPIED_ELEMENTS`]).
    copied: u64,
    /// See [`ParsedGrammar::largest_repetition`].
    largest_repetition: u64,
    /// Line starts of `src`, built on the first finding (notes can be many).
    line_index: std::cell::OnceCell<LineIndex>,
}

const UNDERSCORE_HINT: &str = "llama.cpp rejects '_' in rule names; use '-'";

fn is_word_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

type PResult<T> = Result<T, GrammarError>;

impl<'s> Parser<'s> {
    /// The byte at `i`, or 0 past the end (llama.cpp's C-string view).
    fn at(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    fn error(&self, code: Code, at: usize, len: usize, message: impl Into<String>) -> Diagnostic {
        let end = (at + len.max(1)).min(self.src.len().max(at));
        let index = self.line_index.get_or_init(|| LineIndex::new(self.src));
        Diagnostic::new_indexed(code, self.src, index, Span::new(at, end), message)
    }

    fn fail<T>(&self, diagnostic: Diagnostic) -> PResult<T> {
        Err(GrammarError::single(diagnostic))
    }

    /// Describes the text at `pos` for messages: `'x'` or "the end of the grammar".
    fn found(&self, pos: usize) -> String {
        match std::str::from_utf8(&self.src[pos.min(self.src.len())..])
            .ok()
            .and_then(|s| s.chars().next())
        {
            None if pos >= self.src.len() => "the end of the grammar".to_string(),
            None => format!("byte 0x{:02X}", self.at(pos)),
            Some('\n') | Some('\r') => "the end of the line".to_string(),
            Some(c) => format!("'{}'", c.escape_debug()),
        }
    }

    fn symbol_id(&mut self, name: &str, span: Span) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.symbols.len() as u32;
        self.ids.insert(name.to_string(), id);
        self.symbols.push(Symbol {
            name: name.to_string(),
            kind: SymbolKind::Named,
            span,
            parent: None,
        });
        id
    }

    fn generate_symbol_id(&mut self, base: &str, kind: SymbolKind, parent: u32, span: Span) -> u32 {
        let id = self.symbols.len() as u32;
        let name = format!("{base}_{id}");
        self.ids.insert(name.clone(), id);
        self.symbols.push(Symbol {
            name,
            kind,
            span,
            parent: Some(parent),
        });
        id
    }

    fn add_rule(&mut self, id: u32, rule: RuleBuf) {
        let id = id as usize;
        if self.rules.len() <= id {
            self.rules.resize(id + 1, None);
        }
        self.rules[id] = Some(rule);
    }

    fn parse_space(&self, mut pos: usize, newline_ok: bool) -> usize {
        loop {
            match self.at(pos) {
                b' ' | b'\t' => pos += 1,
                b'\r' | b'\n' if newline_ok => pos += 1,
                b'#' => {
                    while !matches!(self.at(pos), 0 | b'\r' | b'\n') {
                        pos += 1;
                    }
                }
                _ => return pos,
            }
        }
    }

    fn parse_name_end(&self, pos: usize) -> usize {
        let mut end = pos;
        while is_word_char(self.at(end)) {
            end += 1;
        }
        end
    }

    fn parse_int_end(&self, pos: usize) -> usize {
        let mut end = pos;
        while self.at(end).is_ascii_digit() {
            end += 1;
        }
        end
    }

    fn parse_hex(&self, escape_at: usize, start: usize, size: usize) -> PResult<(u32, usize)> {
        let mut value: u32 = 0;
        let mut pos = start;
        while pos < start + size {
            let digit = match self.at(pos) {
                c @ b'0'..=b'9' => c - b'0',
                c @ b'a'..=b'f' => c - b'a' + 10,
                c @ b'A'..=b'F' => c - b'A' + 10,
                _ => break,
            };
            value = (value << 4) + u32::from(digit);
            pos += 1;
        }
        if pos != start + size {
            let escape = self.at(escape_at + 1) as char;
            return self.fail(self.error(
                Code::BadEscape,
                escape_at,
                pos - escape_at,
                format!("the escape '\\{escape}' needs exactly {size} hex digits"),
            ));
        }
        Ok((value, pos))
    }

    /// One character of a literal or class: an escape or a UTF-8 sequence.
    fn parse_char(&self, pos: usize) -> PResult<(u32, usize)> {
        match self.at(pos) {
            b'\\' => match self.at(pos + 1) {
                b'x' => self.parse_hex(pos, pos + 2, 2),
                b'u' => self.parse_hex(pos, pos + 2, 4),
                b'U' => self.parse_hex(pos, pos + 2, 8),
                b't' => Ok((u32::from(b'\t'), pos + 2)),
                b'r' => Ok((u32::from(b'\r'), pos + 2)),
                b'n' => Ok((u32::from(b'\n'), pos + 2)),
                c @ (b'\\' | b'"' | b'[' | b']' | b'-') => Ok((u32::from(c), pos + 2)),
                0 => self.fail(self.error(Code::Unterminated, pos, 1, "the grammar ends in the middle of an escape")),
                _ => self.fail(
                    self.error(Code::BadEscape, pos, 2, format!("unknown escape '\\{}'", self.found(pos + 1).trim_matches('\'')))
                        .with_hint("llama.cpp knows \\x.. \\u.... \\U........ \\t \\r \\n \\\\ \\\" \\[ \\] \\-"),
                ),
            },
            0 => self.fail(self.error(Code::Unterminated, pos, 1, "unexpected end of the grammar")),
            _ => Ok(decode_utf8_char(self.src, pos)),
        }
    }

    fn parse_all(&mut self) -> PResult<()> {
        let mut pos = self.parse_space(0, true);
        while self.at(pos) != 0 {
            pos = self.parse_rule(pos)?;
        }
        Ok(())
    }

    fn parse_rule(&mut self, start: usize) -> PResult<usize> {
        let name_end = self.parse_name_end(start);
        if name_end == start {
            let mut d = self.error(
                Code::Syntax,
                start,
                1,
                format!("expected a rule name, found {}", self.found(start)),
            );
            if self.src[start.min(self.src.len())..].starts_with("\u{feff}".as_bytes()) {
                d = d.with_hint(
                    "that is a UTF-8 byte order mark (BOM), which some editors write at the start \
                     of a file; llama.cpp's grammar parser refuses it too: save the file without it",
                );
            } else if self.at(start) == b'_' {
                d = d.with_hint(UNDERSCORE_HINT);
            } else if matches!(self.at(start), b'"' | b'[' | b'(' | b'|') {
                d = d.with_hint("a rule body continues on a new line only inside ( ) or after '|'");
            }
            return self.fail(d);
        }
        let name = String::from_utf8_lossy(&self.src[start..name_end]).into_owned();
        let name_span = Span::new(start, name_end);
        let pos = self.parse_space(name_end, false);
        let rule_id = self.symbol_id(&name, name_span);
        if !(self.at(pos) == b':' && self.at(pos + 1) == b':' && self.at(pos + 2) == b'=') {
            let mut d = self.error(
                Code::Syntax,
                pos,
                1,
                format!(
                    "expected '::=' after the rule name '{name}', found {}",
                    self.found(pos)
                ),
            );
            if self.at(pos) == b'_' {
                d = d.with_hint(UNDERSCORE_HINT);
            }
            return self.fail(d);
        }
        let pos = self.parse_space(pos + 3, true);
        let mut pos = self.parse_alternates(pos, &name, rule_id, rule_id, false)?;
        self.definitions.push(Definition {
            symbol: rule_id,
            name_span,
            span: Span::new(start, pos),
        });
        match self.at(pos) {
            b'\r' => pos += if self.at(pos + 1) == b'\n' { 2 } else { 1 },
            b'\n' => pos += 1,
            0 => {}
            c => {
                let mut d = self.error(
                    Code::Syntax,
                    pos,
                    1,
                    format!(
                        "expected the end of the line after rule '{name}', found {}",
                        self.found(pos)
                    ),
                );
                d = match c {
                    b'_' => d.with_hint(UNDERSCORE_HINT),
                    b')' => d.with_hint("this ')' has no matching '('"),
                    b'}' => d.with_hint("this '}' has no matching '{'"),
                    _ => d,
                };
                return self.fail(d);
            }
        }
        Ok(self.parse_space(pos, true))
    }

    fn parse_alternates(
        &mut self,
        pos: usize,
        rule_name: &str,
        parent: u32,
        rule_id: u32,
        nested: bool,
    ) -> PResult<usize> {
        let mut rule = RuleBuf::default();
        let mut pos = self.parse_sequence(pos, rule_name, parent, rule_id, &mut rule, nested)?;
        while self.at(pos) == b'|' {
            rule.push(ElementKind::Alt, 0, Span::new(pos, pos + 1));
            pos = self.parse_space(pos + 1, true);
            pos = self.parse_sequence(pos, rule_name, parent, rule_id, &mut rule, nested)?;
        }
        rule.push(ElementKind::End, 0, Span::new(pos, pos));
        self.add_rule(rule_id, rule);
        Ok(pos)
    }

    #[allow(clippy::too_many_arguments)]
    fn handle_repetitions(
        &mut self,
        rule_name: &str,
        parent: u32,
        rule: &mut RuleBuf,
        last_sym_start: usize,
        item_start: usize,
        op: Span,
        min: u64,
        max: Option<u64>,
        n_prev_rules: &mut u64,
    ) -> PResult<()> {
        if last_sym_start == rule.len() {
            let text = String::from_utf8_lossy(&self.src[op.range()])
                .trim()
                .to_string();
            return self.fail(
                self.error(
                    Code::NothingToRepeat,
                    op.start as usize,
                    op.range().len(),
                    format!("'{text}' has nothing to repeat"),
                )
                .with_hint("put the repetition after a literal, a class, a rule name or a group"),
            );
        }
        let item_span = Span::new(item_start, op.end as usize);
        if let Some(max) = max
            && max < min
        {
            return self.fail(self.error(
                Code::RepetitionLimit,
                op.start as usize,
                op.range().len(),
                format!("repetition {{{min},{max}}} has a maximum below its minimum; llama.cpp would loop for ever building it"),
            ));
        }
        let prev = RuleBuf {
            elements: rule.elements[last_sym_start..].to_vec(),
            spans: rule.spans[last_sym_start..].to_vec(),
        };
        let total_rules = match max {
            Some(m) if m > 0 => m,
            _ if min > 0 => min,
            _ => 1,
        };
        self.largest_repetition = self
            .largest_repetition
            .max(n_prev_rules.saturating_mul(total_rules));
        if n_prev_rules.saturating_mul(total_rules) > MAX_REPETITION {
            return self.fail(
                self.error(
                    Code::RepetitionLimit,
                    item_start,
                    op.end as usize - item_start,
                    format!(
                        "this repetition would make llama.cpp create {} rules (nested repetitions multiply); its limit is {MAX_REPETITION}",
                        n_prev_rules.saturating_mul(total_rules)
                    ),
                )
                .with_hint("reduce the repetition counts or flatten the nesting"),
            );
        }
        let n_opt = match max {
            None => 1,
            Some(max) => max - min,
        };
        let copies = min.saturating_sub(1).saturating_add(n_opt);
        self.copied = self
            .copied
            .saturating_add((prev.elements.len() as u64).saturating_mul(copies));
        if self.copied > MAX_COPIED_ELEMENTS {
            return self.fail(
                self.error(
                    Code::RepetitionLimit,
                    item_start,
                    op.end as usize - item_start,
                    format!(
                        "this repetition copies an item of {} elements, and the grammar's \
                         repetitions now copy more than {MAX_COPIED_ELEMENTS} elements: \
                         llama.cpp would build them all (each stacked '+' repeats everything \
                         the one before built)",
                        prev.elements.len()
                    ),
                )
                .with_hint("write one repetition (x+ already means one or more), or put the item in a rule of its own"),
            );
        }
        if min == 0 {
            rule.truncate(last_sym_start);
        } else {
            for _ in 1..min {
                rule.elements.extend_from_slice(&prev.elements);
                rule.spans.extend_from_slice(&prev.spans);
            }
        }
        let mut last_rec_rule_id = 0;
        for i in 0..n_opt {
            let rec_id =
                self.generate_symbol_id(rule_name, SymbolKind::Repetition, parent, item_span);
            let mut rec = prev.clone();
            if i > 0 || max.is_none() {
                let target = if max.is_none() {
                    rec_id
                } else {
                    last_rec_rule_id
                };
                rec.push(ElementKind::RuleRef, target, item_span);
            }
            rec.push(ElementKind::Alt, 0, item_span);
            rec.push(ElementKind::End, 0, item_span);
            self.add_rule(rec_id, rec);
            last_rec_rule_id = rec_id;
        }
        if n_opt > 0 {
            rule.push(ElementKind::RuleRef, last_rec_rule_id, item_span);
        }
        *n_prev_rules *= total_rules;
        Ok(())
    }

    fn parse_sequence(
        &mut self,
        mut pos: usize,
        rule_name: &str,
        parent: u32,
        rule_id: u32,
        rule: &mut RuleBuf,
        nested: bool,
    ) -> PResult<usize> {
        let mut last_sym_start = rule.len();
        let mut item_start = pos;
        let mut n_prev_rules: u64 = 1;
        let mut items: Vec<SequenceItem> = Vec::new();
        let begin_item = |items: &mut Vec<SequenceItem>, start: usize, end: usize| {
            let span = Span::new(start, end);
            items.push(SequenceItem {
                operand: span,
                repeats: Vec::new(),
                span,
            });
        };
        loop {
            let c = self.at(pos);
            let mut repetition: Option<(Span, u64, Option<u64>)> = None;
            match c {
                0 => break,
                b'"' => {
                    let start = pos;
                    pos += 1;
                    last_sym_start = rule.len();
                    item_start = start;
                    n_prev_rules = 1;
                    while self.at(pos) != b'"' {
                        if self.at(pos) == 0 {
                            return self.fail(
                                self.error(
                                    Code::Unterminated,
                                    start,
                                    1,
                                    "this string literal is never closed",
                                )
                                .with_hint("add the closing '\"'"),
                            );
                        }
                        let (ch, next) = self.parse_char(pos)?;
                        rule.push(ElementKind::Char, ch, Span::new(pos, next));
                        pos = next;
                    }
                    begin_item(&mut items, start, pos + 1);
                    pos = self.parse_space(pos + 1, nested);
                }
                b'[' => {
                    let start = pos;
                    pos += 1;
                    let mut start_kind = ElementKind::Char;
                    if self.at(pos) == b'^' {
                        pos += 1;
                        start_kind = ElementKind::CharNot;
                    }
                    last_sym_start = rule.len();
                    item_start = start;
                    n_prev_rules = 1;
                    while self.at(pos) != b']' {
                        if self.at(pos) == 0 {
                            return self.fail(
                                self.error(
                                    Code::Unterminated,
                                    start,
                                    1,
                                    "this character class is never closed",
                                )
                                .with_hint("add the closing ']'"),
                            );
                        }
                        let (ch, next) = self.parse_char(pos)?;
                        let kind = if last_sym_start < rule.len() {
                            ElementKind::CharAlt
                        } else {
                            start_kind
                        };
                        rule.push(kind, ch, Span::new(pos, next));
                        pos = next;
                        if self.at(pos) == b'-' && self.at(pos + 1) != b']' {
                            if self.at(pos + 1) == 0 {
                                return self.fail(self.error(
                                    Code::Unterminated,
                                    pos,
                                    1,
                                    "the grammar ends inside a character range",
                                ));
                            }
                            let (upper, next) = self.parse_char(pos + 1)?;
                            rule.push(ElementKind::CharRngUpper, upper, Span::new(pos + 1, next));
                            pos = next;
                        }
                    }
                    let class_span = Span::new(start, pos + 1);
                    if last_sym_start < rule.len() {
                        // The class's first element stands for the whole class on a stack.
                        rule.spans[last_sym_start] = class_span;
                    } else {
                        self.notes.push(
                            Diagnostic::new(
                                Code::EmptyClass,
                                self.src,
                                class_span,
                                "an empty character class matches nothing in llama.cpp: it is dropped and the sequence goes on as if it were not there",
                            )
                            .with_hint("remove it, or list the characters it should match"),
                        );
                    }
                    begin_item(&mut items, start, pos + 1);
                    pos = self.parse_space(pos + 1, nested);
                }
                b'<' | b'!' => {
                    let start = pos;
                    let mut kind = ElementKind::Token;
                    if c == b'!' {
                        kind = ElementKind::TokenNot;
                        pos += 1;
                    }
                    let (token, end) = self.parse_token(pos)?;
                    last_sym_start = rule.len();
                    item_start = start;
                    n_prev_rules = 1;
                    rule.push(kind, token, Span::new(start, end));
                    begin_item(&mut items, start, end);
                    pos = self.parse_space(end, nested);
                }
                c if is_word_char(c) => {
                    let end = self.parse_name_end(pos);
                    let name = String::from_utf8_lossy(&self.src[pos..end]).into_owned();
                    let span = Span::new(pos, end);
                    let ref_id = self.symbol_id(&name, span);
                    self.references.push(Reference {
                        symbol: ref_id,
                        from: rule_id,
                        span,
                    });
                    item_start = pos;
                    pos = self.parse_space(end, nested);
                    last_sym_start = rule.len();
                    n_prev_rules = 1;
                    rule.push(ElementKind::RuleRef, ref_id, span);
                    begin_item(&mut items, span.start as usize, end);
                }
                b'(' => {
                    let start = pos;
                    if self.depth >= MAX_NESTING {
                        return self.fail(
                            self.error(
                                Code::TooDeep,
                                pos,
                                1,
                                format!("groups are nested more than {MAX_NESTING} deep"),
                            )
                            .with_hint("flatten the grammar with named rules"),
                        );
                    }
                    pos = self.parse_space(pos + 1, true);
                    let n_before = self.symbols.len() as u64;
                    let sub_id = self.generate_symbol_id(
                        rule_name,
                        SymbolKind::Group,
                        parent,
                        Span::new(start, start + 1),
                    );
                    self.depth += 1;
                    let parsed = self.parse_alternates(pos, rule_name, parent, sub_id, true);
                    self.depth -= 1;
                    pos = parsed?;
                    n_prev_rules = (self.symbols.len() as u64 - n_before).max(1);
                    last_sym_start = rule.len();
                    item_start = start;
                    if self.at(pos) != b')' {
                        let opened = line_col(self.src, start);
                        return self.fail(
                            self.error(
                                Code::Unterminated,
                                pos,
                                1,
                                format!(
                                    "expected ')' to close the group opened at {opened}, found {}",
                                    self.found(pos)
                                ),
                            )
                            .with_hint(if self.at(pos) == b'_' {
                                UNDERSCORE_HINT
                            } else {
                                "add the closing ')'"
                            }),
                        );
                    }
                    let span = Span::new(start, pos + 1);
                    self.symbols[sub_id as usize].span = span;
                    rule.push(ElementKind::RuleRef, sub_id, span);
                    begin_item(&mut items, start, pos + 1);
                    pos = self.parse_space(pos + 1, nested);
                }
                b'.' => {
                    last_sym_start = rule.len();
                    item_start = pos;
                    n_prev_rules = 1;
                    rule.push(ElementKind::CharAny, 0, Span::new(pos, pos + 1));
                    begin_item(&mut items, pos, pos + 1);
                    pos = self.parse_space(pos + 1, nested);
                }
                b'*' | b'+' | b'?' => {
                    let op = Span::new(pos, pos + 1);
                    pos = self.parse_space(pos + 1, nested);
                    let (min, max) = match c {
                        b'*' => (0, None),
                        b'+' => (1, None),
                        _ => (0, Some(1)),
                    };
                    repetition = Some((op, min, max));
                }
                b'{' => {
                    let open = pos;
                    pos = self.parse_space(pos + 1, nested);
                    if !self.at(pos).is_ascii_digit() {
                        let mut d = self.error(
                            Code::MalformedRepetition,
                            pos,
                            1,
                            format!("expected a number after '{{', found {}", self.found(pos)),
                        );
                        if self.at(pos) == b',' {
                            d = d.with_hint(
                                "llama.cpp needs the minimum: write {0,n} instead of {,n}",
                            );
                        }
                        return self.fail(d);
                    }
                    let int_end = self.parse_int_end(pos);
                    let min = self.parse_count(pos, int_end)?;
                    pos = self.parse_space(int_end, nested);
                    let mut max = None;
                    if self.at(pos) == b'}' {
                        max = Some(min);
                        pos = self.parse_space(pos + 1, nested);
                    } else if self.at(pos) == b',' {
                        pos = self.parse_space(pos + 1, nested);
                        if self.at(pos).is_ascii_digit() {
                            let int_end = self.parse_int_end(pos);
                            max = Some(self.parse_count(pos, int_end)?);
                            pos = self.parse_space(int_end, nested);
                        }
                        if self.at(pos) != b'}' {
                            return self.fail(self.error(
                                Code::MalformedRepetition,
                                pos,
                                1,
                                format!(
                                    "expected '}}' to close the repetition opened at {}, found {}",
                                    line_col(self.src, open),
                                    self.found(pos)
                                ),
                            ));
                        }
                        pos = self.parse_space(pos + 1, nested);
                    } else {
                        return self.fail(self.error(
                            Code::MalformedRepetition,
                            pos,
                            1,
                            format!(
                                "expected ',' or '}}' in the repetition opened at {}, found {}",
                                line_col(self.src, open),
                                self.found(pos)
                            ),
                        ));
                    }
                    let op = Span::new(open, pos);
                    if min > MAX_REPETITION {
                        return self.fail(
                            self.error(
                                Code::RepetitionLimit,
                                open,
                                pos - open,
                                format!("a minimum of {min} repetitions exceeds llama.cpp's limit of {MAX_REPETITION}"),
                            )
                            .with_hint("use a smaller count, or + / * if any number will do"),
                        );
                    }
                    if let Some(m) = max
                        && m > MAX_REPETITION
                    {
                        self.notes.push(
                            Diagnostic::new(
                                Code::UnboundedMaximum,
                                self.src,
                                op,
                                format!("llama.cpp silently treats a maximum of {m} (over {MAX_REPETITION}) as unbounded"),
                            )
                            .with_hint(format!("write {{{min},}} to say so, or keep the maximum at {MAX_REPETITION} or less")),
                        );
                        max = None;
                    }
                    repetition = Some((op, min, max));
                }
                _ => break,
            }
            if let Some((op, min, max)) = repetition {
                self.handle_repetitions(
                    rule_name,
                    parent,
                    rule,
                    last_sym_start,
                    item_start,
                    op,
                    min,
                    max,
                    &mut n_prev_rules,
                )?;
                if let Some(item) = items.last_mut() {
                    item.repeats.push((min, max));
                    item.span = item.span.join(op);
                }
            }
        }
        if !items.is_empty() {
            self.sequences.push(items);
        }
        Ok(pos)
    }

    fn parse_count(&self, start: usize, end: usize) -> PResult<u64> {
        let text = std::str::from_utf8(&self.src[start..end]).unwrap_or("");
        text.parse::<u64>().or_else(|_| {
            self.fail(self.error(
                Code::RepetitionLimit,
                start,
                end - start,
                format!("the count {text} is too large"),
            ))
        })
    }

    fn parse_token(&self, pos: usize) -> PResult<(u32, usize)> {
        if self.at(pos) != b'<' {
            return self.fail(
                self.error(
                    Code::MalformedTokenRef,
                    pos,
                    1,
                    format!("expected '<' after '!', found {}", self.found(pos)),
                )
                .with_hint("'!' negates a token: write !<[id]> or !<text>"),
            );
        }
        let mut p = pos + 1;
        if self.at(p) == b'[' {
            p += 1;
            let int_end = self.parse_int_end(p);
            if int_end == p {
                return self.fail(self.error(
                    Code::MalformedTokenRef,
                    p,
                    1,
                    format!("expected a token id after '<[', found {}", self.found(p)),
                ));
            }
            let text = std::str::from_utf8(&self.src[p..int_end]).unwrap_or("");
            let id = match text.parse::<u64>().ok().and_then(|v| u32::try_from(v).ok()) {
                Some(id) => id,
                None => {
                    return self.fail(self.error(
                        Code::MalformedTokenRef,
                        p,
                        int_end - p,
                        format!("token id {text} is too big"),
                    ));
                }
            };
            p = int_end;
            if self.at(p) != b']' {
                return self.fail(self.error(
                    Code::MalformedTokenRef,
                    p,
                    1,
                    format!("expected ']' after the token id, found {}", self.found(p)),
                ));
            }
            p += 1;
            if self.at(p) != b'>' {
                return self.fail(self.error(
                    Code::MalformedTokenRef,
                    p,
                    1,
                    format!("expected '>' after ']', found {}", self.found(p)),
                ));
            }
            return Ok((id, p + 1));
        }
        let Some(vocab) = self.vocab else {
            return self.fail(
                self.error(
                    Code::UnknownToken,
                    pos,
                    1,
                    "a token written as <text> needs a model vocabulary to resolve it",
                )
                .with_hint("load a model, or write the token id as <[id]>"),
            );
        };
        while self.at(p) != 0 && self.at(p) != b'>' {
            p += 1;
        }
        if self.at(p) != b'>' {
            return self.fail(self.error(
                Code::MalformedTokenRef,
                pos,
                1,
                "this token reference is never closed with '>'",
            ));
        }
        p += 1;
        let text = &self.src[pos..p];
        let tokens = vocab.tokenize_special(text);
        if tokens.len() != 1 {
            return self.fail(self.error(
                Code::UnknownToken,
                pos,
                p - pos,
                format!(
                    "'{}' is {} tokens in this vocabulary; a token reference must be exactly one token",
                    String::from_utf8_lossy(text),
                    tokens.len()
                ),
            ));
        }
        Ok((tokens[0], p))
    }

    /// llama.cpp's checks after parsing: at least one rule, every referenced rule defined.
    fn validate(&self) -> PResult<()> {
        if self.rules.is_empty() {
            return self.fail(
                self.error(Code::NoRules, 0, 0, "the grammar has no rules")
                    .with_hint("write at least: root ::= ..."),
            );
        }
        let mut undefined: Vec<u32> = (0..self.symbols.len() as u32)
            .filter(|&id| self.rules.get(id as usize).is_none_or(|r| r.is_none()))
            .collect();
        undefined.sort_unstable();
        if undefined.is_empty() {
            return Ok(());
        }
        // The first reference to each symbol, in one pass.
        let mut first_reference: Vec<Option<Span>> = vec![None; self.symbols.len()];
        for r in &self.references {
            if let Some(slot @ None) = first_reference.get_mut(r.symbol as usize) {
                *slot = Some(r.span);
            }
        }
        let mut suggestions = Suggestions::new(self.defined_names());
        let diagnostics = undefined
            .iter()
            .map(|&id| {
                let span = first_reference[id as usize].unwrap_or(self.symbols[id as usize].span);
                let name = &self.symbols[id as usize].name;
                let mut d = self.error(
                    Code::UndefinedRule,
                    span.start as usize,
                    0,
                    format!("rule '{name}' is used but never defined"),
                );
                d.span = span;
                if let Some(close) = suggestions.closest(name) {
                    d = d.with_hint(format!("did you mean '{close}'?"));
                } else {
                    d = d.with_hint(format!("define it: {name} ::= ..."));
                }
                d
            })
            .collect();
        Err(GrammarError { diagnostics })
    }

    fn defined_names(&self) -> impl Iterator<Item = &str> {
        self.symbols
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                s.kind == SymbolKind::Named && self.rules.get(*i).is_some_and(|r| r.is_some())
            })
            .map(|(_, s)| s.name.as_str())
    }
}

/// How many edit-distance cells and candidate looks all "did you mean" suggestions of one
/// grammar may take together: far more than any real grammar needs (a thousand undefined
/// names against a thousand similar ones), but a bound, so that tens of thousands of
/// undefined names cost a fraction of a second, not minutes; past it, the remaining names get
/// the plain "define it" hint.
const SUGGESTION_WORK: u64 = 30_000_000;

/// "Did you mean" suggestions among the defined names of one grammar, with a shared work bound.
struct Suggestions<'a> {
    /// Defined names with their characters, by number of characters.
    by_length: Vec<(Vec<char>, &'a str)>,
    /// Work left, in edit-distance cells and candidates looked at.
    work_left: u64,
}

impl<'a> Suggestions<'a> {
    fn new(names: impl Iterator<Item = &'a str>) -> Self {
        let mut by_length: Vec<(Vec<char>, &str)> =
            names.map(|n| (n.chars().collect(), n)).collect();
        by_length.sort_by_key(|(chars, _)| chars.len());
        Suggestions {
            by_length,
            work_left: SUGGESTION_WORK,
        }
    }

    /// The defined name closest to `name` by edit distance, if it is close enough to be a typo
    /// (distance at most a third of the longer name, at least 1; ties go to the smaller name).
    fn closest(&mut self, name: &str) -> Option<&'a str> {
        let a: Vec<char> = name.chars().collect();
        let len = a.len();
        // Only names whose length is within the allowed distance can be close enough.
        let shortest = len.saturating_sub((len / 3).max(1));
        let longest = (len * 3 / 2).max(len + 1);
        let from = self.by_length.partition_point(|(c, _)| c.len() < shortest);
        let mut best: Option<(usize, &'a str)> = None;
        for (b, candidate) in &self.by_length[from..] {
            if b.len() > longest {
                break;
            }
            let cost = 1 + (a.len() as u64 + 1) * (b.len() as u64 + 1);
            if cost > self.work_left {
                self.work_left = 0;
                return None;
            }
            self.work_left -= cost;
            // Rule names are ASCII (word characters), so characters and bytes agree here.
            let limit = (name.len().max(candidate.len()) / 3).max(1);
            if len.abs_diff(b.len()) > limit {
                continue;
            }
            let d = edit_distance(&a, b);
            if d <= limit && best.is_none_or(|(bd, bc)| (d, *candidate) < (bd, bc)) {
                best = Some((d, candidate));
            }
        }
        best.map(|(_, c)| c)
    }
}

fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Decodes one UTF-8 sequence at `pos` the way llama.cpp's parser does (length from the
/// first byte's high bits, stopping early at the end of input).
fn decode_utf8_char(src: &[u8], pos: usize) -> (u32, usize) {
    const LOOKUP: [usize; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    let first = src[pos];
    let len = LOOKUP[usize::from(first >> 4)];
    let mask = (1u32 << (8 - len)) - 1;
    let mut value = u32::from(first) & mask;
    let end = pos + len;
    let mut p = pos + 1;
    while p < end && p < src.len() && src[p] != 0 {
        value = (value << 6) + (u32::from(src[p]) & 0x3F);
        p += 1;
    }
    (value, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(src: &str) -> Diagnostic {
        match parse(src) {
            Ok(_) => panic!("expected an error for {src:?}"),
            Err(e) => e.diagnostics[0].clone(),
        }
    }

    #[test]
    fn underscore_in_rule_name_has_a_hint() {
        let d = err("root ::= my_rule\nmy_rule ::= \"a\"");
        assert_eq!(d.position.line, 1);
        assert_eq!(d.position.column, 12);
        assert_eq!(d.hint.as_deref(), Some(UNDERSCORE_HINT));
        let d = err("my_rule ::= \"a\"");
        assert_eq!(d.hint.as_deref(), Some(UNDERSCORE_HINT));
    }

    #[test]
    fn undefined_rules_are_all_listed_with_suggestions() {
        let e = parse("root ::= numero other\nnumber ::= [0-9]").unwrap_err();
        assert_eq!(e.diagnostics.len(), 2);
        assert!(e.diagnostics[0].message.contains("'numero'"));
        assert_eq!(
            e.diagnostics[0].hint.as_deref(),
            Some("did you mean 'number'?")
        );
        assert_eq!(e.diagnostics[1].position.column, 17);
    }

    #[test]
    fn suggestions_are_the_closest_name_and_their_work_is_bounded() {
        // Against trying every name (the former way), on names of many lengths with ties.
        let defined = [
            "number",
            "numbers",
            "nums",
            "value",
            "values",
            "valve",
            "a",
            "ab",
            "abc",
            "object",
            "objects",
            "item-list",
            "item-lists",
            "x1",
            "x2",
        ];
        let naive = |name: &str| {
            defined
                .iter()
                .map(|c| {
                    (
                        edit_distance(
                            &name.chars().collect::<Vec<_>>(),
                            &c.chars().collect::<Vec<_>>(),
                        ),
                        *c,
                    )
                })
                .filter(|(d, c)| *d <= (name.len().max(c.len()) / 3).max(1))
                .min()
                .map(|(_, c)| c)
        };
        let mut suggestions = Suggestions::new(defined.iter().copied());
        for name in [
            "numero",
            "num",
            "nums",
            "valu",
            "vals",
            "b",
            "abcd",
            "objet",
            "itemlist",
            "x3",
            "x",
            "zzzzzz",
            "item-listss",
            "n",
        ] {
            assert_eq!(suggestions.closest(name), naive(name), "{name}");
        }
        // 20,000 undefined names, each one edit from 20,000 defined ones: every pair was tried
        // (400 million distances, minutes); now the work stops at the bound and the rest get
        // the plain hint.
        let names: Vec<String> = (0..20_000).map(|i| format!("d{i}")).collect();
        let mut suggestions = Suggestions::new(names.iter().map(String::as_str));
        let mut suggested = 0;
        for i in 0..20_000 {
            if suggestions.closest(&format!("u{i}")).is_some() {
                suggested += 1;
            }
        }
        assert!(suggested > 0 && suggested < 20_000, "{suggested}");
        assert_eq!(suggestions.work_left, 0);
    }

    #[test]
    fn synthesised_names_follow_llama() {
        let g = parse("root ::= (\"a\" | b)* c?\nb ::= \"b\"\nc ::= \"c\"").unwrap();
        let names: Vec<&str> = g.symbols.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["root", "root_1", "b", "root_3", "c", "root_5"]);
    }

    #[test]
    fn unterminated_literal_points_at_its_start() {
        let d = err("root ::= \"abc\n");
        assert!(d.message.contains("never closed"), "{d}");
        // newline inside a literal is a character; the error is at the literal's start
        assert_eq!(d.position.column, 10);
    }

    #[test]
    fn reversed_bounds_are_refused_not_looped() {
        let d = err("root ::= \"a\"{5,3}");
        assert_eq!(d.code, "GB005");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!(
            "root ::= {}\"a\"{}",
            "(".repeat(100_000),
            ")".repeat(100_000)
        );
        assert_eq!(err(&deep).code, "GB010");
        let ok = format!(
            "root ::= {}\"a\"{}",
            "(".repeat(MAX_NESTING),
            ")".repeat(MAX_NESTING)
        );
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn nul_ends_the_grammar_with_a_warning() {
        let g = parse("root ::= \"a\"\0 garbage").unwrap();
        assert_eq!(g.notes[0].code, "GB012");
    }

    #[test]
    fn errors_caused_by_a_nul_name_it() {
        // /work/shared/reliability/F23-nul-first.gbnf: nothing is left before the NUL.
        let e = parse("\0root ::= \"a\"\n").unwrap_err();
        assert_eq!(e.code(), "GB009");
        assert!(
            e.diagnostics[0]
                .message
                .contains("cut at a NUL byte at 1:1"),
            "{e}"
        );
        // F23-nul-in-literal.gbnf: the literal is cut open.
        let e = parse("root ::= \"a\0b\"\n").unwrap_err();
        assert_eq!(e.code(), "GB002");
        assert!(e.to_string().contains("cut at a NUL byte at 1:12"), "{e}");
        // On a later line, and with errors that have nothing to do with it, it is still named.
        let e = parse("root ::= x\n\0x ::= \"a\"").unwrap_err();
        assert_eq!(e.code(), "GB101");
        assert!(e.to_string().contains("NUL byte at 2:1"), "{e}");
        // Without a NUL nothing is added.
        assert!(
            !parse("root ::= \"a")
                .unwrap_err()
                .to_string()
                .contains("NUL")
        );
    }
}

#[cfg(test)]
mod token_tests {
    use super::*;

    /// A vocabulary of whole special tokens, as a GGUF's special-token table answers.
    struct SpecialTokens(&'static [(&'static str, u32)]);

    impl TokenVocabulary for SpecialTokens {
        fn tokenize_special(&self, text: &[u8]) -> Vec<u32> {
            match self.0.iter().find(|(t, _)| t.as_bytes() == text) {
                Some(&(_, id)) => vec![id],
                // Not a special token: one token per byte, like a byte-level fallback.
                None => text.iter().map(|&b| u32::from(b)).collect(),
            }
        }
    }

    #[test]
    fn text_tokens_resolve_through_the_vocabulary() {
        let vocab = SpecialTokens(&[("<start_of_turn>", 105), ("<end_of_turn>", 106)]);
        let g = parse_with_vocab(
            "root ::= <start_of_turn> !<end_of_turn>* <end_of_turn>",
            Some(&vocab),
        )
        .unwrap();
        let kinds: Vec<(ElementKind, u32)> = g.rules[0].iter().map(|e| (e.kind, e.value)).collect();
        assert_eq!(kinds[0], (ElementKind::Token, 105));
        assert_eq!(kinds[2], (ElementKind::Token, 106));
        assert_eq!(g.rules[1][0], Element::new(ElementKind::TokenNot, 106));
        let e = parse_with_vocab("root ::= <not a token>", Some(&vocab)).unwrap_err();
        assert_eq!(e.code(), "GB008");
        assert!(e.to_string().contains("is 13 tokens"), "{e}");
        assert_eq!(
            parse("root ::= <start_of_turn>").unwrap_err().code(),
            "GB008"
        );
    }
}
