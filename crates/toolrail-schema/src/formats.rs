//! String `format`s as GBNF: date, time, date-time (RFC 3339, leap years and leap seconds
//! exact), duration (RFC 3339 appendix A), uuid, ipv4, ipv6 (RFC 4291 text forms), email (RFC 5321 mailbox, quoted local parts
//! and address literals), uri and uri-reference (RFC 3986).
//!
//! Each format is a rule over the string's content, plus a `<format>-string` rule adding the
//! quotes. All formats are ASCII; the only characters that JSON escapes (`"` and `\` in quoted
//! email local parts) are matched in their escaped form.
//!
//! Leap seconds: `hh:mm:60` is valid only when it is 23:59:60 UTC, i.e. when the local time
//! minus the offset is 23:59 (RFC 3339 5.7; the `jsonschema` crate checks the same). Each local
//! hour and minute has exactly one such offset per sign: `+` the local time plus one minute,
//! `-` 23:59 minus the local time (`15:59:60-08:00`, `00:00:60+00:01`; 23:59 also takes `Z`).
//! The rules list them: `time-leap` picks the local hour, `time-leap-HH` the minute and its
//! two offsets (1,440 alternatives in all, since the hour and the minute each tie to a part of
//! the offset written later).
//!
//! Email: the grammar is RFC 5321's `Mailbox` (dot-string or quoted local part, `quoted-pair`
//! `\` followed by any printable ASCII character or space; domain labels of at most 63
//! characters; `[ipv4]` and `[IPv6:ipv6]` literals, the tag in any case as ABNF strings are).
//! [`is_valid_email`] checks the same language in Rust; the tool-call validator uses it in
//! place of the `jsonschema` crate's own check, which differs (it also accepts display names
//! such as `Joe <a@b.c>` and tabs, and rejects `"\ "@host`, local parts over 64 octets and
//! some `xn--` labels), so that grammar and validator agree.

use std::sync::OnceLock;

use crate::expr::{Expr, RuleName};

/// Helper rule names and the rules each uses, in the order their bodies are listed in
/// [`helper_body`].
const RULES: &[(&str, &[&str])] = &[
    ("date", &["leap-year"]),
    ("leap-year", &[]),
    ("time", &["time-fraction", "time-offset", "time-leap"]),
    ("time-leap-second", &["time-fraction"]),
    ("time-fraction", &[]),
    ("time-offset", &[]),
    ("date-time", &["date", "time"]),
    ("duration", &["duration-date", "duration-time"]),
    ("duration-date", &[]),
    ("duration-time", &[]),
    ("uuid", &[]),
    ("ipv4", &["dec-octet"]),
    ("dec-octet", &[]),
    ("ipv6", &["h16", "ls32"]),
    ("h16", &[]),
    ("ls32", &["h16", "ipv4"]),
    ("email", &["email-atom", "hostname-label", "ipv4", "ipv6"]),
    ("uri", &["uri-scheme", "uri-hier-part", "uri-query"]),
    (
        "uri-reference",
        &[
            "uri",
            "uri-authority",
            "uri-path-abempty",
            "uri-pchar",
            "uri-pct",
            "uri-query",
        ],
    ),
    ("uri-scheme", &[]),
    (
        "uri-hier-part",
        &["uri-authority", "uri-path-abempty", "uri-pchar"],
    ),
    ("uri-authority", &["uri-pct", "ipv6"]),
    ("uri-path-abempty", &["uri-pchar"]),
    ("uri-pchar", &["uri-pct"]),
    ("uri-pct", &[]),
    ("uri-query", &["uri-pchar"]),
    ("email-atom", &[]),
    ("hostname-label", &[]),
];

/// Text matched exactly.
fn lit(text: &str) -> Expr {
    Expr::literal(text)
}

/// A reference to the format rule `name`.
fn rule(name: &str) -> Expr {
    Expr::Rule(RuleName::new(name))
}

/// A character class over `ranges`, printed in the order given (the order a reader expects,
/// `[a-zA-Z0-9]`, rather than code point order).
fn class(ranges: &[(char, char)]) -> Expr {
    Expr::Class {
        ranges: ranges.iter().map(|&(a, b)| (a as u32, b as u32)).collect(),
        negated: false,
    }
}

