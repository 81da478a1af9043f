//! Text from files and models made safe to show on a terminal or to carry in a GBNF comment.
//!
//! A tool description, a tool name, a model's output or a grammar line may hold terminal control
//! sequences (`ESC ] 0;title BEL` sets the window title, `ESC [2J` clears the screen, OSC 52
//! writes the clipboard). [`terminal_safe`] is the one place such text is made visible instead:
//! every printer of untrusted text goes through it (the command line, the GBNF comments the tool
//! grammars carry). It lives in the bottom layer so that every crate above can use it.

use std::borrow::Cow;

/// Whether `c` is replaced by [`terminal_safe`]: the C0 controls but line feed and tab, DEL and
/// the C1 controls (U+0080 to U+009F, among them the one-character CSI U+009B).
pub fn is_terminal_control(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// `text` with every control character of [`is_terminal_control`] written as a visible escape:
/// `\x1b` for C0 and DEL, `\u{9b}` for C1. Line feeds and tabs stay as they are; text without
/// such characters is returned as it is, unallocated.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_terminal_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_terminal_control(c) {
            push_escape(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A GBNF text that parses, with every raw control character but the whitespace GBNF reads
/// (tab, line feed, carriage return) written as a GBNF escape: `\x1B`, `\x9B`. Such a character
/// can only stand in a literal, a class or a comment (anywhere else the text would not parse);
/// in a literal or a class the escape is the same code point to llama.cpp, in a comment it is
/// text. So the result is the same grammar, safe to print on a terminal.
pub fn terminal_safe_gbnf(text: &str) -> Cow<'_, str> {
    let raw = |c: char| c.is_control() && !matches!(c, '\t' | '\n' | '\r');
    if !text.chars().any(raw) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if raw(c) {
            use std::fmt::Write as _;
            // writing into a String cannot fail
            let _ = write!(out, "\\x{:02X}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Appends the visible escape of the control character `c`.
fn push_escape(c: char, out: &mut String) {
    use std::fmt::Write as _;
    let code = u32::from(c);
    // writing into a String cannot fail
    let _ = if code < 0x80 {
        write!(out, "\\x{code:02x}")
    } else {
        write!(out, "\\u{{{code:x}}}")
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_become_visible_escapes() {
        assert_eq!(
            terminal_safe("x\u{1b}]0;PWNED\u{7}\u{1b}[2J"),
            "x\\x1b]0;PWNED\\x07\\x1b[2J"
        );
        assert_eq!(
            terminal_safe("a\u{9b}2Jb\u{7f}\r\0"),
            "a\\u{9b}2Jb\\x7f\\x0d\\x00"
        );
    }

    #[test]
    fn a_grammar_with_raw_controls_is_the_same_grammar_escaped() {
        let text = "root ::= \"a\u{1b}]0;T\u{7}\" [\u{1}-\u{9b}] # \u{1b}[2J\r\nx ::= \"\u{7f}\"\n";
        let safe = terminal_safe_gbnf(text);
        assert!(!safe.chars().any(is_terminal_control_but_cr), "{safe}");
        let (Ok(a), Ok(b)) = (crate::Grammar::parse(text), crate::Grammar::parse(&safe)) else {
            panic!("both parse: {safe}");
        };
        assert_eq!(
            crate::printer::print_compiled(&a),
            crate::printer::print_compiled(&b)
        );
    }

    fn is_terminal_control_but_cr(c: char) -> bool {
        is_terminal_control(c) && c != '\r'
    }

    #[test]
    fn line_feeds_tabs_and_other_text_stay() {
        let text = "line 1\n\tline 2 é ✓ \u{a0}\u{2028}";
        assert!(matches!(terminal_safe(text), Cow::Borrowed(t) if t == text));
    }
}
