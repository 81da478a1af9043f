//! How values are spelled: JSON text or Python literals, and how object members are keyed.
//!
//! The converter walks a schema once; what it emits for a value depends only on the literal
//! syntax of the grammar ([`LiteralSyntax`]) and, for an object, on how its member keys are
//! written (`KeyStyle`). JSON and Python literals share most of their syntax: double-quoted
//! strings with the escapes `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t` and `\uXXXX` (outside
//! the surrogates), numbers without a leading `+` or leading zeros, lists `[...]` and dicts with
//! string keys `{"k": v}`, whitespace between tokens. They differ in the words (`True`,
//! `False`, `None`), and in two escapes JSON has and Python reads differently: `\/` (Python
//! keeps the backslash) and surrogate pairs `\uD83D\uDE00` (Python keeps two lone surrogates).
//! Python grammars therefore use their own primitives (`py-value`, `py-string`, `py-char`,
//! ...), which never write those two escapes; every other rule (numbers, formats, patterns,
//! enum and const literals) is the same text in both.
//!
//! The pythonic call envelope writes a tool's arguments object as keyword arguments
//! (`name(a=1, b="x")`): `KeyStyle::Kwarg`, the same object lowering with `a=` in place of
//! `"a": ` and no braces.

use crate::expr::Expr;

/// The literal syntax a grammar's values are written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LiteralSyntax {
    /// JSON text (RFC 8259).
    #[default]
    Json,
    /// Python literals, as `ast.literal_eval` reads them and as the pythonic envelope's parser
    /// reads them: `True`/`False`/`None`, double-quoted strings, lists and dicts.
    Python,
}

impl LiteralSyntax {
    /// The name of the primitive rule standing for the JSON primitive `json_name` in this
    /// syntax (`string` is `py-string` in Python; numbers and whitespace are shared).
    pub(crate) fn primitive(self, json_name: &'static str) -> &'static str {
        match self {
            LiteralSyntax::Json => json_name,
            LiteralSyntax::Python => match json_name {
                "value" => "py-value",
                "object" => "py-dict",
                "array" => "py-list",
                "string" => "py-string",
                "char" => "py-char",
                "boolean" => "py-boolean",
                "null" => "py-none",
                shared => shared,
            },
        }
    }

    /// The spelling of `null`.
    pub(crate) fn null(self) -> &'static str {
        match self {
            LiteralSyntax::Json => "null",
            LiteralSyntax::Python => "None",
        }
    }

    /// The spelling of a boolean.
    pub(crate) fn boolean(self, value: bool) -> &'static str {
        match (self, value) {
            (LiteralSyntax::Json, true) => "true",
            (LiteralSyntax::Json, false) => "false",
            (LiteralSyntax::Python, true) => "True",
            (LiteralSyntax::Python, false) => "False",
        }
    }
}

/// How the members of an object are keyed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum KeyStyle {
    /// `"name": value`, between braces (JSON objects, Python dicts).
    #[default]
    DictKey,
    /// `name=value`, no braces: a Python call's keyword arguments (the caller writes the
    /// parentheses). Names must be Python identifiers.
    Kwarg,
}

/// True when `name` is an ASCII Python identifier: usable as a keyword argument.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Python's reserved words: identifiers lexically, but `from=1` is not a keyword argument
/// (a syntax error). Undeclared keyword argument names are never one of them; a declared
/// name that is one (`from`, `class`: common in tool schemas) stays as declared, since the
/// tool defines it.
pub const PYTHON_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Characters that may start an identifier, as sorted ranges.
const IDENTIFIER_FIRST: &[(u32, u32)] = &[
    ('A' as u32, 'Z' as u32),
    ('_' as u32, '_' as u32),
    ('a' as u32, 'z' as u32),
];
/// Characters that may continue an identifier, as sorted ranges.
const IDENTIFIER_NEXT: &[(u32, u32)] = &[
    ('0' as u32, '9' as u32),
    ('A' as u32, 'Z' as u32),
    ('_' as u32, '_' as u32),
    ('a' as u32, 'z' as u32),
];

/// `[A-Za-z0-9_]*`: the rest of an identifier.
fn identifier_rest() -> Expr {
    Expr::repeat(
        Expr::Class {
            ranges: IDENTIFIER_NEXT.to_vec(),
            negated: false,
        },
        0,
        None,
    )
}

/// Any identifier followed by `=`, except the `excluded` ones (identifiers themselves) and
/// [`PYTHON_KEYWORDS`]: a keyword argument's name for an undeclared member. A trie over the excluded names, each
/// level taking one of their characters or any other identifier character (then anything),
/// so every name has one parse. `None` when an excluded name is longer than
/// [`MAX_EXCLUDED_IDENTIFIER`] characters (the trie nests one group per character).
pub(crate) fn identifier_not_in(excluded: &[&str]) -> Option<Expr> {
    if excluded
        .iter()
        .any(|n| n.chars().count() > MAX_EXCLUDED_IDENTIFIER)
    {
        return None;
    }
    #[derive(Default)]
    struct Node {
        end: bool,
        children: std::collections::BTreeMap<char, Node>,
    }
    let mut root = Node::default();
    for name in excluded.iter().chain(PYTHON_KEYWORDS) {
        let mut node = &mut root;
        for c in name.chars() {
            node = node.children.entry(c).or_default();
        }
        node.end = true;
    }
    fn build(node: &Node, first: bool) -> Expr {
        let mut alts = Vec::new();
        if !first && !node.end {
            alts.push(Expr::literal("="));
        }
        let allowed = if first {
            IDENTIFIER_FIRST
        } else {
            IDENTIFIER_NEXT
        };
        let taken: Vec<(u32, u32)> = node
            .children
            .keys()
            .map(|&c| (c as u32, c as u32))
            .collect();
        let others = crate::strings::intersect(
            allowed,
            &crate::strings::complement(&crate::strings::normalize(taken), 0x10FFFF),
        );
        if !others.is_empty() {
            alts.push(Expr::seq([
                Expr::Class {
                    ranges: others,
                    negated: false,
                },
                identifier_rest(),
                Expr::literal("="),
            ]));
        }
        for (c, child) in &node.children {
            alts.push(Expr::seq([
                Expr::literal(c.to_string()),
                build(child, false),
            ]));
        }
        // `others` is empty only when every identifier character starts an excluded name,
        // and then a child exists
        Expr::alt(alts).unwrap_or(Expr::Empty)
    }
    Some(build(&root, true))
}

/// The longest declared keyword argument name [`identifier_not_in`] excludes from undeclared
/// ones (llama.cpp refuses groups nested more than 128 deep).
pub(crate) const MAX_EXCLUDED_IDENTIFIER: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        assert!(is_identifier("a_1") && is_identifier("_") && is_identifier("Ab"));
        assert!(!is_identifier("") && !is_identifier("1a") && !is_identifier("a-b"));
        assert!(!is_identifier("first name") && !is_identifier("é"));
    }

    #[test]
    fn other_identifiers() {
        // the first level: every identifier start but those of the excluded names
        let any = identifier_not_in(&[]).unwrap().to_gbnf();
        assert!(
            any.starts_with("[A-EG-MO-SU-Z_hjkmqsuvxz] [0-9A-Z_a-z]* \"=\""),
            "{any}"
        );
        let long = "a".repeat(MAX_EXCLUDED_IDENTIFIER + 1);
        assert!(identifier_not_in(&[long.as_str()]).is_none());
        assert!(identifier_not_in(&[&long[1..]]).is_some());
    }
}