/// A class of the single characters of `chars`.
fn one_of(chars: &str) -> Expr {
    let ranges: Vec<(char, char)> = chars.chars().map(|c| (c, c)).collect();
    class(&ranges)
}

/// A class of `ranges` followed by the single characters of `singles`.
fn class_with(ranges: &[(char, char)], singles: &str) -> Expr {
    let mut all = ranges.to_vec();
    all.extend(singles.chars().map(|c| (c, c)));
    class(&all)
}

fn digit() -> Expr {
    class(&[('0', '9')])
}

fn hex() -> Expr {
    class(&[('0', '9'), ('a', 'f'), ('A', 'F')])
}

fn seq<const N: usize>(items: [Expr; N]) -> Expr {
    Expr::seq(items)
}

/// An alternation of at least one alternative.
fn alt<const N: usize>(alternatives: [Expr; N]) -> Expr {
    Expr::alt(alternatives).unwrap_or(Expr::Empty)
}

fn opt(e: Expr) -> Expr {
    Expr::repeat(e, 0, Some(1))
}

fn star(e: Expr) -> Expr {
    Expr::repeat(e, 0, None)
}

fn plus(e: Expr) -> Expr {
    Expr::repeat(e, 1, None)
}

fn times(e: Expr, n: u32) -> Expr {
    Expr::repeat(e, n, Some(n))
}

