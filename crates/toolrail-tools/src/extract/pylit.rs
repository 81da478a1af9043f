//! A safe reader for Python call arguments made of literals.
//!
//! Pythonic tool calls (`get_weather(city="Paris", days=3)`), Llama's built-in calls
//! (`brave_search.call(query="...")`) and `<function=name(k="v")>` carry Python argument lists.
//! This module reads them without evaluating anything: only literals are accepted — strings
//! (single, double, triple-quoted, `r`/`u` prefixes, implicit concatenation), integers (decimal,
//! hex, octal, binary, `_` separators), floats, `True`/`False`/`None`, lists, tuples (as JSON
//! arrays) and dicts (keys converted to strings as Python's `json.dumps` does). Names, calls,
//! operators (other than a sign on a number), sets, bytes, f-strings and complex numbers are
//! errors with the byte offset where they start.

use serde_json::{Map, Number, Value};

/// Nesting deeper than this is refused (protects the stack).
const MAX_DEPTH: usize = 128;

/// One argument of a call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PyArg {
    /// `value`, with the byte offset where it starts.
    Positional(usize, Value),
    /// `name=value`.
    Keyword(String, Value),
}

/// Why an argument list could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PyError {
    /// Byte offset in the parsed text.
    pub offset: usize,
    /// What was wrong.
    pub message: String,
}

/// Reads a comma-separated argument list (the text between the call's parentheses).
pub(crate) fn parse_call_args(src: &str) -> Result<Vec<PyArg>, PyError> {
    let mut parser = Parser { src, pos: 0 };
    let mut args = Vec::new();
    parser.skip_ws();
    while !parser.at_end() {
        let arg_start = parser.pos;
        let arg = match parser.keyword_name() {
            Some(name) => {
                if args
                    .iter()
                    .any(|a| matches!(a, PyArg::Keyword(n, _) if *n == name))
                {
                    return Err(
                        parser.error_at(arg_start, format!("keyword argument repeated: {name}"))
                    );
                }
                PyArg::Keyword(name, parser.value(0)?)
            }
            None => PyArg::Positional(arg_start, parser.value(0)?),
        };
        args.push(arg);
        parser.skip_ws();
        if parser.at_end() {
            break;
        }
        parser.expect(b',')?;
        parser.skip_ws();
    }
    Ok(args)
}

