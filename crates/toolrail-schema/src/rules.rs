//! The rule table: naming, deduplication, primitives on demand and deterministic output.
//!
//! Rules are kept in creation order. A schema rule's name is reserved before its body is
//! built, so the output reads top-down (a rule appears before the rules it uses) and recursive
//! `$ref`s can point at a rule that is still being built. Rule bodies are deduplicated: adding a
//! body that already exists returns the existing name. Primitive rules (`value`, `string`,
//! `number`, formats, ...) are only emitted when used, after all schema rules, in a fixed order.
//!
//! Bodies are [`Expr`] values, printed once by [`RuleTable::render`]; names are [`RuleName`]s
//! that only this table hands out, so two rules cannot share a name. Deduplication compares
//! typed bodies (hashed, then compared for equality), so no body is printed to be compared.

use rustc_hash::FxHashMap;

use super::expr::{Expr, RuleName};
use super::limits::{INLINE_RULES, MAX_REPETITION};
use super::options::Whitespace;
use super::syntax::LiteralSyntax;

/// A built-in rule: its name and the primitives its body uses (the body is
/// [`primitive_body`]).
struct Primitive {
    name: &'static str,
    deps: &'static [&'static str],
}

/// The primitives, in output order. Bodies match JSON text exactly (RFC 8259), except for the
/// documented canonical-form choices: integers without exponent.
const PRIMITIVES: &[Primitive] = &[
    Primitive {
        name: "value",
        deps: &["object", "array", "string", "number", "boolean", "null"],
    },
    Primitive {
        name: "object",
        deps: &["space", "string", "value"],
    },
    Primitive {
        name: "array",
        deps: &["space", "value"],
    },
    Primitive {
        name: "string",
        deps: &["char"],
    },
    Primitive {
        name: "char",
        deps: &["hex"],
    },
    Primitive {
        name: "hex",
        deps: &[],
    },
    Primitive {
        name: "number",
        deps: &["integral-part"],
    },
    Primitive {
        name: "integer",
        deps: &["integral-part"],
    },
    Primitive {
        name: "integral-part",
        deps: &[],
    },
    Primitive {
        name: "boolean",
        deps: &[],
    },
    Primitive {
        name: "null",
        deps: &[],
    },
    Primitive {
        name: "space",
        deps: &[],
    },
    // Python literals ([`LiteralSyntax::Python`]); numbers and `space` are shared
    Primitive {
        name: "py-value",
        deps: &[
            "py-dict",
            "py-list",
            "py-string",
            "number",
            "py-boolean",
            "py-none",
        ],
    },
    Primitive {
        name: "py-dict",
        deps: &["space", "py-string", "py-value"],
    },
    Primitive {
        name: "py-list",
        deps: &["space", "py-value"],
    },
    Primitive {
        name: "py-string",
        deps: &["py-char"],
    },
    Primitive {
        name: "py-char",
        deps: &["hex"],
    },
    Primitive {
        name: "py-boolean",
        deps: &[],
    },
    Primitive {
        name: "py-none",
        deps: &[],
    },
];

/// How a primitive's body is chosen where it has more than one.
#[derive(Clone, Copy, PartialEq, Eq)]
struct PrimitiveStyle {
    whitespace: Whitespace,
    /// `integral-part` stops at 16 digits ([`RuleTable::capped_digits`]).
    capped_digits: bool,
}