/// The body of helper rule `name` (one of [`RULES`]).
fn helper_body(name: &str) -> Option<Expr> {
    let two_digits = |first: Expr| seq([first, digit()]);
    let hour = || {
        alt([
            two_digits(one_of("01")),
            seq([lit("2"), class(&[('0', '3')])]),
        ])
    };
    let minute = || two_digits(class(&[('0', '5')]));
    let digits_then = |unit: &str| seq([plus(digit()), lit(unit)]);
    let uri_unreserved = |extra: &str| {
        class_with(
            &[('a', 'z'), ('A', 'Z'), ('0', '9')],
            &format!("!$&'()*+,;={extra}._~-"),
        )
    };
    let body = match name {
        "date" => {
            let day = |last: Expr| {
                alt([
                    seq([lit("0"), class(&[('1', '9')])]),
                    two_digits(one_of("12")),
                    last,
                ])
            };
            let month_day = alt([
                seq([
                    alt([
                        seq([lit("0"), one_of("13578")]),
                        seq([lit("1"), one_of("02")]),
                    ]),
                    lit("-"),
                    day(seq([lit("3"), one_of("01")])),
                ]),
                seq([
                    alt([seq([lit("0"), one_of("469")]), lit("11")]),
                    lit("-"),
                    day(lit("30")),
                ]),
                seq([
                    lit("02-"),
                    alt([
                        seq([lit("0"), class(&[('1', '9')])]),
                        seq([lit("1"), digit()]),
                        seq([lit("2"), class(&[('0', '8')])]),
                    ]),
                ]),
            ]);
            alt([
                seq([times(digit(), 4), lit("-"), month_day]),
                seq([rule("leap-year"), lit("-02-29")]),
            ])
        }
        "leap-year" => {
            let multiple_of_four = |zero_first: &str| {
                alt([
                    seq([lit("0"), one_of(zero_first)]),
                    seq([one_of("2468"), one_of("048")]),
                    seq([one_of("13579"), one_of("26")]),
                ])
            };
            alt([
                seq([times(digit(), 2), multiple_of_four("48")]),
                seq([multiple_of_four("048"), lit("00")]),
            ])
        }
        "time" => alt([
            seq([
                hour(),
                lit(":"),
                minute(),
                lit(":"),
                minute(),
                opt(rule("time-fraction")),
                rule("time-offset"),
            ]),
            rule("time-leap"),
        ]),
        "time-leap-second" => seq([lit(":60"), opt(rule("time-fraction"))]),
        "time-fraction" => seq([lit("."), plus(digit())]),
        "time-offset" => alt([
            one_of("zZ"),
            seq([one_of("+-"), hour(), lit(":"), minute()]),
        ]),
        "date-time" => seq([rule("date"), one_of("tT"), rule("time")]),
        "duration" => seq([
            lit("P"),
            alt([
                seq([rule("duration-date"), opt(rule("duration-time"))]),
                rule("duration-time"),
                digits_then("W"),
            ]),
        ]),
        "duration-date" => alt([
            digits_then("D"),
            seq([digits_then("M"), opt(digits_then("D"))]),
            seq([
                digits_then("Y"),
                opt(seq([digits_then("M"), opt(digits_then("D"))])),
            ]),
        ]),
        "duration-time" => seq([
            lit("T"),
            alt([
                seq([
                    digits_then("H"),
                    opt(seq([digits_then("M"), opt(digits_then("S"))])),
                ]),
                seq([digits_then("M"), opt(digits_then("S"))]),
                digits_then("S"),
            ]),
        ]),
        "uuid" => seq([
            times(hex(), 8),
            lit("-"),
            times(hex(), 4),
            lit("-"),
            times(hex(), 4),
            lit("-"),
            times(hex(), 4),
            lit("-"),
            times(hex(), 12),
        ]),
        "ipv4" => seq([
            rule("dec-octet"),
            lit("."),
            rule("dec-octet"),
            lit("."),
            rule("dec-octet"),
            lit("."),
            rule("dec-octet"),
        ]),
        "dec-octet" => alt([
            seq([lit("25"), class(&[('0', '5')])]),
            seq([lit("2"), class(&[('0', '4')]), digit()]),
            seq([lit("1"), digit(), digit()]),
            seq([class(&[('1', '9')]), digit()]),
            digit(),
        ]),
        "ipv6" => {
            let h16_colon = |n: u32| times(seq([rule("h16"), lit(":")]), n);
            // up to `more + 1` pieces before "::"
            let before = |more: u32| {
                opt(seq([
                    rule("h16"),
                    Expr::repeat(seq([lit(":"), rule("h16")]), 0, Some(more)),
                ]))
            };
            alt([
                seq([h16_colon(6), rule("ls32")]),
                seq([lit("::"), h16_colon(5), rule("ls32")]),
                seq([opt(rule("h16")), lit("::"), h16_colon(4), rule("ls32")]),
                seq([before(1), lit("::"), h16_colon(3), rule("ls32")]),
                seq([before(2), lit("::"), h16_colon(2), rule("ls32")]),
                seq([before(3), lit("::"), rule("h16"), lit(":"), rule("ls32")]),
                seq([before(4), lit("::"), rule("ls32")]),
                seq([before(5), lit("::"), rule("h16")]),
                seq([before(6), lit("::")]),
            ])
        }
        "h16" => Expr::repeat(hex(), 1, Some(4)),
        "ls32" => alt([seq([rule("h16"), lit(":"), rule("h16")]), rule("ipv4")]),
        "email" => {
            // printable ASCII but `"` and `\`, and the escapes JSON writes for those two
            let quoted_text = || class(&[(' ', '!'), ('#', '['), (']', '~')]);
            let quote = || lit("\\\"");
            let backslash = || lit("\\\\");
            let local = alt([
                seq([
                    rule("email-atom"),
                    star(seq([lit("."), rule("email-atom")])),
                ]),
                seq([
                    quote(),
                    star(alt([
                        quoted_text(),
                        seq([backslash(), alt([quoted_text(), quote(), backslash()])]),
                    ])),
                    quote(),
                ]),
            ]);
            let domain = alt([
                seq([
                    rule("hostname-label"),
                    star(seq([lit("."), rule("hostname-label")])),
                ]),
                seq([lit("["), rule("ipv4"), lit("]")]),
                seq([
                    lit("["),
                    one_of("iI"),
                    one_of("pP"),
                    one_of("vV"),
                    lit("6:"),
                    rule("ipv6"),
                    lit("]"),
                ]),
            ]);
            seq([local, lit("@"), domain])
        }
        "uri" => seq([
            rule("uri-scheme"),
            lit(":"),
            rule("uri-hier-part"),
            opt(seq([lit("?"), rule("uri-query")])),
            opt(seq([lit("#"), rule("uri-query")])),
        ]),
        "uri-reference" => {
            let segments = || star(seq([lit("/"), star(rule("uri-pchar"))]));
            alt([
                rule("uri"),
                seq([
                    alt([
                        seq([lit("//"), rule("uri-authority"), rule("uri-path-abempty")]),
                        seq([lit("/"), opt(seq([plus(rule("uri-pchar")), segments()]))]),
                        seq([
                            plus(alt([uri_unreserved("@"), rule("uri-pct")])),
                            segments(),
                        ]),
                        Expr::Empty,
                    ]),
                    opt(seq([lit("?"), rule("uri-query")])),
                    opt(seq([lit("#"), rule("uri-query")])),
                ]),
            ])
        }
        "uri-scheme" => seq([
            class(&[('a', 'z'), ('A', 'Z')]),
            star(class_with(&[('a', 'z'), ('A', 'Z'), ('0', '9')], "+.-")),
        ]),
        "uri-hier-part" => {
            let segments = || star(seq([lit("/"), star(rule("uri-pchar"))]));
            alt([
                seq([lit("//"), rule("uri-authority"), rule("uri-path-abempty")]),
                seq([lit("/"), opt(seq([plus(rule("uri-pchar")), segments()]))]),
                seq([plus(rule("uri-pchar")), segments()]),
                Expr::Empty,
            ])
        }
        "uri-authority" => seq([
            opt(seq([
                star(alt([uri_unreserved(":"), rule("uri-pct")])),
                lit("@"),
            ])),
            alt([
                seq([
                    lit("["),
                    alt([
                        rule("ipv6"),
                        seq([lit("v"), plus(hex()), lit("."), plus(uri_unreserved(":"))]),
                    ]),
                    lit("]"),
                ]),
                star(alt([uri_unreserved(""), rule("uri-pct")])),
            ]),
            opt(seq([lit(":"), star(digit())])),
        ]),
        "uri-path-abempty" => star(seq([lit("/"), star(rule("uri-pchar"))])),
        "uri-pchar" => alt([uri_unreserved(":@"), rule("uri-pct")]),
        "uri-pct" => seq([lit("%"), hex(), hex()]),
        "uri-query" => star(alt([rule("uri-pchar"), one_of("/?")])),
        "email-atom" => plus(class_with(
            &[('a', 'z'), ('A', 'Z'), ('0', '9')],
            "!#$%&'*+/=?^_`{|}~-",
        )),
        "hostname-label" => {
            let alnum = || class(&[('a', 'z'), ('A', 'Z'), ('0', '9')]);
            seq([
                alnum(),
                opt(seq([
                    Expr::repeat(
                        class_with(&[('a', 'z'), ('A', 'Z'), ('0', '9')], "-"),
                        0,
                        Some(61),
                    ),
                    alnum(),
                ])),
            ])
        }
        _ => return None,
    };
    Some(body)
}

