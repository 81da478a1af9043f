//! Relaxed-JSON arguments, as seed 003 describes them for `call:verb{...}`.
//!
//! Strict JSON is tried first (the fast path). When it fails, the text is rewritten once and
//! parsed again: bare identifier keys (`[A-Za-z_][A-Za-z0-9_]*` in key position, i.e. after `{`
//! or `,` and before `:`) are quoted, and strings written with single quotes, backticks or
//! Gemma's `<|"|>` delimiter become double-quoted JSON strings. Nothing else is relaxed: trailing
//! commas, comments and bare-word values stay errors, as in the seed.

use serde_json::Value;

use super::scan::{GEMMA_QUOTE, Quotes, string_end};

/// Why relaxed arguments did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RelaxedError {
    /// Byte offset (in the original text) where strict parsing failed.
    pub offset: usize,
    /// The strict parser's message.
    pub strict: String,
    /// The message of the second attempt, on the rewritten text.
    pub relaxed: String,
}

/// Parses `src` as strict JSON, falling back to the relaxed rewrite.
pub(crate) fn parse_relaxed(src: &str) -> Result<Value, RelaxedError> {
    let strict_err = match serde_json::from_str::<Value>(src) {
        Ok(value) => return Ok(value),
        Err(err) => err,
    };
    let rewritten = rewrite(src);
    serde_json::from_str::<Value>(&rewritten).map_err(|relaxed_err| RelaxedError {
        offset: offset_of(src, strict_err.line(), strict_err.column()),
        strict: strict_err.to_string(),
        relaxed: relaxed_err.to_string(),
    })
}

/// Converts serde_json's one-based line and column into a byte offset in `src`.
pub(crate) fn offset_of(src: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (index, text_line) in src.split_inclusive('\n').enumerate() {
        if index + 1 == line {
            return (offset + column.saturating_sub(1)).min(src.len());
        }
        offset += text_line.len();
    }
    src.len()
}

/// The relaxed rewrite: quote bare keys, normalise string delimiters to `"`.
fn rewrite(src: &str) -> String {
    let bytes = src.as_bytes();
    let mut out = String::with_capacity(src.len() + 16);
    let mut last_significant: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if src[i..].starts_with(GEMMA_QUOTE) {
            let body = i + GEMMA_QUOTE.len();
            let Some(rel) = src[body..].find(GEMMA_QUOTE) else {
                out.push_str(&src[i..]);
                break;
            };
            push_json_string(&mut out, &src[body..body + rel]);
            last_significant = Some(b'"');
            i = body + rel + GEMMA_QUOTE.len();
            continue;
        }
        match c {
            b'"' => {
                let end = string_end(src, i, Quotes::Relaxed).unwrap_or(bytes.len());
                out.push_str(&src[i..end]);
                last_significant = Some(b'"');
                i = end;
            }
            b'\'' | b'`' => {
                let end = string_end(src, i, Quotes::Relaxed).unwrap_or(bytes.len());
                let inner_end = if end > i + 1 && bytes[end - 1] == c {
                    end - 1
                } else {
                    end
                };
                push_json_string(&mut out, &unescape_quote(&src[i + 1..inner_end], c));
                last_significant = Some(b'"');
                i = end;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let mut end = i + 1;
                while end < bytes.len()
                    && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_')
                {
                    end += 1;
                }
                let word = &src[i..end];
                let mut after = end;
                while after < bytes.len() && bytes[after].is_ascii_whitespace() {
                    after += 1;
                }
                let key_position = matches!(last_significant, Some(b'{') | Some(b','));
                if key_position && bytes.get(after) == Some(&b':') {
                    out.push('"');
                    out.push_str(word);
                    out.push('"');
                } else {
                    out.push_str(word);
                }
                last_significant = Some(b'a');
                i = end;
            }
            _ => {
                // Copy one whole UTF-8 character.
                let ch_len = src[i..].chars().next().map_or(1, char::len_utf8);
                out.push_str(&src[i..i + ch_len]);
                if !c.is_ascii_whitespace() {
                    last_significant = Some(c);
                }
                i += ch_len;
            }
        }
    }
    out
}

/// Decodes the body of a single-quoted or backtick string: `\'` (or `` \` ``) becomes the bare
/// quote; JSON escapes are decoded; other backslashes are kept literally.
fn unescape_quote(body: &str, quote: u8) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        match chars.next() {
            Some(next) if next as u32 == u32::from(quote) => out.push(next),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('/') => out.push('/'),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

fn push_json_string(out: &mut String, content: &str) {
    // Serialising a &str cannot fail; fall back to an empty string literal regardless.
    match serde_json::to_string(content) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_fast_path() {
        assert_eq!(parse_relaxed(r#"{"a": 1}"#), Ok(json!({"a": 1})));
    }

    #[test]
    fn bare_keys_and_quote_styles() {
        let value = parse_relaxed(r#"{country: 'France', note: `say "hi"`, n: 2, ok: true}"#);
        assert_eq!(
            value,
            Ok(json!({"country": "France", "note": "say \"hi\"", "n": 2, "ok": true}))
        );
    }

    #[test]
    fn identifiers_inside_strings_are_untouched() {
        assert_eq!(
            parse_relaxed(r#"{path: "a: b, c: d"}"#),
            Ok(json!({"path": "a: b, c: d"}))
        );
    }

    #[test]
    fn gemma_quote_token() {
        assert_eq!(
            parse_relaxed(r#"{location:<|"|>Paris, "FR"<|"|>}"#),
            Ok(json!({"location": "Paris, \"FR\""}))
        );
    }

    #[test]
    fn trailing_comma_is_not_relaxed() {
        let err = parse_relaxed("{a: 1,}");
        assert!(err.is_err());
    }

    #[test]
    fn escaped_single_quote() {
        assert_eq!(parse_relaxed(r"{q: 'it\'s'}"), Ok(json!({"q": "it's"})));
    }
}
