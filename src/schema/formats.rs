//! String `format`s as GBNF: date, time, date-time (RFC 3339, leap years exact), uuid, ipv4,
//! ipv6 (RFC 4291 text forms), email (RFC 5321 mailbox, quoted local parts and address literals),
//! uri and uri-reference (RFC 3986).
//!
//! Each format is a rule over the string's content, plus a `<format>-string` rule adding the
//! quotes. All formats are ASCII; the only characters that JSON escapes (`"` and `\` in quoted
//! email local parts) are matched in their escaped form.
//!
//! Leap seconds: `hh:mm:60` is valid only when it is 23:59:60 UTC. The grammar accepts a leap
//! second written in UTC (`23:59:60Z`, `+00:00`, `-00:00`); the same instant written with another
//! offset (`01:29:60+01:30`) is not accepted, because expressing that relation between the local
//! time and the offset takes 2,880 alternatives. This is the one place where a format accepts
//! one spelling of a valid value rather than all of them.

use super::rules::RuleTable;

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
        r#"( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] time-fraction? time-offset | "23:59:60" time-fraction? ( [zZ] | [+-] "00:00" )"#,
        &["time-fraction", "time-offset"],
    ),
    ("time-fraction", r#""." [0-9]+"#, &[]),
    (
        "time-offset",
        r#"[zZ] | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9]"#,
        &[],
    ),
    ("date-time", r#"date [tT] time"#, &["date", "time"]),
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
        r#"( email-atom ( "." email-atom )* | "\\\"" ( [ !#-\x5B\x5D-~] | "\\\\" ( [ !#-\x5B\x5D-~] | "\\\"" | "\\\\" ) )* "\\\"" ) "@" ( hostname-label ( "." hostname-label )* | "[" ipv4 "]" | "[IPv6:" ipv6 "]" )"#,
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
    "uuid",
    "ipv4",
    "ipv6",
    "email",
    "uri",
    "uri-reference",
];

/// Whether `name` is a rule name this module may emit.
pub(crate) fn is_format_rule(name: &str) -> bool {
    RULES.iter().any(|(n, _, _)| *n == name)
        || name
            .strip_suffix("-string")
            .is_some_and(|f| FORMATS.contains(&f))
}

fn add(table: &mut RuleTable, name: &str) {
    if table.has_format_rule(name) {
        return;
    }
    if let Some((n, body, deps)) = RULES.iter().find(|(n, _, _)| *n == name) {
        table.format_rule(n, body);
        for d in *deps {
            add(table, d);
        }
    }
}

/// Adds the rules for a string with format `format`; returns the rule name matching the whole
/// JSON string (quotes included), or None for an unknown format.
pub(crate) fn format_string_rule(table: &mut RuleTable, format: &str) -> Option<String> {
    if !FORMATS.contains(&format) {
        return None;
    }
    let name = format!("{format}-string");
    table.format_rule(&name, &format!("\"\\\"\" {format} \"\\\"\""));
    add(table, format);
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Whitespace;

    #[test]
    fn formats_pull_in_their_dependencies_once() {
        let mut t = RuleTable::new(Whitespace::Compact);
        let n = format_string_rule(&mut t, "date-time").unwrap();
        assert_eq!(n, "date-time-string");
        format_string_rule(&mut t, "date").unwrap();
        let g = t.render(&n);
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
        assert!(format_string_rule(&mut t, "hostname").is_none());
    }
}