/// The formats this module knows.
pub(crate) const FORMATS: &[&str] = &[
    "date",
    "time",
    "date-time",
    "duration",
    "uuid",
    "ipv4",
    "ipv6",
    "email",
    "uri",
    "uri-reference",
];

/// Formats that JSON Schema (drafts 4 to 2020-12) defines and that validators check, but that
/// this module cannot express: a schema using one is refused (lenient: dropped). Any other
/// `format` (OpenAPI's `byte`, `path`, `color`...) is not one JSON Schema validators check, so
/// it constrains nothing and is ignored with a note (MaskBench's valid instances agree: a
/// `format: byte` string such as "base64 encoded certificate" is valid).
pub(crate) const KNOWN_UNSUPPORTED: &[&str] = &[
    "idn-email",
    "hostname",
    "idn-hostname",
    "iri",
    "iri-reference",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Why a format of [`KNOWN_UNSUPPORTED`] has no exact grammar, as a clause for an error
/// message (`""` when there is nothing more to say than "not expressed").
pub(crate) fn unsupported_reason(format: &str) -> &'static str {
    match format {
        // llguidance's hostname regex accepts both; validators reject them
        "hostname" => {
            ": validators also decode `xn--` labels (punycode) and cap the name at 253 characters"
        }
        "idn-email" | "idn-hostname" | "iri" | "iri-reference" => {
            ": validators check Unicode (IDNA) rules"
        }
        "regex" => ": whether a string is an ECMA-262 regex is not a regular language",
        _ => "",
    }
}