/// The body of the primitive `name` (one of [`PRIMITIVES`]) in `style`.
fn primitive_body(name: &str, style: PrimitiveStyle) -> Expr {
    let lit = |text: &str| Expr::literal(text);
    let rule = |name: &str| Expr::Rule(RuleName::new(name));
    let class = |ranges: &[(char, char)]| Expr::Class {
        ranges: ranges.iter().map(|&(a, b)| (a as u32, b as u32)).collect(),
        negated: false,
    };
    let one_of = |chars: &str| class(&chars.chars().map(|c| (c, c)).collect::<Vec<_>>());
    let alt = |alternatives: Vec<Expr>| Expr::alt(alternatives).unwrap_or(Expr::Empty);
    let opt = |e: Expr| Expr::repeat(e, 0, Some(1));
    let star = |e: Expr| Expr::repeat(e, 0, None);
    let plus = |e: Expr| Expr::repeat(e, 1, None);
    let digit = || class(&[('0', '9')]);
    // `open` space ( item ( "," space item )* )? space `close`
    let list = |open: &str, item: Expr, close: &str| {
        Expr::seq([
            lit(open),
            rule("space"),
            opt(Expr::seq([
                item.clone(),
                star(Expr::seq([lit(","), rule("space"), item])),
            ])),
            rule("space"),
            lit(close),
        ])
    };
    // JSON's values and Python's literals share their shapes; `py-*` rules are Python's.
    let python = name.starts_with("py-");
    let (value, string, char) = if python {
        ("py-value", "py-string", "py-char")
    } else {
        ("value", "string", "char")
    };
    match name {
        // any value: one of the primitives it depends on, in their order
        "value" | "py-value" => alt(PRIMITIVES
            .iter()
            .find(|p| p.name == name)
            .map_or(&[][..], |p| p.deps)
            .iter()
            .map(|dep| rule(dep))
            .collect()),
        "object" | "py-dict" => list(
            "{",
            Expr::seq([rule(string), lit(":"), rule("space"), rule(value)]),
            "}",
        ),
        "array" | "py-list" => list("[", rule(value), "]"),
        "string" | "py-string" => Expr::seq([lit("\""), star(rule(char)), lit("\"")]),
        // Python's: JSON's escapes that Python reads the same, so no `\/` (Python keeps the
        // backslash) and no surrogate pairs (Python keeps two lone surrogates); such
        // characters are written raw
        "char" | "py-char" => {
            let hex = |n: u32| Expr::repeat(rule("hex"), n, Some(n));
            let d = || one_of("dD");
            let mut unicode = vec![
                Expr::seq([
                    class(&[('0', '9'), ('a', 'c'), ('A', 'C'), ('e', 'f'), ('E', 'F')]),
                    hex(3),
                ]),
                Expr::seq([d(), class(&[('0', '7')]), hex(2)]),
            ];
            if !python {
                unicode.push(Expr::seq([
                    d(),
                    one_of("89abAB"),
                    hex(2),
                    lit("\\u"),
                    d(),
                    class(&[('c', 'f'), ('C', 'F')]),
                    hex(2),
                ]));
            }
            let escaped = alt(vec![
                one_of(if python { "\"\\bfnrt" } else { "\"\\/bfnrt" }),
                Expr::seq([lit("u"), alt(unicode)]),
            ]);
            alt(vec![
                Expr::Class {
                    ranges: vec![('"' as u32, '"' as u32), (0x5C, 0x5C), (0, 0x1F)],
                    negated: true,
                },
                Expr::seq([lit("\\"), escaped]),
            ])
        }
        "hex" => class(&[('0', '9'), ('a', 'f'), ('A', 'F')]),
        "number" => Expr::seq([
            opt(lit("-")),
            rule("integral-part"),
            opt(Expr::seq([lit("."), plus(digit())])),
            opt(Expr::seq([one_of("eE"), opt(one_of("-+")), plus(digit())])),
        ]),
        "integer" => Expr::seq([
            opt(lit("-")),
            rule("integral-part"),
            opt(Expr::seq([lit("."), plus(lit("0"))])),
        ]),
        "integral-part" => {
            // llama.cpp's: at most 16 digits (llama_compat)
            let more = if style.capped_digits {
                Expr::repeat(digit(), 0, Some(15))
            } else {
                star(digit())
            };
            alt(vec![lit("0"), Expr::seq([class(&[('1', '9')]), more])])
        }
        "boolean" => alt(vec![lit("true"), lit("false")]),
        "null" => lit("null"),
        "py-boolean" => alt(vec![lit("True"), lit("False")]),
        "py-none" => lit("None"),
        "space" => match style.whitespace {
            // llama.cpp's: nothing, one space, or one or two newlines and indentation
            Whitespace::Spaced => alt(vec![
                Expr::Empty,
                lit(" "),
                Expr::seq([
                    Expr::repeat(lit("\n"), 1, Some(2)),
                    Expr::repeat(one_of(" \t"), 0, Some(20)),
                ]),
            ]),
            Whitespace::Compact => Expr::Empty,
        },
        _ => Expr::Empty,
    }
}

