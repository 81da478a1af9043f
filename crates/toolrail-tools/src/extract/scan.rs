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
    scan(text, open, quotes, &Known::default(), &mut Vec::new())
}

/// [`balanced_end`] for every opening bracket of one text, computed once.
///
/// A sweep that tries every opener of a text calls [`balanced_end`] from each, which is
/// quadratic on text with many unclosed openers (1 MB of `{` took over a minute). The scan from
/// an opener, on reaching a nested opener, does exactly what the scan from that nested opener
/// does until the nested bracket closes (same characters, same string rules, its own part of
/// the stack on top), so its outcome can be reused: closed at `e` means "continue at `e`",
/// anything else is the outer scan's outcome too. Openers are done from the last to the first,
/// each reusing the outcomes after it, which makes the whole table linear in the text for
/// bracket-heavy input (string literals are still scanned per scan that meets them).
pub(crate) struct Brackets {
    quotes: Quotes,
    known: Known,
}

/// Outcomes known so far: `slot[position]` indexes `ends` (`u32::MAX`: none).
#[derive(Default)]
struct Known {
    slot: Vec<u32>,
    ends: Vec<ScanEnd>,
}

impl Known {
    fn get(&self, i: usize) -> Option<ScanEnd> {
        let s = *self.slot.get(i)?;
        self.ends.get(usize::try_from(s).ok()?).copied()
    }
}

impl Brackets {
    /// The outcome of the scan from every `{`, `[` and `(` of `text` (texts of 4 GiB or more
    /// get no table: every question is then a fresh scan).
    pub(crate) fn new(text: &str, quotes: Quotes) -> Self {
        let mut known = Known::default();
        if u32::try_from(text.len()).is_ok() {
            known.slot = vec![u32::MAX; text.len()];
            let mut stack = Vec::new();
            for (i, c) in text.bytes().enumerate().rev() {
                if matches!(c, b'{' | b'[' | b'(') {
                    let e = scan(text, i, quotes, &known, &mut stack);
                    // fewer openers than bytes, and bytes fit in u32 (checked above)
                    known.slot[i] = known.ends.len() as u32;
                    known.ends.push(e);
                }
            }
        }
        Self { quotes, known }
    }

    /// Same as [`balanced_end`]`(text, open, quotes)` for the text this table was built from.
    pub(crate) fn end(&self, text: &str, open: usize) -> ScanEnd {
        match self.known.get(open) {
            Some(e) => e,
            None => balanced_end(text, open, self.quotes),
        }
    }
}

/// The scan of [`balanced_end`], jumping over nested openers whose outcome `known` holds.
/// `expected` is a reusable buffer (cleared here).
fn scan(text: &str, open: usize, quotes: Quotes, known: &Known, expected: &mut Vec<u8>) -> ScanEnd {
    let bytes = text.as_bytes();
    expected.clear();
    let mut i = open;
    while i < bytes.len() {
        let c = bytes[i];
        if i > open
            && matches!(c, b'{' | b'[' | b'(')
            && let Some(e) = known.get(i)
        {
            match e {
                ScanEnd::Closed(end) => {
                    i = end;
                    continue;
                }
                other => return other,
            }
        }
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
    use proptest::prelude::*;

    /// The table answers exactly what a scan from each opener answers.
    fn table_agrees(text: &str) -> Result<(), TestCaseError> {
        for quotes in [Quotes::Json, Quotes::Relaxed, Quotes::Python] {
            let table = Brackets::new(text, quotes);
            for (i, c) in text.bytes().enumerate() {
                if matches!(c, b'{' | b'[' | b'(') {
                    prop_assert_eq!(
                        table.end(text, i),
                        balanced_end(text, i, quotes),
                        "{:?} at {} in {:?}",
                        quotes,
                        i,
                        text
                    );
                }
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn the_table_agrees_with_single_scans(text in r#"[{}\[\]()"'`\\a:<|>]{0,60}"#) {
            table_agrees(&text)?;
        }

        #[test]
        fn the_table_agrees_on_any_text(text in "\\PC{0,80}") {
            table_agrees(&text)?;
        }
    }

    #[test]
    fn the_table_agrees_on_examples() {
        for text in [
            r#"{"a": "{x}"} [1, (2, {3})] {"#,
            r#"call:f{a: '}', b: <|"|>{<|"|>} {"s": "\"{"}"#,
            r#"print(f("""(""", ')')) [[[ {]}"#,
        ] {
            table_agrees(text).unwrap();
        }
    }

    #[test]
    fn a_megabyte_of_openers_is_linear() {
        // 1 MB of `{`: a scan per opener would walk 5*10^11 bytes (hours); the table walks each
        // byte about once. No timed assertion: finishing at all is the test.
        let text = "{".repeat(1 << 20);
        let table = Brackets::new(&text, Quotes::Json);
        assert_eq!(table.end(&text, 0), ScanEnd::Unterminated);
        let text = "[{".repeat(1 << 19) + &"}]".repeat(1 << 19);
        let table = Brackets::new(&text, Quotes::Json);
        assert_eq!(table.end(&text, 0), ScanEnd::Closed(text.len()));
        assert_eq!(table.end(&text, 2), ScanEnd::Closed(text.len() - 2));
    }

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