/// A generated rule: name, body, the rules it uses.
type Generated = (String, Expr, Vec<String>);

/// The leap-second rules (see the module docs), built once.
fn leap_rules() -> &'static [Generated] {
    static LEAP: OnceLock<Vec<Generated>> = OnceLock::new();
    LEAP.get_or_init(|| {
        let hours: Vec<String> = (0..24).map(|h| format!("time-leap-{h:02}")).collect();
        let mut out = Vec::with_capacity(25);
        let pick_hour = hours
            .iter()
            .enumerate()
            .map(|(h, name)| Expr::seq([lit(&format!("{h:02}:")), rule(name)]));
        let mut deps = hours.clone();
        deps.push("time-leap-second".to_string());
        out.push((
            "time-leap".to_string(),
            Expr::alt(pick_hour).unwrap_or(Expr::Empty),
            deps,
        ));
        for (h, name) in hours.iter().enumerate() {
            let minutes = (0..60).map(|m| {
                let local = h * 60 + m;
                let plus = (local + 1) % 1440;
                let minus = 1439 - local;
                let utc = (plus == 0).then(|| one_of("zZ"));
                let offsets = utc.into_iter().chain([
                    lit(&format!("+{:02}:{:02}", plus / 60, plus % 60)),
                    lit(&format!("-{:02}:{:02}", minus / 60, minus % 60)),
                ]);
                Expr::seq([
                    lit(&format!("{m:02}")),
                    rule("time-leap-second"),
                    Expr::alt(offsets).unwrap_or(Expr::Empty),
                ])
            });
            out.push((
                name.clone(),
                Expr::alt(minutes).unwrap_or(Expr::Empty),
                vec!["time-leap-second".to_string()],
            ));
        }
        out
    })
}

/// The body of the format rule `name` (a helper rule, a leap-second rule, or a format's
/// content rule such as `email`), for the automata of [`crate::automaton`].
pub(crate) fn rule_body(name: &str) -> Option<&'static Expr> {
    all_rules()
        .iter()
        .find(|(n, _, _)| n == name)
        .map(|(_, body, _)| body)
}

/// The format rule `name` as the module keeps it (for a key that outlives the caller's text).
pub(crate) fn rule_name(name: &str) -> Option<&'static str> {
    all_rules()
        .iter()
        .find(|(n, _, _)| n == name)
        .map(|(n, _, _)| n.as_str())
}

/// Whether `name` is a rule name this module may emit.
pub(crate) fn is_format_rule(name: &str) -> bool {
    RULES.iter().any(|(n, _)| *n == name)
        || leap_rules().iter().any(|(n, _, _)| n == name)
        || name
            .strip_suffix("-string")
            .is_some_and(|f| FORMATS.contains(&f))
}

/// Whether `s` is an email address in the language of the `email` rule (RFC 5321 `Mailbox`,
/// see the module docs). The tool-call validator checks `format: email` with this.
pub fn is_valid_email(s: &str) -> bool {
    let Some((local, domain)) = split_mailbox(s) else {
        return false;
    };
    let atom = |a: &str| {
        !a.is_empty()
            && a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+/=?^_`{|}~-".contains(&c))
    };
    let local_ok = match local.strip_prefix('"') {
        Some(quoted) => is_quoted_content(quoted),
        None => local.split('.').all(atom),
    };
    if !local_ok {
        return false;
    }
    if let Some(literal) = domain.strip_prefix('[').and_then(|d| d.strip_suffix(']')) {
        return match literal.get(..5) {
            Some(tag) if tag.eq_ignore_ascii_case("IPv6:") => {
                literal[5..].parse::<std::net::Ipv6Addr>().is_ok()
            }
            _ => literal.parse::<std::net::Ipv4Addr>().is_ok(),
        };
    }
    domain.split('.').all(|label| {
        let b = label.as_bytes();
        (1..=63).contains(&b.len())
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    })
}

/// Splits a mailbox at the `@` after its local part (a quoted local part may hold `@`).
fn split_mailbox(s: &str) -> Option<(&str, &str)> {
    if s.starts_with('"') {
        // the closing quote: the first `"` not escaped by a backslash
        let b = s.as_bytes();
        let mut i = 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => {
                    return (b.get(i + 1) == Some(&b'@')).then(|| (&s[..=i], &s[i + 2..]));
                }
                _ => i += 1,
            }
        }
        None
    } else {
        s.split_once('@')
    }
}