/// The printed body of every primitive in `style` (in [`PRIMITIVES`] order), printed once.
fn primitive_texts(style: PrimitiveStyle) -> &'static [String] {
    static TEXTS: [std::sync::OnceLock<Vec<String>>; 4] = [const { std::sync::OnceLock::new() }; 4];
    let i =
        usize::from(style.whitespace == Whitespace::Compact) * 2 + usize::from(style.capped_digits);
    TEXTS[i].get_or_init(|| {
        PRIMITIVES
            .iter()
            .map(|p| primitive_body(p.name, style).to_gbnf())
            .collect()
    })
}

/// Names no schema rule may take.
fn is_reserved(name: &str) -> bool {
    name == "root"
        || PRIMITIVES.iter().any(|p| p.name == name)
        || super::formats::is_format_rule(name)
}

/// Turns a hint into a valid kebab-case GBNF rule name (`[a-zA-Z0-9-]`, never `_`).
pub(crate) fn sanitize(hint: &str) -> String {
    let mut out = String::with_capacity(hint.len());
    let mut dash = false;
    for c in hint.chars() {
        if c.is_ascii_alphanumeric() {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c);
        } else {
            dash = true;
        }
    }
    if out.is_empty() {
        out.push_str("schema");
    }
    out
}

/// A readable rule-name hint for the repetition of `item`: the rule it repeats, else `repeat`.
fn repetition_hint(item: &Expr) -> String {
    let short_name = |t: &str| {
        t.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-') && !t.is_empty() && t.len() <= 24
    };
    match item {
        Expr::Rule(name) if short_name(name.as_str()) => name.as_str().to_string(),
        _ => "repeat".to_string(),
    }
}

/// The hash of a typed rule body (rules are deduplicated on the typed value, not on text).
fn body_hash(body: &Expr) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = rustc_hash::FxHasher::default();
    body.hash(&mut hasher);
    hasher.finish()
}

/// One rule: its body (None while reserved) and the schema location it came from.
struct Rule {
    /// None once unreserved (the entry stays so that indices hold, and renders nothing).
    name: Option<RuleName>,
    body: Option<Expr>,
    comment: Option<String>,
}

/// The rule table of one grammar under construction.
pub(crate) struct RuleTable {
    whitespace: Whitespace,
    /// The literal syntax: which primitives stand for `value`, `string`, `null`, ...
    pub(crate) syntax: LiteralSyntax,
    /// `integral-part` stops at 16 digits, as llama.cpp's
    /// ([`crate::ConvertOptions::llama_compat`]); otherwise any number of digits.
    pub(crate) capped_digits: bool,
    rules: Vec<Rule>,
    by_name: FxHashMap<String, usize>,
    /// Hash of a typed body -> the rules with a body of that hash, in creation order.
    by_body: FxHashMap<u64, Vec<usize>>,
    used_primitives: Vec<bool>,
    /// Format rules used (name -> body), emitted after the schema rules.
    formats: Vec<(&'static str, &'static Expr)>,
    /// Rules reused (same body) for a schema location other than the one in their comment:
    /// they stand for no single location ([`RuleTable::locations`]).
    shared: rustc_hash::FxHashSet<usize>,
}

impl RuleTable {
    /// An empty table.
    pub(crate) fn new(whitespace: Whitespace) -> Self {
        Self {
            whitespace,
            syntax: LiteralSyntax::Json,
            capped_digits: false,
            rules: Vec::new(),
            by_name: FxHashMap::default(),
            by_body: FxHashMap::default(),
            used_primitives: vec![false; PRIMITIVES.len()],
            formats: Vec::new(),
            shared: rustc_hash::FxHashSet::default(),
        }
    }

    /// Marks a primitive (and what it uses) as used and returns a reference to it. `name` is
    /// the JSON primitive's name; in [`LiteralSyntax::Python`] the Python one is used
    /// ([`LiteralSyntax::primitive`]).
    pub(crate) fn primitive_rule(&mut self, name: &'static str) -> Expr {
        Expr::Rule(RuleName::new(self.primitive(name)))
    }