/// Reads exactly one literal (surrounding whitespace allowed).
#[cfg(test)]
pub(crate) fn parse_literal(src: &str) -> Result<Value, PyError> {
    let mut parser = Parser { src, pos: 0 };
    parser.skip_ws();
    let value = parser.value(0)?;
    parser.skip_ws();
    if !parser.at_end() {
        return Err(parser.error("unexpected text after the value".to_owned()));
    }
    Ok(value)
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn at_end(&self) -> bool {
        self.pos >= self.src.len()
    }

    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn error(&self, message: String) -> PyError {
        self.error_at(self.pos, message)
    }

    fn error_at(&self, offset: usize, message: String) -> PyError {
        PyError { offset, message }
    }

    fn skip_ws(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                // Explicit line continuation.
                Some(b'\\') if self.rest()[1..].starts_with('\n') => self.pos += 2,
                _ => return,
            }
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), PyError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected `{}`", byte as char)))
        }
    }

    /// If the input continues with `name =` (not `==`), consumes it and returns the name.
    fn keyword_name(&mut self) -> Option<String> {
        let len = identifier_len(self.rest());
        if len == 0 {
            return None;
        }
        let mut after = self.pos + len;
        let bytes = self.src.as_bytes();
        while matches!(bytes.get(after), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            after += 1;
        }
        if bytes.get(after) == Some(&b'=') && bytes.get(after + 1) != Some(&b'=') {
            let name = self.src[self.pos..self.pos + len].to_owned();
            self.pos = after + 1;
            self.skip_ws();
            Some(name)
        } else {
            None
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, PyError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nesting too deep".to_owned()));
        }
        let Some(c) = self.peek() else {
            return Err(self.error("expected a value".to_owned()));
        };
        match c {
            b'[' => self.sequence(b']', depth).map(Value::Array),
            b'(' => self.paren(depth),
            b'{' => self.dict(depth),
            b'"' | b'\'' => self.strings(),
            b'0'..=b'9' | b'.' | b'-' | b'+' => self.number(),
            _ => self.word(),
        }
    }

    fn word(&mut self) -> Result<Value, PyError> {
        let start = self.pos;
        let len = identifier_len(self.rest());
        if len == 0 {
            let ch = self.rest().chars().next().unwrap_or(' ');
            return Err(self.error(format!("unexpected `{ch}`: not a Python literal")));
        }
        let word = &self.src[start..start + len];
        let next = self.src.as_bytes().get(start + len).copied();
        if matches!(next, Some(b'"' | b'\'')) {
            return self.prefixed_string(word);
        }
        self.pos += len;
        match word {
            "True" => Ok(Value::Bool(true)),
            "False" => Ok(Value::Bool(false)),
            "None" => Ok(Value::Null),
            "true" | "false" | "null" => Err(self.error_at(
                start,
                format!(
                    "`{word}` is JSON, not Python (Python writes {})",
                    match word {
                        "true" => "True",
                        "false" => "False",
                        _ => "None",
                    }
                ),
            )),
            _ => {
                let what = if self.peek() == Some(b'(') {
                    "a call"
                } else {
                    "a name"
                };
                Err(self.error_at(
                    start,
                    format!("`{word}` is {what}, not a literal (arguments must be literals)"),
                ))
            }
        }
    }

    fn prefixed_string(&mut self, prefix: &str) -> Result<Value, PyError> {
        let lower = prefix.to_ascii_lowercase();
        match lower.as_str() {
            "r" | "u" => {
                let mut out = String::new();
                self.pos += prefix.len();
                self.one_string(lower == "r", &mut out)?;
                self.more_strings(out)
            }
            _ if lower.contains('b') => {
                Err(self.error("bytes literals are not supported".to_owned()))
            }
            _ if lower.contains('f') || lower.contains('t') => {
                Err(self.error("f-strings are expressions, not literals".to_owned()))
            }
            _ => Err(self.error(format!("unknown string prefix `{prefix}`"))),
        }
    }

    fn strings(&mut self) -> Result<Value, PyError> {
        let mut out = String::new();
        self.one_string(false, &mut out)?;
        self.more_strings(out)
    }

    /// Implicit concatenation: `"a" "b"` is `"ab"`.
    fn more_strings(&mut self, mut out: String) -> Result<Value, PyError> {
        loop {
            let save = self.pos;
            self.skip_ws();
            match self.peek() {
                Some(b'"' | b'\'') => self.one_string(false, &mut out)?,
                Some(b'r' | b'R' | b'u' | b'U')
                    if matches!(self.src.as_bytes().get(self.pos + 1), Some(b'"' | b'\'')) =>
                {
                    let raw = matches!(self.peek(), Some(b'r' | b'R'));
                    self.pos += 1;
                    self.one_string(raw, &mut out)?;
                }
                _ => {
                    self.pos = save;
                    return Ok(Value::String(out));
                }
            }
        }
    }

    fn one_string(&mut self, raw: bool, out: &mut String) -> Result<(), PyError> {
        let start = self.pos;
        let Some(quote) = self.peek() else {
            return Err(self.error("expected a string".to_owned()));
        };
        let triple = self.rest().as_bytes().starts_with(&[quote; 3]);
        let delim_len = if triple { 3 } else { 1 };
        self.pos += delim_len;
        loop {
            let Some(ch) = self.rest().chars().next() else {
                return Err(self.error_at(start, "unterminated string".to_owned()));
            };
            if ch as u32 == u32::from(quote) {
                if !triple || self.rest().as_bytes().starts_with(&[quote; 3]) {
                    self.pos += delim_len;
                    return Ok(());
                }
                out.push(ch);
                self.pos += 1;
                continue;
            }
            if ch == '\n' && !triple {
                return Err(self.error_at(start, "unterminated string (newline inside)".to_owned()));
            }
            if ch == '\\' {
                self.pos += 1;
                let Some(next) = self.rest().chars().next() else {
                    return Err(self.error_at(start, "unterminated string".to_owned()));
                };
                if raw {
                    out.push('\\');
                    out.push(next);
                    self.pos += next.len_utf8();
                } else {
                    self.escape(next, out)?;
                }
                continue;
            }
            out.push(ch);
            self.pos += ch.len_utf8();
        }
    }

    /// Decodes the escape whose first character (after the backslash) is `next`.
    fn escape(&mut self, next: char, out: &mut String) -> Result<(), PyError> {
        let escape_start = self.pos - 1;
        self.pos += next.len_utf8();
        let simple = match next {
            '\n' => Some(None),
            '\\' => Some(Some('\\')),
            '\'' => Some(Some('\'')),
            '"' => Some(Some('"')),
            'a' => Some(Some('\u{7}')),
            'b' => Some(Some('\u{8}')),
            'f' => Some(Some('\u{c}')),
            'n' => Some(Some('\n')),
            'r' => Some(Some('\r')),
            't' => Some(Some('\t')),
            'v' => Some(Some('\u{b}')),
            _ => None,
        };
        if let Some(decoded) = simple {
            if let Some(ch) = decoded {
                out.push(ch);
            }
            return Ok(());
        }
        let hex_digits = match next {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            '0'..='7' => {
                let mut value = next.to_digit(8).unwrap_or(0);
                let mut count = 1;
                while count < 3 {
                    match self.peek() {
                        Some(d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            self.pos += 1;
                            count += 1;
                        }
                        _ => break,
                    }
                }
                return push_code_point(out, value)
                    .ok_or_else(|| self.error_at(escape_start, "invalid octal escape".to_owned()));
            }
            'N' => {
                return Err(self.error_at(
                    escape_start,
                    "\\N{...} escapes are not supported".to_owned(),
                ));
            }
            other => {
                // Python keeps unknown escapes as they are.
                out.push('\\');
                out.push(other);
                return Ok(());
            }
        };
        let digits = self.rest().get(..hex_digits).unwrap_or("");
        let value = if digits.len() == hex_digits && digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            u32::from_str_radix(digits, 16).ok()
        } else {
            None
        };
        let Some(value) = value else {
            return Err(self.error_at(escape_start, format!("truncated \\{next} escape")));
        };
        self.pos += hex_digits;
        push_code_point(out, value).ok_or_else(|| {
            self.error_at(
                escape_start,
                format!("\\{next} escape is not a valid code point"),
            )
        })
    }

    fn number(&mut self) -> Result<Value, PyError> {
        let start = self.pos;
        let mut negative = false;
        if let Some(sign @ (b'-' | b'+')) = self.peek() {
            negative = sign == b'-';
            self.pos += 1;
            self.skip_ws();
        }
        let body_start = self.pos;
        let bytes = self.src.as_bytes();
        let mut end = body_start;
        while end < bytes.len()
            && (bytes[end].is_ascii_alphanumeric()
                || bytes[end] == b'_'
                || bytes[end] == b'.'
                || ((bytes[end] == b'-' || bytes[end] == b'+')
                    && end > body_start
                    && matches!(bytes[end - 1], b'e' | b'E')
                    && !self.src[body_start..end].starts_with("0x")
                    && !self.src[body_start..end].starts_with("0X")))
        {
            end += 1;
        }
        let body = &self.src[body_start..end];
        if body.is_empty() {
            return Err(self.error_at(start, "expected a number after the sign".to_owned()));
        }
        self.pos = end;
        let bad = |message: &str| PyError {
            offset: start,
            message: format!("`{}`: {message}", &self.src[start..end]),
        };
        if body.ends_with(['j', 'J']) {
            return Err(bad("complex numbers are not supported"));
        }
        if body.starts_with('_') || body.ends_with('_') || body.contains("__") {
            return Err(bad("misplaced `_` in number"));
        }
        let clean: String = body.chars().filter(|&c| c != '_').collect();
        let radix = match clean.get(..2).map(str::to_ascii_lowercase).as_deref() {
            Some("0x") => Some(16),
            Some("0o") => Some(8),
            Some("0b") => Some(2),
            _ => None,
        };
        if let Some(radix) = radix {
            let magnitude = u64::from_str_radix(&clean[2..], radix)
                .map_err(|_| bad("not a valid integer (or too large for JSON)"))?;
            return signed_integer(negative, magnitude)
                .ok_or_else(|| bad("integer too large for JSON"));
        }
        if clean.bytes().all(|b| b.is_ascii_digit()) {
            if clean.len() > 1 && clean.starts_with('0') && clean.bytes().any(|b| b != b'0') {
                return Err(bad("leading zeros are not allowed in Python integers"));
            }
            let magnitude: u64 = clean
                .parse()
                .map_err(|_| bad("integer too large for JSON"))?;
            return signed_integer(negative, magnitude)
                .ok_or_else(|| bad("integer too large for JSON"));
        }
        let valid_float = clean
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
            && clean.bytes().any(|b| b.is_ascii_digit());
        let parsed: Option<f64> = if valid_float {
            clean.parse().ok()
        } else {
            None
        };
        let Some(mut float) = parsed else {
            return Err(bad("not a number"));
        };
        if negative {
            float = -float;
        }
        Number::from_f64(float)
            .map(Value::Number)
            .ok_or_else(|| bad("float out of range for JSON"))
    }

    /// `[...]` or the inside of `(...)`: comma-separated values, trailing comma allowed.
    fn sequence(&mut self, close: u8, depth: usize) -> Result<Vec<Value>, PyError> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok(items);
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if c == close => {}
                _ => return Err(self.error(format!("expected `,` or `{}`", close as char))),
            }
        }
    }

    /// `()` is an empty tuple, `(x)` is `x`, `(x,)` and `(x, y)` are tuples.
    fn paren(&mut self, depth: usize) -> Result<Value, PyError> {
        let open = self.pos;
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b')') {
            self.pos += 1;
            return Ok(Value::Array(Vec::new()));
        }
        let first = self.value(depth + 1)?;
        self.skip_ws();
        match self.peek() {
            Some(b')') => {
                self.pos += 1;
                Ok(first)
            }
            Some(b',') => {
                self.pos = open;
                let mut items = self.sequence(b')', depth)?;
                if items.is_empty() {
                    items.push(first);
                }
                Ok(Value::Array(items))
            }
            _ => Err(self.error("expected `,` or `)`".to_owned())),
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Value, PyError> {
        self.pos += 1;
        let mut map = Map::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(b'}') {
                self.pos += 1;
                return Ok(Value::Object(map));
            }
            let key_start = self.pos;
            let key = self.value(depth + 1)?;
            let key = dict_key(&key).ok_or_else(|| {
                self.error_at(
                    key_start,
                    "dict keys must be strings, numbers, booleans or None".to_owned(),
                )
            })?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.error(
                    "expected `:` (sets are not supported; dicts need `key: value`)".to_owned(),
                ));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value(depth + 1)?;
            map.insert(key, value);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                _ => return Err(self.error("expected `,` or `}`".to_owned())),
            }
        }
    }
}

