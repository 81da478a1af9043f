//! JSON string encoding as GBNF: literals, and sets of decoded characters as grammar over their
//! JSON-encoded form.
//!
//! A schema constrains *decoded* strings, the grammar matches *encoded* JSON text. Characters that
//! JSON requires to be escaped (`"`, `\`, U+0000..U+001F) are matched in their escaped forms; all
//! other characters are matched raw (the canonical encoding every JSON serializer produces).

use crate::expr::Expr;

/// The canonical JSON encoding of one character inside a string (without quotes).
pub(crate) fn json_encode_char(c: char, out: &mut String) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push(c),
    }
}

/// GBNF matching the JSON encoding of the decoded text `text` (without the quotes).
/// Control characters other than the short escapes accept either hex case.
pub(crate) fn encoded_literal(text: &str) -> Expr {
    let mut parts: Vec<Expr> = Vec::new();
    let mut plain = String::new();
    for c in text.chars() {
        let cp = c as u32;
        if cp < 0x20 && !matches!(c, '\n' | '\r' | '\t' | '\u{8}' | '\u{c}') {
            if !plain.is_empty() {
                parts.push(Expr::literal(std::mem::take(&mut plain)));
            }
            parts.push(control_escape(cp));
        } else {
            json_encode_char(c, &mut plain);
        }
    }
    parts.push(Expr::literal(plain));
    Expr::seq(parts)
}

/// `\u00XY` for a control character, either hex case.
fn control_escape(cp: u32) -> Expr {
    let low = cp & 0xF;
    let hi = cp >> 4;
    let low = match char::from_digit(low, 16) {
        Some(c) if low >= 10 => Expr::Class {
            ranges: vec![
                (c as u32, c as u32),
                (c.to_ascii_uppercase() as u32, c.to_ascii_uppercase() as u32),
            ],
            negated: false,
        },
        _ => Expr::literal(low.to_string()),
    };
    Expr::seq([Expr::literal(format!("\\u00{hi}")), low])
}

/// Normalizes ranges: sorted, merged.
pub(crate) fn normalize(mut ranges: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    ranges.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        if let Some(last) = out.last_mut()
            && lo <= last.1.saturating_add(1)
        {
            last.1 = last.1.max(hi);
            continue;
        }
        out.push((lo, hi));
    }
    out
}

/// Intersection of two normalized range sets.
pub(crate) fn intersect(a: &[(u32, u32)], b: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if lo <= hi {
            out.push((lo, hi));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// Complement of a normalized range set within `[0, max]`.
pub(crate) fn complement(a: &[(u32, u32)], max: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut next = 0u32;
    for &(lo, hi) in a {
        if lo > next {
            out.push((next, lo - 1));
        }
        next = hi.saturating_add(1);
    }
    if next <= max && a.last().is_none_or(|l| l.1 < max) {
        out.push((next, max));
    }
    out
}

/// Unicode scalar values.
pub(crate) const SCALARS: &[(u32, u32)] = &[(0, 0xD7FF), (0xE000, 0x10FFFF)];
/// Characters written raw inside a JSON string.
const RAW: &[(u32, u32)] = &[
    (0x20, 0x21),
    (0x23, 0x5B),
    (0x5D, 0xD7FF),
    (0xE000, 0x10FFFF),
];

fn contains(set: &[(u32, u32)], cp: u32) -> bool {
    set.iter().any(|&(lo, hi)| lo <= cp && cp <= hi)
}

/// GBNF matching the JSON encoding of one character from the set `set` (decoded code
/// points, normalized). `None` when the set is empty. `char_rule` gives the rule matching any
/// character (used when the set is all of Unicode).
pub(crate) fn encoded_char_set(
    set: &[(u32, u32)],
    char_rule: &mut dyn FnMut() -> Expr,
) -> Option<Expr> {
    let set = intersect(set, SCALARS);
    if set.is_empty() {
        return None;
    }
    if set == SCALARS {
        return Some(char_rule());
    }
    let mut alts = Vec::new();
    let raw = intersect(&set, RAW);
    if !raw.is_empty() {
        // Negated form when it is shorter: everything but the listed ranges (and the characters
        // that must be escaped).
        let missing = intersect(&complement(&raw, 0x10FFFF), RAW);
        if missing.len() + 2 < raw.len() {
            let mut neg = missing.clone();
            neg.push((0, 0x1F));
            neg.push(('"' as u32, '"' as u32));
            neg.push(('\\' as u32, '\\' as u32));
            alts.push(Expr::Class {
                ranges: normalize(neg),
                negated: true,
            });
        } else {
            alts.push(Expr::Class {
                ranges: raw,
                negated: false,
            });
        }
    }
    let mut short = Vec::new();
    for (c, e) in [
        ('"', '"'),
        ('\\', '\\'),
        ('\u{8}', 'b'),
        ('\u{c}', 'f'),
        ('\n', 'n'),
        ('\r', 'r'),
        ('\t', 't'),
    ] {
        if contains(&set, c as u32) {
            short.push((e as u32, e as u32));
        }
    }
    let controls = intersect(&set, &[(0, 0x1F)]);
    if !short.is_empty() {
        alts.push(Expr::seq([
            Expr::literal("\\"),
            Expr::Class {
                ranges: short,
                negated: false,
            },
        ]));
    }
    if controls == [(0, 0x1F)] {
        alts.push(Expr::seq([
            Expr::literal("\\u00"),
            Expr::Class {
                ranges: vec![('0' as u32, '1' as u32)],
                negated: false,
            },
            Expr::Class {
                ranges: vec![
                    ('0' as u32, '9' as u32),
                    ('a' as u32, 'f' as u32),
                    ('A' as u32, 'F' as u32),
                ],
                negated: false,
            },
        ]));
    } else {
        for &(lo, hi) in &controls {
            for cp in lo..=hi {
                alts.push(control_escape(cp));
            }
        }
    }
    Expr::alt(alts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_literal_matches_json_text() {
        // decoded `"` is written `\"` in JSON, which is `\\\"` in a GBNF literal
        assert_eq!(encoded_literal("a\"b").to_gbnf(), r#""a\\\"b""#);
        assert_eq!(encoded_literal("\u{1}").to_gbnf(), r#""\\u000" "1""#);
        assert_eq!(encoded_literal("\u{1b}x").to_gbnf(), r#""\\u001" [bB] "x""#);
        assert_eq!(encoded_literal(""), Expr::Empty);
    }

    #[test]
    fn char_sets() {
        let mut any = || Expr::Rule(crate::expr::RuleName::new("char"));
        let text = |e: Option<Expr>| e.map(|e| e.to_gbnf_item());
        assert_eq!(
            text(encoded_char_set(&[(0x30, 0x39)], &mut any)).as_deref(),
            Some("[0-9]")
        );
        assert_eq!(
            text(encoded_char_set(SCALARS, &mut any)).as_deref(),
            Some("char")
        );
        let not_a = normalize(vec![(0, 0x60), (0x62, 0x10FFFF)]);
        assert_eq!(
            text(encoded_char_set(&not_a, &mut any)).as_deref(),
            Some(r#"( [^\x00-\x1F"\\a] | "\\" ["\\bfnrt] | "\\u00" [01] [0-9a-fA-F] )"#)
        );
        assert_eq!(encoded_char_set(&[], &mut any), None);
    }
}
