//! Typed GBNF expressions and their one printer.
//!
//! The converter builds rule bodies as [`Expr`] values and prints them once, at the end; the
//! printer parenthesises by precedence (alternation < sequence < repetition), so no caller
//! writes a parenthesis, and the limits arithmetic ([`Expr::generated_rules`]) reads the typed
//! value instead of scanning emitted text.
//!
//! Why not `toolrail-gbnf`'s grammar as the expression type: that is the *compiled* form
//! (llama.cpp's elements after its repetition rewrite, `x{2,5}` already expanded into
//! generated rules), while the converter must decide on the surface form before llama.cpp
//! rewrites it (how many rules a `{m,n}` will generate is what keeps a grammar within
//! llama.cpp's limits); and this crate depends on no other toolrail crate (ARCHITECTURE.md).
//!
//! The envelopes (`toolrail-tools`) build their rules with the same values, named through
//! [`crate::SchemaConverter::reserve_rule_name`] and [`crate::SchemaConverter::add_rule`], and
//! hand the root to [`crate::SchemaConverter::finish`]: the converter takes no GBNF text.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::gbnf_text::{push_char_class, push_gbnf_literal};

/// The name of a rule of the grammar under construction, as the rule table handed it out.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RuleName(Arc<str>);

impl RuleName {
    /// A rule name the rule table chose (unique in its grammar) or a fixed primitive's name.
    /// Only this crate makes names, so every name comes from the grammar's one namespace.
    /// Shared, not copied, by every reference to the rule (names from `$defs` keys can be long
    /// and a large schema refers to them thousands of times).
    pub(crate) fn new(name: impl Into<String>) -> Self {
        Self(Arc::from(name.into()))
    }

    /// The name as written in the grammar.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RuleName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<RuleName> for String {
    fn from(name: RuleName) -> Self {
        name.0.to_string()
    }
}

/// One GBNF expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// The empty string, `""`.
    Empty,
    /// Text matched exactly (printed as a GBNF string literal).
    Literal(String),
    /// A character class over disjoint code point ranges (`[^...]` when negated).
    Class {
        /// Inclusive code point ranges, printed in this order: sorted where they come from a
        /// set computation, in the order a reader expects (`[a-zA-Z0-9]`) in the format rules.
        ranges: Vec<(u32, u32)>,
        /// Matches every character outside the ranges instead.
        negated: bool,
    },
    /// Any one character, `.`.
    AnyChar,
    /// A reference to a rule.
    Rule(RuleName),
    /// The items one after the other (no items: the empty string).
    Seq(Vec<Expr>),
    /// One of the alternatives (at least two; see [`Expr::alt`]).
    Alt(Vec<Expr>),
    /// `item` repeated `min` to `max` times (`max: None`: unbounded), `max >= min`.
    Repeat {
        /// What repeats.
        item: Box<Expr>,
        /// Fewest copies.
        min: u32,
        /// Most copies, or unbounded.
        max: Option<u32>,
    },
}

impl From<RuleName> for Expr {
    fn from(name: RuleName) -> Self {
        Expr::Rule(name)
    }
}

/// Where an expression is printed: what binds tighter around it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A rule body or an alternative: nothing binds tighter.
    Top,
    /// An item of a sequence: an alternation needs parentheses.
    SeqItem,
    /// The operand of a repetition operator: anything but an atom needs parentheses.
    Operand,
}

impl Expr {
    /// A reference to the rule `name`.
    pub fn rule(name: &RuleName) -> Self {
        Expr::Rule(name.clone())
    }

    /// Text matched exactly.
    pub fn literal(text: impl Into<String>) -> Self {
        let text = text.into();
        if text.is_empty() {
            Expr::Empty
        } else {
            Expr::Literal(text)
        }
    }

    /// A sequence, flattening nested sequences and dropping empty items.
    pub fn seq(items: impl IntoIterator<Item = Expr>) -> Self {
        let mut out = Vec::new();
        for item in items {
            match item {
                Expr::Empty => {}
                Expr::Seq(inner) => out.extend(inner),
                other => out.push(other),
            }
        }
        match out.len() {
            0 => Expr::Empty,
            1 => out.pop().unwrap_or(Expr::Empty),
            _ => Expr::Seq(out),
        }
    }

