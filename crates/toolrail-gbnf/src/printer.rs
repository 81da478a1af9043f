//! Prints compiled rules back as GBNF, the way `llama_grammar_parser::print` does: one line per
//! rule (synthesised ones included), so a user sees exactly what llama.cpp will run.

use super::element::ElementKind;
use super::grammar::Grammar;

fn print_char(c: u32, out: &mut String) {
    match char::from_u32(c) {
        Some(ch) if (0x20..=0x7F).contains(&c) => out.push(ch),
        _ => out.push_str(&format!("<U+{c:04X}>")),
    }
}

/// Every rule of `grammar` as llama.cpp prints it (`root ::= [a] root_1 `).
pub fn print_compiled(grammar: &Grammar) -> String {
    let mut out = String::new();
    for id in 0..grammar.rule_count() as u32 {
        let rule = grammar.rule(id);
        out.push_str(grammar.rule_name(id));
        out.push_str(" ::= ");
        let body = &rule[..rule.len().saturating_sub(1)];
        for (i, e) in body.iter().enumerate() {
            match e.kind {
                ElementKind::End => {}
                ElementKind::Alt => out.push_str("| "),
                ElementKind::RuleRef => {
                    out.push_str(grammar.rule_name(e.value));
                    out.push(' ');
                }
                ElementKind::Char => {
                    out.push('[');
                    print_char(e.value, &mut out);
                }
                ElementKind::CharNot => {
                    out.push_str("[^");
                    print_char(e.value, &mut out);
                }
                ElementKind::CharRngUpper => {
                    out.push('-');
                    print_char(e.value, &mut out);
                }
                ElementKind::CharAlt => print_char(e.value, &mut out),
                ElementKind::CharAny => out.push('.'),
                ElementKind::Token => out.push_str(&format!("<[{}]> ", e.value)),
                ElementKind::TokenNot => out.push_str(&format!("!<[{}]> ", e.value)),
            }
            let is_char = matches!(
                e.kind,
                ElementKind::Char
                    | ElementKind::CharNot
                    | ElementKind::CharAlt
                    | ElementKind::CharRngUpper
                    | ElementKind::CharAny
            );
            if is_char
                && !matches!(
                    rule[i + 1].kind,
                    ElementKind::CharAlt | ElementKind::CharRngUpper | ElementKind::CharAny
                )
            {
                out.push_str("] ");
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_llama() {
        let g = Grammar::parse("root ::= \"ab\" [0-9a]* x\nx ::= \"c\" | ").unwrap();
        assert_eq!(
            print_compiled(&g),
            "root ::= [a] [b] root_1 x \nroot_1 ::= [0-9a] root_1 | \nx ::= [c] | \n"
        );
    }
}
