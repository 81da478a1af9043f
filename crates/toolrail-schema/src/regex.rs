//! `pattern` (ECMA-262 regular expressions) → GBNF over the JSON-encoded string.
//!
//! The pattern is first rewritten where ECMA-262 and Rust's regex syntax disagree (`\d`, `\w`,
//! `\s` and `.` are ASCII/ECMA sets, not Unicode ones), then parsed into HIR with `regex-syntax`
//! and translated node by node. JSON Schema patterns are unanchored ("contains"): a branch not
//! anchored with `^` gets `char*` in front, one not anchored with `$` gets `char*` behind.
//! Anchors anywhere else, look-arounds, word boundaries and back-references are unsupported.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

use super::expr::Expr;
use super::rules::RuleTable;
use super::strings::{self, encoded_char_set, normalize};

/// ECMA-262 `\s`: white space and line terminators.
const ECMA_SPACE: &str =
    r"\t\n\x0B\x0C\r \xA0\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";

/// Rewrites ECMA-262 shorthand classes into explicit Rust classes.
fn ecma_to_rust(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(n) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let rep = match n {
                    'd' => Some("[0-9]".to_string()),
                    'D' => Some("[^0-9]".to_string()),
                    'w' => Some("[A-Za-z0-9_]".to_string()),
                    'W' => Some("[^A-Za-z0-9_]".to_string()),
                    's' => Some(format!("[{ECMA_SPACE}]")),
                    'S' => Some(format!("[^{ECMA_SPACE}]")),
                    '/' => Some("/".to_string()),
                    _ => None,
                };
                match rep {
                    Some(r) => out.push_str(&r),
                    None => {
                        out.push('\\');
                        out.push(n);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                // a leading `]` or `^]` is literal in Rust but an empty class in ECMA; keep Rust's
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
            }
            '[' => out.push_str("\\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '.' if !in_class => out.push_str(r"[^\n\r\x{2028}\x{2029}]"),
            '&' | '~' | '-' if in_class && chars.peek() == Some(&c) => {
                // Rust class set operators (`&&`, `~~`, `--`) are plain characters in ECMA
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Translates a JSON Schema `pattern` into GBNF for a whole JSON string (quotes included).
/// Characters and repetitions are written through `rules` (the `char` primitive, and
/// [`RuleTable::repetition`] for llama.cpp's limits). Errors are messages for the caller.
pub(crate) fn pattern_to_gbnf(
    pattern: &str,
    rules: &mut RuleTable,
) -> Result<Option<Expr>, String> {
    hir_to_gbnf(&parse(pattern)?, rules)
}

/// The HIR of an ECMA-262 pattern (after [`ecma_to_rust`]).
pub(crate) fn parse(pattern: &str) -> Result<Hir, String> {
    regex_syntax::ParserBuilder::new()
        .build()
        .parse(&ecma_to_rust(pattern))
        .map_err(|e| {
            format!(
                "cannot translate /{pattern}/: {}",
                first_line(&e.to_string())
            )
        })
}

/// Whether `pattern` (ECMA-262, unanchored as JSON Schema reads it) matches `text`, as the
/// grammar of [`pattern_to_gbnf`] decides it (the same rewriting of ECMA classes).
pub(crate) fn is_match(pattern: &str, text: &str) -> Result<bool, String> {
    Ok(compile(pattern)?.is_match(text))
}

/// `pattern` compiled for [`is_match`]'s test (callers testing many names keep it).
pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(&ecma_to_rust(pattern)).map_err(|e| {
        format!(
            "cannot translate /{pattern}/: {}",
            first_line(&e.to_string())
        )
    })
}

/// What the strings *not* matching a pattern are, when that is simple to say.
#[derive(Debug)]
pub(crate) enum Complement {
    /// The pattern matches every string (e.g. `.*`, `^`, ``).
    Nothing,
    /// The grammar of the strings the pattern does not match (a whole JSON string, quotes
    /// included), or None when every string matches after all.
    Grammar(Option<Expr>),
}

/// The complement of `pattern` for the shapes real schemas use for property names: an
/// unanchored pattern that matches the empty string (everything), `^C*$` and `^C+$` for a
/// character class `C` (complement: some character outside `C`, and the empty string for `+`),
/// and an unanchored `C` or `C+` (complement: `^[^C]*$`). None for any other shape.
pub(crate) fn complement_to_gbnf(
    pattern: &str,
    rules: &mut RuleTable,
) -> Result<Option<Complement>, String> {
    use regex_syntax::hir::Repetition;
    let hir = parse(pattern)?;
    let mut items: Vec<&Hir> = match hir.kind() {
        HirKind::Alternation(_) => return Ok(None),
        HirKind::Concat(xs) => xs.iter().collect(),
        _ => vec![&hir],
    };
    items.retain(|h| !matches!(h.kind(), HirKind::Empty));
    let start = items
        .first()
        .is_some_and(|h| matches!(h.kind(), HirKind::Look(Look::Start)));
    if start {
        items.remove(0);
    }
    let end = items
        .last()
        .is_some_and(|h| matches!(h.kind(), HirKind::Look(Look::End)));
    if end {
        items.pop();
    }
    if !start
        && !end
        && hir.properties().look_set().is_empty()
        && hir.properties().minimum_len() == Some(0)
    {
        return Ok(Some(Complement::Nothing));
    }
    // the single class `C` and the least number of its characters, for `C`, `C*`, `C+`
    let [item] = items.as_slice() else {
        return Ok(None);
    };
    let (class, min) = match item.kind() {
        HirKind::Class(Class::Unicode(c)) => (c.clone(), 1),
        HirKind::Repetition(r) if r.max.is_none() && r.min <= 1 => match r.sub.kind() {
            HirKind::Class(Class::Unicode(c)) => (c.clone(), r.min),
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    let mut outside = class;
    outside.negate();
    let outside = Hir::class(Class::Unicode(outside));
    let complement = match (start, end) {
        // ^C*$ / ^C+$: some character outside C (or, for +, nothing at all)
        (true, true) if min == 0 => outside,
        (true, true) => Hir::alternation(vec![
            Hir::concat(vec![Hir::look(Look::Start), Hir::look(Look::End)]),
            outside,
        ]),
        // C / C+ anywhere: no character of C at all
        (false, false) if min == 1 => Hir::concat(vec![
            Hir::look(Look::Start),
            Hir::repetition(Repetition {
                min: 0,
                max: None,
                greedy: true,
                sub: Box::new(outside),
            }),
            Hir::look(Look::End),
        ]),
        _ => return Ok(None),
    };
    Ok(Some(Complement::Grammar(hir_to_gbnf(&complement, rules)?)))
}

/// The least and most characters (code points) a match of `h` has (None: unbounded).
///
/// One call per level of the pattern's nesting, which [`parse`] holds to regex-syntax's limit
/// (250: a deeper pattern is an error naming it), as for [`translate`].
fn char_lengths(h: &Hir) -> (u64, Option<u64>) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => (0, Some(0)),
        HirKind::Literal(lit) => {
            let n = String::from_utf8_lossy(&lit.0).chars().count() as u64;
            (n, Some(n))
        }
        HirKind::Class(_) => (1, Some(1)),
        HirKind::Capture(c) => char_lengths(&c.sub),
        HirKind::Repetition(r) => {
            let (lo, hi) = char_lengths(&r.sub);
            let max = match (hi, r.max) {
                (Some(0), _) => Some(0),
                (Some(h), Some(m)) => h.checked_mul(u64::from(m)),
                _ => None,
            };
            (lo.saturating_mul(u64::from(r.min)), max)
        }
        HirKind::Concat(xs) => xs.iter().fold((0, Some(0)), |(lo, hi), x| {
            let (a, b) = char_lengths(x);
            (
                lo.saturating_add(a),
                hi.zip(b).and_then(|(p, q)| p.checked_add(q)),
            )
        }),
        HirKind::Alternation(xs) => {
            let all: Vec<(u64, Option<u64>)> = xs.iter().map(char_lengths).collect();
            let lo = all.iter().map(|x| x.0).min().unwrap_or(0);
            let hi = all.iter().try_fold(0, |m, x| x.1.map(|h| m.max(h)));
            (lo, hi)
        }
    }
}

/// A pattern together with `minLength`/`maxLength` (`min`, `max`), exactly, for two shapes:
/// a pattern whose matches already satisfy the bounds (anchored at both ends with lengths
/// inside them, or unanchored without `maxLength` and with `minLength` at most its shortest
/// match), and `^C*$`, `^C+$`, `^C{a,b}$` for a character class `C` (the repetition bounds
/// and the length bounds intersected). `Ok(None)`: not one of these shapes; `Ok(Some(None))`:
/// no string satisfies both.
pub(crate) fn pattern_with_lengths(
    pattern: &str,
    min: u64,
    max: Option<u64>,
    rules: &mut RuleTable,
) -> Result<Option<Option<Expr>>, String> {
    use regex_syntax::hir::Repetition;
    let hir = parse(pattern)?;
    let props = hir.properties();
    let anchored = props.look_set_prefix().contains(Look::Start)
        && props.look_set_suffix().contains(Look::End);
    let (lo, hi) = char_lengths(&hir);
    let implied = if anchored {
        lo >= min
            && match (hi, max) {
                (_, None) => true,
                (Some(h), Some(m)) => h <= m,
                (None, Some(_)) => false,
            }
    } else {
        max.is_none() && lo >= min
    };
    if implied {
        return hir_to_gbnf(&hir, rules).map(Some);
    }
    let mut items: Vec<&Hir> = match hir.kind() {
        HirKind::Concat(xs) => xs.iter().collect(),
        _ => return Ok(None),
    };
    items.retain(|h| !matches!(h.kind(), HirKind::Empty));
    let [first, item, last] = items.as_slice() else {
        return Ok(None);
    };
    if !matches!(first.kind(), HirKind::Look(Look::Start))
        || !matches!(last.kind(), HirKind::Look(Look::End))
    {
        return Ok(None);
    }
    let (class, r_min, r_max) = match item.kind() {
        HirKind::Repetition(r) if matches!(r.sub.kind(), HirKind::Class(_)) => (
            r.sub.as_ref().clone(),
            u64::from(r.min),
            r.max.map(u64::from),
        ),
        _ => return Ok(None),
    };
    let new_min = r_min.max(min);
    let new_max = match (r_max, max) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if new_max.is_some_and(|m| m < new_min) {
        return Ok(Some(None));
    }
    let to_u32 = |v: u64| u32::try_from(v).map_err(|_| format!("length {v} is too large"));
    let repetition = Hir::repetition(Repetition {
        min: to_u32(new_min)?,
        max: new_max.map(to_u32).transpose()?,
        greedy: true,
        sub: Box::new(class),
    });
    let whole = Hir::concat(vec![
        Hir::look(Look::Start),
        repetition,
        Hir::look(Look::End),
    ]);
    hir_to_gbnf(&whole, rules).map(Some)
}

/// [`pattern_to_gbnf`] of a parsed pattern.
fn hir_to_gbnf(hir: &Hir, rules: &mut RuleTable) -> Result<Option<Expr>, String> {
    let branches: Vec<&Hir> = match hir.kind() {
        HirKind::Alternation(bs) => bs.iter().collect(),
        _ => vec![hir],
    };
    let mut alts: Vec<Expr> = Vec::new();
    for branch in branches {
        let mut items: Vec<&Hir> = match branch.kind() {
            HirKind::Concat(xs) => xs.iter().collect(),
            _ => vec![branch],
        };
        items.retain(|h| !matches!(h.kind(), HirKind::Empty));
        let mut start = false;
        while let Some(h) = items.first() {
            if matches!(h.kind(), HirKind::Look(Look::Start)) {
                start = true;
                items.remove(0);
            } else {
                break;
            }
        }
        let mut end = false;
        while let Some(h) = items.last() {
            if matches!(h.kind(), HirKind::Look(Look::End)) {
                end = true;
                items.pop();
            } else {
                break;
            }
        }
        let any_chars = |rules: &mut RuleTable| Expr::repeat(rules.primitive_rule("char"), 0, None);
        let mut parts = Vec::new();
        if !start {
            parts.push(any_chars(rules));
        }
        let unanchored_empty = !start && items.is_empty();
        let mut never = false;
        for h in items {
            match translate(h, rules, 1)? {
                Some(t) => parts.push(t),
                None => never = true,
            }
        }
        if !end && !unanchored_empty {
            parts.push(any_chars(rules));
        }
        if never {
            continue;
        }
        let branch = Expr::seq(parts);
        if alts.last() != Some(&branch) {
            alts.push(branch);
        }
    }
    let quote = || Expr::literal("\"");
    Ok(Expr::alt(alts).map(|content| Expr::seq([quote(), content, quote()])))
}

fn first_line(s: &str) -> String {
    s.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// The largest total repetition count the converter writes for one construct (a length or
/// item-count bound, or a `pattern` repetition with its enclosing repetitions multiplied).
///
/// llama.cpp expands every `x{m,n}` into copies of `x` (at most 2000 per `{m,n}`; the converter
/// chains chunks of 2000 above that, see [`crate::limits`]), so the compiled grammar grows with the count: at 10^7 a
/// grammar takes gigabytes to check, and deeper chains overflow stacks. Bounds above this limit
/// are an error (or, in lenient mode, dropped with a warning when dropping only widens the
/// grammar).
pub const MAX_REPEAT_TOTAL: u64 = 100_000;

/// `mult` is the product of the counts of the enclosing repetitions (llama.cpp expands nested
/// repetitions into that many copies).
fn translate(h: &Hir, rules: &mut RuleTable, mult: u64) -> Result<Option<Expr>, String> {
    Ok(match h.kind() {
        HirKind::Empty => Some(Expr::Empty),
        HirKind::Literal(lit) => {
            let text = std::str::from_utf8(&lit.0)
                .map_err(|_| "pattern literal is not UTF-8".to_string())?;
            Some(strings::encoded_literal(text))
        }
        HirKind::Class(Class::Unicode(c)) => {
            let ranges: Vec<(u32, u32)> = c
                .ranges()
                .iter()
                .map(|r| (r.start() as u32, r.end() as u32))
                .collect();
            encoded_char_set(&normalize(ranges), &mut || rules.primitive_rule("char"))
        }
        HirKind::Class(Class::Bytes(_)) => return Err("byte classes are unsupported".into()),
        HirKind::Look(look) => {
            return Err(format!(
                "anchor or assertion {look:?} inside the pattern is unsupported"
            ));
        }
        HirKind::Repetition(rep) => {
            let count = u64::from(rep.max.unwrap_or(rep.min).max(rep.min)).max(1);
            let total = mult.saturating_mul(count);
            if total > MAX_REPEAT_TOTAL {
                let max = rep.max.map(|m| m.to_string()).unwrap_or_default();
                return Err(format!(
                    "repetition {{{},{max}}} makes {total} copies (nested repetitions multiply); \
                     the limit is {MAX_REPEAT_TOTAL}",
                    rep.min
                ));
            }
            match translate(&rep.sub, rules, total)? {
                Some(sub) => Some(rules.repetition(sub, rep.min, rep.max)),
                // x{0,n} of nothing matches the empty string
                None if rep.min == 0 => Some(Expr::Empty),
                None => None,
            }
        }
        HirKind::Capture(cap) => translate(&cap.sub, rules, mult)?,
        HirKind::Concat(xs) => {
            let mut parts = Vec::new();
            for x in xs {
                match translate(x, rules, mult)? {
                    Some(p) => parts.push(p),
                    None => return Ok(None),
                }
            }
            Some(Expr::seq(parts))
        }
        HirKind::Alternation(xs) => {
            let mut parts = Vec::new();
            for x in xs {
                if let Some(p) = translate(x, rules, mult)? {
                    parts.push(p);
                }
            }
            Expr::alt(parts)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(p: &str) -> String {
        pattern_to_gbnf(p, &mut table()).unwrap().unwrap().to_gbnf()
    }

    fn table() -> RuleTable {
        RuleTable::new(crate::options::Whitespace::Spaced)
    }

    #[test]
    fn anchored_and_unanchored() {
        assert_eq!(conv("^abc$"), r#""\"" "abc" "\"""#);
        assert_eq!(conv("abc"), r#""\"" char* "abc" char* "\"""#);
        assert_eq!(conv("^a"), r#""\"" "a" char* "\"""#);
        assert_eq!(conv("b$"), r#""\"" char* "b" "\"""#);
        assert_eq!(conv(""), r#""\"" char* "\"""#);
    }

    #[test]
    fn ecma_classes_are_ascii() {
        assert_eq!(conv(r"^\d{3}$"), r#""\"" [0-9]{3} "\"""#);
        assert_eq!(conv(r"^\w+$"), r#""\"" [0-9A-Z_a-z]+ "\"""#);
        assert_eq!(conv("^[a-c]?x*$"), r#""\"" [a-c]? "x"* "\"""#);
        assert_eq!(conv("^(ab|cd){2,3}$"), r#""\"" ( "ab" | "cd" ){2,3} "\"""#);
    }

    #[test]
    fn quotes_in_patterns_are_escaped_in_json() {
        assert_eq!(conv(r#"^"$"#), r#""\"" "\\\"" "\"""#);
    }

    #[test]
    fn unsupported_constructs() {
        let mut c = table();
        assert!(pattern_to_gbnf(r"a\bb", &mut c).is_err());
        assert!(pattern_to_gbnf(r"(?=a)", &mut c).is_err());
        assert!(pattern_to_gbnf(r"(a)\1", &mut c).is_err());
        assert!(pattern_to_gbnf(r"a^b", &mut c).is_err());
    }

    #[test]
    fn huge_pattern_repetitions_are_refused() {
        let mut c = table();
        let e = pattern_to_gbnf("^a{100000000}$", &mut c).unwrap_err();
        assert!(e.contains("100000000") && e.contains("limit"), "{e}");
        // nested repetitions multiply
        let e = pattern_to_gbnf("^(a{1000}){1000}$", &mut c).unwrap_err();
        assert!(e.contains("1000000"), "{e}");
        assert!(pattern_to_gbnf("^(a{100}){100}$", &mut c).is_ok());
        assert!(pattern_to_gbnf("^a{5,100000}$", &mut c).is_ok());
        assert!(pattern_to_gbnf("^a{5,100001}$", &mut c).is_err());
        assert!(pattern_to_gbnf("^a{100001,}$", &mut c).is_err());
    }
}