/// The content of a quoted local part after its opening quote, closing quote included:
/// `qtextSMTP` (printable ASCII and space but `"` and `\`) or `\` and a printable ASCII
/// character or space.
fn is_quoted_content(s: &str) -> bool {
    let Some(inner) = s.strip_suffix('"') else {
        return false;
    };
    let b = inner.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if b.get(i + 1).is_some_and(|c| (b' '..=b'~').contains(c)) => i += 2,
            b'"' | b'\\' => return false,
            b' '..=b'~' => i += 1,
            _ => return false,
        }
    }
    true
}

/// Every format rule (the `<format>-string` rules, the helpers, the leap-second rules) as
/// (name, body, the rules it uses), built once: a schema using a format borrows the bodies.
fn all_rules() -> &'static [Generated] {
    static ALL: OnceLock<Vec<Generated>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut out: Vec<Generated> = FORMATS
            .iter()
            .map(|f| {
                (
                    format!("{f}-string"),
                    Expr::seq([lit("\""), rule(f), lit("\"")]),
                    vec![f.to_string()],
                )
            })
            .collect();
        out.extend(RULES.iter().filter_map(|(name, deps)| {
            let deps = deps.iter().map(|d| d.to_string()).collect();
            Some((name.to_string(), helper_body(name)?, deps))
        }));
        out.extend(leap_rules().iter().cloned());
        out
    })
}

/// The rules that make a JSON string of format `format` (quotes included), as (name, body)
/// pairs: the string rule first, then every helper rule it uses, each once, depth first. None
/// for an unknown format.
pub(crate) fn string_rules(format: &str) -> Option<Vec<(&'static str, &'static Expr)>> {
    if !FORMATS.contains(&format) {
        return None;
    }
    rule_closure(&format!("{format}-string"))
}

/// The format rule `name` and every helper rule it uses, each once, depth first, as (name,
/// body) pairs. None for a name that is not a format rule.
pub(crate) fn rule_closure(name: &str) -> Option<Vec<(&'static str, &'static Expr)>> {
    let all = all_rules();
    let first = all.iter().find(|(n, _, _)| *n == name)?;
    let mut out: Vec<(&'static str, &'static Expr)> = Vec::new();
    let mut todo: Vec<&'static Generated> = vec![first];
    while let Some((name, body, deps)) = todo.pop() {
        if out.iter().any(|(n, _)| n == name) {
            continue;
        }
        out.push((name.as_str(), body));
        todo.extend(
            deps.iter()
                .rev()
                .filter_map(|d| all.iter().find(|(n, _, _)| n == d)),
        );
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leap_seconds_list_both_offsets_of_each_local_minute() {
        let rule = |name: &str| {
            leap_rules()
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, body, _)| body.to_gbnf())
                .unwrap()
        };
        // 15:59:60-08:00 and 15:59:60+16:00 are 23:59:60 UTC
        assert!(rule("time-leap-15").contains(r#""59" time-leap-second ( "+16:00" | "-08:00" )"#));
        assert!(
            rule("time-leap-00").starts_with(r#""00" time-leap-second ( "+00:01" | "-23:59" )"#)
        );
        assert!(
            rule("time-leap-23")
                .ends_with(r#""59" time-leap-second ( [zZ] | "+00:00" | "-00:00" )"#)
        );
        assert_eq!(rule("time-leap-07").matches(" | \"").count(), 60 + 59);
        assert!(is_format_rule("time-leap-23") && !is_format_rule("time-leap-24"));
    }

    #[test]
    fn email_checker() {
        assert!(is_valid_email("\"\\ \"@host"));
        assert!(is_valid_email("\"\"@[IPv6:::1]"));
        assert!(!is_valid_email("Joe <a@b.c>"));
        assert!(!is_valid_email("\"a\"@"));
        assert!(!is_valid_email("\"a\\\"@b"));
    }
}