/// Length in bytes of the Python identifier (ASCII letters, digits, `_`) at the start of `s`.
pub(crate) fn identifier_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    match bytes.first() {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        _ => return 0,
    }
    bytes
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
        .count()
}

fn push_code_point(out: &mut String, value: u32) -> Option<()> {
    out.push(char::from_u32(value)?);
    Some(())
}

fn signed_integer(negative: bool, magnitude: u64) -> Option<Value> {
    if !negative {
        return Some(Value::Number(Number::from(magnitude)));
    }
    if magnitude == 0 {
        return Some(Value::Number(Number::from(0)));
    }
    let value = 0i64.checked_sub_unsigned(magnitude)?;
    Some(Value::Number(Number::from(value)))
}

/// Python's `json.dumps` key conversion.
fn dict_key(key: &Value) -> Option<String> {
    match key {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(true) => Some("true".to_owned()),
        Value::Bool(false) => Some("false".to_owned()),
        Value::Null => Some("null".to_owned()),
        Value::Array(_) | Value::Object(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kw(name: &str, value: Value) -> PyArg {
        PyArg::Keyword(name.to_owned(), value)
    }

    #[test]
    fn keywords_and_literals() {
        let args = parse_call_args(
            r#"city="Paris", days=3, ratio=-0.5, ok=True, none=None, tags=['a', "b",], t=(1,), d={'k': [1, 2], 3: False}"#,
        );
        assert_eq!(
            args,
            Ok(vec![
                kw("city", json!("Paris")),
                kw("days", json!(3)),
                kw("ratio", json!(-0.5)),
                kw("ok", json!(true)),
                kw("none", Value::Null),
                kw("tags", json!(["a", "b"])),
                kw("t", json!([1])),
                kw("d", json!({"k": [1, 2], "3": false})),
            ])
        );
    }

    #[test]
    fn strings() {
        assert_eq!(parse_literal(r#"'it\'s' " ok""#), Ok(json!("it's ok")));
        assert_eq!(parse_literal(r"r'\d+'"), Ok(json!("\\d+")));
        assert_eq!(parse_literal(r"'\x41\u00e9\n'"), Ok(json!("Aé\n")));
        assert_eq!(parse_literal("'''a\n'b'\n'''"), Ok(json!("a\n'b'\n")));
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_literal("1_000"), Ok(json!(1000)));
        assert_eq!(parse_literal("0x1F"), Ok(json!(31)));
        assert_eq!(parse_literal("-7"), Ok(json!(-7)));
        assert_eq!(parse_literal("1e3"), Ok(json!(1000.0)));
        assert_eq!(parse_literal(".5"), Ok(json!(0.5)));
        assert!(parse_literal("1j").is_err());
        assert!(parse_literal("012").is_err());
        assert!(parse_literal("99999999999999999999999").is_err());
    }

    #[test]
    fn refuses_expressions() {
        assert!(parse_call_args("x=os.system('rm')").is_err());
        assert!(parse_call_args("x=y").is_err());
        assert!(parse_call_args("x=1+2").is_err());
        assert!(parse_call_args("x=f'{y}'").is_err());
        assert!(parse_call_args("x={1, 2}").is_err());
        let err = parse_call_args("x=true");
        assert!(matches!(err, Err(e) if e.message.contains("True")));
    }

    #[test]
    fn positional_and_repeated() {
        assert_eq!(
            parse_call_args("'a', k=1"),
            Ok(vec![PyArg::Positional(0, json!("a")), kw("k", json!(1))])
        );
        assert!(parse_call_args("k=1, k=2").is_err());
        assert_eq!(parse_call_args("  "), Ok(vec![]));
    }

    #[test]
    fn deep_nesting_is_refused() {
        let deep = format!("x={}{}", "[".repeat(500), "]".repeat(500));
        assert!(parse_call_args(&deep).is_err());
    }
}