    /// Marks a primitive (and what it uses) as used and returns its name in this table's
    /// syntax (`name` is the JSON primitive's name, see [`RuleTable::primitive_rule`]).
    pub(crate) fn primitive(&mut self, name: &'static str) -> &'static str {
        let name = self.syntax.primitive(name);
        self.mark_used(name);
        name
    }

    /// Whether `e` refers to the primitive standing for the JSON primitive `name` in this
    /// table's syntax.
    pub(crate) fn is_primitive(&self, e: &Expr, name: &'static str) -> bool {
        matches!(e, Expr::Rule(r) if r.as_str() == self.syntax.primitive(name))
    }

    /// Marks the primitive `name` (its own name) and its dependencies as used.
    fn mark_used(&mut self, name: &'static str) {
        if let Some(i) = PRIMITIVES.iter().position(|p| p.name == name)
            && !self.used_primitives[i]
        {
            self.used_primitives[i] = true;
            for dep in PRIMITIVES[i].deps {
                self.mark_used(dep);
            }
        }
    }

    /// Adds the rules for a string with format `format` (each once); returns the rule name
    /// matching the whole JSON string (quotes included), or None for an unknown format.
    pub(crate) fn format_string(&mut self, format: &str) -> Option<String> {
        let rules = super::formats::string_rules(format)?;
        let name = rules.first().map(|(n, _)| n.to_string());
        for (n, body) in rules {
            if !self.formats.iter().any(|(m, _)| *m == n) {
                self.formats.push((n, body));
            }
        }
        name
    }

    /// Adds the format rule `name` and the helper rules it uses (a part of a format used as
    /// it is, see [`crate::automaton`]); nothing for a name that is not a format rule.
    pub(crate) fn format_rules(&mut self, name: &str) {
        for (n, body) in super::formats::rule_closure(name).unwrap_or_default() {
            if !self.formats.iter().any(|(m, _)| *m == n) {
                self.formats.push((n, body));
            }
        }
    }

    fn unique_name(&self, hint: &str) -> String {
        let base = sanitize(hint);
        if !is_reserved(&base) && !self.by_name.contains_key(&base) {
            return base;
        }
        let mut n = 2;
        loop {
            let candidate = format!("{base}-{n}");
            if !is_reserved(&candidate) && !self.by_name.contains_key(&candidate) {
                return candidate;
            }
            n += 1;
        }
    }

    /// Named rules with the comment that records the one schema location they stand for
    /// (`label#pointer`), rules reused for several locations left out.
    pub(crate) fn locations(&self) -> Vec<(String, String)> {
        self.rules
            .iter()
            .enumerate()
            .filter(|(i, r)| r.body.is_some() && !self.shared.contains(i))
            .filter_map(|(_, r)| Some((r.name.as_ref()?.to_string(), r.comment.clone()?)))
            .collect()
    }

    /// Reserves a name for a rule whose body is filled in later with [`RuleTable::fill`].
    pub(crate) fn reserve(&mut self, hint: &str, comment: Option<String>) -> RuleName {
        let name = self.unique_name(hint);
        self.by_name.insert(name.clone(), self.rules.len());
        let name = RuleName::new(name);
        self.rules.push(Rule {
            name: Some(name.clone()),
            body: None,
            comment,
        });
        name
    }

    /// Sets the body of a reserved rule.
    pub(crate) fn fill(&mut self, name: &RuleName, body: impl Into<Expr>) {
        let body = body.into();
        if let Some(&i) = self.by_name.get(name.as_str()) {
            self.by_body.entry(body_hash(&body)).or_default().push(i);
            self.rules[i].body = Some(body);
        }
    }

    /// Drops a reserved rule that turned out not to be needed (only when nothing refers to it).
    pub(crate) fn unreserve(&mut self, name: &RuleName) {
        if let Some(&i) = self.by_name.get(name.as_str())
            && self.rules[i].body.is_none()
        {
            // the entry stays (indices are kept) but renders nothing and frees the name
            self.by_name.remove(name.as_str());
            self.rules[i].name = None;
        }
    }

    /// Adds a rule, or returns the name of an existing rule with the same body.
    pub(crate) fn add(
        &mut self,
        hint: &str,
        body: impl Into<Expr>,
        comment: Option<String>,
    ) -> RuleName {
        let body = body.into();
        let hash = body_hash(&body);
        let same = self.by_body.get(&hash).and_then(|rules| {
            rules.iter().copied().find(|&i| {
                self.rules[i].body.as_ref() == Some(&body) && self.rules[i].name.is_some()
            })
        });
        if let Some(i) = same
            && let Some(name) = self.rules[i].name.clone()
        {
            if self.rules[i].comment != comment {
                self.shared.insert(i);
            }
            return name;
        }
        let name = self.unique_name(hint);
        let i = self.rules.len();
        self.by_name.insert(name.clone(), i);
        self.by_body.entry(hash).or_default().push(i);
        let name = RuleName::new(name);
        self.rules.push(Rule {
            name: Some(name.clone()),
            body: Some(body),
            comment,
        });
        name
    }

    /// `item{min,max}` within llama.cpp's repetition limits and without ambiguity (see
    /// [`crate::limits`]): the item gets its own rule when its generated rules times the count
    /// would pass the limit, counts over the limit are split into exact chunks, optional runs
    /// over the limit are chained through rules that take either a full chunk or fewer, and a
    /// repetition generating more than a few rules is returned as a rule of its own. A maximum
    /// below the minimum is read as the minimum.
    pub(crate) fn repetition(&mut self, item: impl Into<Expr>, min: u32, max: Option<u32>) -> Expr {
        const LIMIT: u32 = MAX_REPETITION;
        let atom = item.into();
        let max = max.map(|m| m.max(min));
        if max == Some(0) {
            return Expr::Empty;
        }
        if min == 1 && max == Some(1) {
            return atom;
        }
        // llama.cpp's count for the largest chunk: the maximum when bounded, else the minimum
        let count = u64::from(max.unwrap_or(min).clamp(1, LIMIT));
        let item_rules = atom.operand_rules().max(1);
        let item = if item_rules.saturating_mul(count) > u64::from(LIMIT) {
            let hint = format!("{}-item", repetition_hint(&atom));
            Expr::Rule(self.add(&hint, atom.clone(), None))
        } else {
            atom.clone()
        };
        let mut parts = Vec::new();
        let mut left = min;
        while left > LIMIT {
            parts.push(Expr::repeat(item.clone(), LIMIT, Some(LIMIT)));
            left -= LIMIT;
        }
        match max.map(|m| m - min) {
            None => parts.push(Expr::repeat(item.clone(), left, None)),
            Some(optional) if u64::from(left) + u64::from(optional) <= u64::from(LIMIT) => {
                parts.push(Expr::repeat(item.clone(), left, Some(left + optional)))
            }
            Some(optional) => {
                if left > 0 {
                    parts.push(Expr::repeat(item.clone(), left, Some(left)));
                }
                parts.push(self.optional_chain(&item, optional));
            }
        }
        let expr = Expr::seq(parts);
        if expr.generated_rules() > INLINE_RULES {
            let hint = match max {
                Some(m) => format!("{}-{min}-{m}", repetition_hint(&atom)),
                None => format!("{}-{min}-more", repetition_hint(&atom)),
            };
            Expr::Rule(self.add(&hint, expr, None))
        } else {
            expr
        }
    }

    /// Zero to `optional` copies of `item` (a rule reference or a group generating at most one
    /// rule), over the limit: `r ::= item{2000} rest | item{0,1999}`, nested, so that every
    /// length has exactly one parse.
    fn optional_chain(&mut self, item: &Expr, optional: u32) -> Expr {
        const LIMIT: u32 = MAX_REPETITION;
        let mut levels = Vec::new();
        let mut rest = optional;
        while rest > LIMIT {
            levels.push(rest);
            rest -= LIMIT;
        }
        let mut inner = Expr::repeat(item.clone(), 0, Some(rest));
        let hint = repetition_hint(item);
        for total in levels.into_iter().rev() {
            let full = Expr::seq([Expr::repeat(item.clone(), LIMIT, Some(LIMIT)), inner]);
            let fewer = Expr::repeat(item.clone(), 0, Some(LIMIT - 1));
            let body = Expr::Alt(vec![full, fewer]);
            inner = Expr::Rule(self.add(&format!("{hint}-upto-{total}"), body, None));
        }
        inner
    }

    /// Renders the grammar: `root` first, schema rules in creation order, then formats and
    /// primitives.
    /// Whether `expr` derives no finite string over this table (every way through it needs
    /// another rule without end, as a required property that refers back to its own schema
    /// does), and if so the schema location of the first such rule it reaches (from its
    /// comment, the document label left out; `#` when none has one). Primitives and format
    /// rules always finish; a rule not filled yet counts as finishing.
    pub(crate) fn endless_location(&self, expr: &Expr) -> Option<String> {
        // the table rules `expr` reaches, breadth first (no recursion: chains can be long)
        let mut seen = vec![false; self.rules.len()];
        let mut reached: Vec<usize> = Vec::new();
        self.note_rules(expr, &mut seen, &mut reached);
        let mut next = 0;
        while let Some(&i) = reached.get(next) {
            next += 1;
            if let Some(body) = &self.rules[i].body {
                self.note_rules(body, &mut seen, &mut reached);
            }
        }
        // which of them finish: a fixpoint, later rules (the children) first
        let mut finishes: Vec<bool> = (0..self.rules.len())
            .map(|i| !seen[i] || self.rules[i].body.is_none())
            .collect();
        reached.sort_unstable();
        loop {
            let mut changed = false;
            for &i in reached.iter().rev() {
                if !finishes[i]
                    && let Some(body) = &self.rules[i].body
                    && self.derives_finite(body, &finishes)
                {
                    finishes[i] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        if self.derives_finite(expr, &finishes) {
            return None;
        }
        let location = reached
            .iter()
            .filter(|&&i| !finishes[i])
            .find_map(|&i| self.rules[i].comment.as_deref())
            .map(|comment| comment.find('#').map_or(comment, |at| &comment[at..]));
        Some(location.unwrap_or("#").to_owned())
    }

    /// Adds the table rules `expr` refers to that are not `seen` yet to `reached`.
    fn note_rules(&self, expr: &Expr, seen: &mut [bool], reached: &mut Vec<usize>) {
        let mut todo = vec![expr];
        while let Some(e) = todo.pop() {
            match e {
                Expr::Rule(name) => {
                    if let Some(&i) = self.by_name.get(name.as_str())
                        && !seen[i]
                    {
                        seen[i] = true;
                        reached.push(i);
                    }
                }
                Expr::Seq(items) | Expr::Alt(items) => todo.extend(items),
                Expr::Repeat { item, .. } => todo.push(item),
                Expr::Empty | Expr::Literal(_) | Expr::Class { .. } | Expr::AnyChar => {}
            }
        }
    }

    /// Whether `expr` derives a finite string, given which table rules do.
    fn derives_finite(&self, expr: &Expr, finishes: &[bool]) -> bool {
        match expr {
            Expr::Empty | Expr::Literal(_) | Expr::AnyChar => true,
            Expr::Class { ranges, negated } => *negated || !ranges.is_empty(),
            Expr::Rule(name) => self.by_name.get(name.as_str()).is_none_or(|&i| finishes[i]),
            Expr::Seq(items) => items.iter().all(|e| self.derives_finite(e, finishes)),
            Expr::Alt(items) => items.iter().any(|e| self.derives_finite(e, finishes)),
            Expr::Repeat { item, min, .. } => *min == 0 || self.derives_finite(item, finishes),
        }
    }

    pub(crate) fn render(&self, root_body: &Expr) -> String {
        let mut out = String::new();
        out.push_str("root ::= ");
        root_body.print_body(&mut out);
        out.push('\n');
        for rule in &self.rules {
            let (Some(name), Some(body)) = (&rule.name, &rule.body) else {
                continue;
            };
            if let Some(comment) = &rule.comment {
                // one line: a property name may hold line breaks
                out.push_str("# ");
                out.extend(
                    comment
                        .chars()
                        .map(|c| if c.is_control() { ' ' } else { c }),
                );
                out.push('\n');
            }
            push_expr_rule(&mut out, name.as_str(), body);
        }
        for (name, body) in &self.formats {
            push_expr_rule(&mut out, name, body);
        }
        let style = PrimitiveStyle {
            whitespace: self.whitespace,
            capped_digits: self.capped_digits,
        };
        let texts = primitive_texts(style);
        for (i, p) in PRIMITIVES.iter().enumerate() {
            if self.used_primitives[i] {
                push_rule(&mut out, p.name, &texts[i]);
            }
        }
        out
    }
}

/// `name ::= body` printed straight into `out`.
fn push_expr_rule(out: &mut String, name: &str, body: &Expr) {
    out.push_str(name);
    out.push_str(" ::= ");
    body.print_body(out);
    out.push('\n');
}

fn push_rule(out: &mut String, name: &str, body: &str) {
    out.push_str(name);
    out.push_str(" ::= ");
    out.push_str(body);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kebab_case() {
        assert_eq!(sanitize("get_weather args"), "get-weather-args");
        assert_eq!(sanitize("__x__"), "x");
        assert_eq!(sanitize("ünï"), "n");
        assert_eq!(sanitize("_"), "schema");
    }

    #[test]
    fn reserved_and_duplicate_names_get_suffixes() {
        let mut t = RuleTable::new(Whitespace::Spaced);
        let a = t.add("string", Expr::literal("a"), None);
        let b = t.add("x", Expr::literal("b"), None);
        let c = t.add("x", Expr::literal("c"), None);
        let d = t.add("y", Expr::literal("a"), None);
        assert_eq!(
            (a.as_str(), b.as_str(), c.as_str(), d.as_str()),
            ("string-2", "x", "x-2", "string-2")
        );
    }

    /// `a | b{0,60}`: an item generating 60 rules.
    fn a_or_b_60() -> Expr {
        let r = |n: &str| Expr::Rule(RuleName::new(n));
        Expr::alt([r("a"), Expr::repeat(r("b"), 0, Some(60))]).unwrap()
    }

    /// The limits carried over onto typed expressions: a count over llama.cpp's limit is split
    /// into exact chunks, a long optional run is chained without ambiguity, an item whose
    /// generated rules times the count pass the limit gets a rule of its own.
    #[test]
    fn repetitions_stay_within_llama_cpp_limits() {
        let mut t = RuleTable::new(Whitespace::Compact);
        let char_ = Expr::Rule(RuleName::new("char"));
        assert_eq!(
            t.repetition(char_.clone(), 0, Some(60)).to_gbnf(),
            "char{0,60}"
        );
        assert_eq!(t.repetition(char_.clone(), 0, Some(0)), Expr::Empty);
        assert_eq!(t.repetition(char_.clone(), 1, Some(1)), char_);
        // generating over 64 rules: a rule of its own, so enclosing groups stay small
        assert_eq!(
            t.repetition(char_.clone(), 0, Some(1024)).to_gbnf(),
            "char-0-1024"
        );
        // over the limit: exact chunks, then a chain of rules without ambiguity
        let e = t.repetition(char_.clone(), 4500, None);
        assert_eq!(e.to_gbnf(), "char{2000} char{2000} char{500,}");
        let e = t.repetition(char_.clone(), 0, Some(4500));
        assert_eq!(e.to_gbnf(), "char-upto-4500");
        let g = t.render(&e);
        assert!(
            g.contains("char-upto-4500 ::= char{2000} char-upto-2500 | char{0,1999}\n"),
            "{g}"
        );
        assert!(
            g.contains("char-upto-2500 ::= char{2000} char{0,500} | char{0,1999}\n"),
            "{g}"
        );
        // an item generating 61 rules repeated 40 times passes 2,000: it becomes a rule first
        let e = t.repetition(a_or_b_60(), 0, Some(40));
        assert_eq!(e.to_gbnf(), "repeat-item{0,40}");
        assert!(t.render(&e).contains("repeat-item ::= a | b{0,60}\n"));
        let e = t.repetition(a_or_b_60(), 0, Some(30));
        assert_eq!(e.to_gbnf(), "repeat-0-30");
        assert!(
            t.render(&e)
                .contains("repeat-0-30 ::= ( a | b{0,60} ){0,30}\n")
        );
    }

    #[test]
    fn only_used_primitives_are_emitted() {
        let mut t = RuleTable::new(Whitespace::Compact);
        t.primitive("integer");
        let g = t.render(&Expr::Rule(RuleName::new("integer")));
        assert!(g.contains("integral-part ::="));
        assert!(!g.contains("string ::="));
        assert!(!g.contains("space ::="));
        t.primitive("space");
        assert!(
            t.render(&Expr::Rule(RuleName::new("space")))
                .contains("space ::= \"\"\n")
        );
    }

    #[test]
    fn formats_pull_in_their_dependencies_once() {
        let mut t = RuleTable::new(Whitespace::Compact);
        let n = t.format_string("date-time").unwrap();
        assert_eq!(n, "date-time-string");
        t.format_string("date").unwrap();
        let g = t.render(&Expr::Rule(RuleName::new(n.clone())));
        for rule in [
            "\ndate-time ::=",
            "\ndate ::=",
            "\ntime ::=",
            "\nleap-year ::=",
            "\ntime-offset ::=",
            "\ndate-string ::=",
        ] {
            assert_eq!(g.matches(rule).count(), 1, "{rule} in {g}");
        }
        assert!(t.format_string("hostname").is_none());
    }
}
