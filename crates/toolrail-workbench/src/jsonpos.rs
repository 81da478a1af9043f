//! Where a JSON pointer points in a JSON text: a small scanner that walks the text (no values
//! built) so that errors the tool-set loader reports by pointer can be underlined in the editor.

use std::ops::Range;

/// The byte range of the value `pointer` (RFC 6901) designates in `text`, or `None` when the
/// text is not well-formed JSON up to there or the pointer leads nowhere. For a member of an
/// object the range covers `"key": value`.
pub fn locate(text: &str, pointer: &str) -> Option<Range<usize>> {
    let tokens: Vec<String> = toolrail_tools::JsonPointer::parse(pointer)
        .ok()?
        .segments()
        .collect();
    let mut s = Scanner {
        bytes: text.as_bytes(),
        at: 0,
    };
    s.ws();
    let mut start = s.at;
    for token in &tokens {
        match s.peek()? {
            b'{' => {
                s.at += 1;
                loop {
                    s.ws();
                    if s.peek()? == b'}' {
                        return None;
                    }
                    let key_start = s.at;
                    let key = s.string()?;
                    s.ws();
                    s.expect(b':')?;
                    s.ws();
                    if key == *token {
                        start = key_start;
                        break;
                    }
                    s.value()?;
                    s.ws();
                    if s.peek()? == b',' {
                        s.at += 1;
                    }
                }
            }
            b'[' => {
                let index: usize = token.parse().ok()?;
                s.at += 1;
                for _ in 0..index {
                    s.ws();
                    if s.peek()? == b']' {
                        return None;
                    }
                    s.value()?;
                    s.ws();
                    s.expect(b',')?;
                }
                s.ws();
                start = s.at;
            }
            _ => return None,
        }
    }
    s.value()?;
    Some(start..s.at)
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.at += 1)
    }

    /// A string; returns its decoded text (escapes resolved well enough for key comparison).
    fn string(&mut self) -> Option<String> {
        let start = self.at;
        self.expect(b'"')?;
        loop {
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    break;
                }
                b'\\' => self.at += 2,
                _ => self.at += 1,
            }
        }
        let raw = std::str::from_utf8(self.bytes.get(start..self.at)?).ok()?;
        serde_json::from_str(raw).ok()
    }

    /// Skips one value.
    fn value(&mut self) -> Option<()> {
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                self.at += 1;
                self.ws();
                if self.peek()? == close {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    self.ws();
                    if open == b'{' {
                        self.string()?;
                        self.ws();
                        self.expect(b':')?;
                    }
                    self.value()?;
                    self.ws();
                    match self.peek()? {
                        b',' => self.at += 1,
                        c if c == close => {
                            self.at += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            _ => {
                let start = self.at;
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || b"+-.".contains(&c))
                {
                    self.at += 1;
                }
                (self.at > start).then_some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::locate;

    #[test]
    fn finds_members_and_items() {
        let text = r#"{"tools": [ {"name": "a"}, {"name": "b", "x": [1, 2]} ]}"#;
        let at = |p: &str| locate(text, p).map(|r| &text[r]);
        assert_eq!(at(""), Some(text));
        assert_eq!(at("/tools/1"), Some(r#"{"name": "b", "x": [1, 2]}"#));
        assert_eq!(at("/tools/1/name"), Some(r#""name": "b""#));
        assert_eq!(at("/tools/1/x/1"), Some("2"));
        assert_eq!(at("/tools/2"), None);
        assert_eq!(at("/nope"), None);
    }

    #[test]
    fn escaped_keys() {
        let text = r#"{"a/b": {"m~n": true}}"#;
        assert_eq!(
            locate(text, "/a~1b/m~0n").map(|r| &text[r]),
            Some(r#""m~n": true"#)
        );
    }
}
