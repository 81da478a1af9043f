//! How GBNF spells text: string literals and character classes, as llama.cpp's parser reads
//! them. The one printer ([`crate::expr`]) writes every literal and class through these.

/// A GBNF string literal matching exactly `text`.
pub fn gbnf_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    push_gbnf_literal(text, &mut out);
    out
}

/// [`gbnf_literal`] appended to `out` (the printer writes a whole grammar into one buffer).
pub(crate) fn push_gbnf_literal(text: &str, out: &mut String) {
    use std::fmt::Write as _;
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // C0, DEL and C1 (U+009B is a CSI): as hex, the same code point to llama.cpp
            c if c.is_control() => {
                // writing into a String cannot fail
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Renders one code point inside a GBNF character class: printable ASCII as is, `\\`, `\t`,
/// `\n` and `\r` as llama.cpp's escapes, `-` as is where it cannot start a range (`edge`: the
/// first or last member, a single character), `[`, `]`, `^` and other characters as hex.
fn class_char(cp: u32, edge: bool, out: &mut String) {
    use std::fmt::Write as _;
    // writing into a String cannot fail
    let _ = match char::from_u32(cp) {
        Some('-') if edge => {
            out.push('-');
            Ok(())
        }
        Some('\\') => {
            out.push_str("\\\\");
            Ok(())
        }
        Some('\t') => {
            out.push_str("\\t");
            Ok(())
        }
        Some('\n') => {
            out.push_str("\\n");
            Ok(())
        }
        Some('\r') => {
            out.push_str("\\r");
            Ok(())
        }
        Some(c) if (0x20..0x7F).contains(&cp) && !matches!(c, ']' | '[' | '-' | '^') => {
            out.push(c);
            Ok(())
        }
        _ if cp < 0x80 => write!(out, "\\x{cp:02X}"),
        _ if cp <= 0xFFFF => write!(out, "\\u{cp:04X}"),
        _ => write!(out, "\\U{cp:08X}"),
    };
}

/// A GBNF character class `[...]` (or `[^...]`) for disjoint ranges, printed in the order given,
/// appended to `out` (the printer writes a whole grammar into one buffer).
pub(crate) fn push_char_class(ranges: &[(u32, u32)], negated: bool, out: &mut String) {
    out.push_str(if negated { "[^" } else { "[" });
    let last = ranges.len().saturating_sub(1);
    for (i, &(lo, hi)) in ranges.iter().enumerate() {
        let single = lo == hi;
        class_char(lo, single && (i == 0 || i == last), out);
        if hi > lo {
            if hi > lo + 1 {
                out.push('-');
            }
            class_char(hi, false, out);
        }
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_escapes() {
        assert_eq!(gbnf_literal("a\"b\\c\nd\te\u{1}"), r#""a\"b\\c\nd\te\x01""#);
        assert_eq!(gbnf_literal("é"), "\"é\"");
    }
}
