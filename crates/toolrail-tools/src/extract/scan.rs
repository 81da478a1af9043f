//! Balanced-bracket scanning that respects string literals.
//!
//! Every pattern that reads nested arguments (JSON objects, relaxed-JSON arguments of
//! `call:verb{...}`, Python argument lists) finds the end of its candidate here rather than with
//! a regular expression: brackets inside string literals do not count, escapes are honoured, and
//! a closer of the wrong kind ends the scan as a mismatch.

/// Which string literals the scanner skips over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quotes {
    /// Strict JSON: only `"..."`.
    Json,
    /// Relaxed JSON as models write it: `"..."`, `'...'`, `` `...` `` and Gemma's `<|"|>...<|"|>`.
    Relaxed,
    /// Python: `"..."`, `'...'` and their triple-quoted forms.
    Python,
}

/// Where a scan that started on an opening bracket ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScanEnd {
    /// The matching closer was found; the value is the byte index one past it.
    Closed(usize),
    /// The text ended with brackets (or a string literal) still open.
    Unterminated,
    /// A closer of the wrong kind at this byte index.
    Mismatched(usize),
}

/// Gemma's string delimiter token as it appears in decoded text.
pub(crate) const GEMMA_QUOTE: &str = "<|\"|>";

/// Scans from the opening bracket at `open` (one of `{`, `[`, `(`) to its matching closer.
pub(crate) fn balanced_end(text: &str, open: usize, quotes: Quotes) -> ScanEnd {
    let bytes = text.as_bytes();
    let mut expected: Vec<u8> = Vec::new();
    let mut i = open;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'{' => expected.push(b'}'),
            b'[' => expected.push(b']'),
            b'(' => expected.push(b')'),
            b'}' | b']' | b')' => {
                if expected.pop() != Some(c) {
                    return ScanEnd::Mismatched(i);
                }
                if expected.is_empty() {
                    return ScanEnd::Closed(i + 1);
                }
            }
            b'<' if quotes == Quotes::Relaxed && text[i..].starts_with(GEMMA_QUOTE) => {
                let body = i + GEMMA_QUOTE.len();
                match text[body..].find(GEMMA_QUOTE) {
                    Some(rel) => {
                        i = body + rel + GEMMA_QUOTE.len();
                        continue;
                    }
                    None => return ScanEnd::Unterminated,
                }
            }
            b'"' | b'\'' | b'`' if opens_string(c, quotes) => match string_end(text, i, quotes) {
                Some(end) => {
                    i = end;
                    continue;
                }
                None => return ScanEnd::Unterminated,
            },
            _ => {}
        }
        if expected.is_empty() {
            // `open` did not point at an opening bracket.
            return ScanEnd::Mismatched(i);
        }
        i += 1;
    }
    ScanEnd::Unterminated
}

fn opens_string(c: u8, quotes: Quotes) -> bool {
    match quotes {
        Quotes::Json => c == b'"',
        Quotes::Relaxed => matches!(c, b'"' | b'\'' | b'`'),
        Quotes::Python => matches!(c, b'"' | b'\''),
    }
}

/// Given a quote at `start`, the byte index one past the end of that string literal, or `None`
/// if it never closes. Backslash escapes are honoured; Python triple quotes are recognised.
pub(crate) fn string_end(text: &str, start: usize, quotes: Quotes) -> Option<usize> {
    let bytes = text.as_bytes();
    let quote = bytes[start];
    if quotes == Quotes::Python {
        let triple = [quote; 3];
        if bytes[start..].starts_with(&triple) {
            let mut i = start + 3;
            while i < bytes.len() {
                if bytes[i] == b'\\' {
                    i += 2;
                    continue;
                }
                if bytes[i..].starts_with(&triple) {
                    return Some(i + 3);
                }
                i += 1;
            }
            return None;
        }
    }
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            c if c == quote => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_inside_strings_do_not_count() {
        let text = r#"{"a": "}{", "b": [1, {"c": "]"}]} tail"#;
        assert_eq!(
            balanced_end(text, 0, Quotes::Json),
            ScanEnd::Closed(text.len() - 5)
        );
    }

    #[test]
    fn relaxed_quotes_and_gemma_quotes() {
        let text = r#"{a: '}', b: `{`, c: <|"|>}<|"|>}x"#;
        assert_eq!(
            balanced_end(text, 0, Quotes::Relaxed),
            ScanEnd::Closed(text.len() - 1)
        );
    }

    #[test]
    fn unterminated_and_mismatched() {
        assert_eq!(
            balanced_end("{a: 1", 0, Quotes::Relaxed),
            ScanEnd::Unterminated
        );
        assert_eq!(
            balanced_end("{a: 1]", 0, Quotes::Relaxed),
            ScanEnd::Mismatched(5)
        );
        assert_eq!(balanced_end("{\"a", 0, Quotes::Json), ScanEnd::Unterminated);
    }

    #[test]
    fn python_triple_quotes() {
        let text = "(x='''it's )''', y=1) z";
        assert_eq!(
            balanced_end(text, 0, Quotes::Python),
            ScanEnd::Closed(text.len() - 2)
        );
    }
}