    /// An alternation, flattening nested alternations; `None` for no alternative (matches
    /// nothing, which GBNF cannot write), the alternative itself for one.
    pub fn alt(alternatives: impl IntoIterator<Item = Expr>) -> Option<Self> {
        let mut out = Vec::new();
        for a in alternatives {
            match a {
                Expr::Alt(inner) => out.extend(inner),
                other => out.push(other),
            }
        }
        match out.len() {
            0 => None,
            1 => out.pop(),
            _ => Some(Expr::Alt(out)),
        }
    }

    /// `item{min,max}` in its simplest form: nothing for a maximum of 0, the item itself for
    /// exactly one copy. A maximum below the minimum is read as the minimum.
    pub fn repeat(item: Expr, min: u32, max: Option<u32>) -> Self {
        let max = max.map(|m| m.max(min));
        match (min, max) {
            (_, Some(0)) => Expr::Empty,
            (1, Some(1)) => item,
            _ if item == Expr::Empty => Expr::Empty,
            _ => Expr::Repeat {
                item: Box::new(item),
                min,
                max,
            },
        }
    }

    /// Whether the expression is the empty string.
    pub fn is_empty(&self) -> bool {
        match self {
            Expr::Empty => true,
            Expr::Seq(items) => items.iter().all(Expr::is_empty),
            _ => false,
        }
    }

    /// The expression as GBNF text (a rule body: no outer parentheses).
    pub fn to_gbnf(&self) -> String {
        let mut out = String::new();
        self.print(Place::Top, &mut out, usize::MAX);
        out
    }

    /// Appends the expression as a rule body to `out` (what [`Expr::to_gbnf`] returns, without
    /// a string of its own: the rule table prints a whole grammar into one buffer).
    pub(crate) fn print_body(&self, out: &mut String) {
        self.print(Place::Top, out, usize::MAX);
    }

    /// The expression as GBNF text to be placed in a sequence written as text (an
    /// alternation comes parenthesised): for a user's own argument grammar, whose rules stay
    /// text and refer to the converter's rules by name.
    pub fn to_gbnf_item(&self) -> String {
        let mut out = String::new();
        self.print(Place::SeqItem, &mut out, usize::MAX);
        out
    }

    /// [`Expr::to_gbnf_item`] when it is at most `limit` bytes long, else `None` (printing
    /// stops soon after the limit: deciding whether a fragment is short stays cheap).
    pub(crate) fn to_gbnf_item_within(&self, limit: usize) -> Option<String> {
        let mut out = String::new();
        self.print(Place::SeqItem, &mut out, limit);
        (out.len() <= limit).then_some(out)
    }

    fn needs_group(&self, place: Place) -> bool {
        match self {
            Expr::Alt(_) => place != Place::Top,
            Expr::Seq(_) | Expr::Repeat { .. } => place == Place::Operand,
            Expr::Empty | Expr::Literal(_) | Expr::Class { .. } | Expr::AnyChar | Expr::Rule(_) => {
                false
            }
        }
    }

