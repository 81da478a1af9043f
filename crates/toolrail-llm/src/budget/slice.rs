//! One build, attributed per tool: the grammar llama.cpp's chat code builds for a whole catalog
//! holds one rule per tool, `tool-<name>` (the name with every run of characters outside
//! `[a-zA-Z0-9-]` replaced by `-`, as `common_grammar_builder` names rules), and each tool's
//! arguments live in the rules reachable from it. A tool's *slice* is those rules (shared
//! ones, such as `string`, included) under a `root` of its own: what the tool adds to the
//! catalog's grammar, as a grammar that can be costed and checked alone, without building the
//! template again for it.
//!
//! llama.cpp's grammar builder writes one rule per line (`name ::= body`); a grammar that is
//! not written that way, a tool without its rule, or two tools whose names give the same rule
//! name make [`slices`] answer `None`, and the budget builds each tool alone instead.

use std::collections::{HashMap, HashSet};

/// One rule of a builder-written grammar: its name, its line, and the rule names its body
/// refers to.
struct OutlineRule<'a> {
    name: &'a str,
    line: &'a str,
    references: Vec<&'a str>,
}

/// The rule name llama.cpp's grammar builder gives a tool's rule.
pub(super) fn tool_rule_name(tool: &str) -> String {
    let mut out = String::from("tool-");
    let mut in_run = false;
    for c in tool.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('-');
            in_run = true;
        }
    }
    out
}

/// Each tool's slice of `grammar` (a grammar text of its own, `root` its rule), in the order of
/// `names`; `None` when the grammar cannot be attributed that way (see the module's doc).
pub(super) fn slices(grammar: &str, names: &[String]) -> Option<Vec<String>> {
    let rules = outline(grammar)?;
    let by_name: HashMap<&str, &OutlineRule<'_>> = rules.iter().map(|r| (r.name, r)).collect();
    if by_name.len() != rules.len() {
        // a rule defined twice: llama.cpp keeps the last; this outline does not guess
        return None;
    }
    let rule_names: Vec<String> = names.iter().map(|n| tool_rule_name(n)).collect();
    let distinct: HashSet<&String> = rule_names.iter().collect();
    if distinct.len() != rule_names.len() {
        return None;
    }
    rule_names
        .iter()
        .map(|top| slice_from(top, &by_name))
        .collect()
}

/// The rules reachable from `top` (in the grammar's order), under `root ::= top`.
fn slice_from(top: &str, by_name: &HashMap<&str, &OutlineRule<'_>>) -> Option<String> {
    by_name.get(top)?;
    let mut seen: HashSet<&str> = HashSet::from([top]);
    let mut queue = vec![top];
    while let Some(name) = queue.pop() {
        // a reference to an undefined rule stays undefined in the slice, as in the whole
        let Some(rule) = by_name.get(name) else {
            continue;
        };
        for reference in &rule.references {
            if seen.insert(reference) {
                queue.push(reference);
            }
        }
    }
    let mut lines: Vec<&str> = seen
        .iter()
        .filter(|name| **name != "root")
        .filter_map(|name| by_name.get(name).map(|r| r.line))
        .collect();
    lines.sort_unstable();
    let mut text = format!("root ::= {top}\n");
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    Some(text)
}

/// The grammar's rules, one per line; `None` when a non-empty line is not `name ::= body`.
fn outline(grammar: &str) -> Option<Vec<OutlineRule<'_>>> {
    grammar
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (name, body) = line.split_once("::=")?;
            let name = name.trim();
            if name.is_empty() || !name.chars().all(is_name_char) {
                return None;
            }
            Some(OutlineRule {
                name,
                line,
                references: references(body)?,
            })
        })
        .collect()
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// The rule names a body refers to, skipping literals, character classes, token literals,
/// repetition counts and comments; `None` when a literal or class is not closed on the line.
fn references(body: &str) -> Option<Vec<&str>> {
    let bytes = body.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = closing(bytes, i, b'"')?,
            b'[' => i = closing(bytes, i, b']')?,
            b'{' => i = closing(bytes, i, b'}')?,
            b'<' => i = closing(bytes, i, b'>')?,
            b'#' => break,
            c if is_name_char(c as char) => {
                let start = i;
                while i < bytes.len() && is_name_char(bytes[i] as char) {
                    i += 1;
                }
                out.push(&body[start..i]);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Some(out)
}

/// The index of the byte closing the literal opened at `open` (a backslash escapes the next
/// byte).
fn closing(bytes: &[u8], open: usize, close: u8) -> Option<usize> {
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            c if c == close => return Some(i),
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRAMMAR: &str = r#"char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
root ::= tool-call
space ::= | " " | "\n"{1,2} [ \t]{0,20}
string ::= "\"" char* "\""
tool-call ::= tool-get-weather | tool-get-time
tool-get-time ::= "{" space "\"zone\"" space ":" space string "}"
tool-get-weather ::= "{" space "\"city\"" space ":" space tool-get-weather-city "}"
tool-get-weather-city ::= "\"" char{2,} "\""
"#;

    #[test]
    fn a_tool_slice_holds_its_rules_and_the_shared_ones() {
        let names = ["get_weather".to_owned(), "get-time".to_owned()];
        let found = slices(GRAMMAR, &names).unwrap();
        let rules = |text: &str| -> Vec<String> {
            text.lines()
                .filter_map(|l| l.split_once(" ::= ").map(|(n, _)| n.to_owned()))
                .collect()
        };
        assert_eq!(
            rules(&found[1]),
            ["root", "char", "space", "string", "tool-get-time"]
        );
        assert!(found[0].contains("tool-get-weather-city ::="));
        assert!(!found[0].contains("tool-get-time"));
        assert!(toolrail_gbnf::Grammar::parse(&found[0]).is_ok());
    }

    #[test]
    fn names_that_meet_in_one_rule_name_are_not_attributed() {
        let names = ["get weather".to_owned(), "get-weather".to_owned()];
        assert_eq!(tool_rule_name("get weather"), "tool-get-weather");
        assert!(slices(GRAMMAR, &names).is_none());
        assert!(slices("root ::= (\n  \"a\")\n", &["a".to_owned()]).is_none());
    }
}
