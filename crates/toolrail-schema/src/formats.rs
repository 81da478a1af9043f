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

/// Helper rules: (name, body, deps).
const RULES: &[(&str, &str, &[&str])] = &[
    (
        "date",
        r#"[0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) ) | leap-year "-02-29""#,
        &["leap-year"],
    ),
    (
        "leap-year",
        r#"[0-9]{2} ( "0" [48] | [2468] [048] | [13579] [26] ) | ( "0" [048] | [2468] [048] | [13579] [26] ) "00""#,
        &[],
    ),
    (
        "time",
        r#"( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] time-fraction? time-offset | time-leap"#,
        &["time-fraction", "time-offset", "time-leap"],
    ),
    (
        "time-leap-second",
        r#"":60" time-fraction?"#,
        &["time-fraction"],
    ),
    ("time-fraction", r#""." [0-9]+"#, &[]),
    (
        "time-offset",
        r#"[zZ] | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9]"#,
        &[],
    ),
    ("date-time", r#"date [tT] time"#, &["date", "time"]),
    (
        "duration",
        r#""P" ( duration-date duration-time? | duration-time | [0-9]+ "W" )"#,
        &["duration-date", "duration-time"],
    ),
    (
        "duration-date",
        r#"[0-9]+ "D" | [0-9]+ "M" ( [0-9]+ "D" )? | [0-9]+ "Y" ( [0-9]+ "M" ( [0-9]+ "D" )? )?"#,
        &[],
    ),
    (
        "duration-time",
        r#""T" ( [0-9]+ "H" ( [0-9]+ "M" ( [0-9]+ "S" )? )? | [0-9]+ "M" ( [0-9]+ "S" )? | [0-9]+ "S" )"#,
        &[],
    ),
    (
        "uuid",
        r#"[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}"#,
        &[],
    ),
    (
        "ipv4",
        r#"dec-octet "." dec-octet "." dec-octet "." dec-octet"#,
        &["dec-octet"],
    ),
    (
        "dec-octet",
        r#""25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]"#,
        &[],
    ),
    (
        "ipv6",
        r#"( h16 ":" ){6} ls32 | "::" ( h16 ":" ){5} ls32 | h16? "::" ( h16 ":" ){4} ls32 | ( h16 ( ":" h16 )? )? "::" ( h16 ":" ){3} ls32 | ( h16 ( ":" h16 ){0,2} )? "::" ( h16 ":" ){2} ls32 | ( h16 ( ":" h16 ){0,3} )? "::" h16 ":" ls32 | ( h16 ( ":" h16 ){0,4} )? "::" ls32 | ( h16 ( ":" h16 ){0,5} )? "::" h16 | ( h16 ( ":" h16 ){0,6} )? "::""#,
        &["h16", "ls32"],
    ),
    ("h16", "[0-9a-fA-F]{1,4}", &[]),
    ("ls32", r#"h16 ":" h16 | ipv4"#, &["h16", "ipv4"]),
    (
        "email",
        r#"( email-atom ( "." email-atom )* | "\\\"" ( [ !#-\x5B\x5D-~] | "\\\\" ( [ !#-\x5B\x5D-~] | "\\\"" | "\\\\" ) )* "\\\"" ) "@" ( hostname-label ( "." hostname-label )* | "[" ipv4 "]" | "[" [iI] [pP] [vV] "6:" ipv6 "]" )"#,
        &["email-atom", "hostname-label", "ipv4", "ipv6"],
    ),
    (
        "uri",
        r##"uri-scheme ":" uri-hier-part ( "?" uri-query )? ( "#" uri-query )?"##,
        &["uri-scheme", "uri-hier-part", "uri-query"],
    ),
    (
        "uri-reference",
        r##"uri | ( "//" uri-authority uri-path-abempty | "/" ( uri-pchar+ ( "/" uri-pchar* )* )? | ( [a-zA-Z0-9!$&'()*+,;=@._~\x2D] | uri-pct )+ ( "/" uri-pchar* )* | "" ) ( "?" uri-query )? ( "#" uri-query )?"##,
        &[
            "uri",
            "uri-authority",
            "uri-path-abempty",
            "uri-pchar",
            "uri-pct",
            "uri-query",
        ],
    ),
    ("uri-scheme", r#"[a-zA-Z] [a-zA-Z0-9+.\x2D]*"#, &[]),
    (
        "uri-hier-part",
        r#""//" uri-authority uri-path-abempty | "/" ( uri-pchar+ ( "/" uri-pchar* )* )? | uri-pchar+ ( "/" uri-pchar* )* | """#,
        &["uri-authority", "uri-path-abempty", "uri-pchar"],
    ),
    (
        "uri-authority",
        r#"( ( [a-zA-Z0-9!$&'()*+,;=:._~\x2D] | uri-pct )* "@" )? ( "[" ( ipv6 | "v" [0-9a-fA-F]+ "." [a-zA-Z0-9!$&'()*+,;=:._~\x2D]+ ) "]" | ( [a-zA-Z0-9!$&'()*+,;=._~\x2D] | uri-pct )* ) ( ":" [0-9]* )?"#,
        &["uri-pct", "ipv6"],
    ),
    ("uri-path-abempty", r#"( "/" uri-pchar* )*"#, &["uri-pchar"]),
    (
        "uri-pchar",
        r#"[a-zA-Z0-9!$&'()*+,;=:@._~\x2D] | uri-pct"#,
        &["uri-pct"],
    ),
    ("uri-pct", r#""%" [0-9a-fA-F] [0-9a-fA-F]"#, &[]),
    ("uri-query", r#"( uri-pchar | [/?] )*"#, &["uri-pchar"]),
    ("email-atom", r#"[a-zA-Z0-9!#$%&'*+/=?^_`{|}~\x2D]+"#, &[]),
    (
        "hostname-label",
        r#"[a-zA-Z0-9] ( [a-zA-Z0-9\x2D]{0,61} [a-zA-Z0-9] )?"#,
        &[],
    ),
];

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
type Generated = (String, String, Vec<String>);

/// The leap-second rules (see the module docs), built once.
fn leap_rules() -> &'static [Generated] {
    static LEAP: OnceLock<Vec<Generated>> = OnceLock::new();
    LEAP.get_or_init(|| {
        let hours: Vec<String> = (0..24).map(|h| format!("time-leap-{h:02}")).collect();
        let mut out = Vec::with_capacity(25);
        let pick_hour: Vec<String> = hours
            .iter()
            .enumerate()
            .map(|(h, rule)| format!("\"{h:02}:\" {rule}"))
            .collect();
        let mut deps = hours.clone();
        deps.push("time-leap-second".to_string());
        out.push(("time-leap".to_string(), pick_hour.join(" | "), deps));
        for (h, rule) in hours.iter().enumerate() {
            let minutes: Vec<String> = (0..60)
                .map(|m| {
                    let local = h * 60 + m;
                    let plus = (local + 1) % 1440;
                    let minus = 1439 - local;
                    let utc = if plus == 0 { "[zZ] | " } else { "" };
                    format!(
                        "\"{m:02}\" time-leap-second ( {utc}\"+{:02}:{:02}\" | \"-{:02}:{:02}\" )",
                        plus / 60,
                        plus % 60,
                        minus / 60,
                        minus % 60
                    )
                })
                .collect();
            out.push((
                rule.clone(),
                minutes.join(" | "),
                vec!["time-leap-second".to_string()],
            ));
        }
        out
    })
}

/// Whether `name` is a rule name this module may emit.
pub(crate) fn is_format_rule(name: &str) -> bool {
    RULES.iter().any(|(n, _, _)| *n == name)
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

/// The rules that make a JSON string of format `format` (quotes included), as (name, body)
/// pairs: the string rule first, then every helper rule it uses, each once, depth first. None
/// for an unknown format.
pub(crate) fn string_rules(format: &str) -> Option<Vec<(String, String)>> {
    if !FORMATS.contains(&format) {
        return None;
    }
    let mut out = vec![(
        format!("{format}-string"),
        format!("\"\\\"\" {format} \"\\\"\""),
    )];
    let mut todo = vec![format];
    while let Some(name) = todo.pop() {
        if out.iter().any(|(n, _)| n == name) {
            continue;
        }
        let Some((body, deps)) = helper_rule(name) else {
            continue;
        };
        out.push((name.to_string(), body.to_string()));
        todo.extend(deps.into_iter().rev());
    }
    Some(out)
}

/// A helper rule by name: its body and the rules it uses.
fn helper_rule(name: &str) -> Option<(&'static str, Vec<&'static str>)> {
    if let Some((_, body, deps)) = RULES.iter().find(|(n, _, _)| *n == name) {
        return Some((body, deps.to_vec()));
    }
    leap_rules()
        .iter()
        .find(|(n, _, _)| n == name)
        .map(|(_, body, deps)| (body.as_str(), deps.iter().map(String::as_str).collect()))
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
                .map(|(_, body, _)| body.clone())
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