    /// Prints into `out`, stopping early once `out` is longer than `limit`.
    ///
    /// One call per level of the expression: the converter builds expressions as deep as the
    /// bounded inputs they come from (schema nesting, pattern nesting, digits of a bound).
    fn print(&self, place: Place, out: &mut String, limit: usize) {
        if out.len() > limit {
            return;
        }
        if self.needs_group(place) {
            out.push_str("( ");
            self.print(Place::Top, out, limit);
            out.push_str(" )");
            return;
        }
        match self {
            Expr::Empty => out.push_str("\"\""),
            Expr::Literal(text) => push_gbnf_literal(text, out),
            Expr::Class { ranges, negated } => push_char_class(ranges, *negated, out),
            Expr::AnyChar => out.push('.'),
            Expr::Rule(name) => out.push_str(name.as_str()),
            Expr::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    item.print(Place::SeqItem, out, limit);
                }
            }
            Expr::Alt(alternatives) => {
                // an empty first alternative is written as nothing (`| " "`), as llama.cpp's
                // own `space` rule is
                let empty_first = alternatives.first() == Some(&Expr::Empty);
                for (i, a) in alternatives.iter().enumerate() {
                    match i {
                        0 if empty_first => {}
                        0 => a.print(Place::Top, out, limit),
                        1 if empty_first => {
                            out.push_str("| ");
                            a.print(Place::Top, out, limit);
                        }
                        _ => {
                            out.push_str(" | ");
                            a.print(Place::Top, out, limit);
                        }
                    }
                }
            }
            Expr::Repeat { item, min, max } => {
                item.print(Place::Operand, out, limit);
                // `write!` into a String cannot fail
                let _ = match (min, max) {
                    (0, None) => write!(out, "*"),
                    (1, None) => write!(out, "+"),
                    (m, None) => write!(out, "{{{m},}}"),
                    (0, Some(1)) => write!(out, "?"),
                    (m, Some(n)) if m == n => write!(out, "{{{m}}}"),
                    (m, Some(n)) => write!(out, "{{{m},{n}}}"),
                };
            }
        }
    }

    /// How many rules llama.cpp's parser generates for this expression printed as a rule body
    /// (see [`crate::limits`]): one per parenthesised group, one per `*`, `+`, `?` and `{m,}`,
    /// and `n - m` per `{m,n}`. Saturates instead of overflowing.
    pub fn generated_rules(&self) -> u64 {
        self.rules_at(Place::Top)
    }

    /// [`Expr::generated_rules`] when printed as the operand of a repetition operator (a
    /// group counts itself).
    pub(crate) fn operand_rules(&self) -> u64 {
        self.rules_at(Place::Operand)
    }

    fn rules_at(&self, place: Place) -> u64 {
        let group = u64::from(self.needs_group(place));
        let inner = match self {
            Expr::Empty | Expr::Literal(_) | Expr::Class { .. } | Expr::AnyChar | Expr::Rule(_) => {
                0
            }
            Expr::Seq(items) => items
                .iter()
                .fold(0u64, |n, i| n.saturating_add(i.rules_at(Place::SeqItem))),
            Expr::Alt(alternatives) => alternatives
                .iter()
                .fold(0u64, |n, a| n.saturating_add(a.rules_at(Place::Top))),
            Expr::Repeat { item, min, max } => {
                let own = match max {
                    None => 1,
                    Some(n) if n == min => 0,
                    Some(n) => u64::from(n - min),
                };
                item.rules_at(Place::Operand).saturating_add(own)
            }
        };
        group.saturating_add(inner)
    }
}

/// An expression no text matches (GBNF cannot write "nothing": a class of no character).
pub(crate) fn never() -> Expr {
    Expr::Class {
        ranges: vec![(0, 0x10FFFF)],
        negated: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str) -> Expr {
        Expr::Rule(RuleName::new(name))
    }

    #[test]
    fn prints_with_parentheses_only_where_precedence_needs_them() {
        let alt = Expr::alt([r("a"), r("b")]).unwrap();
        assert_eq!(alt.to_gbnf(), "a | b");
        let seq = Expr::seq([Expr::literal("x"), alt.clone(), r("c")]);
        assert_eq!(seq.to_gbnf(), r#""x" ( a | b ) c"#);
        assert_eq!(
            Expr::repeat(seq.clone(), 0, None).to_gbnf(),
            r#"( "x" ( a | b ) c )*"#
        );
        assert_eq!(Expr::repeat(alt, 0, Some(1)).to_gbnf(), "( a | b )?");
        assert_eq!(Expr::repeat(r("a"), 2, Some(5)).to_gbnf(), "a{2,5}");
        assert_eq!(Expr::repeat(r("a"), 3, Some(3)).to_gbnf(), "a{3}");
        assert_eq!(Expr::repeat(r("a"), 3, None).to_gbnf(), "a{3,}");
        assert_eq!(Expr::repeat(r("a"), 1, None).to_gbnf(), "a+");
        let nested = Expr::repeat(Expr::repeat(r("a"), 2, Some(2)), 0, None);
        assert_eq!(nested.to_gbnf(), "( a{2} )*");
        assert_eq!(
            Expr::repeat(Expr::literal("ab"), 0, None).to_gbnf(),
            r#""ab"*"#
        );
        let class = Expr::Class {
            ranges: vec![(0x22, 0x22), (0x5C, 0x5C), (0, 0x1F)],
            negated: true,
        };
        assert_eq!(class.to_gbnf(), r#"[^"\\\x00-\x1F]"#);
        assert_eq!(
            Expr::alt([Expr::seq([r("a"), r("b")]), Expr::Empty])
                .unwrap()
                .to_gbnf(),
            r#"a b | """#
        );
        let spaced = Expr::alt([Expr::Empty, Expr::literal(" ")]).unwrap();
        assert_eq!(spaced.to_gbnf(), r#"| " ""#);
        assert_eq!(
            Expr::seq([r("x"), Expr::repeat(spaced, 0, None)]).to_gbnf(),
            r#"x ( | " " )*"#
        );
    }

    #[test]
    fn bounded_printing_stops_past_the_limit() {
        let alt = Expr::alt([r("a"), r("b")]).unwrap();
        assert_eq!(alt.to_gbnf_item_within(9).as_deref(), Some("( a | b )"));
        assert_eq!(alt.to_gbnf_item_within(8), None);
        let long = Expr::seq((0..100).map(|_| Expr::literal("xy")));
        assert_eq!(long.to_gbnf_item_within(40), None);
        assert_eq!(
            long.to_gbnf_item_within(usize::MAX),
            Some(long.to_gbnf_item())
        );
    }

    #[test]
    fn constructors_simplify() {
        assert_eq!(Expr::seq([]), Expr::Empty);
        assert_eq!(Expr::seq([Expr::Empty, r("a"), Expr::Empty]), r("a"));
        assert_eq!(
            Expr::seq([Expr::seq([r("a"), r("b")]), r("c")]),
            Expr::Seq(vec![r("a"), r("b"), r("c")])
        );
        assert_eq!(Expr::alt([]), None);
        assert_eq!(Expr::alt([r("a")]), Some(r("a")));
        assert_eq!(Expr::repeat(r("a"), 0, Some(0)), Expr::Empty);
        assert_eq!(Expr::repeat(r("a"), 1, Some(1)), r("a"));
        assert_eq!(Expr::repeat(r("a"), 3, Some(1)).to_gbnf(), "a{3}");
        assert_eq!(Expr::literal(""), Expr::Empty);
        assert!(Expr::seq([Expr::Empty]).is_empty());
    }

    /// The typed count follows llama.cpp's arithmetic: one rule per group, per `*`, `+`, `?`
    /// and `{m,}`, and `n - m` per `{m,n}`.
    #[test]
    fn counts_rules_as_llama_cpp_generates_them() {
        let string = Expr::seq([
            Expr::literal("\""),
            Expr::repeat(r("char"), 0, Some(1024)),
            Expr::literal("\""),
        ]);
        assert_eq!(string.generated_rules(), 1024);
        // ( "\"" char{0,1024} "\"" ( "," space "\"" char{0,1024} "\"" )* )?
        let list = Expr::repeat(
            Expr::seq([
                string.clone(),
                Expr::repeat(
                    Expr::seq([Expr::literal(","), r("space"), string.clone()]),
                    0,
                    None,
                ),
            ]),
            0,
            Some(1),
        );
        assert_eq!(list.generated_rules(), 1 + 1 + 1024 + 1 + 1 + 1024);
        let cases = [
            (r("a"), 0, 0),
            (Expr::repeat(r("x"), 3, Some(3)), 0, 1),
            (Expr::repeat(r("x"), 3, None), 1, 2),
            (Expr::repeat(r("x"), 3, Some(5)), 2, 3),
            (
                Expr::repeat(
                    Expr::seq([Expr::literal(","), r("space"), r("item")]),
                    0,
                    None,
                ),
                2,
                3,
            ),
            // ( a | b{0,9} ){2,4}: the group, its two optional copies, b's nine
            (
                Expr::repeat(
                    Expr::alt([r("a"), Expr::repeat(r("b"), 0, Some(9))]).unwrap(),
                    2,
                    Some(4),
                ),
                12,
                13,
            ),
            (
                Expr::seq([
                    Expr::alt([r("a"), r("b")]).unwrap(),
                    Expr::repeat(r("c"), 3, None),
                ]),
                2,
                3,
            ),
        ];
        for (e, rules, as_operand) in cases {
            let text = e.to_gbnf();
            assert_eq!(e.generated_rules(), rules, "{text}");
            assert_eq!(e.operand_rules(), as_operand, "{text}");
        }
    }
}
